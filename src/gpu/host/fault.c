/*
 * fault.c — the host backend's device failure (TESS_HOST_FAULT_KERNEL, for tests): the kernel
 * of the chosen number faults, and from then on the device stays failed, as a CUDA context does
 * after an illegal access. Any thread (atomics).
 */
#include "host.h"

static _Atomic int fault_kernels, faulted;

int tess_gpu_host_fault_skip(int is_kernel, int is_record)
{
    int n = tess_gpu_host.params.host_fault_kernel;
    if (tess_likely(n == 0))
        return 0;
    if (!atomic_load_explicit(&faulted, memory_order_acquire) && is_kernel &&
        atomic_fetch_add_explicit(&fault_kernels, 1, memory_order_relaxed) + 1 == n) {
        tess_debug("host backend: kernel %d faults (TESS_HOST_FAULT_KERNEL)", n);
        atomic_store_explicit(&faulted, 1, memory_order_release);
    }
    return atomic_load_explicit(&faulted, memory_order_acquire) && !is_record;
}

tess_status_t tess_gpu_host_fault_check(const char *fn)
{
    if (tess_likely(!atomic_load_explicit(&faulted, memory_order_acquire)))
        return TESS_OK;
    return tess_error(TESS_ERR_GPU, "%s: the device failed: host kernel %d faulted "
                      "(TESS_HOST_FAULT_KERNEL)", fn, tess_gpu_host.params.host_fault_kernel);
}

void tess_gpu_host_fault_reset(void)
{
    atomic_store(&fault_kernels, 0);
    atomic_store(&faulted, 0);
}

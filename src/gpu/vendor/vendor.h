/*
 * vendor.h — the vendor layer under the CUDA and HIP backends. One source (gpu_vendor.c,
 * ipc_vendor.c) is compiled once per vendor: with TESS_GPU_VENDOR_CUDA against the CUDA
 * runtime API, with TESS_GPU_VENDOR_HIP against HIP's (src/gpu/Makefile.am). The vendor's header
 * (cuda/vendor_cuda.h, hip/vendor_hip.h) maps the runtime's names, as hipify'd code does:
 *
 *   VND(Malloc), VND(Stream_t), VND(Success)  cudaMalloc, cudaStream_t, cudaSuccess / hipMalloc …
 *   VND_STR(Malloc)                          "cudaMalloc" / "hipMalloc", for messages
 *   VND_FN(ptr_query)                        tess_cuda_ptr_query / tess_hip_ptr_query: the
 *                                            symbols of one vendor's build, so both link together
 *   VND_NAME, VND_TITLE, VND_KIND, VND_OPS   "cuda", "CUDA", TESS_GPU_CUDA, tess_gpu_cuda_ops
 *   VND_ERROR_NO_MEMORY, vndDeviceProp_t, vnd_host_malloc, VND_HOST_TRAMPOLINE …
 *                                            where the two runtimes spell a thing differently
 *
 * and declares what each vendor does its own way (its hooks, below), in a file of its own:
 * CUDA's driver functions, copy kernel and stream signals (cuda/driver_cuda.c, kcopy_cuda.c),
 * HIP's pointer queries (hip/alloc_hip.c). The shared source calls the hooks; they call
 * nothing of it but what this header defines (the allocation registry, alloc_vendor.c).
 *
 * Hooks every vendor header provides (a function or a static inline):
 *   tess_status_t VND_FN(driver_init)(void)      after the runtime saw a device (init)
 *   void          VND_FN(driver_fini)(void)      fini
 *   void          VND_FN(device_selected)(int d) set_device, d made current, before
 *                                                tess_vnd.device is set to it
 *   tess_status_t VND_FN(get_caps)(int d, tess_gpu_props_t *p)  p->ipc and p->wait_value
 *   void          VND_FN(mem_forget)(void *p)    before p is freed or unmapped (mem_free,
 *                                                host_free, ipc_mem_close)
 *   tess_status_t VND_FN(alloc_range)(void *p, uintptr_t *base_p, size_t *size_p)
 *                                                the device allocation that contains p
 *   tess_status_t VND_FN(ptr_query)(const void *p, tess_gpu_ptr_info_t *info_p)
 *                                                the op, for pointers the runtime's registry
 *                                                of its allocations does not hold (those two
 *                                                ask it first, alloc_vendor.c)
 * and VND_HAS_KCOPY: 1 where the vendor has its own copy and signal ops (CUDA), then
 * VND_FN(kcopy_memcpy_async), VND_FN(memcpy_signal_async), VND_FN(memcpy_batch_async),
 * VND_FN(signal_alloc), VND_FN(signal_free), VND_FN(stream_signal) and VND_KCOPY_SIGNAL_MAX.
 *
 * Threads: as thread-safe as the vendor's runtime. The state below is written by init,
 * set_device and fini only. The current device is per thread in both runtimes, so every op
 * first makes the process's device current on the calling thread (vnd_bind: one compare once
 * done), so PE threads need no set-up of their own. A thread that selects another device itself
 * afterwards must restore it before calling into the runtime.
 */
#ifndef TESS_GPU_VENDOR_H
#define TESS_GPU_VENDOR_H

#include "gpu/gpu.h"

#include <stdatomic.h>

#if defined(TESS_GPU_VENDOR_CUDA) + defined(TESS_GPU_VENDOR_HIP) != 1
#error "compile the vendor layer with exactly one of TESS_GPU_VENDOR_CUDA, TESS_GPU_VENDOR_HIP"
#endif

typedef struct tess_vnd_state {
    int              ndev;
    int              device; /* this process's device, -1 before set_device */
    _Atomic unsigned gen;    /* bumped by set_device, see vnd_bind */
} tess_vnd_state_t;

#if defined(TESS_GPU_VENDOR_CUDA)
#include "gpu/cuda/vendor_cuda.h"
#else
#include "gpu/hip/vendor_hip.h"
#endif

#define VND_STR(name) VND_PREFIX #name

/* The registry of the runtime's device allocations (alloc_vendor.c): reg_track after mem_alloc,
 * reg_forget before a free; reg_find fills *info_p (ptr_query's answer) for a pointer into one
 * of them and says whether it is. Its ids carry VND_REG_ID_TAG. Any thread. */
#define VND_REG_ID_TAG (UINT64_C(1) << 63)
tess_status_t VND_FN(reg_track)(void *ptr, size_t size);
void          VND_FN(reg_forget)(void *ptr);
bool          VND_FN(reg_find)(const void *ptr, tess_gpu_ptr_info_t *info_p);

/* The backend's state (gpu_vendor.c). */
#define tess_vnd VND_FN(state)
extern tess_vnd_state_t tess_vnd;

/* tess_vnd.gen when this thread last made tess_vnd.device current (0: never needed). */
extern _Thread_local unsigned VND_FN(bound_gen);

/* ---- errors: translated once, naming the call that failed ------------------------------- */

static inline tess_status_t vnd_error_at(VND(Error_t) e, const char *what, const char *file,
                                         int line)
{
    tess_status_t st = e == VND_ERROR_NO_MEMORY ? TESS_ERR_NO_MEMORY : TESS_ERR_GPU;
    return tess_error_at(st, file, line, "%s failed: %s (%s)", what, VND(GetErrorName)(e),
                         VND(GetErrorString)(e));
}
#define vnd_error(e, what) vnd_error_at((e), (what), __FILE__, __LINE__)

/* TESS_OK, TESS_INPROGRESS for "not ready", or the translated error. */
static inline tess_status_t vnd_poll_status(VND(Error_t) e, const char *what, const char *file,
                                            int line)
{
    if (e == VND(Success))
        return TESS_OK;
    if (e == VND(ErrorNotReady))
        return TESS_INPROGRESS;
    return vnd_error_at(e, what, file, line);
}

/* ---- the device current on this thread ---------------------------------------------------- */

static inline tess_status_t vnd_bind(void)
{
    unsigned gen = atomic_load_explicit(&tess_vnd.gen, memory_order_acquire);
    if (tess_likely(VND_FN(bound_gen) == gen) || tess_vnd.device < 0)
        return TESS_OK;
    VND(Error_t) e = VND(SetDevice)(tess_vnd.device);
    if (e != VND(Success))
        return vnd_error(e, VND_STR(SetDevice));
    VND_FN(bound_gen) = gen;
    return TESS_OK;
}

/* ---- IPC (ipc_vendor.c) ------------------------------------------------------------------- */

tess_status_t VND_FN(ipc_mem_export)(void *ptr, tess_gpu_ipc_handle_t *h_p);
tess_status_t VND_FN(ipc_mem_open)(const tess_gpu_ipc_handle_t *h, void **ptr_p);
tess_status_t VND_FN(ipc_mem_close)(void *ptr);
tess_status_t VND_FN(ipc_event_export)(tess_gpu_event_h ev, tess_gpu_ipc_handle_t *h_p);
tess_status_t VND_FN(ipc_event_open)(const tess_gpu_ipc_handle_t *h, tess_gpu_event_h *e_p);
tess_status_t VND_FN(ipc_event_close)(tess_gpu_event_h ev);

/* ---- memory (gpu_vendor.c) ---------------------------------------------------------------- */

/** A copy by the runtime (the copy engines): memcpy_async where the vendor has no copy kernel
 *  of its own, and the fallback of the one that has. */
tess_status_t VND_FN(memcpy_runtime)(void *dst, const void *src, size_t size,
                                     tess_gpu_stream_h s);

#endif /* TESS_GPU_VENDOR_H */

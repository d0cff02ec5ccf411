/*
 * alloc_hip.c — the HIP backend's allocation registry, and the pointer queries answered from it.
 *
 * HIP promises no stable per-allocation id (5.2 declares HIP_POINTER_ATTRIBUTE_BUFFER_ID, but
 * its hipPointerGetAttribute is marked beta), so the allocations made through mem_alloc are kept
 * here — sorted by address, ids from a counter that never repeats — and ptr_query answers from
 * it. Other device pointers (IPC mappings, memory the application allocated itself) are
 * answered by hipPointerGetAttributes with alloc_id 0, so nothing caches a mapping for them.
 * The hooks of the vendor layer for HIP (vendor/vendor.h).
 *
 * Threads: the registry has its own reader-writer lock.
 */
#include "gpu/vendor/vendor.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct hip_alloc {
    uintptr_t base;
    size_t    size;
    uint64_t  id;
    int       device;
} hip_alloc_t;

/* Process-wide and kept across fini/init, so ids are never reused. */
static struct {
    pthread_rwlock_t lock;
    hip_alloc_t     *items; /* sorted by base; allocations do not overlap */
    size_t           count, cap;
    uint64_t         last_id;
} hip_reg = {.lock = PTHREAD_RWLOCK_INITIALIZER};

/* Index of the first entry whose base is above addr (lock held). */
static size_t hip_reg_upper(uintptr_t addr)
{
    size_t lo = 0, hi = hip_reg.count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (hip_reg.items[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Register an allocation mem_alloc made on the process's device. */
tess_status_t tess_hip_mem_track(void *ptr, size_t size)
{
    uintptr_t     base = (uintptr_t)ptr;
    tess_status_t st   = TESS_OK;
    pthread_rwlock_wrlock(&hip_reg.lock);
    if (hip_reg.count == hip_reg.cap) {
        size_t       cap   = hip_reg.cap ? hip_reg.cap * 2 : 64;
        hip_alloc_t *items = realloc(hip_reg.items, cap * sizeof(*items));
        if (!items) {
            st = tess_error(TESS_ERR_NO_MEMORY, "cannot grow the HIP allocation registry to "
                            "%zu entries", cap);
            goto out_unlock;
        }
        hip_reg.items = items;
        hip_reg.cap   = cap;
    }
    size_t i = hip_reg_upper(base);
    memmove(&hip_reg.items[i + 1], &hip_reg.items[i],
            (hip_reg.count - i) * sizeof(hip_reg.items[0]));
    hip_reg.items[i] = (hip_alloc_t){
        .base = base, .size = size, .id = ++hip_reg.last_id, .device = tess_vnd.device};
    hip_reg.count++;
out_unlock:
    pthread_rwlock_unlock(&hip_reg.lock);
    return st;
}

/* Forget the allocation that starts at ptr, if it is registered. */
void tess_hip_mem_forget(void *ptr)
{
    uintptr_t base = (uintptr_t)ptr;
    pthread_rwlock_wrlock(&hip_reg.lock);
    size_t i = hip_reg_upper(base);
    if (i > 0 && hip_reg.items[i - 1].base == base) {
        memmove(&hip_reg.items[i - 1], &hip_reg.items[i],
                (hip_reg.count - i) * sizeof(hip_reg.items[0]));
        hip_reg.count--;
    }
    pthread_rwlock_unlock(&hip_reg.lock);
}

/* The registered allocation that contains addr, copied to *a_p. */
static bool hip_reg_find(uintptr_t addr, hip_alloc_t *a_p)
{
    bool found = false;
    pthread_rwlock_rdlock(&hip_reg.lock);
    size_t i = hip_reg_upper(addr);
    if (i > 0 && addr - hip_reg.items[i - 1].base < hip_reg.items[i - 1].size) {
        *a_p  = hip_reg.items[i - 1];
        found = true;
    }
    pthread_rwlock_unlock(&hip_reg.lock);
    return found;
}

tess_status_t tess_hip_alloc_range(void *ptr, uintptr_t *base_p, size_t *size_p)
{
    hip_alloc_t a;
    if (hip_reg_find((uintptr_t)ptr, &a)) {
        *base_p = a.base;
        *size_p = a.size;
        return TESS_OK;
    }
    hipDeviceptr_t base = NULL;
    hipError_t     e    = hipMemGetAddressRange(&base, size_p, ptr);
    if (e != hipSuccess)
        return vnd_error(e, "hipMemGetAddressRange");
    *base_p = (uintptr_t)base;
    return TESS_OK;
}

tess_status_t tess_hip_ptr_query(const void *ptr, tess_gpu_ptr_info_t *info_p)
{
    memset(info_p, 0, sizeof(*info_p));
    info_p->device = -1;
    if (!ptr)
        return TESS_OK;

    hip_alloc_t a;
    if (hip_reg_find((uintptr_t)ptr, &a)) {
        info_p->is_device = 1;
        info_p->device    = a.device;
        info_p->base      = (void *)a.base;
        info_p->size      = a.size;
        info_p->alloc_id  = a.id;
        return TESS_OK;
    }

    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    hipPointerAttribute_t pa;
    memset(&pa, 0, sizeof(pa));
    hipError_t e = hipPointerGetAttributes(&pa, ptr);
    if (e == hipErrorInvalidValue) {
        /* A pointer HIP does not know: host memory. Clear the error so it does not surface
         * in a later hipGetLastError of the application. */
        (void)hipGetLastError();
        return TESS_OK;
    }
    if (e != hipSuccess)
        return vnd_error(e, "hipPointerGetAttributes");
    if (pa.memoryType == hipMemoryTypeHost && !pa.isManaged)
        return TESS_OK; /* pinned or registered host memory */

    /* Not ours (an IPC mapping, or the application's own allocation): no stable id. */
    info_p->is_device = 1;
    info_p->device    = pa.device;
    hipDeviceptr_t base = NULL;
    size_t         size = 0;
    e = hipMemGetAddressRange(&base, &size, (hipDeviceptr_t)ptr);
    if (e == hipSuccess) {
        info_p->base = base;
        info_p->size = size;
    } else {
        (void)hipGetLastError(); /* range unknown (e.g. some IPC mappings): leave NULL/0 */
    }
    return TESS_OK;
}

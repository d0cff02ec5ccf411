/*
 * alloc_hip.c — the HIP backend's pointer queries for pointers the vendor layer's allocation
 * registry (vendor/alloc_vendor.c) does not hold, which it asks first. HIP promises no
 * stable per-allocation id (5.2 declares HIP_POINTER_ATTRIBUTE_BUFFER_ID, but its
 * hipPointerGetAttribute is marked beta), so other device pointers (IPC mappings, memory the
 * application allocated itself) are answered by hipPointerGetAttributes with alloc_id 0, and
 * nothing caches a mapping for them. The hooks of the vendor layer for HIP (vendor/vendor.h).
 *
 * Threads: any (the registry has its own lock).
 */
#include "gpu/vendor/vendor.h"

#include <stdlib.h>
#include <string.h>

tess_status_t tess_hip_alloc_range(void *ptr, uintptr_t *base_p, size_t *size_p)
{
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

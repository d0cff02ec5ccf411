/*
 * ipc_cuda.c — CUDA IPC of memory and events for the CUDA backend: what a
 * tess_gpu_ipc_handle_t holds (a versioned wire record around the CUDA handle), export, open
 * and close. Threads: as thread-safe as the CUDA runtime; no state of its own.
 */
#include "cuda_int.h"

#include <stdio.h>
#include <string.h>

#define CUDA_IPC_MAGIC   0x55435354u /* "TSCU" */
#define CUDA_IPC_VERSION 1

enum { CUDA_IPC_MEM = 1, CUDA_IPC_EVENT = 2 };

/* What a tess_gpu_ipc_handle_t holds for this backend (copied in and out with memcpy). */
typedef struct cuda_ipc_wire {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;
    int32_t  device; /* exporting device, for messages */
    uint32_t pad;
    uint64_t size;   /* allocation size (memory handles) */
    union {
        cudaIpcMemHandle_t   mem;
        cudaIpcEventHandle_t event;
    } h;
} cuda_ipc_wire_t;

_Static_assert(sizeof(cuda_ipc_wire_t) <= TESS_GPU_IPC_HANDLE_SIZE,
               "a CUDA IPC handle must fit in tess_gpu_ipc_handle_t");

/* ---- IPC --------------------------------------------------------------------------------- */

static tess_status_t cuda_ipc_unpack(const tess_gpu_ipc_handle_t *h, uint16_t kind,
                                     cuda_ipc_wire_t *w_p)
{
    memcpy(w_p, h->bytes, sizeof(*w_p));
    if (w_p->magic != CUDA_IPC_MAGIC || w_p->version != CUDA_IPC_VERSION || w_p->kind != kind)
        return tess_error(TESS_ERR_INVALID, "not a CUDA %s IPC handle of this version "
                          "(magic %#x, version %u, kind %u)",
                          kind == CUDA_IPC_MEM ? "memory" : "event", (unsigned)w_p->magic,
                          (unsigned)w_p->version, (unsigned)w_p->kind);
    return TESS_OK;
}

tess_status_t tess_cuda_ipc_mem_export(void *ptr, tess_gpu_ipc_handle_t *h_p)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    /* The other side maps the whole allocation and gets its start: ptr must be that start. */
    CUdeviceptr base = 0;
    size_t      size = 0;
    CUresult    r    = tess_cuda.mem_get_address_range(&base, &size, (CUdeviceptr)(uintptr_t)ptr);
    if (r != CUDA_SUCCESS)
        return cu_error(r, "cuMemGetAddressRange");
    if (base != (CUdeviceptr)(uintptr_t)ptr)
        return tess_error(TESS_ERR_INVALID, "ipc_mem_export: %p is %llu bytes into an "
                          "allocation; only its start can be exported", ptr,
                          (unsigned long long)((CUdeviceptr)(uintptr_t)ptr - base));

    cuda_ipc_wire_t w;
    memset(&w, 0, sizeof(w));
    w.magic   = CUDA_IPC_MAGIC;
    w.version = CUDA_IPC_VERSION;
    w.kind    = CUDA_IPC_MEM;
    w.device  = tess_cuda.device;
    w.size    = size;
    cudaError_t e = cudaIpcGetMemHandle(&w.h.mem, ptr);
    if (e != cudaSuccess)
        return cuda_error(e, "cudaIpcGetMemHandle");
    memset(h_p, 0, sizeof(*h_p));
    memcpy(h_p->bytes, &w, sizeof(w));
    return TESS_OK;
}

tess_status_t tess_cuda_ipc_mem_open(const tess_gpu_ipc_handle_t *h, void **ptr_p)
{
    cuda_ipc_wire_t w;
    tess_status_t   st = cuda_ipc_unpack(h, CUDA_IPC_MEM, &w);
    if (st != TESS_OK)
        return st;
    st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaError_t e = cudaIpcOpenMemHandle(ptr_p, w.h.mem, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        char what[96];
        snprintf(what, sizeof(what), "cudaIpcOpenMemHandle(%llu bytes of device %d)",
                 (unsigned long long)w.size, (int)w.device);
        return cuda_error(e, what);
    }
    return TESS_OK;
}

tess_status_t tess_cuda_ipc_mem_close(void *ptr)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    tess_cuda_ptr_cache_forget();
    cudaError_t e = cudaIpcCloseMemHandle(ptr);
    return e == cudaSuccess ? TESS_OK : cuda_error(e, "cudaIpcCloseMemHandle");
}

tess_status_t tess_cuda_ipc_event_export(tess_gpu_event_h ev, tess_gpu_ipc_handle_t *h_p)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cuda_ipc_wire_t w;
    memset(&w, 0, sizeof(w));
    w.magic   = CUDA_IPC_MAGIC;
    w.version = CUDA_IPC_VERSION;
    w.kind    = CUDA_IPC_EVENT;
    w.device  = tess_cuda.device;
    cudaError_t e = cudaIpcGetEventHandle(&w.h.event, (cudaEvent_t)ev);
    if (e != cudaSuccess)
        return cuda_error(e, "cudaIpcGetEventHandle");
    memset(h_p, 0, sizeof(*h_p));
    memcpy(h_p->bytes, &w, sizeof(w));
    return TESS_OK;
}

tess_status_t tess_cuda_ipc_event_open(const tess_gpu_ipc_handle_t *h, tess_gpu_event_h *e_p)
{
    cuda_ipc_wire_t w;
    tess_status_t   st = cuda_ipc_unpack(h, CUDA_IPC_EVENT, &w);
    if (st != TESS_OK)
        return st;
    st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaEvent_t ev;
    cudaError_t e = cudaIpcOpenEventHandle(&ev, w.h.event);
    if (e != cudaSuccess)
        return cuda_error(e, "cudaIpcOpenEventHandle");
    *e_p = (tess_gpu_event_h)ev;
    return TESS_OK;
}

tess_status_t tess_cuda_ipc_event_close(tess_gpu_event_h ev)
{
    tess_status_t st = cuda_bind();
    if (st != TESS_OK)
        return st;
    cudaError_t e = cudaEventDestroy((cudaEvent_t)ev);
    return e == cudaSuccess ? TESS_OK : cuda_error(e, "cudaEventDestroy (opened IPC event)");
}

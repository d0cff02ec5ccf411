/*
 * dcb_raw_cuda.c — the raw device operations of bench_devcomm's baselines, straight on the CUDA
 * runtime (built only with CUDA): cudaMemcpyAsync on a non-blocking stream, completion seen by
 * polling cudaEventQuery, CUDA IPC memory handles.
 */
#include "dcb.h"

#include <cuda_runtime_api.h>
#include <string.h>

_Static_assert(sizeof(cudaIpcMemHandle_t) <= DCB_IPC_HANDLE, "a CUDA IPC handle does not fit");

static void ck(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        dcb_die("raw %s: %s", what, cudaGetErrorString(e));
}

/* The raw calls run on the main thread, which the runtime bound to its device at init; bind
 * again in case it did so on another thread. */
static void bind(void)
{
    static int bound;
    if (!bound) {
        ck(cudaSetDevice(tess_gpu_device()), "cudaSetDevice");
        bound = 1;
    }
}

static void *c_stream_create(void)
{
    bind();
    cudaStream_t s;
    ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    return s;
}

static void c_stream_destroy(void *s) { cudaStreamDestroy((cudaStream_t)s); }

static void *c_event_create(void)
{
    bind();
    cudaEvent_t e;
    ck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
}

static void c_event_destroy(void *e) { cudaEventDestroy((cudaEvent_t)e); }

static void c_copy(void *dst, const void *src, size_t n, void *s)
{
    ck(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, (cudaStream_t)s), "cudaMemcpyAsync");
}

static void c_record_poll(void *e, void *s)
{
    ck(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s), "cudaEventRecord");
    cudaError_t r;
    while ((r = cudaEventQuery((cudaEvent_t)e)) == cudaErrorNotReady)
        ;
    ck(r, "cudaEventQuery");
}

static void c_ipc_export(void *ptr, void *handle)
{
    cudaIpcMemHandle_t h;
    ck(cudaIpcGetMemHandle(&h, ptr), "cudaIpcGetMemHandle");
    memset(handle, 0, DCB_IPC_HANDLE);
    memcpy(handle, &h, sizeof(h));
}

static void *c_ipc_open(const void *handle)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof(h));
    void *p;
    ck(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
    return p;
}

static void c_ipc_close(void *p) { cudaIpcCloseMemHandle(p); }

const dcb_dev_ops_t dcb_cuda_ops = {
    .name = "cuda", .stream_create = c_stream_create, .stream_destroy = c_stream_destroy,
    .event_create = c_event_create, .event_destroy = c_event_destroy, .copy = c_copy,
    .record_poll = c_record_poll, .ipc_export = c_ipc_export, .ipc_open = c_ipc_open,
    .ipc_close = c_ipc_close};

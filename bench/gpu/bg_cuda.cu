/*
 * bg_cuda.cu — the raw CUDA side of the GPU-layer benchmarks (see bg_cuda.h): an empty kernel
 * that occupies every SM, its launcher, and thin wrappers of the stream and event calls the
 * raw baselines make. Tessera's chares launch the same kernel through bg_cuda_launch_empty, so
 * both sides pay the same launch cost.
 */
#include "bg_cuda.h"

#include <cuda_runtime.h>

#include <stdio.h>

static int      bg_device = -1;
static unsigned bg_grid   = 1, bg_block = 32;

static thread_local int  bg_bound = -1;
static thread_local char bg_err[256];

static int fail(cudaError_t e, const char *what)
{
    snprintf(bg_err, sizeof(bg_err), "%s: %s (%s)", what, cudaGetErrorName(e),
             cudaGetErrorString(e));
    return -1;
}

__global__ void bg_empty_kernel(void) {}

extern "C" int bg_cuda_available(void) { return 1; }

extern "C" const char *bg_cuda_error(void) { return bg_err; }

extern "C" int bg_cuda_bind(void)
{
    if (bg_bound == bg_device)
        return 0;
    cudaError_t e = cudaSetDevice(bg_device);
    if (e != cudaSuccess)
        return fail(e, "cudaSetDevice");
    bg_bound = bg_device;
    return 0;
}

extern "C" int bg_cuda_init(int device, int block, int *sms_p)
{
    bg_device = device;
    if (bg_cuda_bind())
        return -1;
    int sms = 0;
    cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e != cudaSuccess)
        return fail(e, "cudaDeviceGetAttribute(MultiProcessorCount)");
    bg_grid  = sms > 0 ? (unsigned)sms : 1u;
    bg_block = block > 0 ? (unsigned)block : 32u;
    *sms_p   = sms;
    /* Load the module and warm the launch path (lazy loading makes the first launch slow). */
    bg_empty_kernel<<<bg_grid, bg_block>>>();
    e = cudaGetLastError();
    if (e != cudaSuccess)
        return fail(e, "launch of the empty kernel");
    e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return fail(e, "cudaDeviceSynchronize");
    return 0;
}

extern "C" int bg_cuda_stream_create(void **stream_p)
{
    if (bg_cuda_bind())
        return -1;
    cudaStream_t s;
    cudaError_t  e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return fail(e, "cudaStreamCreateWithFlags");
    *stream_p = (void *)s;
    return 0;
}

extern "C" void bg_cuda_stream_destroy(void *stream)
{
    if (stream && !bg_cuda_bind())
        (void)cudaStreamDestroy((cudaStream_t)stream);
}

extern "C" int bg_cuda_event_create(void **event_p)
{
    if (bg_cuda_bind())
        return -1;
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess)
        return fail(e, "cudaEventCreateWithFlags");
    *event_p = (void *)ev;
    return 0;
}

extern "C" void bg_cuda_event_destroy(void *event)
{
    if (event && !bg_cuda_bind())
        (void)cudaEventDestroy((cudaEvent_t)event);
}

extern "C" int bg_cuda_launch_empty(void *stream)
{
    if (bg_cuda_bind())
        return -1;
    bg_empty_kernel<<<bg_grid, bg_block, 0, (cudaStream_t)stream>>>();
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : fail(e, "launch of the empty kernel");
}

extern "C" int bg_cuda_record(void *event, void *stream)
{
    cudaError_t e = cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream);
    return e == cudaSuccess ? 0 : fail(e, "cudaEventRecord");
}

extern "C" int bg_cuda_query(void *event)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaSuccess)
        return 1;
    if (e == cudaErrorNotReady)
        return 0;
    return fail(e, "cudaEventQuery");
}

extern "C" int bg_cuda_stream_sync(void *stream)
{
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    return e == cudaSuccess ? 0 : fail(e, "cudaStreamSynchronize");
}

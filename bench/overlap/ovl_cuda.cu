/*
 * ovl_cuda.cu — the CUDA side of bench_overlap (see ovl.h): K kernels on K streams, each held
 * back by cuStreamWaitValue32 on one host-mapped flag, released at once by a store from the
 * host. The driver function comes through cudaGetDriverEntryPointByVersion (as the runtime's
 * CUDA backend does), so nothing links libcuda.
 */
#include "ovl.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OVL_BLOCK         256
#define OVL_ENTRY_VERSION 12000     /* PFN_cuStreamWaitValue32_v11070 is its newest form */
#define OVL_TIMEOUT_NS    10000000000.0

static struct {
    int                            nstreams;
    cudaStream_t                  *streams;
    cudaEvent_t                    start, *end;
    uint32_t                      *flag;  /* host-mapped */
    CUdeviceptr                    dflag; /* its device address */
    uint32_t                       value; /* the last value released */
    float                         *out;
    unsigned                      *bad;
    int64_t                        max_total;
    PFN_cuStreamWaitValue32_v11070 wait32;
    char                           name[320];
    int                            connections;
} o;

static int fail(char *err, size_t len, cudaError_t e, const char *what)
{
    snprintf(err, len, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    return -1;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* A small fixed amount of arithmetic per thread; every step is an explicit fmaf, so the check
 * kernel recomputes exactly the same value. */
__device__ __forceinline__ float ovl_work(int64_t i, int iters)
{
    float x = fmaf((float)(i & 1023), 1e-5f, 0.99f), y = 0.5f;
    for (int k = 0; k < iters; k++) {
        y = fmaf(y, x, 0.25f);
        x = fmaf(x, 0.9999f, 1e-5f);
    }
    return y;
}

__global__ void ovl_kernel(float *out, int64_t base, int64_t n, int iters)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[base + i] = ovl_work(base + i, iters);
}

__global__ void ovl_check(const float *out, int64_t n, int iters, unsigned *bad)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)blockDim.x * gridDim.x)
        if (!(out[i] == ovl_work(i, iters)))
            atomicAdd(bad, 1u);
}

extern "C" const char *ovl_device_name(void) { return o.name; }
extern "C" int         ovl_connections(void) { return o.connections; }

extern "C" int ovl_init(int64_t max_total, int max_kernels, char *err, size_t len)
{
    int         ndev = 0;
    cudaError_t e    = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1) {
        snprintf(err, len, "no CUDA device (%s)", cudaGetErrorName(e));
        (void)cudaGetLastError();
        return OVL_SKIP;
    }
    if ((e = cudaSetDevice(0)) != cudaSuccess)
        return fail(err, len, e, "cudaSetDevice");
    struct cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, 0)) != cudaSuccess)
        return fail(err, len, e, "cudaGetDeviceProperties");
    snprintf(o.name, sizeof(o.name), "%s (%d SMs)", p.name, p.multiProcessorCount);
    const char *mc = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    o.connections  = mc && atoi(mc) > 0 ? atoi(mc) : 8;

    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    void *fn = NULL;
    e = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, OVL_ENTRY_VERSION,
                                         cudaEnableDefault, &found);
    if (e != cudaSuccess)
        return fail(err, len, e, "cudaGetDriverEntryPointByVersion(cuStreamWaitValue32)");
    if (found != cudaDriverEntryPointSuccess || !fn) {
        snprintf(err, len, "the driver has no cuStreamWaitValue32 (query result %d)", (int)found);
        return -1;
    }
    o.wait32 = (PFN_cuStreamWaitValue32_v11070)fn;

    void *h = NULL, *d = NULL;
    if ((e = cudaHostAlloc(&h, 64, cudaHostAllocMapped)) != cudaSuccess)
        return fail(err, len, e, "cudaHostAlloc(mapped)");
    o.flag = (uint32_t *)h;
    __atomic_store_n(o.flag, 0u, __ATOMIC_SEQ_CST);
    o.value = 0;
    if ((e = cudaHostGetDevicePointer(&d, h, 0)) != cudaSuccess)
        return fail(err, len, e, "cudaHostGetDevicePointer");
    o.dflag = (CUdeviceptr)(uintptr_t)d;

    o.nstreams = max_kernels;
    o.streams  = (cudaStream_t *)calloc((size_t)max_kernels, sizeof(cudaStream_t));
    o.end      = (cudaEvent_t *)calloc((size_t)max_kernels, sizeof(cudaEvent_t));
    if (!o.streams || !o.end) {
        snprintf(err, len, "out of memory");
        return -1;
    }
    for (int k = 0; k < max_kernels; k++) {
        if ((e = cudaStreamCreateWithFlags(&o.streams[k], cudaStreamNonBlocking)) != cudaSuccess)
            return fail(err, len, e, "cudaStreamCreateWithFlags");
        if ((e = cudaEventCreate(&o.end[k])) != cudaSuccess)
            return fail(err, len, e, "cudaEventCreate");
    }
    if ((e = cudaEventCreate(&o.start)) != cudaSuccess)
        return fail(err, len, e, "cudaEventCreate");
    o.max_total = max_total;
    if ((e = cudaMalloc((void **)&o.out, (size_t)max_total * sizeof(float))) != cudaSuccess)
        return fail(err, len, e, "cudaMalloc(out)");
    if ((e = cudaMalloc((void **)&o.bad, sizeof(unsigned))) != cudaSuccess)
        return fail(err, len, e, "cudaMalloc(bad)");
    /* Load the module, warm up. */
    ovl_kernel<<<1, OVL_BLOCK, 0, o.streams[0]>>>(o.out, 0, OVL_BLOCK, 1);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return fail(err, len, e, "launch");
    if ((e = cudaDeviceSynchronize()) != cudaSuccess)
        return fail(err, len, e, "cudaDeviceSynchronize");
    return 0;
}

/* Wait for ev by polling, at most until deadline_ns. 0, or -1 on error or timeout. */
static int wait_event(cudaEvent_t ev, double deadline_ns, char *err, size_t len)
{
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return fail(err, len, e, "cudaEventQuery");
        if (now_ns() > deadline_ns) {
            snprintf(err, len, "kernels still running %.0f s after the flag was released",
                     OVL_TIMEOUT_NS * 1e-9);
            return -1;
        }
    }
}

/* Enqueue on each of `kernels` streams: a wait for the flag to reach v, (on stream 0) the
 * start event, the kernel, its end event. On failure the flag is released, so that nothing
 * stays blocked, and -1 returned. */
static int enqueue_held(int kernels, int64_t per, unsigned grid, int iters, uint32_t v,
                        char *err, size_t len)
{
    for (int k = 0; k < kernels; k++) {
        cudaStream_t s = o.streams[k];
        cudaError_t  e;
        CUresult     r = o.wait32((CUstream)s, o.dflag, v, CU_STREAM_WAIT_VALUE_GEQ);
        if (r != CUDA_SUCCESS) {
            snprintf(err, len, "cuStreamWaitValue32 failed: CUresult %d", (int)r);
            goto err_release;
        }
        if (k == 0 && (e = cudaEventRecord(o.start, s)) != cudaSuccess) {
            fail(err, len, e, "cudaEventRecord(start)");
            goto err_release;
        }
        ovl_kernel<<<grid, OVL_BLOCK, 0, s>>>(o.out, k * per, per, iters);
        if ((e = cudaGetLastError()) != cudaSuccess) {
            fail(err, len, e, "launch");
            goto err_release;
        }
        if ((e = cudaEventRecord(o.end[k], s)) != cudaSuccess) {
            fail(err, len, e, "cudaEventRecord(end)");
            goto err_release;
        }
    }
    return 0;

err_release:
    __atomic_store_n(o.flag, v, __ATOMIC_SEQ_CST);
    cudaDeviceSynchronize();
    return -1;
}

extern "C" int ovl_trial(int64_t total, int kernels, int iters, int hold_us, int verify,
                         double *gpu_us, double *host_us, char *err, size_t len)
{
    if (kernels < 1 || kernels > o.nstreams || total > o.max_total || total % kernels) {
        snprintf(err, len, "bad point: %lld threads in %d kernels", (long long)total, kernels);
        return -1;
    }
    int64_t     per  = total / kernels;
    unsigned    grid = (unsigned)((per + OVL_BLOCK - 1) / OVL_BLOCK);
    cudaError_t e;
    if (verify) {
        /* NaN everywhere: a thread that did not run fails the check. */
        if ((e = cudaMemsetAsync(o.out, 0xff, (size_t)total * sizeof(float), o.streams[0])) !=
                cudaSuccess ||
            (e = cudaMemsetAsync(o.bad, 0, sizeof(unsigned), o.streams[0])) != cudaSuccess ||
            (e = cudaStreamSynchronize(o.streams[0])) != cudaSuccess)
            return fail(err, len, e, "reset before the check");
    }

    uint32_t v = ++o.value;
    if (enqueue_held(kernels, per, grid, iters, v, err, len))
        return -1;
    /* Let every launch reach the device, then check that the flag holds them. */
    usleep((useconds_t)hold_us);
    if (cudaEventQuery(o.start) != cudaErrorNotReady ||
        cudaEventQuery(o.end[kernels - 1]) != cudaErrorNotReady) {
        snprintf(err, len, "work ran before the flag was released: cuStreamWaitValue32 on the "
                           "host-mapped flag did not hold the streams");
        __atomic_store_n(o.flag, v, __ATOMIC_SEQ_CST);
        cudaDeviceSynchronize();
        return -1;
    }

    double t0 = now_ns();
    __atomic_store_n(o.flag, v, __ATOMIC_SEQ_CST);
    for (int k = 0; k < kernels; k++)
        if (wait_event(o.end[k], t0 + OVL_TIMEOUT_NS, err, len))
            return -1;
    double t1 = now_ns();

    float ms = 0, worst = 0;
    for (int k = 0; k < kernels; k++) {
        if ((e = cudaEventElapsedTime(&ms, o.start, o.end[k])) != cudaSuccess)
            return fail(err, len, e, "cudaEventElapsedTime");
        worst = ms > worst ? ms : worst;
    }
    *gpu_us  = worst * 1e3;
    *host_us = (t1 - t0) * 1e-3;

    if (verify) {
        unsigned bad = 0;
        ovl_check<<<1024, OVL_BLOCK, 0, o.streams[0]>>>(o.out, total, iters, o.bad);
        if ((e = cudaGetLastError()) != cudaSuccess ||
            (e = cudaMemcpyAsync(&bad, o.bad, sizeof(bad), cudaMemcpyDeviceToHost,
                                 o.streams[0])) != cudaSuccess ||
            (e = cudaStreamSynchronize(o.streams[0])) != cudaSuccess)
            return fail(err, len, e, "check");
        if (bad) {
            snprintf(err, len, "%u of %lld results wrong after %d kernels", bad,
                     (long long)total, kernels);
            return -1;
        }
    }
    return 0;
}

extern "C" void ovl_fini(void)
{
    cudaDeviceSynchronize();
    for (int k = 0; k < o.nstreams; k++) {
        cudaEventDestroy(o.end[k]);
        cudaStreamDestroy(o.streams[k]);
    }
    cudaEventDestroy(o.start);
    cudaFree(o.out);
    cudaFree(o.bad);
    cudaFreeHost(o.flag);
    free(o.streams);
    free(o.end);
    memset(&o, 0, sizeof(o));
}

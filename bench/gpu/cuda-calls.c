/*
 * cuda-calls.c — a diagnostic LD_PRELOAD library: counts the CUDA runtime calls a program makes
 * and the host time they take, and prints a table at exit (to stderr, one per process).
 *
 *   gcc -O2 -shared -fPIC -I/usr/local/cuda/include bench/gpu/cuda-calls.c \
 *       -o build-cuda/libcudacalls.so -ldl
 *   LD_PRELOAD=$PWD/build-cuda/libcudacalls.so mpirun ... (or -x LD_PRELOAD)
 *
 * Only for programs linked against the shared libcudart (Tessera's CUDA build is). It answers
 * "where does a chare step's host time go" for the calls that dominate it: launches, copies,
 * event records and queries, stream waits. CUDA_CALLS_QUIET=1 prints nothing (a dry run).
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum {
    C_LAUNCH, C_MEMCPY, C_WAIT, C_RECORD, C_EQUERY, C_SQUERY, C_HOSTFN, C_ESYNC, C_SSYNC, C_N
};
static const char *names[C_N] = {
    "cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamWaitEvent", "cudaEventRecord",
    "cudaEventQuery", "cudaStreamQuery", "cudaLaunchHostFunc", "cudaEventSynchronize",
    "cudaStreamSynchronize",
};
static _Atomic uint64_t ncalls[C_N], nanos[C_N];

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *real(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "cuda-calls: %s not found\n", name);
        abort();
    }
    return f;
}

#define TIMED(k, call)                                                                       \
    do {                                                                                     \
        uint64_t t0_ = now_ns();                                                             \
        cudaError_t e_ = call;                                                               \
        atomic_fetch_add_explicit(&nanos[k], now_ns() - t0_, memory_order_relaxed);          \
        atomic_fetch_add_explicit(&ncalls[k], 1, memory_order_relaxed);                      \
        return e_;                                                                           \
    } while (0)

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                             cudaStream_t s)
{
    static cudaError_t (*f)(const void *, dim3, dim3, void **, size_t, cudaStream_t);
    if (!f)
        f = real("cudaLaunchKernel");
    TIMED(C_LAUNCH, f(func, grid, block, args, shmem, s));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
    static cudaError_t (*f)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
    if (!f)
        f = real("cudaMemcpyAsync");
    TIMED(C_MEMCPY, f(dst, src, n, kind, s));
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    static cudaError_t (*f)(cudaStream_t, cudaEvent_t, unsigned);
    if (!f)
        f = real("cudaStreamWaitEvent");
    TIMED(C_WAIT, f(s, e, flags));
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    static cudaError_t (*f)(cudaEvent_t, cudaStream_t);
    if (!f)
        f = real("cudaEventRecord");
    TIMED(C_RECORD, f(e, s));
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    static cudaError_t (*f)(cudaEvent_t);
    if (!f)
        f = real("cudaEventQuery");
    TIMED(C_EQUERY, f(e));
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    static cudaError_t (*f)(cudaStream_t);
    if (!f)
        f = real("cudaStreamQuery");
    TIMED(C_SQUERY, f(s));
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *arg)
{
    static cudaError_t (*f)(cudaStream_t, cudaHostFn_t, void *);
    if (!f)
        f = real("cudaLaunchHostFunc");
    TIMED(C_HOSTFN, f(s, fn, arg));
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    static cudaError_t (*f)(cudaEvent_t);
    if (!f)
        f = real("cudaEventSynchronize");
    TIMED(C_ESYNC, f(e));
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    static cudaError_t (*f)(cudaStream_t);
    if (!f)
        f = real("cudaStreamSynchronize");
    TIMED(C_SSYNC, f(s));
}

__attribute__((destructor)) static void report(void)
{
    const char *q = getenv("CUDA_CALLS_QUIET");
    if (q && *q == '1')
        return;
    fprintf(stderr, "cuda-calls (pid %d): %-22s %12s %12s %9s\n", (int)getpid(), "call",
            "calls", "total ms", "mean us");
    for (int k = 0; k < C_N; k++) {
        uint64_t n = atomic_load(&ncalls[k]), t = atomic_load(&nanos[k]);
        if (n)
            fprintf(stderr, "cuda-calls (pid %d): %-22s %12llu %12.3f %9.3f\n", (int)getpid(),
                    names[k], (unsigned long long)n, (double)t * 1e-6, (double)t * 1e-3 / n);
    }
}

/*
 * fg_cuda.cu — bench_finegrain's CUDA side (built only with CUDA): the chare-step kernel's
 * launcher, and the raw baseline's operations as plain CUDA runtime calls.
 */
#include "fg.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>

static void ck(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_finegrain: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

/* --delay-us: every block waits that long on the global timer before it reads or writes, so a
 * copy not ordered after the kernel reads the previous step's words. */
static __device__ void fg_delay(int32_t us)
{
    if (us <= 0)
        return;
    if (threadIdx.x == 0) {
        unsigned long long t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        while (t - t0 < 1000ull * (unsigned long long)us);
    }
    __syncthreads();
}

static __global__ void fg_step_kernel(fg_args_t a)
{
    fg_delay(a.delay_us);
    int bad = 0;
    TESS_KERNEL_LOOP(e, (int64_t)a.m * a.words)
        bad += fg_point(&a, e);
    if (bad)
        atomicAdd(a.err, bad);
}

extern "C" void fg_step_cuda(void *stream, const fg_args_t *a)
{
    int64_t  n      = (int64_t)a->m * a->words;
    unsigned blocks = tess_kernel_blocks(n, 256, 132 * 4);
    fg_step_kernel<<<blocks, 256, 0, (cudaStream_t)stream>>>(*a);
    ck(cudaGetLastError(), "the step kernel");
}

static __global__ void fg_add_kernel(int32_t *p, int32_t n)
{
    TESS_KERNEL_LOOP(i, (int64_t)n)
        p[i]++;
}

extern "C" void fg_add_cuda(void *stream, int32_t *p, int32_t n)
{
    fg_add_kernel<<<1, 256, 0, (cudaStream_t)stream>>>(p, n);
    ck(cudaGetLastError(), "the add kernel");
}

static void *c_stream_create(void)
{
    cudaStream_t s;
    ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
}
static void c_stream_destroy(void *s) { cudaStreamDestroy((cudaStream_t)s); }
static void c_stream_sync(void *s) { ck(cudaStreamSynchronize((cudaStream_t)s), "sync"); }
static void *c_event_create(void)
{
    cudaEvent_t e;
    ck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    return e;
}
static void c_event_destroy(void *e) { cudaEventDestroy((cudaEvent_t)e); }
static void c_event_record(void *e, void *s)
{
    ck(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s), "cudaEventRecord");
}
static void c_stream_wait(void *s, void *e)
{
    ck(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0), "cudaStreamWaitEvent");
}
static void c_copy(void *dst, const void *src, size_t n, void *s)
{
    ck(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, (cudaStream_t)s),
       "cudaMemcpyAsync");
}

static const fg_raw_ops_t cuda_ops = {
    "CUDA", c_stream_create, c_stream_destroy, c_stream_sync, c_event_create, c_event_destroy,
    c_event_record, c_stream_wait, c_copy, fg_step_cuda,
};

extern "C" const fg_raw_ops_t *fg_raw_cuda_ops(void) { return &cuda_ops; }

/* ---- --calls: what each CUDA call of a chare step costs the host here ----------------------- */

static __global__ void fg_empty_kernel(int *x)
{
    if (x && threadIdx.x == 1u << 30)
        *x = 0;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* One chare step (4 copies of 4 KiB from a to b, then the step kernel) captured on stream s
 * and instantiated: the graph the benchmarks replay; with nw > 0, waits for the events ev[]
 * recorded outside it in front (event-wait nodes: each launch waits for the record current
 * at that launch), as a graph that folds a chare's waits for its senders into its step would. */
static cudaGraphExec_t capture_step(cudaStream_t s, const cudaEvent_t *ev, int nw,
                                    const int32_t *a, int32_t *b, const fg_args_t *args)
{
    cudaGraph_t     g;
    cudaGraphExec_t ge;
    ck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
    for (int w = 0; w < nw; w++)
        ck(cudaStreamWaitEvent(s, ev[w], cudaEventWaitExternal), "captured wait");
    for (int m = 0; m < 4; m++)
        ck(cudaMemcpyAsync(b + 1024 * m, a + 1024 * m, 4096, cudaMemcpyDeviceToDevice, s),
           "captured copy");
    fg_step_cuda(s, args);
    ck(cudaStreamEndCapture(s, &g), "capture");
    ck(cudaGraphInstantiate(&ge, g, 0), "cudaGraphInstantiate");
    ck(cudaGraphDestroy(g), "cudaGraphDestroy");
    return ge;
}

/* Each measured call n times round-robin over 8 streams (synchronised every 256 calls, outside
 * the clock, so no queue fills up); µs per call. */
extern "C" void fg_cuda_calls(void)
{
    enum { NS = 8, N = 8192, CHUNK = 256 };
    cudaStream_t s[NS];
    cudaEvent_t  ev[NS];
    for (int i = 0; i < NS; i++) {
        ck(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking), "stream");
        ck(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming), "event");
    }
    int32_t *a, *b, *err;
    ck(cudaMalloc(&a, 1 << 20), "cudaMalloc");
    ck(cudaMalloc(&b, 1 << 20), "cudaMalloc");
    ck(cudaMalloc(&err, 4), "cudaMalloc");
    CUpointer_attribute attr[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    /* The driver call as the runtime makes it: through the entry point, no -lcuda. */
    typedef CUresult (*get_attrs_t)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found;
    ck(cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &fn, 7000, cudaEnableDefault,
                                        &found), "cudaGetDriverEntryPointByVersion");
    get_attrs_t get_attrs = (get_attrs_t)fn;
    typedef CUresult (*query_t)(void *);
    void *sq = NULL, *eq = NULL;
    ck(cudaGetDriverEntryPointByVersion("cuStreamQuery", &sq, 7000, cudaEnableDefault, &found),
       "cudaGetDriverEntryPointByVersion");
    ck(cudaGetDriverEntryPointByVersion("cuEventQuery", &eq, 7000, cudaEnableDefault, &found),
       "cudaGetDriverEntryPointByVersion");
    query_t cu_stream_query = (query_t)sq, cu_event_query = (query_t)eq;
    fg_args_t args = {a, b, err, 0, 0, 4, 1024, 0, 0, 8, 0, 0, NULL};
    const char *names[] = {"launch (1 block, empty)", "launch (step kernel, M 4 x 4 KiB)",
                           "cudaMemcpyAsync D2D 4 KiB", "cudaEventRecord",
                           "cudaStreamWaitEvent", "cudaEventQuery (done)",
                           "cudaStreamQuery (idle)", "cuStreamQuery (idle)",
                           "cuEventQuery (done)", "cuPointerGetAttributes (2)",
                           "chare step as calls (4 copies + step)",
                           "chare step as a graph replay (same)",
                           "4 records + the step graph",
                           "4 records + 4 waits + the step graph",
                           "4 records + the graph with 4 wait nodes"};
    /* One chare step (M 4 copies of 4 KiB and the step kernel) captured once per stream as a
     * CUDA graph: the host cost of replaying it against issuing its calls one by one. */
    cudaGraphExec_t ge[NS], gw[NS];
    /* The last three: a step whose stream first waits for 4 other streams' latest work (a
     * chare's senders), the waits as calls or as event-wait nodes inside its graph. */
    enum { NW = 4 };
    cudaEvent_t wev[NS][NW];
    for (int i = 0; i < NS; i++) {
        ge[i] = capture_step(s[i], NULL, 0, a, b, &args);
        for (int w = 0; w < NW; w++) {
            ck(cudaEventCreateWithFlags(&wev[i][w], cudaEventDisableTiming), "event");
            ck(cudaEventRecord(wev[i][w], s[(i + 1 + w) % NS]), "record"); /* before capture */
        }
        gw[i] = capture_step(s[i], wev[i], NW, a, b, &args);
    }
    for (int what = 0; what < 15; what++) {
        double t = 0;
        for (int done = 0; done < N; done += CHUNK) {
            for (int i = 0; i < NS; i++)
                ck(cudaStreamSynchronize(s[i]), "sync");
            double t0 = now_us();
            for (int k = 0; k < CHUNK; k++) {
                cudaStream_t st = s[k % NS];
                switch (what) {
                case 0: fg_empty_kernel<<<1, 32, 0, st>>>(err); break;
                case 1: fg_step_cuda(st, &args); break;
                case 2: cudaMemcpyAsync(b + k, a + k, 4096, cudaMemcpyDeviceToDevice, st); break;
                case 3: cudaEventRecord(ev[k % NS], st); break;
                case 4: cudaStreamWaitEvent(st, ev[(k + 1) % NS], 0); break;
                case 5: cudaEventQuery(ev[k % NS]); break;
                case 6: cudaStreamQuery(st); break;
                case 7: cu_stream_query(st); break;
                case 8: cu_event_query(ev[k % NS]); break;
                case 10:
                    for (int m = 0; m < 4; m++)
                        cudaMemcpyAsync(b + 1024 * m, a + 1024 * m, 4096,
                                        cudaMemcpyDeviceToDevice, st);
                    fg_step_cuda(st, &args);
                    break;
                case 11: cudaGraphLaunch(ge[k % NS], st); break;
                case 12:
                case 13:
                case 14:
                    for (int w = 0; w < NW; w++)
                        cudaEventRecord(wev[k % NS][w], s[(k + 1 + w) % NS]);
                    if (what == 13)
                        for (int w = 0; w < NW; w++)
                            cudaStreamWaitEvent(st, wev[k % NS][w], 0);
                    cudaGraphLaunch(what == 14 ? gw[k % NS] : ge[k % NS], st);
                    break;
                default: {
                    unsigned type = 0;
                    int      ord  = 0;
                    void    *data[2] = {&type, &ord};
                    get_attrs(2, attr, data, (CUdeviceptr)(uintptr_t)(a + k));
                }
                }
            }
            t += now_us() - t0;
        }
        printf("  %-40s %7.3f us per call\n", names[what], t / N);
    }
    ck(cudaDeviceSynchronize(), "sync");
    for (int i = 0; i < NS; i++) {
        cudaGraphExecDestroy(ge[i]);
        cudaGraphExecDestroy(gw[i]);
        for (int w = 0; w < NW; w++)
            cudaEventDestroy(wev[i][w]);
        cudaStreamDestroy(s[i]);
        cudaEventDestroy(ev[i]);
    }
    cudaFree(a);
    cudaFree(b);
    cudaFree(err);
}

/* ---- --calls: how the host's issue rate scales with threads, without the runtime ------------- */

/* One thread of the scaling test: its own 8 streams, `steps` chare steps (4 copies of 4 KiB and
 * the step kernel) issued round-robin over them, as calls (graph 0), as replays of one graph a
 * stream (graph 1), or as 5 launches of the step kernel and no copy (graph 2);
 * synchronised every 256 steps, inside the clock (the device's part is the same for every
 * thread count). */
typedef struct {
    int                graph, steps, ready;
    double             us;
    pthread_barrier_t *go;
    void (*go_fn)(void); /* without `go`: the start barrier (the processes' one) */
} fg_thr_t;

static void *fg_thread_steps(void *arg)
{
    enum { NS = 8, CHUNK = 256 };
    fg_thr_t    *t = (fg_thr_t *)arg;
    cudaStream_t s[NS];
    int32_t     *a, *b, *err;
    static pthread_mutex_t setup = PTHREAD_MUTEX_INITIALIZER;
    cudaGraphExec_t        ge[NS];
    /* One thread at a time: an allocation or a synchronisation while another thread captures
     * would break its capture. No device-wide synchronisation after: the streams are idle. */
    pthread_mutex_lock(&setup);
    ck(cudaMalloc(&a, 1 << 16), "cudaMalloc");
    ck(cudaMalloc(&b, 1 << 16), "cudaMalloc");
    ck(cudaMalloc(&err, 4), "cudaMalloc");
    fg_args_t args = {a, b, err, 0, 0, 4, 1024, 0, 0, 8, 0, 0, NULL};
    for (int i = 0; i < NS; i++) {
        ck(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking), "stream");
        ge[i] = capture_step(s[i], NULL, 0, a, b, &args);
    }
    pthread_mutex_unlock(&setup);
    if (t->go)
        pthread_barrier_wait(t->go);
    else
        t->go_fn();
    double t0 = now_us();
    for (int done = 0; done < t->steps; done += CHUNK) {
        for (int k = 0; k < CHUNK; k++) {
            cudaStream_t st = s[k % NS];
            if (t->graph == 1)
                cudaGraphLaunch(ge[k % NS], st);
            else if (t->graph == 2)
                for (int m = 0; m < 5; m++)
                    fg_step_cuda(st, &args);
            else {
                for (int m = 0; m < 4; m++)
                    cudaMemcpyAsync(b + 1024 * m, a + 1024 * m, 4096, cudaMemcpyDeviceToDevice,
                                    st);
                fg_step_cuda(st, &args);
            }
        }
        for (int i = 0; i < NS; i++)
            ck(cudaStreamSynchronize(s[i]), "sync");
    }
    t->us = now_us() - t0;
    for (int i = 0; i < NS; i++) {
        cudaGraphExecDestroy(ge[i]);
        cudaStreamDestroy(s[i]);
    }
    cudaFree(a);
    cudaFree(b);
    cudaFree(err);
    return NULL;
}

/* Chare steps a second issued by 1, 2, 4 and 8 threads at once, each with its own streams, as
 * calls, as graph replays and as kernel launches alone, and the rate against one thread's: the
 * most that more PEs of one process can gain on this driver and device, whatever the runtime
 * does. */
extern "C" void fg_cuda_thread_scaling(void)
{
    enum { STEPS = 4096, MAXT = 8 };
    printf("raw CUDA chare steps (4 copies of 4 KiB + step kernel; kernels: 5 launches of it) "
           "from several host threads of one process, each its own 8 streams:\n");
    static const char *const mode[3] = {"calls", "graph", "kernels"};
    for (int graph = 0; graph <= 2; graph++) {
        double one = 0;
        for (int nt = 1; nt <= MAXT; nt *= 2) {
            pthread_barrier_t go;
            pthread_barrier_init(&go, NULL, (unsigned)nt);
            fg_thr_t  t[MAXT];
            pthread_t th[MAXT];
            for (int i = 0; i < nt; i++) {
                t[i] = (fg_thr_t){graph, STEPS, 0, 0, &go, NULL};
                if (pthread_create(&th[i], NULL, fg_thread_steps, &t[i]))
                    ck(cudaErrorUnknown, "pthread_create");
            }
            double slowest = 0;
            for (int i = 0; i < nt; i++) {
                pthread_join(th[i], NULL);
                slowest = t[i].us > slowest ? t[i].us : slowest;
            }
            pthread_barrier_destroy(&go);
            double rate = nt * STEPS / slowest * 1e6;
            if (nt == 1)
                one = rate;
            printf("  %-7s %d thread%s %9.0f steps/s  %.2f x 1 thread\n", mode[graph], nt,
                   nt > 1 ? "s" : " ", rate, rate / one);
            printf("RESULT-THREADS mode=%s threads=%d steps_per_s=%.0f x_one=%.3f\n",
                   mode[graph], nt, rate, rate / one);
        }
    }
}

/* ---- --procs-rate: the same from one thread in each of several processes -------------------- */

/* This process's part of the processes' scaling: `steps` raw chare steps from this thread in
 * `mode` (0 calls, 1 graph replays, 2 kernel launches alone), started when go() returns in every
 * process; the µs they took. */
extern "C" double fg_cuda_proc_steps(int mode, int steps, void (*go)(void))
{
    fg_thr_t t = {mode, steps, 0, 0, NULL, go};
    fg_thread_steps(&t);
    return t.us;
}

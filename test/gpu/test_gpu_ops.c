/*
 * test_gpu_ops.c — every op of the GPU layer once, with checked results, on whatever backend
 * TESS_GPU names (default auto): memory, copies in every direction through pinned staging,
 * memset, streams, events, waits, queries, stream signals, timing, pointer queries, host
 * launches, the stream pool and the event pools of gpu.c. Uses the ops table only, and never touches device memory
 * from the host, so the same binary checks the CUDA and HIP backends on a real device.
 *
 * Environment: TESS_GPU; TESS_HOST_THREADS, TESS_HOST_JITTER_US, TESS_HOST_ARENA (host backend).
 * Exit 77 (skipped) when an explicitly requested backend is unsupported here.
 */
#include "gpu/gpu.h"
#include "check.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>


static void params_from_env(tess_gpu_init_params_t *p)
{
    const char *v;
    long        n;
    size_t      size;
    if ((v = getenv("TESS_HOST_THREADS")) && tess_parse_int(v, 0, 64, &n) == TESS_OK)
        p->host_threads = (int)n;
    if ((v = getenv("TESS_HOST_JITTER_US")) && tess_parse_int(v, 0, 1000000, &n) == TESS_OK)
        p->host_jitter_us = (int)n;
    if ((v = getenv("TESS_HOST_ARENA")) && tess_parse_size(v, &size) == TESS_OK)
        p->host_arena_size = size;
}

typedef struct gate {
    _Atomic int open;
} gate_t;

static void gate_fn(void *args)
{
    gate_t *g = *(gate_t **)args;
    while (!atomic_load_explicit(&g->open, memory_order_acquire))
        usleep(100);
}

static void count_fn(void *args)
{
    (**(int32_t **)args)++;
}

static void sleep_fn(void *args)
{
    usleep(*(unsigned *)args);
}

/* Writes a pattern into pinned host memory: proves host functions run in stream order with
 * the copies around them. */
typedef struct fill_args {
    unsigned char *dst;
    size_t         size;
    unsigned char  seed;
} fill_args_t;

static void fill_fn(void *args)
{
    fill_args_t *a = args;
    for (size_t i = 0; i < a->size; i++)
        a->dst[i] = (unsigned char)(a->seed + i * 13);
}

typedef struct tag_args {
    int  tag;
    char text[120];
} tag_args_t;

static tag_args_t seen;

static void tag_fn(void *args)
{
    memcpy(&seen, args, sizeof(seen));
}

static void copy_back(void *host, const void *dev, size_t size, tess_gpu_stream_h s)
{
    CHECK_OK(tess_gpu->memcpy_async(host, dev, size, s));
    CHECK_OK(tess_gpu->stream_sync(s));
}

int main(void)
{
    const char *want     = getenv("TESS_GPU") ? getenv("TESS_GPU") : "auto";
    int         explicit = strcasecmp(want, "auto") != 0;
    setvbuf(stdout, NULL, _IONBF, 0);

    tess_gpu_init_params_t params = {.job_id = tess_random64(), .local_size = 1};
    params_from_env(&params);
    tess_status_t st = tess_gpu_init(want, &params, 3);
    if (st == TESS_ERR_UNSUPPORTED && explicit) {
        printf("test_gpu_ops: backend %s unsupported here: skipped\n", want);
        return 77;
    }
    CHECK_OK(st);
    printf("test_gpu_ops: backend %s, device %d of %d\n", tess_gpu->name, tess_gpu_device(),
           tess_gpu_num_devices());

    /* ---- devices and properties ---- */
    int ndev = tess_gpu->device_count();
    CHECK(ndev >= 1 && tess_gpu_num_devices() == ndev);
    CHECK(tess_gpu_device() >= 0 && tess_gpu_device() < ndev);
    CHECK_OK(tess_gpu->set_device(tess_gpu_device()));
    tess_gpu_props_t props;
    CHECK_OK(tess_gpu->get_props(tess_gpu_device(), &props));
    CHECK(props.name[0] != '\0' && props.total_mem > 0 && props.multiprocessors >= 1);
    printf("  %s: %zu MiB, %d multiprocessors, ipc %d, wait_value %d\n", props.name,
           props.total_mem >> 20, props.multiprocessors, props.ipc, props.wait_value);

    /* ---- the stream pool ---- */
    CHECK(tess_gpu_pool_size() == 3);
    tess_gpu_stream_h s0 = tess_gpu_pool_stream(0), s1 = tess_gpu_pool_stream(1),
                      s2 = tess_gpu_pool_stream(2);
    CHECK(s0 && s1 && s2 && s0 != s1 && s1 != s2 && s0 != s2);
    CHECK(tess_gpu_pool_stream(3) == s0 && tess_gpu_pool_stream(5) == s2);
    CHECK(tess_gpu->native_stream(s0) != NULL);
    CHECK_OK(tess_gpu->stream_query(s0));

    /* ---- memory, copies in every direction, memset ---- */
    const size_t   N = (1u << 20) + 13;
    unsigned char *da, *db, *hsrc, *hdst, *ma = malloc(N), *mb = malloc(N);
    CHECK(ma && mb);
    CHECK_OK(tess_gpu->mem_alloc(N, (void **)&da));
    CHECK_OK(tess_gpu->mem_alloc(N, (void **)&db));
    CHECK_OK(tess_gpu->host_alloc(N, (void **)&hsrc));
    CHECK_OK(tess_gpu->host_alloc(N, (void **)&hdst));
    for (size_t i = 0; i < N; i++)
        hsrc[i] = (unsigned char)(i * 2654435761u >> 13);
    CHECK_OK(tess_gpu->memcpy_async(da, hsrc, N, s0));                /* H2D */
    CHECK_OK(tess_gpu->memset_async(db, 0x5A, N, s0));
    CHECK_OK(tess_gpu->memcpy_async(db + 7, da + 3, N - 100, s0));    /* D2D, odd offsets */
    CHECK_OK(tess_gpu->memset_async(da + 11, 0x1C3, 4097, s0));       /* the low byte only */
    CHECK_OK(tess_gpu->memset_async(da, 0xEE, 0, s0));                /* size 0: nothing */
    CHECK_OK(tess_gpu->memcpy_async(da, hsrc + 5, 0, s0));
    memset(hdst, 0, N);
    CHECK_OK(tess_gpu->memcpy_async(hdst, db, N, s0));                /* D2H */
    CHECK_OK(tess_gpu->stream_sync(s0));
    CHECK_OK(tess_gpu->stream_query(s0));
    memcpy(ma, hsrc, N);
    memset(mb, 0x5A, N);
    memcpy(mb + 7, ma + 3, N - 100);
    memset(ma + 11, 0xC3, 4097);
    CHECK(memcmp(hdst, mb, N) == 0);
    copy_back(hdst, da, N, s1);
    CHECK(memcmp(hdst, ma, N) == 0);

    /* ---- device-to-device copies of every alignment (CUDA: a copy kernel of 16-, 8-, 4- or
     * 1-byte elements); the bytes around each copy stay as they were ---- */
    static const size_t sizes[] = {1, 3, 8, 12, 16, 24, 4104, 65536, 1u << 20, (1u << 20) + 16};
    static const size_t offs[][2] = {{0, 0}, {8, 0}, {0, 4}, {1, 3}, {16, 16}, {6, 2}};
    for (size_t k = 0; k < TESS_ARRAY_LEN(sizes); k++)
        for (size_t o = 0; o < TESS_ARRAY_LEN(offs); o++) {
            size_t n = sizes[k], dst_off = offs[o][0], src_off = offs[o][1];
            if (dst_off + n > N || src_off + n > N)
                continue;
            CHECK_OK(tess_gpu->memset_async(db, (int)(k * 16 + o), N, s0));
            CHECK_OK(tess_gpu->memcpy_async(db + dst_off, da + src_off, n, s0));
            memset(mb, (int)(k * 16 + o), N);
            memcpy(mb + dst_off, ma + src_off, n);
            copy_back(hdst, db, N, s0);
            CHECK_MSG(memcmp(hdst, mb, N) == 0, "a %zu-byte device copy from offset %zu to %zu",
                      n, src_off, dst_off);
        }

    /* ---- pointer queries ---- */
    tess_gpu_ptr_info_t ia, ib, ih;
    CHECK_OK(tess_gpu->ptr_query(da + 1000, &ia));
    CHECK_OK(tess_gpu->ptr_query(db, &ib));
    CHECK_OK(tess_gpu->ptr_query(ma, &ih));
    CHECK(ia.is_device == 1 && ib.is_device == 1 && ih.is_device == 0);
    if (ia.base)
        CHECK(ia.base == da && ia.size >= N);
    if (ia.alloc_id && ib.alloc_id)
        CHECK(ia.alloc_id != ib.alloc_id);

    /* ---- a wait across streams orders a copy after another stream's work ---- */
    tess_gpu_event_h e, e2;
    unsigned         us = 30000;
    CHECK_OK(tess_gpu->event_create(0, &e));
    CHECK_OK(tess_gpu->event_create(0, &e2));
    CHECK_OK(tess_gpu->event_query(e)); /* never recorded: complete */
    for (size_t i = 0; i < N; i++)
        hsrc[i] = (unsigned char)(i * 7 + 3);
    CHECK_OK(tess_gpu->launch_host(s1, sleep_fn, &us, sizeof(us)));
    CHECK_OK(tess_gpu->memcpy_async(da, hsrc, N, s1));
    CHECK_OK(tess_gpu->event_record(e, s1));
    CHECK_OK(tess_gpu->stream_wait_event(s2, e));
    memset(hdst, 0, N);
    CHECK_OK(tess_gpu->memcpy_async(hdst, da, N, s2));
    CHECK_OK(tess_gpu->stream_sync(s2));
    CHECK(memcmp(hdst, hsrc, N) == 0);
    CHECK_OK(tess_gpu->event_query(e));

    /* ---- queries while work is held back; event_sync ---- */
    gate_t  g  = {0};
    gate_t *gp = &g;
    CHECK_OK(tess_gpu->launch_host(s0, gate_fn, &gp, sizeof(gp)));
    CHECK_OK(tess_gpu->event_record(e2, s0));
    CHECK_ST(tess_gpu->stream_query(s0), TESS_INPROGRESS);
    CHECK_ST(tess_gpu->event_query(e2), TESS_INPROGRESS);
    atomic_store_explicit(&g.open, 1, memory_order_release);
    CHECK_OK(tess_gpu->event_sync(e2));
    CHECK_OK(tess_gpu->event_query(e2));
    CHECK_OK(tess_gpu->stream_sync(s0));
    CHECK_OK(tess_gpu->stream_query(s0));

    /* ---- stream signals, where the backend has them: written in stream order once the
     * work before them is done, with that work's writes visible ---- */
    if (tess_gpu->stream_signal) {
        _Atomic uint32_t *w  = NULL;
        tess_status_t     st = tess_gpu->signal_alloc(4, &w);
        CHECK(st == TESS_OK || st == TESS_ERR_UNSUPPORTED);
        if (st == TESS_OK) {
            for (int i = 0; i < 4; i++)
                CHECK(atomic_load(&w[i]) == 0);
            gate_t      g3  = {0};
            gate_t     *gp3 = &g3;
            fill_args_t fb  = {hsrc, 4096, 0x5a};
            CHECK_OK(tess_gpu->launch_host(s0, gate_fn, &gp3, sizeof(gp3)));
            CHECK_OK(tess_gpu->launch_host(s0, fill_fn, &fb, sizeof(fb)));
            CHECK_OK(tess_gpu->stream_signal(s0, &w[1], 7));
            CHECK_OK(tess_gpu->stream_signal(s0, &w[1], 8));
            usleep(20000);
            CHECK(atomic_load(&w[1]) == 0); /* held back by the gate */
            atomic_store_explicit(&g3.open, 1, memory_order_release);
            for (int waited = 0; atomic_load_explicit(&w[1], memory_order_acquire) != 8;
                 waited++) {
                CHECK(waited < 1000000); /* 10 s */
                usleep(10);
            }
            for (size_t i = 0; i < 4096; i++)
                CHECK(hsrc[i] == (unsigned char)(0x5a + i * 13));
            CHECK(atomic_load(&w[0]) == 0 && atomic_load(&w[2]) == 0 && atomic_load(&w[3]) == 0);
            CHECK_OK(tess_gpu->stream_sync(s0));
            tess_gpu->signal_free(w);
        }
    }

    /* ---- host functions: stream order with copies, arguments copied at launch ---- */
    fill_args_t fa = {hsrc, 4096, 0x21};
    CHECK_OK(tess_gpu->launch_host(s1, fill_fn, &fa, sizeof(fa)));
    CHECK_OK(tess_gpu->memcpy_async(db, hsrc, 4096, s1));
    memset(hdst, 0, 4096);
    CHECK_OK(tess_gpu->memcpy_async(hdst, db, 4096, s1));
    CHECK_OK(tess_gpu->stream_sync(s1));
    for (size_t i = 0; i < 4096; i++)
        CHECK(hdst[i] == (unsigned char)(0x21 + i * 13));

    gate_t     g2  = {0};
    gate_t    *gp2 = &g2;
    tag_args_t ta  = {7, "as launched"};
    CHECK_OK(tess_gpu->launch_host(s0, gate_fn, &gp2, sizeof(gp2)));
    CHECK_OK(tess_gpu->launch_host(s0, tag_fn, &ta, sizeof(ta)));
    ta.tag = 8;
    snprintf(ta.text, sizeof(ta.text), "changed after the launch");
    atomic_store_explicit(&g2.open, 1, memory_order_release);
    CHECK_OK(tess_gpu->stream_sync(s0));
    CHECK(seen.tag == 7 && !strcmp(seen.text, "as launched"));

    /* ---- timing ---- */
    tess_gpu_event_h t0, t1;
    float            ms = 0;
    us                  = 20000;
    CHECK_OK(tess_gpu->event_create(TESS_GPU_EVENT_TIMING, &t0));
    CHECK_OK(tess_gpu->event_create(TESS_GPU_EVENT_TIMING, &t1));
    CHECK_OK(tess_gpu->event_record(t0, s2));
    CHECK_OK(tess_gpu->launch_host(s2, sleep_fn, &us, sizeof(us)));
    CHECK_OK(tess_gpu->event_record(t1, s2));
    CHECK_OK(tess_gpu->event_sync(t1));
    CHECK_OK(tess_gpu->event_elapsed_ms(t0, t1, &ms));
    printf("  a 20 ms host function: %.2f ms between events\n", (double)ms);
    CHECK(ms >= 15.0f && ms < 10000.0f);

    /* ---- a stream of our own ---- */
    tess_gpu_stream_h sx;
    CHECK_OK(tess_gpu->stream_create(&sx));
    CHECK_OK(tess_gpu->memset_async(db, 0x3D, 999, sx));
    copy_back(hdst, db, 999, sx);
    for (size_t i = 0; i < 999; i++)
        CHECK(hdst[i] == 0x3D);
    CHECK_OK(tess_gpu->stream_destroy(sx));

    /* ---- event pools (gpu.c) ---- */
    tess_gpu_evpool_t pool;
    tess_gpu_event_h  pe[3];
    CHECK_OK(tess_gpu_evpool_init(&pool, 0, 2));
    CHECK(pool.nfree == 2 && pool.created == 2);
    for (int i = 0; i < 3; i++)
        CHECK_OK(tess_gpu_evpool_get(&pool, &pe[i]));
    CHECK(pool.nfree == 0 && pool.created == 3); /* the third was created on demand */
    CHECK(pe[0] != pe[1] && pe[1] != pe[2] && pe[0] != pe[2]);
    for (int i = 0; i < 3; i++)
        CHECK_OK(tess_gpu->event_record(pe[i], tess_gpu_pool_stream((size_t)i)));
    for (int i = 0; i < 3; i++) {
        CHECK_OK(tess_gpu->event_sync(pe[i]));
        tess_gpu_evpool_put(&pool, pe[i]);
    }
    CHECK(pool.nfree == 3);
    tess_gpu_event_h again;
    CHECK_OK(tess_gpu_evpool_get(&pool, &again));
    CHECK(pool.created == 3 && (again == pe[0] || again == pe[1] || again == pe[2]));
    tess_gpu_evpool_put(&pool, again);
    tess_gpu_evpool_fini(&pool);

    /* ---- IPC export (opening needs another process: test_gpu_ipc) ---- */
    if (props.ipc) {
        tess_gpu_event_h      ie;
        tess_gpu_ipc_handle_t hm, he, zero;
        memset(&zero, 0, sizeof(zero));
        CHECK_OK(tess_gpu->event_create(TESS_GPU_EVENT_IPC, &ie));
        CHECK_OK(tess_gpu->ipc_mem_export(da, &hm));
        CHECK_OK(tess_gpu->ipc_event_export(ie, &he));
        CHECK(memcmp(&hm, &zero, sizeof(zero)) != 0 && memcmp(&he, &zero, sizeof(zero)) != 0);
        CHECK_OK(tess_gpu->event_destroy(ie));
    }

    /* ---- graphs, where the backend has them: recorded, not run; each launch runs the
     * recording in stream order; destroyed while launches are held back; compared ---- */
    if (tess_gpu->graph_begin) {
        tess_gpu_stream_h cap;
        tess_gpu_graph_h  gr, same, other;
        int32_t          *cnt = (int32_t *)hsrc, *back = (int32_t *)hdst;
        *cnt = 0;
        *back = -1;
        CHECK_OK(tess_gpu->stream_create(&cap));
        for (int k = 0; k < 3; k++) {
            int32_t *arg = k == 2 ? cnt + 1 : cnt; /* `other`: another argument */
            CHECK_OK(tess_gpu->graph_begin(cap));
            CHECK_OK(tess_gpu->launch_host(cap, count_fn, &arg, sizeof(arg)));
            CHECK_OK(tess_gpu->memcpy_async(db, cnt, 4, cap));
            CHECK_OK(tess_gpu->memcpy_async(back, db, 4, cap));
            CHECK_OK(tess_gpu->graph_end(cap, k == 0 ? &gr : k == 1 ? &same : &other));
        }
        CHECK_OK(tess_gpu->stream_sync(cap));
        CHECK(*cnt == 0 && *back == -1); /* recorded, not run */
        char why[256] = "";
        CHECK(tess_gpu->graph_compare(gr, same, why, sizeof(why)) == 0);
        CHECK(tess_gpu->graph_compare(gr, other, why, sizeof(why)) != 0 && why[0]);
        printf("test_gpu_ops: graphs differ: %s\n", why);
        tess_gpu->graph_destroy(same);
        tess_gpu->graph_destroy(other);
        gate_t  gg  = {0};
        gate_t *ggp = &gg;
        CHECK_OK(tess_gpu->launch_host(s0, gate_fn, &ggp, sizeof(ggp)));
        for (int k = 0; k < 3; k++)
            CHECK_OK(tess_gpu->graph_launch(gr, s0));
        tess_gpu->graph_destroy(gr); /* its launches are still held back by the gate */
        CHECK(*cnt == 0);
        atomic_store_explicit(&gg.open, 1, memory_order_release);
        CHECK_OK(tess_gpu->stream_sync(s0));
        CHECK_MSG(*cnt == 3 && *back == 3, "after 3 launches: count %d, read back %d", *cnt,
                  *back);
        if (tess_gpu->kind == TESS_GPU_HOST) {
            /* Events cannot be recorded: the call fails, and so does the recording. */
            CHECK_OK(tess_gpu->graph_begin(cap));
            CHECK_ST(tess_gpu->event_record(e, cap), TESS_ERR_UNSUPPORTED);
            CHECK_ST(tess_gpu->graph_end(cap, &gr), TESS_ERR_UNSUPPORTED);
        }
        CHECK_OK(tess_gpu->stream_destroy(cap));
    }

    /* ---- the public wrappers of gpu.c ---- */
    CHECK(!strcmp(tess_gpu_backend_name(), tess_gpu->name));
    CHECK(tess_gpu_backend() == tess_gpu->kind);
    CHECK_OK(tess_gpu_memset_async(db, 0x44, 64, s0));
    CHECK_OK(tess_gpu_memcpy_async(hdst, db, 64, s0));
    CHECK_OK(tess_gpu_stream_sync(s0));
    for (int i = 0; i < 64; i++)
        CHECK(hdst[i] == 0x44);

    CHECK_OK(tess_gpu->event_destroy(t0));
    CHECK_OK(tess_gpu->event_destroy(t1));
    CHECK_OK(tess_gpu->event_destroy(e));
    CHECK_OK(tess_gpu->event_destroy(e2));
    CHECK_OK(tess_gpu->mem_free(da));
    CHECK_OK(tess_gpu->mem_free(db));
    CHECK_OK(tess_gpu->host_free(hsrc));
    CHECK_OK(tess_gpu->host_free(hdst));
    free(ma);
    free(mb);
    tess_gpu_fini();
    CHECK(tess_gpu == NULL);
    printf("test_gpu_ops: all passed\n");
    return 0;
}

/*
 * test_gpu_host.c — the host GPU backend through the ops table, in one process: the allocator,
 * stream order and concurrency, event semantics, memory operations, launch arguments, timing,
 * notify, stream destroy and jitter (test_gpu_host_shm.c: IPC and shared-memory names).
 *
 * Environment: TESS_HOST_JITTER_US adds a jitter to every section (the testlist runs a variant).
 */
#include "unit/gpu_host_test.h"

/* ---- the allocator ---------------------------------------------------------------------------- */

typedef struct live {
    unsigned char *p;
    size_t         size;
    uint64_t       id;
    unsigned char  fill;
} live_t;

static int live_cmp(const void *a, const void *b)
{
    const live_t *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

static void check_live(live_t *lv, size_t n)
{
    live_t *sorted = malloc(n * sizeof(*sorted) + 1);
    size_t  m      = 0;
    for (size_t i = 0; i < n; i++)
        if (lv[i].p)
            sorted[m++] = lv[i];
    qsort(sorted, m, sizeof(*sorted), live_cmp);
    for (size_t i = 0; i < m; i++) {
        CHECK(((uintptr_t)sorted[i].p % TESS_GPU_HOST_ALIGN) == 0);
        if (i + 1 < m)
            CHECK(sorted[i].p + TESS_MAX(sorted[i].size, 1) <= sorted[i + 1].p);
        for (size_t b = 0; b < sorted[i].size; b++)
            CHECK(sorted[i].p[b] == sorted[i].fill);
    }
    free(sorted);
}

static void test_allocator(void)
{
    const size_t SEG = 1 << 20;
    be_init(1, 0, SEG);
    CHECK(own_segments("m") == 1);

    /* Four quarters fill the first segment in order; freeing two neighbours coalesces them. */
    unsigned char      *q[4];
    tess_gpu_ptr_info_t info;
    uint64_t            ids[4];
    for (int i = 0; i < 4; i++) {
        CHECK_OK(tess_gpu->mem_alloc(SEG / 4, (void **)&q[i]));
        CHECK(q[i] == q[0] + i * (SEG / 4));
        CHECK_OK(tess_gpu->ptr_query(q[i] + 1000, &info));
        CHECK(info.is_device == 1 && info.base == q[i] && info.size == SEG / 4);
        CHECK(info.device == 0);
        ids[i] = info.alloc_id;
        CHECK(ids[i] >= 1 && (i == 0 || ids[i] > ids[i - 1]));
    }
    CHECK(own_segments("m") == 1);
    CHECK_OK(tess_gpu->mem_free(q[1]));
    CHECK_OK(tess_gpu->mem_free(q[2]));
    unsigned char *half;
    CHECK_OK(tess_gpu->mem_alloc(SEG / 2, (void **)&half));
    CHECK(half == q[1]);
    CHECK_OK(tess_gpu->mem_free(half));
    CHECK_OK(tess_gpu->mem_free(q[0]));
    CHECK_OK(tess_gpu->mem_free(q[3]));
    unsigned char *whole;
    CHECK_OK(tess_gpu->mem_alloc(SEG, (void **)&whole));
    CHECK(whole == q[0]);
    CHECK(own_segments("m") == 1);
    CHECK_OK(tess_gpu->mem_free(whole));

    /* The same address again is a new allocation with a new id. */
    void *p1, *p2;
    CHECK_OK(tess_gpu->mem_alloc(100, &p1));
    CHECK_OK(tess_gpu->ptr_query(p1, &info));
    uint64_t id1 = info.alloc_id;
    CHECK(id1 > ids[3]);
    CHECK_OK(tess_gpu->mem_free(p1));
    CHECK_OK(tess_gpu->mem_alloc(100, &p2));
    CHECK(p2 == p1);
    CHECK_OK(tess_gpu->ptr_query(p2, &info));
    CHECK(info.alloc_id > id1);

    /* Bad frees are errors, not undefined behaviour. */
    int local = 0;
    CHECK_ST(tess_gpu->mem_free((char *)p2 + 256), TESS_ERR_INVALID);
    CHECK_ST(tess_gpu->mem_free((char *)p2 + 1), TESS_ERR_INVALID);
    CHECK_ST(tess_gpu->mem_free(&local), TESS_ERR_INVALID);
    CHECK_OK(tess_gpu->mem_free(p2));
    CHECK_ST(tess_gpu->mem_free(p2), TESS_ERR_INVALID);
    CHECK_OK(tess_gpu->mem_free(NULL));
    CHECK_OK(tess_gpu->ptr_query(&local, &info));
    CHECK(info.is_device == 0 && info.base == NULL && info.alloc_id == 0);
    CHECK_OK(tess_gpu->ptr_query(p2, &info));
    CHECK(info.is_device == 0);

    /* Size 0 still gives distinct allocations. */
    void *z1, *z2;
    CHECK_OK(tess_gpu->mem_alloc(0, &z1));
    CHECK_OK(tess_gpu->mem_alloc(0, &z2));
    CHECK(z1 && z2 && z1 != z2);
    CHECK_OK(tess_gpu->ptr_query(z1, &info));
    CHECK(info.is_device == 1 && info.base == z1 && info.size == 0);
    CHECK_OK(tess_gpu->mem_free(z1));
    CHECK_OK(tess_gpu->mem_free(z2));

    /* Larger than a segment: a segment of its own, gone when freed. */
    unsigned char *big;
    CHECK_OK(tess_gpu->mem_alloc(3 * SEG + 5, (void **)&big));
    CHECK(own_segments("m") == 2);
    big[3 * SEG + 4] = 1;
    CHECK_OK(tess_gpu->ptr_query(big + 3 * SEG, &info));
    CHECK(info.is_device == 1 && info.base == big && info.size == 3 * SEG + 5);
    CHECK_OK(tess_gpu->mem_free(big));
    CHECK(own_segments("m") == 1);

    /* Random sizes: no overlap, contents kept, ids unique and increasing. */
    enum { SLOTS = 200, ITERS = 3000 };
    live_t   lv[SLOTS];
    uint64_t last_id = 0;
    memset(lv, 0, sizeof(lv));
    for (int it = 0; it < ITERS; it++) {
        live_t *l = &lv[rnd() % SLOTS];
        if (l->p) {
            for (size_t b = 0; b < l->size; b++)
                CHECK(l->p[b] == l->fill);
            CHECK_OK(tess_gpu->mem_free(l->p));
            l->p = NULL;
        } else {
            size_t size = rnd() % 20 == 0 ? 100000 + rnd() % 500000 : rnd() % 20000;
            if (rnd() % 50 == 0)
                size = SEG + rnd() % SEG; /* dedicated */
            CHECK_OK(tess_gpu->mem_alloc(size, (void **)&l->p));
            CHECK_OK(tess_gpu->ptr_query(l->p + size / 2, &info));
            CHECK(info.is_device == 1 && info.base == l->p && info.size == size);
            CHECK(info.alloc_id > last_id);
            last_id = info.alloc_id;
            l->size = size;
            l->fill = (unsigned char)(rnd() | 1);
            memset(l->p, l->fill, size);
        }
        if (it % 500 == 0)
            check_live(lv, SLOTS);
    }
    check_live(lv, SLOTS);
    for (int i = 0; i < SLOTS; i++)
        if (lv[i].p)
            CHECK_OK(tess_gpu->mem_free(lv[i].p));
    /* Everything coalesced back: a whole segment fits without a new one. */
    int nseg = own_segments("m");
    CHECK(nseg >= 1);
    CHECK_OK(tess_gpu->mem_alloc(SEG, &p1));
    CHECK(own_segments("m") == nseg);
    CHECK_OK(tess_gpu->mem_free(p1));

    tess_gpu_fini();
    CHECK(own_segments("") == 0);
}

/* ---- stream order ------------------------------------------------------------------------------ */

#define ORDER_SLOTS 64

typedef struct mix_args {
    uint64_t    *buf;
    int          j;
    uint64_t     k;
    _Atomic int *busy;
    _Atomic int *violations;
} mix_args_t;

static void mix_fn(void *args)
{
    mix_args_t *a = args;
    if (atomic_fetch_add(a->busy, 1) != 0)
        atomic_fetch_add(a->violations, 1); /* two operations of one stream at once */
    a->buf[a->j] = a->buf[a->j] * 6364136223846793005ull + a->k;
    if (a->k % 64 == 0)
        usleep(10);
    atomic_fetch_sub(a->busy, 1);
}

static void test_stream_order(int threads, int jitter, int nops)
{
    enum { NS = 4 };
    be_init(threads, jitter, 0);
    uint64_t   *dev[NS], model[NS][ORDER_SLOTS];
    _Atomic int busy[NS], violations = 0;
    for (int s = 0; s < NS; s++) {
        CHECK_OK(tess_gpu->mem_alloc(ORDER_SLOTS * sizeof(uint64_t), (void **)&dev[s]));
        for (int j = 0; j < ORDER_SLOTS; j++)
            dev[s][j] = model[s][j] = (uint64_t)(s * 1000 + j);
        atomic_init(&busy[s], 0);
    }
    for (int i = 0; i < nops; i++) {
        for (int s = 0; s < NS; s++) {
            tess_gpu_stream_h st = tess_gpu_pool_stream((size_t)s);
            int               j  = (int)(rnd() % ORDER_SLOTS);
            switch (rnd() % 4) {
            case 0:
            case 1: {
                mix_args_t a = {dev[s], j, rnd(), &busy[s], &violations};
                CHECK_OK(tess_gpu->launch_host(st, mix_fn, &a, sizeof(a)));
                model[s][j] = model[s][j] * 6364136223846793005ull + a.k;
                break;
            }
            case 2: {
                int j2 = (j + 1 + (int)(rnd() % (ORDER_SLOTS - 1))) % ORDER_SLOTS;
                CHECK_OK(tess_gpu->memcpy_async(&dev[s][j2], &dev[s][j], 8, st));
                model[s][j2] = model[s][j];
                break;
            }
            default: {
                int v = (int)(rnd() & 0xff);
                CHECK_OK(tess_gpu->memset_async(&dev[s][j], v, 8, st));
                memset(&model[s][j], v, 8);
                break;
            }
            }
        }
    }
    for (int s = 0; s < NS; s++) {
        CHECK_OK(tess_gpu->stream_sync(tess_gpu_pool_stream((size_t)s)));
        CHECK_OK(tess_gpu->stream_query(tess_gpu_pool_stream((size_t)s)));
        CHECK(memcmp(dev[s], model[s], sizeof(model[s])) == 0);
        CHECK_OK(tess_gpu->mem_free(dev[s]));
    }
    CHECK(atomic_load(&violations) == 0);
    tess_gpu_fini();
}

/* A pipeline across streams through one re-recorded event: each consumer step must see the
 * producer's step of the same index (ordering bugs show up under jitter, races under TSan). */
typedef struct pipe_args {
    uint64_t    *buf;
    int          i;
    _Atomic int *errors;
} pipe_args_t;

static void produce_fn(void *args)
{
    pipe_args_t *a = args;
    a->buf[a->i]   = (uint64_t)a->i * a->i + 7;
}

static void consume_fn(void *args)
{
    pipe_args_t *a = args;
    if (a->buf[a->i] != (uint64_t)a->i * a->i + 7)
        atomic_fetch_add(a->errors, 1);
}

static void test_pipeline(int threads, int jitter, int n)
{
    be_init(threads, jitter, 0);
    tess_gpu_stream_h prod = tess_gpu_pool_stream(0), cons = tess_gpu_pool_stream(1);
    tess_gpu_event_h  e;
    uint64_t         *buf;
    _Atomic int       errors = 0;
    CHECK_OK(tess_gpu->event_create(0, &e));
    CHECK_OK(tess_gpu->mem_alloc((size_t)n * sizeof(uint64_t), (void **)&buf));
    CHECK_OK(tess_gpu->memset_async(buf, 0, (size_t)n * sizeof(uint64_t), prod));
    for (int i = 0; i < n; i++) {
        pipe_args_t a = {buf, i, &errors};
        CHECK_OK(tess_gpu->launch_host(prod, produce_fn, &a, sizeof(a)));
        CHECK_OK(tess_gpu->event_record(e, prod));
        CHECK_OK(tess_gpu->stream_wait_event(cons, e));
        CHECK_OK(tess_gpu->launch_host(cons, consume_fn, &a, sizeof(a)));
    }
    CHECK_OK(tess_gpu->stream_sync(cons));
    CHECK_OK(tess_gpu->stream_sync(prod));
    CHECK(atomic_load(&errors) == 0);
    CHECK_OK(tess_gpu->mem_free(buf));
    CHECK_OK(tess_gpu->event_destroy(e));
    tess_gpu_fini();
}

/* ---- concurrency and wait semantics ------------------------------------------------------------ */

static _Atomic int b_marked, a_saw_b;

static void a_fn(void *args)
{
    (void)args;
    atomic_store(&a_saw_b, atomic_load(&b_marked));
}

static void test_concurrency(void)
{
    be_init(2, 0, 0);
    tess_gpu_stream_h sa = tess_gpu_pool_stream(0), sb = tess_gpu_pool_stream(1),
                      sc = tess_gpu_pool_stream(2);
    tess_gpu_event_h  e;
    gate_t            g      = {0};
    _Atomic int       a_ran  = 0, c_ran = 0;
    atomic_store(&b_marked, 0);
    atomic_store(&a_saw_b, 0);
    CHECK_OK(tess_gpu->event_create(0, &e));

    launch_gate(sb, &g);
    launch_set(sb, &b_marked);
    CHECK_OK(tess_gpu->event_record(e, sb));
    CHECK_OK(tess_gpu->stream_wait_event(sa, e));
    CHECK_OK(tess_gpu->launch_host(sa, a_fn, NULL, 0));
    launch_set(sa, &a_ran);
    /* B holds one executor; A waits, and must not hold the other one: C runs. */
    launch_set(sc, &c_ran);
    WAIT_UNTIL(atomic_load(&c_ran));
    CHECK_OK(tess_gpu->stream_sync(sc));
    usleep(50000);
    CHECK(atomic_load(&a_ran) == 0);
    CHECK_ST(tess_gpu->stream_query(sa), TESS_INPROGRESS);
    CHECK_ST(tess_gpu->stream_query(sb), TESS_INPROGRESS);
    CHECK_ST(tess_gpu->event_query(e), TESS_INPROGRESS);
    open_gate(&g);
    CHECK_OK(tess_gpu->stream_sync(sa));
    CHECK(atomic_load(&a_ran) == 1 && atomic_load(&a_saw_b) == 1);
    CHECK_OK(tess_gpu->event_query(e));
    CHECK_OK(tess_gpu->stream_sync(sb));
    CHECK_OK(tess_gpu->event_destroy(e));
    tess_gpu_fini();
}

static void test_wait_captures(void)
{
    be_init(2, 0, 0);
    tess_gpu_stream_h sa = tess_gpu_pool_stream(0), sb = tess_gpu_pool_stream(1);
    tess_gpu_event_h  e, never;
    gate_t            g1 = {0}, g2 = {0}, g3 = {0};
    _Atomic int       a1 = 0, a2 = 0, a3 = 0;
    CHECK_OK(tess_gpu->event_create(0, &e));
    CHECK_OK(tess_gpu->event_create(0, &never));

    /* The wait is for record 1; record 2, issued after the wait, must not hold A back. */
    launch_gate(sb, &g1);
    CHECK_OK(tess_gpu->event_record(e, sb));
    CHECK_OK(tess_gpu->stream_wait_event(sa, e));
    launch_set(sa, &a1);
    launch_gate(sb, &g2);
    CHECK_OK(tess_gpu->event_record(e, sb));
    usleep(20000);
    CHECK(atomic_load(&a1) == 0);
    open_gate(&g1);
    WAIT_UNTIL(atomic_load(&a1));
    CHECK_ST(tess_gpu->event_query(e), TESS_INPROGRESS); /* record 2 is behind g2 */
    open_gate(&g2);
    CHECK_OK(tess_gpu->event_sync(e));
    CHECK_OK(tess_gpu->event_query(e));

    /* Waiting on a completed event, then recording it again behind a gate: no wait. */
    CHECK_OK(tess_gpu->stream_wait_event(sa, e));
    launch_gate(sb, &g3);
    CHECK_OK(tess_gpu->event_record(e, sb));
    launch_set(sa, &a2);
    WAIT_UNTIL(atomic_load(&a2));
    CHECK_ST(tess_gpu->event_query(e), TESS_INPROGRESS);
    open_gate(&g3);
    CHECK_OK(tess_gpu->stream_sync(sb));

    /* A never-recorded event is complete and waiting on it is a no-op. */
    CHECK_OK(tess_gpu->event_query(never));
    CHECK_OK(tess_gpu->event_sync(never));
    CHECK_OK(tess_gpu->stream_wait_event(sa, never));
    launch_set(sa, &a3);
    CHECK_OK(tess_gpu->stream_sync(sa));
    CHECK(atomic_load(&a3) == 1);

    CHECK_OK(tess_gpu->event_destroy(e));
    CHECK_OK(tess_gpu->event_destroy(never));
    tess_gpu_fini();
}

/* ---- memory operations ------------------------------------------------------------------------- */

static void test_memops(void)
{
    enum { N = 8192 + 13 };
    be_init(2, 0, 0);
    tess_gpu_stream_h s = tess_gpu_pool_stream(0);
    unsigned char    *d1, *d2, *pinned, *gone;
    unsigned char    *h = malloc(N), *h2 = malloc(N), *m1 = malloc(N), *m2 = malloc(N);
    CHECK_OK(tess_gpu->mem_alloc(N, (void **)&d1));
    CHECK_OK(tess_gpu->mem_alloc(N, (void **)&d2));
    CHECK_OK(tess_gpu->host_alloc(N, (void **)&pinned));
    CHECK(((uintptr_t)pinned % TESS_GPU_HOST_ALIGN) == 0);
    for (int i = 0; i < N; i++)
        h[i] = (unsigned char)rnd();
    memset(h2, 0x42, N);

    CHECK_OK(tess_gpu->memcpy_async(d1, h, N, s));                 /* H2D */
    CHECK_OK(tess_gpu->memset_async(d2, 0x11, N, s));
    CHECK_OK(tess_gpu->memcpy_async(d2 + 3, d1 + 5, 4099, s));     /* D2D, odd */
    CHECK_OK(tess_gpu->memset_async(d1 + 1, 0x1AB, 257, s));       /* only the low byte */
    CHECK_OK(tess_gpu->memset_async(d1, 0x77, 0, s));              /* size 0: nothing */
    CHECK_OK(tess_gpu->memcpy_async(d1, h2, 0, s));
    CHECK_OK(tess_gpu->memcpy_async(NULL, NULL, 0, s));
    CHECK_OK(tess_gpu->memset_async(d2 + N - 1, 0x99, 1, s));
    CHECK_OK(tess_gpu->memcpy_async(pinned, d2, N, s));            /* D2H */
    CHECK_OK(tess_gpu->memcpy_async(h2, pinned, N, s));            /* H2H */
    CHECK_OK(tess_gpu->stream_sync(s));

    memcpy(m1, h, N);
    memset(m2, 0x11, N);
    memcpy(m2 + 3, m1 + 5, 4099);
    memset(m1 + 1, 0xAB, 257);
    m2[N - 1] = 0x99;
    CHECK(memcmp(d1, m1, N) == 0);
    CHECK(memcmp(d2, m2, N) == 0);
    CHECK(memcmp(h2, m2, N) == 0);

    /* Ranges that leave their allocation, or memory that is not allocated, are rejected. */
    CHECK_ST(tess_gpu->memcpy_async(d1 + N - 10, h, 20, s), TESS_ERR_INVALID);
    CHECK_ST(tess_gpu->memcpy_async(h, d2 + 1, N, s), TESS_ERR_INVALID);
    CHECK_ST(tess_gpu->memset_async(d1 + N, 0, 1, s), TESS_ERR_INVALID);
    CHECK_ST(tess_gpu->memset_async(NULL, 0, 1, s), TESS_ERR_INVALID);
    CHECK_OK(tess_gpu->mem_alloc(300, (void **)&gone));
    CHECK_OK(tess_gpu->mem_free(gone));
    CHECK_ST(tess_gpu->memcpy_async(h, gone, 10, s), TESS_ERR_INVALID);

    CHECK_OK(tess_gpu->mem_free(d1));
    CHECK_OK(tess_gpu->mem_free(d2));
    CHECK_OK(tess_gpu->host_free(pinned));
    free(h);
    free(h2);
    free(m1);
    free(m2);
    tess_gpu_fini();
}

/* mem_free waits for the work enqueued before it (cudaFree synchronises with the device), so a
 * block is never handed out again while a queued copy still writes it. */
typedef struct free_job {
    void       *ptr;
    _Atomic int done;
} free_job_t;

static void *free_thread(void *arg)
{
    free_job_t *j = arg;
    CHECK_OK(tess_gpu->mem_free(j->ptr));
    atomic_store(&j->done, 1);
    return NULL;
}

static void test_free_drains(void)
{
    be_init(2, 0, 0);
    tess_gpu_stream_h s = tess_gpu_pool_stream(0);
    gate_t            g = {0};
    unsigned char     host[4096];
    free_job_t        job = {NULL, 0};
    pthread_t         th;
    memset(host, 3, sizeof(host));
    CHECK_OK(tess_gpu->mem_alloc(sizeof(host), &job.ptr));
    launch_gate(s, &g);
    CHECK_OK(tess_gpu->memcpy_async(job.ptr, host, sizeof(host), s));
    CHECK(pthread_create(&th, NULL, free_thread, &job) == 0);
    usleep(30000);
    CHECK(atomic_load(&job.done) == 0);
    open_gate(&g);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(atomic_load(&job.done) == 1);
    CHECK_OK(tess_gpu->stream_query(s));
    tess_gpu_fini();
}

/* ---- launch arguments, timing, notify, stream destroy ------------------------------------------ */

typedef struct big_args {
    int  tag;
    char text[200];
} big_args_t;

static big_args_t seen;

static void record_args_fn(void *args)
{
    memcpy(&seen, args, sizeof(seen));
}

static void test_launch_args(void)
{
    be_init(1, 0, 0);
    tess_gpu_stream_h s = tess_gpu_pool_stream(0);
    gate_t            g = {0};
    big_args_t        a = {42, "the arguments at launch"};
    unsigned char     too_big[TESS_GPU_HOST_ARGS_MAX + 1] = {0};
    memset(&seen, 0, sizeof(seen));
    launch_gate(s, &g);
    CHECK_OK(tess_gpu->launch_host(s, record_args_fn, &a, sizeof(a)));
    a.tag = -1;
    snprintf(a.text, sizeof(a.text), "changed after launch");
    open_gate(&g);
    CHECK_OK(tess_gpu->stream_sync(s));
    CHECK(seen.tag == 42 && !strcmp(seen.text, "the arguments at launch"));
    CHECK_ST(tess_gpu->launch_host(s, record_args_fn, too_big, sizeof(too_big)),
             TESS_ERR_INVALID);
    CHECK_OK(tess_gpu->launch_host(s, record_args_fn, too_big, TESS_GPU_HOST_ARGS_MAX));
    CHECK_ST(tess_gpu->launch_host(s, NULL, NULL, 0), TESS_ERR_INVALID);
    CHECK_OK(tess_gpu->stream_sync(s));
    tess_gpu_fini();
}

static void test_timing(void)
{
    be_init(1, 0, 0);
    tess_gpu_stream_h s = tess_gpu_pool_stream(0);
    tess_gpu_event_h  t0, t1, plain, reused;
    gate_t            g     = {0};
    unsigned          us    = 20000;
    float             ms    = 0;
    CHECK_OK(tess_gpu->event_create(TESS_GPU_EVENT_TIMING, &t0));
    CHECK_OK(tess_gpu->event_create(TESS_GPU_EVENT_TIMING, &t1));
    CHECK_OK(tess_gpu->event_create(0, &plain));
    CHECK_ST(tess_gpu->event_create(TESS_GPU_EVENT_TIMING | TESS_GPU_EVENT_IPC, &reused),
             TESS_ERR_INVALID);
    CHECK_ST(tess_gpu->event_create(0x80, &reused), TESS_ERR_INVALID);
    CHECK_ST(tess_gpu->event_elapsed_ms(t0, t1, &ms), TESS_ERR_INVALID); /* never recorded */

    launch_gate(s, &g);
    CHECK_OK(tess_gpu->event_record(t0, s));
    CHECK_OK(tess_gpu->launch_host(s, sleep_fn, &us, sizeof(us)));
    CHECK_OK(tess_gpu->event_record(t1, s));
    CHECK_OK(tess_gpu->event_record(plain, s));
    CHECK_ST(tess_gpu->event_query(t0), TESS_INPROGRESS);
    CHECK_ST(tess_gpu->event_elapsed_ms(t0, t1, &ms), TESS_ERR_INVALID); /* not complete */
    open_gate(&g);
    CHECK_OK(tess_gpu->event_sync(t1));
    CHECK_OK(tess_gpu->event_query(t0));
    CHECK_OK(tess_gpu->event_elapsed_ms(t0, t1, &ms));
    CHECK(ms >= 19.0f && ms < 10000.0f);
    CHECK_OK(tess_gpu->event_sync(plain));
    CHECK_ST(tess_gpu->event_elapsed_ms(plain, t1, &ms), TESS_ERR_INVALID); /* not timed */

    CHECK_OK(tess_gpu->event_destroy(t0));
    CHECK_ST(tess_gpu->event_query(t0), TESS_ERR_INVALID); /* destroyed */
    CHECK_ST(tess_gpu->event_destroy(t0), TESS_ERR_INVALID);
    /* A new event (its slot possibly recycled) starts complete: never recorded. */
    CHECK_OK(tess_gpu->event_create(0, &reused));
    CHECK_OK(tess_gpu->event_query(reused));
    CHECK_OK(tess_gpu->event_destroy(reused));
    CHECK_OK(tess_gpu->event_destroy(t1));
    CHECK_OK(tess_gpu->event_destroy(plain));
    tess_gpu_fini();
}

static _Atomic int notified;

static void notify_fn(void)
{
    atomic_fetch_add(&notified, 1);
}

static void test_notify_and_destroy(void)
{
    be_init(2, 0, 0);
    tess_gpu_stream_h s = tess_gpu_pool_stream(0), tmp;
    tess_gpu_event_h  e;
    gate_t            g    = {0};
    _Atomic int       flag = 0;
    atomic_store(&notified, 0);
    CHECK_OK(tess_gpu->event_create(0, &e));
    tess_gpu->set_notify(notify_fn);
    CHECK_OK(tess_gpu->event_record(e, s));
    CHECK_OK(tess_gpu->event_sync(e));
    WAIT_UNTIL(atomic_load(&notified) == 1);
    tess_gpu->set_notify(NULL);
    CHECK_OK(tess_gpu->event_record(e, s));
    CHECK_OK(tess_gpu->stream_sync(s));
    usleep(10000);
    CHECK(atomic_load(&notified) == 1);

    /* A destroyed stream still runs what it had queued (cudaStreamDestroy). */
    CHECK_OK(tess_gpu->stream_create(&tmp));
    CHECK(tess_gpu->native_stream(tmp) == (void *)tmp);
    launch_gate(tmp, &g);
    launch_set(tmp, &flag);
    CHECK_OK(tess_gpu->event_record(e, tmp));
    CHECK_OK(tess_gpu->stream_destroy(tmp));
    CHECK(atomic_load(&flag) == 0);
    open_gate(&g);
    CHECK_OK(tess_gpu->event_sync(e));
    CHECK(atomic_load(&flag) == 1);
    CHECK_ST(tess_gpu->stream_destroy(NULL), TESS_ERR_INVALID);
    CHECK_OK(tess_gpu->event_destroy(e));

    /* Properties. */
    tess_gpu_props_t props;
    CHECK(tess_gpu->device_count() == 1);
    CHECK_OK(tess_gpu->get_props(0, &props));
    CHECK(!strcmp(props.name, "Tessera host backend"));
    CHECK(props.multiprocessors == 2 && props.ipc == 1 && props.wait_value == 0);
    CHECK(props.total_mem > (1ul << 20));
    CHECK_ST(tess_gpu->get_props(1, &props), TESS_ERR_INVALID);
    CHECK_ST(tess_gpu->set_device(1), TESS_ERR_INVALID);
    tess_gpu_fini();
}

int main(void)
{
    gh_start("test_gpu_host");
    test_allocator();
    printf("allocator ok\n");
    test_stream_order(1, 0, 1000);
    test_stream_order(2, 0, 2000);
    printf("stream order ok\n");
    test_pipeline(2, 0, 2000);
    test_pipeline(3, 0, 500);
    printf("pipeline ok\n");
    test_concurrency();
    test_wait_captures();
    printf("concurrency and wait semantics ok\n");
    test_memops();
    test_free_drains();
    printf("memory operations ok\n");
    test_launch_args();
    test_timing();
    test_notify_and_destroy();
    printf("launch arguments, timing, notify, destroy ok\n");
    test_stream_order(2, 50 + env_jitter, 150);
    test_pipeline(2, 50 + env_jitter, 150);
    printf("jitter ok\n");
    gh_check_no_segments();
    printf("test_gpu_host: all passed\n");
    return 0;
}

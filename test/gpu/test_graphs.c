/*
 * test_graphs: step graphs (tess_gpu_graph_run), written for any backend: the "kernels" are
 * host functions on pinned host memory, and the device data moves with copies, all of them
 * recorded into the graphs.
 *
 * Every element runs STEPS steps. A step copies its number into a device word (outside the
 * graphs: the value that changes every step, read by the recorded work from device memory),
 * then runs three graphs:
 *   slot 0 (key 0)   acc += 1, += 2, += 3 on a device buffer (copy in, three kernels, copy out);
 *                    at step RESET the element switches to another buffer and calls
 *                    tess_gpu_graph_reset: a stale replay would go on adding to the first one;
 *   slot 1 (key n)   rng[0, n) += 1 with n changing at steps RNG_AT and RNG_BACK: a stale
 *                    replay writes the old range; back to the first n before RESET, whose
 *                    graph the slot still holds (replayed at once);
 *   slot 2 (key 0)   a device-to-device copy of acc, and out[step] = acc[0] (the step read from
 *                    the device word): ordered after slot 0's replay.
 * Then, outside the graphs, out[step] goes to the device and to the next element by a device
 * message, and a continuation checks out[step] (both ordered after the replays); the next step
 * starts once the continuation ran and the send is done (its buffer may then go: migration). The record
 * functions count their calls; the test predicts the count from the rule (where the slot holds
 * no graph of the key, after a key change or a drop: reset, migration, a call directly at the
 * key's first call and one recording at its second) or, with TESS_GRAPHS=0 or TESS_CHECK=1, one
 * a call.
 *
 * args="migrate": every third step the element migrates to the next PE (across PEs and, under
 * mpirun, processes). Within a process the runtime keeps its device buffer and stream, but the
 * pinned host buffer the graphs captured is allocated anew on arrival, while the old one is
 * kept until the step ends (so the address changes: checked): a replay of a graph recorded
 * before would work on the old one, and the new one would miss the step's results. Between
 * processes everything is new (graphs never travel).
 *
 * args="<misuse>": the misuse entries of test/misuse (each call at a fixed #line).
 */
#include "tess_test.h"

#include <tessera/gpu.h>

#define STEPS    24
#define RESET    12
#define RNG_AT   8
#define RNG_BACK 10
#define N0       64
#define N1       40
#define N2       96

/* The device buffer, in int64 words. */
enum { D_ACC = 0, D_ACC_B = D_ACC + N0, D_COPY = D_ACC_B + N0, D_RNG = D_COPY + N0,
       D_STEP = D_RNG + N2, D_OUT = D_STEP + 1, D_RECV = D_OUT + STEPS, D_WORDS = D_RECV + STEPS };

/* Pinned host memory the kernels work on. */
typedef struct hbuf {
    int64_t acc[N0], rng[N2], step, acc0, out[STEPS], steps[STEPS];
} hbuf_t;

typedef struct elem {
    int64_t  id;
    int64_t *dev;         /* D_WORDS */
    hbuf_t  *h;
    int      use_b;       /* slot 0 works on D_ACC_B (from step RESET) */
    int      step, moves, arrived, recvs, errors;
    int      checked, sent; /* this step's continuation ran; its device send is done */
    hbuf_t  *h_old;       /* the host buffer before the last migration within the process */
    int      keep_old;    /* the last migration stayed in the process: h_old is still ours */
    int      free_old;    /* h_old is to be freed at the end of this step */
    int64_t  records[3], expected[3];
    /* The test's model of the slots (at most 2 keys a slot here: below what a slot keeps, so
     * nothing is evicted): the keys a slot holds graphs of, and those whose first call ran
     * directly. */
    int      nkeys[3], nseen[3];
    uint64_t keys[3][2], seen[3][2];
} elem_t;

static tess_array_h arr;
static tess_entry_t E_STEP, E_AFTER, E_SENT, E_RECV, E_NOOP;
static int64_t      n;
static int          migrate_mode, graphs_on = 1, check_on;
static const char  *misuse;

/* ---- kernels (host functions on pinned memory) ----------------------------------------------- */

typedef struct add_args {
    int64_t *buf;
    int64_t  n, v;
} add_args_t;

static void k_add(void *a)
{
    add_args_t *k = a;
    for (int64_t i = 0; i < k->n; i++)
        k->buf[i] += k->v;
}

static void k_out(void *a)
{
    hbuf_t *h = *(hbuf_t **)a;
    if (h->step >= 0 && h->step < STEPS)
        h->out[h->step] = h->acc0;
}

static void add(tess_stream_t s, int64_t *buf, int64_t count, int64_t v)
{
    add_args_t k = {buf, count, v};
    CHECK_OK(tess_gpu_launch_host(s, k_add, &k, sizeof(k)));
}

/* ---- the record functions ------------------------------------------------------------------- */

static int64_t *acc_of(elem_t *e) { return e->dev + (e->use_b ? D_ACC_B : D_ACC); }

static void rec_acc(tess_ctx_h ctx, void *p, void *arg)
{
    (void)arg;
    elem_t       *e = p;
    tess_stream_t s = tess_ctx_stream(ctx);
    e->records[0]++;
    CHECK_OK(tess_gpu_memcpy_async(e->h->acc, acc_of(e), N0 * 8, s));
    for (int j = 1; j <= 3; j++)
        add(s, e->h->acc, N0, j);
    CHECK_OK(tess_gpu_memcpy_async(acc_of(e), e->h->acc, N0 * 8, s));
}

static void rec_rng(tess_ctx_h ctx, void *p, void *arg)
{
    elem_t       *e = p;
    tess_stream_t s = tess_ctx_stream(ctx);
    int64_t       w = *(int64_t *)arg;
    e->records[1]++;
    CHECK_OK(tess_gpu_memcpy_async(e->h->rng, e->dev + D_RNG, (size_t)w * 8, s));
    add(s, e->h->rng, w, 1);
    CHECK_OK(tess_gpu_memcpy_async(e->dev + D_RNG, e->h->rng, (size_t)w * 8, s));
}

static void rec_out(tess_ctx_h ctx, void *p, void *arg)
{
    (void)arg;
    elem_t       *e = p;
    tess_stream_t s = tess_ctx_stream(ctx);
    e->records[2]++;
    CHECK_OK(tess_gpu_memcpy_async(e->dev + D_COPY, acc_of(e), N0 * 8, s));
    CHECK_OK(tess_gpu_memcpy_async(&e->h->step, e->dev + D_STEP, 8, s));
    CHECK_OK(tess_gpu_memcpy_async(&e->h->acc0, acc_of(e), 8, s));
    hbuf_t *h = e->h;
    CHECK_OK(tess_gpu_launch_host(s, k_out, &h, sizeof(h)));
}

/* The test's model: the record function runs when the slot holds no graph of this key (the
 * key's first call directly, its second recorded into the slot, which keeps the graphs of
 * several keys), and at every call with graphs off or checked. */
static void expect_run(elem_t *e, int slot, uint64_t key)
{
    if (!graphs_on || check_on) {
        e->expected[slot]++;
        return;
    }
    for (int i = 0; i < e->nkeys[slot]; i++)
        if (e->keys[slot][i] == key)
            return; /* replayed */
    e->expected[slot]++;
    for (int i = 0; i < e->nseen[slot]; i++)
        if (e->seen[slot][i] == key) { /* recorded */
            e->seen[slot][i] = e->seen[slot][--e->nseen[slot]];
            CHECK(e->nkeys[slot] < 2);
            e->keys[slot][e->nkeys[slot]++] = key;
            return;
        }
    CHECK(e->nseen[slot] < 2);
    e->seen[slot][e->nseen[slot]++] = key; /* run directly */
}

static void expect_drop(elem_t *e)
{
    memset(e->nkeys, 0, sizeof(e->nkeys));
    memset(e->nseen, 0, sizeof(e->nseen));
}

/* ---- the element ---------------------------------------------------------------------------- */

static int64_t rng_width(int s) { return s >= RNG_AT && s < RNG_BACK ? N2 : N1; }

/* What out[s] holds after step s: acc[0] of the buffer in use. */
static int64_t out_value(int s) { return 6 * (s < RESET ? s + 1 : s + 1 - RESET); }

static void host_alloc(elem_t *e)
{
    CHECK_OK(tess_gpu_malloc_host((void **)&e->h, sizeof(hbuf_t)));
    memset(e->h, 0, sizeof(hbuf_t));
    for (int s = 0; s < STEPS; s++)
        e->h->steps[s] = s;
}

static void ctor(tess_ctx_h ctx, void *p, void *arg)
{
    (void)arg;
    elem_t *e = p;
    e->id     = tess_ctx_linear(ctx);
    CHECK_OK(tess_gpu_malloc((void **)&e->dev, D_WORDS * 8));
    host_alloc(e);
    CHECK_OK(tess_gpu_memset_async(e->dev, 0, D_WORDS * 8, tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
}

static void dtor(tess_ctx_h ctx, void *p, void *arg)
{
    (void)ctx;
    (void)arg;
    elem_t *e = p;
    tess_gpu_free(e->dev);
    tess_gpu_free_host(e->h);
}

static void pup(tess_pup_h p, tess_ctx_h ctx, void *elem)
{
    (void)ctx;
    elem_t *e = elem;
    if (tess_pup_is_unpacking(p)) {
        host_alloc(e);
        e->arrived = 1;
    }
    tess_pup_bytes(p, e->h->out, sizeof(e->h->out));
    tess_pup_device(p, (void **)&e->dev, D_WORDS * 8);
    if (tess_pup_is_packing(p)) {
        if (!e->keep_old)
            tess_gpu_free_host(e->h);
        e->h = NULL;
    }
}

static void fail(elem_t *e, const char *what, int64_t got, int64_t want)
{
    if (e->errors++ < 5)
        fprintf(stderr, "element %lld step %d: %s is %lld, expected %lld\n", (long long)e->id,
                e->step, what, (long long)got, (long long)want);
}

static void sent_done(void *arg);

static void step(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    elem_t       *e = p;
    int           s = e->step;
    tess_stream_t st = tess_ctx_stream(ctx);
    if (e->arrived) {
        e->arrived = 0;
        expect_drop(e);
        if (e->keep_old) {
            if (e->h == e->h_old)
                fail(e, "the host buffer's address after a migration (unchanged)", 0, 1);
            e->free_old = 1;
        }
    }
    if (s == RESET) {
        e->use_b = 1; /* a pointer the graphs captured changes: forget them */
        CHECK_OK(tess_gpu_graph_reset(ctx));
        expect_drop(e);
    }
    CHECK_OK(tess_gpu_memcpy_async(e->dev + D_STEP, &e->h->steps[s], 8, st));
    CHECK_OK(tess_gpu_graph_run(ctx, 0, 0, rec_acc, NULL));
    expect_run(e, 0, 0);
    int64_t w = rng_width(s);
    CHECK_OK(tess_gpu_graph_run(ctx, 1, (uint64_t)w, rec_rng, &w));
    expect_run(e, 1, (uint64_t)w);
    CHECK_OK(tess_gpu_graph_run(ctx, 2, 0, rec_out, NULL));
    expect_run(e, 2, 0);
    /* After the replays, in stream order: the step's result to the device and the next
     * element, and a continuation that reads it. */
    CHECK_OK(tess_gpu_memcpy_async(e->dev + D_OUT + s, &e->h->out[s], 8, st));
    tess_dev_buf_t b = {e->dev + D_OUT + s, 8};
    CHECK_OK(tess_send_device(arr, tess_idx1((int32_t)((e->id + 1) % n)), E_RECV, &s, sizeof(s),
                              &b, 1, NULL, sent_done, (void *)(intptr_t)e->id));
    CHECK_OK(tess_gpu_then(ctx, E_AFTER, NULL, 0));
}

/* The send's buffer may be freed (a migration frees the old device buffer) once it is done:
 * the element goes on when both its continuation ran and its send is done. */
static void sent_done(void *arg)
{
    CHECK_OK(tess_send(arr, tess_idx1((int32_t)(intptr_t)arg), E_SENT, NULL, 0));
}

static void next(tess_ctx_h ctx, elem_t *e);

static void after(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    elem_t *e = p;
    int     s = e->step;
    if (e->h->out[s] != out_value(s))
        fail(e, "out (read by a continuation after the replay)", e->h->out[s], out_value(s));
    e->checked = 1;
    next(ctx, e);
}

static void sent(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    elem_t *e = p;
    e->sent   = 1;
    next(ctx, e);
}

static void next(tess_ctx_h ctx, elem_t *e)
{
    int s = e->step;
    if (!e->checked || !e->sent)
        return;
    e->checked = e->sent = 0;
    if (e->free_old) {
        tess_gpu_free_host(e->h_old);
        e->free_old = 0;
    }
    e->step++;
    if (e->step == STEPS)
        return;
    if (migrate_mode && s % 3 == 2 && tess_num_pes() > 1) {
        int dest    = (tess_pe() + 1) % tess_num_pes();
        e->h_old    = e->h;
        e->keep_old = tess_pe_process(dest) == tess_process();
        e->moves++;
        CHECK_OK(tess_migrate(ctx, dest));
    }
    CHECK_OK(tess_send(arr, tess_idx1((int32_t)e->id), E_STEP, NULL, 0));
}

static void recv_post(tess_ctx_h ctx, void *p, const void *header, size_t header_len, int nbufs,
                      const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx;
    (void)stream_p;
    elem_t *e = p;
    int     s;
    CHECK(header_len == sizeof(s) && nbufs == 1 && sizes[0] == 8);
    memcpy(&s, header, sizeof(s));
    CHECK(s >= 0 && s < STEPS);
    dst[0] = e->dev + D_RECV + s;
}

static void recv(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)ctx;
    (void)msg;
    (void)size;
    ((elem_t *)p)->recvs++;
}

static void noop(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)ctx;
    (void)p;
    (void)msg;
    (void)size;
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() != 0)
        return;
    for (int64_t i = 0; i < n; i++)
        CHECK_OK(tess_send(arr, tess_idx1((int32_t)i), E_STEP, NULL, 0));
}

static int64_t sums[4];
static void final_check(tess_ctx_h ctx, void *p, void *arg)
{
    (void)arg;
    elem_t  *e = p;
    int64_t *d = malloc(D_WORDS * 8);
    CHECK(d);
    CHECK_OK(tess_gpu_memcpy_async(d, e->dev, D_WORDS * 8, tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
    CHECK(e->step == STEPS);
    for (int i = 0; i < N0; i++) {
        if (d[D_ACC + i] != 6 * RESET)
            fail(e, "acc A", d[D_ACC + i], 6 * RESET);
        if (d[D_ACC_B + i] != 6 * (STEPS - RESET))
            fail(e, "acc B", d[D_ACC_B + i], 6 * (STEPS - RESET));
        if (d[D_COPY + i] != 6 * (STEPS - RESET))
            fail(e, "the copy of acc", d[D_COPY + i], 6 * (STEPS - RESET));
    }
    for (int i = 0; i < N2; i++) {
        int64_t want = 0;
        for (int s = 0; s < STEPS; s++)
            want += i < rng_width(s);
        if (d[D_RNG + i] != want)
            fail(e, "rng", d[D_RNG + i], want);
    }
    for (int s = 0; s < STEPS; s++) {
        if (d[D_OUT + s] != out_value(s))
            fail(e, "out", d[D_OUT + s], out_value(s));
        if (d[D_RECV + s] != out_value(s))
            fail(e, "the received out", d[D_RECV + s], out_value(s));
    }
    if (e->recvs != STEPS)
        fail(e, "the messages received", e->recvs, STEPS);
    for (int k = 0; k < 3; k++)
        if (e->records[k] != e->expected[k]) {
            char what[64];
            snprintf(what, sizeof(what), "the record calls of slot %d", k);
            fail(e, what, e->records[k], e->expected[k]);
        }
    sums[0] += e->errors;
    sums[1] += e->moves;
    sums[2] += e->records[0] + e->records[1] + e->records[2];
    sums[3] += 3 * STEPS;
    free(d);
}

/* ---- misuse ----------------------------------------------------------------------------------- */

static void rec_misuse(tess_ctx_h ctx, void *p, void *arg)
{
    (void)arg;
    elem_t       *e = p;
    tess_stream_t s = tess_ctx_stream(ctx);
    add(s, e->h->acc, N0, 1);
    tess_dev_buf_t b = {e->dev, 8};
    if (!strcmp(misuse, "send_device")) {
#line 8001
        tess_send_device(arr, tess_idx1(0), E_RECV, &e->step, sizeof(e->step), &b, 1, NULL, NULL, NULL);
    } else if (!strcmp(misuse, "then")) {
#line 8101
        tess_gpu_then(ctx, E_NOOP, NULL, 0);
    } else if (!strcmp(misuse, "sync")) {
        tess_gpu_stream_sync(s);
    } else if (!strcmp(misuse, "nested")) {
#line 8301
        tess_gpu_graph_run(ctx, 1, 0, rec_acc, NULL);
    } else if (!strcmp(misuse, "send")) {
#line 8401
        tess_send(arr, tess_idx1(0), E_NOOP, NULL, 0);
    }
}

/* A per-step value baked into a kernel's arguments: the graph keeps the first step's. */
static void rec_stale(tess_ctx_h ctx, void *p, void *arg)
{
    elem_t *e = p;
    add(tess_ctx_stream(ctx), e->h->acc, N0, *(int *)arg);
}

static void misuse_step(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    elem_t *e = p;
    if (!strcmp(misuse, "stale")) {
        for (int s = 0; s < 3; s++) {
#line 8501
            CHECK_OK(tess_gpu_graph_run(ctx, 0, 0, rec_stale, &s));
        }
    } else {
#line 8201
        CHECK_OK(tess_gpu_graph_run(ctx, 0, 0, rec_misuse, NULL));
    }
    (void)e;
}
#line 400

static void misuse_start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        CHECK_OK(tess_send(arr, tess_idx1(1), E_STEP, NULL, 0));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    const char *mode = argc > 1 ? argv[1] : "run";
    const char *g    = getenv("TESS_GRAPHS");
    const char *c    = getenv("TESS_CHECK");
    graphs_on        = !(g && !strcmp(g, "0"));
    check_on         = c && !strcmp(c, "1");
    migrate_mode     = !strcmp(mode, "migrate");
    if (strcmp(mode, "run") && !migrate_mode)
        misuse = mode;
    n = 2 * (int64_t)tess_num_pes() + 1;
    CHECK_OK(tess_entry_register("step", misuse ? misuse_step : step, &E_STEP));
    CHECK_OK(tess_entry_register("after", after, &E_AFTER));
    CHECK_OK(tess_entry_register("sent", sent, &E_SENT));
    CHECK_OK(tess_entry_register_device("recv", recv_post, recv, 0, &E_RECV));
    CHECK_OK(tess_entry_register("noop", noop, &E_NOOP));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR |
                                           TESS_ARRAY_FIELD_PUP | TESS_ARRAY_FIELD_MAP,
                             .name = "graphs", .ndims = 1, .extents = {(int32_t)n},
                             .elem_size = sizeof(elem_t), .ctor = ctor, .dtor = dtor, .pup = pup,
                             .map = TESS_MAP_ROUND_ROBIN};
    CHECK_OK(tess_array_create(&p, &arr));
    if (misuse) {
        CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, misuse_start, NULL));
        test_fini();
        printf("misuse %s: not caught\n", misuse);
        return 1;
    }
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    CHECK_OK(tess_array_foreach(arr, final_check, NULL));
    int64_t all[4];
    MPI_Allreduce(sums, all, 4, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK_MSG(all[0] == 0, "%lld errors", (long long)all[0]);
    CHECK(!migrate_mode || tess_num_pes() == 1 || all[1] > 0);
    if (tess_process() == 0)
        printf("graphs: %lld elements x %d steps x 3 slots, %lld record calls for %lld runs, "
               "%lld migrations, results right (graphs %s, check %s, %s backend)\n",
               (long long)n, STEPS, (long long)all[2], (long long)all[3], (long long)all[1],
               graphs_on ? "on" : "off", check_on ? "on" : "off", tess_gpu_backend_name());
    test_fini();
    return 0;
}

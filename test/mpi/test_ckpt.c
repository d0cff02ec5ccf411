/* test_ckpt — checkpoint and restart of two arrays: "cells" (1-D, a PUP function with host
 * bytes and two device buffers of sizes that differ by element, some empty) and "plain" (2-D,
 * state bytes only). Each step is a phase: every element changes its state (host and device)
 * and sends its value to its right neighbour, which adds it up. The expected state of every
 * element after any number of steps comes from a serial model of the same updates.
 *
 *   test_ckpt run DIR steps=S [every=E] [kill=K:R] [killbg=K:R] [scribble] [ioerr=R:B]
 *       S steps, a checkpoint every E; with kill, process R kills itself with SIGKILL in the
 *       middle of checkpoint K (its snapshot); with killbg, right after tess_checkpoint K
 *       returned (its background write under way: run with TESS_CKPT_WRITE_DELAY_MS); with
 *       scribble, every cell's host bytes and device buffers (on its stream) are overwritten
 *       right after the last checkpoint returns, and the run ends there (a restart from it must
 *       give the uninterrupted run's digest), after checking what tess_checkpoint_info says of
 *       a checkpoint still being written; with ioerr, process R's files may not grow past B
 *       bytes (RLIMIT_FSIZE) for the first checkpoint, whose failure (EFBIG) must be reported by
 *       tess_checkpoint, or in the background by tess_checkpoint_wait; the run goes on
 *       Also for run: with fill, device memory is filled up to TESS_HOST_DEVICE_MEMORY (where
 *       that is set) once
 *       the arrays are made (less than one allocation's alignment left: no room for a
 *       snapshot), and pinned host memory up to TESS_HOST_PINNED_MEMORY if that is set; with
 *       killtimer=K:R, process R kills itself with SIGKILL 300 ms after tess_checkpoint K
 *       began, whether it returned by then or not; with showinfo, process 0 prints what
 *       tess_checkpoint_info says right after each tess_checkpoint returns.
 *   test_ckpt restart DIR [every=E]                   continue from DIR's current checkpoint
 *   test_ckpt refuse DIR [prog=P] [extraentry] [bigger] [cells=N]
 *                                                     tess_restart must fail; every element
 *                                                     must still be as constructed
 * run and restart check every element against the model after the last step (restart also
 * right after loading) and print "RESULT step=S digest=D". TEST_CKPT_RANK_ENV=R:VAR=VALUE[,...]
 * sets each VAR on process R only, before tess_init (one process's options unlike the others':
 * the same on every MPI). Driven by test/mpi/check-ckpt and check-ckpt-fallback. */
#include "tess_test.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#define NCELLS_DEFAULT 24
#define PLAIN_X        3
#define PLAIN_Y        5

typedef struct cell {
    uint64_t  value, acc;
    uint32_t  hn, dn[2];
    uint64_t *host;
    uint64_t *dev[2];
} cell_t;

typedef struct plain {
    uint64_t v;
    double   w;
} plain_t;

typedef struct user_state {
    int32_t done, total, ncells, pad;
} user_state_t;

static tess_array_h cells, plain;
static tess_entry_t E_CSTEP, E_CRECV, E_PSTEP, E_EXTRA;
static int32_t      ncells = NCELLS_DEFAULT;
static int          kill_step = -1, kill_rank = -1, ckpt_now = 0, ckpt_count = 0;
static int          killbg_step = -1, killbg_rank = -1, scribble = 0, ioerr_rank = -1;
static long         ioerr_bytes = 0;
static int          killtimer_step = -1, killtimer_rank = -1, showinfo = 0;

/* ---- the model: initial state and one step, shared by elements and the serial model ---- */

static uint32_t cell_hn(int64_t l) { return (uint32_t)(1 + l % 4); }
static uint32_t cell_dn(int64_t l, int k)
{
    return k == 0 ? (uint32_t)(16 + 64 * (l % 3)) : l % 5 == 0 ? 0 : (uint32_t)(8 * (1 + l % 2));
}
static uint64_t cell_init_host(int64_t l, uint32_t i) { return test_mix((uint64_t)l * 100 + i); }
static uint64_t cell_init_dev(int64_t l, int k, uint32_t i)
{
    return test_mix((uint64_t)l * 1000 + (uint64_t)k * 100 + i + 7);
}

static void cell_step_words(uint64_t *v, uint64_t *h, uint32_t hn, uint64_t *d[2],
                            const uint32_t dn[2], int s)
{
    *v = test_mix(*v ^ (uint64_t)s);
    for (uint32_t i = 0; i < hn; i++)
        h[i] = test_mix(h[i] + (uint64_t)s);
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; i < dn[k]; i++)
            d[k][i] = test_mix(d[k][i] ^ (uint64_t)(s + k));
}

static void plain_step(plain_t *p, int s)
{
    p->v = test_mix(p->v + (uint64_t)s);
    p->w = p->w * 0.5 + s;
}

static uint64_t digest_words(uint64_t h, const uint64_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = test_mix(h ^ w[i]);
    return h;
}

/* The serial model of every element after `steps` steps: digests by linear index. */
static void model_digests(int steps, uint64_t *cd, uint64_t *pd)
{
    cell_t *m = calloc((size_t)ncells, sizeof(*m));
    CHECK(m);
    for (int64_t l = 0; l < ncells; l++) {
        m[l].value = test_mix((uint64_t)l + 1);
        m[l].hn    = cell_hn(l);
        m[l].host  = malloc(m[l].hn * 8);
        for (uint32_t i = 0; i < m[l].hn; i++)
            m[l].host[i] = cell_init_host(l, i);
        for (int k = 0; k < 2; k++) {
            m[l].dn[k]  = cell_dn(l, k);
            m[l].dev[k] = malloc(m[l].dn[k] * 8 + 8);
            for (uint32_t i = 0; i < m[l].dn[k]; i++)
                m[l].dev[k][i] = cell_init_dev(l, k, i);
        }
    }
    for (int s = 1; s <= steps; s++) {
        for (int64_t l = 0; l < ncells; l++)
            cell_step_words(&m[l].value, m[l].host, m[l].hn, m[l].dev, m[l].dn, s);
        for (int64_t l = 0; l < ncells; l++)
            m[(l + 1) % ncells].acc += m[l].value;
    }
    for (int64_t l = 0; l < ncells; l++) {
        uint64_t h = test_mix(m[l].value ^ 0x51);
        h          = test_mix(h ^ m[l].acc);
        h          = digest_words(h, m[l].host, m[l].hn);
        h          = digest_words(h, m[l].dev[0], m[l].dn[0]);
        cd[l]      = digest_words(h, m[l].dev[1], m[l].dn[1]);
        free(m[l].host);
        free(m[l].dev[0]);
        free(m[l].dev[1]);
    }
    free(m);
    for (int64_t l = 0; l < PLAIN_X * PLAIN_Y; l++) {
        plain_t p = {test_mix((uint64_t)l + 7), (double)l};
        for (int s = 1; s <= steps; s++)
            plain_step(&p, s);
        uint64_t w;
        memcpy(&w, &p.w, 8);
        pd[l] = test_mix(test_mix(p.v) ^ w);
    }
}

/* ---- the elements ---------------------------------------------------------------------------- */

static void dev_get(uint64_t *dst, const uint64_t *src, uint32_t n, tess_stream_t s)
{
    if (!n)
        return;
    CHECK_OK(tess_gpu_memcpy_async(dst, src, n * 8, s));
    CHECK_OK(tess_gpu_stream_sync(s));
}

static void dev_put(uint64_t *dst, const uint64_t *src, uint32_t n, tess_stream_t s)
{
    if (!n)
        return;
    CHECK_OK(tess_gpu_memcpy_async(dst, src, n * 8, s));
    CHECK_OK(tess_gpu_stream_sync(s));
}

static void cell_ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    cell_t *c = e;
    int64_t l = tess_ctx_linear(ctx);
    c->value  = test_mix((uint64_t)l + 1);
    c->hn     = cell_hn(l);
    c->host   = malloc(c->hn * 8);
    CHECK(c->host);
    for (uint32_t i = 0; i < c->hn; i++)
        c->host[i] = cell_init_host(l, i);
    uint64_t tmp[256];
    for (int k = 0; k < 2; k++) {
        c->dn[k]  = cell_dn(l, k);
        c->dev[k] = NULL;
        if (!c->dn[k])
            continue;
        CHECK_OK(tess_gpu_malloc((void **)&c->dev[k], c->dn[k] * 8));
        for (uint32_t i = 0; i < c->dn[k]; i++)
            tmp[i] = cell_init_dev(l, k, i);
        dev_put(c->dev[k], tmp, c->dn[k], tess_ctx_stream(ctx));
    }
}

static void cell_dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx, (void)arg;
    cell_t *c = e;
    free(c->host);
    for (int k = 0; k < 2; k++)
        if (c->dev[k])
            tess_gpu_free(c->dev[k]);
}

static void cell_pup(tess_pup_h p, tess_ctx_h ctx, void *e)
{
    cell_t *c = e;
    if (tess_pup_is_checkpointing(p) && ckpt_now == kill_step && tess_process() == kill_rank &&
        ++ckpt_count == 2) {
        printf("test_ckpt: process %d kills itself in checkpoint %d\n", kill_rank, kill_step);
        fflush(stdout);
        raise(SIGKILL);
    }
    if (tess_pup_is_unpacking(p))
        c->host = malloc(c->hn * 8);
    tess_pup_bytes(p, c->host, c->hn * 8);
    if (tess_pup_is_packing(p))
        free(c->host);
    (void)ctx;
    for (int k = 0; k < 2; k++)
        tess_pup_device(p, (void **)&c->dev[k], c->dn[k] * 8);
}

static uint64_t cell_digest(tess_ctx_h ctx, const cell_t *c)
{
    uint64_t tmp[2][256];
    for (int k = 0; k < 2; k++)
        dev_get(tmp[k], c->dev[k], c->dn[k], tess_ctx_stream(ctx));
    uint64_t h = test_mix(c->value ^ 0x51);
    h          = test_mix(h ^ c->acc);
    h          = digest_words(h, c->host, c->hn);
    h          = digest_words(h, tmp[0], c->dn[0]);
    return digest_words(h, tmp[1], c->dn[1]);
}

static void on_cstep(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    cell_t  *c = e;
    int      s = *(const int *)msg;
    uint64_t tmp[2][256], *d[2] = {tmp[0], tmp[1]};
    for (int k = 0; k < 2; k++)
        dev_get(tmp[k], c->dev[k], c->dn[k], tess_ctx_stream(ctx));
    cell_step_words(&c->value, c->host, c->hn, d, c->dn, s);
    for (int k = 0; k < 2; k++)
        dev_put(c->dev[k], tmp[k], c->dn[k], tess_ctx_stream(ctx));
    int64_t l = tess_ctx_linear(ctx);
    CHECK_OK(tess_send(cells, tess_idx1((int32_t)((l + 1) % ncells)), E_CRECV, &c->value, 8));
}

static void on_crecv(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx, (void)size;
    cell_t  *c = e;
    uint64_t v;
    memcpy(&v, msg, 8);
    c->acc += v;
}

static void plain_ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    plain_t *p = e;
    int64_t  l = tess_ctx_linear(ctx);
    p->v       = test_mix((uint64_t)l + 7);
    p->w       = (double)l;
}

static void on_pstep(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx, (void)size;
    plain_step(e, *(const int *)msg);
}

static void on_extra(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx, (void)e, (void)msg, (void)size;
}

static int step_now;
static void start_step(void *arg)
{
    (void)arg;
    if (tess_process() == 0) {
        CHECK_OK(tess_broadcast(cells, E_CSTEP, &step_now, sizeof(step_now)));
        CHECK_OK(tess_broadcast(plain, E_PSTEP, &step_now, sizeof(step_now)));
    }
}

typedef struct digests {
    uint64_t *got;
    uint8_t  *has;
} digests_t;

static void cell_digest_fn(tess_ctx_h ctx, void *e, void *arg)
{
    digests_t *d = arg;
    int64_t    l = tess_ctx_linear(ctx);
    d->got[l]    = cell_digest(ctx, e);
    d->has[l]    = 1;
}

/* Every local element against the model after `steps` steps; returns the XOR of all digests
 * (the same on every process). */
static uint64_t check_all(int steps, const char *when)
{
    uint64_t *cd = malloc((size_t)ncells * 8), pd[PLAIN_X * PLAIN_Y];
    CHECK(cd);
    model_digests(steps, cd, pd);
    uint64_t x = 0;
    int      bad = 0;
    uint64_t *got = calloc((size_t)ncells, 8);
    uint8_t  *has = calloc((size_t)ncells, 1);
    CHECK(got && has);
    digests_t dg = {got, has};
    CHECK_OK(tess_array_foreach(cells, cell_digest_fn, &dg));
    for (int32_t l = 0; l < ncells; l++) {
        if (!has[l])
            continue;
        if (got[l] != cd[l]) {
            fprintf(stderr, "%s: cell %d differs from the model after %d steps\n", when, l,
                    steps);
            bad++;
        }
        x ^= got[l];
    }
    free(got);
    free(has);
    for (int32_t i = 0; i < PLAIN_X; i++)
        for (int32_t j = 0; j < PLAIN_Y; j++) {
            plain_t *p = tess_array_local(plain, tess_idx2(i, j));
            if (!p)
                continue;
            uint64_t w;
            memcpy(&w, &p->w, 8);
            uint64_t h = test_mix(test_mix(p->v) ^ w);
            if (h != pd[i * PLAIN_Y + j]) {
                fprintf(stderr, "%s: plain (%d,%d) differs from the model\n", when, i, j);
                bad++;
            }
            x ^= h;
        }
    free(cd);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
    CHECK_MSG(bad == 0, "%d elements differ from the model (%s)", bad, when);
    return x;
}

static void make_arrays(int bigger, int extra)
{
    CHECK_OK(tess_entry_register("cstep", on_cstep, &E_CSTEP));
    CHECK_OK(tess_entry_register("crecv", on_crecv, &E_CRECV));
    CHECK_OK(tess_entry_register("pstep", on_pstep, &E_PSTEP));
    if (extra)
        CHECK_OK(tess_entry_register("extra", on_extra, &E_EXTRA));
    tess_array_params_t cp = {
        .field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR | TESS_ARRAY_FIELD_PUP |
                      TESS_ARRAY_FIELD_MAP,
        .name = "cells", .ndims = 1, .extents = {ncells},
        .elem_size = sizeof(cell_t) + (bigger ? 8 : 0), .ctor = cell_ctor, .dtor = cell_dtor,
        .pup = cell_pup, .map = TESS_MAP_ROUND_ROBIN};
    CHECK_OK(tess_array_create(&cp, &cells));
    tess_array_params_t pp = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "plain", .ndims = 2,
                              .extents = {PLAIN_X, PLAIN_Y}, .elem_size = sizeof(plain_t),
                              .ctor = plain_ctor};
    CHECK_OK(tess_array_create(&pp, &plain));
}

static void scribble_fn(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    cell_t  *c = e;
    uint64_t junk[256];
    for (int i = 0; i < 256; i++)
        junk[i] = 0xdeadbeefull * (uint64_t)(i + 1);
    c->value ^= 0x5555;
    c->acc ^= 0xaaaa;
    for (uint32_t i = 0; i < c->hn; i++)
        c->host[i] = junk[i];
    for (int k = 0; k < 2; k++)
        dev_put(c->dev[k], junk, c->dn[k], tess_ctx_stream(ctx)); /* on its stream, synced */
}

static void killtimer_fire(int sig)
{
    (void)sig;
    static const char m[] = "test_ckpt: kills itself 300 ms into a checkpoint\n";
    if (write(STDOUT_FILENO, m, sizeof(m) - 1) < 0) {
    }
    raise(SIGKILL);
}

static void checkpoint(const char *dir, int done, int total)
{
    user_state_t u = {done, total, ncells, 0};
    tess_ckpt_params_t cp = {.field_mask = TESS_CKPT_FIELD_PROGRAM | TESS_CKPT_FIELD_USER |
                                           TESS_CKPT_FIELD_STEP,
                             .dir = dir, .program = "test_ckpt", .user = &u,
                             .user_size = sizeof(u), .step = (uint64_t)done};
    ckpt_now   = done;
    ckpt_count = 0;
    int rank   = tess_process();
    if (ioerr_rank >= 0) { /* the first checkpoint fails on ioerr_rank, then the limit goes */
        struct rlimit rl;
        CHECK(getrlimit(RLIMIT_FSIZE, &rl) == 0);
        struct rlimit lim = rl;
        if (rank == ioerr_rank) {
            signal(SIGXFSZ, SIG_IGN); /* write fails with EFBIG instead */
            lim.rlim_cur = (rlim_t)ioerr_bytes;
            CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
        }
        const char   *by = "tess_checkpoint";
        tess_status_t st = tess_checkpoint(&cp);
        if (st == TESS_OK) {
            by = "tess_checkpoint_wait";
            st = tess_checkpoint_wait();
        }
        CHECK_MSG(st == TESS_ERR_SYSTEM, "a checkpoint past RLIMIT_FSIZE gave %s",
                  tess_status_string(st));
        if (rank == 0)
            printf("io error reported by %s (%s): %s\n", by, tess_status_string(st),
                   tess_error_detail());
        fflush(stdout);
        if (rank == ioerr_rank)
            CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
        ioerr_rank = -1;
        MPI_Barrier(MPI_COMM_WORLD);
        ckpt_now = 0;
        return;
    }
    if (done == killtimer_step && rank == killtimer_rank) {
        struct itimerval it = {.it_value = {0, 300000}};
        signal(SIGALRM, killtimer_fire);
        CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
    }
    CHECK_OK(tess_checkpoint(&cp));
    ckpt_now = 0;
    if (showinfo) {
        tess_ckpt_info_t info;
        CHECK_OK(tess_checkpoint_info(dir, "test_ckpt", NULL, 0, &info));
        if (rank == 0)
            printf("test_ckpt: checkpoint %d returned: current %llu, pending %llu\n", done,
                   (unsigned long long)info.step, (unsigned long long)info.pending);
    }
    if (done == killbg_step && rank == killbg_rank) {
        usleep(300000); /* the writer has created its file and waits (TESS_CKPT_WRITE_DELAY_MS) */
        printf("test_ckpt: process %d kills itself after checkpoint %d returned\n", rank, done);
        fflush(stdout);
        raise(SIGKILL);
    }
}

/* After the last checkpoint (S - 1) of a scribble run: what tess_checkpoint_info says while it
 * is written (TESS_CKPT_WRITE_DELAY_MS holds the writer back), then every cell overwritten. */
static void scribble_all(const char *dir, int done)
{
    tess_ckpt_info_t info;
    CHECK_OK(tess_checkpoint_info(dir, "test_ckpt", NULL, 0, &info));
    int bgmode = !getenv("TESS_CKPT_BACKGROUND") || atoi(getenv("TESS_CKPT_BACKGROUND"));
    if (tess_process() == 0)
        printf("test_ckpt: info after checkpoint %d returned: current %llu, pending %llu\n", done,
               (unsigned long long)info.step, (unsigned long long)info.pending);
    if (bgmode)
        CHECK_MSG(info.pending == (uint64_t)done && info.step < (uint64_t)done,
                  "info while checkpoint %d is written: step %llu pending %llu", done,
                  (unsigned long long)info.step, (unsigned long long)info.pending);
    else
        CHECK(info.pending == 0 && info.step == (uint64_t)done);
    CHECK_OK(tess_array_foreach(cells, scribble_fn, NULL));
    for (int32_t i = 0; i < PLAIN_X; i++)
        for (int32_t j = 0; j < PLAIN_Y; j++) {
            plain_t *p = tess_array_local(plain, tess_idx2(i, j));
            if (p)
                p->v ^= 0x77;
        }
}

static void run_steps(const char *dir, int from, int total, int every)
{
    for (int s = from + 1; s <= total; s++) {
        step_now = s;
        CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start_step, NULL));
        if (every && s % every == 0 && s < total) {
            checkpoint(dir, s, total);
            if (scribble && s + every >= total) {
                scribble_all(dir, s);
                return;
            }
        }
    }
}

/* Device memory filled up to TESS_HOST_DEVICE_MEMORY, and pinned host memory to
 * TESS_HOST_PINNED_MEMORY where that is set, halving the size asked down to the alignment; the
 * allocations stay until fill_free. Host backend only; nothing on a process without
 * TESS_HOST_DEVICE_MEMORY. */
#define FILL_MAX 256
static void *fill_ptr[2][FILL_MAX];
static int   fill_n[2];

static void fill_memory(void)
{
    if (!getenv("TESS_HOST_DEVICE_MEMORY"))
        return; /* a process without a limit (TEST_CKPT_RANK_ENV gave another one its limit) */
    CHECK_MSG(!strcmp(tess_gpu_backend_name(), "host"), "fill needs the host backend");
    for (int pinned = 0; pinned < 2; pinned++) {
        if (pinned && !getenv("TESS_HOST_PINNED_MEMORY"))
            break;
        size_t total = 0, n = 0;
        for (size_t size = (size_t)16 << 20; size >= 256; size /= 2) {
            void *p;
            while (fill_n[pinned] < FILL_MAX &&
                   (pinned ? tess_gpu_malloc_host(&p, size) : tess_gpu_malloc(&p, size)) ==
                       TESS_OK) {
                fill_ptr[pinned][fill_n[pinned]++] = p;
                total += size;
                n++;
            }
        }
        printf("test_ckpt: process %d filled %s memory: %zu more bytes in %zu allocations\n",
               tess_process(), pinned ? "pinned host" : "device", total, n);
    }
    fflush(stdout);
}

static void fill_free(void)
{
    for (int pinned = 0; pinned < 2; pinned++)
        for (int i = 0; i < fill_n[pinned]; i++)
            CHECK_OK(pinned ? tess_gpu_free_host(fill_ptr[pinned][i])
                            : tess_gpu_free(fill_ptr[pinned][i]));
}

/* As test_init, with TEST_CKPT_RANK_ENV=R:VAR=VALUE[,VAR=VALUE...] set on process R before
 * tess_init. */
static void init_rank_env(int *argc, char ***argv)
{
    const char *re = getenv("TEST_CKPT_RANK_ENV");
    if (!re) {
        test_init(argc, argv);
        return;
    }
    int provided, wrank, r, end = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    CHECK(provided >= MPI_THREAD_FUNNELED);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    CHECK_MSG(sscanf(re, "%d:%n", &r, &end) == 1 && end > 0,
              "TEST_CKPT_RANK_ENV=%s is not R:VAR=VALUE[,VAR=VALUE...]", re);
    if (wrank == r) {
        char list[512];
        snprintf(list, sizeof(list), "%s", re + end);
        for (char *save = NULL, *kv = strtok_r(list, ",", &save); kv;
             kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            CHECK_MSG(eq && eq > kv, "TEST_CKPT_RANK_ENV: '%s' is not VAR=VALUE", kv);
            *eq = 0;
            CHECK(setenv(kv, eq + 1, 1) == 0);
        }
        printf("test_ckpt: process %d runs with %s\n", r, re + end);
        fflush(stdout);
    }
    CHECK_OK(tess_init(argc, argv, MPI_COMM_WORLD, NULL));
}

int main(int argc, char **argv)
{
    init_rank_env(&argc, &argv);
    CHECK_MSG(argc >= 3, "usage: test_ckpt run|restart|refuse DIR [key=value ...]");
    const char *mode = argv[1], *dir = argv[2], *prog = "test_ckpt";
    int         steps = 6, every = 0, bigger = 0, extra = 0, fill = 0;
    for (int i = 3; i < argc; i++) {
        if (!strncmp(argv[i], "steps=", 6))
            steps = atoi(argv[i] + 6);
        else if (!strncmp(argv[i], "every=", 6))
            every = atoi(argv[i] + 6);
        else if (!strncmp(argv[i], "kill=", 5))
            CHECK(sscanf(argv[i] + 5, "%d:%d", &kill_step, &kill_rank) == 2);
        else if (!strncmp(argv[i], "killbg=", 7))
            CHECK(sscanf(argv[i] + 7, "%d:%d", &killbg_step, &killbg_rank) == 2);
        else if (!strncmp(argv[i], "ioerr=", 6))
            CHECK(sscanf(argv[i] + 6, "%d:%ld", &ioerr_rank, &ioerr_bytes) == 2);
        else if (!strncmp(argv[i], "killtimer=", 10))
            CHECK(sscanf(argv[i] + 10, "%d:%d", &killtimer_step, &killtimer_rank) == 2);
        else if (!strcmp(argv[i], "showinfo"))
            showinfo = 1;
        else if (!strcmp(argv[i], "fill"))
            fill = 1;
        else if (!strcmp(argv[i], "scribble"))
            scribble = 1;
        else if (!strncmp(argv[i], "prog=", 5))
            prog = argv[i] + 5;
        else if (!strncmp(argv[i], "cells=", 6))
            ncells = atoi(argv[i] + 6);
        else if (!strcmp(argv[i], "bigger"))
            bigger = 1;
        else if (!strcmp(argv[i], "extraentry"))
            extra = 1;
        else
            CHECK_MSG(0, "unknown argument %s", argv[i]);
    }
    int rank = tess_process();

    if (!strcmp(mode, "run")) {
        make_arrays(0, 0);
        if (fill)
            fill_memory();
        run_steps(dir, 0, steps, every);
        if (scribble) {
            if (rank == 0)
                printf("test_ckpt: every cell overwritten after the last checkpoint\n");
        } else {
            uint64_t x = check_all(steps, "run");
            if (rank == 0)
                printf("RESULT step=%d digest=%016llx\n", steps, (unsigned long long)x);
        }
    } else if (!strcmp(mode, "restart")) {
        user_state_t     u;
        tess_ckpt_info_t info;
        CHECK_OK(tess_checkpoint_info(dir, "test_ckpt", &u, sizeof(u), &info));
        CHECK(info.user_size == sizeof(u) && info.step == (uint64_t)u.done);
        ncells = u.ncells;
        make_arrays(0, 0);
        tess_ckpt_params_t rp = {.field_mask = TESS_CKPT_FIELD_PROGRAM, .dir = dir,
                                 .program = "test_ckpt"};
        CHECK_OK(tess_restart(&rp));
        check_all(u.done, "restart");
        if (rank == 0)
            printf("test_ckpt: restarted at step %d of %d from %s (written by %d x %d PEs) on "
                   "%d x %d PEs\n", u.done, u.total, info.path, info.processes, info.ppn,
                   tess_num_processes(), tess_ppn());
        run_steps(dir, u.done, u.total, every);
        uint64_t x = check_all(u.total, "restart");
        if (rank == 0)
            printf("RESULT step=%d digest=%016llx\n", u.total, (unsigned long long)x);
    } else if (!strcmp(mode, "refuse")) {
        make_arrays(bigger, extra);
        tess_ckpt_params_t rp = {.field_mask = TESS_CKPT_FIELD_PROGRAM, .dir = dir,
                                 .program = prog};
        tess_status_t st = tess_restart(&rp);
        CHECK_MSG(st != TESS_OK, "tess_restart accepted what it must refuse");
        if (rank == 0)
            printf("refused (%s): %s\n", tess_status_string(st), tess_error_detail());
        fflush(stdout);
        check_all(0, "refused restart"); /* nothing was loaded */
    } else {
        CHECK_MSG(0, "unknown mode %s", mode);
    }
    fill_free();
    CHECK_OK(tess_array_destroy(plain));
    CHECK_OK(tess_array_destroy(cells));
    test_fini();
    return 0;
}

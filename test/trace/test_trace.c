/*
 * test_trace: a small run whose every countable act is known, traced with TESS_TRACE (the
 * harness script trace-run sets it and checks the file with tools/tess-trace check).
 *
 * Phase 1: each of N = 2 x PEs elements gets "ping" (a broadcast), fills a device buffer inside
 * a user span "fill" (tess_trace_begin/end), waits for it with tess_gpu_then ("filled"), then
 * sends its right neighbour a host message ("halo") and a device message ("dev"). Each "dev"
 * contributes to one sum reduction whose callback is "sum" on element 0; element 1 migrates to
 * the next PE from its "dev" (device buffers move too: device messages of their own). Phase 2: one load-balancing step ("go", tess_at_sync, "resume").
 * At the end rank 0 prints the counts the trace must hold, as "EXPECT key=value" lines.
 * TEST_CHAIN=K: element 0 also sends itself K messages in a chain ("again", one after the other,
 * all on one PE), so that one thread records more events than a small fixed buffer holds.
 */
#include "tess_test.h"

#include <tessera/gpu.h>

#define DEV_BYTES 4096

typedef struct elem {
    int64_t  id;
    uint8_t *dev, *in;
    int      halos, devs, sums;
} elem_t;

static tess_array_h arr;
static tess_entry_t E_PING, E_FILLED, E_HALO, E_DEV, E_SUM, E_GO, E_RESUME, E_AGAIN;
static int64_t      n, chain;

static void again(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)p;
    int64_t left;
    CHECK(size == sizeof(left));
    memcpy(&left, msg, sizeof(left));
    if (--left > 0)
        CHECK_OK(tess_send(arr, tess_ctx_index(ctx), E_AGAIN, &left, sizeof(left)));
}

static void ctor(tess_ctx_h ctx, void *p, void *arg)
{
    (void)arg;
    elem_t *e = p;
    e->id     = tess_ctx_linear(ctx);
    CHECK_OK(tess_gpu_malloc((void **)&e->dev, DEV_BYTES));
    CHECK_OK(tess_gpu_malloc((void **)&e->in, DEV_BYTES));
}

static void dtor(tess_ctx_h ctx, void *p, void *arg)
{
    (void)ctx;
    (void)arg;
    tess_gpu_free(((elem_t *)p)->dev);
    tess_gpu_free(((elem_t *)p)->in);
}

static void pup(tess_pup_h p, tess_ctx_h ctx, void *elem)
{
    (void)ctx;
    elem_t *e = elem;
    tess_pup_device(p, (void **)&e->dev, DEV_BYTES);
    tess_pup_device(p, (void **)&e->in, DEV_BYTES);
}

static void ping(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    elem_t *e = p;
    CHECK_OK(tess_trace_begin(ctx, "fill"));
    CHECK_OK(tess_gpu_memset_async(e->dev, (int)(e->id & 0x7f), DEV_BYTES, tess_ctx_stream(ctx)));
    CHECK_OK(tess_trace_end(ctx, "fill"));
    CHECK(tess_trace_end(ctx, "fill") == TESS_ERR_INVALID); /* nothing open any more */
    CHECK_OK(tess_gpu_then(ctx, E_FILLED, NULL, 0));
    if (e->id == 0 && chain > 0)
        CHECK_OK(tess_send(arr, tess_ctx_index(ctx), E_AGAIN, &chain, sizeof(chain)));
}

static void filled(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    elem_t        *e    = p;
    tess_index_t   next = tess_idx1((int32_t)((e->id + 1) % n));
    int64_t        v    = e->id;
    tess_dev_buf_t buf  = {e->dev, DEV_BYTES};
    CHECK_OK(tess_send(arr, next, E_HALO, &v, sizeof(v)));
    CHECK_OK(tess_send_device(arr, next, E_DEV, &v, sizeof(v), &buf, 1, tess_ctx_stream(ctx),
                              NULL, NULL));
}

static void halo(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)ctx;
    CHECK(size == sizeof(int64_t));
    elem_t *e = p;
    CHECK(*(const int64_t *)msg == (e->id + n - 1) % n);
    e->halos++;
}

static void post(tess_ctx_h ctx, void *p, const void *header, size_t header_len, int nbufs,
                 const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx;
    (void)header;
    (void)stream_p;
    CHECK(header_len == sizeof(int64_t) && nbufs == 1 && sizes[0] == DEV_BYTES);
    dst[0] = ((elem_t *)p)->in;
}

static void dev(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    elem_t *e   = p;
    int64_t one = 1;
    e->devs++;
    CHECK_OK(tess_contribute(ctx, 1, &one, 1, TESS_INT64, TESS_SUM,
                             tess_cb_element(arr, tess_idx1(0), E_SUM)));
    if (e->id == 1 && tess_num_pes() > 1)
        CHECK_OK(tess_migrate(ctx, (tess_pe() + 1) % tess_num_pes()));
}

static void sum(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)ctx;
    CHECK(size == sizeof(int64_t) && *(const int64_t *)msg == n);
    ((elem_t *)p)->sums++;
}

static void go(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)p;
    (void)msg;
    (void)size;
    CHECK_OK(tess_at_sync(ctx));
}

static void resume(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)ctx;
    (void)p;
    (void)msg;
    (void)size;
}

static void start_ping(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        tess_broadcast(arr, E_PING, NULL, 0);
}

static void start_go(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        tess_broadcast(arr, E_GO, NULL, 0);
}

static int64_t counts[3];
static void collect(tess_ctx_h ctx, void *p, void *arg)
{
    (void)ctx;
    (void)arg;
    elem_t *e = p;
    counts[0] += e->halos;
    counts[1] += e->devs;
    counts[2] += e->sums;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    CHECK_MSG(tess_trace_enabled(), "run it with TESS_TRACE=PATH (test/trace/trace-run)");
    n = 2 * (int64_t)tess_num_pes();
    CHECK_OK(tess_entry_register("ping", ping, &E_PING));
    CHECK_OK(tess_entry_register("filled", filled, &E_FILLED));
    CHECK_OK(tess_entry_register("halo", halo, &E_HALO));
    CHECK_OK(tess_entry_register_device("dev", post, dev, 0, &E_DEV));
    CHECK_OK(tess_entry_register("sum", sum, &E_SUM));
    CHECK_OK(tess_entry_register("go", go, &E_GO));
    CHECK_OK(tess_entry_register("resume", resume, &E_RESUME));
    CHECK_OK(tess_entry_register("again", again, &E_AGAIN));
    chain = getenv("TEST_CHAIN") ? atoll(getenv("TEST_CHAIN")) : 0;
    tess_array_params_t p = {
        .field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR | TESS_ARRAY_FIELD_PUP |
                      TESS_ARRAY_FIELD_RESUME,
        .name = "traced", .ndims = 1, .extents = {(int32_t)n}, .elem_size = sizeof(elem_t),
        .ctor = ctor, .dtor = dtor, .pup = pup, .resume = E_RESUME};
    CHECK_OK(tess_array_create(&p, &arr));

    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start_ping, NULL));
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start_go, NULL));

    CHECK_OK(tess_array_foreach(arr, collect, NULL));
    int64_t all[3];
    MPI_Allreduce(counts, all, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK_MSG(all[0] == n && all[1] == n && all[2] == 1, "halos %lld, devs %lld, sums %lld",
              (long long)all[0], (long long)all[1], (long long)all[2]);
    tess_lb_stats_t st;
    CHECK_OK(tess_lb_get_stats(arr, &st));
    int64_t migrations = (tess_num_pes() > 1 ? 1 : 0) + st.migrations;
    if (tess_process() == 0) {
        printf("EXPECT entry.ping=%lld entry.filled=%lld entry.halo=%lld entry.dev=%lld "
               "entry.sum=1 entry.go=%lld entry.resume=%lld\n", (long long)n, (long long)n,
               (long long)n, (long long)n, (long long)n, (long long)n);
        printf("EXPECT entries=%lld user.fill=%lld devmsg>=%lld migrations=%lld lb_steps=%d "
               "reductions=1 msg.entry>=%lld gpu_waits>=%lld\n", (long long)(6 * n + 1 + chain),
               (long long)n, (long long)n, (long long)migrations, tess_num_processes(),
               (long long)(2 * n + 1), (long long)n);
        if (chain > 0)
            printf("EXPECT entry.again=%lld\n", (long long)chain);
        fflush(stdout);
    }
    test_fini();
    return 0;
}

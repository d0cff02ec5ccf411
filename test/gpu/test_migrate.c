/*
 * test_migrate: elements with host state, a host buffer they own and a device buffer migrate at
 * random between PEs and processes, many times, while messages to them are in flight.
 *
 * Tokens hop from element to element. On each visit the element checks its state bit for bit
 * (its version number, its host buffer, and its device buffer copied back on its stream), bumps
 * its version, rewrites both buffers, moves to a random PE with tess_migrate, and passes the
 * token on; it also sends pings to random elements, which may be moving meanwhile: those are
 * forwarded and must all arrive. Runs to quiescence; then every element is checked once more
 * from the main thread.
 */
#include "tess_test.h"

#include <tessera/gpu.h>

#define HOST_WORDS 37
#define DEV_BYTES  4099

typedef struct token {
    int32_t hops_left, pad;
} token_t;

#define QUEUE 64

/* A visit runs hop -> check -> move; tokens arriving meanwhile wait in the element (and move
 * with it), one visit at a time. */
typedef struct elem {
    int64_t   id, version, pings_got, pings_sent, visits, moves;
    int       busy, nq;
    token_t   queue[QUEUE];
    uint32_t *host;    /* HOST_WORDS, owned, moved by PUP */
    uint8_t  *dev;     /* DEV_BYTES of device memory, moved by PUP */
    uint8_t  *scratch; /* host copy of dev for checking: not moved (re-made) */
    int       errors;
} elem_t;

static tess_array_h arr;
static tess_entry_t E_HOP, E_CHECK, E_MOVE, E_PING;
static int64_t      n;
static int          hops = 60;

static uint32_t host_word(int64_t id, int64_t version, int i)
{
    return (uint32_t)test_mix(((uint64_t)id << 32) ^ ((uint64_t)version << 8) ^ (uint64_t)i);
}

static uint8_t dev_byte(int64_t id, int64_t version, size_t i)
{
    return (uint8_t)test_mix(((uint64_t)id << 40) ^ ((uint64_t)version << 20) ^ i ^ 0x5555);
}

static uint64_t rnd_state;
static _Thread_local uint64_t rnd_tls;
static uint64_t rnd(void)
{
    if (!rnd_tls)
        rnd_tls = test_mix(rnd_state + (uint64_t)tess_pe() * 7919 + 1);
    rnd_tls = rnd_tls * 6364136223846793005ull + 1442695040888963407ull;
    return test_mix(rnd_tls);
}

static void write_state(tess_ctx_h ctx, elem_t *e)
{
    for (int i = 0; i < HOST_WORDS; i++)
        e->host[i] = host_word(e->id, e->version, i);
    for (size_t i = 0; i < DEV_BYTES; i++)
        e->scratch[i] = dev_byte(e->id, e->version, i);
    CHECK_OK(tess_gpu_memcpy_async(e->dev, e->scratch, DEV_BYTES, tess_ctx_stream(ctx)));
}

static void ctor(tess_ctx_h ctx, void *p, void *arg)
{
    (void)arg;
    elem_t *e  = p;
    e->id      = tess_ctx_linear(ctx);
    e->host    = malloc(HOST_WORDS * sizeof(uint32_t));
    e->scratch = malloc(DEV_BYTES);
    CHECK(e->host && e->scratch);
    CHECK_OK(tess_gpu_malloc((void **)&e->dev, DEV_BYTES));
    write_state(ctx, e);
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
}

static void dtor(tess_ctx_h ctx, void *p, void *arg)
{
    (void)ctx;
    (void)arg;
    elem_t *e = p;
    free(e->host);
    free(e->scratch);
    tess_gpu_free(e->dev);
}

static void pup(tess_pup_h p, tess_ctx_h ctx, void *elem)
{
    (void)ctx;
    elem_t *e = elem;
    if (tess_pup_is_unpacking(p)) {
        e->host    = malloc(HOST_WORDS * sizeof(uint32_t));
        e->scratch = malloc(DEV_BYTES);
        CHECK(e->host && e->scratch);
    }
    tess_pup_bytes(p, e->host, HOST_WORDS * sizeof(uint32_t));
    tess_pup_device(p, (void **)&e->dev, DEV_BYTES);
    if (tess_pup_is_packing(p)) {
        free(e->host);
        free(e->scratch);
        e->host = NULL;
        e->scratch = NULL;
    }
}

static void check_host(elem_t *e)
{
    for (int i = 0; i < HOST_WORDS; i++)
        if (e->host[i] != host_word(e->id, e->version, i)) {
            if (e->errors++ < 3)
                fprintf(stderr, "element %lld v%lld: host word %d wrong\n", (long long)e->id,
                        (long long)e->version, i);
            return;
        }
}

static void check_dev(elem_t *e)
{
    for (size_t i = 0; i < DEV_BYTES; i++)
        if (e->scratch[i] != dev_byte(e->id, e->version, i)) {
            if (e->errors++ < 3)
                fprintf(stderr, "element %lld v%lld: device byte %zu is %02x, expected %02x\n",
                        (long long)e->id, (long long)e->version, i, e->scratch[i],
                        dev_byte(e->id, e->version, i));
            return;
        }
}

static void hop(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    CHECK(size == sizeof(token_t));
    elem_t *e = p;
    if (e->busy) {
        CHECK(e->nq < QUEUE);
        memcpy(&e->queue[e->nq++], msg, sizeof(token_t));
        return;
    }
    e->busy = 1;
    e->visits++;
    check_host(e);
    memset(e->scratch, 0, DEV_BYTES);
    CHECK_OK(tess_gpu_memcpy_async(e->scratch, e->dev, DEV_BYTES, tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_then(ctx, E_CHECK, msg, size));
}

static void check(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    elem_t *e = p;
    check_dev(e);
    e->version++;
    write_state(ctx, e);
    CHECK_OK(tess_gpu_then(ctx, E_MOVE, msg, size));
}

static void move(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)size;
    elem_t *e = p;
    token_t t;
    memcpy(&t, msg, sizeof(t));
    for (int i = 0; i < 3; i++) {
        CHECK_OK(tess_send(arr, tess_idx1((int32_t)(rnd() % (uint64_t)n)), E_PING, &e->id,
                           sizeof(e->id)));
        e->pings_sent++;
    }
    int dest = (int)(rnd() % (uint64_t)tess_num_pes());
    if (dest != tess_pe())
        e->moves++;
    CHECK_OK(tess_migrate(ctx, dest));
    if (--t.hops_left > 0)
        CHECK_OK(tess_send(arr, tess_idx1((int32_t)(rnd() % (uint64_t)n)), E_HOP, &t, sizeof(t)));
    /* The next waiting token restarts the element wherever it is by then. */
    e->busy = 0;
    if (e->nq > 0) {
        token_t next = e->queue[0];
        memmove(e->queue, e->queue + 1, (size_t)--e->nq * sizeof(token_t));
        CHECK_OK(tess_send(arr, tess_idx1((int32_t)e->id), E_HOP, &next, sizeof(next)));
    }
}

static void ping(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    (void)ctx;
    CHECK(size == sizeof(int64_t));
    int64_t from = *(const int64_t *)msg;
    CHECK(from >= 0 && from < n);
    ((elem_t *)p)->pings_got++;
}

static void start(void *arg)
{
    (void)arg;
    /* One token per PE, started by process 0. */
    if (tess_process() != 0)
        return;
    for (int i = 0; i < tess_num_pes(); i++) {
        token_t t = {hops, 0};
        CHECK_OK(tess_send(arr, tess_idx1((int32_t)(i % n)), E_HOP, &t, sizeof(t)));
    }
}

static int64_t sums[5];
static void final_check(tess_ctx_h ctx, void *p, void *arg)
{
    (void)arg;
    elem_t *e = p;
    CHECK(e->id == tess_ctx_linear(ctx));
    check_host(e);
    CHECK_OK(tess_gpu_memcpy_async(e->scratch, e->dev, DEV_BYTES, tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
    check_dev(e);
    sums[0] += e->version;
    sums[1] += e->pings_got;
    sums[2] += e->pings_sent;
    sums[3] += e->errors;
    sums[4] += e->moves;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (getenv("TEST_HOPS"))
        hops = atoi(getenv("TEST_HOPS"));
    rnd_state = 12345;
    n         = 2 * (int64_t)tess_num_pes() + 1;
    CHECK_OK(tess_entry_register("hop", hop, &E_HOP));
    CHECK_OK(tess_entry_register("check", check, &E_CHECK));
    CHECK_OK(tess_entry_register("move", move, &E_MOVE));
    CHECK_OK(tess_entry_register("ping", ping, &E_PING));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR |
                                           TESS_ARRAY_FIELD_PUP | TESS_ARRAY_FIELD_MAP,
                             .name = "movers", .ndims = 1, .extents = {(int32_t)n},
                             .elem_size = sizeof(elem_t), .ctor = ctor, .dtor = dtor, .pup = pup,
                             .map = TESS_MAP_ROUND_ROBIN};
    CHECK_OK(tess_array_create(&p, &arr));
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    CHECK_OK(tess_array_foreach(arr, final_check, NULL));
    int64_t all[5];
    MPI_Allreduce(sums, all, 5, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    int64_t local = tess_array_num_local(arr), total = 0;
    MPI_Allreduce(&local, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    /* The location table agrees with where the elements are. */
    for (int64_t i = 0; i < n; i++) {
        int pe = -1;
        CHECK_OK(tess_array_location(arr, tess_idx1((int32_t)i), &pe));
        int here = tess_array_local(arr, tess_idx1((int32_t)i)) != NULL;
        CHECK_MSG((tess_pe_process(pe) == tess_process()) == here,
                  "element %lld: table says PE %d, local here: %d", (long long)i, pe, here);
    }
    CHECK(total == n);
    CHECK_MSG(all[3] == 0, "%lld state errors", (long long)all[3]);
    CHECK_MSG(all[0] == (int64_t)tess_num_pes() * hops, "versions %lld, expected %lld",
              (long long)all[0], (long long)tess_num_pes() * hops);
    CHECK_MSG(all[1] == all[2], "pings: %lld sent, %lld received", (long long)all[2],
              (long long)all[1]);
    if (tess_process() == 0)
        printf("migrate: %lld visits, %lld migrations to other PEs, %lld pings, state intact "
               "(%s backend)\n", (long long)all[0], (long long)all[4], (long long)all[1],
               tess_gpu_backend_name());
    test_fini();
    return 0;
}

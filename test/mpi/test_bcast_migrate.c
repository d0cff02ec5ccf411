/* test_bcast_migrate: broadcasts while the elements migrate. Every element hops from PE to PE
 * (each hop a tess_migrate to a random PE and a message to itself that finds it at the next
 * one), and migrates again on most broadcasts it receives, while broadcasts come from the start
 * function of every process and from a few elements as they hop. Each element counts, per
 * broadcast, how often it ran: after the phase every count must be exactly 1 (none twice, none
 * lost), on every element, wherever it ended. Two phases, so a phase starts with elements that
 * already have broadcasts behind them. */
#include "tess_test.h"

#define PER_PROC  8  /* broadcasts from each process's start function, per phase */
#define NORIG     3  /* broadcasting elements: 0, n/2, n-1 */
#define PER_ELEM  4  /* broadcasts from each of them, per phase (one per hop) */
#define MAX_PROCS 64
#define NIDS      (MAX_PROCS * PER_PROC + NORIG * PER_ELEM)

typedef struct {
    int32_t origin; /* -1 - process for a start function, else the broadcasting element */
    int32_t k;      /* its number from that origin */
    int32_t phase;
} bmsg_t;

typedef struct {
    uint8_t  got[NIDS]; /* runs of each broadcast this phase */
    int32_t  hops;      /* hops left this phase */
    int32_t  sent;      /* broadcasts this element sent this phase */
    uint64_t rng;
    int64_t  moves;     /* migrations so far (all phases) */
} elem_t;

static tess_array_h arr;
static tess_entry_t E_HOP, E_BCAST;
static int32_t      n;
static int          nprocs, phase;
static int          hops_per_phase;

static int32_t origin_elem(int k) { return k == 0 ? 0 : k == 1 ? n / 2 : n - 1; }

static int bcast_id(const bmsg_t *b)
{
    if (b->origin < 0)
        return (-1 - b->origin) * PER_PROC + b->k;
    for (int k = 0; k < NORIG; k++)
        if (origin_elem(k) == b->origin)
            return MAX_PROCS * PER_PROC + k * PER_ELEM + b->k;
    return -1;
}

static int is_origin(int64_t linear)
{
    for (int k = 0; k < NORIG; k++)
        if (origin_elem(k) == linear)
            return 1;
    return 0;
}

static void pup(tess_pup_h p, tess_ctx_h ctx, void *e)
{
    (void)p, (void)ctx, (void)e; /* the state bytes are the whole element */
}

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el = e;
    el->rng    = test_mix(0x5eedull + (uint64_t)tess_ctx_linear(ctx));
}

static void move_somewhere(tess_ctx_h ctx, elem_t *el)
{
    int dest = (int)(test_rand(&el->rng) % (uint64_t)tess_num_pes());
    if (dest != tess_pe()) {
        CHECK_OK(tess_migrate(ctx, dest));
        el->moves++;
    }
}

static void hop(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    if (is_origin(tess_ctx_linear(ctx)) && el->sent < PER_ELEM) {
        bmsg_t b = {(int32_t)tess_ctx_linear(ctx), el->sent++, phase};
        CHECK_OK(tess_broadcast(arr, E_BCAST, &b, sizeof(b)));
    }
    if (el->hops <= 0)
        return;
    el->hops--;
    move_somewhere(ctx, el);
    CHECK_OK(tess_send(arr, tess_ctx_index(ctx), E_HOP, NULL, 0));
}

static void bcast(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    bmsg_t  b;
    CHECK(size == sizeof(b));
    memcpy(&b, msg, sizeof(b));
    int id = bcast_id(&b);
    CHECK_MSG(id >= 0 && id < NIDS && b.phase == phase, "bad broadcast %d/%d of phase %d",
              b.origin, b.k, b.phase);
    CHECK_MSG(el->got[id] == 0, "element %lld got broadcast %d/%d twice (PE %d)",
              (long long)tess_ctx_linear(ctx), b.origin, b.k, tess_pe());
    el->got[id]++;
    if (test_rand(&el->rng) % 4 != 0)
        move_somewhere(ctx, el);
}

static void start(void *arg)
{
    (void)arg;
    /* Every element starts hopping (the message finds it), then this process broadcasts, one
     * broadcast after each hop message so they interleave with the first migrations. */
    int32_t per  = (n + nprocs - 1) / nprocs;
    int32_t lo   = tess_process() * per, hi = lo + per < n ? lo + per : n;
    int     sent = 0;
    for (int32_t i = lo; i < hi; i++) {
        CHECK_OK(tess_send(arr, tess_idx1(i), E_HOP, NULL, 0));
        if (sent < PER_PROC) {
            bmsg_t b = {-1 - tess_process(), sent++, phase};
            CHECK_OK(tess_broadcast(arr, E_BCAST, &b, sizeof(b)));
        }
    }
    for (; sent < PER_PROC; sent++) {
        bmsg_t b = {-1 - tess_process(), sent, phase};
        CHECK_OK(tess_broadcast(arr, E_BCAST, &b, sizeof(b)));
    }
}

static int64_t bad_elems;

static void check_elem(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el = e;
    for (int id = 0; id < NIDS; id++) {
        int want = id < MAX_PROCS * PER_PROC ? id / PER_PROC < nprocs : 1;
        if (el->got[id] != want) {
            if (bad_elems++ < 8)
                fprintf(stderr, "element %lld (process %d), phase %d: broadcast %d ran %d "
                        "times, expected %d\n", (long long)tess_ctx_linear(ctx), tess_process(),
                        phase, id, el->got[id], want);
        }
    }
    memset(el->got, 0, sizeof(el->got));
    el->hops = hops_per_phase;
    el->sent = 0;
}

static void reset_elem(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx, (void)arg;
    elem_t *el = e;
    el->hops   = hops_per_phase;
}

static void count_moves(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx;
    *(int64_t *)arg += ((elem_t *)e)->moves;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    nprocs = tess_num_processes();
    CHECK(nprocs <= MAX_PROCS);
    n              = 4 * tess_num_pes() + 1;
    hops_per_phase = (int)test_scaled(20, 4);
    CHECK_OK(tess_entry_register("hop", hop, &E_HOP));
    CHECK_OK(tess_entry_register("bcast", bcast, &E_BCAST));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_PUP,
                             .name = "hoppers", .ndims = 1, .extents = {n},
                             .elem_size = sizeof(elem_t), .ctor = ctor, .pup = pup};
    CHECK_OK(tess_array_create(&p, &arr));
    CHECK_OK(tess_array_foreach(arr, reset_elem, NULL));
    double t0 = MPI_Wtime();
    for (phase = 0; phase < 2; phase++) {
        CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
        CHECK_OK(tess_array_foreach(arr, check_elem, NULL));
        int64_t bad = bad_elems, all_bad = 0;
        MPI_Allreduce(&bad, &all_bad, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        CHECK_MSG(all_bad == 0, "phase %d: %lld wrong broadcast counts (duplicated or lost)",
                  phase, (long long)all_bad);
    }
    int64_t local[2] = {tess_array_num_local(arr), 0}, all[2];
    CHECK_OK(tess_array_foreach(arr, count_moves, &local[1]));
    MPI_Allreduce(local, all, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK(all[0] == n);
    CHECK(tess_num_pes() == 1 || all[1] > 0);
    if (tess_process() == 0)
        printf("bcast_migrate: %d elements, %d broadcasts per phase, %lld migrations in %.2f s: "
               "ok\n", n, nprocs * PER_PROC + NORIG * PER_ELEM, (long long)all[1],
               MPI_Wtime() - t0);
    test_fini();
    return 0;
}

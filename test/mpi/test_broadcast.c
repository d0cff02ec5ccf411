/* test_broadcast: broadcasts from several elements and from the start function of every
 * process, with payloads of 0 B to 64 KiB, to an array spread over every PE and to one smaller
 * than the number of PEs (some PEs, even processes, have no element). Every element counts each
 * broadcast exactly once and checks its payload; when it has seen all of them it contributes
 * its count and checksum, and a TESS_CB_RETURN reduction ends the phase. The result is compared
 * on every rank with the serial answer. */
#include "tess_test.h"

static const size_t sizes[] = {0, 1, 7, 64, 1000, 4096, 20000, 65536};
#define NSIZES ((int)(sizeof(sizes) / sizeof(sizes[0])))
#define NORIG_ELEM 3 /* broadcasting elements: 0, n/2, n-1 of the big array */

typedef struct {
    int32_t  origin;   /* element index, or -1 - process for a start function */
    int32_t  size_idx;
    uint64_t seed;
} hdr_t;

typedef struct {
    int64_t  got;      /* broadcasts received (with a header) */
    int64_t  zeros;    /* 0-byte broadcasts received */
    uint64_t csum;
    uint8_t *seen;     /* [origin slot][size] */
    int      done;
} elem_t;

static tess_array_h big, small;
static tess_entry_t E_GO, E_BCAST, E_BCAST0, E_SMALLRES;
static int64_t      small_result[2];
static int          small_results;
static int32_t      n;
static int          nprocs;

/* Origins: slots 0..NORIG_ELEM-1 are elements, then one per process. */
static int norigins(void) { return NORIG_ELEM + nprocs; }
static int32_t origin_elem(int k) { return k == 0 ? 0 : k == 1 ? n / 2 : n - 1; }
static int slot_of(int32_t origin)
{
    if (origin < 0)
        return NORIG_ELEM + (-1 - origin);
    for (int k = 0; k < NORIG_ELEM; k++)
        if (origin_elem(k) == origin)
            return k;
    return -1;
}

static uint64_t bseed(int32_t origin, int s)
{
    return test_mix(((uint64_t)(uint32_t)origin << 20) ^ (uint64_t)s ^ 0xb0adca57ull);
}

static int64_t expected_got(void) { return (int64_t)norigins() * (NSIZES - 1); }
static int64_t expected_zeros(void) { return norigins(); }

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx, (void)arg;
    elem_t *el = e;
    el->seen   = calloc((size_t)norigins() * NSIZES, 1);
    CHECK(el->seen);
}

static void dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx, (void)arg;
    free(((elem_t *)e)->seen);
}

/* Broadcast every size to both arrays. */
static void send_all(int32_t origin)
{
    for (int s = 0; s < NSIZES; s++) {
        tess_array_h targets[2] = {big, small};
        for (int t = 0; t < 2; t++) {
            if (sizes[s] == 0) {
                CHECK_OK(tess_broadcast(targets[t], E_BCAST0, NULL, 0));
                continue;
            }
            size_t   len = sizes[s];
            uint8_t *buf = malloc(len);
            CHECK(buf);
            hdr_t h = {origin, s, bseed(origin, s)};
            if (len < sizeof(h)) {
                /* Too small for the header: the bytes are the origin slot and the size index. */
                memset(buf, 0, len);
                buf[0] = (uint8_t)(0x80 | slot_of(origin));
                for (size_t i = 1; i < len; i++)
                    buf[i] = (uint8_t)(s * 16 + i);
            } else {
                memcpy(buf, &h, sizeof(h));
                test_fill(buf + sizeof(h), len - sizeof(h), h.seed);
            }
            CHECK_OK(tess_broadcast(targets[t], E_BCAST, buf, len));
            free(buf);
        }
    }
}

static void maybe_done(tess_ctx_h ctx, elem_t *el)
{
    if (el->done || el->got != expected_got() || el->zeros != expected_zeros())
        return;
    el->done     = 1;
    int64_t v[2] = {el->got + el->zeros, (int64_t)el->csum};
    /* The big array's reduction ends the phase; the small one's goes to its element 0. */
    tess_callback_t cb = tess_ctx_array(ctx) == big ? tess_cb_return()
                                                    : tess_cb_element(small, tess_idx1(0), E_SMALLRES);
    CHECK_OK(tess_contribute(ctx, 1, v, 2, TESS_INT64, TESS_SUM, cb));
}

static void go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e, (void)msg, (void)size;
    send_all((int32_t)tess_ctx_linear(ctx));
}

static uint64_t term(int slot, int s) { return test_mix(((uint64_t)slot << 8) + (uint64_t)s + 1); }

static void bcast(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t        *el = e;
    const uint8_t *b  = msg;
    int            slot, s;
    CHECK(size > 0);
    if (size < sizeof(hdr_t)) {
        slot = b[0] & 0x7f;
        CHECK(b[0] & 0x80);
        for (s = 0; s < NSIZES && sizes[s] != size; s++)
            ;
        CHECK(s < NSIZES);
        for (size_t i = 1; i < size; i++)
            CHECK(b[i] == (uint8_t)(s * 16 + i));
    } else {
        hdr_t h;
        memcpy(&h, msg, sizeof(h));
        slot = slot_of(h.origin);
        s    = h.size_idx;
        CHECK_MSG(slot >= 0 && s >= 0 && s < NSIZES && sizes[s] == size &&
                  h.seed == bseed(h.origin, s), "bad broadcast header: origin %d size %zu",
                  h.origin, size);
        long bad = test_verify(b + sizeof(h), size - sizeof(h), h.seed);
        CHECK_MSG(bad < 0, "broadcast of %zu bytes from %d corrupt at %ld", size, h.origin, bad);
    }
    CHECK(slot >= 0 && slot < norigins());
    uint8_t *seen = &el->seen[(size_t)slot * NSIZES + (size_t)s];
    CHECK_MSG(!*seen, "element %lld of %s: broadcast %d/%zu B delivered twice",
              (long long)tess_ctx_linear(ctx), tess_array_name(tess_ctx_array(ctx)), slot, size);
    *seen = 1;
    el->got++;
    el->csum += term(slot, s);
    maybe_done(ctx, el);
}

static void bcast0(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    elem_t *el = e;
    CHECK(size == 0);
    el->zeros++;
    CHECK(el->zeros <= expected_zeros());
    maybe_done(ctx, el);
}

static void small_res(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e;
    CHECK(tess_ctx_array(ctx) == small && tess_ctx_linear(ctx) == 0 &&
          size == sizeof(small_result));
    memcpy(small_result, msg, size);
    small_results++;
}

static void start(void *arg)
{
    (void)arg;
    /* From every process's start function, then the origin elements are told to go. */
    send_all(-1 - tess_process());
    if (tess_process() == 0)
        for (int k = 0; k < NORIG_ELEM; k++)
            CHECK_OK(tess_send(big, tess_idx1(origin_elem(k)), E_GO, NULL, 0));
}

static void check_elem(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el = e;
    CHECK_MSG(el->done && el->got == expected_got() && el->zeros == expected_zeros(),
              "element %lld of %s: %lld broadcasts and %lld empty ones", (long long)tess_ctx_linear(ctx),
              tess_array_name(tess_ctx_array(ctx)), (long long)el->got, (long long)el->zeros);
    for (int k = 0; k < norigins() * (NSIZES - 1); k++)
        CHECK(el->seen[(size_t)(k / (NSIZES - 1)) * NSIZES + 1 + (size_t)(k % (NSIZES - 1))]);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    nprocs = tess_num_processes();
    n      = 2 * tess_num_pes() + 3;
    CHECK_OK(tess_entry_register("go", go, &E_GO));
    CHECK_OK(tess_entry_register("bcast", bcast, &E_BCAST));
    CHECK_OK(tess_entry_register("bcast0", bcast0, &E_BCAST0));
    CHECK_OK(tess_entry_register("small_result", small_res, &E_SMALLRES));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR,
                             .name = "big", .ndims = 1, .extents = {n},
                             .elem_size = sizeof(elem_t), .ctor = ctor, .dtor = dtor};
    CHECK_OK(tess_array_create(&p, &big));
    /* Fewer elements than PEs, placed by the default block map: most PEs have none. */
    int32_t ns = tess_num_pes() > 2 ? tess_num_pes() / 2 - 1 : 1;
    p.name     = "small";
    p.extents[0] = ns;
    CHECK_OK(tess_array_create(&p, &small));
    double t0 = MPI_Wtime();
    CHECK_OK(tess_run(TESS_RUN_UNTIL_EXIT, start, NULL));
    int64_t got[2];
    size_t  len;
    CHECK_OK(tess_result(got, sizeof(got), &len));
    CHECK(len == sizeof(got));
    uint64_t per_elem = 0;
    for (int k = 0; k < norigins(); k++)
        for (int s = 1; s < NSIZES; s++)
            per_elem += term(k, s);
    int64_t per_count = expected_got() + expected_zeros();
    CHECK_MSG(got[0] == (int64_t)n * per_count && (uint64_t)got[1] == (uint64_t)n * per_elem,
              "result %lld/%llx; expected %lld/%llx", (long long)got[0],
              (unsigned long long)got[1], (long long)n * per_count,
              (unsigned long long)((uint64_t)n * per_elem));
    /* The small array's result reached its element 0 exactly once, before tess_run returned. */
    int owner = tess_array_local(small, tess_idx1(0)) != NULL, owners = 0, results = 0;
    MPI_Allreduce(&owner, &owners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&small_results, &results, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(owners == 1 && results == 1 && small_results == owner);
    if (owner)
        CHECK_MSG(small_result[0] == (int64_t)ns * per_count &&
                  (uint64_t)small_result[1] == (uint64_t)ns * per_elem,
                  "small: %lld/%llx", (long long)small_result[0],
                  (unsigned long long)small_result[1]);
    /* Both arrays: every element saw every broadcast exactly once. */
    CHECK_OK(tess_array_foreach(big, check_elem, NULL));
    CHECK_OK(tess_array_foreach(small, check_elem, NULL));
    int64_t local[2] = {tess_array_num_local(big), tess_array_num_local(small)}, all[2];
    MPI_Allreduce(local, all, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK(all[0] == n && all[1] == ns);
    if (tess_process() == 0)
        printf("broadcast: %d origins x %d sizes to %d + %d elements in %.2f s: ok\n", norigins(),
               NSIZES, n, ns, MPI_Wtime() - t0);
    test_fini();
    return 0;
}

/* test_reduce_ops: every type x op of a reduction whose result is broadcast back to the array,
 * through the fast path's rounds (TESS_REDUCE=auto: shared memory; mpi: MPI_Iallreduce), at the
 * smallest and the largest count that fits a round (1, and 32 bytes: 8 x int32/float, 4 x
 * int64/double). One combination per round, chained: every element contributes to round k once
 * it has checked the result of round k - 1, so every round comes back complete and no partial
 * reaches process 0 (asserted there: it completed only the final TESS_CB_RETURN reduction,
 * unless TESS_REDUCE=tree). Values are exact whatever the order of combination (small integers
 * for sums, +-1 and 2 for products); the expected result is folded serially here. */
#include "tess_test.h"

#define MAXBYTES 32
#define NCOMBO   56 /* (8 integer ops x 2 types + 6 ops x 2 floating types) x 2 counts */

typedef struct combo {
    tess_dtype_t type;
    tess_op_t    op;
    int          count;
} combo_t;

static combo_t      combos[NCOMBO];
static int          ncombos;
static tess_array_h arr;
static tess_entry_t E_RES;
static int64_t      nelem;

typedef struct {
    int round; /* the combination this element contributes to next */
} elem_t;

static size_t dsize(tess_dtype_t t) { return t == TESS_INT32 || t == TESS_FLOAT ? 4 : 8; }

static int64_t ival(tess_op_t op, int64_t lin, int k, int j)
{
    uint64_t h = test_mix(((uint64_t)lin << 20) ^ ((uint64_t)k << 8) ^ (uint64_t)j);
    int      one = (int64_t)(((uint64_t)k + (uint64_t)j) % (uint64_t)(nelem + 1)) == lin;
    switch (op) {
    case TESS_SUM:  return (int64_t)(h % 11) - 5;
    case TESS_PROD: { static const int64_t v[] = {1, -1, 2, 1}; return v[h % 4]; }
    case TESS_LAND: return one ? 0 : (int64_t)(h % 1000) + 1;
    case TESS_LOR:  return one ? -(int64_t)(h % 1000) - 1 : 0;
    case TESS_BAND: return (int64_t)~(1ull << (h % 31));
    case TESS_BOR:  return (int64_t)(1ull << (h % 31));
    default:        return (int64_t)(h % 2000001) - 1000000; /* min, max */
    }
}

static double fval(tess_op_t op, int64_t lin, int k, int j)
{
    switch (op) {
    case TESS_MIN:
    case TESS_MAX: return (double)ival(op, lin, k, j) / 4.0;
    case TESS_LAND:
    case TESS_LOR: return ival(op, lin, k, j) ? -0.75 : 0.0;
    default:       return (double)ival(op, lin, k, j);
    }
}

static void put(tess_dtype_t t, void *buf, int j, int64_t i, double f)
{
    switch (t) {
    case TESS_INT32:  ((int32_t *)buf)[j] = (int32_t)i; break;
    case TESS_INT64:  ((int64_t *)buf)[j] = i; break;
    case TESS_FLOAT:  ((float *)buf)[j] = (float)f; break;
    case TESS_DOUBLE: ((double *)buf)[j] = f; break;
    }
}

static void fill(const combo_t *c, int64_t lin, int k, void *buf)
{
    for (int j = 0; j < c->count; j++)
        put(c->type, buf, j, ival(c->op, lin, k, j), fval(c->op, lin, k, j));
}

/* The serial answer over elements 0..nelem-1. */
static void expected(const combo_t *c, int k, void *out)
{
    int fl = c->type == TESS_FLOAT || c->type == TESS_DOUBLE;
    for (int j = 0; j < c->count; j++) {
        int64_t ia = 0;
        double  fa = 0;
        for (int64_t l = 0; l < nelem; l++) {
            int64_t iv = ival(c->op, l, k, j);
            double  fv = fval(c->op, l, k, j);
            if (l == 0) {
                int logical = c->op == TESS_LAND || c->op == TESS_LOR;
                ia = logical ? iv != 0 : iv;
                fa = logical ? fv != 0 : fv;
                continue;
            }
            switch (c->op) {
            case TESS_SUM:  ia += iv; fa += fv; break;
            case TESS_PROD: ia *= iv; fa *= fv; break;
            case TESS_MIN:  ia = iv < ia ? iv : ia; fa = fv < fa ? fv : fa; break;
            case TESS_MAX:  ia = iv > ia ? iv : ia; fa = fv > fa ? fv : fa; break;
            case TESS_LAND: ia = ia && iv; fa = fa != 0 && fv != 0; break;
            case TESS_LOR:  ia = ia || iv; fa = fa != 0 || fv != 0; break;
            case TESS_BAND: ia &= iv; break;
            case TESS_BOR:  ia |= iv; break;
            }
        }
        put(c->type, out, j, ia, fl ? fa : (double)ia);
    }
}

static void contribute(tess_ctx_h ctx, elem_t *el)
{
    int k = el->round;
    if (k == ncombos) {
        int64_t one = 1;
        CHECK_OK(tess_contribute(ctx, (uint64_t)k, &one, 1, TESS_INT64, TESS_SUM,
                                 tess_cb_return()));
        return;
    }
    unsigned char buf[MAXBYTES];
    fill(&combos[k], tess_ctx_linear(ctx), k, buf);
    CHECK_OK(tess_contribute(ctx, (uint64_t)k, buf, combos[k].count, combos[k].type,
                             combos[k].op, tess_cb_broadcast(arr, E_RES)));
}

static void res(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    static const char *const tn[] = {"int32", "int64", "float", "double"};
    static const char *const on[] = {"sum", "prod", "min", "max", "land", "lor", "band", "bor"};
    elem_t *el = e;
    if (size) {
        const combo_t *c = &combos[el->round];
        unsigned char  want[MAXBYTES];
        CHECK_MSG(size == (size_t)c->count * dsize(c->type), "round %d: %zu bytes", el->round,
                  size);
        expected(c, el->round, want);
        CHECK_MSG(!memcmp(want, msg, size), "element %lld: %s %s x %d (round %d) on %lld "
                  "elements: wrong result", (long long)tess_ctx_linear(ctx), tn[c->type],
                  on[c->op], c->count, el->round, (long long)nelem);
        el->round++;
    }
    contribute(ctx, el);
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        CHECK_OK(tess_broadcast(arr, E_RES, NULL, 0));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    for (int t = TESS_INT32; t <= TESS_DOUBLE; t++)
        for (int o = TESS_SUM; o <= TESS_BOR; o++)
            for (int big = 0; big < 2; big++) {
                if ((t == TESS_FLOAT || t == TESS_DOUBLE) && o >= TESS_BAND)
                    continue;
                combos[ncombos++] = (combo_t){(tess_dtype_t)t, (tess_op_t)o,
                                              big ? MAXBYTES / (int)dsize((tess_dtype_t)t) : 1};
            }
    CHECK(ncombos == NCOMBO);
    CHECK_OK(tess_entry_register("res", res, &E_RES));
    nelem                  = 3 * (int64_t)tess_num_pes();
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "ops", .ndims = 1,
                             .extents = {(int32_t)nelem, 1, 1}, .elem_size = sizeof(elem_t)};
    CHECK_OK(tess_array_create(&p, &arr));
    tess_tree_stats_t before, after;
    CHECK_OK(tess_tree_get_stats(&before));
    CHECK_OK(tess_run(TESS_RUN_UNTIL_EXIT, start, NULL));
    int64_t all = 0;
    size_t  len = 0;
    CHECK_OK(tess_result(&all, sizeof(all), &len));
    CHECK_MSG(len == sizeof(all) && all == nelem, "%lld of %lld elements finished",
              (long long)all, (long long)nelem);
    CHECK_OK(tess_tree_get_stats(&after));
    int64_t     at_root = after.combined - before.combined;
    const char *mode    = getenv("TESS_REDUCE");
    int         tree    = mode && !strcmp(mode, "tree");
    if (tess_process() == 0)
        CHECK_MSG(tree ? at_root == ncombos + 1 : at_root == 1, "process 0 completed %lld "
                  "reductions (TESS_REDUCE=%s), expected %d", (long long)at_root,
                  mode ? mode : "auto", tree ? ncombos + 1 : 1);
    if (tess_process() == 0)
        printf("reduce_ops: %d combinations on %lld elements, %lld completed at process 0: ok\n",
               ncombos, (long long)nelem, (long long)at_root);
    CHECK_OK(tess_array_destroy(arr));
    test_fini();
    return 0;
}

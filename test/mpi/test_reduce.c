/* test_reduce: reductions of every type (int32, int64, float, double) x op (sum, prod, min,
 * max, land, lor; band, bor on the integer types) x count (1 and 17), with every callback kind:
 *
 *   phase "element":   each element contributes to all 56 combinations (56 tags in flight at
 *                      once, in two entries) with TESS_CB_ELEMENT; combination k's result goes
 *                      to entry k of element k % n, which checks it;
 *   phase "broadcast": the same with TESS_CB_BROADCAST: every element checks every result;
 *   phases "return":   one phase per combination, ended by a TESS_CB_RETURN reduction; the
 *                      value from tess_result() is checked on every rank.
 *
 * Then the same machinery runs on an array smaller than the number of PEs (so some PEs and
 * processes have no element), a 2-D and a 3-D array. Values derive from the element index, the
 * tag and the position, chosen so that float results are exact whatever the order of
 * combination (small integers for sums, powers of two for products); the expected result is
 * computed serially here, independently of tess_reduce_apply. */
#include "tess_test.h"

#define MAXCOUNT 17
#define NCOMBO   56

typedef struct combo {
    tess_dtype_t type;
    tess_op_t    op;
    int          count;
} combo_t;

static combo_t combos[NCOMBO];
static int     ncombos;

typedef struct {
    int64_t results; /* results checked on this element */
} elem_t;

/* The test's current target. */
static tess_array_h     cur;
static int64_t          cur_size;
static uint64_t         tag_base; /* tags of this round: tag_base + k */
static tess_cb_kind_t   cur_kind;
static int              cur_first, cur_last; /* combinations of this round */
static tess_entry_t     E_GO, E_GO2, E_RES[NCOMBO];

/* ---- values ------------------------------------------------------------------------------ */

/* The value element `lin` contributes at position j of tag `tag` for an op, as a double or an
 * int64 (converted to the type by the caller). */
static int64_t ival(tess_op_t op, int64_t lin, uint64_t tag, int j)
{
    uint64_t h = test_mix(((uint64_t)lin << 24) ^ (tag << 8) ^ (uint64_t)j);
    switch (op) {
    case TESS_LAND: /* all true except, for some (tag, j), one element */
        return (int64_t)((tag + (uint64_t)j) % (uint64_t)(cur_size + 1)) == lin ? 0
                                                                               : (int64_t)(h | 1);
    case TESS_LOR: /* all false except, for some (tag, j), one element */
        return (int64_t)((tag + (uint64_t)j) % (uint64_t)(cur_size + 1)) == lin ? (int64_t)(h | 1)
                                                                               : 0;
    case TESS_BAND: return (int64_t)~(1ull << (h % 64)) & (int64_t)~(1ull << (h >> 58));
    case TESS_BOR:  return (int64_t)(1ull << (h % 64));
    default:        return (int64_t)h; /* wraps, negatives, anything */
    }
}

static double fval(tess_op_t op, int64_t lin, uint64_t tag, int j)
{
    uint64_t h = test_mix(((uint64_t)lin << 24) ^ (tag << 8) ^ (uint64_t)j ^ 0xf1f1);
    switch (op) {
    case TESS_SUM:  return (double)((int64_t)(h % 17) - 8); /* small integers: exact sums */
    case TESS_PROD: { /* +-1, +-2, 0.5: exact products within range */
        static const double v[] = {1.0, -1.0, 2.0, 0.5, -2.0, 1.0, 0.5, -1.0};
        return v[h % 8];
    }
    case TESS_MIN:
    case TESS_MAX:  return ((double)(int64_t)(h % 20001) - 10000.0) / 4.0;
    case TESS_LAND: return ival(op, lin, tag, j) ? ((h & 2) ? -0.75 : 3.5) : 0.0;
    case TESS_LOR:  return ival(op, lin, tag, j) ? ((h & 2) ? 0.125 : -9.0) : ((h & 4) ? -0.0 : 0.0);
    default: abort();
    }
}

static void fill(const combo_t *c, int64_t lin, uint64_t tag, void *buf)
{
    for (int j = 0; j < c->count; j++) {
        switch (c->type) {
        case TESS_INT32:  ((int32_t *)buf)[j] = (int32_t)(uint32_t)(uint64_t)ival(c->op, lin, tag, j); break;
        case TESS_INT64:  ((int64_t *)buf)[j] = ival(c->op, lin, tag, j); break;
        case TESS_FLOAT:  ((float *)buf)[j] = (float)fval(c->op, lin, tag, j); break;
        case TESS_DOUBLE: ((double *)buf)[j] = fval(c->op, lin, tag, j); break;
        }
    }
}

/* The serial answer: fold over the elements in index order, one op per type written out. */
static void expected(const combo_t *c, uint64_t tag, void *out)
{
    for (int j = 0; j < c->count; j++) {
        if (c->type == TESS_INT32 || c->type == TESS_INT64) {
            int      is32 = c->type == TESS_INT32;
            uint64_t acc  = 0;
            for (int64_t l = 0; l < cur_size; l++) {
                uint64_t v = (uint64_t)ival(c->op, l, tag, j);
                if (is32)
                    v = (uint64_t)(int64_t)(int32_t)(uint32_t)v; /* the int32 value, sign kept */
                if (l == 0) {
                    acc = c->op == TESS_LAND || c->op == TESS_LOR ? (v != 0) : v;
                    continue;
                }
                int64_t a = is32 ? (int64_t)(int32_t)(uint32_t)acc : (int64_t)acc;
                int64_t b = (int64_t)v;
                switch (c->op) {
                case TESS_SUM:  acc = acc + v; break;
                case TESS_PROD: acc = acc * v; break;
                case TESS_MIN:  acc = (uint64_t)(b < a ? b : a); break;
                case TESS_MAX:  acc = (uint64_t)(b > a ? b : a); break;
                case TESS_LAND: acc = (a != 0 && b != 0); break;
                case TESS_LOR:  acc = (a != 0 || b != 0); break;
                case TESS_BAND: acc = acc & v; break;
                case TESS_BOR:  acc = acc | v; break;
                }
            }
            if (is32)
                ((int32_t *)out)[j] = (int32_t)(uint32_t)acc;
            else
                ((int64_t *)out)[j] = (int64_t)acc;
        } else {
            double acc = 0;
            for (int64_t l = 0; l < cur_size; l++) {
                double v = fval(c->op, l, tag, j);
                if (l == 0) {
                    acc = c->op == TESS_LAND || c->op == TESS_LOR ? (v != 0) : v;
                    continue;
                }
                switch (c->op) {
                case TESS_SUM:  acc += v; break;
                case TESS_PROD: acc *= v; break;
                case TESS_MIN:  acc = v < acc ? v : acc; break;
                case TESS_MAX:  acc = v > acc ? v : acc; break;
                case TESS_LAND: acc = (acc != 0 && v != 0); break;
                case TESS_LOR:  acc = (acc != 0 || v != 0); break;
                default: abort();
                }
            }
            if (c->type == TESS_FLOAT)
                ((float *)out)[j] = (float)acc;
            else
                ((double *)out)[j] = acc;
        }
    }
}

static size_t dsize(tess_dtype_t t) { return t == TESS_INT32 || t == TESS_FLOAT ? 4 : 8; }

static const char *tname(tess_dtype_t t)
{
    static const char *const n[] = {"int32", "int64", "float", "double"};
    return n[t];
}

static const char *oname(tess_op_t o)
{
    static const char *const n[] = {"sum", "prod", "min", "max", "land", "lor", "band", "bor"};
    return n[o];
}

/* Compare a result with the serial answer (floats by value: +0 and -0 are both right for a
 * min/max tie; logical results must be exactly 1 or 0). */
static void check_result(int k, uint64_t tag, const void *msg, size_t size, const char *where)
{
    const combo_t *c = &combos[k];
    CHECK_MSG(size == (size_t)c->count * dsize(c->type), "%s: combination %d: %zu bytes", where, k,
              size);
    unsigned char want[MAXCOUNT * 8], got[MAXCOUNT * 8];
    memcpy(got, msg, size);
    expected(c, tag, want);
    for (int j = 0; j < c->count; j++) {
        int ok;
        switch (c->type) {
        case TESS_INT32:  ok = ((int32_t *)got)[j] == ((int32_t *)want)[j]; break;
        case TESS_INT64:  ok = ((int64_t *)got)[j] == ((int64_t *)want)[j]; break;
        case TESS_FLOAT:  ok = ((float *)got)[j] == ((float *)want)[j]; break;
        default:          ok = ((double *)got)[j] == ((double *)want)[j]; break;
        }
        if (!ok) {
            double g = c->type == TESS_INT32 ? ((int32_t *)got)[j] : c->type == TESS_INT64 ? (double)((int64_t *)got)[j]
                     : c->type == TESS_FLOAT ? ((float *)got)[j] : ((double *)got)[j];
            double w = c->type == TESS_INT32 ? ((int32_t *)want)[j] : c->type == TESS_INT64 ? (double)((int64_t *)want)[j]
                     : c->type == TESS_FLOAT ? ((float *)want)[j] : ((double *)want)[j];
            CHECK_MSG(0, "%s: %s %s count %d tag %llu on %lld elements: value %d is %.17g, "
                      "expected %.17g", where, tname(c->type), oname(c->op), c->count,
                      (unsigned long long)tag, (long long)cur_size, j, g, w);
        }
    }
}

/* ---- entries ----------------------------------------------------------------------------- */

static tess_index_t index_of(int64_t lin);

static void contribute_range(tess_ctx_h ctx, int from, int to)
{
    for (int k = from; k < to; k++) {
        unsigned char buf[MAXCOUNT * 8];
        uint64_t      tag = tag_base + (uint64_t)k;
        fill(&combos[k], tess_ctx_linear(ctx), tag, buf);
        tess_callback_t cb;
        if (cur_kind == TESS_CB_ELEMENT)
            cb = tess_cb_element(cur, index_of(k % cur_size), E_RES[k]);
        else if (cur_kind == TESS_CB_BROADCAST)
            cb = tess_cb_broadcast(cur, E_RES[k]);
        else
            cb = tess_cb_return();
        CHECK_OK(tess_contribute(ctx, tag, buf, combos[k].count, combos[k].type, combos[k].op,
                                 cb));
    }
}

/* First half of the round's tags now, the rest from a later entry: many tags in flight. */
static void go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e, (void)msg, (void)size;
    int mid = (cur_first + cur_last) / 2;
    contribute_range(ctx, cur_first, mid);
    CHECK_OK(tess_send(cur, tess_ctx_index(ctx), E_GO2, NULL, 0));
}

static void go2(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e, (void)msg, (void)size;
    contribute_range(ctx, (cur_first + cur_last) / 2, cur_last);
}

static void on_result(int k, tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    char    where[96];
    snprintf(where, sizeof(where), "%s element %lld (%s)", tess_array_name(tess_ctx_array(ctx)),
             (long long)tess_ctx_linear(ctx),
             cur_kind == TESS_CB_ELEMENT ? "element callback" : "broadcast callback");
    CHECK(k >= cur_first && k < cur_last);
    if (cur_kind == TESS_CB_ELEMENT)
        CHECK_MSG(tess_ctx_linear(ctx) == k % cur_size, "%s got the result of %d", where, k);
    check_result(k, tag_base + (uint64_t)k, msg, size, where);
    el->results++;
}

/* One entry per combination, so that a result tells which tag it belongs to. */
#define RES_ENTRY(k)                                                                         \
    static void res_##k(tess_ctx_h c, void *e, const void *m, size_t s) { on_result(k, c, e, m, s); }
#define R10(a) RES_ENTRY(a##0) RES_ENTRY(a##1) RES_ENTRY(a##2) RES_ENTRY(a##3) RES_ENTRY(a##4) \
               RES_ENTRY(a##5) RES_ENTRY(a##6) RES_ENTRY(a##7) RES_ENTRY(a##8) RES_ENTRY(a##9)
RES_ENTRY(0) RES_ENTRY(1) RES_ENTRY(2) RES_ENTRY(3) RES_ENTRY(4) RES_ENTRY(5) RES_ENTRY(6)
RES_ENTRY(7) RES_ENTRY(8) RES_ENTRY(9)
R10(1) R10(2) R10(3) R10(4)
RES_ENTRY(50) RES_ENTRY(51) RES_ENTRY(52) RES_ENTRY(53) RES_ENTRY(54) RES_ENTRY(55)
static const tess_entry_fn_t res_fns[] = {
    res_0,  res_1,  res_2,  res_3,  res_4,  res_5,  res_6,  res_7,  res_8,  res_9,
    res_10, res_11, res_12, res_13, res_14, res_15, res_16, res_17, res_18, res_19,
    res_20, res_21, res_22, res_23, res_24, res_25, res_26, res_27, res_28, res_29,
    res_30, res_31, res_32, res_33, res_34, res_35, res_36, res_37, res_38, res_39,
    res_40, res_41, res_42, res_43, res_44, res_45, res_46, res_47, res_48, res_49,
    res_50, res_51, res_52, res_53, res_54, res_55,
};

/* ---- rounds ------------------------------------------------------------------------------ */

static int32_t cur_ext[3];

/* The index of linear position `lin` of the current array (row-major, x slowest). */
static tess_index_t index_of(int64_t lin)
{
    tess_index_t i = {0, 0, 0};
    i.z = (int32_t)(lin % cur_ext[2]);
    lin /= cur_ext[2];
    i.y = (int32_t)(lin % cur_ext[1]);
    i.x = (int32_t)(lin / cur_ext[1]);
    return i;
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        CHECK_OK(tess_broadcast(cur, E_GO, NULL, 0));
}

static void count_results(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx;
    *(int64_t *)arg += ((elem_t *)e)->results;
    ((elem_t *)e)->results = 0;
}

static int64_t total_results(void)
{
    int64_t local = 0, all = 0;
    CHECK_OK(tess_array_foreach(cur, count_results, &local));
    MPI_Allreduce(&local, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

/* Element and broadcast callbacks for combinations [first, last) in one phase each, then a
 * return phase per combination in [first, last) with stride `rstride`. */
static void run_rounds(tess_array_h a, int first, int last, int rstride)
{
    cur      = a;
    cur_size = tess_array_size(a);
    cur_first = first;
    cur_last  = last;

    cur_kind = TESS_CB_ELEMENT;
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    CHECK_MSG(total_results() == last - first, "%s: %lld element results for %d reductions",
              tess_array_name(a), (long long)total_results(), last - first);
    tag_base += (uint64_t)NCOMBO;

    cur_kind = TESS_CB_BROADCAST;
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    int64_t got = total_results();
    CHECK_MSG(got == (int64_t)(last - first) * cur_size, "%s: %lld broadcast results, expected "
              "%lld", tess_array_name(a), (long long)got, (long long)(last - first) * cur_size);
    tag_base += (uint64_t)NCOMBO;

    cur_kind = TESS_CB_RETURN;
    for (int k = first; k < last; k += rstride) {
        cur_first = k;
        cur_last  = k + 1;
        CHECK_OK(tess_run(TESS_RUN_UNTIL_EXIT, start, NULL));
        unsigned char res[MAXCOUNT * 8];
        size_t        len = 0;
        CHECK_OK(tess_result(res, sizeof(res), &len));
        check_result(k, tag_base + (uint64_t)k, res, len, "TESS_CB_RETURN");
        tag_base += (uint64_t)NCOMBO;
    }
    cur_first = first;
    cur_last  = last;
}

static tess_array_h make_array(const char *name, int nd, int32_t x, int32_t y, int32_t z)
{
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = name, .ndims = nd,
                             .extents = {x, y, z}, .elem_size = sizeof(elem_t)};
    tess_array_h a;
    CHECK_OK(tess_array_create(&p, &a));
    return a;
}

static void set_ext(int32_t x, int32_t y, int32_t z)
{
    cur_ext[0] = x;
    cur_ext[1] = y;
    cur_ext[2] = z;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    static const tess_op_t int_ops[] = {TESS_SUM, TESS_PROD, TESS_MIN, TESS_MAX, TESS_LAND,
                                        TESS_LOR, TESS_BAND, TESS_BOR};
    static const tess_dtype_t types[] = {TESS_INT32, TESS_INT64, TESS_FLOAT, TESS_DOUBLE};
    for (int c = 0; c < 2; c++)
        for (int t = 0; t < 4; t++)
            for (int o = 0; o < (types[t] == TESS_FLOAT || types[t] == TESS_DOUBLE ? 6 : 8); o++)
                combos[ncombos++] = (combo_t){types[t], int_ops[o], c == 0 ? 1 : MAXCOUNT};
    CHECK(ncombos == NCOMBO && sizeof(res_fns) / sizeof(res_fns[0]) == NCOMBO);

    CHECK_OK(tess_entry_register("go", go, &E_GO));
    CHECK_OK(tess_entry_register("go2", go2, &E_GO2));
    for (int k = 0; k < NCOMBO; k++) {
        char name[32];
        snprintf(name, sizeof(name), "result%d", k);
        CHECK_OK(tess_entry_register(name, res_fns[k], &E_RES[k]));
    }
    double  t0   = MPI_Wtime();
    int     npes = tess_num_pes();
    /* Spread over every PE. Result k of an element callback goes to entry k of element k % n. */
    int32_t n = 2 * npes + 5;
    set_ext(n, 1, 1);
    run_rounds(make_array("line", 1, n, 1, 1), 0, NCOMBO, 1);

    /* Fewer elements than PEs. */
    int32_t ns = npes > 2 ? npes - 3 : 1;
    set_ext(ns, 1, 1);
    run_rounds(make_array("small", 1, ns, 1, 1), 0, NCOMBO, 5);

    set_ext(4, 3, 1);
    run_rounds(make_array("grid2d", 2, 4, 3, 1), 0, NCOMBO, 7);

    set_ext(3, 2, 3);
    run_rounds(make_array("grid3d", 3, 3, 2, 3), 0, NCOMBO, 7);

    /* The spanning tree: no process combined more partials from its children for one reduction
     * than it has children (at most k); nothing migrates here, so nothing went on alone. */
    tess_tree_stats_t ts;
    CHECK_OK(tess_tree_get_stats(&ts));
    CHECK_MSG(ts.max_fanin <= ts.children && ts.children <= ts.arity,
              "process %d: fan-in %lld with %d children (k = %d)", tess_process(),
              (long long)ts.max_fanin, ts.children, ts.arity);
    CHECK_MSG(ts.late == 0, "process %d: %lld partials went on alone", tess_process(),
              (long long)ts.late);
    CHECK(ts.combined > 0);
    if (tess_process() == 0)
        printf("reduce: %d combinations x 3 callback kinds on 4 arrays in %.2f s, root fan-in "
               "%lld (k = %d): ok\n", NCOMBO, MPI_Wtime() - t0, (long long)ts.max_fanin,
               ts.arity);
    test_fini();
    return 0;
}

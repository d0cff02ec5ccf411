/* test_lb_strategy: the built-in load-balancing strategies on synthetic loads (uniform, one
 * very heavy object, the Jacobi case of 25% heavy objects, m+1 equal objects, random loads with
 * a fixed seed, background loads, 100k objects), checked against bounds derived below and
 * against brute force on tiny cases; refine, greedyrefine and hybrid against greedy's migrations
 * (hybrid also over noisy repeated steps); evencount's even counts and balance (LULESH's measured
 * loads, noisy steps, random and large cases);
 * rotate, none, determinism, bad input, tess_lb_imbalance, and lookup and registration by
 * name. No MPI. */
#include "lb/lb.h"
#include "util/util.h"
#include "tess_test.h"

#include <math.h>

#define EPS 1e-9
#define TOL 0.05

typedef struct lb_case {
    tess_lb_input_t in;
    tess_lb_obj_t  *objs;
    double         *bg;
    int            *out;
} lb_case_t;

static lb_case_t case_new(int nbins, int nobjs, bool with_bg)
{
    lb_case_t c = {0};
    c.objs = calloc((size_t)(nobjs ? nobjs : 1), sizeof(*c.objs));
    c.out  = calloc((size_t)(nobjs ? nobjs : 1), sizeof(*c.out));
    c.bg   = with_bg ? calloc((size_t)nbins, sizeof(*c.bg)) : NULL;
    CHECK(c.objs && c.out && (!with_bg || c.bg));
    for (int i = 0; i < nobjs; i++)
        c.objs[i].id = i;
    c.in = (tess_lb_input_t){nbins, c.bg, nobjs, c.objs, TOL};
    return c;
}

static void case_free(lb_case_t *c)
{
    free(c->objs);
    free(c->out);
    free(c->bg);
}

/* Run a strategy into c->out and check every new bin is in range. */
static void run(lb_case_t *c, tess_lb_strategy_fn_t fn)
{
    for (int i = 0; i < c->in.nobjs; i++)
        c->out[i] = -1;
    fn(&c->in, c->out, NULL);
    for (int i = 0; i < c->in.nobjs; i++)
        CHECK_MSG(c->out[i] >= 0 && c->out[i] < c->in.nbins, "object %d to bin %d of %d", i,
                  c->out[i], c->in.nbins);
}

static int moves(const lb_case_t *c)
{
    int n = 0;
    for (int i = 0; i < c->in.nobjs; i++)
        n += c->out[i] != c->objs[i].bin;
    return n;
}

/* Adopt the strategy's answer as the current assignment. */
static void adopt(lb_case_t *c)
{
    for (int i = 0; i < c->in.nobjs; i++)
        c->objs[i].bin = c->out[i];
}

static double bg_of(const lb_case_t *c, int b) { return c->bg ? c->bg[b] : 0.0; }

static double total_load(const lb_case_t *c)
{
    double w = 0;
    for (int b = 0; b < c->in.nbins; b++)
        w += bg_of(c, b);
    for (int i = 0; i < c->in.nobjs; i++)
        w += c->objs[i].load;
    return w;
}

/* The most loaded bin's load under an assignment (NULL: the current one). */
static double max_load(const lb_case_t *c, const int *bins)
{
    double *l = calloc((size_t)c->in.nbins, sizeof(*l)), max = 0;
    CHECK(l);
    for (int b = 0; b < c->in.nbins; b++)
        l[b] = bg_of(c, b);
    for (int i = 0; i < c->in.nobjs; i++)
        l[bins ? bins[i] : c->objs[i].bin] += c->objs[i].load;
    for (int b = 0; b < c->in.nbins; b++)
        max = fmax(max, l[b]);
    free(l);
    return max;
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/*
 * A bound on greedy's most loaded bin. Take the last object c placed on the bin that ends most
 * loaded: that bin was then the least loaded, so at most (W - load_c) / m, and it ends at most
 * W/m + (1 - 1/m) load_c (W: all load, background included; m bins) — or it holds no object and
 * is its background. Without background loads, if c is among the m heaviest, some bin was still
 * empty when c was placed, so the bin is c alone (<= max_obj); otherwise load_c <= o_(m+1), the
 * (m+1)-th heaviest load. (The bound is tight: m+1 equal objects. LPT's 4/3 is relative to the
 * true optimum, which may be ~2x the lower bound max(max_obj, W/m): see test_equal().)
 */
static double greedy_bound(const lb_case_t *c)
{
    int     m = c->in.nbins, n = c->in.nobjs;
    double  w = total_load(c), max_bg = 0;
    double *l = calloc((size_t)(n ? n : 1), sizeof(*l));
    CHECK(l);
    for (int i = 0; i < n; i++)
        l[i] = c->objs[i].load;
    qsort(l, (size_t)n, sizeof(*l), cmp_desc);
    for (int b = 0; b < m; b++)
        max_bg = fmax(max_bg, bg_of(c, b));
    double max_obj = n ? l[0] : 0, crit = max_obj;
    if (max_bg == 0)
        crit = n > m ? l[m] : 0;
    free(l);
    return fmax(fmax(max_bg, max_obj), w / m + (1.0 - 1.0 / m) * crit);
}

/* Run greedy, check it against greedy_bound() and return its imbalance. */
static double check_greedy_bound(lb_case_t *c, const char *what)
{
    run(c, tess_lb_greedy);
    double got = max_load(c, c->out), bound = greedy_bound(c);
    double avg = total_load(c) / c->in.nbins;
    CHECK_MSG(got <= bound * (1 + EPS), "%s: greedy max %g > bound %g", what, got, bound);
    CHECK(fabs(tess_lb_imbalance(&c->in, c->out) - got / avg) < EPS);
    printf("  %-34s greedy imbalance %.4f (bound %.4f), %d moves\n", what, got / avg,
           bound / avg, moves(c));
    return got / avg;
}

static uint64_t seed = 42;
static double rnd(double lo, double hi)
{
    return lo + (hi - lo) * (double)(test_rand(&seed) >> 11) / 9007199254740992.0;
}

/* ---- greedy ------------------------------------------------------------------------------- */

static void test_uniform(void)
{
    lb_case_t c = case_new(8, 64, false);
    for (int i = 0; i < 64; i++)
        c.objs[i] = (tess_lb_obj_t){i, 1.0, 0};
    CHECK(fabs(tess_lb_imbalance(&c.in, NULL) - 8.0) < EPS); /* all on bin 0 */
    check_greedy_bound(&c, "uniform, all on bin 0");
    CHECK(fabs(tess_lb_imbalance(&c.in, c.out) - 1.0) < EPS);
    CHECK(moves(&c) == 56);
    /* Ties: equal loads by id, equal bins by index: object i lands on bin i % 8. */
    for (int i = 0; i < 64; i++)
        CHECK(c.out[i] == i % 8);
    case_free(&c);
}

static void test_one_heavy(void)
{
    lb_case_t c = case_new(8, 64, false);
    for (int i = 0; i < 64; i++)
        c.objs[i] = (tess_lb_obj_t){i, i == 17 ? 100.0 : 1.0, 0};
    check_greedy_bound(&c, "one object 100x, all on bin 0");
    CHECK(fabs(max_load(&c, c.out) - 100.0) < EPS); /* the heavy object alone: optimal */
    for (int i = 0; i < 64; i++)
        CHECK(i == 17 || c.out[i] != c.out[17]);

    /* refine from all-on-bin-0 ends as well. At its first threshold (1.05 x the average,
     * 21.4) every light object leaves the heavy one's bin, which stays above it; raised until
     * a pass leaves no bin above it, the threshold reaches the heavy object's 100, where moving
     * that one object alone gives the same most loaded bin in one move instead of 63. */
    run(&c, tess_lb_refine);
    CHECK(fabs(max_load(&c, c.out) - 100.0) < EPS);
    CHECK_MSG(c.out[17] != 0 && moves(&c) == 1, "object 17 on bin %d, %d moves", c.out[17],
              moves(&c));
    case_free(&c);
}

/* The Jacobi imbalance case: 8 bins, 64 objects in blocks of 8, the first 25% 3x heavier. */
static void test_jacobi(void)
{
    lb_case_t c = case_new(8, 64, false);
    for (int i = 0; i < 64; i++)
        c.objs[i] = (tess_lb_obj_t){i, i < 16 ? 3.0 : 1.0, i / 8};
    double before = tess_lb_imbalance(&c.in, NULL);
    CHECK(fabs(before - 2.0) < EPS);
    check_greedy_bound(&c, "Jacobi: 25% at 3x, 8 bins");
    CHECK(fabs(tess_lb_imbalance(&c.in, c.out) - 1.0) < EPS); /* 2 heavy + 6 light each */
    int greedy_moves = moves(&c);

    /* refine can only move objects off bins 0 and 1, one heavy object per light bin. */
    run(&c, tess_lb_refine);
    double refine_imb = tess_lb_imbalance(&c.in, c.out);
    /* At 1.05 x the average a light bin takes one heavy object and bins 0 and 1 stay at 15;
     * raised to 14, each takes two where needed: the most loaded bin 14, 8 moves. */
    CHECK_MSG(fabs(refine_imb - 14.0 / 12.0) < EPS && moves(&c) == 8, "refine: %.4f, %d moves",
              refine_imb, moves(&c));
    for (int i = 0; i < 64; i++)
        CHECK(c.out[i] == c.objs[i].bin || c.objs[i].bin < 2);
    printf("  %-34s refine imbalance %.4f, %d moves\n", "", refine_imb, moves(&c));

    run(&c, tess_lb_greedy_refine);
    double gr_imb = tess_lb_imbalance(&c.in, c.out);
    CHECK(gr_imb <= 1.0 + TOL + EPS);
    CHECK(moves(&c) < greedy_moves);
    printf("  %-34s greedyrefine imbalance %.4f, %d moves (greedy %d)\n", "", gr_imb, moves(&c),
           greedy_moves);
    case_free(&c);
}

/* m+1 equal objects on m bins: greedy is optimal (2) yet 16/9 of the lower bound 9/8. */
static void test_equal(void)
{
    lb_case_t c = case_new(8, 9, false);
    for (int i = 0; i < 9; i++)
        c.objs[i] = (tess_lb_obj_t){i, 1.0, 0};
    check_greedy_bound(&c, "9 equal objects, 8 bins");
    CHECK(fabs(max_load(&c, c.out) - 2.0) < EPS && fabs(greedy_bound(&c) - 2.0) < EPS);
    CHECK(fabs(tess_lb_imbalance(&c.in, c.out) - 16.0 / 9.0) < EPS);
    case_free(&c);
}

static void test_random(void)
{
    lb_case_t c = case_new(16, 1000, false);
    for (int i = 0; i < 1000; i++)
        c.objs[i] = (tess_lb_obj_t){i, rnd(0.1, 10.0), (int)(test_rand(&seed) % 16)};
    check_greedy_bound(&c, "1000 random loads, 16 bins");
    CHECK(tess_lb_imbalance(&c.in, c.out) < 1.01); /* many small objects: near perfect */
    case_free(&c);
}

static void test_background(void)
{
    lb_case_t c = case_new(8, 64, true);
    for (int i = 0; i < 64; i++)
        c.objs[i] = (tess_lb_obj_t){i, rnd(0.5, 2.0), i % 8};
    c.bg[0] = 10.0;
    c.bg[3] = 5.0;
    c.bg[6] = 2.5;
    check_greedy_bound(&c, "random loads, background on 3 bins");
    CHECK(tess_lb_imbalance(&c.in, c.out) < 1.1);

    /* A bin whose background alone exceeds the average receives nothing. */
    c.bg[0] = 1000.0;
    check_greedy_bound(&c, "background 1000 on bin 0");
    for (int i = 0; i < 64; i++)
        CHECK(c.out[i] != 0);
    case_free(&c);
}

/* Brute force on tiny cases: greedy (LPT) <= (4/3 - 1/(3m)) of the true optimum. */
static double opt_rec(const double *w, int n, int k, double *l, int m, double best)
{
    if (k == n) {
        double max = 0;
        for (int b = 0; b < m; b++)
            max = fmax(max, l[b]);
        return fmin(best, max);
    }
    for (int b = 0; b < m; b++) {
        if (l[b] + w[k] >= best)
            continue;
        l[b] += w[k];
        best = opt_rec(w, n, k + 1, l, m, best);
        l[b] -= w[k];
        if (l[b] == 0)
            break; /* the empty bins are alike */
    }
    return best;
}

static void test_lpt_vs_optimum(void)
{
    enum { M = 3, N = 8, CASES = 300 };
    double worst = 0;
    for (int t = 0; t < CASES; t++) {
        lb_case_t c = case_new(M, N, false);
        double    w[N], l[M] = {0};
        for (int i = 0; i < N; i++) {
            c.objs[i] = (tess_lb_obj_t){i, (double)(1 + test_rand(&seed) % 20), 0};
            w[i] = c.objs[i].load;
        }
        double opt = opt_rec(w, N, 0, l, M, INFINITY);
        run(&c, tess_lb_greedy);
        double ratio = max_load(&c, c.out) / opt;
        CHECK_MSG(ratio <= 4.0 / 3.0 - 1.0 / (3.0 * M) + EPS, "case %d: LPT/OPT %g", t, ratio);
        worst = fmax(worst, ratio);
        case_free(&c);
    }
    printf("  %-34s worst greedy/optimum %.4f (LPT bound %.4f)\n", "300 tiny cases, brute force",
           worst, 4.0 / 3.0 - 1.0 / (3.0 * M));
}

/* ---- refine ------------------------------------------------------------------------------- */

static void test_refine(void)
{
    lb_case_t c = case_new(8, 512, false);
    for (int i = 0; i < 512; i++)
        c.objs[i] = (tess_lb_obj_t){i, rnd(0.5, 1.5), 0};
    run(&c, tess_lb_greedy);
    adopt(&c);
    for (int i = 0; i < 512; i++) /* loads drift a little (else greedy repeats itself) */
        c.objs[i].load *= rnd(0.98, 1.02);
    CHECK(tess_lb_imbalance(&c.in, NULL) <= 1.0 + TOL);

    /* Balanced within the tolerance already: nothing moves. */
    run(&c, tess_lb_refine);
    CHECK(moves(&c) == 0);

    /* Nearly balanced: 12 objects from the other bins pile onto bin 3. */
    for (int i = 0, n = 0; n < 12; i++)
        if (c.objs[i].bin != 3) {
            c.objs[i].bin = 3;
            n++;
        }
    double before = tess_lb_imbalance(&c.in, NULL);
    CHECK(before > 1.0 + TOL);
    run(&c, tess_lb_refine);
    double after = tess_lb_imbalance(&c.in, c.out);
    int    refine_moves = moves(&c);
    CHECK_MSG(after <= 1.0 + TOL + EPS, "refine left %g", after);
    for (int i = 0; i < 512; i++) /* only the overloaded bin gives objects away */
        CHECK(c.out[i] == c.objs[i].bin || c.objs[i].bin == 3);
    int saved[512];
    memcpy(saved, c.out, sizeof(saved));

    run(&c, tess_lb_greedy);
    int greedy_moves = moves(&c);
    CHECK_MSG(refine_moves > 0 && refine_moves <= 12 && refine_moves * 10 < greedy_moves,
              "refine %d moves, greedy %d", refine_moves, greedy_moves);
    printf("  %-34s imbalance %.4f -> refine %.4f, %d moves (greedy %d)\n",
           "512 objects, 12 piled on one bin", before, after, refine_moves, greedy_moves);

    /* A tolerance <= 0 means the default 0.05. */
    c.in.tolerance = 0;
    run(&c, tess_lb_refine);
    CHECK(memcmp(saved, c.out, sizeof(saved)) == 0);
    c.in.tolerance = -1;
    run(&c, tess_lb_refine);
    CHECK(memcmp(saved, c.out, sizeof(saved)) == 0);

    /* A tighter tolerance costs more moves but is still met. */
    c.in.tolerance = 0.01;
    run(&c, tess_lb_refine);
    CHECK(tess_lb_imbalance(&c.in, c.out) <= 1.01 + EPS && moves(&c) >= refine_moves);
    case_free(&c);
}

/* Four objects of 4 on bin 0, four of 1 on each of three others (average 7): at 1.05 x the
 * average no object of bin 0 fits anywhere; the threshold raised to 8 moves two of them. */
static void test_refine_raised(void)
{
    lb_case_t c = case_new(4, 16, false);
    for (int i = 0; i < 16; i++)
        c.objs[i] = (tess_lb_obj_t){i, i < 4 ? 4.0 : 1.0, i / 4};
    run(&c, tess_lb_refine);
    CHECK_MSG(fabs(max_load(&c, c.out) - 8.0) < EPS && moves(&c) == 2, "refine: max %g, %d moves",
              max_load(&c, c.out), moves(&c));
    for (int i = 0; i < 16; i++)
        CHECK(c.out[i] == c.objs[i].bin || i < 4);
    /* Again from there: nothing makes the most loaded bin lighter, so nothing moves. */
    adopt(&c);
    run(&c, tess_lb_refine);
    CHECK(moves(&c) == 0);
    printf("  %-34s refine imbalance %.4f, 2 moves, then 0\n", "4 objects of 4 on bin 0 of 4",
           8.0 / 7.0);
    case_free(&c);
}

/* A background load refine cannot fix: bin 0 gives away all it can, then refine stops. */
static void test_refine_background(void)
{
    lb_case_t c = case_new(4, 40, true);
    for (int i = 0; i < 40; i++)
        c.objs[i] = (tess_lb_obj_t){i, 1.0, i % 4};
    c.bg[0] = 100.0;
    run(&c, tess_lb_refine);
    /* Average (100 + 40) / 4 = 35, limit 36.75: bins 1-3 take all 10 of bin 0's objects. */
    for (int i = 0; i < 40; i++)
        CHECK(c.out[i] != 0);
    CHECK(moves(&c) == 10);
    printf("  %-34s refine imbalance %.4f, %d moves\n", "background 100 on bin 0 of 4",
           tess_lb_imbalance(&c.in, c.out), moves(&c));
    case_free(&c);
}

/* ---- greedyrefine ------------------------------------------------------------------------- */

static void test_greedy_refine(void)
{
    lb_case_t c = case_new(16, 1024, false);
    for (int i = 0; i < 1024; i++)
        c.objs[i] = (tess_lb_obj_t){i, rnd(0.2, 5.0), 0};
    run(&c, tess_lb_greedy);
    adopt(&c);
    for (int i = 0; i < 1024; i++) /* the loads drift, bins 0-3 up: mildly imbalanced */
        c.objs[i].load *= rnd(0.9, 1.1) * (c.objs[i].bin < 4 ? 1.12 : 1.0);
    double before = tess_lb_imbalance(&c.in, NULL);

    run(&c, tess_lb_greedy);
    double greedy_imb = tess_lb_imbalance(&c.in, c.out);
    int    greedy_moves = moves(&c);
    run(&c, tess_lb_greedy_refine);
    double gr_imb = tess_lb_imbalance(&c.in, c.out);
    int    gr_moves = moves(&c);
    CHECK_MSG(gr_imb <= greedy_imb * (1 + TOL) + EPS, "greedyrefine %g, greedy %g", gr_imb,
              greedy_imb);
    CHECK(gr_imb <= 1.0 + TOL + EPS);
    CHECK_MSG(gr_moves * 4 < greedy_moves, "greedyrefine %d moves, greedy %d", gr_moves,
              greedy_moves);
    printf("  %-34s imbalance %.4f -> greedy %.4f (%d moves), greedyrefine %.4f (%d moves)\n",
           "1024 drifted loads, 16 bins", before, greedy_imb, greedy_moves, gr_imb, gr_moves);

    /* Its own answer as the start: (almost) nothing moves; weightless objects never move. */
    adopt(&c);
    run(&c, tess_lb_greedy_refine);
    CHECK(moves(&c) <= gr_moves / 4);
    for (int i = 0; i < 1024; i++)
        c.objs[i].load = 0;
    run(&c, tess_lb_greedy_refine);
    CHECK(moves(&c) == 0);
    case_free(&c);

    /* Equal objects in blocks, balanced: greedy deals them out anew, greedyrefine keeps them. */
    c = case_new(8, 64, false);
    for (int i = 0; i < 64; i++)
        c.objs[i] = (tess_lb_obj_t){i, 1.0, i / 8};
    run(&c, tess_lb_greedy);
    greedy_moves = moves(&c);
    run(&c, tess_lb_greedy_refine);
    CHECK(moves(&c) == 0 && greedy_moves == 56);
    printf("  %-34s greedy %d moves, greedyrefine %d\n", "balanced blocks of equal objects",
           greedy_moves, moves(&c));
    case_free(&c);
}

/* ---- hybrid ------------------------------------------------------------------------------ */

static void test_hybrid(void)
{
    /* Within the tolerance: nothing moves, though greedy would do better. */
    lb_case_t c = case_new(2, 16, false);
    for (int i = 0; i < 16; i++)
        c.objs[i] = (tess_lb_obj_t){i, i < 8 ? 1.04 : 0.96, i / 8};
    run(&c, tess_lb_hybrid);
    CHECK(moves(&c) == 0);
    case_free(&c);
    c = case_new(8, 64, false); /* balanced blocks of equal objects */
    for (int i = 0; i < 64; i++)
        c.objs[i] = (tess_lb_obj_t){i, 1.0, i / 8};
    run(&c, tess_lb_hybrid);
    CHECK(moves(&c) == 0);
    case_free(&c);

    /* LULESH's regions on two devices: bin 0's 8 objects 3 times bin 1's (max/avg ~1.5).
     * hybrid reaches greedy's balance within a quarter of the tolerance, with fewer moves;
     * greedyrefine may stop up to a tolerance above greedy. */
    c = case_new(2, 16, false);
    double truth[16];
    for (int i = 0; i < 16; i++) {
        truth[i]   = i < 8 ? rnd(2, 4) : rnd(0.5, 1.5);
        c.objs[i]  = (tess_lb_obj_t){i, truth[i], i / 8};
    }
    double before = tess_lb_imbalance(&c.in, NULL);
    run(&c, tess_lb_greedy);
    double greedy_imb = tess_lb_imbalance(&c.in, c.out);
    int    greedy_moves = moves(&c);
    run(&c, tess_lb_greedy_refine);
    double gr_imb = tess_lb_imbalance(&c.in, c.out);
    run(&c, tess_lb_hybrid);
    double hy_imb = tess_lb_imbalance(&c.in, c.out);
    int    hy_moves = moves(&c);
    CHECK(before > 1.3);
    CHECK_MSG(hy_imb <= greedy_imb * (1 + TOL / 4) + EPS, "hybrid %g, greedy %g", hy_imb,
              greedy_imb);
    CHECK_MSG(hy_moves <= greedy_moves, "hybrid %d moves, greedy %d", hy_moves, greedy_moves);
    printf("  %-34s imbalance %.4f -> greedy %.4f (%d moves), greedyrefine %.4f, hybrid %.4f "
           "(%d moves)\n", "two bins, 16 LULESH-like objects", before, greedy_imb, greedy_moves,
           gr_imb, hy_imb, hy_moves);

    /* The same loads measured with +-5% noise at each of 20 steps, the answer adopted each
     * time: after the first step hybrid (almost) never moves; greedy re-deals at every step. */
    int hy_later = 0, greedy_later = 0;
    for (int pass = 0; pass < 2; pass++) {
        tess_lb_strategy_fn_t fn = pass ? tess_lb_greedy : tess_lb_hybrid;
        for (int i = 0; i < 16; i++)
            c.objs[i].bin = i / 8;
        int later = 0;
        for (int step = 0; step < 20; step++) {
            for (int i = 0; i < 16; i++)
                c.objs[i].load = truth[i] * rnd(0.95, 1.05);
            run(&c, fn);
            if (step > 0)
                later += moves(&c);
            adopt(&c);
        }
        for (int i = 0; i < 16; i++)
            c.objs[i].load = truth[i];
        double imb = tess_lb_imbalance(&c.in, NULL);
        CHECK_MSG(imb <= greedy_imb * (1 + TOL) + EPS, "%s ends at %g", pass ? "greedy" : "hybrid",
                  imb);
        *(pass ? &greedy_later : &hy_later) = later;
    }
    CHECK_MSG(hy_later <= 2, "hybrid moved %d objects over 19 noisy steps", hy_later);
    CHECK(greedy_later > 4 * (hy_later + 1));
    printf("  %-34s moves over 19 more steps: hybrid %d, greedy %d\n", "the same with 5% noise",
           hy_later, greedy_later);
    case_free(&c);

    /* Nothing better to be had (one object heavier than the rest together): no moves. */
    c = case_new(4, 8, false);
    for (int i = 0; i < 8; i++)
        c.objs[i] = (tess_lb_obj_t){i, i == 0 ? 100.0 : 1.0, i % 4};
    run(&c, tess_lb_hybrid);
    CHECK(moves(&c) == 0);
    /* Weightless objects never move. */
    for (int i = 0; i < 8; i++)
        c.objs[i] = (tess_lb_obj_t){i, i < 4 ? 1.0 : 0.0, 0};
    run(&c, tess_lb_hybrid);
    for (int i = 4; i < 8; i++)
        CHECK(c.out[i] == 0);
    CHECK(tess_lb_imbalance(&c.in, c.out) <= 1.0 + EPS);
    case_free(&c);

    /* A larger drifted case: within the tolerance of the best, fewer moves than greedy. */
    c = case_new(16, 1024, false);
    for (int i = 0; i < 1024; i++)
        c.objs[i] = (tess_lb_obj_t){i, rnd(0.2, 5.0), i % 16};
    for (int i = 0; i < 1024; i++)
        c.objs[i].load *= c.objs[i].bin < 4 ? 1.3 : 1.0;
    run(&c, tess_lb_greedy);
    greedy_imb   = tess_lb_imbalance(&c.in, c.out);
    greedy_moves = moves(&c);
    run(&c, tess_lb_hybrid);
    CHECK(tess_lb_imbalance(&c.in, c.out) <= greedy_imb * (1 + TOL) + EPS);
    CHECK(moves(&c) * 2 < greedy_moves);
    printf("  %-34s greedy %.4f (%d moves), hybrid %.4f (%d moves)\n",
           "1024 objects, 16 bins, 4 at 1.3x", greedy_imb, greedy_moves,
           tess_lb_imbalance(&c.in, c.out), moves(&c));
    case_free(&c);
}

/* ---- evencount ---------------------------------------------------------------------------- */

/* Every bin holds floor(n / nbins) or ceil(n / nbins) objects under c->out. */
static bool counts_even(const lb_case_t *c)
{
    int *cnt = calloc((size_t)c->in.nbins, sizeof(int));
    int  n = c->in.nobjs, nb = c->in.nbins;
    bool ok = true;
    CHECK(cnt);
    for (int i = 0; i < n; i++)
        cnt[c->out[i]]++;
    for (int b = 0; b < nb; b++)
        ok &= cnt[b] >= n / nb && cnt[b] <= (n + nb - 1) / nb;
    free(cnt);
    return ok;
}

static void test_evencount(void)
{
    /* Balanced and even: nothing moves. */
    lb_case_t c = case_new(2, 16, false);
    for (int i = 0; i < 16; i++)
        c.objs[i] = (tess_lb_obj_t){i, i < 8 ? 1.04 : 0.96, i / 8};
    run(&c, tess_lb_evencount);
    CHECK(moves(&c) == 0);

    /* LULESH 32^3, 16 chares on two host devices, -b 8 -c 100 -rotate 2: the loads the
     * balancer measured at its first step (ms per 10 cycles; chares 0-7 on bin 0). greedy and
     * hybrid balance the sum and leave bin 0 with 5-6 chares; evencount reaches the same balance
     * with 8 on each. */
    static const double lulesh[16] = {98.7, 54.3, 17.1, 17.8, 86.1, 46.9, 85.2, 15.4,
                                      55.5, 14.3, 17.5, 20.6, 13.9, 12.6, 16.3, 24.4};
    for (int i = 0; i < 16; i++)
        c.objs[i] = (tess_lb_obj_t){i, lulesh[i], i / 8};
    double before = tess_lb_imbalance(&c.in, NULL);
    run(&c, tess_lb_hybrid);
    double hy_imb = tess_lb_imbalance(&c.in, c.out);
    int    hy_moves = moves(&c), hy_bin0 = 0;
    for (int i = 0; i < 16; i++)
        hy_bin0 += c.out[i] == 0;
    run(&c, tess_lb_evencount);
    double ev_imb = tess_lb_imbalance(&c.in, c.out);
    CHECK(before > 1.4);
    CHECK(counts_even(&c));
    CHECK_MSG(ev_imb <= 1 + TOL / 4 + EPS, "evencount %g", ev_imb);
    CHECK_MSG(moves(&c) <= 6, "evencount %d moves", moves(&c));
    printf("  %-34s imbalance %.4f -> hybrid %.4f (%d moves, %d/%d chares), evencount %.4f "
           "(%d moves, 8/8)\n", "LULESH's 16 chares, two devices", before, hy_imb, hy_moves,
           hy_bin0, 16 - hy_bin0, ev_imb, moves(&c));

    /* The same loads with +-5% noise at each of 20 steps, the answer adopted each time: after
     * the first step (almost) nothing moves. */
    int later = 0;
    for (int step = 0; step < 20; step++) {
        for (int i = 0; i < 16; i++)
            c.objs[i].load = lulesh[i] * rnd(0.95, 1.05);
        run(&c, tess_lb_evencount);
        CHECK(counts_even(&c));
        if (step > 0)
            later += moves(&c);
        adopt(&c);
    }
    for (int i = 0; i < 16; i++)
        c.objs[i].load = lulesh[i];
    CHECK_MSG(tess_lb_imbalance(&c.in, NULL) <= 1 + 2 * TOL, "ends at %g",
              tess_lb_imbalance(&c.in, NULL));
    CHECK_MSG(later <= 4, "evencount moved %d objects over 19 noisy steps", later);
    printf("  %-34s moves over 19 more steps: %d\n", "the same with 5% noise", later);
    case_free(&c);

    /* Uneven counts are evened even when the loads are balanced: 3 bins, 10 equal objects all
     * but one on bin 0 -> 4/3/3 (or 3/4/3 ...), every object of bin 0's excess moving once. */
    c = case_new(3, 10, false);
    for (int i = 0; i < 10; i++)
        c.objs[i] = (tess_lb_obj_t){i, 1.0, i == 9 ? 1 : 0};
    run(&c, tess_lb_evencount);
    CHECK(counts_even(&c));
    CHECK(moves(&c) == 5);
    CHECK(tess_lb_imbalance(&c.in, c.out) <= 1.2 + EPS); /* 4 / (10 / 3) */
    case_free(&c);

    /* Random loads and bins, with background load: the counts even, balanced within the
     * tolerance, fewer moves than greedy. */
    for (int rep = 0; rep < 20; rep++) {
        int nb = 2 + rep % 7, n = nb * (8 + rep % 5) + rep % 3;
        c = case_new(nb, n, rep % 2);
        for (int i = 0; i < n; i++)
            c.objs[i] = (tess_lb_obj_t){i, rnd(0.5, 3.0), (int)(test_rand(&seed) % (uint64_t)nb)};
        if (c.bg)
            c.bg[rep % nb] = 2.0;
        run(&c, tess_lb_greedy);
        int greedy_moves = moves(&c);
        run(&c, tess_lb_evencount);
        CHECK(counts_even(&c));
        CHECK_MSG(tess_lb_imbalance(&c.in, c.out) <= 1 + TOL + EPS, "rep %d: %d objects, %d bins: "
                  "%g", rep, n, nb, tess_lb_imbalance(&c.in, c.out));
        CHECK_MSG(moves(&c) <= greedy_moves, "rep %d: %d moves, greedy %d", rep, moves(&c),
                  greedy_moves);
        case_free(&c);
    }

    /* Large: 100k objects, 1024 bins, a quarter of them 1.3x: quick, even, balanced. */
    int n = (int)test_scaled(100000, 1000), m = 1024;
    c = case_new(m, n, false);
    for (int i = 0; i < n; i++)
        c.objs[i] = (tess_lb_obj_t){i, rnd(0.5, 2.0) * (i % m < m / 4 ? 1.3 : 1.0), i % m};
    uint64_t t0 = tess_time_ns();
    run(&c, tess_lb_evencount);
    uint64_t t1 = tess_time_ns();
    CHECK(counts_even(&c));
    CHECK_MSG(tess_lb_imbalance(&c.in, c.out) <= 1 + TOL + EPS, "%g",
              tess_lb_imbalance(&c.in, c.out));
    printf("  %-34s imbalance %.4f, %d moves, %.1f ms\n", "100k objects, 1024 bins",
           tess_lb_imbalance(&c.in, c.out), moves(&c), (t1 - t0) / 1e6);
    case_free(&c);
}

/* ---- rotate, none, determinism, large, bad input ------------------------------------------ */

static void test_rotate_none(void)
{
    lb_case_t c = case_new(5, 50, false);
    for (int i = 0; i < 50; i++)
        c.objs[i] = (tess_lb_obj_t){i, rnd(0, 1), i % 5};
    run(&c, tess_lb_rotate);
    CHECK(moves(&c) == 50);
    for (int i = 0; i < 50; i++)
        CHECK(c.out[i] == (i % 5 + 1) % 5);
    run(&c, tess_lb_none);
    CHECK(moves(&c) == 0);

    c.in.nbins = 1; /* one bin: rotate has nowhere else to go */
    for (int i = 0; i < 50; i++)
        c.objs[i].bin = 0;
    run(&c, tess_lb_rotate);
    CHECK(moves(&c) == 0);
    case_free(&c);
}

static void test_determinism(void)
{
    static const tess_lb_strategy_fn_t fns[] = {tess_lb_greedy, tess_lb_refine,
                                                tess_lb_greedy_refine, tess_lb_hybrid,
                                                tess_lb_evencount, tess_lb_rotate,
                                                tess_lb_none};
    enum { N = 777 };
    lb_case_t c = case_new(12, N, true);
    for (int i = 0; i < N; i++) /* coarse loads: many ties */
        c.objs[i] = (tess_lb_obj_t){i, (double)(test_rand(&seed) % 4), (int)(test_rand(&seed) % 3)};
    c.bg[5] = 7;
    static int first[N];
    for (size_t f = 0; f < TESS_ARRAY_LEN(fns); f++) {
        run(&c, fns[f]);
        memcpy(first, c.out, sizeof(first));
        run(&c, fns[f]);
        CHECK(memcmp(first, c.out, sizeof(first)) == 0);
    }

    /* greedy does not depend on the objects' order, only on their ids and loads. */
    run(&c, tess_lb_greedy);
    memcpy(first, c.out, sizeof(first));
    lb_case_t p = case_new(12, N, true);
    memcpy(p.bg, c.bg, 12 * sizeof(double));
    for (int i = 0; i < N; i++)
        p.objs[i] = c.objs[(i * 389) % N]; /* 389 is prime to 777 */
    run(&p, tess_lb_greedy);
    for (int i = 0; i < N; i++)
        CHECK(p.out[i] == first[p.objs[i].id]);
    case_free(&p);
    case_free(&c);
}

static void test_large(void)
{
    int       n = (int)test_scaled(100000, 1000), m = 1024;
    lb_case_t c = case_new(m, n, false);
    for (int i = 0; i < n; i++)
        c.objs[i] = (tess_lb_obj_t){i, rnd(0.1, 3.0), (int)(test_rand(&seed) % 64)};
    uint64_t t0 = tess_time_ns();
    double   greedy_imb = check_greedy_bound(&c, "100k objects, 1024 bins");
    uint64_t t1 = tess_time_ns();
    run(&c, tess_lb_refine);
    uint64_t t2 = tess_time_ns();
    CHECK(tess_lb_imbalance(&c.in, c.out) <= 1.0 + TOL + EPS);
    int refine_moves = moves(&c);
    run(&c, tess_lb_greedy_refine);
    uint64_t t3 = tess_time_ns();
    /* Kept objects may fill their bins up to (1 + tolerance) of greedy's most loaded bin. */
    CHECK(tess_lb_imbalance(&c.in, c.out) <= greedy_imb * (1.0 + TOL) + EPS);
    CHECK(moves(&c) < n);
    printf("  %-34s refine %d moves, greedyrefine %d moves (imbalance %.4f)\n", "",
           refine_moves, moves(&c), tess_lb_imbalance(&c.in, c.out));
    printf("  %-34s greedy %.1f ms, refine %.1f ms, greedyrefine %.1f ms\n", "", (t1 - t0) / 1e6,
           (t2 - t1) / 1e6, (t3 - t2) / 1e6);
    case_free(&c);
}

static void test_bad_input(void)
{
    int saved_level = tess_log_level;
    tess_log_level  = TESS_LOG_ERROR; /* the warnings are expected */
    static const tess_lb_strategy_fn_t fns[] = {tess_lb_greedy, tess_lb_refine,
                                                tess_lb_greedy_refine, tess_lb_hybrid,
                                                tess_lb_evencount, tess_lb_rotate};
    lb_case_t c = case_new(4, 8, true);
    for (int i = 0; i < 8; i++)
        c.objs[i] = (tess_lb_obj_t){i, 1.0, 0};
    for (size_t f = 0; f < TESS_ARRAY_LEN(fns); f++) {
        c.objs[3].load = -1; /* negative load: no moves */
        run(&c, fns[f]);
        CHECK(moves(&c) == 0);
        c.objs[3].load = NAN;
        run(&c, fns[f]);
        CHECK(moves(&c) == 0);
        c.objs[3].load = 1;
        c.bg[2] = INFINITY;
        run(&c, fns[f]);
        CHECK(moves(&c) == 0);
        c.bg[2] = 0;
        c.objs[5].bin = 4; /* out of range: echoed back, nothing else moves */
        fns[f](&c.in, c.out, NULL);
        CHECK(c.out[5] == 4 && c.out[0] == 0 && c.out[7] == 0);
        c.objs[5].bin = 0;
        c.in.nbins = 0;
        fns[f](&c.in, c.out, NULL);
        CHECK(moves(&c) == 0);
        c.in.nbins = 4;
        fns[f](NULL, c.out, NULL); /* must not crash */
        fns[f](&c.in, NULL, NULL);
    }
    CHECK(tess_lb_imbalance(NULL, NULL) == 1.0);
    c.objs[0].bin = -1;
    CHECK(tess_lb_imbalance(&c.in, NULL) == 1.0);
    c.objs[0].bin = 0;
    int bad[8] = {0, 1, 2, 3, 4, 0, 0, 0};
    CHECK(tess_lb_imbalance(&c.in, bad) == 1.0);
    tess_log_level = saved_level;

    /* Zero objects are fine; zero total load is balanced; empty bins count in the average. */
    c.in.nobjs = 0;
    run(&c, tess_lb_greedy);
    run(&c, tess_lb_refine);
    CHECK(tess_lb_imbalance(&c.in, NULL) == 1.0);
    c.in.nobjs = 8;
    c.bg[0] = 4;
    CHECK(fabs(tess_lb_imbalance(&c.in, NULL) - 4.0) < EPS); /* 12 on bin 0, average 3 */
    case_free(&c);
}

/* ---- lookup and registration -------------------------------------------------------------- */

static int   mine_calls;
static void *mine_arg;
static void  mine(const tess_lb_input_t *in, int *new_bin, void *arg)
{
    mine_calls++;
    mine_arg = arg;
    for (int i = 0; i < in->nobjs; i++)
        new_bin[i] = in->nbins - 1;
}
static void mine2(const tess_lb_input_t *in, int *new_bin, void *arg)
{
    (void)arg;
    tess_lb_none(in, new_bin, NULL);
}

static void test_find_register(void)
{
    static const struct { const char *name; tess_lb_strategy_fn_t fn; } builtins[] = {
        {"greedy", tess_lb_greedy}, {"refine", tess_lb_refine},
        {"greedyrefine", tess_lb_greedy_refine}, {"hybrid", tess_lb_hybrid},
        {"evencount", tess_lb_evencount}, {"rotate", tess_lb_rotate},
        {"none", tess_lb_none}};
    int   token = 0;
    void *arg   = &token;
    for (size_t i = 0; i < TESS_ARRAY_LEN(builtins); i++) {
        arg = &token;
        CHECK(tess_lb_find(builtins[i].name, &arg) == builtins[i].fn && arg == NULL);
    }
    arg = &token;
    CHECK(tess_lb_find("nope", &arg) == NULL && arg == NULL);
    CHECK(tess_lb_find("Greedy", NULL) == NULL && tess_lb_find(NULL, NULL) == NULL);
    CHECK(tess_lb_find("mine", NULL) == NULL);

    fprintf(stderr, "test_lb_strategy: the 5 errors logged next are expected\n");
    CHECK(tess_lb_register(NULL, mine, NULL) == TESS_ERR_INVALID);
    CHECK(tess_lb_register("mine", NULL, NULL) == TESS_ERR_INVALID);
    CHECK(tess_lb_register("", mine, NULL) == TESS_ERR_INVALID);
    CHECK(tess_lb_register("greedy", mine, NULL) == TESS_ERR_INVALID);
    CHECK(tess_lb_find("greedy", NULL) == tess_lb_greedy);

    char name_buf[16];
    strcpy(name_buf, "mine");
    CHECK_OK(tess_lb_register(name_buf, mine, &token));
    strcpy(name_buf, "xxxx"); /* the name was copied */
    tess_lb_strategy_fn_t fn = tess_lb_find("mine", &arg);
    CHECK(fn == mine && arg == &token);

    lb_case_t c = case_new(3, 6, false);
    fn(&c.in, c.out, arg);
    CHECK(mine_calls == 1 && mine_arg == &token);
    for (int i = 0; i < 6; i++)
        CHECK(c.out[i] == 2);
    case_free(&c);

    /* Registering the name again replaces it. */
    CHECK_OK(tess_lb_register("mine", mine2, NULL));
    CHECK(tess_lb_find("mine", &arg) == mine2 && arg == NULL);

    /* At most 16: "mine" plus 15 more, then the 17th fails; replacing still works. */
    char name[16];
    for (int i = 1; i < 16; i++) {
        snprintf(name, sizeof(name), "s%d", i);
        CHECK_OK(tess_lb_register(name, mine, NULL));
    }
    CHECK(tess_lb_register("s16", mine, NULL) == TESS_ERR_UNSUPPORTED);
    CHECK_OK(tess_lb_register("s15", mine2, NULL));
    CHECK(tess_lb_find("s15", NULL) == mine2 && tess_lb_find("s16", NULL) == NULL);
}

int main(void)
{
    uint64_t t0 = tess_time_ns();
    printf("greedy:\n");
    test_uniform();
    test_one_heavy();
    test_jacobi();
    test_equal();
    test_random();
    test_background();
    test_lpt_vs_optimum();
    printf("refine:\n");
    test_refine();
    test_refine_raised();
    test_refine_background();
    printf("greedyrefine:\n");
    test_greedy_refine();
    printf("hybrid:\n");
    test_hybrid();
    printf("evencount:\n");
    test_evencount();
    printf("others:\n");
    test_rotate_none();
    test_determinism();
    test_large();
    test_bad_input();
    test_find_register();
    printf("test_lb_strategy: OK (%.0f ms)\n", (tess_time_ns() - t0) / 1e6);
    return 0;
}

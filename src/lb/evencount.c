/*
 * evencount.c — the evencount strategy: balance the load while every bin keeps an even share
 * of the objects (within one), by handing over the lightest objects to even the counts, then
 * exchanging pairs of objects between the most and least loaded bins. It builds on the part of
 * strategy.c every strategy shares (input checks, bin loads, the heap of bins).
 *
 * Like every strategy, a pure function of its input: no MPI, no threads, no state; bad input
 * or no memory is "no moves". Unlike refine, greedyrefine and hybrid it may move an object of
 * load 0 (it counts objects).
 */
#include "lb.h"
#include "util/util.h"

#include <math.h>
#include <stdlib.h>

/* How many bins of lower load a swap is tried with, after the least loaded one. */
#define LB_EVEN_TRIES 8

/* Bin b's objects as a list (head[b], next[i]): swaps touch two bins, never a scan of all. */
static void lb_list_remove(int *head, int *next, int b, int i)
{
    for (int *p = &head[b]; *p >= 0; p = &next[*p]) {
        if (*p == i) {
            *p = next[i];
            return;
        }
    }
}

static void lb_list_move(int *head, int *next, int *bin_of, int i, int to)
{
    lb_list_remove(head, next, bin_of[i], i);
    next[i]   = head[to];
    head[to]  = i;
    bin_of[i] = to;
}

/*
 * The best exchange between bins hi and lo (load[hi] > load[lo]): an object a of hi for an
 * object b of lo, or a alone when the counts allow it (hi keeps at least `floor_n`, lo gets at
 * most `ceil_n`), whose load difference d comes nearest half the gap (0 < d < gap lowers the
 * larger of the two; d = gap / 2 levels them). Returns how far from level it leaves them
 * (|gap - 2d|), or INFINITY when no exchange lowers the larger.
 */
static double lb_even_best(const tess_lb_input_t *in, const int *head, const int *next,
                           const int *count, const double *load, int hi, int lo, int floor_n,
                           int ceil_n, int *a_p, int *b_p)
{
    double gap = load[hi] - load[lo], best = INFINITY;
    bool   single = count[hi] > floor_n && count[lo] < ceil_n;
    for (int a = head[hi]; a >= 0; a = next[a]) {
        double la = in->objs[a].load;
        if (single && la > 0 && la < gap && fabs(gap - 2 * la) < best) {
            best = fabs(gap - 2 * la);
            *a_p = a, *b_p = -1;
        }
        for (int b = head[lo]; b >= 0; b = next[b]) {
            double d = la - in->objs[b].load;
            if (d > 0 && d < gap && fabs(gap - 2 * d) < best) {
                best = fabs(gap - 2 * d);
                *a_p = a, *b_p = b;
            }
        }
    }
    return best;
}

/*
 * Balance the load while every bin keeps an even share of the objects (within one): for
 * objects of about the same size, whose cost comes in phases that grow with the objects (a
 * stencil's or LULESH's element work) and a part that varies (a region's EOS). greedy and
 * hybrid balance the sum: where a few objects are heavy, their bin gets few objects and another
 * many, and each is then the longer one in a different phase, waiting for the other at every
 * exchange between phases. Equal counts and equal sums balance each phase; they also balance
 * what the measured load leaves out and grows with the objects (messages, copies, host work).
 *
 * Nothing moves while the counts are even and the most loaded bin is within the tolerance of
 * the average. Otherwise: bins over their share (more than ceil(n / nbins)) give their
 * lightest objects to the least loaded bin under it, bins under floor(n / nbins) take the
 * lightest object of the most loaded bin above it; then, while the most loaded bin is above
 * the average by more than a quarter of the tolerance, it exchanges with the least loaded bin
 * (or, when no exchange lowers it, the next least loaded, up to LB_EVEN_TRIES of them) the pair
 * of objects whose difference comes nearest half their gap, or one object where the counts
 * allow. Each exchange lowers the sum of squared bin loads, so it ends (and a bound on rounds
 * guards against round-off); it starts from where objects are, so it moves few. Deterministic.
 * Cost per move: O(log nbins) heap updates plus the two bins' objects squared.
 */
void tess_lb_evencount(const tess_lb_input_t *in, int *new_bin, void *arg)
{
    (void)arg;
    if (!tess_lb_args_valid(in, new_bin, "evencount")) {
        tess_lb_no_moves(in, new_bin);
        return;
    }
    tess_lb_no_moves(in, new_bin);
    int       nb = in->nbins, n = in->nobjs, floor_n = n / nb, ceil_n = (n + nb - 1) / nb;
    double   *load  = tess_malloc((size_t)nb * sizeof(*load), "lb bin loads");
    int      *count = tess_calloc((size_t)nb, sizeof(*count), "lb bin counts");
    int      *head  = tess_malloc((size_t)nb * sizeof(*head), "lb bin objects");
    int      *next  = tess_malloc((size_t)(n ? n : 1) * sizeof(*next), "lb bin objects");
    lb_heap_t heavy = {0}, light = {0};
    int       tried[LB_EVEN_TRIES];
    if (!load || !count || !head || !next)
        goto out_free;
    if (tess_lb_heap_init(&heavy, nb, load, true) != TESS_OK)
        goto out_free;
    if (tess_lb_heap_init(&light, nb, load, false) != TESS_OK)
        goto out_free_heavy;
    tess_lb_bin_loads(in, true, load);
    double total = 0, max = 0;
    bool   even = true;
    for (int b = 0; b < nb; b++)
        total += load[b], max = TESS_MAX(max, load[b]), head[b] = -1;
    for (int i = n - 1; i >= 0; i--) { /* lists in input order: ties go to the lower position */
        int b = new_bin[i];
        next[i] = head[b], head[b] = i, count[b]++;
    }
    for (int b = 0; b < nb; b++)
        even &= count[b] >= floor_n && count[b] <= ceil_n;
    double avg = total / nb, tol = tess_lb_tolerance(in);
    if (even && max <= avg * (1 + tol))
        goto out_free_light;

    /* Even the counts, lightest objects first: bins over ceil(n / nbins), in index order, give
     * to the least loaded bin under it (light); then bins under floor(n / nbins) take from the
     * most loaded bin over it (heavy). */
    for (int b = 0; b < nb; b++)
        if (count[b] < ceil_n)
            tess_lb_heap_push(&light, b);
    for (int b = 0; b < nb; b++) {
        while (count[b] > ceil_n && light.count > 0) {
            int to = light.bins[0], pick = head[b];
            for (int i = head[b]; i >= 0; i = next[i])
                if (in->objs[i].load < in->objs[pick].load)
                    pick = i;
            load[b] -= in->objs[pick].load, load[to] += in->objs[pick].load;
            count[b]--, count[to]++;
            lb_list_move(head, next, new_bin, pick, to);
            if (count[to] == ceil_n)
                tess_lb_heap_pop(&light);
            else
                tess_lb_heap_update(&light, to);
        }
    }
    while (light.count > 0)
        tess_lb_heap_pop(&light);
    for (int b = 0; b < nb; b++)
        if (count[b] > floor_n)
            tess_lb_heap_push(&heavy, b);
    for (int b = 0; b < nb; b++) {
        while (count[b] < floor_n && heavy.count > 0) {
            int from = heavy.bins[0], pick = head[from];
            for (int i = head[from]; i >= 0; i = next[i])
                if (in->objs[i].load < in->objs[pick].load)
                    pick = i;
            load[from] -= in->objs[pick].load, load[b] += in->objs[pick].load;
            count[from]--, count[b]++;
            lb_list_move(head, next, new_bin, pick, b);
            if (count[from] == floor_n)
                tess_lb_heap_pop(&heavy);
            else
                tess_lb_heap_update(&heavy, from);
        }
    }
    while (heavy.count > 0)
        tess_lb_heap_pop(&heavy);

    /* Exchanges from the most loaded bin while it is above the slack: with the least loaded
     * bins in turn (light's top LB_EVEN_TRIES, taken off and put back). */
    for (int b = 0; b < nb; b++) {
        tess_lb_heap_push(&heavy, b);
        tess_lb_heap_push(&light, b);
    }
    for (int round = 0; round < 4 * n + nb; round++) {
        int hi = heavy.bins[0];
        if (load[hi] <= avg * (1 + LB_HYBRID_SLACK * tol))
            break;
        int a = -1, bobj = -1, lo = -1, ntried = 0;
        while (a < 0 && ntried < LB_EVEN_TRIES && light.count > 0) {
            int cand = light.bins[0];
            tess_lb_heap_pop(&light);
            tried[ntried++] = cand;
            if (cand == hi)
                continue;
            if (load[cand] >= load[hi])
                break;
            int ta = -1, tb = -1;
            if (lb_even_best(in, head, next, count, load, hi, cand, floor_n, ceil_n, &ta, &tb) <
                INFINITY)
                a = ta, bobj = tb, lo = cand;
        }
        for (int t = 0; t < ntried; t++)
            tess_lb_heap_push(&light, tried[t]);
        if (a < 0)
            break;
        double d = in->objs[a].load - (bobj >= 0 ? in->objs[bobj].load : 0);
        load[hi] -= d, load[lo] += d;
        lb_list_move(head, next, new_bin, a, lo);
        if (bobj >= 0)
            lb_list_move(head, next, new_bin, bobj, hi);
        else
            count[hi]--, count[lo]++;
        tess_lb_heap_update(&heavy, hi), tess_lb_heap_update(&heavy, lo);
        tess_lb_heap_update(&light, hi), tess_lb_heap_update(&light, lo);
    }
out_free_light:
    tess_lb_heap_fini(&light);
out_free_heavy:
    tess_lb_heap_fini(&heavy);
out_free:
    free(next);
    free(head);
    free(count);
    free(load);
}

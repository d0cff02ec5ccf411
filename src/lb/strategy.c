/*
 * strategy.c — the built-in load-balancing strategies greedy, refine, greedyrefine, hybrid,
 * rotate and none, the part every strategy shares (input checks, object order, the heap of
 * bins) and the imbalance measure (evencount.c: evencount; registry.c: the table of strategies
 * by name).
 *
 * Strategies are pure functions of their input: no MPI, no threads, no state. Only bad input
 * can go wrong (no bins, NULL arrays, an object's bin out of range, a negative or non-finite
 * load or background load): a strategy then warns once and leaves every object where it is
 * ("no moves"; an out-of-range current bin is echoed back as it came), and tess_lb_imbalance()
 * returns 1.0. Running out of memory for the scratch arrays is also "no moves" (tess_malloc
 * records and logs it). refine, greedyrefine and hybrid never move an object of load 0
 * (evencount may: it counts objects).
 *
 * Every choice is deterministic: objects are ordered by load (heaviest first), then id, then
 * position; bins with equal loads are ordered by index. So the same input gives the same
 * answer on every run and every machine. Cost: O(n log n + n log nbins) time, O(n + nbins)
 * scratch memory.
 */
#include "lb.h"
#include "util/util.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LB_DEFAULT_TOLERANCE 0.05

/* ---- input checks ------------------------------------------------------------------------ */

/* Whether `in` can be balanced; warns naming the first problem otherwise. */
static bool lb_input_valid(const tess_lb_input_t *in, const char *who)
{
    if (!in) {
        tess_warn("lb %s: NULL input", who);
        return false;
    }
    if (in->nbins < 1 || in->nobjs < 0 || (in->nobjs > 0 && !in->objs)) {
        tess_warn("lb %s: bad input (nbins %d, nobjs %d, objs %p): no moves", who, in->nbins,
                  in->nobjs, (void *)in->objs);
        return false;
    }
    if (in->bin_bg) {
        for (int b = 0; b < in->nbins; b++) {
            if (!isfinite(in->bin_bg[b]) || in->bin_bg[b] < 0) {
                tess_warn("lb %s: background load %g of bin %d: no moves", who, in->bin_bg[b], b);
                return false;
            }
        }
    }
    for (int i = 0; i < in->nobjs; i++) {
        const tess_lb_obj_t *o = &in->objs[i];
        if (o->bin < 0 || o->bin >= in->nbins || !isfinite(o->load) || o->load < 0) {
            tess_warn("lb %s: object %" PRId64 " has bin %d (of %d) and load %g: no moves", who,
                      o->id, o->bin, in->nbins, o->load);
            return false;
        }
    }
    return true;
}

/* The strategies' check: the input, and somewhere to write the answer. */
bool tess_lb_args_valid(const tess_lb_input_t *in, const int *new_bin, const char *who)
{
    if (!new_bin) {
        tess_warn("lb %s: NULL new_bin", who);
        return false;
    }
    return lb_input_valid(in, who);
}

/* Bad input or no memory: every object stays (as far as there is anything to write). */
void tess_lb_no_moves(const tess_lb_input_t *in, int *new_bin)
{
    if (!in || !new_bin || !in->objs)
        return;
    for (int i = 0; i < in->nobjs; i++)
        new_bin[i] = in->objs[i].bin;
}

double tess_lb_tolerance(const tess_lb_input_t *in)
{
    return in->tolerance > 0 ? in->tolerance : LB_DEFAULT_TOLERANCE; /* also catches NaN */
}

/* load[b] = background of b (0 without bin_bg), plus the objects' loads when `assigned`. */
void tess_lb_bin_loads(const tess_lb_input_t *in, bool assigned, double *load)
{
    for (int b = 0; b < in->nbins; b++)
        load[b] = in->bin_bg ? in->bin_bg[b] : 0.0;
    if (assigned)
        for (int i = 0; i < in->nobjs; i++)
            load[in->objs[i].bin] += in->objs[i].load;
}

/* ---- object order ------------------------------------------------------------------------ */

typedef struct lb_item {
    double  load;
    int64_t id;
    int     idx; /* position in in->objs */
    int     bin; /* current bin */
} lb_item_t;

/* Heaviest first; equal loads by id, then position: a total order, so qsort's instability
 * cannot change the answer. */
static int lb_item_cmp_load(const void *pa, const void *pb)
{
    const lb_item_t *a = pa, *b = pb;
    if (a->load != b->load)
        return a->load > b->load ? -1 : 1;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* By current bin, then heaviest first within a bin. */
static int lb_item_cmp_bin_load(const void *pa, const void *pb)
{
    const lb_item_t *a = pa, *b = pb;
    if (a->bin != b->bin)
        return a->bin < b->bin ? -1 : 1;
    return lb_item_cmp_load(pa, pb);
}

static lb_item_t *lb_items_sorted(const tess_lb_input_t *in, int (*cmp)(const void *, const void *))
{
    lb_item_t *items = tess_malloc((size_t)in->nobjs * sizeof(*items), "lb objects");
    if (!items)
        return NULL;
    for (int i = 0; i < in->nobjs; i++)
        items[i] = (lb_item_t){in->objs[i].load, in->objs[i].id, i, in->objs[i].bin};
    qsort(items, (size_t)in->nobjs, sizeof(*items), cmp);
    return items;
}

/* ---- indexed binary heap of bins, keyed by load[] ----------------------------------------- */

tess_status_t tess_lb_heap_init(lb_heap_t *h, int nbins, const double *load, bool max)
{
    h->bins  = tess_malloc((size_t)nbins * sizeof(int), "lb heap");
    h->pos   = tess_malloc((size_t)nbins * sizeof(int), "lb heap positions");
    h->count = 0;
    h->load  = load;
    h->max   = max;
    if (!h->bins || !h->pos) {
        free(h->bins);
        free(h->pos);
        h->bins = h->pos = NULL;
        return TESS_ERR_NO_MEMORY;
    }
    for (int b = 0; b < nbins; b++)
        h->pos[b] = -1;
    return TESS_OK;
}

void tess_lb_heap_fini(lb_heap_t *h)
{
    free(h->bins);
    free(h->pos);
}

/* Whether bin a belongs above bin b: the heavier (max) or lighter one, equal loads by index. */
static bool lb_heap_above(const lb_heap_t *h, int a, int b)
{
    double la = h->load[a], lb = h->load[b];
    if (la != lb)
        return h->max ? la > lb : la < lb;
    return a < b;
}

static void lb_heap_place(lb_heap_t *h, int i, int bin)
{
    h->bins[i]  = bin;
    h->pos[bin] = i;
}

static void lb_heap_up(lb_heap_t *h, int i)
{
    int bin = h->bins[i];
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!lb_heap_above(h, bin, h->bins[parent]))
            break;
        lb_heap_place(h, i, h->bins[parent]);
        i = parent;
    }
    lb_heap_place(h, i, bin);
}

static void lb_heap_down(lb_heap_t *h, int i)
{
    int bin = h->bins[i];
    for (;;) {
        int child = 2 * i + 1;
        if (child >= h->count)
            break;
        if (child + 1 < h->count && lb_heap_above(h, h->bins[child + 1], h->bins[child]))
            child++;
        if (!lb_heap_above(h, h->bins[child], bin))
            break;
        lb_heap_place(h, i, h->bins[child]);
        i = child;
    }
    lb_heap_place(h, i, bin);
}

void tess_lb_heap_push(lb_heap_t *h, int bin)
{
    lb_heap_place(h, h->count++, bin);
    lb_heap_up(h, h->count - 1);
}

void tess_lb_heap_pop(lb_heap_t *h)
{
    h->pos[h->bins[0]] = -1;
    if (--h->count > 0) {
        lb_heap_place(h, 0, h->bins[h->count]);
        lb_heap_down(h, 0);
    }
}

/* load[bin] changed (either way): restore the order. */
void tess_lb_heap_update(lb_heap_t *h, int bin)
{
    lb_heap_up(h, h->pos[bin]);
    lb_heap_down(h, h->pos[bin]);
}

/* ---- greedy and greedyrefine --------------------------------------------------------------- */

/*
 * One pass over the objects, heaviest first, each onto the least loaded bin; returns the most
 * loaded bin's load. With `ratio` > 0 (keep), an object stays in its current bin when that bin
 * plus the object is within `ratio` of the least loaded bin plus the object, or of `target`,
 * the plain greedy answer's most loaded bin. (So a bin may end at target * ratio:
 * greedyrefine, whose ratio is 1 + tolerance, stops up to a tolerance above greedy.) (The
 * first rule alone reshuffles balanced starts of equal objects: each bin's objects come in a
 * row, and once a bin holds one more object than the lightest — 1/k more load at k objects —
 * the rest of them move.) A weightless object
 * always stays: moving it costs a migration and balances nothing.
 */
static double lb_greedy_pass(const tess_lb_input_t *in, const lb_item_t *items, double *load,
                             lb_heap_t *heap, int *new_bin, double ratio, double target)
{
    bool   keep = ratio > 0;
    double max  = 0;
    tess_lb_bin_loads(in, false, load);
    while (heap->count > 0)
        tess_lb_heap_pop(heap);
    for (int b = 0; b < in->nbins; b++) {
        tess_lb_heap_push(heap, b);
        max = TESS_MAX(max, load[b]);
    }
    for (int k = 0; k < in->nobjs; k++) {
        const lb_item_t *it   = &items[k];
        int              dest = heap->bins[0];
        if (keep && (it->load == 0 ||
                     load[it->bin] + it->load <= ratio * TESS_MAX(load[dest] + it->load, target)))
            dest = it->bin;
        new_bin[it->idx] = dest;
        load[dest] += it->load;
        max = TESS_MAX(max, load[dest]);
        tess_lb_heap_update(heap, dest);
    }
    return max;
}

/* Greedy into new_bin; with keep_ratio > 0, the second pass that keeps objects in their bin
 * within that ratio (see lb_greedy_pass). */
static void lb_greedy_run(const tess_lb_input_t *in, int *new_bin, double keep_ratio,
                          const char *who)
{
    if (!tess_lb_args_valid(in, new_bin, who)) {
        tess_lb_no_moves(in, new_bin);
        return;
    }
    double    *load  = tess_malloc((size_t)in->nbins * sizeof(*load), "lb bin loads");
    lb_item_t *items = NULL;
    lb_heap_t  heap  = {0};
    if (!load)
        goto err_no_moves;
    items = lb_items_sorted(in, lb_item_cmp_load);
    if (!items)
        goto err_free_load;
    if (tess_lb_heap_init(&heap, in->nbins, load, false) != TESS_OK)
        goto err_free_items;

    double target = lb_greedy_pass(in, items, load, &heap, new_bin, 0, 0);
    if (keep_ratio > 0)
        lb_greedy_pass(in, items, load, &heap, new_bin, keep_ratio, target);

    tess_lb_heap_fini(&heap);
    free(items);
    free(load);
    return;

err_free_items:
    free(items);
err_free_load:
    free(load);
err_no_moves:
    tess_lb_no_moves(in, new_bin);
}

void tess_lb_greedy(const tess_lb_input_t *in, int *new_bin, void *arg)
{
    (void)arg;
    lb_greedy_run(in, new_bin, 0, "greedy");
}

void tess_lb_greedy_refine(const tess_lb_input_t *in, int *new_bin, void *arg)
{
    (void)arg;
    lb_greedy_run(in, new_bin, 1.0 + (in ? tess_lb_tolerance(in) : 0), "greedyrefine");
}

/* ---- refine ------------------------------------------------------------------------------- */

/*
 * Bins above the threshold T shed objects, the most loaded first, each time its heaviest object
 * that still leaves the least loaded bin at or under T.
 *
 * Why a pass ends, and in few moves: a receiver stays <= T and a donor only gets lighter, so no
 * bin ever becomes a donor again once it is <= T, and no object moves twice. A donor after a
 * move is heavier than the receiver was before it (h - o > T - (T - min) = min), so the least
 * loaded bin never gets lighter and the room it offers never grows: an object too heavy for it
 * now stays too heavy, which lets each donor's cursor over its heaviest-first objects only
 * advance, and a donor with nothing that fits is done for good.
 *
 * T given (hybrid's slack): one pass. Else T starts at average * (1 + tolerance); when a pass
 * leaves a bin above T (its objects too heavy for the room the others have under T: four
 * objects of 4 on one bin, four of 1 on each of three others, average 7), T is raised by
 * bisection up to the most loaded bin's load, to the lowest T at which a pass leaves no bin
 * above it (8 there, where one T would have moved nothing), as Charm++'s refiners do. The
 * answer is the pass whose most loaded bin is lightest, then the fewest moves; no moves where
 * no pass makes the most loaded bin lighter.
 */
typedef struct refine {
    const tess_lb_input_t *in;
    lb_item_t             *items;
    double                *load;
    int                   *first, *next;
    lb_heap_t              heavy, light;
} refine_t;

static void lb_heap_reset(lb_heap_t *h, int nbins)
{
    h->count = 0;
    for (int b = 0; b < nbins; b++)
        h->pos[b] = -1;
}

/* One pass at threshold `limit` into new_bin; whether no bin ended above it. *max_p: the
 * most loaded bin's load after it, *moves_p the moves. */
static bool refine_pass(refine_t *r, double limit, int *new_bin, double *max_p, int *moves_p)
{
    const tess_lb_input_t *in    = r->in;
    int                    nbins = in->nbins;
    double                *load  = r->load;
    tess_lb_no_moves(in, new_bin);
    tess_lb_bin_loads(in, true, load);
    lb_heap_reset(&r->heavy, nbins);
    lb_heap_reset(&r->light, nbins);
    for (int b = 0; b < nbins; b++) {
        r->next[b] = r->first[b];
        tess_lb_heap_push(load[b] > limit ? &r->heavy : &r->light, b);
    }
    int moves = 0;
    while (r->heavy.count > 0 && r->light.count > 0) {
        int h = r->heavy.bins[0], l = r->light.bins[0];
        int stop = r->first[h + 1];
        while (r->next[h] < stop && load[l] + r->items[r->next[h]].load > limit)
            r->next[h]++;
        if (r->next[h] == stop || r->items[r->next[h]].load == 0) {
            tess_lb_heap_pop(&r->heavy); /* nothing it has fits anywhere, now or later */
            continue;
        }
        const lb_item_t *it = &r->items[r->next[h]++];
        new_bin[it->idx] = l;
        moves++;
        load[h] -= it->load;
        load[l] += it->load;
        tess_lb_heap_update(&r->light, l);
        if (load[h] <= limit) {
            tess_lb_heap_pop(&r->heavy);
            tess_lb_heap_push(&r->light, h);
        } else {
            tess_lb_heap_update(&r->heavy, h);
        }
    }
    double max = 0;
    for (int b = 0; b < nbins; b++)
        max = TESS_MAX(max, load[b]);
    *max_p   = max;
    *moves_p = moves;
    return max <= limit;
}

static void lb_refine_run(const tess_lb_input_t *in, int *new_bin, double limit_abs,
                          const char *who)
{
    if (!tess_lb_args_valid(in, new_bin, who)) {
        tess_lb_no_moves(in, new_bin);
        return;
    }
    int      nbins = in->nbins;
    refine_t r     = {.in = in};
    int     *trial = NULL;
    r.load         = tess_malloc((size_t)nbins * sizeof(*r.load), "lb bin loads");
    r.first        = tess_malloc(((size_t)nbins + 1) * sizeof(*r.first), "lb bin objects");
    r.next         = tess_malloc((size_t)nbins * sizeof(*r.next), "lb bin cursors");
    if (!r.load || !r.first || !r.next)
        goto err_free_arrays;
    r.items = lb_items_sorted(in, lb_item_cmp_bin_load);
    if (!r.items)
        goto err_free_arrays;
    if (tess_lb_heap_init(&r.heavy, nbins, r.load, true) != TESS_OK)
        goto err_free_items;
    if (tess_lb_heap_init(&r.light, nbins, r.load, false) != TESS_OK)
        goto err_free_heavy;

    /* items[first[b] .. first[b + 1]): bin b's objects, heaviest first; next[b]: the first of
     * them that may still move. */
    for (int b = 0, k = 0; b <= nbins; b++) {
        while (k < in->nobjs && r.items[k].bin < b)
            k++;
        r.first[b] = k;
    }
    tess_lb_bin_loads(in, true, r.load);
    double total = 0, top = 0;
    for (int b = 0; b < nbins; b++) {
        total += r.load[b];
        top = TESS_MAX(top, r.load[b]);
    }
    double limit = limit_abs > 0 ? limit_abs : total / nbins * (1.0 + tess_lb_tolerance(in));
    double best_max;
    int    best_moves;
    if (refine_pass(&r, limit, new_bin, &best_max, &best_moves) || limit_abs > 0 ||
        limit >= top || !(trial = tess_malloc((size_t)in->nobjs * sizeof(*trial),
                                              "lb refine trial")))
        goto done;
    /* Moves that leave the most loaded bin as loaded as it was gain nothing: none then. */
    if (best_max >= top) {
        tess_lb_no_moves(in, new_bin);
        best_max   = top;
        best_moves = 0;
    }
    /* Bisect (lo, hi]: a pass at lo left a bin above it; at the most loaded bin's load nothing
     * needs to move. To a hundredth of the tolerance's room, 24 passes at most. */
    double lo = limit, hi = top, eps = (limit - total / nbins) * 0.01 + 1e-12 * top;
    for (int i = 0; i < 24 && hi - lo > eps; i++) {
        double mid = 0.5 * (lo + hi), max;
        int    mv;
        bool   ok = refine_pass(&r, mid, trial, &max, &mv);
        if (ok)
            hi = mid;
        else
            lo = mid;
        if (max < best_max || (max == best_max && mv < best_moves)) {
            best_max   = max;
            best_moves = mv;
            memcpy(new_bin, trial, (size_t)in->nobjs * sizeof(*trial));
        }
    }

done:
    free(trial);
    tess_lb_heap_fini(&r.light);
    tess_lb_heap_fini(&r.heavy);
    free(r.items);
    free(r.next);
    free(r.first);
    free(r.load);
    return;

err_free_heavy:
    tess_lb_heap_fini(&r.heavy);
err_free_items:
    free(r.items);
err_free_arrays:
    free(r.next);
    free(r.first);
    free(r.load);
    tess_lb_no_moves(in, new_bin);
}

void tess_lb_refine(const tess_lb_input_t *in, int *new_bin, void *arg)
{
    (void)arg;
    lb_refine_run(in, new_bin, 0, "refine");
}

/* ---- hybrid ------------------------------------------------------------------------------ */

static int lb_moves(const tess_lb_input_t *in, const int *bins)
{
    int n = 0;
    for (int i = 0; i < in->nobjs; i++)
        n += bins[i] != in->objs[i].bin;
    return n;
}

/*
 * Balance only when it pays, then as well as greedy, moving little. Nothing moves while the
 * most loaded bin is within the tolerance of the average (noise in measured loads stays
 * there), nor while it is within the slack of greedy's answer (nothing better can be had: one
 * object heavier than the average, say). Otherwise four placements that keep objects where
 * they are are computed: refine with its threshold at greedy's maximum plus the slack, greedy
 * keeping objects within the slack, and the same two at the tolerance (refine's and
 * greedyrefine's answers). Of those within the slack of the best of them, the one with the
 * fewest moves wins (the first in that order on a tie); plain greedy replaces it only where
 * it is better by more than the tolerance (refine stuck, no keeping greedy close). So a real
 * imbalance ends within the slack of greedy (when one of the four gets there), and an
 * imbalance that noise pushed just over the tolerance costs a move or two, not a new deal.
 * Weightless objects stay.
 *
 * greedyrefine keeps objects within the tolerance itself, so a bin may end a tolerance above
 * greedy's answer (1.03-1.05 where greedy reaches 1.00), and with no threshold for starting,
 * noise in the loads moves an object or two at every step; greedy places every object anew
 * at every step. Cost: five greedy passes and two refines, O(n log n).
 */
void tess_lb_hybrid(const tess_lb_input_t *in, int *new_bin, void *arg)
{
    (void)arg;
    if (!tess_lb_args_valid(in, new_bin, "hybrid")) {
        tess_lb_no_moves(in, new_bin);
        return;
    }
    tess_lb_no_moves(in, new_bin);
    double tol = tess_lb_tolerance(in), slack = 1.0 + LB_HYBRID_SLACK * tol;
    double now = tess_lb_imbalance(in, NULL);
    if (now <= 1.0 + tol || in->nobjs == 0)
        return;

    size_t n    = (size_t)in->nobjs;
    int   *cand = tess_malloc(5 * n * sizeof(int), "lb hybrid placements");
    if (!cand)
        return;
    int *greedy = cand, *others[] = {cand + n, cand + 2 * n, cand + 3 * n, cand + 4 * n};
    lb_greedy_run(in, greedy, 0, "hybrid");
    double best = tess_lb_imbalance(in, greedy); /* greedy's max / average */
    if (now <= best * slack)
        goto out_free;

    double total = 0;
    for (int b = 0; b < in->nbins; b++)
        total += in->bin_bg ? in->bin_bg[b] : 0.0;
    for (int i = 0; i < in->nobjs; i++)
        total += in->objs[i].load;
    lb_refine_run(in, others[0], best * slack * total / in->nbins, "hybrid");
    lb_greedy_run(in, others[1], slack, "hybrid");
    lb_refine_run(in, others[2], 0, "hybrid");
    lb_greedy_run(in, others[3], 1.0 + tol, "hybrid");
    double imb[4], low = INFINITY;
    int    mv[4];
    for (int c = 0; c < 4; c++) {
        imb[c] = tess_lb_imbalance(in, others[c]);
        mv[c]  = lb_moves(in, others[c]);
        low    = TESS_MIN(low, imb[c]);
    }
    int pick = -1;
    for (int c = 0; c < 4; c++)
        if (imb[c] <= low * slack && (pick < 0 || mv[c] < mv[pick]))
            pick = c;
    const int *bins = imb[pick] > best * (1.0 + tol) ? greedy : others[pick];
    for (int i = 0; i < in->nobjs; i++)
        new_bin[i] = in->objs[i].load == 0 ? in->objs[i].bin : bins[i];
out_free:
    free(cand);
}

/* ---- rotate and none ---------------------------------------------------------------------- */

void tess_lb_rotate(const tess_lb_input_t *in, int *new_bin, void *arg)
{
    (void)arg;
    if (!tess_lb_args_valid(in, new_bin, "rotate")) {
        tess_lb_no_moves(in, new_bin);
        return;
    }
    for (int i = 0; i < in->nobjs; i++)
        new_bin[i] = (in->objs[i].bin + 1) % in->nbins;
}

void tess_lb_none(const tess_lb_input_t *in, int *new_bin, void *arg)
{
    (void)arg;
    tess_lb_no_moves(in, new_bin);
}

/* ---- imbalance ---------------------------------------------------------------------------- */

/* bins NULL: the current assignment (objs[i].bin). */
double tess_lb_imbalance(const tess_lb_input_t *in, const int *bins)
{
    if (!lb_input_valid(in, "imbalance"))
        return 1.0;
    for (int i = 0; bins && i < in->nobjs; i++) {
        if (bins[i] < 0 || bins[i] >= in->nbins) {
            tess_warn("lb imbalance: object %d assigned to bin %d of %d", i, bins[i], in->nbins);
            return 1.0;
        }
    }
    double *load = tess_malloc((size_t)in->nbins * sizeof(*load), "lb bin loads");
    if (!load)
        return 1.0;
    tess_lb_bin_loads(in, false, load);
    for (int i = 0; i < in->nobjs; i++)
        load[bins ? bins[i] : in->objs[i].bin] += in->objs[i].load;
    double total = 0, max = 0;
    for (int b = 0; b < in->nbins; b++) {
        total += load[b];
        max = TESS_MAX(max, load[b]);
    }
    free(load);
    return total > 0 ? max / (total / in->nbins) : 1.0;
}

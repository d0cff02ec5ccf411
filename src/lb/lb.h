/*
 * lb.h — the lb component: the load database (host time of every entry, GPU time per element
 * from events bracketing its stream work, loads elements set themselves, idle time per PE),
 * AtSync steps, the strategies, and the orchestration of migrations.
 *
 * A strategy sees bins (PEs, processes or GPUs: +tess-lb-target) with their background load and
 * the migratable objects with their loads and current bins, and returns a new bin per object.
 * Strategies are pure functions of that input: they run on process 0 only.
 *
 * Threads: strategies and the step's collective parts run on PE 0 (the MPI agent); the per-
 * element hooks run on the element's PE.
 */
#ifndef TESS_LB_H
#define TESS_LB_H

#include "objects/objects.h"

/* tess_lb_obj_t, tess_lb_input_t and tess_lb_strategy_fn_t are public (tessera.h). */

/** The built-in strategies (strategy.c; evencount.c). */
void tess_lb_greedy(const tess_lb_input_t *in, int *new_bin, void *arg);
void tess_lb_refine(const tess_lb_input_t *in, int *new_bin, void *arg);
void tess_lb_greedy_refine(const tess_lb_input_t *in, int *new_bin, void *arg);
void tess_lb_hybrid(const tess_lb_input_t *in, int *new_bin, void *arg);
void tess_lb_evencount(const tess_lb_input_t *in, int *new_bin, void *arg);
void tess_lb_rotate(const tess_lb_input_t *in, int *new_bin, void *arg);
void tess_lb_none(const tess_lb_input_t *in, int *new_bin, void *arg);

/* What every strategy builds on (strategy.c), for the strategies of other files (evencount.c).
 * Pure functions of their arguments, like the strategies: any thread. */

/* hybrid's slack: how far above greedy's most loaded bin an answer may end, as a fraction of
 * the tolerance. The tolerance says when to balance; the slack how well (evencount stops
 * exchanging within it too). */
#define LB_HYBRID_SLACK 0.25

/* Whether `in` can be balanced and new_bin is there; warns naming the first problem otherwise. */
bool   tess_lb_args_valid(const tess_lb_input_t *in, const int *new_bin, const char *who);
/* Every object stays where it is (bad input or no memory; safe on any input). */
void   tess_lb_no_moves(const tess_lb_input_t *in, int *new_bin);
/* in->tolerance, or the default where it is not positive. */
double tess_lb_tolerance(const tess_lb_input_t *in);
/* load[b] = background of b (0 without bin_bg), plus the objects' loads when `assigned`. */
void   tess_lb_bin_loads(const tess_lb_input_t *in, bool assigned, double *load);

/* An indexed binary heap of bins keyed by load[] (which the caller owns and changes, then
 * calls update): the most loaded (max) or least loaded bin on top, bins[0]; equal loads by
 * index. init allocates for nbins (TESS_ERR_NO_MEMORY, nothing held); fini frees. */
typedef struct lb_heap {
    int          *bins;  /* heap order */
    int          *pos;   /* [nbins] position of a bin in bins, -1 when absent */
    int           count;
    const double *load;
    bool          max;   /* most loaded on top; else least loaded */
} lb_heap_t;
tess_status_t tess_lb_heap_init(lb_heap_t *h, int nbins, const double *load, bool max);
void          tess_lb_heap_fini(lb_heap_t *h);
/* Add a bin not in the heap. */
void          tess_lb_heap_push(lb_heap_t *h, int bin);
/* Remove the top bin (count > 0). */
void          tess_lb_heap_pop(lb_heap_t *h);
/* load[bin] changed (either way): restore the order. */
void          tess_lb_heap_update(lb_heap_t *h, int bin);

/** Look up a strategy by name (built-in or registered); NULL if unknown. */
tess_lb_strategy_fn_t tess_lb_find(const char *name, void **arg_p);
/** A built-in strategy whose name is within 1 edit of `name` (2 for names of 8 characters or
 *  more; case is ignored): a misspelling. NULL if there is none. */
const char *tess_lb_builtin_near(const char *name);
/** "greedy, refine, …; registered: a, b" into buf. */
const char *tess_lb_names(char *buf, size_t len);

/** Max over bins of (background + assigned load) divided by the average (1 = balanced). */
double tess_lb_imbalance(const tess_lb_input_t *in, const int *bins);

/** The GPU time of elements (gputime.c; PE thread): a PE's timings, made at its start (NULL
 *  when out of memory or events) and freed at its end after reading what is left. */
typedef struct lb_pe lb_pe_t;
lb_pe_t *tess_lb_gputime_pe_new(void);
void     tess_lb_gputime_pe_free(lb_pe_t *lp);
/** Add the time of the finished timings to their elements (wait: all of them, waiting for
 *  their events: the elements are idle); how many were read. */
unsigned tess_lb_gputime_poll(lb_pe_t *lp, int wait);
/** Under TESS_LB_GPU_TIME (main, at init and fini): the objects layer's hooks around entries
 *  and batched launches. */
void     tess_lb_gputime_install(void);
void     tess_lb_gputime_uninstall(void);

tess_status_t tess_lb_init(void);
void          tess_lb_fini(void);

#endif /* TESS_LB_H */

/* lb.c — load-balancing steps. When every local element of an array has called tess_at_sync,
 * PE 0 tells the other processes (those without elements join on that notice), asks each local
 * PE for its elements' loads, gathers them on process 0 (MPI on the array's communicator),
 * runs the strategy there, broadcasts the moves (this one collective updates every rank's
 * location table), migrates what leaves, waits for what arrives, meets the other processes in
 * a barrier, and runs the resume entry of every local element. All MPI calls are
 * non-blocking requests that PE 0's agent watches. */
#include "lb.h"

#include <math.h>
#include <stdlib.h>
#include <strings.h>

typedef struct lb_rec {
    int64_t linear;
    double  load;
    int32_t pe, pad;
} lb_rec_t;

typedef struct lb_move {
    int64_t linear;
    int32_t from, to;
} lb_move_t;

typedef struct lb_bcast_hdr {
    int64_t nmoves;
    double  before, after, max_load, avg_load;
} lb_bcast_hdr_t;

typedef struct lb_array {
    pthread_mutex_t lock;       /* arrived and recs, from every PE */
    int64_t         arrived;
    lb_rec_t       *recs;
    int64_t         nrecs, cap;
    /* PE 0 only: */
    int             started, reports;
    uint64_t        step;
    uint64_t        noticed;    /* 1 + the latest step another process's notice announced */
    int             count, *counts, *displs;
    lb_rec_t       *all;
    lb_bcast_hdr_t  hdr;
    lb_move_t      *moves;
    int64_t         arrivals, departures;
    int             moves_known;
    tess_lb_stats_t stats;
    int             have_stats;
    uint64_t        trace_t0;   /* tracing: when this step started here */
} lb_array_t;

static struct {
    _Atomic int           active; /* steps under way on this process: quiescence waits */
    pthread_mutex_t       lock; /* lazy creation of per-array state */
    uint16_t              h_notice, h_report, h_migrate;
    tess_lb_strategy_fn_t strategy;
    void                 *strategy_arg;
    int                   target; /* 0 pe, 1 process, 2 gpu */
    int                  *gpu_of_process;
    int                   ngpus;
} lb;

static lb_array_t *lb_array(tess_array_t *a)
{
    pthread_mutex_lock(&lb.lock);
    if (!a->lb) {
        lb_array_t *la = tess_calloc(1, sizeof(*la), "load-balancing state");
        if (!la)
            tess_fatal("out of memory setting up load balancing for array '%s'", a->name);
        pthread_mutex_init(&la->lock, NULL);
        a->lb = la;
    }
    pthread_mutex_unlock(&lb.lock);
    return a->lb;
}

static void lb_post(tess_agent_fn_t fn, tess_array_t *a)
{
    if (tess_core_agent_post(fn, a) != TESS_OK)
        tess_fatal("load balancing: cannot reach PE 0: %s", tess_error_detail());
}

static void lb_watch(MPI_Request req, tess_agent_req_fn_t fn, tess_array_t *a)
{
    if (tess_core_agent_watch(req, fn, a) != TESS_OK)
        tess_fatal("load balancing: cannot watch an MPI request");
}

static void lb_send_small(uint16_t handler, int dst_pe, uint32_t aid, int64_t v0, int64_t v1)
{
    tess_msg_t *m = tess_core_msg_alloc(0);
    if (!m)
        tess_fatal("out of memory in a load-balancing step");
    m->hdr.handler = handler;
    m->hdr.dst_pe  = dst_pe;
    m->hdr.a0      = ((uint64_t)aid << 32) | (uint32_t)v0;
    m->hdr.a1      = (uint64_t)v1;
    tess_core_send(m);
}

/* ---- the load of an element --------------------------------------------------------------- */

static double lb_elem_load(tess_ctx_h e)
{
    if (e->has_user_load)
        return e->user_load;
    double host = tess_ticks_to_ns(e->load_ticks) * 1e-9;
    return host + e->gpu_ms * 1e-3;
}

/* On a GPU, an element that sets no load of its own is weighed by the host time of its entries
 * alone unless TESS_LB_GPU_TIME measures its stream work: its kernels' cost, which launches (and
 * step graphs still more) do not show, is left out. Said once a process. */
static void lb_warn_host_time(const tess_array_t *a)
{
    static atomic_int warned;
    if (tess_cfg.lb_gpu_time || tess_gpu->kind == TESS_GPU_HOST ||
        atomic_load_explicit(&warned, memory_order_relaxed) ||
        atomic_exchange_explicit(&warned, 1, memory_order_relaxed))
        return;
    tess_warn("load balancing array '%s' on the host time of its entries: its elements' GPU work "
              "is not measured (TESS_LB_GPU_TIME=1 times it with events; or the program declares "
              "each element's load with tess_set_load)", a->name);
}

static unsigned lb_progress(tess_pe_t *pe)
{
    lb_pe_t *lp = *tess_core_pe_slot(pe, TESS_SLOT_LB);
    return lp ? tess_lb_gputime_poll(lp, 0) : 0;
}

/* ---- the step -------------------------------------------------------------------------------- */

static void lb_apply_moves(tess_array_t *a);
static void lb_check_done(tess_array_t *a);
static void lb_report_done(void *arg);

/* PE 0: join step `la->step` of array a and ask every local PE for its loads. */
static void lb_start(tess_array_t *a, int notify)
{
    lb_array_t *la = a->lb;
    la->started    = 1;
    la->trace_t0   = TESS_TRACE_NOW();
    atomic_fetch_add(&lb.active, 1);
    if (notify)
        for (int p = 0; p < tess_rt.size; p++)
            if (p != tess_rt.rank)
                lb_send_small(lb.h_notice, p * tess_rt.ppn, a->id, 0, (int64_t)la->step);
    la->reports = tess_rt.ppn;
    for (int l = 0; l < tess_rt.ppn; l++)
        lb_send_small(lb.h_report, tess_rt.rank * tess_rt.ppn + l, a->id, 0, 0);
}

static void lb_local_ready(void *arg)
{
    tess_array_t *a = arg;
    if (!((lb_array_t *)a->lb)->started)
        lb_start(a, 1);
}

/* A process without elements joins the step the others' notices announced. A notice may come
 * before this process has seen the step before end (its barrier): the others got there first,
 * resumed and started the next. It is kept (la->noticed) and honoured at the resume, or every
 * other process would wait for this one in the new step's gather. */
static void lb_join_noticed(tess_array_t *a)
{
    lb_array_t *la = a->lb;
    if (!la->started && la->noticed == la->step + 1 && atomic_load(&a->nlocal) == 0)
        lb_start(a, 0);
}

static bool lb_notice_handler(tess_msg_t *m)
{
    tess_array_t *a  = tess_obj_arrays[(uint32_t)(m->hdr.a0 >> 32)];
    lb_array_t   *la = lb_array(a);
    uint64_t      step = m->hdr.a1;
    tess_core_msg_free(m);
    /* A process without elements learns of the step here; the others start on their own. */
    if (step + 1 > la->noticed)
        la->noticed = step + 1;
    lb_join_noticed(a);
    return true;
}

/* On each PE: the loads of its elements, then the counters restart. */
static bool lb_report_handler(tess_msg_t *m)
{
    tess_array_t *a  = tess_obj_arrays[(uint32_t)(m->hdr.a0 >> 32)];
    lb_array_t   *la = a->lb;
    tess_core_msg_free(m);
    lb_pe_t *lp = *tess_core_pe_slot(tess_core_pe_self(), TESS_SLOT_LB);
    if (lp)
        tess_lb_gputime_poll(lp, 1);
    tess_vec_t *v  = &a->pe_elems[tess_core_pe_local(tess_core_pe_self())];
    int         pe = tess_core_pe_global(tess_core_pe_self());
    int         undeclared = 0;
    pthread_mutex_lock(&la->lock);
    for (size_t i = 0; i < v->count; i++) {
        tess_ctx_h e = v->items[i];
        if (la->nrecs == la->cap) {
            int64_t   cap = la->cap ? la->cap * 2 : 64;
            lb_rec_t *r   = realloc(la->recs, (size_t)cap * sizeof(*r));
            if (!r)
                tess_fatal("out of memory collecting loads");
            la->recs = r;
            la->cap  = cap;
        }
        undeclared |= !e->has_user_load;
        la->recs[la->nrecs++] = (lb_rec_t){e->linear, lb_elem_load(e), pe, 0};
        e->load_ticks = 0;
        e->gpu_ms     = 0;
    }
    pthread_mutex_unlock(&la->lock);
    if (undeclared)
        lb_warn_host_time(a);
    lb_post(lb_report_done, a);
    return true;
}

/* ---- process 0: the strategy ----------------------------------------------------------------- */

static int lb_bin_of(int pe)
{
    switch (lb.target) {
    case 0:  return pe;
    case 1:  return tess_core_pe_process(pe);
    default: return lb.gpu_of_process[tess_core_pe_process(pe)];
    }
}

static int lb_nbins(void)
{
    return lb.target == 0 ? tess_core_num_pes() : lb.target == 1 ? tess_rt.size : lb.ngpus;
}

/* Decide the moves from the gathered records (process 0). */
static void lb_decide(lb_array_t *la, int64_t n)
{
    int              nbins = lb_nbins();
    tess_lb_obj_t   *objs  = tess_calloc((size_t)(n ? n : 1), sizeof(*objs), "LB objects");
    int             *bins  = tess_calloc((size_t)(n ? n : 1), sizeof(int), "LB bins");
    double          *peload = tess_calloc((size_t)tess_core_num_pes(), sizeof(double), "PE loads");
    double          *binload = tess_calloc((size_t)nbins, sizeof(double), "bin loads");
    if (!objs || !bins || !peload || !binload)
        tess_fatal("out of memory running the load balancer");
    for (int64_t i = 0; i < n; i++)
        objs[i] = (tess_lb_obj_t){la->all[i].linear, la->all[i].load, lb_bin_of(la->all[i].pe)};
    if (n > INT32_MAX)
        tess_fatal("load balancing: %lld elements in one step (at most %d)", (long long)n,
                   INT32_MAX);
    tess_lb_input_t in = {.nbins = nbins, .bin_bg = NULL, .nobjs = (int)n, .objs = objs,
                          .tolerance = 0.05};
    for (int64_t i = 0; i < n; i++)
        bins[i] = objs[i].bin;
    double before = tess_lb_imbalance(&in, bins);
    double total  = 0, maxb = 0;
    for (int64_t i = 0; i < n; i++) {
        binload[objs[i].bin] += objs[i].load;
        total += objs[i].load;
    }
    for (int b = 0; b < nbins; b++)
        maxb = TESS_MAX(maxb, binload[b]);
    if (!lb.strategy && !(lb.strategy = tess_lb_find(tess_cfg.lb, &lb.strategy_arg))) {
        char names[512];
        tess_fatal("TESS_LB / +tess-lb '%s': no such load-balancing strategy at the first "
                   "load-balancing step (known: %s; register others with tess_lb_register "
                   "before the first step)", tess_cfg.lb, tess_lb_names(names, sizeof(names)));
    }
    lb.strategy(&in, bins, lb.strategy_arg);
    for (int64_t i = 0; i < n; i++)
        if (bins[i] < 0 || bins[i] >= nbins)
            tess_fatal("the load balancer put element %lld into bin %d (there are %d)",
                       (long long)objs[i].id, bins[i], nbins);
    double after = tess_lb_imbalance(&in, bins);

    /* Objects that stay in their bin keep their PE; the others go to their new bin's least
     * loaded PE. */
    for (int64_t i = 0; i < n; i++)
        if (bins[i] == objs[i].bin)
            peload[la->all[i].pe] += objs[i].load;
    /* Each bin's PEs in increasing order (bin_pes[bin_first[b] .. bin_first[b + 1]]), so that
     * a move looks at the PEs of its bin only: O(elements + PEs), not O(moves x PEs). */
    int  npes      = tess_core_num_pes();
    int *bin_first = tess_calloc((size_t)nbins + 1, sizeof(int), "LB bin PEs");
    int *bin_pes   = tess_malloc((size_t)npes * sizeof(int), "LB bin PEs");
    if (!bin_first || !bin_pes)
        tess_fatal("out of memory running the load balancer");
    for (int pe = 0; pe < npes; pe++)
        bin_first[lb_bin_of(pe) + 1]++;
    for (int b = 0; b < nbins; b++)
        bin_first[b + 1] += bin_first[b];
    for (int pe = 0; pe < npes; pe++) /* bin_first[b] moves on to the end of bin b */
        bin_pes[bin_first[lb_bin_of(pe)]++] = pe;
    for (int b = nbins; b > 0; b--)
        bin_first[b] = bin_first[b - 1];
    bin_first[0] = 0;
    int64_t nm = 0;
    la->moves  = tess_malloc((size_t)(n ? n : 1) * sizeof(lb_move_t), "LB moves");
    if (!la->moves)
        tess_fatal("out of memory running the load balancer");
    for (int64_t i = 0; i < n; i++) {
        if (bins[i] == objs[i].bin)
            continue;
        int best = -1;
        for (int j = bin_first[bins[i]]; j < bin_first[bins[i] + 1]; j++) {
            int pe = bin_pes[j];
            if (best < 0 || peload[pe] < peload[best])
                best = pe;
        }
        peload[best] += objs[i].load;
        la->moves[nm++] = (lb_move_t){objs[i].id, la->all[i].pe, best};
    }
    la->hdr = (lb_bcast_hdr_t){nm, before, after, maxb, nbins ? total / nbins : 0};
    tess_info("load balancing: %lld of %lld elements move; imbalance %.3f -> %.3f",
              (long long)nm, (long long)n, before, after);
    free(objs);
    free(bins);
    free(peload);
    free(binload);
    free(bin_first);
    free(bin_pes);
}

/* ---- the collectives (PE 0 of every process) ------------------------------------------------ */

static void lb_got_moves(void *arg, MPI_Status *st)
{
    (void)st;
    lb_apply_moves(arg);
}

static void lb_got_header(void *arg, MPI_Status *st)
{
    (void)st;
    tess_array_t *a  = arg;
    lb_array_t   *la = a->lb;
    if (tess_rt.rank != 0) {
        la->moves = tess_malloc((size_t)(la->hdr.nmoves ? la->hdr.nmoves : 1) * sizeof(lb_move_t),
                                "LB moves");
        if (!la->moves)
            tess_fatal("out of memory receiving load-balancing moves");
    }
    MPI_Request req;
    if (MPI_Ibcast(la->moves, (int)(la->hdr.nmoves * (int64_t)sizeof(lb_move_t)), MPI_BYTE, 0,
                   a->comm, &req) != MPI_SUCCESS)
        tess_fatal("load balancing: MPI_Ibcast of the moves failed");
    lb_watch(req, lb_got_moves, a);
}

static void lb_gathered(void *arg, MPI_Status *st)
{
    (void)st;
    tess_array_t *a  = arg;
    lb_array_t   *la = a->lb;
    if (tess_rt.rank == 0)
        lb_decide(la, (int64_t)(la->displs[tess_rt.size] / (int)sizeof(lb_rec_t)));
    MPI_Request req;
    if (MPI_Ibcast(&la->hdr, sizeof(la->hdr), MPI_BYTE, 0, a->comm, &req) != MPI_SUCCESS)
        tess_fatal("load balancing: MPI_Ibcast failed");
    lb_watch(req, lb_got_header, a);
}

static void lb_counted(void *arg, MPI_Status *st)
{
    (void)st;
    tess_array_t *a  = arg;
    lb_array_t   *la = a->lb;
    if (tess_rt.rank == 0) {
        la->displs[0] = 0;
        for (int p = 0; p < tess_rt.size; p++) {
            la->counts[p] *= (int)sizeof(lb_rec_t);
            la->displs[p + 1] = la->displs[p] + la->counts[p];
        }
        la->all = tess_malloc((size_t)la->displs[tess_rt.size] + 1, "all loads");
        if (!la->all)
            tess_fatal("out of memory gathering loads");
    }
    MPI_Request req;
    if (MPI_Igatherv(la->recs, la->count * (int)sizeof(lb_rec_t), MPI_BYTE, la->all, la->counts,
                     la->displs, MPI_BYTE, 0, a->comm, &req) != MPI_SUCCESS)
        tess_fatal("load balancing: MPI_Igatherv failed");
    lb_watch(req, lb_gathered, a);
}

static void lb_report_done(void *arg)
{
    tess_array_t *a  = arg;
    lb_array_t   *la = a->lb;
    if (--la->reports > 0)
        return;
    la->count = (int)la->nrecs;
    if (tess_rt.rank == 0) {
        la->counts = tess_calloc((size_t)tess_rt.size, sizeof(int), "LB counts");
        la->displs = tess_calloc((size_t)tess_rt.size + 1, sizeof(int), "LB offsets");
        if (!la->counts || !la->displs)
            tess_fatal("out of memory gathering loads");
    }
    MPI_Request req;
    if (MPI_Igather(&la->count, 1, MPI_INT, la->counts, 1, MPI_INT, 0, a->comm, &req) !=
        MPI_SUCCESS)
        tess_fatal("load balancing: MPI_Igather failed");
    lb_watch(req, lb_counted, a);
}

/* ---- migrations ------------------------------------------------------------------------------ */

static void lb_departed(void *arg)
{
    tess_array_t *a = arg;
    ((lb_array_t *)a->lb)->departures--;
    lb_check_done(a);
}

static void lb_arrived(void *arg)
{
    tess_array_t *a = arg;
    ((lb_array_t *)a->lb)->arrivals--;
    lb_check_done(a);
}

static void lb_on_arrival(tess_ctx_h e)
{
    if (!e->lb_moved)
        return;
    e->lb_moved = 0;
    lb_post(lb_arrived, e->array);
}

/* On the element's PE: move it as the step decided. */
static bool lb_migrate_handler(tess_msg_t *m)
{
    tess_array_t *a   = tess_obj_arrays[(uint32_t)(m->hdr.a0 >> 32)];
    int           to  = (int)(uint32_t)m->hdr.a0;
    int64_t       lin = (int64_t)m->hdr.a1;
    tess_core_msg_free(m);
    obj_pe_t  *op = tess_obj_pe();
    tess_ctx_h e  = tess_obj_elem_find(op, a, lin);
    if (!e)
        tess_fatal("load balancing: element %lld of array '%s' is not on PE %d", (long long)lin,
                   a->name, tess_core_pe_id());
    if (e->gpu_pending)
        tess_fatal("element %lld of array '%s' entered a load-balancing step with %d GPU "
                   "continuations or device messages pending", (long long)lin, a->name,
                   e->gpu_pending);
    e->lb_moved = 1;
    tess_obj_migrate_now(op, e, to);
    lb_post(lb_departed, a);
    return true;
}

static void lb_apply_moves(tess_array_t *a)
{
    lb_array_t *la = a->lb;
    int         me = tess_rt.rank;
    for (int64_t i = 0; i < la->hdr.nmoves; i++) {
        lb_move_t *mv   = &la->moves[i];
        int        from = tess_core_pe_process(mv->from), to = tess_core_pe_process(mv->to);
        if (from == me) {
            la->departures++;
            lb_send_small(lb.h_migrate, mv->from, a->id, mv->to, mv->linear);
        }
        if (to == me)
            la->arrivals++;
        if (from != me && to != me)
            atomic_store_explicit(&a->loc[mv->linear], mv->to, memory_order_relaxed);
    }
    la->stats.steps++;
    la->stats.migrations       = la->hdr.nmoves;
    la->stats.imbalance_before = la->hdr.before;
    la->stats.imbalance_after  = la->hdr.after;
    la->stats.max_load         = la->hdr.max_load;
    la->stats.avg_load         = la->hdr.avg_load;
    la->have_stats             = 1;
    la->moves_known            = 1;
    lb_check_done(a);
}

static void lb_resume(void *arg, MPI_Status *st)
{
    (void)st;
    tess_array_t *a  = arg;
    lb_array_t   *la = a->lb;
    free(la->moves);
    free(la->all);
    free(la->counts);
    free(la->displs);
    la->moves = NULL;
    la->all   = NULL;
    la->counts = la->displs = NULL;
    la->nrecs       = 0;
    la->moves_known = 0;
    la->started     = 0;
    if (tess_unlikely(la->trace_t0))
        tess_trace_record(TESS_TRACK_LB, TESS_TEV_SPAN, "lb", "load balancing", a->name,
                          la->trace_t0, tess_time_ns() - la->trace_t0, la->step,
                          (uint64_t)la->stats.migrations);
    la->step++;
    atomic_fetch_sub(&lb.active, 1);
    pthread_mutex_lock(&la->lock);
    la->arrived = 0;
    pthread_mutex_unlock(&la->lock);
    for (int l = 0; l < tess_rt.ppn; l++) {
        tess_vec_t *v = &a->pe_elems[l];
        for (size_t i = 0; i < v->count; i++) {
            tess_ctx_h  e = v->items[i];
            tess_msg_t *m = tess_core_msg_alloc(0);
            if (!m)
                tess_fatal("out of memory resuming after load balancing");
            e->at_sync = 0;
            tess_obj_send_linear(a, e->linear, a->resume, m);
        }
    }
    lb_join_noticed(a);
}

static void lb_check_done(tess_array_t *a)
{
    lb_array_t *la = a->lb;
    if (!la->moves_known || la->departures || la->arrivals)
        return;
    la->moves_known = 0;
    MPI_Request req;
    if (MPI_Ibarrier(a->comm, &req) != MPI_SUCCESS)
        tess_fatal("load balancing: MPI_Ibarrier failed");
    lb_watch(req, lb_resume, a);
}

/* ---- API ------------------------------------------------------------------------------------- */

tess_status_t tess_at_sync_loc(tess_ctx_h ctx, const char *file, int line)
{
    tess_error_clear();
    tess_obj_check_init("tess_at_sync", file, line);
    obj_pe_t *op = tess_obj_pe();
    if (tess_unlikely(!ctx || !op || !tess_core_in_phase() || op->current != ctx))
        tess_obj_misuse(file, line, "tess_at_sync must be called by an entry method of the "
                        "element it names");
    tess_array_t *a = ctx->array;
    if (tess_unlikely(!a->has_resume))
        tess_obj_misuse(file, line, "tess_at_sync on array '%s', which has no resume entry "
                        "(tess_array_params_t.resume)", a->name);
    if (tess_unlikely(ctx->at_sync))
        tess_obj_misuse(file, line, "tess_at_sync called twice before the resume entry ran");
    lb_array_t *la = lb_array(a);
    ctx->at_sync   = 1;
    pthread_mutex_lock(&la->lock);
    int ready = ++la->arrived == atomic_load(&a->nlocal);
    pthread_mutex_unlock(&la->lock);
    if (ready)
        lb_post(lb_local_ready, a);
    return TESS_OK;
}

tess_status_t tess_lb_get_stats(tess_array_h a, tess_lb_stats_t *stats_p)
{
    tess_error_clear();
    if (!stats_p)
        return tess_error(TESS_ERR_INVALID, "tess_lb_get_stats: stats_p is NULL");
    if (!a || !a->lb || !((lb_array_t *)a->lb)->have_stats)
        return tess_error_quiet(TESS_ERR_NOT_FOUND, "tess_lb_get_stats: %s has had no "
                                "load-balancing step", a ? "the array" : "a NULL array");
    *stats_p = ((lb_array_t *)a->lb)->stats;
    return TESS_OK;
}

/* A step's collectives and migrations are work in flight: the phase does not end meanwhile. */
static int lb_busy(void)
{
    return atomic_load(&lb.active) > 0;
}

static void lb_pe_init(tess_pe_t *pe)
{
    lb_pe_t *lp = tess_lb_gputime_pe_new();
    if (!lp)
        tess_fatal("cannot set up GPU timing on PE %d", tess_core_pe_global(pe));
    *tess_core_pe_slot(pe, TESS_SLOT_LB) = lp;
}

static void lb_pe_fini(tess_pe_t *pe)
{
    tess_lb_gputime_pe_free(*tess_core_pe_slot(pe, TESS_SLOT_LB));
    *tess_core_pe_slot(pe, TESS_SLOT_LB) = NULL;
}

/* Global GPU ids: the distinct (node, device) pairs, numbered in the order of the first rank
 * on each. Sorted, so O(P log P) rather than a scan of the earlier ranks for each rank. */
typedef struct lb_gpu_key {
    int node, dev, rank, first;
} lb_gpu_key_t;

static int lb_gpu_key_cmp(const void *x, const void *y)
{
    const lb_gpu_key_t *a = x, *b = y;
    if (a->node != b->node)
        return a->node < b->node ? -1 : 1;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

static int lb_gpu_first_cmp(const void *x, const void *y)
{
    const lb_gpu_key_t *a = x, *b = y;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

static tess_status_t lb_map_gpus(void)
{
    int           np      = tess_rt.size;
    int           mine[2] = {tess_rt.node, tess_gpu_device()};
    int          *all     = tess_malloc(2 * sizeof(int) * (size_t)np, "GPU map");
    lb_gpu_key_t *keys    = tess_malloc(sizeof(*keys) * (size_t)np, "GPU map");
    lb.gpu_of_process     = tess_malloc(sizeof(int) * (size_t)np, "GPU map");
    if (!all || !keys || !lb.gpu_of_process) {
        free(all);
        free(keys);
        return TESS_ERR_NO_MEMORY;
    }
    MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, tess_rt.comm);
    for (int p = 0; p < np; p++)
        keys[p] = (lb_gpu_key_t){all[2 * p], all[2 * p + 1], p, p};
    qsort(keys, (size_t)np, sizeof(*keys), lb_gpu_key_cmp);
    for (int i = 1; i < np; i++)
        if (keys[i].node == keys[i - 1].node && keys[i].dev == keys[i - 1].dev)
            keys[i].first = keys[i - 1].first;
    /* In the order of each GPU's first rank; a GPU's ranks stay together. */
    qsort(keys, (size_t)np, sizeof(*keys), lb_gpu_first_cmp);
    lb.ngpus = 0;
    for (int i = 0; i < np; i++) {
        if (i == 0 || keys[i].first != keys[i - 1].first)
            lb.ngpus++;
        lb.gpu_of_process[keys[i].rank] = lb.ngpus - 1;
    }
    free(keys);
    free(all);
    return TESS_OK;
}

/* TESS_LB_TARGET: auto is gpu where there is more than one GPU, else pe (every process on one
 * GPU, as on the host backend's one device per node, makes one bin: nothing could move). A
 * target asked for that has one bin while there are several PEs is said once, at init. */
static void lb_choose_target(void)
{
    const char *t = tess_cfg.lb_target;
    int         npes = tess_core_num_pes();
    if (!strcasecmp(t, "auto")) {
        lb.target = lb.ngpus > 1 ? 2 : 0;
        tess_debug("TESS_LB_TARGET=auto: balancing over %s (%d GPU%s, %d PEs)",
                   lb.target ? "GPUs" : "PEs", lb.ngpus, lb.ngpus == 1 ? "" : "s", npes);
        return;
    }
    lb.target = !strcasecmp(t, "pe") ? 0 : !strcasecmp(t, "process") ? 1 : 2;
    if (tess_rt.rank != 0 || npes < 2 || lb_nbins() > 1)
        return;
    if (lb.target == 2)
        tess_warn("TESS_LB_TARGET=gpu: the %d process%s share one GPU, so the load balancer has "
                  "one bin and moves nothing; TESS_LB_TARGET=pe or auto balances the %d PEs",
                  tess_rt.size, tess_rt.size == 1 ? "" : "es", npes);
    else if (lb.target == 1)
        tess_warn("TESS_LB_TARGET=process with one process: the load balancer has one bin and "
                  "moves nothing; TESS_LB_TARGET=pe or auto balances its %d PEs", npes);
}

tess_status_t tess_lb_init(void)
{
    memset(&lb, 0, sizeof(lb));
    pthread_mutex_init(&lb.lock, NULL);
    /* A strategy registered after tess_init is looked up at the first step; a name that is
     * not registered yet but is a misspelt built-in is surely wrong now. */
    lb.strategy = tess_lb_find(tess_cfg.lb, &lb.strategy_arg);
    const char *near = lb.strategy ? NULL : tess_lb_builtin_near(tess_cfg.lb);
    if (near) {
        char names[512];
        return tess_error(TESS_ERR_INVALID, "TESS_LB / +tess-lb '%s': no such load-balancing "
                          "strategy; did you mean '%s'? (known: %s)", tess_cfg.lb, near,
                          tess_lb_names(names, sizeof(names)));
    }
    if (!lb.strategy)
        tess_info("TESS_LB / +tess-lb '%s' is not a built-in strategy: it must be registered "
                  "with tess_lb_register before the first load-balancing step", tess_cfg.lb);
    tess_status_t st = lb_map_gpus();
    if (st != TESS_OK)
        return st;
    lb_choose_target();
    if ((st = tess_core_handler_register("lb-notice", lb_notice_handler, &lb.h_notice)) != TESS_OK ||
        (st = tess_core_handler_register("lb-report", lb_report_handler, &lb.h_report)) != TESS_OK ||
        (st = tess_core_handler_register("lb-migrate", lb_migrate_handler, &lb.h_migrate)) != TESS_OK)
        return st;
    static const tess_core_layer_t layer = {.name = "lb", .pe_init = lb_pe_init,
                                            .pe_fini = lb_pe_fini, .progress = lb_progress,
                                            .busy = lb_busy};
    st = tess_core_layer_add(&layer);
    if (st != TESS_OK)
        return st;
    tess_obj_on_arrival = lb_on_arrival;
    if (tess_cfg.lb_gpu_time)
        tess_lb_gputime_install();
    return TESS_OK;
}

void tess_lb_fini(void)
{
    for (uint32_t i = 0; i < tess_obj_narrays; i++) {
        tess_array_t *a  = tess_obj_arrays[i];
        lb_array_t   *la = a ? a->lb : NULL;
        if (!la)
            continue;
        free(la->recs);
        free(la->moves);
        free(la->all);
        free(la->counts);
        free(la->displs);
        pthread_mutex_destroy(&la->lock);
        free(la);
        a->lb = NULL;
    }
    free(lb.gpu_of_process);
    tess_obj_on_arrival = NULL;
    tess_lb_gputime_uninstall();
    pthread_mutex_destroy(&lb.lock);
}

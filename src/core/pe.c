/* pe.c — PE threads: creation and binding, parking between phases, the scheduler loop, and
 * sleeping when idle (spin for spin_us, then block on an eventfd; one sleeping PE also watches
 * the UCX event fd so that network traffic wakes the process). */
#include "core_int.h"
#include "core/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>
#ifdef HAVE_HWLOC
#include <hwloc.h>
#endif

_Thread_local tess_pe_t *tess_pe_self_ TESS_TLS_FAST;

int    tess_core_pe_global(const tess_pe_t *pe) { return pe->global; }
int    tess_core_pe_local(const tess_pe_t *pe) { return pe->local; }
void **tess_core_pe_slot(tess_pe_t *pe, int layer) { return &pe->slot[layer]; }

int tess_core_pe_queue_empty(tess_pe_t *pe)
{
    return tess_mpsc_empty(&pe->queue);
}

tess_pe_t *tess_core_pe_by_local(int local)
{
    return (local >= 0 && local < tess_core.npes) ? tess_core.pes[local] : NULL;
}

tess_pe_stats_t tess_core_pe_stats(tess_pe_t *pe)
{
    tess_pe_stats_t s = {pe->busy_ns, pe->idle_ns, pe->nmsgs};
    return s;
}

void tess_pe_wake(tess_pe_t *pe)
{
    uint64_t one = 1;
    ssize_t  rc;
    do
        rc = write(pe->wake_fd, &one, sizeof(one));
    while (rc < 0 && errno == EINTR);
}

void tess_pe_wake_all(void)
{
    for (int i = 0; i < tess_core.npes; i++)
        tess_pe_wake(tess_core.pes[i]);
}

/* Host backend: an event completed; wake PEs sleeping with continuations pending. The first
 * completion takes a PE's flag and wakes it; later ones find it down and write nothing (the PE
 * looks at every completion when it wakes, and raises the flag again before it next sleeps). */
void tess_pe_notify_gpu(void)
{
    for (int i = 0; i < tess_core.npes; i++) {
        tess_pe_t *pe = tess_core.pes[i];
        if (atomic_load_explicit(&pe->gpu_waiting, memory_order_acquire) &&
            atomic_exchange_explicit(&pe->gpu_waiting, 0, memory_order_acq_rel))
            tess_pe_wake(pe);
    }
}

/* ---- binding ----------------------------------------------------------------------------- */

#ifdef HAVE_HWLOC
static hwloc_topology_t pe_topo;
#endif

static void pe_bind(tess_pe_t *pe)
{
#ifdef HAVE_HWLOC
    if (!pe_topo)
        return;
    int ncores = hwloc_get_nbobjs_by_type(pe_topo, HWLOC_OBJ_CORE);
    if (ncores <= 0)
        return;
    int         idx  = (tess_rt.node_rank * tess_rt.ppn + pe->local) % ncores;
    hwloc_obj_t core = hwloc_get_obj_by_type(pe_topo, HWLOC_OBJ_CORE, (unsigned)idx);
    if (core && hwloc_set_cpubind(pe_topo, core->cpuset, HWLOC_CPUBIND_THREAD) != 0)
        tess_warn("cannot bind PE %d to core %d: %s", pe->global, idx, strerror(errno));
    else if (core)
        tess_info("PE %d bound to core %d", pe->global, idx);
#else
    (void)pe;
#endif
}

/* ---- sleeping ---------------------------------------------------------------------------- */

static int pe_has_gpu_notify;

/* Block until woken, a message arrives, the network has events, or the timeout passes. */
static void pe_sleep(tess_pe_t *pe, int *handover_p)
{
    int64_t timeout_ns = -1;
    if (pe->gq_count > 0) {
        if (!pe_has_gpu_notify)
            return; /* a real device: keep polling its events */
        atomic_store_explicit(&pe->gpu_waiting, 1, memory_order_seq_cst);
        /* A completion between the last poll and the store above notified nobody: look again. */
        if (tess_gpuq_any_done(pe))
            goto out_gpu;
        timeout_ns = 10 * 1000 * 1000;
    }
    if (pe->local == 0) {
        int64_t rounds = tess_reduce_fast_poll_ns();
        if (rounds >= 0)
            timeout_ns = timeout_ns < 0 ? rounds : TESS_MIN(timeout_ns, rounds);
    }
    if (pe->local == 0 && tess_agent_pending())
        timeout_ns = timeout_ns < 0 ? (int64_t)tess_cfg.mpi_poll_us * 1000
                                    : TESS_MIN(timeout_ns, (int64_t)tess_cfg.mpi_poll_us * 1000);
    else if (pe->local == 0) {
        /* A phase waiting for tess_exit still checks, now and then, that it can end. */
        int64_t wake = tess_phase_wake_ns();
        if (wake >= 0)
            timeout_ns = timeout_ns < 0 ? wake : TESS_MIN(timeout_ns, wake);
    }
    for (unsigned i = 0; i < tess_core.nlayers; i++)
        if (tess_core.layers[i].busy && tess_core.layers[i].busy())
            timeout_ns = timeout_ns < 0 ? 100 * 1000 : TESS_MIN(timeout_ns, 100 * 1000);

    int watch = 0, none = -1;
    if (atomic_compare_exchange_strong(&tess_core.net_watcher, &none, pe->local)) {
        tess_status_t st = tess_net_arm();
        if (st == TESS_OK) {
            watch = 1;
        } else {
            atomic_store(&tess_core.net_watcher, -1);
            if (st == TESS_ERR_BUSY)
                goto out_gpu; /* events to progress first */
            /* No event fd: poll the network now and then. */
            timeout_ns = timeout_ns < 0 ? 200 * 1000 : TESS_MIN(timeout_ns, 200 * 1000);
        }
    }

    atomic_store_explicit(&pe->sleeping, 1, memory_order_seq_cst);
    if (tess_mpsc_empty(&pe->queue) &&
        atomic_load_explicit(&tess_core.phase, memory_order_seq_cst) == PHASE_RUNNING) {
        struct pollfd fds[2] = {{.fd = pe->wake_fd, .events = POLLIN},
                                {.fd = tess_net_event_fd(), .events = POLLIN}};
        struct timespec ts, *tsp = NULL;
        if (timeout_ns >= 0) {
            ts.tv_sec  = timeout_ns / 1000000000;
            ts.tv_nsec = timeout_ns % 1000000000;
            tsp        = &ts;
        }
        uint64_t t0 = tess_time_ns();
        if (ppoll(fds, watch ? 2 : 1, tsp, NULL) < 0 && errno != EINTR)
            tess_warn("ppoll while idle failed: %s", strerror(errno));
        pe->idle_ns += tess_time_ns() - t0;
        TESS_TRACE(tess_trace_span("idle", "blocked", t0, 0, 0));
    }
    atomic_store_explicit(&pe->sleeping, 0, memory_order_relaxed);
    uint64_t v;
    if (read(pe->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        tess_warn("reading the wake-up fd failed: %s", strerror(errno));

    if (watch) {
        atomic_store(&tess_core.net_watcher, -1);
        /* Hand the watch to a PE that is still asleep; it re-sleeps at once as the watcher. */
        for (int i = 0; i < tess_core.npes; i++) {
            tess_pe_t *o = tess_core.pes[i];
            if (o != pe && atomic_load(&o->sleeping)) {
                tess_pe_wake(o);
                break;
            }
        }
    }
    *handover_p = 0;
out_gpu:
    atomic_store_explicit(&pe->gpu_waiting, 0, memory_order_relaxed);
}

/* ---- the scheduler ----------------------------------------------------------------------- */

/* How far into its spin an idle PE starts yielding its core (TESS_SPIN_YIELD_US). A yield
 * costs a system call per pass, and a pass that makes it sees a message or a completion that
 * much later; it pays only where PEs share cores (a peer woken on this core waits for the spin
 * to end otherwise), so by default only where the node's PEs are at least its cores, or a
 * process's PEs more than the cores it may run on. */
static uint64_t pe_yield_ns = UINT64_MAX;
/* PEs a core beyond which init warns (the tests run 4 processes x 2 PEs on 2 cores). */
#define PE_PER_CORE_MAX 4
/* More PEs on the node than cores (or on this process than the cores it may use). */
static int      pe_oversubscribed;

int tess_pe_oversubscribed(void)
{
    return pe_oversubscribed;
}

static void pe_yield_setup(void)
{
    int       us = tess_cfg.spin_yield_us;
    cpu_set_t set;
    int       mine  = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    long      cores = sysconf(_SC_NPROCESSORS_ONLN);
    long      pes   = (long)tess_rt.node_size * tess_cfg.ppn;
    pe_oversubscribed = mine <= 0 || cores <= 0 || pes > cores || tess_cfg.ppn > mine;
    /* Far more PEs than cores: every PE waits for a core most of the time (1024 PEs on 2 cores
     * ran a phase 70 times slower than 2 PEs). Said once per node. */
    if (tess_rt.node_rank == 0 && cores > 0 && pes > PE_PER_CORE_MAX * cores)
        tess_warn("%ld PEs on this node (%d process%s x %d) share %ld cores, more than %d a core: "
                  "each PE waits for a core most of the time and the run is many times slower "
                  "than with a PE a core or two; lower +ppn / TESS_PPN", pes, tess_rt.node_size,
                  tess_rt.node_size == 1 ? "" : "es", tess_cfg.ppn, cores, PE_PER_CORE_MAX);
    else if (mine > 0 && tess_cfg.ppn > PE_PER_CORE_MAX * mine)
        tess_warn("%d PEs on this process share the %d cores it may run on, more than %d a "
                  "core: each PE waits for a core most of the time and the run is many times "
                  "slower; lower +ppn / TESS_PPN, or give the process more cores", tess_cfg.ppn,
                  mine, PE_PER_CORE_MAX);
    if (us < 0) {
        int shared = mine <= 0 || cores <= 0 || pes >= cores || tess_cfg.ppn > mine;
        us = shared ? 2 : -1;
        tess_info("idle PEs %s (%ld PEs on the node of %ld cores, %d PEs on this process's %d)",
                  shared ? "yield their core 2 us into a spin" : "spin without yielding", pes,
                  cores, tess_cfg.ppn, mine);
    }
    pe_yield_ns = us < 0 ? UINT64_MAX : (uint64_t)us * 1000;
}

#ifdef TESS_LOOP_PROFILE
#define LP_START() uint64_t lp_t = tess_ticks()
#define LP_MARK(pe, part)                                                                        \
    do {                                                                                       \
        uint64_t lp_now = tess_ticks();                                                        \
        (pe)->lp_ticks[part] += lp_now - lp_t;                                                 \
        lp_t = lp_now;                                                                         \
    } while (0)
#define LP_PASS(pe, worked) ((pe)->lp_passes++, (pe)->lp_work_passes += (worked) != 0)

static void pe_loop_profile_print(const tess_pe_t *pe)
{
    static const char *names[LP_N] = {"dispatch", "gpu-poll", "continuations", "flush",
                                      "net", "layers", "agent", "idle"};
    double passes = pe->lp_passes ? (double)pe->lp_passes : 1;
    fprintf(stderr, "tessera loop profile, PE %d: %" PRIu64 " passes (%" PRIu64 " with work)",
            pe->global, pe->lp_passes, pe->lp_work_passes);
    for (int i = 0; i < LP_N; i++) {
        uint64_t t = pe->lp_ticks[i] - (i == LP_GPUQ ? pe->lp_ticks[LP_CONT] : 0);
        fprintf(stderr, "; %s %.0f ms %.0f ns/pass", names[i], tess_ticks_to_ns(t) * 1e-6,
                tess_ticks_to_ns(t) / passes);
    }
    fprintf(stderr, "\n");
}
#else
#define LP_START()            (void)0
#define LP_MARK(pe, part)     (void)0
#define LP_PASS(pe, worked)   (void)0
#endif

/* Tracing: an idle stretch (passes that found no work) from the end of its first such pass to
 * the start of the next pass with work; stretches under a microsecond are folded into the next
 * one. */
typedef struct {
    uint64_t from, polls, pass; /* pass: when the current pass began */
} pe_trace_idle_t;

static void pe_trace_idle_end(tess_pe_t *pe, pe_trace_idle_t *t, uint64_t now)
{
    if (t->from && now > t->from && now - t->from >= 1000) {
        tess_trace_record((uint32_t)pe->local, TESS_TEV_IDLE, NULL, "idle", NULL, t->from,
                          now - t->from, t->polls, 0);
        t->polls = 0;
    }
    t->from = 0;
}

static void pe_trace_idle_pass(pe_trace_idle_t *t)
{
    if (!t->from)
        t->from = tess_time_ns();
    t->polls++;
}

/* The work count of the pass, less what ran nothing (tess_core_work_ran_nothing), went from
 * *done to more: a stage did some. */
static inline void pe_work_gen_step(tess_pe_t *pe, unsigned *done, unsigned work)
{
    unsigned ran = work - pe->work_quiet;
    if (ran != *done) {
        pe->work_gen++;
        *done = ran;
    }
}

uint64_t tess_core_work_gen(void)
{
    tess_pe_t *pe = tess_pe_self_;
    return pe ? pe->work_gen : 0;
}

void tess_core_work_ran_nothing(unsigned n)
{
    tess_pe_t *pe = tess_pe_self_;
    if (pe)
        pe->work_quiet += n;
}

void tess_pe_loop(tess_pe_t *pe)
{
    pe_trace_idle_t tr = {0, 0, 0};
    if (tess_unlikely(tess_trace_on))
        tess_core_trace_phase_begin();
    const uint64_t spin_ns   = (uint64_t)tess_cfg.spin_us * 1000;
    const uint64_t yield_ns  = pe_yield_ns;
    const uint64_t serve_ns  = (uint64_t)tess_cfg.net_serve_us * 1000;
    uint64_t       idle_from = 0;
    int            serve     = serve_ns == 0; /* progress other PEs' lanes too */
    unsigned       pass      = 0;
    int            handover  = 0;
    pe->work_gen++; /* work was enqueued before the phase (by the caller of tess_run) */

    while (atomic_load_explicit(&tess_core.phase, memory_order_acquire) == PHASE_RUNNING) {
        LP_START();
        if (tess_unlikely(tess_trace_on))
            tr.pass = tess_time_ns();
        /* Every stage that did work moves work_gen on before the next one runs (handlers
         * move it themselves, one by one), but for network progress. */
        pe->work_quiet = 0;
        unsigned work = tess_msg_dispatch(pe, 64), done = work;
        LP_MARK(pe, LP_DISPATCH);
        if (pe->gq_count)
            work += tess_gpuq_poll(pe);
        LP_MARK(pe, LP_GPUQ);
        tess_msg_flush(pe);
        LP_MARK(pe, LP_FLUSH);
        pe_work_gen_step(pe, &done, work);
        /* Network progress only moves messages into queues and notes completed gets (the
         * layers finish them): it runs no user code and enqueues no device work, so it does
         * not move work_gen (a message's arrival alone does not make a stream busy). */
        if (work == 0 || (++pass & 7) == 0)
            work += tess_net_progress(serve);
        LP_MARK(pe, LP_NET);
        done = work;
        for (unsigned i = 0; i < tess_core.nlayers; i++)
            if (tess_core.layers[i].progress) {
                work += tess_core.layers[i].progress(pe);
                pe_work_gen_step(pe, &done, work);
            }
        LP_MARK(pe, LP_LAYERS);
        /* Waiting on GPU work is not idle for MPI's sake: polled every pass, MPI would slow
         * the polling of the device's events (and the launches that follow them). */
        if (pe->local == 0)
            work += tess_agent_progress(pe, work == 0 && pe->gq_count == 0);
        LP_MARK(pe, LP_AGENT);
        pe_work_gen_step(pe, &done, work);
        /* Sending the batches the stages left runs no user code and enqueues no device work:
         * it does not move work_gen either. */
        work += tess_msg_flush(pe);
        LP_MARK(pe, LP_FLUSH);
        LP_PASS(pe, work);
        if (!work)
            for (unsigned i = 0; i < tess_core.nlayers; i++)
                if (tess_core.layers[i].idle)
                    tess_core.layers[i].idle(pe);
        if (work) {
            if (tess_unlikely(tr.from))
                pe_trace_idle_end(pe, &tr, tr.pass);
            idle_from = 0;
            serve     = serve_ns == 0;
            continue;
        }
        if (tess_unlikely(tess_trace_on))
            pe_trace_idle_pass(&tr);
        uint64_t now = tess_time_ns();
        if (!idle_from) {
            idle_from = now;
            continue;
        }
        /* Other PEs' lanes are served once this PE has been idle TESS_NET_SERVE_US: a PE
         * between two bursts of its own work then does not spend its passes in UCX workers
         * that their own PEs progress anyway, and a lane whose PE is busy in a long entry
         * still moves. */
        serve = now - idle_from >= serve_ns;
        /* Waiting for a device that notifies completions, or while a device that shares the
         * cores has work (the host backend, whose executors need them): block at once instead
         * of spinning. */
        int spin = !handover && !(pe->gq_count && pe_has_gpu_notify) &&
                   !(tess_gpu->busy && tess_gpu->busy());
        if (now - idle_from < spin_ns && spin) {
            /* Past the first microseconds, spin with the core offered to anyone else: where
             * processes outnumber cores, a peer woken by this PE's own message would otherwise
             * wait for the spin to end (the scheduler does not preempt for it), which made a
             * 64 KiB ping-pong between two processes sleep-bound on a loaded 2-core machine. */
            /* A reduction round through shared memory waits for other processes: where they
             * outnumber the cores, one of them may need this one to get there (as MPI
             * libraries yield on every poll when oversubscribed). */
            if (now - idle_from >= yield_ns ||
                (pe_oversubscribed && pe->local == 0 && tess_reduce_fast_shm_only()))
                sched_yield();
            else
                tess_cpu_relax();
            LP_MARK(pe, LP_IDLE);
            continue;
        }
        pe->idle_ns += now - idle_from;
        handover = 1; /* if this sleep is cut short by a hand-over, sleep again without spinning */
        pe_sleep(pe, &handover);
        pe->work_gen++; /* what woke it is not known to be nothing */
        idle_from = 0;
        LP_MARK(pe, LP_IDLE);
    }
    tess_msg_flush(pe); /* none is kept past the phase */
    if (tess_unlikely(tess_trace_on)) {
        pe_trace_idle_end(pe, &tr, tess_time_ns());
        tess_core_trace_phase_end();
    }
}

/* ---- threads ----------------------------------------------------------------------------- */

static void *pe_thread_main(void *arg)
{
    tess_pe_t *pe = arg;
    tess_pe_self_ = pe;
    tess_log_pe   = pe->global;
    tess_net_set_lane(pe->local);
    tess_trace_thread_track((uint32_t)pe->local);
    if (tess_cfg.bind)
        pe_bind(pe);
    /* CUDA and HIP keep the current device per thread: make it this process's device, so that
     * kernels the PE's entries launch go to the right GPU. */
    if (tess_gpu->set_device(tess_gpu_device()) != TESS_OK)
        tess_fatal("PE %d cannot select device %d", pe->global, tess_gpu_device());
    for (unsigned i = 0; i < tess_core.nlayers; i++)
        if (tess_core.layers[i].pe_init)
            tess_core.layers[i].pe_init(pe);

    uint64_t seen = 0;
    pthread_mutex_lock(&tess_core.park_lock);
    tess_core.ready++;
    pthread_cond_broadcast(&tess_core.park_cond);
    for (;;) {
        while (tess_core.epoch == seen &&
               atomic_load(&tess_core.phase) != PHASE_SHUTDOWN)
            pthread_cond_wait(&tess_core.park_cond, &tess_core.park_lock);
        if (atomic_load(&tess_core.phase) == PHASE_SHUTDOWN)
            break;
        seen = tess_core.epoch;
        pthread_mutex_unlock(&tess_core.park_lock);
        tess_pe_loop(pe);
        pthread_mutex_lock(&tess_core.park_lock);
        tess_core.running--;
        pthread_cond_broadcast(&tess_core.park_cond);
    }
    pthread_mutex_unlock(&tess_core.park_lock);
    for (unsigned i = tess_core.nlayers; i-- > 0;)
        if (tess_core.layers[i].pe_fini)
            tess_core.layers[i].pe_fini(pe);
    tess_pe_self_ = NULL;
    return NULL;
}

static tess_status_t pe_alloc(int local, tess_pe_t **pe_p)
{
    tess_pe_t *pe = tess_aligned_alloc(TESS_CACHELINE, sizeof(*pe), "a PE");
    if (!pe)
        return TESS_ERR_NO_MEMORY;
    memset(pe, 0, sizeof(*pe));
    pe->local  = local;
    pe->global = tess_rt.rank * tess_rt.ppn + local;
    pe->burst_proc = -1;
    tess_mpsc_init(&pe->queue);
    pe->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (pe->wake_fd < 0) {
        free(pe);
        return tess_error(TESS_ERR_SYSTEM, "eventfd for PE %d: %s", local, strerror(errno));
    }
    tess_status_t st = tess_msg_pool_init(pe);
    if (st == TESS_OK)
        st = tess_gpu_evpool_init(&pe->evpool, 0, 32);
    if (st == TESS_OK && (st = tess_gpuq_pe_init(pe)) != TESS_OK)
        tess_gpu_evpool_fini(&pe->evpool);
    if (st != TESS_OK) {
        tess_gpuq_fini(pe);
        tess_msg_pool_fini(pe);
        close(pe->wake_fd);
        free(pe);
        return st;
    }
    *pe_p = pe;
    return TESS_OK;
}

static void pe_free(tess_pe_t *pe)
{
    tess_gpuq_fini(pe);
    tess_gpu_evpool_fini(&pe->evpool);
    tess_msg_pool_fini(pe);
    close(pe->wake_fd);
    free(pe);
}

tess_status_t tess_pe_create_all(void)
{
    tess_status_t st = tess_gpuq_setup();
    if (st != TESS_OK)
        return st;
    pe_yield_setup();
    pe_has_gpu_notify = tess_gpu->set_notify != NULL;
    if (pe_has_gpu_notify)
        tess_gpu->set_notify(tess_pe_notify_gpu);
#ifdef HAVE_HWLOC
    if (tess_cfg.bind) {
        if (hwloc_topology_init(&pe_topo) != 0 || hwloc_topology_load(pe_topo) != 0) {
            tess_warn("hwloc topology unavailable: PEs are not bound");
            pe_topo = NULL;
        }
    }
#else
    if (tess_cfg.bind)
        tess_warn("+tess-bind: this Tessera was built without hwloc; PEs are not bound");
#endif
    tess_core.npes = tess_rt.ppn;
    tess_core.pes  = tess_calloc((size_t)tess_core.npes, sizeof(*tess_core.pes), "the PE table");
    if (!tess_core.pes)
        return TESS_ERR_NO_MEMORY;
    for (int i = 0; i < tess_core.npes; i++) {
        st = pe_alloc(i, &tess_core.pes[i]);
        if (st != TESS_OK)
            goto err_free_pes;
    }
    return TESS_OK;

err_free_pes:
    for (int i = 0; i < tess_core.npes; i++)
        if (tess_core.pes[i])
            pe_free(tess_core.pes[i]);
    free(tess_core.pes);
    tess_core.pes = NULL;
    return st;
}

tess_status_t tess_pe_start_all(void)
{
    tess_status_t st;
    /* PE 0 is the thread that calls tess_run; bind it now. */
    if (tess_cfg.bind)
        pe_bind(tess_core.pes[0]);
    tess_pe_self_ = tess_core.pes[0];
    for (unsigned i = 0; i < tess_core.nlayers; i++)
        if (tess_core.layers[i].pe_init)
            tess_core.layers[i].pe_init(tess_core.pes[0]);
    tess_core.pes[0]->layers_ready = 1;
    tess_pe_self_ = NULL;
    for (int i = 1; i < tess_core.npes; i++) {
        int rc = pthread_create(&tess_core.pes[i]->thread, NULL, pe_thread_main, tess_core.pes[i]);
        if (rc != 0) {
            st = tess_error(TESS_ERR_SYSTEM, "cannot start PE thread %d: %s", i, strerror(rc));
            goto err_stop_threads;
        }
        tess_core.pes[i]->started = 1;
    }
    /* Every PE has run its layers' set-up before the program creates arrays. */
    pthread_mutex_lock(&tess_core.park_lock);
    while (tess_core.ready < tess_core.npes - 1)
        pthread_cond_wait(&tess_core.park_cond, &tess_core.park_lock);
    pthread_mutex_unlock(&tess_core.park_lock);
    return TESS_OK;

err_stop_threads:
    tess_pe_destroy_all();
    return st;
}

void tess_pe_destroy_all(void)
{
    if (!tess_core.pes)
        return;
    pthread_mutex_lock(&tess_core.park_lock);
    atomic_store(&tess_core.phase, PHASE_SHUTDOWN);
    pthread_cond_broadcast(&tess_core.park_cond);
    pthread_mutex_unlock(&tess_core.park_lock);
    /* No completion notice may read the PEs while they are freed. */
    if (tess_gpu && tess_gpu->set_notify)
        tess_gpu->set_notify(NULL);
    for (int i = 1; i < tess_core.npes; i++)
        if (tess_core.pes[i] && tess_core.pes[i]->started)
            pthread_join(tess_core.pes[i]->thread, NULL);
    tess_pe_self_ = tess_core.pes[0];
    if (tess_core.pes[0]->layers_ready)
        for (unsigned i = tess_core.nlayers; i-- > 0;)
            if (tess_core.layers[i].pe_fini)
                tess_core.layers[i].pe_fini(tess_core.pes[0]);
    for (int i = 0; i < tess_core.npes; i++)
        if (tess_core.pes[i]) {
#ifdef TESS_LOOP_PROFILE
            pe_loop_profile_print(tess_core.pes[i]);
#endif
            pe_free(tess_core.pes[i]);
        }
    tess_pe_self_ = NULL;
    free(tess_core.pes);
    tess_core.pes  = NULL;
    tess_core.npes = 0;
#ifdef HAVE_HWLOC
    if (pe_topo) {
        hwloc_topology_destroy(pe_topo);
        pe_topo = NULL;
    }
#endif
}

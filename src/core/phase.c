/* phase.c — tess_run phases: start and end, tess_exit (with a value), and quiescence detection
 * by waves of MPI_Iallreduce over the per-PE sent/processed counters.
 *
 * Quiescence (the four-counter method): PE 0 of every process samples its PEs' counters and
 * joins a wave; all samples of wave k+1 are taken after every sample of wave k (a process joins
 * k+1 only after k completed). If two consecutive waves give the same totals, sent == processed
 * and no network operation is outstanding, then at an instant between them every message sent
 * had been processed and nothing was running that could send: the phase is over everywhere. */
#include "core_int.h"
#include "core/trace.h"

#include <stdio.h>
#include <stdlib.h>

#define WAVE_MIN_GAP_NS (50 * 1000) /* between the end of a wave and the start of the next */
/* A TESS_RUN_UNTIL_EXIT phase before any tess_exit: a wave that may find the phase quiescent
 * (it can then never end) starts only once PE 0 has been idle this long, and this long after
 * the last one, so that a busy phase runs none. */
#define HANG_WAVE_GAP_NS (200 * 1000 * 1000)

typedef struct exit_payload {
    int32_t  origin_pe;  /* PE that called tess_exit */
    uint32_t origin_seq; /* its exit count, to order several exits */
    uint64_t has_value, size;
    /* value bytes follow */
} exit_payload_t;

static struct {
    /* Exit state (PE 0 of this process). */
    int      exit_seen;
    int      have_value;
    int32_t  value_pe;
    uint32_t value_seq;
    void    *value;
    size_t   value_size;
    /* Result of the last phase, for tess_result (main). */
    void    *result;
    size_t   result_size;
    int      have_result;
    /* Waves (PE 0). */
    int         wave_active;
    MPI_Request wave_req;
    /* sent, processed, work in flight, processes that saw an exit, and of sent - processed the
     * part that is the fast path's reductions (partials waiting for or in a round) */
    uint64_t    wave_local[5], wave_global[5], wave_prev[5];
    int         have_prev;
    uint64_t    wave_end_ns;
    uint64_t    wave_trace_t0; /* tracing: when the wave in flight started */
    uint64_t    idle_since_ns; /* PE 0 idle since (0: busy) */
    uint64_t    waves;
} ph;

static _Atomic uint32_t exit_count; /* exits called by this process's PEs */

int tess_core_in_phase(void)
{
    return atomic_load_explicit(&tess_core.phase, memory_order_acquire) == PHASE_RUNNING;
}

uint64_t tess_core_phase_epoch(void)
{
    /* Written by the main thread under park_lock before the PEs wake for the phase. */
    return tess_core.epoch;
}

/* ---- exit -------------------------------------------------------------------------------- */

static bool exit_handler(tess_msg_t *m)
{
    const exit_payload_t *e = tess_msg_payload(m);
    if (tess_unlikely(m->hdr.size < sizeof(*e) || m->hdr.size != sizeof(*e) + e->size))
        tess_fatal("corrupt exit message from PE %d", m->hdr.src_pe);
    ph.exit_seen = 1;
    if (e->has_value) {
        /* Several exits with values: keep the one from the lowest (PE, count), the same on
         * every process once all exit messages arrived. */
        int better = !ph.have_value || e->origin_pe < ph.value_pe ||
                     (e->origin_pe == ph.value_pe && e->origin_seq < ph.value_seq);
        if (better) {
            void *v = realloc(ph.value, e->size ? e->size : 1);
            if (!v)
                tess_fatal("out of memory keeping a %llu-byte exit value",
                           (unsigned long long)e->size);
            memcpy(v, e + 1, e->size);
            ph.value      = v;
            ph.value_size = e->size;
            ph.value_pe   = e->origin_pe;
            ph.value_seq  = e->origin_seq;
            ph.have_value = 1;
        }
    }
    tess_core_msg_free(m);
    return true;
}

tess_status_t tess_core_exit(const void *data, size_t size)
{
    tess_pe_t *self = tess_core_pe_self();
    if (!self || !tess_core_in_phase())
        return tess_error(TESS_ERR_STATE, "tess_exit outside a phase");
    uint32_t seq = atomic_fetch_add(&exit_count, 1);
    for (int p = 0; p < tess_rt.size; p++) {
        tess_msg_t *m = tess_core_msg_alloc(sizeof(exit_payload_t) + (data ? size : 0));
        if (!m)
            tess_fatal("out of memory sending an exit message");
        exit_payload_t *e = tess_msg_payload(m);
        e->origin_pe  = self->global;
        e->origin_seq = seq;
        e->has_value  = data != NULL;
        e->size       = data ? size : 0;
        if (data && size)
            memcpy(e + 1, data, size);
        m->hdr.handler = tess_core.h_exit;
        m->hdr.dst_pe  = p * tess_rt.ppn;
        tess_core_send(m);
    }
    return TESS_OK;
}

tess_status_t tess_core_result(void *buf, size_t size, size_t *size_p)
{
    if (!ph.have_result) {
        if (size_p)
            *size_p = 0;
        return tess_error_quiet(TESS_ERR_NOT_FOUND, "tess_result: the last phase ended without "
                                "a value (no tess_exit_with, no TESS_CB_RETURN reduction)");
    }
    if (size_p)
        *size_p = ph.result_size;
    memcpy(buf, ph.result, TESS_MIN(size, ph.result_size));
    if (size < ph.result_size)
        return tess_error_quiet(TESS_ERR_TRUNCATED, "tess_result: the value is %zu bytes, the "
                                "buffer %zu (its first %zu bytes were copied)", ph.result_size,
                                size, size);
    return TESS_OK;
}

/* ---- waves ------------------------------------------------------------------------------- */

static uint64_t layers_busy(void)
{
    uint64_t busy = 0;
    for (unsigned i = 0; i < tess_core.nlayers; i++)
        if (tess_core.layers[i].busy)
            busy += tess_core.layers[i].busy() != 0;
    return busy;
}

/* A TESS_RUN_UNTIL_EXIT phase is quiescent and nobody called tess_exit: nothing can ever
 * happen in it again. Every process is here at once (the wave's result is global): the layers
 * add what they still have open (collectively), process 0 aborts the job with all of it. */
_Noreturn static void phase_report_hang(uint64_t messages)
{
    char   report[3072] = "";
    size_t len          = 0;
    for (unsigned i = 0; i < tess_core.nlayers; i++)
        if (tess_core.layers[i].report_stuck) {
            tess_core.layers[i].report_stuck(report + len, sizeof(report) - len);
            len = strlen(report);
        }
    if (tess_rt.rank == 0)
        tess_fatal("tess_run(TESS_RUN_UNTIL_EXIT), phase %llu of this program, can never end: it "
                   "is quiescent (all %llu messages were processed; nothing is in flight on any "
                   "process) but no chare called tess_exit and no TESS_CB_RETURN reduction "
                   "completed; %s", (unsigned long long)tess_core.epoch,
                   (unsigned long long)messages,
                   len ? report : "no reduction is open (did the phase forget tess_exit, or "
                                  "should it run TESS_RUN_UNTIL_QUIESCENCE?)");
    /* Process 0 ends the job; wait for it (it never joins this barrier). */
    MPI_Barrier(tess_core.wave_comm);
    tess_fatal("tess_run(TESS_RUN_UNTIL_EXIT) can never end (see process 0's message)");
}

unsigned tess_phase_progress(tess_pe_t *pe0, int idle)
{
    (void)pe0;
    if (ph.wave_active) {
        int flag = 0;
        TESS_MPI_CHECK(MPI_Test(&ph.wave_req, &flag, MPI_STATUS_IGNORE));
        if (!flag)
            return 0;
        ph.wave_active = 0;
        ph.wave_end_ns = tess_time_ns();
        ph.waves++;
        if (tess_unlikely(ph.wave_trace_t0))
            tess_trace_record(TESS_TRACK_MPI, TESS_TEV_SPAN, "mpi", "quiescence wave", NULL,
                              ph.wave_trace_t0, ph.wave_end_ns - ph.wave_trace_t0, ph.waves,
                              ph.wave_global[0]);
        const uint64_t *g = ph.wave_global;
        tess_trace("wave %llu: sent %llu, processed %llu, busy %llu, exits %llu",
                   (unsigned long long)ph.waves, (unsigned long long)g[0],
                   (unsigned long long)g[1], (unsigned long long)g[2], (unsigned long long)g[3]);
        /* A phase waiting for tess_exit with nothing in flight but reduction rounds that did
         * not move between two waves (200 ms apart): they wait for contributions that no
         * message can bring any more, as a tree reduction open at its root would. */
        if (tess_core.mode == TESS_RUN_UNTIL_EXIT && g[3] == 0 && g[2] == 0 && g[4] > 0 &&
            g[0] - g[1] == g[4] && ph.have_prev && !memcmp(g, ph.wave_prev, sizeof(ph.wave_prev)))
            phase_report_hang(g[1]);
        if (g[0] == g[1] && g[2] == 0 && ph.have_prev &&
            !memcmp(g, ph.wave_prev, sizeof(ph.wave_prev))) {
            /* Exit messages are counted: at quiescence every process has seen them all, so g[3]
             * is 0 everywhere or nprocs everywhere. */
            if (tess_core.mode == TESS_RUN_UNTIL_EXIT && g[3] == 0)
                phase_report_hang(g[0]);
            tess_debug("quiescence after %llu waves: %llu messages",
                       (unsigned long long)ph.waves, (unsigned long long)g[0]);
            atomic_store(&tess_core.phase, PHASE_STOPPING);
            tess_pe_wake_all();
            return 1;
        }
        memcpy(ph.wave_prev, g, sizeof(ph.wave_prev));
        ph.have_prev = 1;
        return 1;
    }
    if (!idle) {
        ph.idle_since_ns = 0;
        return 0;
    }
    uint64_t now = tess_time_ns();
    if (!ph.idle_since_ns)
        ph.idle_since_ns = now;
    if (tess_core.mode == TESS_RUN_UNTIL_EXIT && !ph.exit_seen) {
        if (now - ph.idle_since_ns < HANG_WAVE_GAP_NS || now - ph.wave_end_ns < HANG_WAVE_GAP_NS)
            return 0;
    } else if (now - ph.wave_end_ns < WAVE_MIN_GAP_NS) {
        return 0;
    }
    uint64_t sent = 0, processed = 0;
    for (int i = 0; i < tess_core.npes; i++) {
        processed += atomic_load_explicit(&tess_core.pes[i]->processed, memory_order_acquire);
        sent      += atomic_load_explicit(&tess_core.pes[i]->sent, memory_order_acquire);
    }
    ph.wave_local[0] = sent;
    ph.wave_local[1] = processed;
    ph.wave_local[2] = tess_net_outstanding() + layers_busy();
    ph.wave_local[3] = ph.exit_seen != 0;
    ph.wave_local[4] = tess_reduce_fast_pending();
    ph.wave_trace_t0 = TESS_TRACE_NOW();
    TESS_MPI_CHECK(MPI_Iallreduce(ph.wave_local, ph.wave_global, 5, MPI_UINT64_T, MPI_SUM,
                                  tess_core.wave_comm, &ph.wave_req));
    ph.wave_active = 1;
    return 0;
}

/* A phase needs PE 0 to poll MPI while a wave may be started or is in flight. */
int tess_phase_wants_poll(void)
{
    return ph.wave_active || tess_core.mode == TESS_RUN_UNTIL_QUIESCENCE || ph.exit_seen;
}

int64_t tess_phase_wake_ns(void)
{
    if (tess_phase_wants_poll())
        return -1;
    uint64_t now   = tess_time_ns();
    uint64_t since = TESS_MIN(now - ph.wave_end_ns,
                              ph.idle_since_ns ? now - ph.idle_since_ns : 0);
    return since >= HANG_WAVE_GAP_NS ? 1000 * 1000 : (int64_t)(HANG_WAVE_GAP_NS - since);
}

/* ---- run --------------------------------------------------------------------------------- */

tess_status_t tess_core_run(tess_run_mode_t mode, tess_start_fn_t start, void *arg)
{
    if (!tess_core.initialized)
        return tess_error(TESS_ERR_STATE, "tess_run: Tessera is not initialised");
    if (!pthread_equal(pthread_self(), tess_core.main_thread))
        return tess_error(TESS_ERR_STATE, "tess_run must be called by the thread that called "
                          "tess_init (it becomes PE 0 and makes the MPI calls)");
    if (atomic_load(&tess_core.phase) != PHASE_IDLE)
        return tess_error(TESS_ERR_STATE, "tess_run: a phase is already running (tess_run "
                          "cannot be nested)");
    if (mode != TESS_RUN_UNTIL_EXIT && mode != TESS_RUN_UNTIL_QUIESCENCE)
        return tess_error(TESS_ERR_INVALID, "tess_run: unknown mode %d", (int)mode);
    tess_core_collective_enter(TESS_COLL_RUN);

    tess_core.mode = mode;
    ph.exit_seen   = 0;
    ph.have_value  = 0;
    ph.have_prev   = 0;
    ph.wave_end_ns   = mode == TESS_RUN_UNTIL_EXIT ? tess_time_ns() : 0;
    ph.idle_since_ns = 0;
    ph.waves       = 0;

    pthread_mutex_lock(&tess_core.park_lock);
    atomic_store(&tess_core.phase, PHASE_RUNNING);
    tess_core.epoch++;
    tess_core.running = tess_core.npes - 1;
    pthread_cond_broadcast(&tess_core.park_cond);
    pthread_mutex_unlock(&tess_core.park_lock);

    tess_pe_t *pe0 = tess_core.pes[0];
    tess_pe_self_  = pe0;
    tess_log_pe    = pe0->global;
    if (start)
        start(arg);
    tess_pe_loop(pe0);

    tess_pe_wake_all();
    pthread_mutex_lock(&tess_core.park_lock);
    while (tess_core.running > 0)
        pthread_cond_wait(&tess_core.park_cond, &tess_core.park_lock);
    atomic_store(&tess_core.phase, PHASE_IDLE);
    pthread_mutex_unlock(&tess_core.park_lock);
    /* Processes see the last wave complete at different times: without this barrier one could
     * return, start the next phase and send, while another still runs entries of this phase,
     * which would then run the next phase's messages before its own tess_run returned (before
     * the MPI code between the phases). Here every process's PEs are parked. */
    TESS_MPI_CHECK(MPI_Barrier(tess_core.wave_comm));

    tess_pe_self_ = NULL;
    tess_log_pe   = -1;
#ifdef TESS_HOP_TRACE
    tess_hop_print();
#endif

    free(ph.result);
    ph.result      = ph.value;
    ph.result_size = ph.value_size;
    ph.have_result = ph.have_value;
    ph.value       = NULL;
    ph.value_size  = 0;
    ph.have_value  = 0;
    return TESS_OK;
}

tess_status_t tess_phase_init(void)
{
    memset(&ph, 0, sizeof(ph));
    return tess_core_handler_register("exit", exit_handler, &tess_core.h_exit);
}

void tess_phase_fini(void)
{
    free(ph.result);
    free(ph.value);
    memset(&ph, 0, sizeof(ph));
}

/* agent.c — the MPI agent on PE 0: work handed over by other PEs, MPI requests it watches with
 * MPI_Testsome, and the polling rate of MPI (every pass when idle, at most every
 * AGENT_BUSY_POLL_NS while busy or waiting on the GPU, so that MPI progress does not slow
 * message handling or the polling of device events). */
#include "core_int.h"
#include "core/trace.h"

#include <stdlib.h>

#define AGENT_BUSY_POLL_NS (20 * 1000)

typedef struct agent_watch {
    tess_agent_req_fn_t done;
    void               *arg;
} agent_watch_t;

typedef struct agent_post {
    tess_agent_fn_t fn;
    void           *arg;
} agent_post_t;

static struct {
    MPI_Request   *reqs;
    agent_watch_t *watches;
    int           *indices;
    MPI_Status    *statuses;
    int            count, cap;
    uint64_t       last_poll_ns;
} ag;

static bool agent_handler(tess_msg_t *m)
{
    agent_post_t *p = tess_msg_payload(m);
    p->fn(p->arg);
    tess_core_msg_free(m);
    return true;
}

tess_status_t tess_core_agent_post(tess_agent_fn_t fn, void *arg)
{
    tess_msg_t *m = tess_core_msg_alloc(sizeof(agent_post_t));
    if (!m)
        return TESS_ERR_NO_MEMORY;
    agent_post_t *p = tess_msg_payload(m);
    p->fn          = fn;
    p->arg         = arg;
    m->hdr.handler = tess_core.h_agent;
    m->hdr.dst_pe  = tess_rt.rank * tess_rt.ppn;
    return tess_core_send(m);
}

tess_status_t tess_core_agent_watch(MPI_Request req, tess_agent_req_fn_t done, void *arg)
{
    tess_pe_t *self = tess_core_pe_self();
    if (tess_unlikely(!self || self->local != 0))
        tess_fatal("internal: MPI request watched outside PE 0");
    if (ag.count == ag.cap) {
        int cap = ag.cap ? ag.cap * 2 : 16;
        MPI_Request   *r = realloc(ag.reqs, (size_t)cap * sizeof(*r));
        if (r)
            ag.reqs = r;
        agent_watch_t *w = realloc(ag.watches, (size_t)cap * sizeof(*w));
        if (w)
            ag.watches = w;
        int           *x = realloc(ag.indices, (size_t)cap * sizeof(*x));
        if (x)
            ag.indices = x;
        MPI_Status    *s = realloc(ag.statuses, (size_t)cap * sizeof(*s));
        if (s)
            ag.statuses = s;
        if (!r || !w || !x || !s)
            return tess_error(TESS_ERR_NO_MEMORY, "cannot watch %d MPI requests", cap);
        ag.cap = cap;
    }
    ag.reqs[ag.count]    = req;
    ag.watches[ag.count] = (agent_watch_t){done, arg};
    ag.count++;
    return TESS_OK;
}

int tess_agent_pending(void)
{
    return ag.count > 0 || tess_rt.rank == 0 || tess_phase_wants_poll();
}

static unsigned agent_test_requests(void)
{
    if (ag.count == 0)
        return 0;
    int outcount = 0;
    TESS_MPI_CHECK(MPI_Testsome(ag.count, ag.reqs, &outcount, ag.indices, ag.statuses));
    if (outcount == MPI_UNDEFINED || outcount == 0)
        return 0;
    /* Take the completed watches out first: their callbacks may add new ones. MPI has set
     * the completed (non-persistent) requests to MPI_REQUEST_NULL. */
    agent_watch_t  stack_done[32];
    MPI_Status     stack_stat[32];
    agent_watch_t *done = stack_done;
    MPI_Status    *stat = stack_stat;
    if (outcount > 32) {
        done = tess_malloc((size_t)outcount * sizeof(*done), "completed MPI watches");
        stat = tess_malloc((size_t)outcount * sizeof(*stat), "completed MPI statuses");
        if (!done || !stat)
            tess_fatal("out of memory completing %d MPI requests", outcount);
    }
    for (int i = 0; i < outcount; i++) {
        done[i] = ag.watches[ag.indices[i]];
        stat[i] = ag.statuses[i];
    }
    int out = 0;
    for (int i = 0; i < ag.count; i++) {
        if (ag.reqs[i] == MPI_REQUEST_NULL)
            continue;
        ag.reqs[out]    = ag.reqs[i];
        ag.watches[out] = ag.watches[i];
        out++;
    }
    ag.count = out;
    for (int i = 0; i < outcount; i++)
        if (done[i].done)
            done[i].done(done[i].arg, &stat[i]);
    if (done != stack_done) {
        free(done);
        free(stat);
    }
    return (unsigned)outcount;
}

unsigned tess_agent_progress(tess_pe_t *pe0, int idle)
{
    /* Reduction rounds through shared memory need no MPI: seen on every pass, busy or not; and
     * while one with a partial is on its way, PE 0 is about to be busy: MPI is polled as then,
     * so that the pass that sees the round come back is not spent in MPI. */
    unsigned work = tess_reduce_fast_progress(pe0, 0);
    int      quiet = idle && !work; /* for the phase: nothing ran */
    if (work || (idle && tess_reduce_fast_shm_only()))
        idle = 0;
    uint64_t now = tess_time_ns();
    if (!idle && now - ag.last_poll_ns < AGENT_BUSY_POLL_NS)
        return work;
    ag.last_poll_ns = now;
    tess_core_peers_check();
    uint64_t tr_t0 = TESS_TRACE_NOW();
    work += agent_test_requests();
    work += tess_reduce_progress(pe0);
    if (tess_unlikely(tr_t0) && work)
        tess_trace_span("mpi", "mpi progress", tr_t0, work, 0);
    /* A quiescence wave that ends runs nothing of the user's and enqueues no device work. */
    unsigned waves = tess_phase_progress(pe0, quiet && work == 0);
    tess_core_work_ran_nothing(waves);
    return work + waves;
}

tess_status_t tess_agent_init(void)
{
    memset(&ag, 0, sizeof(ag));
    return tess_core_handler_register("agent", agent_handler, &tess_core.h_agent);
}

void tess_agent_fini(void)
{
    for (int i = 0; i < ag.count; i++)
        if (ag.reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&ag.reqs[i]);
            MPI_Request_free(&ag.reqs[i]);
        }
    free(ag.reqs);
    free(ag.watches);
    free(ag.indices);
    free(ag.statuses);
    memset(&ag, 0, sizeof(ag));
}

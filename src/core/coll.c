/* coll.c — the collective calls of the API (tess_run, tess_array_create/destroy,
 * tess_entry_register, tess_finalize): every process must enter the same one, in the same order.
 * A process that enters another one is found at once; one that never comes (it skipped the call,
 * or is stuck in its own code or in another MPI call) ends the job after TESS_COLLECTIVE_TIMEOUT
 * with a message naming the call and the processes missing.
 *
 * Who is missing: on entering its n-th collective call each process tells process 0 (and process
 * 0 tells every process) with a small message on coll_comm; each keeps a receive posted per
 * source, so the notices are matched while the processes wait. At the timeout process 0 names
 * every process it has not heard from; the others name process 0 if it has not come, and
 * otherwise leave the report to it. Two notices per process per call, none in between.
 *
 * Threads: main only (the collective calls run there), so this state has no lock. */
#include "core_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define COLL_TAG_ENTERED 7001
#define COLL_WARN_NS     (10ull * 1000 * 1000 * 1000)
/* A process other than 0 that knows process 0 came waits this much past its own timeout for
 * process 0's report before it reports on its own. */
#define COLL_GRACE_NS    (5ull * 1000 * 1000 * 1000)

static const char *const coll_names[] = {
    [TESS_COLL_RUN] = "tess_run", [TESS_COLL_ARRAY_CREATE] = "tess_array_create",
    [TESS_COLL_ARRAY_DESTROY] = "tess_array_destroy",
    [TESS_COLL_ENTRY_REGISTER] = "tess_entry_register",
    [TESS_COLL_BATCH_REGISTER] = "tess_gpu_batch_register", [TESS_COLL_FINALIZE] = "tess_finalize"};

static struct {
    int64_t      seq;      /* collective calls this process entered */
    int64_t     *entered;  /* [rank]: the last call it was heard to enter (0: from 0 only) */
    uint64_t     seen0_ns; /* when this process heard process 0 enter the current call */
    int64_t     *inbox;    /* [rank]: receive buffers */
    MPI_Request *recv;     /* [rank] */
    MPI_Request *send;     /* [rank] */
    int64_t      out;      /* the notice sent; unchanged until the sends completed */
    int          ready;
} coll;

static int coll_peer(int r)
{
    /* Process 0 hears from everyone, the others from process 0. */
    return r != tess_rt.rank && (tess_rt.rank == 0 || r == 0);
}

static void coll_recv_post(int r)
{
    TESS_MPI_CHECK(MPI_Irecv(&coll.inbox[r], 1, MPI_INT64_T, r, COLL_TAG_ENTERED,
                             tess_core.coll_comm, &coll.recv[r]));
}

tess_status_t tess_coll_init(void)
{
    int n         = tess_rt.size;
    coll.seq      = 0;
    coll.entered  = tess_calloc((size_t)n, sizeof(*coll.entered), "collective-call counts");
    coll.inbox    = tess_calloc((size_t)n, sizeof(*coll.inbox), "collective-call notices");
    coll.recv     = tess_calloc((size_t)n, sizeof(*coll.recv), "collective-call receives");
    coll.send     = tess_calloc((size_t)n, sizeof(*coll.send), "collective-call sends");
    if (!coll.entered || !coll.inbox || !coll.recv || !coll.send) {
        free(coll.entered), free(coll.inbox), free(coll.recv), free(coll.send);
        memset(&coll, 0, sizeof(coll));
        return TESS_ERR_NO_MEMORY;
    }
    for (int r = 0; r < n; r++) {
        coll.recv[r] = coll.send[r] = MPI_REQUEST_NULL;
        if (coll_peer(r))
            coll_recv_post(r);
    }
    coll.ready = 1;
    return TESS_OK;
}

/* The notices sent complete (small: at once). One request at a time: gcc 12 rejects MPICH's
 * MPI_STATUSES_IGNORE as a zero-size status array. */
static void coll_wait_sends(void)
{
    for (int r = 0; r < tess_rt.size; r++)
        if (coll.send[r] != MPI_REQUEST_NULL)
            TESS_MPI_CHECK(MPI_Wait(&coll.send[r], MPI_STATUS_IGNORE));
}

/* Take the notices that arrived. */
static void coll_poll(void)
{
    for (;;) {
        int idx, flag;
        TESS_MPI_CHECK(MPI_Testany(tess_rt.size, coll.recv, &idx, &flag, MPI_STATUS_IGNORE));
        if (!flag || idx == MPI_UNDEFINED)
            return;
        if (coll.inbox[idx] > coll.entered[idx]) {
            coll.entered[idx] = coll.inbox[idx];
            if (idx == 0 && coll.entered[0] >= coll.seq)
                coll.seen0_ns = tess_time_ns();
        }
        coll_recv_post(idx);
    }
}

void tess_coll_fini(void)
{
    if (!coll.ready)
        return;
    /* Every call entered so far completed, so every notice of it is on its way: take them
     * (within a few seconds), so that none is left unmatched when the communicator goes. */
    coll_wait_sends();
    uint64_t deadline = tess_time_ns() + 5000000000ull;
    for (;;) {
        coll_poll();
        int due = 0;
        for (int r = 0; r < tess_rt.size; r++)
            due |= coll_peer(r) && coll.entered[r] < coll.seq;
        if (!due || tess_time_ns() > deadline)
            break;
        struct timespec ts = {0, 100 * 1000};
        nanosleep(&ts, NULL);
    }
    for (int r = 0; r < tess_rt.size; r++)
        if (coll.recv[r] != MPI_REQUEST_NULL) {
            MPI_Cancel(&coll.recv[r]);
            MPI_Wait(&coll.recv[r], MPI_STATUS_IGNORE);
        }
    free(coll.entered), free(coll.inbox), free(coll.recv), free(coll.send);
    memset(&coll, 0, sizeof(coll));
}

/* "1, 3, 5-9 and 12" into buf: the processes process 0 has not heard enter call seq. */
static int coll_missing(char *buf, size_t len)
{
    size_t used = 0;
    int    count = 0, groups = 0;
    buf[0] = '\0';
    for (int r = 1; r < tess_rt.size; r++) {
        if (coll.entered[r] >= coll.seq)
            continue;
        int last = r;
        while (last + 1 < tess_rt.size && coll.entered[last + 1] < coll.seq)
            last++;
        count += last - r + 1;
        if (used + 32 < len) {
            int n = last == r ? snprintf(buf + used, len - used, "%s%d", groups ? ", " : "", r)
                              : snprintf(buf + used, len - used, "%s%d-%d", groups ? ", " : "",
                                         r, last);
            used += (size_t)n;
        } else if (used + 5 < len && !strstr(buf, "...")) {
            used += (size_t)snprintf(buf + used, len - used, ", ...");
        }
        groups++;
        r = last;
    }
    return count;
}

_Noreturn static void coll_timeout(tess_coll_t kind, double waited_s)
{
    static const char why[] =
        "every process must make the same collective Tessera calls (tess_run, "
        "tess_array_create, tess_array_destroy, tess_entry_register, tess_finalize) in the same "
        "order; a process that skipped this one, or is still in its own code or in another MPI "
        "call, keeps the others here; TESS_COLLECTIVE_TIMEOUT sets the wait, 0 for ever";
    if (tess_rt.rank == 0) {
        char list[256];
        int  n = coll_missing(list, sizeof(list));
        if (n > 0)
            tess_fatal("%s was not entered by process%s %s (of %d) within %.0f s: %s",
                       coll_names[kind], n > 1 ? "es" : "", list, tess_rt.size, waited_s, why);
        tess_fatal("%s: every process entered it, but they did not meet within %.0f s (%s)",
                   coll_names[kind], waited_s, why);
    }
    if (coll.entered[0] < coll.seq)
        tess_fatal("%s was not entered by process 0 (of %d) within %.0f s, and maybe by others "
                   "(process 0 keeps the count): %s", coll_names[kind], tess_rt.size, waited_s,
                   why);
    tess_fatal("%s: this process waited %.0f s for the others to enter it, and process 0, which "
               "knows who is missing, did not report them: %s", coll_names[kind], waited_s,
               why);
}

/* A warning while the processes have not all come: who is missing, as far as this process
 * knows (process 0 hears from everyone; the others only from process 0), and when the job ends. */
static void coll_warn(tess_coll_t kind, uint64_t waited)
{
    char who[320], end[96];
    if (tess_rt.rank == 0) {
        char list[256];
        int  n = coll_missing(list, sizeof(list));
        if (n > 0)
            snprintf(who, sizeof(who), "process%s %s (of %d)", n > 1 ? "es" : "", list,
                     tess_rt.size);
        else
            snprintf(who, sizeof(who), "the others (every process has entered it)");
    } else if (coll.entered[0] < coll.seq) {
        snprintf(who, sizeof(who), "process 0 (of %d), and maybe others", tess_rt.size);
    } else {
        snprintf(who, sizeof(who), "some process (process 0, which keeps the count, names it)");
    }
    if (tess_cfg.collective_timeout)
        snprintf(end, sizeof(end), "the job ends at TESS_COLLECTIVE_TIMEOUT=%d s",
                 tess_cfg.collective_timeout);
    else
        snprintf(end, sizeof(end), "TESS_COLLECTIVE_TIMEOUT=0: it waits for ever");
    tess_warn("%s: this process has waited %.0f s for %s to enter it (every process must make "
              "the same collective Tessera calls in the same order; one that skipped it, or is "
              "still in its own code, keeps the others here); %s", coll_names[kind],
              (double)waited * 1e-9, who, end);
}

void tess_core_collective_enter(tess_coll_t kind)
{
    /* The processes' next collective calls meet in one MPI_Iallreduce on a communicator of
     * their own: a process that entered another call meets this one there (a mismatch, found at
     * once); a process that does not come is waited for, with a warning now and then, up to
     * the timeout. */
    coll_wait_sends();
    coll.seq++;
    coll.out = coll.seq;
    for (int r = 0; r < tess_rt.size; r++)
        if (coll_peer(r))
            TESS_MPI_CHECK(MPI_Isend(&coll.out, 1, MPI_INT64_T, r, COLL_TAG_ENTERED,
                                     tess_core.coll_comm, &coll.send[r]));
    coll.seen0_ns = 0;

    int64_t     mine[2] = {kind, -(int64_t)kind}, all[2];
    MPI_Request req;
    TESS_MPI_CHECK(MPI_Iallreduce(mine, all, 2, MPI_INT64_T, MPI_MAX, tess_core.coll_comm,
                                  &req));
    uint64_t timeout = (uint64_t)tess_cfg.collective_timeout * 1000000000ull;
    /* Warnings at 10, 20, 40 ... s; a timeout under 40 s starts them at a quarter of it. */
    uint64_t t0 = tess_time_ns(), warn_at = timeout ? TESS_MIN(COLL_WARN_NS, timeout / 4)
                                                    : COLL_WARN_NS;
    for (;;) {
        int flag = 0;
        TESS_MPI_CHECK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
        if (flag)
            break;
        coll_poll();
        uint64_t now = tess_time_ns(), waited = now - t0;
        if (timeout && waited >= timeout) {
            /* Process 0 entered within its own timeout, which ends by seen0 + timeout. */
            int wait_for_0 = tess_rt.rank != 0 && coll.entered[0] >= coll.seq &&
                             now < TESS_MAX(t0, coll.seen0_ns) + timeout + COLL_GRACE_NS;
            if (!wait_for_0)
                coll_timeout(kind, (double)waited * 1e-9);
        }
        if (waited >= warn_at && warn_at && (!timeout || warn_at < timeout)) {
            coll_warn(kind, waited);
            warn_at *= 2;
        }
        tess_core_peers_check();
        struct timespec ts = {0, waited < 1000000 ? 20 * 1000 : 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int64_t hi = all[0], lo = -all[1];
    if (hi != lo)
        tess_fatal("the processes entered different collective calls: %s and %s (this process: "
                   "%s); every process must make the same collective Tessera calls (tess_run, "
                   "tess_array_create, tess_array_destroy, tess_entry_register, tess_finalize) "
                   "in the same order", coll_names[lo], coll_names[hi], coll_names[kind]);
}

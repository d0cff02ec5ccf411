/* reduce_shm.c — the allreduce of one fast-path round (reduce_fast.c) through shared memory
 * among the processes of a node, as MPI libraries' shared-memory collectives do. Each key has
 * one segment per node group (the processes of its communicator on one node, cut further into
 * virtual nodes by TESS_VNODE_SIZE): a result slot, then two slots per process, one for odd
 * rounds and one for even ones. A process writes its value for round r into its slot of r's
 * parity and publishes it with a release store of r; the others see it with an acquire load.
 * The round number sits right before the value, and only the value's used bytes are written
 * (the caller says how many): a value of up to 56 bytes travels between processes in the one
 * cache line that carries its round, which is what a round costs between cores.
 *
 * One group (every process of the communicator on one node): every process, once all the
 * group's slots carry r, combines them itself, always in group-rank order, so every process
 * computes the same bits. Several groups: the group's leader (group rank 0) combines its group
 * the same way, the leaders combine their groups' values by one MPI_Iallreduce on a
 * communicator of their own, and each leader publishes the result in its segment's result slot
 * (the value, then a release store of r), where the others of its group read it.
 *
 * Slot reuse is safe without further counters because rounds are joined in order: a process
 * writes round r + 2 into a slot only after its round r + 1 completed, which needs every
 * process of its group to have published r + 1 (one group), or its leader to have published the
 * result of r + 1 after seeing all r + 1 slots (several groups); either way every process
 * published r + 1 after it had finished reading round r. The result slot is rewritten for r + 1
 * only when every process of the group has published r + 1, so after it read the result of r.
 *
 * The segments are the GPU layer's plain shared segments (tess_gpu_shm_*: host memory, named,
 * cleaned up and reclaimed as the host backend's own), which every backend has; where one
 * cannot be made, the fast path stays on one MPI_Iallreduce over all processes.
 *
 * Threads: everything runs on PE 0 of the process (the agent), or on the main thread between
 * phases; one round of a key at a time. Setup and teardown are collective over the key's
 * communicator. */
#include "core_int.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#define RS_MAGIC 0x7368736472756465ull /* "edurdshs" */
#define RS_LINE  64

typedef struct rs_hdr {
    uint64_t magic;
    uint64_t nprocs, val_size, slot_size;
    uint8_t  pad[RS_LINE - 32];
} rs_hdr_t;

typedef struct rs_slot {
    _Atomic int64_t round; /* the round whose value follows: 0 (none yet), or >= 1 */
    uint8_t         val[]; /* at 8: its first 56 bytes share the round's cache line */
} rs_slot_t;

enum { RS_IDLE, RS_SLOTS, RS_COMBINED, RS_MPI, RS_RESULT };

struct tess_reduce_shm {
    MPI_Comm                 group;   /* this node group of the key's communicator */
    MPI_Comm                 leaders; /* group leaders (several groups, leaders only) */
    int                      grank, gsize, ngroups;
    tess_gpu_shm_h           seg;     /* leader: the segment it made */
    uint8_t                 *base;
    size_t                   size, slot_size;
    tess_reduce_shm_params_t p;
    int64_t                  round;   /* the round in flight (stage != RS_IDLE) */
    int                      stage, next;
    MPI_Request              req;
    uint8_t                 *acc, *mpi_out;
};

static rs_slot_t *rs_result(tess_reduce_shm_t *s)
{
    return (rs_slot_t *)(s->base + RS_LINE);
}

static rs_slot_t *rs_slot(tess_reduce_shm_t *s, int rank, int64_t round)
{
    size_t i = 2 * (size_t)rank + (size_t)(round & 1);
    return (rs_slot_t *)(s->base + RS_LINE + s->slot_size * (1 + i));
}

/* Make the group's segment (its leader) and map it everywhere else. Collective over group. */
static tess_status_t rs_map(tess_reduce_shm_t *s)
{
    tess_status_t st = TESS_OK;
    struct {
        tess_gpu_ipc_handle_t h;
        int32_t               ok;
    } msg = {0};
    size_t want = RS_LINE + s->slot_size * (1 + 2 * (size_t)s->gsize);
    if (s->grank == 0) {
        void *base = NULL;
        st = tess_gpu_shm_create(want, &s->seg, &base, &msg.h);
        if (st == TESS_OK) {
            rs_hdr_t *hdr  = base;
            hdr->nprocs    = (uint64_t)s->gsize;
            hdr->val_size  = s->p.val_size;
            hdr->slot_size = s->slot_size;
            hdr->magic     = RS_MAGIC;
            s->base        = base;
            s->size        = want;
            msg.ok         = 1;
        }
    }
    TESS_MPI_CHECK(MPI_Bcast(&msg, (int)sizeof(msg), MPI_BYTE, 0, s->group));
    if (s->grank == 0 || !msg.ok)
        return msg.ok ? TESS_OK : TESS_ERR_UNSUPPORTED;
    void  *base = NULL;
    size_t size = 0;
    st = tess_gpu_shm_open(&msg.h, &base, &size);
    if (st != TESS_OK)
        return st;
    const rs_hdr_t *hdr = base;
    if (size != want || hdr->magic != RS_MAGIC || hdr->nprocs != (uint64_t)s->gsize ||
        hdr->val_size != s->p.val_size || hdr->slot_size != s->slot_size) {
        tess_gpu_shm_close(base, size);
        return tess_error(TESS_ERR_CORRUPT, "reduction rounds: the shared segment of the node "
                          "group's leader has %zu bytes for %llu processes, expected %zu for %d",
                          size, (unsigned long long)hdr->nprocs, want, s->gsize);
    }
    s->base = base;
    s->size = size;
    return TESS_OK;
}

static void rs_free(tess_reduce_shm_t *s)
{
    if (s->base) {
        if (s->seg)
            tess_gpu_shm_destroy(s->seg);
        else
            tess_gpu_shm_close(s->base, s->size);
    }
    if (s->leaders != MPI_COMM_NULL)
        MPI_Comm_free(&s->leaders);
    if (s->group != MPI_COMM_NULL)
        MPI_Comm_free(&s->group);
    free(s->acc);
    free(s);
}

tess_status_t tess_reduce_shm_create(MPI_Comm comm, const tess_reduce_shm_params_t *p,
                                     tess_reduce_shm_t **s_p)
{
    *s_p = NULL;
    /* Every process decides the same: the backend and the parameters are the job's. */
    if (!tess_gpu_shm_available() || p->val_size == 0 || p->val_size > TESS_REDUCE_SHM_MAX)
        return TESS_OK;
    tess_reduce_shm_t *s   = tess_calloc(1, sizeof(*s), "a reduction's shared-memory state");
    uint8_t           *acc = tess_calloc(2, p->val_size, "a reduction's shared-memory buffers");
    if (!s || !acc)
        tess_fatal("out of memory for a reduction's shared-memory state");
    s->group = s->leaders = MPI_COMM_NULL;
    s->req       = MPI_REQUEST_NULL;
    s->p         = *p;
    s->acc       = acc;
    s->mpi_out   = acc + p->val_size;
    s->slot_size = TESS_ALIGN_UP(offsetof(rs_slot_t, val) + p->val_size, RS_LINE);

    int      rank;
    MPI_Comm node;
    MPI_Comm_rank(comm, &rank);
    TESS_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    TESS_MPI_CHECK(MPI_Comm_split(node, tess_rt.vnode, rank, &s->group));
    MPI_Comm_free(&node);
    MPI_Comm_rank(s->group, &s->grank);
    MPI_Comm_size(s->group, &s->gsize);
    MPI_Comm leaders;
    TESS_MPI_CHECK(MPI_Comm_split(comm, s->grank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders));
    if (s->grank == 0)
        MPI_Comm_size(leaders, &s->ngroups);
    TESS_MPI_CHECK(MPI_Bcast(&s->ngroups, 1, MPI_INT, 0, s->group));
    if (s->ngroups > 1)
        s->leaders = leaders;
    else if (leaders != MPI_COMM_NULL)
        MPI_Comm_free(&leaders);

    /* The segment is made and opened by all or none of a group (rs_map's broadcast); every
     * process of the communicator then agrees, so that all use it or none. */
    tess_status_t st = rs_map(s);
    if (st != TESS_OK && st != TESS_ERR_UNSUPPORTED)
        tess_warn("reduction rounds: no shared memory (%s); one MPI_Iallreduce per round",
                  tess_status_string(st));
    int ok = st == TESS_OK, all = 0;
    TESS_MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm));
    if (!all) {
        rs_free(s);
        return TESS_OK;
    }
    *s_p = s;
    return TESS_OK;
}

int tess_reduce_shm_groups(const tess_reduce_shm_t *s)
{
    return s->ngroups;
}

int tess_reduce_shm_local(const tess_reduce_shm_t *s)
{
    return s && (s->stage == RS_SLOTS || s->stage == RS_RESULT);
}

int tess_reduce_shm_peek(const tess_reduce_shm_t *s, int64_t round)
{
    for (int q = 0; q < s->gsize; q++)
        if (q != s->grank &&
            atomic_load_explicit(&rs_slot((tess_reduce_shm_t *)s, q, round)->round,
                                 memory_order_relaxed) >= round)
            return 1;
    return 0;
}

void tess_reduce_shm_post(tess_reduce_shm_t *s, int64_t round, const void *val, size_t len)
{
    if (s->stage != RS_IDLE || round <= 0 || round <= s->round)
        tess_fatal("internal: shared-memory reduction round %lld posted after round %lld "
                   "(stage %d)", (long long)round, (long long)s->round, s->stage);
    rs_slot_t *me = rs_slot(s, s->grank, round);
    /* The bytes past len stay as an earlier round left them: the readers ignore them. */
    memcpy(me->val, val, TESS_MIN(len, s->p.val_size));
    atomic_store_explicit(&me->round, round, memory_order_release);
    s->round = round;
    s->next  = 0;
    s->stage = s->ngroups > 1 && s->grank != 0 ? RS_RESULT : RS_SLOTS;
}

int tess_reduce_shm_test(tess_reduce_shm_t *s, void *out, int mpi)
{
    switch (s->stage) {
    case RS_SLOTS:
        for (; s->next < s->gsize; s->next++) {
            int64_t r = atomic_load_explicit(&rs_slot(s, s->next, s->round)->round,
                                             memory_order_acquire);
            if (r != s->round) {
                if (tess_unlikely(r > s->round))
                    tess_fatal("internal: process %d of the node group published reduction "
                               "round %lld while this one waits for %lld", s->next,
                               (long long)r, (long long)s->round);
                return 0;
            }
        }
        /* Group-rank order, the same on every process: the same bits everywhere. One group:
         * straight into out. */
        uint8_t *acc = s->ngroups <= 1 ? out : s->acc;
        memcpy(acc, rs_slot(s, 0, s->round)->val, s->p.val_size);
        for (int q = 1; q < s->gsize; q++)
            s->p.combine(rs_slot(s, q, s->round)->val, acc);
        if (s->ngroups <= 1) {
            s->stage = RS_IDLE;
            return 1;
        }
        s->stage = RS_COMBINED;
        /* fall through */
    case RS_COMBINED:
        if (!mpi)
            return 0;
        TESS_MPI_CHECK(MPI_Iallreduce(s->acc, s->mpi_out, 1, s->p.type, s->p.op, s->leaders,
                                      &s->req));
        s->stage = RS_MPI;
        /* fall through */
    case RS_MPI: {
        int flag = 0;
        if (!mpi)
            return 0;
        TESS_MPI_CHECK(MPI_Test(&s->req, &flag, MPI_STATUS_IGNORE));
        if (!flag)
            return 0;
        rs_slot_t *res = rs_result(s);
        memcpy(res->val, s->mpi_out, s->p.val_size);
        atomic_store_explicit(&res->round, s->round, memory_order_release);
        memcpy(out, s->mpi_out, s->p.val_size);
        s->stage = RS_IDLE;
        return 1;
    }
    case RS_RESULT: {
        rs_slot_t *res = rs_result(s);
        if (atomic_load_explicit(&res->round, memory_order_acquire) != s->round)
            return 0;
        memcpy(out, res->val, s->p.val_size);
        s->stage = RS_IDLE;
        return 1;
    }
    default:
        return 0;
    }
}

void tess_reduce_shm_wait(tess_reduce_shm_t *s, void *out)
{
    while (s->stage != RS_IDLE && !tess_reduce_shm_test(s, out, 1))
        sched_yield(); /* the others may need this core to get here */
}

void tess_reduce_shm_destroy(tess_reduce_shm_t *s)
{
    if (!s)
        return;
    if (s->stage != RS_IDLE)
        tess_fatal("internal: a shared-memory reduction freed with round %lld in flight",
                   (long long)s->round);
    /* A leader's segment may go first: the others' mappings stay valid until they close. */
    rs_free(s);
}

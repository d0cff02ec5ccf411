/* reduce_fast.c — the fast path of reductions whose result goes back to every element
 * (TESS_REDUCE=auto|mpi). Instead of up the tree to process 0 and back down, each round is one
 * allreduce on a communicator of the key's own (so rounds of different arrays never
 * interleave in different orders), of a small struct: the values with the contribution count,
 * the lowest and highest tag, the parameters and the callback, combined by a user op that
 * skips empty entries. With TESS_REDUCE=auto the allreduce goes through shared memory among
 * the processes of a node and by MPI_Iallreduce among node leaders only (reduce_shm.c);
 * otherwise (TESS_REDUCE=mpi, or no shared segments) it is one MPI_Iallreduce over all
 * processes. Every process gets the round back and hands it up (round_fn), on PE 0, from the
 * pass that sees it; the layer above runs a complete round on its own elements there and then
 * (their contributions may join the next round from inside round_fn) and sends its partial of
 * an incomplete one to process 0 (tess_core_reduce_submit_direct).
 *
 * Speed: PE 0 looks at shared-memory rounds on every pass, busy or idle, before and without
 * any MPI call (tess_agent_progress); while a round with a partial waits on shared memory only,
 * it polls MPI as when busy, and where PEs outnumber cores it yields its core on every idle
 * pass (pe.c). A join from PE 0 allocates nothing.
 *
 * Rounds are matched by order alone: every process joins round r of a key exactly once, after
 * round r - 1 completed there (the caller's rule), with a partial or empty. A process may join
 * empty while another joins with data, or with partials of two different tags (elements that
 * moved): the round then comes back incomplete, never wrong (its count is short, or its tags
 * differ), and nothing in it is lost because every process that put a partial in keeps it until
 * the round is back. Rounds that come back with no contributions at all (every process joined
 * empty, e.g. after the array's last reduction) make the next empty join wait, 20 µs doubling
 * to 1 ms, so that an idle array does not spin MPI; such a join is posted at once when a local
 * partial waits behind it (tess_core_reduce_hurry) or another process of the node group posted
 * that round (tess_reduce_shm_peek). At the array's end every process joins the
 * same number of rounds (empty), so no collective is left pending.
 *
 * Threads: tess_core_reduce_join and _hold from any PE; everything else on PE 0 (the agent) or
 * the main thread between phases. */
#include "core_int.h"

#include <stdio.h>
#include <stdlib.h>

#define RF_DATA_MAX       32
#define RF_CB_MAX         16
#define RF_BACKOFF_MIN_NS (20ull * 1000)
#define RF_BACKOFF_MAX_NS (1000ull * 1000)
/* How long PE 0 may sleep while a round with a partial is in flight: MPI cannot wake it, and
 * MPI_Iallreduce progresses only inside MPI_Test here. */
#define RF_POLL_NS        (20ll * 1000)
/* Chained rounds: the round function often joins the next round at once, and the other
 * processes post theirs about then. PE 0 looks at it up to RF_SPIN_LOOKS times before it goes
 * on with its pass (not where PEs outnumber cores: the others may need this one), and completes
 * at most RF_CHAIN_MAX rounds of a key in one call, as a busy pass polls the network only every
 * 8 passes. */
#define RF_SPIN_LOOKS     64
#define RF_CHAIN_MAX      8

/* A round's record. Through shared memory only its used bytes travel (rf_val_len): with a
 * callback of up to 16 bytes and a value of up to 8 they are the 56 that share a cache line
 * with the round number (reduce_shm.c). The number of contributions expected is the key's,
 * the same on every process, and stays here. */
typedef struct rf_val {
    int64_t  n;
    uint64_t tag_min, tag_max;
    uint8_t  count, type, op, mixed; /* mixed: entries with other parameters were combined */
    uint8_t  cb_len, pad[3];
    uint8_t  cb[RF_CB_MAX];
    uint8_t  data[RF_DATA_MAX];
} rf_val_t;

typedef struct rf_key {
    struct rf_key *next;
    uint32_t       key;
    MPI_Comm       comm;
    MPI_Request    req;
    tess_reduce_shm_t *shm;    /* rounds through shared memory (NULL: MPI_Iallreduce) */
    int            open;       /* a round is posted and not back */
    rf_val_t       send;       /* the round joined (MPI, or a deferred join) */
    rf_val_t       recv[2];    /* round r back in recv[r & 1]: the round function may join
                                * r + 1 while it reads r */
    int64_t        joined;     /* rounds joined here (posted, or deferred) */
    int64_t        expected;   /* contributions a complete round holds */
    int            deferred;   /* an empty join waiting for post_ns */
    int            counted;    /* the round in flight carries a partial */
    uint64_t       post_ns, backoff_ns;
    uint64_t       t_join, t_done; /* when the open round was joined, the last one came back */
} rf_key_t;

typedef struct rf_join {
    uint32_t key;
    int64_t  expected;
    rf_val_t v;
} rf_join_t;

static struct {
    rf_key_t              *keys;
    int                    on, shm, active;
    _Atomic int            hurry; /* a partial waits behind a deferred empty join */
    MPI_Datatype           type;
    MPI_Op                 op;
    tess_reduce_round_fn_t round_fn;
    /* Time spent, over rounds with a partial (TESS_REDUCE_TIMES=1 prints it at the end):
     * in MPI (joined to back), and here (the previous round back to this one joined). */
    int                    times;
    uint64_t               mpi_ns, local_ns, rounds, tests;
} rf;

static int rf_params_equal(const rf_val_t *a, const rf_val_t *b)
{
    return a->count == b->count && a->type == b->type && a->op == b->op &&
           a->cb_len == b->cb_len && !memcmp(a->cb, b->cb, a->cb_len);
}

/* The bytes of v that mean something: the header, and the data of a partial. */
static inline size_t rf_val_len(const rf_val_t *v)
{
    return offsetof(rf_val_t, data) +
           (v->n ? (size_t)v->count * tess_dtype_size((tess_dtype_t)v->type) : 0);
}

/* The user op: commutative, associative; an entry with n == 0 is the identity. It reads the
 * bytes of rf_val_len only. */
static void rf_op_fn(void *in_v, void *inout_v, int *len, MPI_Datatype *dt)
{
    (void)dt;
    rf_val_t *in = in_v, *io = inout_v;
    for (int i = 0; i < *len; i++) {
        if (in[i].n == 0)
            continue;
        if (io[i].n == 0) {
            memcpy(&io[i], &in[i], rf_val_len(&in[i]));
            continue;
        }
        io[i].mixed |= in[i].mixed;
        if (!rf_params_equal(&io[i], &in[i]) || io[i].tag_min != in[i].tag_min ||
            io[i].tag_max != in[i].tag_max)
            io[i].mixed = 1;
        else
            tess_reduce_apply((tess_op_t)in[i].op, (tess_dtype_t)in[i].type, io[i].data,
                              in[i].data, in[i].count);
        io[i].n += in[i].n;
        io[i].tag_min = TESS_MIN(io[i].tag_min, in[i].tag_min);
        io[i].tag_max = TESS_MAX(io[i].tag_max, in[i].tag_max);
    }
}

static rf_key_t *rf_key_find(uint32_t key)
{
    for (rf_key_t *k = rf.keys; k; k = k->next)
        if (k->key == key)
            return k;
    return NULL;
}

int tess_core_reduce_fast_fits(int count, tess_dtype_t type, size_t cb_len)
{
    return rf.on && count >= 1 && (size_t)count * tess_dtype_size(type) <= RF_DATA_MAX &&
           cb_len <= RF_CB_MAX;
}

static void rf_combine(const void *in, void *inout)
{
    int one = 1;
    rf_op_fn((void *)in, inout, &one, NULL);
}

/* Post round k->joined with v (k->send, or the caller's record through shared memory, which
 * copies it at once). */
static void rf_post(rf_key_t *k, const rf_val_t *v)
{
    if (k->shm) {
        tess_reduce_shm_post(k->shm, k->joined, v, rf_val_len(v));
    } else {
        rf_val_t *back = &k->recv[k->joined & 1];
        *back          = (rf_val_t){0};
        if (v != &k->send)
            k->send = *v;
        TESS_MPI_CHECK(MPI_Iallreduce(&k->send, back, 1, rf.type, rf.op, k->comm, &k->req));
    }
    k->open = 1;
    rf.active++;
}

/* Whether the open round is back (in k->recv); without mpi, only as far as shared memory takes
 * it (no MPI call). */
static int rf_test(rf_key_t *k, int mpi)
{
    int flag = 0;
    rf.tests++;
    if (k->shm)
        flag = tess_reduce_shm_test(k->shm, &k->recv[k->joined & 1], mpi);
    else if (mpi)
        TESS_MPI_CHECK(MPI_Test(&k->req, &flag, MPI_STATUS_IGNORE));
    if (flag)
        k->open = 0;
    return flag;
}

/* Until the open round is back (between phases: everyone is here). */
static void rf_wait(rf_key_t *k)
{
    if (k->shm)
        tess_reduce_shm_wait(k->shm, &k->recv[k->joined & 1]);
    else
        TESS_MPI_CHECK(MPI_Wait(&k->req, MPI_STATUS_IGNORE));
    k->open = 0;
}

/* PE 0: join the next round of key with v, of a reduction of `expected` contributions. */
static void rf_join(uint32_t key, const rf_val_t *v, int64_t expected)
{
    rf_key_t *k = rf_key_find(key);
    if (!k || k->open || k->deferred)
        tess_fatal("internal: round %lld of reduction key %u joined while one is open",
                   k ? (long long)k->joined : -1ll, key);
    k->joined++;
    k->expected = expected;
    k->counted  = v->n > 0;
    if (rf.times) {
        k->t_join = tess_time_ns();
        if (k->counted && k->t_done) {
            rf.local_ns += k->t_join - k->t_done;
            rf.rounds++;
        }
    }
    if (k->counted) {
        tess_count_sent(tess_core.pes[0], 1);
        tess_count_add(&tess_core.pes[0]->red_held, 1);
    }
    if (v->n == 0 && k->backoff_ns) {
        k->send     = *v;
        k->deferred = 1;
        k->post_ns  = tess_time_ns() + k->backoff_ns;
        rf.active++;
        return;
    }
    rf_post(k, v);
}

/* Agent function: a join handed over by another PE. */
static void rf_join_agent(void *arg)
{
    rf_join_t *j = arg;
    rf_join(j->key, &j->v, j->expected);
    free(j);
}

tess_status_t tess_core_reduce_join(uint32_t key, uint64_t tag, int64_t ncontrib,
                                    int64_t global_expected, const void *data, int count,
                                    tess_dtype_t type, tess_op_t op, const void *cb,
                                    size_t cb_len)
{
    if (!tess_core_reduce_fast_fits(count, type, cb_len))
        return tess_error(TESS_ERR_INVALID, "internal: a reduction of %d x %s does not fit a "
                          "round", count, tess_dtype_name(type));
    /* Field by field: only the used bytes (rf_val_len) are read. */
    rf_val_t v;
    v.n       = ncontrib;
    v.tag_min = v.tag_max = tag;
    v.count   = (uint8_t)count;
    v.type    = (uint8_t)type;
    v.op      = (uint8_t)op;
    v.mixed   = 0;
    v.cb_len  = (uint8_t)cb_len;
    if (ncontrib > 0) {
        memcpy(v.data, data, (size_t)count * tess_dtype_size(type));
        memcpy(v.cb, cb, cb_len);
    }
    /* On PE 0 the agent is this thread (and without a PE, this is the main thread between
     * phases): join at once (one round per key is open at a time, so nothing queued for the
     * agent can be an earlier join of this key). */
    tess_pe_t *self = tess_core_pe_self();
    if (!self || self->local == 0) {
        rf_join(key, &v, global_expected);
        return TESS_OK;
    }
    rf_join_t *j = tess_malloc(sizeof(*j), "a reduction round");
    if (!j)
        return TESS_ERR_NO_MEMORY;
    j->key           = key;
    j->expected      = global_expected;
    j->v             = v;
    tess_status_t st = tess_core_agent_post(rf_join_agent, j);
    if (st != TESS_OK)
        free(j);
    return st;
}

void tess_core_reduce_hurry(void)
{
    if (atomic_exchange_explicit(&rf.hurry, 1, memory_order_relaxed))
        return;
    tess_pe_t *self = tess_core_pe_self(), *pe0 = tess_core.pes[0];
    if (self != pe0 && atomic_load_explicit(&pe0->sleeping, memory_order_seq_cst))
        tess_pe_wake(pe0);
}

uint64_t tess_reduce_fast_pending(void)
{
    uint64_t held = 0, released = 0;
    for (int i = 0; i < tess_core.npes; i++) {
        released += atomic_load_explicit(&tess_core.pes[i]->red_released, memory_order_acquire);
        held     += atomic_load_explicit(&tess_core.pes[i]->red_held, memory_order_acquire);
    }
    return held > released ? held - released : 0;
}

void tess_core_reduce_hold(int delta)
{
    tess_pe_t *self = tess_core_pe_self();
    tess_pe_t *pe   = self ? self : tess_core.pes[0];
    if (delta > 0) {
        tess_count_sent(pe, (uint64_t)delta);
        tess_count_add(&pe->red_held, (uint64_t)delta);
    } else {
        tess_count_processed(pe, (uint64_t)-delta);
        tess_count_add(&pe->red_released, (uint64_t)-delta);
    }
}

static void rf_done(tess_pe_t *pe0, rf_key_t *k)
{
    rf.active--;
    if (rf.times) {
        k->t_done = tess_time_ns();
        if (k->counted)
            rf.mpi_ns += k->t_done - k->t_join;
        else
            k->t_done = 0;
    }
    if (k->counted) {
        tess_count_processed(pe0, 1);
        tess_count_add(&pe0->red_released, 1);
    }
    k->counted = 0;
    /* The round function may join the next round, which comes back in the other buffer. */
    rf_val_t *v = &k->recv[k->joined & 1];
    if (v->n == 0)
        k->backoff_ns = k->backoff_ns ? TESS_MIN(2 * k->backoff_ns, RF_BACKOFF_MAX_NS)
                                      : RF_BACKOFF_MIN_NS;
    else
        k->backoff_ns = 0;
    tess_reduce_round_t r = {
        .ncontrib = v->n, .expected = k->expected, .tag = v->tag_min, .tag_max = v->tag_max,
        .complete = v->n > 0 && v->n == k->expected && !v->mixed && v->tag_min == v->tag_max,
        .count = v->count, .type = (tess_dtype_t)v->type, .op = (tess_op_t)v->op,
        .data = v->data, .cb = v->cb, .cb_len = v->cb_len,
        .size = v->n ? (size_t)v->count * tess_dtype_size((tess_dtype_t)v->type) : 0};
    /* Logical results are 1 or 0 even when one contribution was never combined (x && x). */
    if (r.complete && (r.op == TESS_LAND || r.op == TESS_LOR))
        tess_reduce_apply(r.op, r.type, v->data, v->data, v->count);
    if (rf.times > 1)
        fprintf(stderr, "[%d] round %lld: n %lld/%lld tags %llu..%llu mixed %d complete %d\n",
                tess_rt.rank, (long long)k->joined, (long long)v->n, (long long)k->expected,
                (unsigned long long)v->tag_min, (unsigned long long)v->tag_max, v->mixed,
                r.complete);
    if (!rf.round_fn)
        tess_fatal("internal: no reduction round function");
    rf.round_fn(k->key, &r);
}

/* Whether the round just joined (with a partial, through shared memory) came back within a few
 * looks, while nothing waits in PE 0's queue. */
static int rf_look(tess_pe_t *pe0, rf_key_t *k)
{
    if (!k->open || !k->counted || !tess_reduce_shm_local(k->shm) || tess_pe_oversubscribed())
        return 0;
    for (int i = 0; i < RF_SPIN_LOOKS; i++) {
        if (rf_test(k, 0))
            return 1;
        if (!tess_mpsc_empty(&pe0->queue))
            return 0;
        tess_cpu_relax();
    }
    return 0;
}

unsigned tess_reduce_fast_progress(tess_pe_t *pe0, int mpi)
{
    if (!rf.active)
        return 0;
    unsigned n     = 0;
    uint64_t now   = 0;
    int      hurry = -1;
    for (rf_key_t *k = rf.keys; k; k = k->next) {
        if (k->deferred) {
            /* Posted when its wait is over, when this process has a partial for the next round
             * (hurry), or when another process of the node group posted this round. */
            if (hurry < 0)
                hurry = atomic_exchange_explicit(&rf.hurry, 0, memory_order_relaxed);
            if (!now && !hurry)
                now = tess_time_ns();
            if (hurry || now >= k->post_ns || (k->shm && tess_reduce_shm_peek(k->shm, k->joined))) {
                k->deferred = 0;
                rf.active--;
                rf_post(k, &k->send);
            }
            continue;
        }
        if (k->open && rf_test(k, mpi)) {
            rf_done(pe0, k);
            n++;
            for (int c = 1; c < RF_CHAIN_MAX && rf_look(pe0, k); c++) {
                rf_done(pe0, k);
                n++;
            }
        }
    }
    return n;
}

int tess_reduce_fast_shm_only(void)
{
    int counted = 0;
    for (rf_key_t *k = rf.keys; k; k = k->next) {
        if (k->open && !tess_reduce_shm_local(k->shm))
            return 0;
        counted |= k->counted && k->open;
    }
    return counted;
}

int64_t tess_reduce_fast_poll_ns(void)
{
    if (!rf.active)
        return -1;
    int64_t  ns  = (int64_t)tess_cfg.mpi_poll_us * 1000;
    uint64_t now = 0;
    for (rf_key_t *k = rf.keys; k; k = k->next) {
        if (k->counted)
            return RF_POLL_NS;
        if (k->deferred) {
            if (!now)
                now = tess_time_ns();
            ns = TESS_MIN(ns, k->post_ns > now ? (int64_t)(k->post_ns - now) : 0);
        }
    }
    return ns;
}

void tess_reduce_fast_members(uint32_t key)
{
    if (!rf.on)
        return;
    tess_reduce_fast_forget(key);
    rf_key_t *k = tess_calloc(1, sizeof(*k), "a reduction key");
    if (!k)
        tess_fatal("out of memory for the reductions of %u", key);
    TESS_MPI_CHECK(MPI_Comm_dup(tess_rt.comm, &k->comm));
    if (rf.shm) {
        tess_reduce_shm_params_t p = {.val_size = sizeof(rf_val_t), .combine = rf_combine,
                                      .type = rf.type, .op = rf.op};
        tess_status_t st = tess_reduce_shm_create(k->comm, &p, &k->shm);
        if (st != TESS_OK)
            tess_fatal("the reductions of %u: %s", key, tess_status_string(st));
    }
    k->key  = key;
    k->req  = MPI_REQUEST_NULL;
    k->next = rf.keys;
    rf.keys = k;
}

void tess_reduce_fast_forget(uint32_t key)
{
    for (rf_key_t **pp = &rf.keys; *pp; pp = &(*pp)->next) {
        rf_key_t *k = *pp;
        if (k->key != key)
            continue;
        /* Every process joins as many rounds as the one that joined most, so that none is left
         * pending; what they carry is dropped (the array is gone). */
        int64_t most = 0;
        TESS_MPI_CHECK(MPI_Allreduce(&k->joined, &most, 1, MPI_INT64_T, MPI_MAX, tess_rt.comm));
        if (k->deferred) {
            k->deferred = 0;
            rf.active--;
            rf_post(k, &k->send);
        }
        if (k->open) {
            rf_wait(k);
            rf.active--;
        }
        while (k->joined < most) { /* non-blocking MPI: blocking calls never match */
            k->joined++;
            k->send = (rf_val_t){0};
            rf_post(k, &k->send);
            rf_wait(k);
            rf.active--;
        }
        tess_reduce_shm_destroy(k->shm);
        MPI_Comm_free(&k->comm);
        *pp = k->next;
        free(k);
        return;
    }
}

void tess_core_reduce_set_round_fn(tess_reduce_round_fn_t fn)
{
    rf.round_fn = fn;
}

tess_status_t tess_reduce_fast_init(void)
{
    rf.keys   = NULL;
    rf.active = 0;
    /* auto: the fast path through shared memory, under every backend (the rounds touch host
     * memory only; run under CUDA on the H200 with the gpu, minimd and lulesh lists). */
    int auto_fast = !strcmp(tess_cfg.reduce, "auto");
    rf.on     = auto_fast || !strcmp(tess_cfg.reduce, "shm") || !strcmp(tess_cfg.reduce, "mpi");
    rf.shm    = auto_fast || !strcmp(tess_cfg.reduce, "shm");
    rf.times  = tess_cfg.reduce_times;
    rf.mpi_ns = rf.local_ns = rf.rounds = rf.tests = 0;
    if (!rf.on)
        return TESS_OK;
    if (MPI_Type_contiguous((int)sizeof(rf_val_t), MPI_BYTE, &rf.type) != MPI_SUCCESS ||
        MPI_Type_commit(&rf.type) != MPI_SUCCESS)
        return tess_error(TESS_ERR_MPI, "cannot make the reduction round's MPI type");
    if (MPI_Op_create(rf_op_fn, 1, &rf.op) != MPI_SUCCESS) {
        MPI_Type_free(&rf.type);
        return tess_error(TESS_ERR_MPI, "cannot make the reduction round's MPI op");
    }
    return TESS_OK;
}

void tess_reduce_fast_fini(void)
{
    if (rf.times && rf.rounds)
        fprintf(stderr, "tessera: process %d: %llu reduction rounds: %.2f us in the allreduce "
                "(joined to back, %.1f tests each), %.2f us in the process (back to the next "
                "joined)\n", tess_rt.rank, (unsigned long long)rf.rounds,
                rf.mpi_ns / 1e3 / (double)rf.rounds, (double)rf.tests / (double)rf.rounds,
                rf.local_ns / 1e3 / (double)rf.rounds);
    while (rf.keys)
        tess_reduce_fast_forget(rf.keys->key);
    if (rf.on) {
        MPI_Op_free(&rf.op);
        MPI_Type_free(&rf.type);
        rf.on = 0;
    }
}

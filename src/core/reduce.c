/* reduce.c — reductions across processes. A layer above combines the contributions of a
 * process and submits the partial; PE 0 (the agent) combines it with the partials of its
 * children in a k-ary spanning tree of processes (k = tree_arity, rooted at process 0) and
 * sends one combined partial to its parent with MPI (MPI_Isend; received with
 * MPI_Improbe/Mrecv). Process 0 adds up the contribution counts and hands the result on once
 * they reach the number of contributors. Counting contributions (not processes) keeps this
 * right when elements migrate: a process that gained or lost elements just submits more or
 * fewer partials.
 *
 * When a process forwards: a slot waits until every member (its own process and each child)
 * that is active for the key has sent at least one partial for the tag. The members whose
 * subtree holds elements when the array is created start active (tess_core_reduce_members);
 * one that has not sent when a slot has waited long enough (its subtree lost its elements by
 * migration, say) is marked inactive and the slot goes on without it; a member that sends again is
 * active again. Partials for a tag this process already forwarded (late ones, after a
 * migration) go on at once. A waiting slot counts as a message not yet processed, so the
 * phase cannot end while one waits. The fan-in (messages from children combined into one slot)
 * is counted; its maximum is what tess_tree_get_stats reports. */
#include "core_int.h"

#include <stdio.h>
#include <stdlib.h>

#define RED_TAG_PARTIAL 7
#define RED_TAG_DIRECT  8 /* a partial to process 0 past the tree (the fast path's) */
#define RED_BUCKETS     256
#define RED_CB_MAX      64
/* A slot waits RED_WAIT_NS x (1 + the height of this process in the tree) before its silent
 * members are taken inactive: a parent waits longer than its children, so that a child that
 * itself waits for an empty subtree is not taken for one. */
#define RED_WAIT_NS     (1000ull * 1000 * 1000)

typedef struct red_params {
    int32_t  count, type, op;
    uint32_t cb_len;
    uint8_t  cb[RED_CB_MAX];
} red_params_t;

typedef struct red_slot {
    struct red_slot *next;
    uint32_t         key;
    uint64_t         tag;
    int64_t          ncontrib, global_expected;
    red_params_t     p;
    void            *data;
    uint64_t         t0;     /* when this process first saw the tag (tree slots) */
    int              fanin;  /* messages from children combined here */
    int              from;   /* the process whose partial opened the slot (for messages) */
    uint8_t         *heard;  /* tree slots: [0] self, [1 + i] child i */
} red_slot_t;

/* Per key (array): which tree members are active, and the highest tag forwarded. */
typedef struct red_key {
    struct red_key *next;
    uint32_t        key;
    int             forwarded_any;
    uint64_t        forwarded_max;
    uint8_t        *active; /* [0] self, [1 + i] child i */
} red_key_t;

/* A partial on the wire. */
typedef struct red_wire {
    uint32_t     key, pad;
    uint64_t     tag;
    int64_t      ncontrib, global_expected;
    red_params_t p;
    /* count values follow */
} red_wire_t;

static struct {
    red_slot_t             *root[RED_BUCKETS]; /* partials being combined (PE 0, the agent) */
    red_key_t              *keys;
    int                     parent, nchild, child0; /* tree: parent (-1 at the root), children */
    int                     waiting;                /* slots waiting for members */
    uint64_t                wait_ns;                /* before silent members are inactive */
    int64_t                 fanin_max, late, combined;
    tess_reduce_result_fn_t result_fn;
    tess_reduce_name_fn_t   name_fn;
} rd;

/* "array 'A'" for messages (the layer above names its keys). */
static const char *red_key_text(uint32_t key, char *buf, size_t len)
{
    const char *name = rd.name_fn ? rd.name_fn(key) : NULL;
    if (name)
        snprintf(buf, len, "array '%s'", name);
    else
        snprintf(buf, len, "array %u", key);
    return buf;
}

static inline size_t red_bucket(uint32_t key, uint64_t tag)
{
    return tess_hash64(((uint64_t)key << 40) ^ tag) % RED_BUCKETS;
}

static red_slot_t **red_find(red_slot_t **table, uint32_t key, uint64_t tag)
{
    red_slot_t **pp = &table[red_bucket(key, tag)];
    while (*pp && ((*pp)->key != key || (*pp)->tag != tag))
        pp = &(*pp)->next;
    return pp;
}

static red_slot_t *red_slot_new(uint32_t key, uint64_t tag, int64_t global_expected,
                                const red_params_t *p, const void *data)
{
    size_t      size = (size_t)p->count * tess_dtype_size(p->type);
    red_slot_t *s    = tess_calloc(1, sizeof(*s), "a reduction");
    if (!s)
        return NULL;
    s->data = tess_malloc(size, "reduction data");
    if (!s->data) {
        free(s);
        return NULL;
    }
    s->key             = key;
    s->tag             = tag;
    s->global_expected = global_expected;
    s->p               = *p;
    memcpy(s->data, data, size);
    return s;
}

static void red_slot_free(red_slot_t *s)
{
    free(s->heard);
    free(s->data);
    free(s);
}

static int red_params_differ(const red_params_t *a, const red_params_t *b)
{
    return a->count != b->count || a->type != b->type || a->op != b->op ||
           a->cb_len != b->cb_len || memcmp(a->cb, b->cb, a->cb_len);
}

static const char *red_params_text(const red_params_t *p, char *buf, size_t len)
{
    snprintf(buf, len, "%d x %s, %s", p->count, tess_dtype_name(p->type), tess_op_name(p->op));
    return buf;
}

/* Contributions whose parameters differ: name both sides, each with the process its partial
 * came from (a partial from a child carries that child's subtree) and how many elements it
 * stands for, the newcomer first. Never "process N contributed X, others Y": the slot may have
 * been opened by the odd process itself. */
_Noreturn static void red_mismatch(uint32_t key, uint64_t tag, const red_slot_t *s,
                                   const red_params_t *p, int64_t ncontrib, int64_t expected,
                                   int from)
{
    char a[96], b[96], k[80];
    int  arity = tess_cfg.tree_arity;
#define RED_BELOW(r) ((r) != tess_rt.rank && (int64_t)(r) * arity + 1 < tess_rt.size \
                          ? " and the processes below it in the tree" : "")
    if (s->global_expected != expected && !red_params_differ(&s->p, p))
        tess_fatal("reduction tag %llu of %s: process %d%s counts %lld elements in the array, "
                   "process %d%s %lld (internal: the processes disagree about the array)",
                   (unsigned long long)tag, red_key_text(key, k, sizeof(k)), from,
                   RED_BELOW(from), (long long)expected, s->from, RED_BELOW(s->from),
                   (long long)s->global_expected);
    tess_fatal("reduction tag %llu of %s: the contributions differ: %s from process %d%s (%lld "
               "element%s), %s from process %d%s (%lld element%s); every element must "
               "contribute the same count, type, op and callback",
               (unsigned long long)tag, red_key_text(key, k, sizeof(k)),
               red_params_text(p, a, sizeof(a)), from, RED_BELOW(from), (long long)ncontrib,
               ncontrib == 1 ? "" : "s", red_params_text(&s->p, b, sizeof(b)), s->from,
               RED_BELOW(s->from), (long long)s->ncontrib, s->ncontrib == 1 ? "" : "s");
#undef RED_BELOW
}

/* ---- the root: process 0 ------------------------------------------------------------------ */

static void red_root_combine(uint32_t key, uint64_t tag, int64_t ncontrib, int64_t global_expected,
                             const red_params_t *p, const void *data, int from, int member)
{
    red_slot_t **pp = red_find(rd.root, key, tag);
    red_slot_t  *s  = *pp;
    if (!s) {
        s = red_slot_new(key, tag, global_expected, p, data);
        if (!s)
            tess_fatal("out of memory combining reduction %u:%llu", key, (unsigned long long)tag);
        s->from = from;
        *pp     = s;
    } else {
        if (red_params_differ(&s->p, p) || s->global_expected != global_expected)
            red_mismatch(key, tag, s, p, ncontrib, global_expected, from);
        tess_reduce_apply(p->op, p->type, s->data, data, p->count);
    }
    s->ncontrib += ncontrib;
    s->fanin += member > 0;
    char k[80];
    if (s->ncontrib > s->global_expected)
        tess_fatal("reduction tag %llu of %s: %lld contributions for %lld elements",
                   (unsigned long long)tag, red_key_text(key, k, sizeof(k)), (long long)s->ncontrib,
                   (long long)s->global_expected);
    if (s->ncontrib == s->global_expected) {
        *pp = s->next;
        if (!rd.result_fn)
            tess_fatal("internal: no reduction result function");
        rd.fanin_max = TESS_MAX(rd.fanin_max, (int64_t)s->fanin);
        rd.combined++;
        /* Logical results are 1 or 0 even when one contribution was never combined with
         * another (x && x is x != 0). */
        if (s->p.op == TESS_LAND || s->p.op == TESS_LOR)
            tess_reduce_apply(s->p.op, s->p.type, s->data, s->data, s->p.count);
        rd.result_fn(key, tag, s->p.cb, s->p.cb_len, s->data,
                     (size_t)s->p.count * tess_dtype_size(s->p.type));
        red_slot_free(s);
    }
}

/* ---- inner processes of the tree ---------------------------------------------------------- */

static red_key_t *red_key_get(uint32_t key)
{
    for (red_key_t *k = rd.keys; k; k = k->next)
        if (k->key == key)
            return k;
    red_key_t *k = tess_calloc(1, sizeof(*k), "a reduction key");
    if (k && !(k->active = tess_malloc((size_t)rd.nchild + 1, "reduction tree members"))) {
        free(k);
        k = NULL;
    }
    if (!k)
        tess_fatal("out of memory for the reductions of %u", key);
    memset(k->active, 1, (size_t)rd.nchild + 1);
    k->key  = key;
    k->next = rd.keys;
    rd.keys = k;
    return k;
}

static void red_partial_sent(void *arg, MPI_Status *status)
{
    (void)status;
    free(arg);
}

/* Send a partial to the parent (agent). */
static void red_send_to(int dest, int mpi_tag, uint32_t key, uint64_t tag, int64_t ncontrib,
                        int64_t global_expected, const red_params_t *p, const void *data)
{
    size_t      dsize = (size_t)p->count * tess_dtype_size(p->type);
    red_wire_t *w     = tess_malloc(sizeof(*w) + dsize, "a reduction partial");
    if (!w)
        tess_fatal("out of memory sending a reduction partial");
    *w = (red_wire_t){.key = key, .tag = tag, .ncontrib = ncontrib,
                      .global_expected = global_expected, .p = *p};
    memcpy(w + 1, data, dsize);
    MPI_Request req;
    TESS_MPI_CHECK(MPI_Isend(w, (int)(sizeof(*w) + dsize), MPI_BYTE, dest, mpi_tag,
                             tess_core.agent_comm, &req));
    tess_count_sent(tess_core.pes[0], 1);
    if (tess_core_agent_watch(req, red_partial_sent, w) != TESS_OK)
        tess_fatal("cannot watch a reduction send");
}

static void red_send_up(uint32_t key, uint64_t tag, int64_t ncontrib, int64_t global_expected,
                        const red_params_t *p, const void *data)
{
    red_send_to(rd.parent, RED_TAG_PARTIAL, key, tag, ncontrib, global_expected, p, data);
}

/* Forward slot *pp (unlinked here) to the parent. */
static void red_forward(red_slot_t **pp, red_key_t *k)
{
    red_slot_t *s = *pp;
    *pp           = s->next;
    red_send_up(s->key, s->tag, s->ncontrib, s->global_expected, &s->p, s->data);
    if (!k->forwarded_any || s->tag > k->forwarded_max)
        k->forwarded_max = s->tag;
    k->forwarded_any = 1;
    rd.fanin_max     = TESS_MAX(rd.fanin_max, (int64_t)s->fanin);
    rd.combined++;
    rd.waiting--;
    tess_count_processed(tess_core.pes[0], 1); /* the wait is over */
    red_slot_free(s);
}

static int red_ready(const red_slot_t *s, const red_key_t *k)
{
    for (int m = 0; m <= rd.nchild; m++)
        if (k->active[m] && !s->heard[m])
            return 0;
    return 1;
}

/* A partial from member `member` (0: this process, 1 + i: child i) of this process's tree. */
static void red_arrive(uint32_t key, uint64_t tag, int64_t ncontrib, int64_t global_expected,
                       const red_params_t *p, const void *data, int from, int member)
{
    if (tess_rt.rank == 0) {
        red_root_combine(key, tag, ncontrib, global_expected, p, data, from, member);
        return;
    }
    red_key_t   *k  = red_key_get(key);
    red_slot_t **pp = red_find(rd.root, key, tag);
    red_slot_t  *s  = *pp;
    k->active[member] = 1;
    if (!s && k->forwarded_any && tag <= k->forwarded_max) {
        /* Late (after a migration): straight on. */
        rd.late++;
        red_send_up(key, tag, ncontrib, global_expected, p, data);
        return;
    }
    if (!s) {
        s = red_slot_new(key, tag, global_expected, p, data);
        if (s && !(s->heard = tess_calloc((size_t)rd.nchild + 1, 1, "reduction tree members")))
        {
            red_slot_free(s);
            s = NULL;
        }
        if (!s)
            tess_fatal("out of memory combining reduction %u:%llu", key, (unsigned long long)tag);
        s->t0   = tess_time_ns();
        s->from = from;
        *pp     = s;
        rd.waiting++;
        tess_count_sent(tess_core.pes[0], 1); /* processed when it is forwarded */
    } else {
        if (red_params_differ(&s->p, p) || s->global_expected != global_expected)
            red_mismatch(key, tag, s, p, ncontrib, global_expected, from);
        tess_reduce_apply(p->op, p->type, s->data, data, p->count);
    }
    s->ncontrib += ncontrib;
    s->heard[member] = 1;
    s->fanin += member > 0;
    if (red_ready(s, k))
        red_forward(pp, k);
}

/* Slots that waited too long: the members that stayed silent are inactive from now on. */
static void red_expire(void)
{
    uint64_t now = tess_time_ns();
    for (size_t b = 0; b < RED_BUCKETS && rd.waiting; b++) {
        for (red_slot_t **pp = &rd.root[b]; *pp;) {
            red_slot_t *s = *pp;
            if (now - s->t0 < rd.wait_ns) {
                pp = &s->next;
                continue;
            }
            red_key_t *k = red_key_get(s->key);
            for (int m = 0; m <= rd.nchild; m++)
                if (!s->heard[m])
                    k->active[m] = 0;
            red_forward(pp, k);
        }
    }
}

/* Partials from children (RED_TAG_PARTIAL) or, at process 0, from anywhere (RED_TAG_DIRECT). */
static unsigned red_receive(tess_pe_t *pe0, int mpi_tag)
{
    unsigned n = 0;
    for (;;) {
        int         flag = 0;
        MPI_Message msg;
        MPI_Status  status;
        TESS_MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, mpi_tag, tess_core.agent_comm, &flag,
                                   &msg, &status));
        if (!flag)
            break;
        int len = 0;
        TESS_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &len));
        red_wire_t *w = tess_malloc((size_t)len, "a reduction partial");
        if (!w)
            tess_fatal("out of memory receiving a %d-byte reduction partial", len);
        TESS_MPI_CHECK(MPI_Mrecv(w, len, MPI_BYTE, &msg, MPI_STATUS_IGNORE));
        size_t esz    = (size_t)len >= sizeof(*w) ? tess_dtype_size(w->p.type) : 0;
        int    member = mpi_tag == RED_TAG_DIRECT ? 0 : status.MPI_SOURCE - rd.child0 + 1;
        if ((size_t)len < sizeof(*w) || esz == 0 || w->p.count < 1 || w->p.cb_len > RED_CB_MAX ||
            (size_t)len != sizeof(*w) + (size_t)w->p.count * esz ||
            (mpi_tag == RED_TAG_PARTIAL && (member < 1 || member > rd.nchild)))
            tess_fatal("corrupt reduction partial (%d bytes) from process %d", len,
                       status.MPI_SOURCE);
        tess_count_processed(pe0, 1);
        if (mpi_tag == RED_TAG_DIRECT)
            red_root_combine(w->key, w->tag, w->ncontrib, w->global_expected, &w->p, w + 1,
                             status.MPI_SOURCE, 0);
        else
            red_arrive(w->key, w->tag, w->ncontrib, w->global_expected, &w->p, w + 1,
                       status.MPI_SOURCE, member);
        free(w);
        n++;
    }
    return n;
}

unsigned tess_reduce_progress(tess_pe_t *pe0)
{
    unsigned n = tess_reduce_fast_progress(pe0, 1);
    if (tess_rt.rank == 0 && tess_rt.size > 1)
        n += red_receive(pe0, RED_TAG_DIRECT);
    if (rd.nchild == 0 && !rd.waiting)
        return n;
    n += red_receive(pe0, RED_TAG_PARTIAL);
    if (rd.waiting)
        red_expire();
    return n;
}

/* Agent function (PE 0): this process's partial joins the tree here. */
static void red_flush(void *arg)
{
    red_slot_t *s = arg;
    red_arrive(s->key, s->tag, s->ncontrib, s->global_expected, &s->p, s->data, tess_rt.rank, 0);
    red_slot_free(s);
}

/* A partial handed to the agent: fn (PE 0) takes it from there. */
static tess_status_t red_post(void (*fn)(void *), uint32_t key, uint64_t tag, int64_t ncontrib,
                              int64_t global_expected, const void *data, int count,
                              tess_dtype_t type, tess_op_t op, const void *cb, size_t cb_len)
{
    if (cb_len > RED_CB_MAX)
        return tess_error(TESS_ERR_INVALID, "reduction callback of %zu bytes (at most %d)",
                          cb_len, RED_CB_MAX);
    red_params_t p = {.count = count, .type = type, .op = op, .cb_len = (uint32_t)cb_len};
    memcpy(p.cb, cb, cb_len);
    red_slot_t *s = red_slot_new(key, tag, global_expected, &p, data);
    if (!s)
        return TESS_ERR_NO_MEMORY;
    s->ncontrib      = ncontrib;
    tess_status_t st = tess_core_agent_post(fn, s);
    if (st != TESS_OK)
        red_slot_free(s);
    return st;
}

tess_status_t tess_core_reduce_submit(uint32_t key, uint64_t tag, int64_t ncontrib,
                                      int64_t global_expected, const void *data, int count,
                                      tess_dtype_t type, tess_op_t op, const void *cb,
                                      size_t cb_len)
{
    tess_status_t st = tess_reduce_check(count, type, op);
    if (st != TESS_OK)
        return st;
    return red_post(red_flush, key, tag, ncontrib, global_expected, data, count, type, op, cb,
                    cb_len);
}

/* Agent function (PE 0): a partial straight to process 0. */
static void red_flush_direct(void *arg)
{
    red_slot_t *s = arg;
    if (tess_rt.rank == 0)
        red_root_combine(s->key, s->tag, s->ncontrib, s->global_expected, &s->p, s->data, 0, 0);
    else
        red_send_to(0, RED_TAG_DIRECT, s->key, s->tag, s->ncontrib, s->global_expected, &s->p,
                    s->data);
    red_slot_free(s);
}

tess_status_t tess_core_reduce_submit_direct(uint32_t key, uint64_t tag, int64_t ncontrib,
                                             int64_t global_expected, const void *data,
                                             int count, tess_dtype_t type, tess_op_t op,
                                             const void *cb, size_t cb_len)
{
    return red_post(red_flush_direct, key, tag, ncontrib, global_expected, data, count, type,
                    op, cb, cb_len);
}

tess_status_t tess_reduce_check(int count, tess_dtype_t type, tess_op_t op)
{
    if (tess_dtype_size(type) == 0)
        return tess_error(TESS_ERR_INVALID, "reduction of type %d, which is not a tess_dtype_t "
                          "(TESS_INT32, TESS_INT64, TESS_FLOAT, TESS_DOUBLE)", (int)type);
    if ((unsigned)op > TESS_BOR)
        return tess_error(TESS_ERR_INVALID, "reduction with op %d, which is not a tess_op_t "
                          "(TESS_SUM, TESS_PROD, TESS_MIN, TESS_MAX, TESS_LAND, TESS_LOR, "
                          "TESS_BAND, TESS_BOR)", (int)op);
    if (count < 1)
        return tess_error(TESS_ERR_INVALID, "reduction of %d values of %s with %s (count must be "
                          ">= 1)", count, tess_dtype_name(type), tess_op_name(op));
    if ((op == TESS_BAND || op == TESS_BOR) && (type == TESS_FLOAT || type == TESS_DOUBLE))
        return tess_error(TESS_ERR_INVALID, "bitwise %s is not defined on %s",
                          tess_op_name(op), tess_dtype_name(type));
    return TESS_OK;
}

tess_status_t tess_core_reduce_set_result_fn(tess_reduce_result_fn_t fn)
{
    rd.result_fn = fn;
    return TESS_OK;
}

void tess_core_reduce_members(uint32_t key, const uint8_t *has)
{
    tess_core_reduce_forget(key);
    tess_reduce_fast_members(key);
    red_key_t *k = red_key_get(key);
    int64_t    np = tess_rt.size, kk = tess_cfg.tree_arity;
    k->active[0]  = has[tess_rt.rank] != 0;
    for (int m = 1; m <= rd.nchild; m++) {
        /* The subtree of a child: at each level below it, one contiguous range of processes. */
        int any = 0;
        for (int64_t lo = rd.child0 + m - 1, hi = lo; lo < np && !any; lo = lo * kk + 1,
                     hi = hi * kk + kk)
            for (int64_t p = lo; p <= hi && p < np && !any; p++)
                any = has[p] != 0;
        k->active[m] = (uint8_t)any;
    }
}

void tess_core_reduce_forget(uint32_t key)
{
    tess_reduce_fast_forget(key);
    for (red_key_t **pp = &rd.keys; *pp; pp = &(*pp)->next)
        if ((*pp)->key == key) {
            red_key_t *k = *pp;
            *pp          = k->next;
            free(k->active);
            free(k);
            return;
        }
}

void tess_core_reduce_set_name_fn(tess_reduce_name_fn_t fn)
{
    rd.name_fn = fn;
}

int tess_core_reduce_open(tess_reduce_open_t *out, int max)
{
    int n = 0;
    for (size_t b = 0; b < RED_BUCKETS; b++)
        for (red_slot_t *s = rd.root[b]; s; s = s->next, n++)
            if (n < max)
                out[n] = (tess_reduce_open_t){s->key, s->tag, s->ncontrib, s->global_expected};
    return n;
}

tess_status_t tess_reduce_init(void)
{
    memset(rd.root, 0, sizeof(rd.root));
    int k       = tess_cfg.tree_arity, r = tess_rt.rank;
    rd.keys     = NULL;
    rd.parent   = r == 0 ? -1 : (r - 1) / k;
    rd.child0   = (int)TESS_MIN((int64_t)r * k + 1, (int64_t)tess_rt.size);
    rd.nchild   = (int)TESS_MIN((int64_t)k, (int64_t)tess_rt.size - rd.child0);
    rd.waiting  = 0;
    int height  = 0;
    for (int64_t c = r; c * k + 1 < tess_rt.size; c = c * k + 1)
        height++;
    rd.wait_ns   = RED_WAIT_NS * (uint64_t)(1 + height);
    rd.fanin_max = rd.late = rd.combined = 0;
    return tess_reduce_fast_init();
}

tess_status_t tess_tree_get_stats(tess_tree_stats_t *stats_p)
{
    tess_error_clear();
    if (!stats_p)
        return tess_error(TESS_ERR_INVALID, "tess_tree_get_stats(NULL)");
    *stats_p = (tess_tree_stats_t){.arity = tess_cfg.tree_arity, .parent = rd.parent,
                                   .children = rd.nchild, .combined = rd.combined,
                                   .max_fanin = rd.fanin_max, .late = rd.late};
    return TESS_OK;
}

static void red_table_free(red_slot_t **table)
{
    for (size_t b = 0; b < RED_BUCKETS; b++) {
        while (table[b]) {
            red_slot_t *s = table[b];
            table[b]      = s->next;
            red_slot_free(s);
        }
    }
}

void tess_reduce_fini(void)
{
    tess_reduce_fast_fini();
    red_table_free(rd.root);
    while (rd.keys) {
        red_key_t *k = rd.keys;
        rd.keys      = k->next;
        free(k->active);
        free(k);
    }
}

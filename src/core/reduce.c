/* reduce.c — reductions across processes. A layer above combines the contributions of a
 * process and submits the partial; PE 0 sends it to process 0 with MPI (MPI_Isend; process 0
 * receives with MPI_Improbe/Mrecv). Process 0 adds up the partials' contribution counts and
 * hands the result on once they reach the number of contributors. Counting contributions (not
 * processes) keeps this right when elements migrate: a process that gained or lost elements
 * just submits more or fewer partials. */
#include "core_int.h"

#include <stdio.h>
#include <stdlib.h>

#define RED_TAG_PARTIAL 7
#define RED_BUCKETS     256
#define RED_CB_MAX      64

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
} red_slot_t;

/* A partial on the wire. */
typedef struct red_wire {
    uint32_t     key, pad;
    uint64_t     tag;
    int64_t      ncontrib, global_expected;
    red_params_t p;
    /* count values follow */
} red_wire_t;

static struct {
    red_slot_t             *root[RED_BUCKETS]; /* process 0, PE 0 only */
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

/* ---- process 0 --------------------------------------------------------------------------- */

static void red_root_combine(uint32_t key, uint64_t tag, int64_t ncontrib, int64_t global_expected,
                             const red_params_t *p, const void *data, int from)
{
    red_slot_t **pp = red_find(rd.root, key, tag);
    red_slot_t  *s  = *pp;
    if (!s) {
        s = red_slot_new(key, tag, global_expected, p, data);
        if (!s)
            tess_fatal("out of memory combining reduction %u:%llu", key, (unsigned long long)tag);
        *pp = s;
    } else {
        char a[96], b[96], k[80];
        if (red_params_differ(&s->p, p) || s->global_expected != global_expected)
            tess_fatal("reduction tag %llu of %s: process %d contributed %s, others %s "
                       "(every element must contribute the same count, type, op and callback)",
                       (unsigned long long)tag, red_key_text(key, k, sizeof(k)), from,
                       red_params_text(p, a, sizeof(a)), red_params_text(&s->p, b, sizeof(b)));
        tess_reduce_apply(p->op, p->type, s->data, data, p->count);
    }
    s->ncontrib += ncontrib;
    char k[80];
    if (s->ncontrib > s->global_expected)
        tess_fatal("reduction tag %llu of %s: %lld contributions for %lld elements",
                   (unsigned long long)tag, red_key_text(key, k, sizeof(k)), (long long)s->ncontrib,
                   (long long)s->global_expected);
    if (s->ncontrib == s->global_expected) {
        *pp = s->next;
        if (!rd.result_fn)
            tess_fatal("internal: no reduction result function");
        /* Logical results are 1 or 0 even when one contribution was never combined with
         * another (x && x is x != 0). */
        if (s->p.op == TESS_LAND || s->p.op == TESS_LOR)
            tess_reduce_apply(s->p.op, s->p.type, s->data, s->data, s->p.count);
        rd.result_fn(key, tag, s->p.cb, s->p.cb_len, s->data,
                     (size_t)s->p.count * tess_dtype_size(s->p.type));
        red_slot_free(s);
    }
}

unsigned tess_reduce_progress(tess_pe_t *pe0)
{
    if (tess_rt.rank != 0)
        return 0;
    unsigned n = 0;
    for (;;) {
        int         flag = 0;
        MPI_Message msg;
        MPI_Status  status;
        TESS_MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, RED_TAG_PARTIAL, tess_core.agent_comm, &flag,
                                   &msg, &status));
        if (!flag)
            return n;
        int len = 0;
        TESS_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &len));
        red_wire_t *w = tess_malloc((size_t)len, "a reduction partial");
        if (!w)
            tess_fatal("out of memory receiving a %d-byte reduction partial", len);
        TESS_MPI_CHECK(MPI_Mrecv(w, len, MPI_BYTE, &msg, MPI_STATUS_IGNORE));
        size_t esz = (size_t)len >= sizeof(*w) ? tess_dtype_size(w->p.type) : 0;
        if ((size_t)len < sizeof(*w) || esz == 0 || w->p.count < 1 || w->p.cb_len > RED_CB_MAX ||
            (size_t)len != sizeof(*w) + (size_t)w->p.count * esz)
            tess_fatal("corrupt reduction partial (%d bytes) from process %d", len,
                       status.MPI_SOURCE);
        tess_count_processed(pe0, 1);
        red_root_combine(w->key, w->tag, w->ncontrib, w->global_expected, &w->p, w + 1,
                         status.MPI_SOURCE);
        free(w);
        n++;
    }
}

/* ---- from a process to process 0 --------------------------------------------------------- */

static void red_partial_sent(void *arg, MPI_Status *status)
{
    (void)status;
    free(arg);
}

/* Agent function (PE 0): send a completed local slot on, or combine it here on process 0. */
static void red_flush(void *arg)
{
    red_slot_t *s = arg;
    if (tess_rt.rank == 0) {
        red_root_combine(s->key, s->tag, s->ncontrib, s->global_expected, &s->p, s->data, 0);
        red_slot_free(s);
        return;
    }
    size_t      dsize = (size_t)s->p.count * tess_dtype_size(s->p.type);
    red_wire_t *w     = tess_malloc(sizeof(*w) + dsize, "a reduction partial");
    if (!w)
        tess_fatal("out of memory sending a reduction partial");
    *w = (red_wire_t){.key = s->key, .tag = s->tag, .ncontrib = s->ncontrib,
                      .global_expected = s->global_expected, .p = s->p};
    memcpy(w + 1, s->data, dsize);
    red_slot_free(s);
    MPI_Request req;
    TESS_MPI_CHECK(MPI_Isend(w, (int)(sizeof(*w) + dsize), MPI_BYTE, 0, RED_TAG_PARTIAL,
                             tess_core.agent_comm, &req));
    tess_count_sent(tess_core.pes[0], 1);
    if (tess_core_agent_watch(req, red_partial_sent, w) != TESS_OK)
        tess_fatal("cannot watch a reduction send");
}

tess_status_t tess_core_reduce_submit(uint32_t key, uint64_t tag, int64_t ncontrib,
                                      int64_t global_expected, const void *data, int count,
                                      tess_dtype_t type, tess_op_t op, const void *cb,
                                      size_t cb_len)
{
    tess_status_t st = tess_reduce_check(count, type, op);
    if (st != TESS_OK)
        return st;
    if (cb_len > RED_CB_MAX)
        return tess_error(TESS_ERR_INVALID, "reduction callback of %zu bytes (at most %d)",
                          cb_len, RED_CB_MAX);
    red_params_t p = {.count = count, .type = type, .op = op, .cb_len = (uint32_t)cb_len};
    memcpy(p.cb, cb, cb_len);
    red_slot_t *s = red_slot_new(key, tag, global_expected, &p, data);
    if (!s)
        return TESS_ERR_NO_MEMORY;
    s->ncontrib = ncontrib;
    st = tess_core_agent_post(red_flush, s);
    if (st != TESS_OK)
        red_slot_free(s);
    return st;
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
    red_table_free(rd.root);
}

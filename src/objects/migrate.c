/* migrate.c — PUP and migration of elements. The runtime moves the element's state bytes; the
 * array's PUP function adds what the state points to: host bytes, and device buffers
 * (tess_pup_device). Within a process the device buffers stay where they are and the element
 * keeps its stream; between processes they travel as a device message over the usual paths
 * into memory allocated at the destination, and the source buffers are freed once sent. The
 * location table is updated at the source after the element left (so later messages are
 * forwarded, never lost) and at the destination on arrival. */
#include "objects.h"

#include <stdlib.h>


typedef struct mig_hdr {
    uint32_t aid;
    uint32_t contributed;
    int64_t  linear;
    uint64_t last_tag;
    uint64_t bcast_seq;     /* the last broadcast it ran */
    double   user_load;
    int32_t  has_user_load;
    int32_t  ndev;
    int32_t  lb_moved;
    int32_t  pad;
    uint64_t state_size, pup_size;
    uint64_t stream;        /* same process: the element's stream, kept */
    uint64_t dev_size[TESS_DEV_MAX_BUFS];
    uint64_t dev_ptr[TESS_DEV_MAX_BUFS]; /* same process: the buffers, kept */
    /* state bytes, then PUP bytes */
} mig_hdr_t;

static uint16_t h_migrate;
void (*tess_obj_on_arrival)(tess_ctx_h e);

int tess_pup_is_unpacking(tess_pup_h p) { return p->mode == PUP_UNPACK; }
int tess_pup_is_packing(tess_pup_h p) { return p->mode == PUP_PACK; }
int tess_pup_is_sizing(tess_pup_h p) { return p->mode == PUP_SIZE; }
int tess_pup_is_checkpointing(tess_pup_h p) { return p->mode == PUP_CKPT || p->ckpt; }

void tess_pup_bytes(tess_pup_h p, void *ptr, size_t size)
{
    if (!p || (size && !ptr))
        tess_fatal("misuse: tess_pup_bytes of %zu bytes at %p with pup %p (a PUP function "
                   "passes the pup it was given and the address of its data)", size, ptr,
                   (void *)p);
    if (p->mode != PUP_SIZE && p->pos + size > p->cap)
        tess_fatal("PUP: the function %s more bytes than it sized (%zu > %zu); it must pup the "
                   "same data in every mode", p->mode == PUP_UNPACK ? "unpacked" : "packed",
                   p->pos + size, p->cap);
    if (p->mode == PUP_PACK || p->mode == PUP_CKPT)
        memcpy(p->buf + p->pos, ptr, size);
    else if (p->mode == PUP_UNPACK)
        memcpy(ptr, p->buf + p->pos, size);
    p->pos += size;
}

void tess_pup_device(tess_pup_h p, void **dptr_p, size_t size)
{
    if (!p || !dptr_p)
        tess_fatal("misuse: tess_pup_device with pup %p and dptr_p %p (a PUP function passes "
                   "the pup it was given and the address of its device pointer)", (void *)p,
                   (void *)dptr_p);
    int k = p->mode == PUP_UNPACK ? p->next++ : p->ndev++;
    if (k >= TESS_DEV_MAX_BUFS)
        tess_fatal("PUP: more than %d device buffers in one element", TESS_DEV_MAX_BUFS);
    if (p->mode != PUP_SIZE && size != p->dev_size[k])
        tess_fatal("PUP: device buffer %d is %zu bytes when %s but was %zu when sized", k, size,
                   p->mode == PUP_UNPACK ? "unpacking" : "packing", p->dev_size[k]);
    p->dev_size[k] = size;
    if (p->mode == PUP_PACK || p->mode == PUP_CKPT)
        p->dev[k] = *dptr_p;
    else if (p->mode == PUP_UNPACK)
        *dptr_p = p->dev[k];
}

/* ---- arrival ----------------------------------------------------------------------------- */

/* Build the element at its new PE from the header and (between processes) the buffers that
 * were allocated and filled for it. */
static void migrate_arrive(const mig_hdr_t *h, size_t size, void *const *dev,
                           tess_gpu_stream_h stream, int src_pe)
{
    if (size < sizeof(*h) || size != sizeof(*h) + h->state_size + h->pup_size ||
        h->aid >= tess_obj_narrays || h->ndev < 0 || h->ndev > TESS_DEV_MAX_BUFS)
        tess_fatal("corrupt migration message from PE %d", src_pe);
    uint64_t      tr_t0 = TESS_TRACE_NOW();
    tess_array_t *a     = tess_obj_arrays[h->aid];
    obj_pe_t     *op    = tess_obj_pe();
    tess_ctx_h    e  = tess_obj_elem_alloc(a, op->local, h->linear);
    if (!e || h->state_size != a->elem_size || h->linear < 0 || h->linear >= a->size)
        tess_fatal("cannot receive element %lld of array '%s'", (long long)h->linear, a->name);
    memcpy(tess_obj_state(e), h + 1, a->elem_size);
    e->contributed   = (int)h->contributed;
    e->last_tag      = h->last_tag;
    e->bcast_seq     = h->bcast_seq;
    e->user_load     = h->user_load;
    e->has_user_load = h->has_user_load;
    e->lb_moved      = h->lb_moved;
    e->stream        = stream;
    if (a->pup) {
        struct tess_pup p = {.mode = PUP_UNPACK, .buf = (char *)(h + 1) + a->elem_size,
                             .cap = h->pup_size, .ndev = h->ndev};
        for (int k = 0; k < h->ndev; k++) {
            p.dev[k]      = dev[k];
            p.dev_size[k] = h->dev_size[k];
        }
        a->pup(&p, e, tess_obj_state(e));
        if (p.pos != p.cap || p.next != h->ndev)
            tess_fatal("PUP of array '%s' unpacked %zu of %zu bytes and %d of %d device buffers",
                       a->name, p.pos, p.cap, p.next, h->ndev);
    }
    tess_pe_t *pe = tess_core_pe_self();
    if (tess_obj_elem_attach(op, e) != TESS_OK)
        tess_fatal("out of memory receiving element %lld of array '%s'", (long long)h->linear,
                   a->name);
    atomic_store_explicit(&a->loc[h->linear], tess_core_pe_global(pe), memory_order_relaxed);
    tess_dc_streams_dirty(); /* the unpack's copies are on e->stream, ordered by no sender */
    /* Each step may run entries that move e on (it is gone then: what is left follows it). */
    if (tess_obj_unpark(op, e)) {
        if (tess_obj_on_arrival)
            tess_obj_on_arrival(e);
        (void)tess_obj_bcast_catch_up(op, e);
    }
    if (tess_unlikely(tr_t0))
        tess_trace_span("migration", "migrate in", tr_t0, (uint64_t)h->linear, (uint64_t)src_pe);
}

static bool migrate_handler(tess_msg_t *m)
{
    const mig_hdr_t *h = tess_msg_payload(m);
    void            *dev[TESS_DEV_MAX_BUFS];
    if (m->hdr.size < sizeof(*h) || h->ndev < 0 || h->ndev > TESS_DEV_MAX_BUFS)
        tess_fatal("corrupt migration message from PE %d", m->hdr.src_pe);
    for (int k = 0; k < h->ndev; k++)
        dev[k] = (void *)(uintptr_t)h->dev_ptr[k];
    migrate_arrive(h, m->hdr.size, dev, (tess_gpu_stream_h)(uintptr_t)h->stream, m->hdr.src_pe);
    tess_core_msg_free(m);
    return true;
}

/* The device side of a migration between processes (devmsg.c routes MIGRATE_ENTRY here). */
void tess_obj_migrate_post(const tess_dc_msg_t *m, void **dst, tess_gpu_stream_h *stream_p)
{
    for (int k = 0; k < m->nbufs; k++) {
        dst[k] = NULL;
        if (m->sizes[k] && tess_gpu->mem_alloc(m->sizes[k], &dst[k]) != TESS_OK)
            tess_fatal("out of device memory receiving a migrating element (%zu bytes): %s",
                       m->sizes[k], tess_error_detail());
    }
    *stream_p = tess_gpu_pool_stream((size_t)m->a1);
}

void tess_obj_migrate_deliver(const tess_dc_msg_t *m, void *const *dst, tess_gpu_stream_h stream)
{
    migrate_arrive(m->header, m->header_len, dst, stream, m->src_pe);
}

/* ---- departure --------------------------------------------------------------------------- */

typedef struct mig_sources {
    void *dev[TESS_DEV_MAX_BUFS];
    int   ndev;
} mig_sources_t;

static void migrate_sources_sent(void *arg)
{
    mig_sources_t *s = arg;
    for (int k = 0; k < s->ndev; k++)
        if (s->dev[k])
            tess_gpu_mem_release(s->dev[k]);
    free(s);
}

/* An array without a PUP function migrates its elements as their state bytes alone: right
 * for state that owns no memory, wrong for state with pointers to memory it owns (they would
 * point into the source process). Said once per array and process, at its first migration; a
 * PUP function (even one that moves nothing) is the statement that the bytes are enough. */
static void mig_say_no_pup(const tess_array_t *a)
{
    static _Atomic uint8_t said[TESS_OBJ_MAX_ARRAYS];
    if (a->pup || a->elem_size == 0 || a->id >= TESS_OBJ_MAX_ARRAYS ||
        atomic_exchange_explicit(&said[a->id], 1, memory_order_relaxed))
        return;
    tess_warn("array '%s' has no PUP function: its elements migrate as their %zu state bytes "
              "alone (pointers in the state are copied as they are, and memory they point to "
              "stays behind); give the array a PUP function (TESS_ARRAY_FIELD_PUP) if its "
              "elements own memory, or one that moves nothing to say that the bytes are enough",
              a->name, a->elem_size);
}

void tess_obj_migrate_now(obj_pe_t *op, tess_ctx_h e, int dest)
{
    tess_array_t *a = e->array;
    if (dest == tess_core_pe_global(tess_core_pe_self()))
        return;
    mig_say_no_pup(a);
    uint64_t tr_t0        = TESS_TRACE_NOW();
    int64_t  tr_linear    = e->linear;
    int same_process = tess_core_pe_process(dest) == tess_rt.rank;

    struct tess_pup p = {.mode = PUP_SIZE};
    if (a->pup)
        a->pup(&p, e, tess_obj_state(e));
    size_t      pup_size = p.pos;
    size_t      size     = sizeof(mig_hdr_t) + a->elem_size + pup_size;
    mig_hdr_t  *h        = NULL;
    tess_msg_t *m        = NULL;
    void       *hbuf     = NULL;
    if (same_process || p.ndev == 0) {
        m = tess_core_msg_alloc(size);
        h = m ? tess_msg_payload(m) : NULL;
    } else {
        h = hbuf = tess_malloc(size, "a migration header");
    }
    if (!h)
        tess_fatal("out of memory migrating element %lld of array '%s'", (long long)e->linear,
                   a->name);
    *h = (mig_hdr_t){.aid = a->id, .contributed = (uint32_t)e->contributed, .linear = e->linear,
                     .last_tag = e->last_tag, .bcast_seq = e->bcast_seq,
                     .user_load = e->user_load,
                     .has_user_load = e->has_user_load, .ndev = p.ndev, .lb_moved = e->lb_moved,
                     .state_size = a->elem_size, .pup_size = pup_size,
                     .stream = (uint64_t)(uintptr_t)e->stream};
    memcpy(h + 1, tess_obj_state(e), a->elem_size);
    int ndev = p.ndev;
    if (a->pup) {
        size_t sizes[TESS_DEV_MAX_BUFS];
        memcpy(sizes, p.dev_size, sizeof(sizes));
        p = (struct tess_pup){.mode = PUP_PACK, .buf = (char *)(h + 1) + a->elem_size,
                              .cap = pup_size};
        memcpy(p.dev_size, sizes, sizeof(sizes));
        a->pup(&p, e, tess_obj_state(e));
        if (p.pos != pup_size || p.ndev != ndev)
            tess_fatal("PUP of array '%s' packed %zu bytes and %d device buffers but sized %zu "
                       "and %d", a->name, p.pos, p.ndev, pup_size, ndev);
    }
    for (int k = 0; k < ndev; k++) {
        h->dev_size[k] = p.dev_size[k];
        h->dev_ptr[k]  = (uint64_t)(uintptr_t)p.dev[k];
    }
    tess_obj_elem_detach(op, e);
    /* Send first, then point the table at the destination: a message routed by the new entry
     * is sent after the element, so it cannot overtake it. */
    if (m) {
        m->hdr.handler = h_migrate;
        m->hdr.dst_pe  = dest;
        tess_core_send(m);
    } else {
        tess_dev_buf_t bufs[TESS_DEV_MAX_BUFS];
        mig_sources_t *src = tess_calloc(1, sizeof(*src), "migration sources");
        if (!src)
            tess_fatal("out of memory migrating element %lld", (long long)e->linear);
        src->ndev = ndev;
        for (int k = 0; k < ndev; k++) {
            bufs[k]     = (tess_dev_buf_t){p.dev[k], p.dev_size[k]};
            src->dev[k] = p.dev[k];
        }
        uint64_t a0 = ((uint64_t)a->id << 32) | TESS_OBJ_MIGRATE_ENTRY;
        if (tess_dc_send(dest, a0, (uint64_t)e->linear, h, size, bufs, ndev, e->stream,
                         migrate_sources_sent, src) != TESS_OK)
            tess_fatal("cannot migrate element %lld of array '%s': %s", (long long)e->linear,
                       a->name, tess_error_detail());
        free(hbuf);
    }
    /* Only while the table still names this PE: within a process the element may already have
     * arrived, and moved on, and the table then names where it is (a PE that parks messages
     * for it must be one it will reach). */
    int self = tess_rt.rank * tess_rt.ppn + op->local;
    atomic_compare_exchange_strong_explicit(&a->loc[e->linear], &self, dest,
                                            memory_order_relaxed, memory_order_relaxed);
    tess_obj_elem_free(e, op->local);
    if (tess_unlikely(tr_t0))
        tess_trace_span("migration", "migrate out", tr_t0, (uint64_t)tr_linear, (uint64_t)dest);
}

tess_status_t tess_migrate_loc(tess_ctx_h ctx, int dest_pe, const char *file, int line)
{
    tess_obj_check_init("tess_migrate", file, line);
    obj_pe_t *op = tess_obj_pe();
    if (tess_unlikely(!ctx || !op || !tess_core_in_phase() || op->current != ctx))
        tess_obj_misuse(file, line, "tess_migrate must be called by an entry method of the "
                        "element it moves");
    if (tess_unlikely(dest_pe < 0 || dest_pe >= tess_core_num_pes()))
        tess_obj_misuse(file, line, "tess_migrate to PE %d (there are %d PEs)", dest_pe,
                        tess_core_num_pes());
    if (tess_unlikely(!ctx->array->pup && tess_core_pe_process(dest_pe) != tess_rt.rank))
        tess_debug("migrating an element of array '%s', which has no PUP function: only its "
                   "state bytes move", ctx->array->name);
    ctx->migrate_to = dest_pe;
    return TESS_OK;
}

tess_status_t tess_set_load(tess_ctx_h ctx, double load)
{
    tess_error_clear();
    if (!ctx)
        return tess_error(TESS_ERR_INVALID, "tess_set_load: NULL ctx");
    ctx->user_load     = load;
    ctx->has_user_load = 1;
    return TESS_OK;
}

tess_status_t tess_obj_migrate_init(void)
{
    return tess_core_handler_register("migrate", migrate_handler, &h_migrate);
}

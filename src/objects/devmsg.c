/* devmsg.c — device messages between elements: tess_send_device, and the post, deliver and
 * forward steps devcomm calls on the receiving side. */
#include "objects.h"

#include <stdlib.h>

#define DEVMSG_HEADER_MAX ((size_t)1 << 30) /* headers travel as host bytes in one message */

static tess_ctx_h devmsg_elem(const tess_dc_msg_t *m, obj_pe_t **op_p, tess_entry_t *entry_p)
{
    obj_pe_t *op = tess_obj_pe();
    *op_p        = op;
    *entry_p     = (tess_entry_t)((uint32_t)m->a0 & ~TESS_OBJ_PROMISE_BIT);
    return tess_obj_elem_find(op, tess_obj_arrays[(uint32_t)(m->a0 >> 32)], (int64_t)m->a1);
}

static tess_status_t devmsg_post(tess_dc_msg_t *m, void **dst, tess_gpu_stream_h *stream_p,
                                 unsigned *flags_p)
{
    obj_pe_t    *op;
    tess_entry_t entry;
    if ((uint32_t)m->a0 == TESS_OBJ_MIGRATE_ENTRY) {
        for (int i = 0; i < m->nbufs; i++)
            dst[i] = NULL;
        tess_obj_migrate_post(m, dst, stream_p);
        *flags_p = 0;
        return TESS_OK;
    }
    tess_ctx_h e = devmsg_elem(m, &op, &entry);
    if (!e)
        return TESS_ERR_NOT_FOUND;
    const tess_entry_info_t *info   = &tess_obj_entries[entry];
    tess_stream_t            stream = tess_gpu->native_stream(e->stream);
    if (!(info->flags & TESS_ENTRY_IN_PLACE)) /* dst[] holds devcomm's offer of the sources */
        for (int i = 0; i < m->nbufs; i++)
            dst[i] = NULL;
    size_t hl = m->header_len;
    void  *offer[TESS_DEV_MAX_BUFS], *check = NULL;
    if (tess_unlikely(m->a0 & TESS_OBJ_PROMISE_BIT)) /* TESS_CHECK */
        check = tess_obj_promise_of(m, &hl), memcpy(offer, dst, sizeof(void *) * m->nbufs);
    op->current       = e;
    op->current_entry = entry;
    info->post(e, tess_obj_state(e), m->header, hl, m->nbufs, m->sizes, dst, &stream);
    op->current       = NULL;
    op->current_entry = -1;
    if (tess_unlikely(check))
        tess_obj_promise_post(check, e, offer, dst);
    *stream_p = stream ? (tess_gpu_stream_h)stream : e->stream;
    *flags_p  = ((info->flags & TESS_ENTRY_WAIT_COMPLETE) ? TESS_DC_WAIT_COMPLETE : 0) |
               ((info->flags & TESS_ENTRY_SENDER_ORDERED) ? TESS_DC_SENDER_ORDERED : 0);
    /* The element stays here until its entry ran: deliver finds it in m->target. */
    e->gpu_pending++;
    m->target = e;
    return TESS_OK;
}

static void devmsg_deliver(const tess_dc_msg_t *m, void *const *dst, tess_gpu_stream_h stream)
{
    if ((uint32_t)m->a0 == TESS_OBJ_MIGRATE_ENTRY) {
        tess_obj_migrate_deliver(m, dst, stream);
        return;
    }
    tess_ctx_h   e     = m->target; /* post's: gpu_pending kept it here */
    obj_pe_t    *op    = tess_obj_pe();
    tess_entry_t entry = (tess_entry_t)((uint32_t)m->a0 & ~TESS_OBJ_PROMISE_BIT);
    if (!e)
        tess_fatal("internal: a device message delivered without its post");
    e->gpu_pending--;
    size_t hl    = m->header_len;
    void  *check = NULL;
    if (tess_unlikely(m->a0 & TESS_OBJ_PROMISE_BIT)) /* TESS_CHECK */
        check = tess_obj_promise_of(m, &hl), tess_obj_promise_deliver(check, stream);
    tess_obj_run_entry(op, e, entry, m->header, hl);
    if (tess_unlikely(check))
        tess_obj_promise_consumed(check);
}

static int devmsg_batchable(uint64_t a0, uint64_t a1)
{
    (void)a1;
    tess_entry_t entry = (tess_entry_t)((uint32_t)a0 & ~TESS_OBJ_PROMISE_BIT);
    if ((uint32_t)a0 == TESS_OBJ_MIGRATE_ENTRY || entry < 0 || entry >= tess_obj_nentries)
        return 0;
    unsigned f = tess_obj_entries[entry].flags;
    return (f & TESS_ENTRY_BATCH) && !(f & TESS_ENTRY_WAIT_COMPLETE);
}

typedef struct devmsg_temps {
    void *bufs[TESS_DEV_MAX_BUFS];
    int   nbufs;
} devmsg_temps_t;

static void devmsg_temps_free(void *arg)
{
    devmsg_temps_t *t = arg;
    for (int i = 0; i < t->nbufs; i++)
        tess_dc_free_temp(t->bufs[i]);
    free(t);
}

/* The element moved on: send the data after it from the temporaries. */
static void devmsg_forward(const tess_dc_msg_t *m, void **bufs, tess_gpu_stream_h stream)
{
    tess_array_t   *a = tess_obj_arrays[(uint32_t)(m->a0 >> 32)];
    devmsg_temps_t *t = tess_calloc(1, sizeof(*t), "forwarded buffers");
    if (!t)
        tess_fatal("out of memory forwarding a device message");
    tess_dev_buf_t b[TESS_DEV_MAX_BUFS];
    t->nbufs = m->nbufs;
    for (int i = 0; i < m->nbufs; i++) {
        t->bufs[i] = bufs[i];
        b[i]       = (tess_dev_buf_t){bufs[i], m->sizes[i]};
    }
    int    where = atomic_load_explicit(&a->loc[m->a1], memory_order_relaxed);
    size_t hl    = m->header_len;
    if (tess_unlikely(m->a0 & TESS_OBJ_PROMISE_BIT)) /* TESS_CHECK: not checked further */
        tess_obj_promise_drop(tess_obj_promise_of(m, &hl));
    if (tess_dc_send(where, m->a0 & ~(uint64_t)TESS_OBJ_PROMISE_BIT, m->a1, m->header, hl, b,
                     m->nbufs, stream, devmsg_temps_free, t) != TESS_OK)
        tess_fatal("cannot forward a device message: %s", tess_error_detail());
}

static const tess_dc_ops_t devmsg_ops = {
    .post      = devmsg_post,
    .deliver   = devmsg_deliver,
    .forward   = devmsg_forward,
    .batchable = devmsg_batchable,
};

void tess_obj_devmsg_init(void)
{
    tess_dc_set_ops(&devmsg_ops);
}

/* One send from the current PE; misuse stops the program with a message naming file:line. */
static void obj_send_device(tess_array_h a, tess_index_t index, tess_entry_t entry,
                            const void *header, size_t header_len, const tess_dev_buf_t *bufs,
                            int nbufs, tess_gpu_stream_h s, int ready, tess_dev_done_fn_t done,
                            void *done_arg, const char *what, const char *file, int line)
{
    tess_obj_check_send(a, what, file, line);
    int64_t lin = tess_obj_linearize(a, index);
    if (tess_unlikely(lin < 0)) {
        char idx[48];
        tess_obj_misuse(file, line, "%s to index %s of array '%s', out of range", what,
                        tess_obj_index_text(a, index, idx, sizeof(idx)), a->name);
    }
    if (tess_unlikely(entry < 0 || entry >= tess_obj_nentries || !tess_obj_entries[entry].post))
        tess_obj_misuse(file, line, "%s to entry %d of array '%s', which is not a device entry "
                        "(register it with tess_entry_register_device)", what, entry, a->name);
    if (tess_unlikely(nbufs < 0 || nbufs > TESS_DEV_MAX_BUFS))
        tess_obj_misuse(file, line, "%s with %d buffers (0 to %d)", what, nbufs,
                        TESS_DEV_MAX_BUFS);
    if (tess_unlikely(nbufs && !bufs))
        tess_obj_misuse(file, line, "%s of %d buffers with bufs NULL", what, nbufs);
    if (tess_unlikely(header_len > DEVMSG_HEADER_MAX))
        tess_obj_misuse(file, line, "%s with a header of %zu bytes (at most 2^30; send large "
                        "data in device buffers)", what, header_len);
    if (tess_unlikely(header_len && !header))
        tess_obj_misuse(file, line, "%s with a header of %zu bytes at NULL", what, header_len);
    for (int i = 0; i < nbufs; i++) {
        if (tess_unlikely(bufs[i].size > TESS_MSG_SIZE_MAX))
            tess_obj_misuse(file, line, "%s: buffer %d is %zu bytes, more than any device "
                            "buffer (the size is wrong)", what, i, bufs[i].size);
        if (tess_unlikely(bufs[i].size && !bufs[i].ptr))
            tess_obj_misuse(file, line, "%s: buffer %d of %zu bytes is NULL", what, i,
                            bufs[i].size);
    }
    uint64_t a0   = ((uint64_t)a->id << 32) | (uint32_t)entry;
    int      dest = atomic_load_explicit(&a->loc[lin], memory_order_relaxed);
    if (tess_unlikely(tess_cfg.check)) { /* TESS_CHECK: the same send, with its checks */
        obj_promise_send_t c = {a0, header, header_len, bufs, nbufs, s, done, done_arg, NULL};
        tess_obj_promise_send(a, lin, entry, dest, ready, &c, file, line);
        tess_status_t st = tess_dc_send(dest, c.a0, (uint64_t)lin, c.header, c.header_len, bufs,
                                        nbufs, s, c.done, c.done_arg);
        free(c.scratch);
        if (st != TESS_OK)
            tess_obj_misuse(file, line, "%s: %s", what, tess_error_detail());
        return;
    }
    tess_status_t st = tess_dc_send(dest, a0, (uint64_t)lin, header, header_len, bufs, nbufs, s,
                                    done, done_arg);
    if (tess_unlikely(st != TESS_OK))
        tess_obj_misuse(file, line, "%s: %s", what, tess_error_detail());
}

static tess_gpu_stream_h obj_send_stream(tess_stream_t stream)
{
    if (stream == TESS_STREAM_READY) {
        tess_gpu_stream_h ready = tess_dc_ready_stream();
        if (ready)
            return ready;
        stream = NULL; /* off a PE: ordered after the default stream's work, which is safe */
    }
    obj_pe_t *op = tess_obj_pe();
    return stream ? (tess_gpu_stream_h)stream
                  : op && op->current ? op->current->stream : tess_gpu_pool_stream(0);
}

tess_status_t tess_send_device_loc(tess_array_h a, tess_index_t index, tess_entry_t entry,
                                   const void *header, size_t header_len,
                                   const tess_dev_buf_t *bufs, int nbufs, tess_stream_t stream,
                                   tess_dev_done_fn_t done, void *done_arg, const char *file,
                                   int line)
{
    tess_obj_check_init("tess_send_device", file, line);
    tess_obj_check_not_recording("tess_send_device", file, line);
    obj_pe_t *op = tess_obj_pe();
    tess_obj_check_batch(op, op ? op->current : NULL, "tess_send_device", file, line);
    obj_send_device(a, index, entry, header, header_len, bufs, nbufs, obj_send_stream(stream),
                    stream == TESS_STREAM_READY, done, done_arg, "tess_send_device", file, line);
    return TESS_OK;
}

tess_status_t tess_send_device_many_loc(const tess_dev_send_t *sends, int n,
                                        tess_stream_t stream, const char *file, int line)
{
    tess_obj_check_init("tess_send_device_many", file, line);
    tess_obj_check_not_recording("tess_send_device_many", file, line);
    obj_pe_t *op = tess_obj_pe();
    tess_obj_check_batch(op, op ? op->current : NULL, "tess_send_device_many", file, line);
    if (tess_unlikely(n < 0 || (n && !sends)))
        tess_obj_misuse(file, line, "tess_send_device_many with %d sends at %p", n,
                        (const void *)sends);
    tess_gpu_stream_h s = obj_send_stream(stream);
    tess_dc_batch_begin(s);
    for (int i = 0; i < n; i++) {
        const tess_dev_send_t *d = &sends[i];
        obj_send_device(d->array, d->index, d->entry, d->header, d->header_len, d->bufs,
                        d->nbufs, s, stream == TESS_STREAM_READY, d->done, d->done_arg,
                        "tess_send_device_many", file, line);
    }
    tess_dc_batch_end();
    return TESS_OK;
}

/* msg.c — message buffers (per-PE pools by size class), routing to a PE of this process or
 * through UCX to another process, coalescing of small messages while the network to a process
 * is backed up, arrival from the network, and dispatch to handlers. */
#include "core_int.h"
#include "core/trace.h"

#include <stdlib.h>

/* Classes past 64 KiB keep buffers that an exact-size allocation would map and unmap on every
 * message: a fresh 256 KiB buffer costs its page faults and its unmap a TLB shootdown, which
 * made a 256 KiB message between processes 1.3 ms one way on the test VM (raw UCX: 10 us).
 * Their pools are capped by bytes (MSG_POOL_LARGE_BYTES a class a PE) and a buffer freed on
 * another PE goes home at once, not in batches. Larger payloads are allocated exactly. */
static const uint32_t msg_cls_cap[TESS_MSG_NCLS] = {64,         256,        1024,
                                                    4096,       16384,      65536,
                                                    256 << 10,  1u << 20,   4u << 20};
#define MSG_CLS_LARGE        6         /* the first class past 64 KiB */
#define MSG_POOL_LARGE_BYTES (8u << 20)

static inline unsigned msg_pool_max(uint32_t cls)
{
    return cls < MSG_CLS_LARGE ? TESS_MSG_POOL_MAX : MSG_POOL_LARGE_BYTES / msg_cls_cap[cls];
}

static inline uint32_t msg_cls(size_t size)
{
    for (uint32_t c = 0; c < TESS_MSG_NCLS; c++)
        if (size <= msg_cls_cap[c])
            return c;
    return TESS_MSG_CLS_MALLOC;
}

#define MSG_RETURN_BATCH 32

static inline tess_msg_t *msg_next(tess_msg_t *m)
{
    return (tess_msg_t *)atomic_load_explicit(&m->qnode.next, memory_order_relaxed);
}

static inline void msg_set_next(tess_msg_t *m, tess_msg_t *next)
{
    atomic_store_explicit(&m->qnode.next, (tess_qnode_t *)next, memory_order_relaxed);
}

static void msg_pool_put(tess_pe_t *pe, tess_msg_t *m)
{
    uint16_t c = m->cls;
    if (pe->npool[c] >= msg_pool_max(c)) {
        free(m);
        return;
    }
    msg_set_next(m, pe->pool[c]);
    pe->pool[c] = m;
    pe->npool[c]++;
}

/* Take back, all at once, the buffers other PEs returned to this one. */
static void msg_take_returned(tess_pe_t *pe)
{
    tess_msg_t *m = atomic_exchange_explicit(&pe->returned, NULL, memory_order_acquire);
    while (m) {
        tess_msg_t *next = msg_next(m);
        msg_pool_put(pe, m);
        m = next;
    }
}

/* Send a batch of another PE's buffers home. */
static void msg_chain_flush(msg_chain_t *c, tess_pe_t *home)
{
    tess_msg_t *old = atomic_load_explicit(&home->returned, memory_order_relaxed);
    do
        msg_set_next(c->tail, old);
    while (!atomic_compare_exchange_weak_explicit(&home->returned, &old, c->head,
                                                  memory_order_release, memory_order_relaxed));
    c->head = c->tail = NULL;
    c->len  = 0;
}

/* A message buffer from this PE's pools (or exactly sized), or with `shm` for a payload of the
 * node arena's sizes first from the arena, whence it reaches the node's other processes as a
 * reference. */
static tess_msg_t *msg_alloc(size_t size, int shm)
{
    if (tess_unlikely(size > TESS_MSG_SIZE_MAX)) {
        tess_error(TESS_ERR_INVALID, "a message of %zu bytes (at most 2^46)", size);
        return NULL;
    }
    tess_pe_t  *pe  = tess_pe_self_;
    uint32_t    cls = msg_cls(size);
    tess_msg_t *m   = NULL;
    if (shm && (m = tess_msg_shm_alloc(size)) != NULL) {
        memset(&m->hdr, 0, sizeof(m->hdr));
        m->hdr.size = size;
        return m;
    }
    if (pe && cls != TESS_MSG_CLS_MALLOC) {
        if (!pe->pool[cls] && atomic_load_explicit(&pe->returned, memory_order_relaxed))
            msg_take_returned(pe);
        m = pe->pool[cls];
    }
    if (m) {
        pe->pool[cls] = msg_next(m);
        pe->npool[cls]--;
    } else {
        /* Pooled classes allocate their full capacity; larger payloads exactly their size. */
        size_t cap = cls == TESS_MSG_CLS_MALLOC ? size : msg_cls_cap[cls];
        m = tess_aligned_alloc(16, sizeof(tess_msg_t) + cap, "a message");
        if (!m)
            return NULL;
        m->cls  = (uint16_t)cls;
        m->home = pe ? (uint16_t)pe->local : TESS_MSG_NO_HOME;
        m->cap  = cls == TESS_MSG_CLS_MALLOC ? 0 : (uint32_t)cap;
    }
    memset(&m->hdr, 0, sizeof(m->hdr));
    m->hdr.size = size;
    return m;
}

tess_msg_t *tess_core_msg_alloc(size_t size)
{
    return msg_alloc(size, 1);
}

void tess_core_msg_free(tess_msg_t *m)
{
    if (!m)
        return;
    if (m->cls == TESS_MSG_CLS_SHM) {
        tess_msg_shm_free(m);
        return;
    }
    tess_pe_t *pe = tess_pe_self_;
    if (!pe || m->cls == TESS_MSG_CLS_MALLOC) {
        free(m);
        return;
    }
    if (m->home == pe->local || m->home == TESS_MSG_NO_HOME) {
        msg_pool_put(pe, m);
        return;
    }
    msg_chain_t *c = &pe->ret[m->home];
    msg_set_next(m, NULL);
    if (c->tail)
        msg_set_next(c->tail, m);
    else
        c->head = m;
    c->tail = m;
    if (++c->len >= MSG_RETURN_BATCH || m->cls >= MSG_CLS_LARGE)
        msg_chain_flush(c, tess_core.pes[m->home]);
}

tess_status_t tess_msg_pool_init(tess_pe_t *pe)
{
    size_t n = (size_t)tess_rt.size;
    pe->ret          = tess_calloc((size_t)tess_rt.ppn, sizeof(*pe->ret), "message return chains");
    pe->batch        = tess_calloc(n, sizeof(*pe->batch), "message batches");
    pe->batch_list   = tess_calloc(n, sizeof(*pe->batch_list), "message batches");
    pe->batch_listed = tess_calloc(n, sizeof(*pe->batch_listed), "message batches");
    pe->nbatch       = 0;
    return pe->ret && pe->batch && pe->batch_list && pe->batch_listed ? TESS_OK
                                                                        : TESS_ERR_NO_MEMORY;
}

static void msg_free_list(tess_msg_t *m)
{
    while (m) {
        tess_msg_t *next = msg_next(m);
        free(m);
        m = next;
    }
}

void tess_msg_pool_fini(tess_pe_t *pe)
{
    for (int c = 0; c < TESS_MSG_NCLS; c++) {
        msg_free_list(pe->pool[c]);
        pe->pool[c]  = NULL;
        pe->npool[c] = 0;
    }
    msg_free_list(atomic_exchange(&pe->returned, NULL));
    if (pe->ret)
        for (int h = 0; h < tess_rt.ppn; h++)
            msg_free_list(pe->ret[h].head);
    free(pe->ret);
    pe->ret = NULL;
    if (pe->batch)
        for (int p = 0; p < tess_rt.size; p++)
            if (pe->batch[p])
                tess_fatal("internal: PE %d kept a batch of messages to process %d unsent",
                           pe->global, p);
    free(pe->batch);
    free(pe->batch_list);
    free(pe->batch_listed);
    pe->batch        = NULL;
    pe->batch_list   = NULL;
    pe->batch_listed = NULL;
}

void tess_core_coalesce_stats(uint64_t *batches_p, uint64_t *records_p)
{
    uint64_t b = 0, r = 0;
    for (int i = 0; i < tess_core.npes; i++) {
        b += tess_core.pes[i]->batches_sent;
        r += tess_core.pes[i]->records_batched;
    }
    *batches_p = b;
    *records_p = r;
}

void tess_msg_deliver_local(tess_msg_t *m)
{
    tess_pe_t *pe = tess_core.pes[m->hdr.dst_pe - tess_rt.rank * tess_rt.ppn];
    tess_mpsc_push(&pe->queue, &m->qnode);
    if (atomic_load_explicit(&pe->sleeping, memory_order_seq_cst))
        tess_pe_wake(pe);
}

static void msg_sent(void *arg, tess_status_t status)
{
    tess_msg_t *m = arg;
    if (status != TESS_OK)
        tess_fatal("a message to PE %d (handler %s) could not be sent: %s", m->hdr.dst_pe,
                   tess_core.handlers[m->hdr.handler].name, tess_error_detail());
    tess_core_msg_free(m);
}

/* Send m's header and `len` bytes of its payload as active message `am`; m is freed when UCX
 * is done with it. */
static void msg_net_send_len(int proc, unsigned am, tess_msg_t *m, size_t len)
{
    tess_status_t st = tess_net_am_send(proc, am, &m->hdr.net, sizeof(m->hdr),
                                        tess_msg_payload(m), len, msg_sent, m);
    if (st == TESS_OK)
        tess_core_msg_free(m);
    else if (st != TESS_INPROGRESS) /* nothing may be dropped silently: a failed send ends the job */
        tess_fatal("sending a message to process %d failed: %s", proc, tess_error_detail());
}

static void msg_net_send(int proc, unsigned am, tess_msg_t *m)
{
    msg_net_send_len(proc, am, m, m->hdr.size);
}

/* A message in a node arena to a process of the node: its header and a reference to it, in
 * order with this PE's other messages to that process (the same UCX lane). From here on the
 * receiver owns m. */
static void msg_shm_send(int proc, tess_msg_t *m)
{
    tess_msg_t *d = tess_core_msg_alloc(sizeof(tess_msg_shm_ref_t));
    if (!d)
        tess_fatal("out of memory sending a message to process %d", proc);
    d->hdr = m->hdr;
    tess_msg_shm_ref(m, tess_msg_payload(d));
    msg_net_send_len(proc, TESS_AM_SHM, d, sizeof(tess_msg_shm_ref_t));
}

/* ---- coalescing ---------------------------------------------------------------------------
 * While UCX still queues earlier sends to a process (its shared-memory FIFO or network queue is
 * full), a small message to it is copied into this PE's batch for that process instead of
 * joining the queue alone; the batch leaves as one active message when it is full, when a
 * message that is not coalesced goes to the same process, and at the end of the scheduler
 * pass. Each message of a batch is a record: its core header, then its payload padded to 8
 * bytes. Order per (PE, process) is kept, and nothing waits longer than it would have waited in
 * UCX's queue, which also moves only when this PE progresses the network.
 * Bursts: a small message that a handler sends to a process it has already sent one to alone is
 * coalesced too (TESS_COALESCE_BURST), and the batch leaves when the handler returns: a handler
 * streaming messages to a process pays one active message, not one each. */

static void msg_batch_send(tess_pe_t *pe, int proc)
{
    tess_msg_t *b    = pe->batch[proc];
    pe->batch[proc] = NULL;
    pe->batches_sent++;
    msg_net_send(proc, TESS_AM_BATCH, b);
}

unsigned tess_msg_flush_batches(tess_pe_t *pe)
{
    unsigned n = 0;
    for (int i = 0; i < pe->nbatch; i++) {
        int proc               = pe->batch_list[i];
        pe->batch_listed[proc] = 0;
        if (pe->batch[proc]) {
            msg_batch_send(pe, proc);
            n++;
        }
    }
    pe->nbatch = 0;
    return n;
}

static void msg_coalesce(tess_pe_t *pe, int proc, tess_msg_t *m)
{
    size_t      rec = sizeof(m->hdr) + TESS_ALIGN_UP(m->hdr.size, 8);
    tess_msg_t *b   = pe->batch[proc];
    if (b && b->hdr.size + rec > tess_cfg.coalesce) {
        msg_batch_send(pe, proc);
        b = NULL;
    }
    if (!b) {
        b = msg_alloc(tess_cfg.coalesce, 0); /* batches travel through UCX */
        if (!b)
            tess_fatal("out of memory coalescing messages to process %d", proc);
        b->hdr.size   = 0;
        b->hdr.dst_pe = proc * tess_rt.ppn;
        b->hdr.src_pe = pe->global;
        pe->batch[proc] = b;
        if (!pe->batch_listed[proc]) {
            pe->batch_listed[proc]       = 1;
            pe->batch_list[pe->nbatch++] = proc;
        }
    }
    char *p = (char *)tess_msg_payload(b) + b->hdr.size;
    memcpy(p, &m->hdr, sizeof(m->hdr));
    memcpy(p + sizeof(m->hdr), tess_msg_payload(m), m->hdr.size);
    b->hdr.size += rec;
    b->hdr.a0++; /* records, checked on arrival */
    pe->records_batched++;
    tess_core_msg_free(m);
}

void tess_core_coalesce_begin(void)
{
    tess_pe_t *pe = tess_pe_self_;
    if (pe && tess_cfg.coalesce)
        pe->burst_hold++;
}

void tess_core_coalesce_end(void)
{
    tess_pe_t *pe = tess_pe_self_;
    if (pe && pe->burst_hold && --pe->burst_hold == 0)
        tess_msg_flush(pe);
}

tess_status_t tess_core_send(tess_msg_t *m)
{
    tess_pe_t *self = tess_pe_self_;
    int        dst  = m->hdr.dst_pe;
    if (tess_unlikely(!self))
        tess_fatal("a message was sent from a thread that is not a PE (outside tess_run?)");
    if (tess_unlikely(dst < 0 || dst >= tess_core_num_pes() ||
                      m->hdr.handler >= tess_core.nhandlers))
        tess_fatal("internal: message to PE %d with handler %u", dst, m->hdr.handler);
    m->hdr.src_pe = self->global;
    if (tess_unlikely(tess_trace_on)) {
        m->hdr.pad = ++self->trace_seq;
        tess_trace_record((uint32_t)self->local, TESS_TEV_FLOW_OUT, NULL,
                          tess_core.handlers[m->hdr.handler].name, NULL, tess_time_ns(), 0,
                          tess_core_trace_flow(self->global, m->hdr.pad), m->hdr.size);
    }
    tess_count_sent(self, 1);
    int proc = dst / tess_rt.ppn;
    if (proc == tess_rt.rank) {
        tess_msg_deliver_local(m);
        return TESS_OK;
    }
    /* Coalesced: payloads up to TESS_COALESCE_MAX whose record fits a batch (none when off). */
    if (m->hdr.size <= TESS_COALESCE_MAX &&
        sizeof(m->hdr) + TESS_ALIGN_UP(m->hdr.size, 8) <= tess_cfg.coalesce) {
        if (self->batch[proc] || self->burst_hold || tess_net_backlog(proc) > 0 ||
            tess_cfg.coalesce_force) {
            msg_coalesce(self, proc, m);
            return TESS_OK;
        }
        if (proc == self->burst_proc && self->work_gen == self->burst_gen &&
            tess_cfg.coalesce_burst) {
            msg_coalesce(self, proc, m);
            self->burst_flush = 1;
            return TESS_OK;
        }
        self->burst_proc = proc;
        self->burst_gen  = self->work_gen;
    } else if (self->batch[proc]) {
        msg_batch_send(self, proc); /* before this one, to keep the order */
    }
    if (m->cls == TESS_MSG_CLS_SHM && tess_msg_shm_reaches(proc))
        msg_shm_send(proc, m);
    else
        msg_net_send(proc, TESS_AM_CORE, m);
    return TESS_OK;
}

/* ---- arrival from the network ------------------------------------------------------------ */

static void msg_rndv_done(void *arg, tess_status_t status)
{
    tess_msg_t *m = arg;
    if (status != TESS_OK)
        tess_fatal("receiving a %llu-byte message from PE %d failed: %s",
                   (unsigned long long)m->hdr.size, m->hdr.src_pe, tess_error_detail());
    tess_msg_deliver_local(m);
}

static void msg_am_recv(void *arg, const void *hdr, size_t hdr_len, const void *data, size_t len,
                        void *desc)
{
    (void)arg;
    const tess_msg_hdr_t *h = hdr;
    int first = tess_rt.rank * tess_rt.ppn;
    if (tess_unlikely(hdr_len != sizeof(*h) || h->size != len || h->handler >= tess_core.nhandlers ||
                      h->dst_pe < first || h->dst_pe >= first + tess_rt.ppn))
        tess_fatal("corrupt message from process %u: header %zu bytes, size %llu/%zu, handler %u, "
                   "PE %d", ((const tess_net_hdr_t *)hdr)->src, hdr_len,
                   (unsigned long long)(hdr_len >= sizeof(*h) ? h->size : 0), len,
                   hdr_len >= sizeof(*h) ? h->handler : 0, hdr_len >= sizeof(*h) ? h->dst_pe : -1);
    tess_msg_t *m = tess_core_msg_alloc(len);
    if (!m)
        tess_fatal("out of memory receiving a %zu-byte message", len);
    memcpy(&m->hdr, h, sizeof(*h));
    if (desc) {
        tess_status_t st = tess_net_am_recv_into(desc, tess_msg_payload(m), len, msg_rndv_done, m);
        if (st != TESS_OK && st != TESS_INPROGRESS)
            tess_fatal("cannot receive a %zu-byte message: %s", len, tess_error_detail());
        return;
    }
    if (len)
        memcpy(tess_msg_payload(m), data, len);
    tess_msg_deliver_local(m);
}

/* Deliver the records of a batch from process `src`, each checked against the batch's bounds
 * before it is followed. */
static void msg_batch_unpack(uint32_t src, const char *p, size_t len, uint64_t records)
{
    int      first = tess_rt.rank * tess_rt.ppn;
    size_t   off   = 0;
    uint64_t n     = 0;
    while (off < len) {
        tess_msg_hdr_t h;
        if (tess_unlikely(len - off < sizeof(h)))
            tess_fatal("corrupt batch from process %u: %zu stray bytes at offset %zu", src,
                       len - off, off);
        memcpy(&h, p + off, sizeof(h));
        if (tess_unlikely(h.size > TESS_COALESCE_MAX ||
                          TESS_ALIGN_UP(h.size, 8) > len - off - sizeof(h) ||
                          h.handler >= tess_core.nhandlers || h.dst_pe < first ||
                          h.dst_pe >= first + tess_rt.ppn))
            tess_fatal("corrupt batch from process %u: record %llu at offset %zu has size %llu, "
                       "handler %u, PE %d", src, (unsigned long long)n, off,
                       (unsigned long long)h.size, h.handler, h.dst_pe);
        tess_msg_t *m = tess_core_msg_alloc(h.size);
        if (!m)
            tess_fatal("out of memory receiving a %llu-byte message", (unsigned long long)h.size);
        memcpy(&m->hdr, &h, sizeof(h));
        memcpy(tess_msg_payload(m), p + off + sizeof(h), h.size);
        tess_msg_deliver_local(m);
        off += sizeof(h) + TESS_ALIGN_UP(h.size, 8);
        n++;
    }
    if (tess_unlikely(n != records))
        tess_fatal("corrupt batch from process %u: %llu records where the header says %llu", src,
                   (unsigned long long)n, (unsigned long long)records);
}

static void msg_batch_rndv_done(void *arg, tess_status_t status)
{
    tess_msg_t *b = arg;
    if (status != TESS_OK)
        tess_fatal("receiving a batch of messages from PE %d failed: %s", b->hdr.src_pe,
                   tess_error_detail());
    msg_batch_unpack(b->hdr.net.src, tess_msg_payload(b), b->hdr.size, b->hdr.a0);
    tess_core_msg_free(b);
}

static void msg_batch_recv(void *arg, const void *hdr, size_t hdr_len, const void *data,
                           size_t len, void *desc)
{
    (void)arg;
    const tess_msg_hdr_t *h   = hdr;
    uint32_t              src = ((const tess_net_hdr_t *)hdr)->src;
    if (tess_unlikely(hdr_len != sizeof(*h) || h->size != len || len > 65536))
        tess_fatal("corrupt batch from process %u: header %zu bytes, %zu bytes of records", src,
                   hdr_len, len);
    if (!desc) {
        msg_batch_unpack(src, data, len, h->a0);
        return;
    }
    /* Larger than UCX sends eagerly: fetch it, then unpack. */
    tess_msg_t *b = msg_alloc(len, 0);
    if (!b)
        tess_fatal("out of memory receiving a batch of %zu bytes", len);
    memcpy(&b->hdr, h, sizeof(*h));
    tess_status_t st = tess_net_am_recv_into(desc, tess_msg_payload(b), len, msg_batch_rndv_done, b);
    if (st != TESS_OK && st != TESS_INPROGRESS)
        tess_fatal("cannot receive a batch of %zu bytes: %s", len, tess_error_detail());
}

/* A message whose payload waits in a node arena (msg_shm_send). */
static void msg_shm_recv(void *arg, const void *hdr, size_t hdr_len, const void *data, size_t len,
                         void *desc)
{
    (void)arg;
    const tess_msg_hdr_t *h     = hdr;
    uint32_t              src   = ((const tess_net_hdr_t *)hdr)->src;
    int                   first = tess_rt.rank * tess_rt.ppn;
    tess_msg_shm_ref_t    ref;
    tess_msg_t           *m = NULL;
    if (hdr_len == sizeof(*h) && len == sizeof(ref) && !desc && data) {
        memcpy(&ref, data, sizeof(ref));
        m = tess_msg_shm_resolve(&ref, h->size);
    }
    if (tess_unlikely(!m || h->handler >= tess_core.nhandlers || h->dst_pe < first ||
                      h->dst_pe >= first + tess_rt.ppn))
        tess_fatal("corrupt message reference from process %u: header %zu bytes, %zu bytes of "
                   "reference, %s", src, hdr_len, len,
                   m ? "handler or PE out of range" : "no arena slot of that size");
    m->hdr = *h;
    tess_msg_deliver_local(m);
}

tess_status_t tess_msg_net_init(void)
{
    tess_status_t st = tess_net_am_register(TESS_AM_CORE, msg_am_recv, NULL);
    if (st == TESS_OK)
        st = tess_net_am_register(TESS_AM_BATCH, msg_batch_recv, NULL);
    if (st == TESS_OK)
        st = tess_net_am_register(TESS_AM_SHM, msg_shm_recv, NULL);
    return st;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

unsigned tess_msg_dispatch(tess_pe_t *pe, unsigned max)
{
    unsigned n = 0;
    void (*flush)(void) = NULL; /* of the handler that took the last message */
    while (n < max) {
        tess_qnode_t *q = tess_mpsc_pop(&pe->queue);
        if (!q)
            break;
        tess_msg_t           *m = (tess_msg_t *)((char *)q - offsetof(tess_msg_t, qnode));
        const tess_handler_t *h = &tess_core.handlers[m->hdr.handler];
        n++;
        if (flush && h->flush != flush)
            flush();
        flush = h->flush;
        uint64_t tr_t0 = 0, tr_flow = 0, tr_size = 0;
        if (tess_unlikely(tess_trace_on)) {
            tr_t0   = tess_time_ns();
            tr_flow = m->hdr.pad ? tess_core_trace_flow(m->hdr.src_pe, m->hdr.pad) : 0;
            tr_size = m->hdr.size;
        }
        if (h->fn(m))
            tess_count_processed(pe, 1);
        pe->work_gen++;
        if (pe->burst_flush) { /* the rest of a burst goes when its handler returns */
            pe->burst_flush = 0;
            tess_msg_flush(pe);
        }
        if (tess_unlikely(tr_t0))
            tess_trace_record((uint32_t)pe->local, TESS_TEV_MSG, NULL, h->name, NULL, tr_t0,
                              tess_time_ns() - tr_t0, tr_flow, tr_size);
    }
    if (flush)
        flush();
    pe->nmsgs += n;
    return n;
}

void tess_core_handler_set_flush(uint16_t id, void (*flush)(void))
{
    tess_assert(id < tess_core.nhandlers);
    tess_core.handlers[id].flush = flush;
}

void tess_core_msg_done(void)
{
    tess_pe_t *pe = tess_pe_self_;
    if (tess_unlikely(!pe))
        tess_fatal("internal: tess_core_msg_done outside a PE");
    tess_count_processed(pe, 1);
}

tess_status_t tess_core_handler_register(const char *name, tess_core_handler_fn_t fn,
                                         uint16_t *id_p)
{
    if (tess_core.nhandlers >= TESS_HANDLER_MAX)
        return tess_error(TESS_ERR_NO_MEMORY, "too many message handlers (%d) registering %s",
                          TESS_HANDLER_MAX, name);
    tess_core.handlers[tess_core.nhandlers].name = name;
    tess_core.handlers[tess_core.nhandlers].fn   = fn;
    *id_p = (uint16_t)tess_core.nhandlers++;
    return TESS_OK;
}

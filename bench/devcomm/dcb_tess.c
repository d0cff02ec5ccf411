/*
 * dcb_tess.c — the Tessera side of bench_devcomm: device messages between elements on global
 * PEs 0 and 1 (two PEs of one process, or one PE in each of two processes).
 *
 *   ping-pong   elements 0 and 1 send the same buffer back and forth: the entry that receives
 *               sends its destination buffer back. With WAIT_COMPLETE the entry runs once the
 *               data is in place; without, as soon as the copy is enqueued (stream-ordered
 *               delivery), and the last arrival is waited for with tess_gpu_then.
 *   stream      element 0 keeps `window` messages in flight to element 1, each from its own
 *               source buffer, sending the next from a buffer when its source-done callback
 *               says it may be reused; the time runs until the last message completed at the
 *               receiver (a continuation there, then a host message back).
 *   exchange    `odf` sender elements on PE 0 each send volume/odf bytes to a partner on PE 1,
 *               which sends them back (after the kernel over them, with `kernel`); the sender
 *               runs the kernel on what came back and waits for its stream; when every pair
 *               has completed, the next exchange starts.
 */
#include "dcb.h"

#include "devcomm/devcomm.h"

#include <stdlib.h>
#include <string.h>

typedef struct pair_elem {
    char *buf; /* element 0: the stream's sources / the ping-pong buffer; element 1: receive */
} pair_elem_t;

typedef struct seq_hdr {
    int64_t seq;
} seq_hdr_t;

static tess_array_h      pair, odfa;
static tess_gpu_stream_h aux; /* the main thread's, for filling and checking buffers */
static tess_entry_t E_PP_GO, E_PP_WC, E_PP_SO, E_PP_FIN;
static tess_entry_t E_ST_GO, E_ST_DATA, E_ST_FIN, E_ST_END;
static tess_entry_t E_OX_GO, E_OX_FWD, E_OX_BACK, E_OX_DONE;

/* The measurement in progress: set on the main thread before tess_run, read by the PEs. */
static struct {
    size_t size;
    int    iters, window, msgs, odf, kernel;
    size_t chunk;
} cur;

/* Per-process buffers of the exchange: senders' chunks and receivers' chunks. */
static char *ox_send, *ox_recv;

/* State of the side that runs on PE 0 (element 0, the senders) and on PE 1. */
static struct {
    double        t0;
    int64_t       count;
    int64_t       next;      /* stream: next message to send */
    tess_stream_t stream;    /* stream: element 0's */
    int           done;      /* exchange: pairs completed */
} pe0;
static struct {
    int64_t count;
} pe1;

static void ck(tess_status_t st, const char *what)
{
    if (st != TESS_OK)
        dcb_die("%s: %s", what, tess_error_detail());
}

static int pair_map(tess_index_t i, const int32_t ext[3], int npes, void *arg)
{
    (void)ext; (void)npes; (void)arg;
    return i.x; /* element 0 on PE 0, element 1 on PE 1 */
}

static int odf_map(tess_index_t i, const int32_t ext[3], int npes, void *arg)
{
    (void)ext; (void)npes; (void)arg;
    return i.x < DCB_ODF_MAX ? 0 : 1; /* senders on PE 0, receivers on PE 1 */
}

static void run_phase(tess_start_fn_t start, double *out)
{
    if (tess_run(TESS_RUN_UNTIL_EXIT, start, NULL) != TESS_OK)
        dcb_die("tess_run: %s", tess_error_detail());
    if (tess_result(out, sizeof(*out), NULL) != TESS_OK)
        dcb_die("tess_result: %s", tess_error_detail());
}

/* ---- ping-pong -------------------------------------------------------------------------------- */

static void pp_post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                    const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx; (void)header; (void)header_len; (void)stream_p;
    if (nbufs != 1 || sizes[0] != cur.size)
        dcb_die("ping-pong: a message of %d buffers (%zu bytes)", nbufs, nbufs ? sizes[0] : 0);
    dst[0] = ((pair_elem_t *)e)->buf;
}

static int pp_ready; /* sends as TESS_STREAM_READY (with E_PP_WC only: the data is in place) */

static void pp_send(tess_ctx_h ctx, pair_elem_t *pe, int64_t seq, tess_entry_t entry)
{
    seq_hdr_t      h = {seq};
    tess_dev_buf_t b = {pe->buf, cur.size};
    int            me = tess_ctx_index(ctx).x;
    tess_stream_t  from = pp_ready && entry == E_PP_WC ? TESS_STREAM_READY : NULL;
    tess_send_device(pair, tess_idx1(1 - me), entry, &h, sizeof(h), &b, 1, from, NULL, NULL);
}

static void pp_go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    int wc    = *(const int *)msg;
    pe0.count = 0;
    pe0.t0    = dcb_now();
    pp_send(ctx, e, 0, wc ? E_PP_WC : E_PP_SO);
}

static void pp_fin(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx; (void)e; (void)msg; (void)size;
    double dt = (dcb_now() - pe0.t0) / (2.0 * cur.iters);
    tess_exit_with(&dt, sizeof(dt));
}

static void pp_hop(tess_ctx_h ctx, void *e, const void *msg, tess_entry_t entry)
{
    seq_hdr_t h;
    memcpy(&h, msg, sizeof(h));
    if (tess_ctx_index(ctx).x == 1) {
        pp_send(ctx, e, h.seq, entry);
        return;
    }
    if (h.seq + 1 < cur.iters) {
        pp_send(ctx, e, h.seq + 1, entry);
        return;
    }
    if (entry == E_PP_WC)
        pp_fin(ctx, e, NULL, 0);
    else
        tess_gpu_then(ctx, E_PP_FIN, NULL, 0); /* the last copy has only been enqueued */
}

static void pp_wc(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    pp_hop(ctx, e, msg, E_PP_WC);
}

static void pp_so(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)size;
    pp_hop(ctx, e, msg, E_PP_SO);
}

static int pp_mode;

static void pp_start(void *arg)
{
    (void)arg;
    if (dcb.rank == 0)
        tess_send(pair, tess_idx1(0), E_PP_GO, &pp_mode, sizeof(pp_mode));
}

double dcb_tess_latency(size_t size, int iters, int wait_complete)
{
    cur.size  = size;
    cur.iters = iters;
    pp_mode   = wait_complete != 0;
    pp_ready  = wait_complete == 2;
    double dt;
    run_phase(pp_start, &dt);
    return dt;
}

/* ---- message stream --------------------------------------------------------------------------- */

static char *st_src; /* element 0's buffer, for the source-done callback (no ctx there) */

static void st_done(void *arg);

static void st_send(int64_t seq)
{
    seq_hdr_t      h    = {seq};
    int            slot = (int)(seq % cur.window);
    tess_dev_buf_t b    = {st_src + (size_t)slot * cur.size, cur.size};
    tess_send_device(pair, tess_idx1(1), E_ST_DATA, &h, sizeof(h), &b, 1, pe0.stream, st_done,
                     NULL);
}

/* On PE 0, outside any entry, when a source buffer may be reused: send the next message (the
 * slot of message k + window is the slot of message k). */
static void st_done(void *arg)
{
    (void)arg;
    if (pe0.next < cur.msgs)
        st_send(pe0.next++);
}

static void st_go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg; (void)size;
    st_src     = ((pair_elem_t *)e)->buf;
    pe0.stream = tess_ctx_stream(ctx);
    pe0.t0     = dcb_now();
    pe0.next   = 0;
    while (pe0.next < cur.window && pe0.next < cur.msgs)
        st_send(pe0.next++);
}

static void st_post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                    const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx; (void)header_len; (void)stream_p;
    seq_hdr_t h;
    memcpy(&h, header, sizeof(h));
    if (nbufs != 1 || sizes[0] != cur.size || h.seq < 0 || h.seq >= cur.msgs)
        dcb_die("stream: a message of %d buffers (%zu bytes), number %lld", nbufs,
                nbufs ? sizes[0] : 0, (long long)h.seq);
    dst[0] = ((pair_elem_t *)e)->buf + (size_t)(h.seq % cur.window) * cur.size;
}

static void st_data(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e; (void)msg; (void)size;
    if (++pe1.count == cur.msgs)
        tess_gpu_then(ctx, E_ST_FIN, NULL, 0);
}

static void st_fin(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx; (void)e; (void)msg; (void)size;
    tess_send(pair, tess_idx1(0), E_ST_END, NULL, 0);
}

static void st_end(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx; (void)e; (void)msg; (void)size;
    double dt = (dcb_now() - pe0.t0) / cur.msgs;
    tess_exit_with(&dt, sizeof(dt));
}

static void st_start(void *arg)
{
    (void)arg;
    if (dcb.rank == 0)
        tess_send(pair, tess_idx1(0), E_ST_GO, NULL, 0);
}

/* Bytes of message k at both ends of the stream are a function of (k, pattern). */
static unsigned char st_byte(int slot, int pattern)
{
    return (unsigned char)(0x11 * (slot + 1) + 7 * pattern);
}

double dcb_tess_stream(size_t size, int window, int msgs, int check)
{
    static int pattern;
    cur.size   = size;
    cur.window = window;
    cur.msgs   = msgs;
    pe1.count  = 0;
    pair_elem_t      *src = tess_array_local(pair, tess_idx1(0));
    pair_elem_t      *dst = tess_array_local(pair, tess_idx1(1));
    tess_stream_t     s   = (tess_stream_t)aux;
    if (check) {
        /* Fill every source slot and clear the receive slots before the phase starts. */
        pattern++;
        for (int k = 0; src && k < window; k++)
            ck(tess_gpu_memset_async(src->buf + (size_t)k * size, st_byte(k, pattern), size, s),
               "memset");
        if (dst)
            ck(tess_gpu_memset_async(dst->buf, 0, (size_t)window * size, s), "memset");
        ck(tess_gpu_stream_sync(s), "stream sync");
    }
    double dt;
    run_phase(st_start, &dt);
    int bad = 0;
    if (check && dst) {
        int            last = (msgs - 1) % window;
        unsigned char  probe[2][8];
        unsigned char *p = (unsigned char *)dst->buf + (size_t)last * size;
        size_t         n = size < 8 ? size : 8;
        ck(tess_gpu_memcpy_async(probe[0], p, n, s), "memcpy");
        ck(tess_gpu_memcpy_async(probe[1], p + size - n, n, s), "memcpy");
        ck(tess_gpu_stream_sync(s), "stream sync");
        for (size_t i = 0; i < n; i++)
            bad |= probe[0][i] != st_byte(last, pattern) || probe[1][i] != st_byte(last, pattern);
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any)
        dcb_die("stream of %d messages of %zu bytes: the last message arrived with wrong bytes",
                msgs, size);
    return dt;
}

/* ---- overdecomposed exchange ------------------------------------------------------------------ */

static char *ox_chunk(int linear)
{
    return linear < DCB_ODF_MAX ? ox_send + (size_t)linear * cur.chunk
                                : ox_recv + (size_t)(linear - DCB_ODF_MAX) * cur.chunk;
}

static void ox_post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                    const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)e; (void)header; (void)header_len; (void)stream_p;
    if (nbufs != 1 || sizes[0] != cur.chunk)
        dcb_die("exchange: a message of %d buffers (%zu bytes)", nbufs, nbufs ? sizes[0] : 0);
    dst[0] = ox_chunk((int)tess_ctx_linear(ctx));
}

static void ox_go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e; (void)msg; (void)size;
    int            me = (int)tess_ctx_linear(ctx);
    tess_dev_buf_t b  = {ox_chunk(me), cur.chunk};
    tess_send_device(odfa, tess_idx1(me + DCB_ODF_MAX), E_OX_FWD, NULL, 0, &b, 1, NULL, NULL,
                     NULL);
}

static void ox_fwd(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e; (void)msg; (void)size;
    int   me = (int)tess_ctx_linear(ctx);
    char *p  = ox_chunk(me);
    if (cur.kernel)
        dcb_scale(tess_ctx_stream(ctx), (float *)p, cur.chunk / sizeof(float));
    tess_dev_buf_t b = {p, cur.chunk};
    tess_send_device(odfa, tess_idx1(me - DCB_ODF_MAX), E_OX_BACK, NULL, 0, &b, 1, NULL, NULL,
                     NULL);
}

static void ox_back(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e; (void)msg; (void)size;
    if (cur.kernel)
        dcb_scale(tess_ctx_stream(ctx), (float *)ox_chunk((int)tess_ctx_linear(ctx)),
                  cur.chunk / sizeof(float));
    tess_gpu_then(ctx, E_OX_DONE, NULL, 0);
}

static void ox_done(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx; (void)e; (void)msg; (void)size;
    if (++pe0.done < cur.odf)
        return;
    pe0.done = 0;
    if (++pe0.count == cur.iters) {
        double dt = (dcb_now() - pe0.t0) / cur.iters;
        tess_exit_with(&dt, sizeof(dt));
        return;
    }
    for (int s = 0; s < cur.odf; s++)
        tess_send(odfa, tess_idx1(s), E_OX_GO, NULL, 0);
}

static void ox_start(void *arg)
{
    (void)arg;
    if (dcb.rank != 0)
        return;
    pe0.done  = 0;
    pe0.count = 0;
    pe0.t0    = dcb_now();
    for (int s = 0; s < cur.odf; s++)
        tess_send(odfa, tess_idx1(s), E_OX_GO, NULL, 0);
}

double dcb_tess_exchange(size_t volume, int odf, int iters, int kernel)
{
    cur.odf    = odf;
    cur.chunk  = volume / (size_t)odf;
    cur.iters  = iters;
    cur.kernel = kernel;
    double dt;
    run_phase(ox_start, &dt);
    return dt;
}

/* ---- set-up ----------------------------------------------------------------------------------- */

static void pair_ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx;
    size_t cap = *(size_t *)arg;
    ck(tess_gpu_malloc((void **)&((pair_elem_t *)e)->buf, cap), "device memory");
}

static void pair_dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx; (void)arg;
    tess_gpu_free(((pair_elem_t *)e)->buf);
}

static size_t pair_cap;

void dcb_tess_init(size_t cap, size_t odf_cap)
{
    ck(tess_entry_register("pp_go", pp_go, &E_PP_GO), "register");
    ck(tess_entry_register_device("pp_wc", pp_post, pp_wc, TESS_ENTRY_WAIT_COMPLETE, &E_PP_WC),
       "register");
    ck(tess_entry_register_device("pp_so", pp_post, pp_so, 0, &E_PP_SO), "register");
    ck(tess_entry_register("pp_fin", pp_fin, &E_PP_FIN), "register");
    ck(tess_entry_register("st_go", st_go, &E_ST_GO), "register");
    ck(tess_entry_register_device("st_data", st_post, st_data, 0, &E_ST_DATA), "register");
    ck(tess_entry_register("st_fin", st_fin, &E_ST_FIN), "register");
    ck(tess_entry_register("st_end", st_end, &E_ST_END), "register");
    ck(tess_entry_register("ox_go", ox_go, &E_OX_GO), "register");
    ck(tess_entry_register_device("ox_fwd", ox_post, ox_fwd, 0, &E_OX_FWD), "register");
    ck(tess_entry_register_device("ox_back", ox_post, ox_back, 0, &E_OX_BACK), "register");
    ck(tess_entry_register("ox_done", ox_done, &E_OX_DONE), "register");

    ck(tess_gpu->stream_create(&aux), "stream_create");
    pair_cap = cap;
    tess_array_params_t p = {
        .field_mask = TESS_ARRAY_FIELD_MAP | TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR,
        .name = "pair", .ndims = 1, .extents = {2}, .elem_size = sizeof(pair_elem_t),
        .ctor = pair_ctor, .dtor = pair_dtor, .ctor_arg = &pair_cap, .map = TESS_MAP_USER,
        .map_fn = pair_map};
    ck(tess_array_create(&p, &pair), "tess_array_create");
    tess_array_params_t q = {
        .field_mask = TESS_ARRAY_FIELD_MAP | TESS_ARRAY_FIELD_NAME, .name = "odf", .ndims = 1,
        .extents = {2 * DCB_ODF_MAX}, .map = TESS_MAP_USER, .map_fn = odf_map};
    ck(tess_array_create(&q, &odfa), "tess_array_create");
    /* One allocation per side, chunks handed to the elements by offset. */
    if (odf_cap) {
        if (tess_pe_process(0) == dcb.rank)
            ck(tess_gpu_malloc((void **)&ox_send, odf_cap), "device memory");
        if (tess_pe_process(1) == dcb.rank)
            ck(tess_gpu_malloc((void **)&ox_recv, odf_cap), "device memory");
    }
}

void dcb_tess_fini(void)
{
    MPI_Barrier(MPI_COMM_WORLD); /* nobody frees memory another still maps */
    if (ox_send)
        tess_gpu_free(ox_send);
    if (ox_recv)
        tess_gpu_free(ox_recv);
    tess_array_destroy(odfa);
    tess_array_destroy(pair);
    tess_gpu->stream_destroy(aux);
}

int dcb_tess_path_taken(void)
{
    tess_dc_stats_t st;
    tess_dc_get_stats(&st);
    uint64_t v[7] = {st.sent[0], st.sent[1], st.sent[2], st.staged, st.direct, st.rdma_staged,
                     st.rdma_direct};
    uint64_t sum[7];
    MPI_Allreduce(v, sum, 7, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    int used = (sum[0] > 0) + (sum[1] > 0) + (sum[2] > 0);
    if (used != 1)
        return -1;
    if (sum[0])
        return DCB_D2D;
    if (sum[1])
        return sum[3] && !sum[4] ? DCB_IPC_STAGED : sum[4] && !sum[3] ? DCB_IPC_DIRECT : -1;
    return sum[5] && !sum[6] ? DCB_RDMA_STAGED : sum[6] && !sum[5] ? DCB_RDMA_DIRECT : -1;
}

void dcb_tess_rdma_counts(uint64_t counts[DCB_RDMA_COUNTS])
{
    tess_dc_stats_t st;
    tess_dc_get_stats(&st);
    uint64_t v[DCB_RDMA_COUNTS] = {st.rdma_direct, st.rdma_recv_queries, st.rdma_quiet_recvs,
                                   st.am_sends, st.rdma_acks};
    MPI_Allreduce(v, counts, DCB_RDMA_COUNTS, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
}

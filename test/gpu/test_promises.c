/*
 * test_promises MODE: the ordering promises of device entries' flags and of TESS_STREAM_READY,
 * kept (MODE ok) or broken one at a time, for the checking mode (TESS_CHECK=1) to catch. Element
 * 0 sends 4 KiB device buffers to element 1; every byte that arrives is checked in ok mode.
 *
 *   ok        every protocol below done right: the run must succeed, with or without checks.
 *   ready     a send marked TESS_STREAM_READY while a copy enqueued before it (behind a 50 ms
 *             host kernel) still writes the buffer.
 *   in_place  a buffer taken in place (TESS_ENTRY_IN_PLACE) that the sender overwrites right
 *             after the send, while the receiver's work on it (50 ms, then a copy) runs.
 *   sender_ordered  TESS_ENTRY_BATCH | TESS_ENTRY_SENDER_ORDERED into two buffers by step parity,
 *             where the receiver acknowledges a step from its entry instead of after the work it
 *             enqueued on it (50 ms): step 2 lands in step 0's buffer while that work still runs.
 *   batch     TESS_ENTRY_BATCH whose post function chooses the buffer by a count the entry
 *             advances: two messages in one batch, both posted into the same buffer.
 *
 * Broken modes are misuse entries (test/misuse/testlist): with TESS_CHECK=1 each must die with
 * the report of its promise. Line numbers of the sends are pinned (#line) for those reports.
 */
#include "tess_test.h"

#include <string.h>
#include <time.h>

#define BUF   4096
#define STEPS 4

enum { M_OK, M_READY, M_IN_PLACE, M_SENDER_ORDERED, M_BATCH };
static int mode;

enum { K_READY, K_IN_PLACE, K_SO, K_BATCH, K_N };

typedef struct elem {
    uint8_t *src[K_N][2]; /* sender: per kind of message, by step parity */
    uint8_t *dst[K_N][2]; /* receiver: by step parity (or count parity, batch mode) */
    uint8_t *where;       /* receiver, in place: where the post function left the data */
    uint8_t *copy;        /* receiver: what it read of each (kind, step), checked on the host */
    uint8_t  host[BUF];
    int      count;      /* receiver: messages whose entry ran */
    int      checked, errors;
    int      steps_done; /* sender: acknowledged steps */
} elem_t;

typedef struct hdr {
    int32_t kind, step;
} hdr_t;

static tess_array_h arr;
static tess_entry_t E_GO, E_PLAIN, E_IN_PLACE, E_SO, E_BATCH, E_ACK, E_VERIFY;

static uint8_t byte_of(int kind, int step, size_t i)
{
    return (uint8_t)test_mix(((uint64_t)kind << 40) ^ ((uint64_t)step << 20) ^ i);
}

static void nap(void *args)
{
    int ms;
    memcpy(&ms, args, sizeof(ms));
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void enqueue_nap(tess_stream_t s, int ms)
{
    CHECK_OK(tess_gpu_launch_host(s, nap, &ms, sizeof(ms)));
}

/* Fill the sender's buffer for (kind, step) in its stream order. */
static void fill(tess_ctx_h ctx, elem_t *el, uint8_t *buf, int kind, int step)
{
    (void)ctx;
    for (size_t i = 0; i < BUF; i++)
        el->host[i] = byte_of(kind, step, i);
    CHECK_OK(tess_gpu_memcpy_async(buf, el->host, BUF, tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx))); /* el->host is reused */
}

static void ctor(tess_ctx_h ctx, void *p, void *arg)
{
    (void)ctx;
    (void)arg;
    elem_t *el = p;
    for (int k = 0; k < K_N; k++)
        for (int i = 0; i < 2; i++) {
            CHECK_OK(tess_gpu_malloc((void **)&el->src[k][i], BUF));
            CHECK_OK(tess_gpu_malloc((void **)&el->dst[k][i], BUF));
        }
    CHECK_OK(tess_gpu_malloc((void **)&el->copy, (size_t)K_N * STEPS * BUF));
}

static void dtor(tess_ctx_h ctx, void *p, void *arg)
{
    (void)ctx;
    (void)arg;
    elem_t *el = p;
    for (int k = 0; k < K_N; k++)
        for (int i = 0; i < 2; i++) {
            tess_gpu_free(el->src[k][i]);
            tess_gpu_free(el->dst[k][i]);
        }
    tess_gpu_free(el->copy);
}

/* The receiver checks what it read (el->copy) on the host, in a continuation. */
static uint8_t *copy_of(elem_t *el, const hdr_t *h)
{
    CHECK(h->kind >= 0 && h->kind < K_N && h->step >= 0 && h->step < STEPS);
    return el->copy + ((size_t)h->kind * STEPS + (size_t)h->step) * BUF;
}

static void read_and_check(tess_ctx_h ctx, elem_t *el, const uint8_t *from, const hdr_t *h)
{
    CHECK_OK(tess_gpu_memcpy_async(copy_of(el, h), from, BUF, tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_then(ctx, E_VERIFY, h, sizeof(*h)));
}

static void verify(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    CHECK(size == sizeof(hdr_t));
    elem_t *el = p;
    hdr_t   h;
    memcpy(&h, msg, sizeof(h));
    CHECK_OK(tess_gpu_memcpy_async(el->host, copy_of(el, &h), BUF, tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
    for (size_t i = 0; i < BUF; i++)
        if (el->host[i] != byte_of(h.kind, h.step, i)) {
            fprintf(stderr, "kind %d step %d: byte %zu is %02x, expected %02x\n", h.kind, h.step,
                    i, el->host[i], byte_of(h.kind, h.step, i));
            el->errors++;
            break;
        }
    el->checked++;
}

/* ---- TESS_STREAM_READY ----------------------------------------------------------------- */

static void post_plain(tess_ctx_h ctx, void *e, const void *header, size_t header_len,
                       int nbufs, const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx, (void)header, (void)stream_p;
    CHECK(header_len == sizeof(hdr_t) && nbufs == 1 && sizes[0] == BUF);
    dst[0] = ((elem_t *)e)->dst[K_READY][0];
}

static void on_plain(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    CHECK(size == sizeof(hdr_t));
    read_and_check(ctx, e, ((elem_t *)e)->dst[K_READY][0], msg);
}

static void send_ready(tess_ctx_h ctx, elem_t *el)
{
    hdr_t          h = {K_READY, 0};
    tess_dev_buf_t b = {el->src[K_READY][0], BUF};
    fill(ctx, el, el->src[K_READY][0], K_READY, 0);
    if (mode == M_READY) { /* broken: a write still enqueued, behind 50 ms */
        enqueue_nap(tess_ctx_stream(ctx), 50);
        CHECK_OK(tess_gpu_memset_async(el->src[K_READY][0], 0x55, BUF, tess_ctx_stream(ctx)));
    }
#line 7001
    CHECK_OK(tess_send_device(arr, tess_idx1(1), E_PLAIN, &h, sizeof(h), &b, 1,
                              TESS_STREAM_READY, NULL, NULL));
}

/* ---- TESS_ENTRY_IN_PLACE --------------------------------------------------------------- */

static void post_in_place(tess_ctx_h ctx, void *e, const void *header, size_t header_len,
                          int nbufs, const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx, (void)header, (void)stream_p;
    CHECK(header_len == sizeof(hdr_t) && nbufs == 1 && sizes[0] == BUF);
    elem_t *el = e;
    if (!dst[0]) /* another process: no offer */
        dst[0] = el->dst[K_IN_PLACE][0];
    el->where = dst[0]; /* else the sender's buffer, taken in place */
}

/* Reads the sender's buffer where it lies, 50 ms from now; the sender may reuse it once the
 * acknowledgement, sent after that read in stream order, arrives. */
static void on_in_place(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    CHECK(size == sizeof(hdr_t));
    elem_t *el = e;
    hdr_t   h;
    memcpy(&h, msg, sizeof(h));
    enqueue_nap(tess_ctx_stream(ctx), 50);
    read_and_check(ctx, el, el->where, &h);
}

static void send_in_place(tess_ctx_h ctx, elem_t *el)
{
    hdr_t          h = {K_IN_PLACE, 0};
    tess_dev_buf_t b = {el->src[K_IN_PLACE][0], BUF};
    fill(ctx, el, el->src[K_IN_PLACE][0], K_IN_PLACE, 0);
#line 7101
    CHECK_OK(tess_send_device(arr, tess_idx1(1), E_IN_PLACE, &h, sizeof(h), &b, 1, NULL, NULL,
                              NULL));
    if (mode == M_IN_PLACE) /* broken: the receiver's read is still to come */
        CHECK_OK(tess_gpu_memset_async(el->src[K_IN_PLACE][0], 0x55, BUF,
                                       tess_ctx_stream(ctx)));
}

/* ---- TESS_ENTRY_BATCH | TESS_ENTRY_SENDER_ORDERED --------------------------------------- */

static void post_so(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                    const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx, (void)stream_p;
    CHECK(header_len == sizeof(hdr_t) && nbufs == 1 && sizes[0] == BUF);
    dst[0] = ((elem_t *)e)->dst[K_SO][((const hdr_t *)header)->step % 2];
}

static void send_so(tess_ctx_h ctx, elem_t *el, int step)
{
    hdr_t          h = {K_SO, step};
    tess_dev_buf_t b = {el->src[K_SO][step % 2], BUF};
    fill(ctx, el, el->src[K_SO][step % 2], K_SO, step);
#line 7201
    CHECK_OK(tess_send_device(arr, tess_idx1(1), E_SO, &h, sizeof(h), &b, 1, NULL, NULL, NULL));
}

static void on_so(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    CHECK(size == sizeof(hdr_t));
    elem_t *el = e;
    hdr_t   h;
    memcpy(&h, msg, sizeof(h));
    enqueue_nap(tess_ctx_stream(ctx), 50); /* the use of this step's buffer */
    read_and_check(ctx, el, el->dst[K_SO][h.step % 2], &h);
    if (mode == M_SENDER_ORDERED) /* broken: acknowledged before the use completes */
        CHECK_OK(tess_send(arr, tess_idx1(0), E_ACK, &h, sizeof(h)));
    /* ok: verify acknowledges, after the use (a continuation on the stream) */
}

/* ---- TESS_ENTRY_BATCH ------------------------------------------------------------------ */

static void post_batch(tess_ctx_h ctx, void *e, const void *header, size_t header_len,
                       int nbufs, const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx, (void)stream_p;
    CHECK(header_len == sizeof(hdr_t) && nbufs == 1 && sizes[0] == BUF);
    elem_t *el = e;
    /* broken: the count is the entry's, which a batch runs after every post */
    dst[0] = el->dst[K_BATCH][mode == M_BATCH ? el->count % 2
                                              : ((const hdr_t *)header)->step % 2];
}

static void on_batch(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    CHECK(size == sizeof(hdr_t));
    elem_t *el = e;
    hdr_t   h;
    memcpy(&h, msg, sizeof(h));
    read_and_check(ctx, el, el->dst[K_BATCH][h.step % 2], &h);
    el->count++;
}

static void send_batch(tess_ctx_h ctx, elem_t *el)
{
    hdr_t           h[2] = {{K_BATCH, 0}, {K_BATCH, 1}};
    tess_dev_buf_t  b[2] = {{el->src[K_BATCH][0], BUF}, {el->src[K_BATCH][1], BUF}};
    tess_dev_send_t s[2];
    for (int i = 0; i < 2; i++) {
        fill(ctx, el, el->src[K_BATCH][i], K_BATCH, i);
        s[i] = (tess_dev_send_t){arr, tess_idx1(1), E_BATCH, &h[i], sizeof(h[i]), &b[i], 1,
                                 NULL, NULL};
    }
#line 7301
    CHECK_OK(tess_send_device_many(s, 2, NULL));
}

/* ---- the protocol ---------------------------------------------------------------------- */

/* On the sender: the receiver is done with step h->step of kind h->kind. */
static void on_ack(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    CHECK(size == sizeof(hdr_t));
    elem_t *el = e;
    hdr_t   h;
    memcpy(&h, msg, sizeof(h));
    if (h.kind == K_SO && h.step + 1 < STEPS)
        send_so(ctx, el, h.step + 1);
    el->steps_done++;
}

static void go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    if (tess_ctx_linear(ctx) != 0)
        return;
    if (mode == M_OK || mode == M_READY)
        send_ready(ctx, el);
    if (mode == M_OK || mode == M_IN_PLACE)
        send_in_place(ctx, el);
    if (mode == M_OK || mode == M_SENDER_ORDERED)
        send_so(ctx, el, 0);
    if (mode == M_OK || mode == M_BATCH)
        send_batch(ctx, el);
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        tess_broadcast(arr, E_GO, NULL, 0);
}

static void verify_and_ack(tess_ctx_h ctx, void *p, const void *msg, size_t size)
{
    verify(ctx, p, msg, size);
    hdr_t h;
    memcpy(&h, msg, sizeof(h));
    if (h.kind == K_SO && mode != M_SENDER_ORDERED) /* after the use, in stream order */
        CHECK_OK(tess_send(arr, tess_idx1(0), E_ACK, &h, sizeof(h)));
}

static int64_t sums[3];
static void collect(tess_ctx_h ctx, void *p, void *arg)
{
    (void)ctx, (void)arg;
    elem_t *el = p;
    sums[0] += el->checked;
    sums[1] += el->errors;
    sums[2] += el->steps_done;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    test_skip_if_other_backend();
    static const char *const names[] = {"ok", "ready", "in_place", "sender_ordered", "batch"};
    mode = -1;
    for (int i = 0; argc > 1 && i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (!strcmp(argv[1], names[i]))
            mode = i;
    CHECK_MSG(mode >= 0, "usage: test_promises ok|ready|in_place|sender_ordered|batch");
    CHECK_OK(tess_entry_register("go", go, &E_GO));
    CHECK_OK(tess_entry_register_device("plain", post_plain, on_plain, 0, &E_PLAIN));
    CHECK_OK(tess_entry_register_device("in_place", post_in_place, on_in_place,
                                        TESS_ENTRY_IN_PLACE, &E_IN_PLACE));
    CHECK_OK(tess_entry_register_device("ordered", post_so, on_so,
                                        TESS_ENTRY_BATCH | TESS_ENTRY_SENDER_ORDERED, &E_SO));
    CHECK_OK(tess_entry_register_device("batched", post_batch, on_batch, TESS_ENTRY_BATCH,
                                        &E_BATCH));
    CHECK_OK(tess_entry_register("ack", on_ack, &E_ACK));
    CHECK_OK(tess_entry_register("verify", verify_and_ack, &E_VERIFY));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR,
                             .name = "prom", .ndims = 1, .extents = {2},
                             .elem_size = sizeof(elem_t), .ctor = ctor, .dtor = dtor};
    CHECK_OK(tess_array_create(&p, &arr));
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    CHECK_OK(tess_array_foreach(arr, collect, NULL));
    int64_t all[3];
    MPI_Allreduce(sums, all, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    /* ok: one ready, one in place, STEPS ordered, two batched messages, all acknowledged */
    int64_t want = mode == M_OK ? 1 + 1 + STEPS + 2 : -1;
    if (mode == M_OK)
        CHECK_MSG(all[0] == want && all[1] == 0 && all[2] == STEPS, "checked %lld of %lld "
                  "messages, %lld wrong, %lld steps acknowledged", (long long)all[0],
                  (long long)want, (long long)all[1], (long long)all[2]);
    if (tess_process() == 0)
        printf("promises (%s, checks %s): %lld messages checked: %s\n", names[mode],
               getenv("TESS_CHECK") ? getenv("TESS_CHECK") : "off", (long long)all[0],
               all[1] ? "WRONG" : "ok");
    test_fini();
    return all[1] ? 1 : 0;
}

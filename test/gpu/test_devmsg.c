/*
 * test_devmsg: device messages over whatever path the environment selects (TESS_DEVCOMM_PATH,
 * TESS_IPC, TESS_RDMA, TESS_VNODE_SIZE, TESS_COMM_BUF, …), on any backend.
 *
 * Every element sends MSGS messages to targets drawn from a seeded generator (others, itself,
 * elements on its own PE and elsewhere), each with 0-3 device buffers of mixed sizes (0 B to
 * 300 KB) and a header. The payload bytes are a function of (sender, message, buffer, byte),
 * written on the host and copied to the device on the sender's stream right before the send,
 * so a transfer not ordered after that copy shows up as wrong bytes. The receiving entry copies
 * the buffers back to the host on its own stream (stream order after the delivery) and checks
 * every byte in a continuation. Every receiver knows how many messages to expect by replaying
 * the generators. Source-done callbacks are counted. Runs to quiescence.
 *
 * TEST_WAIT_COMPLETE=1: the entry is registered with TESS_ENTRY_WAIT_COMPLETE and copies the
 * buffers back on the default stream, which nothing orders after the delivery: the bytes are
 * right only if the data really was in place when the entry ran.
 *
 * TEST_RECV_BATCH=1: the entry is registered with TESS_ENTRY_BATCH (its post function keeps
 * what it chose per message, so it allows posts ahead of deliveries); same-process receives
 * must then have gone in batches (the d2d_batched counter), with every byte right.
 * TEST_EXPECT_SHARED=1: some batches must have served several streams in one copy operation
 * (TESS_BATCH_STREAM=on, the PE's batch stream).
 * TEST_EXPECT_RDMA_FAST=1 (one PE per process): every direct RDMA receive must have run its
 * entry on the PE that saw its gets complete (rdma_fast_recvs).
 * TEST_IN_PLACE=1: the entry is registered with TESS_ENTRY_IN_PLACE. The post function must be
 * offered exactly the sender's buffers for a message from its own process and nothing for one
 * from another; it takes the even messages' offers in place (the check then reads the sender's
 * memory, which stays unchanged until the end) and names its own buffers for the odd ones, and
 * the runtime's in-place count must equal what the post functions kept. TEST_IN_PLACE=2: every
 * offer is taken in place (batches with nothing to copy; with TEST_EXPECT_SHARED=1 some of them
 * must be ordered through the PE's batch stream).
 * TEST_SLOW_EVEN_US=N: the even elements' streams sleep N us before their source copies.
 * TEST_SAME_DST=1 (with TEST_RECV_BATCH=1, within one process): the post function names one
 * destination per element and buffer index for every message, so the receives a PE holds back
 * overlap; each must be delivered (and its check copied out, in stream order) before the next
 * one's copy lands there: the bytes are right only if the runtime sees the overlaps.
 */
#include "tess_test.h"
#include "devcomm/devcomm.h"

#include <stdatomic.h>
#include <string.h>
#include <strings.h>
#include <tessera/gpu.h>
#include <time.h>

#define MAX_BUFS 3

/* TEST_MSGS: messages per element; TEST_MAX_SIZE: largest buffer; TEST_BATCH: messages per
 * tess_send_device_many (1: tess_send_device); TEST_EXPECT_PATH=d2d, ipc or rdma: every message
 * between two processes took that path and every one within a process took d2d (all of them
 * rdma where TESS_DEVCOMM_PATH=rdma forces it), counted by the receivers against the paths'
 * counters (another name is an error); ipc,rdma (virtual nodes of several processes): those
 * between processes took one of the two, and each some; TEST_EXPECT_DEFERRED=1: some sends must have waited for
 * a staging resource (the exhaustion runs); TEST_EXPECT_PARTS=1: some staged IPC messages must
 * have moved in parts (larger than a quarter of the comm buffer). */
static int    MSGS = 40;
static size_t max_size = SIZE_MAX;

static const size_t sizes_menu[] = {0, 8, 1000, 4103, 70001, 300007};

typedef struct hdr {
    int32_t  src, seq, nbufs, proc; /* proc: the sender's process */
    uint64_t sizes[MAX_BUFS];
    uint64_t ptr[MAX_BUFS];         /* the sender's buffers (TEST_IN_PLACE checks the offer) */
} hdr_t;

/* Destinations the post function chose, found again by the entry through (src, seq): with
 * RDMA several messages can be posted before the first one's entry runs. */
typedef struct posted {
    struct posted *next;
    int32_t        src, seq;
    void          *dev[MAX_BUFS];
    int            own[MAX_BUFS]; /* dev[b] is ours (not the sender's, taken in place) */
} posted_t;

typedef struct elem {
    int64_t  sent, received, checked, done, expected;
    int64_t  from_here;  /* received from an element of this process */
    posted_t *posted;
    posted_t *later;   /* TEST_SRC_STREAM=busy: delivered, checked after the run */
    int      errors;
    int64_t  offered, kept; /* TEST_IN_PLACE: buffers offered in place, and taken */
    int      pe;       /* where go ran: every done callback must run there too */
    /* Host copies the sender keeps until its device copy ran (freed at the end). */
    void   *(*host_src)[MAX_BUFS];
    void   *(*dev_src)[MAX_BUFS];
    _Atomic int hold_open; /* TEST_SRC_STREAM=busy: the stream's hold may end */
    void   *same[MAX_BUFS];    /* TEST_SAME_DST: the one destination of buffer b */
} elem_t;

typedef struct check {
    hdr_t  h;
    void  *dev[MAX_BUFS];
    int    own[MAX_BUFS];
    void  *host[MAX_BUFS];
} check_t;

static tess_array_h arr;
static int          wait_complete; /* TEST_WAIT_COMPLETE */
static int          in_place;      /* TEST_IN_PLACE */
static int          same_dst;      /* TEST_SAME_DST */
static tess_entry_t E_GO, E_MSG, E_CHECK;
static int64_t      n;

static uint64_t rng(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return test_mix(*s);
}

/* The plan of message `seq` of element `src`: target, number and sizes of buffers. */
static void plan(int64_t src, int seq, int64_t *dst, hdr_t *h)
{
    uint64_t s = (uint64_t)src * 1000003u + (uint64_t)seq * 7919u + 17;
    int      kind = (int)(rng(&s) % 8);
    if (kind == 0)
        *dst = src; /* to itself */
    else if (kind == 1)
        *dst = (src + 1) % n;
    else
        *dst = (int64_t)(rng(&s) % (uint64_t)n);
    memset(h, 0, sizeof(*h));
    h->src   = (int32_t)src;
    h->seq   = seq;
    h->nbufs = (int)(rng(&s) % (MAX_BUFS + 1));
    for (int b = 0; b < h->nbufs; b++) {
        h->sizes[b] = sizes_menu[rng(&s) % (sizeof(sizes_menu) / sizeof(sizes_menu[0]))];
        if (h->sizes[b] > max_size)
            h->sizes[b] = max_size;
    }
}

static uint8_t byte_of(int64_t src, int seq, int b, size_t i)
{
    return (uint8_t)test_mix(((uint64_t)src << 40) ^ ((uint64_t)seq << 20) ^ ((uint64_t)b << 16) ^
                             (i * 2654435761u));
}

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el   = e;
    int64_t me   = tess_ctx_linear(ctx);
    el->host_src = calloc((size_t)MSGS, sizeof(*el->host_src));
    el->dev_src  = calloc((size_t)MSGS, sizeof(*el->dev_src));
    CHECK(el->host_src && el->dev_src);
    for (int64_t src = 0; src < n; src++)
        for (int s = 0; s < MSGS; s++) {
            int64_t dst;
            hdr_t   h;
            plan(src, s, &dst, &h);
            el->expected += dst == me;
        }
}

static void done_cb(void *arg)
{
    elem_t *el = arg;
    if (tess_pe() != el->pe) {
        fprintf(stderr, "done callback on PE %d, the sender is on PE %d\n", tess_pe(), el->pe);
        el->errors++;
    }
    el->done++;
}

/* TEST_SRC_STREAM=busy: each sender's stream first runs a hold that lasts until its element
 * has made all its sends, so every send is ordered after pending work (the hold, then the
 * source copies from pinned memory); idle: the stream is synced before each send, so a
 * direct IPC send may skip ordering it; ready: every source is copied and the stream synced
 * before the first send, and the sends go as TESS_STREAM_READY; with one PE per process the
 * stream is also held meanwhile as for busy, and the sends must not wait for it (with more,
 * on CUDA, another PE's allocation or free waits for the held stream inside the driver and
 * holds up the sender's next call). Either way the data is checked. */
static int src_stream_mode; /* 0 as it comes, 1 busy, 2 idle, 3 ready */
static int batch = 1;
static _Atomic int hold_timeouts;

static void hold_stream(void *args)
{
    _Atomic int *open;
    memcpy(&open, args, sizeof(open));
    struct timespec nap = {0, 100 * 1000};
    for (int i = 0; !atomic_load(open); i++) {
        if (i == 100000) { /* 10 s: the element never finished its sends */
            atomic_fetch_add(&hold_timeouts, 1);
            return;
        }
        nanosleep(&nap, NULL);
    }
}

/* TEST_SLOW_EVEN_US=N: the even elements' streams first sleep N us, so their source copies
 * land well after the odd elements' streams are free: a receiver not ordered after its sender
 * reads the bytes before them. */
static int slow_even_us;

static void sleep_stream(void *args)
{
    int us;
    memcpy(&us, args, sizeof(us));
    struct timespec nap = {us / 1000000, (long)(us % 1000000) * 1000};
    nanosleep(&nap, NULL);
}

static void go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    elem_t       *el = e;
    int64_t       me = tess_ctx_linear(ctx);
    tess_stream_t st = tess_ctx_stream(ctx);
    el->pe           = tess_pe();
    /* Every buffer is made first: an allocation may wait for the device, which the hold
     * keeps busy until the sends are made (CUDA: a deadlock until the hold times out). */
    for (int s = 0; s < MSGS; s++) {
        int64_t dst;
        hdr_t   h;
        plan(me, s, &dst, &h);
        for (int b = 0; b < h.nbufs; b++) {
            if (!h.sizes[b])
                continue;
            /* Pinned when the stream is held: CUDA may complete a copy from pageable memory
             * before returning, which would wait out the hold. Pinned too when every message
             * is read in place (TEST_IN_PLACE=2): the source copy is then still in flight when
             * the message goes, and a receiver not ordered after it reads stale bytes. */
            uint8_t *host = NULL;
            if (src_stream_mode == 1 || in_place == 2)
                CHECK_OK(tess_gpu_malloc_host((void **)&host, h.sizes[b]));
            else
                host = malloc(h.sizes[b]);
            CHECK(host);
            for (size_t i = 0; i < h.sizes[b]; i++)
                host[i] = byte_of(me, s, b, i);
            CHECK_OK(tess_gpu_malloc(&el->dev_src[s][b], h.sizes[b]));
            el->host_src[s][b] = host;
        }
    }
    if (src_stream_mode == 3) {
        for (int s = 0; s < MSGS; s++) {
            int64_t dst;
            hdr_t   h;
            plan(me, s, &dst, &h);
            for (int b = 0; b < h.nbufs; b++)
                if (h.sizes[b])
                    CHECK_OK(tess_gpu_memcpy_async(el->dev_src[s][b], el->host_src[s][b],
                                                   h.sizes[b], st));
        }
        CHECK_OK(tess_gpu_stream_sync(st));
    }
    if (slow_even_us > 0 && me % 2 == 0)
        CHECK_OK(tess_gpu_launch_host(st, sleep_stream, &slow_even_us, sizeof(slow_even_us)));
    if (src_stream_mode == 1 || (src_stream_mode == 3 && tess_ppn() == 1)) {
        _Atomic int *open = &el->hold_open;
        atomic_store(open, 0);
        CHECK_OK(tess_gpu_launch_host(st, hold_stream, &open, sizeof(open)));
    }
    /* TEST_BATCH=k: groups of k messages go out through one tess_send_device_many. */
    enum { GROUP_MAX = 8 };
    for (int s0 = 0; s0 < MSGS; s0 += batch) {
        int             k = TESS_MIN(batch, MSGS - s0);
        hdr_t           hs[GROUP_MAX];
        tess_dev_buf_t  bufs[GROUP_MAX][MAX_BUFS];
        tess_dev_send_t sends[GROUP_MAX];
        for (int g = 0; g < k; g++) {
            int     s = s0 + g;
            int64_t dst;
            hdr_t  *h = &hs[g];
            plan(me, s, &dst, h);
            h->proc = tess_process();
            for (int b = 0; b < h->nbufs; b++) {
                h->ptr[b]  = (uint64_t)(uintptr_t)el->dev_src[s][b];
                bufs[g][b] = (tess_dev_buf_t){el->dev_src[s][b], h->sizes[b]};
                if (h->sizes[b] && src_stream_mode != 3)
                    CHECK_OK(tess_gpu_memcpy_async(el->dev_src[s][b], el->host_src[s][b],
                                                   h->sizes[b], st));
            }
            sends[g] = (tess_dev_send_t){arr, tess_idx1((int32_t)dst), E_MSG, h, sizeof(*h),
                                         bufs[g], h->nbufs, done_cb, el};
        }
        if (src_stream_mode == 2)
            CHECK_OK(tess_gpu_stream_sync(st));
        tess_stream_t from = src_stream_mode == 3 ? TESS_STREAM_READY : NULL;
        if (batch == 1)
            CHECK_OK(tess_send_device(arr, sends[0].index, E_MSG, &hs[0], sizeof(hs[0]),
                                      bufs[0], hs[0].nbufs, from, done_cb, el));
        else
            CHECK_OK(tess_send_device_many(sends, k, from));
        el->sent += k;
    }
    atomic_store(&el->hold_open, 1);
}

/* Where each buffer goes: fresh device memory per message. */
static void post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                 const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx;
    (void)stream_p;
    CHECK(header_len == sizeof(hdr_t));
    const hdr_t *h = header;
    CHECK(nbufs == h->nbufs);
    elem_t   *el = e;
    posted_t *p  = calloc(1, sizeof(*p));
    CHECK(p);
    p->src = h->src;
    p->seq = h->seq;
    for (int b = 0; b < nbufs; b++) {
        CHECK(sizes[b] == h->sizes[b]);
        if (in_place && h->proc != tess_process())
            CHECK_MSG(!dst[b], "message %d of element %d (process %d): buffer %d offered in "
                      "place across processes", h->seq, h->src, h->proc, b);
        if (in_place && dst[b]) {
            CHECK_MSG(dst[b] == (void *)(uintptr_t)h->ptr[b], "message %d of element %d: "
                      "buffer %d offered at %p, sent from %p", h->seq, h->src, b, dst[b],
                      (void *)(uintptr_t)h->ptr[b]);
            el->offered += sizes[b] > 0;
            if ((h->seq % 2 == 0 || in_place == 2) && sizes[b]) {
                el->kept++;
                p->dev[b] = dst[b]; /* read where it lies */
                continue;
            }
        }
        dst[b] = NULL;
        if (same_dst && sizes[b]) {
            size_t most = max_size < sizes_menu[5] ? max_size : sizes_menu[5];
            if (!el->same[b])
                CHECK_OK(tess_gpu_malloc(&el->same[b], most));
            dst[b] = p->dev[b] = el->same[b];
            continue;
        }
        if (sizes[b])
            CHECK_OK(tess_gpu_malloc(&dst[b], sizes[b]));
        p->dev[b] = dst[b];
        p->own[b] = 1;
    }
    p->next    = el->posted;
    el->posted = p;
}

static posted_t *take_posted(elem_t *el, int32_t src, int32_t seq)
{
    for (posted_t **pp = &el->posted; *pp; pp = &(*pp)->next) {
        if ((*pp)->src == src && (*pp)->seq == seq) {
            posted_t *p = *pp;
            *pp         = p->next;
            return p;
        }
    }
    return NULL;
}

/* Copy the buffers of delivery p (header in c->h) to fresh host memory on stream st. */
static void copy_out(check_t *c, const posted_t *p, tess_stream_t st)
{
    for (int b = 0; b < c->h.nbufs; b++) {
        c->dev[b]  = p->dev[b];
        c->own[b]  = p->own[b];
        c->host[b] = NULL;
        if (!c->h.sizes[b])
            continue;
        c->host[b] = malloc(c->h.sizes[b]);
        CHECK(c->host[b]);
        memset(c->host[b], 0xA5, c->h.sizes[b]);
        CHECK_OK(tess_gpu_memcpy_async(c->host[b], c->dev[b], c->h.sizes[b], st));
    }
}

static void check_bytes(tess_ctx_h ctx, elem_t *el, const check_t *c);

static void on_msg(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    CHECK(size == sizeof(hdr_t));
    el->received++;
    check_t c;
    memcpy(&c.h, msg, sizeof(c.h));
    el->from_here += c.h.proc == tess_process();
    posted_t *p = take_posted(el, c.h.src, c.h.seq);
    CHECK_MSG(p, "message %d of element %d was delivered without being posted", c.h.seq, c.h.src);
    if (src_stream_mode == 1 || src_stream_mode == 3) {
        /* While streams are held (busy, ready), a copy to pageable memory or a free would wait
         * for the device, and may keep a sender from the sends that end its hold: check
         * later. */
        p->next   = el->later;
        el->later = p;
        return;
    }
    if (wait_complete) {
        /* The data is in place now: read it on a stream that waits for nothing. */
        copy_out(&c, p, NULL);
        free(p);
        CHECK_OK(tess_gpu_stream_sync(NULL));
        check_bytes(ctx, el, &c);
        return;
    }
    /* Stream order: the copies run after the delivery into the posted buffers. */
    copy_out(&c, p, tess_ctx_stream(ctx));
    free(p);
    CHECK_OK(tess_gpu_then(ctx, E_CHECK, &c, sizeof(c)));
}

/* Compare what arrived with what was sent; frees both copies. */
static void check_bytes(tess_ctx_h ctx, elem_t *el, const check_t *c)
{
    for (int b = 0; b < c->h.nbufs; b++) {
        if (!c->h.sizes[b])
            continue;
        const uint8_t *p = c->host[b];
        for (size_t i = 0; i < c->h.sizes[b]; i++) {
            if (p[i] != byte_of(c->h.src, c->h.seq, b, i)) {
                if (el->errors++ < 5)
                    fprintf(stderr, "element %lld: message %d of %d, buffer %d byte %zu: %02x "
                            "(expected %02x)\n", (long long)tess_ctx_linear(ctx), c->h.seq,
                            c->h.src, b, i, p[i], byte_of(c->h.src, c->h.seq, b, i));
                break;
            }
        }
        free(c->host[b]);
        if (c->own[b])
            CHECK_OK(tess_gpu_free(c->dev[b]));
    }
    el->checked++;
}

static void on_check(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    CHECK(size == sizeof(check_t));
    check_bytes(ctx, e, msg);
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        tess_broadcast(arr, E_GO, NULL, 0);
}

static int64_t totals[5];
static int     errors;

/* TEST_SRC_STREAM=busy or ready: the deliveries kept for now (every stream is idle), before
 * any element frees its sources (TEST_IN_PLACE: some of them are read where they lie). */
static void check_later(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el = e;
    for (posted_t *p = el->later, *next; p; p = next) {
        next = p->next;
        check_t c;
        int64_t dst;
        plan(p->src, p->seq, &dst, &c.h);
        copy_out(&c, p, tess_ctx_stream(ctx));
        CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
        check_bytes(ctx, el, &c);
        free(p);
    }
    el->later = NULL;
}

static void collect(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el = e;
    if (el->received != el->expected || el->checked != el->expected || el->done != el->sent ||
        el->sent != MSGS) {
        fprintf(stderr, "element %lld: sent %lld done %lld received %lld checked %lld "
                "expected %lld\n", (long long)tess_ctx_linear(ctx), (long long)el->sent,
                (long long)el->done, (long long)el->received, (long long)el->checked,
                (long long)el->expected);
        errors++;
    }
    errors += el->errors;
    totals[0] += el->sent;
    totals[1] += el->received;
    totals[2] += el->offered;
    totals[3] += el->kept;
    totals[4] += el->from_here;
    for (int s = 0; s < MSGS; s++)
        for (int b = 0; b < MAX_BUFS; b++) {
            if (src_stream_mode == 1 || in_place == 2)
                CHECK_OK(tess_gpu_free_host(el->host_src[s][b]));
            else
                free(el->host_src[s][b]);
            if (el->dev_src[s][b])
                tess_gpu_free(el->dev_src[s][b]);
        }
    free(el->host_src);
    free(el->dev_src);
    for (int b = 0; b < MAX_BUFS; b++)
        if (el->same[b])
            CHECK_OK(tess_gpu_free(el->same[b]));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    test_skip_if_other_backend();
    if (getenv("TEST_MSGS"))
        MSGS = atoi(getenv("TEST_MSGS"));
    if (getenv("TEST_MAX_SIZE"))
        max_size = (size_t)atol(getenv("TEST_MAX_SIZE"));
    CHECK(MSGS > 0);
    if (getenv("TEST_BATCH"))
        batch = atoi(getenv("TEST_BATCH"));
    if (getenv("TEST_SLOW_EVEN_US"))
        slow_even_us = atoi(getenv("TEST_SLOW_EVEN_US"));
    CHECK_MSG(batch >= 1 && batch <= 8, "TEST_BATCH=%d: 1 to 8", batch);
    const char *mode = getenv("TEST_SRC_STREAM");
    src_stream_mode  = !mode                  ? 0
                     : !strcmp(mode, "busy")  ? 1
                     : !strcmp(mode, "idle")  ? 2
                     : !strcmp(mode, "ready") ? 3
                                              : -1;
    CHECK_MSG(src_stream_mode >= 0, "TEST_SRC_STREAM=%s: busy, idle or ready", mode);
    n = 3 * (int64_t)tess_num_pes() + 1;
    CHECK_OK(tess_entry_register("go", go, &E_GO));
    wait_complete = getenv("TEST_WAIT_COMPLETE") && atoi(getenv("TEST_WAIT_COMPLETE"));
    int recv_batch = getenv("TEST_RECV_BATCH") && atoi(getenv("TEST_RECV_BATCH"));
    in_place       = getenv("TEST_IN_PLACE") ? atoi(getenv("TEST_IN_PLACE")) : 0;
    same_dst       = getenv("TEST_SAME_DST") && atoi(getenv("TEST_SAME_DST"));
    CHECK_MSG(!same_dst || (recv_batch && !in_place && !wait_complete && src_stream_mode == 0 &&
                            tess_num_processes() == 1),
              "TEST_SAME_DST=1 goes with TEST_RECV_BATCH=1 in one process, without "
              "TEST_IN_PLACE, TEST_WAIT_COMPLETE or TEST_SRC_STREAM");
    CHECK_OK(tess_entry_register_device("msg", post, on_msg,
                                        (wait_complete ? TESS_ENTRY_WAIT_COMPLETE : 0) |
                                            (recv_batch ? TESS_ENTRY_BATCH : 0) |
                                            (in_place ? TESS_ENTRY_IN_PLACE : 0),
                                        &E_MSG));
    CHECK_OK(tess_entry_register("check", on_check, &E_CHECK));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "devmsg", .ndims = 1,
                             .extents = {(int32_t)n}, .elem_size = sizeof(elem_t), .ctor = ctor};
    CHECK_OK(tess_array_create(&p, &arr));
    double t0 = MPI_Wtime();
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    double t1 = MPI_Wtime();
    CHECK_OK(tess_array_foreach(arr, check_later, NULL));
    MPI_Barrier(MPI_COMM_WORLD); /* every process checked what it read in place */
    CHECK_OK(tess_array_foreach(arr, collect, NULL));
    int64_t all[5];
    MPI_Allreduce(totals, all, 5, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    int all_errors = 0;
    MPI_Allreduce(&errors, &all_errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK_MSG(all_errors == 0, "%d errors", all_errors);
    CHECK(all[0] == n * MSGS && all[1] == n * MSGS);

    /* Which paths carried the messages (summed over processes). */
    tess_dc_stats_t st;
    tess_dc_get_stats(&st);
    uint64_t mine[13] = {st.sent[0], st.sent[1], st.sent[2], st.deferred,
                         st.staged + st.rdma_staged, st.direct + st.rdma_direct,
                         st.d2d_events, st.staged_parted, st.direct_idle, st.direct,
                         st.d2d_batched, st.d2d_rb_shared, st.d2d_in_place};
    uint64_t sum[13];
    MPI_Allreduce(mine, sum, 13, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    /* TEST_IN_PLACE: the runtime took in place exactly what the post functions kept (and, on
     * a path within a process, something was offered); without it, nothing. */
    CHECK_MSG(sum[12] == (uint64_t)all[3], "%llu buffers delivered in place, %lld kept by the "
              "post functions (%lld offered)", (unsigned long long)sum[12], (long long)all[3],
              (long long)all[2]);
    if (in_place && sum[0] > 0)
        CHECK_MSG(all[2] > 0 && all[3] > 0, "%llu d2d messages, %lld buffers offered in place, "
                  "%lld kept", (unsigned long long)sum[0], (long long)all[2], (long long)all[3]);
    /* TEST_EXPECT_SHARED=1 (with TESS_BATCH_STREAM=on): some batches served several elements'
     * streams with one copy operation on the PE's batch stream. */
    if (getenv("TEST_EXPECT_SHARED") && atoi(getenv("TEST_EXPECT_SHARED")))
        CHECK_MSG(sum[11] > 0, "no batch of d2d receives served several streams (%llu "
                  "batched receives)", (unsigned long long)sum[10]);
    /* TEST_EXPECT_SAME_STREAM=1 (TESS_STREAMS=1: every element on the one stream): d2d
     * receives took no wait for their senders; else some waits were skipped only if two
     * elements share a stream. */
    uint64_t same = st.d2d_same_stream, all_same = 0;
    MPI_Allreduce(&same, &all_same, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (getenv("TEST_EXPECT_SAME_STREAM") && atoi(getenv("TEST_EXPECT_SAME_STREAM")))
        CHECK_MSG(all_same > 0 && sum[0] > 0, "%llu d2d messages, %llu sender events not waited "
                  "for on the one stream", (unsigned long long)sum[0],
                  (unsigned long long)all_same);
    /* TEST_EXPECT_RDMA_IDLE=1 (idle source streams): direct RDMA announced without an event. */
    uint64_t idle_sends = st.rdma_idle_sends, all_idle_sends = 0;
    MPI_Allreduce(&idle_sends, &all_idle_sends, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (getenv("TEST_EXPECT_RDMA_IDLE") && atoi(getenv("TEST_EXPECT_RDMA_IDLE")))
        CHECK_MSG(all_idle_sends > 0, "no direct RDMA message left an idle stream at once");
    /* TEST_EXPECT_RDMA_FAST=1 (one PE per process, so the PE that receives is the one that
     * sees its gets complete): every direct RDMA receive ran its entry right there, without a
     * notice through the PE's queue or a wait on its stream. */
    uint64_t fast[2] = {st.rdma_fast_recvs, st.rdma_direct}, all_fast[2];
    MPI_Allreduce(fast, all_fast, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    /* TEST_SRC_STREAM=ready: every direct RDMA send was announced at once, none asked the
     * device about a stream or waited for an event. */
    if (src_stream_mode == 3)
        CHECK_MSG(all_idle_sends == all_fast[1], "%llu of %llu direct RDMA sends marked ready "
                  "were announced at once", (unsigned long long)all_idle_sends,
                  (unsigned long long)all_fast[1]);
    if (getenv("TEST_EXPECT_RDMA_FAST") && atoi(getenv("TEST_EXPECT_RDMA_FAST")))
        CHECK_MSG(all_fast[1] > 0 && all_fast[0] == all_fast[1], "%llu of %llu direct RDMA "
                  "receives were finished on the spot", (unsigned long long)all_fast[0],
                  (unsigned long long)all_fast[1]);
    if (recv_batch && sum[0] > 0)
        CHECK_MSG(sum[10] > 0, "none of %llu d2d receives went in a batch",
                  (unsigned long long)sum[0]);
    if (!recv_batch)
        CHECK_MSG(sum[10] == 0, "%llu d2d receives were batched for an entry without "
                  "TESS_ENTRY_BATCH", (unsigned long long)sum[10]);
    uint64_t groups = (uint64_t)n * (uint64_t)((MSGS + batch - 1) / batch);
    CHECK_MSG(sum[6] <= groups, "%llu events recorded for %llu batches of d2d sends",
              (unsigned long long)sum[6], (unsigned long long)groups);
    if (src_stream_mode == 1)
        CHECK_MSG(sum[6] > 0, "no d2d send from a busy stream recorded an event");
    CHECK_MSG(atomic_load(&hold_timeouts) == 0, "%d stream holds timed out",
              atomic_load(&hold_timeouts));
    /* Every d2d send is ordered after its stream by an event, one per batch, idle or not. */
    if (sum[1] == 0 && sum[2] == 0)
        CHECK_MSG(sum[6] == groups, "%llu events recorded for %llu batches of d2d sends",
                  (unsigned long long)sum[6], (unsigned long long)groups);
    /* Direct IPC likewise (waiting sends are not counted: they go from the runtime's stream). */
    if (src_stream_mode == 1)
        CHECK_MSG(sum[8] == 0, "%llu direct IPC sends from a busy stream were not ordered "
                  "after it", (unsigned long long)sum[8]);
    if (src_stream_mode == 2 && !getenv("TEST_EXPECT_DEFERRED"))
        CHECK_MSG(sum[8] == sum[9], "only %llu of %llu direct IPC sends from an idle stream "
                  "skipped the event", (unsigned long long)sum[8], (unsigned long long)sum[9]);
    const char *path = getenv("TEST_EXPECT_PATH");
    if (path) {
        static const char *const names[3] = {"d2d", "ipc", "rdma"};
        int  named[3] = {0, 0, 0};
        char list[64];
        snprintf(list, sizeof(list), "%s", path);
        for (char *save = NULL, *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
            int k = 0;
            while (k < 3 && strcmp(w, names[k]))
                k++;
            CHECK_MSG(k < 3, "TEST_EXPECT_PATH=%s: '%s' is not d2d, ipc or rdma", path, w);
            named[k] = 1;
        }
        const char *forced   = getenv("TESS_DEVCOMM_PATH");
        int         all_rdma = forced && !strcasecmp(forced, "rdma");
        uint64_t    local = (uint64_t)all[4], between = (uint64_t)(all[1] - all[4]);
        /* Within a process d2d (rdma when forced there too); between processes the paths
         * named; nothing else, and every path named carried some. */
        uint64_t want_d2d = all_rdma ? 0 : local;
        uint64_t across   = (named[1] ? sum[1] : 0) + (named[2] ? sum[2] : 0);
        int      ok       = sum[0] == want_d2d && sum[0] + sum[1] + sum[2] == (uint64_t)all[1] &&
                   across == between + (all_rdma ? local : 0);
        for (int k = 0; k < 3; k++)
            ok &= !named[k] || sum[k] > 0;
        CHECK_MSG(ok, "TEST_EXPECT_PATH=%s%s: d2d %llu, ipc %llu, rdma %llu messages; %llu "
                  "within processes, %llu between", path, all_rdma ? " (all forced to rdma)" : "",
                  (unsigned long long)sum[0], (unsigned long long)sum[1],
                  (unsigned long long)sum[2], (unsigned long long)local,
                  (unsigned long long)between);
    }
    if (getenv("TEST_EXPECT_PARTS"))
        CHECK_MSG(sum[7] > 0, "no staged IPC message moved in parts");
    if (getenv("TEST_EXPECT_DEFERRED"))
        CHECK_MSG(sum[3] > 0, "no send had to wait for a staging resource");
    if (tess_process() == 0)
        printf("devmsg: %lld messages among %lld elements on %d PEs (%s backend) in %.2f s: "
               "d2d %llu (batched %llu), ipc %llu, rdma %llu (staged %llu, direct %llu, in parts "
               "%llu), waited %llu: ok\n",
               (long long)all[0], (long long)n, tess_num_pes(), tess_gpu_backend_name(), t1 - t0,
               (unsigned long long)sum[0], (unsigned long long)sum[10], (unsigned long long)sum[1],
               (unsigned long long)sum[2],
               (unsigned long long)sum[4], (unsigned long long)sum[5], (unsigned long long)sum[7],
               (unsigned long long)sum[3]);
    test_fini();
    return 0;
}

/*
 * test_rdma_ack: acknowledgements of direct RDMA sends, which a receiving PE coalesces per
 * sender PE, must complete every send exactly once, on its sender, and never before the
 * receiver has taken the data. Run on 2 or more processes with TESS_VNODE_SIZE=1
 * TESS_RDMA=direct, any backend, any PEs per process.
 *
 * Every PE holds SENDERS elements; each streams MSGS device messages to an element of another
 * process (the targets spread over the processes, so that a receiving PE acknowledges sends of
 * several sender PEs at once), from WINDOW source buffers: message k + WINDOW is written into
 * the buffer of message k, and sent, from k's done callback. Each receiver takes a sender's
 * message k into its own slot for (sender, k mod WINDOW) and checks every byte in the entry
 * (WAIT_COMPLETE). So a done callback that runs early (an acknowledgement sent to the wrong PE
 * or naming the wrong send) refills a slot the receiver has not taken yet, and the receiver
 * sees the later message's bytes; one that runs twice finds its buffer not in flight; a lost
 * one leaves its sender short of MSGS at the end (the phase ends at quiescence). At the end
 * every sender has had exactly MSGS callbacks, every receiver exactly its senders' messages,
 * and the acknowledgements named every direct send once (tess_dc_stats_t rdma_acked).
 *
 * TEST_EXPECT_COALESCED=1: some acknowledgement named several sends (rdma_acks < rdma_acked).
 */
#include "tess_test.h"
#include "devcomm/devcomm.h"

#include <string.h>
#include <tessera/gpu.h>

#define SENDERS 3
#define WINDOW  3
#define SIZE    ((size_t)4096)
#define SRC_MAX 64 /* senders one element receives from, at most */

typedef struct slot_rec {
    struct elem *el;
    int          slot, busy;
    int64_t      k;       /* the message in flight from it */
} slot_rec_t;

typedef struct elem {
    int           index, target;
    tess_stream_t stream;                  /* for the sends made from done callbacks */
    void         *src;                     /* WINDOW source buffers */
    uint8_t      *stage;                   /* WINDOW host staging buffers */
    slot_rec_t    rec[WINDOW];
    int64_t       next, dones;
    /* as a receiver */
    int           nsrc, srcs[SRC_MAX];
    void         *dst;                     /* nsrc x WINDOW slots */
    uint8_t      *check;                   /* host copy of one slot */
    int64_t       got, wrong;
} elem_t;

typedef struct msg_hdr {
    int32_t src;
    int32_t pad;
    int64_t k;
} msg_hdr_t;

static tess_array_h arr;
static tess_entry_t E_GO, E_MSG;
static int          nelems, per_process;
static int64_t      msgs;

static uint8_t byte_of(int src, int64_t k, size_t i)
{
    return (uint8_t)test_mix(((uint64_t)src << 40) ^ ((uint64_t)k << 16) ^ i);
}

/* Element i's target: an element of another process, the processes taken in turn. */
static int target_of(int i)
{
    int nproc = tess_num_processes();
    int hop   = 1 + (i / SENDERS) % (nproc - 1);
    return (i + hop * per_process) % nelems;
}

static void on_done(void *arg);

static void send_msg(elem_t *el, int slot)
{
    slot_rec_t *r  = &el->rec[slot];
    int64_t     k  = el->next++;
    uint8_t    *st = el->stage + (size_t)slot * SIZE;
    char       *sb = (char *)el->src + (size_t)slot * SIZE;
    CHECK_MSG(!r->busy, "element %d: buffer %d refilled while message %lld is in flight",
              el->index, slot, (long long)r->k);
    for (size_t i = 0; i < SIZE; i++)
        st[i] = byte_of(el->index, k, i);
    CHECK_OK(tess_gpu_memcpy_async(sb, st, SIZE, el->stream));
    r->busy = 1;
    r->k    = k;
    msg_hdr_t      h = {el->index, 0, k};
    tess_dev_buf_t b = {sb, SIZE};
    CHECK_OK(tess_send_device(arr, tess_idx1(el->target), E_MSG, &h, sizeof(h), &b, 1,
                              el->stream, on_done, r));
}

/* The receiver has taken message r->k: its buffer may be refilled. */
static void on_done(void *arg)
{
    slot_rec_t *r  = arg;
    elem_t     *el = r->el;
    CHECK_MSG(r->busy, "element %d: a second done callback for buffer %d (message %lld)",
              el->index, r->slot, (long long)r->k);
    r->busy = 0;
    el->dones++;
    if (el->next < msgs)
        send_msg(el, r->slot);
}

static void on_go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    (void)size;
    elem_t *el = e;
    el->stream = tess_ctx_stream(ctx);
    for (int s = 0; s < WINDOW && el->next < msgs; s++)
        send_msg(el, s);
}

static int src_slot(const elem_t *el, int src)
{
    for (int i = 0; i < el->nsrc; i++)
        if (el->srcs[i] == src)
            return i;
    return -1;
}

static void post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                 const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx;
    (void)stream_p;
    elem_t   *el = e;
    msg_hdr_t h;
    CHECK(header_len == sizeof(h) && nbufs == 1 && sizes[0] == SIZE);
    memcpy(&h, header, sizeof(h));
    int s = src_slot(el, h.src);
    CHECK_MSG(s >= 0 && h.k >= 0 && h.k < msgs, "element %d: message %lld from element %d, "
              "which does not send to it", el->index, (long long)h.k, h.src);
    dst[0] = (char *)el->dst + ((size_t)s * WINDOW + (size_t)(h.k % WINDOW)) * SIZE;
}

static void on_msg(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t   *el = e;
    msg_hdr_t h;
    CHECK(size == sizeof(h));
    memcpy(&h, msg, sizeof(h));
    int   s    = src_slot(el, h.src);
    char *slot = (char *)el->dst + ((size_t)s * WINDOW + (size_t)(h.k % WINDOW)) * SIZE;
    CHECK_OK(tess_gpu_memcpy_async(el->check, slot, SIZE, tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_stream_sync(tess_ctx_stream(ctx)));
    size_t bad = 0;
    for (size_t i = 0; i < SIZE; i++)
        bad += el->check[i] != byte_of(h.src, h.k, i);
    if (bad && el->wrong++ < 5)
        fprintf(stderr, "element %d: message %lld from element %d has %zu wrong bytes (its "
                "buffer was refilled before this receive took it?)\n", el->index,
                (long long)h.k, h.src, bad);
    el->got++;
}

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el = e;
    el->index  = (int)tess_ctx_linear(ctx);
    el->target = target_of(el->index);
    for (int i = 0; i < nelems; i++)
        if (target_of(i) == el->index) {
            CHECK(el->nsrc < SRC_MAX);
            el->srcs[el->nsrc++] = i;
        }
    for (int s = 0; s < WINDOW; s++)
        el->rec[s] = (slot_rec_t){.el = el, .slot = s};
    CHECK_OK(tess_gpu_malloc(&el->src, WINDOW * SIZE));
    CHECK_OK(tess_gpu_malloc_host((void **)&el->stage, WINDOW * SIZE));
    CHECK_OK(tess_gpu_malloc_host((void **)&el->check, SIZE));
    if (el->nsrc)
        CHECK_OK(tess_gpu_malloc(&el->dst, (size_t)el->nsrc * WINDOW * SIZE));
}

static void start(void *arg)
{
    (void)arg;
    for (int i = 0; i < nelems; i++)
        if (tess_array_local(arr, tess_idx1(i)))
            CHECK_OK(tess_send(arr, tess_idx1(i), E_GO, NULL, 0));
}

static int64_t totals[4]; /* dones, got, expected receives, wrong */

static void collect(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx;
    (void)arg;
    elem_t *el = e;
    CHECK_MSG(el->dones == msgs && el->next == msgs, "element %d: %lld done callbacks, %lld "
              "sent, of %lld", el->index, (long long)el->dones, (long long)el->next,
              (long long)msgs);
    for (int s = 0; s < WINDOW; s++)
        CHECK_MSG(!el->rec[s].busy, "element %d: buffer %d still in flight", el->index, s);
    CHECK_MSG(el->got == el->nsrc * msgs, "element %d: %lld messages received of %lld",
              el->index, (long long)el->got, (long long)(el->nsrc * msgs));
    totals[0] += el->dones;
    totals[1] += el->got;
    totals[2] += el->nsrc * msgs;
    totals[3] += el->wrong;
    CHECK_OK(tess_gpu_free(el->src));
    CHECK_OK(tess_gpu_free_host(el->stage));
    CHECK_OK(tess_gpu_free_host(el->check));
    if (el->dst)
        CHECK_OK(tess_gpu_free(el->dst));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    test_skip_if_other_backend();
    CHECK_MSG(tess_num_processes() >= 2, "run on 2 or more processes (TESS_VNODE_SIZE=1)");
    per_process = tess_num_pes() / tess_num_processes() * SENDERS;
    nelems      = tess_num_pes() * SENDERS;
    msgs        = (int64_t)(300 * test_scale());
    if (msgs < 4 * WINDOW)
        msgs = 4 * WINDOW;
    CHECK_OK(tess_entry_register("go", on_go, &E_GO));
    CHECK_OK(tess_entry_register_device("msg", post, on_msg, TESS_ENTRY_WAIT_COMPLETE, &E_MSG));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "rdmaack",
                             .ndims = 1, .extents = {nelems}, .elem_size = sizeof(elem_t),
                             .ctor = ctor};
    CHECK_OK(tess_array_create(&p, &arr));
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    CHECK_OK(tess_array_foreach(arr, collect, NULL));
    int64_t all[4];
    MPI_Allreduce(totals, all, 4, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    tess_dc_stats_t st;
    tess_dc_get_stats(&st);
    uint64_t mine[3] = {st.rdma_direct, st.rdma_acks, st.rdma_acked}, sum[3];
    MPI_Allreduce(mine, sum, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (tess_process() == 0)
        printf("rdma_ack: %lld done callbacks, %lld messages received (%lld expected, %lld "
               "with wrong bytes); %llu direct sends, %llu acknowledgements naming %llu sends "
               "(%.2f a message)\n", (long long)all[0], (long long)all[1], (long long)all[2],
               (long long)all[3], (unsigned long long)sum[0], (unsigned long long)sum[1],
               (unsigned long long)sum[2], sum[0] ? (double)sum[1] / (double)sum[0] : 0.0);
    CHECK_MSG(all[3] == 0, "%lld messages arrived with another message's bytes",
              (long long)all[3]);
    CHECK_MSG(all[0] == nelems * msgs && all[1] == all[2] && all[1] == nelems * msgs,
              "%lld done callbacks and %lld receives of %lld messages", (long long)all[0],
              (long long)all[1], (long long)(nelems * msgs));
    CHECK_MSG(sum[0] == (uint64_t)(nelems * msgs), "%llu of %lld sends took the direct RDMA "
              "path (TESS_VNODE_SIZE=1 TESS_RDMA=direct?)", (unsigned long long)sum[0],
              (long long)(nelems * msgs));
    CHECK_MSG(sum[2] == sum[0], "acknowledgements named %llu sends of %llu",
              (unsigned long long)sum[2], (unsigned long long)sum[0]);
    const char *c = getenv("TEST_EXPECT_COALESCED");
    if (c && atoi(c))
        CHECK_MSG(sum[1] < sum[2], "no acknowledgement named more than one send (%llu for %llu)",
                  (unsigned long long)sum[1], (unsigned long long)sum[2]);
    test_fini();
    return 0;
}

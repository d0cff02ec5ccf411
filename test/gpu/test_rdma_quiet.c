/*
 * test_rdma_quiet: a direct RDMA receive into a buffer that the receiver's stream is still
 * reading must wait for that stream, also when the runtime skips asking the device because it
 * found the stream idle earlier (one PE per process: rdma_quiet_recvs). Run on 2 processes
 * with TESS_VNODE_SIZE=1 TESS_RDMA=direct, any backend.
 *
 * Element 0 (process 0) sends ROUNDS device messages, one buffer each, to element 1 (process
 * 1), which receives every one into the same buffer. Element 1's entry enqueues a copy of that
 * buffer to a host slot on its stream and asks for a continuation that checks the slot. In
 * three rounds of four it at once sends a host message back, on which element 0 sends the
 * next round: the next round's data may arrive while the copy of the last one is still queued
 * (TESS_HOST_JITTER_US makes that likely on the host backend). A get that did not wait for the
 * copy shows up as a slot holding a later round's bytes. In the fourth it asks for the next
 * round from the check, once the copy is done: that round lands on an idle stream, on a PE
 * that had nothing to do for a network round trip (however slow the machine).
 *
 * TEST_EXPECT_QUIET=1 (one PE per process): some receives must have started their gets
 * without a stream query (the PE had found the stream idle while it had nothing to do). A PE
 * that slept in between forgets what it found, so this mode spins for up to 0.2 s
 * (TESS_SPIN_US, unless set) on machines where a round trip outlasts the default spin.
 *
 * TEST_BURST=1: what a receive that found its stream idle leaves known must not outlive the
 * next message. Each round, element 0 sends, at once and together (sources ready, marked
 * TESS_STREAM_READY, so that the three usually arrive in one batch): device message A into
 * element 1's buffer X, a host message U, and device message B into its buffer Y. A finds the
 * stream idle; U's entry enqueues a copy of Y (still round r - 1's B) to a host slot and checks
 * it later; B's gets must wait for that copy, although nothing but U's entry ran since A. B's
 * entry asks for the next round. A get that did not wait shows up as a slot holding round r's
 * bytes.
 */
#include "tess_test.h"
#include "devcomm/devcomm.h"

#include <string.h>
#include <tessera/gpu.h>

#define ROUNDS 300
#define SIZE   ((size_t)16384)
#define SLOTS  8

typedef struct elem {
    int      sent, checked, errors;
    void    *dev;           /* element 0: the buffer sent; element 1: the one received into */
    uint8_t *host;          /* element 0: staging for the sent bytes; element 1: SLOTS slots */
} elem_t;

static tess_array_h arr;
static tess_entry_t E_NEXT, E_MSG, E_CHECK, E_USE;

static int burst; /* TEST_BURST */

/* Burst mode: element 0's sources, one a message (never reused), filled before the phase. */
static void *burst_src[2][ROUNDS];
static void *burst_y;      /* element 1's buffer Y (X is el->dev) */

typedef struct burst_hdr {
    int round, which;      /* which: 0 A (into X), 1 B (into Y) */
} burst_hdr_t;

static uint8_t byte_of(int round, size_t i)
{
    return (uint8_t)test_mix(((uint64_t)round << 32) ^ (i * 2654435761u));
}

/* Element 0: send round r, its bytes written on the stream right before the send. */
static void send_round(tess_ctx_h ctx, elem_t *el, int r)
{
    for (size_t i = 0; i < SIZE; i++)
        el->host[i] = byte_of(r, i);
    CHECK_OK(tess_gpu_memcpy_async(el->dev, el->host, SIZE, tess_ctx_stream(ctx)));
    tess_dev_buf_t b = {el->dev, SIZE};
    el->sent++;
    CHECK_OK(tess_send_device(arr, tess_idx1(1), E_MSG, &r, sizeof(r), &b, 1, NULL, NULL, NULL));
}

/* Element 0: element 1 has taken round r; the staging buffer is free once the stream has
 * copied it, which the next send's copy follows in stream order. */
/* Burst mode, element 0: A, U and B of round r, at once. */
static void send_burst(elem_t *el, int r)
{
    for (int which = 0; which < 2; which++) {
        burst_hdr_t    h = {r, which};
        tess_dev_buf_t b = {burst_src[which][r], SIZE};
        el->sent += which;
        CHECK_OK(tess_send_device(arr, tess_idx1(1), E_MSG, &h, sizeof(h), &b, 1,
                                  TESS_STREAM_READY, NULL, NULL));
        if (which == 0)
            CHECK_OK(tess_send(arr, tess_idx1(1), E_USE, &r, sizeof(r)));
    }
}

static void on_next(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    CHECK(size == sizeof(int));
    int r;
    memcpy(&r, msg, sizeof(r));
    if (r < ROUNDS && burst)
        send_burst(e, r);
    else if (r < ROUNDS)
        send_round(ctx, e, r);
}

static void post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                 const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx;
    (void)header;
    (void)stream_p;
    elem_t *el = e;
    CHECK(header_len == (burst ? sizeof(burst_hdr_t) : sizeof(int)) && nbufs == 1 &&
          sizes[0] == SIZE);
    burst_hdr_t h = {0, 0};
    if (burst)
        memcpy(&h, header, sizeof(h));
    dst[0] = h.which ? burst_y : el->dev;
}

/* Element 1: after round r, the next one is asked for from its check (once the copy is done),
 * else at once. */
static bool asks_late(int r)
{
    return r % 4 == 3;
}

/* Element 1: ask element 0 for round r + 1. */
static void ask_next(int r)
{
    int next = r + 1;
    CHECK_OK(tess_send(arr, tess_idx1(0), E_NEXT, &next, sizeof(next)));
}

/* Element 1: copy the buffer out on the stream, check it later, and (most rounds) ask for the
 * next one now, while the copy may still be queued. */
static void on_msg(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    if (burst) { /* B (in Y) asks for the next round; A only made the stream known idle */
        burst_hdr_t h;
        CHECK(size == sizeof(h));
        memcpy(&h, msg, sizeof(h));
        if (h.which)
            ask_next(h.round);
        return;
    }
    CHECK(size == sizeof(int));
    elem_t *el = e;
    int     r;
    memcpy(&r, msg, sizeof(r));
    uint8_t *slot = el->host + (size_t)(r % SLOTS) * SIZE;
    CHECK_OK(tess_gpu_memcpy_async(slot, el->dev, SIZE, tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_then(ctx, E_CHECK, &r, sizeof(r)));
    if (!asks_late(r))
        ask_next(r);
}

/* Burst mode, element 1: U of round r copies Y, which holds round r - 1's B, out on the
 * stream (B of round r arrives right behind U). */
static void on_use(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    CHECK(size == sizeof(int));
    elem_t *el = e;
    int     r;
    memcpy(&r, msg, sizeof(r));
    if (r == 0) {
        el->checked++;
        return;
    }
    uint8_t *slot = el->host + (size_t)(r % SLOTS) * SIZE;
    CHECK_OK(tess_gpu_memcpy_async(slot, burst_y, SIZE, tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_then(ctx, E_CHECK, &r, sizeof(r)));
}

/* The bytes of the data that round r's copy must have seen. */
static uint8_t expected_byte(int r, size_t i)
{
    return burst ? byte_of(2 * (r - 1) + 1, i) : byte_of(r, i);
}

static void on_check(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx;
    CHECK(size == sizeof(int));
    elem_t *el = e;
    int     r;
    memcpy(&r, msg, sizeof(r));
    const uint8_t *slot = el->host + (size_t)(r % SLOTS) * SIZE;
    for (size_t i = 0; i < SIZE; i++)
        if (slot[i] != expected_byte(r, i)) {
            if (el->errors++ < 5)
                fprintf(stderr, "round %d byte %zu: %02x (expected %02x): the get did not wait "
                        "for the receiver's stream\n", r, i, slot[i], expected_byte(r, i));
            break;
        }
    el->checked++;
    if (!burst && asks_late(r))
        ask_next(r);
}

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el = e;
    size_t  n  = tess_ctx_linear(ctx) == 0 ? SIZE : SLOTS * SIZE;
    CHECK_OK(tess_gpu_malloc_host((void **)&el->host, n));
    CHECK_OK(tess_gpu_malloc(&el->dev, SIZE));
    if (!burst)
        return;
    tess_stream_t s = tess_ctx_stream(ctx);
    if (tess_ctx_linear(ctx) == 1) {
        CHECK_OK(tess_gpu_malloc(&burst_y, SIZE));
        return;
    }
    /* Sources of A (even data numbers) and B (odd) of every round, complete before the phase. */
    for (int r = 0; r < ROUNDS; r++)
        for (int which = 0; which < 2; which++) {
            for (size_t i = 0; i < SIZE; i++)
                el->host[i] = byte_of(2 * r + which, i);
            CHECK_OK(tess_gpu_malloc(&burst_src[which][r], SIZE));
            CHECK_OK(tess_gpu_memcpy_async(burst_src[which][r], el->host, SIZE, s));
            CHECK_OK(tess_gpu_stream_sync(s));
        }
}

static void start(void *arg)
{
    (void)arg;
    int r = 0;
    if (tess_process() == 0)
        CHECK_OK(tess_send(arr, tess_idx1(0), E_NEXT, &r, sizeof(r)));
}

static int totals[3];

static void collect(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el = e;
    totals[tess_ctx_linear(ctx) == 0 ? 0 : 1] = tess_ctx_linear(ctx) == 0 ? el->sent : el->checked;
    totals[2] += el->errors;
    CHECK_OK(tess_gpu_free(el->dev));
    CHECK_OK(tess_gpu_free_host(el->host));
    if (burst && tess_ctx_linear(ctx) == 1)
        CHECK_OK(tess_gpu_free(burst_y));
    for (int r = 0; burst && tess_ctx_linear(ctx) == 0 && r < ROUNDS; r++)
        for (int which = 0; which < 2; which++)
            CHECK_OK(tess_gpu_free(burst_src[which][r]));
}

static bool expect_quiet(void)
{
    const char *v = getenv("TEST_EXPECT_QUIET");
    return v && atoi(v);
}

int main(int argc, char **argv)
{
    if (expect_quiet())
        setenv("TESS_SPIN_US", "200000", 0);
    const char *b = getenv("TEST_BURST");
    burst = b && atoi(b);
    test_init(&argc, &argv);
    test_skip_if_other_backend();
    CHECK_MSG(tess_num_processes() == 2, "run on 2 processes (TESS_VNODE_SIZE=1)");
    CHECK_OK(tess_entry_register("next", on_next, &E_NEXT));
    CHECK_OK(tess_entry_register_device("msg", post, on_msg, 0, &E_MSG));
    CHECK_OK(tess_entry_register("check", on_check, &E_CHECK));
    CHECK_OK(tess_entry_register("use", on_use, &E_USE));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "rdmaquiet",
                             .ndims = 1, .extents = {2}, .elem_size = sizeof(elem_t),
                             .ctor = ctor};
    CHECK_OK(tess_array_create(&p, &arr));
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    CHECK_OK(tess_array_foreach(arr, collect, NULL));
    int all[3];
    MPI_Allreduce(totals, all, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    tess_dc_stats_t st;
    tess_dc_get_stats(&st);
    uint64_t mine[3] = {st.rdma_direct, st.rdma_idle_recvs, st.rdma_quiet_recvs}, sum[3];
    MPI_Allreduce(mine, sum, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (tess_process() == 0)
        printf("rdma_quiet: %d rounds sent, %d checked, %d wrong; %llu direct receives, %llu "
               "started at once, %llu of them without a query\n", all[0], all[1], all[2],
               (unsigned long long)sum[0], (unsigned long long)sum[1],
               (unsigned long long)sum[2]);
    if (tess_process() == 1) /* the receiver's idle passes */
        printf("rdma_quiet: receiver's idle-pass questions: %llu idle, %llu busy; %llu idle "
               "answers spent on work before the receive\n",
               (unsigned long long)st.rdma_spec_idle, (unsigned long long)st.rdma_spec_busy,
               (unsigned long long)st.rdma_spec_spent);
    CHECK_MSG(all[0] == ROUNDS && all[1] == ROUNDS, "sent %d, checked %d of %d rounds", all[0],
              all[1], ROUNDS);
    CHECK_MSG(all[2] == 0, "%d rounds held a later round's bytes", all[2]);
    CHECK_MSG(sum[0] == (uint64_t)(burst ? 2 : 1) * ROUNDS, "%llu of %d sends took the direct RDMA path (TESS_VNODE_SIZE=1 "
              "TESS_RDMA=direct?)", (unsigned long long)sum[0], (burst ? 2 : 1) * ROUNDS);
    if (expect_quiet())
        CHECK_MSG(sum[2] > 0, "no direct receive started without a stream query (%llu of %d "
                  "started at once)", (unsigned long long)sum[1], ROUNDS);
    test_fini();
    return 0;
}

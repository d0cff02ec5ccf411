/* test_burst: a handler streaming small messages to another process.
 *
 * One sender element per PE; each invocation of its entry sends BURST numbered small messages
 * to its receiver on the next process (sizes vary, none over the coalescing limit), then waits
 * for the receiver's acknowledgement before the next burst. Receivers check that every message
 * arrives once, in order, intact. With TESS_COALESCE_BURST=1 (the default) every message of a
 * burst after its first leaves in a batch (tess_core_coalesce_stats), so each process must
 * count at least (BURST - 1) coalesced records per burst of its senders; with
 * TESS_COALESCE_BURST=0 the order and contents are checked alone. */
#include "tess_test.h"
#include "core/core.h"

#define BURST 200

typedef struct {
    int32_t  sender, seq;
    uint64_t seed;
} hdr_t;

typedef struct {
    int32_t round;    /* senders: bursts sent */
    int32_t next_seq; /* receivers */
} elem_t;

static tess_array_h senders, receivers;
static tess_entry_t E_GO, E_DATA, E_ACK;
static int32_t      nsend, rounds;

static size_t msg_len(int32_t seq)
{
    return sizeof(hdr_t) + (size_t)(seq * 37 % 200);
}

static void go_fn(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    int32_t me = (int32_t)tess_ctx_linear(ctx);
    uint8_t buf[sizeof(hdr_t) + 200];
    for (int32_t i = 0; i < BURST; i++) {
        int32_t q = el->round * BURST + i;
        hdr_t   h = {me, q, test_mix(((uint64_t)me << 32) ^ (uint64_t)q)};
        size_t  n = msg_len(q);
        memcpy(buf, &h, sizeof(h));
        test_fill(buf + sizeof(h), n - sizeof(h), h.seed);
        CHECK_OK(tess_send(receivers, tess_idx1(me), E_DATA, buf, n));
    }
    el->round++;
}

static void data_fn(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    hdr_t   h;
    int32_t me = (int32_t)tess_ctx_linear(ctx);
    CHECK(size >= sizeof(h));
    memcpy(&h, msg, sizeof(h));
    CHECK_MSG(h.sender == me && h.seq == el->next_seq, "receiver %d: message %d from %d, "
              "expected %d (order broken)", me, h.seq, h.sender, el->next_seq);
    CHECK(size == msg_len(h.seq));
    CHECK(h.seed == test_mix(((uint64_t)me << 32) ^ (uint64_t)h.seq));
    CHECK(test_verify((const uint8_t *)msg + sizeof(h), size - sizeof(h), h.seed) < 0);
    el->next_seq++;
    if (el->next_seq % BURST == 0)
        CHECK_OK(tess_send(senders, tess_idx1(me), E_ACK, NULL, 0));
}

static void ack_fn(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    if (((elem_t *)e)->round < rounds)
        go_fn(ctx, e, NULL, 0);
}

static void start(void *arg)
{
    (void)arg;
    test_start_own(senders, nsend, E_GO);
}

static void check_recv(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    CHECK_MSG(((elem_t *)e)->next_seq == rounds * BURST, "receiver %lld got %d of %d",
              (long long)tess_ctx_linear(ctx), ((elem_t *)e)->next_seq, rounds * BURST);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (tess_num_processes() < 2) {
        printf("burst: needs 2 processes or more\n");
        test_fini();
        return 77;
    }
    nsend  = tess_num_pes();
    rounds = (int32_t)test_scaled(20, 5);
    CHECK_OK(tess_entry_register("go", go_fn, &E_GO));
    CHECK_OK(tess_entry_register("data", data_fn, &E_DATA));
    CHECK_OK(tess_entry_register("ack", ack_fn, &E_ACK));
    test_sender_receiver_arrays(sizeof(elem_t), &senders, &receivers);
    uint64_t b0, r0, b1, r1;
    tess_core_coalesce_stats(&b0, &r0);
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    tess_core_coalesce_stats(&b1, &r1);
    CHECK_OK(tess_array_foreach(receivers, check_recv, NULL));
    const char *env   = getenv("TESS_COALESCE_BURST");
    int         burst = !env || strcmp(env, "0") != 0;
    int64_t     mine  = tess_array_num_local(senders);
    uint64_t    need  = (uint64_t)mine * (uint64_t)rounds * (BURST - 1);
    printf("burst: process %d: %lld senders, %llu messages in %llu batches (at least %llu "
           "expected)\n", tess_process(), (long long)mine, (unsigned long long)(r1 - r0),
           (unsigned long long)(b1 - b0), burst ? (unsigned long long)need : 0ULL);
    if (burst)
        CHECK_MSG(r1 - r0 >= need, "process %d coalesced %llu messages of its bursts, fewer than "
                  "%llu", tess_process(), (unsigned long long)(r1 - r0),
                  (unsigned long long)need);
    test_fini();
    return 0;
}

/* test_bigmsg: large messages between processes, through every path a payload can take.
 *
 * One sender element per PE streams rounds of messages to its receiver on the next process:
 * sizes from 1.5 KiB to 5 MiB, among them the size classes' edges (64 KiB, 256 KiB, 1 MiB and
 * one byte past each, 4 MiB) and past the largest class, alternately by tess_send and by
 * tess_msg_alloc + tess_send_msg. Receivers check that every message arrives once, in order,
 * intact, and acknowledge each round. Afterwards each process checks how its messages went
 * (every process here shares one node): those of the node message arena's sizes as
 * references to it (exactly those, unless the arena was full: then some, and the rest through
 * UCX), the others up to the eager limit (TESS_NET_EAGER_NODE) eagerly and none past it —
 * give or take the runtime's own small messages (under 16 KiB in all); nothing eagerly with
 * the limit 0, no reference without the arena (TESS_MSG_SHM=0, or TESS_VNODE_SIZE=1: every
 * process its own node). */
#include "tess_test.h"
#include "core/core_int.h"
#include "net/net.h"

static const size_t sizes[] = {1536,           8192,           65536,     65537,
                               200000,         262144,         262145,    1u << 20,
                               (1u << 20) + 1, (3u << 20) + 5, 4096,      4u << 20,
                               (5u << 20) + 3};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define SLACK  (16u << 10)

typedef struct {
    int32_t  sender, seq;
    uint64_t seed;
} hdr_t;

typedef struct {
    int32_t round;    /* senders: rounds sent */
    int32_t next_seq; /* receivers */
} elem_t;

static tess_array_h senders, receivers;
static tess_entry_t E_GO, E_DATA, E_ACK;
static int32_t      nsend, rounds;

static uint64_t seed_of(int32_t sender, int32_t seq)
{
    return test_mix(((uint64_t)sender << 32) ^ (uint64_t)seq ^ 0xb16ull);
}

static void go_fn(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    int32_t me = (int32_t)tess_ctx_linear(ctx);
    for (size_t i = 0; i < NSIZES; i++) {
        int32_t q  = el->round * (int32_t)NSIZES + (int32_t)i;
        size_t  n  = sizes[i];
        int     zc = (q + me) & 1;
        hdr_t   h  = {me, q, seed_of(me, q)};
        uint8_t *buf = zc ? tess_msg_alloc(n) : malloc(n);
        CHECK(buf);
        memcpy(buf, &h, sizeof(h));
        test_fill(buf + sizeof(h), n - sizeof(h), h.seed);
        if (zc) {
            CHECK_OK(tess_send_msg(receivers, tess_idx1(me), E_DATA, buf));
        } else {
            CHECK_OK(tess_send(receivers, tess_idx1(me), E_DATA, buf, n));
            free(buf);
        }
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
    CHECK_MSG(size == sizes[h.seq % (int32_t)NSIZES], "receiver %d: message %d has %zu bytes, "
              "%zu sent", me, h.seq, size, sizes[h.seq % (int32_t)NSIZES]);
    CHECK(h.seed == seed_of(me, h.seq));
    long bad = test_verify((const uint8_t *)msg + sizeof(h), size - sizeof(h), h.seed);
    CHECK_MSG(bad < 0, "receiver %d: message %d (%zu bytes) corrupt at byte %ld", me, h.seq,
              size, bad + (long)sizeof(h));
    el->next_seq++;
    if (el->next_seq % (int32_t)NSIZES == 0)
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
    int32_t want = rounds * (int32_t)NSIZES;
    CHECK_MSG(((elem_t *)e)->next_seq == want, "receiver %lld got %d of %d",
              (long long)tess_ctx_linear(ctx), ((elem_t *)e)->next_seq, want);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (tess_num_processes() < 2) {
        printf("bigmsg: needs 2 processes or more\n");
        test_fini();
        return 77;
    }
    nsend  = tess_num_pes();
    rounds = (int32_t)test_scaled(6, 2);
    CHECK_OK(tess_entry_register("go", go_fn, &E_GO));
    CHECK_OK(tess_entry_register("data", data_fn, &E_DATA));
    CHECK_OK(tess_entry_register("ack", ack_fn, &E_ACK));
    test_sender_receiver_arrays(sizeof(elem_t), &senders, &receivers);
    size_t               limit;
    uint64_t             s0, b0, s1, b1;
    tess_msg_shm_stats_t a0, a1;
    tess_net_eager_stats(&limit, &s0, &b0);
    tess_msg_shm_stats(&a0);
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    tess_net_eager_stats(&limit, &s1, &b1);
    tess_msg_shm_stats(&a1);
    CHECK_OK(tess_array_foreach(receivers, check_recv, NULL));

    /* What this process's senders sent, all of it to another process of this node: by
     * reference (the node arena's sizes, while it has room: an 8-byte reference goes eagerly),
     * eagerly (at or under the limit), or by UCX's choice. */
    int64_t  mine = tess_array_num_local(senders);
    uint64_t want = 0, nwant = 0, nref = 0;
    for (size_t i = 0; i < NSIZES; i++) {
        int ref = a1.on && sizes[i] >= a1.min && sizes[i] <= a1.max;
        nref += (uint64_t)ref;
        if (ref || sizes[i] <= limit) {
            want += ref ? sizeof(tess_msg_shm_ref_t) : sizes[i];
            nwant++;
        }
    }
    uint64_t per = (uint64_t)mine * (uint64_t)rounds;
    want *= per;
    nwant *= per;
    nref *= per;
    uint64_t refs = a1.refs_sent - a0.refs_sent, full = a1.full - a0.full;
    printf("bigmsg: process %d: limit %zu, %llu eager sends of %llu bytes (expected %llu of %llu "
           "bytes); arena %s: %llu references sent (expected %llu), %llu received, %llu times "
           "full\n", tess_process(), limit, (unsigned long long)(s1 - s0),
           (unsigned long long)(b1 - b0), (unsigned long long)nwant, (unsigned long long)want,
           a1.on ? "on" : "off", (unsigned long long)refs, (unsigned long long)nref,
           (unsigned long long)(a1.refs_recvd - a0.refs_recvd), (unsigned long long)full);
    if (!a1.on)
        CHECK_MSG(refs == 0, "process %d sent %llu references without an arena", tess_process(),
                  (unsigned long long)refs);
    else if (full == 0)
        CHECK_MSG(refs == nref, "process %d sent %llu messages by reference, expected %llu",
                  tess_process(), (unsigned long long)refs, (unsigned long long)nref);
    else /* some went through UCX instead: the arena's class was full */
        CHECK_MSG(refs > 0 && refs < nref, "process %d: %llu references of %llu with the arena "
                  "full %llu times", tess_process(), (unsigned long long)refs,
                  (unsigned long long)nref, (unsigned long long)full);
    if (limit == 0) {
        CHECK_MSG(s1 == s0, "process %d: %llu eager sends with the limit 0", tess_process(),
                  (unsigned long long)(s1 - s0));
    } else if (full == 0) {
        CHECK_MSG(s1 - s0 >= nwant && b1 - b0 >= want && b1 - b0 < want + SLACK,
                  "process %d: %llu bytes in %llu sends went eagerly, expected %llu bytes in "
                  "%llu (limit %zu: a message past it went eagerly, or one under it did not)",
                  tess_process(), (unsigned long long)(b1 - b0), (unsigned long long)(s1 - s0),
                  (unsigned long long)want, (unsigned long long)nwant, limit);
    }
    test_fini();
    return 0;
}

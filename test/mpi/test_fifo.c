/* test_fifo: message order.
 *
 * Tessera guarantees FIFO per (sender element, receiver element) pair, while neither migrates
 * (tessera.h, "Ordering"); nothing else is ordered. Here many sender elements on every PE each
 * send a numbered stream to each of a few receiver elements, in bursts from successive entry
 * invocations, with large messages (UCX rendezvous between processes, 64 KiB + pooled buffers
 * in-process) interleaved with small eager ones, so a small message sent after a large one can
 * only arrive first if ordering is broken. Each receiver checks that every sender's sequence
 * numbers arrive strictly in order and each payload intact. The phase ends at quiescence;
 * afterwards every stream must be complete. An out-of-order arrival is reported at once (the
 * message, the one expected, their sizes and send paths) and the run goes on, so that the end
 * tells whether the expected one came later or never (a phase that then cannot end times out);
 * the test fails either way. */
#include "tess_test.h"

#define NRECV 3

typedef struct {
    int32_t  sender, receiver, seq, pad;
    uint64_t seed;
} hdr_t;

typedef struct {
    int32_t  next_to_send;
    int32_t *next_seq;   /* receivers: next sequence number expected from each sender */
    uint8_t *seen;       /* receivers: [sender * nmsgs + seq] arrived */
    int64_t  received, out_of_order;
} elem_t;

static tess_array_h senders, receivers;
static tess_entry_t E_BURST, E_RECV;
static int32_t      nsend, nmsgs, burst;

static uint64_t msg_seed(int32_t s, int32_t r, int32_t q)
{
    return test_mix(((uint64_t)s << 42) ^ ((uint64_t)r << 32) ^ (uint64_t)q);
}

/* How message q went: its size class and send call (for reports). */
static const char *msg_kind(int32_t s, int32_t r, int32_t q)
{
    (void)r;
    static const char *kinds[3][2] = {{"large, tess_send", "large, tess_send_msg"},
                                      {"medium, tess_send", "medium, tess_send_msg"},
                                      {"small, tess_send", "small, tess_send_msg"}};
    int c = (q + s) % 5 == 0 ? 0 : (q + s) % 5 == 2 ? 1 : 2;
    return kinds[c][q % 3 == 0];
}

/* Interleave: large every few messages, the rest small, the pattern shifted per sender. */
static size_t msg_size(int32_t s, int32_t r, int32_t q)
{
    uint64_t h = msg_seed(s, r, q);
    if ((q + s) % 5 == 0)
        return 65536 + (size_t)(h % 4096);             /* rendezvous across processes */
    if ((q + s) % 5 == 2)
        return 2000 + (size_t)(h % 6000);              /* medium: bcopy */
    return sizeof(hdr_t) + (size_t)(h % 100);          /* small: eager short */
}

static void recv_ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx, (void)arg;
    elem_t *el   = e;
    el->next_seq = calloc((size_t)nsend, sizeof(int32_t));
    el->seen     = calloc((size_t)nsend * (size_t)nmsgs, 1);
    CHECK(el->next_seq && el->seen);
}

static void recv_dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx, (void)arg;
    free(((elem_t *)e)->next_seq);
    free(((elem_t *)e)->seen);
}

static void burst_fn(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    int32_t me = (int32_t)tess_ctx_linear(ctx);
    int32_t end = el->next_to_send + burst < nmsgs ? el->next_to_send + burst : nmsgs;
    for (int32_t q = el->next_to_send; q < end; q++) {
        for (int32_t r = 0; r < NRECV; r++) {
            size_t len = msg_size(me, r, q);
            hdr_t  h   = {me, r, q, 0, msg_seed(me, r, q)};
            if (q % 3 == 0) {
                uint8_t *m = tess_msg_alloc(len); /* zero-copy path */
                CHECK(m);
                memcpy(m, &h, sizeof(h));
                test_fill(m + sizeof(h), len - sizeof(h), h.seed);
                CHECK_OK(tess_send_msg(receivers, tess_idx1(r), E_RECV, m));
            } else {
                uint8_t *m = malloc(len);
                CHECK(m);
                memcpy(m, &h, sizeof(h));
                test_fill(m + sizeof(h), len - sizeof(h), h.seed);
                CHECK_OK(tess_send(receivers, tess_idx1(r), E_RECV, m, len));
                free(m);
            }
        }
    }
    el->next_to_send = end;
    /* The next burst comes from a later entry, after other traffic had a chance to interleave. */
    if (end < nmsgs)
        CHECK_OK(tess_send(senders, tess_idx1(me), E_BURST, NULL, 0));
}

static void recv_fn(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    hdr_t   h;
    CHECK(size >= sizeof(h));
    memcpy(&h, msg, sizeof(h));
    int32_t me = (int32_t)tess_ctx_linear(ctx);
    CHECK_MSG(h.receiver == me && h.sender >= 0 && h.sender < nsend, "receiver %d got a message "
              "for %d from %d", me, h.receiver, h.sender);
    CHECK_MSG(h.seq >= 0 && h.seq < nmsgs && !el->seen[h.sender * nmsgs + h.seq], "receiver %d: "
              "message %d from sender %d arrived twice (or is out of range)", me, h.seq, h.sender);
    CHECK(size == msg_size(h.sender, me, h.seq) && h.seed == msg_seed(h.sender, me, h.seq));
    long bad = test_verify((const uint8_t *)msg + sizeof(h), size - sizeof(h), h.seed);
    CHECK_MSG(bad < 0, "message %d from %d: byte %ld of %zu corrupt", h.seq, h.sender, bad, size);
    int32_t want = el->next_seq[h.sender];
    if (h.seq != want) {
        el->out_of_order++;
        fprintf(stderr, "test_fifo: FIFO broken: receiver %d (PE %d) got message %d from sender %d "
                "(%s) while expecting %d (%s)\n", me, tess_pe(), h.seq, h.sender,
                msg_kind(h.sender, me, h.seq), want, msg_kind(h.sender, me, want));
        fflush(stderr);
    }
    el->seen[h.sender * nmsgs + h.seq] = 1;
    while (el->next_seq[h.sender] < nmsgs && el->seen[h.sender * nmsgs + el->next_seq[h.sender]])
        el->next_seq[h.sender]++;
    el->received++;
}

static void start(void *arg)
{
    (void)arg;
    /* Every process starts the senders it owns (the start function may send). */
    test_start_own(senders, nsend, E_BURST);
}

static void check_recv(tess_ctx_h ctx, void *e, void *arg)
{
    elem_t *el = e;
    (void)arg;
    for (int32_t s = 0; s < nsend; s++)
        CHECK_MSG(el->next_seq[s] == nmsgs, "receiver %lld has %d of %d messages from %d",
                  (long long)tess_ctx_linear(ctx), el->next_seq[s], nmsgs, s);
    CHECK(el->received == (int64_t)nsend * nmsgs);
    CHECK_MSG(el->out_of_order == 0, "receiver %lld: %lld messages out of order (FIFO per "
              "sender/receiver pair broken; each was reported as it came, and every message did "
              "arrive)", (long long)tess_ctx_linear(ctx), (long long)el->out_of_order);
}

static void check_send(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx, (void)arg;
    CHECK(((elem_t *)e)->next_to_send == nmsgs);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    nsend = 2 * tess_num_pes() + 1;
    nmsgs = (int32_t)test_scaled(300, 30);
    burst = 7;
    CHECK_OK(tess_entry_register("burst", burst_fn, &E_BURST));
    CHECK_OK(tess_entry_register("recv", recv_fn, &E_RECV));
    /* Round-robin senders: every PE sends; receivers in blocks (on the first PEs), so streams
     * are in-process, between PEs of a process, and between processes. */
    tess_array_params_t sp = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_MAP,
                              .name = "senders", .ndims = 1, .extents = {nsend},
                              .elem_size = sizeof(elem_t), .map = TESS_MAP_ROUND_ROBIN};
    CHECK_OK(tess_array_create(&sp, &senders));
    tess_array_params_t rp = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR |
                                            TESS_ARRAY_FIELD_MAP,
                              .name = "receivers", .ndims = 1, .extents = {NRECV},
                              .elem_size = sizeof(elem_t), .ctor = recv_ctor, .dtor = recv_dtor,
                              .map = TESS_MAP_ROUND_ROBIN};
    CHECK_OK(tess_array_create(&rp, &receivers));
    double t0 = MPI_Wtime();
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    CHECK_OK(tess_array_foreach(receivers, check_recv, NULL));
    CHECK_OK(tess_array_foreach(senders, check_send, NULL));
    int64_t local = 0, total = 0;
    /* Every receiver exists exactly once. */
    local = tess_array_num_local(receivers);
    MPI_Allreduce(&local, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK(total == NRECV);
    if (tess_process() == 0)
        printf("fifo: %d senders x %d receivers x %d messages in %.2f s: ok\n", nsend, NRECV,
               nmsgs, MPI_Wtime() - t0);
    test_fini();
    return 0;
}

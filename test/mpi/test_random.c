/* test_random: 200k messages (TESS_TEST_SCALE scales it; less under TSan) from random elements
 * to random elements on every PE, random sizes up to 2 KiB with a few large ones (up to
 * 160 KiB, one in ten of those up to 5 MiB: every pooled size class and past them), each payload checksummed and carrying (src, dst, seq). Senders work in bursts from
 * successive entries, so sends and receives interleave everywhere. The phase runs to
 * quiescence with no exit. Afterwards the per-pair counts and sequence checksums of what was
 * sent and what was received are summed over the ranks with MPI_Allreduce (from
 * tess_array_foreach) and must agree pair by pair, and with the plan. Each receiver also checks
 * that every pair's sequence numbers increase (FIFO per sender/receiver pair). */
#include "tess_test.h"

typedef struct {
    int32_t  src, dst;
    int64_t  seq;      /* per (src, dst) pair */
    uint64_t seed;
    uint64_t len;
} hdr_t;

typedef struct {
    uint64_t rng;
    int64_t  to_send;      /* messages this element still has to send */
    int64_t *sent;         /* [dst] */
    int64_t *recvd;        /* [src] */
    uint64_t *sent_sum;    /* [dst] sum of mix(seq) */
    uint64_t *recvd_sum;   /* [src] */
    int64_t *last_seq;     /* [src] last seq received, -1 none */
} elem_t;

static tess_array_h arr;
static tess_entry_t E_BURST, E_MSG;
static int32_t      n;
static int64_t      per_elem;

static uint64_t pseed(int32_t s, int32_t d, int64_t q)
{
    return test_mix(((uint64_t)s << 44) ^ ((uint64_t)d << 24) ^ (uint64_t)q ^ 0x5eedull);
}

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el    = e;
    el->rng       = test_mix((uint64_t)tess_ctx_linear(ctx) + 4242);
    el->to_send   = per_elem;
    el->sent      = calloc((size_t)n, sizeof(int64_t));
    el->recvd     = calloc((size_t)n, sizeof(int64_t));
    el->sent_sum  = calloc((size_t)n, sizeof(uint64_t));
    el->recvd_sum = calloc((size_t)n, sizeof(uint64_t));
    el->last_seq  = malloc((size_t)n * sizeof(int64_t));
    CHECK(el->sent && el->recvd && el->sent_sum && el->recvd_sum && el->last_seq);
    for (int32_t i = 0; i < n; i++)
        el->last_seq[i] = -1;
}

static void dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx, (void)arg;
    elem_t *el = e;
    free(el->sent);
    free(el->recvd);
    free(el->sent_sum);
    free(el->recvd_sum);
    free(el->last_seq);
}

static void burst(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    int32_t me = (int32_t)tess_ctx_linear(ctx);
    int     k  = 1 + (int)(test_rand(&el->rng) % 24);
    for (; k > 0 && el->to_send > 0; k--, el->to_send--) {
        uint64_t r   = test_rand(&el->rng);
        int32_t  dst = (int32_t)(r % (uint64_t)n);
        size_t   len = sizeof(hdr_t) + (size_t)((r >> 20) % (2048 - sizeof(hdr_t) + 1));
        if ((r >> 40) % 5000 == 0) /* fewer still from 160 KiB to 5 MiB */
            len = (160 << 10) + (size_t)((r >> 8) % (5u << 20));
        else if ((r >> 40) % 500 == 0)
            len = 32768 + (size_t)((r >> 8) % (128 * 1024)); /* a few large ones */
        int64_t seq = el->sent[dst]++;
        hdr_t   h   = {me, dst, seq, pseed(me, dst, seq), len};
        el->sent_sum[dst] += test_mix((uint64_t)seq);
        uint8_t *buf = (r >> 60) & 1 ? tess_msg_alloc(len) : malloc(len);
        CHECK(buf);
        memcpy(buf, &h, sizeof(h));
        test_fill(buf + sizeof(h), len - sizeof(h), h.seed);
        if ((r >> 60) & 1) {
            CHECK_OK(tess_send_msg(arr, tess_idx1(dst), E_MSG, buf));
        } else {
            CHECK_OK(tess_send(arr, tess_idx1(dst), E_MSG, buf, len));
            free(buf);
        }
    }
    if (el->to_send > 0)
        CHECK_OK(tess_send(arr, tess_idx1(me), E_BURST, NULL, 0));
}

static void on_msg(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    hdr_t   h;
    CHECK(size >= sizeof(h));
    memcpy(&h, msg, sizeof(h));
    int32_t me = (int32_t)tess_ctx_linear(ctx);
    CHECK_MSG(h.dst == me && h.src >= 0 && h.src < n && h.len == size &&
              h.seed == pseed(h.src, h.dst, h.seq),
              "element %d: bad header (src %d dst %d seq %lld len %llu, size %zu)", me, h.src,
              h.dst, (long long)h.seq, (unsigned long long)h.len, size);
    long bad = test_verify((const uint8_t *)msg + sizeof(h), size - sizeof(h), h.seed);
    CHECK_MSG(bad < 0, "message %d->%d #%lld (%zu bytes) corrupt at %ld", h.src, me,
              (long long)h.seq, size, bad + (long)sizeof(h));
    CHECK_MSG(h.seq > el->last_seq[h.src], "%d->%d: seq %lld after %lld", h.src, me,
              (long long)h.seq, (long long)el->last_seq[h.src]);
    el->last_seq[h.src] = h.seq;
    el->recvd[h.src]++;
    el->recvd_sum[h.src] += test_mix((uint64_t)h.seq);
}

typedef struct {
    int64_t  *sent, *recvd;      /* [src * n + dst] */
    uint64_t *sent_sum, *recvd_sum;
} matrix_t;

static void collect(tess_ctx_h ctx, void *e, void *arg)
{
    elem_t   *el = e;
    matrix_t *m  = arg;
    int32_t   me = (int32_t)tess_ctx_linear(ctx);
    CHECK(el->to_send == 0);
    for (int32_t o = 0; o < n; o++) {
        m->sent[(size_t)me * n + o]      += el->sent[o];
        m->sent_sum[(size_t)me * n + o]  += el->sent_sum[o];
        m->recvd[(size_t)o * n + me]     += el->recvd[o];
        m->recvd_sum[(size_t)o * n + me] += el->recvd_sum[o];
    }
}

static int32_t *local_ids;
static int      nlocal_ids;

static void start_local(void *arg)
{
    (void)arg;
    for (int i = 0; i < nlocal_ids; i++)
        CHECK_OK(tess_send(arr, tess_idx1(local_ids[i]), E_BURST, NULL, 0));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    n               = 4 * tess_num_pes();
    int64_t total   = test_scaled(200000, 5000);
    per_elem        = total / n;
    CHECK_OK(tess_entry_register("burst", burst, &E_BURST));
    CHECK_OK(tess_entry_register("msg", on_msg, &E_MSG));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR |
                                           TESS_ARRAY_FIELD_MAP,
                             .name = "random", .ndims = 1, .extents = {n},
                             .elem_size = sizeof(elem_t), .ctor = ctor, .dtor = dtor,
                             .map = TESS_MAP_ROUND_ROBIN};
    CHECK_OK(tess_array_create(&p, &arr));
    local_ids = malloc((size_t)n * sizeof(int32_t));
    CHECK(local_ids);
    for (int32_t i = 0; i < n; i++)
        if (tess_array_local(arr, tess_idx1(i)))
            local_ids[nlocal_ids++] = i;

    double t0 = MPI_Wtime();
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start_local, NULL));
    double t1 = MPI_Wtime();

    size_t   nn = (size_t)n * (size_t)n;
    matrix_t m  = {calloc(nn, 8), calloc(nn, 8), calloc(nn, 8), calloc(nn, 8)};
    CHECK(m.sent && m.recvd && m.sent_sum && m.recvd_sum);
    CHECK_OK(tess_array_foreach(arr, collect, &m));
    MPI_Allreduce(MPI_IN_PLACE, m.sent, (int)nn, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, m.recvd, (int)nn, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, m.sent_sum, (int)nn, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, m.recvd_sum, (int)nn, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    int64_t all = 0;
    for (size_t i = 0; i < nn; i++) {
        CHECK_MSG(m.sent[i] == m.recvd[i] && m.sent_sum[i] == m.recvd_sum[i],
                  "pair %zu->%zu: sent %lld, received %lld", i / (size_t)n, i % (size_t)n,
                  (long long)m.sent[i], (long long)m.recvd[i]);
        all += m.recvd[i];
    }
    CHECK_MSG(all == per_elem * n, "%lld messages received, %lld planned", (long long)all,
              (long long)(per_elem * n));
    if (tess_process() == 0)
        printf("random: %lld messages among %d elements in %.2f s: ok\n", (long long)all, n,
               t1 - t0);
    free(m.sent);
    free(m.recvd);
    free(m.sent_sum);
    free(m.recvd_sum);
    free(local_ids);
    test_fini();
    return 0;
}

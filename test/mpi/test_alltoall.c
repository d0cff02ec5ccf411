/* test_alltoall: every element sends one message of each size (0 B, 8 B, 1 KiB, 100 KiB — the
 * last goes through UCX rendezvous between processes) to every other element. Receivers check
 * each payload and that every (source, size) arrives exactly once. When an element has
 * received everything it contributes its counts and checksums; the reduction ends the phase.
 * Phase 1 ends with a TESS_CB_RETURN reduction, phase 2 with a reduction to element 0, which
 * calls tess_exit_with. Both results are compared on every rank with the serial answer. */
#include "tess_test.h"

#define NSIZES 4
static const size_t sizes[NSIZES] = {0, 8, 1024, 100 * 1024};

typedef struct {
    int32_t  src, dst, phase, size_idx;
    uint64_t seed;
} hdr_t;

typedef struct {
    int64_t  received;
    int64_t  zeros;      /* 0-byte messages received */
    uint64_t csum;       /* sum of the checksums of the messages received */
    int      got_go;
    int      contributed;
    uint8_t *seen;       /* [phase][size][src], for the sizes that name their source */
} elem_t;

static tess_array_h arr;
static tess_entry_t E_GO, E_RECV0, E_RECV, E_RESULT;
static int32_t      n;
static int          phase;

static uint64_t msg_seed(int32_t src, int32_t dst, int ph, int s)
{
    return test_mix(((uint64_t)src << 40) ^ ((uint64_t)dst << 16) ^ (uint64_t)(ph * 8 + s));
}

/* What the receiver adds to its checksum for one message. */
static uint64_t msg_term(int32_t src, int32_t dst, int ph, int s)
{
    return test_mix(msg_seed(src, dst, ph, s) + 1);
}

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx, (void)arg;
    elem_t *el = e;
    el->seen   = calloc((size_t)2 * NSIZES * (size_t)n, 1);
    CHECK(el->seen);
}

static void dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx, (void)arg;
    free(((elem_t *)e)->seen);
}

static int64_t expected_per_elem(void)
{
    return (int64_t)NSIZES * (n - 1);
}

static void maybe_contribute(tess_ctx_h ctx, elem_t *el)
{
    if (!el->got_go || el->received != expected_per_elem() * phase || el->contributed == phase)
        return;
    el->contributed = phase;
    int64_t         v[2] = {el->received, (int64_t)el->csum};
    tess_callback_t cb   = phase == 1 ? tess_cb_return()
                                      : tess_cb_element(arr, tess_idx1(0), E_RESULT);
    CHECK_OK(tess_contribute(ctx, (uint64_t)phase, v, 2, TESS_INT64, TESS_SUM, cb));
}

static void go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    int32_t me = (int32_t)tess_ctx_linear(ctx);
    el->got_go = 1;
    for (int s = 0; s < NSIZES; s++) {
        for (int32_t k = 1; k < n; k++) {
            int32_t dst = (me + k) % n; /* staggered, so not everyone hits element 0 first */
            if (sizes[s] == 0) {
                CHECK_OK(tess_send(arr, tess_idx1(dst), E_RECV0, NULL, 0));
                continue;
            }
            size_t   len = sizes[s];
            uint8_t *buf = malloc(len);
            CHECK(buf);
            if (len >= sizeof(hdr_t)) {
                hdr_t h = {me, dst, phase, s, msg_seed(me, dst, phase, s)};
                memcpy(buf, &h, sizeof(h));
                test_fill(buf + sizeof(h), len - sizeof(h), h.seed);
            } else {
                /* 8 bytes: the source and a check word. */
                int32_t w[2] = {me, (int32_t)(uint32_t)msg_seed(me, dst, phase, s)};
                memcpy(buf, w, sizeof(w));
            }
            /* Alternate the copying and the zero-copy send. */
            if (k % 2) {
                CHECK_OK(tess_send(arr, tess_idx1(dst), E_RECV, buf, len));
            } else {
                void *m = tess_msg_alloc(len);
                CHECK(m);
                memcpy(m, buf, len);
                CHECK_OK(tess_send_msg(arr, tess_idx1(dst), E_RECV, m));
            }
            free(buf);
        }
    }
    maybe_contribute(ctx, el);
}

static void mark(elem_t *el, int32_t src, int s)
{
    CHECK(src >= 0 && src < n);
    uint8_t *seen = &el->seen[((size_t)(phase - 1) * NSIZES + (size_t)s) * (size_t)n + (size_t)src];
    CHECK_MSG(!*seen, "size %zu from %d arrived twice", sizes[s], src);
    *seen = 1;
}

static void recv0(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg;
    elem_t *el = e;
    CHECK(size == 0);
    /* A 0-byte message carries no source: count them, never more than n-1 per phase. */
    el->zeros++;
    CHECK_MSG(el->zeros <= (int64_t)(n - 1) * phase, "element %lld: %lld 0-byte messages",
              (long long)tess_ctx_linear(ctx), (long long)el->zeros);
    el->received++;
    maybe_contribute(ctx, el);
}

static void recv_msg(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    int32_t me = (int32_t)tess_ctx_linear(ctx);
    int32_t src;
    int     s;
    if (size == 8) {
        int32_t w[2];
        memcpy(w, msg, sizeof(w));
        src = w[0];
        s   = 1;
        CHECK(src >= 0 && src < n && src != me);
        CHECK_MSG(w[1] == (int32_t)(uint32_t)msg_seed(src, me, phase, s), "bad 8-byte payload "
                  "from %d", src);
    } else {
        hdr_t h;
        CHECK(size >= sizeof(h));
        memcpy(&h, msg, sizeof(h));
        src = h.src;
        s   = h.size_idx;
        CHECK_MSG(h.dst == me && h.phase == phase && s >= 2 && s < NSIZES && size == sizes[s] &&
                  src >= 0 && src < n && src != me,
                  "element %d got dst %d phase %d size %zu (index %d) from %d", me, h.dst, h.phase,
                  size, s, src);
        CHECK(h.seed == msg_seed(src, me, phase, s));
        long bad = test_verify((const uint8_t *)msg + sizeof(h), size - sizeof(h), h.seed);
        CHECK_MSG(bad < 0, "payload of %zu bytes from %d corrupt at byte %ld", size, src,
                  bad + (long)sizeof(h));
    }
    mark(el, src, s);
    el->received++;
    el->csum += msg_term(src, me, phase, s);
    maybe_contribute(ctx, el);
}

static uint64_t expected_csum(int ph)
{
    uint64_t c = 0;
    for (int32_t dst = 0; dst < n; dst++)
        for (int32_t src = 0; src < n; src++)
            if (src != dst)
                for (int s = 1; s < NSIZES; s++)
                    c += msg_term(src, dst, ph, s);
    return c;
}

static void result(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e;
    CHECK(tess_ctx_linear(ctx) == 0 && size == 2 * sizeof(int64_t));
    CHECK_OK(tess_exit_with(msg, size));
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == tess_num_processes() - 1)
        CHECK_OK(tess_broadcast(arr, E_GO, NULL, 0));
}

static void check_seen(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el = e;
    int32_t me = (int32_t)tess_ctx_linear(ctx);
    CHECK(el->received == expected_per_elem() * phase && el->contributed == phase);
    CHECK(el->zeros == (int64_t)(n - 1) * phase);
    for (int s = 1; s < NSIZES; s++)
        for (int32_t src = 0; src < n; src++)
            CHECK(el->seen[((size_t)(phase - 1) * NSIZES + (size_t)s) * (size_t)n + (size_t)src] ==
                  (src != me));
    el->got_go = 0;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    n = 2 * tess_num_pes() + 1;
    CHECK_OK(tess_entry_register("go", go, &E_GO));
    CHECK_OK(tess_entry_register("recv0", recv0, &E_RECV0));
    CHECK_OK(tess_entry_register("recv", recv_msg, &E_RECV));
    CHECK_OK(tess_entry_register("result", result, &E_RESULT));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR,
                             .name = "a2a", .ndims = 1, .extents = {n},
                             .elem_size = sizeof(elem_t), .ctor = ctor, .dtor = dtor};
    CHECK_OK(tess_array_create(&p, &arr));

    for (phase = 1; phase <= 2; phase++) {
        double t0 = MPI_Wtime();
        CHECK_OK(tess_run(TESS_RUN_UNTIL_EXIT, start, NULL));
        int64_t got[2];
        size_t  len = 0;
        CHECK_OK(tess_result(got, sizeof(got), &len));
        CHECK(len == sizeof(got));
        /* Each element reports its running totals: phase k sums k phases of messages. */
        int64_t  want_n = (int64_t)n * expected_per_elem() * phase;
        uint64_t want_c = 0;
        for (int ph = 1; ph <= phase; ph++)
            want_c += expected_csum(ph);
        CHECK_MSG(got[0] == want_n && (uint64_t)got[1] == want_c,
                  "phase %d: %lld messages, checksum %llx; expected %lld, %llx", phase,
                  (long long)got[0], (unsigned long long)got[1], (long long)want_n,
                  (unsigned long long)want_c);
        CHECK_OK(tess_array_foreach(arr, check_seen, NULL));
        if (tess_process() == 0)
            printf("alltoall phase %d: %d elements, %lld messages in %.2f s: ok\n", phase, n,
                   (long long)((int64_t)n * expected_per_elem()), MPI_Wtime() - t0);
    }
    test_fini();
    return 0;
}

/*
 * test_rdma_reg: the RDMA registration cache under free and reallocation (direct RDMA path:
 * run with TESS_VNODE_SIZE=1 on 2 processes, TESS_RDMA=direct; any backend).
 *
 * Element 0 (process 0) sends one device buffer to element 1 (process 1) ROUNDS times, ping-pong.
 * A buffer is sent REUSE times, then freed and allocated again with the same size (often at the
 * same address: the test counts how often) before its next send. Every round's bytes are a
 * function of the round, written on the sender's stream right before the send; the receiver
 * copies them back on its stream and checks each byte. Then the counters of process 0 must
 * say: one registration per allocation (reg_creates), the other sends hits (reg_hits), and
 * every freed allocation's registration dropped (reg_forgets): a registration found by address
 * would show up as too few creates (and, on CUDA, as wrong bytes or a failed get). The receiver
 * keeps the remote key of each registration unpacked: one unpack per allocation, the other
 * gets use the kept key (a key kept across a new registration would, on CUDA, read the old
 * allocation).
 */
#include "tess_test.h"
#include "devcomm/devcomm.h"

#include <string.h>
#include <tessera/gpu.h>

#define ROUNDS 24
#define REUSE  3
#define SIZE   ((size_t)70001)

typedef struct elem {
    int   round, sent, done, checked, errors, allocs, reused;
    void *dev;   /* element 0: the buffer sent; element 1: the one received into */
    void *host;
} elem_t;

static tess_array_h arr;
static tess_entry_t E_GO, E_MSG, E_CHECK;

static uint8_t byte_of(int round, size_t i)
{
    return (uint8_t)test_mix(((uint64_t)round << 32) ^ (i * 2654435761u));
}

static void done_cb(void *arg)
{
    ((elem_t *)arg)->done++;
}

/* Element 0: send round r (the previous send must be acknowledged first, so that the buffer
 * it used may be freed: until then, go again). */
static void go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    CHECK(size == sizeof(int));
    elem_t *el = e;
    int     r;
    memcpy(&r, msg, sizeof(r));
    if (el->done < el->sent) {
        CHECK_OK(tess_send(arr, tess_idx1(0), E_GO, &r, sizeof(r)));
        return;
    }
    if (r % REUSE == 0) {
        void *old = el->dev;
        if (old)
            CHECK_OK(tess_gpu_free(old));
        CHECK_OK(tess_gpu_malloc(&el->dev, SIZE));
        el->allocs++;
        el->reused += old && el->dev == old;
    }
    uint8_t *h = el->host;
    for (size_t i = 0; i < SIZE; i++)
        h[i] = byte_of(r, i);
    tess_stream_t st = tess_ctx_stream(ctx);
    CHECK_OK(tess_gpu_memcpy_async(el->dev, el->host, SIZE, st));
    tess_dev_buf_t b = {el->dev, SIZE};
    el->sent++;
    CHECK_OK(tess_send_device(arr, tess_idx1(1), E_MSG, &r, sizeof(r), &b, 1, NULL, done_cb,
                              el));
}

static void post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                 const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx;
    (void)header;
    (void)stream_p;
    elem_t *el = e;
    CHECK(header_len == sizeof(int) && nbufs == 1 && sizes[0] == SIZE);
    if (!el->dev)
        CHECK_OK(tess_gpu_malloc(&el->dev, SIZE));
    dst[0] = el->dev;
}

static void on_msg(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    CHECK(size == sizeof(int));
    elem_t *el = e;
    memset(el->host, 0xA5, SIZE);
    CHECK_OK(tess_gpu_memcpy_async(el->host, el->dev, SIZE, tess_ctx_stream(ctx)));
    CHECK_OK(tess_gpu_then(ctx, E_CHECK, msg, sizeof(int)));
}

static void on_check(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx;
    CHECK(size == sizeof(int));
    elem_t *el = e;
    int     r;
    memcpy(&r, msg, sizeof(r));
    const uint8_t *h = el->host;
    for (size_t i = 0; i < SIZE; i++)
        if (h[i] != byte_of(r, i)) {
            if (el->errors++ < 5)
                fprintf(stderr, "round %d byte %zu: %02x (expected %02x)\n", r, i, h[i],
                        byte_of(r, i));
            break;
        }
    el->checked++;
    if (++r < ROUNDS)
        CHECK_OK(tess_send(arr, tess_idx1(0), E_GO, &r, sizeof(r)));
}

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx;
    (void)arg;
    elem_t *el = e;
    el->host   = malloc(SIZE);
    CHECK(el->host);
}

static void start(void *arg)
{
    (void)arg;
    int r = 0;
    if (tess_process() == 0)
        CHECK_OK(tess_send(arr, tess_idx1(0), E_GO, &r, sizeof(r)));
}

static int totals[5];

static void collect(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el = e;
    if (tess_ctx_linear(ctx) == 0) {
        totals[0] = el->sent;
        totals[1] = el->done;
        totals[2] = el->allocs;
        totals[3] = el->reused;
    } else {
        totals[4] = el->checked;
    }
    CHECK_MSG(el->errors == 0, "element %lld: %d rounds with wrong bytes",
              (long long)tess_ctx_linear(ctx), el->errors);
    if (el->dev)
        CHECK_OK(tess_gpu_free(el->dev));
    el->dev = NULL;
    free(el->host);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    const char *want = getenv("TESS_GPU");
    if (want && strcmp(want, "auto") && strcmp(tess_gpu_backend_name(), want)) {
        test_fini();
        return 77;
    }
    CHECK_MSG(tess_num_processes() == 2, "run on 2 processes (TESS_VNODE_SIZE=1)");
    CHECK_OK(tess_entry_register("go", go, &E_GO));
    CHECK_OK(tess_entry_register_device("msg", post, on_msg, 0, &E_MSG));
    CHECK_OK(tess_entry_register("check", on_check, &E_CHECK));
    /* One element on each process. */
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "rdmareg", .ndims = 1,
                             .extents = {2}, .elem_size = sizeof(elem_t), .ctor = ctor};
    CHECK_OK(tess_array_create(&p, &arr));
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    CHECK_OK(tess_array_foreach(arr, collect, NULL));
    int all[5];
    MPI_Allreduce(totals, all, 5, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    tess_dc_stats_t st;
    tess_dc_get_stats(&st);
    uint64_t mine[7] = {st.sent[2], st.rdma_direct, st.reg_creates, st.reg_hits, st.reg_forgets,
                        st.rkey_unpacks, st.rkey_hits};
    uint64_t sum[7];
    MPI_Allreduce(mine, sum, 7, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (tess_process() == 0)
        printf("rdma_reg: %d sends, %d allocations (%d at the freed address), registrations: "
               "%llu created, %llu hits, %llu dropped on free; remote keys: %llu unpacked, %llu "
               "kept ones used\n", all[0], all[2], all[3], (unsigned long long)sum[2],
               (unsigned long long)sum[3], (unsigned long long)sum[4], (unsigned long long)sum[5],
               (unsigned long long)sum[6]);
    CHECK_MSG(all[0] == ROUNDS && all[1] == ROUNDS && all[4] == ROUNDS,
              "sent %d, done %d, checked %d of %d rounds", all[0], all[1], all[4], ROUNDS);
    CHECK_MSG(sum[1] == ROUNDS, "%llu of %d sends took the direct RDMA path (TESS_VNODE_SIZE=1 "
              "TESS_RDMA=direct?)", (unsigned long long)sum[1], ROUNDS);
    CHECK_MSG(sum[2] == (uint64_t)all[2], "%llu registrations for %d allocations (a stale one "
              "reused?)", (unsigned long long)sum[2], all[2]);
    CHECK_MSG(sum[3] == (uint64_t)(ROUNDS - all[2]), "%llu registration cache hits, expected %d",
              (unsigned long long)sum[3], ROUNDS - all[2]);
    CHECK_MSG(sum[5] == (uint64_t)all[2] && sum[6] == (uint64_t)(ROUNDS - all[2]),
              "remote keys: %llu unpacked, %llu kept ones used; expected %d and %d",
              (unsigned long long)sum[5], (unsigned long long)sum[6], all[2], ROUNDS - all[2]);
    /* Every allocation was freed (the last one in collect) while registered. */
    CHECK_MSG(sum[4] == (uint64_t)all[2], "%llu registrations dropped on free, %d allocations "
              "freed", (unsigned long long)sum[4], all[2]);
    test_fini();
    return 0;
}

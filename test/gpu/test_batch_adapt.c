/*
 * test_batch_adapt: TESS_BATCH_STREAM=adapt follows whether a PE is host-bound or the GPU is
 * behind, and every halo arrives whole either way.
 *
 * E elements in a ring on one process exchange a halo of W words with both neighbours every
 * step (TESS_ENTRY_BATCH receives, so a PE's receives for several elements go in batches). A
 * step of an element, all on its stream: copy both received halos to pinned host memory, a host
 * kernel checks every word against what the neighbour wrote for that step and writes the next
 * halo, copy it to the device, send it to both neighbours. Three phases (tess_run each):
 *   1. idle: the element waits for its stream before sending, so the receiving streams are idle
 *      when batches are copied (a host-bound PE): the batch stream must be used;
 *   2. busy: the host kernel also sleeps BUSY_US and nobody waits (the GPU is behind): the PE
 *      must turn to one copy launch per stream, so most copy launches are not shared;
 *   3. idle again: the PE must turn back (another change of choice, shared launches again).
 * The choice is per PE and moves on samples with hysteresis (src/devcomm/dc_d2d.c): phases are
 * long enough for dozens of samples. Any backend; TESS_BATCH_STREAM=adapt.
 *
 * TEST_SENDER_ORDERED=1 registers the halo entry with TESS_ENTRY_SENDER_ORDERED (true here: the
 * buffers go by step parity in a symmetric exchange), so batch streams do not wait for the
 * receiving streams: every word must still be right, and some streams must have gone unjoined.
 */
#include "tess_test.h"
#include "devcomm/devcomm.h"

#include <stdatomic.h>
#include <tessera/gpu.h>
#include <time.h>

enum { E = 8, W = 256, BUSY_US = 400 };

typedef struct {
    int32_t src, step, side; /* side: where it lands at the receiver (0 left, 1 right) */
} hdr_t;

typedef struct {
    uint32_t *in[2][2]; /* [step parity][side], device */
    uint32_t *out[2];   /* [step parity], device */
    uint32_t *hin[2];   /* pinned host copies of the halos received */
    uint32_t *hout;     /* pinned host halo to send */
    int       step;     /* the step whose halos this element waits for */
    int       arrived[2];
} elem_t;

static tess_array_h arr;
static tess_entry_t E_GO, E_HALO;
static int          phase, steps; /* set by main between phases */
static _Atomic int  errors, done_elems;

static uint32_t word(int ph, int src, int step, int k)
{
    return (uint32_t)test_mix(((uint64_t)ph << 48) ^ ((uint64_t)src << 32) ^
                              ((uint64_t)step << 12) ^ (uint64_t)k);
}

/* The host kernel of a step: check the halos of `step`, write the halo of step + 1. */
typedef struct {
    elem_t *el;
    int     me, step, phase;
} kargs_t;

static void kernel(void *a)
{
    kargs_t *k = a;
    int      left = (k->me + E - 1) % E, right = (k->me + 1) % E;
    for (int i = 0; k->step > 0 && i < W; i++)
        if (k->el->hin[0][i] != word(k->phase, left, k->step, i) ||
            k->el->hin[1][i] != word(k->phase, right, k->step, i))
            atomic_fetch_add(&errors, 1);
    for (int i = 0; i < W; i++)
        k->el->hout[i] = word(k->phase, k->me, k->step + 1, i);
    if (k->phase == 2) {
        struct timespec ts = {0, BUSY_US * 1000L};
        nanosleep(&ts, NULL);
    }
}

/* Step `s` of this element (its halos of step s are in place on its stream, s = 0: none). */
static void run_step(tess_ctx_h ctx, elem_t *el, int s)
{
    int           me = (int)tess_ctx_linear(ctx), p = s % 2;
    tess_stream_t st = tess_ctx_stream(ctx);
    for (int side = 0; side < 2 && s > 0; side++)
        CHECK_OK(tess_gpu_memcpy_async(el->hin[side], el->in[p][side], W * 4, st));
    kargs_t k = {el, me, s, phase};
    CHECK_OK(tess_gpu_launch_host(st, kernel, &k, sizeof(k)));
    if (s + 1 == steps) { /* the halos of the last step are checked, none sent */
        CHECK_OK(tess_gpu_stream_sync(st));
        atomic_fetch_add(&done_elems, 1);
        return;
    }
    CHECK_OK(tess_gpu_memcpy_async(el->out[(s + 1) % 2], el->hout, W * 4, st));
    if (phase != 2)
        CHECK_OK(tess_gpu_stream_sync(st));
    hdr_t          h[2] = {{me, s + 1, 1}, {me, s + 1, 0}}; /* to the left: its right side */
    tess_dev_buf_t b    = {el->out[(s + 1) % 2], W * 4};
    tess_dev_send_t sends[2] = {
        {arr, tess_idx1((me + E - 1) % E), E_HALO, &h[0], sizeof(h[0]), &b, 1, NULL, NULL},
        {arr, tess_idx1((me + 1) % E), E_HALO, &h[1], sizeof(h[1]), &b, 1, NULL, NULL}};
    CHECK_OK(tess_send_device_many(sends, 2, NULL));
    if (phase != 2) /* idle: even the send's ordering point is past */
        CHECK_OK(tess_gpu_stream_sync(st));
    el->step = s + 1;
}

static void post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                 const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx, (void)stream_p;
    elem_t      *el = e;
    const hdr_t *h  = header;
    CHECK(header_len == sizeof(*h) && nbufs == 1 && sizes[0] == W * 4);
    dst[0] = el->in[h->step % 2][h->side];
}

static void on_halo(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t      *el = e;
    const hdr_t *h  = msg;
    CHECK(size == sizeof(*h));
    /* A neighbour is at most one step ahead: its next halo lands in the other parity. */
    CHECK_MSG(h->step == el->step || h->step == el->step + 1, "halo of step %d at step %d",
              h->step, el->step);
    if (++el->arrived[h->step % 2] == 2 && h->step == el->step) {
        el->arrived[h->step % 2] = 0;
        run_step(ctx, el, h->step);
        /* Both halos of the next step may have come already. */
        if (el->step < steps && el->arrived[el->step % 2] == 2) {
            el->arrived[el->step % 2] = 0;
            run_step(ctx, el, el->step);
        }
    }
}

static void on_go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    if (!el->hout) {
        for (int p = 0; p < 2; p++) {
            CHECK_OK(tess_gpu_malloc((void **)&el->out[p], W * 4));
            for (int side = 0; side < 2; side++)
                CHECK_OK(tess_gpu_malloc((void **)&el->in[p][side], W * 4));
            CHECK_OK(tess_gpu_malloc_host((void **)&el->hin[p], W * 4));
        }
        CHECK_OK(tess_gpu_malloc_host((void **)&el->hout, W * 4));
    }
    el->step       = 0;
    el->arrived[0] = el->arrived[1] = 0;
    run_step(ctx, el, 0);
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        tess_broadcast(arr, E_GO, NULL, 0);
}

static void release(tess_ctx_h ctx, void *e, void *arg)
{
    (void)ctx, (void)arg;
    elem_t *el = e;
    for (int p = 0; p < 2; p++) {
        CHECK_OK(tess_gpu_free(el->out[p]));
        for (int side = 0; side < 2; side++)
            CHECK_OK(tess_gpu_free(el->in[p][side]));
        CHECK_OK(tess_gpu_free_host(el->hin[p]));
    }
    CHECK_OK(tess_gpu_free_host(el->hout));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    const char *mode = getenv("TESS_BATCH_STREAM");
    if (!mode || strcmp(mode, "adapt")) {
        printf("batch_adapt: run with TESS_BATCH_STREAM=adapt (skipped)\n");
        test_fini();
        return 77;
    }
    CHECK_MSG(tess_num_processes() == 1, "one process");
    CHECK_OK(tess_entry_register("go", on_go, &E_GO));
    tess_entry_t bad;
    CHECK_ST(tess_entry_register_device("bad", post, on_halo, TESS_ENTRY_SENDER_ORDERED, &bad),
             TESS_ERR_INVALID); /* only with TESS_ENTRY_BATCH */
    CHECK_ST(tess_entry_register_device("bad", post, on_halo, TESS_ENTRY_BATCH | (1u << 7), &bad),
             TESS_ERR_INVALID);
    int ordered = getenv("TEST_SENDER_ORDERED") && atoi(getenv("TEST_SENDER_ORDERED"));
    CHECK_OK(tess_entry_register_device("halo", post, on_halo,
                                        TESS_ENTRY_BATCH | (ordered ? TESS_ENTRY_SENDER_ORDERED : 0),
                                        &E_HALO));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "ring", .ndims = 1,
                             .extents = {E}, .elem_size = sizeof(elem_t)};
    CHECK_OK(tess_array_create(&p, &arr));

    tess_dc_stats_t before, after, first;
    uint64_t        shared[4], launches[4], flips[4];
    tess_dc_get_stats(&before);
    first = before;
    for (phase = 1; phase <= 3; phase++) {
        steps = (int)test_scaled(phase == 2 ? 120 : 200, phase == 2 ? 80 : 120);
        atomic_store(&done_elems, 0);
        CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
        CHECK_MSG(atomic_load(&done_elems) == E, "phase %d: %d of %d elements finished",
                  phase, atomic_load(&done_elems), E);
        tess_dc_get_stats(&after);
        shared[phase]   = after.d2d_rb_shared - before.d2d_rb_shared;
        launches[phase] = after.d2d_rb_launches - before.d2d_rb_launches;
        flips[phase]    = after.d2d_rb_flips - before.d2d_rb_flips;
        before          = after;
        printf("batch_adapt: phase %d (%s, %d steps): %llu copy launches for batches, %llu "
               "shared, choice changed %llu times\n", phase, phase == 2 ? "busy" : "idle",
               steps, (unsigned long long)launches[phase], (unsigned long long)shared[phase],
               (unsigned long long)flips[phase]);
    }
    CHECK_MSG(atomic_load(&errors) == 0, "%d words of halos wrong", atomic_load(&errors));
    uint64_t unjoined = after.d2d_rb_unjoined - first.d2d_rb_unjoined;
    if (ordered)
        CHECK_MSG(unjoined > 0, "TESS_ENTRY_SENDER_ORDERED: every batch stream still waited for "
                  "every receiving stream");
    else
        CHECK_MSG(unjoined == 0, "%llu receiving streams not waited for without "
                  "TESS_ENTRY_SENDER_ORDERED", (unsigned long long)unjoined);
    CHECK_MSG(shared[1] > 0, "idle phase: no batch went through the PEs' batch streams");
    CHECK_MSG(flips[2] >= 1, "busy phase: the choice never turned to one launch per stream");
    CHECK_MSG(shared[2] * 2 < launches[2],
              "busy phase: %llu of %llu copy launches still on the batch stream",
              (unsigned long long)shared[2], (unsigned long long)launches[2]);
    CHECK_MSG(flips[3] >= 1 && shared[3] > 0,
              "idle again: the choice did not turn back (%llu changes, %llu shared)",
              (unsigned long long)flips[3], (unsigned long long)shared[3]);
    CHECK_OK(tess_array_foreach(arr, release, NULL));
    CHECK_OK(tess_array_destroy(arr));
    test_fini();
    printf("batch_adapt: ok\n");
    return 0;
}

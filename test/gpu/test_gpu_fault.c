/*
 * test_gpu_fault: a device that fails under a chare waiting on it. Run from test/misuse/testlist
 * on the host backend with TESS_HOST_FAULT_KERNEL=K: element 0 launches kernels one after
 * another, each from the continuation of the one before (tess_gpu_then); kernel K faults, as one
 * with an illegal access would on a GPU, so its continuation can never come. The job must die
 * with a message naming the failed device, whether the PE polls stream signals (gpuq_check asks
 * the stream after a while) or events (the query fails at once); it must not hang, and no
 * continuation may run after the fault.
 *
 * Environment: TESS_HOST_FAULT_KERNEL (required), TESS_GPU_POLL.
 */
#include "tess_test.h"

#include <stdatomic.h>
#include <tessera/gpu.h>

static tess_array_h arr;
static tess_entry_t E_NEXT;
static int          fault_at;
static _Atomic int  ran;  /* kernels that ran */
static _Atomic int  gate_open; /* the gate before kernel K */

static void count_fn(void *args)
{
    (void)args;
    atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed);
}

static void gate_fn(void *args)
{
    (void)args;
    for (long spins = 0; !atomic_load_explicit(&gate_open, memory_order_acquire); spins++)
        if (spins > 2000000000L) /* never opened: let the test fail rather than hang */
            break;
    atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed);
}

static void next(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    int *launched = e;
    /* The continuation of kernel `launched`: the ones before it ran, the faulted one did not. */
    if (*launched >= fault_at) {
        fprintf(stderr, "test_gpu_fault: the continuation of kernel %d ran after kernel %d "
                        "faulted (%d kernels ran)\n", *launched, fault_at, atomic_load(&ran));
        exit(3);
    }
    CHECK(atomic_load(&ran) == *launched);
    tess_stream_t s    = tess_ctx_stream(ctx);
    int           gate = *launched + 2 == fault_at;
    if (gate) /* kernel K-1 */
        CHECK_OK(tess_gpu_launch_host(s, gate_fn, NULL, 0));
    CHECK_OK(tess_gpu_launch_host(s, count_fn, NULL, 0));
    *launched += 1 + gate;
    CHECK_OK(tess_gpu_then(ctx, E_NEXT, NULL, 0));
    if (gate)
        atomic_store_explicit(&gate_open, 1, memory_order_release);
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        CHECK_OK(tess_send(arr, tess_idx1(0), E_NEXT, NULL, 0));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    const char *k = getenv("TESS_HOST_FAULT_KERNEL");
    fault_at      = k ? atoi(k) : 0;
    if (strcmp(tess_gpu_backend_name(), "host") || fault_at < 2) {
        fprintf(stderr, "test_gpu_fault: needs the host backend and TESS_HOST_FAULT_KERNEL >= 2\n");
        test_fini();
        return 77;
    }
    CHECK_OK(tess_entry_register("next", next, &E_NEXT));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "fault", .ndims = 1,
                             .extents = {1}, .elem_size = sizeof(int)};
    CHECK_OK(tess_array_create(&p, &arr));
    tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL);
    fprintf(stderr, "test_gpu_fault: the phase ended although kernel %d faulted\n", fault_at);
    test_fini();
    return 3;
}

/*
 * test_gpu_devmem.c — the host backend's device memory size (TESS_HOST_DEVICE_MEMORY, here
 * through the init parameters): allocations up to the size succeed, one more fails with
 * TESS_ERR_NO_MEMORY and a message naming the size asked, the size in use and the limit; a
 * free gives its memory back; every allocation counts rounded up to the allocator's alignment;
 * allocations larger than a segment (a segment of their own) count as the others; threads that
 * allocate and free at once never take more than the size together, and leave none of it taken.
 * Pinned host memory (TESS_HOST_PINNED_MEMORY) is counted and refused the same way.
 * Uses the ops table only; host backend only (the limit is a property of its device model).
 */
#include "gpu/gpu.h"
#include "gpu/host/host.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LIMIT   ((size_t)4 << 20)
#define NTHR    4
#define PIECE   ((size_t)256 << 10)
#define ROUNDS  200

/* One more allocation of `size` must fail, and its message say what it asked and what was in use. */
static void expect_full(size_t size, size_t used)
{
    void *p = NULL;
    CHECK_ST(tess_gpu->mem_alloc(size, &p), TESS_ERR_NO_MEMORY);
    char want[160];
    snprintf(want, sizeof(want), "out of device memory: %zu bytes asked, %zu of %zu in use "
             "(TESS_HOST_DEVICE_MEMORY)", size, used, LIMIT);
    CHECK_MSG(strstr(tess_error_detail(), want), "the message is '%s', not '%s'",
              tess_error_detail(), want);
    tess_error_clear();
}

static _Atomic size_t peak, held;

/* Allocate and free PIECEs at once with the other threads: the backend's count must never let
 * them hold more than LIMIT together. */
static void *churn(void *arg)
{
    (void)arg;
    void *mine[LIMIT / PIECE];
    for (int r = 0; r < ROUNDS; r++) {
        size_t n = 0;
        while (n < LIMIT / PIECE && tess_gpu->mem_alloc(PIECE, &mine[n]) == TESS_OK) {
            size_t now = atomic_fetch_add(&held, PIECE) + PIECE, p = atomic_load(&peak);
            while (now > p && !atomic_compare_exchange_weak(&peak, &p, now)) {
            }
            n++;
            if (n == (size_t)(r % 5) + 1)
                break;
        }
        tess_error_clear();
        while (n > 0) {
            atomic_fetch_sub(&held, PIECE);
            CHECK_OK(tess_gpu->mem_free(mine[--n]));
        }
    }
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    tess_gpu_init_params_t params = {.job_id = tess_random64(), .local_size = 1,
                                     .host_arena_size = (size_t)1 << 20,
                                     .host_device_memory = LIMIT,
                                     .host_pinned_memory = LIMIT};
    CHECK_OK(tess_gpu_init("host", &params, 1));

    /* Up to the size exactly: half, a quarter, two eighths. */
    void *a, *b, *c, *d, *e;
    CHECK_OK(tess_gpu->mem_alloc(LIMIT / 2, &a));
    CHECK_OK(tess_gpu->mem_alloc(LIMIT / 4, &b));
    CHECK_OK(tess_gpu->mem_alloc(LIMIT / 8, &c));
    CHECK_OK(tess_gpu->mem_alloc(LIMIT / 8, &d));
    expect_full(1, LIMIT);
    printf("test_gpu_devmem: %zu bytes in four allocations, one byte more refused\n", LIMIT);

    /* A free gives its memory back, and no more. */
    CHECK_OK(tess_gpu->mem_free(b));
    CHECK_OK(tess_gpu->mem_alloc(LIMIT / 4, &b));
    expect_full(TESS_GPU_HOST_ALIGN, LIMIT);
    CHECK_OK(tess_gpu->mem_free(c));
    expect_full(LIMIT / 8 + 1, LIMIT - LIMIT / 8);
    CHECK_OK(tess_gpu->mem_alloc(LIMIT / 8, &c));

    /* Each allocation counts rounded up to the alignment: one byte takes TESS_GPU_HOST_ALIGN. */
    CHECK_OK(tess_gpu->mem_free(d));
    size_t n1 = LIMIT / 8 / TESS_GPU_HOST_ALIGN;
    void **ones = malloc(n1 * sizeof(*ones));
    CHECK(ones);
    for (size_t i = 0; i < n1; i++)
        CHECK_OK(tess_gpu->mem_alloc(1, &ones[i]));
    expect_full(1, LIMIT);
    for (size_t i = 0; i < n1; i++)
        CHECK_OK(tess_gpu->mem_free(ones[i]));
    free(ones);
    printf("test_gpu_devmem: frees give memory back; %zu one-byte allocations take %zu bytes\n",
           n1, LIMIT / 8);

    /* Larger than a segment (1 MiB here): a segment of its own, counted the same. */
    CHECK_OK(tess_gpu->mem_free(a));
    CHECK_OK(tess_gpu->mem_alloc(LIMIT / 2 + TESS_GPU_HOST_ALIGN, &a));
    expect_full(LIMIT / 8, LIMIT / 2 + TESS_GPU_HOST_ALIGN + LIMIT / 4 + LIMIT / 8);
    CHECK_OK(tess_gpu->mem_free(a));
    CHECK_OK(tess_gpu->mem_alloc(LIMIT / 2, &a));
    CHECK_OK(tess_gpu->mem_alloc(LIMIT / 8, &d));
    expect_full(1, LIMIT);
    printf("test_gpu_devmem: an allocation in a segment of its own counts as the others\n");

    CHECK_OK(tess_gpu->mem_free(a));
    CHECK_OK(tess_gpu->mem_free(b));
    CHECK_OK(tess_gpu->mem_free(c));
    CHECK_OK(tess_gpu->mem_free(d));

    /* Threads at once: never more than the size together, and all of it back at the end. */
    pthread_t th[NTHR];
    for (int i = 0; i < NTHR; i++)
        CHECK(pthread_create(&th[i], NULL, churn, NULL) == 0);
    for (int i = 0; i < NTHR; i++)
        CHECK(pthread_join(th[i], NULL) == 0);
    CHECK_MSG(atomic_load(&peak) <= LIMIT, "threads held %zu bytes at once, more than %zu",
              atomic_load(&peak), LIMIT);
    CHECK_OK(tess_gpu->mem_alloc(LIMIT, &e));
    expect_full(1, LIMIT);
    CHECK_OK(tess_gpu->mem_free(e));
    printf("test_gpu_devmem: %d threads allocating and freeing held at most %zu bytes, then "
           "all %zu could be allocated at once\n", NTHR, atomic_load(&peak), LIMIT);

    /* Pinned host memory (TESS_HOST_PINNED_MEMORY) the same way: up to the size, one byte more
     * refused with the sizes, a free gives it back. */
    void *h[3];
    CHECK_OK(tess_gpu->host_alloc(LIMIT / 2, &h[0]));
    CHECK_OK(tess_gpu->host_alloc(LIMIT / 4, &h[1]));
    CHECK_OK(tess_gpu->host_alloc(LIMIT / 4, &h[2]));
    memset(h[2], 0x5a, LIMIT / 4);
    CHECK_ST(tess_gpu->host_alloc(1, &e), TESS_ERR_NO_MEMORY);
    char want[160];
    snprintf(want, sizeof(want), "out of pinned host memory: 1 bytes asked, %zu of %zu in use "
             "(TESS_HOST_PINNED_MEMORY)", LIMIT, LIMIT);
    CHECK_MSG(strstr(tess_error_detail(), want), "the message is '%s', not '%s'",
              tess_error_detail(), want);
    tess_error_clear();
    CHECK_OK(tess_gpu->host_free(h[1]));
    CHECK_ST(tess_gpu->host_alloc(LIMIT / 4 + 1, &e), TESS_ERR_NO_MEMORY);
    tess_error_clear();
    CHECK_OK(tess_gpu->host_alloc(LIMIT / 4, &h[1]));
    for (int i = 0; i < 3; i++)
        CHECK_OK(tess_gpu->host_free(h[i]));
    CHECK_OK(tess_gpu->host_alloc(LIMIT, &e));
    CHECK_OK(tess_gpu->host_free(e));
    printf("test_gpu_devmem: %zu bytes of pinned host memory, one byte more refused, frees give "
           "it back\n", LIMIT);

    tess_gpu_fini();
    printf("test_gpu_devmem: all passed\n");
    return 0;
}

/* tess_test.h — small helpers shared by the tests: checks that abort with file:line, and MPI
 * set-up. A failing check prints what failed and exits 1 (the whole job then fails). */
#ifndef TESS_TEST_H
#define TESS_TEST_H

#include <tessera.h>
#include <tessera/gpu.h>
#include "check.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MPI_Init_thread(FUNNELED) + tess_init on MPI_COMM_WORLD. An entry that sets TESS_RDMA=direct
 * where UCX cannot access the backend's device memory (a CUDA build against a UCX without its
 * CUDA transports) is skipped (exit 77) with tess_init's reason: it tests a path this machine
 * lacks (bench/devcomm/rdma-run.sh runs them with a UCX that has it). */
static inline void test_init(int *argc, char ***argv)
{
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    CHECK(provided >= MPI_THREAD_FUNNELED);
    tess_status_t st   = tess_init(argc, argv, MPI_COMM_WORLD, NULL);
    const char   *rdma = getenv("TESS_RDMA");
    if (st == TESS_ERR_UNSUPPORTED && rdma && !strcmp(rdma, "direct")) {
        int rank;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0)
            printf("skipped: %s\n", tess_error_detail());
        MPI_Finalize();
        exit(77);
    }
    CHECK_ST(st, TESS_OK);
}

static inline void test_fini(void)
{
    CHECK_OK(tess_finalize());
    MPI_Finalize();
}

/* When TESS_GPU asks for a backend other than the one in use: finish and exit 77 (skipped). */
static inline void test_skip_if_other_backend(void)
{
    const char *want = getenv("TESS_GPU");
    if (want && strcmp(want, "auto") && strcmp(tess_gpu_backend_name(), want)) {
        test_fini();
        exit(77);
    }
}

/* How much work a test does, as a factor of its full size: TESS_TEST_SCALE when set (e.g. 0.1),
 * else 1 — or 0.25 in a ThreadSanitizer build (~5-10x slower), 0.5 in an AddressSanitizer
 * build (the harness unwinds every allocation's stack there). */
static inline double test_scale(void)
{
    const char *s = getenv("TESS_TEST_SCALE");
    if (s && *s) {
        double f = atof(s);
        if (f > 0)
            return f;
    }
#if defined(__SANITIZE_THREAD__)
    return 0.25;
#elif defined(__SANITIZE_ADDRESS__)
    return 0.5;
#else
    return 1.0;
#endif
}

/* n scaled by test_scale(), at least lo. */
static inline int64_t test_scaled(int64_t n, int64_t lo)
{
    int64_t v = (int64_t)((double)n * test_scale());
    return v < lo ? lo : v;
}

/* A 64-bit mix used for checksums. */
static inline uint64_t test_mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return x;
}

/* A deterministic random stream (splitmix64): same seed, same numbers on every rank. */
static inline uint64_t test_rand(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ull;
    return test_mix(*state);
}

/* Fill `size` bytes with a pattern that depends on `seed` and on the offset. */
static inline void test_fill(void *buf, size_t size, uint64_t seed)
{
    unsigned char *p = buf;
    uint64_t       w = 0;
    for (size_t i = 0; i < size; i++) {
        if ((i & 7) == 0)
            w = test_mix(seed ^ ((uint64_t)i * 0x100000001b3ull));
        p[i] = (unsigned char)(w >> (8 * (i & 7)));
    }
}

/* Offset of the first byte that differs from test_fill(seed), or -1 when all match. */
static inline long test_verify(const void *buf, size_t size, uint64_t seed)
{
    const unsigned char *p = buf;
    uint64_t             w = 0;
    for (size_t i = 0; i < size; i++) {
        if ((i & 7) == 0)
            w = test_mix(seed ^ ((uint64_t)i * 0x100000001b3ull));
        if (p[i] != (unsigned char)(w >> (8 * (i & 7))))
            return (long)i;
    }
    return -1;
}

/* From a start function on every process: send `entry` (no payload) to each of the elements
 * 0 .. n-1 of the 1-D array `a` that this process holds, so that each is started once. */
static inline void test_start_own(tess_array_h a, int32_t n, tess_entry_t entry)
{
    for (int32_t i = 0; i < n; i++) {
        int pe;
        CHECK_OK(tess_array_location(a, tess_idx1(i), &pe));
        if (tess_pe_process(pe) == tess_process())
            CHECK_OK(tess_send(a, tess_idx1(i), entry, NULL, 0));
    }
}

/* Map of a receiver array: element i on the same-numbered PE of the next process. */
static inline int test_map_next_process(tess_index_t i, const int32_t ext[3], int npes, void *arg)
{
    (void)ext, (void)arg;
    int ppn = npes / tess_num_processes();
    return (int)((i.x + ppn) % npes);
}

/* One sender element per PE ("senders", round robin) and its receiver on the next process
 * ("receivers"), both 1-D of tess_num_pes() elements of elem_size bytes. */
static inline void test_sender_receiver_arrays(size_t elem_size, tess_array_h *senders_p,
                                               tess_array_h *receivers_p)
{
    tess_array_params_t sp = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_MAP,
                              .name = "senders", .ndims = 1, .extents = {tess_num_pes()},
                              .elem_size = elem_size, .map = TESS_MAP_ROUND_ROBIN};
    CHECK_OK(tess_array_create(&sp, senders_p));
    tess_array_params_t rp = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_MAP,
                              .name = "receivers", .ndims = 1, .extents = {tess_num_pes()},
                              .elem_size = elem_size, .map = TESS_MAP_USER,
                              .map_fn = test_map_next_process};
    CHECK_OK(tess_array_create(&rp, receivers_p));
}

#endif /* TESS_TEST_H */

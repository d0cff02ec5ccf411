/* tess_test.h — small helpers shared by the tests: checks that abort with file:line, and MPI
 * set-up. A failing check prints what failed and exits 1 (the whole job then fails). */
#ifndef TESS_TEST_H
#define TESS_TEST_H

#include <tessera.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
            fflush(stderr);                                                                 \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "CHECK failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fprintf(stderr, "\n");                                                          \
            fflush(stderr);                                                                 \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

#define CHECK_OK(call)                                                                      \
    do {                                                                                    \
        tess_status_t st_ = (call);                                                         \
        CHECK_MSG(st_ == TESS_OK, "%s returned %d (%s): %s", #call, (int)st_,               \
                  tess_status_string(st_), tess_error_detail());                            \
    } while (0)

/* MPI_Init_thread(FUNNELED) + tess_init on MPI_COMM_WORLD. */
static inline void test_init(int *argc, char ***argv)
{
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    CHECK(provided >= MPI_THREAD_FUNNELED);
    CHECK_OK(tess_init(argc, argv, MPI_COMM_WORLD, NULL));
}

static inline void test_fini(void)
{
    CHECK_OK(tess_finalize());
    MPI_Finalize();
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

#endif /* TESS_TEST_H */

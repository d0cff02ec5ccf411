/* check.h — the checks every test uses: a failed check prints file:line and what failed, then
 * exits 1. The includer declares tess_status_string and tess_error_detail (tessera.h, or
 * util/util.h for tests of the layers below the public API). */
#ifndef TESS_TEST_CHECK_H
#define TESS_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

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

#define CHECK(cond) CHECK_MSG(cond, "false")

/* `call` returns the status `want`. */
#define CHECK_ST(call, want)                                                                \
    do {                                                                                    \
        tess_status_t st_ = (call);                                                         \
        CHECK_MSG(st_ == (want), "%s returned %d (%s), expected %d: %s", #call, (int)st_,   \
                  tess_status_string(st_), (int)(want),                                     \
                  st_ != TESS_OK ? tess_error_detail() : "");                               \
    } while (0)

#define CHECK_OK(call) CHECK_ST(call, TESS_OK)

#endif

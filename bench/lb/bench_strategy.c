/*
 * bench_strategy — time of the built-in load-balancing strategies on process 0 as the job grows:
 * B bins (GPUs or PEs) with E elements each, loads drawn uniformly with a quarter of the bins'
 * elements K times heavier (as bench/lb's imbalance), for B = 16 .. 131072. This is the serial
 * part of a load-balancing step (docs/scale.md's model). Prints CSV: strategy,bins,objs,ms.
 *
 *   bench/lb/bench_strategy [E=8] [K=9]
 *
 * The strategies are library functions (src/lb/lb.h); this program calls them directly.
 * Build: part of `make` (bench/lb/bench_strategy in the build tree).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tessera.h>

#include "lb/lb.h" /* the built-in strategies */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int main(int argc, char **argv)
{
    int    per = argc > 1 ? atoi(argv[1]) : 8;
    double k   = argc > 2 ? atof(argv[2]) : 9;
    if (per < 1 || k <= 0) {
        fprintf(stderr, "usage: bench_strategy [elements per bin] [heavy factor]\n");
        return 2;
    }
    static const struct {
        const char *name;
        void (*fn)(const tess_lb_input_t *, int *, void *);
    } strategies[] = {{"greedy", tess_lb_greedy},
                      {"refine", tess_lb_refine},
                      {"greedyrefine", tess_lb_greedy_refine}};
    printf("strategy,bins,objs,ms\n");
    srand(1);
    for (int bins = 16; bins <= 131072; bins *= 4) {
        int            n    = bins * per;
        tess_lb_obj_t *objs = malloc((size_t)n * sizeof(*objs));
        int           *out  = malloc((size_t)n * sizeof(*out));
        if (!objs || !out)
            return 1;
        for (int i = 0; i < n; i++) {
            int bin = i / per;
            objs[i] = (tess_lb_obj_t){i, (1.0 + (double)rand() / RAND_MAX) *
                                             (bin < bins / 4 ? k : 1.0), bin};
        }
        tess_lb_input_t in = {bins, NULL, n, objs, 0.05};
        for (size_t s = 0; s < sizeof(strategies) / sizeof(strategies[0]); s++) {
            double best = 1e30;
            for (int r = 0; r < 3; r++) {
                double t0 = now_ms();
                strategies[s].fn(&in, out, NULL);
                double t = now_ms() - t0;
                best     = t < best ? t : best;
            }
            printf("%s,%d,%d,%.3f\n", strategies[s].name, bins, n, best);
            fflush(stdout);
        }
        free(objs);
        free(out);
    }
    return 0;
}

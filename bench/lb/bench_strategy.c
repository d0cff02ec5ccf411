/*
 * bench_strategy — time of the built-in load-balancing strategies on process 0 as the job grows:
 * B bins (GPUs or PEs) with E elements each, loads drawn uniformly with a quarter of the bins'
 * elements K times heavier (as bench/lb's imbalance), for B = 16 .. 131072. This is the serial
 * part of a load-balancing step (docs/scale.md's model). Prints CSV: strategy,bins,objs,ms.
 *
 *   bench/lb/bench_strategy [E=8] [K=9]
 *   bench/lb/bench_strategy steps [NOISE=0.05]
 *
 * `steps` measures what a strategy does over repeated steps instead of its time: bins with
 * objects of fixed true loads, measured with +-NOISE (uniform, relative) at every step; the
 * strategy's answer becomes the next step's placement. Cases: two bins with 16 objects
 * (LULESH on two devices: max/avg about 1.5 at the start), 8 bins with 64 (a quarter of the
 * bins' objects 3 times heavier) and 2 bins balanced from the start (noise only). 20 steps,
 * 10 seeds. Prints CSV: case,strategy,moves_first,moves_later (the other 19 steps, all
 * seeds' mean),imb_first,imb_final (true max/avg after the first and the last step, mean over
 * the seeds).
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

typedef void (*strategy_fn)(const tess_lb_input_t *, int *, void *);

static double urand(double lo, double hi) { return lo + (hi - lo) * rand() / (double)RAND_MAX; }

/* max/avg of `truth` over the placement of objs (no background). */
static double true_imbalance(int nbins, const tess_lb_obj_t *objs, const double *truth, int n)
{
    double load[64] = {0}, total = 0, max = 0;
    for (int i = 0; i < n; i++) {
        load[objs[i].bin] += truth[i];
        total += truth[i];
    }
    for (int b = 0; b < nbins; b++)
        max = load[b] > max ? load[b] : max;
    return max / (total / nbins);
}

/* The strategies measured, in the order of the tables. */
static const struct {
    const char *name;
    strategy_fn fn;
} strategies[] = {{"greedy", tess_lb_greedy},
                  {"refine", tess_lb_refine},
                  {"greedyrefine", tess_lb_greedy_refine},
                  {"hybrid", tess_lb_hybrid},
                  {"evencount", tess_lb_evencount}};

static int steps_main(double noise)
{
    enum { STEPS = 20, SEEDS = 10, NMAX = 64 };
    static const struct {
        const char *name;
        int         bins, per;
    } cases[] = {{"lulesh2x16", 2, 8}, {"quarter8x64", 8, 8}, {"balanced2x16", 2, 8}};
    printf("case,strategy,moves_first,moves_later,imb_first,imb_final\n");
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        int nbins = cases[c].bins, n = nbins * cases[c].per;
        for (size_t s = 0; s < sizeof(strategies) / sizeof(strategies[0]); s++) {
            double        first_moves = 0, later_moves = 0, imb_first = 0, imb_final = 0;
            tess_lb_obj_t objs[NMAX];
            double        truth[NMAX];
            int           out[NMAX];
            for (int seed = 1; seed <= SEEDS; seed++) {
                srand((unsigned)seed);
                for (int i = 0; i < n; i++) {
                    int    bin = i / cases[c].per;
                    double w;
                    if (c == 0) /* bin 0 three times bin 1: max/avg 1.5 */
                        w = bin == 0 ? urand(2, 4) : urand(0.5, 1.5);
                    else if (c == 1)
                        w = bin < nbins / 4 ? urand(2, 4) : urand(0.5, 1.5);
                    else
                        w = urand(0.5, 1.5);
                    truth[i] = w;
                    objs[i]  = (tess_lb_obj_t){i, w, bin};
                }
                if (c == 2) { /* balanced start: plain greedy on the true loads */
                    tess_lb_input_t in = {nbins, NULL, n, objs, 0.05};
                    tess_lb_greedy(&in, out, NULL);
                    for (int i = 0; i < n; i++)
                        objs[i].bin = out[i];
                }
                for (int step = 0; step < STEPS; step++) {
                    for (int i = 0; i < n; i++)
                        objs[i].load = truth[i] * (1 + urand(-noise, noise));
                    tess_lb_input_t in = {nbins, NULL, n, objs, 0.05};
                    strategies[s].fn(&in, out, NULL);
                    int m = 0;
                    for (int i = 0; i < n; i++) {
                        m += out[i] != objs[i].bin;
                        objs[i].bin = out[i];
                    }
                    if (step == 0) {
                        first_moves += m;
                        imb_first += true_imbalance(nbins, objs, truth, n);
                    } else {
                        later_moves += m;
                    }
                }
                imb_final += true_imbalance(nbins, objs, truth, n);
            }
            printf("%s,%s,%.1f,%.1f,%.4f,%.4f\n", cases[c].name, strategies[s].name,
                   first_moves / SEEDS, later_moves / SEEDS, imb_first / SEEDS,
                   imb_final / SEEDS);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "steps") == 0)
        return steps_main(argc > 2 ? atof(argv[2]) : 0.05);
    int    per = argc > 1 ? atoi(argv[1]) : 8;
    double k   = argc > 2 ? atof(argv[2]) : 9;
    if (per < 1 || k <= 0) {
        fprintf(stderr, "usage: bench_strategy [elements per bin] [heavy factor]\n");
        return 2;
    }
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

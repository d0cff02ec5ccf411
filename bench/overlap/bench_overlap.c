/*
 * bench_overlap — fine-grained kernel overlap (the paper's cuStreamWaitValue32 experiment),
 * raw CUDA only.
 *
 *   bench_overlap [--totals 65536,…,16777216] [--kernels 1,2,4,…,64] [--iters 64] [--reps 7]
 *                 [--hold-us 2000] [--csv FILE]
 *
 * A fixed number of threads in total is split into K kernels on K streams. Every stream first
 * waits (cuStreamWaitValue32) on one host-mapped flag; once all K launches are enqueued and
 * have had time to reach the device, one store from the host releases them at once. Each
 * thread does ITERS iterations of two dependent FMAs and writes one float. Reported per
 * (total, K): the median over REPS of the completion time (device: from the release to the
 * last kernel's end; host: from the store to the host seeing every kernel done) and the
 * slowdown against K = 1 (the same threads in one kernel): 1.0 means the K kernels overlapped
 * perfectly. The last trial of
 * every point checks every result. CUDA_DEVICE_MAX_CONNECTIONS (hardware queues; 8 when
 * unset) is recorded with each line.
 *
 * Without CUDA (or without a device) it prints why and exits 77 (skipped).
 */
#include "ovl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG       "bench_overlap"
#define MAX_POINTS 32

static int parse_list(const char *s, long long *out, int max)
{
    int n = 0;
    while (*s) {
        char     *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 1 || n == max)
            return -1;
        out[n++] = v;
        s        = end;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    long long totals[MAX_POINTS] = {65536, 262144, 1048576, 4194304, 16777216};
    long long kernels[MAX_POINTS] = {1, 2, 4, 8, 16, 32, 64};
    int       ntotals = 5, nkernels = 7, iters = 64, reps = 7, hold_us = 2000;
    const char *csv_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--totals") && v)
            ntotals = parse_list(v, totals, MAX_POINTS);
        else if (!strcmp(a, "--kernels") && v)
            nkernels = parse_list(v, kernels, MAX_POINTS);
        else if (!strcmp(a, "--iters") && v)
            iters = atoi(v);
        else if (!strcmp(a, "--reps") && v)
            reps = atoi(v);
        else if (!strcmp(a, "--hold-us") && v)
            hold_us = atoi(v);
        else if (!strcmp(a, "--csv") && v)
            csv_path = v;
        else {
            fprintf(stderr, "usage: %s [--totals LIST] [--kernels LIST] [--iters N] [--reps N] "
                            "[--hold-us US] [--csv FILE]\n", PROG);
            return 2;
        }
        i++;
    }
    if (ntotals < 1 || nkernels < 1 || iters < 0 || reps < 1 || reps > 64 || hold_us < 0) {
        fprintf(stderr, "%s: bad options\n", PROG);
        return 2;
    }
    long long max_total = 0, max_kernels = 0;
    for (int t = 0; t < ntotals; t++)
        max_total = totals[t] > max_total ? totals[t] : max_total;
    for (int k = 0; k < nkernels; k++) {
        max_kernels = kernels[k] > max_kernels ? kernels[k] : max_kernels;
        for (int t = 0; t < ntotals; t++)
            if (totals[t] % kernels[k]) {
                fprintf(stderr, "%s: %lld threads do not split into %lld kernels\n", PROG,
                        totals[t], kernels[k]);
                return 2;
            }
    }

    char err[512] = "";
    int  st       = ovl_init(max_total, (int)max_kernels, err, sizeof(err));
    if (st == OVL_SKIP) {
        printf("%s: skipped: %s\n", PROG, err);
        return OVL_SKIP;
    }
    if (st) {
        fprintf(stderr, "%s: set-up failed: %s\n", PROG, err);
        return 1;
    }

    FILE *csv = NULL;
    if (csv_path) {
        csv = fopen(csv_path, "a");
        if (!csv) {
            perror(csv_path);
            return 1;
        }
        if (ftell(csv) == 0)
            fprintf(csv, "bench,total_threads,kernels,threads_per_kernel,iters,connections,"
                         "gpu_us,host_us,slowdown_vs_k1\n");
    }
    printf("%s: %s; %d iterations of 2 FMA per thread, %d reps, CUDA_DEVICE_MAX_CONNECTIONS "
           "%d\n", PROG, ovl_device_name(), iters, reps, ovl_connections());
    printf("%-12s %-8s %-12s %12s %12s %10s\n", "threads", "kernels", "per kernel", "gpu us",
           "host us", "vs K=1");
    fflush(stdout);

    double gpu[64], host[64];
    for (int t = 0; t < ntotals; t++) {
        double k1 = 0;
        for (int k = 0; k < nkernels; k++) {
            /* One warm-up trial, then REPS; the last one checks the results. */
            for (int r = -1; r < reps; r++) {
                double g, h;
                if (ovl_trial(totals[t], (int)kernels[k], iters, hold_us, r == reps - 1, &g, &h,
                              err, sizeof(err))) {
                    fprintf(stderr, "%s: %lld threads in %lld kernels: %s\n", PROG, totals[t],
                            kernels[k], err);
                    return 1;
                }
                if (r >= 0) {
                    gpu[r]  = g;
                    host[r] = h;
                }
            }
            double mg = median(gpu, reps), mh = median(host, reps);
            if (kernels[k] == 1 || k == 0)
                k1 = mg;
            double slow = k1 > 0 ? mg / k1 : 0;
            printf("%-12lld %-8lld %-12lld %12.2f %12.2f %10.2f\n", totals[t], kernels[k],
                   totals[t] / kernels[k], mg, mh, slow);
            fflush(stdout);
            if (csv) {
                fprintf(csv, "overlap,%lld,%lld,%lld,%d,%d,%.3f,%.3f,%.4f\n", totals[t],
                        kernels[k], totals[t] / kernels[k], iters, ovl_connections(), mg, mh,
                        slow);
                fflush(csv);
            }
        }
    }
    if (csv)
        fclose(csv);
    ovl_fini();
    return 0;
}

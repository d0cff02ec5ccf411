/* stats_tess.c — lulesh_tess -stats (stats_tess.h). */
#define _GNU_SOURCE /* sched_getcpu */
#include "stats_tess.h"

#include "exchange.h"

#include <mpi.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <tessera.h>

static const char *const kp_name[NKP] = {"forces", "nodes", "gradients", "EOS", "other"};
static _Atomic int64_t   kernel_ns[NKP];

/* The figures at the window's two ends. */
typedef struct snap {
    double wall, cpu, pe, kernel, part[NKP];
    double core_busy, core_idle; /* the core this thread runs on (/proc/stat), when bound */
} snap_t;
static snap_t      snap[2];
static _Atomic int taken[2];
static int         window_first = -2;
#define MAX_CYCLES 4096
static _Atomic int seen[MAX_CYCLES]; /* the first chare here to start cycle k notes when */
static double      start_s[MAX_CYCLES];

void lul_stats_kernel(int part, int64_t ns)
{
    atomic_fetch_add_explicit(&kernel_ns[part], ns, memory_order_relaxed);
}

void lul_stats_window(int first)
{
    window_first = first;
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Busy and idle seconds of the core the caller runs on, from /proc/stat (0 where unreadable).
 * With the process bound to one core (bench-lb's taskset), idle is the time nothing was ready
 * to run there, busy less the process's CPU time what other processes took. */
static void core_times(double *busy_p, double *idle_p)
{
    char  name[16], line[512];
    int   cpu = sched_getcpu();
    FILE *f   = fopen("/proc/stat", "r");
    *busy_p = *idle_p = 0;
    snprintf(name, sizeof(name), "cpu%d ", cpu);
    while (f && cpu >= 0 && fgets(line, sizeof(line), f)) {
        unsigned long long v[8] = {0};
        if (strncmp(line, name, strlen(name)) != 0 ||
            sscanf(line + strlen(name), "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
            continue;
        double tck = (double)sysconf(_SC_CLK_TCK);
        *busy_p    = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / tck;
        *idle_p    = (double)(v[3] + v[4]) / tck;
    }
    if (f)
        fclose(f);
}

void lul_stats_cycle(int cycle)
{
    if (cycle >= 0 && cycle < MAX_CYCLES && !atomic_exchange(&seen[cycle], 1))
        start_s[cycle] = clock_s(CLOCK_MONOTONIC);
    int k = cycle == window_first ? 0 : cycle == -1 ? 1 : -1;
    if (k < 0 || atomic_exchange(&taken[k], 1))
        return;
    int pe0 = tess_pe() % tess_ppn() == 0; /* PEs are numbered process by process */
    snap[k] = (snap_t){clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_PROCESS_CPUTIME_ID),
                       pe0 ? clock_s(CLOCK_THREAD_CPUTIME_ID) : 0, 0, {0}, 0, 0};
    for (int q = 0; q < NKP; q++) {
        snap[k].part[q] = 1e-9 * (double)atomic_load(&kernel_ns[q]);
        snap[k].kernel += snap[k].part[q];
    }
    core_times(&snap[k].core_busy, &snap[k].core_idle);
}

void lul_stats_print(int64_t n, const int grid[3], int *owner, int rank, int nprocs, int cycles)
{
    int nch = grid[0] * grid[1] * grid[2];
    MPI_Allreduce(MPI_IN_PLACE, owner, nch, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    enum { NPR = 8 + NKP };
    double pr[NPR] = {snap[1].wall - snap[0].wall, snap[1].cpu - snap[0].cpu,
                      snap[1].pe - snap[0].pe, snap[1].kernel - snap[0].kernel, 0, 0,
                      snap[1].core_busy - snap[0].core_busy,
                      snap[1].core_idle - snap[0].core_idle};
    for (int q = 0; q < NKP; q++)
        pr[8 + q] = snap[1].part[q] - snap[0].part[q];
    for (int i = 0; i < nch; i++)
        pr[4] += owner[i] == rank;
    pr[5] = atomic_load(&taken[0]) && atomic_load(&taken[1]) ? window_first : -1;
    double *all = rank == 0 ? malloc(sizeof(pr) * (size_t)nprocs) : NULL;
    MPI_Gather(pr, NPR, MPI_DOUBLE, all, NPR, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    /* Messages of one cycle: forces to every neighbour, positions and velocities to those
     * before (lul_xch_sync_sends), gradients to the face neighbours. */
    int64_t msgs[2] = {0, 0}, bytes[2] = {0, 0}, faces = 0;
    for (int i = 0; i < nch; i++) {
        int       cc[3] = {i % grid[0], i / grid[0] % grid[1], i / grid[0] / grid[1]};
        lul_box_t b     = lul_box_of(n, grid, cc);
        for (int d = 0; d < 27; d++) {
            int nc[3];
            if (!lul_dir_neighbor(grid, cc, d, nc))
                continue;
            int     j  = (nc[2] * grid[1] + nc[1]) * grid[0] + nc[0], x = owner[j] != owner[i];
            int64_t nn = lul_node_count(b.ex, b.ey, b.ez, d), m = 1, by = nn * 3;
            if (lul_xch_sync_sends(d))
                m++, by += lul_node_count_of(b.ex, b.ey, b.ez, d, lul_node_copy_ring()) * 6;
            int f = lul_dir_face(d);
            if (f >= 0) {
                m++, by += lul_face_count(b.ex, b.ey, b.ez, f) * 3;
                faces += x;
            }
            msgs[x] += m;
            bytes[x] += by * (int64_t)sizeof(double);
        }
    }
    printf("STATS placement:");
    for (int i = 0; i < nch; i++)
        printf("%s%d", i % (grid[0] * grid[1]) ? "" : " ", owner[i]);
    printf(" (x fastest, z-layers apart)\n");
    printf("STATS messages per cycle: %lld in-process (%.1f KiB), %lld between processes "
           "(%.1f KiB), %lld chare faces between processes\n", (long long)msgs[0],
           (double)bytes[0] / 1024, (long long)msgs[1], (double)bytes[1] / 1024,
           (long long)faces / 2);
    for (int p = 0; p < nprocs && all[5] >= 0 && cycles > (int)all[5] + 1; p++) {
        const double *q = all + NPR * p;
        int           c = cycles - (int)q[5];
        printf("STATS rank %d: %g chares; cycles %d-%d: per cycle wall %.2f ms, CPU %.2f ms "
               "(%.0f%% of wall), PE 0 %.2f ms, kernels %.2f ms, rest %.2f ms; its core idle "
               "%.2f ms, other processes there %.2f ms\n", p, q[4], (int)q[5], cycles,
               1e3 * q[0] / c, 1e3 * q[1] / c, 100 * q[1] / q[0], 1e3 * q[2] / c,
               1e3 * q[3] / c, 1e3 * (q[1] - q[2] - q[3]) / c, 1e3 * q[7] / c,
               1e3 * (q[6] - q[1]) / c);
        printf("STATS rank %d kernels per cycle by part:", p);
        for (int k = 0; k < NKP; k++)
            printf(" %s %.2f ms", kp_name[k], 1e3 * q[8 + k] / c);
        printf("\n");
    }
    /* Time of each cycle on process 0 (from its first chare starting it to the next). */
    printf("STATS rank 0 ms per cycle:");
    for (int k = 1; k + 1 < MAX_CYCLES && k + 1 < cycles; k++)
        printf(" %.1f", 1e3 * (start_s[k + 1] - start_s[k]));
    printf("\n");
    free(all);
}

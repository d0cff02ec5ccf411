/*
 * stats_tess.h — lulesh_tess -stats: what a load-balancing run did with the two devices'
 * time. Per process, over a window of cycles (the second half of a -i run): wall, CPU (every
 * thread), PE 0's CPU and the timed kernels' time per cycle, the kernels by part of the cycle,
 * and the busy and idle time of the core the process runs on; at the end, where the chares
 * ended and the messages a cycle sends within and between processes with that placement.
 */
#ifndef LUL_STATS_TESS_H
#define LUL_STATS_TESS_H

#include <stdint.h>

/* Parts of a cycle: a stage with the exchange kernels after it (KP_OTHER: set-up). */
enum { KP_FORCE, KP_NODES, KP_GRAD, KP_EOS, KP_OTHER, NKP };

/* A timed kernel of part `part` ran `ns` of CPU time (executor threads). */
void lul_stats_kernel(int part, int64_t ns);
/* The window starts at cycle `first` and ends with the run (main, before tess_run). */
void lul_stats_window(int first);
/* A chare starts cycle `cycle` (-1: the run ends); the first of the process's chares to get
 * there takes the figures. */
void lul_stats_cycle(int cycle);
/* Collective (main, after tess_run): owner[chare] is this rank where the chare is local, -1
 * otherwise (overwritten); `cycles` the cycles run (rank 0's is used). Rank 0 prints. */
void lul_stats_print(int64_t n, const int grid[3], int *owner, int rank, int nprocs, int cycles);

#endif

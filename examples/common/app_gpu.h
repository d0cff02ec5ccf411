/*
 * app_gpu.h — the device boilerplate the example apps' plain MPI + GPU programs (jacobi2d_mpi,
 * minimd_mpi, lulesh_mpi) share: one GPU per node-local rank with a non-blocking stream, whether
 * the MPI is CUDA-aware, device and pinned host allocation, copies ordered on the stream, and
 * stream synchronization. Built with APP_CUDA (CUDA) or without (host memory, plain memcpy).
 * Until app_select_device picks a GPU everything works on host memory. A failed call ends the
 * job with "PROG: WHAT failed".
 */
#ifndef APP_GPU_H
#define APP_GPU_H

#include <stddef.h>

extern void *app_stream;     /* cudaStream_t of the selected GPU, or NULL on the host */
extern int   app_cuda_aware; /* MPI takes device pointers */

/* Names the program in error messages (PROG: WHAT failed). */
void app_set_prog(const char *prog);

/* Picks a GPU for this rank (node-local rank * devices / node-local ranks), creates the stream
 * and asks MPI whether it is CUDA-aware, unless there is none or the environment variable `env`
 * (e.g. JACOBI_GPU) is "host". Returns 1 when a GPU was picked, 0 otherwise. MPI must be up. */
int app_select_device(const char *prog, const char *env);

/* Ends the job (MPI_Abort) with "PROG: WHAT failed" unless ok. */
void app_check(int ok, const char *what);

/* Zeroed host memory without a GPU; device memory (app_dev_alloc) or pinned host memory
 * (app_host_alloc) with one. Zero bytes allocate a few. */
void *app_dev_alloc(size_t bytes);
void *app_host_alloc(size_t bytes);
/* Frees what app_dev_alloc (host = 0) or app_host_alloc (host = 1) returned. */
void app_dev_free(void *p, int host);

/* A copy ordered on the stream (host: at once). */
void app_copy(void *dst, const void *src, size_t bytes);
/* Waits for the stream (host: nothing to wait for). */
void app_sync_stream(void);

#endif

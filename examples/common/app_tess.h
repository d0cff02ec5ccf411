/*
 * app_tess.h — helpers the example apps' Tessera programs (jacobi2d_tess, minimd_tess,
 * lulesh_tess) share, as static inline functions: for now the number of GPUs in the job.
 */
#ifndef APP_TESS_H
#define APP_TESS_H

#include <mpi.h>
#include <tessera.h>
#include <tessera/gpu.h>

/* GPUs in the job: on each node, min(devices, processes); at least 1. */
static inline int app_count_gpus(void)
{
    MPI_Comm node;
    int      lrank, lsize, mine = 0, total = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &lsize);
    if (lrank == 0)
        mine = tess_gpu_num_devices() < lsize ? tess_gpu_num_devices() : lsize;
    MPI_Comm_free(&node);
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return total > 0 ? total : 1;
}

#endif

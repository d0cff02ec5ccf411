/*
 * cuda_int.h — private header of the CUDA backend (gpu_cuda.c, ipc_cuda.c): the backend's
 * state, error translation and cuda_bind, which makes the process's device current on the
 * calling thread before a runtime call. Threads: as gpu_cuda.c says.
 */
#ifndef TESS_CUDA_INT_H
#define TESS_CUDA_INT_H

#include "gpu/gpu.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

/* Driver ABI version asked of cudaGetDriverEntryPointByVersion: the PFN_*_vNNNN types below
 * are the newest versions of those symbols at CUDA 12.0. */
#define CUDA_ENTRY_VERSION 12000

typedef struct tess_cuda_state {
    int                             ndev;
    int                             device;  /* this process's device, -1 before set_device */
    _Atomic unsigned                gen;     /* bumped by set_device, see cuda_bind */
    PFN_cuPointerGetAttribute_v4000 pointer_get_attribute;
    PFN_cuMemGetAddressRange_v3020  mem_get_address_range;
    PFN_cuDeviceGet_v2000           device_get;
    PFN_cuDeviceGetAttribute_v2000  device_get_attribute;
    PFN_cuGetErrorName_v6000        get_error_name;
    PFN_cuPointerGetAttributes_v7000 pointer_get_attributes;
    PFN_cuLaunchKernel_v4000        launch_kernel;
    PFN_cuStreamWriteValue32_v11070 write_value32; /* NULL: no stream signals, events only */
    CUfunction                      copy_fn; /* the copy kernel on tess_cuda.device, or NULL */
    CUfunction                      copy_batch_fn; /* the batch copy kernel, or NULL */
} tess_cuda_state_t;

extern tess_cuda_state_t tess_cuda; /* written by init, set_device and fini only */

/* tess_cuda.gen when this thread last made tess_cuda.device current (0: never needed). */
extern _Thread_local unsigned tess_cuda_bound_gen;

/* ---- errors (gpu_cuda.c) ----------------------------------------------------------------- */

/* Translate once, naming the call that failed. */
tess_status_t tess_cuda_error_at(cudaError_t e, const char *what, const char *file, int line);
#define cuda_error(e, what) tess_cuda_error_at((e), (what), __FILE__, __LINE__)
tess_status_t tess_cuda_cu_error_at(CUresult r, const char *what, const char *file, int line);
#define cu_error(r, what) tess_cuda_cu_error_at((r), (what), __FILE__, __LINE__)

/* ---- the device current on this thread ---------------------------------------------------- */

static inline tess_status_t cuda_bind(void)
{
    unsigned gen = atomic_load_explicit(&tess_cuda.gen, memory_order_acquire);
    if (tess_likely(tess_cuda_bound_gen == gen) || tess_cuda.device < 0)
        return TESS_OK;
    cudaError_t e = cudaSetDevice(tess_cuda.device);
    if (e != cudaSuccess)
        return cuda_error(e, "cudaSetDevice");
    tess_cuda_bound_gen = gen;
    return TESS_OK;
}

/* ---- IPC (ipc_cuda.c) --------------------------------------------------------------------- */

tess_status_t tess_cuda_ipc_mem_export(void *ptr, tess_gpu_ipc_handle_t *h_p);
tess_status_t tess_cuda_ipc_mem_open(const tess_gpu_ipc_handle_t *h, void **ptr_p);
tess_status_t tess_cuda_ipc_mem_close(void *ptr);
/** Forget every thread's pointer classifications (gpu_cuda.c): after any free or unmapping. */
void          tess_cuda_ptr_cache_forget(void);
tess_status_t tess_cuda_ipc_event_export(tess_gpu_event_h ev, tess_gpu_ipc_handle_t *h_p);
tess_status_t tess_cuda_ipc_event_open(const tess_gpu_ipc_handle_t *h, tess_gpu_event_h *e_p);
tess_status_t tess_cuda_ipc_event_close(tess_gpu_event_h ev);

#endif /* TESS_CUDA_INT_H */

/*
 * tessera/gpu.h — GPU interop: the device backend, each chare's stream, device memory, GPU
 * completion continuations and device messages.
 *
 * Each element owns a non-blocking stream from a per-process pool (+tess-streams N; elements
 * share streams when there are more elements than streams). Launch your kernels on it:
 *
 *     cudaStream_t s = (cudaStream_t)tess_ctx_stream(ctx);
 *     my_kernel<<<grid, block, 0, s>>>(...);
 *     tess_gpu_then(ctx, E_DONE, NULL, 0);   // E_DONE runs on this element once s drains
 *
 * On the host backend (no GPU), a "kernel" is a host function enqueued on the stream with
 * tess_gpu_launch_host(); it runs asynchronously on a backend thread, in stream order.
 *
 * Threads: every function may be called from any thread once tess_init() returned, except
 * those taking a ctx, which are for entry methods of that element (entry).
 */
#ifndef TESSERA_GPU_H
#define TESSERA_GPU_H

#include <tessera.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tess_gpu_backend {
    TESS_GPU_HOST = 0,
    TESS_GPU_CUDA = 1,
    TESS_GPU_HIP  = 2
} tess_gpu_backend_t;

/** A stream: cudaStream_t with CUDA, hipStream_t with HIP, an opaque queue with host. */
typedef void *tess_stream_t;

/** Backend in use and its name ("host", "cuda", "hip"). */
tess_gpu_backend_t tess_gpu_backend(void);
const char        *tess_gpu_backend_name(void);
/** Device index this process uses (processes of a node are spread over its devices in blocks:
 *  local rank × devices / local processes), and the number of devices of the node. */
int tess_gpu_device(void);
int tess_gpu_num_devices(void);

/** The element's stream (entry, or main for local elements outside a phase). */
tess_stream_t tess_ctx_stream(tess_ctx_h ctx);

/** Device memory (exportable to other processes of the node) and pinned host memory. */
tess_status_t tess_gpu_malloc(void **ptr_p, size_t size);
tess_status_t tess_gpu_free(void *ptr);
tess_status_t tess_gpu_malloc_host(void **ptr_p, size_t size);
tess_status_t tess_gpu_free_host(void *ptr);

/** Asynchronous copy and set, ordered on `stream` (any direction: the backend infers it). */
tess_status_t tess_gpu_memcpy_async(void *dst, const void *src, size_t size, tess_stream_t stream);
tess_status_t tess_gpu_memset_async(void *dst, int value, size_t size, tess_stream_t stream);
/** Block until all work on the stream has completed. */
tess_status_t tess_gpu_stream_sync(tess_stream_t stream);

/** A host function run in stream order with a copy of args (at most 256 bytes). On the host
 *  backend this is how kernels are launched; on CUDA/HIP it is cudaLaunchHostFunc. */
typedef void (*tess_host_kernel_fn_t)(void *args);
tess_status_t tess_gpu_launch_host(tess_stream_t stream, tess_host_kernel_fn_t fn,
                                   const void *args, size_t args_size);

/**
 * Continuation (entry): when all work enqueued on the element's stream so far has completed,
 * `entry` runs on this element (on its PE) with a copy of `size` bytes of data. The runtime polls
 * completions of all pending continuations every scheduler pass, so one slow stream never holds
 * back another element's continuation. Pending continuations count as work for quiescence.
 */
#define tess_gpu_then(ctx, entry, data, size) \
    tess_gpu_then_loc((ctx), (entry), (data), (size), __FILE__, __LINE__)
tess_status_t tess_gpu_then_loc(tess_ctx_h ctx, tess_entry_t entry, const void *data,
                                size_t size, const char *file, int line);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_GPU_H */

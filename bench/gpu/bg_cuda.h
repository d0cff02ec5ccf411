/*
 * bg_cuda.h — the raw CUDA side of the GPU-layer benchmarks, as plain C functions.
 *
 * bg_cuda.cu implements them with the CUDA runtime (kernels launched with <<<>>>); it is built
 * only with CUDA. bg_nocuda.c is the fallback of a build without CUDA: bg_cuda_available()
 * answers 0 there and every other function fails. This header includes nothing from CUDA or
 * Tessera, so both C and nvcc read it.
 *
 * Threads: the CUDA device is current per thread; bg_cuda_bind() makes the benchmark's device
 * current on the calling thread (once; cheap afterwards). Every other function binds itself.
 */
#ifndef BG_CUDA_H
#define BG_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/** 1 when this build has the CUDA side, 0 in a build without CUDA. */
int bg_cuda_available(void);

/** Use `device` (the one Tessera chose: tess_gpu_device()); the empty kernel gets one block of
 *  `block` threads per SM. *sms_p gets the number of SMs. 0 on success, -1 on error. */
int bg_cuda_init(int device, int block, int *sms_p);

/** Make the benchmark's device current on the calling thread. 0 or -1. */
int bg_cuda_bind(void);

/** Non-blocking stream / event without timing (the kind Tessera's pools use). 0 or -1. */
int  bg_cuda_stream_create(void **stream_p);
void bg_cuda_stream_destroy(void *stream);
int  bg_cuda_event_create(void **event_p);
void bg_cuda_event_destroy(void *event);

/** Launch the empty kernel <<<SMs, block, 0, stream>>> on a cudaStream_t. 0 or -1. */
int bg_cuda_launch_empty(void *stream);
/** cudaEventRecord(event, stream). 0 or -1. */
int bg_cuda_record(void *event, void *stream);
/** cudaEventQuery: 1 completed, 0 not yet, -1 error. */
int bg_cuda_query(void *event);
/** cudaStreamSynchronize. 0 or -1. */
int bg_cuda_stream_sync(void *stream);

/** Text of the last error of the calling thread ("" if none). */
const char *bg_cuda_error(void);

#ifdef __cplusplus
}
#endif

#endif /* BG_CUDA_H */

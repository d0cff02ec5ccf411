/*
 * ovl.h — the CUDA side of bench_overlap (ovl_cuda.cu; ovl_nocuda.c in a build without CUDA).
 * Plain C, so both the C driver and nvcc read it. All functions run on the main thread.
 */
#ifndef OVL_H
#define OVL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OVL_SKIP 77 /* no CUDA in this build, or no device: nothing to measure */

/** Set up device 0 for totals up to max_total threads split into up to max_kernels kernels:
 *  streams, events, the host-mapped flag, cuStreamWaitValue32 from the driver. 0, OVL_SKIP or
 *  -1 (err gets the reason). */
int ovl_init(int64_t max_total, int max_kernels, char *err, size_t len);

/** Device name and CUDA_DEVICE_MAX_CONNECTIONS in effect (8 when unset). */
const char *ovl_device_name(void);
int         ovl_connections(void);

/**
 * One trial: `kernels` kernels of total/kernels threads each, one per stream, all held back by
 * a wait on the host-mapped flag, then released at once by a host store. gpu_us: from the
 * release seen on the device (an event recorded on stream 0 right after its wait) to the last
 * kernel's end; host_us: from the store to the host seeing every kernel complete. `verify`
 * checks afterwards that every thread wrote its result. 0 or -1 (err).
 */
int ovl_trial(int64_t total, int kernels, int iters, int hold_us, int verify, double *gpu_us,
              double *host_us, char *err, size_t len);

void ovl_fini(void);

#ifdef __cplusplus
}
#endif

#endif /* OVL_H */

/*
 * dcb_scale.h — the per-element math of bench_devcomm's O(n) kernel, once for the CUDA kernel
 * and the host loop: an affine update of every float of a received buffer.
 */
#ifndef DCB_SCALE_H
#define DCB_SCALE_H

#include <tessera/kernel.h>

#define DCB_SCALE_A 0.5f
#define DCB_SCALE_B 1.0f

static inline TESS_HD void dcb_scale_point(float *x, int64_t i, float a, float b)
{
    x[i] = a * x[i] + b;
}

#endif /* DCB_SCALE_H */

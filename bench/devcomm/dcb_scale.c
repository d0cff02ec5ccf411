/*
 * dcb_scale.c — bench_devcomm's O(n) kernel on the backend in use: the CUDA launcher with CUDA,
 * else a host loop enqueued on the stream (how the host backend runs kernels).
 */
#include "dcb.h"
#include "dcb_scale.h"

typedef struct scale_args {
    float  *x;
    size_t  n;
} scale_args_t;

static void scale_host(void *arg)
{
    scale_args_t *a = arg;
    TESS_KERNEL_LOOP(i, a->n)
        dcb_scale_point(a->x, i, DCB_SCALE_A, DCB_SCALE_B);
}

void dcb_scale(tess_stream_t stream, float *x, size_t n)
{
#ifdef DCB_HAVE_CUDA
    if (tess_gpu_backend() == TESS_GPU_CUDA) {
        dcb_scale_cuda(stream, x, n, DCB_SCALE_A, DCB_SCALE_B);
        return;
    }
#endif
    scale_args_t a = {x, n};
    if (tess_gpu_launch_host(stream, scale_host, &a, sizeof(a)) != TESS_OK)
        dcb_die("the scale kernel did not launch: %s", tess_error_detail());
}

/* ovl_nocuda.c — ovl.h in a build without CUDA: there is nothing to measure. */
#include "ovl.h"

#include <stdio.h>

int ovl_init(int64_t max_total, int max_kernels, char *err, size_t len)
{
    (void)max_total; (void)max_kernels;
    snprintf(err, len, "this build has no CUDA (configure --with-cuda)");
    return OVL_SKIP;
}

const char *ovl_device_name(void) { return "none"; }
int         ovl_connections(void) { return 0; }

int ovl_trial(int64_t total, int kernels, int iters, int hold_us, int verify, double *gpu_us,
              double *host_us, char *err, size_t len)
{
    (void)total; (void)kernels; (void)iters; (void)hold_us; (void)verify;
    *gpu_us = *host_us = 0;
    snprintf(err, len, "this build has no CUDA");
    return -1;
}

void ovl_fini(void) {}

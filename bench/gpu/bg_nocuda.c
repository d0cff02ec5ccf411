/* bg_nocuda.c — bg_cuda.h in a build without CUDA: nothing is available, every call fails. */
#include "bg_cuda.h"

#include <stddef.h>

static const char no_cuda[] = "this build has no CUDA (configure --with-cuda)";

int         bg_cuda_available(void) { return 0; }
const char *bg_cuda_error(void) { return no_cuda; }
int         bg_cuda_init(int device, int block, int *sms_p)
{
    (void)device; (void)block;
    *sms_p = 0;
    return -1;
}
int  bg_cuda_bind(void) { return -1; }
int  bg_cuda_stream_create(void **stream_p) { *stream_p = NULL; return -1; }
void bg_cuda_stream_destroy(void *stream) { (void)stream; }
int  bg_cuda_event_create(void **event_p) { *event_p = NULL; return -1; }
void bg_cuda_event_destroy(void *event) { (void)event; }
int  bg_cuda_launch_empty(void *stream) { (void)stream; return -1; }
int  bg_cuda_record(void *event, void *stream) { (void)event; (void)stream; return -1; }
int  bg_cuda_query(void *event) { (void)event; return -1; }
int  bg_cuda_stream_sync(void *stream) { (void)stream; return -1; }

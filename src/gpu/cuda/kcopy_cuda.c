/*
 * kcopy_cuda.c — the CUDA backend's own copy and signal ops: small copies between allocations of
 * the process's device go through the backend's copy kernel (copy_kernel.cu) rather than
 * cudaMemcpyAsync, which costs the host more to enqueue — alone, as one launch for a batch, or
 * with a stream signal written by the kernel itself; and stream signals (cuStreamWriteValue32
 * on mapped host memory). Everything else is a copy by the runtime (vendor/gpu_vendor.c).
 *
 * Threads: as thread-safe as the CUDA runtime; no state of its own (driver_cuda.c has the
 * kernel's handles).
 */
#include "copy_batch.h"
#include "gpu/vendor/vendor.h"

#include <string.h>

/* Copies up to this size between allocations of the process's device run as a kernel: 4.4 µs
 * to enqueue on the H200 against 5.9 for cudaMemcpyAsync (any size). Larger ones keep to the
 * copy engines: in a stream of 16 and 64 MiB device messages the copy kernel moved 2-10% less
 * than the engines (and it takes SMs from the kernels running beside it). */
#define CUDA_KCOPY_MAX ((size_t)1 << 20)

/* The copy kernel on s; with `word`, as one block of up to 1024 threads that then writes
 * `value` to the word (the caller keeps such copies to VND_KCOPY_SIGNAL_MAX). */
static tess_status_t cuda_copy_kernel(void *dst, const void *src, size_t size, cudaStream_t s,
                                      _Atomic uint32_t *word, uint32_t value)
{
    uintptr_t bits    = (uintptr_t)dst | (uintptr_t)src | (uintptr_t)size;
    unsigned  width   = bits % 16 == 0 ? 16 : bits % 8 == 0 ? 8 : bits % 4 == 0 ? 4 : 1;
    size_t    elems   = size / width;
    unsigned  threads = 256;
    unsigned  blocks  = (unsigned)TESS_MIN((elems + threads - 1) / threads, (size_t)1024);
    if (word) {
        threads = (unsigned)TESS_MIN((elems + 31) / 32 * 32, (size_t)1024);
        blocks  = 1;
    }
    void    *wp     = (void *)word;
    unsigned v      = value;
    void    *args[] = {&dst, (void *)&src, &size, &width, &wp, &v};
    CUresult r      = tess_cuda_driver.launch_kernel(tess_cuda_driver.copy_fn, blocks, 1, 1,
                                                     threads, 1, 1, 0, (CUstream)s, args, NULL);
    return r == CUDA_SUCCESS ? TESS_OK : cu_error(r, "cuLaunchKernel (the copy kernel)");
}

/* Whether the copy kernel takes a copy of `size` bytes (at most `max`) from src to dst. */
static int cuda_kcopy_takes(void *dst, const void *src, size_t size, size_t max)
{
    return size && size <= max && tess_cuda_driver.copy_fn && tess_cuda_on_device(dst) &&
           tess_cuda_on_device(src);
}

tess_status_t tess_cuda_kcopy_memcpy_async(void *dst, const void *src, size_t size,
                                           tess_gpu_stream_h s)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    if (cuda_kcopy_takes(dst, src, size, CUDA_KCOPY_MAX))
        return cuda_copy_kernel(dst, src, size, (cudaStream_t)s, NULL, 0);
    return tess_cuda_memcpy_runtime(dst, src, size, s);
}

/* The small copies between device allocations of the batch as one launch of the batch copy
 * kernel (one row of blocks a copy); the others as memcpy_async each. The host pays one
 * launch instead of one per copy: the receiver of several small device messages at once. */
tess_status_t tess_cuda_memcpy_batch_async(const tess_gpu_copy_t *copies, int n,
                                           tess_gpu_stream_h s)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    tess_cuda_copy_batch_t b;
    size_t                 most = 0;
    b.n                         = 0;
    for (int i = 0; i < n; i++) {
        const tess_gpu_copy_t *c = &copies[i];
        if (!c->size)
            continue;
        if (n > 1 && c->size <= CUDA_KCOPY_MAX && tess_cuda_driver.copy_batch_fn &&
            b.n < TESS_CUDA_COPY_BATCH_MAX && tess_cuda_on_device(c->dst) &&
            tess_cuda_on_device(c->src)) {
            b.dst[b.n]    = c->dst;
            b.src[b.n]    = c->src;
            b.size[b.n++] = c->size;
            most          = TESS_MAX(most, c->size);
        } else if ((st = tess_cuda_kcopy_memcpy_async(c->dst, c->src, c->size, s)) != TESS_OK) {
            return st;
        }
    }
    if (b.n == 0)
        return TESS_OK;
    if (b.n == 1)
        return cuda_copy_kernel(b.dst[0], b.src[0], b.size[0], (cudaStream_t)s, NULL, 0);
    unsigned threads = 256;
    unsigned blocks  = (unsigned)TESS_MIN((most / 16 + threads - 1) / threads, (size_t)64);
    void    *args[]  = {&b};
    CUresult r = tess_cuda_driver.launch_kernel(tess_cuda_driver.copy_batch_fn,
                                                TESS_MAX(blocks, 1u), b.n, 1, threads, 1, 1, 0,
                                                (CUstream)s, args, NULL);
    return r == CUDA_SUCCESS ? TESS_OK : cu_error(r, "cuLaunchKernel (the batch copy kernel)");
}

/* A small device copy signals from the copy kernel itself (one launch: cuStreamWriteValue32
 * costs the host as much again); anything else is a copy and then a stream signal. */
tess_status_t tess_cuda_memcpy_signal_async(void *dst, const void *src, size_t size,
                                            tess_gpu_stream_h s, _Atomic uint32_t *word,
                                            uint32_t value)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    if (cuda_kcopy_takes(dst, src, size, VND_KCOPY_SIGNAL_MAX))
        return cuda_copy_kernel(dst, src, size, (cudaStream_t)s, word, value);
    if ((st = tess_cuda_kcopy_memcpy_async(dst, src, size, s)) != TESS_OK)
        return st;
    return tess_cuda_stream_signal(s, word, value);
}

/* ---- stream signals ----------------------------------------------------------------------- */

/* Signal words: mapped pinned host memory, which under unified addressing the device writes at
 * the host's own address (checked: the word's address is passed as the device pointer). */
tess_status_t tess_cuda_signal_alloc(size_t n, _Atomic uint32_t **words_p)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    if (!tess_cuda_driver.write_value32)
        return TESS_ERR_UNSUPPORTED;
    size_t      size = (n ? n : 1) * sizeof(uint32_t);
    void       *host = NULL, *dev = NULL;
    cudaError_t e = cudaHostAlloc(&host, size, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess)
        return vnd_error(e, "cudaHostAlloc (stream signal words)");
    e = cudaHostGetDevicePointer(&dev, host, 0);
    if (e != cudaSuccess || dev != host) {
        (void)cudaGetLastError();
        (void)cudaFreeHost(host);
        tess_debug("cuda: mapped host memory has another device address: no stream signals");
        return TESS_ERR_UNSUPPORTED;
    }
    memset(host, 0, size);
    *words_p = host;
    return TESS_OK;
}

void tess_cuda_signal_free(_Atomic uint32_t *words)
{
    if (words && vnd_bind() == TESS_OK)
        (void)cudaFreeHost((void *)words);
}

tess_status_t tess_cuda_stream_signal(tess_gpu_stream_h s, _Atomic uint32_t *word,
                                      uint32_t value)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    /* CU_STREAM_WRITE_VALUE_DEFAULT: the write follows a fence over the stream's earlier work. */
    CUresult r = tess_cuda_driver.write_value32((CUstream)s, (CUdeviceptr)(uintptr_t)word, value,
                                                CU_STREAM_WRITE_VALUE_DEFAULT);
    return r == CUDA_SUCCESS ? TESS_OK : cu_error(r, "cuStreamWriteValue32");
}

/*
 * count-calls.c — an LD_PRELOAD library that counts the Tessera calls a program makes that cost
 * host time on a GPU: kernel launches (tess_gpu_launch_host: the host backend's launch, one per
 * kernel the apps' launchers start), stream copies and memsets, device messages
 * (tess_send_device_many counts each of its sends), host messages (tess_send), GPU
 * continuations (tess_gpu_then), reduction contributions and broadcasts. Only calls from the
 * program itself count, not the runtime's own. At exit each MPI process prints one line to
 * stderr:
 *
 *   CALLS rank=R launches=N copies=N memsets=N dev_msgs=N msgs=N thens=N contributes=N
 *         broadcasts=N dev_bytes=N (the device messages' bytes)
 *
 * Built and used by count-app-calls.sh (host backend); not part of the library or its tests.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <tessera.h>
#include <tessera/gpu.h>

enum { C_LAUNCH, C_COPY, C_MEMSET, C_DEVMSG, C_MSG, C_THEN, C_CONTRIB, C_BCAST, C_DEVBYTES, C_N };
static atomic_long counts[C_N];

/* Whether the caller at `ret` lies outside the object that defines `real` (the library): the
 * runtime's calls of its own public functions are not the program's. */
static int from_program(void *ret, void *real)
{
    Dl_info caller, lib;
    return dladdr(ret, &caller) && dladdr(real, &lib) && caller.dli_fbase != lib.dli_fbase;
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))
#define COUNT(name, k, n)                                                                        \
    do {                                                                                         \
        if (from_program(__builtin_return_address(0), (void *)NEXT(name)))                      \
            atomic_fetch_add(&counts[k], (n));                                                   \
    } while (0)

tess_status_t tess_gpu_launch_host(tess_stream_t stream, tess_host_kernel_fn_t fn,
                                   const void *args, size_t args_size)
{
    COUNT(tess_gpu_launch_host, C_LAUNCH, 1);
    return NEXT(tess_gpu_launch_host)(stream, fn, args, args_size);
}

tess_status_t tess_gpu_memcpy_async(void *dst, const void *src, size_t bytes,
                                    tess_stream_t stream)
{
    COUNT(tess_gpu_memcpy_async, C_COPY, 1);
    return NEXT(tess_gpu_memcpy_async)(dst, src, bytes, stream);
}

tess_status_t tess_gpu_memset_async(void *dst, int value, size_t bytes, tess_stream_t stream)
{
    COUNT(tess_gpu_memset_async, C_MEMSET, 1);
    return NEXT(tess_gpu_memset_async)(dst, value, bytes, stream);
}

tess_status_t tess_send_device_many_loc(const tess_dev_send_t *sends, int n,
                                        tess_stream_t stream, const char *file, int line)
{
    COUNT(tess_send_device_many_loc, C_DEVMSG, n);
    long bytes = 0;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < sends[i].nbufs; b++)
            bytes += (long)sends[i].bufs[b].size;
    COUNT(tess_send_device_many_loc, C_DEVBYTES, bytes);
    return NEXT(tess_send_device_many_loc)(sends, n, stream, file, line);
}

tess_status_t tess_send_device_loc(tess_array_h array, tess_index_t index, tess_entry_t entry,
                                   const void *header, size_t header_len,
                                   const tess_dev_buf_t *bufs, int nbufs, tess_stream_t stream,
                                   tess_dev_done_fn_t done, void *done_arg, const char *file,
                                   int line)
{
    COUNT(tess_send_device_loc, C_DEVMSG, 1);
    long bytes = 0;
    for (int b = 0; b < nbufs; b++)
        bytes += (long)bufs[b].size;
    COUNT(tess_send_device_loc, C_DEVBYTES, bytes);
    return NEXT(tess_send_device_loc)(array, index, entry, header, header_len, bufs, nbufs,
                                      stream, done, done_arg, file, line);
}

tess_status_t tess_gpu_then_loc(tess_ctx_h ctx, tess_entry_t entry, const void *data,
                                size_t size, const char *file, int line)
{
    COUNT(tess_gpu_then_loc, C_THEN, 1);
    return NEXT(tess_gpu_then_loc)(ctx, entry, data, size, file, line);
}

tess_status_t tess_send_loc(tess_array_h array, tess_index_t index, tess_entry_t entry,
                            const void *data, size_t size, const char *file, int line)
{
    COUNT(tess_send_loc, C_MSG, 1);
    return NEXT(tess_send_loc)(array, index, entry, data, size, file, line);
}

tess_status_t tess_contribute_loc(tess_ctx_h ctx, uint64_t tag, const void *data, int count,
                                  tess_dtype_t type, tess_op_t op, tess_callback_t cb,
                                  const char *file, int line)
{
    COUNT(tess_contribute_loc, C_CONTRIB, 1);
    return NEXT(tess_contribute_loc)(ctx, tag, data, count, type, op, cb, file, line);
}

tess_status_t tess_broadcast_loc(tess_array_h array, tess_entry_t entry, const void *data,
                                 size_t size, const char *file, int line)
{
    COUNT(tess_broadcast_loc, C_BCAST, 1);
    return NEXT(tess_broadcast_loc)(array, entry, data, size, file, line);
}

__attribute__((destructor)) static void count_calls_report(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r)
        return; /* not an MPI process (mpirun itself) */
    fprintf(stderr,
            "CALLS rank=%s launches=%ld copies=%ld memsets=%ld dev_msgs=%ld msgs=%ld thens=%ld "
            "contributes=%ld broadcasts=%ld dev_bytes=%ld\n",
            r, atomic_load(&counts[C_LAUNCH]), atomic_load(&counts[C_COPY]),
            atomic_load(&counts[C_MEMSET]), atomic_load(&counts[C_DEVMSG]),
            atomic_load(&counts[C_MSG]), atomic_load(&counts[C_THEN]),
            atomic_load(&counts[C_CONTRIB]), atomic_load(&counts[C_BCAST]),
            atomic_load(&counts[C_DEVBYTES]));
}

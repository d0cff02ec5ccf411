/*
 * enqueue.c — the host backend's stream operations as the ops enqueue them: copies, sets, host
 * functions, event records and waits, signals and graph launches, each checked, built and
 * handed to its stream's queue (exec.c: tess_gpu_host_exec_begin takes the executors' lock and
 * an operation, tess_gpu_host_exec_submit queues it, or appends it to the graph its stream
 * records, and unlocks). What an operation does when it runs is exec.c's.
 *
 * Threads: every function may be called from any thread concurrently (the executors' lock,
 * held from begin to submit, orders the operations of a stream), but not from a host function
 * (it runs on an executor thread).
 */
#include "host.h"

#include <string.h>

typedef tess_gpu_host_op_t exec_op_t;

/* Copies and sets: their arguments are checked against device memory by the caller (ops.c). */
tess_status_t tess_gpu_host_stream_copy(void *dst, const void *src, size_t size,
                                        tess_gpu_stream_h s)
{
    exec_op_t    *op;
    tess_status_t st = tess_gpu_host_exec_begin(&s, "memcpy_async", 1, &op);
    if (st != TESS_OK)
        return st;
    op->kind        = OP_COPY;
    op->u.copy.dst  = dst;
    op->u.copy.src  = src;
    op->u.copy.size = size;
    return tess_gpu_host_exec_submit(s, op);
}

tess_status_t tess_gpu_host_stream_set(void *dst, int value, size_t size, tess_gpu_stream_h s)
{
    exec_op_t    *op;
    tess_status_t st = tess_gpu_host_exec_begin(&s, "memset_async", 1, &op);
    if (st != TESS_OK)
        return st;
    op->kind        = OP_SET;
    op->u.set.dst   = dst;
    op->u.set.value = value;
    op->u.set.size  = size;
    return tess_gpu_host_exec_submit(s, op);
}

tess_status_t tess_gpu_host_launch_host(tess_gpu_stream_h s, tess_gpu_host_fn_t fn,
                                        const void *args, size_t args_size)
{
    exec_op_t    *op;
    tess_status_t st;
    if (!fn)
        return tess_error(TESS_ERR_INVALID, "launch_host: fn is NULL");
    if (args_size > TESS_GPU_HOST_ARGS_MAX || (args_size && !args))
        return tess_error(TESS_ERR_INVALID, "launch_host: %zu bytes of arguments at %p "
                          "(at most %d)", args_size, args, TESS_GPU_HOST_ARGS_MAX);
    if ((st = tess_gpu_host_exec_begin(&s, "launch_host", 1, &op)) != TESS_OK)
        return st;
    op->kind      = OP_FN;
    op->u.fn      = fn;
    op->args_size = (uint32_t)args_size;
    if (args_size)
        memcpy(op->args, args, args_size);
    return tess_gpu_host_exec_submit(s, op);
}

tess_status_t tess_gpu_host_event_record(tess_gpu_event_h e, tess_gpu_stream_h s)
{
    exec_op_t    *op;
    tess_status_t st = tess_gpu_host_event_check(e, "event_record");
    if (st != TESS_OK || (st = tess_gpu_host_exec_begin(&s, "event_record", 0, &op)) != TESS_OK)
        return st;
    op->kind      = OP_RECORD;
    op->u.ev.slot = e->slot;
    /* Taken under the lock, so seqs of one stream are in stream order. */
    op->u.ev.seq  = atomic_fetch_add_explicit(&e->slot->recorded, 1, memory_order_acq_rel) + 1;
    op->u.ev.ipc  = (e->flags & TESS_GPU_EVENT_IPC) != 0;
    return tess_gpu_host_exec_submit(s, op);
}

tess_status_t tess_gpu_host_stream_signal(tess_gpu_stream_h s, _Atomic uint32_t *word,
                                          uint32_t value)
{
    exec_op_t    *op;
    tess_status_t st;
    if (!word)
        return tess_error(TESS_ERR_INVALID, "stream_signal: the word is NULL");
    if ((st = tess_gpu_host_exec_begin(&s, "stream_signal", 0, &op)) != TESS_OK)
        return st;
    op->kind        = OP_SIGNAL;
    op->u.sig.word  = word;
    op->u.sig.value = value;
    return tess_gpu_host_exec_submit(s, op);
}

tess_status_t tess_gpu_host_stream_wait_event(tess_gpu_stream_h s, tess_gpu_event_h e)
{
    exec_op_t    *op;
    tess_status_t st = tess_gpu_host_event_check(e, "stream_wait_event");
    if (st != TESS_OK)
        return st;
    /* CUDA semantics: the record last issued before this call, not any later one. Never
     * recorded, or already complete: nothing to wait for (the acquire load orders what the
     * caller enqueues next after the recorded work). */
    uint64_t target = atomic_load_explicit(&e->slot->recorded, memory_order_acquire);
    if (target == 0 ||
        atomic_load_explicit(&e->slot->completed, memory_order_acquire) >= target)
        return tess_gpu_host_stream_check(s, "stream_wait_event");
    if ((st = tess_gpu_host_exec_begin(&s, "stream_wait_event", 0, &op)) != TESS_OK)
        return st;
    op->kind      = OP_WAIT;
    op->u.ev.slot = e->slot;
    op->u.ev.seq  = target;
    op->u.ev.ipc  = (e->flags & TESS_GPU_EVENT_IPC) != 0;
    return tess_gpu_host_exec_submit(s, op);
}

tess_status_t tess_gpu_host_graph_launch(tess_gpu_graph_h g, tess_gpu_stream_h s)
{
    exec_op_t    *op;
    tess_status_t st;
    if (!g || g->magic != TESS_GPU_HOST_GRAPH_MAGIC)
        return tess_error(TESS_ERR_INVALID, "graph_launch: %p is not a live graph", (void *)g);
    if ((st = tess_gpu_host_exec_begin(&s, "graph_launch", 0, &op)) != TESS_OK)
        return st;
    op->kind    = OP_GRAPH;
    op->u.graph = g;
    tess_gpu_host_graph_ref(g); /* dropped by the executor after the run */
    return tess_gpu_host_exec_submit(s, op);
}

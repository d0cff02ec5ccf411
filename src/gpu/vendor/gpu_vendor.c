/*
 * gpu_vendor.c — the CUDA and HIP backends: tess_gpu_ops_t over the vendor's runtime API, called
 * from C. One source, compiled once per vendor (vendor.h says how the names map and what each
 * vendor does its own way).
 *
 * Handles are the vendor's: a tess_gpu_stream_h is a cudaStream_t / hipStream_t, a
 * tess_gpu_event_h a cudaEvent_t / hipEvent_t. Errors are translated once (vnd_error), naming
 * the call that failed.
 *
 * init() answers TESS_ERR_UNSUPPORTED quietly when the runtime sees no device (no driver, or no
 * GPU), and the host backend takes over.
 *
 * Threads: as vendor.h says.
 */
#include "gpu/vendor/vendor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A launch_host call: the function and a copy of its arguments, freed after the call — or,
 * recorded into a graph, kept (on the graph's list) until the graph is destroyed and its last
 * launch has run. */
typedef struct vnd_host_call {
    struct vnd_host_call *next;
    tess_gpu_host_fn_t    fn;
    uint32_t              args_size;
    int                   kept;
    _Alignas(max_align_t) unsigned char args[];
} vnd_host_call_t;

/* The stream this thread records a graph from (graph_begin; capture is per thread), and the
 * host calls recorded so far. */
static _Thread_local VND(Stream_t)    vnd_rec_stream;
static _Thread_local vnd_host_call_t *vnd_rec_calls;

tess_vnd_state_t tess_vnd = {.device = -1};

_Thread_local unsigned VND_FN(bound_gen);

/* ---- init, devices ----------------------------------------------------------------------- */

static tess_status_t vnd_init(const tess_gpu_init_params_t *params)
{
    (void)params;
    int          ndev = 0;
    VND(Error_t) e    = VND(GetDeviceCount)(&ndev);
    if (e != VND(Success) || ndev < 1) {
        /* No driver or no device: the host backend takes over, nothing to report. */
        (void)VND(GetLastError)();
        return TESS_ERR_UNSUPPORTED;
    }
    tess_status_t st = VND_FN(driver_init)();
    if (st != TESS_OK)
        return st;
    tess_vnd.ndev   = ndev;
    tess_vnd.device = -1;
    return TESS_OK;
}

static void vnd_fini(void)
{
    /* No device reset: the application may still use the primary context. */
    tess_vnd.ndev   = 0;
    tess_vnd.device = -1;
    VND_FN(driver_fini)();
}

static int vnd_device_count(void) { return tess_vnd.ndev; }

static tess_status_t vnd_set_device(int device)
{
    if (device < 0 || device >= tess_vnd.ndev)
        return tess_error(TESS_ERR_INVALID, VND_TITLE " device %d does not exist (%d visible)",
                          device, tess_vnd.ndev);
    VND(Error_t) e = VND(SetDevice)(device);
    if (e != VND(Success))
        return vnd_error(e, VND_STR(SetDevice));
    VND_FN(device_selected)(device);
    tess_vnd.device   = device;
    VND_FN(bound_gen) = atomic_fetch_add_explicit(&tess_vnd.gen, 1, memory_order_acq_rel) + 1;
    return TESS_OK;
}

static tess_status_t vnd_get_props(int device, tess_gpu_props_t *props_p)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    vndDeviceProp_t p;
    VND(Error_t)    e = VND(GetDeviceProperties)(&p, device);
    if (e != VND(Success))
        return vnd_error(e, VND_STR(GetDeviceProperties));

    memset(props_p, 0, sizeof(*props_p));
    snprintf(props_p->name, sizeof(props_p->name), "%.*s", (int)sizeof(props_p->name) - 1,
             p.name);
    props_p->total_mem       = p.totalGlobalMem;
    props_p->multiprocessors = p.multiProcessorCount;
    return VND_FN(get_caps)(device, props_p);
}

/* ---- memory ------------------------------------------------------------------------------ */

static tess_status_t vnd_mem_alloc(size_t size, void **ptr_p)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    void        *ptr = NULL;
    VND(Error_t) e   = VND(Malloc)(&ptr, size);
    if (e != VND(Success)) {
        char what[64];
        snprintf(what, sizeof(what), VND_STR(Malloc) "(%zu bytes)", size);
        /* Out of memory is answered here (the runtime falls back on it, as the checkpoint
         * snapshot does): not left for the program's next GetLastError. */
        (void)VND(GetLastError)();
        return vnd_error(e, what);
    }
    if (ptr) { /* size 0 gives NULL: nothing to track */
        st = VND_FN(reg_track)(ptr, size);
        if (st != TESS_OK)
            goto err_free_mem;
    }
    *ptr_p = ptr;
    return TESS_OK;

err_free_mem:
    (void)VND(Free)(ptr);
    return st;
}

static tess_status_t vnd_mem_free(void *ptr)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    /* Forget first: once freed, another thread's allocation may return the same address. */
    VND_FN(reg_forget)(ptr);
    VND_FN(mem_forget)(ptr);
    VND(Error_t) e = VND(Free)(ptr);
    return e == VND(Success) ? TESS_OK : vnd_error(e, VND_STR(Free));
}

/* The runtime's own allocations from the registry (alloc_vendor.c), other pointers from the
 * vendor's runtime (each device-message send between processes asks once per buffer, and a
 * driver query costs a microsecond or more). */
static tess_status_t vnd_ptr_query(const void *ptr, tess_gpu_ptr_info_t *info_p)
{
    memset(info_p, 0, sizeof(*info_p));
    info_p->device = -1;
    if (ptr && VND_FN(reg_find)(ptr, info_p))
        return TESS_OK;
    return VND_FN(ptr_query)(ptr, info_p);
}

static tess_status_t vnd_host_alloc(size_t size, void **ptr_p)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Error_t) e = vnd_host_malloc(ptr_p, size);
    if (e != VND(Success)) {
        char what[64];
        snprintf(what, sizeof(what), VND_HOST_MALLOC_STR "(%zu bytes)", size);
        (void)VND(GetLastError)(); /* answered here, as in vnd_mem_alloc */
        return vnd_error(e, what);
    }
    return TESS_OK;
}

static tess_status_t vnd_host_free_op(void *ptr)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND_FN(mem_forget)(ptr);
    VND(Error_t) e = vnd_host_free(ptr);
    return e == VND(Success) ? TESS_OK : vnd_error(e, VND_HOST_FREE_STR);
}

tess_status_t VND_FN(memcpy_runtime)(void *dst, const void *src, size_t size,
                                     tess_gpu_stream_h s)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Error_t) e = VND(MemcpyAsync)(dst, src, size, VND(MemcpyDefault), (VND(Stream_t))s);
    return e == VND(Success) ? TESS_OK : vnd_error(e, VND_STR(MemcpyAsync));
}

static tess_status_t vnd_memset_async(void *dst, int value, size_t size, tess_gpu_stream_h s)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Error_t) e = VND(MemsetAsync)(dst, value, size, (VND(Stream_t))s);
    return e == VND(Success) ? TESS_OK : vnd_error(e, VND_STR(MemsetAsync));
}

/* Runs on a runtime thread; must not call the runtime. */
static void vnd_host_call_run(void *arg)
{
    vnd_host_call_t *call = arg;
    call->fn(call->args);
    if (!call->kept)
        free(call);
}
VND_HOST_TRAMPOLINE(vnd_host_trampoline, vnd_host_call_run)

static tess_status_t vnd_launch_host(tess_gpu_stream_h s, tess_gpu_host_fn_t fn,
                                     const void *args, size_t args_size)
{
    if (args_size > TESS_GPU_HOST_ARGS_MAX)
        return tess_error(TESS_ERR_INVALID, "launch_host: %zu bytes of arguments (at most %d)",
                          args_size, TESS_GPU_HOST_ARGS_MAX);
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    vnd_host_call_t *call = tess_malloc(sizeof(*call) + args_size, "a host launch");
    if (!call)
        return TESS_ERR_NO_MEMORY;
    call->next      = NULL;
    call->fn        = fn;
    call->args_size = (uint32_t)args_size;
    call->kept      = vnd_rec_stream && (VND(Stream_t))s == vnd_rec_stream;
    if (args_size > 0)
        memcpy(call->args, args, args_size);

    VND(Error_t) e = vnd_launch_host_func((VND(Stream_t))s, vnd_host_trampoline, call);
    if (e != VND(Success)) {
        st = vnd_error(e, VND_LAUNCH_HOST_FUNC_STR);
        goto err_free_call;
    }
    if (call->kept) { /* replayed with each launch of the graph: the graph owns it */
        call->next    = vnd_rec_calls;
        vnd_rec_calls = call;
    }
    return TESS_OK;

err_free_call:
    free(call);
    return st;
}

/* ---- streams ----------------------------------------------------------------------------- */

static tess_status_t vnd_stream_create(tess_gpu_stream_h *s_p)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Stream_t) s;
    VND(Error_t)  e = VND(StreamCreateWithFlags)(&s, VND(StreamNonBlocking));
    if (e != VND(Success))
        return vnd_error(e, VND_STR(StreamCreateWithFlags));
    *s_p = (tess_gpu_stream_h)s;
    return TESS_OK;
}

static tess_status_t vnd_stream_destroy(tess_gpu_stream_h s)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Error_t) e = VND(StreamDestroy)((VND(Stream_t))s);
    return e == VND(Success) ? TESS_OK : vnd_error(e, VND_STR(StreamDestroy));
}

static tess_status_t vnd_stream_sync(tess_gpu_stream_h s)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Error_t) e = VND(StreamSynchronize)((VND(Stream_t))s);
    return e == VND(Success) ? TESS_OK : vnd_error(e, VND_STR(StreamSynchronize));
}

static tess_status_t vnd_stream_query(tess_gpu_stream_h s)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    return vnd_poll_status(VND(StreamQuery)((VND(Stream_t))s), VND_STR(StreamQuery), __FILE__,
                           __LINE__);
}

static tess_status_t vnd_stream_wait_event(tess_gpu_stream_h s, tess_gpu_event_h ev)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Error_t) e = VND(StreamWaitEvent)((VND(Stream_t))s, (VND(Event_t))ev, 0);
    return e == VND(Success) ? TESS_OK : vnd_error(e, VND_STR(StreamWaitEvent));
}

/* ---- events ------------------------------------------------------------------------------ */

static tess_status_t vnd_event_create(unsigned flags, tess_gpu_event_h *e_p)
{
    unsigned vflags;
    if (flags & TESS_GPU_EVENT_IPC) {
        if (flags & TESS_GPU_EVENT_TIMING)
            return tess_error(TESS_ERR_INVALID, "an IPC event cannot measure time");
        vflags = VND(EventInterprocess) | VND(EventDisableTiming);
    } else {
        vflags = (flags & TESS_GPU_EVENT_TIMING) ? VND(EventDefault) : VND(EventDisableTiming);
    }
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Event_t) ev;
    VND(Error_t) e = VND(EventCreateWithFlags)(&ev, vflags);
    if (e != VND(Success))
        return vnd_error(e, VND_STR(EventCreateWithFlags));
    *e_p = (tess_gpu_event_h)ev;
    return TESS_OK;
}

static tess_status_t vnd_event_destroy(tess_gpu_event_h ev)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Error_t) e = VND(EventDestroy)((VND(Event_t))ev);
    return e == VND(Success) ? TESS_OK : vnd_error(e, VND_STR(EventDestroy));
}

static tess_status_t vnd_event_record(tess_gpu_event_h ev, tess_gpu_stream_h s)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Error_t) e = VND(EventRecord)((VND(Event_t))ev, (VND(Stream_t))s);
    return e == VND(Success) ? TESS_OK : vnd_error(e, VND_STR(EventRecord));
}

static tess_status_t vnd_event_query(tess_gpu_event_h ev)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    return vnd_poll_status(VND(EventQuery)((VND(Event_t))ev), VND_STR(EventQuery), __FILE__,
                           __LINE__);
}

static tess_status_t vnd_event_sync(tess_gpu_event_h ev)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Error_t) e = VND(EventSynchronize)((VND(Event_t))ev);
    return e == VND(Success) ? TESS_OK : vnd_error(e, VND_STR(EventSynchronize));
}

/* TESS_INPROGRESS while either event has not completed. */
static tess_status_t vnd_event_elapsed_ms(tess_gpu_event_h start, tess_gpu_event_h end,
                                          float *ms_p)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    return vnd_poll_status(VND(EventElapsedTime)(ms_p, (VND(Event_t))start, (VND(Event_t))end),
                           VND_STR(EventElapsedTime), __FILE__, __LINE__);
}

static void *vnd_native_stream(tess_gpu_stream_h s) { return (void *)s; }

/* ---- graphs: stream capture, instantiated once, launched many times ------------------------ */

struct tess_gpu_graph {
    VND(Graph_t)      graph; /* the recording, kept for graph_compare */
    VND(GraphExec_t)  exec;
    vnd_host_call_t  *calls; /* the recorded host calls' arguments */
    VND(Stream_t)     last;  /* the stream of the last launch, NULL before the first */
    int               launched;
};

static void vnd_calls_free(vnd_host_call_t *c)
{
    while (c) {
        vnd_host_call_t *next = c->next;
        free(c);
        c = next;
    }
}

static void vnd_calls_free_run(void *arg) { vnd_calls_free(arg); }
VND_HOST_TRAMPOLINE(vnd_calls_free_trampoline, vnd_calls_free_run)

static tess_status_t vnd_graph_begin(tess_gpu_stream_h s)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    if (vnd_rec_stream)
        return tess_error(TESS_ERR_STATE, "graph_begin: this thread already records a graph");
    VND(Error_t) e = VND(StreamBeginCapture)((VND(Stream_t))s, VND(StreamCaptureModeThreadLocal));
    if (e != VND(Success))
        return vnd_error(e, VND_STR(StreamBeginCapture));
    vnd_rec_stream = (VND(Stream_t))s;
    vnd_rec_calls  = NULL;
    return TESS_OK;
}

/* The host calls' arguments of g's recording go after g's last launch, in its stream's order
 * (they are freed now if it never ran). */
static void vnd_graph_calls_retire(tess_gpu_graph_h g)
{
    if (g->calls && g->launched &&
        vnd_launch_host_func(g->last, vnd_calls_free_trampoline, g->calls) != VND(Success)) {
        (void)VND(GetLastError)();
        tess_warn(VND_TITLE " graph re-recorded or destroyed: the arguments of its %s cannot be "
                  "freed after its last launch; kept", "host functions");
    } else if (g->calls && !g->launched) {
        vnd_calls_free(g->calls);
    }
    g->calls    = NULL;
    g->launched = 0;
    g->last     = NULL;
}

static tess_status_t vnd_graph_end_update(tess_gpu_stream_h s, tess_gpu_graph_h old,
                                          tess_gpu_graph_h *g_p)
{
    tess_status_t    st;
    VND(Graph_t)     graph = NULL;
    VND(GraphExec_t) exec  = NULL;
    vnd_host_call_t *calls = vnd_rec_calls;
    vnd_rec_stream = NULL;
    vnd_rec_calls  = NULL;
    VND(Error_t) e = VND(StreamEndCapture)((VND(Stream_t))s, &graph);
    if (e != VND(Success)) {
        /* An operation the capture could not hold invalidated it: no graph. */
        st = vnd_error(e, VND_STR(StreamEndCapture));
        goto err_free_calls;
    }
    if (old) {
        if (vnd_graph_exec_update(old->exec, graph) == VND(Success)) {
            /* old's launches already queued keep running the old operations and reading their
             * host calls' arguments: those go after them. */
            vnd_graph_calls_retire(old);
            VND(GraphDestroy)(old->graph);
            old->graph = graph;
            old->calls = calls;
            *g_p       = old;
            return TESS_OK;
        }
        (void)VND(GetLastError)(); /* another shape: instantiated anew below */
    }
    if ((e = vnd_graph_instantiate(&exec, graph)) != VND(Success)) {
        st = vnd_error(e, VND_GRAPH_INSTANTIATE_STR);
        goto err_destroy_graph;
    }
    tess_gpu_graph_h g = tess_calloc(1, sizeof(*g), "a graph");
    if (!g) {
        st = TESS_ERR_NO_MEMORY;
        goto err_destroy_exec;
    }
    g->graph = graph;
    g->exec  = exec;
    g->calls = calls;
    *g_p     = g;
    return TESS_OK;

err_destroy_exec:
    VND(GraphExecDestroy)(exec);
err_destroy_graph:
    VND(GraphDestroy)(graph);
err_free_calls:
    vnd_calls_free(calls);
    return st;
}

static tess_status_t vnd_graph_end(tess_gpu_stream_h s, tess_gpu_graph_h *g_p)
{
    return vnd_graph_end_update(s, NULL, g_p);
}

static tess_status_t vnd_graph_launch(tess_gpu_graph_h g, tess_gpu_stream_h s)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Error_t) e = VND(GraphLaunch)(g->exec, (VND(Stream_t))s);
    if (e != VND(Success))
        return vnd_error(e, VND_STR(GraphLaunch));
    g->last     = (VND(Stream_t))s;
    g->launched = 1;
    return TESS_OK;
}

/* The executable graph may still run: the runtime frees it once it completed. The host calls'
 * arguments go after the last launch, in its stream's order. */
static void vnd_graph_destroy(tess_gpu_graph_h g)
{
    if (!g || vnd_bind() != TESS_OK)
        return;
    VND(GraphExecDestroy)(g->exec);
    VND(GraphDestroy)(g->graph);
    vnd_graph_calls_retire(g);
    free(g);
}

static const char *vnd_node_type_name(vndGraphNodeType_t t)
{
    switch (t) {
    case VND(GraphNodeTypeKernel): return "kernel";
    case VND(GraphNodeTypeMemcpy): return "copy";
    case VND(GraphNodeTypeMemset): return "set";
    case VND(GraphNodeTypeHost):   return "host function";
    default:                       return "other";
    }
}

static int vnd_graph_nodes(VND(Graph_t) graph, VND(GraphNode_t) **nodes_p, size_t *n_p)
{
    size_t n = 0;
    if (VND(GraphGetNodes)(graph, NULL, &n) != VND(Success))
        return -1;
    VND(GraphNode_t) *nodes = tess_calloc(n ? n : 1, sizeof(*nodes), "graph nodes");
    if (!nodes || VND(GraphGetNodes)(graph, nodes, &n) != VND(Success)) {
        free(nodes);
        return -1;
    }
    *nodes_p = nodes;
    *n_p     = n;
    return 0;
}

/* 0 when nodes a and b (of type t) do the same; else 1 with what differs in why. */
static int vnd_node_compare(vndGraphNodeType_t t, VND(GraphNode_t) a, VND(GraphNode_t) b,
                            char *why, size_t len)
{
    switch (t) {
    case VND(GraphNodeTypeKernel):
        return VND_FN(kernel_node_compare)(a, b, why, len);
    case VND(GraphNodeTypeMemcpy): {
        vndMemcpy3DParms_t x, y;
        if (VND(GraphMemcpyNodeGetParams)(a, &x) != VND(Success) ||
            VND(GraphMemcpyNodeGetParams)(b, &y) != VND(Success))
            break;
        if (x.srcPtr.ptr != y.srcPtr.ptr || x.dstPtr.ptr != y.dstPtr.ptr ||
            x.extent.width != y.extent.width || x.extent.height != y.extent.height ||
            x.extent.depth != y.extent.depth || x.srcArray != y.srcArray ||
            x.dstArray != y.dstArray) {
            snprintf(why, len, "copy of %zu bytes from %p to %p, is %zu bytes from %p to %p now",
                     x.extent.width * x.extent.height * x.extent.depth, x.srcPtr.ptr,
                     x.dstPtr.ptr, y.extent.width * y.extent.height * y.extent.depth,
                     y.srcPtr.ptr, y.dstPtr.ptr);
            return 1;
        }
        return 0;
    }
    case VND(GraphNodeTypeMemset): {
        vndMemsetParams_t x, y;
        if (VND(GraphMemsetNodeGetParams)(a, &x) != VND(Success) ||
            VND(GraphMemsetNodeGetParams)(b, &y) != VND(Success))
            break;
        if (x.dst != y.dst || x.value != y.value || x.elementSize != y.elementSize ||
            x.width != y.width || x.height != y.height || x.pitch != y.pitch) {
            snprintf(why, len, "set of %zu elements of %u bytes to %u at %p, is %zu of %u to %u "
                     "at %p now", x.width * x.height, x.elementSize, x.value, x.dst,
                     y.width * y.height, y.elementSize, y.value, y.dst);
            return 1;
        }
        return 0;
    }
    case VND(GraphNodeTypeHost): {
        vndHostNodeParams_t x, y;
        if (VND(GraphHostNodeGetParams)(a, &x) != VND(Success) ||
            VND(GraphHostNodeGetParams)(b, &y) != VND(Success))
            break;
        if (x.fn != y.fn) {
            snprintf(why, len, "host function %p, is %p now", (void *)(uintptr_t)x.fn,
                     (void *)(uintptr_t)y.fn);
            return 1;
        }
        /* (HIP's trampoline is a stream callback, of another type, that a graph never holds.) */
        if ((uintptr_t)x.fn != (uintptr_t)vnd_host_trampoline) {
            if (x.userData != y.userData) {
                snprintf(why, len, "host function %p with data %p, is %p now",
                         (void *)(uintptr_t)x.fn, x.userData, y.userData);
                return 1;
            }
            return 0;
        }
        const vnd_host_call_t *p = x.userData, *q = y.userData;
        if (p->fn != q->fn || p->args_size != q->args_size) {
            snprintf(why, len, "host function %p with %u bytes of arguments, is %p with %u now",
                     (void *)(uintptr_t)p->fn, p->args_size, (void *)(uintptr_t)q->fn,
                     q->args_size);
            return 1;
        }
        for (uint32_t k = 0; k < p->args_size; k++)
            if (p->args[k] != q->args[k]) {
                snprintf(why, len, "host function %p: argument byte %u was 0x%02x, is 0x%02x now "
                         "(a value that changes between steps, passed as an argument?)",
                         (void *)(uintptr_t)p->fn, k, p->args[k], q->args[k]);
                return 1;
            }
        return 0;
    }
    default:
        return 0;
    }
    (void)VND(GetLastError)();
    snprintf(why, len, "the parameters of a %s node cannot be read", vnd_node_type_name(t));
    return 1;
}

static int vnd_graph_compare(tess_gpu_graph_h a, tess_gpu_graph_h b, char *why, size_t len)
{
    VND(GraphNode_t) *na = NULL, *nb = NULL;
    size_t            ca = 0, cb = 0;
    int               differ = 1;
    if (vnd_bind() != TESS_OK || vnd_graph_nodes(a->graph, &na, &ca) ||
        vnd_graph_nodes(b->graph, &nb, &cb)) {
        (void)VND(GetLastError)();
        snprintf(why, len, VND_STR(GraphGetNodes) " failed");
        goto out;
    }
    if (ca != cb) {
        snprintf(why, len, "%zu operations recorded, %zu now", ca, cb);
        goto out;
    }
    for (size_t i = 0; i < ca; i++) {
        vndGraphNodeType_t ta, tb;
        if (VND(GraphNodeGetType)(na[i], &ta) != VND(Success) ||
            VND(GraphNodeGetType)(nb[i], &tb) != VND(Success)) {
            (void)VND(GetLastError)();
            snprintf(why, len, VND_STR(GraphNodeGetType) " failed");
            goto out;
        }
        if (ta != tb) {
            snprintf(why, len, "operation %zu was a %s, is a %s now", i + 1,
                     vnd_node_type_name(ta), vnd_node_type_name(tb));
            goto out;
        }
        char what[320];
        if (vnd_node_compare(ta, na[i], nb[i], what, sizeof(what))) {
            snprintf(why, len, "operation %zu (%s): %s", i + 1, vnd_node_type_name(ta), what);
            goto out;
        }
    }
    differ = 0;
out:
    free(na);
    free(nb);
    return differ;
}

const tess_gpu_ops_t VND_OPS = {
    .name              = VND_NAME,
    .kind              = VND_KIND,
    .wait_captures_record = 1,
    .init              = vnd_init,
    .fini              = vnd_fini,
    .device_count      = vnd_device_count,
    .set_device        = vnd_set_device,
    .get_props         = vnd_get_props,
    .mem_alloc         = vnd_mem_alloc,
    .mem_free          = vnd_mem_free,
    .host_alloc        = vnd_host_alloc,
    .host_free         = vnd_host_free_op,
    .memset_async      = vnd_memset_async,
    .launch_host       = vnd_launch_host,
    .stream_create     = vnd_stream_create,
    .stream_destroy    = vnd_stream_destroy,
    .stream_sync       = vnd_stream_sync,
    .stream_query      = vnd_stream_query,
    .stream_wait_event = vnd_stream_wait_event,
    .event_create      = vnd_event_create,
    .event_destroy     = vnd_event_destroy,
    .event_record      = vnd_event_record,
    .event_query       = vnd_event_query,
    .event_sync        = vnd_event_sync,
    .event_elapsed_ms  = vnd_event_elapsed_ms,
#if VND_HAS_KCOPY
    /* Small device copies by the vendor's own kernel, and stream signals. */
    .memcpy_async        = VND_FN(kcopy_memcpy_async),
    .memcpy_signal_async = VND_FN(memcpy_signal_async),
    .memcpy_signal_max   = VND_KCOPY_SIGNAL_MAX,
    .memcpy_batch_async  = VND_FN(memcpy_batch_async),
    .signal_alloc        = VND_FN(signal_alloc),
    .signal_free         = VND_FN(signal_free),
    .stream_signal       = VND_FN(stream_signal),
#else
    .memcpy_async      = VND_FN(memcpy_runtime), /* no signals: the runtime polls events */
#endif
    .ipc_mem_export    = VND_FN(ipc_mem_export),
    .ipc_mem_open      = VND_FN(ipc_mem_open),
    .ipc_mem_close     = VND_FN(ipc_mem_close),
    .ipc_event_export  = VND_FN(ipc_event_export),
    .ipc_event_open    = VND_FN(ipc_event_open),
    .ipc_event_close   = VND_FN(ipc_event_close),
    .ptr_query         = vnd_ptr_query,
    .native_stream     = vnd_native_stream,
    .set_notify        = NULL, /* the runtime polls events */
    .busy              = NULL, /* the device has cores of its own */
    .graph_begin       = vnd_graph_begin,
    .graph_end         = vnd_graph_end,
    .graph_end_update  = vnd_graph_end_update,
    .graph_launch      = vnd_graph_launch,
    .graph_destroy     = vnd_graph_destroy,
    .graph_compare     = vnd_graph_compare,
};

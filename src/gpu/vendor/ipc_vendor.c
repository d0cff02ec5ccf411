/*
 * ipc_vendor.c — IPC of memory and events for the CUDA and HIP backends (one source, compiled
 * once per vendor: vendor.h): what a tess_gpu_ipc_handle_t holds (a versioned wire record
 * around the vendor's handle, its magic naming the vendor), export, open and close.
 * Threads: as thread-safe as the vendor's runtime; no state of its own.
 */
#include "gpu/vendor/vendor.h"

#include <stdio.h>
#include <string.h>

#define VND_IPC_VERSION 1

enum { VND_IPC_MEM = 1, VND_IPC_EVENT = 2 };

/* What a tess_gpu_ipc_handle_t holds for this backend (copied in and out with memcpy). */
typedef struct vnd_ipc_wire {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;
    int32_t  device; /* exporting device, for messages */
    uint32_t pad;
    uint64_t size;   /* allocation size (memory handles) */
    union {
        VND(IpcMemHandle_t)   mem;
        VND(IpcEventHandle_t) event;
    } h;
} vnd_ipc_wire_t;

_Static_assert(sizeof(vnd_ipc_wire_t) <= TESS_GPU_IPC_HANDLE_SIZE,
               "a " VND_TITLE " IPC handle must fit in tess_gpu_ipc_handle_t");

static tess_status_t vnd_ipc_unpack(const tess_gpu_ipc_handle_t *h, uint16_t kind,
                                    vnd_ipc_wire_t *w_p)
{
    memcpy(w_p, h->bytes, sizeof(*w_p));
    if (w_p->magic != VND_IPC_MAGIC || w_p->version != VND_IPC_VERSION || w_p->kind != kind)
        return tess_error(TESS_ERR_INVALID, "not a " VND_TITLE " %s IPC handle of this version "
                          "(magic %#x, version %u, kind %u)",
                          kind == VND_IPC_MEM ? "memory" : "event", (unsigned)w_p->magic,
                          (unsigned)w_p->version, (unsigned)w_p->kind);
    return TESS_OK;
}

static void vnd_ipc_pack(const vnd_ipc_wire_t *w, tess_gpu_ipc_handle_t *h_p)
{
    memset(h_p, 0, sizeof(*h_p));
    memcpy(h_p->bytes, w, sizeof(*w));
}

static void vnd_ipc_wire_init(vnd_ipc_wire_t *w_p, uint16_t kind)
{
    memset(w_p, 0, sizeof(*w_p));
    w_p->magic   = VND_IPC_MAGIC;
    w_p->version = VND_IPC_VERSION;
    w_p->kind    = kind;
    w_p->device  = tess_vnd.device;
}

tess_status_t VND_FN(ipc_mem_export)(void *ptr, tess_gpu_ipc_handle_t *h_p)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    /* The other side maps the whole allocation and gets its start: ptr must be that start. */
    uintptr_t           base = 0;
    size_t              size = 0;
    tess_gpu_ptr_info_t own  = {0};
    if (VND_FN(reg_find)(ptr, &own)) { /* the runtime's own allocation */
        base = (uintptr_t)own.base;
        size = own.size;
    } else if ((st = VND_FN(alloc_range)(ptr, &base, &size)) != TESS_OK) {
        return st;
    }
    if (base != (uintptr_t)ptr)
        return tess_error(TESS_ERR_INVALID, "ipc_mem_export: %p is %zu bytes into an "
                          "allocation; only its start can be exported", ptr,
                          (size_t)((uintptr_t)ptr - base));

    vnd_ipc_wire_t w;
    vnd_ipc_wire_init(&w, VND_IPC_MEM);
    w.size         = size;
    VND(Error_t) e = VND(IpcGetMemHandle)(&w.h.mem, ptr);
    if (e != VND(Success))
        return vnd_error(e, VND_STR(IpcGetMemHandle));
    vnd_ipc_pack(&w, h_p);
    return TESS_OK;
}

tess_status_t VND_FN(ipc_mem_open)(const tess_gpu_ipc_handle_t *h, void **ptr_p)
{
    vnd_ipc_wire_t w;
    tess_status_t  st = vnd_ipc_unpack(h, VND_IPC_MEM, &w);
    if (st != TESS_OK)
        return st;
    st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Error_t) e = VND(IpcOpenMemHandle)(ptr_p, w.h.mem, VND(IpcMemLazyEnablePeerAccess));
    if (e != VND(Success)) {
        char what[96];
        snprintf(what, sizeof(what), VND_STR(IpcOpenMemHandle) "(%llu bytes of device %d)",
                 (unsigned long long)w.size, (int)w.device);
        return vnd_error(e, what);
    }
    return TESS_OK;
}

tess_status_t VND_FN(ipc_mem_close)(void *ptr)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND_FN(mem_forget)(ptr);
    VND(Error_t) e = VND(IpcCloseMemHandle)(ptr);
    return e == VND(Success) ? TESS_OK : vnd_error(e, VND_STR(IpcCloseMemHandle));
}

tess_status_t VND_FN(ipc_event_export)(tess_gpu_event_h ev, tess_gpu_ipc_handle_t *h_p)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    vnd_ipc_wire_t w;
    vnd_ipc_wire_init(&w, VND_IPC_EVENT);
    VND(Error_t) e = VND(IpcGetEventHandle)(&w.h.event, (VND(Event_t))ev);
    if (e != VND(Success))
        return vnd_error(e, VND_STR(IpcGetEventHandle));
    vnd_ipc_pack(&w, h_p);
    return TESS_OK;
}

tess_status_t VND_FN(ipc_event_open)(const tess_gpu_ipc_handle_t *h, tess_gpu_event_h *e_p)
{
    vnd_ipc_wire_t w;
    tess_status_t  st = vnd_ipc_unpack(h, VND_IPC_EVENT, &w);
    if (st != TESS_OK)
        return st;
    st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Event_t) ev;
    VND(Error_t) e = VND(IpcOpenEventHandle)(&ev, w.h.event);
    if (e != VND(Success))
        return vnd_error(e, VND_STR(IpcOpenEventHandle));
    *e_p = (tess_gpu_event_h)ev;
    return TESS_OK;
}

tess_status_t VND_FN(ipc_event_close)(tess_gpu_event_h ev)
{
    tess_status_t st = vnd_bind();
    if (st != TESS_OK)
        return st;
    VND(Error_t) e = VND(EventDestroy)((VND(Event_t))ev);
    return e == VND(Success) ? TESS_OK
                             : vnd_error(e, VND_STR(EventDestroy) " (opened IPC event)");
}

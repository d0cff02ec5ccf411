/* gpu.c — the GPU side of elements: each element's stream and its completion continuations. */
#include "objects.h"

typedef struct gpu_then {
    tess_ctx_h   elem;
    tess_entry_t entry;
    /* the continuation's data follows */
} gpu_then_t;

tess_stream_t tess_ctx_stream(tess_ctx_h ctx)
{
    return ctx ? tess_gpu->native_stream(ctx->stream) : NULL;
}

static void gpu_then_run(void *arg)
{
    tess_msg_t *m = arg;
    gpu_then_t *t = tess_msg_payload(m);
    t->elem->gpu_pending--;
    tess_obj_run_entry(tess_obj_pe(), t->elem, t->entry, t + 1, m->hdr.size - sizeof(*t));
    tess_core_msg_free(m);
}

obj_pe_t *tess_obj_check_continuation(tess_ctx_h ctx, tess_entry_t entry, const void *data,
                                      size_t size, const char *what, const char *file, int line)
{
    tess_obj_check_init(what, file, line);
    tess_obj_check_not_recording(what, file, line);
    obj_pe_t *op = tess_obj_pe();
    if (tess_unlikely(!op || !tess_core_in_phase()))
        tess_obj_misuse(file, line, "%s outside a phase", what);
    if (tess_unlikely(!ctx || (ctx != op->current && !tess_obj_elem_is_on(op, ctx))))
        tess_obj_misuse(file, line, "%s with a ctx that is not an element of this PE", what);
    if (tess_unlikely(entry < 0 || entry >= tess_obj_nentries || tess_obj_entries[entry].post))
        tess_obj_misuse(file, line, "%s to entry %d, which is not a registered host entry", what,
                        entry);
    tess_obj_check_size(size, data, what, file, line);
    return op;
}

tess_status_t tess_gpu_then_loc(tess_ctx_h ctx, tess_entry_t entry, const void *data,
                                size_t size, const char *file, int line)
{
    obj_pe_t *op = tess_obj_check_continuation(ctx, entry, data, size, "tess_gpu_then", file,
                                               line);
    tess_obj_check_batch(op, ctx, "tess_gpu_then", file, line);
    tess_msg_t *m = tess_core_msg_alloc(sizeof(gpu_then_t) + size);
    if (!m)
        return TESS_ERR_NO_MEMORY;
    gpu_then_t *t = tess_msg_payload(m);
    t->elem       = ctx;
    t->entry      = entry;
    if (size)
        memcpy(t + 1, data, size);
    tess_status_t st = tess_core_gpu_then(ctx->stream, gpu_then_run, m);
    if (st != TESS_OK) {
        tess_core_msg_free(m);
        return st;
    }
    ctx->gpu_pending++;
    return TESS_OK;
}

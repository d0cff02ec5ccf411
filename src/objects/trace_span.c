/* trace_span.c — tess_trace_begin/end: user-named spans of an element's stream work in the
 * timeline trace, timed by the device (core/trace.h). Each PE keeps a stack of its open spans. */
#include "objects.h"

#include <stdio.h>
#include <string.h>

#define SPAN_DEPTH 16

typedef struct {
    tess_ctx_h ctx;
    int        handle; /* tess_core_trace_dev_begin's, -1 when no event could be had */
    char       name[24];
} span_t;

static _Thread_local span_t span_stack[SPAN_DEPTH];
static _Thread_local int    span_depth;

int tess_trace_enabled(void) { return tess_trace_on; }

static tess_status_t span_check(tess_ctx_h ctx, const char *name, const char *what)
{
    obj_pe_t *op = tess_obj_pe();
    if (!ctx || !name)
        return tess_error(TESS_ERR_INVALID, "%s: %s is NULL", what, ctx ? "the name" : "ctx");
    if (!op || (ctx != op->current && !tess_obj_elem_is_on(op, ctx)))
        return tess_error(TESS_ERR_INVALID, "%s(\"%s\"): not on the PE of the element (call it "
                          "from an entry method with the ctx it received)", what, name);
    return TESS_OK;
}

tess_status_t tess_trace_begin(tess_ctx_h ctx, const char *name)
{
    if (tess_likely(!tess_trace_on))
        return TESS_OK;
    tess_status_t st = span_check(ctx, name, "tess_trace_begin");
    if (st != TESS_OK)
        return st;
    if (span_depth == SPAN_DEPTH)
        return tess_error(TESS_ERR_INVALID, "tess_trace_begin(\"%s\"): more than %d spans open "
                          "on this PE", name, SPAN_DEPTH);
    span_t *s = &span_stack[span_depth++];
    s->ctx    = ctx;
    s->handle = tess_core_trace_dev_begin(ctx->stream);
    snprintf(s->name, sizeof(s->name), "%s", name);
    return TESS_OK;
}

tess_status_t tess_trace_end(tess_ctx_h ctx, const char *name)
{
    if (tess_likely(!tess_trace_on))
        return TESS_OK;
    tess_status_t st = span_check(ctx, name, "tess_trace_end");
    if (st != TESS_OK)
        return st;
    span_t *s = span_depth ? &span_stack[span_depth - 1] : NULL;
    if (!s || s->ctx != ctx || strncmp(s->name, name, sizeof(s->name) - 1) != 0)
        return tess_error(TESS_ERR_INVALID, "tess_trace_end(\"%s\"): the latest open span of "
                          "this PE is %s%s%s", name, s ? "\"" : "none", s ? s->name : "",
                          s ? (s->ctx != ctx ? "\" of another element" : "\"") : "");
    span_depth--;
    tess_core_trace_dev_end(s->handle, ctx->stream, TESS_TEV_SPAN, s->name,
                            ctx->array->name, (uint64_t)ctx->linear);
    return TESS_OK;
}

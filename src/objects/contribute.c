/* contribute.c — contributions of elements to reductions. The contributions of one process are
 * combined here, per array and tag; a partial goes to core (and on to process 0) once no local
 * element can still contribute to that tag: for every open tag the array counts the local
 * elements that are "behind" it (have not contributed to it or to a later tag). Elements that
 * arrive or leave by migration adjust those counts, so reductions stay right across moves. */
#include "objects.h"

#include <stdio.h>
#include <stdlib.h>

/* What travels with a reduction to its result. */
typedef struct red_cb {
    int32_t  kind;
    int32_t  entry;
    uint32_t aid;
    uint32_t pad;
    int64_t  linear;
} red_cb_t;

struct obj_red_slot {
    obj_red_slot_t *next;
    uint64_t        tag;
    int64_t         behind;   /* local elements that may still contribute */
    int64_t         ncontrib; /* contributions combined here */
    int             count;
    tess_dtype_t    type;
    tess_op_t       op;
    red_cb_t        cb;
    void           *data;
};

static inline int elem_behind(tess_ctx_h e, uint64_t tag)
{
    return !e->contributed || e->last_tag < tag;
}

static void slot_free(obj_red_slot_t *s)
{
    free(s->data);
    free(s);
}

/* Unlink the slots nobody here can contribute to any more (array lock held). */
static obj_red_slot_t *slots_take_done(tess_array_t *a)
{
    obj_red_slot_t *done = NULL;
    for (obj_red_slot_t **pp = &a->red; *pp;) {
        obj_red_slot_t *s = *pp;
        if (s->behind == 0) {
            *pp     = s->next;
            s->next = done;
            done    = s;
        } else {
            pp = &s->next;
        }
    }
    return done;
}

static void slots_submit(tess_array_t *a, obj_red_slot_t *done)
{
    while (done) {
        obj_red_slot_t *s = done;
        done              = s->next;
        tess_status_t st  = tess_core_reduce_submit(a->id, s->tag, s->ncontrib, a->size, s->data,
                                                    s->count, s->type, s->op, &s->cb,
                                                    sizeof(s->cb));
        if (st != TESS_OK)
            tess_fatal("reduction tag %llu of array '%s' cannot be sent on: %s",
                       (unsigned long long)s->tag, a->name, tess_error_detail());
        slot_free(s);
    }
}

void tess_obj_red_arrive(tess_array_t *a, tess_ctx_h e)
{
    for (obj_red_slot_t *s = a->red; s; s = s->next)
        s->behind += elem_behind(e, s->tag);
}

void tess_obj_red_leave(tess_array_t *a, tess_ctx_h e)
{
    for (obj_red_slot_t *s = a->red; s; s = s->next)
        s->behind -= elem_behind(e, s->tag);
    obj_red_slot_t *done = slots_take_done(a);
    pthread_mutex_unlock(&a->lock);
    slots_submit(a, done);
    pthread_mutex_lock(&a->lock);
}

void tess_obj_red_fini(tess_array_t *a)
{
    while (a->red) {
        obj_red_slot_t *s = a->red;
        a->red            = s->next;
        tess_warn("array '%s': reduction tag %llu never completed (%lld of its local "
                  "contributions arrived)", a->name, (unsigned long long)s->tag,
                  (long long)s->ncontrib);
        slot_free(s);
    }
}

static void obj_reduce_result(uint32_t key, uint64_t tag, const void *cb, size_t cb_len,
                              const void *data, size_t size)
{
    (void)key;
    red_cb_t c;
    if (cb_len != sizeof(c))
        tess_fatal("internal: reduction %llu with a %zu-byte callback", (unsigned long long)tag,
                   cb_len);
    memcpy(&c, cb, sizeof(c));
    switch (c.kind) {
    case TESS_CB_ELEMENT: {
        tess_msg_t *m = tess_core_msg_alloc(size);
        if (!m)
            tess_fatal("out of memory delivering a reduction result");
        memcpy(tess_msg_payload(m), data, size);
        tess_obj_send_linear(tess_obj_arrays[c.aid], c.linear, c.entry, m);
        break;
    }
    case TESS_CB_BROADCAST:
        tess_obj_broadcast(tess_obj_arrays[c.aid], c.entry, data, size);
        break;
    case TESS_CB_RETURN:
        tess_core_exit(data, size);
        break;
    default:
        tess_fatal("internal: reduction callback kind %d", c.kind);
    }
}

static red_cb_t contribute_callback(tess_callback_t cb, const char *file, int line)
{
    char     idx[48];
    red_cb_t c = {.kind = cb.kind, .entry = cb.entry};
    switch (cb.kind) {
    case TESS_CB_ELEMENT:
    case TESS_CB_BROADCAST:
        tess_obj_check_send(cb.array, "a reduction callback", file, line);
        c.aid = cb.array->id;
        if (tess_unlikely(cb.entry < 0 || cb.entry >= tess_obj_nentries ||
                          tess_obj_entries[cb.entry].post))
            tess_obj_misuse(file, line, "reduction callback to entry %d, which is not a "
                            "registered host entry", cb.entry);
        if (cb.kind == TESS_CB_ELEMENT) {
            c.linear = tess_obj_linearize(cb.array, cb.index);
            if (tess_unlikely(c.linear < 0))
                tess_obj_misuse(file, line, "reduction callback to index %s, out of range of "
                                "array '%s'", tess_obj_index_text(cb.array, cb.index, idx,
                                                                  sizeof(idx)), cb.array->name);
        }
        break;
    case TESS_CB_RETURN:
        c.entry = -1;
        break;
    default:
        tess_obj_misuse(file, line, "reduction callback of unknown kind %d", (int)cb.kind);
    }
    return c;
}

tess_status_t tess_contribute_loc(tess_ctx_h ctx, uint64_t tag, const void *data, int count,
                                  tess_dtype_t type, tess_op_t op, tess_callback_t cb,
                                  const char *file, int line)
{
    obj_pe_t *opp = tess_obj_pe();
    char      idx[48];
    if (tess_unlikely(!opp || !tess_core_in_phase()))
        tess_obj_misuse(file, line, "tess_contribute outside a phase");
    if (tess_unlikely(!ctx || ctx->pe != tess_pe() ||
                      tess_hmap_get(&opp->elems, tess_obj_key(ctx->array->id, ctx->linear)) != ctx))
        tess_obj_misuse(file, line, "tess_contribute with a ctx that is not an element of this "
                        "PE (pass the ctx your entry method received)");
    tess_array_t *a = ctx->array;
    if (tess_unlikely(!data))
        tess_obj_misuse(file, line, "tess_contribute from NULL");
    if (tess_unlikely(tess_reduce_check(count, type, op) != TESS_OK))
        tess_obj_misuse(file, line, "tess_contribute: %s", tess_error_detail());
    red_cb_t c     = contribute_callback(cb, file, line);
    size_t   bytes = (size_t)count * tess_dtype_size(type);

    pthread_mutex_lock(&a->lock);
    if (tess_unlikely(ctx->contributed && tag <= ctx->last_tag)) {
        pthread_mutex_unlock(&a->lock);
        tess_obj_misuse(file, line, "element %s of array '%s' contributed twice to reduction "
                        "tag %llu (its last contribution was to tag %llu; tags must increase)",
                        tess_obj_index_text(a, ctx->index, idx, sizeof(idx)), a->name,
                        (unsigned long long)tag, (unsigned long long)ctx->last_tag);
    }
    obj_red_slot_t *s = a->red;
    while (s && s->tag != tag)
        s = s->next;
    if (!s) {
        s = tess_calloc(1, sizeof(*s), "a reduction");
        if (s && !(s->data = tess_malloc(bytes, "reduction data"))) {
            free(s);
            s = NULL;
        }
        if (!s) {
            pthread_mutex_unlock(&a->lock);
            return TESS_ERR_NO_MEMORY;
        }
        *s = (obj_red_slot_t){.next = a->red, .tag = tag, .count = count, .type = type,
                              .op = op, .cb = c, .data = s->data};
        memcpy(s->data, data, bytes);
        for (int l = 0; l < tess_rt.ppn; l++)
            for (size_t k = 0; k < a->pe_elems[l].count; k++)
                s->behind += elem_behind(a->pe_elems[l].items[k], tag);
        a->red = s;
    } else {
        if (tess_unlikely(s->count != count || s->type != type || s->op != op ||
                          memcmp(&s->cb, &c, sizeof(c)))) {
            pthread_mutex_unlock(&a->lock);
            tess_obj_misuse(file, line, "element %s of array '%s' contributes %d x %s (%s) to "
                            "reduction tag %llu, whose other contributions are %d x %s (%s), or "
                            "names another callback", tess_obj_index_text(a, ctx->index, idx,
                            sizeof(idx)), a->name, count, tess_dtype_name(type), tess_op_name(op),
                            (unsigned long long)tag, s->count, tess_dtype_name(s->type),
                            tess_op_name(s->op));
        }
        tess_reduce_apply(op, type, s->data, data, count);
    }
    s->ncontrib++;
    /* This element stops being behind every open tag up to this one. */
    for (obj_red_slot_t *o = a->red; o; o = o->next)
        if (o->tag <= tag && elem_behind(ctx, o->tag))
            o->behind--;
    ctx->contributed = 1;
    ctx->last_tag    = tag;
    obj_red_slot_t *done = slots_take_done(a);
    pthread_mutex_unlock(&a->lock);
    slots_submit(a, done);
    return TESS_OK;
}

tess_status_t tess_obj_reduce_init(void)
{
    return tess_core_reduce_set_result_fn(obj_reduce_result);
}

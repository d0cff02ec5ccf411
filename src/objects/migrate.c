/* migrate.c — PUP and migration of elements: the state bytes and what the PUP function adds
 * travel in one message to the destination PE; the location table is updated at the source
 * (so later messages are forwarded) and at the destination. */
#include "objects.h"

#include <stdlib.h>

enum { PUP_SIZE = 0, PUP_PACK = 1, PUP_UNPACK = 2 };

struct tess_pup {
    int    mode;
    char  *buf;
    size_t pos, cap;
};

typedef struct mig_hdr {
    uint32_t aid;
    uint32_t contributed;
    int64_t  linear;
    uint64_t last_tag;
    double   user_load;
    int32_t  has_user_load;
    uint32_t pad;
    uint64_t state_size, pup_size;
    /* state bytes, then PUP bytes */
} mig_hdr_t;

static uint16_t h_migrate;
void (*tess_obj_on_arrival)(tess_ctx_h e);

int tess_pup_is_unpacking(tess_pup_h p) { return p->mode == PUP_UNPACK; }
int tess_pup_is_packing(tess_pup_h p) { return p->mode == PUP_PACK; }
int tess_pup_is_sizing(tess_pup_h p) { return p->mode == PUP_SIZE; }

void tess_pup_bytes(tess_pup_h p, void *ptr, size_t size)
{
    switch (p->mode) {
    case PUP_SIZE:
        break;
    case PUP_PACK:
        if (p->pos + size > p->cap)
            tess_fatal("PUP: the function packed more bytes than it sized (%zu > %zu); it must "
                       "pup the same data in every mode", p->pos + size, p->cap);
        memcpy(p->buf + p->pos, ptr, size);
        break;
    case PUP_UNPACK:
        if (p->pos + size > p->cap)
            tess_fatal("PUP: the function unpacks more bytes than were packed (%zu > %zu)",
                       p->pos + size, p->cap);
        memcpy(ptr, p->buf + p->pos, size);
        break;
    }
    p->pos += size;
}

void tess_pup_device(tess_pup_h p, void **dptr_p, size_t size)
{
    (void)p;
    (void)dptr_p;
    (void)size;
    tess_fatal("tess_pup_device: device state migration needs the device-message layer");
}

static bool migrate_handler(tess_msg_t *m)
{
    mig_hdr_t *h = tess_msg_payload(m);
    if (tess_unlikely(m->hdr.size < sizeof(*h) ||
                      m->hdr.size != sizeof(*h) + h->state_size + h->pup_size ||
                      h->aid >= tess_obj_narrays))
        tess_fatal("corrupt migration message from PE %d", m->hdr.src_pe);
    tess_array_t *a  = tess_obj_arrays[h->aid];
    obj_pe_t     *op = tess_obj_pe();
    tess_ctx_h    e  = tess_obj_elem_alloc(a, h->linear);
    if (!e || h->state_size != a->elem_size)
        tess_fatal("cannot receive element %lld of array '%s'", (long long)h->linear, a->name);
    memcpy(e->state, h + 1, a->elem_size);
    e->contributed   = (int)h->contributed;
    e->last_tag      = h->last_tag;
    e->user_load     = h->user_load;
    e->has_user_load = h->has_user_load;
    if (a->pup) {
        struct tess_pup p = {.mode = PUP_UNPACK, .buf = (char *)(h + 1) + a->elem_size,
                             .cap = h->pup_size};
        a->pup(&p, e, e->state);
        if (p.pos != p.cap)
            tess_fatal("PUP of array '%s' unpacked %zu of %zu bytes", a->name, p.pos, p.cap);
    }
    tess_pe_t *pe = tess_core_pe_self();
    e->stream     = tess_gpu_pool_stream((size_t)(h->linear + tess_core_pe_local(pe)));
    if (tess_obj_elem_attach(op, tess_core_pe_local(pe), e) != TESS_OK)
        tess_fatal("out of memory receiving element %lld of array '%s'", (long long)h->linear,
                   a->name);
    atomic_store_explicit(&a->loc[h->linear], tess_core_pe_global(pe), memory_order_relaxed);
    tess_core_msg_free(m);
    tess_obj_unpark(op, e);
    if (tess_obj_on_arrival)
        tess_obj_on_arrival(e);
    return true;
}

void tess_obj_migrate_now(obj_pe_t *op, tess_ctx_h e, int dest)
{
    tess_array_t *a = e->array;
    if (dest == e->pe)
        return;
    struct tess_pup p = {.mode = PUP_SIZE};
    if (a->pup)
        a->pup(&p, e, e->state);
    size_t      pup_size = p.pos;
    tess_msg_t *m        = tess_core_msg_alloc(sizeof(mig_hdr_t) + a->elem_size + pup_size);
    if (!m)
        tess_fatal("out of memory migrating element %lld of array '%s'", (long long)e->linear,
                   a->name);
    mig_hdr_t *h = tess_msg_payload(m);
    *h = (mig_hdr_t){.aid = a->id, .contributed = (uint32_t)e->contributed, .linear = e->linear,
                     .last_tag = e->last_tag, .user_load = e->user_load,
                     .has_user_load = e->has_user_load, .state_size = a->elem_size,
                     .pup_size = pup_size};
    memcpy(h + 1, e->state, a->elem_size);
    if (a->pup) {
        p = (struct tess_pup){.mode = PUP_PACK, .buf = (char *)(h + 1) + a->elem_size,
                              .cap = pup_size};
        a->pup(&p, e, e->state);
        if (p.pos != pup_size)
            tess_fatal("PUP of array '%s' packed %zu bytes but sized %zu", a->name, p.pos,
                       pup_size);
    }
    tess_obj_elem_detach(op, tess_core_pe_local(tess_core_pe_self()), e);
    m->hdr.handler = h_migrate;
    m->hdr.dst_pe  = dest;
    /* Send first, then point the table at the destination: a message routed by the new entry
     * is sent after the element, so it cannot overtake it. */
    tess_core_send(m);
    atomic_store_explicit(&a->loc[e->linear], dest, memory_order_relaxed);
    tess_obj_elem_free(e);
}

tess_status_t tess_migrate_loc(tess_ctx_h ctx, int dest_pe, const char *file, int line)
{
    obj_pe_t *op = tess_obj_pe();
    if (tess_unlikely(!op || !tess_core_in_phase() || op->current != ctx))
        tess_obj_misuse(file, line, "tess_migrate must be called by an entry method of the "
                        "element it moves");
    if (tess_unlikely(dest_pe < 0 || dest_pe >= tess_core_num_pes()))
        tess_obj_misuse(file, line, "tess_migrate to PE %d (there are %d PEs)", dest_pe,
                        tess_core_num_pes());
    ctx->migrate_to = dest_pe;
    return TESS_OK;
}

tess_status_t tess_obj_migrate_init(void)
{
    return tess_core_handler_register("migrate", migrate_handler, &h_migrate);
}

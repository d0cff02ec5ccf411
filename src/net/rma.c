/*
 * rma.c — memory registration with packed remote keys, and RDMA get on the calling thread's
 * lane.
 */
#include "net_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- registration and get ---------------------------------------------------------------- */

/* Registrations: with one lane, behind its lock (the context is not shared between threads);
 * with several, the context is thread-safe (mt_workers_shared) and ctx_lock orders ours. */
static void net_ctx_lock(void)
{
    pthread_mutex_lock(net.nlanes == 1 ? &net.lanes[0].lock : &net.ctx_lock);
    NET_TSAN_SYNC();
}

static void net_ctx_unlock(void)
{
    NET_TSAN_SYNC();
    pthread_mutex_unlock(net.nlanes == 1 ? &net.lanes[0].lock : &net.ctx_lock);
}

static ucs_memory_type_t net_ucs_mem_type(int mem_type)
{
    switch (mem_type) {
    case TESS_NET_MEM_CUDA: return UCS_MEMORY_TYPE_CUDA;
    case TESS_NET_MEM_ROCM: return UCS_MEMORY_TYPE_ROCM;
    default:                return UCS_MEMORY_TYPE_HOST;
    }
}

int tess_net_mem_type_supported(int mem_type)
{
    return (net.mem_types >> net_ucs_mem_type(mem_type)) & 1;
}

tess_status_t tess_net_mem_register(void *addr, size_t len, int mem_type, tess_net_mem_h *mem_p,
                                    const void **rkey_p, size_t *rkey_len_p)
{
    struct tess_net_mem *m = tess_calloc(1, sizeof(*m), "a memory registration");
    if (!m)
        return TESS_ERR_NO_MEMORY;
    ucp_mem_map_params_t mp = {
        .field_mask  = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                       UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
        .address     = addr,
        .length      = len,
        .memory_type = net_ucs_mem_type(mem_type),
    };
    tess_status_t st;
    net_ctx_lock();
    ucs_status_t us = ucp_mem_map(net.context, &mp, &m->mem);
    if (us != UCS_OK) {
        st = net_ucx_error("ucp_mem_map", us);
        goto err_unlock;
    }
    us = ucp_rkey_pack(net.context, m->mem, &m->rkey, &m->rkey_len);
    if (us != UCS_OK) {
        st = net_ucx_error("ucp_rkey_pack", us);
        goto err_unmap;
    }
    net_ctx_unlock();
    *mem_p      = m;
    *rkey_p     = m->rkey;
    *rkey_len_p = m->rkey_len;
    return TESS_OK;

err_unmap:
    ucp_mem_unmap(net.context, m->mem);
err_unlock:
    net_ctx_unlock();
    free(m);
    return st;
}

void tess_net_mem_deregister(tess_net_mem_h m)
{
    if (!m)
        return;
    net_ctx_lock();
    ucp_rkey_buffer_release(m->rkey);
    ucp_mem_unmap(net.context, m->mem);
    net_ctx_unlock();
    free(m);
}

/* ---- unpacked remote keys ----------------------------------------------------------------
 * Unpacking a key costs every get an allocation and a walk over its transports (and a CUDA IPC
 * key more than that); keys the owner names (key_id) are unpacked once per lane and kept. Each
 * is named by one packed key only, so a kept key is what unpacking again would give. Guarded by
 * the lane's lock, as the gets and their completions are. */

#define NET_RKEY_KEEP 1024 /* kept keys per lane */

typedef struct net_rkey {
    ucp_rkey_h rk;
    int        src;
    uint64_t   id;
    unsigned   refs;       /* gets in flight with it */
    uint64_t   last_use;
} net_rkey_t;

static inline uint64_t net_rkey_key(int src, uint64_t id)
{
    return ((uint64_t)(uint32_t)src << 40) ^ id;
}

/* Make room for one more: drop the least recently used key that no get uses. */
static void net_rkey_evict(net_lane_t *l)
{
    size_t      it = 0;
    uint64_t    k, best_key = 0;
    void       *v;
    net_rkey_t *best = NULL;
    while (tess_hmap_next(&l->rkeys, &it, &k, &v)) {
        net_rkey_t *c = v;
        if (!c->refs && (!best || c->last_use < best->last_use)) {
            best     = c;
            best_key = k;
        }
    }
    if (best) {
        tess_hmap_remove(&l->rkeys, best_key);
        ucp_rkey_destroy(best->rk);
        free(best);
    }
}

/* The unpacked key for a get (l->lock held): kept (*kept_p set, a reference taken) or made for
 * this get alone (*kept_p NULL: the caller destroys it). */
static ucs_status_t net_rkey_get(net_lane_t *l, int src, const void *rkey, uint64_t id,
                                 ucp_rkey_h *rk_p, net_rkey_t **kept_p)
{
    *kept_p = NULL;
    if (id && !l->rkeys.cap && tess_hmap_init(&l->rkeys, 64) != TESS_OK)
        id = 0;
    uint64_t    key = net_rkey_key(src, id);
    net_rkey_t *c   = id && key != TESS_HMAP_EMPTY ? tess_hmap_get(&l->rkeys, key) : NULL;
    if (c && c->src == src && c->id == id) {
        atomic_fetch_add_explicit(&net.rkey_hits, 1, memory_order_relaxed);
        c->refs++;
        c->last_use = ++l->rkey_clock;
        *rk_p       = c->rk;
        *kept_p     = c;
        return UCS_OK;
    }
    ucs_status_t us = ucp_ep_rkey_unpack(l->peers[src].ep, rkey, rk_p);
    atomic_fetch_add_explicit(&net.rkey_unpacks, 1, memory_order_relaxed);
    if (us != UCS_OK || !id || c || key == TESS_HMAP_EMPTY)
        return us; /* c: another (src, id) has the slot; this key is not kept */
    if (l->rkeys.count >= NET_RKEY_KEEP)
        net_rkey_evict(l);
    c = tess_malloc(sizeof(*c), "a kept remote key");
    if (!c)
        return UCS_OK;
    *c = (net_rkey_t){*rk_p, src, id, 1, ++l->rkey_clock};
    if (tess_hmap_put(&l->rkeys, key, c) != TESS_OK) {
        free(c);
        return UCS_OK;
    }
    *kept_p = c;
    return UCS_OK;
}

/* Done with the key of a get (l->lock held). */
static void net_rkey_put(ucp_rkey_h rk, net_rkey_t *kept)
{
    if (kept)
        kept->refs--;
    else
        ucp_rkey_destroy(rk);
}

void tess_net_rkey_stats(uint64_t *unpacks_p, uint64_t *hits_p)
{
    *unpacks_p = atomic_load_explicit(&net.rkey_unpacks, memory_order_relaxed);
    *hits_p    = atomic_load_explicit(&net.rkey_hits, memory_order_relaxed);
}

void net_rkeys_release(void)
{
    for (int i = 0; i < net.nlanes; i++) {
        net_lane_t *l = &net.lanes[i];
        if (!l->rkeys.cap)
            continue;
        net_lane_lock(l);
        size_t   it = 0;
        uint64_t k;
        void    *v;
        while (tess_hmap_next(&l->rkeys, &it, &k, &v)) {
            net_rkey_t *c = v;
            ucp_rkey_destroy(c->rk);
            free(c);
        }
        tess_hmap_fini(&l->rkeys);
        memset(&l->rkeys, 0, sizeof(l->rkeys));
        net_lane_unlock(l);
    }
}

/* ---- gets -------------------------------------------------------------------------------- */

static void net_get_cb(void *request, ucs_status_t status, void *user_data)
{
    ucp_request_free(request);
    net_op_t *op = user_data;
    atomic_fetch_sub_explicit(&net.outstanding, 1, memory_order_relaxed);
    tess_net_done_fn_t done = op->done;
    void              *arg  = op->arg;
    net_rkey_put(op->rkey, op->kept);
    net_op_put(op);
    if (status != UCS_OK)
        tess_error(TESS_ERR_UCX, "RDMA get failed: %s", ucs_status_string(status));
    if (done)
        done(arg, net_status(status));
}

tess_status_t tess_net_get(int src, void *buf, size_t len, uint64_t raddr, const void *rkey,
                           size_t rkey_len, uint64_t key_id, tess_net_done_fn_t done, void *arg)
{
    (void)rkey_len;
    if (src < 0 || src >= net.size)
        return tess_error(TESS_ERR_INVALID, "get from process %d of %d", src, net.size);
    tess_status_t st = TESS_INPROGRESS;
    net_lane_t   *l  = net_lane_self();
    net_lane_lock(l);
    ucp_rkey_h   rk;
    net_rkey_t  *kept;
    if (!net_ep(l, src)) {
        st = TESS_ERR_UCX;
        goto out;
    }
    ucs_status_t us = net_rkey_get(l, src, rkey, key_id, &rk, &kept);
    if (us != UCS_OK) {
        st = net_ucx_error("ucp_ep_rkey_unpack", us);
        goto out;
    }
    net_op_t *op = net_op_get(l, done, arg);
    if (!op) {
        net_rkey_put(rk, kept);
        st = TESS_ERR_NO_MEMORY;
        goto out;
    }
    op->rkey = rk;
    op->kept = kept;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send      = net_get_cb,
        .user_data    = op,
    };
    ucs_status_ptr_t req = ucp_get_nbx(l->peers[src].ep, buf, len, raddr, rk, &rp);
    if (UCS_PTR_IS_ERR(req)) {
        net_rkey_put(rk, kept);
        net_op_put(op);
        st = net_ucx_error("ucp_get_nbx", UCS_PTR_STATUS(req));
    } else if (req == NULL) {
        net_rkey_put(rk, kept);
        net_op_put(op);
        st = TESS_OK;
    } else {
        atomic_fetch_add_explicit(&net.outstanding, 1, memory_order_relaxed); /* net_get_cb frees req */
    }
out:
    net_lane_unlock(l);
    return st;
}

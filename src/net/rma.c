/*
 * rma.c — memory registration with packed remote keys, and RDMA get on the calling thread's
 * lane.
 */
#include "net_int.h"

#include <stdlib.h>

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

static void net_get_cb(void *request, ucs_status_t status, void *user_data)
{
    ucp_request_free(request);
    net_op_t *op = user_data;
    atomic_fetch_sub_explicit(&net.outstanding, 1, memory_order_relaxed);
    tess_net_done_fn_t done = op->done;
    void              *arg  = op->arg;
    ucp_rkey_destroy(op->rkey);
    net_op_put(op);
    if (status != UCS_OK)
        tess_error(TESS_ERR_UCX, "RDMA get failed: %s", ucs_status_string(status));
    if (done)
        done(arg, net_status(status));
}

tess_status_t tess_net_get(int src, void *buf, size_t len, uint64_t raddr, const void *rkey,
                           size_t rkey_len, tess_net_done_fn_t done, void *arg)
{
    (void)rkey_len;
    if (src < 0 || src >= net.size)
        return tess_error(TESS_ERR_INVALID, "get from process %d of %d", src, net.size);
    tess_status_t st = TESS_INPROGRESS;
    net_lane_t   *l  = net_lane_self();
    net_lane_lock(l);
    ucp_rkey_h   rk;
    if (!net_ep(l, src)) {
        st = TESS_ERR_UCX;
        goto out;
    }
    ucs_status_t us = ucp_ep_rkey_unpack(l->peers[src].ep, rkey, &rk);
    if (us != UCS_OK) {
        st = net_ucx_error("ucp_ep_rkey_unpack", us);
        goto out;
    }
    net_op_t *op = net_op_get(l, done, arg);
    if (!op) {
        ucp_rkey_destroy(rk);
        st = TESS_ERR_NO_MEMORY;
        goto out;
    }
    op->rkey = rk;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send      = net_get_cb,
        .user_data    = op,
    };
    ucs_status_ptr_t req = ucp_get_nbx(l->peers[src].ep, buf, len, raddr, rk, &rp);
    if (UCS_PTR_IS_ERR(req)) {
        ucp_rkey_destroy(rk);
        net_op_put(op);
        st = net_ucx_error("ucp_get_nbx", UCS_PTR_STATUS(req));
    } else if (req == NULL) {
        ucp_rkey_destroy(rk);
        net_op_put(op);
        st = TESS_OK;
    } else {
        atomic_fetch_add_explicit(&net.outstanding, 1, memory_order_relaxed); /* net_get_cb frees req */
    }
out:
    net_lane_unlock(l);
    return st;
}

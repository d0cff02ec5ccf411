/*
 * dcb_ucx.c — the raw baseline of the RDMA path: an own UCX context and worker (RMA only),
 * worker addresses and one remote key exchanged over MPI, and ucp_get of rank 0's buffer
 * into rank 1's, one at a time (latency) or many outstanding (bandwidth). Rank 0 progresses
 * its worker while rank 1 measures, for transports that need the target's progress.
 */
#include "dcb.h"

#include <mpi.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

static struct {
    ucp_context_h ctx;
    ucp_worker_h  worker;
    ucp_ep_h      ep;
    ucp_mem_h     memh;
    ucp_rkey_h    rkey;   /* rank 1: rank 0's buffer */
    uint64_t      raddr;
    char         *local;
    size_t        cap;
} ux;

static void uck(ucs_status_t st, const char *what)
{
    if (st != UCS_OK)
        dcb_die("raw UCX %s: %s", what, ucs_status_string(st));
}

static void wait_req(void *r, const char *what)
{
    if (r == NULL)
        return;
    if (UCS_PTR_IS_ERR(r))
        uck(UCS_PTR_STATUS(r), what);
    ucs_status_t st;
    while ((st = ucp_request_check_status(r)) == UCS_INPROGRESS)
        ucp_worker_progress(ux.worker);
    ucp_request_free(r);
    uck(st, what);
}

static int dcb_ucx_has_cuda_ipc(void)
{
    uct_component_h *comps;
    unsigned         n, found = 0;
    if (uct_query_components(&comps, &n) != UCS_OK)
        return 0;
    for (unsigned c = 0; c < n; c++) {
        uct_component_attr_t ca = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
        found |= uct_component_query(comps[c], &ca) == UCS_OK && strcmp(ca.name, "cuda_ipc") == 0;
    }
    uct_release_component_list(comps);
    return found != 0;
}

void dcb_ucx_init(void *src0, void *dst1, size_t cap)
{
    ucp_config_t *config;
    uck(ucp_config_read(NULL, NULL, &config), "ucp_config_read");
    /* The same transport choice as Tessera's (src/net/net.c): get over cuda_ipc on, unless the
     * environment says otherwise, so that the raw get is the best UCX offers here. */
    if (!getenv("UCX_CUDA_IPC_ENABLE_GET_ZCOPY") && dcb_ucx_has_cuda_ipc())
        (void)ucp_config_modify(config, "CUDA_IPC_ENABLE_GET_ZCOPY", "y");
    ucp_params_t up = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_RMA};
    uck(ucp_init(&up, config, &ux.ctx), "ucp_init");
    ucp_config_release(config);
    ucp_worker_params_t wp = {.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    uck(ucp_worker_create(ux.ctx, &wp, &ux.worker), "ucp_worker_create");

    ucp_address_t *addr;
    size_t         len;
    uck(ucp_worker_get_address(ux.worker, &addr, &len), "ucp_worker_get_address");
    int ilen = (int)len, plen = 0, peer = 1 - dcb.rank;
    MPI_Sendrecv(&ilen, 1, MPI_INT, peer, 0, &plen, 1, MPI_INT, peer, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    char *paddr = malloc((size_t)plen);
    if (!paddr)
        dcb_die("out of memory");
    MPI_Sendrecv(addr, ilen, MPI_BYTE, peer, 1, paddr, plen, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    ucp_worker_release_address(ux.worker, addr);
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                          .address    = (ucp_address_t *)paddr};
    uck(ucp_ep_create(ux.worker, &ep, &ux.ep), "ucp_ep_create");
    free(paddr);

    /* Rank 0 exposes src0; rank 1 maps dst1 (registered, as the runtime's bounce buffers). */
    ux.cap   = cap;
    ux.local = dcb.rank == 0 ? src0 : dst1;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = ux.local, .length = cap};
    uck(ucp_mem_map(ux.ctx, &mp, &ux.memh), "ucp_mem_map");
    void  *kbuf = NULL;
    size_t klen = 0;
    int    ik   = 0;
    if (dcb.rank == 0) {
        uck(ucp_rkey_pack(ux.ctx, ux.memh, &kbuf, &klen), "ucp_rkey_pack");
        ik = (int)klen;
    }
    MPI_Bcast(&ik, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char *keys = malloc((size_t)ik);
    if (!keys)
        dcb_die("out of memory");
    if (dcb.rank == 0) {
        memcpy(keys, kbuf, (size_t)ik);
        ucp_rkey_buffer_release(kbuf);
    }
    MPI_Bcast(keys, ik, MPI_BYTE, 0, MPI_COMM_WORLD);
    uint64_t base = (uint64_t)(uintptr_t)ux.local;
    MPI_Bcast(&base, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (dcb.rank == 1) {
        ux.raddr = base;
        uck(ucp_ep_rkey_unpack(ux.ep, keys, &ux.rkey), "ucp_ep_rkey_unpack");
    }
    free(keys);
    /* Wire up the endpoints both ways, with one get, before anything is timed. */
    for (int i = 0; i < 100; i++)
        ucp_worker_progress(ux.worker);
    dcb_ucx_get_latency(64, 4);
}

void dcb_ucx_fini(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (ux.rkey)
        ucp_rkey_destroy(ux.rkey);
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags        = UCP_EP_CLOSE_FLAG_FORCE};
    void *r = ucp_ep_close_nbx(ux.ep, &rp);
    if (UCS_PTR_IS_PTR(r)) { /* how a forced close ends does not matter here */
        while (ucp_request_check_status(r) == UCS_INPROGRESS)
            ucp_worker_progress(ux.worker);
        ucp_request_free(r);
    }
    ucp_mem_unmap(ux.ctx, ux.memh);
    ucp_worker_destroy(ux.worker);
    ucp_cleanup(ux.ctx);
}

/* Rank 0: progress until rank 1 is done; rank 1: say it is done. Then rank 1's figure. */
static double finish(double v)
{
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    int done = 0;
    while (!done) {
        if (!ucp_worker_progress(ux.worker))
            sched_yield(); /* a core for rank 1's threads on a small host */
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
    MPI_Bcast(&v, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    return v;
}

static size_t offset_of(size_t size, int i)
{
    size_t slots = size ? ux.cap / size : 1;
    return slots ? (size_t)(i % (int64_t)slots) * size : 0;
}

static void *get(size_t size, int i)
{
    ucp_request_param_t rp  = {.op_attr_mask = 0};
    size_t              off = offset_of(size, i);
    return ucp_get_nbx(ux.ep, ux.local + off, size, ux.raddr + off, ux.rkey, &rp);
}

double dcb_ucx_get_latency(size_t size, int iters)
{
    double v = 0;
    if (dcb.rank == 1) {
        double t0 = dcb_now();
        for (int i = 0; i < iters; i++)
            wait_req(get(size, i), "ucp_get_nbx");
        v = (dcb_now() - t0) / iters;
    }
    return finish(v);
}

double dcb_ucx_get_bulk(size_t size, int count)
{
    double v = 0;
    if (dcb.rank == 1) {
        void **reqs = malloc((size_t)count * sizeof(*reqs));
        if (!reqs)
            dcb_die("out of memory");
        double t0 = dcb_now();
        for (int i = 0; i < count; i++)
            reqs[i] = get(size, i);
        for (int i = 0; i < count; i++)
            wait_req(reqs[i], "ucp_get_nbx");
        v = (dcb_now() - t0) / count;
        free(reqs);
    }
    return finish(v);
}

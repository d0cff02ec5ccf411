/* msg_shm.c — node message arenas: each process keeps its large message buffers (payloads of
 * TESS_MSG_SHM_MIN bytes up to 4 MiB) in a shared segment that the other processes of its node
 * map, so a message to one of them travels as a reference (owner, slot) in a small active
 * message: the receiving entry reads the payload where the sender wrote it, and the buffer
 * goes back to its owner when the receiver frees it. tess_send then costs one copy in all (the
 * sender's, into the buffer), tess_msg_alloc + tess_send_msg none; through UCX the payload was
 * copied twice more (eager) or fetched by a handshake and a CMA get (rendezvous).
 *
 * A segment: a header (geometry, and per class the stack of slots returned by other processes,
 * each head on its own cache line), the links of those stacks, then the slots of each class
 * (64 KiB, 256 KiB, 1 MiB, 4 MiB of payload; TESS_MSG_SHM bytes split evenly between them), each a
 * tess_msg_t and its payload. Slots are handed out on first use (their pages are committed
 * only then: the segments are sparse). The owner's free slots sit on a process-private list
 * under a mutex; another process returns a slot by pushing it on the owner's returned stack
 * (a compare-and-swap on the head; the owner takes the whole stack at once with an exchange,
 * so there is no ABA). A slot is owned by one thread of one process at a time: the sender's
 * until it posts the reference, then the receiver's, then its owner's again.
 *
 * "Node" is the node the runtime sees (TESS_VNODE_SIZE cuts a physical node into virtual
 * ones): processes of other virtual nodes get payloads through UCX, as between machines. All
 * processes of a node have arenas or none (where a segment cannot be made, or /dev/shm lacks
 * the room for every process's arena, the node goes without: a sparse segment past the room
 * would fail with SIGBUS on first touch).
 *
 * Threads: init and fini on the main thread (collective over the runtime's communicator);
 * alloc, free, ref and resolve on any thread. */
#include "core_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#define SHM_MAGIC 0x6d6873736d737465ull
#define SHM_NCLS  4
#define SHM_LINE  64

static const uint32_t shm_cls_cap[SHM_NCLS] = {64u << 10, 256u << 10, 1u << 20, 4u << 20};

typedef struct shm_hdr {
    uint64_t magic;
    uint64_t size;                 /* bytes of the segment */
    uint32_t nslots[SHM_NCLS];     /* per class */
    uint32_t first[SHM_NCLS];      /* index of its first slot among all */
    uint64_t off[SHM_NCLS];        /* byte offset of its first slot */
    uint64_t stride[SHM_NCLS];     /* bytes per slot: message header and payload */
    /* [class]: slots returned by other processes, (index + 1) of the top, 0 if none */
    struct {
        _Alignas(SHM_LINE) _Atomic uint32_t top;
    } ret[SHM_NCLS];
    /* then _Atomic uint32_t next[total slots]: links of the returned stacks */
} shm_hdr_t;

static struct {
    int             on;
    int             me;       /* this process's index in its node */
    int             nlocal;
    int            *idx_of;   /* [process]: its index in this node, or -1 */
    uint8_t       **base;     /* [node index]: segments, this process's own included */
    size_t         *len;      /* [node index]: bytes mapped */
    tess_gpu_shm_h  seg;      /* this process's own */
    pthread_mutex_t lock;     /* the owner's free lists */
    uint32_t        total;
    uint32_t       *lnext;    /* [slot]: the owner's free list links (index + 1) */
    uint32_t        lhead[SHM_NCLS];
    uint32_t        unused[SHM_NCLS]; /* slots never handed out yet: the class's last ones */
    _Atomic uint64_t refs_sent, refs_recvd, full;
} shm;

#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer cannot see an order made through another process: a slot is written here,
 * read by a peer, returned through shared memory and written here again by another thread.
 * Each hand-over goes through this counter in TSan builds; other builds have nothing here. */
static _Atomic unsigned long shm_tsan_edge;
#define SHM_TSAN_SYNC() ((void)atomic_fetch_add_explicit(&shm_tsan_edge, 1, memory_order_acq_rel))
#else
#define SHM_TSAN_SYNC() ((void)0)
#endif

static inline shm_hdr_t *shm_hdr(int i)
{
    return (shm_hdr_t *)shm.base[i];
}

static inline _Atomic uint32_t *shm_next(int i)
{
    return (_Atomic uint32_t *)(shm.base[i] + sizeof(shm_hdr_t));
}

static inline tess_msg_t *shm_slot(int i, uint32_t c, uint32_t k)
{
    const shm_hdr_t *h = shm_hdr(i);
    return (tess_msg_t *)(shm.base[i] + h->off[c] + (size_t)k * h->stride[c]);
}

/* The geometry of a segment of `size` bytes: the same on every process (the options are the
 * job's), checked again on every peer's segment. */
static void shm_layout(shm_hdr_t *h, size_t size)
{
    memset(h, 0, sizeof(*h));
    h->magic = SHM_MAGIC;
    h->size  = size;
    /* The header and links first (counted for as many slots as the whole would hold), then
     * what is left in equal shares. */
    uint32_t most = 0;
    for (int c = 0; c < SHM_NCLS; c++) {
        h->stride[c] = TESS_ALIGN_UP(sizeof(tess_msg_t) + shm_cls_cap[c], 4096);
        most += (uint32_t)(size / SHM_NCLS / h->stride[c]);
    }
    size_t off   = TESS_ALIGN_UP(sizeof(shm_hdr_t) + (size_t)most * sizeof(uint32_t), 4096);
    size_t share = size > off ? (size - off) / SHM_NCLS : 0;
    uint32_t first = 0;
    for (int c = 0; c < SHM_NCLS; c++) {
        h->nslots[c] = (uint32_t)(share / h->stride[c]);
        h->off[c]    = off;
        h->first[c]  = first;
        off += (size_t)h->nslots[c] * h->stride[c];
        first += h->nslots[c];
    }
}

static int shm_same_layout(const shm_hdr_t *a, const shm_hdr_t *b)
{
    if (a->magic != b->magic || a->size != b->size)
        return 0;
    for (int c = 0; c < SHM_NCLS; c++)
        if (a->nslots[c] != b->nslots[c] || a->first[c] != b->first[c] ||
            a->off[c] != b->off[c] || a->stride[c] != b->stride[c])
            return 0;
    return 1;
}

/* Room in /dev/shm for every process of the node to fill its arena (and as much again for
 * everything else there). */
static int shm_room(size_t size, int nlocal)
{
    struct statvfs v;
    if (statvfs("/dev/shm", &v) != 0)
        return 1; /* no /dev/shm to ask: the segment's creation will tell */
    double avail = (double)v.f_bavail * (double)v.f_frsize;
    return avail >= 2.0 * (double)size * (double)nlocal;
}

tess_status_t tess_msg_shm_init(void)
{
    memset(&shm, 0, sizeof(shm));
    pthread_mutex_init(&shm.lock, NULL);
    size_t size = tess_cfg.msg_shm;
    /* A process's index in its node: its rank among the node's processes (the order of the
     * node communicator, split with the rank as key). */
    shm.idx_of = tess_malloc((size_t)tess_rt.size * sizeof(int), "node message arenas");
    if (!shm.idx_of)
        tess_fatal("out of memory for the node message arenas");
    for (int r = 0; r < tess_rt.size; r++)
        shm.idx_of[r] = tess_rt.vnode_of[r] == tess_rt.vnode ? shm.nlocal++ : -1;
    shm.me = shm.idx_of[tess_rt.rank];
    MPI_Comm node;
    TESS_MPI_CHECK(MPI_Comm_split(tess_rt.comm, tess_rt.vnode, tess_rt.rank, &node));

    struct {
        tess_gpu_ipc_handle_t h;
        int32_t               ok;
    } mine = {0}, *all = NULL;
    tess_status_t st = TESS_OK;
    /* The same decision everywhere: the options and the backend are the job's; the room is
     * asked by every process and agreed on below. */
    int want = size > 0 && shm.nlocal > 1 && tess_gpu_shm_available();
    if (want && !shm_room(size, shm.nlocal)) {
        tess_info("node message arenas off: /dev/shm has less than twice the %d x %zu bytes "
                  "(TESS_MSG_SHM) they may use", shm.nlocal, size);
        want = 0;
    }
    void *base = NULL;
    if (want) {
        st = tess_gpu_shm_create(size, &shm.seg, &base, &mine.h);
        if (st == TESS_OK) {
            shm_layout(base, size);
            mine.ok = 1;
        } else {
            tess_warn("node message arenas off: %s", tess_error_detail());
        }
    }
    int ok = mine.ok, every = 0;
    TESS_MPI_CHECK(MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_MIN, node));
    shm.base   = tess_calloc((size_t)shm.nlocal, sizeof(*shm.base), "node message arenas");
    shm.len    = tess_calloc((size_t)shm.nlocal, sizeof(*shm.len), "node message arenas");
    all        = tess_calloc((size_t)shm.nlocal, sizeof(*all), "node message arenas");
    if (!shm.base || !shm.len || !all)
        tess_fatal("out of memory for the node message arenas");
    TESS_MPI_CHECK(MPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, all, (int)sizeof(mine),
                                 MPI_BYTE, node));
    for (int i = 0; every && i < shm.nlocal && st == TESS_OK; i++) {
        if (i == shm.me) {
            shm.base[i] = base;
            shm.len[i]  = size;
            continue;
        }
        void  *b = NULL;
        size_t n = 0;
        st = tess_gpu_shm_open(&all[i].h, &b, &n);
        if (st != TESS_OK)
            break;
        shm.base[i] = b;
        shm.len[i]  = n;
        if (n != size || !shm_same_layout(b, base)) {
            st = tess_error(TESS_ERR_CORRUPT, "the node message arena of node process %d has "
                            "%zu bytes or another layout (this process: %zu bytes; every "
                            "process must run the same TESS_MSG_SHM)", i, n, size);
            break;
        }
    }
    /* Every process has mapped every other's before any creator may go. */
    ok = every && st == TESS_OK;
    TESS_MPI_CHECK(MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_MIN, node));
    free(all);
    MPI_Comm_free(&node);
    if (!every) {
        if (st != TESS_OK)
            tess_warn("node message arenas off: %s", tess_error_detail());
        tess_msg_shm_fini();
        return TESS_OK;
    }
    shm_hdr_t *h = base;
    shm.total    = h->first[SHM_NCLS - 1] + h->nslots[SHM_NCLS - 1];
    shm.lnext    = tess_calloc(shm.total ? shm.total : 1, sizeof(uint32_t), "node message arenas");
    if (!shm.lnext)
        tess_fatal("out of memory for the node message arenas");
    for (int c = 0; c < SHM_NCLS; c++)
        shm.unused[c] = h->nslots[c];
    shm.on = 1;
    return TESS_OK;
}

void tess_msg_shm_fini(void)
{
    /* Peers' mappings of this process's segment stay valid until they unmap them; a slot of
     * a peer still held here is simply not returned. */
    for (int i = 0; shm.base && i < shm.nlocal; i++)
        if (shm.base[i] && i != shm.me)
            tess_gpu_shm_close(shm.base[i], shm.len[i]);
    if (shm.seg)
        tess_gpu_shm_destroy(shm.seg);
    free(shm.base);
    free(shm.len);
    free(shm.idx_of);
    free(shm.lnext);
    pthread_mutex_destroy(&shm.lock);
    memset(&shm, 0, sizeof(shm));
}

int tess_msg_shm_reaches(int proc)
{
    return shm.on && shm.idx_of[proc] >= 0;
}

static int shm_class(size_t size)
{
    for (int c = 0; c < SHM_NCLS; c++)
        if (size <= shm_cls_cap[c])
            return c;
    return -1;
}

/* Pop a free slot of class c of this process's arena (shm.lock held): its own free list, else
 * what other processes returned, else one never used. UINT32_MAX if the class is full. */
static uint32_t shm_take(int c)
{
    shm_hdr_t *h = shm_hdr(shm.me);
    if (!shm.lhead[c]) {
        uint32_t top = atomic_exchange_explicit(&h->ret[c].top, 0, memory_order_acquire);
        if (top) {
            SHM_TSAN_SYNC();
            _Atomic uint32_t *next = shm_next(shm.me);
            /* The returned stack becomes the free list as it is. */
            for (uint32_t k = top; k; k = atomic_load_explicit(&next[k - 1], memory_order_relaxed))
                shm.lnext[k - 1] = atomic_load_explicit(&next[k - 1], memory_order_relaxed);
            shm.lhead[c] = top;
        }
    }
    if (shm.lhead[c]) {
        uint32_t k   = shm.lhead[c] - 1;
        shm.lhead[c] = shm.lnext[k];
        return k;
    }
    if (shm.unused[c]) {
        shm.unused[c]--;
        return h->first[c] + (h->nslots[c] - 1 - shm.unused[c]);
    }
    return UINT32_MAX;
}

tess_msg_t *tess_msg_shm_alloc(size_t size)
{
    if (!shm.on || size < tess_cfg.msg_shm_min)
        return NULL;
    int c = shm_class(size);
    if (c < 0)
        return NULL;
    pthread_mutex_lock(&shm.lock);
    uint32_t k = shm_take(c);
    pthread_mutex_unlock(&shm.lock);
    if (k == UINT32_MAX) {
        atomic_fetch_add_explicit(&shm.full, 1, memory_order_relaxed);
        return NULL;
    }
    shm_hdr_t  *h = shm_hdr(shm.me);
    tess_msg_t *m = shm_slot(shm.me, (uint32_t)c, k - h->first[c]);
    m->cls  = TESS_MSG_CLS_SHM;
    m->home = (uint16_t)shm.me;
    m->cap  = shm_cls_cap[c];
    return m;
}

/* Class and slot index (among all) of a slot of node process i's arena. */
static void shm_locate(int i, const tess_msg_t *m, uint32_t *c_p, uint32_t *k_p)
{
    const shm_hdr_t *h = shm_hdr(i);
    int              c = shm_class(m->cap);
    size_t           o = (size_t)((const uint8_t *)m - shm.base[i]);
    if (c < 0 || m->cap != shm_cls_cap[c] || o < h->off[c] ||
        (o - h->off[c]) % h->stride[c] != 0 || (o - h->off[c]) / h->stride[c] >= h->nslots[c])
        tess_fatal("internal: a message buffer is not a slot of node process %d's arena", i);
    *c_p = (uint32_t)c;
    *k_p = h->first[c] + (uint32_t)((o - h->off[c]) / h->stride[c]);
}

void tess_msg_shm_free(tess_msg_t *m)
{
    int      i = m->home;
    uint32_t c, k;
    if (i >= shm.nlocal || !shm.base[i])
        tess_fatal("internal: a message buffer of node process %d's arena, which is not mapped",
                   i);
    shm_locate(i, m, &c, &k);
    SHM_TSAN_SYNC();
    if (i == shm.me) {
        pthread_mutex_lock(&shm.lock);
        shm.lnext[k] = shm.lhead[c];
        shm.lhead[c] = k + 1;
        pthread_mutex_unlock(&shm.lock);
        return;
    }
    shm_hdr_t        *h    = shm_hdr(i);
    _Atomic uint32_t *next = shm_next(i);
    uint32_t          top  = atomic_load_explicit(&h->ret[c].top, memory_order_relaxed);
    do
        atomic_store_explicit(&next[k], top, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&h->ret[c].top, &top, k + 1,
                                                  memory_order_release, memory_order_relaxed));
}

void tess_msg_shm_ref(const tess_msg_t *m, tess_msg_shm_ref_t *ref)
{
    uint32_t c, k;
    shm_locate(m->home, m, &c, &k);
    ref->owner = m->home;
    ref->slot  = k;
    SHM_TSAN_SYNC();
    atomic_fetch_add_explicit(&shm.refs_sent, 1, memory_order_relaxed);
}

tess_msg_t *tess_msg_shm_resolve(const tess_msg_shm_ref_t *ref, uint64_t size)
{
    if (!shm.on || ref->owner >= (uint32_t)shm.nlocal || !shm.base[ref->owner] ||
        ref->slot >= shm.total)
        return NULL;
    const shm_hdr_t *h = shm_hdr((int)ref->owner);
    int c = SHM_NCLS - 1;
    while (c > 0 && ref->slot < h->first[c])
        c--;
    if (size > shm_cls_cap[c])
        return NULL;
    tess_msg_t *m = shm_slot((int)ref->owner, (uint32_t)c, ref->slot - h->first[c]);
    SHM_TSAN_SYNC();
    /* The slot's own fields are the owner's, written when it was first handed out. */
    if (m->cls != TESS_MSG_CLS_SHM || m->home != ref->owner || m->cap != shm_cls_cap[c])
        return NULL;
    atomic_fetch_add_explicit(&shm.refs_recvd, 1, memory_order_relaxed);
    return m;
}

void tess_msg_shm_stats(tess_msg_shm_stats_t *s)
{
    s->on         = shm.on;
    s->min        = tess_cfg.msg_shm_min;
    s->max        = shm_cls_cap[SHM_NCLS - 1];
    s->refs_sent  = atomic_load_explicit(&shm.refs_sent, memory_order_relaxed);
    s->refs_recvd = atomic_load_explicit(&shm.refs_recvd, memory_order_relaxed);
    s->full       = atomic_load_explicit(&shm.full, memory_order_relaxed);
}

/* ckpt_bg.c — the background checkpoint: a snapshot of every local element taken when
 * tess_checkpoint is called (host parts into host memory, device buffers copied on each
 * element's stream into the snapshot area), then the data file written from it by a thread of
 * its own through ckpt_io.c's staging writer, while the program goes on; waiting for that
 * thread, and forgetting or freeing a snapshot.
 *
 * Threads: the tess_ckpt_snapshot / tess_ckpt_bg_* functions run on the main thread (the
 * callers of tess_checkpoint, tess_checkpoint_wait, tess_checkpoint_info and finalize); the
 * writer thread (bg_main) reads the snapshot, which the main thread leaves alone from
 * tess_ckpt_bg_start until the thread is joined, and sets `done` last. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "ckpt.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A background checkpoint. tess_checkpoint copies every record's host part (header, state, PUP
 * bytes) into `host` and enqueues, on each element's stream, copies of its device buffers into
 * the snapshot area (after the work already there), then records an event on each of those
 * streams and waits for them: nothing of the elements is read after tess_checkpoint returns.
 * A thread then waits for the events and writes the file as the synchronous writer does
 * (the same two staging halves and pwrite thread), copying the area into the halves on a stream
 * of its own. The area is device memory (tess_gpu->mem_alloc), kept and grown between
 * checkpoints; pinned host memory when that fails. */
typedef struct bpiece {
    uint64_t    off; /* in host, or in the area */
    uint64_t    len;
    size_t      rec;
    int         dev; /* 1: in the area */
    const char *src; /* during the snapshot: the element's device buffer */
    tess_gpu_stream_h stream;
} bpiece_t;

static struct bg {
    int               taken, started, joined;
    _Atomic int       done;
    pthread_t         th;
    char              path[CKPT_PATH];
    char             *host;
    size_t            hfill, hcap;
    char             *area;
    size_t            area_size;
    int               area_pinned;
    bpiece_t         *pc;
    size_t            npc, cappc;
    tess_gpu_event_h *ev;
    size_t            nev, capev; /* events used, events made (kept) */
    tess_gpu_stream_h stream;     /* the writer's own */
    recvec_t          rv;
    uint64_t          size;
    tess_status_t     st;
    char              text[CKPT_TEXT];
} bg;

static tess_status_t bg_piece(size_t rec, uint64_t off, uint64_t len, int dev, const char *src,
                              tess_gpu_stream_h stream)
{
    if (bg.npc && !dev && !bg.pc[bg.npc - 1].dev && bg.pc[bg.npc - 1].rec == rec &&
        bg.pc[bg.npc - 1].off + bg.pc[bg.npc - 1].len == off) {
        bg.pc[bg.npc - 1].len += len;
        return TESS_OK;
    }
    if (bg.npc == bg.cappc) {
        size_t    cap = bg.cappc ? 2 * bg.cappc : 256;
        bpiece_t *nv  = realloc(bg.pc, cap * sizeof(*nv));
        if (!nv)
            return tess_error(TESS_ERR_NO_MEMORY, "checkpoint snapshot: the list of pieces");
        bg.pc    = nv;
        bg.cappc = cap;
    }
    bg.pc[bg.npc++] = (bpiece_t){.off = off, .len = len, .rec = rec, .dev = dev, .src = src,
                                 .stream = stream};
    return TESS_OK;
}

/* The host part of element e's record into bg.host, its device buffers as pieces to copy;
 * *foff the file offset, advanced. */
static tess_status_t snap_element(uint32_t ai, tess_ctx_h e, uint64_t *foff, uint64_t *dev_total)
{
    tess_array_t   *a  = e->array;
    struct tess_pup ps = {.mode = PUP_SIZE, .ckpt = 1};
    if (a->pup)
        a->pup(&ps, e, tess_obj_state(e));
    size_t hbytes = sizeof(rec_hdr_t) + a->elem_size + ps.pos;
    if (bg.hfill + hbytes > bg.hcap) {
        size_t cap = TESS_MAX(2 * bg.hcap, bg.hfill + hbytes);
        char  *nb  = realloc(bg.host, cap);
        if (!nb)
            return tess_error(TESS_ERR_NO_MEMORY, "checkpoint snapshot: %zu bytes of host memory",
                              cap);
        bg.host = nb;
        bg.hcap = cap;
    }
    rec_hdr_t *h = (rec_hdr_t *)(bg.host + bg.hfill);
    struct tess_pup pk;
    uint64_t        len;
    tess_status_t   st = tess_ckpt_rec_fill(h, ai, e, &ps, hbytes, &pk, &len);
    if (st != TESS_OK)
        return st;
    size_t r;
    if ((st = tess_ckpt_rec_index_add(&bg.rv, ai, e->linear, *foff, len, &r)) != TESS_OK)
        return st;
    *foff += len;
    st = bg_piece(r, bg.hfill, hbytes, 0, NULL, NULL);
    bg.hfill += hbytes;
    for (int k = 0; st == TESS_OK && k < ps.ndev; k++)
        if (ps.dev_size[k]) {
            st = bg_piece(r, *dev_total, ps.dev_size[k], 1, pk.dev[k], e->stream);
            *dev_total += ps.dev_size[k];
        }
    return st;
}

static int cmp_stream(const void *x, const void *y)
{
    uintptr_t a = (uintptr_t) * (tess_gpu_stream_h const *)x,
              b = (uintptr_t) * (tess_gpu_stream_h const *)y;
    return a < b ? -1 : a > b;
}

/* bg.area from `alloc`: `want` bytes (room to grow), else `need` (a device nearly full still
 * holds the snapshot itself); 1 if either could be had. */
static int snap_alloc(tess_status_t (*alloc)(size_t, void **), size_t want, size_t need)
{
    if (alloc(want, (void **)&bg.area) == TESS_OK) {
        bg.area_size = want;
        return 1;
    }
    if (want > need && alloc(need, (void **)&bg.area) == TESS_OK) {
        tess_error_clear();
        bg.area_size = need;
        return 1;
    }
    bg.area = NULL;
    return 0;
}

/* An area of at least `need` bytes: the one kept, else new device memory, else pinned host
 * memory (TESS_CKPT_SNAPSHOT=host: pinned host memory only); 0 when neither can be had (the
 * warning says why) or TESS_CKPT_SNAPSHOT=none. */
static int snap_area(size_t need)
{
    int host_only = !strcmp(tess_cfg.ckpt_snapshot, "host");
    if (!strcmp(tess_cfg.ckpt_snapshot, "none"))
        return 0;
    if (need <= bg.area_size && (bg.area_pinned || !host_only))
        return 1;
    if (bg.area)
        (bg.area_pinned ? tess_gpu->host_free : tess_gpu->mem_free)(bg.area);
    bg.area      = NULL;
    bg.area_size = 0;
    size_t want  = TESS_ALIGN_UP(need, (size_t)64 << 20);
    char   dev_err[256] = "TESS_CKPT_SNAPSHOT=host";
    if (!host_only) {
        if (snap_alloc(tess_gpu->mem_alloc, want, need)) {
            bg.area_pinned = 0;
            return 1;
        }
        tess_ckpt_detail_copy(TESS_ERR_NO_MEMORY, dev_err, sizeof(dev_err));
        tess_error_clear();
    }
    if (snap_alloc(tess_gpu->host_alloc, want, need)) {
        bg.area_pinned = 1;
        if (!host_only)
            tess_warn("checkpoint: the snapshot of %zu device bytes goes to pinned host memory: "
                      "no device memory for it (%s)", need, dev_err);
        return 1;
    }
    char host_err[256];
    tess_ckpt_detail_copy(TESS_ERR_NO_MEMORY, host_err, sizeof(host_err));
    tess_warn("checkpoint: written before returning, not in the background: no memory for a "
              "snapshot of %zu device bytes (device: %s; pinned host: %s)", need, dev_err,
              host_err);
    tess_error_clear();
    return 0;
}

tess_status_t tess_ckpt_snapshot(const char *tmpdir, const ckpt_set_t *set, int *sync_p)
{
    *sync_p = 0;
    if (bg.taken)
        tess_fatal("checkpoint: a snapshot taken while another is outstanding");
    bg.hfill = 0;
    bg.npc   = 0;
    bg.nev   = 0;
    bg.rv    = (recvec_t){0};
    bg.size  = 0;
    bg.st    = TESS_OK;
    bg.text[0] = 0;
    bg.started = bg.joined = 0;
    atomic_store(&bg.done, 0);
    tess_ckpt_pathf(bg.path, "%s/data.%d", tmpdir, tess_rt.rank);
    uint64_t      foff = 0, dev_total = 0;
    tess_status_t st   = TESS_OK;
    for (int ai = 0; st == TESS_OK && ai < set->n; ai++) {
        size_t      n;
        tess_ctx_h *v = tess_ckpt_local_elems(set->a[ai], &n);
        if (!v)
            return TESS_ERR_NO_MEMORY;
        for (size_t k = 0; st == TESS_OK && k < n; k++)
            st = snap_element((uint32_t)ai, v[k], &foff, &dev_total);
        free(v);
    }
    if (st != TESS_OK)
        goto err_free;
    bg.size = foff;
    if (dev_total && !snap_area(dev_total)) {
        *sync_p = 1;
        goto err_free;
    }
    /* The copies, each on its element's stream; then an event on each of those streams. */
    tess_gpu_stream_h *sv = tess_malloc((bg.npc ? bg.npc : 1) * sizeof(*sv), "checkpoint streams");
    if (!sv) {
        st = TESS_ERR_NO_MEMORY;
        goto err_free;
    }
    size_t ns = 0;
    for (size_t i = 0; i < bg.npc; i++) {
        bpiece_t *p = &bg.pc[i];
        if (!p->dev)
            continue;
        if (tess_gpu->memcpy_async(bg.area + p->off, p->src, p->len, p->stream) != TESS_OK) {
            st = tess_error(TESS_ERR_GPU, "checkpoint: copying %llu device bytes into the "
                            "snapshot: %s", (unsigned long long)p->len, tess_error_detail());
            break;
        }
        p->src = NULL; /* the element's buffer is not read again */
        if (!ns || sv[ns - 1] != p->stream)
            sv[ns++] = p->stream;
    }
    qsort(sv, ns, sizeof(*sv), cmp_stream);
    for (size_t i = 0; i < ns; i++) {
        if (i && sv[i] == sv[i - 1])
            continue;
        if (bg.nev == bg.capev) {
            size_t            cap = bg.capev ? 2 * bg.capev : 16;
            tess_gpu_event_h *nv  = realloc(bg.ev, cap * sizeof(*nv));
            if (!nv) {
                st = tess_error(TESS_ERR_NO_MEMORY, "checkpoint: the list of events");
                break;
            }
            bg.ev = nv;
            for (; bg.capev < cap; bg.capev++)
                if (tess_gpu->event_create(0, &bg.ev[bg.capev]) != TESS_OK) {
                    st = tess_error(TESS_ERR_GPU, "checkpoint: an event: %s", tess_error_detail());
                    break;
                }
            if (st != TESS_OK)
                break;
        }
        if (tess_gpu->event_record(bg.ev[bg.nev], sv[i]) != TESS_OK) {
            st = tess_error(TESS_ERR_GPU, "checkpoint: recording an event: %s",
                            tess_error_detail());
            break;
        }
        bg.nev++;
    }
    free(sv);
    /* Return only once the copies are done (a few ms even for GBs, device to device, behind
     * the work already on those streams): the program may then change or free the buffers
     * from any stream or thread, not only by work ordered on the element's stream. */
    for (size_t i = 0; st == TESS_OK && i < bg.nev; i++)
        if (tess_gpu->event_sync(bg.ev[i]) != TESS_OK)
            st = tess_error(TESS_ERR_GPU, "checkpoint: a snapshot copy failed: %s",
                            tess_error_detail());
    if (st == TESS_OK && !bg.stream && dev_total && !bg.area_pinned &&
        tess_gpu->stream_create(&bg.stream) != TESS_OK)
        st = tess_error(TESS_ERR_GPU, "checkpoint: the writer's stream: %s", tess_error_detail());
    if (st != TESS_OK) {
        for (size_t i = 0; i < bg.npc; i++) /* copies enqueued into the area */
            if (bg.pc[i].dev && !bg.pc[i].src)
                tess_gpu->stream_sync(bg.pc[i].stream);
        goto err_free;
    }
    bg.taken = 1;
    return TESS_OK;

err_free:
    free(bg.rv.v);
    bg.rv = (recvec_t){0};
    return st;
}

static void *bg_main(void *arg)
{
    (void)arg;
    tess_status_t st = tess_gpu->set_device(tess_gpu_device());
    if (st != TESS_OK)
        st = tess_error(TESS_ERR_GPU, "checkpoint writer: cannot select device %d: %s",
                        tess_gpu_device(), tess_error_detail());
    for (size_t i = 0; st == TESS_OK && i < bg.nev; i++)
        if (tess_gpu->event_sync(bg.ev[i]) != TESS_OK)
            st = tess_error(TESS_ERR_GPU, "checkpoint: a snapshot copy failed: %s",
                            tess_error_detail());
    int fd = -1;
    if (st == TESS_OK) {
        fd = tess_ckpt_data_open(bg.path);
        if (fd < 0)
            st = tess_ckpt_sys_error("cannot create", bg.path);
    }
    if (st == TESS_OK && tess_cfg.ckpt_write_delay_ms > 0) {
        struct timespec ts = {tess_cfg.ckpt_write_delay_ms / 1000,
                              (long)(tess_cfg.ckpt_write_delay_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) && errno == EINTR) {
        }
    }
    if (st == TESS_OK) {
        ckpt_writer_t w;
        uint64_t      size = 0;
        st                 = tess_ckpt_writer_open(&w, fd, bg.path, &bg.rv);
        for (size_t i = 0; st == TESS_OK && i < bg.npc; i++) {
            const bpiece_t *p = &bg.pc[i];
            if (p->dev)
                st = tess_ckpt_writer_put(&w, p->rec, bg.area + p->off, p->len, bg.stream,
                                          !bg.area_pinned);
            else
                st = tess_ckpt_writer_put(&w, p->rec, bg.host + p->off, p->len, NULL, 0);
        }
        st = tess_ckpt_writer_close(&w, st, &size);
        if (st == TESS_OK && size != bg.size)
            tess_fatal("checkpoint: %s is %llu bytes, %llu laid out", bg.path,
                       (unsigned long long)size, (unsigned long long)bg.size);
        if (st == TESS_OK && fsync(fd))
            st = tess_ckpt_sys_error("cannot sync", bg.path);
    }
    if (fd >= 0 && close(fd) && st == TESS_OK)
        st = tess_ckpt_sys_error("cannot close", bg.path);
    bg.st = st;
    if (st != TESS_OK)
        tess_ckpt_detail_copy(st, bg.text, sizeof(bg.text));
    atomic_store(&bg.done, 1);
    return NULL;
}

/* Said once a process: the writer threads can run only where the process may, and there they
 * take time slices from the PEs while the GPU waits for the launches the PEs would make (LULESH
 * 256³ on an H200, one process of one PE bound to one core by mpirun, a checkpoint every 100
 * cycles: 1.69 x its time without checkpoints; 1.23 x unbound, where only the disk was left to
 * wait for). Idle priority for the writers starved them instead (2.29 x): a PE spins. */
static void bg_warn_shared_core(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    cpu_set_t set;
    int       mine  = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    long      cores = sysconf(_SC_NPROCESSORS_ONLN);
    int       pes   = tess_cfg.ppn;
    if (mine > 0 && mine <= pes && cores > mine)
        tess_warn("checkpoint: the background writer shares this process's %d core%s with its "
                  "%d PE%s and slows them down while it writes; give the process a core more "
                  "than it has PEs (mpirun --bind-to none, or more cores a process)", mine,
                  mine == 1 ? "" : "s", pes, pes == 1 ? "" : "s");
}

void tess_ckpt_bg_start(void)
{
    if (!bg.taken || bg.started)
        return;
    bg_warn_shared_core();
    if (pthread_create(&bg.th, NULL, bg_main, NULL)) {
        bg.st = TESS_ERR_SYSTEM;
        snprintf(bg.text, sizeof(bg.text), "checkpoint: cannot start the background writer "
                 "thread of %.600s", bg.path);
        atomic_store(&bg.done, 1);
        return;
    }
    bg.started = 1;
}

int tess_ckpt_bg_done(void) { return !bg.taken || !bg.started || atomic_load(&bg.done); }

tess_status_t tess_ckpt_bg_join(recvec_t *rv_p, uint64_t *size_p)
{
    *rv_p   = (recvec_t){0};
    *size_p = 0;
    if (!bg.taken)
        return TESS_OK;
    bg.taken = 0;
    if (bg.started)
        pthread_join(bg.th, NULL);
    bg.started = 0;
    *rv_p      = bg.rv;
    *size_p    = bg.size;
    bg.rv      = (recvec_t){0};
    if (bg.st != TESS_OK) {
        free(rv_p->v);
        *rv_p = (recvec_t){0};
        return tess_error_quiet(bg.st, "%s", bg.text);
    }
    return TESS_OK;
}

void tess_ckpt_bg_drop(void)
{
    if (!bg.taken)
        return;
    if (bg.started) {
        pthread_join(bg.th, NULL);
        bg.started = 0;
    } else
        for (size_t i = 0; i < bg.nev; i++) /* the copies into the area */
            tess_gpu->event_sync(bg.ev[i]);
    bg.taken = 0;
    free(bg.rv.v);
    bg.rv = (recvec_t){0};
}

void tess_ckpt_bg_free(void)
{
    tess_ckpt_bg_drop();
    if (bg.area)
        (bg.area_pinned ? tess_gpu->host_free : tess_gpu->mem_free)(bg.area);
    if (bg.stream)
        tess_gpu->stream_destroy(bg.stream);
    for (size_t i = 0; i < bg.capev; i++)
        tess_gpu->event_destroy(bg.ev[i]);
    free(bg.ev);
    free(bg.host);
    free(bg.pc);
    memset(&bg, 0, sizeof(bg));
    tess_ckpt_staging_release();
}

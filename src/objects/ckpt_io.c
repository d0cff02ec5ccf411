/* ckpt_io.c — the data files' writer: a process's records packed through the two halves of a
 * pinned staging buffer and written by a writer thread, at once or (a background checkpoint)
 * from a snapshot taken in device memory; the reader is ckpt_read.c. */
#define _GNU_SOURCE /* sync_file_range, CPU_COUNT, O_DIRECT */
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

tess_status_t tess_ckpt_streams_add(streams_t *s, tess_gpu_stream_h stream, const char *what)
{
    if (s->n && s->v[s->n - 1] == stream)
        return TESS_OK;
    if (s->n == s->cap) {
        size_t             cap = s->cap ? 2 * s->cap : 16;
        tess_gpu_stream_h *nv  = realloc(s->v, cap * sizeof(*nv));
        if (!nv)
            return tess_error(TESS_ERR_NO_MEMORY, "%s: the list of streams", what);
        s->v   = nv;
        s->cap = cap;
    }
    s->v[s->n++] = stream;
    return TESS_OK;
}

/* ---- the local elements ----------------------------------------------------------------- */

static int cmp_linear(const void *x, const void *y)
{
    int64_t a = (*(tess_ctx_h const *)x)->linear, b = (*(tess_ctx_h const *)y)->linear;
    return a < b ? -1 : a > b;
}

/* The local elements of `a` by linear index (malloc'd; *n_p of them). */
tess_ctx_h *tess_ckpt_local_elems(tess_array_t *a, size_t *n_p)
{
    size_t n = 0;
    for (int l = 0; l < tess_rt.ppn; l++)
        n += a->pe_elems[l].count;
    tess_ctx_h *v = tess_malloc((n ? n : 1) * sizeof(*v), "checkpoint element list");
    if (!v)
        return NULL;
    n = 0;
    for (int l = 0; l < tess_rt.ppn; l++)
        for (size_t k = 0; k < a->pe_elems[l].count; k++)
            v[n++] = a->pe_elems[l].items[k];
    qsort(v, n, sizeof(*v), cmp_linear);
    *n_p = n;
    return v;
}

/* ---- writing ---------------------------------------------------------------------------- */

/* The writer. Records are packed back to back into the two halves of a pinned staging buffer;
 * a full half goes to a writer thread, which writes it with one pwrite at its file offset and
 * starts its writeback, while this thread fills the other half: the device copies into it, then
 * the CRC of its bytes once the copies are done (still in cache). The file is thus written in
 * whole 8 MiB pieces, the disk never waits for the device or the CRC, and fsync at the end
 * finds most of the file already on its way. */
typedef struct wpiece {
    size_t      rec; /* index into the record list */
    const char *p;
    size_t      len;
} wpiece_t;

typedef struct whalf {
    char              *buf;
    size_t             fill;
    uint64_t           off; /* file offset of buf[0] */
    wpiece_t          *pc;
    size_t             npc, cappc;
    streams_t          sv; /* the streams of its device copies */
} whalf_t;

typedef struct writer {
    ckpt_worker_t   wk;
    whalf_t         h[2];
    int             cur;    /* the half being filled */
    int             queued; /* the half with the writer thread, or -1 */
    int             werr;
    int             fd;
    const char     *path;
    recvec_t       *rv;
} writer_t;

#ifndef O_DIRECT
#define O_DIRECT 0 /* no such flag here: every write goes through the page cache */
#endif

/* The data file, opened for writing: with +tess-ckpt-direct through O_DIRECT where the file
 * system takes it (the staging halves are page aligned and written whole at multiples of
 * their size), else through the page cache. */
static int data_open(const char *path)
{
    int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    if (tess_cfg.ckpt_direct && O_DIRECT) {
        int fd = open(path, flags | O_DIRECT, 0644);
        if (fd >= 0 || errno != EINVAL)
            return fd;
    }
    return open(path, flags, 0644);
}

/* Turn O_DIRECT off on fd (*fl its flags): the page cache from now on. */
static int direct_off(int fd, int *fl)
{
    *fl &= ~O_DIRECT;
    return fcntl(fd, F_SETFL, *fl) ? errno : 0;
}

/* pwrite all len bytes at off; an O_DIRECT write refused (EINVAL) goes on through the cache. */
static int pwrite_all(int fd, int *fl, const char *p, size_t len, off_t off)
{
    while (len) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EINVAL && (*fl & O_DIRECT)) {
            int err = direct_off(fd, fl);
            if (err)
                return err;
            continue;
        }
        if (n <= 0)
            return n < 0 ? errno : EIO;
        p += n;
        off += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Write len bytes at off: through O_DIRECT (if fd has it) the whole blocks of an aligned
 * buffer at an aligned offset, the rest through the page cache (O_DIRECT off from then on). */
static int write_all(int fd, const char *p, size_t len, off_t off)
{
    int    fl     = TESS_MAX(fcntl(fd, F_GETFL), 0);
    size_t direct = 0;
    if ((fl & O_DIRECT) && ((uintptr_t)p | (uintptr_t)off) % CKPT_DIRECT_ALIGN == 0)
        direct = len & ~(size_t)(CKPT_DIRECT_ALIGN - 1);
    int err = pwrite_all(fd, &fl, p, direct, off);
    if (!err && direct < len && (fl & O_DIRECT))
        err = direct_off(fd, &fl);
    return err ? err : pwrite_all(fd, &fl, p + direct, len - direct, off + (off_t)direct);
}

static void *writer_main(void *arg)
{
    writer_t *w = arg;
    pthread_mutex_lock(&w->wk.mu);
    for (;;) {
        while (!w->wk.stop && w->queued < 0)
            pthread_cond_wait(&w->wk.cv, &w->wk.mu);
        if (w->queued < 0)
            break;
        whalf_t *h = &w->h[w->queued];
        pthread_mutex_unlock(&w->wk.mu);
        int err = write_all(w->fd, h->buf, h->fill, (off_t)h->off);
#ifdef SYNC_FILE_RANGE_WRITE
        if (!err) /* start the writeback now rather than all of it in the final fsync */
            sync_file_range(w->fd, (off_t)h->off, (off_t)h->fill, SYNC_FILE_RANGE_WRITE);
#endif
        pthread_mutex_lock(&w->wk.mu);
        if (err && !w->werr)
            w->werr = err;
        w->queued = -1;
        pthread_cond_broadcast(&w->wk.cv);
    }
    pthread_mutex_unlock(&w->wk.mu);
    return NULL;
}

/* Wait until the writer thread holds no half; its error, if any. */
static tess_status_t writer_wait(writer_t *w)
{
    pthread_mutex_lock(&w->wk.mu);
    while (w->queued >= 0)
        pthread_cond_wait(&w->wk.cv, &w->wk.mu);
    int err = w->werr;
    pthread_mutex_unlock(&w->wk.mu);
    if (err) {
        errno = err;
        return tess_ckpt_sys_error("cannot write", w->path);
    }
    return TESS_OK;
}

/* The copies into the current half done, its CRCs taken, hand it to the writer thread and
 * start filling the other one. */
static tess_status_t writer_flush(writer_t *w)
{
    whalf_t *h = &w->h[w->cur];
    if (!h->fill)
        return TESS_OK;
    for (size_t i = 0; i < h->sv.n; i++)
        if (tess_gpu->stream_sync(h->sv.v[i]) != TESS_OK)
            return tess_error(TESS_ERR_GPU, "checkpoint: copying device bytes to the host: %s",
                              tess_error_detail());
    h->sv.n = 0;
    for (size_t i = 0; i < h->npc; i++)
        w->rv->v[h->pc[i].rec].crc = tess_ckpt_crc32c(w->rv->v[h->pc[i].rec].crc, h->pc[i].p,
                                                      h->pc[i].len);
    h->npc           = 0;
    tess_status_t st = writer_wait(w); /* the other half is written */
    if (st != TESS_OK)
        return st;
    pthread_mutex_lock(&w->wk.mu);
    w->queued = w->cur;
    pthread_cond_broadcast(&w->wk.cv);
    pthread_mutex_unlock(&w->wk.mu);
    whalf_t *nh = &w->h[w->cur ^ 1];
    nh->off     = h->off + h->fill;
    nh->fill    = 0;
    w->cur ^= 1;
    return TESS_OK;
}

static tess_status_t writer_piece(whalf_t *h, size_t rec, const char *p, size_t len)
{
    if (h->npc && h->pc[h->npc - 1].rec == rec &&
        h->pc[h->npc - 1].p + h->pc[h->npc - 1].len == p) {
        h->pc[h->npc - 1].len += len;
        return TESS_OK;
    }
    if (h->npc == h->cappc) {
        size_t    cap = h->cappc ? 2 * h->cappc : 64;
        wpiece_t *nv  = realloc(h->pc, cap * sizeof(*nv));
        if (!nv)
            return tess_error(TESS_ERR_NO_MEMORY, "checkpoint: the list of staged pieces");
        h->pc    = nv;
        h->cappc = cap;
    }
    h->pc[h->npc++] = (wpiece_t){.rec = rec, .p = p, .len = len};
    return TESS_OK;
}

/* Append len bytes of record rec: host bytes (stream NULL) or device bytes copied on stream. */
static tess_status_t writer_put(writer_t *w, size_t rec, const char *src, size_t len,
                                tess_gpu_stream_h stream, int device)
{
    while (len) {
        whalf_t *h = &w->h[w->cur];
        if (h->fill == CKPT_CHUNK) {
            tess_status_t st = writer_flush(w);
            if (st != TESS_OK)
                return st;
            continue;
        }
        size_t n   = TESS_MIN(len, CKPT_CHUNK - h->fill);
        char  *dst = h->buf + h->fill;
        if (!device)
            memcpy(dst, src, n);
        else {
            if (tess_gpu->memcpy_async(dst, src, n, stream) != TESS_OK)
                return tess_error(TESS_ERR_GPU, "checkpoint: copying %zu device bytes to the "
                                  "host: %s", n, tess_error_detail());
            tess_status_t st = tess_ckpt_streams_add(&h->sv, stream, "checkpoint");
            if (st != TESS_OK)
                return st;
        }
        tess_status_t st = writer_piece(h, rec, dst, n);
        if (st != TESS_OK)
            return st;
        h->fill += n;
        src += n;
        len -= n;
    }
    return TESS_OK;
}

static tess_status_t writer_open(writer_t *w, int fd, const char *path, recvec_t *rv)
{
    memset(w, 0, sizeof(*w));
    w->fd     = fd;
    w->path   = path;
    w->rv     = rv;
    w->queued = -1;
    return tess_ckpt_worker_start(&w->wk, "checkpoint", &w->h[0].buf, &w->h[1].buf, writer_main,
                                  w);
}

/* Write what is left (when st is TESS_OK), stop the thread, free the staging memory. The
 * file's size is *size_p. */
static tess_status_t writer_close(writer_t *w, tess_status_t st, uint64_t *size_p)
{
    if (st == TESS_OK)
        st = writer_flush(w);
    whalf_t *h = &w->h[w->cur];
    *size_p    = h->off + h->fill;
    for (size_t i = 0; i < h->sv.n; i++) /* copies still landing in the buffer (errors) */
        tess_gpu->stream_sync(h->sv.v[i]);
    if (w->wk.started) {
        tess_status_t ws = writer_wait(w);
        if (st == TESS_OK)
            st = ws;
    }
    tess_ckpt_worker_stop(&w->wk);
    for (int i = 0; i < 2; i++) {
        free(w->h[i].pc);
        free(w->h[i].sv.v);
    }
    return st;
}

/* Element e's record header, state and host PUP bytes into h (hbytes of room, sized by the
 * PUP_SIZE pass ps); *pk is the PUP_CKPT pass (its device buffers), *len_p the record's length
 * with the device bytes. */
static tess_status_t rec_fill(rec_hdr_t *h, uint32_t ai, tess_ctx_h e, const struct tess_pup *ps,
                              size_t hbytes, struct tess_pup *pk, uint64_t *len_p)
{
    tess_array_t *a = e->array;
    memset(h, 0, sizeof(*h));
    h->magic      = CKPT_REC_MAGIC;
    h->array      = ai;
    h->linear     = e->linear;
    h->state_size = a->elem_size;
    h->pup_size   = ps->pos;
    h->ndev       = (uint32_t)ps->ndev;
    memcpy(h + 1, tess_obj_state(e), a->elem_size);
    *pk = (struct tess_pup){.mode = PUP_CKPT, .buf = (char *)(h + 1) + a->elem_size,
                            .cap = ps->pos};
    memcpy(pk->dev_size, ps->dev_size, sizeof(pk->dev_size));
    if (a->pup) {
        a->pup(pk, e, tess_obj_state(e));
        if (pk->pos != ps->pos || pk->ndev != ps->ndev)
            return tess_error(TESS_ERR_INVALID, "checkpoint: the PUP function of '%s' copied %zu "
                              "bytes and %d device buffers but sized %zu and %d", a->name,
                              pk->pos, pk->ndev, ps->pos, ps->ndev);
    }
    uint64_t len = hbytes;
    for (int k = 0; k < ps->ndev; k++) {
        h->dev_size[k] = ps->dev_size[k];
        len += ps->dev_size[k];
    }
    *len_p = len;
    return TESS_OK;
}

/* Record r (*r_p) of this process's index: element `linear` of array ai, `len` bytes at `offset`
 * of its data file (the CRC comes once its bytes are staged). */
static tess_status_t rec_index_add(recvec_t *rv, uint32_t ai, int64_t linear, uint64_t offset,
                                   uint64_t len, size_t *r_p)
{
    if (rv->n == rv->cap) {
        size_t     cap = rv->cap ? 2 * rv->cap : 64;
        man_rec_t *nv  = realloc(rv->v, cap * sizeof(*nv));
        if (!nv)
            return tess_error(TESS_ERR_NO_MEMORY, "checkpoint: the record index");
        rv->v   = nv;
        rv->cap = cap;
    }
    *r_p        = rv->n++;
    rv->v[*r_p] = (man_rec_t){.array = ai, .file = (uint32_t)tess_rt.rank, .linear = linear,
                              .offset = offset, .length = len, .crc = 0};
    return TESS_OK;
}

static tess_status_t write_element(writer_t *w, uint32_t ai, tess_ctx_h e, char **hbuf,
                                   size_t *hcap)
{
    tess_array_t   *a  = e->array;
    recvec_t       *rv = w->rv;
    struct tess_pup ps = {.mode = PUP_SIZE, .ckpt = 1}; /* sizes what PUP_CKPT will copy */
    if (a->pup)
        a->pup(&ps, e, tess_obj_state(e));
    size_t hbytes = sizeof(rec_hdr_t) + a->elem_size + ps.pos;
    if (hbytes > *hcap) {
        char *nb = realloc(*hbuf, hbytes);
        if (!nb)
            return tess_error(TESS_ERR_NO_MEMORY, "checkpoint: %zu bytes for element %lld of "
                              "'%s'", hbytes, (long long)e->linear, a->name);
        *hbuf = nb;
        *hcap = hbytes;
    }
    rec_hdr_t *h = (rec_hdr_t *)*hbuf;
    struct tess_pup pk;
    uint64_t        len;
    tess_status_t   st = rec_fill(h, ai, e, &ps, hbytes, &pk, &len);
    if (st != TESS_OK)
        return st;
    const whalf_t *wh = &w->h[w->cur];
    size_t         r;
    if ((st = rec_index_add(rv, ai, e->linear, wh->off + wh->fill, len, &r)) != TESS_OK)
        return st;
    st = writer_put(w, r, (const char *)h, hbytes, NULL, 0);
    for (int k = 0; st == TESS_OK && k < ps.ndev; k++)
        if (ps.dev_size[k])
            st = writer_put(w, r, pk.dev[k], ps.dev_size[k], e->stream, 1);
    return st;
}

tess_status_t tess_ckpt_write_data(const char *tmpdir, const ckpt_set_t *set, recvec_t *rv,
                                   uint64_t *size_p)
{
    char path[CKPT_PATH];
    tess_ckpt_pathf(path, "%s/data.%d", tmpdir, tess_rt.rank);
    *size_p = 0;
    int fd  = data_open(path);
    if (fd < 0)
        return tess_ckpt_sys_error("cannot create", path);
    writer_t      w;
    char         *hbuf = NULL;
    size_t        hcap = 0;
    tess_status_t st   = writer_open(&w, fd, path, rv);
    for (int ai = 0; st == TESS_OK && ai < set->n; ai++) {
        size_t      n;
        tess_ctx_h *v = tess_ckpt_local_elems(set->a[ai], &n);
        if (!v) {
            st = TESS_ERR_NO_MEMORY;
            break;
        }
        for (size_t k = 0; st == TESS_OK && k < n; k++)
            st = write_element(&w, (uint32_t)ai, v[k], &hbuf, &hcap);
        free(v);
    }
    st = writer_close(&w, st, size_p);
    free(hbuf);
    if (st == TESS_OK && fsync(fd))
        st = tess_ckpt_sys_error("cannot sync", path);
    if (close(fd) && st == TESS_OK)
        st = tess_ckpt_sys_error("cannot close", path);
    return st;
}

/* ---- the background writer -------------------------------------------------------------- */

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
    tess_status_t   st = rec_fill(h, ai, e, &ps, hbytes, &pk, &len);
    if (st != TESS_OK)
        return st;
    size_t r;
    if ((st = rec_index_add(&bg.rv, ai, e->linear, *foff, len, &r)) != TESS_OK)
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
        fd = data_open(bg.path);
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
        writer_t w;
        uint64_t size = 0;
        st            = writer_open(&w, fd, bg.path, &bg.rv);
        for (size_t i = 0; st == TESS_OK && i < bg.npc; i++) {
            const bpiece_t *p = &bg.pc[i];
            if (p->dev)
                st = writer_put(&w, p->rec, bg.area + p->off, p->len, bg.stream,
                                !bg.area_pinned);
            else
                st = writer_put(&w, p->rec, bg.host + p->off, p->len, NULL, 0);
        }
        st = writer_close(&w, st, &size);
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

/* ckpt_io.c — the data files' writer: a process's records packed through the two halves of a
 * pinned staging buffer and written by a pwrite thread; tess_ckpt_write_data writes the file at
 * once from the elements, and the background checkpoint (ckpt_bg.c) writes it from its snapshot
 * through the same writer. The reader is ckpt_read.c.
 *
 * Threads: a writer belongs to the thread that opened it (the main thread for
 * tess_ckpt_write_data, the background writer thread for a snapshot), which fills its halves;
 * its pwrite thread (writer_main) writes only the half handed to it under wk.mu. */
#define _GNU_SOURCE /* sync_file_range, O_DIRECT */
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#ifndef O_DIRECT
#define O_DIRECT 0 /* no such flag here: every write goes through the page cache */
#endif

/* The data file, opened for writing: with +tess-ckpt-direct through O_DIRECT where the file
 * system takes it (the staging halves are page aligned and written whole at multiples of
 * their size), else through the page cache. */
int tess_ckpt_data_open(const char *path)
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
    ckpt_writer_t *w = arg;
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
static tess_status_t writer_wait(ckpt_writer_t *w)
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
static tess_status_t writer_flush(ckpt_writer_t *w)
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
tess_status_t tess_ckpt_writer_put(ckpt_writer_t *w, size_t rec, const char *src, size_t len,
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

tess_status_t tess_ckpt_writer_open(ckpt_writer_t *w, int fd, const char *path, recvec_t *rv)
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
tess_status_t tess_ckpt_writer_close(ckpt_writer_t *w, tess_status_t st, uint64_t *size_p)
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
tess_status_t tess_ckpt_rec_fill(rec_hdr_t *h, uint32_t ai, tess_ctx_h e,
                                 const struct tess_pup *ps, size_t hbytes, struct tess_pup *pk,
                                 uint64_t *len_p)
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
tess_status_t tess_ckpt_rec_index_add(recvec_t *rv, uint32_t ai, int64_t linear,
                                      uint64_t offset, uint64_t len, size_t *r_p)
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

static tess_status_t write_element(ckpt_writer_t *w, uint32_t ai, tess_ctx_h e,
                                   char **hbuf, size_t *hcap)
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
    tess_status_t   st = tess_ckpt_rec_fill(h, ai, e, &ps, hbytes, &pk, &len);
    if (st != TESS_OK)
        return st;
    const whalf_t *wh = &w->h[w->cur];
    size_t         r;
    st = tess_ckpt_rec_index_add(rv, ai, e->linear, wh->off + wh->fill, len, &r);
    if (st != TESS_OK)
        return st;
    st = tess_ckpt_writer_put(w, r, (const char *)h, hbytes, NULL, 0);
    for (int k = 0; st == TESS_OK && k < ps.ndev; k++)
        if (ps.dev_size[k])
            st = tess_ckpt_writer_put(w, r, pk.dev[k], ps.dev_size[k], e->stream, 1);
    return st;
}

tess_status_t tess_ckpt_write_data(const char *tmpdir, const ckpt_set_t *set, recvec_t *rv,
                                   uint64_t *size_p)
{
    char path[CKPT_PATH];
    tess_ckpt_pathf(path, "%s/data.%d", tmpdir, tess_rt.rank);
    *size_p = 0;
    int fd  = tess_ckpt_data_open(path);
    if (fd < 0)
        return tess_ckpt_sys_error("cannot create", path);
    ckpt_writer_t      w;
    char         *hbuf = NULL;
    size_t        hcap = 0;
    tess_status_t st   = tess_ckpt_writer_open(&w, fd, path, rv);
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
    st = tess_ckpt_writer_close(&w, st, size_p);
    free(hbuf);
    if (st == TESS_OK && fsync(fd))
        st = tess_ckpt_sys_error("cannot sync", path);
    if (close(fd) && st == TESS_OK)
        st = tess_ckpt_sys_error("cannot close", path);
    return st;
}

/* ckpt_read.c — the data files' reader: at restart, the records a process needs read ahead by a
 * reader thread into the two halves of a pinned staging buffer, checked against their CRCs and
 * staged to the device. */
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- reading ---------------------------------------------------------------------------- */

static void loaded_free_dev(loaded_t *l)
{
    const rec_hdr_t *h = (const rec_hdr_t *)l->head;
    for (uint32_t k = 0; h && k < h->ndev; k++)
        if (l->dev[k])
            tess_gpu_mem_release(l->dev[k]);
    memset(l->dev, 0, sizeof(l->dev));
}

/* The reader. The records this process loads, in the order it loads them, are one stream of
 * bytes: a reader thread reads it ahead in pieces of up to 8 MiB (one pread for each run of
 * records that lie back to back in a file) into the two halves of a pinned staging buffer,
 * while this thread checks the other half's CRCs, allocates device memory and copies to it. */
typedef struct rext {
    int      fd;
    uint64_t off, len;
} rext_t;

typedef struct rhalf {
    char              *buf;
    size_t             fill, pos;
    int                ready; /* filled by the reader thread, not yet used up */
    streams_t          sv;    /* the streams of the copies out of it */
} rhalf_t;

typedef struct reader {
    ckpt_worker_t   wk;
    rhalf_t         h[2];
    int             cur; /* the half being used */
    const rext_t   *ext;
    size_t          next;
    int             done, err;
    uint64_t        err_off; /* where a read failed */
    size_t          err_ext;
} reader_t;

static void *reader_main(void *arg)
{
    reader_t *r  = arg;
    size_t    ei = 0; /* the extent being read, and how much of it is */
    uint64_t  eo = 0;
    for (int k = 0;; k ^= 1) {
        rhalf_t *h = &r->h[k];
        pthread_mutex_lock(&r->wk.mu);
        while (!r->wk.stop && h->ready)
            pthread_cond_wait(&r->wk.cv, &r->wk.mu);
        int stop = r->wk.stop;
        pthread_mutex_unlock(&r->wk.mu);
        if (stop)
            break;
        size_t fill = 0;
        int    err  = 0;
        while (fill < CKPT_CHUNK && r->ext[ei].fd >= 0 && !err) {
            /* One pread over the rest of this extent and those right behind it. */
            const rext_t *x   = &r->ext[ei];
            uint64_t      off = x->off + eo;
            size_t        n   = (size_t)TESS_MIN(x->len - eo, (uint64_t)(CKPT_CHUNK - fill));
            size_t        e2  = ei;
            while (fill + n < CKPT_CHUNK && r->ext[e2 + 1].fd == x->fd &&
                   r->ext[e2 + 1].off == r->ext[e2].off + r->ext[e2].len) {
                e2++;
                n += (size_t)TESS_MIN(r->ext[e2].len, (uint64_t)(CKPT_CHUNK - fill - n));
            }
            size_t got = 0;
            while (got < n) {
                ssize_t m = pread(x->fd, h->buf + fill + got, n - got, (off_t)(off + got));
                if (m < 0 && errno == EINTR)
                    continue;
                if (m <= 0) {
                    err        = m < 0 ? errno : -1; /* -1: the file ends early */
                    r->err_off = off + got;
                    r->err_ext = ei;
                    break;
                }
                got += (size_t)m;
            }
            fill += got;
            for (uint64_t left = got; left && !err;) { /* advance over the extents read */
                uint64_t t = TESS_MIN(left, r->ext[ei].len - eo);
                eo += t;
                left -= t;
                if (eo == r->ext[ei].len) {
                    ei++;
                    eo = 0;
                }
            }
        }
        pthread_mutex_lock(&r->wk.mu);
        h->fill  = fill;
        h->pos   = 0;
        h->ready = 1;
        if (err)
            r->err = err;
        if (r->ext[ei].fd < 0 || err)
            r->done = 1;
        pthread_cond_broadcast(&r->wk.cv);
        int end = r->done;
        pthread_mutex_unlock(&r->wk.mu);
        if (end)
            break;
    }
    return NULL;
}

/* The copies out of half k done, give it back to the reader thread. */
static tess_status_t reader_release(reader_t *r, int k)
{
    rhalf_t *h = &r->h[k];
    for (size_t i = 0; i < h->sv.n; i++)
        if (tess_gpu->stream_sync(h->sv.v[i]) != TESS_OK)
            return tess_error(TESS_ERR_GPU, "restart: copying to the device: %s",
                              tess_error_detail());
    h->sv.n = 0;
    pthread_mutex_lock(&r->wk.mu);
    h->ready = 0;
    pthread_cond_broadcast(&r->wk.cv);
    pthread_mutex_unlock(&r->wk.mu);
    return TESS_OK;
}

/* Up to len next bytes of the stream, in place: *p_p and *n_p (at least 1 byte). */
static tess_status_t reader_take(reader_t *r, size_t len, const char *path, const char **p_p,
                                 size_t *n_p)
{
    rhalf_t *h = &r->h[r->cur];
    /* The reader thread writes a half's ready, fill and pos (under the lock) while it is not
     * ready: look at them under the lock too. */
    pthread_mutex_lock(&r->wk.mu);
    int used_up = h->ready && h->pos == h->fill;
    pthread_mutex_unlock(&r->wk.mu);
    if (used_up) {
        tess_status_t st = reader_release(r, r->cur);
        if (st != TESS_OK)
            return st;
        r->cur ^= 1;
        h = &r->h[r->cur];
    }
    pthread_mutex_lock(&r->wk.mu);
    while (!h->ready)
        pthread_cond_wait(&r->wk.cv, &r->wk.mu);
    int err = h->pos == h->fill ? r->err : 0;
    pthread_mutex_unlock(&r->wk.mu);
    if (h->pos == h->fill) {
        if (err > 0) {
            errno = err;
            return tess_ckpt_sys_error("cannot read", path);
        }
        return tess_error(TESS_ERR_CORRUPT, "%s is truncated (ends at byte %llu)", path,
                          (unsigned long long)r->err_off);
    }
    *p_p = h->buf + h->pos;
    *n_p = TESS_MIN(len, h->fill - h->pos);
    h->pos += *n_p;
    return TESS_OK;
}

/* len next bytes copied to dst (host memory), and into the CRC. */
static tess_status_t reader_copy(reader_t *r, void *dst, size_t len, const char *path,
                                 uint32_t *crc)
{
    for (char *d = dst; len;) {
        const char   *p;
        size_t        n;
        tess_status_t st = reader_take(r, len, path, &p, &n);
        if (st != TESS_OK)
            return st;
        *crc = tess_ckpt_crc32c(*crc, p, n);
        memcpy(d, p, n);
        d += n;
        len -= n;
    }
    return TESS_OK;
}

/* len next bytes to device memory dst on stream, and into the CRC. */
static tess_status_t reader_to_device(reader_t *r, char *dst, size_t len,
                                      tess_gpu_stream_h stream, const char *path, uint32_t *crc)
{
    while (len) {
        const char   *p;
        size_t        n;
        tess_status_t st = reader_take(r, len, path, &p, &n);
        if (st != TESS_OK)
            return st;
        *crc       = tess_ckpt_crc32c(*crc, p, n);
        rhalf_t *h = &r->h[r->cur];
        if (tess_gpu->memcpy_async(dst, p, n, stream) != TESS_OK)
            return tess_error(TESS_ERR_GPU, "restart: copying %zu bytes to the device: %s", n,
                              tess_error_detail());
        st = tess_ckpt_streams_add(&h->sv, stream, "restart");
        if (st != TESS_OK)
            return st;
        dst += n;
        len -= n;
    }
    return TESS_OK;
}

/* ext ends with an extent of fd -1. */
static tess_status_t reader_open(reader_t *r, const rext_t *ext)
{
    memset(r, 0, sizeof(*r));
    r->ext = ext;
    return tess_ckpt_worker_start(&r->wk, "restart", &r->h[0].buf, &r->h[1].buf, reader_main, r);
}

static tess_status_t reader_close(reader_t *r, tess_status_t st)
{
    for (int k = 0; k < 2; k++) /* copies still reading the staging memory */
        for (size_t i = 0; i < r->h[k].sv.n; i++)
            if (tess_gpu->stream_sync(r->h[k].sv.v[i]) != TESS_OK && st == TESS_OK)
                st = tess_error(TESS_ERR_GPU, "restart: a device copy failed: %s",
                                tess_error_detail());
    tess_ckpt_worker_stop(&r->wk);
    for (int k = 0; k < 2; k++)
        free(r->h[k].sv.v);
    return st;
}

/* Open file f of the checkpoint (once) and check its size. */
static tess_status_t open_data(const manifest_t *m, int *fds, uint32_t f)
{
    if (fds[f] >= 0)
        return TESS_OK;
    char path[CKPT_PATH];
    tess_ckpt_pathf(path, "%s/data.%u", m->path, f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? tess_error(TESS_ERR_CORRUPT, "%s is missing", path)
                               : tess_ckpt_sys_error("cannot open", path);
    struct stat sb;
    if (fstat(fd, &sb)) {
        close(fd);
        return tess_ckpt_sys_error("cannot stat", path);
    }
    if ((uint64_t)sb.st_size != m->files[f]) {
        close(fd);
        return tess_error(TESS_ERR_CORRUPT, "%s is %llu bytes; %llu were written (%s)", path,
                          (unsigned long long)sb.st_size, (unsigned long long)m->files[f],
                          (uint64_t)sb.st_size < m->files[f] ? "truncated" : "bytes appended");
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    fds[f] = fd;
    return TESS_OK;
}

/* Read and check the record of local element e, the next one of the reader's stream, into l. */
static tess_status_t load_record(const manifest_t *m, reader_t *r, uint32_t ai, tess_ctx_h e,
                                 loaded_t *l)
{
    const man_rec_t *x = &m->recs[m->base[ai] + e->linear];
    char             path[CKPT_PATH];
    memset(l, 0, sizeof(*l));
    l->e = e;
    tess_ckpt_pathf(path, "%s/data.%u", m->path, x->file);
    rec_hdr_t h;
    uint32_t  crc = 0;
    if (x->length < sizeof(h))
        return tess_error(TESS_ERR_CORRUPT, "%s: the record of element %lld of array '%s' is "
                          "%llu bytes", path, (long long)e->linear, e->array->name,
                          (unsigned long long)x->length);
    tess_status_t st = reader_copy(r, &h, sizeof(h), path, &crc);
    if (st != TESS_OK)
        return st;
    uint64_t len = sizeof(h) + h.state_size + h.pup_size;
    for (uint32_t k = 0; k < h.ndev && k < TESS_DEV_MAX_BUFS; k++)
        len += h.dev_size[k];
    if (h.magic != CKPT_REC_MAGIC || h.array != ai || h.linear != e->linear ||
        h.state_size != e->array->elem_size || h.ndev > TESS_DEV_MAX_BUFS || len != x->length ||
        (!e->array->pup && (h.pup_size || h.ndev)))
        return tess_error(TESS_ERR_CORRUPT, "%s: the record of element %lld of array '%s' has a "
                          "wrong header", path, (long long)e->linear, e->array->name);
    size_t hbytes = sizeof(h) + h.state_size + h.pup_size;
    l->head       = tess_malloc(hbytes, "a checkpoint record");
    if (!l->head)
        return TESS_ERR_NO_MEMORY;
    memcpy(l->head, &h, sizeof(h));
    st = reader_copy(r, l->head + sizeof(h), hbytes - sizeof(h), path, &crc);
    for (uint32_t k = 0; st == TESS_OK && k < h.ndev; k++) {
        if (!h.dev_size[k])
            continue;
        if (tess_gpu->mem_alloc(h.dev_size[k], &l->dev[k]) != TESS_OK) {
            st = tess_error(TESS_ERR_NO_MEMORY, "restart: %llu bytes of device memory for "
                            "element %lld of array '%s': %s", (unsigned long long)h.dev_size[k],
                            (long long)e->linear, e->array->name, tess_error_detail());
            break;
        }
        st = reader_to_device(r, l->dev[k], h.dev_size[k], e->stream, path, &crc);
    }
    if (st == TESS_OK && crc != x->crc)
        st = tess_error(TESS_ERR_CORRUPT, "%s: the record of element %lld of array '%s' (bytes "
                        "%llu to %llu) fails its checksum (CRC-32C)", path, (long long)e->linear,
                        e->array->name, (unsigned long long)x->offset,
                        (unsigned long long)(x->offset + x->length));
    return st;
}

void tess_ckpt_apply_record(loaded_t *l)
{
    tess_ctx_h       e = l->e;
    tess_array_t    *a = e->array;
    const rec_hdr_t *h = (const rec_hdr_t *)l->head;
    tess_obj_graph_drop_any(e); /* its buffers are about to change */
    if (a->dtor)
        a->dtor(e, tess_obj_state(e), a->arg);
    memcpy(tess_obj_state(e), h + 1, a->elem_size);
    if (!a->pup)
        return;
    struct tess_pup p = {.mode = PUP_UNPACK, .buf = (char *)(h + 1) + a->elem_size,
                         .cap = h->pup_size, .ndev = (int)h->ndev};
    for (uint32_t k = 0; k < h->ndev; k++) {
        p.dev[k]      = l->dev[k];
        p.dev_size[k] = h->dev_size[k];
    }
    memset(l->dev, 0, sizeof(l->dev)); /* the element's now */
    a->pup(&p, e, tess_obj_state(e));
    if (p.pos != p.cap || p.next != (int)h->ndev)
        tess_fatal("restart: the PUP function of array '%s' unpacked %zu of %zu bytes and %d of "
                   "%u device buffers", a->name, p.pos, p.cap, p.next, h->ndev);
}

void tess_ckpt_loaded_free(loaded_t *l)
{
    loaded_free_dev(l);
    free(l->head);
    l->head = NULL;
}

tess_status_t tess_ckpt_read_records(const manifest_t *m, const ckpt_set_t *set, loaded_t **ld_p,
                                     size_t *n_p)
{
    tess_status_t st  = TESS_OK;
    loaded_t     *ld  = NULL;
    size_t        nld = 0, cap = 0;
    rext_t       *ext = NULL;
    int          *fds = tess_malloc(m->hdr->nprocs * sizeof(int), "checkpoint files");
    if (!fds)
        tess_fatal("out of memory restarting");
    for (uint32_t f = 0; f < m->hdr->nprocs; f++)
        fds[f] = -1;
    /* The elements in the order they are loaded, their records' extents, the files open. */
    for (int ai = 0; st == TESS_OK && ai < set->n; ai++) {
        size_t      n;
        tess_ctx_h *v = tess_ckpt_local_elems(set->a[ai], &n);
        if (!v) {
            st = TESS_ERR_NO_MEMORY;
            break;
        }
        if (nld + n + 1 > cap) {
            cap          = 2 * (nld + n + 1);
            loaded_t *nv = realloc(ld, cap * sizeof(*nv));
            rext_t   *nx = nv ? realloc(ext, cap * sizeof(*nx)) : NULL;
            if (nv)
                ld = nv;
            if (nx)
                ext = nx;
            if (!nv || !nx) {
                st = tess_error(TESS_ERR_NO_MEMORY, "restart: the list of records");
                free(v);
                break;
            }
        }
        for (size_t k = 0; st == TESS_OK && k < n; k++) {
            const man_rec_t *x = &m->recs[m->base[ai] + v[k]->linear];
            st                 = open_data(m, fds, x->file);
            memset(&ld[nld], 0, sizeof(ld[nld]));
            ld[nld].e  = v[k];
            ld[nld].ai = (uint32_t)ai;
            ext[nld++] = (rext_t){.fd = fds[x->file], .off = x->offset, .len = x->length};
        }
        free(v);
    }
    /* Read and check every record this process needs before any element changes: host parts
     * to host memory, device bytes through pinned staging into new device memory. */
    size_t nread = 0;
    if (st == TESS_OK && nld) {
        reader_t r;
        ext[nld] = (rext_t){.fd = -1};
        st       = reader_open(&r, ext);
        for (; st == TESS_OK && nread < nld; nread++)
            st = load_record(m, &r, ld[nread].ai, ld[nread].e, &ld[nread]);
        st = reader_close(&r, st);
    }
    if (st != TESS_OK)
        nld = nread; /* those after it hold nothing */
    for (uint32_t f = 0; f < m->hdr->nprocs; f++)
        if (fds[f] >= 0)
            close(fds[f]);
    free(fds);
    free(ext);
    /* The copies wrote memory that may be freed by the caller. */
    for (size_t i = 0; i < nld; i++)
        if (tess_gpu->stream_sync(ld[i].e->stream) != TESS_OK && st == TESS_OK)
            st = tess_error(TESS_ERR_GPU, "restart: a device copy failed: %s",
                            tess_error_detail());
    *ld_p = ld;
    *n_p  = nld;
    return st;
}

/* checkpoint.c — durable checkpoints of chare arrays (every element's state bytes, PUP bytes and
 * device buffers, the arrays' metadata, the program's own bytes) and restart from one on any
 * number of processes and PEs.
 *
 * Layout of checkpoint N under D (tessera.h says why it is safe):
 *   D/ckpt.N/data.R    process R's records: rec_hdr_t, state bytes, PUP bytes, device bytes
 *   D/ckpt.N/manifest  man_hdr_t, man_array_t[narrays], uint64_t file_size[nprocs], user bytes
 *                      (padded to 8), man_rec_t[nrecs] sorted by (array, linear), then the
 *                      trailer (body size, CRC-32C of the body, "TEND")
 *   D/current          "ckpt.N\n"
 * Every record is found through the index, so a process reads only the records of the elements
 * the map gives it, whatever shape wrote them. All integers are in the writer's byte order; a
 * reader of the other order fails the magic check. */
#define _GNU_SOURCE /* sync_file_range */
#include "objects.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_MAGIC      "TESSCKPT"
#define CKPT_END        "TEND"
#define CKPT_VERSION    1u
#define CKPT_REC_MAGIC  0x54524543u /* "CERT" */
#define CKPT_USER_MAX   ((size_t)1 << 30)
#define CKPT_CHUNK      ((size_t)8 << 20) /* each half of a pinned staging buffer */
#define CKPT_PATH       1024 /* = tess_ckpt_info_t.path */
#define CKPT_TEXT       768

typedef struct man_hdr {
    char     magic[8];
    uint32_t version, nprocs, ppn, narrays;
    uint64_t step, entries_hash;
    uint32_t nentries, pad;
    char     program[64];
    uint64_t user_size, nrecs;
} man_hdr_t;

typedef struct man_array {
    char     name[TESS_OBJ_NAME_LEN];
    int32_t  ndims, ext[3];
    uint32_t has_pup, pad;
    uint64_t elem_size;
    int64_t  size;
} man_array_t;

typedef struct man_rec {
    uint32_t array, file;
    int64_t  linear;
    uint64_t offset, length;
    uint32_t crc, pad;
} man_rec_t;

typedef struct man_trailer {
    uint64_t body_size;
    uint32_t crc;
    char     magic[4];
} man_trailer_t;

typedef struct rec_hdr {
    uint32_t magic, array;
    int64_t  linear;
    uint64_t state_size, pup_size;
    uint32_t ndev, pad;
    uint64_t dev_size[TESS_DEV_MAX_BUFS];
} rec_hdr_t;

/* A manifest in memory, its parts pointing into the body. */
typedef struct manifest {
    char              *body;
    size_t             body_size;
    const man_hdr_t   *hdr;
    const man_array_t *arrays;
    const uint64_t    *files;
    const char        *user;
    const man_rec_t   *recs;
    int64_t           *base; /* [narrays] first record of each array */
    char               path[CKPT_PATH]; /* the checkpoint's directory */
} manifest_t;

/* ---- CRC-32C (Castagnoli), slicing by 8 ------------------------------------------------- */

static uint32_t       crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
        crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
}

#if defined(__x86_64__)
/* The SSE 4.2 instruction computes CRC-32C: 8 bytes a cycle or so, against about 1.5 GB/s for
 * the tables, which would be slower than the file system and the device copies. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *buf,
                                                             size_t len)
{
    const unsigned char *p = buf;
    uint64_t             c = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        len -= 8;
    }
    while (len--)
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

/* Continue `crc` (0 to start) over len bytes. */
static uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
    static int hw = -1;
    if (hw < 0)
        hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    if (hw)
        return crc32c_hw(crc, buf, len);
#endif
    const unsigned char *p = buf;
    pthread_once(&crc_once, crc_init);
    crc = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = crc_tab[7][w & 0xff] ^ crc_tab[6][(w >> 8) & 0xff] ^ crc_tab[5][(w >> 16) & 0xff] ^
              crc_tab[4][(w >> 24) & 0xff] ^ crc_tab[3][(w >> 32) & 0xff] ^
              crc_tab[2][(w >> 40) & 0xff] ^ crc_tab[1][(w >> 48) & 0xff] ^
              crc_tab[0][(w >> 56) & 0xff];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

static uint64_t fnv1a(uint64_t h, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The registered entries, names and kinds in order: a checkpoint belongs to one entry set. */
static uint64_t entries_hash(void)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < tess_obj_nentries; i++) {
        char dev = tess_obj_entries[i].post ? 'd' : 'h';
        h        = fnv1a(h, tess_obj_entries[i].name, strlen(tess_obj_entries[i].name) + 1);
        h        = fnv1a(h, &dev, 1);
    }
    return h;
}

/* ---- collective agreement ------------------------------------------------------------- */

/* Every process returns the first failing process's status and text, or TESS_OK. */
static tess_status_t ckpt_agree(tess_status_t st)
{
    int me = st != TESS_OK ? tess_rt.rank : INT_MAX, first = INT_MAX;
    MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, tess_rt.comm);
    if (first == INT_MAX)
        return TESS_OK;
    struct {
        int32_t st;
        char    text[CKPT_TEXT];
    } w;
    memset(&w, 0, sizeof(w));
    if (tess_rt.rank == first) {
        w.st = st;
        snprintf(w.text, sizeof(w.text), "%s", tess_error_detail());
    }
    MPI_Bcast(&w, sizeof(w), MPI_BYTE, first, tess_rt.comm);
    if (tess_rt.rank == first)
        return st;
    return tess_error((tess_status_t)w.st, "process %d: %s", first, w.text);
}

/* TESS_ERR_MISMATCH unless every process passed the same `h`. */
static tess_status_t ckpt_same(uint64_t h, const char *what)
{
    uint64_t v[2] = {h, ~h}, r[2];
    MPI_Allreduce(v, r, 2, MPI_UINT64_T, MPI_MAX, tess_rt.comm);
    if (r[0] != h || r[1] != ~h)
        return tess_error(TESS_ERR_MISMATCH, "%s: the processes passed different arguments "
                          "(directory, program, step or arrays)", what);
    return TESS_OK;
}

/* ---- files ------------------------------------------------------------------------------ */

/* A path of at most CKPT_PATH bytes (the directory is at most CKPT_PATH - 64). */
static TESS_PRINTF(2, 3) void pathf(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, CKPT_PATH, fmt, ap);
    va_end(ap);
}

static tess_status_t sys_error(const char *what, const char *path)
{
    return tess_error(TESS_ERR_SYSTEM, "%s %s: %s", what, path, strerror(errno));
}

static tess_status_t write_all(int fd, const void *buf, size_t len, const char *path)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return sys_error("cannot write", path);
        p += n;
        len -= (size_t)n;
    }
    return TESS_OK;
}

static tess_status_t read_at(int fd, void *buf, size_t len, uint64_t off, const char *path)
{
    char *p = buf;
    while (len) {
        ssize_t n = pread(fd, p, len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return sys_error("cannot read", path);
        if (n == 0)
            return tess_error(TESS_ERR_CORRUPT, "%s is truncated (ends before byte %llu)", path,
                              (unsigned long long)(off + len));
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return TESS_OK;
}

static tess_status_t sync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sys_error("cannot open", path);
    int rc = fsync(fd);
    close(fd);
    return rc ? sys_error("cannot sync", path) : TESS_OK;
}

/* Write a small file through path.tmp and a rename, synced. */
static tess_status_t write_file_atomic(const char *dir, const char *name, const void *buf,
                                       size_t len)
{
    char tmp[CKPT_PATH], dst[CKPT_PATH];
    pathf(tmp, "%s/%s.tmp", dir, name);
    pathf(dst, "%s/%s", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return sys_error("cannot create", tmp);
    tess_status_t st = write_all(fd, buf, len, tmp);
    if (st == TESS_OK && fsync(fd))
        st = sys_error("cannot sync", tmp);
    close(fd);
    if (st == TESS_OK && rename(tmp, dst))
        st = sys_error("cannot rename to", dst);
    return st == TESS_OK ? sync_path(dir) : st;
}

/* Remove a checkpoint directory (its files, then itself); missing is fine. */
static void remove_ckpt_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    char           f[CKPT_PATH];
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            pathf(f, "%s/%s", path, de->d_name);
            unlink(f);
        }
    closedir(d);
    rmdir(path);
}

/* N of D/current, or 0 when there is none. */
static uint64_t read_current(const char *dir)
{
    char path[CKPT_PATH], buf[64] = {0};
    pathf(path, "%s/current", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned long long n = 0;
    if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "ckpt.%llu", &n) != 1)
        n = 0;
    fclose(f);
    return n;
}

/* ---- the arrays ------------------------------------------------------------------------- */

typedef struct ckpt_set {
    int           n;
    tess_array_t *a[TESS_OBJ_MAX_ARRAYS];
} ckpt_set_t;

static tess_status_t ckpt_params(const tess_ckpt_params_t *p, ckpt_set_t *set, const char *what)
{
    if (!p || !p->dir || !p->dir[0])
        return tess_error(TESS_ERR_INVALID, "%s: %s", what, p ? "dir is NULL or empty" :
                          "params is NULL");
    if (strlen(p->dir) > CKPT_PATH - 64)
        return tess_error(TESS_ERR_INVALID, "%s: the directory name is too long", what);
    if ((p->field_mask & TESS_CKPT_FIELD_PROGRAM) && p->program && strlen(p->program) >= 64)
        return tess_error(TESS_ERR_INVALID, "%s: program name '%s' is 64 bytes or more", what,
                          p->program);
    set->n = 0;
    if (p->field_mask & TESS_CKPT_FIELD_ARRAYS) {
        if (p->narrays < 1 || !p->arrays)
            return tess_error(TESS_ERR_INVALID, "%s: %d arrays at %p", what, p->narrays,
                              (const void *)p->arrays);
        for (int i = 0; i < p->narrays; i++) {
            tess_array_t *a = p->arrays[i];
            if (!a || a->destroyed)
                return tess_error(TESS_ERR_INVALID, "%s: arrays[%d] is %s", what, i,
                                  a ? "destroyed" : "NULL");
            for (int j = 0; j < set->n; j++)
                if (set->a[j] == a)
                    return tess_error(TESS_ERR_INVALID, "%s: array '%s' is named twice", what,
                                      a->name);
            set->a[set->n++] = a;
        }
    } else {
        for (uint32_t i = 0; i < tess_obj_narrays; i++)
            if (!tess_obj_arrays[i]->destroyed)
                set->a[set->n++] = tess_obj_arrays[i];
    }
    return TESS_OK;
}

static const char *ckpt_program(const tess_ckpt_params_t *p)
{
    return (p->field_mask & TESS_CKPT_FIELD_PROGRAM) && p->program ? p->program : "";
}

static uint64_t ckpt_params_hash(const tess_ckpt_params_t *p, const ckpt_set_t *set)
{
    uint64_t h = fnv1a(0xcbf29ce484222325ull, p->dir, strlen(p->dir));
    h          = fnv1a(h, ckpt_program(p), strlen(ckpt_program(p)) + 1);
    uint64_t s = (p->field_mask & TESS_CKPT_FIELD_STEP) ? p->step + 1 : 0;
    h          = fnv1a(h, &s, sizeof(s));
    for (int i = 0; i < set->n; i++)
        h = fnv1a(h, &set->a[i]->id, sizeof(set->a[i]->id));
    return h;
}

static int cmp_linear(const void *x, const void *y)
{
    int64_t a = (*(tess_ctx_h const *)x)->linear, b = (*(tess_ctx_h const *)y)->linear;
    return a < b ? -1 : a > b;
}

/* The local elements of `a` by linear index (malloc'd; *n_p of them). */
static tess_ctx_h *local_elems(tess_array_t *a, size_t *n_p)
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
    tess_gpu_stream_h *sv; /* the streams of its device copies */
    size_t             nsv, capsv;
} whalf_t;

typedef struct recvec {
    man_rec_t *v;
    size_t     n, cap;
} recvec_t;

typedef struct writer {
    char           *pinned;
    whalf_t         h[2];
    int             cur;    /* the half being filled */
    int             queued; /* the half with the writer thread, or -1 */
    int             stop, werr, started;
    pthread_t       th;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             fd;
    const char     *path;
    recvec_t       *rv;
} writer_t;

static void *writer_main(void *arg)
{
    writer_t *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && w->queued < 0)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->queued < 0)
            break;
        whalf_t *h = &w->h[w->queued];
        pthread_mutex_unlock(&w->mu);
        int         err = 0;
        const char *p   = h->buf;
        size_t      len = h->fill;
        off_t       off = (off_t)h->off;
        while (len) {
            ssize_t n = pwrite(w->fd, p, len, off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                err = n < 0 ? errno : EIO;
                break;
            }
            p += n;
            off += n;
            len -= (size_t)n;
        }
#ifdef SYNC_FILE_RANGE_WRITE
        if (!err) /* start the writeback now rather than all of it in the final fsync */
            sync_file_range(w->fd, (off_t)h->off, (off_t)h->fill, SYNC_FILE_RANGE_WRITE);
#endif
        pthread_mutex_lock(&w->mu);
        if (err && !w->werr)
            w->werr = err;
        w->queued = -1;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Wait until the writer thread holds no half; its error, if any. */
static tess_status_t writer_wait(writer_t *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->queued >= 0)
        pthread_cond_wait(&w->cv, &w->mu);
    int err = w->werr;
    pthread_mutex_unlock(&w->mu);
    if (err) {
        errno = err;
        return sys_error("cannot write", w->path);
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
    for (size_t i = 0; i < h->nsv; i++)
        if (tess_gpu->stream_sync(h->sv[i]) != TESS_OK)
            return tess_error(TESS_ERR_GPU, "checkpoint: copying device bytes to the host: %s",
                              tess_error_detail());
    h->nsv = 0;
    for (size_t i = 0; i < h->npc; i++)
        w->rv->v[h->pc[i].rec].crc = crc32c(w->rv->v[h->pc[i].rec].crc, h->pc[i].p,
                                            h->pc[i].len);
    h->npc           = 0;
    tess_status_t st = writer_wait(w); /* the other half is written */
    if (st != TESS_OK)
        return st;
    pthread_mutex_lock(&w->mu);
    w->queued = w->cur;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
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
            if (!h->nsv || h->sv[h->nsv - 1] != stream) {
                if (h->nsv == h->capsv) {
                    size_t             cap = h->capsv ? 2 * h->capsv : 16;
                    tess_gpu_stream_h *nv  = realloc(h->sv, cap * sizeof(*nv));
                    if (!nv)
                        return tess_error(TESS_ERR_NO_MEMORY, "checkpoint: the list of streams");
                    h->sv    = nv;
                    h->capsv = cap;
                }
                h->sv[h->nsv++] = stream;
            }
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
    if (tess_gpu->host_alloc(2 * CKPT_CHUNK, (void **)&w->pinned) != TESS_OK)
        return tess_error(TESS_ERR_NO_MEMORY, "checkpoint: %zu bytes of pinned staging memory: "
                          "%s", 2 * CKPT_CHUNK, tess_error_detail());
    w->h[0].buf = w->pinned;
    w->h[1].buf = w->pinned + CKPT_CHUNK;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->th, NULL, writer_main, w))
        return tess_error(TESS_ERR_SYSTEM, "checkpoint: cannot start the writer thread");
    w->started = 1;
    return TESS_OK;
}

/* Write what is left (when st is TESS_OK), stop the thread, free the staging memory. The
 * file's size is *size_p. */
static tess_status_t writer_close(writer_t *w, tess_status_t st, uint64_t *size_p)
{
    if (st == TESS_OK)
        st = writer_flush(w);
    whalf_t *h = &w->h[w->cur];
    *size_p    = h->off + h->fill;
    for (size_t i = 0; i < h->nsv; i++) /* copies still landing in the buffer (errors) */
        tess_gpu->stream_sync(h->sv[i]);
    if (w->started) {
        tess_status_t ws = writer_wait(w);
        if (st == TESS_OK)
            st = ws;
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->th, NULL);
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
    }
    for (int i = 0; i < 2; i++) {
        free(w->h[i].pc);
        free(w->h[i].sv);
    }
    if (w->pinned)
        tess_gpu->host_free(w->pinned);
    return st;
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
    memset(h, 0, sizeof(*h));
    h->magic      = CKPT_REC_MAGIC;
    h->array      = ai;
    h->linear     = e->linear;
    h->state_size = a->elem_size;
    h->pup_size   = ps.pos;
    h->ndev       = (uint32_t)ps.ndev;
    memcpy(h + 1, tess_obj_state(e), a->elem_size);
    struct tess_pup pk = {.mode = PUP_CKPT, .buf = (char *)(h + 1) + a->elem_size, .cap = ps.pos};
    memcpy(pk.dev_size, ps.dev_size, sizeof(pk.dev_size));
    if (a->pup) {
        a->pup(&pk, e, tess_obj_state(e));
        if (pk.pos != ps.pos || pk.ndev != ps.ndev)
            return tess_error(TESS_ERR_INVALID, "checkpoint: the PUP function of '%s' copied %zu "
                              "bytes and %d device buffers but sized %zu and %d", a->name,
                              pk.pos, pk.ndev, ps.pos, ps.ndev);
    }
    uint64_t len = hbytes;
    for (int k = 0; k < ps.ndev; k++) {
        h->dev_size[k] = ps.dev_size[k];
        len += ps.dev_size[k];
    }
    if (rv->n == rv->cap) {
        size_t     cap = rv->cap ? 2 * rv->cap : 64;
        man_rec_t *nv  = realloc(rv->v, cap * sizeof(*nv));
        if (!nv)
            return tess_error(TESS_ERR_NO_MEMORY, "checkpoint: the record index");
        rv->v   = nv;
        rv->cap = cap;
    }
    const whalf_t *wh = &w->h[w->cur];
    size_t         r  = rv->n++;
    rv->v[r] = (man_rec_t){.array = ai, .file = (uint32_t)tess_rt.rank, .linear = e->linear,
                           .offset = wh->off + wh->fill, .length = len, .crc = 0};
    tess_status_t st = writer_put(w, r, (const char *)h, hbytes, NULL, 0);
    for (int k = 0; st == TESS_OK && k < ps.ndev; k++)
        if (ps.dev_size[k])
            st = writer_put(w, r, pk.dev[k], ps.dev_size[k], e->stream, 1);
    return st;
}

/* This process's data file: every local element of the set. */
static tess_status_t write_data(const char *tmpdir, const ckpt_set_t *set, recvec_t *rv,
                                uint64_t *size_p)
{
    char path[CKPT_PATH];
    pathf(path, "%s/data.%d", tmpdir, tess_rt.rank);
    *size_p = 0;
    int fd  = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return sys_error("cannot create", path);
    writer_t      w;
    char         *hbuf = NULL;
    size_t        hcap = 0;
    tess_status_t st   = writer_open(&w, fd, path, rv);
    for (int ai = 0; st == TESS_OK && ai < set->n; ai++) {
        size_t      n;
        tess_ctx_h *v = local_elems(set->a[ai], &n);
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
        st = sys_error("cannot sync", path);
    if (close(fd) && st == TESS_OK)
        st = sys_error("cannot close", path);
    return st;
}

static int cmp_rec(const void *x, const void *y)
{
    const man_rec_t *a = x, *b = y;
    if (a->array != b->array)
        return a->array < b->array ? -1 : 1;
    return a->linear < b->linear ? -1 : a->linear > b->linear;
}

/* Process 0: the manifest from every process's index and file size, written into tmpdir. */
static tess_status_t write_manifest(const char *tmpdir, const tess_ckpt_params_t *p,
                                    const ckpt_set_t *set, uint64_t step, man_rec_t *recs,
                                    size_t nrecs, const uint64_t *files)
{
    size_t user   = (p->field_mask & TESS_CKPT_FIELD_USER) ? p->user_size : 0;
    size_t upad   = TESS_ALIGN_UP(user, 8);
    size_t body   = sizeof(man_hdr_t) + (size_t)set->n * sizeof(man_array_t) +
                  (size_t)tess_rt.size * sizeof(uint64_t) + upad + nrecs * sizeof(man_rec_t);
    char  *buf    = tess_calloc(1, body + sizeof(man_trailer_t), "a checkpoint manifest");
    if (!buf)
        return TESS_ERR_NO_MEMORY;
    man_hdr_t *h = (man_hdr_t *)buf;
    memcpy(h->magic, CKPT_MAGIC, 8);
    h->version      = CKPT_VERSION;
    h->nprocs       = (uint32_t)tess_rt.size;
    h->ppn          = (uint32_t)tess_rt.ppn;
    h->narrays      = (uint32_t)set->n;
    h->step         = step;
    h->entries_hash = entries_hash();
    h->nentries     = (uint32_t)tess_obj_nentries;
    snprintf(h->program, sizeof(h->program), "%s", ckpt_program(p));
    h->user_size    = user;
    h->nrecs        = nrecs;
    man_array_t *ma = (man_array_t *)(h + 1);
    for (int i = 0; i < set->n; i++) {
        tess_array_t *a = set->a[i];
        memcpy(ma[i].name, a->name, sizeof(ma[i].name));
        ma[i].ndims     = a->ndims;
        memcpy(ma[i].ext, a->ext, sizeof(ma[i].ext));
        ma[i].has_pup   = a->pup != NULL;
        ma[i].elem_size = a->elem_size;
        ma[i].size      = a->size;
    }
    char *q = (char *)(ma + set->n);
    memcpy(q, files, (size_t)tess_rt.size * sizeof(uint64_t));
    q += (size_t)tess_rt.size * sizeof(uint64_t);
    if (user)
        memcpy(q, p->user, user);
    q += upad;
    qsort(recs, nrecs, sizeof(*recs), cmp_rec);
    memcpy(q, recs, nrecs * sizeof(*recs));
    man_trailer_t t = {.body_size = body, .crc = crc32c(0, buf, body)};
    memcpy(t.magic, CKPT_END, 4);
    memcpy(buf + body, &t, sizeof(t));

    char path[CKPT_PATH];
    pathf(path, "%s/manifest", tmpdir);
    tess_status_t st = TESS_OK;
    int           fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        st = sys_error("cannot create", path);
    else {
        st = write_all(fd, buf, body + sizeof(t), path);
        if (st == TESS_OK && fsync(fd))
            st = sys_error("cannot sync", path);
        close(fd);
    }
    free(buf);
    return st == TESS_OK ? sync_path(tmpdir) : st;
}

/* Process 0, before anything is written: the directory, the step, a clean D/ckpt.N.tmp. */
static tess_status_t prepare_dir(const tess_ckpt_params_t *p, uint64_t *step_p, uint64_t *cur_p)
{
    if (mkdir(p->dir, 0755) && errno != EEXIST)
        return sys_error("cannot create the checkpoint directory", p->dir);
    uint64_t cur  = read_current(p->dir);
    uint64_t step = (p->field_mask & TESS_CKPT_FIELD_STEP) ? p->step : cur + 1;
    if (step == cur && cur)
        return tess_error(TESS_ERR_INVALID, "tess_checkpoint: checkpoint %llu is the current "
                          "one of %s: a new checkpoint needs another step",
                          (unsigned long long)step, p->dir);
    char path[CKPT_PATH];
    pathf(path, "%s/ckpt.%llu.tmp", p->dir, (unsigned long long)step);
    remove_ckpt_dir(path); /* left by a job killed while writing it */
    if (mkdir(path, 0755))
        return sys_error("cannot create", path);
    *step_p = step;
    *cur_p  = cur;
    return TESS_OK;
}

/* Process 0, once the manifest is in: make N complete, then current; drop those before the
 * previous one. */
static tess_status_t publish(const char *dir, uint64_t step, uint64_t prev)
{
    char tmp[CKPT_PATH], dst[CKPT_PATH], cur[64];
    pathf(tmp, "%s/ckpt.%llu.tmp", dir, (unsigned long long)step);
    pathf(dst, "%s/ckpt.%llu", dir, (unsigned long long)step);
    remove_ckpt_dir(dst); /* an older checkpoint of the same number, not current */
    if (rename(tmp, dst))
        return sys_error("cannot rename to", dst);
    tess_status_t st = sync_path(dir);
    if (st != TESS_OK)
        return st;
    int n = snprintf(cur, sizeof(cur), "ckpt.%llu\n", (unsigned long long)step);
    st    = write_file_atomic(dir, "current", cur, (size_t)n);
    if (st != TESS_OK)
        return st;
    DIR *d = opendir(dir);
    if (!d)
        return TESS_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        unsigned long long k;
        int                end = 0;
        if (sscanf(de->d_name, "ckpt.%llu%n", &k, &end) != 1 || de->d_name[end] ||
            k == step || k == prev)
            continue;
        pathf(dst, "%s/%s", dir, de->d_name);
        remove_ckpt_dir(dst);
    }
    closedir(d);
    return TESS_OK;
}

tess_status_t tess_checkpoint(const tess_ckpt_params_t *p)
{
    tess_status_t st = tess_obj_check_main("tess_checkpoint");
    if (st != TESS_OK)
        return st;
    uint64_t    t0  = tess_time_ns();
    ckpt_set_t *set = tess_malloc(sizeof(*set), "a checkpoint's arrays");
    if (!set)
        return TESS_ERR_NO_MEMORY;
    st = ckpt_params(p, set, "tess_checkpoint");
    if (st == TESS_OK && (p->field_mask & TESS_CKPT_FIELD_USER) && p->user_size &&
        (!p->user || p->user_size > CKPT_USER_MAX))
        st = tess_error(TESS_ERR_INVALID, "tess_checkpoint: %zu user bytes at %p (at most "
                        "%zu, not NULL)", p->user_size, p->user, CKPT_USER_MAX);
    st = ckpt_agree(st);
    if (st == TESS_OK)
        st = ckpt_same(ckpt_params_hash(p, set), "tess_checkpoint");
    if (st != TESS_OK)
        goto out;

    uint64_t sc[2] = {0, 0}; /* step, previous */
    st = tess_rt.rank == 0 ? prepare_dir(p, &sc[0], &sc[1]) : TESS_OK;
    st = ckpt_agree(st);
    if (st != TESS_OK)
        goto out;
    MPI_Bcast(sc, 2, MPI_UINT64_T, 0, tess_rt.comm);
    char tmpdir[CKPT_PATH];
    pathf(tmpdir, "%s/ckpt.%llu.tmp", p->dir, (unsigned long long)sc[0]);

    recvec_t rv    = {0};
    uint64_t fsize = 0;
    st             = ckpt_agree(write_data(tmpdir, set, &rv, &fsize));
    if (st != TESS_OK) {
        free(rv.v);
        goto out;
    }
    /* The index and file sizes to process 0. */
    int       mine  = (int)(rv.n * sizeof(man_rec_t)), *counts = NULL, *displs = NULL;
    uint64_t *files = NULL;
    char     *all   = NULL;
    size_t    total = 0;
    if (tess_rt.rank == 0) {
        counts = tess_calloc((size_t)tess_rt.size, sizeof(int), "checkpoint counts");
        displs = tess_calloc((size_t)tess_rt.size, sizeof(int), "checkpoint offsets");
        files  = tess_calloc((size_t)tess_rt.size, sizeof(uint64_t), "checkpoint file sizes");
        if (!counts || !displs || !files)
            tess_fatal("out of memory gathering a checkpoint's index");
    }
    MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, tess_rt.comm);
    MPI_Gather(&fsize, 1, MPI_UINT64_T, files, 1, MPI_UINT64_T, 0, tess_rt.comm);
    if (tess_rt.rank == 0) {
        for (int r = 0; r < tess_rt.size; r++) {
            displs[r] = (int)total;
            total += (size_t)counts[r];
        }
        if (total > INT_MAX)
            tess_fatal("a checkpoint index of %zu bytes is too large to gather", total);
        all = tess_malloc(total ? total : 1, "a checkpoint's index");
        if (!all)
            tess_fatal("out of memory gathering a checkpoint's index");
    }
    MPI_Gatherv(rv.v, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, tess_rt.comm);
    free(rv.v);
    if (tess_rt.rank == 0) {
        st = write_manifest(tmpdir, p, set, sc[0], (man_rec_t *)all,
                            total / sizeof(man_rec_t), files);
        if (st == TESS_OK)
            st = publish(p->dir, sc[0], sc[1]);
    }
    free(counts);
    free(displs);
    free(files);
    free(all);
    st = ckpt_agree(st);
    if (st == TESS_OK)
        tess_debug("checkpoint %llu of %s written in %.3f s", (unsigned long long)sc[0], p->dir,
                   (double)(tess_time_ns() - t0) * 1e-9);
out:
    free(set);
    return st;
}

/* ---- reading ---------------------------------------------------------------------------- */

static void manifest_free(manifest_t *m)
{
    free(m->body);
    free(m->base);
    memset(m, 0, sizeof(*m));
}

/* Process 0: find and read the manifest, check its trailer and CRC. */
static tess_status_t manifest_read(const char *dir, manifest_t *m)
{
    char path[CKPT_PATH];
    pathf(path, "%s/manifest", dir);
    if (access(path, F_OK) == 0) {
        pathf(m->path, "%s", dir);
    } else {
        uint64_t cur = read_current(dir);
        if (!cur)
            return tess_error(TESS_ERR_NOT_FOUND, "no checkpoint in %s (neither %s/current nor "
                              "%s/manifest)", dir, dir, dir);
        pathf(m->path, "%s/ckpt.%llu", dir, (unsigned long long)cur);
        pathf(path, "%s/manifest", m->path);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? tess_error(TESS_ERR_NOT_FOUND, "%s is missing: %s is not a "
                                            "complete checkpoint", path, m->path)
                               : sys_error("cannot open", path);
    struct stat sb;
    tess_status_t st = TESS_OK;
    if (fstat(fd, &sb)) {
        st = sys_error("cannot stat", path);
        goto out;
    }
    size_t size = (size_t)sb.st_size;
    if (size < sizeof(man_hdr_t) + sizeof(man_trailer_t)) {
        st = tess_error(TESS_ERR_CORRUPT, "%s is truncated (%zu bytes)", path, size);
        goto out;
    }
    m->body = tess_malloc(size, "a checkpoint manifest");
    if (!m->body) {
        st = TESS_ERR_NO_MEMORY;
        goto out;
    }
    st = read_at(fd, m->body, size, 0, path);
    if (st != TESS_OK)
        goto out;
    man_trailer_t t;
    memcpy(&t, m->body + size - sizeof(t), sizeof(t));
    if (memcmp(m->body, CKPT_MAGIC, 8))
        st = tess_error(TESS_ERR_CORRUPT, "%s is not a Tessera checkpoint manifest", path);
    else if (memcmp(t.magic, CKPT_END, 4) || t.body_size != size - sizeof(t))
        st = tess_error(TESS_ERR_CORRUPT, "%s is truncated or has bytes appended (%zu bytes)",
                        path, size);
    else if (crc32c(0, m->body, t.body_size) != t.crc)
        st = tess_error(TESS_ERR_CORRUPT, "%s fails its checksum (CRC-32C)", path);
    m->body_size = size - sizeof(t);
out:
    close(fd);
    return st;
}

/* Every process: lay the parts out and check that they are consistent. */
static tess_status_t manifest_parse(manifest_t *m)
{
    const man_hdr_t *h = (const man_hdr_t *)m->body;
    if (h->version != CKPT_VERSION)
        return tess_error(TESS_ERR_MISMATCH, "%s/manifest is format version %u; this Tessera "
                          "reads version %u", m->path, h->version, CKPT_VERSION);
    size_t need = sizeof(*h);
    if (h->narrays > TESS_OBJ_MAX_ARRAYS || h->nprocs < 1 || h->nprocs > (1u << 24) ||
        h->user_size > CKPT_USER_MAX || h->nrecs > ((uint64_t)1 << 40))
        return tess_error(TESS_ERR_CORRUPT, "%s/manifest: impossible counts", m->path);
    need += (size_t)h->narrays * sizeof(man_array_t) + (size_t)h->nprocs * sizeof(uint64_t) +
            TESS_ALIGN_UP((size_t)h->user_size, 8) + (size_t)h->nrecs * sizeof(man_rec_t);
    if (need != m->body_size)
        return tess_error(TESS_ERR_CORRUPT, "%s/manifest: %zu bytes where its counts make %zu",
                          m->path, m->body_size, need);
    m->hdr    = h;
    m->arrays = (const man_array_t *)(h + 1);
    m->files  = (const uint64_t *)(m->arrays + h->narrays);
    m->user   = (const char *)(m->files + h->nprocs);
    m->recs   = (const man_rec_t *)(m->user + TESS_ALIGN_UP((size_t)h->user_size, 8));
    m->base   = tess_calloc(h->narrays ? h->narrays : 1, sizeof(int64_t), "manifest index");
    if (!m->base)
        return TESS_ERR_NO_MEMORY;
    /* One record per element, sorted: record base[a] + linear is element linear of array a. */
    uint64_t r = 0;
    for (uint32_t a = 0; a < h->narrays; a++) {
        m->base[a] = (int64_t)r;
        for (int64_t j = 0; j < m->arrays[a].size; j++, r++) {
            const man_rec_t *x = &m->recs[r];
            if (r >= h->nrecs || x->array != a || x->linear != j || x->file >= h->nprocs ||
                x->offset + x->length > m->files[x->file] || x->length < sizeof(rec_hdr_t))
                return tess_error(TESS_ERR_CORRUPT, "%s/manifest: the index has no valid record "
                                  "of element %lld of array '%.*s'", m->path, (long long)j,
                                  TESS_OBJ_NAME_LEN, m->arrays[a].name);
        }
    }
    if (r != h->nrecs)
        return tess_error(TESS_ERR_CORRUPT, "%s/manifest: %llu records for %llu elements",
                          m->path, (unsigned long long)h->nrecs, (unsigned long long)r);
    return TESS_OK;
}

/* Collective: read on process 0, broadcast, parse and check the program everywhere. */
static tess_status_t manifest_load(const char *dir, const char *program, manifest_t *m,
                                   const char *what)
{
    memset(m, 0, sizeof(*m));
    tess_status_t st = TESS_OK;
    if (!dir || !dir[0])
        st = tess_error(TESS_ERR_INVALID, "%s: dir is NULL or empty", what);
    else if (strlen(dir) > CKPT_PATH - 64)
        st = tess_error(TESS_ERR_INVALID, "%s: the directory name is too long", what);
    else if (tess_rt.rank == 0)
        st = manifest_read(dir, m);
    st = ckpt_agree(st);
    if (st != TESS_OK) {
        manifest_free(m);
        return st;
    }
    uint64_t size = m->body_size;
    MPI_Bcast(&size, 1, MPI_UINT64_T, 0, tess_rt.comm);
    MPI_Bcast(m->path, sizeof(m->path), MPI_CHAR, 0, tess_rt.comm);
    if (tess_rt.rank != 0) {
        m->body_size = size;
        m->body      = tess_malloc(size, "a checkpoint manifest");
        if (!m->body)
            tess_fatal("out of memory for a checkpoint manifest of %llu bytes",
                       (unsigned long long)size);
    }
    for (uint64_t off = 0; off < size; off += (uint64_t)1 << 30) {
        uint64_t n = TESS_MIN(size - off, (uint64_t)1 << 30);
        MPI_Bcast(m->body + off, (int)n, MPI_BYTE, 0, tess_rt.comm);
    }
    st = manifest_parse(m);
    if (st == TESS_OK && program &&
        strncmp(program, m->hdr->program, sizeof(m->hdr->program)))
        st = tess_error(TESS_ERR_MISMATCH, "%s was written by program '%.64s', not '%s'", m->path,
                        m->hdr->program, program);
    if (st != TESS_OK)
        manifest_free(m); /* the same on every process: all parsed the same bytes */
    return st;
}

tess_status_t tess_checkpoint_info(const char *dir, const char *program, void *user,
                                   size_t user_cap, tess_ckpt_info_t *info_p)
{
    tess_status_t st = tess_obj_check_main("tess_checkpoint_info");
    if (st != TESS_OK)
        return st;
    manifest_t m;
    st = manifest_load(dir, program, &m, "tess_checkpoint_info");
    if (st != TESS_OK)
        return st;
    if (info_p) {
        memset(info_p, 0, sizeof(*info_p));
        info_p->step      = m.hdr->step;
        info_p->processes = (int)m.hdr->nprocs;
        info_p->ppn       = (int)m.hdr->ppn;
        info_p->narrays   = (int)m.hdr->narrays;
        info_p->user_size = m.hdr->user_size;
        pathf(info_p->path, "%s", m.path);
    }
    size_t n = TESS_MIN(user_cap, (size_t)m.hdr->user_size);
    if (n && user)
        memcpy(user, m.user, n);
    if (user && m.hdr->user_size > user_cap)
        st = tess_error(TESS_ERR_TRUNCATED, "tess_checkpoint_info: %s holds %llu user bytes, "
                        "the buffer %zu", m.path, (unsigned long long)m.hdr->user_size, user_cap);
    manifest_free(&m);
    return st;
}

/* The arrays of the restart against the checkpoint's. */
static tess_status_t check_arrays(const manifest_t *m, const ckpt_set_t *set)
{
    if ((uint32_t)set->n != m->hdr->narrays)
        return tess_error(TESS_ERR_MISMATCH, "%s holds %u arrays; the restart names %d", m->path,
                          m->hdr->narrays, set->n);
    for (int i = 0; i < set->n; i++) {
        const man_array_t *x = &m->arrays[i];
        const tess_array_t *a = set->a[i];
        if (strncmp(x->name, a->name, sizeof(x->name)))
            return tess_error(TESS_ERR_MISMATCH, "%s: array %d is '%.*s' there, '%s' here",
                              m->path, i, TESS_OBJ_NAME_LEN, x->name, a->name);
        if (x->ndims != a->ndims || memcmp(x->ext, a->ext, sizeof(x->ext)))
            return tess_error(TESS_ERR_MISMATCH, "%s: array '%s' is %d x %d x %d there, %d x %d "
                              "x %d here", m->path, a->name, x->ext[0], x->ext[1], x->ext[2],
                              a->ext[0], a->ext[1], a->ext[2]);
        if (x->elem_size != a->elem_size)
            return tess_error(TESS_ERR_MISMATCH, "%s: elements of array '%s' are %llu bytes "
                              "there, %zu here", m->path, a->name,
                              (unsigned long long)x->elem_size, a->elem_size);
        if (!x->has_pup != !a->pup)
            return tess_error(TESS_ERR_MISMATCH, "%s: array '%s' %s a PUP function there but "
                              "%s here", m->path, a->name, x->has_pup ? "had" : "had no",
                              a->pup ? "has one" : "none");
    }
    return TESS_OK;
}

/* A record read and checked: its host part, and its device bytes already in new device memory
 * (filled on the element's stream; the element itself is unchanged until every process agrees). */
typedef struct loaded {
    tess_ctx_h e;
    uint32_t   ai; /* its array in the set */
    char      *head; /* rec_hdr_t, state bytes, PUP bytes */
    void      *dev[TESS_DEV_MAX_BUFS];
} loaded_t;

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
    tess_gpu_stream_h *sv;    /* the streams of the copies out of it */
    size_t             nsv, capsv;
} rhalf_t;

typedef struct reader {
    char           *pinned;
    rhalf_t         h[2];
    int             cur; /* the half being used */
    const rext_t   *ext;
    size_t          next;
    int             stop, done, err, started;
    uint64_t        err_off; /* where a read failed */
    size_t          err_ext;
    pthread_t       th;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
} reader_t;

static void *reader_main(void *arg)
{
    reader_t *r  = arg;
    size_t    ei = 0; /* the extent being read, and how much of it is */
    uint64_t  eo = 0;
    for (int k = 0;; k ^= 1) {
        rhalf_t *h = &r->h[k];
        pthread_mutex_lock(&r->mu);
        while (!r->stop && h->ready)
            pthread_cond_wait(&r->cv, &r->mu);
        int stop = r->stop;
        pthread_mutex_unlock(&r->mu);
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
        pthread_mutex_lock(&r->mu);
        h->fill  = fill;
        h->pos   = 0;
        h->ready = 1;
        if (err)
            r->err = err;
        if (r->ext[ei].fd < 0 || err)
            r->done = 1;
        pthread_cond_broadcast(&r->cv);
        int end = r->done;
        pthread_mutex_unlock(&r->mu);
        if (end)
            break;
    }
    return NULL;
}

/* The copies out of half k done, give it back to the reader thread. */
static tess_status_t reader_release(reader_t *r, int k)
{
    rhalf_t *h = &r->h[k];
    for (size_t i = 0; i < h->nsv; i++)
        if (tess_gpu->stream_sync(h->sv[i]) != TESS_OK)
            return tess_error(TESS_ERR_GPU, "restart: copying to the device: %s",
                              tess_error_detail());
    h->nsv = 0;
    pthread_mutex_lock(&r->mu);
    h->ready = 0;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return TESS_OK;
}

/* Up to len next bytes of the stream, in place: *p_p and *n_p (at least 1 byte). */
static tess_status_t reader_take(reader_t *r, size_t len, const char *path, const char **p_p,
                                 size_t *n_p)
{
    rhalf_t *h = &r->h[r->cur];
    /* The reader thread writes a half's ready, fill and pos (under the lock) while it is not
     * ready: look at them under the lock too. */
    pthread_mutex_lock(&r->mu);
    int used_up = h->ready && h->pos == h->fill;
    pthread_mutex_unlock(&r->mu);
    if (used_up) {
        tess_status_t st = reader_release(r, r->cur);
        if (st != TESS_OK)
            return st;
        r->cur ^= 1;
        h = &r->h[r->cur];
    }
    pthread_mutex_lock(&r->mu);
    while (!h->ready)
        pthread_cond_wait(&r->cv, &r->mu);
    int err = h->pos == h->fill ? r->err : 0;
    pthread_mutex_unlock(&r->mu);
    if (h->pos == h->fill) {
        if (err > 0) {
            errno = err;
            return sys_error("cannot read", path);
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
        *crc = crc32c(*crc, p, n);
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
        *crc     = crc32c(*crc, p, n);
        rhalf_t *h = &r->h[r->cur];
        if (tess_gpu->memcpy_async(dst, p, n, stream) != TESS_OK)
            return tess_error(TESS_ERR_GPU, "restart: copying %zu bytes to the device: %s", n,
                              tess_error_detail());
        if (!h->nsv || h->sv[h->nsv - 1] != stream) {
            if (h->nsv == h->capsv) {
                size_t             cap = h->capsv ? 2 * h->capsv : 16;
                tess_gpu_stream_h *nv  = realloc(h->sv, cap * sizeof(*nv));
                if (!nv)
                    return tess_error(TESS_ERR_NO_MEMORY, "restart: the list of streams");
                h->sv    = nv;
                h->capsv = cap;
            }
            h->sv[h->nsv++] = stream;
        }
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
    if (tess_gpu->host_alloc(2 * CKPT_CHUNK, (void **)&r->pinned) != TESS_OK)
        return tess_error(TESS_ERR_NO_MEMORY, "restart: %zu bytes of pinned staging memory: %s",
                          2 * CKPT_CHUNK, tess_error_detail());
    r->h[0].buf = r->pinned;
    r->h[1].buf = r->pinned + CKPT_CHUNK;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (pthread_create(&r->th, NULL, reader_main, r))
        return tess_error(TESS_ERR_SYSTEM, "restart: cannot start the reader thread");
    r->started = 1;
    return TESS_OK;
}

static tess_status_t reader_close(reader_t *r, tess_status_t st)
{
    for (int k = 0; k < 2; k++) /* copies still reading the staging memory */
        for (size_t i = 0; i < r->h[k].nsv; i++)
            if (tess_gpu->stream_sync(r->h[k].sv[i]) != TESS_OK && st == TESS_OK)
                st = tess_error(TESS_ERR_GPU, "restart: a device copy failed: %s",
                                tess_error_detail());
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->stop = 1;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->th, NULL);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
    }
    for (int k = 0; k < 2; k++)
        free(r->h[k].sv);
    if (r->pinned)
        tess_gpu->host_free(r->pinned);
    return st;
}

/* Open file f of the checkpoint (once) and check its size. */
static tess_status_t open_data(const manifest_t *m, int *fds, uint32_t f)
{
    if (fds[f] >= 0)
        return TESS_OK;
    char path[CKPT_PATH];
    pathf(path, "%s/data.%u", m->path, f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? tess_error(TESS_ERR_CORRUPT, "%s is missing", path)
                               : sys_error("cannot open", path);
    struct stat sb;
    if (fstat(fd, &sb)) {
        close(fd);
        return sys_error("cannot stat", path);
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
    pathf(path, "%s/data.%u", m->path, x->file);
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

/* After every process checked its records: replace the element's state. */
static void apply_record(loaded_t *l)
{
    tess_ctx_h       e = l->e;
    tess_array_t    *a = e->array;
    const rec_hdr_t *h = (const rec_hdr_t *)l->head;
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

tess_status_t tess_restart(const tess_ckpt_params_t *p)
{
    tess_status_t st = tess_obj_check_main("tess_restart");
    if (st != TESS_OK)
        return st;
    ckpt_set_t *set = tess_malloc(sizeof(*set), "a checkpoint's arrays");
    if (!set)
        return TESS_ERR_NO_MEMORY;
    st = ckpt_agree(ckpt_params(p, set, "tess_restart"));
    if (st == TESS_OK)
        st = ckpt_same(ckpt_params_hash(p, set), "tess_restart");
    if (st != TESS_OK) {
        free(set);
        return st;
    }
    manifest_t m;
    st = manifest_load(p->dir, ckpt_program(p), &m, "tess_restart");
    if (st != TESS_OK) {
        free(set);
        return st;
    }
    /* The same answers everywhere: every process parsed the same bytes. */
    if (m.hdr->entries_hash != entries_hash() || m.hdr->nentries != (uint32_t)tess_obj_nentries)
        st = tess_error(TESS_ERR_MISMATCH, "%s was written with another set of entry methods "
                        "(%u entries then, %d registered now, or other names or order)", m.path,
                        m.hdr->nentries, tess_obj_nentries);
    else
        st = check_arrays(&m, set);

    /* Read and check every record this process needs before any element changes: host parts
     * to host memory, device bytes through pinned staging into new device memory. */
    loaded_t *ld  = NULL;
    size_t    nld = 0, cap = 0;
    rext_t   *ext = NULL;
    int      *fds = tess_malloc(m.hdr->nprocs * sizeof(int), "checkpoint files");
    if (!fds)
        tess_fatal("out of memory restarting");
    for (uint32_t f = 0; f < m.hdr->nprocs; f++)
        fds[f] = -1;
    /* The elements in the order they are loaded, their records' extents, the files open. */
    for (int ai = 0; st == TESS_OK && ai < set->n; ai++) {
        size_t      n;
        tess_ctx_h *v = local_elems(set->a[ai], &n);
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
            const man_rec_t *x = &m.recs[m.base[ai] + v[k]->linear];
            st                 = open_data(&m, fds, x->file);
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
            st = load_record(&m, &r, ld[nread].ai, ld[nread].e, &ld[nread]);
        st = reader_close(&r, st);
    }
    if (st != TESS_OK)
        nld = nread; /* those after it hold nothing */
    for (uint32_t f = 0; f < m.hdr->nprocs; f++)
        if (fds[f] >= 0)
            close(fds[f]);
    free(fds);
    free(ext);
    /* The copies wrote memory that may be freed below. */
    for (size_t i = 0; i < nld; i++)
        if (tess_gpu->stream_sync(ld[i].e->stream) != TESS_OK && st == TESS_OK)
            st = tess_error(TESS_ERR_GPU, "restart: a device copy failed: %s",
                            tess_error_detail());
    st = ckpt_agree(st);
    if (st == TESS_OK) {
        for (size_t i = 0; i < nld; i++)
            apply_record(&ld[i]);
        tess_dc_streams_dirty(); /* the restored buffers were written on element streams */
        tess_debug("restarted %zu elements from %s", nld, m.path);
    }
    for (size_t i = 0; i < nld; i++) {
        loaded_free_dev(&ld[i]); /* nothing left after apply_record */
        free(ld[i].head);
    }
    free(ld);
    manifest_free(&m);
    free(set);
    return st;
}

/* ckpt_format.c — the checkpoint format (ckpt.h shows the layout): CRC-32C, the manifest written,
 * read and checked, and the file helpers the writer and the API share (paths, whole writes and
 * reads, syncs, the current pointer). */
#define _GNU_SOURCE
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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
uint32_t tess_ckpt_crc32c(uint32_t crc, const void *buf, size_t len)
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

uint64_t tess_ckpt_fnv1a(uint64_t h, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The registered entries, names and kinds in order: a checkpoint belongs to one entry set. */
uint64_t tess_ckpt_entries_hash(void)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < tess_obj_nentries; i++) {
        char dev = tess_obj_entries[i].post ? 'd' : 'h';
        h        = tess_ckpt_fnv1a(h, tess_obj_entries[i].name,
                                   strlen(tess_obj_entries[i].name) + 1);
        h        = tess_ckpt_fnv1a(h, &dev, 1);
    }
    return h;
}

/* ---- files ------------------------------------------------------------------------------ */

/* A path of at most CKPT_PATH bytes (the directory is at most CKPT_PATH - 64). */
void tess_ckpt_pathf(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, CKPT_PATH, fmt, ap);
    va_end(ap);
}

tess_status_t tess_ckpt_sys_error(const char *what, const char *path)
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
            return tess_ckpt_sys_error("cannot write", path);
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
            return tess_ckpt_sys_error("cannot read", path);
        if (n == 0)
            return tess_error(TESS_ERR_CORRUPT, "%s is truncated (ends before byte %llu)", path,
                              (unsigned long long)(off + len));
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return TESS_OK;
}

tess_status_t tess_ckpt_sync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tess_ckpt_sys_error("cannot open", path);
    int rc = fsync(fd);
    close(fd);
    return rc ? tess_ckpt_sys_error("cannot sync", path) : TESS_OK;
}

/* Write a small file through path.tmp and a rename, synced. */
tess_status_t tess_ckpt_write_file_atomic(const char *dir, const char *name, const void *buf,
                                         size_t len)
{
    char tmp[CKPT_PATH], dst[CKPT_PATH];
    tess_ckpt_pathf(tmp, "%s/%s.tmp", dir, name);
    tess_ckpt_pathf(dst, "%s/%s", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return tess_ckpt_sys_error("cannot create", tmp);
    tess_status_t st = write_all(fd, buf, len, tmp);
    if (st == TESS_OK && fsync(fd))
        st = tess_ckpt_sys_error("cannot sync", tmp);
    close(fd);
    if (st == TESS_OK && rename(tmp, dst))
        st = tess_ckpt_sys_error("cannot rename to", dst);
    return st == TESS_OK ? tess_ckpt_sync_path(dir) : st;
}

/* Remove a checkpoint directory (its files, then itself); missing is fine. */
void tess_ckpt_remove_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    char           f[CKPT_PATH];
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            tess_ckpt_pathf(f, "%s/%s", path, de->d_name);
            unlink(f);
        }
    closedir(d);
    rmdir(path);
}

/* N of D/current, or 0 when there is none. */
uint64_t tess_ckpt_read_current(const char *dir)
{
    char path[CKPT_PATH], buf[64] = {0};
    tess_ckpt_pathf(path, "%s/current", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned long long n = 0;
    if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "ckpt.%llu", &n) != 1)
        n = 0;
    fclose(f);
    return n;
}

/* ---- the manifest ----------------------------------------------------------------------- */

static int cmp_rec(const void *x, const void *y)
{
    const man_rec_t *a = x, *b = y;
    if (a->array != b->array)
        return a->array < b->array ? -1 : 1;
    return a->linear < b->linear ? -1 : a->linear > b->linear;
}

void tess_ckpt_detail_copy(tess_status_t st, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", tess_error_detail());
    char   suffix[64];
    size_t n = strlen(buf), k = (size_t)snprintf(suffix, sizeof(suffix), " (%s)",
                                                 tess_status_string(st));
    if (n >= k && !strcmp(buf + n - k, suffix))
        buf[n - k] = 0;
}

/* One staging buffer is kept from its first use to tess_ckpt_staging_release (finalize):
 * allocating and freeing pinned memory synchronises the whole device on CUDA, which a
 * background checkpoint must not do to the chares' streams at every checkpoint. A buffer asked
 * for while the kept one is in use (not in the runtime's own order of things: a checkpoint
 * completes the previous one before it writes) is allocated and freed on its own. */
static struct {
    pthread_mutex_t mu;
    char           *buf;
    int             pinned, busy;
} kept = {.mu = PTHREAD_MUTEX_INITIALIZER};

static char *staging_new(const char *who, int *pinned_p)
{
    static _Atomic int warned;
    char              *buf = NULL;
    *pinned_p              = 1;
    if (tess_gpu->host_alloc(2 * CKPT_CHUNK, (void **)&buf) == TESS_OK)
        return buf;
    char why[256];
    tess_ckpt_detail_copy(TESS_ERR_NO_MEMORY, why, sizeof(why));
    tess_error_clear();
    *pinned_p = 0;
    buf       = tess_aligned_alloc(4096, 2 * CKPT_CHUNK, "checkpoint staging memory");
    if (!buf)
        return NULL;
    if (!atomic_exchange(&warned, 1))
        tess_warn("%s: staging in ordinary host memory, not pinned (slower device copies): %s",
                  who, why);
    return buf;
}

static void staging_delete(char *buf, int pinned)
{
    if (pinned)
        tess_gpu->host_free(buf);
    else
        free(buf);
}

char *tess_ckpt_staging_alloc(const char *who, int *pinned_p)
{
    pthread_mutex_lock(&kept.mu);
    if (!kept.busy && !kept.buf)
        kept.buf = staging_new(who, &kept.pinned);
    char *buf = NULL;
    if (!kept.busy && kept.buf) {
        kept.busy = 1;
        buf       = kept.buf;
        *pinned_p = kept.pinned;
    }
    int other = !buf && kept.busy;
    pthread_mutex_unlock(&kept.mu);
    return other ? staging_new(who, pinned_p) : buf;
}

void tess_ckpt_staging_free(char *buf, int pinned)
{
    pthread_mutex_lock(&kept.mu);
    int mine = buf == kept.buf;
    if (mine)
        kept.busy = 0;
    pthread_mutex_unlock(&kept.mu);
    if (!mine)
        staging_delete(buf, pinned);
}

tess_status_t tess_ckpt_worker_start(ckpt_worker_t *wk, const char *who, char **half0,
                                     char **half1, void *(*fn)(void *), void *arg)
{
    if (!(wk->staging = tess_ckpt_staging_alloc(who, &wk->pinned)))
        return tess_error(TESS_ERR_NO_MEMORY, "%s: %zu bytes of staging memory: %s", who,
                          2 * CKPT_CHUNK, tess_error_detail());
    *half0 = wk->staging;
    *half1 = wk->staging + CKPT_CHUNK;
    pthread_mutex_init(&wk->mu, NULL);
    pthread_cond_init(&wk->cv, NULL);
    if (pthread_create(&wk->th, NULL, fn, arg))
        return tess_error(TESS_ERR_SYSTEM, "%s: cannot start the %s thread", who,
                          strcmp(who, "restart") ? "writer" : "reader");
    wk->started = 1;
    return TESS_OK;
}

void tess_ckpt_worker_stop(ckpt_worker_t *wk)
{
    if (wk->started) {
        pthread_mutex_lock(&wk->mu);
        wk->stop = 1;
        pthread_cond_broadcast(&wk->cv);
        pthread_mutex_unlock(&wk->mu);
        pthread_join(wk->th, NULL);
        pthread_mutex_destroy(&wk->mu);
        pthread_cond_destroy(&wk->cv);
        wk->started = 0;
    }
    if (wk->staging)
        tess_ckpt_staging_free(wk->staging, wk->pinned);
    wk->staging = NULL;
}

void tess_ckpt_staging_release(void)
{
    pthread_mutex_lock(&kept.mu);
    if (kept.buf && !kept.busy) {
        staging_delete(kept.buf, kept.pinned);
        kept.buf = NULL;
    }
    pthread_mutex_unlock(&kept.mu);
}

void tess_ckpt_arrays_describe(const ckpt_set_t *set, man_array_t *ma)
{
    memset(ma, 0, (size_t)set->n * sizeof(*ma));
    for (int i = 0; i < set->n; i++) {
        tess_array_t *a = set->a[i];
        memcpy(ma[i].name, a->name, sizeof(ma[i].name));
        ma[i].ndims     = a->ndims;
        memcpy(ma[i].ext, a->ext, sizeof(ma[i].ext));
        ma[i].has_pup   = a->pup != NULL;
        ma[i].elem_size = a->elem_size;
        ma[i].size      = a->size;
    }
}

tess_status_t tess_ckpt_manifest_write(const char *tmpdir, const man_array_t *arrays,
                                      int narrays, uint64_t step, const char *program,
                                      const void *user_bytes, size_t user, man_rec_t *recs,
                                      size_t nrecs, const uint64_t *files)
{
    size_t upad   = TESS_ALIGN_UP(user, 8);
    size_t body   = sizeof(man_hdr_t) + (size_t)narrays * sizeof(man_array_t) +
                  (size_t)tess_rt.size * sizeof(uint64_t) + upad + nrecs * sizeof(man_rec_t);
    char  *buf    = tess_calloc(1, body + sizeof(man_trailer_t), "a checkpoint manifest");
    if (!buf)
        return TESS_ERR_NO_MEMORY;
    man_hdr_t *h = (man_hdr_t *)buf;
    memcpy(h->magic, CKPT_MAGIC, 8);
    h->version      = CKPT_VERSION;
    h->nprocs       = (uint32_t)tess_rt.size;
    h->ppn          = (uint32_t)tess_rt.ppn;
    h->narrays      = (uint32_t)narrays;
    h->step         = step;
    h->entries_hash = tess_ckpt_entries_hash();
    h->nentries     = (uint32_t)tess_obj_nentries;
    snprintf(h->program, sizeof(h->program), "%s", program);
    h->user_size    = user;
    h->nrecs        = nrecs;
    man_array_t *ma = (man_array_t *)(h + 1);
    memcpy(ma, arrays, (size_t)narrays * sizeof(*ma));
    char *q = (char *)(ma + narrays);
    memcpy(q, files, (size_t)tess_rt.size * sizeof(uint64_t));
    q += (size_t)tess_rt.size * sizeof(uint64_t);
    if (user)
        memcpy(q, user_bytes, user);
    q += upad;
    qsort(recs, nrecs, sizeof(*recs), cmp_rec);
    memcpy(q, recs, nrecs * sizeof(*recs));
    man_trailer_t t = {.body_size = body, .crc = tess_ckpt_crc32c(0, buf, body)};
    memcpy(t.magic, CKPT_END, 4);
    memcpy(buf + body, &t, sizeof(t));

    char path[CKPT_PATH];
    tess_ckpt_pathf(path, "%s/manifest", tmpdir);
    tess_status_t st = TESS_OK;
    int           fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        st = tess_ckpt_sys_error("cannot create", path);
    else {
        st = write_all(fd, buf, body + sizeof(t), path);
        if (st == TESS_OK && fsync(fd))
            st = tess_ckpt_sys_error("cannot sync", path);
        close(fd);
    }
    free(buf);
    return st == TESS_OK ? tess_ckpt_sync_path(tmpdir) : st;
}


void tess_ckpt_manifest_free(manifest_t *m)
{
    free(m->body);
    free(m->base);
    memset(m, 0, sizeof(*m));
}

/* Process 0: find and read the manifest, check its trailer and CRC. */
tess_status_t tess_ckpt_manifest_read(const char *dir, manifest_t *m)
{
    char path[CKPT_PATH];
    tess_ckpt_pathf(path, "%s/manifest", dir);
    if (access(path, F_OK) == 0) {
        tess_ckpt_pathf(m->path, "%s", dir);
    } else {
        uint64_t cur = tess_ckpt_read_current(dir);
        if (!cur)
            return tess_error(TESS_ERR_NOT_FOUND, "no checkpoint in %s (neither %s/current nor "
                              "%s/manifest)", dir, dir, dir);
        tess_ckpt_pathf(m->path, "%s/ckpt.%llu", dir, (unsigned long long)cur);
        tess_ckpt_pathf(path, "%s/manifest", m->path);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? tess_error(TESS_ERR_NOT_FOUND, "%s is missing: %s is not a "
                                            "complete checkpoint", path, m->path)
                               : tess_ckpt_sys_error("cannot open", path);
    struct stat sb;
    tess_status_t st = TESS_OK;
    if (fstat(fd, &sb)) {
        st = tess_ckpt_sys_error("cannot stat", path);
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
    else if (tess_ckpt_crc32c(0, m->body, t.body_size) != t.crc)
        st = tess_error(TESS_ERR_CORRUPT, "%s fails its checksum (CRC-32C)", path);
    m->body_size = size - sizeof(t);
out:
    close(fd);
    return st;
}

/* Every process: lay the parts out and check that they are consistent. */
tess_status_t tess_ckpt_manifest_parse(manifest_t *m)
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


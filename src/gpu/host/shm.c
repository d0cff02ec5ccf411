/*
 * shm.c — the host backend's shared-memory segments: made under a name of this process
 * (/tessera-u<uid>-j<job>-p<pid>-<kind><n>, mode 0600) and unlinked at once, shared through the
 * creator's descriptor (/proc/<pid>/fd/<fd>), and never left behind, however the process ends:
 * a registry from which the exit and abort cleanups unlink a name still there, the reaper
 * (reaper.c), and the reclaim of what crashed processes left. Also the handle every export
 * carries (a segment, an offset and a size: ipc.c's memory and events, and whole segments), and
 * the plain segments that the layers above share between the processes of a node
 * (tess_gpu_shm_*, gpu.h).
 *
 * Threads: segments are made and destroyed from any thread (the registry is lock-free); the
 * plain segments' service has its own mutex.
 */
#include "host.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- segments and their registry ------------------------------------------------------------ */

static _Atomic(tess_gpu_host_shm_t *) shm_registry;
/* Never reset, not even by fini: a name is never used twice by one process. */
static _Atomic uint64_t shm_counter[3]; /* kinds 'm', 'e', 's' */

static void shm_registry_push(tess_gpu_host_shm_t *shm)
{
    tess_gpu_host_shm_t *head = atomic_load(&shm_registry);
    do {
        shm->next = head;
    } while (!atomic_compare_exchange_weak(&shm_registry, &head, shm));
}

tess_status_t tess_gpu_host_shm_create(char kind, size_t size, tess_gpu_host_shm_t **shm_p)
{
    tess_status_t st;
    tess_gpu_host_shm_t *shm = tess_calloc(1, sizeof(*shm), "a shared-memory segment record");
    if (!shm)
        return TESS_ERR_NO_MEMORY;
    uint64_t n = atomic_fetch_add(&shm_counter[kind == 'e' ? 1 : kind == 's' ? 2 : 0], 1);
    snprintf(shm->name, sizeof(shm->name), "/tessera-u%u-j%016" PRIx64 "-p%ld-%c%" PRIu64,
             (unsigned)tess_gpu_host.uid, tess_gpu_host.params.job_id,
             (long)tess_gpu_host.pid, kind, n);
    shm->owner = tess_gpu_host.pid;
    shm->size  = size;
    shm->fd    = -1;

    int fd = shm_open(shm->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) {
        /* The name carries our pid and a number this process never used: it was left by a dead
         * process that had the same pid (reclaim skips names with our own pid). */
        tess_info("removing stale shared memory %s (a previous process with pid %ld)",
                  shm->name, (long)shm->owner);
        shm_unlink(shm->name);
        fd = shm_open(shm->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    }
    if (fd < 0) {
        st = tess_error(TESS_ERR_SYSTEM, "cannot create shared memory %s: %s", shm->name,
                        strerror(errno));
        goto err_free;
    }
    /* From here on the exit and abort cleanups know the name. */
    atomic_store(&shm->linked, 1);
    shm_registry_push(shm);

    /* The umask may have cleared bits of 0600; peers of this user need read and write. */
    if (fchmod(fd, 0600) != 0) {
        st = tess_error(TESS_ERR_SYSTEM, "cannot set mode 0600 on shared memory %s: %s",
                        shm->name, strerror(errno));
        goto err_unlink;
    }
    /* Sparse: tmpfs commits pages only when they are touched. */
    if (ftruncate(fd, (off_t)size) != 0) {
        st = tess_error(TESS_ERR_SYSTEM, "cannot size shared memory %s to %zu bytes: %s",
                        shm->name, size, strerror(errno));
        goto err_unlink;
    }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        st = tess_error(TESS_ERR_NO_MEMORY, "cannot map %zu bytes of shared memory %s: %s",
                        size, shm->name, strerror(errno));
        goto err_unlink;
    }
    /* Peers open the segment through this descriptor (/proc/<pid>/fd/<fd>, shm_open_fd), never
     * by its name: the name goes now, so that even kill -9 leaves nothing in /dev/shm. */
    if (atomic_exchange(&shm->linked, 0))
        shm_unlink(shm->name);
    shm->fd   = fd;
    shm->base = base;
    *shm_p    = shm;
    return TESS_OK;

err_unlink:
    close(fd);
    if (atomic_exchange(&shm->linked, 0))
        shm_unlink(shm->name);
    return st; /* the record stays on the registry; fini frees it */
err_free:
    free(shm);
    return st;
}

void tess_gpu_host_shm_destroy(tess_gpu_host_shm_t *shm)
{
    if (atomic_exchange(&shm->linked, 0))
        shm_unlink(shm->name);
    if (shm->base) {
        munmap(shm->base, shm->size);
        shm->base = NULL;
        close(shm->fd);
        shm->fd = -1;
    }
}

void tess_gpu_host_shm_unlink_all(void)
{
    pid_t self = getpid();
    for (tess_gpu_host_shm_t *shm = atomic_load(&shm_registry); shm; shm = shm->next)
        if (shm->owner == self && atomic_exchange(&shm->linked, 0))
            shm_unlink(shm->name);
}

static void shm_registry_fini(void)
{
    tess_gpu_host_shm_t *shm = atomic_exchange(&shm_registry, NULL);
    while (shm) {
        tess_gpu_host_shm_t *next = shm->next;
        if (shm->owner == tess_gpu_host.pid && atomic_load(&shm->linked))
            tess_warn("shared memory %s was not destroyed before fini", shm->name);
        free(shm);
        shm = next;
    }
}

/* The pid in "j<16 hex>-p<pid>-<m|e|s><n>" (what follows "tessera-u<uid>-"), or -1 when the name
 * does not have exactly that form: anything else is not ours to remove. */
static long shm_parse_pid(const char *s)
{
    if (*s++ != 'j')
        return -1;
    for (int i = 0; i < 16; i++, s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return -1;
    if (*s++ != '-' || *s++ != 'p' || *s < '1' || *s > '9')
        return -1;
    long pid = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        pid = pid * 10 + (*s - '0');
        if (pid > INT32_MAX)
            return -1;
    }
    if (*s++ != '-' || (*s != 'm' && *s != 'e' && *s != 's'))
        return -1;
    s++;
    if (*s < '0' || *s > '9')
        return -1;
    while (*s >= '0' && *s <= '9')
        s++;
    return *s == '\0' ? pid : -1;
}

/* Unlink segments of this user whose creating process no longer exists. */
static void shm_reclaim(void)
{
    char prefix[32];
    int  plen = snprintf(prefix, sizeof(prefix), "tessera-u%u-", (unsigned)tess_gpu_host.uid);
    DIR *dir  = opendir("/dev/shm");
    if (!dir) {
        tess_debug("cannot scan /dev/shm for stale segments: %s", strerror(errno));
        return;
    }
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        if (strncmp(de->d_name, prefix, (size_t)plen) != 0)
            continue;
        long pid = shm_parse_pid(de->d_name + plen);
        if (pid <= 0 || pid == (long)tess_gpu_host.pid)
            continue;
        /* EPERM means the process exists (under another user): leave it. */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        struct stat sb;
        if (fstatat(dirfd(dir), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
            sb.st_uid != tess_gpu_host.uid || !S_ISREG(sb.st_mode))
            continue;
        char path[NAME_MAX + 2];
        snprintf(path, sizeof(path), "/%s", de->d_name);
        if (shm_unlink(path) == 0)
            tess_info("reclaimed stale shared memory %s (%lld bytes): process %ld is gone",
                      path, (long long)sb.st_size, pid);
    }
    closedir(dir);
}

/* ---- the segment service ------------------------------------------------------------------- */

static void host_exit_cleanup(void)
{
    /* Only names: executors may still be running while the process exits. */
    tess_gpu_host_shm_unlink_all();
}

tess_status_t tess_gpu_host_shm_start(const tess_gpu_init_params_t *params)
{
    static _Atomic int atexit_done;
    tess_gpu_host.uid           = getuid();
    tess_gpu_host.pid           = getpid();
    tess_gpu_host.params.job_id = params->job_id;
    /* Before creating anything: what crashed processes left must not pile up. */
    shm_reclaim();
    if (!atomic_exchange(&atexit_done, 1) && atexit(host_exit_cleanup) != 0)
        tess_warn("host backend: cannot register an exit handler; shared memory may be left "
                  "behind by an exit without fini");
    tess_add_abort_cleanup(tess_gpu_host_shm_unlink_all);
    tess_gpu_host_reaper_start();
    return TESS_OK;
}

void tess_gpu_host_shm_stop(void)
{
    tess_remove_abort_cleanup(tess_gpu_host_shm_unlink_all);
    tess_gpu_host_shm_unlink_all();
    shm_registry_fini();
    tess_gpu_host_reaper_stop();
}

/* ---- handles ------------------------------------------------------------------------------- */

void tess_gpu_host_handle_fill(tess_gpu_ipc_handle_t *h_p, uint32_t magic,
                               const tess_gpu_host_shm_t *shm, uint64_t offset, uint64_t size,
                               uint64_t id)
{
    const char *name = shm->name;
    tess_gpu_host_ipc_handle_t h;
    memset(&h, 0, sizeof(h)); /* no stray bytes go over the wire */
    h.magic     = magic;
    h.version   = TESS_GPU_HOST_IPC_VERSION;
    h.name_len  = (uint16_t)strlen(name);
    h.owner_pid = (int32_t)tess_gpu_host.pid;
    h.device    = tess_gpu_host.device;
    h.fd        = shm->fd;
    h.offset    = offset;
    h.size      = size;
    h.id        = id;
    memcpy(h.name, name, h.name_len + 1u);
    memset(h_p, 0, sizeof(*h_p));
    memcpy(h_p->bytes, &h, sizeof(h));
}

tess_status_t tess_gpu_host_handle_parse(const tess_gpu_ipc_handle_t *h_in, uint32_t magic,
                                         const char *fn, tess_gpu_host_ipc_handle_t *h)
{
    if (!h_in)
        return tess_error(TESS_ERR_INVALID, "%s: the handle is NULL", fn);
    memcpy(h, h_in->bytes, sizeof(*h));
    if (h->magic != magic)
        return tess_error(TESS_ERR_CORRUPT, "%s: not a host-backend %s handle (magic %#" PRIx32
                          ")", fn, magic == TESS_GPU_HOST_IPC_MEM ? "memory" :
                          magic == TESS_GPU_HOST_IPC_EVENT ? "event" : "segment",
                          h->magic);
    if (h->version != TESS_GPU_HOST_IPC_VERSION)
        return tess_error(TESS_ERR_CORRUPT, "%s: handle version %u, expected %u", fn,
                          (unsigned)h->version, TESS_GPU_HOST_IPC_VERSION);
    static const char prefix[] = "/tessera-u";
    if (h->name_len < sizeof(prefix) || h->name_len >= TESS_GPU_HOST_NAME_MAX ||
        memchr(h->name, '\0', h->name_len) || h->name[h->name_len] != '\0' ||
        memcmp(h->name, prefix, sizeof(prefix) - 1) || strchr(h->name + 1, '/'))
        return tess_error(TESS_ERR_CORRUPT, "%s: the handle does not name a Tessera segment", fn);
    if (h->owner_pid <= 0 || h->fd < 0)
        return tess_error(TESS_ERR_CORRUPT, "%s: the handle names process %" PRId32 ", "
                          "descriptor %" PRId32, fn, h->owner_pid, h->fd);
    if (h->offset > SIZE_MAX || h->size > SIZE_MAX - h->offset)
        return tess_error(TESS_ERR_CORRUPT, "%s: offset %" PRIu64 " + size %" PRIu64
                          " overflows", fn, h->offset, h->size);
    return TESS_OK;
}

int tess_gpu_host_shm_open_fd(const tess_gpu_host_ipc_handle_t *h, const char *fn,
                              tess_status_t *st_p)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%" PRId32 "/fd/%" PRId32, h->owner_pid, h->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        *st_p = tess_error(e == ENOENT ? TESS_ERR_NOT_FOUND : TESS_ERR_SYSTEM,
                           "%s: cannot open shared memory %s as %s: %s%s", fn, h->name, path,
                           strerror(e), e == ENOENT ? " (its process ended or freed it)" :
                           " (processes of a node must see each other's /proc/<pid>/fd)");
        return -1;
    }
    char self[64], link[160], want[TESS_GPU_HOST_NAME_MAX + 32];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(self, link, sizeof(link) - 1);
    link[n > 0 ? n : 0] = '\0';
    int len = snprintf(want, sizeof(want), "/dev/shm%s", h->name);
    if (n < len || memcmp(link, want, (size_t)len) ||
        (link[len] != '\0' && strcmp(link + len, " (deleted)"))) {
        close(fd);
        *st_p = tess_error(TESS_ERR_NOT_FOUND, "%s: shared memory %s is gone (%s is %s: its "
                           "process ended or freed it)", fn, h->name, path,
                           n > 0 ? link : "not there");
        return -1;
    }
    return fd;
}

/* ---- plain shared segments (gpu.h) --------------------------------------------------------- */

/* Under another backend (CUDA, HIP) the segments are still plain host memory made here: the
 * host backend's segment service starts with the first of them and stops at tess_gpu_fini. */
static struct {
    pthread_mutex_t        lock;
    int                    setup, started;
    tess_gpu_init_params_t params;
} shm_svc = {.lock = PTHREAD_MUTEX_INITIALIZER};

void tess_gpu_shm_setup(const tess_gpu_init_params_t *params)
{
    pthread_mutex_lock(&shm_svc.lock);
    shm_svc.params = *params;
    shm_svc.setup  = 1;
    pthread_mutex_unlock(&shm_svc.lock);
}

void tess_gpu_shm_fini(void)
{
    pthread_mutex_lock(&shm_svc.lock);
    if (shm_svc.started && !tess_gpu_host.initialised)
        tess_gpu_host_shm_stop();
    shm_svc.started = shm_svc.setup = 0;
    pthread_mutex_unlock(&shm_svc.lock);
}

int tess_gpu_shm_available(void)
{
    pthread_mutex_lock(&shm_svc.lock);
    int up = tess_gpu_host.initialised || shm_svc.setup;
    pthread_mutex_unlock(&shm_svc.lock);
    return up;
}

static tess_status_t shm_usable(const char *fn)
{
    tess_status_t st = TESS_OK;
    pthread_mutex_lock(&shm_svc.lock);
    if (!tess_gpu_host.initialised && !shm_svc.setup)
        st = tess_error(TESS_ERR_UNSUPPORTED, "%s: no GPU backend is initialised", fn);
    else if (!tess_gpu_host.initialised && !shm_svc.started &&
             (st = tess_gpu_host_shm_start(&shm_svc.params)) == TESS_OK)
        shm_svc.started = 1;
    pthread_mutex_unlock(&shm_svc.lock);
    return st;
}

tess_status_t tess_gpu_shm_create(size_t size, tess_gpu_shm_h *shm_p, void **base_p,
                                  tess_gpu_ipc_handle_t *h_p)
{
    tess_status_t st = shm_usable("tess_gpu_shm_create");
    if (st != TESS_OK)
        return st;
    if (!shm_p || !base_p || !h_p || size == 0)
        return tess_error(TESS_ERR_INVALID, "tess_gpu_shm_create: %zu bytes, shm_p %p, base_p "
                          "%p, h_p %p", size, (void *)shm_p, (void *)base_p, (void *)h_p);
    tess_gpu_host_shm_t *shm;
    if ((st = tess_gpu_host_shm_create('s', size, &shm)) != TESS_OK)
        return st;
    tess_gpu_host_handle_fill(h_p, TESS_GPU_HOST_IPC_SHM, shm, 0, size, 0);
    *shm_p  = shm;
    *base_p = shm->base;
    return TESS_OK;
}

void tess_gpu_shm_destroy(tess_gpu_shm_h shm)
{
    if (shm)
        tess_gpu_host_shm_destroy(shm);
}

tess_status_t tess_gpu_shm_open(const tess_gpu_ipc_handle_t *h_in, void **base_p,
                                size_t *size_p)
{
    static const char fn[] = "tess_gpu_shm_open";
    tess_gpu_host_ipc_handle_t h;
    tess_status_t st = shm_usable(fn);
    if (st != TESS_OK)
        return st;
    if (!base_p || !size_p)
        return tess_error(TESS_ERR_INVALID, "%s: base_p or size_p is NULL", fn);
    if ((st = tess_gpu_host_handle_parse(h_in, TESS_GPU_HOST_IPC_SHM, fn, &h)) != TESS_OK)
        return st;
    if (h.offset != 0 || h.size == 0)
        return tess_error(TESS_ERR_CORRUPT, "%s: the handle names %" PRIu64 " bytes at %" PRIu64
                          " of %s, not a whole segment", fn, h.size, h.offset, h.name);
    int fd = tess_gpu_host_shm_open_fd(&h, fn, &st);
    if (fd < 0)
        return st;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = tess_error(TESS_ERR_SYSTEM, "%s: fstat of %s: %s", fn, h.name, strerror(errno));
        goto err_close;
    }
    if ((uint64_t)sb.st_size != h.size) {
        st = tess_error(TESS_ERR_CORRUPT, "%s: shared memory %s has %lld bytes, the handle says "
                        "%" PRIu64, fn, h.name, (long long)sb.st_size, h.size);
        goto err_close;
    }
    void *base = mmap(NULL, (size_t)h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        st = tess_error(TESS_ERR_NO_MEMORY, "%s: cannot map %" PRIu64 " bytes of %s: %s", fn,
                        h.size, h.name, strerror(errno));
        goto err_close;
    }
    close(fd);
    *base_p = base;
    *size_p = (size_t)h.size;
    return TESS_OK;

err_close:
    close(fd);
    return st;
}

void tess_gpu_shm_close(void *base, size_t size)
{
    if (base)
        munmap(base, size);
}

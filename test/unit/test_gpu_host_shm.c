/*
 * test_gpu_host_shm.c — the host backend's shared memory, in one process: IPC handles opened in
 * the process that exported them, segment names and modes, cleanup at exit, the reaper that
 * removes a crashed process's segments, and the reclaim of segments left by dead processes.
 *
 * Environment: TESS_HOST_JITTER_US adds a jitter (the testlist runs a variant).
 */
#include "unit/gpu_host_test.h"

/* ---- IPC within the process ------------------------------------------------------------------- */

static int maps_count(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f);
    char line[512];
    int  n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, name) != NULL;
    fclose(f);
    return n;
}

/* A copy of h with one field changed (through memcpy: the bytes are not a struct). */
#define EDITED(h, edit)                                                      \
    ({                                                                       \
        tess_gpu_host_ipc_handle_t v_;                                       \
        tess_gpu_ipc_handle_t      b_ = (h);                                 \
        memcpy(&v_, b_.bytes, sizeof(v_));                                   \
        edit;                                                                \
        memcpy(b_.bytes, &v_, sizeof(v_));                                   \
        b_;                                                                  \
    })

static tess_gpu_host_ipc_handle_t hview(const tess_gpu_ipc_handle_t *h)
{
    tess_gpu_host_ipc_handle_t v;
    memcpy(&v, h->bytes, sizeof(v));
    return v;
}

static void test_ipc_self(void)
{
    be_init(2, 0, 0);
    tess_gpu_stream_h     sa = tess_gpu_pool_stream(0), sb = tess_gpu_pool_stream(1);
    unsigned char        *a, *b, *pa, *pa2, *pb;
    tess_gpu_ipc_handle_t ha, hb, bad, he;
    tess_gpu_ptr_info_t   info;
    CHECK_OK(tess_gpu->mem_alloc(4096, (void **)&a));
    CHECK_OK(tess_gpu->mem_alloc(8192, (void **)&b));
    for (int i = 0; i < 4096; i++)
        a[i] = (unsigned char)(i * 7 + 1);
    memset(b, 0, 8192);
    CHECK_OK(tess_gpu->ipc_mem_export(a, &ha));
    CHECK_OK(tess_gpu->ipc_mem_export(b, &hb));
    CHECK_ST(tess_gpu->ipc_mem_export(a + 256, &bad), TESS_ERR_INVALID);
    char name[TESS_GPU_HOST_NAME_MAX];
    snprintf(name, sizeof(name), "%s", hview(&ha).name);
    CHECK(!strcmp(name, hview(&hb).name)); /* one segment */
    CHECK(maps_count(name) == 1);

    /* Two allocations of one segment: mapped once; opening one twice: the same pointer. */
    CHECK_OK(tess_gpu->ipc_mem_open(&ha, (void **)&pa));
    CHECK_OK(tess_gpu->ipc_mem_open(&hb, (void **)&pb));
    CHECK_OK(tess_gpu->ipc_mem_open(&ha, (void **)&pa2));
    CHECK(pa2 == pa && pa != a && pb != b);
    CHECK(maps_count(name) == 2);
    CHECK(memcmp(pa, a, 4096) == 0);
    CHECK_OK(tess_gpu->ptr_query(pa + 100, &info));
    CHECK(info.is_device == 1 && info.base == pa && info.size == 4096 && info.alloc_id == 0);
    CHECK_OK(tess_gpu->ptr_query(pb + 8191, &info));
    CHECK(info.is_device == 1 && info.base == pb && info.size == 8192);
    CHECK_OK(tess_gpu->memcpy_async(pb, pa, 4096, sa));
    CHECK_OK(tess_gpu->stream_sync(sa));
    CHECK(memcmp(b, a, 4096) == 0);
    CHECK_ST(tess_gpu->memset_async(pa + 4000, 0, 200, sa), TESS_ERR_INVALID);

    /* Corrupted handles are rejected without reading out of bounds. */
    bad = EDITED(ha, v_.magic ^= 1);
    CHECK_ST(tess_gpu->ipc_mem_open(&bad, (void **)&pa2), TESS_ERR_CORRUPT);
    bad = EDITED(ha, v_.offset = 1ull << 40);
    CHECK_ST(tess_gpu->ipc_mem_open(&bad, (void **)&pa2), TESS_ERR_CORRUPT);
    bad = EDITED(ha, v_.size = UINT64_MAX - 10);
    CHECK_ST(tess_gpu->ipc_mem_open(&bad, (void **)&pa2), TESS_ERR_CORRUPT);
    bad = EDITED(ha, v_.name_len = 3);
    CHECK_ST(tess_gpu->ipc_mem_open(&bad, (void **)&pa2), TESS_ERR_CORRUPT);
    bad = EDITED(ha, memset(v_.name, 'x', sizeof(v_.name)));
    CHECK_ST(tess_gpu->ipc_mem_open(&bad, (void **)&pa2), TESS_ERR_CORRUPT);
    bad = EDITED(ha, snprintf(v_.name, sizeof(v_.name), "/tessera-u%u-j00000000000000ff-p1-m99999",
                              (unsigned)getuid());
                 v_.name_len = (uint16_t)strlen(v_.name));
    CHECK_ST(tess_gpu->ipc_mem_open(&bad, (void **)&pa2), TESS_ERR_NOT_FOUND);
    CHECK_ST(tess_gpu->ipc_mem_open(NULL, (void **)&pa2), TESS_ERR_INVALID);

    CHECK_OK(tess_gpu->ipc_mem_close(pa));
    CHECK_OK(tess_gpu->ipc_mem_close(pa));
    CHECK_ST(tess_gpu->ipc_mem_close(pa), TESS_ERR_INVALID);
    CHECK(maps_count(name) == 2); /* pb still holds the mapping */
    CHECK_OK(tess_gpu->ipc_mem_close(pb));
    CHECK(maps_count(name) == 1);
    CHECK_OK(tess_gpu->ptr_query(pb, &info));
    CHECK(info.is_device == 0);

    /* Events: open our own exported event and use it from both sides. */
    tess_gpu_event_h e, plain, oe;
    gate_t           g    = {0};
    _Atomic int      flag = 0;
    CHECK_OK(tess_gpu->event_create(TESS_GPU_EVENT_IPC, &e));
    CHECK_OK(tess_gpu->event_create(0, &plain));
    CHECK_ST(tess_gpu->ipc_event_export(plain, &he), TESS_ERR_INVALID);
    CHECK_OK(tess_gpu->ipc_event_export(e, &he));
    CHECK_ST(tess_gpu->ipc_mem_open(&he, (void **)&pa2), TESS_ERR_CORRUPT);
    CHECK_ST(tess_gpu->ipc_event_open(&ha, &oe), TESS_ERR_CORRUPT);
    bad = EDITED(he, v_.offset += 8);
    CHECK_ST(tess_gpu->ipc_event_open(&bad, &oe), TESS_ERR_CORRUPT);
    bad = EDITED(he, v_.offset = TESS_GPU_HOST_EVSEG_SIZE);
    CHECK_ST(tess_gpu->ipc_event_open(&bad, &oe), TESS_ERR_CORRUPT);
    CHECK_OK(tess_gpu->ipc_event_open(&he, &oe));
    CHECK_ST(tess_gpu->ipc_event_export(oe, &bad), TESS_ERR_INVALID);

    launch_gate(sb, &g);
    CHECK_OK(tess_gpu->event_record(e, sb));
    CHECK_OK(tess_gpu->stream_wait_event(sa, oe)); /* through the opened handle: polled */
    launch_set(sa, &flag);
    usleep(20000);
    CHECK(atomic_load(&flag) == 0);
    CHECK_ST(tess_gpu->event_query(oe), TESS_INPROGRESS);
    open_gate(&g);
    CHECK_OK(tess_gpu->stream_sync(sa));
    CHECK(atomic_load(&flag) == 1);
    CHECK_OK(tess_gpu->event_query(oe));
    /* Recording the opened event is seen by the owner. */
    launch_gate(sb, &(gate_t){1});
    CHECK_OK(tess_gpu->event_record(oe, sb));
    CHECK_OK(tess_gpu->event_sync(e));
    CHECK_OK(tess_gpu->event_sync(oe));
    CHECK_OK(tess_gpu->event_query(e));
    CHECK_OK(tess_gpu->stream_sync(sb));

    CHECK_ST(tess_gpu->ipc_event_close(e), TESS_ERR_INVALID);
    CHECK_OK(tess_gpu->ipc_event_close(oe));
    /* A handle of a destroyed event whose slot was reused is stale. */
    CHECK_OK(tess_gpu->event_destroy(e));
    tess_gpu_event_h e2;
    CHECK_OK(tess_gpu->event_create(TESS_GPU_EVENT_IPC, &e2));
    if (e2 == e) /* the slot was recycled (it was complete): the old handle is refused */
        CHECK_ST(tess_gpu->ipc_event_open(&he, &oe), TESS_ERR_NOT_FOUND);
    CHECK_OK(tess_gpu->event_destroy(e2));
    CHECK_OK(tess_gpu->event_destroy(plain));
    CHECK_OK(tess_gpu->mem_free(a));
    CHECK_OK(tess_gpu->mem_free(b));
    tess_gpu_fini();
}

/* ---- names, modes, cleanup and reclaim --------------------------------------------------------- */

/* "tessera-u<uid>-j<16 hex>-p<pid>-<m|e><n>" */
static int name_ok(const char *n, char *kind_p)
{
    unsigned uid;
    char     hex[17];
    long     pid;
    char     kind;
    unsigned long long idx;
    int      end = 0;
    if (sscanf(n, "tessera-u%u-j%16[0-9a-f]-p%ld-%c%llu%n", &uid, hex, &pid, &kind, &idx,
               &end) != 5 || n[end] != '\0')
        return 0;
    *kind_p = kind;
    return uid == getuid() && strlen(hex) == 16 && strtoull(hex, NULL, 16) == job_id &&
           pid == getpid() && (kind == 'm' || kind == 'e');
}

static int seg_m, seg_e;

static void segment_check(int fd, const char *name)
{
    char kind = 0;
    CHECK(name_ok(name, &kind));
    seg_m += kind == 'm';
    seg_e += kind == 'e';
    struct stat sb;
    CHECK(fstat(fd, &sb) == 0);
    CHECK((sb.st_mode & 07777) == 0600);
    CHECK(sb.st_uid == getuid());
}

static void test_segments(void)
{
    mode_t old = umask(0277); /* would give 0400 without the fchmod */
    be_init(1, 0, 1 << 20);
    umask(old);
    void            *p;
    tess_gpu_event_h e;
    CHECK_OK(tess_gpu->mem_alloc(2 << 20, &p)); /* a second, dedicated segment */
    CHECK_OK(tess_gpu->event_create(0, &e));

    /* The segments exist, with their names and modes, but no longer in /dev/shm: each name is
     * unlinked as soon as the segment is made (even kill -9 leaves nothing). */
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "j%016" PRIx64 "-", job_id);
    CHECK(shm_count(prefix) == 0);
    seg_m = seg_e = 0;
    shm_fds(prefix, segment_check);
    CHECK(seg_m == 2 && seg_e == 1);
    CHECK_OK(tess_gpu->event_destroy(e));
    CHECK_OK(tess_gpu->mem_free(p));
    tess_gpu_fini();
    CHECK(shm_count(prefix) == 0);
    CHECK(shm_fds(prefix, NULL) == 0);
}

static int names_of_pid(uint64_t job, pid_t pid)
{
    char buf[96];
    return shm_count(job_pid_prefix(job, pid, buf, sizeof(buf)));
}

static void make_fake(const char *name)
{
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    close(fd);
}

static pid_t child_run(int how)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        void            *p;
        tess_gpu_event_h e;
        be_init(1, 0, 1 << 20);
        if (tess_gpu->mem_alloc(1000, &p) != TESS_OK || tess_gpu->event_create(0, &e) != TESS_OK)
            _exit(3);
        if (how == 0)
            _exit(0); /* a crash: no atexit, no cleanup */
        if (how == 1)
            exit(0); /* exit without fini: the atexit handler unlinks */
        fprintf(stderr, "test_gpu_host: the child's fatal error below is expected\n");
        tess_fatal("deliberate fatal error in a child of test_gpu_host");
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == (how == 2 ? 134 : 0));
    return pid;
}

static void test_reclaim(void)
{
    uint64_t child_job = job_id ^ 0x5a5a5a5a5a5a5a5aull;
    uint64_t saved     = job_id;

    job_id = child_job;
    pid_t crashed = child_run(0);
    /* A crash runs no cleanup: the child's reaper removes its names once it is gone. */
    for (int i = 0; i < 500 && names_of_pid(child_job, crashed) > 0; i++)
        usleep(10 * 1000);
    CHECK(names_of_pid(child_job, crashed) == 0);
    pid_t exited = child_run(1);
    CHECK(names_of_pid(child_job, exited) == 0);
    pid_t aborted = child_run(2);
    CHECK(names_of_pid(child_job, aborted) == 0);
    job_id = saved;

    /* Names that must survive: a live process's, our own, another user's, a foreign form. */
    pid_t sleeper = fork();
    CHECK(sleeper >= 0);
    if (sleeper == 0) {
        sleep(60);
        _exit(0);
    }
    char live[96], self[96], other[96], odd[96];
    unsigned uid = (unsigned)getuid();
    snprintf(live, sizeof(live), "/tessera-u%u-j00000000000000aa-p%ld-m0", uid, (long)sleeper);
    snprintf(self, sizeof(self), "/tessera-u%u-j00000000000000aa-p%ld-m7", uid, (long)getpid());
    snprintf(other, sizeof(other), "/tessera-u%u-j00000000000000aa-p%ld-m0", uid + 1,
             (long)crashed);
    snprintf(odd, sizeof(odd), "/tessera-u%u-j00000000000000aa-p%ld-x0", uid, (long)crashed);
    make_fake(live);
    make_fake(self);
    make_fake(other);
    make_fake(odd);
    /* What a dead process left (one whose reaper could not run): init reclaims it. */
    char dead[2][96];
    for (int i = 0; i < 2; i++) {
        snprintf(dead[i], sizeof(dead[i]), "/tessera-u%u-j%016" PRIx64 "-p%ld-%c0", uid,
                 child_job, (long)crashed, i ? 'e' : 'm');
        make_fake(dead[i]);
    }
    CHECK(names_of_pid(child_job, crashed) == 2);

    be_init(1, 0, 1 << 20);
    CHECK(names_of_pid(child_job, crashed) == 0); /* reclaimed */
    const char *keep[] = {live, self, other, odd};
    for (int i = 0; i < 4; i++) {
        char path[128];
        snprintf(path, sizeof(path), "/dev/shm%s", keep[i]);
        CHECK(access(path, F_OK) == 0);
        CHECK(shm_unlink(keep[i]) == 0);
    }
    tess_gpu_fini();
    kill(sleeper, SIGKILL);
    waitpid(sleeper, NULL, 0);
}

int main(void)
{
    gh_start("test_gpu_host_shm");
    test_ipc_self();
    printf("ipc ok\n");
    test_segments();
    test_reclaim();
    printf("segments and reclaim ok\n");
    gh_check_no_segments();
    printf("test_gpu_host_shm: all passed\n");
    return 0;
}

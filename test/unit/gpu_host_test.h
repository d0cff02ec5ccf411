/*
 * gpu_host_test.h — what the one-process tests of the host GPU backend share: checks, the
 * backend's start, shared-memory name counts, a timed wait, and host functions used as kernels.
 * Included by one test file each; single-threaded except where a test starts threads itself.
 */
#ifndef TESS_TEST_GPU_HOST_TEST_H
#define TESS_TEST_GPU_HOST_TEST_H

#include "gpu/gpu.h"
#include "gpu/host/host.h"
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


static uint64_t job_id;
static int      env_jitter;
static uint64_t rng_state = 88172645463325252ull;

/* Read the jitter variable, draw this run's job id, say which it is. */
static inline void gh_start(const char *name)
{
    const char *j = getenv("TESS_HOST_JITTER_US");
    if (j)
        env_jitter = atoi(j);
    setvbuf(stdout, NULL, _IONBF, 0);
    job_id    = tess_random64();
    rng_state = job_id | 1;
    printf("%s: job %016" PRIx64 ", jitter %d us\n", name, job_id, env_jitter);
}


static inline uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static inline void be_init(int threads, int jitter, size_t arena)
{
    tess_gpu_init_params_t p = {
        .job_id = job_id, .rank = 0, .local_rank = 0, .local_size = 1,
        .host_arena_size = arena, .host_threads = threads,
        .host_jitter_us = jitter + env_jitter, .host_devices = 1,
    };
    CHECK_OK(tess_gpu_init("host", &p, 4));
    CHECK(tess_gpu == &tess_gpu_host_ops);
}

/* Names in /dev/shm that start with "tessera-u<uid>-" + rest. */
static inline int shm_count(const char *rest)
{
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "tessera-u%u-%s", (unsigned)getuid(), rest);
    DIR *d = opendir("/dev/shm");
    CHECK(d);
    int            n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += !strncmp(de->d_name, prefix, strlen(prefix));
    closedir(d);
    return n;
}

static inline const char *job_pid_prefix(uint64_t job, long pid, char *buf, size_t len)
{
    snprintf(buf, len, "j%016" PRIx64 "-p%ld-", job, pid);
    return buf;
}

/* For each of this process's descriptors of a segment whose name was "tessera-u<uid>-" + rest
 * and is unlinked (the link reads "/dev/shm/<name> (deleted)"): fn(fd number, name), if given.
 * Returns how many. */
static inline int shm_fds(const char *rest, void (*fn)(int fd, const char *name))
{
    char prefix[160];
    int  plen = snprintf(prefix, sizeof(prefix), "/dev/shm/tessera-u%u-%s", (unsigned)getuid(),
                         rest);
    DIR *d = opendir("/proc/self/fd");
    CHECK(d);
    int            n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char path[300], link[300];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
        ssize_t len = readlink(path, link, sizeof(link) - 1);
        if (len <= 0)
            continue;
        link[len] = '\0';
        size_t dl = strlen(" (deleted)");
        if (strncmp(link, prefix, (size_t)plen) || (size_t)len <= dl ||
            strcmp(link + len - dl, " (deleted)"))
            continue;
        link[len - dl] = '\0';
        if (fn)
            fn(atoi(de->d_name), link + strlen("/dev/shm/"));
        n++;
    }
    closedir(d);
    return n;
}

/* This process's segments of `kind` ("m", "e" or "" for both): they exist (it holds their
 * descriptors) and their names are gone from /dev/shm (unlinked as soon as made). */
static inline int own_segments(const char *kind)
{
    char buf[96], rest[100];
    snprintf(rest, sizeof(rest), "%s%s", job_pid_prefix(job_id, getpid(), buf, sizeof(buf)),
             kind);
    CHECK(shm_count(rest) == 0);
    return shm_fds(rest, NULL);
}

static inline double now_s(void)
{
    return (double)tess_time_ns() / 1e9;
}

#define WAIT_UNTIL(cond)                                                                 \
    do {                                                                                 \
        double t0_ = now_s();                                                            \
        while (!(cond)) {                                                                \
            if (now_s() - t0_ > 10.0) {                                                  \
                fprintf(stderr, "%s:%d: timed out waiting for %s\n", __FILE__, __LINE__, \
                        #cond);                                                          \
                exit(1);                                                                 \
            }                                                                            \
            usleep(100);                                                                 \
        }                                                                                \
    } while (0)

/* ---- host functions used as kernels ---------------------------------------------------------- */

typedef struct gate {
    _Atomic int open;
} gate_t;

static inline void gate_fn(void *args)
{
    gate_t *g = *(gate_t **)args;
    while (!atomic_load_explicit(&g->open, memory_order_acquire))
        usleep(100);
}

static inline void launch_gate(tess_gpu_stream_h s, gate_t *g)
{
    CHECK_OK(tess_gpu->launch_host(s, gate_fn, &g, sizeof(g)));
}

static inline void open_gate(gate_t *g)
{
    atomic_store_explicit(&g->open, 1, memory_order_release);
}

static inline void set_flag_fn(void *args)
{
    atomic_store(*(_Atomic int **)args, 1);
}

static inline void launch_set(tess_gpu_stream_h s, _Atomic int *flag)
{
    CHECK_OK(tess_gpu->launch_host(s, set_flag_fn, &flag, sizeof(flag)));
}

static inline void sleep_fn(void *args)
{
    usleep(*(unsigned *)args);
}

/* Every segment of this job is gone. */
static inline void gh_check_no_segments(void)
{
    char prefix[40];
    snprintf(prefix, sizeof(prefix), "j%016" PRIx64 "-", job_id);
    CHECK(shm_count(prefix) == 0);
}

#endif

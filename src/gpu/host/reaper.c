/*
 * reaper.c — the host backend's shared-memory segments must not outlive their process, however
 * it ends. Their names are unlinked as soon as they are made (shm.c), and exit, fini and
 * tess_fatal unlink any left; a process killed by a signal (kill -9, SIGTERM or SIGINT from a
 * launcher tearing a job down, a test harness's timeout) in the moment between a segment's
 * creation and its unlink runs none of that. So each process starts a reaper at init: a shell
 * in its own session that waits for the end of a pipe only this process holds (its read returns
 * end-of-file when the process is gone, however it went) and then removes whatever segments of
 * this process's name prefix are left.
 * It is spawned (posix_spawn: no fork of a threaded MPI process), holds none of the process's
 * other descriptors and ignores the signals that end the job.
 */
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static struct {
    pid_t pid;   /* -1: none */
    int   fd;    /* the write end of its pipe, held by this process only */
    pid_t owner; /* the process that started it (a forked child starts its own) */
} reaper = {-1, -1, -1};

void tess_gpu_host_reaper_start(void)
{
    if (reaper.pid > 0 && reaper.owner == getpid())
        return;
    /* Tests that nothing is left without it (the names go at creation: shm.c). */
    const char *off = getenv("TESS_TEST_NO_REAPER");
    if (off && !strcmp(off, "1"))
        return;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        tess_warn("host backend: no reaper for shared memory (pipe: %s); a process killed by a "
                  "signal leaves its segments until the next run reclaims them", strerror(errno));
        return;
    }
    /* The names are /tessera-u<uid>-j<job>-p<pid>-<kind><n> (shm.c): digits and hex only. */
    char script[320];
    snprintf(script, sizeof(script),
             "trap '' INT TERM HUP PIPE; while read -r _; do :; done; "
             "exec rm -f -- /dev/shm/tessera-u%u-j%016" PRIx64 "-p%ld-[mes]*",
             (unsigned)tess_gpu_host.uid, tess_gpu_host.params.job_id,
             (long)tess_gpu_host.pid);
    char *argv[] = {"sh", "-c", script, NULL};

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t          at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
    posix_spawnattr_init(&at);
    sigset_t none, deflt;
    sigemptyset(&none);
    sigemptyset(&deflt);
    sigaddset(&deflt, SIGCHLD);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &deflt);
    /* Its own session: a terminal's ^C or a launcher's signal to the process group spares it. */
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int   err = posix_spawn(&pid, "/bin/sh", &fa, &at, argv, environ);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[0]);
    if (err != 0) {
        close(pfd[1]);
        tess_warn("host backend: no reaper for shared memory (posix_spawn /bin/sh: %s); a "
                  "process killed by a signal leaves its segments until the next run reclaims "
                  "them", strerror(err));
        return;
    }
    reaper.pid   = pid;
    reaper.fd    = pfd[1];
    reaper.owner = getpid();
    tess_debug("host backend: shared-memory reaper is process %ld", (long)pid);
}

void tess_gpu_host_reaper_stop(void)
{
    if (reaper.pid <= 0 || reaper.owner != getpid())
        return;
    close(reaper.fd);
    /* It ends at once (the segments are already gone); wait for it a little, never forever
     * (a child forked by the program may hold the pipe too). */
    for (int i = 0; i < 200; i++) {
        pid_t r = waitpid(reaper.pid, NULL, WNOHANG);
        if (r == reaper.pid || (r < 0 && errno != EINTR))
            break;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    reaper.pid = -1;
    reaper.fd  = -1;
}

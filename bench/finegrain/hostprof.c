/*
 * hostprof.c — an LD_PRELOAD sampling profiler of a program's host threads, for machines without
 * perf or Nsight: where does the host time of a chare step go (the runtime, the GPU driver, the
 * application)?
 *
 * Every thread gets a timer of its own (timer_create on CLOCK_MONOTONIC, SIGEV_THREAD_ID: the
 * main thread at load, every other one as pthread_create starts it) that sends it SIGPROF every
 * HOSTPROF_US microseconds of wall-clock time (default 300). The handler stores the thread id,
 * the interrupted instruction and a backtrace in a preallocated buffer (no allocation, no lock:
 * one atomic increment). Wall clock, not CPU time: the CPU-time timers of Linux fire on the
 * scheduler tick (every 1-4 ms), too coarse for a run of a few seconds; a sleeping thread's
 * samples land in its wait, which the report counts as idle.
 *
 * At exit the library writes HOSTPROF_OUT.<pid>.txt:
 *   E <executable>
 *   S <tid> <n> <pc> <frame> ...            one line a sample (the handler's own frames first)
 *   A <address> <object> <offset> <symbol>  one line an address: its object, its offset there and
 *                                           the nearest dynamic symbol (dladdr, here, where the
 *                                           libraries are); hostprof.py symbolises the offsets in
 *                                           objects with debug information (addr2line).
 * Without HOSTPROF_OUT the library does nothing. hostprof.sh builds and uses it.
 *
 * Costs: a sample is a signal and a backtrace, a few microseconds; at 300 us a busy thread runs
 * a few per cent slower. The unwinder is loaded at start (its first call may allocate), and a
 * backtrace taken while the interrupted thread holds the loader's lock could block: acceptable
 * for a measurement tool, never in the library.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define HP_DEPTH   40     /* frames kept a sample */
#define HP_SAMPLES 400000 /* samples kept at most (~130 MB of address space, touched as used) */

typedef struct hp_sample {
    int   tid, n;
    void *pc[HP_DEPTH + 1]; /* the interrupted instruction, then the backtrace */
} hp_sample_t;

static hp_sample_t *hp_buf;
static atomic_int   hp_n;
static atomic_int   hp_on;
static long         hp_period_us = 300;

static void hp_on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    if (!atomic_load_explicit(&hp_on, memory_order_relaxed))
        return;
    int i = atomic_fetch_add_explicit(&hp_n, 1, memory_order_relaxed);
    if (i >= HP_SAMPLES)
        return;
    hp_sample_t *s = &hp_buf[i];
    s->tid         = (int)syscall(SYS_gettid);
#if defined(__x86_64__)
    s->pc[0] = (void *)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    s->pc[0] = (void *)((ucontext_t *)uc)->uc_mcontext.pc;
#else
    (void)uc;
    s->pc[0] = NULL;
#endif
    s->n = backtrace(s->pc + 1, HP_DEPTH) + 1;
}

/* A timer of the calling thread's own, firing SIGPROF at it every period. */
static void hp_arm_thread(void)
{
    if (!atomic_load(&hp_on))
        return;
    struct sigevent ev = {0};
    timer_t         t;
    ev.sigev_notify          = SIGEV_THREAD_ID;
    ev.sigev_signo           = SIGPROF;
    ev._sigev_un._tid        = (int)syscall(SYS_gettid);
    if (timer_create(CLOCK_MONOTONIC, &ev, &t) != 0)
        return;
    long                    ns = hp_period_us * 1000;
    const struct itimerspec its = {{ns / 1000000000, ns % 1000000000},
                                   {ns / 1000000000, ns % 1000000000}};
    timer_settime(t, 0, &its, NULL);
}

typedef struct hp_start {
    void *(*fn)(void *);
    void *arg;
} hp_start_t;

static void *hp_thread_start(void *p)
{
    hp_start_t st = *(hp_start_t *)p;
    free(p);
    hp_arm_thread();
    return st.fn(st.arg);
}

/* Every thread the program, its libraries or the GPU driver start is sampled too. */
int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real)
        real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                        void *))dlsym(RTLD_NEXT, "pthread_create");
    hp_start_t *st = atomic_load(&hp_on) ? malloc(sizeof(*st)) : NULL;
    if (!st)
        return real(th, attr, fn, arg);
    st->fn  = fn;
    st->arg = arg;
    int rc  = real(th, attr, hp_thread_start, st);
    if (rc)
        free(st);
    return rc;
}

__attribute__((constructor)) static void hp_start(void)
{
    if (!getenv("HOSTPROF_OUT"))
        return;
    if (getenv("HOSTPROF_US") && atol(getenv("HOSTPROF_US")) > 0)
        hp_period_us = atol(getenv("HOSTPROF_US"));
    hp_buf = mmap(NULL, sizeof(*hp_buf) * HP_SAMPLES, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (hp_buf == MAP_FAILED)
        return;
    void *warm[4];
    backtrace(warm, 4); /* loads the unwinder now, not in a handler */
    struct sigaction sa = {0};
    sa.sa_sigaction     = hp_on_signal;
    sa.sa_flags         = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, NULL) != 0)
        return;
    atomic_store(&hp_on, 1);
    hp_arm_thread();
}

static int hp_cmp(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

__attribute__((destructor)) static void hp_stop(void)
{
    if (!atomic_exchange(&hp_on, 0))
        return;
    int n = atomic_load(&hp_n);
    if (n > HP_SAMPLES) {
        fprintf(stderr, "hostprof: %d samples, the first %d kept\n", n, HP_SAMPLES);
        n = HP_SAMPLES;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s.%d.txt", getenv("HOSTPROF_OUT"), (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "hostprof: cannot write %s\n", path);
        return;
    }
    char    exe[4096] = "?";
    ssize_t len       = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len > 0)
        exe[len] = 0;
    fprintf(f, "E %s\n", exe);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        fprintf(f, "S %d %d", hp_buf[i].tid, hp_buf[i].n);
        for (int j = 0; j < hp_buf[i].n; j++)
            fprintf(f, " %lx", (unsigned long)(uintptr_t)hp_buf[i].pc[j]);
        fputc('\n', f);
        total += (size_t)hp_buf[i].n;
    }
    uintptr_t *all = malloc((total ? total : 1) * sizeof(*all));
    if (all) {
        size_t k = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hp_buf[i].n; j++)
                all[k++] = (uintptr_t)hp_buf[i].pc[j];
        qsort(all, k, sizeof(*all), hp_cmp);
        for (size_t i = 0; i < k; i++) {
            if (i && all[i] == all[i - 1])
                continue;
            Dl_info d;
            if (dladdr((void *)all[i], &d) && d.dli_fname)
                fprintf(f, "A %lx %s %lx %s\n", (unsigned long)all[i],
                        d.dli_fname[0] ? d.dli_fname : exe,
                        (unsigned long)(all[i] - (uintptr_t)d.dli_fbase),
                        d.dli_sname ? d.dli_sname : "?");
            else
                fprintf(f, "A %lx ? 0 ?\n", (unsigned long)all[i]);
        }
        free(all);
    }
    fclose(f);
}

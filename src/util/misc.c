/* misc.c — memory wrappers, the pointer vector, option-value parsing, OS randomness. */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

void *tess_malloc(size_t size, const char *what)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        tess_error(TESS_ERR_NO_MEMORY, "cannot allocate %zu bytes for %s", size, what);
    return p;
}

void *tess_calloc(size_t n, size_t size, const char *what)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        tess_error(TESS_ERR_NO_MEMORY, "cannot allocate %zu x %zu bytes for %s", n, size, what);
    return p;
}

void *tess_aligned_alloc(size_t align, size_t size, const char *what)
{
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : 1) != 0) {
        tess_error(TESS_ERR_NO_MEMORY, "cannot allocate %zu bytes for %s", size, what);
        return NULL;
    }
    return p;
}

char *tess_strdup(const char *s, const char *what)
{
    size_t n = strlen(s) + 1;
    char  *d = tess_malloc(n, what);
    if (d)
        memcpy(d, s, n);
    return d;
}

tess_status_t tess_vec_push(tess_vec_t *v, void *item)
{
    if (v->count == v->cap) {
        size_t cap   = v->cap ? v->cap * 2 : 8;
        void **items = realloc(v->items, cap * sizeof(*items));
        if (!items)
            return tess_error(TESS_ERR_NO_MEMORY, "cannot grow a vector to %zu items", cap);
        v->items = items;
        v->cap   = cap;
    }
    v->items[v->count++] = item;
    return TESS_OK;
}

void tess_vec_swap_remove(tess_vec_t *v, size_t i)
{
    v->items[i] = v->items[--v->count];
}

void tess_vec_fini(tess_vec_t *v)
{
    free(v->items);
    memset(v, 0, sizeof(*v));
}

tess_status_t tess_parse_size(const char *s, size_t *size_p)
{
    char              *end;
    /* strtoull skips blanks and accepts a sign, wrapping "-1" to 2^64-1: a size is digits. */
    if (!isdigit((unsigned char)s[0]))
        return TESS_ERR_INVALID;
    errno              = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return TESS_ERR_INVALID;
    unsigned long long mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1ull << 10; end++; break;
    case 'm': case 'M': mult = 1ull << 20; end++; break;
    case 'g': case 'G': mult = 1ull << 30; end++; break;
    default: break;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0' || (mult > 1 && v > UINT64_MAX / mult))
        return TESS_ERR_INVALID;
    *size_p = (size_t)(v * mult);
    return TESS_OK;
}

tess_status_t tess_parse_int(const char *s, long lo, long hi, long *val_p)
{
    char *end;
    errno  = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return TESS_ERR_INVALID;
    *val_p = v;
    return TESS_OK;
}

tess_status_t tess_parse_bool(const char *s, int *val_p)
{
    static const char *const yes[] = {"1", "yes", "true", "on", "y"};
    static const char *const no[]  = {"0", "no", "false", "off", "n"};
    for (size_t i = 0; i < TESS_ARRAY_LEN(yes); i++) {
        if (!strcasecmp(s, yes[i])) {
            *val_p = 1;
            return TESS_OK;
        }
        if (!strcasecmp(s, no[i])) {
            *val_p = 0;
            return TESS_OK;
        }
    }
    return TESS_ERR_INVALID;
}

int tess_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return (int)(la > lb ? la : lb);
    int row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0]   = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up   = row[j];
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int v    = diag + cost;
            if (up + 1 < v)
                v = up + 1;
            if (row[j - 1] + 1 < v)
                v = row[j - 1] + 1;
            row[j] = v;
            diag   = up;
        }
    }
    return row[lb];
}

uint64_t tess_random64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
        v = tess_time_ns() ^ ((uint64_t)getpid() << 32);
    return v;
}

double tess_ticks_to_ns(uint64_t ticks)
{
#if defined(__x86_64__)
    /* Calibrated once against the monotonic clock over ~2 ms; racing threads compute the same
     * figure, so a relaxed publish is enough. */
    static _Atomic double ns_per_tick;
    double r = atomic_load_explicit(&ns_per_tick, memory_order_relaxed);
    if (r == 0.0) {
        uint64_t t0 = tess_time_ns(), c0 = tess_ticks();
        while (tess_time_ns() - t0 < 2000000)
            tess_cpu_relax();
        uint64_t t1 = tess_time_ns(), c1 = tess_ticks();
        r = c1 > c0 ? (double)(t1 - t0) / (double)(c1 - c0) : 1.0;
        atomic_store_explicit(&ns_per_tick, r, memory_order_relaxed);
    }
    return (double)ticks * r;
#else
    return (double)ticks;
#endif
}

#ifdef TESS_HOP_TRACE
static _Atomic uint64_t hop_last, hop_ticks[TESS_HOP_N], hop_count[TESS_HOP_N];

void tess_hop_mark(int stage)
{
    uint64_t now  = tess_ticks();
    uint64_t prev = atomic_exchange_explicit(&hop_last, now, memory_order_acq_rel);
    if (prev && now > prev) {
        atomic_fetch_add_explicit(&hop_ticks[stage], now - prev, memory_order_relaxed);
        atomic_fetch_add_explicit(&hop_count[stage], 1, memory_order_relaxed);
    }
}

void tess_hop_print(void)
{
    static const char *names[TESS_HOP_N] = {"entry", "query", "ctl-send", "ctl-transit",
                                            "post", "issue", "device"};
    if (!atomic_load(&hop_count[TESS_HOP_DONE]))
        return;
    fprintf(stderr, "tessera hop trace (ns, mean):");
    for (int i = 0; i < TESS_HOP_N; i++) {
        uint64_t n = atomic_load(&hop_count[i]);
        fprintf(stderr, " %s %.0f (%" PRIu64 ")", names[i],
                n ? tess_ticks_to_ns(atomic_load(&hop_ticks[i])) / (double)n : 0.0, n);
    }
    fprintf(stderr, "\n");
    for (int i = 0; i < TESS_HOP_N; i++) {
        atomic_store(&hop_ticks[i], 0);
        atomic_store(&hop_count[i], 0);
    }
    atomic_store(&hop_last, 0);
}
#endif

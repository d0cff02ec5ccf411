/* trace.c — per-thread trace buffers (lock-free appends, a mutex only to register a thread's
 * buffer once) and their serialisation as Chrome trace-event JSON. */
#include "util/trace.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tess_trace_on;

/* A thread's events, in chunks of TRACE_CHUNK (the last one partly filled): a buffer grows as
 * the run goes, up to trace_cap events, so that a long run is recorded whole without every
 * thread holding the largest buffer from its first event. */
#define TRACE_CHUNK 16384

typedef struct trace_chunk {
    struct trace_chunk *next;
    size_t              n;
    tess_trace_ev_t     ev[TRACE_CHUNK];
} trace_chunk_t;

typedef struct trace_buf {
    struct trace_buf *next;
    trace_chunk_t    *first, *last;
    size_t            n, cap; /* events in all chunks; at most cap */
    uint64_t          dropped;
} trace_buf_t;

static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static trace_buf_t    *trace_bufs;   /* guarded by trace_lock */
static size_t          trace_cap = 1 << 21;
static _Atomic unsigned trace_gen = 1; /* bumped by reset: stale thread pointers are dropped */

static _Thread_local trace_buf_t *trace_self;
static _Thread_local unsigned     trace_self_gen;
static _Thread_local uint32_t     trace_track = TESS_TRACK_OTHER;

void tess_trace_setup(int on, size_t events_per_thread)
{
    tess_trace_on = on;
    trace_cap     = events_per_thread < 1024 ? 1024 : events_per_thread;
}

void     tess_trace_thread_track(uint32_t track) { trace_track = track; }
uint32_t tess_trace_self_track(void) { return trace_track; }

/* One more chunk for b (its thread only); NULL when out of memory. */
static trace_chunk_t *trace_chunk_add(trace_buf_t *b)
{
    trace_chunk_t *c = malloc(sizeof(*c));
    if (!c)
        return NULL;
    c->next = NULL;
    c->n    = 0;
    if (b->last)
        b->last->next = c;
    else
        b->first = c;
    b->last = c;
    return c;
}

static trace_buf_t *trace_buf_new(void)
{
    trace_buf_t *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    if (!trace_chunk_add(b)) {
        free(b);
        return NULL;
    }
    b->cap = trace_cap;
    pthread_mutex_lock(&trace_lock);
    b->next    = trace_bufs;
    trace_bufs = b;
    pthread_mutex_unlock(&trace_lock);
    return b;
}

static inline void trace_copy(char *dst, size_t len, const char *src)
{
    size_t i = 0;
    if (src)
        for (; i + 1 < len && src[i]; i++)
            dst[i] = src[i];
    dst[i] = '\0';
}

void tess_trace_record(uint32_t track, tess_trace_kind_t kind, const char *cat, const char *name,
                       const char *sub, uint64_t ts, uint64_t dur, uint64_t a, uint64_t b)
{
    unsigned gen = atomic_load_explicit(&trace_gen, memory_order_relaxed);
    if (tess_unlikely(!trace_self || trace_self_gen != gen)) {
        trace_self     = trace_buf_new();
        trace_self_gen = gen;
        if (!trace_self)
            return;
    }
    trace_buf_t   *buf = trace_self;
    trace_chunk_t *c   = buf->last;
    if (tess_unlikely(buf->n == buf->cap || c->n == TRACE_CHUNK)) {
        if (buf->n == buf->cap || !(c = trace_chunk_add(buf))) {
            buf->dropped++;
            return;
        }
    }
    buf->n++;
    tess_trace_ev_t *e = &c->ev[c->n++];
    e->ts    = ts;
    e->dur   = dur;
    e->a     = a;
    e->b     = b;
    e->track = track;
    e->kind  = (uint8_t)kind;
    trace_copy(e->cat, sizeof(e->cat), cat);
    trace_copy(e->name, sizeof(e->name), name);
    trace_copy(e->sub, sizeof(e->sub), sub);
}

void tess_trace_counts(uint64_t *recorded_p, uint64_t *dropped_p)
{
    uint64_t n = 0, d = 0;
    pthread_mutex_lock(&trace_lock);
    for (trace_buf_t *b = trace_bufs; b; b = b->next) {
        n += b->n;
        d += b->dropped;
    }
    pthread_mutex_unlock(&trace_lock);
    *recorded_p = n;
    *dropped_p  = d;
}

void tess_trace_reset(void)
{
    pthread_mutex_lock(&trace_lock);
    trace_buf_t *b = trace_bufs;
    trace_bufs     = NULL;
    atomic_fetch_add(&trace_gen, 1);
    pthread_mutex_unlock(&trace_lock);
    while (b) {
        trace_buf_t *next = b->next;
        for (trace_chunk_t *c = b->first, *cn; c; c = cn) {
            cn = c->next;
            free(c);
        }
        free(b);
        b = next;
    }
    trace_self = NULL;
}

/* ---- serialisation ----------------------------------------------------------------------- */

typedef struct {
    char  *p;
    size_t len, cap;
    int    failed;
} sbuf_t;

static void sb_printf(sbuf_t *s, const char *fmt, ...) TESS_PRINTF(2, 3);
static void sb_printf(sbuf_t *s, const char *fmt, ...)
{
    if (s->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(s->p + s->len, s->cap - s->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            s->failed = 1;
            return;
        }
        if ((size_t)n < s->cap - s->len) {
            s->len += (size_t)n;
            return;
        }
        size_t cap = s->cap * 2 + (size_t)n;
        char  *p   = realloc(s->p, cap);
        if (!p) {
            s->failed = 1;
            return;
        }
        s->p   = p;
        s->cap = cap;
    }
}

/* A JSON string body: quotes, backslashes and control characters escaped. */
static const char *json_esc(const char *in, char *out, size_t len)
{
    size_t o = 0;
    for (; *in && o + 7 < len; in++) {
        unsigned char c = (unsigned char)*in;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, len - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
    return out;
}

typedef struct {
    sbuf_t                   *s;
    int                       pid;
    const tess_trace_clock_t *c;
    int                       first;
} ser_t;

static double ser_us(const ser_t *w, uint64_t ts)
{
    const tess_trace_clock_t *c   = w->c;
    double                    off = (double)c->off_a;
    if (c->t_b > c->t_a)
        off += (double)(c->off_b - c->off_a) * ((double)ts - (double)c->t_a) /
               (double)(c->t_b - c->t_a);
    return ((double)ts - off - (double)c->epoch) / 1000.0;
}

/* A duration on the reference clock: its end mapped like its start. */
static double ser_dur(const ser_t *w, const tess_trace_ev_t *e)
{
    return ser_us(w, e->ts + e->dur) - ser_us(w, e->ts);
}

static void ser_head(ser_t *w, const tess_trace_ev_t *e, char ph, const char *cat,
                     const char *name, uint64_t ts)
{
    char c[64], n[64];
    sb_printf(w->s, "%s{\"ph\":\"%c\",\"pid\":%d,\"tid\":%" PRIu32 ",\"ts\":%.3f,\"cat\":\"%s\","
              "\"name\":\"%s\"", w->first ? "" : ",\n", ph, w->pid, e->track, ser_us(w, ts),
              json_esc(cat, c, sizeof(c)), json_esc(name, n, sizeof(n)));
    w->first = 0;
}

static void ser_event(ser_t *w, const tess_trace_ev_t *e)
{
    char        sub[64];
    const char *cat = e->cat[0] ? e->cat : "tess";
    json_esc(e->sub, sub, sizeof(sub));
    switch ((tess_trace_kind_t)e->kind) {
    case TESS_TEV_SPAN:
        ser_head(w, e, 'X', cat, e->name, e->ts);
        sb_printf(w->s, ",\"dur\":%.3f,\"args\":{\"a\":%" PRIu64 ",\"b\":%" PRIu64 "}}",
                  ser_dur(w, e), e->a, e->b);
        break;
    case TESS_TEV_ENTRY:
        ser_head(w, e, 'X', "entry", e->name, e->ts);
        sb_printf(w->s, ",\"dur\":%.3f,\"args\":{\"array\":\"%s\",\"index\":%" PRId64
                  ",\"bytes\":%" PRIu64 "}}", ser_dur(w, e), sub, (int64_t)e->a, e->b);
        break;
    case TESS_TEV_IDLE:
        ser_head(w, e, 'X', "idle", "idle", e->ts);
        sb_printf(w->s, ",\"dur\":%.3f,\"args\":{\"poll_passes\":%" PRIu64 "}}",
                  ser_dur(w, e), e->a);
        break;
    case TESS_TEV_MSG:
    case TESS_TEV_DEVMSG:
    case TESS_TEV_RED_OUT: {
        const char *fcat = e->kind == TESS_TEV_MSG ? "msg"
                           : e->kind == TESS_TEV_DEVMSG ? "devmsg" : "reduction";
        ser_head(w, e, 'X', fcat, e->name, e->ts);
        sb_printf(w->s, ",\"dur\":%.3f,\"args\":{\"flow\":%" PRIu64 ",\"bytes\":%" PRIu64
                  ",\"path\":\"%s\"}}", ser_dur(w, e), e->a, e->b, sub);
        if (e->a) {
            ser_head(w, e, 'f', fcat, fcat, e->ts);
            sb_printf(w->s, ",\"bp\":\"e\",\"id\":%" PRIu64 "}", e->a);
        }
        break;
    }
    case TESS_TEV_COPY:
        ser_head(w, e, 'X', "gpu", e->name, e->ts);
        sb_printf(w->s, ",\"dur\":%.3f,\"args\":{\"path\":\"%s\",\"bytes\":%" PRIu64 "}}",
                  ser_dur(w, e), sub, e->b);
        break;
    case TESS_TEV_FLOW_OUT:
    case TESS_TEV_RED_IN: {
        const char *fcat = e->kind == TESS_TEV_RED_IN ? "reduction" : e->sub[0] ? "devmsg" : "msg";
        ser_head(w, e, 's', fcat, fcat, e->ts);
        sb_printf(w->s, ",\"id\":%" PRIu64 ",\"args\":{\"bytes\":%" PRIu64 ",\"path\":\"%s\","
                  "\"to\":\"%s\"}}", e->a, e->b, sub, e->name);
        break;
    }
    case TESS_TEV_FLOW_IN:
        ser_head(w, e, 'f', cat, cat, e->ts);
        sb_printf(w->s, ",\"bp\":\"e\",\"id\":%" PRIu64 "}", e->a);
        break;
    case TESS_TEV_INSTANT:
        ser_head(w, e, 'i', cat, e->name, e->ts);
        sb_printf(w->s, ",\"s\":\"t\",\"args\":{\"a\":%" PRIu64 ",\"b\":%" PRIu64 ",\"sub\":"
                  "\"%s\"}}", e->a, e->b, sub);
        break;
    case TESS_TEV_WAIT:
        ser_head(w, e, 'b', "gpu", e->name, e->ts);
        sb_printf(w->s, ",\"id\":%" PRIu64 ",\"args\":{\"stream\":\"%s\"}}", e->a, sub);
        ser_head(w, e, 'e', "gpu", e->name, e->ts + e->dur);
        sb_printf(w->s, ",\"id\":%" PRIu64 "}", e->a);
        break;
    default:
        break;
    }
}

tess_status_t tess_trace_serialize(int pid, const tess_trace_clock_t *clock, char **text_p,
                                   size_t *len_p)
{
    sbuf_t s = {.cap = 1 << 16};
    s.p      = malloc(s.cap);
    if (!s.p)
        return tess_error(TESS_ERR_NO_MEMORY, "trace: no memory to write the events");
    s.p[0]  = '\0';
    ser_t w = {.s = &s, .pid = pid, .c = clock, .first = 1};
    pthread_mutex_lock(&trace_lock);
    for (trace_buf_t *b = trace_bufs; b; b = b->next)
        for (trace_chunk_t *c = b->first; c; c = c->next)
            for (size_t i = 0; i < c->n; i++)
                ser_event(&w, &c->ev[i]);
    pthread_mutex_unlock(&trace_lock);
    if (s.failed) {
        free(s.p);
        return tess_error(TESS_ERR_NO_MEMORY, "trace: no memory to write the events");
    }
    *text_p = s.p;
    *len_p  = s.len;
    return TESS_OK;
}

/*
 * trace.h — the run-time timeline trace (TESS_TRACE=PATH): per-thread event buffers that every
 * layer records into with one-line calls, and their serialisation as Chrome trace-event JSON.
 * The MPI side (clock alignment, gathering, the file) is in src/core/trace.c.
 *
 * Cost when off: each site is `if (tess_unlikely(tess_trace_on))`, one predictable branch.
 *
 * Threads: tess_trace_on is written once by tess_trace_setup(), before any other thread of the
 * runtime starts, and only read afterwards. Every recording function may be called from any
 * thread; each thread appends to its own buffer (created on its first event, registered under a
 * mutex once per thread), so recording takes no lock. A buffer grows in chunks up to the
 * events per thread given to tess_trace_setup; past that it counts what it drops.
 * tess_trace_serialize() and tess_trace_reset() run alone, after every recording thread stopped.
 */
#ifndef TESS_UTIL_TRACE_H
#define TESS_UTIL_TRACE_H

#include "util/util.h"

extern int tess_trace_on;

/** Do `call` only when tracing. */
#define TESS_TRACE(call)                                                                       \
    do {                                                                                       \
        if (tess_unlikely(tess_trace_on))                                                      \
            call;                                                                              \
    } while (0)
/** A timestamp for a span's start when tracing, else 0 (no clock read). */
#define TESS_TRACE_NOW() (tess_unlikely(tess_trace_on) ? tess_time_ns() : 0)

/* Tracks (Chrome "tid") within a process: PEs are 0..ppn-1. */
#define TESS_TRACK_STREAM 1000 /* + stream id: work as the device saw it */
#define TESS_TRACK_OTHER  999  /* a thread that is not a PE */
#define TESS_TRACK_MPI    998  /* PE 0's quiescence waves in flight */
#define TESS_TRACK_LB     997  /* load-balancing steps, from start to resume */

/* What an event's numbers mean, which decides how it is written. */
typedef enum {
    TESS_TEV_SPAN,     /* X: name, cat; a, b unused */
    TESS_TEV_ENTRY,    /* X: name = entry, sub = array; a = index, b = message bytes */
    TESS_TEV_IDLE,     /* X: "idle"; a = scheduler passes that only polled */
    TESS_TEV_MSG,      /* X: delivery of a core message; a = flow id ending here, b = bytes */
    TESS_TEV_DEVMSG,   /* X: delivery of a device message; a = flow id, b = bytes, sub = path */
    TESS_TEV_COPY,     /* X on a stream: device copy; sub = path, b = bytes */
    TESS_TEV_FLOW_OUT, /* s: a = flow id, b = bytes, sub = path or "" */
    TESS_TEV_INSTANT,  /* i: name, cat; a, b as given */
    TESS_TEV_WAIT,     /* b/e async pair: continuation wait; a = id, dur, sub = stream */
    TESS_TEV_RED_IN,   /* s: reduction contribution; a = flow id */
    TESS_TEV_RED_OUT,  /* X: reduction callback; a = flow id */
    TESS_TEV_FLOW_IN,  /* f: a = flow id ending in the enclosing span; cat names the flow */
    TESS_TEV_NKINDS
} tess_trace_kind_t;

typedef struct tess_trace_ev {
    uint64_t ts;  /* ns, tess_time_ns() clock of this process */
    uint64_t dur; /* ns */
    uint64_t a, b;
    uint32_t track;
    uint8_t  kind;
    char     cat[11];
    char     name[24];
    char     sub[24];
} tess_trace_ev_t;

/** Turn tracing on (at most this many events per thread, at least 1024) or off; before threads
 *  start. */
void tess_trace_setup(int on, size_t events_per_thread);
/** Track of the calling thread's events (a PE sets its local index when it starts). */
void tess_trace_thread_track(uint32_t track);
uint32_t tess_trace_self_track(void);

/** Append one event (see tess_trace_kind_t); strings are copied, truncated to fit. */
void tess_trace_record(uint32_t track, tess_trace_kind_t kind, const char *cat, const char *name,
                       const char *sub, uint64_t ts, uint64_t dur, uint64_t a, uint64_t b);

/** A span on the calling thread's track from t0 to now. */
static inline void tess_trace_span(const char *cat, const char *name, uint64_t t0, uint64_t a,
                                   uint64_t b)
{
    tess_trace_record(tess_trace_self_track(), TESS_TEV_SPAN, cat, name, NULL, t0,
                      tess_time_ns() - t0, a, b);
}

/** Events recorded and dropped (buffers full) over all threads so far. */
void tess_trace_counts(uint64_t *recorded_p, uint64_t *dropped_p);

/** How this process's clock maps to the reference clock: off_a ns ahead of it at local time
 *  t_a, off_b at t_b (linear in between and beyond); epoch: reference time of ts 0. */
typedef struct tess_trace_clock {
    uint64_t t_a, t_b;
    int64_t  off_a, off_b;
    uint64_t epoch;
} tess_trace_clock_t;

/** Chrome trace events (comma-separated JSON objects, no brackets) of every buffer of this
 *  process, process `pid`, timestamps in microseconds of the reference clock since its epoch.
 *  *text_p is malloc'ed. */
tess_status_t tess_trace_serialize(int pid, const tess_trace_clock_t *clock, char **text_p,
                                   size_t *len_p);
/** Free every buffer (threads must record again to get new ones). */
void tess_trace_reset(void);

#endif /* TESS_UTIL_TRACE_H */

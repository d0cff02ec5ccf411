/*
 * trace.h (core) — the process side of the timeline trace: turning it on from the options,
 * clocks aligned across processes with MPI (at init and at finalize), device-timed spans on
 * streams, and the one file per job written by rank 0 at finalize. Recording itself is
 * util/trace.h; every layer from core up records through the two headers.
 *
 * Threads:
 *   - tess_core_trace_init/fini: the main thread, from tess_core_init/fini (MPI collective).
 *   - tess_core_trace_dev_begin/end, tess_core_trace_phase_end: PE threads; each keeps its own
 *     pending device spans and timing events, resolved when its phase loop ends.
 *   - the rest: any thread.
 */
#ifndef TESS_CORE_TRACE_H
#define TESS_CORE_TRACE_H

#include "core/core.h"
#include "util/trace.h"

tess_status_t tess_core_trace_init(void);
/** Write the trace (rank 0 gathers every process's events) and free everything. */
void tess_core_trace_fini(void);

/** Device-message copies are timed on the device (TESS_TRACE_COPIES; 0 when not tracing). */
extern int tess_core_trace_copies;

/** Flow id of the seq-th message sent by global PE `pe` (never 0). */
static inline uint64_t tess_core_trace_flow(int pe, uint32_t seq)
{
    return ((uint64_t)(uint32_t)(pe + 1) << 32) | seq;
}
#define TESS_TRACE_FLOW_DEV (1ull << 63) /* device-message flows: the ctl message's id | this */

/** The flow id the next tess_core_send of the calling PE gives its message (0 off a PE). */
uint64_t tess_core_trace_next_flow(void);

/** The track of a stream: TESS_TRACK_STREAM + its index in the pool; a stream outside the
 *  pool + pool size + 1 + the calling PE's index in its process (a PE's own streams: its
 *  batch stream, its copy streams), or + pool size off a PE. */
uint32_t tess_core_trace_stream_track(tess_gpu_stream_h s);

/** Record a timing event on `s`; returns a handle for tess_core_trace_dev_end, -1 if none. */
int  tess_core_trace_dev_begin(tess_gpu_stream_h s);
/** Record the end event on `s`: the span between the two as the device ran them goes on the
 *  stream's track (kind TESS_TEV_SPAN or TESS_TEV_COPY) once this PE's phase loop ends. */
void tess_core_trace_dev_end(int h, tess_gpu_stream_h s, tess_trace_kind_t kind,
                             const char *name, const char *sub, uint64_t bytes);
/** A PE starts its phase loop: place the device clock on the host's while the device is idle. */
void tess_core_trace_phase_begin(void);
/** Resolve this thread's device spans (their events are waited for). */
void tess_core_trace_phase_end(void);

/** Name of a device-message path for traces: d2d, ipc-staged, ipc-direct, rdma. */
extern const char *const tess_core_trace_path_names[4];

#endif /* TESS_CORE_TRACE_H */

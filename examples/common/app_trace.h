/*
 * app_trace.h — a timeline of a pure MPI driver in the format of Tessera's trace (TESS_TRACE=PATH,
 * Chrome trace-event JSON), so that tools/tess-trace can draw it next to a Tessera run. Host
 * spans on one track per rank ("MPI rank R"); clocks aligned by an MPI barrier in
 * app_trace_init (to within its exit skew). Main thread only; off (one branch) without
 * TESS_TRACE.
 */
#ifndef APP_TRACE_H
#define APP_TRACE_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define APP_TRACE_MAX 200000

typedef struct {
    const char *name;
    double      t0, t1; /* seconds since the barrier */
} app_span_t;

static struct {
    const char *path;
    app_span_t *spans;
    int         n;
    double      base;
} app_tr;

static inline double app_trace_now(void) { return MPI_Wtime() - app_tr.base; }

/* Collective. */
static inline void app_trace_init(void)
{
    const char *p = getenv("TESS_TRACE");
    int         on = p && *p, all = 0;
    MPI_Allreduce(&on, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all)
        return;
    app_tr.spans = malloc(sizeof(app_span_t) * APP_TRACE_MAX);
    if (!app_tr.spans)
        return;
    app_tr.path = p;
    MPI_Barrier(MPI_COMM_WORLD);
    app_tr.base = app_trace_now();
}

static inline double app_trace_begin(void) { return app_tr.path ? app_trace_now() : 0; }

static inline void app_trace_end(const char *name, double t0)
{
    if (app_tr.path && app_tr.n < APP_TRACE_MAX)
        app_tr.spans[app_tr.n++] = (app_span_t){name, t0, app_trace_now()};
}

/* Collective: rank 0 writes the file. */
static inline void app_trace_write(void)
{
    if (!app_tr.path)
        return;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t cap = 256 + (size_t)app_tr.n * 160, len = 0;
    char  *txt = malloc(cap);
    len += (size_t)snprintf(txt + len, cap - len,
                            "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":"
                            "\"rank %d\"}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":"
                            "\"thread_name\",\"args\":{\"name\":\"MPI rank %d\"}}", rank, rank,
                            rank, rank);
    for (int i = 0; i < app_tr.n; i++)
        len += (size_t)snprintf(txt + len, cap - len,
                                ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,"
                                "\"cat\":\"mpi-app\",\"name\":\"%s\"}", rank,
                                app_tr.spans[i].t0 * 1e6,
                                (app_tr.spans[i].t1 - app_tr.spans[i].t0) * 1e6,
                                app_tr.spans[i].name);
    int  mine = (int)len, *lens = NULL, *displs = NULL;
    char *all = NULL;
    if (rank == 0)
        lens = calloc((size_t)size, sizeof(int));
    MPI_Gather(&mine, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        displs = calloc((size_t)size, sizeof(int));
        int tot = 0;
        for (int r = 0; r < size; r++) {
            displs[r] = tot;
            tot += lens[r];
        }
        all = malloc((size_t)tot + 1);
    }
    MPI_Gatherv(txt, mine, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        FILE *f = fopen(app_tr.path, "w");
        if (f) {
            fputs("{\"traceEvents\":[\n", f);
            for (int r = 0; r < size; r++) {
                if (r)
                    fputs(",\n", f);
                fwrite(all + displs[r], 1, (size_t)lens[r], f);
            }
            fprintf(f, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"ranks\":%d,"
                    "\"dropped_events\":0,\"clock\":\"MPI_Barrier\"}}\n", size);
            fclose(f);
        } else {
            fprintf(stderr, "cannot write the trace %s\n", app_tr.path);
        }
    }
    free(all);
    free(lens);
    free(displs);
    free(txt);
    free(app_tr.spans);
    app_tr.path = NULL;
}

#endif /* APP_TRACE_H */

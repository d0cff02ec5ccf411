/* graph.c — step graphs (tess_gpu_graph_run): an element's stream work recorded once into a
 * graph per slot and replayed as one launch on its stream.
 *
 * A record function runs with the element's stream swapped for its PE's capture stream (made
 * on first use, used for nothing else: elements share pool streams, and another thread's work
 * on a stream being recorded would be recorded too), so code that launches on tess_ctx_stream
 * is recorded unchanged. While it runs, calls that a graph cannot hold or that would act at
 * record time only (sends, continuations, a stream sync, a nested graph) are misuse.
 *
 * The graphs of an element live in a per-PE side table keyed by (array, linear index), not in
 * its header (every element pays for the header). They are dropped when the element leaves the
 * PE (migration: its device pointers change), when it is destroyed, on tess_gpu_graph_reset and
 * on restart from a checkpoint; they are never packed. A graph whose replay may still run is
 * destroyed safely: the backends free it after its launches.
 *
 * A slot keeps the graphs of its GRAPH_WAYS most recently used keys: a slot whose key alternates
 * between a few values (MiniMD: which ghosts landed in place depends on the neighbours' pace)
 * replays them all. A key is recorded at its second call, its first (while the slot remembers
 * no earlier call of it) runs the record function directly: a key used once (MiniMD: the step
 * before a rebuild) costs no recording. Recording into a full slot replaces its least recently
 * used graph, updated in place where the backend can (graph_end_update: the same operations
 * with other arguments). */
#include "objects.h"

#include <stdio.h>
#include <stdlib.h>

#define GRAPH_WAYS 4 /* keys a slot keeps graphs of at once, and remembers first calls of */

typedef struct obj_graph_slot {
    uint64_t         key[GRAPH_WAYS];
    tess_gpu_graph_h g[GRAPH_WAYS];    /* NULL: an empty way */
    uint32_t         last[GRAPH_WAYS]; /* when way w was last used (the element's clock) */
    uint64_t         seen[GRAPH_WAYS]; /* keys whose first call ran directly, not recorded yet */
    uint8_t          nseen, next_seen; /* how many; which goes next when all are taken */
} obj_graph_slot_t;

typedef struct obj_graph_elem {
    uint32_t         clock; /* counts the element's calls */
    obj_graph_slot_t slot[TESS_GPU_GRAPH_SLOTS];
} obj_graph_elem_t;

/* The element whose record function runs on this thread, or NULL; and where its
 * tess_gpu_graph_run was called (the location of misuse reported by lower layers). */
_Thread_local tess_ctx_h   tess_obj_graph_rec;
static _Thread_local const char *graph_file;
static _Thread_local int         graph_line;

_Noreturn static void graph_guard(const char *call)
{
    tess_obj_misuse(graph_file, graph_line, "%s inside a step graph's record function (it only "
                    "enqueues stream work, which later steps replay without calling it)", call);
}

void tess_obj_graph_misuse(const char *what, const char *file, int line)
{
    tess_obj_misuse(file, line, "%s inside a step graph's record function (it only enqueues "
                    "stream work, which later steps replay without calling it)", what);
}

static void graph_elem_free(obj_graph_elem_t *ge)
{
    for (int s = 0; s < TESS_GPU_GRAPH_SLOTS; s++)
        for (int w = 0; w < GRAPH_WAYS; w++)
            if (ge->slot[s].g[w])
                tess_gpu->graph_destroy(ge->slot[s].g[w]);
    free(ge);
}

/* Whether the slot remembers a first call of key, forgetting it if so (it is recorded now);
 * else remembers it (the oldest such key goes when all ways are taken). */
static bool graph_seen_before(obj_graph_slot_t *sl, uint64_t key)
{
    for (int i = 0; i < sl->nseen; i++)
        if (sl->seen[i] == key) {
            sl->seen[i] = sl->seen[--sl->nseen];
            return true;
        }
    if (sl->nseen < GRAPH_WAYS) {
        sl->seen[sl->nseen++] = key;
    } else {
        sl->seen[sl->next_seen] = key;
        sl->next_seen           = (uint8_t)((sl->next_seen + 1) % GRAPH_WAYS);
    }
    return false;
}

void tess_obj_graph_drop(obj_pe_t *op, tess_ctx_h e)
{
    if (!op->have_graphs || !op->graphs.count)
        return;
    obj_graph_elem_t *ge = tess_hmap_remove(&op->graphs, tess_obj_key(e->array->id, e->linear));
    if (ge)
        graph_elem_free(ge);
}

void tess_obj_graph_drop_any(tess_ctx_h e)
{
    for (int l = 0; l < tess_rt.ppn; l++) {
        tess_pe_t *pe = tess_core_pe_by_local(l);
        obj_pe_t  *op = pe ? *tess_core_pe_slot(pe, TESS_SLOT_OBJECTS) : NULL;
        if (op)
            tess_obj_graph_drop(op, e);
    }
}

void tess_obj_graph_pe_fini(obj_pe_t *op)
{
    if (tess_cfg.verbose && (op->graph_new || op->graph_direct))
        fprintf(stderr, "[tessera] process %d PE %d step graphs: %llu replays; %llu first calls "
                "of a key run directly; %llu recorded as new graphs, %llu into the slot's graph "
                "(updated in place)\n",
                tess_rt.rank, op->local, (unsigned long long)op->graph_replayed,
                (unsigned long long)op->graph_direct, (unsigned long long)op->graph_new,
                (unsigned long long)op->graph_updated);
    if (op->have_graphs) {
        uint64_t k;
        void    *v;
        for (size_t it = 0; tess_hmap_next(&op->graphs, &it, &k, &v);)
            graph_elem_free(v);
        tess_hmap_fini(&op->graphs);
        op->have_graphs = 0;
    }
    if (op->graph_stream) {
        tess_gpu->stream_destroy(op->graph_stream);
        op->graph_stream = NULL;
    }
}

/* Call record with the element's stream being `s` (NULL: its own), the guards set. */
static void graph_call(tess_ctx_h e, tess_gpu_stream_h s, tess_gpu_record_fn_t record, void *arg,
                       const char *file, int line)
{
    graph_file = file;
    graph_line = line;
    tess_gpu_stream_h own = e->stream;
    if (s)
        e->stream = s;
    tess_obj_graph_rec    = e;
    tess_gpu_record_guard = graph_guard;
    record(e, tess_obj_state(e), arg);
    tess_gpu_record_guard = NULL;
    tess_obj_graph_rec    = NULL;
    e->stream             = own;
}

/* Record what record enqueues into a graph, on the PE's capture stream: `old` (if any) updated
 * to it where the backend can and the shapes match (*g_p == old then), else a new graph. */
static tess_status_t graph_record(obj_pe_t *op, tess_ctx_h e, tess_gpu_record_fn_t record,
                                  void *arg, tess_gpu_graph_h old, tess_gpu_graph_h *g_p,
                                  const char *file, int line)
{
    tess_status_t st;
    if (!op->graph_stream && (st = tess_gpu->stream_create(&op->graph_stream)) != TESS_OK)
        return st;
    if ((st = tess_gpu->graph_begin(op->graph_stream)) != TESS_OK)
        return st;
    graph_call(e, op->graph_stream, record, arg, file, line);
    if (old && tess_gpu->graph_end_update)
        return tess_gpu->graph_end_update(op->graph_stream, old, g_p);
    return tess_gpu->graph_end(op->graph_stream, g_p);
}

static obj_graph_elem_t *graph_elem_of(obj_pe_t *op, tess_ctx_h e)
{
    uint64_t k = tess_obj_key(e->array->id, e->linear);
    if (!op->have_graphs) {
        if (tess_hmap_init(&op->graphs, 64) != TESS_OK)
            return NULL;
        op->have_graphs = 1;
    }
    obj_graph_elem_t *ge = tess_hmap_get(&op->graphs, k);
    if (ge)
        return ge;
    if (!(ge = tess_calloc(1, sizeof(*ge), "an element's step graphs")))
        return NULL;
    if (tess_hmap_put(&op->graphs, k, ge) != TESS_OK) {
        free(ge);
        return NULL;
    }
    return ge;
}

/* TESS_CHECK: record again and compare with the graph about to be replayed. */
static void graph_check(obj_pe_t *op, tess_ctx_h e, int slot, tess_gpu_graph_h g,
                        tess_gpu_record_fn_t record, void *arg, const char *file, int line)
{
    char             why[400], idx[48];
    tess_gpu_graph_h scratch = NULL;
    tess_status_t    st      = graph_record(op, e, record, arg, NULL, &scratch, file, line);
    if (st != TESS_OK)
        tess_fatal("TESS_CHECK: step graph in slot %d of element %s of array '%s': recording "
                   "it again for the check failed: %s", slot,
                   tess_obj_elem_text(e, idx, sizeof(idx)), e->array->name, tess_error_detail());
    int differ = tess_gpu->graph_compare(g, scratch, why, sizeof(why));
    tess_gpu->graph_destroy(scratch);
    if (differ)
        tess_fatal("TESS_CHECK: step graph in slot %d of element %s of array '%s' replayed "
                   "stale: %s; the key must cover what the recorded work depends on, and values "
                   "that change every step must be read from device memory",
                   slot, tess_obj_elem_text(e, idx, sizeof(idx)), e->array->name, why);
}

/* The checks of a call taking ctx: a phase, an element of this PE. */
static obj_pe_t *graph_check_ctx(tess_ctx_h ctx, const char *what, const char *file, int line)
{
    tess_obj_check_init(what, file, line);
    obj_pe_t *op = tess_obj_pe();
    if (tess_unlikely(!op || !tess_core_in_phase()))
        tess_obj_misuse(file, line, "%s outside a phase", what);
    if (tess_unlikely(!ctx || (ctx != op->current && !tess_obj_elem_is_on(op, ctx))))
        tess_obj_misuse(file, line, "%s with a ctx that is not an element of this PE", what);
    if (tess_unlikely(tess_obj_graph_rec))
        tess_obj_graph_misuse(what, file, line);
    return op;
}

tess_status_t tess_gpu_graph_run_loc(tess_ctx_h ctx, int slot, uint64_t key,
                                     tess_gpu_record_fn_t record, void *arg, const char *file,
                                     int line)
{
    obj_pe_t *op = graph_check_ctx(ctx, "tess_gpu_graph_run", file, line);
    tess_obj_check_batch(op, ctx, "tess_gpu_graph_run", file, line);
    if (tess_unlikely(slot < 0 || slot >= TESS_GPU_GRAPH_SLOTS))
        tess_obj_misuse(file, line, "tess_gpu_graph_run in slot %d (slots are 0 to %d)", slot,
                        TESS_GPU_GRAPH_SLOTS - 1);
    if (tess_unlikely(!record))
        tess_obj_misuse(file, line, "tess_gpu_graph_run with a NULL record function");
    if (!tess_cfg.graphs || !tess_gpu->graph_begin) {
        graph_call(ctx, NULL, record, arg, file, line);
        return TESS_OK;
    }
    obj_graph_elem_t *ge = graph_elem_of(op, ctx);
    if (!ge)
        return TESS_ERR_NO_MEMORY;
    obj_graph_slot_t *sl  = &ge->slot[slot];
    uint32_t          now = ++ge->clock;
    int               w   = 0;
    for (int i = 0; i < GRAPH_WAYS; i++) {
        if (sl->g[i] && sl->key[i] == key) {
            sl->last[i] = now;
            if (tess_unlikely(tess_cfg.check))
                graph_check(op, ctx, slot, sl->g[i], record, arg, file, line);
            op->graph_replayed++;
            return tess_gpu->graph_launch(sl->g[i], ctx->stream);
        }
        if (sl->g[w] && (!sl->g[i] || sl->last[i] < sl->last[w]))
            w = i; /* an empty way, else the least recently used */
    }
    if (!graph_seen_before(sl, key)) { /* its first call: run it directly */
        op->graph_direct++;
        graph_call(ctx, NULL, record, arg, file, line);
        return TESS_OK;
    }
    /* Its second: recorded into way w, whose graph (if any) the backend updates in place where
     * it can (the same operations with other arguments: far cheaper than a new graph). */
    tess_gpu_graph_h old = sl->g[w];
    tess_gpu_graph_h g   = NULL;
    sl->g[w]             = NULL;
    tess_status_t st = graph_record(op, ctx, record, arg, old, &g, file, line);
    if (old && (st != TESS_OK || g != old))
        tess_gpu->graph_destroy(old);
    if (st != TESS_OK)
        return st;
    if (g == old)
        op->graph_updated++;
    else
        op->graph_new++;
    sl->g[w]    = g;
    sl->key[w]  = key;
    sl->last[w] = now;
    return tess_gpu->graph_launch(g, ctx->stream);
}

tess_status_t tess_gpu_graph_reset_loc(tess_ctx_h ctx, const char *file, int line)
{
    obj_pe_t *op = graph_check_ctx(ctx, "tess_gpu_graph_reset", file, line);
    tess_obj_graph_drop(op, ctx);
    return TESS_OK;
}

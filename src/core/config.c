/* config.c — every runtime option in one table: its TESS_* variable, its +flag, default, range
 * and help text. Values come from the defaults, then tess_params_t, then the environment, then
 * the command line (which is removed from argv). */
#include "core_int.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

tess_config_t tess_cfg;

typedef enum { OPT_INT, OPT_BOOL, OPT_SIZE, OPT_STR, OPT_LOG } opt_type_t;

typedef struct opt {
    tess_option_info_t info;
    opt_type_t         type;
    size_t             offset;
    size_t             len;     /* OPT_STR: buffer size */
    long               lo, hi;  /* OPT_INT range; OPT_SIZE: minimum, maximum (0: none) */
    const char        *choices; /* OPT_STR: '|'-separated allowed values, NULL = any */
    int                zero_ok; /* OPT_SIZE: 0 is allowed besides [lo, hi] (0: off/default) */
} opt_t;

#define CFG(f) offsetof(tess_config_t, f), sizeof(((tess_config_t *)0)->f)

static const opt_t opts[] = {
    {{"ppn", "TESS_PPN", "+ppn", "1", "PEs (worker threads) per process"},
     OPT_INT, CFG(ppn), 1, 1024, NULL, 0},
    {{"log", "TESS_LOG", "+tess-log", "warn", "log level: error, warn, info, debug, trace"},
     OPT_LOG, CFG(log_level), 0, 0, NULL, 0},
    {{"spin_us", "TESS_SPIN_US", "+tess-spin", "100",
      "microseconds an idle PE spins before it blocks"},
     OPT_INT, CFG(spin_us), 0, 10000000, NULL, 0},
    {{"spin_yield_us", "TESS_SPIN_YIELD_US", NULL, "-1",
      "microseconds into its spin after which an idle PE yields its core on every pass "
      "(sched_yield), so that a thread woken on that core runs at once (at or above "
      "TESS_SPIN_US: never; -1: 2 where the node's PEs are at least as many as its cores or "
      "a process's PEs more than the cores it may run on, else never)"},
     OPT_INT, CFG(spin_yield_us), -1, 10000000, NULL, 0},
    {{"bind", "TESS_BIND", "+tess-bind", "0", "bind each PE to its own core (hwloc)"},
     OPT_BOOL, CFG(bind), 0, 1, NULL, 0},
    {{"verbose", "TESS_VERBOSE", "+tess-verbose", "0",
      "print the process, PE and GPU mapping at init, and each process's device-message "
      "counts at finalize"},
     OPT_BOOL, CFG(verbose), 0, 1, NULL, 0},
    {{"gpu", "TESS_GPU", "+tess-gpu", "auto", "device backend: auto, host, cuda, hip"},
     OPT_STR, CFG(gpu), 0, 0, "auto|host|cuda|hip", 0},
    {{"streams", "TESS_STREAMS", "+tess-streams", "64",
      "streams in the per-process pool; each PE's elements share the PE's part of it (the "
      "pool over the PEs, at least one stream) round-robin, so no two PEs share a stream "
      "while there is one for each; as many as PEs: one stream a PE, which batched launches "
      "want (`tess_gpu_batch`: a batch waits for each distinct stream, and each waits for it)"},
     OPT_INT, CFG(streams), 1, 65536, NULL, 0},
    {{"host_threads", "TESS_HOST_THREADS", NULL, "1",
      "host backend: executor threads per process"},
     OPT_INT, CFG(host_threads), 1, 64, NULL, 0}, /* the backend's TESS_GPU_HOST_MAX_THREADS */
    {{"host_arena", "TESS_HOST_ARENA", NULL, "256m",
      "host backend: bytes per shared-memory arena segment (at least 1m)"},
     OPT_SIZE, CFG(host_arena), 1 << 20, 0, NULL, 0},
    {{"host_device_memory", "TESS_HOST_DEVICE_MEMORY", NULL, "0",
      "host backend: the device's memory size, per process: an allocation that would take "
      "the process's device memory past it fails as out of memory, as on a full GPU "
      "(0: no limit; else at least 64k)"},
     OPT_SIZE, CFG(host_device_memory), 64 << 10, 0, NULL, 1},
    {{"host_pinned_memory", "TESS_HOST_PINNED_MEMORY", NULL, "0",
      "host backend: the pinned host memory a process may allocate: past it an allocation "
      "fails as out of memory, as where the system will not pin more (0: no limit; else at "
      "least 64k)"},
     OPT_SIZE, CFG(host_pinned_memory), 64 << 10, 0, NULL, 1},
    {{"host_jitter_us", "TESS_HOST_JITTER_US", NULL, "0",
      "host backend: random delay before each device operation (finds ordering bugs)"},
     OPT_INT, CFG(host_jitter_us), 0, 1000000, NULL, 0},
    {{"host_fault_kernel", "TESS_HOST_FAULT_KERNEL", NULL, "0",
      "host backend: the N-th host kernel a process runs faults, as one with an illegal "
      "access on a GPU: from then on nothing the device runs takes effect and every query fails "
      "(tests the runtime's handling of a failed device; 0: never)"},
     OPT_INT, CFG(host_fault_kernel), 0, 1 << 30, NULL, 0},
    {{"host_devices", "TESS_HOST_DEVICES", NULL, "1",
      "host backend: number of devices it presents per node"},
     OPT_INT, CFG(host_devices), 1, 64, NULL, 0},
    {{"vnode_size", "TESS_VNODE_SIZE", NULL, "0",
      "group every k consecutive ranks into a virtual node (0: physical nodes)"},
     OPT_INT, CFG(vnode_size), 0, 1 << 20, NULL, 0},
    {{"devcomm_path", "TESS_DEVCOMM_PATH", NULL, "auto",
      "force the device-message path: auto, d2d, ipc, rdma"},
     OPT_STR, CFG(devcomm_path), 0, 0, "auto|d2d|ipc|rdma", 0},
    {{"ipc", "TESS_IPC", NULL, "auto", "same-node device messages: auto, staged, direct"},
     OPT_STR, CFG(ipc), 0, 0, "auto|staged|direct", 0},
    {{"batch_stream", "TESS_BATCH_STREAM", NULL, "auto",
      "batched same-process device receives for several elements: their copies as one "
      "launch on a stream of the PE, which waits for their streams and senders (on), or one "
      "launch per element stream (off); adapt: on while the PE is host-bound (receiving "
      "streams found idle), off while the GPU is behind; auto: adapt where the backend "
      "copies a batch in one launch, else off"},
     OPT_STR, CFG(batch_stream), 0, 0, "auto|adapt|on|off", 0},
    {{"comm_buf", "TESS_COMM_BUF", NULL, "64m",
      "staged IPC: device comm buffer per process (at least 64k)"},
     OPT_SIZE, CFG(comm_buf), 64 << 10, 0, NULL, 0},
    {{"ipc_part", "TESS_IPC_PART", NULL, "0",
      "staged IPC: largest part of a message through the comm buffer (0: half of it; else at "
      "least 4k)"},
     OPT_SIZE, CFG(ipc_part), 4 << 10, 0, NULL, 1},
    {{"ipc_events", "TESS_IPC_EVENTS", NULL, "256",
      "staged IPC: interprocess events per process"},
     OPT_INT, CFG(ipc_events), 1, 1 << 20, NULL, 0},
    {{"rdma", "TESS_RDMA", NULL, "auto",
      "inter-node device messages: auto, direct (UCX get into device memory), staged"},
     OPT_STR, CFG(rdma), 0, 0, "auto|direct|staged", 0},
    {{"rdma_ack_max", "TESS_RDMA_ACK_MAX", NULL, "32",
      "direct RDMA: sends one coalesced acknowledgement names at most (1: one "
      "acknowledgement a message)"},
     OPT_INT, CFG(rdma_ack_max), 1, 64, NULL, 0},
    {{"rdma_ack_hold_us", "TESS_RDMA_ACK_HOLD_US", NULL, "10",
      "direct RDMA: longest an idle receiver holds an acknowledgement back for the sender's "
      "other gets in flight (0: until the next idle pass)"},
     OPT_INT, CFG(rdma_ack_hold_us), 0, 1000000, NULL, 0},
    {{"bounce_chunk", "TESS_BOUNCE_CHUNK", NULL, "1m",
      "staged RDMA: pipeline chunk size (at least 4k)"},
     OPT_SIZE, CFG(bounce_chunk), 4 << 10, 0, NULL, 0},
    {{"bounce_count", "TESS_BOUNCE_COUNT", NULL, "8",
      "staged RDMA: pinned bounce buffers per process"},
     OPT_INT, CFG(bounce_count), 1, 4096, NULL, 0},
    {{"lb", "TESS_LB", "+tess-lb", "greedyrefine",
      "load balancer: greedy, refine, greedyrefine, hybrid, evencount, rotate, none"},
     OPT_STR, CFG(lb), 0, 0, NULL, 0},
    {{"lb_target", "TESS_LB_TARGET", "+tess-lb-target", "auto",
      "what the balancer evens out: pe, process, gpu, auto (gpu where the job has more than "
      "one GPU, else pe: with one GPU, gpu is one bin and nothing moves)"},
     OPT_STR, CFG(lb_target), 0, 0, "auto|pe|process|gpu", 0},
    {{"lb_gpu_time", "TESS_LB_GPU_TIME", NULL, "0",
      "measure each element's GPU time with events for load balancing"},
     OPT_BOOL, CFG(lb_gpu_time), 0, 1, NULL, 0},
    {{"gpu_poll", "TESS_GPU_POLL", NULL, "auto",
      "how PEs see GPU work complete: signal (the stream writes a word of host memory, read "
      "without a driver call), event (query events), auto (signal where the backend can, on "
      "a GPU that at most 2 PEs use, of all the processes on it)"},
     OPT_STR, CFG(gpu_poll), 0, 0, "auto|signal|event", 0},
    {{"collective_timeout", "TESS_COLLECTIVE_TIMEOUT", NULL, "300",
      "seconds a collective call (tess_run, tess_array_create, ...) waits for every process "
      "to enter it before it aborts the job naming those that did not; warnings naming them "
      "come at 10, 20, 40 ... s (0: wait for ever)"},
     OPT_INT, CFG(collective_timeout), 0, 1 << 30, NULL, 0},
    {{"peer_failure", "TESS_PEER_FAILURE", NULL, "1",
      "UCX reports a peer process that is gone (killed, crashed, its node lost), which ends "
      "the job naming it; endpoints then use only transports that can tell (shared memory "
      "with its keepalive, UCX_KEEPALIVE_INTERVAL); 0: UCX's full choice, and such a peer is "
      "waited for"},
     OPT_BOOL, CFG(peer_failure), 0, 1, NULL, 0},
    {{"mpi_poll_us", "TESS_MPI_POLL_US", NULL, "1000",
      "longest sleep of an idle PE 0 between MPI polls"},
     OPT_INT, CFG(mpi_poll_us), 10, 1000000, NULL, 0},
    {{"net_lanes", "TESS_NET_LANES", NULL, "0",
      "UCX workers per process: 0 (one per PE: messages are ordered per sending PE, not across "
      "a process's PEs) or 1 (every PE sends through one, behind its lock: the rate of one PE)"},
     OPT_INT, CFG(net_lanes), 0, 1, NULL, 0},
    {{"net_serve_us", "TESS_NET_SERVE_US", NULL, "20",
      "an idle PE progresses the UCX workers of other PEs (which may be busy in long entries) "
      "once it has been idle this long; 0: on every pass that found nothing on its own"},
     OPT_INT, CFG(net_serve_us), 0, 1000000, NULL, 0},
    {{"net_eager_node", "TESS_NET_EAGER_NODE", NULL, "64k",
      "messages up to this size to a process of the same node are copied through UCX's shared "
      "memory (eager) instead of fetched by a rendezvous get: faster for data the sender just "
      "wrote; 0: UCX's own threshold (up to 64m)"},
     OPT_SIZE, CFG(net_eager_node), 0, 64 << 20, NULL, 1},
    {{"msg_shm", "TESS_MSG_SHM", NULL, "64m",
      "bytes of each process's node message arena: messages from TESS_MSG_SHM_MIN to 4 MiB to "
      "a process of the same node travel as a reference to the sender's buffer there (one copy "
      "by tess_send, none by tess_send_msg); sparse, committed as slots are used; 0: off (from "
      "1m)"},
     OPT_SIZE, CFG(msg_shm), 1 << 20, 1L << 34, NULL, 1},
    {{"msg_shm_min", "TESS_MSG_SHM_MIN", NULL, "8k",
      "smallest message payload placed in the node message arena (1k to 1m)"},
     OPT_SIZE, CFG(msg_shm_min), 1 << 10, 1 << 20, NULL, 0},
    {{"coalesce", "TESS_COALESCE", "+tess-coalesce", "8k",
      "bytes of one batch of small messages (<= 1 KiB) to a process whose network is backed "
      "up; 0 turns coalescing off (512 to 64k)"},
     OPT_SIZE, CFG(coalesce), 512, 65536, NULL, 1},
    {{"coalesce_force", "TESS_COALESCE_FORCE", NULL, "0",
      "coalesce small messages even when the network is not backed up (for tests: a message "
      "then waits for the end of the scheduler pass)"},
     OPT_BOOL, CFG(coalesce_force), 0, 1, NULL, 0},
    {{"coalesce_burst", "TESS_COALESCE_BURST", NULL, "1",
      "coalesce the small messages that one handler sends to a process after its first; they "
      "leave as one batch when the handler returns (0: only when the network is backed up)"},
     OPT_BOOL, CFG(coalesce_burst), 0, 1, NULL, 0},
    {{"trace", "TESS_TRACE", "+tess-trace", "",
      "write a timeline trace of the job to this file at finalize (Chrome trace-event JSON, "
      "for Perfetto, chrome://tracing and tools/tess-trace; a name ending in .json; empty or "
      "0: off)"},
     OPT_STR, CFG(trace), 0, 0, NULL, 0},
    {{"trace_events", "TESS_TRACE_EVENTS", NULL, "2097152",
      "trace: most events kept per thread (80 bytes each; the buffer grows as needed in chunks "
      "of 16384); later ones are dropped and counted, and tess-trace summary then says the "
      "trace is partial"},
     OPT_INT, CFG(trace_events), 1024, 1 << 26, NULL, 0},
    {{"trace_copies", "TESS_TRACE_COPIES", NULL, "0",
      "trace: time device-message copies on the device too (two more events per copy on the "
      "receiver's stream; spans of tess_trace_begin/end are always device-timed)"},
     OPT_BOOL, CFG(trace_copies), 0, 1, NULL, 0},
    {{"tree_arity", "TESS_TREE_ARITY", "+tess-tree-arity", "4",
      "children of a process in the spanning tree that carries broadcasts and reduction "
      "partials between processes (2 to 1024)"},
     OPT_INT, CFG(tree_arity), 2, 1024, NULL, 0},
    {{"reduce", "TESS_REDUCE", "+tess-reduce", "auto",
      "reductions whose callback is a broadcast to the array: shm (one allreduce per round, "
      "through shared memory among the processes of a node (of a virtual node with "
      "TESS_VNODE_SIZE) and MPI_Iallreduce among node leaders, every process delivering the "
      "result to its own elements), mpi (the same with one MPI_Iallreduce over all processes), "
      "tree (up the spanning tree to process 0, broadcast back down), auto (shm)"},
     OPT_STR, CFG(reduce), 0, 0, "auto|shm|mpi|tree", 0},
    {{"reduce_times", "TESS_REDUCE_TIMES", NULL, "0",
      "print, at the end, where the fast path's reduction rounds spent their time (in "
      "the allreduce, and in the process between rounds); 2: every round too"},
     OPT_INT, CFG(reduce_times), 0, 2, NULL, 0},
    {{"check", "TESS_CHECK", "+tess-check", "0",
      "check at run time the ordering that device entries' flags (TESS_ENTRY_BATCH, "
      "TESS_ENTRY_SENDER_ORDERED, TESS_ENTRY_IN_PLACE) and TESS_STREAM_READY sends promise; a "
      "broken promise ends the job naming the array, entry, element and message (slow: copies "
      "of buffers, host work and waits on every device message these apply to; off: one branch)"},
     OPT_BOOL, CFG(check), 0, 1, NULL, 0},
    {{"graphs", "TESS_GRAPHS", "+tess-graphs", "1",
      "step graphs (tess_gpu_graph_run): record an element's stream work once and replay it "
      "as one launch; 0 calls the record function on the element's stream every time (for "
      "comparisons)"},
     OPT_BOOL, CFG(graphs), 0, 1, NULL, 0},
    {{"gpu_batch", "TESS_GPU_BATCH", "+tess-gpu-batch", "1",
      "batched launches (tess_gpu_batch): a PE launches the items its elements added as one "
      "kernel when it stops taking messages for the pass; 0 launches each item alone on its "
      "element's stream when the entry that added it returns (for comparisons)"},
     OPT_BOOL, CFG(gpu_batch), 0, 1, NULL, 0},
    {{"gpu_batch_max", "TESS_GPU_BATCH_MAX", "+tess-gpu-batch-max", "256",
      "items of one batch a PE launches at most at once (it launches when a batch holds this "
      "many)"},
     OPT_INT, CFG(gpu_batch_max), 1, 65536, NULL, 0},
    {{"ckpt_background", "TESS_CKPT_BACKGROUND", "+tess-ckpt-background", "1",
      "tess_checkpoint takes a snapshot of the elements (device buffers into device memory) and "
      "returns; a writer thread writes it while the chares run on, and the next tess_checkpoint, "
      "tess_checkpoint_wait, tess_restart or tess_finalize makes it current (0: each "
      "tess_checkpoint returns once its checkpoint is written and current)"},
     OPT_BOOL, CFG(ckpt_background), 0, 1, NULL, 0},
    {{"ckpt_snapshot", "TESS_CKPT_SNAPSHOT", NULL, "auto",
      "where a background checkpoint's snapshot of device buffers goes: auto (device memory, "
      "kept between checkpoints; else pinned host memory; else the checkpoint is written before "
      "tess_checkpoint returns, with a warning), host (pinned host memory: no device memory "
      "kept), none (written before returning)"},
     OPT_STR, CFG(ckpt_snapshot), 0, 0, "auto|host|none", 0},
    {{"ckpt_direct", "TESS_CKPT_DIRECT", "+tess-ckpt-direct", "0",
      "write checkpoint data with O_DIRECT, past the page cache (no copy into it by the writer, "
      "no writeback left for the final fsync), where the file system takes it; else as usual"},
     OPT_BOOL, CFG(ckpt_direct), 0, 1, NULL, 0},
    {{"ckpt_write_delay_ms", "TESS_CKPT_WRITE_DELAY_MS", NULL, "0",
      "a background checkpoint's writer waits this many milliseconds after creating its file "
      "before it writes (for tests: a checkpoint still being written)"},
     OPT_INT, CFG(ckpt_write_delay_ms), 0, 600000, NULL, 0},
};

static const opt_t *opt_by_name(const char *name)
{
    for (size_t i = 0; i < TESS_ARRAY_LEN(opts); i++)
        if (!strcmp(opts[i].info.name, name))
            return &opts[i];
    return NULL;
}

const tess_option_info_t *tess_config_options(size_t *count_p)
{
    static tess_option_info_t infos[TESS_ARRAY_LEN(opts)];
    for (size_t i = 0; i < TESS_ARRAY_LEN(opts); i++)
        infos[i] = opts[i].info;
    *count_p = TESS_ARRAY_LEN(opts);
    return infos;
}

static tess_status_t opt_set(const opt_t *o, const char *value, const char *source)
{
    char  *field = (char *)&tess_cfg + o->offset;
    long   v;
    size_t sz;
    int    b;
    switch (o->type) {
    case OPT_INT:
        if (tess_parse_int(value, o->lo, o->hi, &v) != TESS_OK)
            goto err_bad;
        *(int *)field = (int)v;
        return TESS_OK;
    case OPT_BOOL:
        if (tess_parse_bool(value, &b) != TESS_OK)
            goto err_bad;
        *(int *)field = b;
        return TESS_OK;
    case OPT_SIZE:
        if (tess_parse_size(value, &sz) != TESS_OK)
            goto err_bad;
        if (!(sz == 0 && o->zero_ok) &&
            (sz < (size_t)o->lo || (o->hi && sz > (size_t)o->hi)))
            goto err_bad;
        *(size_t *)field = sz;
        return TESS_OK;
    case OPT_LOG:
        if ((b = tess_log_level_parse(value)) < 0)
            goto err_bad;
        *(int *)field = b;
        return TESS_OK;
    case OPT_STR:
        if (strlen(value) >= o->len)
            goto err_bad;
        if (o->choices) {
            size_t n = strlen(value);
            const char *c = o->choices;
            int ok = 0;
            while (*c && !ok) {
                const char *bar = strchr(c, '|');
                size_t len = bar ? (size_t)(bar - c) : strlen(c);
                ok = (len == n && !strncasecmp(c, value, n));
                c += len + (bar ? 1 : 0);
            }
            if (!ok)
                goto err_bad;
        }
        strcpy(field, value);
        return TESS_OK;
    }
err_bad:
    if (o->type == OPT_INT)
        return tess_error(TESS_ERR_INVALID, "%s: invalid value '%s' for %s (an integer in "
                          "[%ld, %ld]: %s)", source, value, o->info.name, o->lo, o->hi,
                          o->info.help);
    if (o->type == OPT_STR && o->choices)
        return tess_error(TESS_ERR_INVALID, "%s: invalid value '%s' for %s (one of %s)", source,
                          value, o->info.name, o->choices);
    if (o->type == OPT_SIZE) {
        char range[64];
        if (o->hi)
            snprintf(range, sizeof(range), "%ld to %ld", o->lo, o->hi);
        else
            snprintf(range, sizeof(range), "at least %ld", o->lo);
        return tess_error(TESS_ERR_INVALID, "%s: invalid value '%s' for %s (a size in bytes with "
                          "an optional k, m or g suffix, %s%s: %s)", source, value, o->info.name,
                          range, o->zero_ok ? ", or 0" : "", o->info.help);
    }
    return tess_error(TESS_ERR_INVALID, "%s: invalid value '%s' for %s (%s)", source, value,
                      o->info.name, o->info.help);
}

static const opt_t *opt_by_flag(const char *arg, const char **inline_value_p)
{
    for (size_t i = 0; i < TESS_ARRAY_LEN(opts); i++) {
        const char *f = opts[i].info.flag;
        if (!f)
            continue;
        size_t n = strlen(f);
        if (!strncmp(arg, f, n) && (arg[n] == '\0' || arg[n] == '=')) {
            *inline_value_p = arg[n] == '=' ? arg + n + 1 : NULL;
            return &opts[i];
        }
    }
    return NULL;
}

static tess_status_t config_argv(int *argc, char ***argv)
{
    if (!argc || !argv || !*argv)
        return TESS_OK;
    char **av  = *argv;
    int    out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *inline_value;
        const opt_t *o = av[i][0] == '+' ? opt_by_flag(av[i], &inline_value) : NULL;
        if (!o) {
            if (av[i][0] == '+' && !strncmp(av[i], "+tess-", 6))
                return tess_error(TESS_ERR_INVALID, "unknown runtime flag '%s' (see "
                                  "docs/options.md for the options)", av[i]);
            av[out++] = av[i];
            continue;
        }
        const char *value = inline_value;
        if (!value) {
            /* A boolean flag alone means "on"; others take the next argument. */
            if (o->type == OPT_BOOL && (i + 1 >= *argc || tess_parse_bool(av[i + 1], &(int){0})))
                value = "1";
            else if (i + 1 < *argc)
                value = av[++i];
            else
                return tess_error(TESS_ERR_INVALID, "runtime flag %s needs a value",
                                  o->info.flag);
        }
        tess_status_t st = opt_set(o, value, o->info.flag);
        if (st != TESS_OK)
            return st;
    }
    av[out] = NULL;
    *argc   = out;
    return TESS_OK;
}

/* TESS_TRACE names the file to write: "0", "off", "no" or "false" turn tracing off like an
 * empty value; anything else must end in .json (TESS_TRACE=1 or a typo would otherwise write
 * the trace to a file named "1"). */
static tess_status_t config_check_trace(void)
{
    static const char *const off[] = {"0", "off", "no", "false"};
    char  *t = tess_cfg.trace;
    size_t n = strlen(t);
    for (size_t i = 0; i < TESS_ARRAY_LEN(off); i++)
        if (!strcasecmp(t, off[i]))
            t[0] = '\0';
    if (!t[0] || (n > 5 && !strcmp(t + n - 5, ".json")))
        return TESS_OK;
    return tess_error(TESS_ERR_INVALID, "TESS_TRACE / +tess-trace: invalid value '%s' for trace "
                      "(the file to write the trace to, a name ending in .json; empty or 0: off)",
                      t);
}

/* A field set without its field_mask bit would be ignored without a word, and a bit that names
 * no field is a mistake too (a bit of another struct's mask, say): refuse both. A zero field is
 * the same as an unset one (log_level TESS_LOG_ERROR, which is 0, cannot be told from unset). */
static tess_status_t params_check_field_mask(const tess_params_t *p)
{
    const tess_mask_field_t f[] = {
        {TESS_PARAM_FIELD_PPN, "TESS_PARAM_FIELD_PPN", "tess_params_t.ppn", p->ppn != 0},
        {TESS_PARAM_FIELD_LOG_LEVEL, "TESS_PARAM_FIELD_LOG_LEVEL", "tess_params_t.log_level",
         p->log_level != 0},
        {TESS_PARAM_FIELD_SPIN_US, "TESS_PARAM_FIELD_SPIN_US", "tess_params_t.spin_us",
         p->spin_us != 0},
        {TESS_PARAM_FIELD_BIND, "TESS_PARAM_FIELD_BIND", "tess_params_t.bind", p->bind != 0},
        {TESS_PARAM_FIELD_VERBOSE, "TESS_PARAM_FIELD_VERBOSE", "tess_params_t.verbose",
         p->verbose != 0},
        {TESS_PARAM_FIELD_GPU, "TESS_PARAM_FIELD_GPU", "tess_params_t.gpu", p->gpu != NULL},
        {TESS_PARAM_FIELD_STREAMS, "TESS_PARAM_FIELD_STREAMS", "tess_params_t.streams",
         p->streams != 0},
    };
    tess_status_t st = tess_check_field_mask(p->field_mask, f, TESS_ARRAY_LEN(f), "tess_init");
    if (st != TESS_OK)
        return st;
    uint64_t known = 0;
    for (size_t i = 0; i < TESS_ARRAY_LEN(f); i++)
        known |= f[i].bit;
    if (p->field_mask & ~known)
        return tess_error(TESS_ERR_INVALID, "tess_init: tess_params_t.field_mask has bits "
                          "0x%llx that name no field (TESS_PARAM_FIELD_* only)",
                          (unsigned long long)(p->field_mask & ~known));
    return TESS_OK;
}

tess_status_t tess_config_load(int *argc, char ***argv, const tess_params_t *params)
{
    memset(&tess_cfg, 0, sizeof(tess_cfg));
    for (size_t i = 0; i < TESS_ARRAY_LEN(opts); i++) {
        tess_status_t st = opt_set(&opts[i], opts[i].info.deflt, "default");
        if (st != TESS_OK)
            return st;
    }
    if (params) {
        tess_status_t st = params_check_field_mask(params);
        if (st != TESS_OK)
            return st;
        uint64_t m = params->field_mask;
        if (m & TESS_PARAM_FIELD_PPN) {
            if (params->ppn < 1)
                return tess_error(TESS_ERR_INVALID, "tess_params_t.ppn = %d must be >= 1",
                                  params->ppn);
            tess_cfg.ppn = params->ppn;
        }
        if (m & TESS_PARAM_FIELD_LOG_LEVEL) {
            if ((int)params->log_level < TESS_LOG_ERROR || params->log_level > TESS_LOG_TRACE)
                return tess_error(TESS_ERR_INVALID, "tess_params_t.log_level = %d is not a "
                                  "tess_log_level_t", (int)params->log_level);
            tess_cfg.log_level = params->log_level;
        }
        if (m & TESS_PARAM_FIELD_SPIN_US) {
            const opt_t *o = opt_by_name("spin_us");
            if (params->spin_us < o->lo || params->spin_us > o->hi)
                return tess_error(TESS_ERR_INVALID, "tess_params_t.spin_us = %d must be in "
                                  "[%ld, %ld]", params->spin_us, o->lo, o->hi);
            tess_cfg.spin_us = params->spin_us;
        }
        if (m & TESS_PARAM_FIELD_BIND)
            tess_cfg.bind = params->bind;
        if (m & TESS_PARAM_FIELD_VERBOSE)
            tess_cfg.verbose = params->verbose;
        if ((m & TESS_PARAM_FIELD_GPU) && params->gpu) {
            tess_status_t st = opt_set(opt_by_name("gpu"), params->gpu, "tess_params_t.gpu");
            if (st != TESS_OK)
                return st;
        }
        if (m & TESS_PARAM_FIELD_STREAMS) {
            if (params->streams < 1)
                return tess_error(TESS_ERR_INVALID, "tess_params_t.streams = %d must be >= 1",
                                  params->streams);
            tess_cfg.streams = params->streams;
        }
    }
    for (size_t i = 0; i < TESS_ARRAY_LEN(opts); i++) {
        const char *v = getenv(opts[i].info.env);
        if (v && *v) {
            tess_status_t st = opt_set(&opts[i], v, opts[i].info.env);
            if (st != TESS_OK)
                return st;
        }
    }
    tess_status_t st = config_argv(argc, argv);
    if (st == TESS_OK)
        st = config_check_trace();
    if (st != TESS_OK)
        return st;
    tess_log_level = tess_cfg.log_level;
    return TESS_OK;
}

int tess_config_check_values(void)
{
    int bad = 0;
    memset(&tess_cfg, 0, sizeof(tess_cfg));
    for (size_t i = 0; i < TESS_ARRAY_LEN(opts); i++)
        if (opt_set(&opts[i], opts[i].info.deflt, "default") != TESS_OK)
            bad++;
    for (size_t i = 0; i < TESS_ARRAY_LEN(opts); i++) {
        const char *v = getenv(opts[i].info.env);
        if (v && *v && opt_set(&opts[i], v, opts[i].info.env) != TESS_OK)
            bad++;
    }
    if (config_check_trace() != TESS_OK)
        bad++;
    return bad + tess_config_check_env();
}

/* TESS_* variables that are not runtime options: the test harness's and the scripts'. */
static int env_not_an_option(const char *name, size_t len)
{
    static const char *const others[] = {"TESS_SRCDIR", "TESS_BUILDDIR", "TESS_BUILD"};
    for (size_t i = 0; i < TESS_ARRAY_LEN(others); i++)
        if (strlen(others[i]) == len && !strncmp(name, others[i], len))
            return 1;
    return !strncmp(name, "TESS_TEST_", 10);
}

int tess_config_check_env(void)
{
    extern char **environ;
    static int    warned; /* once per process, not at every tess_init */
    int           unknown = 0;
    if (warned || !environ)
        return 0;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "TESS_", 5))
            continue;
        const char *eq  = strchr(*e, '=');
        size_t      len = eq ? (size_t)(eq - *e) : strlen(*e);
        char        name[64];
        if (len >= sizeof(name) || env_not_an_option(*e, len))
            continue;
        memcpy(name, *e, len);
        name[len] = '\0';
        const char *best = NULL;
        int         best_d = 1 << 30;
        for (size_t i = 0; i < TESS_ARRAY_LEN(opts); i++) {
            if (!strcmp(opts[i].info.env, name)) {
                best = NULL;
                best_d = -1;
                break;
            }
            int d = tess_edit_distance(name, opts[i].info.env);
            if (d < best_d) {
                best_d = d;
                best   = opts[i].info.env;
            }
        }
        if (best_d < 0)
            continue;
        tess_warn("%s is set but is not a Tessera option (the closest is %s; `tessera-info "
                  "--options` lists them all)", name, best);
        unknown++;
    }
    warned = 1;
    return unknown;
}

void tess_config_print(void *file)
{
    FILE *f = file;
    for (size_t i = 0; i < TESS_ARRAY_LEN(opts); i++) {
        const opt_t *o     = &opts[i];
        const char  *field = (const char *)&tess_cfg + o->offset;
        fprintf(f, "  %-14s = ", o->info.name);
        switch (o->type) {
        case OPT_INT:
        case OPT_BOOL: fprintf(f, "%d", *(const int *)field); break;
        case OPT_LOG:  fprintf(f, "%d", *(const int *)field); break;
        case OPT_SIZE: fprintf(f, "%zu", *(const size_t *)field); break;
        case OPT_STR:  fprintf(f, "%s", field); break;
        }
        fprintf(f, "   (%s)\n", o->info.env);
    }
}

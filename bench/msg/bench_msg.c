/*
 * bench_msg — entry-method message latency and rate, each against its raw baseline measured in
 * the same run.
 *
 *   mpirun -np 1 bench_msg +ppn 2      in-process: two PEs of one process
 *   mpirun -np 2 bench_msg +ppn 1      cross-process: one PE in each of two processes
 *   mpirun -np 2 bench_msg +ppn N      cross-process with N PEs each: the rate's senders are
 *                                      spread over process 0's PEs, 64 per PE, and their
 *                                      receivers over process 1's (bench/msg/rate-sweep.sh)
 *
 * Latency: one-way time of a ping-pong between two elements on different PEs, for payloads of
 * 0 B, 8 B, 1 KiB and 64 KiB (cross-process, from 1 KiB, also "latency-zc": zero-copy sends,
 * tess_msg_alloc + tess_send_msg). Baselines: a spinning single-slot handoff between two
 * pthreads (in-process) and a raw UCX active-message ping-pong (cross-process) in two forms:
 * "raw-ucp-am" resends one buffer it never writes; "raw-ucp-am-fwd" (from 1 KiB) copies the
 * payload it received into its send buffer and sends that, as tess_send does in the Tessera
 * ping-pong (see raw_am_latency_ns). Rate: 8-byte messages from many sender elements to
 * receivers on the other PE, many in flight; baselines a raw SPSC ring between two threads
 * (in-process) and raw streaming UCX active messages (cross-process).
 * Cross-core latency on the test VMs jumps between two states for seconds at a time, so every
 * repetition runs the baseline and Tessera back to back; the medians of REPS are reported, and
 * the ratio is the median of the REPS paired ratios.
 *
 * Options: --reps N, --csv FILE, --size BYTES (that latency point alone, no rate),
 * --no-latency (the rate and its baseline alone), --rounds N (bursts of 64 messages per sender
 * in one rate measurement, default 250), --rate-only (the rate without its baseline).
 *
 * Output (rank 0): one CSV line per measurement to --csv FILE, and a table on stdout.
 */
#include <tessera.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>

static int         rank, nprocs, ppn, reps = 7, rate_only, no_latency;
static long        only_size = -1; /* --size: this latency point alone */
#define MAX_SIZE (4 << 20)           /* the largest --size */
static int         rounds    = 250; /* --rounds: bursts per sender in the rate measurement */
static const char *csv_path;
static FILE       *csv;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(const char *what)
{
    fprintf(stderr, "bench_msg: %s: %s\n", what, tess_error_detail());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* ---- baseline: spinning single-slot handoff between two threads ---------------------------- */

static struct {
    _Alignas(64) _Atomic uint64_t slot[2]; /* slot[i]: last value written for thread i */
    _Alignas(64) char payload[2][MAX_SIZE];
    int    iters;
    size_t size;
} hand;

static void *hand_peer(void *arg)
{
    (void)arg;
    static char buf[MAX_SIZE];
    for (uint64_t i = 1; i <= (uint64_t)hand.iters; i++) {
        while (atomic_load_explicit(&hand.slot[1], memory_order_acquire) != i)
            ;
        memcpy(buf, hand.payload[1], hand.size);
        memcpy(hand.payload[0], buf, hand.size);
        atomic_store_explicit(&hand.slot[0], i, memory_order_release);
    }
    return NULL;
}

static double hand_latency_ns(size_t size, int iters)
{
    hand.iters = iters;
    hand.size  = size;
    atomic_store(&hand.slot[0], 0);
    atomic_store(&hand.slot[1], 0);
    pthread_t t;
    pthread_create(&t, NULL, hand_peer, NULL);
    static char buf[MAX_SIZE];
    double t0 = now_ns();
    for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
        memcpy(hand.payload[1], buf, size);
        atomic_store_explicit(&hand.slot[1], i, memory_order_release);
        while (atomic_load_explicit(&hand.slot[0], memory_order_acquire) != i)
            ;
        memcpy(buf, hand.payload[0], size);
    }
    double t1 = now_ns();
    pthread_join(t, NULL);
    return (t1 - t0) / (2.0 * iters);
}

/* ---- baseline: SPSC ring between two threads (message rate) -------------------------------- */

#define RING 1024
static struct {
    _Alignas(64) _Atomic uint64_t head;
    _Alignas(64) _Atomic uint64_t tail;
    _Alignas(64) uint64_t slots[RING];
    uint64_t total;
} ring;

static void *ring_consumer(void *arg)
{
    (void)arg;
    uint64_t sum = 0, t = 0;
    while (t < ring.total) {
        uint64_t h = atomic_load_explicit(&ring.head, memory_order_acquire);
        while (t < h)
            sum += ring.slots[t++ % RING];
        atomic_store_explicit(&ring.tail, t, memory_order_release);
    }
    return (void *)(uintptr_t)sum;
}

static double ring_rate(uint64_t total)
{
    ring.total = total;
    atomic_store(&ring.head, 0);
    atomic_store(&ring.tail, 0);
    pthread_t c;
    pthread_create(&c, NULL, ring_consumer, NULL);
    double t0 = now_ns();
    for (uint64_t h = 0; h < total; h++) {
        while (h - atomic_load_explicit(&ring.tail, memory_order_acquire) >= RING)
            ;
        ring.slots[h % RING] = h;
        atomic_store_explicit(&ring.head, h + 1, memory_order_release);
    }
    void *sum;
    pthread_join(c, &sum);
    double t1 = now_ns();
    if ((uint64_t)(uintptr_t)sum != total * (total - 1) / 2)
        fprintf(stderr, "bench_msg: SPSC ring lost data\n");
    return (double)total / ((t1 - t0) * 1e-9);
}

/* ---- baseline: raw UCX active messages ----------------------------------------------------- */

static struct {
    ucp_context_h ctx;
    ucp_worker_h  worker;
    ucp_ep_h      ep;
    uint64_t      received;
    void         *rndv_desc; /* a rendezvous payload to fetch outside the callback */
    size_t        rndv_len;
    int           forward;   /* eager payloads too go to sink: the next hop sends a copy */
    int           eager;     /* sends forced eager (UCP_AM_SEND_FLAG_EAGER) */
} rx;

/* Where the baseline receives: rendezvous payloads always, eager ones when it forwards. */
static char sink[MAX_SIZE];

static ucs_status_t raw_am_cb(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param)
{
    (void)arg; (void)header; (void)header_length;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        rx.rndv_desc = data;
        rx.rndv_len  = length;
        return UCS_INPROGRESS;
    }
    if (rx.forward)
        memcpy(sink, data, length);
    rx.received++;
    return UCS_OK;
}

static void raw_fetch_rndv(void)
{
    ucp_request_param_t rp = {.op_attr_mask = 0};
    void               *desc = rx.rndv_desc;
    rx.rndv_desc             = NULL;
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(rx.worker, desc, sink, rx.rndv_len, &rp);
    if (UCS_PTR_IS_PTR(r)) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS)
            ucp_worker_progress(rx.worker);
        ucp_request_free(r);
    }
    rx.received++;
}

static void raw_ucx_init(void)
{
    ucp_config_t *config;
    ucp_config_read(NULL, NULL, &config);
    ucp_params_t up = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
    if (ucp_init(&up, config, &rx.ctx) != UCS_OK)
        die("ucp_init");
    ucp_config_release(config);
    ucp_worker_params_t wp = {.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    if (ucp_worker_create(rx.ctx, &wp, &rx.worker) != UCS_OK)
        die("ucp_worker_create");
    ucp_am_handler_param_t hp = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = 3, .cb = raw_am_cb, .flags = UCP_AM_FLAG_WHOLE_MSG};
    ucp_worker_set_am_recv_handler(rx.worker, &hp);
    ucp_address_t *addr;
    size_t         len;
    ucp_worker_get_address(rx.worker, &addr, &len);
    int  ilen = (int)len, plen = 0;
    int  peer = 1 - rank;
    MPI_Sendrecv(&ilen, 1, MPI_INT, peer, 0, &plen, 1, MPI_INT, peer, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    char *paddr = malloc((size_t)plen);
    MPI_Sendrecv(addr, ilen, MPI_BYTE, peer, 1, paddr, plen, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    ucp_worker_release_address(rx.worker, addr);
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                          .address    = (ucp_address_t *)paddr};
    if (ucp_ep_create(rx.worker, &ep, &rx.ep) != UCS_OK)
        die("ucp_ep_create");
    free(paddr);
    /* Wire up the endpoint both ways before timing. */
    for (int i = 0; i < 100; i++)
        ucp_worker_progress(rx.worker);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void raw_send(const void *buf, size_t size)
{
    static uint64_t     hdr;
    ucp_request_param_t rp = {.op_attr_mask = 0};
    if (rx.eager) {
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        rp.flags        = UCP_AM_SEND_FLAG_EAGER;
    }
    ucs_status_ptr_t    r  = ucp_am_send_nbx(rx.ep, 3, &hdr, sizeof(hdr), buf, size, &rp);
    if (UCS_PTR_IS_PTR(r)) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS)
            ucp_worker_progress(rx.worker);
        ucp_request_free(r);
    } else if (UCS_PTR_IS_ERR(r)) {
        die("ucp_am_send_nbx");
    }
}

static void raw_wait(uint64_t count)
{
    while (rx.received < count) {
        ucp_worker_progress(rx.worker);
        if (rx.rndv_desc)
            raw_fetch_rndv();
    }
}

/* RAW_CLEAN: each side resends one buffer it never writes (its lines stay clean in the shared
 * cache, where the peer's get reads them), by the protocol UCX picks. RAW_FWD: each side
 * receives a payload, copies it into its send buffer and sends that, as tess_send does with the
 * payload of the Tessera ping-pong and as an application sends data it just wrote: the get then
 * pulls lines last written on the other core (docs/scale.md, section 1). RAW_EAGER: RAW_CLEAN
 * with every send eager (copied through UCX's shared memory or bounce buffers, no rendezvous),
 * the protocol Tessera takes to processes of its node up to TESS_NET_EAGER_NODE. */
enum { RAW_CLEAN, RAW_FWD, RAW_EAGER };

static double raw_am_latency_ns(size_t size, int iters, int how)
{
    static char clean[MAX_SIZE], out[MAX_SIZE];
    int         forward = how == RAW_FWD;
    char       *buf     = forward ? out : clean;
    rx.forward          = forward;
    rx.eager            = how == RAW_EAGER;
    rx.received = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_ns();
    for (int i = 1; i <= iters; i++) {
        if (rank != 0)
            raw_wait((uint64_t)i);
        if (forward)
            memcpy(out, sink, size);
        raw_send(buf, size);
        if (rank == 0)
            raw_wait((uint64_t)i);
    }
    double t1 = now_ns();
    rx.eager = 0;
    return (t1 - t0) / (2.0 * iters);
}

static double raw_am_rate(uint64_t total)
{
    static char buf[8];
    rx.received = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_ns();
    if (rank == 0) {
        for (uint64_t i = 0; i < total; i++) {
            raw_send(buf, sizeof(buf));
            if ((i & 63) == 0)
                ucp_worker_progress(rx.worker);
        }
        raw_wait(1); /* the receiver's ack */
    } else {
        raw_wait(total);
        raw_send(buf, 0);
    }
    double t1 = now_ns();
    return (double)total / ((t1 - t0) * 1e-9);
}

static void raw_ucx_fini(void)
{
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags        = UCP_EP_CLOSE_FLAG_FORCE};
    void *r = ucp_ep_close_nbx(rx.ep, &rp);
    if (UCS_PTR_IS_PTR(r)) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS)
            ucp_worker_progress(rx.worker);
        ucp_request_free(r);
    }
    ucp_worker_destroy(rx.worker);
    ucp_cleanup(rx.ctx);
}

/* ---- Tessera: ping-pong --------------------------------------------------------------------- */

static tess_array_h pp_arr;
static tess_entry_t E_PING;
static struct {
    int    iters, count, zero_copy;
    size_t size;
    double t0;
} pp;

static int pp_map(tess_index_t i, const int32_t ext[3], int npes, void *arg)
{
    (void)ext; (void)arg;
    return i.x * (npes / 2); /* element 0 on PE 0, element 1 on the other process's first PE */
}

/* The next hop: a copy of the payload (tess_send), or with pp.zero_copy a message buffer of
 * the same size handed over (tess_msg_alloc + tess_send_msg; its bytes are not written, as the
 * raw baseline sends its buffer as it is). */
static void pp_forward(int to, const void *data, size_t size)
{
    if (!pp.zero_copy) {
        tess_send(pp_arr, tess_idx1(to), E_PING, data, size);
        return;
    }
    void *m = tess_msg_alloc(size);
    if (!m)
        die("tess_msg_alloc");
    tess_send_msg(pp_arr, tess_idx1(to), E_PING, m);
}

static void pp_ping(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e;
    int me = tess_ctx_index(ctx).x;
    if (me == 0 && ++pp.count == pp.iters) {
        double dt = (now_ns() - pp.t0) / (2.0 * pp.iters);
        tess_exit_with(&dt, sizeof(dt));
        return;
    }
    pp_forward(1 - me, msg, size);
}

static void pp_start(void *arg)
{
    static char buf[MAX_SIZE];
    (void)arg;
    if (rank != 0)
        return;
    pp.count = 0;
    pp.t0    = now_ns();
    pp_forward(1, buf, pp.size);
}

static double tess_latency_ns(size_t size, int iters)
{
    pp.size  = size;
    pp.iters = iters;
    if (tess_run(TESS_RUN_UNTIL_EXIT, pp_start, NULL) != TESS_OK)
        die("tess_run");
    double dt;
    if (tess_result(&dt, sizeof(dt), NULL) != TESS_OK)
        die("tess_result");
    return dt;
}

/* ---- Tessera: message rate ------------------------------------------------------------------ */

#define RATE_SENDERS 64 /* per sending PE */
#define RATE_BURST   64
static tess_array_h rt_arr;
static tess_entry_t E_GO, E_DATA, E_ACK;
static struct {
    int         rounds, senders; /* senders: RATE_SENDERS per sending PE */
    double      t0;
    _Atomic int done;            /* senders finished (the sending PEs, any of them) */
} rt;

typedef struct {
    int     round;
    int64_t got;
} rate_elem_t;

static int rt_map(tess_index_t i, const int32_t ext[3], int npes, void *arg)
{
    (void)arg;
    /* Senders on the first half of the PEs (process 0, or PE 0 in one process), receivers on
     * the second; sender s and receiver s + ext/2 on PEs s % half and half + s % half. */
    int half = npes / 2, n = ext[0] / 2;
    return i.x < n ? i.x % half : half + (i.x - n) % half;
}

static void rt_burst(tess_ctx_h ctx)
{
    uint64_t v = 42;
    int      peer = tess_ctx_index(ctx).x + rt.senders;
    for (int i = 0; i < RATE_BURST; i++)
        tess_send(rt_arr, tess_idx1(peer), E_DATA, &v, sizeof(v));
}

static void rt_go(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg; (void)size;
    ((rate_elem_t *)e)->round = 0;
    rt_burst(ctx);
}

static void rt_data(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg; (void)size;
    rate_elem_t *r = e;
    if (++r->got % RATE_BURST == 0)
        tess_send(rt_arr, tess_idx1(tess_ctx_index(ctx).x - rt.senders), E_ACK, NULL, 0);
}

static void rt_ack(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg; (void)size;
    rate_elem_t *r = e;
    if (++r->round < rt.rounds) {
        rt_burst(ctx);
        return;
    }
    if (atomic_fetch_add(&rt.done, 1) + 1 == rt.senders) {
        double dt = (now_ns() - rt.t0) * 1e-9;
        double rate = (double)rt.senders * RATE_BURST * rt.rounds / dt;
        tess_exit_with(&rate, sizeof(rate));
    }
}

static void rt_start(void *arg)
{
    (void)arg;
    if (rank != 0)
        return;
    atomic_store(&rt.done, 0);
    rt.t0 = now_ns();
    for (int i = 0; i < rt.senders; i++)
        tess_send(rt_arr, tess_idx1(i), E_GO, NULL, 0);
}

static double tess_rate(int rounds)
{
    rt.rounds = rounds;
    if (tess_run(TESS_RUN_UNTIL_EXIT, rt_start, NULL) != TESS_OK)
        die("tess_run");
    double r;
    if (tess_result(&r, sizeof(r), NULL) != TESS_OK)
        die("tess_result");
    return r;
}

/* ---- driver ---------------------------------------------------------------------------------- */

/* The ratio is the median of the ratios of each repetition's pair, measured back to back in one
 * state of the machine; the values are the medians of each side. */
static void report(const char *mode, const char *metric, size_t size, double *base, double *tess,
                   const char *unit, const char *base_name)
{
    int    lower_better = !strcmp(unit, "us");
    double ratios[64];
    for (int r = 0; r < reps; r++)
        ratios[r] = lower_better ? tess[r] / base[r] : base[r] / tess[r];
    double ratio = median(ratios, reps);
    double mb = median(base, reps), mt = median(tess, reps);
    if (rank != 0)
        return;
    printf("%-8s %-10s %7zu  %-16s %10.3f  tessera %10.3f %-5s  ratio %6.2f\n", mode, metric,
           size, base_name, mb, mt, unit, ratio);
    if (csv)
        fprintf(csv, "%s,%s,%zu,%s,%.4f,%.4f,%s,%.3f\n", mode, metric, size, base_name, mb, mt,
                unit, lower_better ? ratio : 1.0 / ratio);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    if (tess_init(&argc, &argv, MPI_COMM_WORLD, NULL) != TESS_OK)
        die("tess_init");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv_path = argv[++i];
        else if (!strcmp(argv[i], "--rate-only")) /* for profiling the rate alone */
            rate_only = 1;
        else if (!strcmp(argv[i], "--no-latency")) /* the rate and its baseline alone */
            no_latency = 1;
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) /* bursts per sender */
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            only_size = atol(argv[++i]);
    }
    if (reps < 1 || reps > 64)
        reps = 7;
    if (rounds < 1)
        rounds = 250;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    ppn = tess_num_pes() / nprocs;
    if (!(nprocs == 1 && ppn == 2) && nprocs != 2) {
        if (rank == 0)
            fprintf(stderr, "bench_msg runs on -np 1 with +ppn 2, or -np 2 with any +ppn\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int         xproc = nprocs == 2;
    const char *mode  = xproc ? "xproc" : "inproc";
    rt.senders        = RATE_SENDERS * (xproc ? ppn : 1);
    if (rank == 0 && csv_path) {
        csv = fopen(csv_path, "a");
        if (!csv)
            fprintf(stderr, "bench_msg: cannot open %s\n", csv_path);
    }
    if (xproc)
        raw_ucx_init();

    if (tess_entry_register("ping", pp_ping, &E_PING) != TESS_OK ||
        tess_entry_register("go", rt_go, &E_GO) != TESS_OK ||
        tess_entry_register("data", rt_data, &E_DATA) != TESS_OK ||
        tess_entry_register("ack", rt_ack, &E_ACK) != TESS_OK)
        die("tess_entry_register");
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_MAP | TESS_ARRAY_FIELD_NAME,
                             .name = "pingpong", .ndims = 1, .extents = {2},
                             .map = TESS_MAP_USER, .map_fn = pp_map};
    if (tess_array_create(&p, &pp_arr) != TESS_OK)
        die("tess_array_create");
    p.name       = "rate";
    p.extents[0] = 2 * rt.senders;
    p.elem_size  = sizeof(rate_elem_t);
    p.map_fn     = rt_map;
    if (tess_array_create(&p, &rt_arr) != TESS_OK)
        die("tess_array_create");

    static const size_t sizes_all[] = {0, 8, 1024, 65536};
    const size_t       *sizes  = sizes_all;
    size_t              nsizes = sizeof(sizes_all) / sizeof(sizes_all[0]);
    size_t              one    = (size_t)only_size;
    if (only_size >= 0) {
        if (only_size > MAX_SIZE) {
            if (rank == 0)
                fprintf(stderr, "bench_msg: --size %ld is over the largest, %d\n", only_size,
                        MAX_SIZE);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        sizes  = &one;
        nsizes = 1;
    }
    double base[64], fwd[64], eag[64], tess[64];
    for (size_t s = 0; !rate_only && !no_latency && s < nsizes; s++) {
        size_t size  = sizes[s];
        int    iters = size >= (2 << 20) ? 200 : size >= (512 << 10) ? 500 : size >= 65536 ? 2000 : 20000;
        /* From 1 KiB between processes, also the baselines that forward what they received and
         * that send eagerly. */
        int with_fwd = xproc && size >= 1024;
        /* Warm up all. */
        tess_latency_ns(size, iters / 10);
        if (xproc)
            raw_am_latency_ns(size, iters / 10, RAW_CLEAN);
        else if (rank == 0)
            hand_latency_ns(size, iters / 10);
        if (with_fwd) {
            raw_am_latency_ns(size, iters / 10, RAW_FWD);
            raw_am_latency_ns(size, iters / 10, RAW_EAGER);
        }
        for (int zc = 0; zc <= with_fwd; zc++) {
            pp.zero_copy = zc;
            if (zc)
                tess_latency_ns(size, iters / 10);
            for (int r = 0; r < reps; r++) {
                if (xproc)
                    base[r] = raw_am_latency_ns(size, iters, RAW_CLEAN) * 1e-3;
                else
                    base[r] = hand_latency_ns(size, iters) * 1e-3;
                if (with_fwd) {
                    fwd[r] = raw_am_latency_ns(size, iters, RAW_FWD) * 1e-3;
                    eag[r] = raw_am_latency_ns(size, iters, RAW_EAGER) * 1e-3;
                }
                tess[r] = tess_latency_ns(size, iters) * 1e-3;
            }
            /* zc: zero-copy sends (tess_msg_alloc + tess_send_msg) against the baselines run
             * again. */
            const char *metric = zc ? "latency-zc" : "latency";
            report(mode, metric, size, base, tess, "us", xproc ? "raw-ucp-am" : "spin-handoff");
            if (with_fwd) {
                report(mode, metric, size, fwd, tess, "us", "raw-ucp-am-fwd");
                report(mode, metric, size, eag, tess, "us", "raw-ucp-am-eager");
            }
        }
        pp.zero_copy = 0;
    }
    /* The same number of messages per sending PE at every PE count. */
    for (int r = 0; only_size < 0 && r < reps; r++) {
        if (r == 0)
            tess_rate(2);
        uint64_t total = 2000000;
        if (rate_only)
            base[r] = 1;
        else if (xproc)
            base[r] = raw_am_rate(total) * 1e-6;
        else
            base[r] = ring_rate(total) * 1e-6;
        tess[r] = tess_rate(rounds) * 1e-6;
    }
    if (only_size < 0)
        report(mode, "rate", 8, base, tess, "M/s", xproc ? "raw-ucp-am" : "spsc-ring");

    if (xproc)
        raw_ucx_fini();
    if (csv)
        fclose(csv);
    tess_finalize();
    MPI_Finalize();
    return 0;
}

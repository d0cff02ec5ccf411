/*
 * test_gpu_ipc.c — IPC of device memory and events between two ranks of one node, through the
 * GPU layer's ops table only (plain MPI, no Tessera core).
 *
 *   1. rank 0 fills an allocation behind a slow host function, records an IPC event, and sends
 *      both handles while the fill is still pending; rank 1 opens them, waits on the event and
 *      copies out: every byte must be the new data.
 *   2. 100 rounds of ping-pong on a counter in rank 0's allocation: each side waits on the
 *      other's event, increments the counter on its stream, records its own event and sends a
 *      token without synchronising. Each increment checks the value it saw.
 *   3. corrupted handles are rejected (host backend, whose layout the test knows), then
 *      everything is closed and freed.
 *   4. an allocation freed while the peer has it open and made again, larger, where it was:
 *      the peer opens the new one as well, at an address of its own, and reads its bytes.
 * At the start, the first process of a GPU both share must warn, once, when the device says
 * MPS is off (CUDA; the host backend and HIP never warn).
 *
 * Environment: TESS_GPU (default auto); TESS_HOST_THREADS, TESS_HOST_JITTER_US, TESS_HOST_ARENA.
 * Exit 77 when the requested backend is unsupported or has no IPC.
 */
#include "gpu/gpu.h"
#include "gpu/host/host.h"

#include <mpi.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static int rank = -1;

#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", rank, __FILE__, __LINE__, \
                    #c);                                                                  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)
#define CHECK_OK(x)                                                                       \
    do {                                                                                  \
        tess_status_t st_ = (x);                                                          \
        if (st_ != TESS_OK) {                                                             \
            fprintf(stderr, "rank %d: %s:%d: %s returned %d (%s)\n", rank, __FILE__,      \
                    __LINE__, #x, st_, tess_status_string(st_));                          \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)

#define ROUNDS 100
#define TAG_HANDLES 1
#define TAG_TOKEN   2

static void params_from_env(tess_gpu_init_params_t *p)
{
    const char *v;
    long        n;
    size_t      size;
    if ((v = getenv("TESS_HOST_THREADS")) && tess_parse_int(v, 0, 64, &n) == TESS_OK)
        p->host_threads = (int)n;
    if ((v = getenv("TESS_HOST_JITTER_US")) && tess_parse_int(v, 0, 1000000, &n) == TESS_OK)
        p->host_jitter_us = (int)n;
    if ((v = getenv("TESS_HOST_ARENA")) && tess_parse_size(v, &size) == TESS_OK)
        p->host_arena_size = size;
}

static unsigned char pattern(size_t i)
{
    return (unsigned char)((i * 2654435761u) >> 11);
}

static void sleep_fn(void *args)
{
    usleep(*(unsigned *)args);
}

typedef struct inc_args {
    uint64_t    *staging; /* pinned: the counter copied out of device memory */
    uint64_t     expect;
    _Atomic int *errors;
} inc_args_t;

static void inc_fn(void *args)
{
    inc_args_t *a = args;
    if (*a->staging != a->expect)
        atomic_fetch_add(a->errors, 1);
    *a->staging += 1;
}

/* A handle must be refused with an error (and without a crash). */
static void check_rejected(const tess_gpu_ipc_handle_t *h, int event)
{
    void            *p;
    tess_gpu_event_h e;
    tess_status_t    st = event ? tess_gpu->ipc_event_open(h, &e) : tess_gpu->ipc_mem_open(h, &p);
    CHECK(st == TESS_ERR_CORRUPT || st == TESS_ERR_INVALID);
}

/* A copy of h with one field changed, the way a corrupted message would arrive. */
#define CORRUPTED(h, edit)                                                   \
    ({                                                                       \
        tess_gpu_host_ipc_handle_t v_;                                       \
        tess_gpu_ipc_handle_t      b_ = *(h);                                \
        memcpy(&v_, b_.bytes, sizeof(v_));                                   \
        edit;                                                                \
        memcpy(b_.bytes, &v_, sizeof(v_));                                   \
        b_;                                                                  \
    })

static void check_corrupted(const tess_gpu_ipc_handle_t *hm, const tess_gpu_ipc_handle_t *he)
{
    tess_gpu_ipc_handle_t bad;
    bad = CORRUPTED(hm, v_.magic ^= 0x01000000u);
    check_rejected(&bad, 0);
    bad = CORRUPTED(hm, v_.offset += 1ull << 36); /* past the end of the segment */
    check_rejected(&bad, 0);
    bad = CORRUPTED(hm, v_.offset = 4096; v_.size = UINT64_MAX - 100); /* the sum wraps */
    check_rejected(&bad, 0);
    bad = CORRUPTED(hm, v_.name_len = TESS_GPU_HOST_NAME_MAX + 5);
    check_rejected(&bad, 0);
    bad = CORRUPTED(he, v_.magic = 0);
    check_rejected(&bad, 1);
    bad = CORRUPTED(he, v_.offset += TESS_GPU_HOST_EVSEG_SIZE);
    check_rejected(&bad, 1);
    bad = CORRUPTED(he, v_.offset += 4); /* not a slot boundary */
    check_rejected(&bad, 1);
    check_rejected(he, 0); /* an event handle is not memory */
}

int main(int argc, char **argv)
{
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    setvbuf(stdout, NULL, _IONBF, 0);
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "test_gpu_ipc needs exactly 2 ranks, not %d\n", size);
        MPI_Finalize();
        return 1;
    }
    const int   peer     = 1 - rank;
    const char *want     = getenv("TESS_GPU") ? getenv("TESS_GPU") : "auto";
    int         explicit = strcasecmp(want, "auto") != 0;

    tess_gpu_init_params_t params = {.rank = rank, .local_rank = rank, .local_size = 2};
    if (rank == 0)
        params.job_id = tess_random64();
    MPI_Bcast(&params.job_id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    params_from_env(&params);

    /* Every rank takes the same exit: skipped, failed or go. What the start writes to stderr
     * is kept for the check of the warning about processes sharing a GPU without MPS. */
    char  said[4096] = "";
    FILE *err        = tmpfile();
    int   saved      = dup(2);
    if (!err || saved < 0 || dup2(fileno(err), 2) < 0) {
        printf("test_gpu_ipc: cannot capture stderr\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    tess_status_t st   = tess_gpu_init(want, &params, 2);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(err);
    said[fread(said, 1, sizeof(said) - 1, err)] = '\0';
    fclose(err);
    fputs(said, stderr);
    int           mine = st == TESS_OK ? 0 : (st == TESS_ERR_UNSUPPORTED && explicit) ? 1 : 2;
    tess_gpu_props_t props = {0};
    if (mine == 0) {
        CHECK_OK(tess_gpu->get_props(tess_gpu_device(), &props));
        /* The first process of a device shared without MPS (CUDA says which) warns, once. */
        CHECK(props.mps >= -1 && props.mps <= 1);
        CHECK(tess_gpu->kind != TESS_GPU_CUDA || props.mps >= 0);
        int first  = rank == 0 || tess_gpu_num_devices() > 1;
        int warned = strstr(said, "without MPS") != NULL;
        int expect = first && tess_gpu_device_procs() > 1 && props.mps == 0;
        if (warned != expect) {
            printf("test_gpu_ipc: rank %d (device %d of %d shared by %d, mps %d) %s the warning "
                   "about MPS; it said: %s\n", rank, tess_gpu_device(), tess_gpu_num_devices(),
                   tess_gpu_device_procs(), props.mps, warned ? "gave" : "did not give", said);
            mine = 2;
        }
        if (!props.ipc && mine == 0)
            mine = 1;
    }
    int worst;
    MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (worst != 0) {
        if (rank == 0)
            printf("test_gpu_ipc: backend %s %s\n", want,
                   worst == 1 ? "unsupported or without IPC: skipped" : "failed to start");
        if (st == TESS_OK)
            tess_gpu_fini();
        MPI_Finalize();
        return worst == 1 ? 77 : 1;
    }
    if (rank == 0)
        printf("test_gpu_ipc: backend %s, device %d\n", tess_gpu->name,
               tess_gpu_device());

    tess_gpu_stream_h s = tess_gpu_pool_stream(0);
    const size_t      N = (1u << 20) + 77;
    unsigned char    *host, *dev = NULL;
    tess_gpu_event_h  mine_ev, peer_ev;
    tess_gpu_ipc_handle_t h[2]; /* memory, event */
    CHECK_OK(tess_gpu->host_alloc(N, (void **)&host));
    CHECK_OK(tess_gpu->event_create(TESS_GPU_EVENT_IPC, &mine_ev));

    /* ---- 1. memory and an event, handed over while the fill is still pending ---- */
    if (rank == 0) {
        unsigned us = 50000;
        for (size_t i = 0; i < N; i++)
            host[i] = pattern(i);
        CHECK_OK(tess_gpu->mem_alloc(N, (void **)&dev));
        CHECK_OK(tess_gpu->memset_async(dev, 0, N, s));
        CHECK_OK(tess_gpu->stream_sync(s));
        CHECK_OK(tess_gpu->launch_host(s, sleep_fn, &us, sizeof(us)));
        CHECK_OK(tess_gpu->memcpy_async(dev, host, N, s));
        CHECK_OK(tess_gpu->event_record(mine_ev, s));
        CHECK_OK(tess_gpu->ipc_mem_export(dev, &h[0]));
        CHECK_OK(tess_gpu->ipc_event_export(mine_ev, &h[1]));
        MPI_Send(h, (int)sizeof(h), MPI_BYTE, 1, TAG_HANDLES, MPI_COMM_WORLD);
    } else {
        MPI_Recv(h, (int)sizeof(h), MPI_BYTE, 0, TAG_HANDLES, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK_OK(tess_gpu->ipc_mem_open(&h[0], (void **)&dev));
        CHECK_OK(tess_gpu->ipc_event_open(&h[1], &peer_ev));
        tess_gpu_ptr_info_t info;
        CHECK_OK(tess_gpu->ptr_query(dev + 100, &info));
        CHECK(info.is_device == 1);
        if (info.base)
            CHECK(info.base == dev);
        memset(host, 0xFF, N);
        CHECK_OK(tess_gpu->stream_wait_event(s, peer_ev));
        CHECK_OK(tess_gpu->memcpy_async(host, dev, N, s));
        CHECK_OK(tess_gpu->stream_sync(s));
        CHECK_OK(tess_gpu->event_query(peer_ev));
        for (size_t i = 0; i < N; i++)
            CHECK(host[i] == pattern(i));
        printf("test_gpu_ipc: rank 1 saw all %zu bytes after the event\n", N);
    }

    /* ---- 2. ping-pong: rank 1's event goes to rank 0 ---- */
    tess_gpu_ipc_handle_t he1;
    if (rank == 1) {
        CHECK_OK(tess_gpu->ipc_event_export(mine_ev, &he1));
        MPI_Send(&he1, (int)sizeof(he1), MPI_BYTE, 0, TAG_HANDLES, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&he1, (int)sizeof(he1), MPI_BYTE, 1, TAG_HANDLES, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        CHECK_OK(tess_gpu->ipc_event_open(&he1, &peer_ev));
        CHECK_OK(tess_gpu->memset_async(dev, 0, sizeof(uint64_t), s));
    }
    uint64_t   *staging = (uint64_t *)(void *)host; /* pinned */
    _Atomic int errors  = 0;
    for (int r = 0; r < ROUNDS; r++) {
        if (r % 2 != rank) {
            int token;
            MPI_Recv(&token, 1, MPI_INT, peer, TAG_TOKEN, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(token == r);
            continue;
        }
        if (r > 0)
            CHECK_OK(tess_gpu->stream_wait_event(s, peer_ev));
        inc_args_t a = {staging, (uint64_t)r, &errors};
        CHECK_OK(tess_gpu->memcpy_async(staging, dev, sizeof(uint64_t), s));
        CHECK_OK(tess_gpu->launch_host(s, inc_fn, &a, sizeof(a)));
        CHECK_OK(tess_gpu->memcpy_async(dev, staging, sizeof(uint64_t), s));
        CHECK_OK(tess_gpu->event_record(mine_ev, s));
        MPI_Send(&r, 1, MPI_INT, peer, TAG_TOKEN, MPI_COMM_WORLD); /* no host sync */
    }
    if (rank != (ROUNDS - 1) % 2) {
        /* The side that did not make the last increment reads the result after the event. */
        CHECK_OK(tess_gpu->stream_wait_event(s, peer_ev));
    }
    CHECK_OK(tess_gpu->memcpy_async(staging, dev, sizeof(uint64_t), s));
    CHECK_OK(tess_gpu->stream_sync(s));
    CHECK(atomic_load(&errors) == 0);
    CHECK(*staging == ROUNDS);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_gpu_ipc: %d rounds of ping-pong, counter %" PRIu64 "\n", ROUNDS, *staging);

    /* ---- 3. corrupted handles, then close everything ---- */
    if (rank == 1) {
        if (tess_gpu->kind == TESS_GPU_HOST)
            check_corrupted(&h[0], &h[1]);
        else
            printf("test_gpu_ipc: corrupted-handle checks need the host layout: skipped\n");
        CHECK_OK(tess_gpu->ipc_mem_close(dev));
    }
    CHECK_OK(tess_gpu->ipc_event_close(peer_ev));
    MPI_Barrier(MPI_COMM_WORLD); /* nobody uses rank 0's memory or either event any more */
    CHECK_OK(tess_gpu->event_destroy(mine_ev));
    if (rank == 0)
        CHECK_OK(tess_gpu->mem_free(dev));
    /* ---- 4. rank 0 frees an allocation rank 1 still has open and makes a larger one where
     * it was: rank 1 opens that too (an address of its own) and sees the new bytes ---- */
    {
        void                 *a = NULL, *b = NULL, *pa = NULL, *pb = NULL;
        tess_gpu_ipc_handle_t ha, hb;
        if (rank == 0) {
            CHECK_OK(tess_gpu->mem_alloc(4096, &a));
            CHECK_OK(tess_gpu->memset_async(a, 1, 4096, s));
            CHECK_OK(tess_gpu->stream_sync(s));
            CHECK_OK(tess_gpu->ipc_mem_export(a, &ha));
            MPI_Send(&ha, (int)sizeof(ha), MPI_BYTE, 1, TAG_HANDLES, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD); /* rank 1 has it open */
            CHECK_OK(tess_gpu->mem_free(a));
            CHECK_OK(tess_gpu->mem_alloc(8192, &b));
            CHECK_OK(tess_gpu->memset_async(b, 2, 8192, s));
            CHECK_OK(tess_gpu->stream_sync(s));
            CHECK_OK(tess_gpu->ipc_mem_export(b, &hb));
            MPI_Send(&hb, (int)sizeof(hb), MPI_BYTE, 1, TAG_HANDLES, MPI_COMM_WORLD);
            printf("test_gpu_ipc: reopened %s address\n", a == b ? "the same" : "another");
        } else {
            MPI_Recv(&ha, (int)sizeof(ha), MPI_BYTE, 0, TAG_HANDLES, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            CHECK_OK(tess_gpu->ipc_mem_open(&ha, &pa));
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Recv(&hb, (int)sizeof(hb), MPI_BYTE, 0, TAG_HANDLES, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            CHECK_OK(tess_gpu->ipc_mem_open(&hb, &pb));
            CHECK(pb != pa);
            *staging = 0;
            CHECK_OK(tess_gpu->memcpy_async(staging, (char *)pb + 4096, sizeof(*staging), s));
            CHECK_OK(tess_gpu->stream_sync(s));
            CHECK(*staging == 0x0202020202020202ull);
            CHECK_OK(tess_gpu->ipc_mem_close(pb));
            CHECK_OK(tess_gpu->ipc_mem_close(pa));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            CHECK_OK(tess_gpu->mem_free(b));
    }
    CHECK_OK(tess_gpu->host_free(host));
    tess_gpu_fini();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_gpu_ipc: all passed\n");
    MPI_Finalize();
    return 0;
}

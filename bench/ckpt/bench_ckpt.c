/*
 * bench_ckpt — checkpoint and restart bandwidth of device state against the device's and the
 * file system's own, measured in the same run on the same bytes:
 *
 *   checkpoint  tess_checkpoint of C chares per process, each owning one device buffer
 *               (SIZE / C bytes a process), into DIR, written before it returns
 *               (background = 0)
 *   background  tess_checkpoint in the background: "stop" is the time the chares are stopped
 *               (the call until it returns: the snapshot into device memory), "write" the call
 *               until tess_checkpoint_wait returns, called at once (the snapshot written,
 *               synced and made current)
 *   raw d2h     the same bytes copied device -> pinned host (cudaMemcpyAsync on the host
 *               backend's or CUDA's streams, 32 MiB at a time into one pinned buffer)
 *   raw write   the same bytes written from pinned memory to a file in DIR, then fsync
 *   restart     tess_restart of the same array from the checkpoint (the page cache of its
 *               files dropped first with posix_fadvise, so the reads reach the device)
 *   raw read    the raw-write file read back (its cache dropped the same way)
 *   raw h2d     pinned host -> device, as raw d2h
 *
 * Bandwidths are bytes of device state over all processes / seconds of the slowest process.
 * The goals: checkpoint >= 0.8 x min(raw d2h, raw write), restart >= 0.8 x min(raw read,
 * raw h2d), and a background checkpoint stopping the chares for a small part of the raw
 * write's time; the ratios are printed. Each measurement writes into a directory of its own
 * under DIR, removed right after (the raw file too), so the disk holds one copy of SIZE a
 * process at a time (16 GB a process needs about 17 GB free).
 *
 *   mpirun -np P bench_ckpt [-s GB[,GB...]] [-c CHARES] [-d DIR] [-r REPS] [-o CSV]
 *
 * SIZE is per process. The CSV has one row per (size, operation, path): size_gb (per
 * process), procs, op (checkpoint, restart), path (tessera, tessera-bg-stop, tessera-bg-write,
 * raw-d2h, raw-write, raw-read, raw-h2d), seconds, gbs.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <tessera.h>
#include <tessera/gpu.h>
#include <unistd.h>

#define CHUNK ((size_t)32 << 20)

typedef struct chare {
    void  *dev;
    size_t bytes;
} chare_t;

static size_t per_chare;

static void die(const char *what)
{
    fprintf(stderr, "bench_ckpt: %s: %s\n", what, tess_error_detail());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void chare_ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    chare_t *c = e;
    c->bytes   = per_chare;
    if (tess_gpu_malloc(&c->dev, c->bytes) != TESS_OK)
        die("device allocation");
    if (tess_gpu_memset_async(c->dev, (int)(tess_ctx_linear(ctx) & 0xff), c->bytes,
                              tess_ctx_stream(ctx)) != TESS_OK ||
        tess_gpu_stream_sync(tess_ctx_stream(ctx)) != TESS_OK)
        die("device memset");
}

static void chare_dtor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    chare_t *c = e;
    tess_gpu_stream_sync(tess_ctx_stream(ctx));
    tess_gpu_free(c->dev);
}

static void chare_pup(tess_pup_h p, tess_ctx_h ctx, void *e)
{
    (void)ctx;
    chare_t *c = e;
    tess_pup_device(p, &c->dev, c->bytes);
}

/* The raw copies: every local chare's buffer through the pinned buffer, on its stream. */
typedef struct raw {
    char  *pinned;
    int    to_device;
} raw_t;

static void raw_copy(tess_ctx_h ctx, void *e, void *arg)
{
    chare_t *c = e;
    raw_t   *r = arg;
    for (size_t off = 0; off < c->bytes; off += CHUNK) {
        size_t n = c->bytes - off < CHUNK ? c->bytes - off : CHUNK;
        tess_status_t st = r->to_device
                               ? tess_gpu_memcpy_async((char *)c->dev + off, r->pinned, n,
                                                       tess_ctx_stream(ctx))
                               : tess_gpu_memcpy_async(r->pinned, (char *)c->dev + off, n,
                                                       tess_ctx_stream(ctx));
        if (st != TESS_OK || tess_gpu_stream_sync(tess_ctx_stream(ctx)) != TESS_OK)
            die("raw copy");
    }
}

static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static void drop_dir_cache(const char *dir)
{
    char p[1200];
    for (int r = 0; r < 4096; r++) {
        if (snprintf(p, sizeof(p), "%s/data.%d", dir, r) >= (int)sizeof(p) || access(p, F_OK))
            break;
        drop_cache(p);
    }
    if (snprintf(p, sizeof(p), "%s/manifest", dir) < (int)sizeof(p))
        drop_cache(p);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(p);
    return 0;
}

/* Remove a checkpoint directory (process 0, after everyone is done with it). */
static void remove_tree(const char *dir)
{
    MPI_Barrier(MPI_COMM_WORLD);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Seconds of the slowest process for fn, all starting together. */
static double timed_max(double t)
{
    double m;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

int main(int argc, char **argv)
{
    int provided, rank, nprocs;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    if (tess_init(&argc, &argv, MPI_COMM_WORLD, NULL) != TESS_OK)
        die("tess_init");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    const char *sizes = "0.0625,0.25", *dir = "bench-ckpt.tmp", *csv = NULL;
    int         chares = 16, reps = 2;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "-s") && v)
            sizes = v, i++;
        else if (!strcmp(argv[i], "-c") && v)
            chares = atoi(v), i++;
        else if (!strcmp(argv[i], "-d") && v)
            dir = v, i++;
        else if (!strcmp(argv[i], "-r") && v)
            reps = atoi(v), i++;
        else if (!strcmp(argv[i], "-o") && v)
            csv = v, i++;
        else {
            if (rank == 0)
                fprintf(stderr, "usage: bench_ckpt [-s GB[,GB...]] [-c CHARES] [-d DIR] "
                                "[-r REPS] [-o CSV]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    FILE *out = NULL;
    if (rank == 0) {
        mkdir(dir, 0755);
        out = csv ? fopen(csv, "w") : stdout;
        if (!out)
            die("the CSV file");
        fprintf(out, "size_gb,procs,op,path,seconds,gbs\n");
        printf("# bench_ckpt: %d processes x %d chares, backend %s, directory %s\n", nprocs,
               chares, tess_gpu_backend_name(), dir);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    char *pinned = NULL;
    if (tess_gpu_malloc_host((void **)&pinned, CHUNK) != TESS_OK)
        die("pinned allocation");
    memset(pinned, 1, CHUNK);

    char *list = strdup(sizes);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        double gb    = atof(tok);
        size_t bytes = (size_t)(gb * (double)(1ull << 30));
        per_chare    = bytes / (size_t)chares / 64 * 64;
        bytes        = per_chare * (size_t)chares;
        double total = (double)bytes * nprocs / 1e9; /* GB over all processes */

        tess_array_h        a;
        tess_array_params_t ap = {
            .field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_DTOR | TESS_ARRAY_FIELD_PUP |
                          TESS_ARRAY_FIELD_MAP,
            .name = "state", .ndims = 1, .extents = {chares * nprocs},
            .elem_size = sizeof(chare_t), .ctor = chare_ctor, .dtor = chare_dtor,
            .pup = chare_pup, .map = TESS_MAP_BLOCK};
        if (tess_array_create(&ap, &a) != TESS_OK)
            die("tess_array_create");
        enum { CK, BG_STOP, BG_WRITE, D2H, WR, RS, RD, H2D, NB };
        double best[NB];
        for (int k = 0; k < NB; k++)
            best[k] = 1e30;
        char path[1200], cdir[1200];
        if (snprintf(path, sizeof(path), "%s/raw.%d", dir, rank) >= (int)sizeof(path))
            die("the directory name");
        for (int r = 0; r < reps; r++) {
            /* raw d2h */
            raw_t raw = {pinned, 0};
            MPI_Barrier(MPI_COMM_WORLD);
            double t = MPI_Wtime();
            tess_array_foreach(a, raw_copy, &raw);
            t = timed_max(MPI_Wtime() - t);
            best[D2H] = t < best[D2H] ? t : best[D2H];
            /* raw write + fsync */
            MPI_Barrier(MPI_COMM_WORLD);
            t      = MPI_Wtime();
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0)
                die("raw file");
            for (size_t off = 0; off < bytes; off += CHUNK) {
                size_t n = bytes - off < CHUNK ? bytes - off : CHUNK;
                if (write(fd, pinned, n) != (ssize_t)n)
                    die("raw write");
            }
            fsync(fd);
            close(fd);
            t         = timed_max(MPI_Wtime() - t);
            best[WR]  = t < best[WR] ? t : best[WR];
            /* raw read */
            drop_cache(path);
            MPI_Barrier(MPI_COMM_WORLD);
            t  = MPI_Wtime();
            fd = open(path, O_RDONLY);
            if (fd < 0)
                die("raw file");
            for (size_t off = 0; off < bytes; off += CHUNK) {
                size_t n = bytes - off < CHUNK ? bytes - off : CHUNK;
                if (read(fd, pinned, n) != (ssize_t)n)
                    die("raw read");
            }
            close(fd);
            unlink(path);
            t        = timed_max(MPI_Wtime() - t);
            best[RD] = t < best[RD] ? t : best[RD];
            /* raw h2d */
            raw.to_device = 1;
            MPI_Barrier(MPI_COMM_WORLD);
            t = MPI_Wtime();
            tess_array_foreach(a, raw_copy, &raw);
            t         = timed_max(MPI_Wtime() - t);
            best[H2D] = t < best[H2D] ? t : best[H2D];

            /* checkpoint, written before returning, into a directory of its own */
            char ckdir[1200];
            if (snprintf(ckdir, sizeof(ckdir), "%s/%g-%d", dir, gb, r) >= (int)sizeof(ckdir))
                die("the directory name");
            tess_ckpt_params_t cp = {.field_mask = TESS_CKPT_FIELD_PROGRAM | TESS_CKPT_FIELD_STEP |
                                                   TESS_CKPT_FIELD_BACKGROUND,
                                     .dir = ckdir, .program = "bench_ckpt", .step = 1,
                                     .background = 0};
            MPI_Barrier(MPI_COMM_WORLD);
            t = MPI_Wtime();
            if (tess_checkpoint(&cp) != TESS_OK)
                die("tess_checkpoint");
            t        = timed_max(MPI_Wtime() - t);
            best[CK] = t < best[CK] ? t : best[CK];
            if (snprintf(cdir, sizeof(cdir), "%s/ckpt.1", ckdir) >= (int)sizeof(cdir))
                die("the directory name");
            /* restart */
            if (rank == 0)
                drop_dir_cache(cdir);
            MPI_Barrier(MPI_COMM_WORLD);
            tess_ckpt_params_t rp = {.field_mask = TESS_CKPT_FIELD_PROGRAM, .dir = cdir,
                                     .program = "bench_ckpt"};
            t = MPI_Wtime();
            if (tess_restart(&rp) != TESS_OK)
                die("tess_restart");
            t        = timed_max(MPI_Wtime() - t);
            best[RS] = t < best[RS] ? t : best[RS];
            remove_tree(ckdir);

            /* checkpoint in the background: the chares stopped, then the write to its end */
            cp.background = 1;
            MPI_Barrier(MPI_COMM_WORLD);
            t = MPI_Wtime();
            if (tess_checkpoint(&cp) != TESS_OK)
                die("tess_checkpoint (background)");
            double stop = MPI_Wtime() - t;
            if (tess_checkpoint_wait() != TESS_OK)
                die("tess_checkpoint_wait");
            double all     = timed_max(MPI_Wtime() - t);
            stop           = timed_max(stop);
            best[BG_STOP]  = stop < best[BG_STOP] ? stop : best[BG_STOP];
            best[BG_WRITE] = all < best[BG_WRITE] ? all : best[BG_WRITE];
            remove_tree(ckdir);
        }
        if (tess_array_destroy(a) != TESS_OK)
            die("tess_array_destroy");
        if (rank == 0) {
            static const char *op[NB]    = {"checkpoint", "checkpoint", "checkpoint",
                                            "checkpoint", "checkpoint", "restart",
                                            "restart",    "restart"};
            static const char *pname[NB] = {"tessera", "tessera-bg-stop", "tessera-bg-write",
                                            "raw-d2h", "raw-write",       "tessera",
                                            "raw-read", "raw-h2d"};
            for (int k = 0; k < NB; k++)
                fprintf(out, "%g,%d,%s,%s,%.6f,%.4f\n", gb, nprocs, op[k], pname[k], best[k],
                        total / best[k]);
            fflush(out);
            double wslow = total / (best[D2H] > best[WR] ? best[D2H] : best[WR]);
            double rslow = total / (best[RD] > best[H2D] ? best[RD] : best[H2D]);
            printf("%g GB/process: checkpoint %.3f GB/s (raw d2h %.3f, raw write+fsync %.3f): "
                   "%.2f x the slower; restart %.3f GB/s (raw read %.3f, raw h2d %.3f): %.2f x "
                   "the slower\n", gb, total / best[CK], total / best[D2H], total / best[WR],
                   total / best[CK] / wslow, total / best[RS], total / best[RD], total / best[H2D],
                   total / best[RS] / rslow);
            printf("%g GB/process: background checkpoint stops the chares %.4f s = %.4f x the "
                   "checkpoint written before returning (%.3f s), %.4f x raw write+fsync (%.3f "
                   "s); its write %.3f GB/s = %.2f x raw write+fsync\n", gb, best[BG_STOP],
                   best[BG_STOP] / best[CK], best[CK], best[BG_STOP] / best[WR], best[WR],
                   total / best[BG_WRITE], best[WR] / best[BG_WRITE]);
            fflush(stdout);
        }
    }
    free(list);
    tess_gpu_free_host(pinned);
    if (out && out != stdout)
        fclose(out);
    tess_finalize();
    MPI_Finalize();
    return 0;
}

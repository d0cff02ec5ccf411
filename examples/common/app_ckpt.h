/*
 * app_ckpt.h — the checkpoint options the example apps' Tessera programs share:
 *
 *   -checkpoint-every N   a checkpoint every N iterations (cycles, steps) into
 *   -checkpoint-dir D     D (D/ckpt.<iteration>, D/current; see docs/checkpoint.md)
 *   -restart D            continue from D's current checkpoint (or from D itself when it is one
 *                         checkpoint's directory): the problem, the chare grid and the iteration
 *                         come from it; an option that says otherwise is refused. Checkpoints
 *                         of the continued run go to D too unless -checkpoint-dir says where.
 *
 * The apps take these out of argv before their own parser sees it, so their MPI programs, which
 * do not checkpoint, refuse them as unknown options.
 */
#ifndef APP_CKPT_H
#define APP_CKPT_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera.h>

typedef struct app_ckpt {
    int         every;   /* 0: no checkpoints */
    const char *dir;     /* where checkpoints go */
    const char *restart; /* NULL: a fresh start */
} app_ckpt_t;

/* Take the checkpoint options out of argv; exits with a message (rank 0) when they are wrong. */
static inline app_ckpt_t app_ckpt_args(int *argc, char **argv, int rank)
{
    app_ckpt_t c = {0, NULL, NULL};
    int        n = 1, bad = 0;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i], *v = i + 1 < *argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-checkpoint-every") || !strcmp(a, "-checkpoint-dir") ||
            !strcmp(a, "-restart")) {
            if (!v || !v[0]) {
                bad = 1;
                break;
            }
            if (!strcmp(a, "-checkpoint-every"))
                c.every = atoi(v);
            else if (!strcmp(a, "-checkpoint-dir"))
                c.dir = v;
            else
                c.restart = v;
            i++;
            continue;
        }
        argv[n++] = argv[i];
    }
    *argc = n;
    if (c.every && !c.dir)
        c.dir = c.restart;
    if (bad || c.every < 0 || (c.every && !c.dir) || (c.dir && !c.every)) {
        if (rank == 0)
            fprintf(stderr, "checkpoint options: -checkpoint-every N (N >= 1) and "
                            "-checkpoint-dir D go together (D may come from -restart D); "
                            "-restart D needs a directory\n");
        exit(2);
    }
    return c;
}

/* Nonzero when `flag` is among the program's options (after app_ckpt_args). */
static inline int app_arg_given(int argc, char **argv, const char *flag)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], flag))
            return 1;
    return 0;
}

/* A restart refuses an option that contradicts its checkpoint: say which and exit. */
static inline void app_ckpt_refuse(int rank, const char *flag, const char *given,
                                   const char *saved)
{
    if (rank == 0)
        fprintf(stderr, "option %s %s contradicts the checkpoint (%s %s): a restart takes the "
                        "problem, the chare grid and the iteration from the checkpoint\n",
                flag, given, flag, saved);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* The program's state saved with the checkpoint of c->restart (malloc'd, *size_p bytes); exits
 * with the library's message when there is none or it is not this program's. Collective. */
static inline void *app_ckpt_read(const app_ckpt_t *c, const char *program, size_t *size_p,
                                  int rank)
{
    tess_ckpt_info_t info;
    void            *user = NULL;
    tess_status_t    st   = tess_checkpoint_info(c->restart, program, NULL, 0, &info);
    if (st == TESS_OK) { /* the size, then the bytes */
        user = malloc(info.user_size ? info.user_size : 1);
        st   = user ? tess_checkpoint_info(c->restart, program, user, info.user_size, &info)
                    : TESS_ERR_NO_MEMORY;
    }
    if (st != TESS_OK) {
        if (rank == 0)
            fprintf(stderr, "cannot restart from %s: %s\n", c->restart, tess_error_detail());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0)
        printf("restart: %s, iteration %llu, written by %d processes x %d PEs\n", info.path,
               (unsigned long long)info.step, info.processes, info.ppn);
    *size_p = info.user_size;
    return user;
}

/* As app_ckpt_read, for a state of a fixed size: exits when the saved one has another. */
static inline void app_ckpt_read_fixed(const app_ckpt_t *c, const char *program, void *user,
                                       size_t size, int rank)
{
    size_t n;
    void  *saved = app_ckpt_read(c, program, &n, rank);
    if (n != size) {
        if (rank == 0)
            fprintf(stderr, "cannot restart from %s: its program state is %zu bytes, not %zu "
                            "(another version of the program)\n", c->restart, n, size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memcpy(user, saved, size);
    free(saved);
}

/* Fill the arrays (every live one) from c->restart; exits with the library's message. */
static inline void app_ckpt_restore(const app_ckpt_t *c, const char *program, int rank)
{
    tess_ckpt_params_t p = {.field_mask = TESS_CKPT_FIELD_PROGRAM, .dir = c->restart,
                            .program = program};
    if (tess_restart(&p) != TESS_OK) {
        if (rank == 0)
            fprintf(stderr, "cannot restart from %s: %s\n", c->restart, tess_error_detail());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* Checkpoint every live array at iteration `iter` with the program's state; returns the
 * seconds it took. Exits with the library's message when it fails. */
static inline double app_ckpt_write(const app_ckpt_t *c, const char *program, const void *user,
                                    size_t size, int iter, int rank)
{
    double             t0 = MPI_Wtime();
    tess_ckpt_params_t p  = {.field_mask = TESS_CKPT_FIELD_PROGRAM | TESS_CKPT_FIELD_USER |
                                          TESS_CKPT_FIELD_STEP,
                             .dir = c->dir, .program = program, .user = user, .user_size = size,
                             .step = (uint64_t)iter};
    if (tess_checkpoint(&p) != TESS_OK) {
        if (rank == 0)
            fprintf(stderr, "checkpoint at iteration %d failed: %s\n", iter,
                    tess_error_detail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return MPI_Wtime() - t0;
}

/* Wait for the last checkpoint's background write (docs/checkpoint.md); returns the seconds it
 * took, to count with the checkpoints' time. Exits with the library's message when it failed. */
static inline double app_ckpt_wait(int rank)
{
    double t0 = MPI_Wtime();
    if (tess_checkpoint_wait() != TESS_OK) {
        if (rank == 0)
            fprintf(stderr, "checkpoint failed: %s\n", tess_error_detail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return MPI_Wtime() - t0;
}

#endif

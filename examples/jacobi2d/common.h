/*
 * common.h — what the two Jacobi2D programs share besides the kernels: options and the
 * result line.
 */
#ifndef JACOBI_COMMON_H
#define JACOBI_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct jac_opts {
    int64_t nx, ny;
    int     iters, warmup;
    int     odf;          /* Tessera: chares per GPU */
    int     px, py;       /* decomposition given with -d PXxPY (0: automatic) */
    int     imbalance;    /* work factor of the heavy blocks (1: none) */
    double  heavy;        /* blocks whose first row lies in the first `heavy` of the grid */
    int     verify;       /* compare with a serial computation */
    int     lb_period;    /* Tessera: load-balance every N iterations (0: never) */
    int     halos_in_place; /* Tessera: read halos of chares of the process where they lie */
    int     launch_batch;   /* Tessera: the chares of a PE share one update launch */
} jac_opts_t;

static inline void jac_usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-x NX] [-y NY] [-i ITERS] [-w WARMUP] [-odf N] [-d PXxPY]\n"
            "          [-imbalance K] [-heavy FRACTION] [-lb PERIOD] [-halos MODE]\n"
            "          [-launch MODE] [-verify]\n"
            "  -x, -y       interior grid size (default 512 x 512)\n"
            "  -i           timed iterations (default 100); -w untimed ones before (default 5)\n"
            "  -odf         chares per GPU (Tessera only, default 8)\n"
            "  -d           the decomposition (processes for MPI, chares for Tessera)\n"
            "  -imbalance   blocks starting in the first FRACTION of the rows (-heavy, default\n"
            "               0.25) do K times the work per iteration (same result)\n"
            "  -lb          Tessera: a load-balancing step every PERIOD iterations\n"
            "  -halos       Tessera: `inplace` (default): the update reads the halos of chares\n"
            "               of the same process where they lie; `copy`: copied in first\n"
            "  -launch      Tessera: `each` (default): every chare launches its update;\n"
            "               `batch`: the chares of a PE share one launch (tess_gpu_batch)\n"
            "  -verify      compare the checksum with a serial computation (small grids)\n",
            prog);
}

/* Parse argv (after Tessera removed its +flags); exits with a message on a bad option. */
static inline jac_opts_t jac_parse(int argc, char **argv, int rank)
{
    jac_opts_t o = {.nx = 512, .ny = 512, .iters = 100, .warmup = 5, .odf = 8,
                    .imbalance = 1, .heavy = 0.25, .halos_in_place = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int         used = 1;
        if (!strcmp(a, "-x") && v)
            o.nx = atoll(v);
        else if (!strcmp(a, "-y") && v)
            o.ny = atoll(v);
        else if (!strcmp(a, "-i") && v)
            o.iters = atoi(v);
        else if (!strcmp(a, "-w") && v)
            o.warmup = atoi(v);
        else if (!strcmp(a, "-odf") && v)
            o.odf = atoi(v);
        else if (!strcmp(a, "-imbalance") && v)
            o.imbalance = atoi(v);
        else if (!strcmp(a, "-heavy") && v)
            o.heavy = atof(v);
        else if (!strcmp(a, "-lb") && v)
            o.lb_period = atoi(v);
        else if (!strcmp(a, "-halos") && v && (!strcmp(v, "inplace") || !strcmp(v, "copy")))
            o.halos_in_place = !strcmp(v, "inplace");
        else if (!strcmp(a, "-launch") && v && (!strcmp(v, "each") || !strcmp(v, "batch")))
            o.launch_batch = !strcmp(v, "batch");
        else if (!strcmp(a, "-d") && v) {
            if (sscanf(v, "%dx%d", &o.px, &o.py) != 2 || o.px < 1 || o.py < 1) {
                if (rank == 0)
                    fprintf(stderr, "bad decomposition '%s' (want PXxPY)\n", v);
                exit(2);
            }
        } else if (!strcmp(a, "-verify")) {
            o.verify = 1;
            used     = 0;
        } else {
            if (rank == 0) {
                fprintf(stderr, "unknown option '%s'\n", a);
                jac_usage(argv[0]);
            }
            exit(2);
        }
        i += used;
    }
    if (o.nx < 1 || o.ny < 1 || o.iters < 1 || o.warmup < 0 || o.odf < 1 || o.imbalance < 1 ||
        o.heavy < 0 || o.heavy > 1 || o.lb_period < 0) {
        if (rank == 0) {
            fprintf(stderr, "invalid options\n");
            jac_usage(argv[0]);
        }
        exit(2);
    }
    return o;
}

/* Work factor of a block starting at global row x0. */
static inline int jac_work(const jac_opts_t *o, int64_t x0)
{
    return (double)x0 < o->heavy * (double)o->nx ? o->imbalance : 1;
}

#endif /* JACOBI_COMMON_H */

/*
 * common.h — what the two MiniMD programs share besides the kernels: options, the velocity
 * set-up (MPI sums), the thermo table, the comparison with a stored reference run and the
 * result line.
 */
#ifndef MINIMD_COMMON_H
#define MINIMD_COMMON_H

#include "minimd.h"

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mmd_opts {
    int         nx, ny, nz;
    int         steps, thermo;
    int         odf;       /* Tessera: chares per GPU */
    int         p[3];      /* decomposition given with -d PXxPYxPZ (0: automatic) */
    const char *ref;       /* reference output to compare with */
    int         small;     /* start every buffer small (tests their growth) */
    int         timing;    /* time the force kernel (a separate timing run) */
    int         void_octant; /* a test: an eighth of the box starts empty */
} mmd_opts_t;

static inline void mmd_usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-s N | -nx NX -ny NY -nz NZ] [-n STEPS] [--thermo N] [-odf N]\n"
            "          [-d PXxPYxPZ] [-ref FILE] [--small] [--timing] [--void]\n"
            "  -s N         N x N x N fcc unit cells (default 32); -nx/-ny/-nz per axis\n"
            "  -n, -i       time steps (default 100)\n"
            "  --thermo N   thermo output every N steps and at the end (default 10)\n"
            "  -odf N       chares per GPU (Tessera only, default 8)\n"
            "  -d           the decomposition (processes for MPI, chares for Tessera)\n"
            "  -ref FILE    compare the thermo rows with a stored miniMD run (1e-10 relative at\n"
            "               step 0, 1e-8 after; pressure relative to max(|P|, 1))\n"
            "  --small      start every buffer small, so they all grow during the run\n"
            "  --timing     also time the force kernel (synchronises: a separate run; the MPI\n"
            "               program times it anyway where it exchanges ghosts)\n"
            "  --void       a test, not the benchmark: the octant [0, L/2)^3 starts empty, so\n"
            "               subdomains start with no atoms and atom counts change a lot\n",
            prog);
}

static inline mmd_opts_t mmd_parse(int argc, char **argv, int rank)
{
    mmd_opts_t o = {.nx = 32, .ny = 32, .nz = 32, .steps = 100, .thermo = 10, .odf = 8};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int         used = 1;
        if (!strcmp(a, "-s") && v)
            o.nx = o.ny = o.nz = atoi(v);
        else if (!strcmp(a, "-nx") && v)
            o.nx = atoi(v);
        else if (!strcmp(a, "-ny") && v)
            o.ny = atoi(v);
        else if (!strcmp(a, "-nz") && v)
            o.nz = atoi(v);
        else if ((!strcmp(a, "-n") || !strcmp(a, "-i") || !strcmp(a, "--nsteps")) && v)
            o.steps = atoi(v);
        else if (!strcmp(a, "--thermo") && v)
            o.thermo = atoi(v);
        else if (!strcmp(a, "-odf") && v)
            o.odf = atoi(v);
        else if (!strcmp(a, "-ref") && v)
            o.ref = v;
        else if (!strcmp(a, "-d") && v) {
            if (sscanf(v, "%dx%dx%d", &o.p[0], &o.p[1], &o.p[2]) != 3 || o.p[0] < 1 ||
                o.p[1] < 1 || o.p[2] < 1) {
                if (rank == 0)
                    fprintf(stderr, "bad decomposition '%s' (want PXxPYxPZ)\n", v);
                exit(2);
            }
        } else if (!strcmp(a, "--small")) {
            o.small = 1;
            used    = 0;
        } else if (!strcmp(a, "--void")) {
            o.void_octant = 1;
            used          = 0;
        } else if (!strcmp(a, "--timing")) {
            o.timing = 1;
            used     = 0;
        } else {
            if (rank == 0) {
                fprintf(stderr, "unknown option '%s'\n", a);
                mmd_usage(argv[0]);
            }
            exit(2);
        }
        i += used;
    }
    if (o.nx < 1 || o.ny < 1 || o.nz < 1 || o.steps < 0 || o.thermo < 1 || o.odf < 1) {
        if (rank == 0) {
            fprintf(stderr, "invalid options\n");
            mmd_usage(argv[0]);
        }
        exit(2);
    }
    return o;
}

/** End the job after an error that every rank found (rank 0 printed it first). */
static inline void mmd_abort_all(int code)
{
    fflush(stderr);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Abort(MPI_COMM_WORLD, code);
}

/** A p[0] x p[1] x p[2] grid of `parts` subdomains (-d, or mmd_factor_stages: the fewest split
 *  dimensions, the same rule for ranks and chares); exits with a message when a subdomain would
 *  be narrower than the neighbor cutoff (the ghost exchange reaches one neighbor per side). */
static inline void mmd_grid(const mmd_opts_t *o, const mmd_problem_t *pr, int parts,
                            const char *what, int rank, int p[3])
{
    if (o->p[0]) {
        memcpy(p, o->p, 3 * sizeof(int));
        if (p[0] * p[1] * p[2] != parts) {
            if (rank == 0)
                fprintf(stderr, "-d %dx%dx%d needs %d %s, not %d\n", p[0], p[1], p[2],
                        p[0] * p[1] * p[2], what, parts);
            mmd_abort_all(2);
        }
    } else {
        mmd_factor_stages(parts, pr->L, pr->cutneigh, p);
    }
    for (int d = 0; d < 3; d++)
        if (pr->L[d] / p[d] < pr->cutneigh) {
            if (rank == 0)
                fprintf(stderr, "a %d x %d x %d grid of %s is too fine for a %.3f x %.3f x %.3f "
                        "box: subdomains must be at least the neighbor cutoff (%.2f) wide; use "
                        "fewer %s or a larger box\n", p[0], p[1], p[2], what, pr->L[0], pr->L[1],
                        pr->L[2], pr->cutneigh, what);
            mmd_abort_all(2);
        }
}

/** Count the atoms (pr->natoms) and centre and scale the velocities of `nsets` sets of atoms
 *  (this process's subdomains) as the reference does: subtract the mean over all atoms, then
 *  scale to temperature t0. Collective. */
static inline void mmd_setup_velocities(mmd_problem_t *pr, int nsets, double **v,
                                        const int64_t *n)
{
    double  s[3] = {0, 0, 0}, vcm[3], t = 0, tsum;
    int64_t mine = 0;
    for (int k = 0; k < nsets; k++)
        mine += n[k];
    MPI_Allreduce(&mine, &pr->natoms, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    for (int k = 0; k < nsets; k++)
        for (int64_t i = 0; i < n[k]; i++)
            for (int c = 0; c < 3; c++)
                s[c] += v[k][3 * i + c];
    MPI_Allreduce(s, vcm, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int c = 0; c < 3; c++)
        vcm[c] /= (double)pr->natoms;
    for (int k = 0; k < nsets; k++)
        for (int64_t i = 0; i < n[k]; i++)
            for (int c = 0; c < 3; c++) {
                v[k][3 * i + c] -= vcm[c];
                t += v[k][3 * i + c] * v[k][3 * i + c];
            }
    MPI_Allreduce(&t, &tsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double scale = sqrt(pr->t0 / (tsum / (double)(3 * pr->natoms - 3)));
    for (int k = 0; k < nsets; k++)
        for (int64_t i = 0; i < 3 * n[k]; i++)
            v[k][i] *= scale;
}

/* ---- thermo ---------------------------------------------------------------------------------- */

typedef struct mmd_thermo_row {
    int    step;
    double T, U, P;
} mmd_thermo_row_t;

/** Is step a thermo step (every `thermo` steps and the last)? */
static inline int mmd_is_thermo(const mmd_opts_t *o, int step)
{
    return step % o->thermo == 0 || step == o->steps;
}

static inline int mmd_thermo_rows(const mmd_opts_t *o)
{
    return o->steps / o->thermo + 2;
}

/** A row from the global sums of |v|^2, pair energy and virial (each pair counted once). */
static inline mmd_thermo_row_t mmd_thermo_row(const mmd_problem_t *pr, int step,
                                              const double sums[3])
{
    double           vol = pr->L[0] * pr->L[1] * pr->L[2];
    mmd_thermo_row_t r   = {step, sums[0] / (double)(3 * pr->natoms - 3),
                            sums[1] / (double)pr->natoms, (sums[0] + sums[2]) / (3 * vol)};
    return r;
}

/** Read the thermo table of a miniMD output (rows after "# Timestep T U P"); returns the number
 *  of rows (at most max), or -1 if the file cannot be read. */
static inline int mmd_read_reference(const char *path, mmd_thermo_row_t *rows, int max)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    char line[512];
    int  on = 0, n = 0;
    while (fgets(line, sizeof(line), fp) && n < max) {
        if (!strncmp(line, "# Timestep T U P", 16)) {
            on = 1;
            continue;
        }
        if (!on)
            continue;
        mmd_thermo_row_t r;
        double           tm;
        if (sscanf(line, "%d %lf %lf %lf %lf", &r.step, &r.T, &r.U, &r.P, &tm) != 5)
            break;
        rows[n++] = r;
    }
    fclose(fp);
    return n;
}

static inline double mmd_rel(double a, double ref, double floor_)
{
    double m = fabs(ref) > floor_ ? fabs(ref) : floor_;
    return m > 0 ? fabs(a - ref) / m : fabs(a - ref);
}

/** Print the table, compare it with the reference (if any) and print the result line; returns
 *  the exit status (0, or 3 when the reference does not match). Rank 0 only. */
static inline int mmd_report(const char *prog, const mmd_opts_t *o, const mmd_problem_t *pr,
                             const mmd_thermo_row_t *rows, int nrows, const char *config,
                             const char *result_fields, double sec_per_step,
                             const double split_ms[4], double neigh_per_atom)
{
    /* The force kernel's effective bandwidth: per atom its list (4 B a neighbor), the neighbors'
     * positions as if every one came from memory (a 32 B sector each), its own position, force
     * and count (60 B); and counting the list and the atom's own data only (the bytes that must
     * come from memory when the neighbors' positions are found in cache). */
    double sec  = split_ms[0] * 1e-3;
    double gbs  = sec > 0 ? (double)pr->natoms * (neigh_per_atom * 36.0 + 60.0) / sec / 1e9 : -1;
    double lgbs = sec > 0 ? (double)pr->natoms * (neigh_per_atom * 4.0 + 60.0) / sec / 1e9 : -1;
    printf("# Timestep T U P Time\n");
    for (int i = 0; i < nrows; i++)
        printf("%d %.15e %.15e %.15e %6.3f\n", rows[i].step, rows[i].T, rows[i].U, rows[i].P,
               0.0);
    printf("\n%s: %d x %d x %d cells, %lld atoms, %d steps, %s\n", prog, o->nx, o->ny, o->nz,
           (long long)pr->natoms, o->steps, config);
    printf("time per step: %.6f ms (force %.6f, neighbor %.6f, communication %.6f, other %.6f);"
           " %.4e atom-steps/s\n", sec_per_step * 1e3, split_ms[0], split_ms[1], split_ms[2],
           split_ms[3], sec_per_step > 0 ? (double)pr->natoms / sec_per_step : 0.0);
    printf("neighbors per atom %.2f; force kernel %s", neigh_per_atom,
           gbs > 0 ? "" : "not timed (--timing times it)\n");
    if (gbs > 0)
        printf("effective bandwidth %.1f GB/s (list 4 B + position 32 B a neighbor, 60 B an "
               "atom), %.1f GB/s of list and atom data alone\n", gbs, lgbs);
    int status = 0;
    if (o->ref) {
        mmd_thermo_row_t ref[1024];
        int              nref = mmd_read_reference(o->ref, ref, 1024);
        double           at0 = -1, atlast = -1, worst = 0;
        int              matched = 0, last = -1;
        for (int i = 0; i < nrows; i++)
            for (int k = 0; k < nref; k++) {
                if (ref[k].step != rows[i].step)
                    continue;
                double d = mmd_rel(rows[i].T, ref[k].T, 0);
                double e = mmd_rel(rows[i].U, ref[k].U, 0);
                double q = mmd_rel(rows[i].P, ref[k].P, 1.0);
                double m = d > e ? d : e;
                m        = m > q ? m : q;
                double tol = rows[i].step == 0 ? 1e-10 : 1e-8;
                if (!(m <= tol))
                    status = 3;
                if (rows[i].step == 0)
                    at0 = m;
                if (rows[i].step > last) {
                    last   = rows[i].step;
                    atlast = m;
                }
                worst = m > worst ? m : worst;
                matched++;
            }
        /* Every row of the run against a row of the reference, and every row of the reference
         * met: the same steps, each once. */
        if (nref <= 0 || matched != nrows || matched != nref)
            status = 3;
        printf("reference %s: %d rows compared (the run printed %d, the reference has %d); max "
               "relative difference (T, U; P to max(|P|,1)) at step 0 %.2e, at step %d %.2e, "
               "over all steps %.2e: %s\n", o->ref, matched, nrows, nref, at0, last, atlast,
               worst, status ? "WRONG" : "ok");
    }
    const mmd_thermo_row_t *f = nrows ? &rows[nrows - 1] : NULL;
    printf("RESULT prog=%s nx=%d ny=%d nz=%d natoms=%lld steps=%d %s ms_per_step=%.6f "
           "force_ms=%.6f neigh_ms=%.6f comm_ms=%.6f other_ms=%.6f atom_steps_per_s=%.6e "
           "neigh_per_atom=%.3f force_gbs=%.1f force_list_gbs=%.1f T=%.17g U=%.17g P=%.17g\n", prog, o->nx, o->ny, o->nz, (long long)pr->natoms,
           o->steps, result_fields, sec_per_step * 1e3, split_ms[0], split_ms[1], split_ms[2],
           split_ms[3], sec_per_step > 0 ? (double)pr->natoms / sec_per_step : 0.0,
           neigh_per_atom, gbs, lgbs, f ? f->T : 0, f ? f->U : 0, f ? f->P : 0);
    fflush(stdout);
    return status;
}

#endif /* MINIMD_COMMON_H */

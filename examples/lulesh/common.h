/*
 * common.h — what the two LULESH programs share besides the kernels: the options (the
 * reference's names), the closing report (the reference's, from figures a driver gathers), the
 * RESULT line and the comparison with the reference's reports (reference/reports.csv).
 */
#ifndef LULESH_COMMON_H
#define LULESH_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LUL_REFERENCE_CSV
#define LUL_REFERENCE_CSV "reference/reports.csv"
#endif

typedef struct lul_opts {
    int         s;        /* -s: edge elements per domain (MPI: per rank) */
    int         its;      /* -i: iteration cap */
    int         numReg;   /* -r: regions */
    int         balance;  /* -b */
    int         cost;     /* -c */
    int         progress; /* -p */
    int         quiet;    /* -q */
    int64_t     g;        /* -g: global edge elements (Tessera; 0: s × cube root of the ranks) */
    int         odf;      /* -odf: Tessera: chares per GPU */
    const char *verify;   /* -verify CASE: compare with that row of the reference's reports */
    const char *refcsv;   /* -refcsv FILE (default LUL_REFERENCE_CSV, or $LULESH_REFERENCE_CSV) */
    double      tol;      /* -tol: relative tolerance of the origin energy (default 1e-9) */
    int         rot[3];   /* -rotate P or PXxPYxPZ: region costs of the reference's P³ ranks */
} lul_opts_t;

static inline void lul_usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-s SIZE] [-i ITERS] [-r REGIONS] [-b BALANCE] [-c COST] [-p] [-q]\n"
            "          [-g N] [-odf N] [-rotate P] [-verify CASE] [-refcsv FILE] [-tol REL]\n"
            "  -s       edge elements per domain (default 30)\n"
            "  -i       at most this many cycles (default: run to the stop time)\n"
            "  -r       regions (default 11); -b balance between them (default 1); -c extra\n"
            "           cost of the expensive ones (default 1): they repeat EOS work only\n"
            "  -p       print each cycle's time and time step; -q only the RESULT line\n"
            "  -g       global edge elements (Tessera; default SIZE × cube root of ranks)\n"
            "  -odf     chares per GPU (Tessera only, default 8)\n"
            "  -rotate  P or PXxPYxPZ: each block's region costs rotated as on the reference's\n"
            "           run on P³ ranks (rank r's by r: a different dominant region per rank)\n"
            "  -verify  compare with case CASE of reference/reports.csv (LLNL's reports)\n",
            prog);
}

static inline int lul_parse_int(const char *v, int *out)
{
    char *end;
    long  x = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end)
        return 0;
    *out = (int)x;
    return 1;
}

/* Parse argv (after Tessera removed its +flags); exits with a message on a bad option. */
static inline lul_opts_t lul_parse(int argc, char **argv, int rank)
{
    lul_opts_t o = {.s = 30, .its = 9999999, .numReg = 11, .balance = 1, .cost = 1, .odf = 8,
                    .tol = 1e-9};
    const char *env = getenv("LULESH_REFERENCE_CSV");
    o.refcsv        = env && *env ? env : LUL_REFERENCE_CSV;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int         ok = 1, g = 0;
        if (!strcmp(a, "-s"))
            ok = lul_parse_int(v, &o.s), i++;
        else if (!strcmp(a, "-i"))
            ok = lul_parse_int(v, &o.its), i++;
        else if (!strcmp(a, "-r"))
            ok = lul_parse_int(v, &o.numReg), i++;
        else if (!strcmp(a, "-b"))
            ok = lul_parse_int(v, &o.balance), i++;
        else if (!strcmp(a, "-c"))
            ok = lul_parse_int(v, &o.cost), i++;
        else if (!strcmp(a, "-odf"))
            ok = lul_parse_int(v, &o.odf), i++;
        else if (!strcmp(a, "-g")) {
            ok  = lul_parse_int(v, &g), i++;
            o.g = g;
        } else if (!strcmp(a, "-p"))
            o.progress = 1;
        else if (!strcmp(a, "-q"))
            o.quiet = 1;
        else if (!strcmp(a, "-verify") && v)
            o.verify = v, i++;
        else if (!strcmp(a, "-refcsv") && v)
            o.refcsv = v, i++;
        else if (!strcmp(a, "-tol") && v)
            o.tol = atof(v), i++;
        else if (!strcmp(a, "-rotate") && v) {
            int k = sscanf(v, "%dx%dx%d", &o.rot[0], &o.rot[1], &o.rot[2]);
            if (k == 1)
                o.rot[1] = o.rot[2] = o.rot[0];
            ok = (k == 1 || k == 3) && o.rot[0] >= 1 && o.rot[1] >= 1 && o.rot[2] >= 1, i++;
        }
        else if (!strcmp(a, "-h")) {
            if (rank == 0)
                lul_usage(argv[0]);
            exit(0);
        } else
            ok = 0;
        if (!ok) {
            if (rank == 0) {
                fprintf(stderr, "bad or unknown option '%s'\n", a);
                lul_usage(argv[0]);
            }
            exit(2);
        }
    }
    if (o.s < 1 || o.its < 0 || o.numReg < 1 || o.balance < 0 || o.cost < 0 || o.odf < 1 ||
        o.g < 0 || !(o.tol > 0)) {
        if (rank == 0) {
            fprintf(stderr, "invalid options\n");
            lul_usage(argv[0]);
        }
        exit(2);
    }
    return o;
}

/* The reference's opening lines. */
static inline void lul_print_banner(const lul_opts_t *o, int64_t size, int domains, int64_t n)
{
    if (o->quiet)
        return;
    printf("Running problem size %lld^3 per domain until completion\n", (long long)size);
    printf("Num processors: %d\n", domains);
    printf("Total number of elements: %lld \n\n", (long long)(n * n * n));
    printf("To run other sizes, use -s <integer>.\n"
           "To run a fixed number of iterations, use -i <integer>.\n"
           "To run a more or less balanced region set, use -b <integer>.\n"
           "To change the relative costs of regions, use -c <integer>.\n"
           "To print out progress, use -p\n"
           "See help (-h) for more options\n\n");
    fflush(stdout);
}

static inline void lul_print_progress(const lul_opts_t *o, int cycle, double time, double dt)
{
    if (o->progress && !o->quiet)
        printf("cycle = %d, time = %e, dt=%e\n", cycle, time, dt);
}

/** What a driver gathers for the closing report. */
typedef struct lul_report {
    const char   *prog;    /* "mpi" or "tess" */
    const char   *backend; /* "host", "cuda" */
    int64_t       size;    /* the reference's "Problem size": edge elements per domain */
    int64_t       n;       /* global edge elements */
    int           domains; /* the reference's "MPI tasks": domains (ranks or chares) */
    int           procs, ppn, odf;
    int           cycles;
    double        origin_e;
    const double *plane;   /* e of elements (i,j,0), i,j < size, x fastest (rank 0's plane 0) */
    double        elapsed; /* seconds (the slowest process) */
} lul_report_t;

/* Looks up case `name` in the reference's reports: iterations and origin energy. */
static inline int lul_reference_lookup(const char *csv, const char *name, int *its_p, double *e_p)
{
    FILE *f = fopen(csv, "r");
    if (!f)
        return 0;
    char line[1024];
    int  found = 0;
    while (!found && fgets(line, sizeof(line), f)) {
        /* case,ranks,s,options,iterations,final_origin_energy,... */
        char *fields[6] = {0};
        char *p         = line;
        for (int k = 0; k < 6 && p; k++) {
            fields[k] = p;
            p         = strchr(p, ',');
            if (p)
                *p++ = '\0';
        }
        if (fields[5] && !strcmp(fields[0], name)) {
            *its_p = atoi(fields[4]);
            *e_p   = atof(fields[5]);
            found  = 1;
        }
    }
    fclose(f);
    return found;
}

/* The closing report (the reference's, VerifyAndWriteFinalOutput), the RESULT line, and the
 * comparison with the reference when asked. Returns the exit status (0, or 3 on a mismatch). */
static inline int lul_report_print(const lul_report_t *r, const lul_opts_t *o)
{
    int64_t m = r->size;
    double  maxabs = 0, totabs = 0, maxrel = 0;
    for (int64_t j = 0; j < m; j++)
        for (int64_t k = j + 1; k < m; k++) {
            double ad = fabs(r->plane[j * m + k] - r->plane[k * m + j]);
            totabs += ad;
            if (maxabs < ad)
                maxabs = ad;
            double rd = ad / r->plane[k * m + j];
            if (maxrel < rd)
                maxrel = rd;
        }
    int    cyc    = r->cycles > 0 ? r->cycles : 1;
    double grind1 = r->elapsed * 1e6 / cyc / ((double)m * m * m);
    double grind2 = r->elapsed * 1e6 / cyc / ((double)r->n * r->n * r->n);
    double fom    = 1000.0 / grind2;
    if (!o->quiet) {
        printf("Run completed:\n");
        printf("   Problem size        =  %lld\n", (long long)m);
        printf("   MPI tasks           =  %d\n", r->domains);
        printf("   Iteration count     =  %d\n", r->cycles);
        printf("   Final Origin Energy =  %.15e\n", r->origin_e);
        printf("   Testing Plane 0 of Energy Array on rank 0:\n");
        printf("        MaxAbsDiff   = %.15e\n", maxabs);
        printf("        TotalAbsDiff = %.15e\n", totabs);
        printf("        MaxRelDiff   = %.15e\n\n", maxrel);
        printf("Elapsed time         = %10.2g (s)\n", r->elapsed);
        printf("Grind time (us/z/c)  = %10.8g (per dom)  (%10.8g overall)\n", grind1, r->elapsed);
        printf("FOM                  = %10.8g (z/s)\n\n", fom);
    }
    int status = 0;
    if (o->verify) {
        int    its;
        double e;
        if (!lul_reference_lookup(o->refcsv, o->verify, &its, &e)) {
            printf("verify: no case '%s' in %s\n", o->verify, o->refcsv);
            status = 3;
        } else {
            double rel = fabs(r->origin_e - e) / fabs(e);
            int    ok  = its == r->cycles && rel <= o->tol && maxrel <= 1e-9;
            printf("verify %s: iterations %d (reference %d), origin energy %.15e (reference "
                   "%.15e), relative difference %.2e, symmetry %.2e: %s\n",
                   o->verify, r->cycles, its, r->origin_e, e, rel, maxrel, ok ? "ok" : "WRONG");
            status = ok ? 0 : 3;
        }
    }
    printf("RESULT prog=%s s=%lld n=%lld domains=%d procs=%d ppn=%d odf=%d backend=%s "
           "regions=%d balance=%d cost=%d iterations=%d origin_energy=%.17g max_abs_diff=%.6g "
           "total_abs_diff=%.6g max_rel_diff=%.6g elapsed=%.6f fom=%.6g\n",
           r->prog, (long long)m, (long long)r->n, r->domains, r->procs, r->ppn, r->odf,
           r->backend, o->numReg, o->balance, o->cost, r->cycles, r->origin_e, maxabs, totabs,
           maxrel, r->elapsed, fom);
    fflush(stdout);
    return status;
}

#endif /* LULESH_COMMON_H */

/* kernels_host.c — the host versions of the MiniMD kernels, the launchers that choose between
 * them and the CUDA ones, and the lattice set-up. No dependency on Tessera or MPI. */
#include "minimd.h"

#include <stdlib.h>
#include <string.h>

int mmd_backend = MMD_HOST;
void (*mmd_host_launch)(void *stream, mmd_host_fn_t fn, const void *args, size_t args_size);

static void launch(void *stream, mmd_host_fn_t fn, const void *args, size_t size)
{
    if (stream && mmd_host_launch)
        mmd_host_launch(stream, fn, args, size);
    else
        fn((void *)args);
}

#ifdef MINIMD_CUDA
#define ON_CUDA(call)                                                                           \
    do {                                                                                        \
        if (mmd_backend == MMD_CUDA) {                                                          \
            call;                                                                               \
            return;                                                                             \
        }                                                                                       \
    } while (0)
#else
#define ON_CUDA(call) do { } while (0)
#endif

/* ---- integrate --------------------------------------------------------------------------------- */

typedef struct integ_args {
    double       *x, *v;
    const double *f;
    int64_t       n;
    double        dt, dtforce;
} integ_args_t;

static void host_initial(void *p)
{
    integ_args_t *a = p;
    for (int64_t i = 0; i < a->n; i++)
        mmd_initial_integrate_atom(a->x, a->v, a->f, i, a->dt, a->dtforce);
}

static void host_final(void *p)
{
    integ_args_t *a = p;
    for (int64_t i = 0; i < a->n; i++)
        mmd_final_integrate_atom(a->v, a->f, i, a->dtforce);
}

void mmd_initial_integrate(void *s, double *x, double *v, const double *f, int64_t n, double dt,
                           double dtforce)
{
    ON_CUDA(mmd_cuda_initial_integrate(s, x, v, f, n, dt, dtforce));
    integ_args_t a = {x, v, f, n, dt, dtforce};
    launch(s, host_initial, &a, sizeof(a));
}

void mmd_final_integrate(void *s, double *v, const double *f, int64_t n, double dtforce)
{
    ON_CUDA(mmd_cuda_final_integrate(s, v, f, n, dtforce));
    integ_args_t a = {NULL, v, f, n, 0, dtforce};
    launch(s, host_final, &a, sizeof(a));
}

/* ---- force and thermo -------------------------------------------------------------------------- */

typedef struct force_args {
    const double *x;
    double       *f;
    const int    *neigh, *numneigh;
    int64_t       stride, n;
    double        cutforcesq;
    double       *eatom, *watom;
} force_args_t;

static void host_force(void *p)
{
    force_args_t *a = p;
    for (int64_t i = 0; i < a->n; i++)
        mmd_force_atom(a->x, a->f, a->neigh, a->numneigh, a->stride, i, a->cutforcesq, a->eatom,
                       a->watom);
}

void mmd_force(void *s, const double *x, double *f, const int *neigh, const int *numneigh,
               int64_t stride, int64_t n, double cutforcesq, double *eatom, double *watom)
{
    ON_CUDA(mmd_cuda_force(s, x, f, neigh, numneigh, stride, n, cutforcesq, eatom, watom));
    force_args_t a = {x, f, neigh, numneigh, stride, n, cutforcesq, eatom, watom};
    launch(s, host_force, &a, sizeof(a));
}

typedef struct thermo_args {
    const double *v, *eatom, *watom;
    int64_t       n;
    double       *out;
} thermo_args_t;

static void host_thermo(void *p)
{
    thermo_args_t *a = p;
    double         s[3] = {0, 0, 0};
    for (int64_t i = 0; i < a->n; i++) {
        s[0] += mmd_v2_atom(a->v, i);
        s[1] += a->eatom[i];
        s[2] += a->watom[i];
    }
    memcpy(a->out, s, sizeof(s));
}

void mmd_thermo_sums(void *s, const double *v, const double *eatom, const double *watom,
                     int64_t n, double *out)
{
    ON_CUDA(mmd_cuda_thermo_sums(s, v, eatom, watom, n, out));
    thermo_args_t a = {v, eatom, watom, n, out};
    launch(s, host_thermo, &a, sizeof(a));
}

/* ---- moving atoms ------------------------------------------------------------------------------ */

typedef struct pbc_args {
    double *x;
    int64_t n;
    double  L[3];
} pbc_args_t;

static void host_pbc(void *p)
{
    pbc_args_t *a = p;
    for (int64_t i = 0; i < a->n; i++)
        mmd_pbc_atom(a->x, i, a->L[0], a->L[1], a->L[2]);
}

void mmd_pbc(void *s, double *x, int64_t n, const double L[3])
{
    ON_CUDA(mmd_cuda_pbc(s, x, n, L));
    pbc_args_t a = {x, n, {L[0], L[1], L[2]}};
    launch(s, host_pbc, &a, sizeof(a));
}

typedef struct select_args {
    const double *x;
    int64_t       first, last, cap;
    int           d;
    int           pad; /* zero: launch arguments without implicit padding (a step graph's
                        * TESS_CHECK compares them byte for byte) */
    double        a, b;
    int          *list, *count;
} select_args_t;

static void host_select(void *p)
{
    select_args_t *a = p;
    int64_t        n = 0;
    for (int64_t i = a->first; i < a->last; i++) {
        if (mmd_in_slab(a->x, i, a->d, a->a, a->b)) {
            if (n < a->cap)
                a->list[n] = (int)i;
            n++;
        }
    }
    *a->count = (int)n;
}

void mmd_select(void *s, const double *x, int64_t first, int64_t last, int d, double a, double b,
                int *list, int *count, int64_t cap, int *scratch)
{
    ON_CUDA(mmd_cuda_select(s, x, first, last, d, a, b, list, count, cap, scratch));
    (void)scratch;
    select_args_t args = {x, first, last, cap, d, 0, a, b, list, count};
    launch(s, host_select, &args, sizeof(args));
}

typedef struct pack_args {
    const double *x, *v;
    const int    *list;
    int64_t       n;
    int           d;
    int           pad; /* zero (select_args_t) */
    double        shift;
    double       *buf;
} pack_args_t;

static void host_pack(void *p)
{
    pack_args_t *a = p;
    for (int64_t k = 0; k < a->n; k++)
        mmd_pack_atom(a->x, a->v, a->list, k, a->d, a->shift, a->buf);
}

void mmd_pack(void *s, const double *x, const double *v, const int *list, int64_t n, int d,
              double shift, double *buf)
{
    if (n == 0)
        return;
    ON_CUDA(mmd_cuda_pack(s, x, v, list, n, d, shift, buf));
    pack_args_t a = {x, v, list, n, d, 0, shift, buf};
    launch(s, host_pack, &a, sizeof(a));
}

typedef struct remove_args {
    double    *x, *v;
    const int *la, *lb;
    int64_t    na, nb, n;
} remove_args_t;

static void host_remove(void *p)
{
    remove_args_t *a = p;
    for (int64_t j = a->n - a->na - a->nb; j < a->n; j++) {
        int64_t to = mmd_remove_dest(a->la, a->na, a->lb, a->nb, a->n, j);
        if (to >= 0)
            mmd_move_atom(a->x, a->v, to, j);
    }
}

void mmd_remove(void *s, double *x, double *v, const int *la, int64_t na, const int *lb,
                int64_t nb, int64_t n)
{
    if (na + nb == 0)
        return;
    ON_CUDA(mmd_cuda_remove(s, x, v, la, na, lb, nb, n));
    remove_args_t a = {x, v, la, lb, na, nb, n};
    launch(s, host_remove, &a, sizeof(a));
}

typedef struct unpack_args {
    const double *buf;
    int64_t       n, first;
    double       *x, *v;
} unpack_args_t;

static void host_unpack(void *p)
{
    unpack_args_t *a = p;
    for (int64_t k = 0; k < a->n; k++)
        mmd_unpack_atom(a->buf, k, a->x, a->v, a->first);
}

void mmd_unpack(void *s, const double *buf, int64_t n, double *x, double *v, int64_t first)
{
    if (n == 0)
        return;
    ON_CUDA(mmd_cuda_unpack(s, buf, n, x, v, first));
    unpack_args_t a = {buf, n, first, x, v};
    launch(s, host_unpack, &a, sizeof(a));
}

/* ---- bins and neighbor lists ----------------------------------------------------------------- */

typedef struct bin_args {
    const double *x;
    int64_t       n;
    mmd_bins_t    b;
    int          *bincount, *binatoms, *status;
} bin_args_t;

static void host_bin(void *p)
{
    bin_args_t *a     = p;
    int64_t     nbins = (int64_t)a->b.n[0] * a->b.n[1] * a->b.n[2];
    int         most  = 0;
    memset(a->bincount, 0, sizeof(int) * (size_t)nbins);
    for (int64_t i = 0; i < a->n; i++) {
        int bin = mmd_bin_of(&a->b, a->x + MMD_XW * i);
        int k   = a->bincount[bin]++;
        if (k < a->b.cap)
            a->binatoms[(int64_t)bin * a->b.cap + k] = (int)i;
        if (k + 1 > most)
            most = k + 1;
    }
    a->status[0] = most;
    a->status[1] = 0;
}

void mmd_bin(void *s, const double *x, int64_t n, mmd_bins_t b, int *bincount, int *binatoms,
             int *status)
{
    ON_CUDA(mmd_cuda_bin(s, x, n, b, bincount, binatoms, status));
    bin_args_t a = {x, n, b, bincount, binatoms, status};
    launch(s, host_bin, &a, sizeof(a));
}

typedef struct neigh_args {
    const double *x;
    int64_t       nlocal;
    mmd_bins_t    b;
    const int    *bincount, *binatoms;
    double        cutneighsq;
    int          *neigh, *numneigh;
    int64_t       stride;
    int           maxneigh;
    int           pad; /* zero (select_args_t) */
    int          *status;
} neigh_args_t;

static void host_neighbor(void *p)
{
    neigh_args_t *a    = p;
    int           most = 0;
    for (int64_t i = 0; i < a->nlocal; i++) {
        int n = mmd_neigh_atom(a->x, i, &a->b, a->bincount, a->binatoms, a->cutneighsq, a->neigh,
                               a->stride, a->maxneigh);
        a->numneigh[i] = n < a->maxneigh ? n : a->maxneigh;
        if (n > most)
            most = n;
    }
    a->status[1] = most;
}

void mmd_neighbor(void *s, const double *x, int64_t nlocal, mmd_bins_t b, const int *bincount,
                  const int *binatoms, double cutneighsq, int *neigh, int *numneigh,
                  int64_t stride, int maxneigh, int *status)
{
    ON_CUDA(mmd_cuda_neighbor(s, x, nlocal, b, bincount, binatoms, cutneighsq, neigh, numneigh,
                              stride, maxneigh, status));
    neigh_args_t a = {x, nlocal, b, bincount, binatoms, cutneighsq, neigh, numneigh, stride,
                      maxneigh, 0, status};
    launch(s, host_neighbor, &a, sizeof(a));
}

/* ---- lattice ----------------------------------------------------------------------------------- */

/* The reference's generator: Park-Miller, Schrage's form, times the double 1/IM. */
static double park_miller(int *seed)
{
    int k = *seed / 127773;
    *seed = 16807 * (*seed - k * 127773) - 2836 * k;
    if (*seed < 0)
        *seed += 2147483647;
    return (1.0 / 2147483647) * *seed;
}

/* Half-grid indices whose position 0.5 alat i lies in [lo, hi). */
static void site_range(double alat, int nmax, double lo, double hi, int *i0, int *i1)
{
    int a = (int)floor(lo / (0.5 * alat)) - 1, b = (int)ceil(hi / (0.5 * alat)) + 1;
    *i0   = a < 0 ? 0 : a;
    *i1   = b > nmax ? nmax : b;
    while (*i0 < *i1 && !(0.5 * alat * *i0 >= lo))
        (*i0)++;
    while (*i1 > *i0 && !(0.5 * alat * (*i1 - 1) < hi))
        (*i1)--;
}

int mmd_lattice(const mmd_problem_t *p, const double lo[3], const double hi[3], double **x_p,
                double **v_p, int64_t *n_p)
{
    int r[3][2];
    int nmax[3] = {2 * p->nx, 2 * p->ny, 2 * p->nz};
    for (int d = 0; d < 3; d++)
        site_range(p->alat, nmax[d], lo[d], hi[d], &r[d][0], &r[d][1]);
    int64_t cap = ((int64_t)(r[0][1] - r[0][0]) * (r[1][1] - r[1][0]) * (r[2][1] - r[2][0])) / 2 + 1;
    double *x = malloc(sizeof(double) * MMD_XW * (size_t)cap);
    double *v = malloc(sizeof(double) * 3 * (size_t)cap);
    if (!x || !v) {
        free(x);
        free(v);
        return -1;
    }
    int64_t n = 0;
    for (int k = r[2][0]; k < r[2][1]; k++)
        for (int j = r[1][0]; j < r[1][1]; j++)
            for (int i = r[0][0]; i < r[0][1]; i++) {
                if ((i + j + k) % 2)
                    continue;
                double *xn = x + MMD_XW * n;
                xn[0]      = 0.5 * p->alat * i;
                xn[1]      = 0.5 * p->alat * j;
                xn[2]      = 0.5 * p->alat * k;
                xn[3]      = 0.0;
                if (p->void_octant && xn[0] < 0.5 * p->L[0] && xn[1] < 0.5 * p->L[1] &&
                    xn[2] < 0.5 * p->L[2])
                    continue;
                int seed     = k * (2 * p->ny) * (2 * p->nx) + j * (2 * p->nx) + i + 1;
                for (int c = 0; c < 3; c++) {
                    for (int m = 0; m < 5; m++)
                        park_miller(&seed);
                    v[3 * n + c] = park_miller(&seed);
                }
                n++;
            }
    *x_p = x;
    *v_p = v;
    *n_p = n;
    return 0;
}

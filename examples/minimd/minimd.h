/*
 * minimd.h — MiniMD (the Lennard-Jones benchmark of the public miniMD), shared by the pure MPI
 * program and the Tessera one: the problem, the decomposition, the per-atom math (written once,
 * for CUDA and the host) and the launchers.
 *
 * The problem: an fcc lattice of nx × ny × nz unit cells at reduced density 0.8442 (4 atoms a
 * cell) in a periodic box; velocities from a Park-Miller stream per lattice site, centre-of-mass
 * motion removed, scaled to T0 = 1.44; velocity Verlet with dt 0.005; LJ (eps = sigma = 1) cut
 * at 2.5, no shift; full neighbor lists of the pairs within 2.8 (cutoff + skin 0.3) built every
 * 20 steps, the pair set and each pair's periodic image kept until the next build (exactly as
 * the reference does: a ghost atom is a copy made at the build, later steps resend its owner's
 * position plus the same shift).
 *
 * Storage of a subdomain: positions x[MMD_XW*i] (owned atoms 0..nlocal-1, then ghosts; x, y, z
 * and a pad, so that a neighbor's position is one 32-byte sector and two 16-byte loads on a
 * device), velocities v[3*i] and forces f[3*i] of the owned atoms. The neighbor list is column-major for coalesced
 * reads on a device: neighbor k of atom i is neigh[k*stride + i], numneigh[i] of them.
 */
#ifndef MINIMD_H
#define MINIMD_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <tessera/kernel.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the problem ------------------------------------------------------------------------- */

#define MMD_XW     4            /* doubles per position (x, y, z, pad) */
#define MMD_MOVE_W (MMD_XW + 3) /* doubles per atom that moves to another subdomain */

typedef struct mmd_problem {
    int     nx, ny, nz;     /* unit cells */
    int64_t natoms;         /* 4 nx ny nz */
    double  alat;           /* lattice constant (4 / rho)^(1/3) */
    double  L[3];           /* box */
    double  dt, dtforce;    /* time step, 0.5 dt / mass */
    double  cutforce, cutneigh;
    double  t0;
    int     reneigh;        /* rebuild every this many steps */
    int     void_octant;    /* a test: no atoms in [0, L/2)^3 at the start (natoms then counts
                               the sites made) */
} mmd_problem_t;

static inline mmd_problem_t mmd_problem(int nx, int ny, int nz)
{
    mmd_problem_t p;
    p.nx = nx;
    p.ny = ny;
    p.nz = nz;
    p.natoms   = 4 * (int64_t)nx * ny * nz;
    p.alat     = pow(4.0 / 0.8442, 1.0 / 3.0);
    p.L[0]     = nx * p.alat;
    p.L[1]     = ny * p.alat;
    p.L[2]     = nz * p.alat;
    p.dt       = 0.005;
    p.dtforce  = 0.5 * p.dt / 1.0;
    p.cutforce = 2.5;
    p.cutneigh = 2.5 + 0.3;
    p.t0       = 1.44;
    p.reneigh  = 20;
    p.void_octant = 0;
    return p;
}

/* ---- decomposition ------------------------------------------------------------------------- */

/** Subdomains at least this many neighbor cutoffs wide along a split side, for
 *  mmd_factor_stages: a ghost shell of at most a quarter of the width on each side. */
#define MMD_STAGE_MIN_WIDTH 4.0

/** Among the grids of `parts` subdomains whose every split side is at least `min_width` wide
 *  (min_width <= 0: all of them), the one that splits the fewest dimensions (count_splits) and
 *  then has the least surface, the first found in the order the reference searches (px, then
 *  py, strictly smaller). Returns 0, p untouched, when no grid qualifies. */
static inline int mmd_factor_best(int parts, const double L[3], double min_width,
                                  int count_splits, int p[3])
{
    int    best_splits = 4;
    double best        = -1;
    for (int px = 1; px <= parts; px++) {
        if (parts % px)
            continue;
        for (int py = 1; py <= parts / px; py++) {
            if ((parts / px) % py)
                continue;
            int q[3] = {px, py, parts / px / py}, splits = 0, ok = 1;
            for (int d = 0; d < 3; d++)
                if (q[d] > 1) {
                    splits += count_splits;
                    ok &= L[d] / q[d] >= min_width;
                }
            double surf = L[0] * L[1] / (q[0] * q[1]) + L[0] * L[2] / (q[0] * q[2]) +
                          L[1] * L[2] / (q[1] * q[2]);
            if (ok && (splits < best_splits || (splits == best_splits && surf < best))) {
                best_splits = splits;
                best        = surf;
                p[0] = q[0], p[1] = q[1], p[2] = q[2];
            }
        }
    }
    return best_splits < 4;
}

/** The grid of `parts` subdomains with the least surface (the reference's choice). */
static inline void mmd_factor(int parts, const double L[3], int p[3])
{
    (void)mmd_factor_best(parts, L, 0.0, 0, p);
}

/** The grid of `parts` subdomains that splits the fewest dimensions while every subdomain is
 *  at least MMD_STAGE_MIN_WIDTH cutoffs wide along each split one (ties: the least surface, in
 *  mmd_factor's order); mmd_factor's grid when none is. Each split dimension is one ghost stage
 *  whose messages cross subdomains: on one GPU a step waits for them on its critical path (the
 *  other stages are copies within a subdomain), which costs more than the larger ghost shell of
 *  a slab (MiniMD 8 M atoms, ODF 8 on the H200: 1x1x8 1.023-1.030 x MPI, the least-surface
 *  1x2x4 1.044-1.049). */
static inline void mmd_factor_stages(int parts, const double L[3], double cutneigh, int p[3])
{
    if (!mmd_factor_best(parts, L, MMD_STAGE_MIN_WIDTH * cutneigh, 1, p))
        mmd_factor(parts, L, p);
}

/** Boundary c of p subdomains along a box side L: subdomain c is [bound(c), bound(c+1)). */
static inline double mmd_bound(double L, int p, int c)
{
    return c >= p ? L : c * (L / p);
}

/* ---- bins ---------------------------------------------------------------------------------- */

/* Bins over a subdomain and its ghost shell [lo - cutneigh, hi + cutneigh], each at least half
 * the neighbor cutoff wide; a bin holds at most `cap` atoms (the build reports the largest count
 * seen so a caller can grow and rebuild). */
typedef struct mmd_bins {
    double lo[3], inv[3]; /* origin, bins per unit length */
    int    n[3], reach[3];
    int    cap;
    int    pad; /* zero: no implicit padding (bins go by value into launch arguments) */
} mmd_bins_t;

static inline void mmd_bins_setup(const double lo[3], const double hi[3], double cutneigh,
                                  int cap, mmd_bins_t *b)
{
    for (int d = 0; d < 3; d++) {
        double ext = hi[d] - lo[d] + 2 * cutneigh;
        int    n   = (int)(ext / (0.5 * cutneigh));
        if (n < 1)
            n = 1;
        b->lo[d]    = lo[d] - cutneigh;
        b->n[d]     = n;
        b->inv[d]   = n / ext;
        b->reach[d] = (int)ceil(cutneigh * b->inv[d]);
    }
    b->cap = cap;
}

static inline TESS_HD int mmd_bin_coord(const mmd_bins_t *b, int d, double x)
{
    int c = (int)floor((x - b->lo[d]) * b->inv[d]);
    return c < 0 ? 0 : c >= b->n[d] ? b->n[d] - 1 : c;
}

static inline TESS_HD int mmd_bin_of(const mmd_bins_t *b, const double *xi)
{
    return (mmd_bin_coord(b, 2, xi[2]) * b->n[1] + mmd_bin_coord(b, 1, xi[1])) * b->n[0] +
           mmd_bin_coord(b, 0, xi[0]);
}

/* ---- per-atom math (one source for every backend) ------------------------------------------ */

static inline TESS_HD void mmd_initial_integrate_atom(double *TESS_RESTRICT x,
                                                      double *TESS_RESTRICT v,
                                                      const double *TESS_RESTRICT f, int64_t i,
                                                      double dt, double dtforce)
{
    for (int c = 0; c < 3; c++) {
        v[3 * i + c] += dtforce * f[3 * i + c];
        x[MMD_XW * i + c] += dt * v[3 * i + c];
    }
}

static inline TESS_HD void mmd_final_integrate_atom(double *TESS_RESTRICT v,
                                                    const double *TESS_RESTRICT f, int64_t i,
                                                    double dtforce)
{
    for (int c = 0; c < 3; c++)
        v[3 * i + c] += dtforce * f[3 * i + c];
}

/* Wrap an owned atom into [0, L) (only at rebuilds, as the reference); L = 0 leaves a
 * dimension alone. */
static inline TESS_HD void mmd_pbc_atom(double *x, int64_t i, double L0, double L1, double L2)
{
    double L[3] = {L0, L1, L2};
    for (int c = 0; c < 3; c++) {
        if (x[MMD_XW * i + c] < 0)
            x[MMD_XW * i + c] += L[c];
        if (x[MMD_XW * i + c] >= L[c])
            x[MMD_XW * i + c] -= L[c];
    }
}

/* Position j (read-only data on a device: two 16-byte loads through the read-only cache). */
static inline TESS_HD void mmd_pos(const double *TESS_RESTRICT x, int64_t j, double *p)
{
#if defined(__CUDA_ARCH__)
    double2 a = __ldg((const double2 *)(x + MMD_XW * j));
    p[0]      = a.x;
    p[1]      = a.y;
    p[2]      = __ldg(x + MMD_XW * j + 2);
#else
    p[0] = x[MMD_XW * j];
    p[1] = x[MMD_XW * j + 1];
    p[2] = x[MMD_XW * j + 2];
#endif
}

/* The LJ force on atom i from its full neighbor list; with eatom, also its half of the pair
 * energies and virials (each pair is in two lists). */
static inline TESS_HD void mmd_force_atom(const double *TESS_RESTRICT x, double *TESS_RESTRICT f,
                                          const int *TESS_RESTRICT neigh,
                                          const int *TESS_RESTRICT numneigh, int64_t stride,
                                          int64_t i, double cutforcesq,
                                          double *TESS_RESTRICT eatom,
                                          double *TESS_RESTRICT watom)
{
    double xi = x[MMD_XW * i], yi = x[MMD_XW * i + 1], zi = x[MMD_XW * i + 2];
    double fx = 0, fy = 0, fz = 0, e = 0, w = 0;
    int    nn = numneigh[i];
    for (int k = 0; k < nn; k++) {
        double pj[3];
        mmd_pos(x, neigh[k * stride + i], pj);
        double dx = xi - pj[0], dy = yi - pj[1], dz = zi - pj[2];
        double  r2 = dx * dx + dy * dy + dz * dz;
        if (r2 < cutforcesq) {
            double sr2   = 1.0 / r2;
            double sr6   = sr2 * sr2 * sr2;
            double fpair = 48.0 * sr6 * (sr6 - 0.5) * sr2;
            fx += dx * fpair;
            fy += dy * fpair;
            fz += dz * fpair;
            if (eatom) {
                e += 4.0 * sr6 * (sr6 - 1.0);
                w += r2 * fpair;
            }
        }
    }
    f[3 * i]     = fx;
    f[3 * i + 1] = fy;
    f[3 * i + 2] = fz;
    if (eatom) {
        eatom[i] = 0.5 * e;
        watom[i] = 0.5 * w;
    }
}

/* The full neighbor list of owned atom i (pairs within the neighbor cutoff, any atom j != i of
 * the bins around it); returns the count, of which at most maxneigh are stored. */
static inline TESS_HD int mmd_neigh_atom(const double *TESS_RESTRICT x, int64_t i,
                                         const mmd_bins_t *b, const int *TESS_RESTRICT bincount,
                                         const int *TESS_RESTRICT binatoms, double cutneighsq,
                                         int *TESS_RESTRICT neigh, int64_t stride, int maxneigh)
{
    const double *xi = x + MMD_XW * i;
    int cx = mmd_bin_coord(b, 0, xi[0]), cy = mmd_bin_coord(b, 1, xi[1]);
    int cz = mmd_bin_coord(b, 2, xi[2]);
    int n  = 0;
    for (int bz = cz - b->reach[2]; bz <= cz + b->reach[2]; bz++) {
        if (bz < 0 || bz >= b->n[2])
            continue;
        for (int by = cy - b->reach[1]; by <= cy + b->reach[1]; by++) {
            if (by < 0 || by >= b->n[1])
                continue;
            for (int bx = cx - b->reach[0]; bx <= cx + b->reach[0]; bx++) {
                if (bx < 0 || bx >= b->n[0])
                    continue;
                int        bin = (bz * b->n[1] + by) * b->n[0] + bx;
                int        cnt = bincount[bin] < b->cap ? bincount[bin] : b->cap;
                const int *in  = binatoms + (int64_t)bin * b->cap;
                for (int k = 0; k < cnt; k++) {
                    int64_t j = in[k];
                    if (j == i)
                        continue;
                    double pj[3];
                    mmd_pos(x, j, pj);
                    double dx = xi[0] - pj[0], dy = xi[1] - pj[1], dz = xi[2] - pj[2];
                    if (dx * dx + dy * dy + dz * dz <= cutneighsq) {
                        if (n < maxneigh)
                            neigh[n * stride + i] = (int)j;
                        n++;
                    }
                }
            }
        }
    }
    return n;
}

/* Pack atom list[k]: its position shifted by `shift` along dimension d (a periodic image), and
 * with v its velocity (an atom that moves to another subdomain): MMD_XW or MMD_MOVE_W doubles
 * per atom (a ghost's position is stored as it is packed). */
static inline TESS_HD void mmd_pack_atom(const double *TESS_RESTRICT x,
                                         const double *TESS_RESTRICT v,
                                         const int *TESS_RESTRICT list, int64_t k, int d,
                                         double shift, double *TESS_RESTRICT buf)
{
    int64_t i  = list[k];
    int     w  = v ? MMD_MOVE_W : MMD_XW;
    for (int c = 0; c < 3; c++)
        buf[w * k + c] = x[MMD_XW * i + c] + (c == d ? shift : 0.0);
    buf[w * k + 3] = 0.0;
    if (v)
        for (int c = 0; c < 3; c++)
            buf[w * k + MMD_XW + c] = v[3 * i + c];
}

static inline TESS_HD void mmd_unpack_atom(const double *TESS_RESTRICT buf, int64_t k,
                                           double *TESS_RESTRICT x, double *TESS_RESTRICT v,
                                           int64_t first)
{
    for (int c = 0; c < MMD_XW; c++)
        x[MMD_XW * (first + k) + c] = buf[MMD_MOVE_W * k + c];
    for (int c = 0; c < 3; c++)
        v[3 * (first + k) + c] = buf[MMD_MOVE_W * k + MMD_XW + c];
}

/* Is atom i's coordinate d in [a, b)? (What a selection keeps.) */
static inline TESS_HD int mmd_in_slab(const double *TESS_RESTRICT x, int64_t i, int d, double a,
                                      double b)
{
    double c = x[MMD_XW * i + d];
    return c >= a && c < b;
}

/* |v_i|^2 (twice atom i's kinetic energy, mass 1). */
static inline TESS_HD double mmd_v2_atom(const double *TESS_RESTRICT v, int64_t i)
{
    const double *vi = v + 3 * i;
    return vi[0] * vi[0] + vi[1] * vi[1] + vi[2] * vi[2];
}

/* Atom `from` (position and velocity) to slot `to`. */
static inline TESS_HD void mmd_move_atom(double *TESS_RESTRICT x, double *TESS_RESTRICT v,
                                         int64_t to, int64_t from)
{
    for (int c = 0; c < 3; c++) {
        x[MMD_XW * to + c] = x[MMD_XW * from + c];
        v[3 * to + c]      = v[3 * from + c];
    }
}

/* Number of entries of the sorted list a[0..n) that are < value. */
static inline TESS_HD int64_t mmd_lower_bound(const int *a, int64_t n, int64_t value)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (a[mid] < value)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Removal of the atoms of two sorted lists (la, lb: disjoint) from n owned atoms: atom j of
 * [n - na - nb, n) that stays fills the r-th hole (the r-th removed index below the new end).
 * Returns the destination of atom j, or -1 if j does not move. */
static inline TESS_HD int64_t mmd_remove_dest(const int *la, int64_t na, const int *lb,
                                              int64_t nb, int64_t n, int64_t j)
{
    int64_t nn = n - na - nb;
    if (j < nn)
        return -1;
    int64_t ra = mmd_lower_bound(la, na, j), rb = mmd_lower_bound(lb, nb, j);
    if ((ra < na && la[ra] == j) || (rb < nb && lb[rb] == j))
        return -1; /* removed itself */
    /* Removed atoms in [nn, j), and staying atoms before j in the tail. */
    int64_t ta = ra - mmd_lower_bound(la, na, nn), tb = rb - mmd_lower_bound(lb, nb, nn);
    int64_t rank = (j - nn) - ta - tb;
    /* The rank-th hole: the rank-th smallest removed index below nn, merging la and lb. */
    int64_t lo = 0, hi = nn; /* find the smallest h with #removed in [0, h] > rank */
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (mmd_lower_bound(la, na, mid + 1) + mmd_lower_bound(lb, nb, mid + 1) > rank)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* ---- launchers ------------------------------------------------------------------------------ */

/*
 * A stream is a tess_stream_t (Tessera) or a cudaStream_t (the MPI program). With the host
 * backend the launchers enqueue host loops with mmd_host_launch; with `stream == NULL` and no GPU
 * (the MPI program on a CPU machine) they run the loop at once. No MPI, no Tessera here.
 */
enum { MMD_HOST = 0, MMD_CUDA = 1 };
extern int mmd_backend; /* set by the program before the first launch */
typedef void (*mmd_host_fn_t)(void *args);
extern void (*mmd_host_launch)(void *stream, mmd_host_fn_t fn, const void *args, size_t args_size);

#define MMD_THERMO_PARTS 256 /* partial sums of the thermo reduction */
#define MMD_THERMO_OUT   (3 * (MMD_THERMO_PARTS + 1))
#define MMD_SCAN_BLOCKS  1024
#define MMD_SCAN_SCRATCH (MMD_SCAN_BLOCKS + 1) /* ints of scratch a selection needs */

void mmd_initial_integrate(void *s, double *x, double *v, const double *f, int64_t n, double dt,
                           double dtforce);
void mmd_final_integrate(void *s, double *v, const double *f, int64_t n, double dtforce);
/** f of the n owned atoms; eatom/watom (NULL or both given): per-atom energy and virial. */
void mmd_force(void *s, const double *x, double *f, const int *neigh, const int *numneigh,
               int64_t stride, int64_t n, double cutforcesq, double *eatom, double *watom);
/** out[0..2] (device, MMD_THERMO_OUT doubles) ← sum of |v|^2, eatom, watom over n atoms, in a
 *  fixed order (the same result every run). */
void mmd_thermo_sums(void *s, const double *v, const double *eatom, const double *watom,
                     int64_t n, double *out);
void mmd_pbc(void *s, double *x, int64_t n, const double L[3]);
/** list ← indices i of [first, last) with a <= x[MMD_XW*i+d] < b, in increasing order (at most cap
 *  stored); *count (device) ← how many there are. scratch: MMD_SCAN_SCRATCH device ints. */
void mmd_select(void *s, const double *x, int64_t first, int64_t last, int d, double a, double b,
                int *list, int *count, int64_t cap, int *scratch);
/** buf ← the n atoms of list (mmd_pack_atom; v may be NULL). */
void mmd_pack(void *s, const double *x, const double *v, const int *list, int64_t n, int d,
              double shift, double *buf);
/** Remove the atoms of sorted lists la and lb from the n owned atoms (x, v), filling holes with
 *  atoms from the end; n - na - nb remain. */
void mmd_remove(void *s, double *x, double *v, const int *la, int64_t na, const int *lb,
                int64_t nb, int64_t n);
/** Atoms first.. ← the n atoms (MMD_MOVE_W doubles each) of buf. */
void mmd_unpack(void *s, const double *buf, int64_t n, double *x, double *v, int64_t first);
/** Bin n atoms; status[0] ← the largest bin count (> b.cap: rebin with a larger cap), status[1]
 *  ← 0. bincount: b.n[0]*b.n[1]*b.n[2] ints, binatoms: that many times b.cap. */
void mmd_bin(void *s, const double *x, int64_t n, mmd_bins_t b, int *bincount, int *binatoms,
             int *status);
/** Full lists of the nlocal owned atoms; status[1] ← the largest count (> maxneigh: rebuild with
 *  a larger capacity). */
void mmd_neighbor(void *s, const double *x, int64_t nlocal, mmd_bins_t b, const int *bincount,
                  const int *binatoms, double cutneighsq, int *neigh, int *numneigh,
                  int64_t stride, int maxneigh, int *status);

#ifdef MINIMD_CUDA
/* CUDA launchers (kernels_cuda.cu); the C launchers above call them when mmd_backend says so. */
void mmd_cuda_initial_integrate(void *s, double *x, double *v, const double *f, int64_t n,
                                double dt, double dtforce);
void mmd_cuda_final_integrate(void *s, double *v, const double *f, int64_t n, double dtforce);
void mmd_cuda_force(void *s, const double *x, double *f, const int *neigh, const int *numneigh,
                    int64_t stride, int64_t n, double cutforcesq, double *eatom, double *watom);
void mmd_cuda_thermo_sums(void *s, const double *v, const double *eatom, const double *watom,
                          int64_t n, double *out);
void mmd_cuda_pbc(void *s, double *x, int64_t n, const double L[3]);
void mmd_cuda_select(void *s, const double *x, int64_t first, int64_t last, int d, double a,
                     double b, int *list, int *count, int64_t cap, int *scratch);
void mmd_cuda_pack(void *s, const double *x, const double *v, const int *list, int64_t n, int d,
                   double shift, double *buf);
void mmd_cuda_remove(void *s, double *x, double *v, const int *la, int64_t na, const int *lb,
                     int64_t nb, int64_t n);
void mmd_cuda_unpack(void *s, const double *buf, int64_t n, double *x, double *v, int64_t first);
void mmd_cuda_bin(void *s, const double *x, int64_t n, mmd_bins_t b, int *bincount,
                  int *binatoms, int *status);
void mmd_cuda_neighbor(void *s, const double *x, int64_t nlocal, mmd_bins_t b,
                       const int *bincount, const int *binatoms, double cutneighsq, int *neigh,
                       int *numneigh, int64_t stride, int maxneigh, int *status);
#endif

/* ---- set-up on the host (plain C, no MPI) ---------------------------------------------------- */

/** The lattice sites of subdomain [lo, hi) with their reference velocities (before centring and
 *  scaling), less those of the empty octant when p->void_octant: *x_p (MMD_XW doubles an atom)
 *  and *v_p (3) are malloc'ed. Returns 0, or -1 without memory. */
int mmd_lattice(const mmd_problem_t *p, const double lo[3], const double hi[3], double **x_p,
                double **v_p, int64_t *n_p);

#ifdef __cplusplus
}
#endif

#endif /* MINIMD_H */

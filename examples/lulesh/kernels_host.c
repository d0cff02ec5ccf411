/* kernels_host.c — LULESH's domain set-up, the host versions of its stages, and the launchers
 * that choose between them and the CUDA ones (lulesh.h). No dependency on Tessera or MPI. */
#include "lulesh.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lul_backend = LUL_HOST;
void (*lul_host_launch)(void *stream, lul_host_fn_t fn, const void *args, size_t args_size);

static void launch(void *stream, lul_host_fn_t fn, const void *args, size_t size)
{
    if (stream && lul_host_launch)
        lul_host_launch(stream, fn, args, size);
    else
        fn((void *)args);
}

/* ---- memory --------------------------------------------------------------------------------- */

static void *default_dev_alloc(size_t bytes)
{
#ifdef LULESH_CUDA
    if (lul_backend == LUL_CUDA)
        return lul_cuda_malloc(bytes);
#endif
    return calloc(1, bytes ? bytes : 1);
}

static void default_dev_release(void *p)
{
#ifdef LULESH_CUDA
    if (lul_backend == LUL_CUDA) {
        lul_cuda_free(p);
        return;
    }
#endif
    free(p);
}

static void *default_pinned_alloc(size_t bytes)
{
#ifdef LULESH_CUDA
    if (lul_backend == LUL_CUDA)
        return lul_cuda_malloc_host(bytes);
#endif
    return calloc(1, bytes ? bytes : 1);
}

static void default_pinned_release(void *p)
{
#ifdef LULESH_CUDA
    if (lul_backend == LUL_CUDA) {
        lul_cuda_free_host(p);
        return;
    }
#endif
    free(p);
}

void *(*lul_dev_alloc)(size_t bytes)    = default_dev_alloc;
void (*lul_dev_release)(void *p)        = default_dev_release;
void *(*lul_pinned_alloc)(size_t bytes) = default_pinned_alloc;
void (*lul_pinned_release)(void *p)     = default_pinned_release;

void lul_copy_to_dev(void *dst, const void *src, size_t bytes)
{
#ifdef LULESH_CUDA
    if (lul_backend == LUL_CUDA) {
        lul_cuda_copy(dst, src, bytes);
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

void lul_copy_from_dev(void *dst, const void *src, size_t bytes)
{
    lul_copy_to_dev(dst, src, bytes);
}

/* ---- regions -------------------------------------------------------------------------------- */

/* glibc's rand() (the additive feedback generator of random(), TYPE_3), so that region sets are
 * the same on every platform: r[i] = 16807 r[i-1] mod (2^31 - 1) for i < 31, r[i] = r[i-31] for
 * i < 34, then r[i] = r[i-31] + r[i-3]; the k-th output is r[k + 344] >> 1. */
typedef struct lul_rng {
    uint32_t r[34];
    int64_t  i;
} lul_rng_t;

static uint32_t rng_step(lul_rng_t *g)
{
    uint32_t v        = g->r[(g->i - 31) % 34] + g->r[(g->i - 3) % 34];
    g->r[g->i % 34] = v;
    g->i++;
    return v;
}

static void rng_seed(lul_rng_t *g, uint32_t seed)
{
    int64_t w = seed ? seed : 1;
    g->r[0]   = (uint32_t)w;
    for (int i = 1; i < 31; i++) {
        w       = (16807 * w) % 2147483647;
        g->r[i] = (uint32_t)w;
    }
    for (int i = 31; i < 34; i++)
        g->r[i] = g->r[i - 31];
    g->i = 34;
    while (g->i < 344)
        rng_step(g);
}

static int rng_rand(lul_rng_t *g)
{
    return (int)(rng_step(g) >> 1);
}

int lul_region_rep(int r, int numReg, int cost)
{
    if (r < numReg / 2)
        return 1;
    if (r < numReg - (numReg + 15) / 20)
        return 1 + cost;
    return 10 * (1 + cost);
}

void lul_rotate_costs(lul_domain_t *d, int64_t n, int64_t ox, int64_t oy, int64_t oz, int64_t ex,
                      int64_t ey, int64_t ez, const int P[3])
{
    int x    = (int)((2 * ox + ex) * P[0] / (2 * n));
    int y    = (int)((2 * oy + ey) * P[1] / (2 * n));
    int z    = (int)((2 * oz + ez) * P[2] / (2 * n));
    int rank = (z * P[1] + y) * P[0] + x;
    for (int g = 0; g < d->numReg; g++)
        d->h_regRep[g] = lul_region_rep((d->h_regOf[g] + rank) % d->numReg, d->numReg, d->cost);
    lul_copy_to_dev(d->regRep, d->h_regRep, sizeof(int32_t) * (size_t)d->numReg);
}

void lul_regions_block(int64_t n, int numReg, int balance, int64_t ox, int64_t oy, int64_t oz,
                       int64_t ex, int64_t ey, int64_t ez, int32_t *reg)
{
    int64_t numElem = ex * ey * ez;
    if (numReg <= 1) {
        for (int64_t k = 0; k < numElem; k++)
            reg[k] = 0;
        return;
    }
    /* the reference's CreateRegionIndexSets over the global element order, rank 0's rotation */
    lul_rng_t g;
    rng_seed(&g, 0);
    int *binEnd = malloc(sizeof(int) * (size_t)numReg);
    int  costDenominator = 0;
    for (int i = 0; i < numReg; i++) {
        costDenominator += (int)pow(i + 1, balance);
        binEnd[i] = costDenominator;
    }
    int64_t total = n * n * n, next = 0, le = 0;
    int     lastReg = -1;
    /* local element le is (i,j,k); its global index, ascending with le */
#define GLOBAL_OF(le)                                                                           \
    (((oz + (le) / (ex * ey)) * n + oy + (le) / ex % ey) * n + ox + (le) % ex)
    while (next < total && le < numElem) {
        int regionNum;
        do {
            int var = rng_rand(&g) % costDenominator, i = 0;
            while (var >= binEnd[i])
                i++;
            regionNum = i % numReg + 1;
        } while (regionNum == lastReg);
        int     bin = rng_rand(&g) % 1000;
        int64_t elements;
        if (bin < 773)
            elements = rng_rand(&g) % 15 + 1;
        else if (bin < 937)
            elements = rng_rand(&g) % 16 + 16;
        else if (bin < 970)
            elements = rng_rand(&g) % 32 + 32;
        else if (bin < 974)
            elements = rng_rand(&g) % 64 + 64;
        else if (bin < 978)
            elements = rng_rand(&g) % 128 + 128;
        else if (bin < 981)
            elements = rng_rand(&g) % 256 + 256;
        else
            elements = rng_rand(&g) % 1537 + 512;
        next += elements;
        while (le < numElem && GLOBAL_OF(le) < next)
            reg[le++] = regionNum - 1;
        lastReg = regionNum;
    }
#undef GLOBAL_OF
    free(binEnd);
}

/* ---- domain --------------------------------------------------------------------------------- */

/* Every device array of a domain and its size: one list for lul_domain_init (allocation) and
 * lul_domain_device_bytes (what a caller's own allocator must provide). */
typedef struct dev_field {
    void  **p;
    size_t  bytes;
} dev_field_t;

#define LUL_MAX_DEV_FIELDS 64

static int domain_dev_fields(lul_domain_t *d, dev_field_t *f)
{
    size_t ne = (size_t)d->numElem, nn = (size_t)d->numNode, ng = (size_t)d->numElemGhost;
    size_t nr = (size_t)(unsigned)d->numReg, D = sizeof(double), I = sizeof(int32_t);
    int    k  = 0;
#define FIELD(ptr, b) (f[k].p = (void **)(ptr), f[k].bytes = (b), k++)
    double **nodef[] = {&d->x, &d->y, &d->z, &d->xd, &d->yd, &d->zd, &d->fx, &d->fy, &d->fz,
                        &d->nodalMass};
    for (size_t q = 0; q < sizeof(nodef) / sizeof(nodef[0]); q++)
        FIELD(nodef[q], nn * D);
    double **elemf[] = {&d->e, &d->p, &d->q, &d->ql, &d->qq, &d->v, &d->volo, &d->vnew,
                        &d->delv, &d->vdov, &d->arealg, &d->ss, &d->elemMass, &d->delx_xi,
                        &d->delx_eta, &d->delx_zeta};
    for (size_t q = 0; q < sizeof(elemf) / sizeof(elemf[0]); q++)
        FIELD(elemf[q], ne * D);
    FIELD(&d->delv_xi, ng * D), FIELD(&d->delv_eta, ng * D), FIELD(&d->delv_zeta, ng * D);
    FIELD(&d->fx_elem, 8 * ne * D), FIELD(&d->fy_elem, 8 * ne * D), FIELD(&d->fz_elem, 8 * ne * D);
    FIELD(&d->nodelist, 8 * ne * I), FIELD(&d->elemBC, ne * I);
    int32_t **conn[] = {&d->lxim, &d->lxip, &d->letam, &d->letap, &d->lzetam, &d->lzetap};
    for (int q = 0; q < 6; q++)
        FIELD(conn[q], ne * I);
    FIELD(&d->regElemlist, ne * I), FIELD(&d->regStart, (nr + 1) * I), FIELD(&d->regRep, nr * I);
    FIELD(&d->err, I);
    FIELD(&d->red, sizeof(lul_red_t));
    FIELD(&d->dev_scalars, sizeof(lul_scalars_t));
#undef FIELD
    return k;
}

static void domain_geometry(lul_domain_t *d, int64_t ex, int64_t ey, int64_t ez, int numReg)
{
    d->ex = ex, d->ey = ey, d->ez = ez;
    d->numElem      = ex * ey * ez;
    d->numNode      = (ex + 1) * (ey + 1) * (ez + 1);
    d->numElemGhost = d->numElem + 2 * (ey * ez + ex * ez + ex * ey);
    d->numReg       = numReg < 1 ? 1 : numReg;
}

size_t lul_domain_device_bytes(int64_t ex, int64_t ey, int64_t ez, int numReg, size_t align)
{
    lul_domain_t d;
    dev_field_t  f[LUL_MAX_DEV_FIELDS];
    memset(&d, 0, sizeof(d));
    domain_geometry(&d, ex, ey, ez, numReg);
    int    nf = domain_dev_fields(&d, f);
    size_t total = 0, a = align ? align : 1;
    for (int q = 0; q < nf; q++)
        total += (f[q].bytes + a - 1) / a * a;
    return total;
}

int lul_domain_init(lul_domain_t *d, int64_t n, int64_t ox, int64_t oy, int64_t oz, int64_t ex,
                    int64_t ey, int64_t ez, int numReg, int balance, int cost)
{
    memset(d, 0, sizeof(*d));
    d->n  = n;
    d->ox = ox, d->oy = oy, d->oz = oz;
    domain_geometry(d, ex, ey, ez, numReg);
    int64_t ne = d->numElem, nn = d->numNode, ng = d->numElemGhost;
    d->balance = balance, d->cost = cost;

    int         rc = 0;
    dev_field_t fl[LUL_MAX_DEV_FIELDS];
    int         nfl = domain_dev_fields(d, fl);
    for (int q = 0; q < nfl; q++)
        if (!(*fl[q].p = lul_dev_alloc(fl[q].bytes)))
            rc = -1;
    d->out     = lul_pinned_alloc(sizeof(lul_out_t));
    d->scalars = lul_pinned_alloc(sizeof(lul_scalars_t));
    d->h_regStart = calloc((size_t)d->numReg + 1, sizeof(int32_t));
    d->h_regRep   = calloc((size_t)d->numReg, sizeof(int32_t));
    d->h_regOf    = calloc((size_t)d->numReg, sizeof(int32_t));
    int64_t scratch_n = 8 * ne > nn ? 8 * ne : nn;
    double *hd = malloc(sizeof(double) * (size_t)scratch_n);
    double *hy = malloc(sizeof(double) * (size_t)nn), *hz = malloc(sizeof(double) * (size_t)nn);
    int32_t *hi = malloc(sizeof(int32_t) * (size_t)(8 * ne));
    if (rc || !d->red || !d->out || !d->scalars || !d->h_regStart || !d->h_regRep || !d->h_regOf || !hd ||
        !hy || !hz || !hi) {
        free(hd), free(hy), free(hz), free(hi);
        lul_domain_free(d);
        return -1;
    }

    /* coordinates: node (i,j,k) at 1.125 × its global index / n, as the reference computes it */
    for (int64_t k = 0; k <= ez; k++)
        for (int64_t j = 0; j <= ey; j++)
            for (int64_t i = 0; i <= ex; i++) {
                int64_t m = (k * (ey + 1) + j) * (ex + 1) + i;
                hd[m]     = LUL_EDGE * (double)(ox + i) / (double)n;
                hy[m]     = LUL_EDGE * (double)(oy + j) / (double)n;
                hz[m]     = LUL_EDGE * (double)(oz + k) / (double)n;
            }
    /* element volumes and the nodal mass from them (element order, as the reference) */
    double *vol = malloc(sizeof(double) * (size_t)ne), *mass = calloc((size_t)nn, sizeof(double));
    for (int64_t k = 0; k < ez; k++)
        for (int64_t j = 0; j < ey; j++)
            for (int64_t i = 0; i < ex; i++) {
                int64_t e = (k * ey + j) * ex + i;
                int32_t nl[8];
                lul_elem_nodes(ex, ey, i, j, k, nl);
                for (int c = 0; c < 8; c++) /* stored per corner: coalesced on a device */
                    hi[c * ne + e] = nl[c];
                double x8[8], y8[8], z8[8];
                for (int c = 0; c < 8; c++)
                    x8[c] = hd[nl[c]], y8[c] = hy[nl[c]], z8[c] = hz[nl[c]];
                vol[e] = lul_elem_volume(x8, y8, z8);
                for (int c = 0; c < 8; c++)
                    mass[nl[c]] += vol[e] / 8.0;
            }
    lul_copy_to_dev(d->x, hd, sizeof(double) * (size_t)nn);
    lul_copy_to_dev(d->y, hy, sizeof(double) * (size_t)nn);
    lul_copy_to_dev(d->z, hz, sizeof(double) * (size_t)nn);
    lul_copy_to_dev(d->nodalMass, mass, sizeof(double) * (size_t)nn);
    lul_copy_to_dev(d->nodelist, hi, sizeof(int32_t) * (size_t)(8 * ne));
    lul_copy_to_dev(d->volo, vol, sizeof(double) * (size_t)ne);
    lul_copy_to_dev(d->elemMass, vol, sizeof(double) * (size_t)ne);
    free(mass);
    free(hy);
    free(hz);

    /* zero fields, v = 1, the deposit */
    memset(hd, 0, sizeof(double) * (size_t)scratch_n);
    double *zero_n[] = {d->xd, d->yd, d->zd, d->fx, d->fy, d->fz};
    for (int f = 0; f < 6; f++)
        lul_copy_to_dev(zero_n[f], hd, sizeof(double) * (size_t)nn);
    double *zero_e[] = {d->p, d->q, d->ql, d->qq, d->vnew, d->delv, d->vdov, d->arealg, d->ss,
                        d->delx_xi, d->delx_eta, d->delx_zeta};
    for (size_t f = 0; f < sizeof(zero_e) / sizeof(zero_e[0]); f++)
        lul_copy_to_dev(zero_e[f], hd, sizeof(double) * (size_t)ne);
    double *zero_g[] = {d->delv_xi, d->delv_eta, d->delv_zeta}; /* ng <= 7 ne < scratch_n */
    for (int f = 0; f < 3; f++)
        lul_copy_to_dev(zero_g[f], hd, sizeof(double) * (size_t)ng);
    lul_red_t red = {.slots_done = 0}; /* the CUDA minimum's scratch, as between cycles */
    for (int s = 0; s < LUL_RED_SLOTS; s++)
        red.slot[s].dtcourant = red.slot[s].dthydro = 1.0e20;
    lul_copy_to_dev(d->red, &red, sizeof(red));
    double scale = (double)n / 45.0;
    d->einit     = LUL_EBASE * scale * scale * scale;
    if (ox == 0 && oy == 0 && oz == 0)
        hd[0] = d->einit;
    lul_copy_to_dev(d->e, hd, sizeof(double) * (size_t)ne);
    for (int64_t e = 0; e < ne; e++)
        hd[e] = 1.0;
    lul_copy_to_dev(d->v, hd, sizeof(double) * (size_t)ne);
    int32_t zero = 0;
    lul_copy_to_dev(d->err, &zero, sizeof(zero));

    /* face connectivity and boundary conditions; neighbours across a block face are in the
     * ghost slabs (-x, +x, -y, +y, -z, +z after the local elements) */
    int64_t gofs[6], off = ne;
    int64_t fcount[6] = {ey * ez, ey * ez, ex * ez, ex * ez, ex * ey, ex * ey};
    for (int f = 0; f < 6; f++) {
        gofs[f] = off;
        off += fcount[f];
    }
    int32_t *bc = malloc(sizeof(int32_t) * (size_t)ne);
    int32_t *lc = malloc(sizeof(int32_t) * (size_t)ne * 6);
    for (int64_t k = 0; k < ez; k++)
        for (int64_t j = 0; j < ey; j++)
            for (int64_t i = 0; i < ex; i++) {
                int64_t e = (k * ey + j) * ex + i;
                int32_t b = 0;
                int64_t l[6] = {e - 1, e + 1, e - ex, e + ex, e - ex * ey, e + ex * ey};
                int     lo[3] = {i == 0, j == 0, k == 0};
                int     hi3[3] = {i == ex - 1, j == ey - 1, k == ez - 1};
                int64_t org[3] = {ox, oy, oz}, ext[3] = {ex, ey, ez};
                int64_t slab[3] = {k * ey + j, k * ex + i, j * ex + i};
                const int32_t symm_m[3] = {LUL_XI_M_SYMM, LUL_ETA_M_SYMM, LUL_ZETA_M_SYMM};
                const int32_t comm_m[3] = {LUL_XI_M_COMM, LUL_ETA_M_COMM, LUL_ZETA_M_COMM};
                const int32_t free_p[3] = {LUL_XI_P_FREE, LUL_ETA_P_FREE, LUL_ZETA_P_FREE};
                const int32_t comm_p[3] = {LUL_XI_P_COMM, LUL_ETA_P_COMM, LUL_ZETA_P_COMM};
                for (int a = 0; a < 3; a++) {
                    if (lo[a]) {
                        if (org[a] == 0) {
                            b |= symm_m[a];
                            l[2 * a] = e;
                        } else {
                            b |= comm_m[a];
                            l[2 * a] = gofs[2 * a] + slab[a];
                        }
                    }
                    if (hi3[a]) {
                        if (org[a] + ext[a] == n) {
                            b |= free_p[a];
                            l[2 * a + 1] = e;
                        } else {
                            b |= comm_p[a];
                            l[2 * a + 1] = gofs[2 * a + 1] + slab[a];
                        }
                    }
                }
                bc[e] = b;
                for (int f = 0; f < 6; f++)
                    lc[f * ne + e] = (int32_t)l[f];
            }
    lul_copy_to_dev(d->elemBC, bc, sizeof(int32_t) * (size_t)ne);
    int32_t *conn[] = {d->lxim, d->lxip, d->letam, d->letap, d->lzetam, d->lzetap};
    for (int f = 0; f < 6; f++)
        lul_copy_to_dev(conn[f], lc + f * ne, sizeof(int32_t) * (size_t)ne);
    free(lc);

    /* regions: groups ordered by repetitions, most first (stable), elements ascending */
    int32_t *reg = bc; /* reuse */
    lul_regions_block(n, d->numReg, balance, ox, oy, oz, ex, ey, ez, reg);
    int nr = d->numReg;
    for (int g = 0; g < nr; g++)
        d->h_regOf[g] = g;
    for (int a = 1; a < nr; a++) /* insertion sort by rep, descending, stable */
        for (int b = a; b > 0 && lul_region_rep(d->h_regOf[b], nr, cost) >
                                      lul_region_rep(d->h_regOf[b - 1], nr, cost); b--) {
            int32_t t = d->h_regOf[b];
            d->h_regOf[b] = d->h_regOf[b - 1];
            d->h_regOf[b - 1] = t;
        }
    int32_t *group_of = calloc((unsigned)nr, sizeof(int32_t)),
            *cnt = calloc((unsigned)nr + 1u, sizeof(int32_t));
    for (int g = 0; g < nr; g++) {
        group_of[d->h_regOf[g]] = g;
        d->h_regRep[g] = lul_region_rep(d->h_regOf[g], nr, cost);
    }
    for (int64_t e = 0; e < ne; e++)
        cnt[group_of[reg[e]] + 1]++;
    for (int g = 0; g < nr; g++)
        cnt[g + 1] += cnt[g];
    memcpy(d->h_regStart, cnt, sizeof(int32_t) * ((unsigned)nr + 1u));
    for (int64_t e = 0; e < ne; e++)
        hi[cnt[group_of[reg[e]]]++] = (int32_t)e;
    lul_copy_to_dev(d->regElemlist, hi, sizeof(int32_t) * (size_t)ne);
    lul_copy_to_dev(d->regStart, d->h_regStart, sizeof(int32_t) * (size_t)(nr + 1));
    lul_copy_to_dev(d->regRep, d->h_regRep, sizeof(int32_t) * (size_t)nr);
    free(group_of);
    free(cnt);
    free(bc);
    free(hi);
    free(hd);
    free(vol);

    /* time: the first step from the origin element's volume (the same in every block) */
    double x8[8], y8[8], z8[8], h = LUL_EDGE * 1.0 / (double)n;
    for (int c = 0; c < 8; c++) {
        x8[c] = (c == 1 || c == 2 || c == 5 || c == 6) ? h : 0.0;
        y8[c] = (c == 2 || c == 3 || c == 6 || c == 7) ? h : 0.0;
        z8[c] = c >= 4 ? h : 0.0;
    }
    d->deltatime = (0.5 * cbrt(lul_elem_volume(x8, y8, z8))) / sqrt(2.0 * d->einit);
    d->stoptime  = LUL_STOPTIME;
    d->dtmax     = LUL_DTMAX;
    d->time      = 0.0;
    d->cycle     = 0;
    d->out->dtcourant = 1.0e20;
    d->out->dthydro   = 1.0e20;
    d->out->err       = 0;
    *d->scalars       = (lul_scalars_t){.deltatime = d->deltatime};
    lul_copy_to_dev(d->dev_scalars, d->scalars, sizeof(lul_scalars_t));
    return 0;
}

void lul_domain_free(lul_domain_t *d)
{
    dev_field_t fl[LUL_MAX_DEV_FIELDS];
    int         nfl = domain_dev_fields(d, fl);
    for (int q = 0; q < nfl; q++)
        if (*fl[q].p)
            lul_dev_release(*fl[q].p);
    if (d->out)
        lul_pinned_release(d->out);
    if (d->scalars)
        lul_pinned_release(d->scalars);
    free(d->h_regStart);
    free(d->h_regRep);
    free(d->h_regOf);
    memset(d, 0, sizeof(*d));
}

/* ---- time ----------------------------------------------------------------------------------- */

/* The reference's TimeIncrement (the minima are global: the driver reduced them). */
void lul_time_increment(lul_domain_t *d, double dtcourant, double dthydro)
{
    double targetdt = d->stoptime - d->time;
    if (d->cycle != 0) {
        double olddt = d->deltatime, newdt = 1.0e+20;
        if (dtcourant < newdt)
            newdt = dtcourant / 2.0;
        if (dthydro < newdt)
            newdt = dthydro * 2.0 / 3.0;
        double ratio = newdt / olddt;
        if (ratio >= 1.0) {
            if (ratio < LUL_DTMULT_LB)
                newdt = olddt;
            else if (ratio > LUL_DTMULT_UB)
                newdt = olddt * LUL_DTMULT_UB;
        }
        if (newdt > d->dtmax)
            newdt = d->dtmax;
        d->deltatime = newdt;
    }
    /* try to prevent very small scaling on the next cycle */
    if (targetdt > d->deltatime && targetdt < 4.0 * d->deltatime / 3.0)
        targetdt = 2.0 * d->deltatime / 3.0;
    if (targetdt < d->deltatime)
        d->deltatime = targetdt;
    d->time += d->deltatime;
    d->cycle++;
    d->scalars->deltatime = d->deltatime;
}

const char *lul_error_string(int err)
{
    return err == LUL_VOLUME_ERROR ? "VolumeError"
           : err == LUL_QSTOP_ERROR ? "QStopError"
                                    : "no error";
}

/* ---- stages --------------------------------------------------------------------------------- */

/* A stage's arguments: the same at every cycle (the time step is read from d->dev_scalars when
 * the stage runs); fz is the caller's (lulesh.h: unchanged until the stage has run), not a copy,
 * since a launch's arguments are at most 256 bytes. */
typedef struct stage_args {
    lul_domain_t     *d;
    const lul_fuse_t *fz; /* exchange work, or NULL */
} stage_args_t;

static stage_args_t stage_args(lul_domain_t *d, const lul_fuse_t *fz)
{
    return (stage_args_t){.d = d, .fz = fz && (fz->recv || fz->send) ? fz : NULL};
}

static void set_err(lul_domain_t *d, int err)
{
    if (err && !*d->err)
        *d->err = err;
}

/* Stage 2: the reference's CalcVolumeForceForElems, then CalcForceForNodes for the surface
 * nodes (the interior ones are summed in stage 3 with gather_in_nodes). */
static void host_force(void *p)
{
    stage_args_t *a   = p;
    lul_domain_t *d   = a->d;
    int           err = 0;
    for (int64_t k = 0; k < d->numElem; k++) {
        int e = lul_elem_force(d, k);
        if (e && !err)
            err = e;
    }
    if (!d->gather_in_nodes)
        for (int64_t s = 0, ns = lul_surface_count(d->ex, d->ey, d->ez); s < ns; s++)
            lul_node_force(d, lul_surface_node(d->ex, d->ey, d->ez, s), a->fz);
    set_err(d, err);
}

/* Stage 3: the reference's LagrangeNodal after the force (CalcAccelerationForNodes,
 * ApplyAccelerationBoundaryConditionsForNodes, CalcVelocityForNodes, CalcPositionForNodes). */
static void host_nodes(void *p)
{
    stage_args_t *a  = p;
    double        dt = a->d->dev_scalars->deltatime;
    for (int64_t n = 0; n < a->d->numNode; n++)
        lul_node_update(a->d, n, dt, a->fz);
}

/* Stage 3's first part: the cycle's scalars from the pinned slot to the device copy. */
static void host_scalars(void *p)
{
    lul_domain_t *d = ((stage_args_t *)p)->d;
    *d->dev_scalars = *d->scalars;
}

/* Stage 4a: the reference's CalcLagrangeElements (CalcKinematicsForElems) and
 * CalcMonotonicQGradientsForElems. */
static void host_gradients(void *p)
{
    stage_args_t *a   = p;
    double        dt  = a->d->dev_scalars->deltatime;
    int           err = 0;
    for (int64_t k = 0; k < a->d->numElem; k++) {
        int e = lul_elem_gradients(a->d, k, dt);
        if (e && !err)
            err = e;
    }
    set_err(a->d, err);
}

/* Stage 4b, region by region as the reference: CalcMonotonicQRegionForElems, CalcQForElems'
 * qstop check, ApplyMaterialPropertiesForElems (EvalEOSForElems, UpdateVolumesForElems); then
 * stage 5, CalcTimeConstraintsForElems. */
static void host_eos(void *p)
{
    lul_domain_t *d   = ((stage_args_t *)p)->d;
    int           err = 0;
    for (int g = 0; g < d->numReg; g++)
        for (int32_t t = d->h_regStart[g]; t < d->h_regStart[g + 1]; t++) {
            int e = lul_elem_eos(d, d->regElemlist[t], d->h_regRep[g]);
            if (e && !err)
                err = e;
        }
    set_err(d, err);

    double courant = 1.0e20, hydro = 1.0e20;
    for (int64_t k = 0; k < d->numElem; k++) {
        double c, h;
        lul_elem_constraints(d, k, &c, &h);
        if (c < courant)
            courant = c;
        if (h < hydro)
            hydro = h;
    }
    d->out->dtcourant = courant;
    d->out->dthydro   = hydro;
    d->out->err       = *d->err;
}

/* The value of environment variable `var` among `names` (the first when unset or empty), read
 * once into *cache (any thread may be first: each finds the same); anything else ends the
 * program with "expected <expected>". */
static int env_choice(atomic_int *cache, const char *var, const char *const *names,
                      const int *values, int n, const char *expected)
{
    int v = atomic_load_explicit(cache, memory_order_relaxed);
    if (v >= 0)
        return v;
    const char *e = getenv(var);
    int         i = 0;
    if (e && *e)
        while (i < n && strcmp(e, names[i]) != 0)
            i++;
    if (i == n) {
        fprintf(stderr, "lulesh: %s=%s: expected %s\n", var, e, expected);
        exit(2);
    }
    atomic_store_explicit(cache, values[i], memory_order_relaxed);
    return values[i];
}

int lul_fuse(void)
{
    static atomic_int        cached  = -1;
    static const char *const names[] = {"nodes", "sums", "copy", "force", "none"};
    static const int         values[] = {LUL_FUSE_FORCE | LUL_FUSE_SUMS | LUL_FUSE_COPY,
                                         LUL_FUSE_FORCE | LUL_FUSE_SUMS,
                                         LUL_FUSE_FORCE | LUL_FUSE_COPY, LUL_FUSE_FORCE, 0};
    return env_choice(&cached, "LULESH_FUSE", names, values, 5,
                      "nodes, sums, copy, force or none");
}

int lul_node_copy_ring(void)
{
    static atomic_int        cached  = -1;
    static const char *const names[] = {"ring", "full"}; /* the first is the default */
    static const int         values[] = {1, 0};
    return env_choice(&cached, "LULESH_NODECOPY", names, values, 2, "ring or full");
}

int lul_eos_split(int64_t elems)
{
    enum { OFF, ON, AUTO };
    static atomic_int        cached  = -1;
    static const char *const names[] = {"auto", "off", "on"}; /* the first is the default */
    static const int         values[] = {AUTO, OFF, ON};
    int mode = env_choice(&cached, "LULESH_EOS_SPLIT", names, values, 3, "auto, on or off");
    return mode == AUTO ? elems >= LUL_EOS_SPLIT_MIN : mode == ON;
}

void lul_stage_force(void *stream, lul_domain_t *d, const lul_fuse_t *fz)
{
#ifdef LULESH_CUDA
    if (lul_backend == LUL_CUDA) {
        lul_cuda_force(stream, d, fz);
        return;
    }
#endif
    stage_args_t a = stage_args(d, fz);
    launch(stream, host_force, &a, sizeof(a));
}

void lul_stage_nodes(void *stream, lul_domain_t *d, const lul_fuse_t *fz)
{
#ifdef LULESH_CUDA
    if (lul_backend == LUL_CUDA) {
        lul_cuda_copy_async(stream, d->dev_scalars, d->scalars, sizeof(lul_scalars_t));
        lul_cuda_nodes(stream, d, fz);
        return;
    }
#endif
    stage_args_t a = stage_args(d, fz);
    launch(stream, host_scalars, &a, sizeof(a));
    launch(stream, host_nodes, &a, sizeof(a));
}

void lul_stage_gradients(void *stream, lul_domain_t *d)
{
#ifdef LULESH_CUDA
    if (lul_backend == LUL_CUDA) {
        lul_cuda_gradients(stream, d);
        return;
    }
#endif
    stage_args_t a = stage_args(d, NULL);
    launch(stream, host_gradients, &a, sizeof(a));
}

void lul_stage_eos(void *stream, lul_domain_t *d)
{
#ifdef LULESH_CUDA
    if (lul_backend == LUL_CUDA) {
        lul_cuda_eos(stream, d, lul_eos_split(d->numElem));
        return;
    }
#endif
    stage_args_t a = stage_args(d, NULL);
    launch(stream, host_eos, &a, sizeof(a));
}

/* ---- the same stage of several blocks ------------------------------------------------------- */

void lul_stage_item_set(lul_stage_item_t *it, const lul_domain_t *d, const lul_fuse_t *fz)
{
    memset(it, 0, sizeof(*it));
    it->d      = *d;
    it->d.time = it->d.deltatime = 0.0;
    it->d.cycle                  = 0;
    if (fz)
        it->fz = *fz;
    it->deltatime = d->deltatime;
    it->split     = lul_eos_split(d->numElem);
}

/* Stage 3's first part for an item: its time step to the device copy (d is the item's first
 * member). */
static void host_item_scalars(void *p)
{
    const lul_stage_item_t *it = (const lul_stage_item_t *)((stage_args_t *)p)->d;
    it->d.dev_scalars->deltatime = it->deltatime;
}

void lul_stage_batch(void *stream, int stage, const void *items, const void *items_host,
                     size_t stride, int n)
{
#ifdef LULESH_CUDA
    if (lul_backend == LUL_CUDA) {
        lul_cuda_stage_batch(stream, stage, items, items_host, stride, n);
        return;
    }
#else
    (void)items;
#endif
    for (int k = 0; k < n; k++) {
        lul_stage_item_t *it = (lul_stage_item_t *)((char *)items_host + (size_t)k * stride);
        stage_args_t      a  = stage_args(&it->d, &it->fz);
        switch (stage) {
        case LUL_STAGE_FORCE:
            launch(stream, host_force, &a, sizeof(a));
            break;
        case LUL_STAGE_NODES:
            launch(stream, host_item_scalars, &a, sizeof(a));
            launch(stream, host_nodes, &a, sizeof(a));
            break;
        case LUL_STAGE_GRADIENTS:
            launch(stream, host_gradients, &a, sizeof(a));
            break;
        default:
            launch(stream, host_eos, &a, sizeof(a));
            break;
        }
    }
}

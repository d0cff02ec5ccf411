/*
 * lulesh.h — LULESH 2.0 (the Sedov blast problem on a hexahedral mesh, LLNL/LULESH) shared by the
 * pure MPI program and the Tessera one: the constants, the per-element and per-node math (written
 * once, for CUDA and the host), the domain of one block, and the launchers of the local stages of
 * a time step.
 *
 * The problem is the reference's: an N × N × N element cube of edge 1.125, symmetry planes at
 * x = 0, y = 0, z = 0, free surfaces at the far planes, the energy 3.948746e7 × (N/45)³ deposited
 * in the element at the origin; Lagrange hydrodynamics (Flanagan-Belytschko hourglass control,
 * monotonic Q, an ideal-gas-like EOS evaluated per region) until t = 1e-2 or the iteration cap.
 *
 * A block (the contract of examples/lulesh, also exchange.h) covers elements [ox, ox+ex) ×
 * [oy, oy+ey) × [oz, oz+ez) of the global mesh. Local element (i,j,k) is e = (k*ey + j)*ex + i,
 * local node (i,j,k) is n = (k*(ey+1) + j)*(ex+1) + i. The monotonic-Q gradients delv_xi/eta/zeta
 * have ghost slabs after the local elements (face order -x, +x, -y, +y, -z, +z); lxim … lzetap of
 * an element next to a face with a neighbour point into them.
 *
 * One time step (the reference's order), the same in both drivers:
 *
 *   init   lul_domain_init                   coordinates, connectivity, regions, nodal mass
 *          node-sum(nodalMass)               with all neighbours, once
 *   loop while (d->time < d->stoptime && d->cycle < its):
 *     1.   global min of d->out->dtcourant, d->out->dthydro (previous step's; unused at cycle 0)
 *          lul_time_increment(d, mincourant, minhydro)   host
 *     2.   lul_stage_force(s, d, fz)         fx, fy, fz of this block's elements (it needs no
 *                                            time step: a driver may launch it before 1.)
 *          node-sum(fx, fy, fz)              26 neighbours (stage 2 may pack the sums, stage 3
 *                                            add those it receives and pack the node-copy:
 *                                            lul_fuse_t)
 *     3.   lul_stage_nodes(s, d, fz)         acceleration, symmetry BCs, velocity, position
 *          node-copy(x, y, z, xd, yd, zd)    as the reference's MPI program does by default
 *                                            (faces send their rings: exchange.h)
 *     4.   lul_stage_gradients(s, d)         kinematics, monotonic-Q gradients
 *          element ghosts(delv_xi, delv_eta, delv_zeta)   6 face neighbours
 *          lul_stage_eos(s, d)               monotonic Q, EOS per region, volume update, and
 *     5.                                     dtcourant, dthydro, error code → d->out (pinned host)
 *          wait for the stream; d->out->err != 0 ends the run (lul_error_string)
 *
 * Errors the reference aborts on (a negative volume, q above qstop) are recorded on the device
 * in the step they happen and reach the host with the time constraints.
 */
#ifndef LULESH_H
#define LULESH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <tessera/kernel.h>

#include "exchange.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- constants (the reference's Domain constructor) ------------------------------------------ */

#define LUL_E_CUT     1.0e-7
#define LUL_P_CUT     1.0e-7
#define LUL_Q_CUT     1.0e-7
#define LUL_V_CUT     1.0e-10
#define LUL_U_CUT     1.0e-7
#define LUL_HGCOEF    3.0
#define LUL_QSTOP     1.0e+12
#define LUL_MONOQ_MAX_SLOPE    1.0
#define LUL_MONOQ_LIMITER_MULT 2.0
#define LUL_QLC_MONOQ 0.5
#define LUL_QQC_MONOQ (2.0 / 3.0)
#define LUL_QQC       2.0
#define LUL_EOSVMAX   1.0e+9
#define LUL_EOSVMIN   1.0e-9
#define LUL_PMIN      0.0
#define LUL_EMIN      (-1.0e+15)
#define LUL_DVOVMAX   0.1
#define LUL_REFDENS   1.0
#define LUL_PTINY     1.0e-36
#define LUL_STOPTIME  1.0e-2
#define LUL_DTMAX     1.0e-2
#define LUL_DTMULT_LB 1.1
#define LUL_DTMULT_UB 1.2
#define LUL_EBASE     3.948746e+7 /* for N = 45, scaled by (N/45)^3 */
#define LUL_EDGE      1.125       /* edge of the whole cube */

/* The reference's exit codes. */
enum { LUL_OK = 0, LUL_VOLUME_ERROR = -1, LUL_QSTOP_ERROR = -2 };

/* Boundary condition bits of an element's faces (the reference's: M = minus, P = plus side). */
enum {
    LUL_XI_M = 0x00007, LUL_XI_M_SYMM = 0x00001, LUL_XI_M_FREE = 0x00002, LUL_XI_M_COMM = 0x00004,
    LUL_XI_P = 0x00038, LUL_XI_P_SYMM = 0x00008, LUL_XI_P_FREE = 0x00010, LUL_XI_P_COMM = 0x00020,
    LUL_ETA_M = 0x001c0, LUL_ETA_M_SYMM = 0x00040, LUL_ETA_M_FREE = 0x00080,
    LUL_ETA_M_COMM = 0x00100, LUL_ETA_P = 0x00e00, LUL_ETA_P_SYMM = 0x00200,
    LUL_ETA_P_FREE = 0x00400, LUL_ETA_P_COMM = 0x00800, LUL_ZETA_M = 0x07000,
    LUL_ZETA_M_SYMM = 0x01000, LUL_ZETA_M_FREE = 0x02000, LUL_ZETA_M_COMM = 0x04000,
    LUL_ZETA_P = 0x38000, LUL_ZETA_P_SYMM = 0x08000, LUL_ZETA_P_FREE = 0x10000,
    LUL_ZETA_P_COMM = 0x20000
};

/* ---- the domain of one block ----------------------------------------------------------------- */

/** What lul_stage_eos leaves in pinned host memory (d->out). */
typedef struct lul_out {
    double  dtcourant, dthydro; /* this block's constraints (1e20: none) */
    int32_t err;                /* LUL_OK, LUL_VOLUME_ERROR or LUL_QSTOP_ERROR */
    int32_t pad;
} lul_out_t;

/** The CUDA constraint minimum's device scratch (d->red): a kernel block adds its minima to
 *  slot (block mod LUL_RED_SLOTS), so that no address takes more than a few thousand atomics;
 *  the last block of a slot counts the slot done, and the last slot's writes d->out. Between
 *  cycles: minima 1e20, counts 0. One slot per 64 bytes (no two in a sector). */
#define LUL_RED_SLOTS 64
typedef struct lul_red_slot {
    double   dtcourant, dthydro;
    uint32_t blocks; /* of this slot, finished */
    uint32_t pad[11];
} lul_red_slot_t;
typedef struct lul_red {
    lul_red_slot_t slot[LUL_RED_SLOTS];
    uint32_t       slots_done;
    uint32_t       pad[15];
} lul_red_t;

/** The scalars of a cycle that the stages read on the device (d->dev_scalars): the host keeps
 *  them in pinned memory (d->scalars, set by lul_time_increment) and lul_stage_nodes copies them
 *  over first, on its stream. A kernel's arguments are then the same every cycle (a recorded
 *  step replays them as they were). */
typedef struct lul_scalars {
    double deltatime;
    double pad;
} lul_scalars_t;

typedef struct lul_domain {
    /* geometry: the block [ox, ox+ex) × [oy, oy+ey) × [oz, oz+ez) of an n³ mesh */
    int64_t n, ox, oy, oz, ex, ey, ez;
    int64_t numElem, numNode, numElemGhost; /* numElemGhost: with the six ghost slabs */

    /* node fields (device) */
    double *x, *y, *z;    /* coordinates */
    double *xd, *yd, *zd; /* velocities */
    double *fx, *fy, *fz; /* forces */
    double *nodalMass;

    /* element fields (device) */
    double *e, *p, *q, *ql, *qq; /* energy, pressure, artificial viscosity and its terms */
    double *v, *volo, *vnew, *delv, *vdov, *arealg, *ss, *elemMass;
    double *delv_xi, *delv_eta, *delv_zeta; /* numElemGhost entries */
    double *delx_xi, *delx_eta, *delx_zeta;
    double *fx_elem, *fy_elem, *fz_elem;    /* corner c of element k at c*numElem + k */
    int32_t *nodelist;                      /* node c of element k at c*numElem + k */
    int32_t *lxim, *lxip, *letam, *letap, *lzetam, *lzetap;
    int32_t *elemBC;

    /* regions: elements grouped by region, regions ordered by repetitions (most first) */
    int      numReg, balance, cost;
    /* Set by a driver whose block shares no nodes with another (one domain): stage 2 leaves the
     * corner forces and stage 3 sums them itself (fx, fy, fz are not written). Default 0: stage 2
     * writes fx, fy, fz of the block's surface nodes only (those a neighbour's node sum adds to)
     * and stage 3 sums the interior nodes' forces itself, as with gather_in_nodes. */
    int      gather_in_nodes;
    int32_t *regElemlist;     /* device, numElem */
    int32_t *regStart;        /* device, numReg + 1: group g is [regStart[g], regStart[g+1]) */
    int32_t *regRep;          /* device, numReg: EOS repetitions of group g */
    int32_t *h_regStart, *h_regRep, *h_regOf; /* host copies; h_regOf[g]: the region of group g */

    /* reductions */
    int32_t   *err;      /* device: error code */
    lul_red_t *red;      /* device: the CUDA minimum's scratch */
    lul_out_t *out;      /* pinned host: the constraints of the last lul_stage_eos */

    /* the cycle's scalars the stages read: the device copy, and the pinned host slot it is
     * copied from (lul_scalars_t) */
    lul_scalars_t *dev_scalars;
    lul_scalars_t *scalars;

    /* host scalars: never read by a kernel (it reads dev_scalars); the CUDA launchers pass them
     * as zeros, so that a stage's arguments do not change from cycle to cycle */
    double time, deltatime, stoptime, dtmax;
    int    cycle;
    double einit; /* the energy deposited at the origin */
} lul_domain_t;

/** Exchange work a stage does for the driver (a kernel less for each). Stage 2 packs the
 *  surface nodes' forces for the node-sum (send, at splan: the node-sum's send plan); stage 3
 *  adds the force sums the neighbours sent (recv, at rplan: the node-sum's receive plan) and
 *  packs x, y, z, xd, yd, zd for the node-copy (send, at splan: the node-copy's send plan). A
 *  NULL buffer: nothing to do. */
typedef struct lul_fuse {
    const double  *recv;
    double        *send;
    lul_xch_plan_t rplan, splan;
} lul_fuse_t;

/* ---- per-element and per-node math (one source for every backend) ---------------------------- */

/* The volume of a hexahedron (the reference's CalcElemVolume). */
#define LUL_TRIPLE(x1, y1, z1, x2, y2, z2, x3, y3, z3) \
    ((x1) * ((y2) * (z3) - (z2) * (y3)) + (x2) * ((z1) * (y3) - (y1) * (z3)) +   \
     (x3) * ((y1) * (z2) - (z1) * (y2)))

static inline TESS_HD double lul_elem_volume(const double x[8], const double y[8],
                                             const double z[8])
{
    double dx61 = x[6] - x[1], dy61 = y[6] - y[1], dz61 = z[6] - z[1];
    double dx70 = x[7] - x[0], dy70 = y[7] - y[0], dz70 = z[7] - z[0];
    double dx63 = x[6] - x[3], dy63 = y[6] - y[3], dz63 = z[6] - z[3];
    double dx20 = x[2] - x[0], dy20 = y[2] - y[0], dz20 = z[2] - z[0];
    double dx50 = x[5] - x[0], dy50 = y[5] - y[0], dz50 = z[5] - z[0];
    double dx64 = x[6] - x[4], dy64 = y[6] - y[4], dz64 = z[6] - z[4];
    double dx31 = x[3] - x[1], dy31 = y[3] - y[1], dz31 = z[3] - z[1];
    double dx72 = x[7] - x[2], dy72 = y[7] - y[2], dz72 = z[7] - z[2];
    double dx43 = x[4] - x[3], dy43 = y[4] - y[3], dz43 = z[4] - z[3];
    double dx57 = x[5] - x[7], dy57 = y[5] - y[7], dz57 = z[5] - z[7];
    double dx14 = x[1] - x[4], dy14 = y[1] - y[4], dz14 = z[1] - z[4];
    double dx25 = x[2] - x[5], dy25 = y[2] - y[5], dz25 = z[2] - z[5];
    double vol = LUL_TRIPLE(dx31 + dx72, dx63, dx20, dy31 + dy72, dy63, dy20, dz31 + dz72, dz63,
                            dz20) +
                 LUL_TRIPLE(dx43 + dx57, dx64, dx70, dy43 + dy57, dy64, dy70, dz43 + dz57, dz64,
                            dz70) +
                 LUL_TRIPLE(dx14 + dx25, dx61, dx50, dy14 + dy25, dy61, dy50, dz14 + dz25, dz61,
                            dz50);
    return vol * (1.0 / 12.0);
}

/* Shape function derivatives b[3][8] and the Jacobian determinant (volume): the reference's
 * CalcElemShapeFunctionDerivatives. */
static inline TESS_HD void lul_shape_derivs(const double x[8], const double y[8],
                                            const double z[8], double b[3][8], double *volume)
{
    const double *c[3] = {x, y, z};
    double        fxi[3], fet[3], fze[3];
    for (int a = 0; a < 3; a++) {
        const double *u = c[a];
        fxi[a] = 0.125 * ((u[6] - u[0]) + (u[5] - u[3]) - (u[7] - u[1]) - (u[4] - u[2]));
        fet[a] = 0.125 * ((u[6] - u[0]) - (u[5] - u[3]) + (u[7] - u[1]) - (u[4] - u[2]));
        fze[a] = 0.125 * ((u[6] - u[0]) + (u[5] - u[3]) + (u[7] - u[1]) + (u[4] - u[2]));
    }
    /* cofactors: index 0, 1, 2 = x, y, z */
    double cxi[3], cet[3], cze[3];
    cxi[0] = (fet[1] * fze[2]) - (fet[2] * fze[1]);
    cet[0] = -(fxi[1] * fze[2]) + (fxi[2] * fze[1]);
    cze[0] = (fxi[1] * fet[2]) - (fxi[2] * fet[1]);
    cxi[1] = -(fet[0] * fze[2]) + (fet[2] * fze[0]);
    cet[1] = (fxi[0] * fze[2]) - (fxi[2] * fze[0]);
    cze[1] = -(fxi[0] * fet[2]) + (fxi[2] * fet[0]);
    cxi[2] = (fet[0] * fze[1]) - (fet[1] * fze[0]);
    cet[2] = -(fxi[0] * fze[1]) + (fxi[1] * fze[0]);
    cze[2] = (fxi[0] * fet[1]) - (fxi[1] * fet[0]);
    for (int a = 0; a < 3; a++) {
        b[a][0] = -cxi[a] - cet[a] - cze[a];
        b[a][1] = cxi[a] - cet[a] - cze[a];
        b[a][2] = cxi[a] + cet[a] - cze[a];
        b[a][3] = -cxi[a] + cet[a] - cze[a];
        b[a][4] = -b[a][2];
        b[a][5] = -b[a][3];
        b[a][6] = -b[a][0];
        b[a][7] = -b[a][1];
    }
    *volume = 8.0 * (fet[0] * cet[0] + fet[1] * cet[1] + fet[2] * cet[2]);
}

/* Adds a quarter of face (n0, n1, n2, n3)'s area vector to each of its nodes (the reference's
 * SumElemFaceNormal). */
static inline TESS_HD void lul_face_normal(double pf[3][8], int n0, int n1, int n2, int n3,
                                           const double x[8], const double y[8],
                                           const double z[8])
{
    double bx0 = 0.5 * (x[n3] + x[n2] - x[n1] - x[n0]);
    double by0 = 0.5 * (y[n3] + y[n2] - y[n1] - y[n0]);
    double bz0 = 0.5 * (z[n3] + z[n2] - z[n1] - z[n0]);
    double bx1 = 0.5 * (x[n2] + x[n1] - x[n3] - x[n0]);
    double by1 = 0.5 * (y[n2] + y[n1] - y[n3] - y[n0]);
    double bz1 = 0.5 * (z[n2] + z[n1] - z[n3] - z[n0]);
    double ax  = 0.25 * (by0 * bz1 - bz0 * by1);
    double ay  = 0.25 * (bz0 * bx1 - bx0 * bz1);
    double az  = 0.25 * (bx0 * by1 - by0 * bx1);
    int    nn[4] = {n0, n1, n2, n3};
    for (int t = 0; t < 4; t++) {
        pf[0][nn[t]] += ax;
        pf[1][nn[t]] += ay;
        pf[2][nn[t]] += az;
    }
}

/* The node normals of an element (the reference's CalcElemNodeNormals). */
static inline TESS_HD void lul_node_normals(double pf[3][8], const double x[8],
                                            const double y[8], const double z[8])
{
    for (int a = 0; a < 3; a++)
        for (int i = 0; i < 8; i++)
            pf[a][i] = 0.0;
    lul_face_normal(pf, 0, 1, 2, 3, x, y, z);
    lul_face_normal(pf, 0, 4, 5, 1, x, y, z);
    lul_face_normal(pf, 1, 5, 6, 2, x, y, z);
    lul_face_normal(pf, 2, 6, 7, 3, x, y, z);
    lul_face_normal(pf, 3, 7, 4, 0, x, y, z);
    lul_face_normal(pf, 4, 7, 6, 5, x, y, z);
}

/* One term of the volume derivative (the reference's VoluDer). */
static inline TESS_HD void lul_volu_der(const double x[8], const double y[8], const double z[8],
                                        int i0, int i1, int i2, int i3, int i4, int i5,
                                        double *dvdx, double *dvdy, double *dvdz)
{
    double x0 = x[i0], x1 = x[i1], x2 = x[i2], x3 = x[i3], x4 = x[i4], x5 = x[i5];
    double y0 = y[i0], y1 = y[i1], y2 = y[i2], y3 = y[i3], y4 = y[i4], y5 = y[i5];
    double z0 = z[i0], z1 = z[i1], z2 = z[i2], z3 = z[i3], z4 = z[i4], z5 = z[i5];
    const double twelfth = 1.0 / 12.0;
    *dvdx = (y1 + y2) * (z0 + z1) - (y0 + y1) * (z1 + z2) + (y0 + y4) * (z3 + z4) -
            (y3 + y4) * (z0 + z4) - (y2 + y5) * (z3 + z5) + (y3 + y5) * (z2 + z5);
    *dvdy = -(x1 + x2) * (z0 + z1) + (x0 + x1) * (z1 + z2) - (x0 + x4) * (z3 + z4) +
            (x3 + x4) * (z0 + z4) + (x2 + x5) * (z3 + z5) - (x3 + x5) * (z2 + z5);
    *dvdz = -(y1 + y2) * (x0 + x1) + (y0 + y1) * (x1 + x2) - (y0 + y4) * (x3 + x4) +
            (y3 + y4) * (x0 + x4) + (y2 + y5) * (x3 + x5) - (y3 + y5) * (x2 + x5);
    *dvdx *= twelfth;
    *dvdy *= twelfth;
    *dvdz *= twelfth;
}

/* The derivatives of the volume by each node's coordinates (the reference's
 * CalcElemVolumeDerivative). */
static inline TESS_HD void lul_volume_derivs(double dv[3][8], const double x[8],
                                             const double y[8], const double z[8])
{
    /* node k's derivative from six other nodes, in the reference's order */
    lul_volu_der(x, y, z, 1, 2, 3, 4, 5, 7, &dv[0][0], &dv[1][0], &dv[2][0]);
    lul_volu_der(x, y, z, 0, 1, 2, 7, 4, 6, &dv[0][3], &dv[1][3], &dv[2][3]);
    lul_volu_der(x, y, z, 3, 0, 1, 6, 7, 5, &dv[0][2], &dv[1][2], &dv[2][2]);
    lul_volu_der(x, y, z, 2, 3, 0, 5, 6, 4, &dv[0][1], &dv[1][1], &dv[2][1]);
    lul_volu_der(x, y, z, 7, 6, 5, 0, 3, 1, &dv[0][4], &dv[1][4], &dv[2][4]);
    lul_volu_der(x, y, z, 4, 7, 6, 1, 0, 2, &dv[0][5], &dv[1][5], &dv[2][5]);
    lul_volu_der(x, y, z, 5, 4, 7, 2, 1, 3, &dv[0][6], &dv[1][6], &dv[2][6]);
    lul_volu_der(x, y, z, 6, 5, 4, 3, 2, 0, &dv[0][7], &dv[1][7], &dv[2][7]);
}

/* The Flanagan-Belytschko hourglass modes (the reference's gamma[4][8] of
 * CalcHourglassControlForElems). */
static inline TESS_HD double lul_gamma(int mode, int node)
{
    /* rows: the four modes; bit `node` set = -1 */
    const unsigned neg[4] = {0x3c, 0x96, 0xaa, 0xa5};
    return (neg[mode] >> node) & 1u ? -1.0 : 1.0;
}

/* Node indices of local element (i,j,k) of a block with ex × ey elements per plane (the
 * reference's nodelist, from its BuildMesh; gathered as in CollectDomainNodesToElemNodes). */
static inline TESS_HD void lul_elem_nodes(int64_t ex, int64_t ey, int64_t i, int64_t j, int64_t k,
                                          int32_t nl[8])
{
    int64_t nx = ex + 1, plane = nx * (ey + 1);
    int64_t n0 = (k * (ey + 1) + j) * nx + i;
    nl[0] = (int32_t)n0;
    nl[1] = (int32_t)(n0 + 1);
    nl[2] = (int32_t)(n0 + nx + 1);
    nl[3] = (int32_t)(n0 + nx);
    nl[4] = (int32_t)(n0 + plane);
    nl[5] = (int32_t)(n0 + plane + 1);
    nl[6] = (int32_t)(n0 + plane + nx + 1);
    nl[7] = (int32_t)(n0 + plane + nx);
}

/*
 * Stage 2, one element: the stress and hourglass forces on its 8 corners, written to
 * fx_elem[c*numElem + k] (gathered per node by lul_node_force). Returns LUL_VOLUME_ERROR on a
 * non-positive volume. The reference's CalcVolumeForceForElems for one element:
 * InitStressTermsForElems, IntegrateStressForElems (SumElemStressesToNodeForces) and
 * CalcHourglassControlForElems with CalcFBHourglassForceForElems (CalcElemFBHourglassForce).
 */
static inline TESS_HD int lul_elem_force(const lul_domain_t *TESS_RESTRICT d, int64_t k)
{
    int32_t nl[8];
    double  x[8], y[8], z[8];
    for (int c = 0; c < 8; c++) {
        int32_t n = nl[c] = d->nodelist[c * d->numElem + k];
        x[c]      = d->x[n];
        y[c]      = d->y[n];
        z[c]      = d->z[n];
    }
    int    err = LUL_OK;
    double sig = -d->p[k] - d->q[k];
    double b[3][8], determ;
    lul_shape_derivs(x, y, z, b, &determ);
    lul_node_normals(b, x, y, z);
    double f[3][8];
    for (int c = 0; c < 8; c++) {
        f[0][c] = -(sig * b[0][c]);
        f[1][c] = -(sig * b[1][c]);
        f[2][c] = -(sig * b[2][c]);
    }
    if (determ <= 0.0)
        err = LUL_VOLUME_ERROR;

    /* hourglass control */
    double dv[3][8];
    lul_volume_derivs(dv, x, y, z);
    double vk = d->v[k];
    if (vk <= 0.0)
        err = LUL_VOLUME_ERROR;
    double vol    = d->volo[k] * vk;
    double volinv = 1.0 / vol;
    double hg[8][4];
    for (int m = 0; m < 4; m++) {
        double hx = 0, hy = 0, hz = 0;
        for (int c = 0; c < 8; c++) {
            double g = lul_gamma(m, c);
            hx = c ? hx + x[c] * g : x[c] * g;
            hy = c ? hy + y[c] * g : y[c] * g;
            hz = c ? hz + z[c] * g : z[c] * g;
        }
        for (int c = 0; c < 8; c++)
            hg[c][m] = lul_gamma(m, c) - volinv * (dv[0][c] * hx + dv[1][c] * hy + dv[2][c] * hz);
    }
    double coef = -LUL_HGCOEF * 0.01 * d->ss[k] * d->elemMass[k] / cbrt(vol);
    /* velocities loaded one component at a time, where they are used (fewer live registers) */
    const double *vel[3] = {d->xd, d->yd, d->zd};
    for (int a = 0; a < 3; a++) {
        double u[8], h[4];
        for (int c = 0; c < 8; c++)
            u[c] = vel[a][nl[c]];
        for (int m = 0; m < 4; m++)
            h[m] = hg[0][m] * u[0] + hg[1][m] * u[1] + hg[2][m] * u[2] + hg[3][m] * u[3] +
                   hg[4][m] * u[4] + hg[5][m] * u[5] + hg[6][m] * u[6] + hg[7][m] * u[7];
        for (int c = 0; c < 8; c++)
            f[a][c] += coef * (hg[c][0] * h[0] + hg[c][1] * h[1] + hg[c][2] * h[2] +
                               hg[c][3] * h[3]);
    }
    for (int c = 0; c < 8; c++) {
        d->fx_elem[c * d->numElem + k] = f[0][c];
        d->fy_elem[c * d->numElem + k] = f[1][c];
        d->fz_elem[c * d->numElem + k] = f[2][c];
    }
    return err;
}

/* (i,j,k) of local node n (32-bit division: a block has fewer than 2^31 nodes, as int32_t
 * nodelist entries imply, and a device divides 32-bit integers much faster). */
static inline TESS_HD void lul_node_ijk(const lul_domain_t *TESS_RESTRICT d, int64_t n,
                                        int64_t *i, int64_t *j, int64_t *k)
{
    uint32_t nx = (uint32_t)d->ex + 1, ny = (uint32_t)d->ey + 1, m = (uint32_t)n;
    uint32_t row = m / nx;
    *i           = m - row * nx;
    *j           = row % ny;
    *k           = row / ny;
}

/* The sum of node (i,j,k)'s corner forces over the elements around it (ascending element
 * order): the gather at the end of the reference's IntegrateStressForElems and
 * CalcFBHourglassForceForElems (nodeElemCornerList). */
static inline TESS_HD void lul_node_force_sum(const lul_domain_t *TESS_RESTRICT d, int64_t i,
                                              int64_t j, int64_t k, double f[3])
{
    f[0] = f[1] = f[2] = 0;
    for (int c = 1; c >= 0; c--) {
        int64_t ke = k - c;
        if (ke < 0 || ke >= d->ez)
            continue;
        for (int b = 1; b >= 0; b--) {
            int64_t je = j - b;
            if (je < 0 || je >= d->ey)
                continue;
            for (int a = 1; a >= 0; a--) {
                int64_t ie = i - a;
                if (ie < 0 || ie >= d->ex)
                    continue;
                /* the corner of element (ie,je,ke) at offset (a,b,c): 0 1 2 3 at c = 0 are
                 * (0,0) (1,0) (1,1) (0,1), 4 … 7 the same at c = 1 */
                int     corner = 4 * c + (b ? 3 - a : a);
                int64_t e      = corner * d->numElem + (ke * d->ey + je) * d->ex + ie;
                f[0] += d->fx_elem[e];
                f[1] += d->fy_elem[e];
                f[2] += d->fz_elem[e];
            }
        }
    }
}

/* Whether node (i,j,k) is on the block's surface (its force then needs the neighbours' sums). */
static inline TESS_HD int lul_node_on_surface(const lul_domain_t *TESS_RESTRICT d, int64_t i,
                                              int64_t j, int64_t k)
{
    return i == 0 || j == 0 || k == 0 || i == d->ex || j == d->ey || k == d->ez;
}

/* Stage 2, one node: its force from the corner forces of this block's elements (only for the
 * block's surface nodes: see gather_in_nodes), and with fz->send into the node-sum's messages.
 * The reference's CalcForceForNodes (its CommSBN is the node-sum). */
static inline TESS_HD void lul_node_force(const lul_domain_t *TESS_RESTRICT d, int64_t n,
                                          const lul_fuse_t *fz)
{
    int64_t i, j, k;
    double  f[3];
    lul_node_ijk(d, n, &i, &j, &k);
    lul_node_force_sum(d, i, j, k, f);
    d->fx[n] = f[0];
    d->fy[n] = f[1];
    d->fz[n] = f[2];
    if (fz && fz->send)
        lul_pack_node_vals(f, 3, d->ex, d->ey, d->ez, &fz->splan, fz->send, i, j, k);
}

/* Stage 3, one node: acceleration, symmetry-plane BCs, velocity and position. The force of an
 * interior node (of every node with d->gather_in_nodes) is summed here from the corner forces:
 * the same sums stage 2 would write, one pass over the nodes less; a surface node's is read
 * from fx, fy, fz, where the exchange added the neighbours' sums, or (fz->recv) they are
 * added here as the unpack would have. With fz->send the new positions and velocities go
 * into the node-copy's messages. The reference's LagrangeNodal after CalcForceForNodes, for one
 * node: CalcAccelerationForNodes, ApplyAccelerationBoundaryConditionsForNodes,
 * CalcVelocityForNodes, CalcPositionForNodes. */
static inline TESS_HD void lul_node_update(const lul_domain_t *TESS_RESTRICT d, int64_t n,
                                           double dt, const lul_fuse_t *fz)
{
    int64_t i, j, k;
    double  f[3];
    lul_node_ijk(d, n, &i, &j, &k);
    int surface = lul_node_on_surface(d, i, j, k);
    if (d->gather_in_nodes || !surface) {
        lul_node_force_sum(d, i, j, k, f);
    } else {
        f[0] = d->fx[n], f[1] = d->fy[n], f[2] = d->fz[n];
        if (fz && fz->recv)
            lul_unpack_node_vals(f, 3, d->ex, d->ey, d->ez, &fz->rplan, fz->recv, i, j, k, 1);
    }
    double m   = d->nodalMass[n];
    double xdd = f[0] / m, ydd = f[1] / m, zdd = f[2] / m;
    xdd = d->ox + i == 0 ? 0.0 : xdd; /* symmetry planes */
    ydd = d->oy + j == 0 ? 0.0 : ydd;
    zdd = d->oz + k == 0 ? 0.0 : zdd;
    double xd = d->xd[n] + xdd * dt, yd = d->yd[n] + ydd * dt, zd = d->zd[n] + zdd * dt;
    xd = fabs(xd) < LUL_U_CUT ? 0.0 : xd;
    yd = fabs(yd) < LUL_U_CUT ? 0.0 : yd;
    zd = fabs(zd) < LUL_U_CUT ? 0.0 : zd;
    d->xd[n] = xd;
    d->yd[n] = yd;
    d->zd[n] = zd;
    double x = d->x[n] + xd * dt, y = d->y[n] + yd * dt, z = d->z[n] + zd * dt;
    d->x[n] = x;
    d->y[n] = y;
    d->z[n] = z;
    if (surface && fz && fz->send) {
        double v[6] = {x, y, z, xd, yd, zd};
        lul_pack_node_vals(v, 6, d->ex, d->ey, d->ez, &fz->splan, fz->send, i, j, k);
    }
}

/* The reference's AreaFace. */
static inline TESS_HD double lul_area_face(const double x[8], const double y[8],
                                           const double z[8], int n0, int n1, int n2, int n3)
{
    double fx = (x[n2] - x[n0]) - (x[n3] - x[n1]);
    double fy = (y[n2] - y[n0]) - (y[n3] - y[n1]);
    double fz = (z[n2] - z[n0]) - (z[n3] - z[n1]);
    double gx = (x[n2] - x[n0]) + (x[n3] - x[n1]);
    double gy = (y[n2] - y[n0]) + (y[n3] - y[n1]);
    double gz = (z[n2] - z[n0]) + (z[n3] - z[n1]);
    return (fx * fx + fy * fy + fz * fz) * (gx * gx + gy * gy + gz * gz) -
           (fx * gx + fy * gy + fz * gz) * (fx * gx + fy * gy + fz * gz);
}

/* The reference's CalcElemCharacteristicLength. */
static inline TESS_HD double lul_char_length(const double x[8], const double y[8],
                                             const double z[8], double volume)
{
    const int fc[6][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}, {0, 1, 5, 4},
                          {1, 2, 6, 5}, {2, 3, 7, 6}, {3, 0, 4, 7}};
    double    cl       = 0.0;
    for (int f = 0; f < 6; f++) {
        double a = lul_area_face(x, y, z, fc[f][0], fc[f][1], fc[f][2], fc[f][3]);
        cl       = a > cl ? a : cl;
    }
    return 4.0 * volume / sqrt(cl);
}

/* Sum of pf[q] * (u[q] - u[q + 6 mod 8 …]) over the four node pairs (velocity gradient term):
 * one term of the reference's CalcElemVelocityGradient. */
static inline TESS_HD double lul_grad_term(const double pf[8], const double u[8])
{
    return pf[0] * (u[0] - u[6]) + pf[1] * (u[1] - u[7]) + pf[2] * (u[2] - u[4]) +
           pf[3] * (u[3] - u[5]);
}

/* One monotonic-Q direction: delv (velocity difference across the element in that direction)
 * and delx (length scale) from the face sums (one direction of the reference's
 * CalcMonotonicQGradientsForElems). */
static inline TESS_HD void lul_monoq_dir(double di[3], double dj[3], double vol, double norm,
                                         const double dvel[3], double *delx, double *delv)
{
    double ax = di[1] * dj[2] - di[2] * dj[1];
    double ay = di[2] * dj[0] - di[0] * dj[2];
    double az = di[0] * dj[1] - di[1] * dj[0];
    *delx     = vol / sqrt(ax * ax + ay * ay + az * az + LUL_PTINY);
    ax *= norm;
    ay *= norm;
    az *= norm;
    *delv = ax * dvel[0] + ay * dvel[1] + az * dvel[2];
}

/*
 * Stage 4a, one element: kinematics (new relative volume, its change, characteristic length,
 * volumetric strain rate) and the monotonic-Q gradients. Returns LUL_VOLUME_ERROR on a
 * non-positive new volume. The reference's CalcLagrangeElements (CalcKinematicsForElems with
 * CalcElemVelocityGradient) and CalcMonotonicQGradientsForElems for one element.
 */
static inline TESS_HD int lul_elem_gradients(const lul_domain_t *TESS_RESTRICT d, int64_t k,
                                             double dt)
{
    double x[8], y[8], z[8], xv[8], yv[8], zv[8];
    for (int c = 0; c < 8; c++) {
        int32_t n = d->nodelist[c * d->numElem + k];
        x[c]      = d->x[n];
        y[c]      = d->y[n];
        z[c]      = d->z[n];
        xv[c]     = d->xd[n];
        yv[c]     = d->yd[n];
        zv[c]     = d->zd[n];
    }
    double volume = lul_elem_volume(x, y, z);
    double vnew   = volume / d->volo[k];
    d->vnew[k]    = vnew;
    d->delv[k]    = vnew - d->v[k];
    d->arealg[k]  = lul_char_length(x, y, z, volume);

    /* velocity gradient at the half step */
    double xh[8], yh[8], zh[8], dt2 = 0.5 * dt;
    for (int c = 0; c < 8; c++) {
        xh[c] = x[c] - dt2 * xv[c];
        yh[c] = y[c] - dt2 * yv[c];
        zh[c] = z[c] - dt2 * zv[c];
    }
    double b[3][8], detJ;
    lul_shape_derivs(xh, yh, zh, b, &detJ);
    double inv = 1.0 / detJ;
    double dxx = inv * lul_grad_term(b[0], xv);
    double dyy = inv * lul_grad_term(b[1], yv);
    double dzz = inv * lul_grad_term(b[2], zv);
    d->vdov[k] = dxx + dyy + dzz;

    /* monotonic-Q gradients (with the new positions and velocities) */
    double vol  = d->volo[k] * vnew;
    double norm = 1.0 / (vol + LUL_PTINY);
    double dj[3], di[3], dk[3];
    const double *c3[3] = {x, y, z}, *v3[3] = {xv, yv, zv};
    double dvk[3], dvi[3], dvj[3];
    for (int a = 0; a < 3; a++) {
        const double *u = c3[a], *w = v3[a];
        dj[a]  = -0.25 * ((u[0] + u[1] + u[5] + u[4]) - (u[3] + u[2] + u[6] + u[7]));
        di[a]  = 0.25 * ((u[1] + u[2] + u[6] + u[5]) - (u[0] + u[3] + u[7] + u[4]));
        dk[a]  = 0.25 * ((u[4] + u[5] + u[6] + u[7]) - (u[0] + u[1] + u[2] + u[3]));
        dvk[a] = 0.25 * ((w[4] + w[5] + w[6] + w[7]) - (w[0] + w[1] + w[2] + w[3]));
        dvi[a] = 0.25 * ((w[1] + w[2] + w[6] + w[5]) - (w[0] + w[3] + w[7] + w[4]));
        dvj[a] = -0.25 * ((w[0] + w[1] + w[5] + w[4]) - (w[3] + w[2] + w[6] + w[7]));
    }
    lul_monoq_dir(di, dj, vol, norm, dvk, &d->delx_zeta[k], &d->delv_zeta[k]);
    lul_monoq_dir(dj, dk, vol, norm, dvi, &d->delx_xi[k], &d->delv_xi[k]);
    lul_monoq_dir(dk, di, vol, norm, dvj, &d->delx_eta[k], &d->delv_eta[k]);
    return vnew <= 0.0 ? LUL_VOLUME_ERROR : LUL_OK;
}

/* The limiter of one direction of the monotonic Q: bm, bp are the element's boundary bits of the
 * minus and plus faces of that direction (0 or COMM: neighbour lm/lp, SYMM: itself, FREE: 0).
 * The phixi / phieta / phizeta of the reference's CalcMonotonicQRegionForElems. */
static inline TESS_HD double lul_monoq_phi(const double *delv, int64_t k, int32_t bm,
                                           int32_t symm_m, int32_t free_m, int32_t lm, int32_t bp,
                                           int32_t symm_p, int32_t free_p, int32_t lp)
{
    double norm  = 1.0 / (delv[k] + LUL_PTINY);
    double delvm = bm == symm_m ? delv[k] : bm == free_m ? 0.0 : delv[lm];
    double delvp = bp == symm_p ? delv[k] : bp == free_p ? 0.0 : delv[lp];
    delvm        = delvm * norm;
    delvp        = delvp * norm;
    double phi   = 0.5 * (delvm + delvp);
    delvm *= LUL_MONOQ_LIMITER_MULT;
    delvp *= LUL_MONOQ_LIMITER_MULT;
    if (delvm < phi)
        phi = delvm;
    if (delvp < phi)
        phi = delvp;
    if (phi < 0.0)
        phi = 0.0;
    if (phi > LUL_MONOQ_MAX_SLOPE)
        phi = LUL_MONOQ_MAX_SLOPE;
    return phi;
}

/* Stage 4b helpers: the pressure of the EOS (the reference's CalcPressureForElems). */
static inline TESS_HD double lul_pressure(double bvc, double e, double vnewc)
{
    double p = bvc * e;
    if (fabs(p) < LUL_P_CUT)
        p = 0.0;
    if (vnewc >= LUL_EOSVMAX)
        p = 0.0;
    if (p < LUL_PMIN)
        p = LUL_PMIN;
    return p;
}

/* The sound speed (the reference's CalcSoundSpeedForElems). */
static inline TESS_HD double lul_sound(double pbvc, double e, double vv, double bvc, double p)
{
    double ssc = (pbvc * e + vv * vv * bvc * p) / LUL_REFDENS;
    return ssc <= .1111111e-36 ? .3333333e-18 : sqrt(ssc);
}

/*
 * Stage 4b, one element: monotonic Q (qq, ql), the qstop check, the EOS `rep` times (the same
 * result each time: extra work of the expensive regions, as in the reference), the sound speed
 * and the volume update. Returns LUL_OK or the reference's error. The reference's
 * CalcMonotonicQRegionForElems and the qstop check of CalcQForElems, then
 * ApplyMaterialPropertiesForElems: EvalEOSForElems (CalcEnergyForElems, CalcPressureForElems,
 * CalcSoundSpeedForElems), and UpdateVolumesForElems, for one element.
 */
static inline TESS_HD int lul_elem_eos(const lul_domain_t *TESS_RESTRICT d, int64_t k, int rep)
{
    int     err = LUL_OK;
    int32_t bc  = d->elemBC[k];
    double  vnew = d->vnew[k];

    /* monotonic Q */
    double phixi = lul_monoq_phi(d->delv_xi, k, bc & LUL_XI_M, LUL_XI_M_SYMM, LUL_XI_M_FREE,
                                 d->lxim[k], bc & LUL_XI_P, LUL_XI_P_SYMM, LUL_XI_P_FREE,
                                 d->lxip[k]);
    double phieta = lul_monoq_phi(d->delv_eta, k, bc & LUL_ETA_M, LUL_ETA_M_SYMM,
                                  LUL_ETA_M_FREE, d->letam[k], bc & LUL_ETA_P, LUL_ETA_P_SYMM,
                                  LUL_ETA_P_FREE, d->letap[k]);
    double phizeta = lul_monoq_phi(d->delv_zeta, k, bc & LUL_ZETA_M, LUL_ZETA_M_SYMM,
                                   LUL_ZETA_M_FREE, d->lzetam[k], bc & LUL_ZETA_P,
                                   LUL_ZETA_P_SYMM, LUL_ZETA_P_FREE, d->lzetap[k]);
    double qlin, qquad;
    if (d->vdov[k] > 0.0) {
        qlin  = 0.0;
        qquad = 0.0;
    } else {
        double dxi   = d->delv_xi[k] * d->delx_xi[k];
        double deta  = d->delv_eta[k] * d->delx_eta[k];
        double dzeta = d->delv_zeta[k] * d->delx_zeta[k];
        dxi   = dxi > 0.0 ? 0.0 : dxi;
        deta  = deta > 0.0 ? 0.0 : deta;
        dzeta = dzeta > 0.0 ? 0.0 : dzeta;
        double rho = d->elemMass[k] / (d->volo[k] * vnew);
        qlin  = -LUL_QLC_MONOQ * rho *
               (dxi * (1.0 - phixi) + deta * (1.0 - phieta) + dzeta * (1.0 - phizeta));
        qquad = LUL_QQC_MONOQ * rho *
                (dxi * dxi * (1.0 - phixi * phixi) + deta * deta * (1.0 - phieta * phieta) +
                 dzeta * dzeta * (1.0 - phizeta * phizeta));
    }
    d->qq[k] = qquad;
    d->ql[k] = qlin;
    if (d->q[k] > LUL_QSTOP)
        err = LUL_QSTOP_ERROR;

    /* material properties */
    double vnewc = vnew < LUL_EOSVMIN ? LUL_EOSVMIN : vnew;
    vnewc        = vnewc > LUL_EOSVMAX ? LUL_EOSVMAX : vnewc;
    double vc    = d->v[k] < LUL_EOSVMIN ? LUL_EOSVMIN : d->v[k];
    vc           = vc > LUL_EOSVMAX ? LUL_EOSVMAX : vc;
    if (vc <= 0.0)
        err = LUL_VOLUME_ERROR;

    double e_new = 0, p_new = 0, q_new = 0, bvc = 0, pbvc = 0;
    for (int r = 0; r < rep; r++) {
        double e_old = d->e[k], delvc = d->delv[k], p_old = d->p[k], q_old = d->q[k];
        double qq_old = qquad, ql_old = qlin;
        double compression  = 1.0 / vnewc - 1.0;
        double vchalf       = vnewc - delvc * 0.5;
        double compHalfStep = 1.0 / vchalf - 1.0;
        if (vnewc <= LUL_EOSVMIN)
            compHalfStep = compression;
        if (vnewc >= LUL_EOSVMAX) {
            p_old        = 0.0;
            compression  = 0.0;
            compHalfStep = 0.0;
        }
        const double c1s = 2.0 / 3.0;
        double       work = 0.0;

        e_new = e_old - 0.5 * delvc * (p_old + q_old) + 0.5 * work;
        if (e_new < LUL_EMIN)
            e_new = LUL_EMIN;
        bvc              = c1s * (compHalfStep + 1.0);
        pbvc             = c1s;
        double pHalfStep = lul_pressure(bvc, e_new, vnewc);
        double vhalf     = 1.0 / (1.0 + compHalfStep);
        if (delvc > 0.0)
            q_new = 0.0;
        else
            q_new = lul_sound(pbvc, e_new, vhalf, bvc, pHalfStep) * ql_old + qq_old;
        e_new = e_new + 0.5 * delvc * (3.0 * (p_old + q_old) - 4.0 * (pHalfStep + q_new));
        e_new += 0.5 * work;
        if (fabs(e_new) < LUL_E_CUT)
            e_new = 0.0;
        if (e_new < LUL_EMIN)
            e_new = LUL_EMIN;
        bvc   = c1s * (compression + 1.0);
        p_new = lul_pressure(bvc, e_new, vnewc);
        double q_tilde;
        if (delvc > 0.0)
            q_tilde = 0.0;
        else
            q_tilde = lul_sound(pbvc, e_new, vnewc, bvc, p_new) * ql_old + qq_old;
        e_new = e_new - (7.0 * (p_old + q_old) - 8.0 * (pHalfStep + q_new) + (p_new + q_tilde)) *
                            delvc * (1.0 / 6.0);
        if (fabs(e_new) < LUL_E_CUT)
            e_new = 0.0;
        if (e_new < LUL_EMIN)
            e_new = LUL_EMIN;
        p_new = lul_pressure(bvc, e_new, vnewc);
        if (delvc <= 0.0) {
            q_new = lul_sound(pbvc, e_new, vnewc, bvc, p_new) * ql_old + qq_old;
            if (fabs(q_new) < LUL_Q_CUT)
                q_new = 0.0;
        }
    }
    d->p[k]  = p_new;
    d->e[k]  = e_new;
    d->q[k]  = q_new;
    d->ss[k] = lul_sound(pbvc, e_new, vnewc, bvc, p_new);

    /* volume update */
    double v = vnew;
    if (fabs(v - 1.0) < LUL_V_CUT)
        v = 1.0;
    d->v[k] = v;
    return err;
}

/* Stage 5, one element: its Courant and hydro constraints (1e20 where vdov is 0): the reference's
 * CalcTimeConstraintsForElems (CalcCourantConstraintForElems, CalcHydroConstraintForElems). */
static inline TESS_HD void lul_elem_constraints(const lul_domain_t *TESS_RESTRICT d, int64_t k,
                                                double *courant, double *hydro)
{
    double vdov = d->vdov[k], ss = d->ss[k], al = d->arealg[k];
    *courant = 1.0e20;
    *hydro   = 1.0e20;
    if (vdov != 0.0) {
        double dtf = ss * ss;
        if (vdov < 0.0)
            dtf = dtf + (64.0 * LUL_QQC * LUL_QQC) * al * al * vdov * vdov;
        dtf      = sqrt(dtf);
        *courant = al / dtf;
        *hydro   = LUL_DVOVMAX / (fabs(vdov) + 1.e-20);
    }
}

/* ---- domain set-up (host) -------------------------------------------------------------------- */

/** Builds the block [ox, ox+ex) × … of an n³ mesh: allocates every field (device memory through
 *  the allocation hooks below), fills coordinates, connectivity, boundary conditions, region
 *  sets (numReg regions, balance, cost: the reference's -r, -b, -c), the deposit, the local
 *  nodal mass (still to be summed over neighbours) and the first time step. Returns 0, or -1
 *  when memory runs out. */
int  lul_domain_init(lul_domain_t *d, int64_t n, int64_t ox, int64_t oy, int64_t oz, int64_t ex,
                     int64_t ey, int64_t ez, int numReg, int balance, int cost);
void lul_domain_free(lul_domain_t *d);
/** The device memory lul_domain_init asks lul_dev_alloc for, each allocation rounded up to
 *  `align` bytes: what a program's own allocator (a per-domain arena) must provide. */
size_t lul_domain_device_bytes(int64_t ex, int64_t ey, int64_t ez, int numReg, size_t align);

/** The region (0 … numReg-1) of each local element of the block: the reference's serial region
 *  sets over the GLOBAL mesh (its random runs over the global element order g = (gz*n + gy)*n
 *  + gx, seeded as its serial program is, srand(0), with a portable copy of glibc's rand()),
 *  so every decomposition gets the same region for each element. */
void lul_regions_block(int64_t n, int numReg, int balance, int64_t ox, int64_t oy, int64_t oz,
                       int64_t ex, int64_t ey, int64_t ez, int32_t *reg_out);
/** EOS repetitions of region r (the reference's cost rule). */
int lul_region_rep(int r, int numReg, int cost);
/** -rotate P[3]: the region costs of the block ox..ox+ex (…) of an n³ mesh as in the reference's
 *  run on P[0] × P[1] × P[2] ranks, whose CreateRegionIndexSets rotates the regions of each rank's
 *  domain by its rank (so each rank has a different dominant region): the block takes the
 *  rotation of the rank whose block holds its centre (rank = (z * P + y) * P + x, as the
 *  reference numbers them). Only the EOS repetitions change, never the answer. */
void lul_rotate_costs(lul_domain_t *d, int64_t n, int64_t ox, int64_t oy, int64_t oz, int64_t ex,
                      int64_t ey, int64_t ez, const int P[3]);

/** The reference's TimeIncrement with the global minima of the previous step's constraints; the
 *  new time step also goes to d->scalars (for the next lul_stage_nodes). */
void lul_time_increment(lul_domain_t *d, double dtcourant, double dthydro);

/** The reference's name of an error code ("VolumeError", "QStopError"); the drivers print it and
 *  exit with the code, as the reference does. */
const char *lul_error_string(int err);

/* ---- launchers ------------------------------------------------------------------------------- */

/*
 * A stream is a tess_stream_t (Tessera) or a cudaStream_t (the MPI program). With the host
 * backend the launchers enqueue host loops through lul_host_launch (the Tessera program sets it
 * to tess_gpu_launch_host); with a NULL stream, or no lul_host_launch, they run at once.
 * lul_backend picks CUDA (LUL_CUDA, builds with LULESH_CUDA) or the host loops.
 */
enum { LUL_HOST = 0, LUL_CUDA = 1 };
extern int lul_backend;
typedef void (*lul_host_fn_t)(void *args);
extern void (*lul_host_launch)(void *stream, lul_host_fn_t fn, const void *args, size_t args_size);

/** Device and pinned host memory (defaults: calloc/free on the host backend, cudaMalloc /
 *  cudaMallocHost with CUDA; a program may set its own, e.g. tess_gpu_malloc). */
extern void *(*lul_dev_alloc)(size_t bytes);
extern void (*lul_dev_release)(void *p);
extern void *(*lul_pinned_alloc)(size_t bytes);
extern void (*lul_pinned_release)(void *p);
/** Synchronous copies between host memory and device memory. */
void lul_copy_to_dev(void *dst, const void *src, size_t bytes);
void lul_copy_from_dev(void *dst, const void *src, size_t bytes);

/** Which stages do the exchange work of lul_fuse_t (flags), from LULESH_FUSE in the
 *  environment: none (separate pack and unpack kernels), force (stage 2 packs the forces), sums
 *  (force, and stage 3 adds the sums), copy (force, and stage 3 packs the node-copy) or nodes
 *  (the default: all three); anything else ends the program with a message. Both drivers ask
 *  it, so they run the same kernels. Any thread. */
enum { LUL_FUSE_FORCE = 1, LUL_FUSE_SUMS = 2, LUL_FUSE_COPY = 4 };
int lul_fuse(void);

/** Whether stage 5 (the time constraints' minimum) runs on the GPU as a kernel of its own after
 *  the EOS instead of inside it, for a domain (or chare) of `elems` elements: from
 *  LULESH_EOS_SPLIT in the environment, off (one kernel), on, or auto (the default: apart from
 *  LUL_EOS_SPLIT_MIN elements on, where ncu on the H200 found the pass in element order faster
 *  than the fused one, 1.72 against 1.80 ms at 256³ on one domain, and whole runs agree: see
 *  examples/lulesh/README.md); anything else ends the program with a message. Both drivers ask it.
 *  The host backend has one kernel for both stages whatever it says. Any thread. */
#define LUL_EOS_SPLIT_MIN (1 << 20)
int lul_eos_split(int64_t elems);

/* The stages read nothing that changes from cycle to cycle but device memory: their kernels'
 * arguments are the same every cycle (for the same fz), so a program may record a stage's
 * launches once and replay them. fz may be NULL; with an asynchronous host launcher
 * (lul_host_launch) the host stage reads *fz when it runs: keep it unchanged until then (on a
 * GPU it is passed by value). */
/* 2: fx, fy, fz (local sums); only fz->send, fz->splan are read */
void lul_stage_force(void *stream, lul_domain_t *d, const lul_fuse_t *fz);
/* 3: copies d->scalars (pinned: the time step lul_time_increment wrote) to d->dev_scalars, then
 * xd.., x.. with that time step. The host must not write d->scalars while an earlier copy may
 * still be in flight: a driver writes it (lul_time_increment) after it has waited for the last
 * cycle's constraints, which come after that cycle's copy on the stream. */
void lul_stage_nodes(void *stream, lul_domain_t *d, const lul_fuse_t *fz);
/* 4a: vnew.., delv_* (local), with the time step in d->dev_scalars (lul_stage_nodes put it) */
void lul_stage_gradients(void *stream, lul_domain_t *d);
/* 4b: q, e, p, ss, v; 5: the constraints → d->out (host) */
void lul_stage_eos(void *stream, lul_domain_t *d);

/* The same stage of several blocks at once: a stage launch of one block as data
 * (lul_stage_item_set), and one launch of the stage for n of them (lul_stage_batch). */
typedef struct lul_stage_item {
    lul_domain_t d;         /* as the kernels see it: the host scalars zeroed */
    lul_fuse_t   fz;        /* the stage's exchange work (zeros: none) */
    double       deltatime; /* stage 3 writes it to d.dev_scalars, for the stages after it */
    int32_t      split;     /* stage 4b: lul_eos_split of the block */
    int32_t      pad;
} lul_stage_item_t;
enum { LUL_STAGE_FORCE = 0, LUL_STAGE_NODES = 1, LUL_STAGE_GRADIENTS = 2, LUL_STAGE_EOS = 3 };
/** *it ← a launch of a stage of d (with exchange work fz, NULL: none) at d's time step. */
void lul_stage_item_set(lul_stage_item_t *it, const lul_domain_t *d, const lul_fuse_t *fz);
/** Stage `stage` (LUL_STAGE_*) of the n items at items + k × stride (k < n): what
 *  lul_stage_force … lul_stage_eos do for each, except that stage 3 takes the time step from the
 *  item instead of copying d->scalars. On a GPU one kernel a kernel of the stage (blockIdx.z
 *  picks the item), `items` in device memory, `items_host` the same bytes in host memory (it
 *  sizes the grid); on the host the items one by one (items_host). Both stay unchanged until the
 *  work enqueued now has run. */
void lul_stage_batch(void *stream, int stage, const void *items, const void *items_host,
                     size_t stride, int n);

#ifdef LULESH_CUDA
/* The CUDA launchers (kernels_cuda.cu); the ones above call them when lul_backend says so. */
void  lul_cuda_force(void *s, const lul_domain_t *d, const lul_fuse_t *fz);
void  lul_cuda_nodes(void *s, const lul_domain_t *d, const lul_fuse_t *fz);
void  lul_cuda_gradients(void *s, const lul_domain_t *d);
void  lul_cuda_eos(void *s, const lul_domain_t *d, int split);
void  lul_cuda_stage_batch(void *s, int stage, const void *items, const void *items_host,
                           size_t stride, int n);
void *lul_cuda_malloc(size_t bytes);
void  lul_cuda_free(void *p);
void *lul_cuda_malloc_host(size_t bytes);
void  lul_cuda_free_host(void *p);
void  lul_cuda_copy(void *dst, const void *src, size_t bytes);
void  lul_cuda_copy_async(void *s, void *dst, const void *src, size_t bytes);
#endif

#ifdef __cplusplus
}
#endif

#endif /* LULESH_H */

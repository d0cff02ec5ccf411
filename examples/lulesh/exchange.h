/*
 * exchange.h — LULESH's block decomposition and boundary exchanges, shared by the MPI program
 * and the Tessera one: which block of a cx × cy × cz grid covers which elements of the global
 * N × N × N mesh, which of the 26 neighbours a block has, the nodes and elements each exchange
 * moves, and the pack/unpack kernels (math once, here; launchers per backend). No MPI, no
 * Tessera: the drivers move the packed buffers.
 *
 * Layout (examples/lulesh's contract). A block covers elements [ox, ox+ex) × [oy, oy+ey) ×
 * [oz, oz+ez). Local element (i,j,k) is e = (k*ey + j)*ex + i, local node (i,j,k) (i <= ex …) is
 * n = (k*(ey+1) + j)*(ex+1) + i; nodes on a block boundary exist in every block that touches
 * them. Element fields with ghosts have numElem + 2*(ey*ez + ex*ez + ex*ey) entries, the slabs
 * in face order -x, +x, -y, +y, -z, +z after the local elements; within an x slab (j,k) is at
 * k*ey + j, within a y slab (i,k) at k*ex + i, within a z slab (i,j) at j*ex + i.
 *
 * Directions: d = (dx+1) + 3*(dy+1) + 9*(dz+1), dx, dy, dz in {-1, 0, 1}; 13 is the block itself
 * and 26 - d the opposite of d. Faces f = 0..5 are -x, +x, -y, +y, -z, +z.
 *
 * Exchanges:
 *   - node-sum (nodal mass, forces): every block sends the nodes it shares with neighbour d (a
 *     face plane, an edge line or a corner node) to d, and adds what each neighbour sent into
 *     the same nodes. Unpack in a fixed order of d (lul_xch_unpack_nodes over d = 0 … 26) and
 *     the sums do not depend on the order messages arrive in.
 *   - node-copy (positions and velocities, the reference's SEDOV_SYNC_POS_VEL_EARLY): a block
 *     sends to the neighbours with d < 13 and copies what those with d > 13 sent over its own
 *     nodes (lul_xch_sync_sends / lul_xch_sync_recvs), in ascending d (d orders neighbours as
 *     (z, y, x) does): every copy of a node ends with the value of the block highest in (z, y,
 *     x) order among those sharing it, which itself receives nothing for that node.
 *     By default (lul_node_copy_ring) a face's message carries only its ring, the face nodes on
 *     an edge of the block; edge and corner messages are whole. The rest of a face is shared by
 *     exactly two blocks, and there the copy changes nothing: both hold the same mass and
 *     force sums (own + the other's, and a + b == b + a in IEEE arithmetic), the same previous
 *     position and velocity and the same time step, and update them with the same code, so
 *     both compute the same bits. Only a node shared by three blocks or more, which lies on an
 *     edge of each, can get sums in different orders (lulesh_tess and lulesh_mpi check the
 *     answers bit for bit against the whole-face copy: LULESH_NODECOPY=full).
 *   - element ghosts (monotonic-Q gradients): the layer of elements next to face f goes to
 *     the neighbour across f and lands in its ghost slab of the opposite face.
 * Packed buffers hold nf fields one after the other: field q of item t at buf[q*count + t].
 */
#ifndef LULESH_EXCHANGE_H
#define LULESH_EXCHANGE_H

#include <stddef.h>
#include <stdint.h>
#include <tessera/kernel.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LUL_XCH_MAX_FIELDS 6 /* fields of one exchange (positions and velocities: 6) */
#define LUL_XCH_SELF       13

/* ---- decomposition ------------------------------------------------------------------------- */

/** First of `parts` parts of n: part p is [lul_part_start(n, parts, p), …(p + 1)). */
static inline int64_t lul_part_start(int64_t n, int64_t parts, int64_t p)
{
    return p * (n / parts) + (p < n % parts ? p : n % parts);
}

/** A block of the grid: its first element and its extents. */
typedef struct lul_box {
    int64_t ox, oy, oz;
    int64_t ex, ey, ez;
} lul_box_t;

/** The block at c[] of a grid[] of blocks over an n × n × n mesh. */
static inline lul_box_t lul_box_of(int64_t n, const int grid[3], const int c[3])
{
    lul_box_t b;
    b.ox = lul_part_start(n, grid[0], c[0]);
    b.oy = lul_part_start(n, grid[1], c[1]);
    b.oz = lul_part_start(n, grid[2], c[2]);
    b.ex = lul_part_start(n, grid[0], c[0] + 1) - b.ox;
    b.ey = lul_part_start(n, grid[1], c[1] + 1) - b.oy;
    b.ez = lul_part_start(n, grid[2], c[2] + 1) - b.oz;
    return b;
}

static inline TESS_HD int lul_dir(int dx, int dy, int dz)
{
    return (dx + 1) + 3 * (dy + 1) + 9 * (dz + 1);
}

static inline TESS_HD void lul_dir_vec(int d, int v[3])
{
    v[0] = d % 3 - 1;
    v[1] = d / 3 % 3 - 1;
    v[2] = d / 9 - 1;
}

static inline int lul_dir_opposite(int d)
{
    return 26 - d;
}

/** The direction of face f (0..5: -x, +x, -y, +y, -z, +z), and the face opposite f. */
static inline TESS_HD int lul_face_dir(int f)
{
    int s = f % 2 ? 1 : -1;
    return f / 2 == 0 ? lul_dir(s, 0, 0) : f / 2 == 1 ? lul_dir(0, s, 0) : lul_dir(0, 0, s);
}

static inline int lul_face_opposite(int f)
{
    return f ^ 1;
}

/** The face (0..5) whose direction is d, or -1 when d is an edge, a corner or the block. */
static inline int lul_dir_face(int d)
{
    for (int f = 0; f < 6; f++)
        if (lul_face_dir(f) == d)
            return f;
    return -1;
}

/** Whether the block at c[] has a neighbour in direction d (never for d = 13); its position in
 *  nc[] (may be NULL). */
static inline int lul_dir_neighbor(const int grid[3], const int c[3], int d, int nc_p[3])
{
    int v[3], nc[3];
    if (d == LUL_XCH_SELF)
        return 0;
    lul_dir_vec(d, v);
    for (int a = 0; a < 3; a++) {
        nc[a] = c[a] + v[a];
        if (nc[a] < 0 || nc[a] >= grid[a])
            return 0;
    }
    if (nc_p)
        for (int a = 0; a < 3; a++)
            nc_p[a] = nc[a];
    return 1;
}

/** The nodes on the surface of an ex × ey × ez block (the only ones an exchange touches), in
 *  this order: the planes k = 0 and k = ez, then the ring i ∈ {0, ex} or j ∈ {0, ey} of each
 *  plane between. */
static inline TESS_HD int64_t lul_surface_count(int64_t ex, int64_t ey, int64_t ez)
{
    int64_t plane = (ex + 1) * (ey + 1), ring = 2 * (ex + 1) + 2 * (ey - 1);
    return 2 * plane + (ez - 1) * ring;
}

/** Surface node s (0 ≤ s < lul_surface_count) as a node index, (k * (ey + 1) + j) * (ex + 1) + i. */
static inline TESS_HD int64_t lul_surface_node(int64_t ex, int64_t ey, int64_t ez, int64_t s)
{
    int64_t nx = ex + 1, plane = nx * (ey + 1), ring = 2 * nx + 2 * (ey - 1);
    if (s < 2 * plane)
        return s < plane ? s : ez * plane + (s - plane);
    s -= 2 * plane;
    int64_t k = 1 + s / ring, r = s % ring, i, j;
    if (r < 2 * nx) {
        i = r % nx;
        j = r < nx ? 0 : ey;
    } else {
        r -= 2 * nx;
        j = 1 + r / 2;
        i = r % 2 ? ex : 0;
    }
    return k * plane + j * nx + i;
}

/** Elements with ghosts of a block: numElem + the six slabs. */
static inline int64_t lul_elems_with_ghosts(int64_t ex, int64_t ey, int64_t ez)
{
    return ex * ey * ez + 2 * (ey * ez + ex * ez + ex * ey);
}

/** Elements in the slab of face f, and where that ghost slab starts (from element 0). */
static inline TESS_HD int64_t lul_face_count(int64_t ex, int64_t ey, int64_t ez, int f)
{
    return f / 2 == 0 ? ey * ez : f / 2 == 1 ? ex * ez : ex * ey;
}

static inline int64_t lul_ghost_offset(int64_t ex, int64_t ey, int64_t ez, int f)
{
    int64_t off = ex * ey * ez;
    for (int g = 0; g < f; g++)
        off += lul_face_count(ex, ey, ez, g);
    return off;
}

/** Whether node (i, j, k) of an ex × ey × ez block lies on an edge of the block (on its
 *  boundary along two axes or three): the only nodes a node-copy of face rings moves. */
static inline TESS_HD int lul_node_on_edge(int64_t ex, int64_t ey, int64_t ez, int64_t i,
                                           int64_t j, int64_t k)
{
    return (i == 0 || i == ex) + (j == 0 || j == ey) + (k == 0 || k == ez) >= 2;
}

/** The nodes on the twelve edges of an ex × ey × ez block, in this order: the four lines along
 *  x (j ∈ {0, ey}, k ∈ {0, ez}, corners included), then the inner nodes of the four along y
 *  and of the four along z. */
static inline TESS_HD int64_t lul_edge_count(int64_t ex, int64_t ey, int64_t ez)
{
    return 4 * (ex + 1) + 4 * (ey - 1) + 4 * (ez - 1);
}

/** Edge node s (0 ≤ s < lul_edge_count) as a node index. */
static inline TESS_HD int64_t lul_edge_node(int64_t ex, int64_t ey, int64_t ez, int64_t s)
{
    int64_t nx = ex + 1, i, j, k, line;
    if (s < 4 * nx) {
        line = s / nx, i = s % nx;
        j = line & 1 ? ey : 0, k = line & 2 ? ez : 0;
    } else if ((s -= 4 * nx) < 4 * (ey - 1)) {
        line = s / (ey - 1), j = 1 + s % (ey - 1);
        i = line & 1 ? ex : 0, k = line & 2 ? ez : 0;
    } else {
        s -= 4 * (ey - 1);
        line = s / (ez - 1), k = 1 + s % (ez - 1);
        i = line & 1 ? ex : 0, j = line & 2 ? ey : 0;
    }
    return (k * (ey + 1) + j) * nx + i;
}

/* ---- regions (index math, one source for every backend) ------------------------------------ */

/** The nodes a block shares with neighbour d: lo[a] .. lo[a] + n[a] - 1 on each axis, numbered
 *  x fastest (t = (k' * n[1] + j') * n[0] + i'). Neighbours see the same shape from both
 *  sides, so the sender's t is the receiver's t. A ring region (ring != 0, a face only) holds
 *  the face's boundary alone: with u and w its two axes (u the lower, na the normal axis), the
 *  row w = 0, the row w = nw - 1, then for w = 1 … nw - 2 the nodes u = 0 and u = nu - 1.
 *  (The ring math picks axes with selects, never an array index computed at run time: in a
 *  kernel that would put the arrays in local memory.) */
typedef struct lul_region {
    int64_t lo[3], n[3];
    int64_t ldx, ldy; /* nodes per row (ex + 1) and per plane (ey + 1) rows */
    int64_t count;
    int64_t nu, nw;   /* ring: nodes along u and w */
    int     ring, na;
} lul_region_t;

/** The region of direction d; ring: a face's ring only (edges and corners are whole). */
static inline TESS_HD lul_region_t lul_node_region_of(int64_t ex, int64_t ey, int64_t ez, int d,
                                                      int ring)
{
    lul_region_t r;
    int          v[3], flat = 0;
    int64_t      e[3] = {ex, ey, ez};
    lul_dir_vec(d, v);
    for (int a = 0; a < 3; a++) {
        r.lo[a] = v[a] > 0 ? e[a] : 0;
        r.n[a]  = v[a] ? 1 : e[a] + 1;
        flat += v[a] != 0;
    }
    r.ldx   = ex + 1;
    r.ldy   = ey + 1;
    r.count = r.n[0] * r.n[1] * r.n[2];
    r.ring  = ring && flat == 1;
    r.na    = v[0] ? 0 : v[1] ? 1 : 2;
    r.nu    = r.na == 0 ? r.n[1] : r.n[0];
    r.nw    = r.na == 2 ? r.n[1] : r.n[2];
    if (r.ring)
        r.count = 2 * r.nu + 2 * r.nw - 4;
    return r;
}

static inline TESS_HD lul_region_t lul_node_region(int64_t ex, int64_t ey, int64_t ez, int d)
{
    return lul_node_region_of(ex, ey, ez, d, 0);
}

/** Local node index of the t-th node of a region. */
static inline TESS_HD int64_t lul_region_node(const lul_region_t *r, int64_t t)
{
    int64_t ci, cj, ck;
    if (r->ring) {
        int64_t nu = r->nu, nw = r->nw, u, w;
        if (t < 2 * nu) {
            u = t % nu;
            w = t < nu ? 0 : nw - 1;
        } else {
            w = 1 + (t - 2 * nu) / 2;
            u = (t - 2 * nu) % 2 ? nu - 1 : 0;
        }
        ci = r->na == 0 ? 0 : u;
        cj = r->na == 0 ? u : r->na == 1 ? 0 : w;
        ck = r->na == 2 ? 0 : w;
    } else {
        ci           = t % r->n[0];
        int64_t rest = t / r->n[0];
        cj           = rest % r->n[1];
        ck           = rest / r->n[1];
    }
    return ((r->lo[2] + ck) * r->ldy + (r->lo[1] + cj)) * r->ldx + (r->lo[0] + ci);
}

/** Local element index of the t-th element of the layer next to face f (t in the ghost-slab
 *  order of that face). */
static inline TESS_HD int64_t lul_face_elem(int64_t ex, int64_t ey, int64_t ez, int f, int64_t t)
{
    int64_t i, j, k;
    if (f / 2 == 0) {
        i = f % 2 ? ex - 1 : 0;
        j = t % ey;
        k = t / ey;
    } else if (f / 2 == 1) {
        j = f % 2 ? ey - 1 : 0;
        i = t % ex;
        k = t / ex;
    } else {
        k = f % 2 ? ez - 1 : 0;
        i = t % ex;
        j = t / ex;
    }
    return (k * ey + j) * ex + i;
}

/** The fields of one exchange (passed by value to kernels). */
typedef struct lul_fields {
    double *f[LUL_XCH_MAX_FIELDS];
    int     nf;
    int     pad; /* zero: no implicit padding, so launch arguments compare byte for byte (a
                  * step graph's TESS_CHECK compares them) */
} lul_fields_t;

static inline TESS_HD void lul_pack_node(const lul_fields_t *fl, const lul_region_t *r,
                                         double *TESS_RESTRICT buf, int64_t t)
{
    int64_t n = lul_region_node(r, t);
    for (int q = 0; q < fl->nf; q++)
        buf[q * r->count + t] = fl->f[q][n];
}

static inline TESS_HD void lul_unpack_node(const lul_fields_t *fl, const lul_region_t *r,
                                           const double *TESS_RESTRICT buf, int64_t t, int add)
{
    int64_t n = lul_region_node(r, t);
    for (int q = 0; q < fl->nf; q++) {
        if (add)
            fl->f[q][n] += buf[q * r->count + t];
        else
            fl->f[q][n] = buf[q * r->count + t];
    }
}

/* ---- a whole exchange at once (one kernel per exchange on a GPU) ---------------------------- */

/** Where each direction's message lies in one buffer: direction d at buf + off[d] doubles (its
 *  nf fields one after the other, as above), off[d] < 0 when there is none. */
typedef struct lul_xch_plan {
    int64_t off[27];
    int     ring; /* face messages carry their rings only (the node-copy: lul_node_copy_ring) */
    int     pad;  /* zero (lul_fields_t says why) */
} lul_xch_plan_t;

/* One axis of a node's message m: the node's side b on it (-1, 0, 1: low face, inside, high
 * face) and choice c (0, 1) give the direction's component, the smaller first; -2 when there is
 * no such choice (c = 1 inside). */
static inline TESS_HD int lul_msg_axis(int b, int c)
{
    return b == 0 ? (c ? -2 : 0) : (b < 0) == (c == 0) ? b : 0;
}

/** Message m (0 ≤ m < 8) of the plan that holds node (i, j, k): its direction, -1 when there is
 *  none; the node at slot *t of its *cnt items. m in ascending order visits the messages in
 *  ascending direction (at most 7: a corner node's three faces, three edges and corner);
 *  interior nodes are in none. No arrays: a kernel keeps it in registers. */
static inline TESS_HD int lul_node_msg(int64_t ex, int64_t ey, int64_t ez,
                                       const lul_xch_plan_t *plan, int64_t i, int64_t j,
                                       int64_t k, int m, int64_t *t, int64_t *cnt)
{
    int dx = lul_msg_axis(i == 0 ? -1 : i == ex ? 1 : 0, m & 1);
    int dy = lul_msg_axis(j == 0 ? -1 : j == ey ? 1 : 0, m >> 1 & 1);
    int dz = lul_msg_axis(k == 0 ? -1 : k == ez ? 1 : 0, m >> 2 & 1);
    if (dx == -2 || dy == -2 || dz == -2)
        return -1;
    int d = lul_dir(dx, dy, dz);
    if (d == LUL_XCH_SELF || plan->off[d] < 0)
        return -1;
    if (plan->ring && (dx != 0) + (dy != 0) + (dz != 0) == 1) { /* a face's ring */
        int64_t u = dx ? j : i, w = dz ? j : k;
        int64_t nu = (dx ? ey : ex) + 1, nw = (dz ? ey : ez) + 1;
        *cnt = 2 * nu + 2 * nw - 4;
        if (w == 0 || w == nw - 1)
            *t = (w ? nu : 0) + u;
        else if (u == 0 || u == nu - 1)
            *t = 2 * nu + 2 * (w - 1) + (u != 0);
        else
            return -1;
        return d;
    }
    lul_region_t r = lul_node_region(ex, ey, ez, d);
    *cnt           = r.count;
    *t             = ((k - r.lo[2]) * r.n[1] + (j - r.lo[1])) * r.n[0] + (i - r.lo[0]);
    return d;
}

/** Node (i, j, k)'s nf values v[]: add (or copy) what every direction of the plan brought for
 *  it, in ascending direction: the order of the direction-by-direction unpacks, so the same sums
 *  and the same last copy. A stage kernel that computes the node unpacks so (lulesh.h). */
static inline TESS_HD void lul_unpack_node_vals(double *v, int nf, int64_t ex, int64_t ey,
                                                int64_t ez, const lul_xch_plan_t *plan,
                                                const double *TESS_RESTRICT buf, int64_t i,
                                                int64_t j, int64_t k, int add)
{
    if (plan->ring && !lul_node_on_edge(ex, ey, ez, i, j, k))
        return;
    for (int m = 0; m < 8; m++) {
        int64_t t, cnt;
        int     d = lul_node_msg(ex, ey, ez, plan, i, j, k, m, &t, &cnt);
        if (d < 0)
            continue;
        const double *b = buf + plan->off[d] + t;
        for (int q = 0; q < nf; q++)
            v[q] = add ? v[q] + b[q * cnt] : b[q * cnt];
    }
}

/** Node (i, j, k)'s nf values v[] into every message of the plan that holds it: the pack of
 *  lul_xch_pack_nodes_all, done by the stage kernel that computed them (lulesh.h). */
static inline TESS_HD void lul_pack_node_vals(const double *v, int nf, int64_t ex, int64_t ey,
                                              int64_t ez, const lul_xch_plan_t *plan,
                                              double *TESS_RESTRICT buf, int64_t i, int64_t j,
                                              int64_t k)
{
    if (plan->ring && !lul_node_on_edge(ex, ey, ez, i, j, k))
        return;
    for (int m = 0; m < 8; m++) {
        int64_t t, cnt;
        int     d = lul_node_msg(ex, ey, ez, plan, i, j, k, m, &t, &cnt);
        if (d < 0)
            continue;
        double *b = buf + plan->off[d] + t;
        for (int q = 0; q < nf; q++)
            b[q * cnt] = v[q];
    }
}

/** Node n of the block: lul_unpack_node_vals on its fields, in place (written out: through a
 *  local array of nf values the unpack kernel kept it in memory, 112 bytes of stack). Interior
 *  nodes have nothing to do (a kernel visits the surface nodes: lul_surface_node). */
static inline TESS_HD void lul_unpack_node_all(const lul_fields_t *fl, int64_t ex, int64_t ey,
                                               int64_t ez, const lul_xch_plan_t *plan,
                                               const double *TESS_RESTRICT buf, int64_t n,
                                               int add)
{
    int64_t i = n % (ex + 1), j = n / (ex + 1) % (ey + 1), k = n / ((ex + 1) * (ey + 1));
    if (plan->ring && !lul_node_on_edge(ex, ey, ez, i, j, k))
        return;
    for (int m = 0; m < 8; m++) {
        int64_t t, cnt;
        int     d = lul_node_msg(ex, ey, ez, plan, i, j, k, m, &t, &cnt);
        if (d < 0)
            continue;
        const double *b = buf + plan->off[d] + t;
        for (int q = 0; q < fl->nf; q++)
            fl->f[q][n] = add ? fl->f[q][n] + b[q * cnt] : b[q * cnt];
    }
}

/* ---- which exchanges a block takes part in ------------------------------------------------- */

/** Node-copy (positions/velocities): a block sends to its neighbours with d < 13 and copies from
 *  those with d > 13. */
static inline int lul_xch_sync_sends(int d)
{
    return d < LUL_XCH_SELF;
}
static inline int lul_xch_sync_recvs(int d)
{
    return d > LUL_XCH_SELF;
}

/** Nodes a block shares with neighbour d (a message carries nf times as many doubles); ring:
 *  those a node-copy of face rings moves. */
static inline int64_t lul_node_count_of(int64_t ex, int64_t ey, int64_t ez, int d, int ring)
{
    return lul_node_region_of(ex, ey, ez, d, ring).count;
}
static inline int64_t lul_node_count(int64_t ex, int64_t ey, int64_t ez, int d)
{
    return lul_node_count_of(ex, ey, ez, d, 0);
}

/** Whether the node-copy moves face rings only (1, the default) or whole faces (0, as the
 *  reference does: the same answer, bit for bit; see the top of this file), from
 *  LULESH_NODECOPY (ring or full) in the environment; anything else ends the program with a
 *  message. Both drivers ask it. Any thread. */
int lul_node_copy_ring(void);

/* ---- launchers ------------------------------------------------------------------------------ */

/*
 * A stream is a tess_stream_t (Tessera) or a cudaStream_t (the MPI program). With the host
 * backend the launchers enqueue host loops through lul_xch_host_launch (the Tessera program sets
 * it to tess_gpu_launch_host); with a NULL stream, or no lul_xch_host_launch, they run at once.
 * lul_xch_backend picks CUDA (LUL_XCH_CUDA, in builds with LULESH_CUDA) or the host loops.
 */
enum { LUL_XCH_HOST = 0, LUL_XCH_CUDA = 1 };
extern int lul_xch_backend;
typedef void (*lul_xch_host_fn_t)(void *args);
extern void (*lul_xch_host_launch)(void *stream, lul_xch_host_fn_t fn, const void *args,
                                   size_t args_size);

/* One direction or face at a time, on the host only (the host loops of the whole-exchange
 * launchers below, and exchange_check); both drivers call the whole-exchange ones. */
/** buf ← the nodes shared with neighbour d of fl's fields (lul_node_count_of(…, d, ring) × nf
 *  doubles; ring: a face's ring only). */
void lul_xch_pack_nodes(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez, int d,
                        int ring, double *buf);
/** The nodes shared with neighbour d ← (add: +=) what d packed for this block. */
void lul_xch_unpack_nodes(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez, int d,
                          int ring, const double *buf, int add);
/** buf ← the layer of elements next to face f of fl's fields (lul_face_count × nf doubles). */
void lul_xch_pack_elems(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez, int f,
                        double *buf);
/** Ghost slab of face f of fl's fields ← what the neighbour across f packed (its layer next to
 *  the opposite face). */
void lul_xch_unpack_elems(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez, int f,
                          const double *buf);

/** The same for every direction of a plan: buf + plan->off[d] ← the nodes shared with d (pack),
 *  and the nodes ← (add: +=) what each direction brought, in ascending direction (unpack). On a
 *  GPU each is one kernel; the host runs the direction-by-direction loops. */
void lul_xch_pack_nodes_all(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                            const lul_xch_plan_t *plan, double *buf);
void lul_xch_unpack_nodes_all(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                              const lul_xch_plan_t *plan, const double *buf, int add);
/** Element layers of the six faces (plan->off of the face directions) and their ghost slabs. */
void lul_xch_pack_elems_all(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                            const lul_xch_plan_t *plan, double *buf);
void lul_xch_unpack_elems_all(void *stream, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                              const lul_xch_plan_t *plan, const double *buf);

/* ---- the same exchange of several blocks at once -------------------------------------------- */

/** A whole-exchange launch of one block as data (what the lul_xch_*_all call above would take),
 *  so that a program can launch the same exchange of several blocks as one (lul_xch_batch). */
enum { LUL_XCH_NONE = 0, LUL_XCH_PACK_NODES = 1, LUL_XCH_UNPACK_NODES = 2, LUL_XCH_PACK_ELEMS = 3 };
typedef struct lul_xch_item {
    lul_fields_t   fl;
    lul_xch_plan_t plan;
    int64_t        ex, ey, ez;
    double        *buf; /* pack: the buffer packed; unpack: the one read (not written) */
    int32_t        op;  /* LUL_XCH_*: NONE, nothing for this block */
    int32_t        add; /* unpack: add the values (node sums) or copy them */
} lul_xch_item_t;

/** The item's exchange on its own: the lul_xch_*_all call it describes (none for NONE). */
void lul_xch_item_run(void *stream, const lul_xch_item_t *x);
/** The exchanges of n items at items + k × stride (k < n), whose ops are one op or NONE. On a GPU
 *  one kernel (blockIdx.z picks the item): `items` in device memory, `items_host` the same bytes
 *  in host memory (it sizes the grid); on the host the items one by one (items_host). Both stay
 *  unchanged until the work enqueued now has run. */
void lul_xch_batch(void *stream, const void *items, const void *items_host, size_t stride, int n);

#ifdef LULESH_CUDA
/* The CUDA launchers (exchange_cuda.cu); the ones above call them when lul_xch_backend says so. */
void lul_xch_cuda_pack_nodes_all(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                 lul_xch_plan_t plan, double *buf);
void lul_xch_cuda_unpack_nodes_all(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                   lul_xch_plan_t plan, const double *buf, int add);
void lul_xch_cuda_pack_elems_all(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                 lul_xch_plan_t plan, double *buf);
void lul_xch_cuda_unpack_elems_all(void *s, lul_fields_t fl, int64_t ex, int64_t ey, int64_t ez,
                                   lul_xch_plan_t plan, const double *buf);
void lul_xch_cuda_batch(void *s, const void *items, const void *items_host, size_t stride, int n,
                        int op);
#endif

#ifdef __cplusplus
}
#endif

#endif /* LULESH_EXCHANGE_H */

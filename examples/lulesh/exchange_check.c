/*
 * exchange_check — the decomposition and exchange kernels of exchange.h on their own, without
 * MPI or Tessera: blocks of an uneven grid over an N³ mesh hold fields made of global ids,
 * exchange (buffers handed over in memory), and every result is checked exactly:
 *   node-sum:   a node of multiplicity m (blocks holding it) ends with m and m × its global id;
 *   node-copy:  every copy of a node ends with the value of the block highest in (z, y, x)
 *               order that holds it (with face rings, lul_node_copy_ring: every copy on an
 *               edge of its block; the others keep their own);
 *   ghosts:     every ghost slab facing a neighbour holds the global ids of the elements across;
 *   surface:    the surface nodes (those an exchange unpacks and stage 2 sums) are each node
 *               with lulesh.h's lul_node_on_surface, once; the edge nodes (those a ring
 *               node-copy unpacks) each node with lul_node_on_edge, once.
 *   exchange_check [N CX CY CZ]   (default: several grids)
 */
#include "exchange.h"
#include "lulesh.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct blk {
    int       c[3];
    lul_box_t b;
    double   *node[2], *elem[3];
    double   *out[27]; /* packed per direction */
} blk_t;

static int64_t n_glob;
static int     grid[3];
static long    failures;

static int lin(const int c[3])
{
    return (c[2] * grid[1] + c[1]) * grid[0] + c[0];
}

static double gnode(const lul_box_t *b, int64_t i, int64_t j, int64_t k)
{
    int64_t m = n_glob + 1;
    return (double)(((b->oz + k) * m + (b->oy + j)) * m + (b->ox + i));
}

static double gelem(int64_t x, int64_t y, int64_t z)
{
    return (double)((z * n_glob + y) * n_glob + x);
}

/* Blocks holding coordinate g along an axis (1, or 2 on an inner block boundary). */
static int mult1(int64_t g, int parts)
{
    for (int p = 1; p < parts; p++)
        if (lul_part_start(n_glob, parts, p) == g)
            return 2;
    return 1;
}

/* Part holding coordinate g that comes last (the highest one). */
static int last_part(int64_t g, int parts)
{
    int best = 0;
    for (int p = 0; p < parts; p++)
        if (lul_part_start(n_glob, parts, p) <= g && g <= lul_part_start(n_glob, parts, p + 1))
            best = p;
    return best;
}

static void fail(const char *what, const blk_t *k, int64_t idx, double got, double want)
{
    if (failures++ < 10)
        fprintf(stderr, "%s: block (%d,%d,%d) item %lld: %.17g, want %.17g\n", what, k->c[0],
                k->c[1], k->c[2], (long long)idx, got, want);
}

/* Pack every node of block k with lul_pack_node_vals (as the node stage does) into one buffer
 * laid out by a plan of the directions k sends to, and compare with k->out[]. */
static void check_node_pack(blk_t *k, lul_fields_t fl, int copy, int ring)
{
    lul_xch_plan_t plan;
    int64_t        total = 0;
    plan.ring            = ring;
    for (int d = 0; d < 27; d++) {
        plan.off[d] = k->out[d] ? total : -1;
        if (k->out[d])
            total += fl.nf * lul_node_count_of(k->b.ex, k->b.ey, k->b.ez, d, ring);
    }
    double *all = calloc((size_t)(total ? total : 1), sizeof(double));
    for (int64_t kk = 0; kk <= k->b.ez; kk++)
        for (int64_t j = 0; j <= k->b.ey; j++)
            for (int64_t i = 0; i <= k->b.ex; i++) {
                int64_t n = (kk * (k->b.ey + 1) + j) * (k->b.ex + 1) + i;
                double  v[2];
                for (int q = 0; q < fl.nf; q++)
                    v[q] = fl.f[q][n];
                lul_pack_node_vals(v, fl.nf, k->b.ex, k->b.ey, k->b.ez, &plan, all, i, j, kk);
            }
    for (int d = 0; d < 27; d++) {
        if (!k->out[d])
            continue;
        int64_t cnt = fl.nf * lul_node_count_of(k->b.ex, k->b.ey, k->b.ez, d, ring);
        for (int64_t t = 0; t < cnt; t++)
            if (all[plan.off[d] + t] != k->out[d][t]) {
                fail(copy ? "node pack (copy)" : "node pack (sum)", k, t, all[plan.off[d] + t],
                     k->out[d][t]);
                break;
            }
    }
    free(all);
}

/* centric: unpack node by node with lul_unpack_node_all (the GPU's one-kernel unpack: over the
 * surface nodes, or the edge nodes for face rings) from one buffer holding every received
 * message at its plan offset; else direction by direction. ring: a node-copy of face rings. */
static void exchange_nodes(blk_t *bl, int nb, int nf, int copy, int centric, int ring)
{
    for (int s = 0; s < nb; s++) {
        blk_t       *k  = &bl[s];
        lul_fields_t fl = {{k->node[0], k->node[1]}, nf, 0};
        for (int d = 0; d < 27; d++) {
            k->out[d] = NULL;
            if (!lul_dir_neighbor(grid, k->c, d, NULL) || (copy && !lul_xch_sync_sends(d)))
                continue;
            k->out[d] = malloc(sizeof(double) * nf *
                               lul_node_count_of(k->b.ex, k->b.ey, k->b.ez, d, ring));
            lul_xch_pack_nodes(NULL, fl, k->b.ex, k->b.ey, k->b.ez, d, ring, k->out[d]);
        }
        if (centric) /* the node stage's pack, node by node, must give the same messages */
            check_node_pack(k, fl, copy, ring);
    }
    for (int r = 0; r < nb; r++) {
        blk_t       *k  = &bl[r];
        lul_fields_t fl = {{k->node[0], k->node[1]}, nf, 0};
        for (int d = 0; d < 27; d++) {
            int nc[3];
            if (!lul_dir_neighbor(grid, k->c, d, nc) || (copy && !lul_xch_sync_recvs(d)))
                continue;
            const double *buf = bl[lin(nc)].out[lul_dir_opposite(d)];
            if (!centric)
                lul_xch_unpack_nodes(NULL, fl, k->b.ex, k->b.ey, k->b.ez, d, ring, buf, !copy);
        }
        if (centric) {
            lul_xch_plan_t plan;
            int64_t        total = 0;
            plan.ring            = ring;
            for (int d = 0; d < 27; d++) {
                int ok = lul_dir_neighbor(grid, k->c, d, NULL) && (!copy || lul_xch_sync_recvs(d));
                plan.off[d] = ok ? total : -1;
                if (ok)
                    total += nf * lul_node_count_of(k->b.ex, k->b.ey, k->b.ez, d, ring);
            }
            double *all = malloc(sizeof(double) * (size_t)(total ? total : 1));
            for (int d = 0; d < 27; d++) {
                int nc[3];
                if (plan.off[d] < 0 || !lul_dir_neighbor(grid, k->c, d, nc))
                    continue;
                int64_t cnt = nf * lul_node_count_of(k->b.ex, k->b.ey, k->b.ez, d, ring);
                for (int64_t t = 0; t < cnt; t++)
                    all[plan.off[d] + t] = bl[lin(nc)].out[lul_dir_opposite(d)][t];
            }
            const lul_box_t *b = &k->b;
            int64_t ns = ring ? lul_edge_count(b->ex, b->ey, b->ez) : lul_surface_count(b->ex, b->ey, b->ez);
            for (int64_t t = 0; t < ns; t++)
                lul_unpack_node_all(&fl, b->ex, b->ey, b->ez, &plan, all,
                                    ring ? lul_edge_node(b->ex, b->ey, b->ez, t)
                                         : lul_surface_node(b->ex, b->ey, b->ez, t),
                                    !copy);
            free(all);
        }
    }
    for (int s = 0; s < nb; s++)
        for (int d = 0; d < 27; d++)
            free(bl[s].out[d]);
}

static void check_grid(int64_t n, int gx, int gy, int gz)
{
    n_glob  = n;
    grid[0] = gx;
    grid[1] = gy;
    grid[2] = gz;
    int    nb = gx * gy * gz;
    blk_t *bl = calloc((size_t)nb, sizeof(*bl));
    long   before = failures;
    for (int z = 0; z < gz; z++)
        for (int y = 0; y < gy; y++)
            for (int x = 0; x < gx; x++) {
                int    c[3] = {x, y, z};
                blk_t *k    = &bl[lin(c)];
                k->c[0] = x, k->c[1] = y, k->c[2] = z;
                k->b        = lul_box_of(n, grid, c);
                int64_t nn  = (k->b.ex + 1) * (k->b.ey + 1) * (k->b.ez + 1);
                int64_t ng  = lul_elems_with_ghosts(k->b.ex, k->b.ey, k->b.ez);
                for (int q = 0; q < 2; q++)
                    k->node[q] = malloc(sizeof(double) * nn);
                for (int q = 0; q < 3; q++) {
                    k->elem[q] = malloc(sizeof(double) * ng);
                    for (int64_t e = 0; e < ng; e++)
                        k->elem[q][e] = -1;
                }
            }

    for (int centric = 0; centric < 2; centric++) {
        /* node-sum of (1, global id) */
        for (int s = 0; s < nb; s++) {
            blk_t *k = &bl[s];
            for (int64_t kk = 0, t = 0; kk <= k->b.ez; kk++)
                for (int64_t j = 0; j <= k->b.ey; j++)
                    for (int64_t i = 0; i <= k->b.ex; i++, t++) {
                        k->node[0][t] = 1;
                        k->node[1][t] = gnode(&k->b, i, j, kk);
                    }
        }
        exchange_nodes(bl, nb, 2, 0, centric, 0);
        for (int s = 0; s < nb; s++) {
            blk_t *k = &bl[s];
            for (int64_t kk = 0, t = 0; kk <= k->b.ez; kk++)
                for (int64_t j = 0; j <= k->b.ey; j++)
                    for (int64_t i = 0; i <= k->b.ex; i++, t++) {
                        double m = mult1(k->b.ox + i, gx) * mult1(k->b.oy + j, gy) *
                                   mult1(k->b.oz + kk, gz);
                        if (k->node[0][t] != m)
                            fail("node-sum count", k, t, k->node[0][t], m);
                        if (k->node[1][t] != m * gnode(&k->b, i, j, kk))
                            fail("node-sum id", k, t, k->node[1][t], m * gnode(&k->b, i, j, kk));
                    }
        }

        /* node-copy of (id + 1e7 * block), whole faces and face rings */
        for (int ring = 0; ring < 2; ring++) {
            for (int s = 0; s < nb; s++) {
                blk_t *k = &bl[s];
                for (int64_t kk = 0, t = 0; kk <= k->b.ez; kk++)
                    for (int64_t j = 0; j <= k->b.ey; j++)
                        for (int64_t i = 0; i <= k->b.ex; i++, t++)
                            k->node[0][t] = k->node[1][t] = gnode(&k->b, i, j, kk) + 1e7 * s;
            }
            exchange_nodes(bl, nb, 2, 1, centric, ring);
            for (int s = 0; s < nb; s++) {
                blk_t *k = &bl[s];
                for (int64_t kk = 0, t = 0; kk <= k->b.ez; kk++)
                    for (int64_t j = 0; j <= k->b.ey; j++)
                        for (int64_t i = 0; i <= k->b.ex; i++, t++) {
                            int hc[3] = {last_part(k->b.ox + i, gx), last_part(k->b.oy + j, gy),
                                         last_part(k->b.oz + kk, gz)};
                            int copied = !ring || lul_node_on_edge(k->b.ex, k->b.ey, k->b.ez, i, j, kk);
                            double want = gnode(&k->b, i, j, kk) + 1e7 * (copied ? lin(hc) : s);
                            for (int q = 0; q < 2; q++)
                                if (k->node[q][t] != want)
                                    fail(ring ? "node-copy (rings)" : "node-copy", k, t,
                                         k->node[q][t], want);
                        }
            }
        }
    }

    /* element ghosts of (3 × id + q) */
    for (int s = 0; s < nb; s++) {
        blk_t *k = &bl[s];
        for (int64_t kk = 0, e = 0; kk < k->b.ez; kk++)
            for (int64_t j = 0; j < k->b.ey; j++)
                for (int64_t i = 0; i < k->b.ex; i++, e++)
                    for (int q = 0; q < 3; q++)
                        k->elem[q][e] = 3 * gelem(k->b.ox + i, k->b.oy + j, k->b.oz + kk) + q;
    }
    for (int s = 0; s < nb; s++) {
        blk_t       *k  = &bl[s];
        lul_fields_t fl = {{k->elem[0], k->elem[1], k->elem[2]}, 3, 0};
        for (int f = 0; f < 6; f++) {
            k->out[f] = NULL;
            if (!lul_dir_neighbor(grid, k->c, lul_face_dir(f), NULL))
                continue;
            k->out[f] = malloc(sizeof(double) * 3 * lul_face_count(k->b.ex, k->b.ey, k->b.ez, f));
            lul_xch_pack_elems(NULL, fl, k->b.ex, k->b.ey, k->b.ez, f, k->out[f]);
        }
    }
    for (int r = 0; r < nb; r++) {
        blk_t       *k  = &bl[r];
        lul_fields_t fl = {{k->elem[0], k->elem[1], k->elem[2]}, 3, 0};
        for (int f = 0; f < 6; f++) {
            int nc[3];
            if (lul_dir_neighbor(grid, k->c, lul_face_dir(f), nc))
                lul_xch_unpack_elems(NULL, fl, k->b.ex, k->b.ey, k->b.ez, f,
                                     bl[lin(nc)].out[lul_face_opposite(f)]);
        }
    }
    for (int r = 0; r < nb; r++) {
        blk_t *k = &bl[r];
        for (int f = 0; f < 6; f++) {
            int     has  = lul_dir_neighbor(grid, k->c, lul_face_dir(f), NULL);
            int64_t base = lul_ghost_offset(k->b.ex, k->b.ey, k->b.ez, f);
            int64_t cnt  = lul_face_count(k->b.ex, k->b.ey, k->b.ez, f);
            for (int64_t t = 0; t < cnt; t++) {
                int64_t x, y, z, s = f % 2 ? 1 : -1;
                if (f / 2 == 0) {
                    x = s < 0 ? k->b.ox - 1 : k->b.ox + k->b.ex;
                    y = k->b.oy + t % k->b.ey;
                    z = k->b.oz + t / k->b.ey;
                } else if (f / 2 == 1) {
                    y = s < 0 ? k->b.oy - 1 : k->b.oy + k->b.ey;
                    x = k->b.ox + t % k->b.ex;
                    z = k->b.oz + t / k->b.ex;
                } else {
                    z = s < 0 ? k->b.oz - 1 : k->b.oz + k->b.ez;
                    x = k->b.ox + t % k->b.ex;
                    y = k->b.oy + t / k->b.ex;
                }
                for (int q = 0; q < 3; q++) {
                    double want = has ? 3 * gelem(x, y, z) + q : -1;
                    if (k->elem[q][base + t] != want)
                        fail("ghost", k, base + t, k->elem[q][base + t], want);
                }
            }
        }
        for (int f = 0; f < 6; f++)
            free(k->out[f]);
    }

    for (int s = 0; s < nb; s++) {
        for (int q = 0; q < 2; q++)
            free(bl[s].node[q]);
        for (int q = 0; q < 3; q++)
            free(bl[s].elem[q]);
    }
    free(bl);
    printf("N=%lld grid %dx%dx%d: %s\n", (long long)n, gx, gy, gz,
           failures == before ? "ok" : "WRONG");
}

/* The surface nodes (edges = 0) or the edge nodes (edges = 1) of an ex × ey × ez block: each
 * listed once, and exactly those lul_node_on_surface (lul_node_on_edge) says. */
static void check_nodelist(int64_t ex, int64_t ey, int64_t ez, int edges)
{
    lul_domain_t d = {.ex = ex, .ey = ey, .ez = ez, .numNode = (ex + 1) * (ey + 1) * (ez + 1)};
    const char  *what = edges ? "edges" : "surface";
    char        *seen = calloc((size_t)d.numNode, 1);
    int64_t      ns = edges ? lul_edge_count(ex, ey, ez) : lul_surface_count(ex, ey, ez), want = 0;
    for (int64_t s = 0; s < ns; s++) {
        int64_t n = edges ? lul_edge_node(ex, ey, ez, s) : lul_surface_node(ex, ey, ez, s);
        if (n < 0 || n >= d.numNode || seen[n]++) {
            printf("%s %lldx%lldx%lld: entry %lld is node %lld (out of range or twice)\n", what,
                   (long long)ex, (long long)ey, (long long)ez, (long long)s, (long long)n);
            failures++;
            break;
        }
    }
    for (int64_t n = 0; n < d.numNode; n++) {
        int64_t i, j, k;
        lul_node_ijk(&d, n, &i, &j, &k);
        int on = edges ? lul_node_on_edge(ex, ey, ez, i, j, k) : lul_node_on_surface(&d, i, j, k);
        want += on;
        if (seen[n] != on) {
            printf("%s %lldx%lldx%lld: node (%lld,%lld,%lld) %s\n", what, (long long)ex,
                   (long long)ey, (long long)ez, (long long)i, (long long)j, (long long)k,
                   on ? "missing" : "listed but not on it");
            failures++;
            break;
        }
    }
    if (want != ns) {
        printf("%s %lldx%lldx%lld: %lld listed, %lld on it\n", what, (long long)ex, (long long)ey,
               (long long)ez, (long long)ns, (long long)want);
        failures++;
    }
    free(seen);
}

int main(int argc, char **argv)
{
    for (int64_t ex = 1; ex <= 5; ex++)
        for (int64_t ey = 1; ey <= 5; ey++)
            for (int64_t ez = 1; ez <= 5; ez++)
                for (int edges = 0; edges < 2; edges++)
                    check_nodelist(ex, ey, ez, edges);
    if (argc == 5) {
        check_grid(atoll(argv[1]), atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
    } else {
        static const int cases[][4] = {{4, 1, 1, 1}, {5, 2, 2, 2}, {7, 3, 2, 2}, {10, 3, 2, 1},
                                       {6, 1, 3, 2}, {9, 4, 3, 3}, {3, 3, 3, 3}, {11, 2, 5, 3}};
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            check_grid(cases[i][0], cases[i][1], cases[i][2], cases[i][3]);
    }
    printf("exchange_check: %s\n", failures ? "FAILED" : "all ok");
    return failures ? 1 : 0;
}

/*
 * domain.c — the functions on a MiniMD subdomain that both programs share (see domain.h).
 */
#include "domain.h"

mmd_mem_t mmd_mem;

static void grow(void *stream, void **p, int64_t *cap, int64_t need, int64_t keep, size_t elem,
                 int pinned)
{
    if (need <= *cap)
        return;
    int64_t n = need + need / 4 + 16;
    size_t  b = (size_t)n * elem;
    void   *q = pinned ? mmd_mem.pinned_alloc(b) : mmd_mem.dev_alloc(b);
    if (keep > 0)
        mmd_mem.copy(q, *p, (size_t)keep * elem, stream);
    if (*p) {
        mmd_mem.sync(stream);
        if (pinned)
            mmd_mem.pinned_free(*p);
        else
            mmd_mem.dev_free(*p);
    }
    *p   = q;
    *cap = n;
}

void mmd_grow(void *stream, void **p, int64_t *cap, int64_t need, int64_t keep, size_t elem)
{
    grow(stream, p, cap, need, keep, elem, 0);
}

void mmd_grow_pinned(void *stream, void **p, int64_t *cap, int64_t need, int64_t keep,
                     size_t elem)
{
    grow(stream, p, cap, need, keep, elem, 1);
}

void mmd_grow_atoms(void *stream, mmd_dom_t *c, int64_t need_all, int64_t need_own,
                    int64_t keep)
{
    if (need_own > c->cap_own) {
        int64_t k = c->cap_own;
        mmd_grow(stream, (void **)&c->v, &k, need_own, keep, 3 * sizeof(double));
        k = c->cap_own;
        mmd_grow(stream, (void **)&c->f, &k, need_own, 0, 3 * sizeof(double));
        k = c->cap_own;
        mmd_grow(stream, (void **)&c->eatom, &k, need_own, 0, sizeof(double));
        k = c->cap_own;
        mmd_grow(stream, (void **)&c->watom, &k, need_own, 0, sizeof(double));
        c->cap_own = k;
    }
    mmd_grow(stream, (void **)&c->x, &c->cap_all, need_all, keep, MMD_XW * sizeof(double));
}

double mmd_shift_of(const mmd_dom_t *c, int d, int s)
{
    if (s == 0)
        return c->c[d] == 0 ? c->L[d] : 0.0;
    return c->c[d] == c->grid[d] - 1 ? -c->L[d] : 0.0;
}

void mmd_select_two(void *stream, mmd_dom_t *c, int d, int64_t n, const double a[2],
                    const double b[2], int *list[2], const int64_t cap[2])
{
    for (int k = 0; k < 2; k++)
        mmd_select(stream, c->x, 0, n, d, a[k], b[k], list[k], c->dcount + k, cap[k], c->scratch);
    mmd_mem.copy(c->hcount, c->dcount, 2 * sizeof(int), stream);
}

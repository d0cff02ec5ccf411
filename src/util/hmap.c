/* hmap.c — open-addressing hash map from uint64 keys to pointers, with backward-shift
 * deletion (no tombstones), kept at most half full. */
#include "util.h"

#include <stdlib.h>

static tess_status_t hmap_alloc(tess_hmap_t *m, size_t cap)
{
    m->keys = tess_malloc(cap * sizeof(*m->keys), "hash map keys");
    m->vals = tess_malloc(cap * sizeof(*m->vals), "hash map values");
    if (!m->keys || !m->vals) {
        free(m->keys);
        free(m->vals);
        return TESS_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < cap; i++)
        m->keys[i] = TESS_HMAP_EMPTY;
    m->cap   = cap;
    m->count = 0;
    return TESS_OK;
}

tess_status_t tess_hmap_init(tess_hmap_t *m, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2)
        cap *= 2;
    return hmap_alloc(m, cap);
}

void tess_hmap_fini(tess_hmap_t *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

static void hmap_insert_new(tess_hmap_t *m, uint64_t key, void *val)
{
    size_t mask = m->cap - 1;
    size_t i    = tess_hash64(key) & mask;
    while (m->keys[i] != TESS_HMAP_EMPTY)
        i = (i + 1) & mask;
    m->keys[i] = key;
    m->vals[i] = val;
    m->count++;
}

tess_status_t tess_hmap_put(tess_hmap_t *m, uint64_t key, void *val)
{
    if (key == TESS_HMAP_EMPTY)
        return tess_error(TESS_ERR_INVALID, "hash map key %llu is reserved",
                          (unsigned long long)key);
    size_t mask = m->cap - 1;
    for (size_t i = tess_hash64(key) & mask; m->keys[i] != TESS_HMAP_EMPTY; i = (i + 1) & mask) {
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return TESS_OK;
        }
    }
    if ((m->count + 1) * 2 > m->cap) {
        tess_hmap_t grown;
        tess_status_t st = hmap_alloc(&grown, m->cap * 2);
        if (st != TESS_OK)
            return st;
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i] != TESS_HMAP_EMPTY)
                hmap_insert_new(&grown, m->keys[i], m->vals[i]);
        tess_hmap_fini(m);
        *m = grown;
    }
    hmap_insert_new(m, key, val);
    return TESS_OK;
}

void *tess_hmap_remove(tess_hmap_t *m, uint64_t key)
{
    size_t mask = m->cap - 1;
    size_t i    = tess_hash64(key) & mask;
    while (m->keys[i] != key) {
        if (m->keys[i] == TESS_HMAP_EMPTY)
            return NULL;
        i = (i + 1) & mask;
    }
    void *val = m->vals[i];
    /* Backward shift: move later entries of the probe run into the hole when that keeps them
     * reachable from their home slot. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; m->keys[j] != TESS_HMAP_EMPTY; j = (j + 1) & mask) {
        size_t home = tess_hash64(m->keys[j]) & mask;
        size_t dist_hole = (hole - home) & mask;
        size_t dist_j    = (j - home) & mask;
        if (dist_hole < dist_j) {
            m->keys[hole] = m->keys[j];
            m->vals[hole] = m->vals[j];
            hole          = j;
        }
    }
    m->keys[hole] = TESS_HMAP_EMPTY;
    m->count--;
    return val;
}

bool tess_hmap_next(const tess_hmap_t *m, size_t *it, uint64_t *key_p, void **val_p)
{
    for (size_t i = *it; i < m->cap; i++) {
        if (m->keys[i] != TESS_HMAP_EMPTY) {
            if (key_p)
                *key_p = m->keys[i];
            if (val_p)
                *val_p = m->vals[i];
            *it = i + 1;
            return true;
        }
    }
    *it = m->cap;
    return false;
}

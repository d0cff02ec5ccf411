/*
 * alloc_vendor.c — the registry of the device allocations the runtime made (mem_alloc: every
 * tess_gpu_malloc, the runtime's own buffers), from which the backend answers pointer queries
 * about them without asking the driver.
 *
 * Every device-message send between processes asks, for each buffer, which allocation it lies
 * in (its stable id keys the RDMA registrations and the IPC handles): through the driver that
 * is a call with a lock in it, a microsecond or more a buffer on the sender's thread. The
 * allocations are kept here sorted by address with ids from a counter that never repeats
 * (tagged VND_REG_ID_TAG, so they never equal an id the driver gives memory it is asked about:
 * CUDA's buffer ids); a lookup is a binary search under a read lock. HIP has no stable id of
 * its own to give (its buffer-id attribute is beta), so there the registry is the only source.
 * Other device pointers (IPC mappings, memory the application allocated itself) are not here:
 * the backend asks its runtime about them, as before (alloc_id: CUDA's buffer id; HIP: 0).
 * Memory from tess_gpu_malloc must be freed with tess_gpu_free, which forgets it first.
 *
 * Threads: any; the registry has its own reader-writer lock. Process-wide and kept across
 * fini/init, so ids are never reused.
 */
#include "gpu/vendor/vendor.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct vnd_alloc {
    uintptr_t base;
    size_t    size;
    uint64_t  id;
    int       device;
} vnd_alloc_t;

static struct {
    pthread_rwlock_t lock;
    vnd_alloc_t     *items; /* sorted by base; allocations do not overlap */
    size_t           count, cap;
    uint64_t         last_id;
} vnd_reg = {.lock = PTHREAD_RWLOCK_INITIALIZER};

/* Index of the first entry whose base is above addr (lock held). */
static size_t vnd_reg_upper(uintptr_t addr)
{
    size_t lo = 0, hi = vnd_reg.count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (vnd_reg.items[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

tess_status_t VND_FN(reg_track)(void *ptr, size_t size)
{
    uintptr_t     base = (uintptr_t)ptr;
    tess_status_t st   = TESS_OK;
    pthread_rwlock_wrlock(&vnd_reg.lock);
    if (vnd_reg.count == vnd_reg.cap) {
        size_t       cap   = vnd_reg.cap ? vnd_reg.cap * 2 : 64;
        vnd_alloc_t *items = realloc(vnd_reg.items, cap * sizeof(*items));
        if (!items) {
            st = tess_error(TESS_ERR_NO_MEMORY, "cannot grow the %s allocation registry to %zu "
                            "entries", VND_TITLE, cap);
            goto out_unlock;
        }
        vnd_reg.items = items;
        vnd_reg.cap   = cap;
    }
    size_t i = vnd_reg_upper(base);
    if (i > 0 && base - vnd_reg.items[i - 1].base < vnd_reg.items[i - 1].size) {
        /* An entry that overlaps a new allocation was freed behind the runtime's back (not
         * with tess_gpu_free): it is stale. */
        vnd_reg.items[i - 1] = (vnd_alloc_t){
            .base = base, .size = size, .id = VND_REG_ID_TAG | ++vnd_reg.last_id,
            .device = tess_vnd.device};
        goto out_unlock;
    }
    memmove(&vnd_reg.items[i + 1], &vnd_reg.items[i],
            (vnd_reg.count - i) * sizeof(vnd_reg.items[0]));
    vnd_reg.items[i] = (vnd_alloc_t){
        .base = base, .size = size, .id = VND_REG_ID_TAG | ++vnd_reg.last_id,
        .device = tess_vnd.device};
    vnd_reg.count++;
out_unlock:
    pthread_rwlock_unlock(&vnd_reg.lock);
    return st;
}

void VND_FN(reg_forget)(void *ptr)
{
    uintptr_t base = (uintptr_t)ptr;
    pthread_rwlock_wrlock(&vnd_reg.lock);
    size_t i = vnd_reg_upper(base);
    if (i > 0 && vnd_reg.items[i - 1].base == base) {
        memmove(&vnd_reg.items[i - 1], &vnd_reg.items[i],
                (vnd_reg.count - i) * sizeof(vnd_reg.items[0]));
        vnd_reg.count--;
    }
    pthread_rwlock_unlock(&vnd_reg.lock);
}

bool VND_FN(reg_find)(const void *ptr, tess_gpu_ptr_info_t *info_p)
{
    uintptr_t addr  = (uintptr_t)ptr;
    bool      found = false;
    pthread_rwlock_rdlock(&vnd_reg.lock);
    size_t i = vnd_reg_upper(addr);
    if (i > 0 && addr - vnd_reg.items[i - 1].base < vnd_reg.items[i - 1].size) {
        const vnd_alloc_t *a = &vnd_reg.items[i - 1];
        info_p->is_device    = 1;
        info_p->device       = a->device;
        info_p->base         = (void *)a->base;
        info_p->size         = a->size;
        info_p->alloc_id     = a->id;
        found                = true;
    }
    pthread_rwlock_unlock(&vnd_reg.lock);
    return found;
}

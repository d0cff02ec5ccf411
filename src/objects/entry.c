/* entry.c — the entry-method registry. Registration is collective: every rank must register
 * the same entries in the same order, which is checked entry by entry against rank 0. */
#include "objects.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

tess_entry_info_t *tess_obj_entries;
int                tess_obj_nentries;
static int         entries_cap;

const char *tess_entry_name(tess_entry_t entry)
{
    return entry >= 0 && entry < tess_obj_nentries ? tess_obj_entries[entry].name : "?";
}

/* Compare registration #id (a name and a detail, such as a flag or a size) with rank 0's; on a
 * mismatch every rank learns the first rank that differs and what it registered. `describe`
 * writes the detail (may write nothing); `call`, `thing` and `things` name them in the message. */
typedef struct reg_wire {
    char    name[64];
    int64_t detail;
} reg_wire_t;

tess_status_t tess_obj_registration_check(const char *call, const char *thing,
                                          const char *things, int id, const char *name,
                                          int64_t detail,
                                          void (*describe)(int64_t detail, char *buf,
                                                           size_t size))
{
    reg_wire_t me, root;
    memset(&me, 0, sizeof(me));
    snprintf(me.name, sizeof(me.name), "%s", name);
    me.detail = detail;
    root      = me;
    MPI_Bcast(&root, sizeof(root), MPI_BYTE, 0, tess_rt.comm);
    int differs = strcmp(root.name, me.name) != 0 || root.detail != me.detail;
    int first   = differs ? tess_rt.rank : INT_MAX;
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, tess_rt.comm);
    if (first == INT_MAX)
        return TESS_OK;
    reg_wire_t other = me;
    MPI_Bcast(&other, sizeof(other), MPI_BYTE, first, tess_rt.comm);
    char d0[48], d1[48];
    describe(root.detail, d0, sizeof(d0));
    describe(other.detail, d1, sizeof(d1));
    return tess_error(TESS_ERR_MISMATCH, "%s: %s #%d is '%s'%s on rank 0 but '%s'%s on rank %d "
                      "(every rank must register the same %s in the same order)", call, thing, id,
                      root.name, d0, other.name, d1, first, things);
}

static void entry_describe(int64_t device, char *buf, size_t size)
{
    snprintf(buf, size, "%s", device ? " (device)" : "");
}

tess_status_t tess_obj_entry_add(const char *name, tess_entry_fn_t fn, tess_dev_post_fn_t post,
                                 unsigned flags, tess_entry_t *entry_p)
{
    tess_status_t st = tess_obj_check_main(post ? "tess_entry_register_device"
                                                : "tess_entry_register");
    if (st != TESS_OK)
        return st;
    if (!name || !fn || !entry_p)
        return tess_error(TESS_ERR_INVALID, "tess_entry_register: name, fn and entry_p are "
                          "required");
    if (strlen(name) >= sizeof(tess_obj_entries[0].name))
        return tess_error(TESS_ERR_INVALID, "tess_entry_register: name '%s' is longer than %zu "
                          "characters", name, sizeof(tess_obj_entries[0].name) - 1);
    if (tess_obj_nentries == entries_cap) {
        int                cap = entries_cap ? entries_cap * 2 : 32;
        tess_entry_info_t *e   = realloc(tess_obj_entries, (size_t)cap * sizeof(*e));
        if (!e)
            return tess_error(TESS_ERR_NO_MEMORY, "cannot grow the entry registry");
        tess_obj_entries = e;
        entries_cap      = cap;
    }
    tess_entry_info_t info = {.fn = fn, .post = post, .flags = flags};
    strcpy(info.name, name);
    tess_core_collective_enter(TESS_COLL_ENTRY_REGISTER);
    st = tess_obj_registration_check("tess_entry_register", "entry", "entries",
                                     tess_obj_nentries, info.name, post != NULL, entry_describe);
    if (st != TESS_OK)
        return st;
    tess_obj_entries[tess_obj_nentries] = info;
    *entry_p = tess_obj_nentries++;
    return TESS_OK;
}

tess_status_t tess_entry_register(const char *name, tess_entry_fn_t fn, tess_entry_t *entry_p)
{
    return tess_obj_entry_add(name, fn, NULL, 0, entry_p);
}

tess_status_t tess_entry_register_device(const char *name, tess_dev_post_fn_t post,
                                         tess_entry_fn_t fn, unsigned flags,
                                         tess_entry_t *entry_p)
{
    if (!post)
        return tess_error(TESS_ERR_INVALID, "tess_entry_register_device '%s': a post function "
                          "is required", name ? name : "?");
    if (flags & ~(unsigned)(TESS_ENTRY_WAIT_COMPLETE | TESS_ENTRY_BATCH |
                            TESS_ENTRY_SENDER_ORDERED | TESS_ENTRY_IN_PLACE))
        return tess_error(TESS_ERR_INVALID, "tess_entry_register_device '%s': unknown flags "
                          "0x%x", name ? name : "?", flags);
    if ((flags & TESS_ENTRY_SENDER_ORDERED) && !(flags & TESS_ENTRY_BATCH))
        return tess_error(TESS_ERR_INVALID, "tess_entry_register_device '%s': "
                          "TESS_ENTRY_SENDER_ORDERED applies to batched deliveries: add "
                          "TESS_ENTRY_BATCH", name ? name : "?");
    return tess_obj_entry_add(name, fn, post, flags, entry_p);
}

void tess_obj_entries_fini(void)
{
    free(tess_obj_entries);
    tess_obj_entries  = NULL;
    tess_obj_nentries = 0;
    entries_cap       = 0;
}

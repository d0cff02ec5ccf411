/* checkpoint.c — durable checkpoints of chare arrays (every element's state bytes, PUP bytes and
 * device buffers, the arrays' metadata, the program's own bytes) and restart from one on any
 * number of processes and PEs: the API, its arguments, the agreement of every process on each
 * step, the checkpoint directories and the current pointer, and the checks of a checkpoint
 * against the program restarting from it. The format is ckpt_format.c's (ckpt.h shows the
 * layout), the data files' writer ckpt_io.c's (from a background snapshot: ckpt_bg.c), their
 * reader ckpt_read.c's. */
#define _GNU_SOURCE
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- collective agreement --------------------------------------------------------------- */

/* Every process returns the first failing process's status and text, or TESS_OK. */
static tess_status_t ckpt_agree(tess_status_t st)
{
    int me = st != TESS_OK ? tess_rt.rank : INT_MAX, first = INT_MAX;
    MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, tess_rt.comm);
    if (first == INT_MAX)
        return TESS_OK;
    struct {
        int32_t st;
        char    text[CKPT_TEXT];
    } w;
    memset(&w, 0, sizeof(w));
    if (tess_rt.rank == first) {
        w.st = st;
        tess_ckpt_detail_copy(st, w.text, sizeof(w.text));
    }
    MPI_Bcast(&w, sizeof(w), MPI_BYTE, first, tess_rt.comm);
    if (tess_rt.rank == first)
        return st;
    return tess_error((tess_status_t)w.st, "process %d: %s", first, w.text);
}

/* TESS_ERR_MISMATCH unless every process passed the same `h`. */
static tess_status_t ckpt_same(uint64_t h, const char *what)
{
    uint64_t v[2] = {h, ~h}, r[2];
    MPI_Allreduce(v, r, 2, MPI_UINT64_T, MPI_MAX, tess_rt.comm);
    if (r[0] != h || r[1] != ~h)
        return tess_error(TESS_ERR_MISMATCH, "%s: the processes passed different arguments "
                          "(directory, program, step or arrays)", what);
    return TESS_OK;
}

/* ---- the arrays ------------------------------------------------------------------------- */

static tess_status_t ckpt_params(const tess_ckpt_params_t *p, ckpt_set_t *set, const char *what)
{
    if (!p || !p->dir || !p->dir[0])
        return tess_error(TESS_ERR_INVALID, "%s: %s", what, p ? "dir is NULL or empty" :
                          "params is NULL");
    if (strlen(p->dir) > CKPT_PATH - 64)
        return tess_error(TESS_ERR_INVALID, "%s: the directory name is too long", what);
    if ((p->field_mask & TESS_CKPT_FIELD_PROGRAM) && p->program && strlen(p->program) >= 64)
        return tess_error(TESS_ERR_INVALID, "%s: program name '%s' is 64 bytes or more", what,
                          p->program);
    set->n = 0;
    if (p->field_mask & TESS_CKPT_FIELD_ARRAYS) {
        if (p->narrays < 1 || !p->arrays)
            return tess_error(TESS_ERR_INVALID, "%s: %d arrays at %p", what, p->narrays,
                              (const void *)p->arrays);
        for (int i = 0; i < p->narrays; i++) {
            tess_array_t *a = p->arrays[i];
            if (!a || a->destroyed)
                return tess_error(TESS_ERR_INVALID, "%s: arrays[%d] is %s", what, i,
                                  a ? "destroyed" : "NULL");
            for (int j = 0; j < set->n; j++)
                if (set->a[j] == a)
                    return tess_error(TESS_ERR_INVALID, "%s: array '%s' is named twice", what,
                                      a->name);
            set->a[set->n++] = a;
        }
    } else {
        for (uint32_t i = 0; i < tess_obj_narrays; i++)
            if (!tess_obj_arrays[i]->destroyed)
                set->a[set->n++] = tess_obj_arrays[i];
    }
    return TESS_OK;
}

static const char *ckpt_program(const tess_ckpt_params_t *p)
{
    return (p->field_mask & TESS_CKPT_FIELD_PROGRAM) && p->program ? p->program : "";
}

static uint64_t ckpt_params_hash(const tess_ckpt_params_t *p, const ckpt_set_t *set)
{
    uint64_t h = tess_ckpt_fnv1a(0xcbf29ce484222325ull, p->dir, strlen(p->dir));
    h          = tess_ckpt_fnv1a(h, ckpt_program(p), strlen(ckpt_program(p)) + 1);
    uint64_t s = (p->field_mask & TESS_CKPT_FIELD_STEP) ? p->step + 1 : 0;
    h          = tess_ckpt_fnv1a(h, &s, sizeof(s));
    for (int i = 0; i < set->n; i++)
        h = tess_ckpt_fnv1a(h, &set->a[i]->id, sizeof(set->a[i]->id));
    return h;
}

/* ---- writing ---------------------------------------------------------------------------- */

/* Process 0, before anything is written: the directory, the step, a clean D/ckpt.N.tmp. */
static tess_status_t prepare_dir(const tess_ckpt_params_t *p, uint64_t *step_p, uint64_t *cur_p)
{
    if (mkdir(p->dir, 0755) && errno != EEXIST)
        return tess_ckpt_sys_error("cannot create the checkpoint directory", p->dir);
    uint64_t cur  = tess_ckpt_read_current(p->dir);
    uint64_t step = (p->field_mask & TESS_CKPT_FIELD_STEP) ? p->step : cur + 1;
    if (step == cur && cur)
        return tess_error(TESS_ERR_INVALID, "tess_checkpoint: checkpoint %llu is the current "
                          "one of %s: a new checkpoint needs another step",
                          (unsigned long long)step, p->dir);
    char path[CKPT_PATH];
    tess_ckpt_pathf(path, "%s/ckpt.%llu.tmp", p->dir, (unsigned long long)step);
    tess_ckpt_remove_dir(path); /* left by a job killed while writing it */
    if (mkdir(path, 0755))
        return tess_ckpt_sys_error("cannot create", path);
    *step_p = step;
    *cur_p  = cur;
    return TESS_OK;
}

/* Process 0, once the manifest is in: make N complete, then current; drop those before the
 * previous one. */
static tess_status_t publish(const char *dir, uint64_t step, uint64_t prev)
{
    char tmp[CKPT_PATH], dst[CKPT_PATH], cur[64];
    tess_ckpt_pathf(tmp, "%s/ckpt.%llu.tmp", dir, (unsigned long long)step);
    tess_ckpt_pathf(dst, "%s/ckpt.%llu", dir, (unsigned long long)step);
    tess_ckpt_remove_dir(dst); /* an older checkpoint of the same number, not current */
    if (rename(tmp, dst))
        return tess_ckpt_sys_error("cannot rename to", dst);
    tess_status_t st = tess_ckpt_sync_path(dir);
    if (st != TESS_OK)
        return st;
    int n = snprintf(cur, sizeof(cur), "ckpt.%llu\n", (unsigned long long)step);
    st    = tess_ckpt_write_file_atomic(dir, "current", cur, (size_t)n);
    if (st != TESS_OK)
        return st;
    DIR *d = opendir(dir);
    if (!d)
        return TESS_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        unsigned long long k;
        int                end = 0;
        if (sscanf(de->d_name, "ckpt.%llu%n", &k, &end) != 1 || de->d_name[end] ||
            k == step || k == prev)
            continue;
        tess_ckpt_pathf(dst, "%s/%s", dir, de->d_name);
        tess_ckpt_remove_dir(dst);
    }
    closedir(d);
    return TESS_OK;
}

/* Every process's index and file size to process 0, which writes the manifest and makes the
 * checkpoint current; every process has written and synced its data file (st is its own
 * outcome). Collective; the first failure everywhere. */
static tess_status_t finish(tess_status_t st, recvec_t *rv, uint64_t fsize, const char *dir,
                            uint64_t step, uint64_t prev, const man_array_t *arrays, int narrays,
                            const char *program, const void *user, size_t user_size)
{
    st = ckpt_agree(st);
    if (st != TESS_OK)
        return st;
    int       mine  = (int)(rv->n * sizeof(man_rec_t)), *counts = NULL, *displs = NULL;
    uint64_t *files = NULL;
    char     *all   = NULL;
    size_t    total = 0;
    if (tess_rt.rank == 0) {
        counts = tess_calloc((size_t)tess_rt.size, sizeof(int), "checkpoint counts");
        displs = tess_calloc((size_t)tess_rt.size, sizeof(int), "checkpoint offsets");
        files  = tess_calloc((size_t)tess_rt.size, sizeof(uint64_t), "checkpoint file sizes");
        if (!counts || !displs || !files)
            tess_fatal("out of memory gathering a checkpoint's index");
    }
    MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, tess_rt.comm);
    MPI_Gather(&fsize, 1, MPI_UINT64_T, files, 1, MPI_UINT64_T, 0, tess_rt.comm);
    if (tess_rt.rank == 0) {
        for (int r = 0; r < tess_rt.size; r++) {
            displs[r] = (int)total;
            total += (size_t)counts[r];
        }
        if (total > INT_MAX)
            tess_fatal("a checkpoint index of %zu bytes is too large to gather", total);
        all = tess_malloc(total ? total : 1, "a checkpoint's index");
        if (!all)
            tess_fatal("out of memory gathering a checkpoint's index");
    }
    MPI_Gatherv(rv->v, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, tess_rt.comm);
    if (tess_rt.rank == 0) {
        char tmpdir[CKPT_PATH];
        tess_ckpt_pathf(tmpdir, "%s/ckpt.%llu.tmp", dir, (unsigned long long)step);
        st = tess_ckpt_manifest_write(tmpdir, arrays, narrays, step, program, user, user_size,
                                      (man_rec_t *)all, total / sizeof(man_rec_t), files);
        if (st == TESS_OK)
            st = publish(dir, step, prev);
    }
    free(counts);
    free(displs);
    free(files);
    free(all);
    return ckpt_agree(st);
}

/* The background checkpoint taken and not yet current: what its completion needs (the same on
 * every process, as every process took it). */
static struct pending {
    int          active;
    char         dir[CKPT_PATH];
    char         program[64];
    uint64_t     step, prev, t0;
    man_array_t  arrays[TESS_OBJ_MAX_ARRAYS];
    int          narrays;
    void        *user; /* process 0's copy */
    size_t       user_size;
} pending;

/* Wait for this process's background write, agree that every process's is written, write the
 * manifest and make the checkpoint current. Collective; nothing when none is pending (the same
 * on every process). */
static tess_status_t complete_pending(void)
{
    if (!pending.active)
        return TESS_OK;
    pending.active   = 0;
    recvec_t      rv = {0};
    uint64_t      fsize;
    tess_status_t st = tess_ckpt_bg_join(&rv, &fsize);
    st = finish(st, &rv, fsize, pending.dir, pending.step, pending.prev, pending.arrays,
                pending.narrays, pending.program, pending.user, pending.user_size);
    free(rv.v);
    free(pending.user);
    pending.user = NULL;
    if (st == TESS_OK)
        tess_debug("checkpoint %llu of %s written in the background, current %.3f s after it "
                   "was taken", (unsigned long long)pending.step, pending.dir,
                   (double)(tess_time_ns() - pending.t0) * 1e-9);
    return st;
}

static int ckpt_background(const tess_ckpt_params_t *p)
{
    return (p->field_mask & TESS_CKPT_FIELD_BACKGROUND) ? p->background != 0
                                                       : tess_cfg.ckpt_background;
}

tess_status_t tess_checkpoint(const tess_ckpt_params_t *p)
{
    tess_status_t st = tess_obj_check_main("tess_checkpoint");
    if (st != TESS_OK)
        return st;
    st = complete_pending(); /* the previous one's error, and no new checkpoint */
    if (st != TESS_OK)
        return st;
    uint64_t    t0  = tess_time_ns();
    ckpt_set_t *set = tess_malloc(sizeof(*set), "a checkpoint's arrays");
    if (!set)
        return TESS_ERR_NO_MEMORY;
    st = ckpt_params(p, set, "tess_checkpoint");
    if (st == TESS_OK && (p->field_mask & TESS_CKPT_FIELD_USER) && p->user_size &&
        (!p->user || p->user_size > CKPT_USER_MAX))
        st = tess_error(TESS_ERR_INVALID, "tess_checkpoint: %zu user bytes at %p (at most "
                        "%zu, not NULL)", p->user_size, p->user, CKPT_USER_MAX);
    st = ckpt_agree(st);
    if (st == TESS_OK)
        st = ckpt_same(ckpt_params_hash(p, set) ^ (uint64_t)ckpt_background(p),
                       "tess_checkpoint");
    if (st != TESS_OK)
        goto out;

    uint64_t sc[2] = {0, 0}; /* step, previous */
    st = tess_rt.rank == 0 ? prepare_dir(p, &sc[0], &sc[1]) : TESS_OK;
    st = ckpt_agree(st);
    if (st != TESS_OK)
        goto out;
    MPI_Bcast(sc, 2, MPI_UINT64_T, 0, tess_rt.comm);
    char tmpdir[CKPT_PATH];
    tess_ckpt_pathf(tmpdir, "%s/ckpt.%llu.tmp", p->dir, (unsigned long long)sc[0]);
    size_t user_size = (p->field_mask & TESS_CKPT_FIELD_USER) ? p->user_size : 0;
    man_array_t *arrays = pending.arrays;
    tess_ckpt_arrays_describe(set, arrays);

    if (ckpt_background(p)) {
        int sync = 0;
        st       = tess_ckpt_snapshot(tmpdir, set, &sync);
        int any  = sync;
        MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, tess_rt.comm);
        if (tess_rt.rank == 0 && st == TESS_OK && user_size) {
            pending.user = tess_malloc(user_size, "a checkpoint's user bytes");
            if (!pending.user)
                st = TESS_ERR_NO_MEMORY;
            else
                memcpy(pending.user, p->user, user_size);
        }
        st = ckpt_agree(st);
        if (st != TESS_OK) {
            tess_ckpt_bg_drop(); /* a snapshot taken here */
            free(pending.user);
            pending.user = NULL;
            goto out;
        }
        if (!sync) {
            tess_ckpt_bg_start();
            tess_ckpt_pathf(pending.dir, "%s", p->dir);
            snprintf(pending.program, sizeof(pending.program), "%s", ckpt_program(p));
            pending.step      = sc[0];
            pending.prev      = sc[1];
            pending.t0        = t0;
            pending.narrays   = set->n;
            pending.user_size = user_size;
            pending.active    = 1;
            if (!any) {
                tess_debug("checkpoint %llu of %s taken in %.3f s, written in the background",
                           (unsigned long long)sc[0], p->dir,
                           (double)(tess_time_ns() - t0) * 1e-9);
                goto out;
            }
            /* Another process writes before returning: so do all, for the same outcome. */
            st = complete_pending();
            goto out;
        }
        free(pending.user);
        pending.user = NULL;
        /* No snapshot memory here: write as without the background (others wait for theirs). */
        recvec_t rv    = {0};
        uint64_t fsize = 0;
        st = tess_ckpt_write_data(tmpdir, set, &rv, &fsize);
        st = finish(st, &rv, fsize, p->dir, sc[0], sc[1], arrays, set->n, ckpt_program(p),
                    p->user, user_size);
        free(rv.v);
        if (st == TESS_OK)
            tess_debug("checkpoint %llu of %s written before returning (no snapshot memory) in "
                       "%.3f s", (unsigned long long)sc[0], p->dir,
                       (double)(tess_time_ns() - t0) * 1e-9);
        goto out;
    }

    recvec_t rv    = {0};
    uint64_t fsize = 0;
    st = tess_ckpt_write_data(tmpdir, set, &rv, &fsize);
    st = finish(st, &rv, fsize, p->dir, sc[0], sc[1], arrays, set->n, ckpt_program(p), p->user,
                user_size);
    free(rv.v);
    if (st == TESS_OK)
        tess_debug("checkpoint %llu of %s written in %.3f s", (unsigned long long)sc[0], p->dir,
                   (double)(tess_time_ns() - t0) * 1e-9);
out:
    free(set);
    return st;
}

tess_status_t tess_checkpoint_wait(void)
{
    tess_status_t st = tess_obj_check_main("tess_checkpoint_wait");
    if (st != TESS_OK)
        return st;
    return complete_pending();
}

tess_status_t tess_obj_ckpt_fini(void)
{
    tess_status_t st = complete_pending();
    tess_ckpt_bg_free();
    return st;
}

/* ---- reading ---------------------------------------------------------------------------- */

/* Collective: read on process 0, broadcast, parse and check the program everywhere. */
static tess_status_t manifest_load(const char *dir, const char *program, manifest_t *m,
                                   const char *what)
{
    memset(m, 0, sizeof(*m));
    tess_status_t st = TESS_OK;
    if (!dir || !dir[0])
        st = tess_error(TESS_ERR_INVALID, "%s: dir is NULL or empty", what);
    else if (strlen(dir) > CKPT_PATH - 64)
        st = tess_error(TESS_ERR_INVALID, "%s: the directory name is too long", what);
    else if (tess_rt.rank == 0)
        st = tess_ckpt_manifest_read(dir, m);
    st = ckpt_agree(st);
    if (st != TESS_OK) {
        tess_ckpt_manifest_free(m);
        return st;
    }
    uint64_t size = m->body_size;
    MPI_Bcast(&size, 1, MPI_UINT64_T, 0, tess_rt.comm);
    MPI_Bcast(m->path, sizeof(m->path), MPI_CHAR, 0, tess_rt.comm);
    if (tess_rt.rank != 0) {
        m->body_size = size;
        m->body      = tess_malloc(size, "a checkpoint manifest");
        if (!m->body)
            tess_fatal("out of memory for a checkpoint manifest of %llu bytes",
                       (unsigned long long)size);
    }
    for (uint64_t off = 0; off < size; off += (uint64_t)1 << 30) {
        uint64_t n = TESS_MIN(size - off, (uint64_t)1 << 30);
        MPI_Bcast(m->body + off, (int)n, MPI_BYTE, 0, tess_rt.comm);
    }
    st = tess_ckpt_manifest_parse(m);
    if (st == TESS_OK && program &&
        strncmp(program, m->hdr->program, sizeof(m->hdr->program)))
        st = tess_error(TESS_ERR_MISMATCH, "%s was written by program '%.64s', not '%s'", m->path,
                        m->hdr->program, program);
    if (st != TESS_OK)
        tess_ckpt_manifest_free(m); /* the same on every process: all parsed the same bytes */
    return st;
}

tess_status_t tess_checkpoint_info(const char *dir, const char *program, void *user,
                                   size_t user_cap, tess_ckpt_info_t *info_p)
{
    tess_status_t st = tess_obj_check_main("tess_checkpoint_info");
    if (st != TESS_OK)
        return st;
    /* A background checkpoint of dir: made current if every process has written its file. */
    uint64_t pend = 0;
    if (pending.active && dir && !strcmp(dir, pending.dir)) {
        int done = tess_ckpt_bg_done();
        MPI_Allreduce(MPI_IN_PLACE, &done, 1, MPI_INT, MPI_MIN, tess_rt.comm);
        if (done) {
            st = complete_pending();
            if (st != TESS_OK)
                return st;
        } else
            pend = pending.step;
    }
    manifest_t m;
    st = manifest_load(dir, program, &m, "tess_checkpoint_info");
    if (st != TESS_OK)
        return st;
    if (info_p) {
        memset(info_p, 0, sizeof(*info_p));
        info_p->step      = m.hdr->step;
        info_p->processes = (int)m.hdr->nprocs;
        info_p->ppn       = (int)m.hdr->ppn;
        info_p->narrays   = (int)m.hdr->narrays;
        info_p->user_size = m.hdr->user_size;
        info_p->pending   = pend;
        tess_ckpt_pathf(info_p->path, "%s", m.path);
    }
    size_t n = TESS_MIN(user_cap, (size_t)m.hdr->user_size);
    if (n && user)
        memcpy(user, m.user, n);
    if (user && m.hdr->user_size > user_cap)
        st = tess_error(TESS_ERR_TRUNCATED, "tess_checkpoint_info: %s holds %llu user bytes, "
                        "the buffer %zu", m.path, (unsigned long long)m.hdr->user_size, user_cap);
    tess_ckpt_manifest_free(&m);
    return st;
}

/* The arrays of the restart against the checkpoint's. */
static tess_status_t check_arrays(const manifest_t *m, const ckpt_set_t *set)
{
    if ((uint32_t)set->n != m->hdr->narrays)
        return tess_error(TESS_ERR_MISMATCH, "%s holds %u arrays; the restart names %d", m->path,
                          m->hdr->narrays, set->n);
    for (int i = 0; i < set->n; i++) {
        const man_array_t *x = &m->arrays[i];
        const tess_array_t *a = set->a[i];
        if (strncmp(x->name, a->name, sizeof(x->name)))
            return tess_error(TESS_ERR_MISMATCH, "%s: array %d is '%.*s' there, '%s' here",
                              m->path, i, TESS_OBJ_NAME_LEN, x->name, a->name);
        if (x->ndims != a->ndims || memcmp(x->ext, a->ext, sizeof(x->ext)))
            return tess_error(TESS_ERR_MISMATCH, "%s: array '%s' is %d x %d x %d there, %d x %d "
                              "x %d here", m->path, a->name, x->ext[0], x->ext[1], x->ext[2],
                              a->ext[0], a->ext[1], a->ext[2]);
        if (x->elem_size != a->elem_size)
            return tess_error(TESS_ERR_MISMATCH, "%s: elements of array '%s' are %llu bytes "
                              "there, %zu here", m->path, a->name,
                              (unsigned long long)x->elem_size, a->elem_size);
        if (!x->has_pup != !a->pup)
            return tess_error(TESS_ERR_MISMATCH, "%s: array '%s' %s a PUP function there but "
                              "%s here", m->path, a->name, x->has_pup ? "had" : "had no",
                              a->pup ? "has one" : "none");
    }
    return TESS_OK;
}

tess_status_t tess_restart(const tess_ckpt_params_t *p)
{
    tess_status_t st = tess_obj_check_main("tess_restart");
    if (st != TESS_OK)
        return st;
    st = complete_pending(); /* its error, and no restart */
    if (st != TESS_OK)
        return st;
    ckpt_set_t *set = tess_malloc(sizeof(*set), "a checkpoint's arrays");
    if (!set)
        return TESS_ERR_NO_MEMORY;
    st = ckpt_agree(ckpt_params(p, set, "tess_restart"));
    if (st == TESS_OK)
        st = ckpt_same(ckpt_params_hash(p, set), "tess_restart");
    if (st != TESS_OK) {
        free(set);
        return st;
    }
    manifest_t m;
    st = manifest_load(p->dir, ckpt_program(p), &m, "tess_restart");
    if (st != TESS_OK) {
        free(set);
        return st;
    }
    /* The same answers everywhere: every process parsed the same bytes. */
    if (m.hdr->entries_hash != tess_ckpt_entries_hash() ||
        m.hdr->nentries != (uint32_t)tess_obj_nentries)
        st = tess_error(TESS_ERR_MISMATCH, "%s was written with another set of entry methods "
                        "(%u entries then, %d registered now, or other names or order)", m.path,
                        m.hdr->nentries, tess_obj_nentries);
    else
        st = check_arrays(&m, set);

    /* Read and check every record this process needs before any element changes. */
    loaded_t *ld  = NULL;
    size_t    nld = 0;
    if (st == TESS_OK)
        st = tess_ckpt_read_records(&m, set, &ld, &nld);
    st = ckpt_agree(st);
    if (st == TESS_OK) {
        for (size_t i = 0; i < nld; i++)
            tess_ckpt_apply_record(&ld[i]);
        tess_dc_streams_dirty(); /* the restored buffers were written on element streams */
        tess_debug("restarted %zu elements from %s", nld, m.path);
    }
    for (size_t i = 0; i < nld; i++)
        tess_ckpt_loaded_free(&ld[i]); /* only the head left after tess_ckpt_apply_record */
    free(ld);
    tess_ckpt_manifest_free(&m);
    free(set);
    return st;
}

/* ---- checkpoints from a reduction callback (tess_cb_checkpoint) ------------------------- */

/* The parameters given by tess_checkpoint_callback_params (main only). */
static struct cbparams {
    int           armed;
    uint64_t      field_mask;
    char          dir[CKPT_PATH];
    char          program[64];
    int           narrays, background;
    tess_array_h  arrays[TESS_OBJ_MAX_ARRAYS];
    void         *user;
    size_t        user_size;
} cbp;

/* A result held for `then` (written by the PE that completed the reduction, read by the main
 * thread after the phase: tess_core_run's end orders them). */
static struct held {
    int          active, kind;
    uint32_t     aid;
    int64_t      linear;
    tess_entry_t entry;
    uint64_t     tag;
    void        *data;
    size_t       size;
} held;
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;

tess_status_t tess_checkpoint_callback_params(const tess_ckpt_params_t *p)
{
    tess_status_t st = tess_obj_check_main("tess_checkpoint_callback_params");
    if (st != TESS_OK)
        return st;
    free(cbp.user);
    memset(&cbp, 0, sizeof(cbp));
    if (!p)
        return TESS_OK;
    ckpt_set_t set;
    st = ckpt_params(p, &set, "tess_checkpoint_callback_params");
    if (st == TESS_OK && (p->field_mask & TESS_CKPT_FIELD_USER) && p->user_size &&
        (!p->user || p->user_size > CKPT_USER_MAX))
        st = tess_error(TESS_ERR_INVALID, "tess_checkpoint_callback_params: %zu user bytes at %p "
                        "(at most %zu, not NULL)", p->user_size, p->user, CKPT_USER_MAX);
    if (st == TESS_OK && (p->field_mask & TESS_CKPT_FIELD_USER) && p->user_size) {
        cbp.user = tess_malloc(p->user_size, "a checkpoint's user bytes");
        if (!cbp.user)
            st = TESS_ERR_NO_MEMORY;
        else {
            memcpy(cbp.user, p->user, p->user_size);
            cbp.user_size = p->user_size;
        }
    }
    if (st != TESS_OK) {
        free(cbp.user);
        memset(&cbp, 0, sizeof(cbp));
        return st;
    }
    cbp.field_mask = p->field_mask & ~(uint64_t)TESS_CKPT_FIELD_STEP;
    tess_ckpt_pathf(cbp.dir, "%s", p->dir);
    snprintf(cbp.program, sizeof(cbp.program), "%s", ckpt_program(p));
    cbp.background = ckpt_background(p);
    if (p->field_mask & TESS_CKPT_FIELD_ARRAYS) {
        cbp.narrays = set.n;
        memcpy(cbp.arrays, set.a, (size_t)set.n * sizeof(set.a[0]));
    }
    cbp.armed = 1;
    return TESS_OK;
}

void tess_obj_ckpt_cb_hold(int kind, uint32_t aid, int64_t linear, tess_entry_t entry,
                           uint64_t tag, const void *data, size_t size)
{
    void *copy = malloc(size ? size : 1);
    if (!copy)
        tess_fatal("out of memory holding a reduction's result for a checkpoint");
    memcpy(copy, data, size);
    pthread_mutex_lock(&held_lock);
    if (held.active)
        tess_fatal("tess_cb_checkpoint: reduction %llu completed while the result of reduction "
                   "%llu still waits for its checkpoint (one at a time)",
                   (unsigned long long)tag, (unsigned long long)held.tag);
    held = (struct held){.active = 1, .kind = kind, .aid = aid, .linear = linear,
                         .entry = entry, .tag = tag, .data = copy, .size = size};
    pthread_mutex_unlock(&held_lock);
}

int tess_obj_ckpt_cb_due(void)
{
    if (!cbp.armed) {
        if (held.active)
            tess_fatal("a tess_cb_checkpoint reduction completed, but no "
                       "tess_checkpoint_callback_params were given");
        return 0;
    }
    int due = held.active;
    MPI_Allreduce(MPI_IN_PLACE, &due, 1, MPI_INT, MPI_MAX, tess_rt.comm);
    return due;
}

tess_status_t tess_obj_ckpt_cb_checkpoint(void)
{
    /* The tag and, without user bytes of the program's, the result: from the process that
     * holds it to every process. */
    int      who = held.active ? tess_rt.rank : INT_MAX;
    MPI_Allreduce(MPI_IN_PLACE, &who, 1, MPI_INT, MPI_MIN, tess_rt.comm);
    uint64_t ts[2] = {held.tag, held.size};
    MPI_Bcast(ts, 2, MPI_UINT64_T, who, tess_rt.comm);
    tess_ckpt_params_t p = {.field_mask = cbp.field_mask | TESS_CKPT_FIELD_STEP |
                                          TESS_CKPT_FIELD_BACKGROUND | TESS_CKPT_FIELD_USER,
                            .dir = cbp.dir, .program = cbp.program, .narrays = cbp.narrays,
                            .arrays = cbp.arrays, .step = ts[0],
                            .background = cbp.background};
    void *result = NULL;
    if (cbp.field_mask & TESS_CKPT_FIELD_USER) {
        p.user      = cbp.user;
        p.user_size = cbp.user_size;
    } else if (ts[1] && ts[1] <= CKPT_USER_MAX) {
        result = tess_malloc(ts[1], "a reduction's result");
        if (!result)
            tess_fatal("out of memory for a reduction's result of %llu bytes",
                       (unsigned long long)ts[1]);
        if (held.active)
            memcpy(result, held.data, ts[1]);
        MPI_Bcast(result, (int)ts[1], MPI_BYTE, who, tess_rt.comm);
        p.user      = result;
        p.user_size = ts[1];
    }
    tess_status_t st = tess_checkpoint(&p);
    free(result);
    if (st != TESS_OK) { /* the phase ends here: the result is dropped */
        free(held.data);
        memset(&held, 0, sizeof(held));
    }
    return st;
}

void tess_obj_ckpt_cb_deliver(void *arg)
{
    (void)arg;
    if (!held.active)
        return;
    tess_array_t *a = held.aid < tess_obj_narrays ? tess_obj_arrays[held.aid] : NULL;
    if (!a || a->destroyed)
        tess_fatal("tess_cb_checkpoint: the array of the callback is gone");
    if (held.kind == TESS_CB_ELEMENT) {
        tess_msg_t *m = tess_core_msg_alloc(held.size);
        if (!m)
            tess_fatal("out of memory delivering a reduction result");
        memcpy(tess_msg_payload(m), held.data, held.size);
        tess_obj_send_linear(a, held.linear, held.entry, m);
    } else
        tess_obj_broadcast(a, held.entry, held.data, held.size);
    free(held.data);
    memset(&held, 0, sizeof(held));
}

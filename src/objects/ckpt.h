/* ckpt.h — the parts of checkpoint and restart, and what each offers the others. Calls go one
 * way: checkpoint.c (the API: arguments, collective agreement, directories and the current
 * pointer, validation) -> ckpt_bg.c (the background checkpoint: a snapshot and the thread that
 * writes it through ckpt_io.c's writer), ckpt_io.c (the staging writer of a data file) and
 * ckpt_read.c (the read-ahead reader of the records a process restarts) -> ckpt_format.c (the
 * file format: records, manifest, CRC-32C, and the file helpers).
 *
 * Layout of checkpoint N under D (tessera.h says why it is safe):
 *   D/ckpt.N/data.R    process R's records: rec_hdr_t, state bytes, PUP bytes, device bytes
 *   D/ckpt.N/manifest  man_hdr_t, man_array_t[narrays], uint64_t file_size[nprocs], user bytes
 *                      (padded to 8), man_rec_t[nrecs] sorted by (array, linear), then the
 *                      trailer (body size, CRC-32C of the body, "TEND")
 *   D/current          "ckpt.N\n"
 * Every record is found through the index, so a process reads only the records of the elements
 * the map gives it, whatever shape wrote them. All integers are in the writer's byte order; a
 * reader of the other order fails the magic check. */
#ifndef TESS_OBJECTS_CKPT_H
#define TESS_OBJECTS_CKPT_H

#include "objects.h"

#include <pthread.h>

#define CKPT_MAGIC      "TESSCKPT"
#define CKPT_END        "TEND"
#define CKPT_VERSION    1u
#define CKPT_REC_MAGIC  0x54524543u /* "CERT" */
#define CKPT_USER_MAX   ((size_t)1 << 30)
#define CKPT_CHUNK      ((size_t)8 << 20) /* each half of a pinned staging buffer */
#define CKPT_DIRECT_ALIGN 4096            /* O_DIRECT writes: buffer, offset and length */
#define CKPT_PATH       1024 /* = tess_ckpt_info_t.path */
#define CKPT_TEXT       768

typedef struct man_hdr {
    char     magic[8];
    uint32_t version, nprocs, ppn, narrays;
    uint64_t step, entries_hash;
    uint32_t nentries, pad;
    char     program[64];
    uint64_t user_size, nrecs;
} man_hdr_t;

typedef struct man_array {
    char     name[TESS_OBJ_NAME_LEN];
    int32_t  ndims, ext[3];
    uint32_t has_pup, pad;
    uint64_t elem_size;
    int64_t  size;
} man_array_t;

typedef struct man_rec {
    uint32_t array, file;
    int64_t  linear;
    uint64_t offset, length;
    uint32_t crc, pad;
} man_rec_t;

typedef struct man_trailer {
    uint64_t body_size;
    uint32_t crc;
    char     magic[4];
} man_trailer_t;

typedef struct rec_hdr {
    uint32_t magic, array;
    int64_t  linear;
    uint64_t state_size, pup_size;
    uint32_t ndev, pad;
    uint64_t dev_size[TESS_DEV_MAX_BUFS];
} rec_hdr_t;

/* A manifest in memory, its parts pointing into the body. */
typedef struct manifest {
    char              *body;
    size_t             body_size;
    const man_hdr_t   *hdr;
    const man_array_t *arrays;
    const uint64_t    *files;
    const char        *user;
    const man_rec_t   *recs;
    int64_t           *base; /* [narrays] first record of each array */
    char               path[CKPT_PATH]; /* the checkpoint's directory */
} manifest_t;

/* The arrays a checkpoint or restart names, in order. */
typedef struct ckpt_set {
    int           n;
    tess_array_t *a[TESS_OBJ_MAX_ARRAYS];
} ckpt_set_t;

/* The record index a writer fills, one man_rec_t per element written. */
typedef struct recvec {
    man_rec_t *v;
    size_t     n, cap;
} recvec_t;

/* A record read and checked: its host part, and its device bytes already in new device memory
 * (filled on the element's stream; the element itself is unchanged until every process agrees). */
typedef struct loaded {
    tess_ctx_h e;
    uint32_t   ai; /* its array in the set */
    char      *head; /* rec_hdr_t, state bytes, PUP bytes */
    void      *dev[TESS_DEV_MAX_BUFS];
} loaded_t;

/* ---- ckpt_format.c: the format and the files -------------------------------------------- */

/* CRC-32C: continue `crc` (0 to start) over len bytes. */
uint32_t tess_ckpt_crc32c(uint32_t crc, const void *buf, size_t len);
/* FNV-1a: continue h (0xcbf29ce484222325 to start) over len bytes. */
uint64_t tess_ckpt_fnv1a(uint64_t h, const void *buf, size_t len);
/* The registered entries, names and kinds in order: a checkpoint belongs to one entry set. */
uint64_t tess_ckpt_entries_hash(void);

/* A path of at most CKPT_PATH bytes (the directory is at most CKPT_PATH - 64). */
TESS_PRINTF(2, 3) void tess_ckpt_pathf(char *buf, const char *fmt, ...);
/* TESS_ERR_SYSTEM naming what failed on path, and errno's text. */
tess_status_t tess_ckpt_sys_error(const char *what, const char *path);
tess_status_t tess_ckpt_sync_path(const char *path);
/* This thread's error detail into buf, without the " (status text)" tess_error added: to be
 * passed on as another error's text. */
void tess_ckpt_detail_copy(tess_status_t st, char *buf, size_t cap);
/* The 2 x CKPT_CHUNK bytes of a writer's or reader's staging halves: pinned host memory, else
 * (none to be had: a warning, once a process) ordinary host memory, which device copies also
 * take, staged by the driver: slower, as right. *pinned_p says which, for staging_free. NULL
 * when neither (the error says why). One buffer is kept between uses (allocating pinned
 * memory synchronises the device) until tess_ckpt_staging_release (finalize). Any thread. */
char *tess_ckpt_staging_alloc(const char *who, int *pinned_p);
void  tess_ckpt_staging_free(char *buf, int pinned);
void  tess_ckpt_staging_release(void);

/* What the writer (ckpt_io.c) and the reader (ckpt_read.c) share: a staging buffer of two
 * halves and the thread that writes or reads them, which sleeps on cv under mu until its owner
 * hands it a half or sets stop. tess_ckpt_worker_start: the buffer (who names the operation in
 * errors) and its halves into *half0 and *half1, mu and cv, then fn(arg) on a new thread;
 * tess_ckpt_worker_stop: sets stop, joins
 * the thread if it started, frees the buffer (either is safe after a failed start). The owner's
 * thread. */
typedef struct ckpt_worker {
    char           *staging; /* pinned unless none could be had */
    int             pinned, stop, started;
    pthread_t       th;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
} ckpt_worker_t;
tess_status_t tess_ckpt_worker_start(ckpt_worker_t *wk, const char *who, char **half0,
                                     char **half1, void *(*fn)(void *), void *arg);
void          tess_ckpt_worker_stop(ckpt_worker_t *wk);
/* Write a small file through path.tmp and a rename, synced. */
tess_status_t tess_ckpt_write_file_atomic(const char *dir, const char *name, const void *buf,
                                          size_t len);
/* Remove a checkpoint directory (its files, then itself); missing is fine. */
void tess_ckpt_remove_dir(const char *path);
/* N of D/current, or 0 when there is none. */
uint64_t tess_ckpt_read_current(const char *dir);

/* The manifest's description of each array of set (ma: set->n of them), taken when the
 * checkpoint is: a background one's manifest is written later. */
void tess_ckpt_arrays_describe(const ckpt_set_t *set, man_array_t *ma);
/* Process 0: the manifest of the arrays at step from every process's index (recs, sorted
 * here) and file size, with the program's name and user bytes, written into tmpdir. */
tess_status_t tess_ckpt_manifest_write(const char *tmpdir, const man_array_t *arrays,
                                       int narrays, uint64_t step, const char *program,
                                       const void *user_bytes, size_t user, man_rec_t *recs,
                                       size_t nrecs, const uint64_t *files);
/* Process 0: find and read the manifest of dir (a checkpoint, or D through D/current), check
 * its trailer and CRC. */
tess_status_t tess_ckpt_manifest_read(const char *dir, manifest_t *m);
/* Every process: lay the parts of m->body out and check that they are consistent. */
tess_status_t tess_ckpt_manifest_parse(manifest_t *m);
void          tess_ckpt_manifest_free(manifest_t *m);

/* ---- ckpt_io.c: the writer; ckpt_bg.c: the background checkpoint; ckpt_read.c: the reader */

/* The streams of the device copies into or out of a staging half, each once in a row
 * (ckpt_io.c): tess_ckpt_streams_add appends one unless it is the last; `what` names the
 * operation in an error. */
typedef struct streams {
    tess_gpu_stream_h *v;
    size_t             n, cap;
} streams_t;

tess_status_t tess_ckpt_streams_add(streams_t *s, tess_gpu_stream_h stream, const char *what);
/** The local elements of `a` by linear index (malloc'd; *n_p of them), NULL without memory. */
tess_ctx_h   *tess_ckpt_local_elems(tess_array_t *a, size_t *n_p);

/* This process's data file under tmpdir: every local element of the set, its records indexed
 * in rv (the caller frees rv->v); the file's size is *size_p. */
tess_status_t tess_ckpt_write_data(const char *tmpdir, const ckpt_set_t *set, recvec_t *rv,
                                   uint64_t *size_p);

/* The staging writer (ckpt_io.c), which tess_ckpt_write_data and the background checkpoint's
 * thread (ckpt_bg.c) both write a data file through. Records are packed back to back into the
 * two halves of a pinned staging buffer; a full half goes to the writer's pwrite thread, which
 * writes it with one pwrite at its file offset and starts its writeback, while the owner fills
 * the other half: the device copies into it, then the CRC of its bytes once the copies are done
 * (still in cache). The file is thus written in whole 8 MiB pieces, the disk never waits for the
 * device or the CRC, and fsync at the end finds most of the file already on its way. A writer
 * belongs to the thread that opened it; only that thread calls writer_put and writer_close. */
typedef struct wpiece {
    size_t      rec; /* index into the record list */
    const char *p;
    size_t      len;
} wpiece_t;

typedef struct whalf {
    char              *buf;
    size_t             fill;
    uint64_t           off; /* file offset of buf[0] */
    wpiece_t          *pc;
    size_t             npc, cappc;
    streams_t          sv; /* the streams of its device copies */
} whalf_t;

typedef struct ckpt_writer {
    ckpt_worker_t   wk;
    whalf_t         h[2];
    int             cur;    /* the half being filled */
    int             queued; /* the half with the pwrite thread, or -1 */
    int             werr;
    int             fd;
    const char     *path;
    recvec_t       *rv;
} ckpt_writer_t;

/* Open path for writing a data file, through O_DIRECT with +tess-ckpt-direct; the fd or -1
 * (errno). Any thread. */
int           tess_ckpt_data_open(const char *path);
/* Start a writer of fd (path names it in errors) indexing into rv; its staging and pwrite
 * thread. The calling thread owns it. */
tess_status_t tess_ckpt_writer_open(ckpt_writer_t *w, int fd, const char *path, recvec_t *rv);
/* Append len bytes of record rec: host bytes (device 0) or device bytes copied on stream. The
 * owner's thread. */
tess_status_t tess_ckpt_writer_put(ckpt_writer_t *w, size_t rec, const char *src, size_t len,
                                   tess_gpu_stream_h stream, int device);
/* Write what is left (st TESS_OK), stop the pwrite thread, free the staging; the file's size
 * into *size_p. The owner's thread, once, even after an error. */
tess_status_t tess_ckpt_writer_close(ckpt_writer_t *w, tess_status_t st, uint64_t *size_p);
/* Element e's record header, state and host PUP bytes into h (the PUP_SIZE pass ps sized
 * hbytes); *pk the PUP_CKPT pass (its device buffers), *len_p the record's whole length. The
 * thread that checkpoints (it runs the array's PUP function). */
tess_status_t tess_ckpt_rec_fill(rec_hdr_t *h, uint32_t ai, tess_ctx_h e,
                                 const struct tess_pup *ps, size_t hbytes, struct tess_pup *pk,
                                 uint64_t *len_p);
/* Append to rv the index entry of element linear of array ai (len bytes at offset, CRC 0 until
 * its bytes are staged); its position into *r_p. The thread that fills rv. */
tess_status_t tess_ckpt_rec_index_add(recvec_t *rv, uint32_t ai, int64_t linear,
                                      uint64_t offset, uint64_t len, size_t *r_p);

/* A background checkpoint (ckpt_bg.c; one at a time; these run on the main thread).
 * tess_ckpt_snapshot copies every local element of the set (host parts to host memory, device
 * buffers by copies on each element's stream into the snapshot area: device memory, else
 * pinned host memory) and lays out this process's data file under tmpdir; *sync_p = 1 (and
 * nothing taken) when neither area can be had, with a warning. tess_ckpt_bg_start then starts
 * the writer thread. tess_ckpt_bg_done: the thread has finished. tess_ckpt_bg_join waits for it
 * and returns its status (its text as this thread's error detail, not logged again), the
 * record index (*rv_p, the caller frees rv_p->v) and the file's size. */
tess_status_t tess_ckpt_snapshot(const char *tmpdir, const ckpt_set_t *set, int *sync_p);
void          tess_ckpt_bg_start(void);
int           tess_ckpt_bg_done(void);
tess_status_t tess_ckpt_bg_join(recvec_t *rv_p, uint64_t *size_p);
/* Forget a snapshot (the thread, if started, finished first); the error detail is untouched. */
void          tess_ckpt_bg_drop(void);
/* Free the snapshot area and the writer's stream (none outstanding). */
void          tess_ckpt_bg_free(void);
/* Read and check the record of every local element of the set from checkpoint m into *ld_p
 * (*n_p of them, malloc'd; on an error, those read so far), the device copies done. */
tess_status_t tess_ckpt_read_records(const manifest_t *m, const ckpt_set_t *set, loaded_t **ld_p,
                                     size_t *n_p);
/* After every process checked its records: replace the element's state. */
void tess_ckpt_apply_record(loaded_t *l);
/* Free what l still holds. */
void tess_ckpt_loaded_free(loaded_t *l);

#endif

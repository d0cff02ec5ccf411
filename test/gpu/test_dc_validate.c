/*
 * test_dc_validate.c — device-message control messages are checked as they arrive: a corrupt
 * one (kind, sizes, PE, event index, slot, offsets, keys out of range) is rejected with
 * TESS_ERR_CORRUPT before anything in it is followed; well-formed ones of every kind pass.
 *
 * Two processes of one node (so the peer has IPC resources to check against), one PE each. Each
 * process builds messages as if the other had sent them and runs them through tess_dc_validate,
 * the check the control-message handler makes first.
 */
#include "devcomm/dc_int.h"

#include "check.h"

#include <tessera.h>

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int me_pe, other_pe, checked;

/* A message of `kind` from `src_pe` with `size` bytes of zeroed payload. */
static tess_msg_t *msg_new(unsigned kind, int src_pe, size_t size)
{
    tess_msg_t *m = aligned_alloc(16, TESS_ALIGN_UP(sizeof(tess_msg_t) + size + 16, 16));
    CHECK(m);
    memset(m, 0, sizeof(*m) + size);
    m->hdr.flags  = (uint16_t)kind;
    m->hdr.src_pe = src_pe;
    m->hdr.size   = size;
    return m;
}

static void expect(tess_msg_t *m, tess_status_t want, const char *what)
{
    tess_status_t st = tess_dc_validate(m);
    CHECK_MSG(st == want, "%s: tess_dc_validate returned %d (%s)", what, (int)st,
              st != TESS_OK ? tess_error_detail() : "ok");
    checked++;
    free(m);
}

/* A data-carrying control message: the fixed part, nbufs records of `kind`, header bytes and
 * extra bytes; the caller edits the records through *recs_p. */
static tess_msg_t *ctl_new(unsigned kind, int src_pe, int nbufs, uint64_t size0, size_t extra,
                           dc_ctl_t **c_p, void **recs_p)
{
    size_t      hlen = 8;
    size_t      size = sizeof(dc_ctl_t) + (size_t)nbufs * dc_rec_size(kind) + hlen + extra;
    tess_msg_t *m    = msg_new(kind, src_pe, size);
    dc_ctl_t   *c    = tess_msg_payload(m);
    c->nbufs         = (uint32_t)nbufs;
    c->header_len    = (uint32_t)hlen;
    c->extra_len     = (uint32_t)extra;
    c->event         = -1;
    for (int i = 0; i < nbufs; i++)
        c->sizes[i] = size0;
    *c_p = c;
    if (recs_p)
        *recs_p = dc_recs(c);
    return m;
}

static void check_fixed_kinds(void)
{
    expect(msg_new(0, other_pe, 8), TESS_ERR_CORRUPT, "kind 0");
    expect(msg_new(DC_K_MAX, other_pe, 8), TESS_ERR_CORRUPT, "kind past the last");
    expect(msg_new(DC_K_ACK, tess_num_pes(), sizeof(dc_ack_msg_t)), TESS_ERR_CORRUPT,
           "source PE past the last");
    expect(msg_new(DC_K_ACK, -1, sizeof(dc_ack_msg_t)), TESS_ERR_CORRUPT, "source PE -1");
    expect(msg_new(DC_K_ACK, other_pe, sizeof(dc_ack_msg_t)), TESS_OK, "acknowledgement");
    expect(msg_new(DC_K_ACK, other_pe, sizeof(dc_ack_msg_t) - 1), TESS_ERR_CORRUPT,
           "short acknowledgement");
    expect(msg_new(DC_K_DONE, other_pe, sizeof(uint64_t)), TESS_OK, "done notice");
    expect(msg_new(DC_K_DONE, other_pe, 4), TESS_ERR_CORRUPT, "short done notice");
    /* Acknowledgements of direct RDMA sends: a count, then that many send ids. */
    static const struct {
        uint32_t    n;
        size_t      ids;
        tess_status_t want;
        const char *what;
    } racks[] = {{1, 1, TESS_OK, "RDMA acknowledgement of one send"},
                 {DC_RACK_MAX, DC_RACK_MAX, TESS_OK, "RDMA acknowledgement of the most sends"},
                 {0, 0, TESS_ERR_CORRUPT, "RDMA acknowledgement of no send"},
                 {3, 2, TESS_ERR_CORRUPT, "RDMA acknowledgement shorter than its count"},
                 {2, 3, TESS_ERR_CORRUPT, "RDMA acknowledgement longer than its count"},
                 {DC_RACK_MAX + 1, DC_RACK_MAX + 1, TESS_ERR_CORRUPT,
                  "RDMA acknowledgement of too many sends"}};
    for (size_t i = 0; i < TESS_ARRAY_LEN(racks); i++) {
        tess_msg_t *a = msg_new(DC_K_RACK, other_pe,
                                sizeof(dc_rack_msg_t) + racks[i].ids * sizeof(uint64_t));
        ((dc_rack_msg_t *)tess_msg_payload(a))->n = racks[i].n;
        expect(a, racks[i].want, racks[i].what);
    }
    expect(msg_new(DC_K_RACK, other_pe, 4), TESS_ERR_CORRUPT, "RDMA acknowledgement of 4 bytes");
    expect(msg_new(DC_K_GOT, me_pe, sizeof(uint64_t)), TESS_OK, "local get notice");
    expect(msg_new(DC_K_GOT, other_pe, sizeof(uint64_t)), TESS_ERR_CORRUPT,
           "get notice from another process");
    tess_msg_t *m = msg_new(DC_K_CHUNK, other_pe, sizeof(dc_chunk_msg_t));
    ((dc_chunk_msg_t *)tess_msg_payload(m))->len = 0;
    expect(m, TESS_ERR_CORRUPT, "chunk of no bytes");
    m = msg_new(DC_K_CHUNK, other_pe, sizeof(dc_chunk_msg_t));
    *(dc_chunk_msg_t *)tess_msg_payload(m) = (dc_chunk_msg_t){.len = 64, .slot = 1u << 30,
                                                             .nchunks = 1};
    expect(m, TESS_ERR_CORRUPT, "chunk in a slot that does not exist");
}

static void check_ctl(void)
{
    dc_ctl_t *c;
    void     *recs;
    expect(msg_new(DC_K_D2D, me_pe, sizeof(dc_ctl_t) - 1), TESS_ERR_CORRUPT,
           "shorter than the fixed part");
    tess_msg_t *m = ctl_new(DC_K_D2D, me_pe, 1, 100, 0, &c, NULL);
    expect(m, TESS_OK, "d2d");
    m = ctl_new(DC_K_D2D, other_pe, 1, 100, 0, &c, NULL);
    expect(m, TESS_ERR_CORRUPT, "d2d from another process");
    m = ctl_new(DC_K_D2D, me_pe, 1, 100, 0, &c, NULL);
    c->nbufs = TESS_DEV_MAX_BUFS + 1;
    expect(m, TESS_ERR_CORRUPT, "too many buffers");
    m = ctl_new(DC_K_D2D, me_pe, 1, 100, 0, &c, NULL);
    c->header_len += 8;
    expect(m, TESS_ERR_CORRUPT, "sizes that do not add up");

    /* Staged IPC: event index and slot against the sender's resources. */
    size_t cs = dc.peers[tess_core_pe_process(other_pe)].comm_size;
    int    ne = dc.peers[tess_core_pe_process(other_pe)].nipc;
    CHECK_MSG(cs > 0 && ne > 0, "the peer has no IPC resources (comm %zu, events %d)", cs, ne);
    m = ctl_new(DC_K_STAGED, other_pe, 1, 1000, 0, &c, &recs);
    c->event = 0;
    expect(m, TESS_OK, "staged");
    m = ctl_new(DC_K_STAGED, other_pe, 1, 1000, 0, &c, &recs);
    c->event = ne;
    expect(m, TESS_ERR_CORRUPT, "staged, event past the last");
    m = ctl_new(DC_K_STAGED, other_pe, 1, 1000, 0, &c, &recs);
    expect(m, TESS_ERR_CORRUPT, "staged without an event");
    m = ctl_new(DC_K_STAGED, other_pe, 1, 1000, 0, &c, &recs);
    c->event                            = 0;
    ((dc_rec_staged_t *)recs)[0].offset = 8;
    expect(m, TESS_ERR_CORRUPT, "staged, slot not aligned");
    m = ctl_new(DC_K_STAGED, other_pe, 1, 1000, 0, &c, &recs);
    c->event                            = 0;
    ((dc_rec_staged_t *)recs)[0].offset = cs - DC_ALIGN;
    expect(m, TESS_ERR_CORRUPT, "staged, buffer past the end of the comm buffer");

    /* Direct IPC: no event (an idle sender) is allowed, a negative index is not. */
    m = ctl_new(DC_K_DIRECT, other_pe, 1, 1000, 0, &c, NULL);
    expect(m, TESS_OK, "direct without an event");
    m = ctl_new(DC_K_DIRECT, other_pe, 1, 1000, 0, &c, NULL);
    c->event = -2;
    expect(m, TESS_ERR_CORRUPT, "direct, event -2");

    /* A message staged in parts: its header, then its parts. */
    m = ctl_new(DC_K_PHEAD, other_pe, 2, 1u << 20, 0, &c, NULL);
    expect(m, TESS_OK, "header of a message in parts");
    const dc_part_msg_t good = {.msg_id = 7, .offset = 0, .len = 4096, .slot = 0, .event = 0,
                                .buf = 0, .nparts = 2};
    static const struct {
        const char *what;
        int         field;
        int64_t     value;
    } bad[] = {{"part of no bytes", 0, 0},          {"part slot not aligned", 1, 100},
               {"part past the comm buffer", 1, -1}, {"part event past the last", 2, -1},
               {"part event -1", 2, -2},             {"part of buffer past the last", 3, 0},
               {"part of a message of no parts", 4, 0}};
    m = msg_new(DC_K_PPART, other_pe, sizeof(dc_part_msg_t));
    *(dc_part_msg_t *)tess_msg_payload(m) = good;
    expect(m, TESS_OK, "part");
    m = msg_new(DC_K_PPART, other_pe, sizeof(dc_part_msg_t) + 8);
    *(dc_part_msg_t *)tess_msg_payload(m) = good;
    expect(m, TESS_ERR_CORRUPT, "part of the wrong size");
    for (size_t i = 0; i < TESS_ARRAY_LEN(bad); i++) {
        m                = msg_new(DC_K_PPART, other_pe, sizeof(dc_part_msg_t));
        dc_part_msg_t *p = tess_msg_payload(m);
        *p               = good;
        switch (bad[i].field) {
        case 0: p->len = 0; break;
        case 1: p->slot = bad[i].value < 0 ? cs - DC_ALIGN : (uint64_t)bad[i].value; break;
        case 2: p->event = bad[i].value == -1 ? ne : (int32_t)bad[i].value; break;
        case 3: p->buf = TESS_DEV_MAX_BUFS; break;
        default: p->nparts = 0; break;
        }
        expect(m, TESS_ERR_CORRUPT, bad[i].what);
    }

    /* RDMA: every remote key inside the message. */
    m = ctl_new(DC_K_RDMA, other_pe, 1, 1000, 32, &c, &recs);
    ((dc_rec_rdma_t *)recs)[0] = (dc_rec_rdma_t){.raddr = 4096, .rkey_off = 0, .rkey_len = 32};
    expect(m, TESS_OK, "rdma");
    m = ctl_new(DC_K_RDMA, other_pe, 1, 1000, 32, &c, &recs);
    ((dc_rec_rdma_t *)recs)[0] = (dc_rec_rdma_t){.raddr = 4096, .rkey_off = 16, .rkey_len = 32};
    expect(m, TESS_ERR_CORRUPT, "rdma, key past the message");
    m = ctl_new(DC_K_RDMA, other_pe, 1, 1000, 32, &c, &recs);
    expect(m, TESS_ERR_CORRUPT, "rdma, empty key");
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int nprocs;
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    CHECK_MSG(nprocs == 2, "run with 2 processes, not %d", nprocs);
    CHECK_OK(tess_init(&argc, &argv, MPI_COMM_WORLD, NULL));
    if (tess_dc_path_to(1 - tess_process()) != TESS_DC_IPC) {
        printf("dc_validate: the processes have no IPC path between them: skipped\n");
        tess_finalize();
        MPI_Finalize();
        return 77;
    }
    me_pe    = tess_process() * tess_ppn();
    other_pe = (1 - tess_process()) * tess_ppn();
    check_fixed_kinds();
    check_ctl();
    if (tess_process() == 0)
        printf("dc_validate: %d control messages judged as expected\n", checked);
    CHECK_OK(tess_finalize());
    MPI_Finalize();
    return 0;
}

/* test_misuse MODE: one misuse that cannot be returned as an error; the job must die with a
 * message naming the array, the index, the entry and the caller's file:line. Run from
 * test/misuse/testlist, whose expect= patterns check the message. Modes:
 *
 *   index      tess_send to an index out of range, from an entry
 *   entry      tess_send to an entry id that was never registered, from an entry
 *   destroyed  tess_send to an array destroyed between two phases, from an entry
 *   outside    tess_send from main between phases (outside tess_run)
 *   twice      tess_contribute twice to one reduction tag, from an entry
 *   notmsg     tess_send_msg of a buffer that does not come from tess_msg_alloc, from an entry
 *   devmany    tess_send_device_many to an entry that takes no device messages, from an entry
 *   arraynull  tess_array_create(&params, NULL), from main (an error, reported by CHECK_OK)
 *   paramsnull tess_array_create(NULL, &array), from main (likewise)
 *   sendmax    tess_send of SIZE_MAX bytes, from an entry
 *   bcastover  tess_broadcast of SIZE_MAX - 3 bytes (its header would overflow the size)
 *   devnull    tess_send_device of 2 buffers with bufs NULL
 *   devhdr     tess_send_device with a header of SIZE_MAX bytes
 *   count0     tess_contribute of 0 values
 *   contribnull tess_contribute from NULL
 *   lowertag   tess_contribute to tag 7, then to tag 5
 *   mismatch   elements 0 and 1 contribute different types and ops to one tag
 *   beforeinit tess_send before tess_init
 *   finalizein tess_finalize inside an entry (an error, reported by CHECK_OK)
 *   index3d    tess_send to index (1,1,3) of a 2-D array
 *   noexit     a TESS_RUN_UNTIL_EXIT phase that goes quiescent without tess_exit
 *   noreduce   the same, with element 1 never contributing to a TESS_CB_RETURN reduction
 *   noreducebc the same with a broadcast callback (the fast path's rounds, TESS_REDUCE=auto)
 *   skiprun    process 1 skips the second tess_run and calls tess_finalize
 *   skipdestroy process 0 destroys an array between the phases, process 1 does not
 *   missdestroy process 0 destroys an array between the phases, process 1 waits in an
 *              MPI_Barrier of its own instead (run with a short TESS_COLLECTIVE_TIMEOUT)
 *   missrun    process 0 stays in its own code (sleeps) instead of entering the second
 *              tess_run (likewise)
 *   usermap    a TESS_MAP_USER map_fn that places elements differently on each process
 *   nomask     tess_array_params_t.map set without TESS_ARRAY_FIELD_MAP in field_mask
 *   redproc    every element contributes to one reduction, those of process 1 another type and
 *              op (run on 4 processes x 1 PE: the processes' partials meet in the tree)
 *   nofinalize MPI_Finalize after a phase, without tess_finalize
 *   nopup      not a misuse: element 1 of an array without a PUP function migrates; the
 *              program ends normally (the runtime says once how such elements move)
 *   detail     not a misuse: tess_error_detail() after tess_result fails (it names the
 *              failure) and after tess_run succeeds (empty); exits 0 when both hold
 *   spin       not a misuse: prints "test_misuse spin: pid N" on every process, then passes a
 *              message around the elements for ever (test/misuse/check-kill9 kills it)
 *
 * The misuse calls sit at the end of the file under #line directives, so that the patterns
 * can name their exact line (test_misuse.c:9001 and so on). Without a valid mode the program
 * exits 2, which the harness does not accept as a misuse death (no pattern match). */
#include "tess_test.h"

#include <tessera/gpu.h>

#include <time.h>
#include <unistd.h>

static tess_array_h arr, victim, plane;
static tess_entry_t E_KICK, E_NOOP, E_DEV;
static const char  *mode;

static const char *const modes[] = {
    "index", "entry", "destroyed", "outside", "twice", "notmsg", "devmany", "arraynull",
    "paramsnull", "sendmax", "bcastover", "devnull", "devhdr", "count0", "contribnull",
    "lowertag", "mismatch", "beforeinit", "finalizein", "index3d", "noexit", "noreduce", "noreducebc", "spin",
    "skiprun", "skipdestroy", "missdestroy", "missrun", "usermap", "nomask", "redproc",
    "nofinalize", "nopup", "detail"};

static void misuse_index(void);
static void misuse_entry(void);
static void misuse_destroyed(void);
static void misuse_outside(void);
static void misuse_twice(tess_ctx_h ctx);
static void misuse_notmsg(void);
static void misuse_devmany(void);
static void misuse_arraynull(void);
static void misuse_paramsnull(void);
static void misuse_sendmax(void);
static void misuse_bcastover(void);
static void misuse_devnull(void);
static void misuse_devhdr(void);
static void misuse_count0(tess_ctx_h ctx);
static void misuse_contribnull(tess_ctx_h ctx);
static void misuse_lowertag(tess_ctx_h ctx);
static void misuse_mismatch(tess_ctx_h ctx);
static void misuse_beforeinit(void);
static void misuse_finalizein(void);
static void misuse_index3d(void);
static void misuse_usermap(void);
static void misuse_nomask(void);
static void misuse_redproc(tess_ctx_h ctx);
static void misuse_nofinalize(void);

static void dev_post(tess_ctx_h ctx, void *e, const void *header, size_t header_len, int nbufs,
                     const size_t *sizes, void **dst, tess_stream_t *stream_p)
{
    (void)ctx, (void)e, (void)header, (void)header_len, (void)nbufs, (void)sizes, (void)dst;
    (void)stream_p;
}

static void noop(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx, (void)e, (void)msg, (void)size;
}

static void spin(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e, (void)msg, (void)size;
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
    tess_send(arr, tess_idx1((int32_t)((tess_ctx_linear(ctx) + 1) % 4)), E_KICK, NULL, 0);
}

/* Element 1 of "misarr" (on the second process with 2 ranks x 1 PE) does the misuse. */
static void kick(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e, (void)msg, (void)size;
    if (!strcmp(mode, "spin")) {
        spin(ctx, e, msg, size);
        return;
    }
    if (!strcmp(mode, "mismatch") && tess_ctx_linear(ctx) <= 1)
        misuse_mismatch(ctx);
    if (!strcmp(mode, "redproc"))
        misuse_redproc(ctx);
    if (!strcmp(mode, "nopup") && tess_ctx_linear(ctx) == 1)
        CHECK_OK(tess_migrate(ctx, (tess_pe() + 1) % tess_num_pes()));
    if (!strncmp(mode, "noreduce", 8) && tess_ctx_linear(ctx) != 1) {
        int32_t         v  = 1;
        tess_callback_t cb = strcmp(mode, "noreducebc") ? tess_cb_return()
                                                        : tess_cb_broadcast(arr, E_NOOP);
        CHECK_OK(tess_contribute(ctx, 7, &v, 1, TESS_INT32, TESS_SUM, cb));
    }
    if (tess_ctx_linear(ctx) != 1)
        return;
    if (!strcmp(mode, "index"))
        misuse_index();
    else if (!strcmp(mode, "entry"))
        misuse_entry();
    else if (!strcmp(mode, "destroyed"))
        misuse_destroyed();
    else if (!strcmp(mode, "twice"))
        misuse_twice(ctx);
    else if (!strcmp(mode, "notmsg"))
        misuse_notmsg();
    else if (!strcmp(mode, "devmany"))
        misuse_devmany();
    else if (!strcmp(mode, "sendmax"))
        misuse_sendmax();
    else if (!strcmp(mode, "bcastover"))
        misuse_bcastover();
    else if (!strcmp(mode, "devnull"))
        misuse_devnull();
    else if (!strcmp(mode, "devhdr"))
        misuse_devhdr();
    else if (!strcmp(mode, "count0"))
        misuse_count0(ctx);
    else if (!strcmp(mode, "contribnull"))
        misuse_contribnull(ctx);
    else if (!strcmp(mode, "lowertag"))
        misuse_lowertag(ctx);
    else if (!strcmp(mode, "finalizein"))
        misuse_finalizein();
    else if (!strcmp(mode, "index3d"))
        misuse_index3d();
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0 && !strcmp(mode, "spin"))
        CHECK_OK(tess_send(arr, tess_idx1(0), E_KICK, NULL, 0));
    else if (tess_process() == 0)
        CHECK_OK(tess_broadcast(arr, E_KICK, NULL, 0));
}

int main(int argc, char **argv)
{
    mode = "";
    for (size_t i = 0; argc > 1 && i < sizeof(modes) / sizeof(modes[0]); i++)
        if (!strcmp(argv[1], modes[i]))
            mode = modes[i];
    if (!*mode) {
        fprintf(stderr, "usage: test_misuse MODE (see the top of test_misuse.c)\n");
        return 2;
    }
    if (!strcmp(mode, "beforeinit")) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        misuse_beforeinit();
        MPI_Finalize();
        return 3;
    }
    test_init(&argc, &argv);
    CHECK_OK(tess_entry_register("kick", kick, &E_KICK));
    CHECK_OK(tess_entry_register("noop", noop, &E_NOOP));
    CHECK_OK(tess_entry_register_device("dev", dev_post, noop, 0, &E_DEV));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "misarr", .ndims = 1,
                             .extents = {4}, .elem_size = 8};
    if (!strcmp(mode, "arraynull"))
        misuse_arraynull();
    if (!strcmp(mode, "paramsnull"))
        misuse_paramsnull();
    if (!strcmp(mode, "usermap"))
        misuse_usermap();
    if (!strcmp(mode, "nomask"))
        misuse_nomask();
    CHECK_OK(tess_array_create(&p, &arr));
    p.name       = "victim";
    p.extents[0] = 3;
    CHECK_OK(tess_array_create(&p, &victim));
    p.name       = "plane";
    p.ndims      = 2;
    p.extents[0] = 2;
    p.extents[1] = 2;
    CHECK_OK(tess_array_create(&p, &plane));

    /* A clean phase first: the runtime works, and victim receives messages. */
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, NULL, NULL));
    if (!strcmp(mode, "outside"))
        misuse_outside();
    if (!strcmp(mode, "nofinalize"))
        misuse_nofinalize();
    if (!strcmp(mode, "detail")) {
        /* The first phase ended at quiescence without a value: tess_result fails, and says so. */
        char   value[8];
        size_t size;
        CHECK_ST(tess_result(value, sizeof(value), &size), TESS_ERR_NOT_FOUND);
        CHECK_MSG(strstr(tess_error_detail(), "tess_result") != NULL,
                  "after tess_result failed, tess_error_detail() is '%s'", tess_error_detail());
        CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, NULL, NULL));
        CHECK_MSG(!strcmp(tess_error_detail(), ""), "after tess_run succeeded, "
                  "tess_error_detail() is '%s'", tess_error_detail());
        printf("test_misuse detail: ok\n");
        test_fini();
        return 0;
    }
    if (!strcmp(mode, "destroyed"))
        CHECK_OK(tess_array_destroy(victim));
    if (!strcmp(mode, "skipdestroy") && tess_process() == 0)
        CHECK_OK(tess_array_destroy(victim));
    if (!strcmp(mode, "missdestroy")) {
        if (tess_process() == 0)
            CHECK_OK(tess_array_destroy(victim));
        else
            MPI_Barrier(MPI_COMM_WORLD);
    }
    if (!strcmp(mode, "missrun") && tess_process() == 0)
        for (;;)
            sleep(1);
    if (!strcmp(mode, "skiprun") && tess_process() == 1) {
        test_fini();
        return 3;
    }
    if (!strcmp(mode, "spin")) {
        printf("test_misuse spin: pid %ld\n", (long)getpid());
        printf("test_misuse spin: process %d is pid %ld\n", tess_process(), (long)getpid());
        fflush(stdout);
    }
    int until_exit = !strcmp(mode, "noexit") || !strncmp(mode, "noreduce", 8) ||
                     !strcmp(mode, "spin");
    int was;
    CHECK_OK(tess_array_location(arr, tess_idx1(1), &was));
    CHECK_OK(tess_run(until_exit ? TESS_RUN_UNTIL_EXIT : TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    if (!strcmp(mode, "nopup")) {
        int pe;
        CHECK_OK(tess_array_location(arr, tess_idx1(1), &pe));
        CHECK_MSG(pe == (was + 1) % tess_num_pes(), "element 1 is on PE %d, not %d", pe,
                  (was + 1) % tess_num_pes());
        test_fini();
        return 0;
    }
    /* Only reached if the misuse was not caught. */
    fprintf(stderr, "test_misuse %s: the misuse was not reported\n", mode);
    test_fini();
    return 3;
}

/* ---- the misuses, at known lines --------------------------------------------------------- */

#line 9001
static void misuse_index(void) { tess_send(arr, tess_idx1(99), E_NOOP, NULL, 0); }

#line 9101
static void misuse_entry(void) { tess_send(arr, tess_idx1(2), E_NOOP + 1000, NULL, 0); }

#line 9201
static void misuse_destroyed(void) { tess_send(victim, tess_idx1(2), E_NOOP, NULL, 0); }

#line 9301
static void misuse_outside(void) { tess_send(victim, tess_idx1(1), E_NOOP, NULL, 0); }

#line 9401
static void misuse_twice(tess_ctx_h ctx)
{
    int32_t v = 1;
    CHECK_OK(tess_contribute(ctx, 5, &v, 1, TESS_INT32, TESS_SUM, tess_cb_return()));
#line 9411
    tess_contribute(ctx, 5, &v, 1, TESS_INT32, TESS_SUM, tess_cb_return());
}

#line 9501
static char not_a_message[4096]; /* the runtime looks before the pointer: stay inside */
static void misuse_notmsg(void) { tess_send_msg(arr, tess_idx1(0), E_NOOP, not_a_message + 2048); }

static void misuse_devmany(void)
{
    tess_dev_send_t send = {.array = arr, .index = tess_idx1(0), .entry = E_NOOP};
#line 9601
    tess_send_device_many(&send, 1, NULL);
}

#line 10001
static void misuse_arraynull(void)
{
    tess_array_params_t p = {.ndims = 1, .extents = {4}, .elem_size = 8};
    CHECK_OK(tess_array_create(&p, NULL));
}

#line 10051
static void misuse_paramsnull(void) { CHECK_OK(tess_array_create(NULL, &arr)); }

static char buf[64];
#line 10101
static void misuse_sendmax(void) { tess_send(arr, tess_idx1(0), E_NOOP, buf, SIZE_MAX); }

#line 10151
static void misuse_bcastover(void) { tess_broadcast(arr, E_NOOP, buf, SIZE_MAX - 3); }

#line 10201
static void misuse_devnull(void)
{
    tess_send_device(arr, tess_idx1(0), E_DEV, NULL, 0, NULL, 2, NULL, NULL, NULL);
}

#line 10251
static void misuse_devhdr(void)
{
    tess_send_device(arr, tess_idx1(0), E_DEV, buf, SIZE_MAX, NULL, 0, NULL, NULL, NULL);
}

static int32_t one = 1;
#line 10301
static void misuse_count0(tess_ctx_h ctx)
{
    tess_contribute(ctx, 1, &one, 0, TESS_INT32, TESS_SUM, tess_cb_return());
}

#line 10351
static void misuse_contribnull(tess_ctx_h ctx)
{
    tess_contribute(ctx, 1, NULL, 1, TESS_INT32, TESS_SUM, tess_cb_return());
}

#line 10401
static void misuse_lowertag(tess_ctx_h ctx)
{
    CHECK_OK(tess_contribute(ctx, 7, &one, 1, TESS_INT32, TESS_SUM, tess_cb_return()));
#line 10411
    tess_contribute(ctx, 5, &one, 1, TESS_INT32, TESS_SUM, tess_cb_return());
}

static double onef = 1.0;
#line 10451
static void misuse_mismatch(tess_ctx_h ctx)
{
    int          first = tess_ctx_linear(ctx) == 0;
    const void  *v     = first ? (const void *)&one : (const void *)&onef;
    tess_dtype_t t     = first ? TESS_INT32 : TESS_DOUBLE;
    tess_op_t    o     = first ? TESS_SUM : TESS_MAX;
#line 10461
    tess_contribute(ctx, 3, v, 1, t, o, tess_cb_return());
}

#line 10501
static void misuse_beforeinit(void) { tess_send(arr, tess_idx1(0), 0, NULL, 0); }

#line 10551
static void misuse_finalizein(void) { CHECK_OK(tess_finalize()); }

#line 10601
static void misuse_index3d(void) { tess_send(plane, tess_idx3(1, 1, 3), E_NOOP, NULL, 0); }

/* Element i on PE (i + process) mod PEs: each process places them differently. */
static int map_by_process(tess_index_t i, const int32_t ext[3], int npes, void *arg)
{
    (void)ext, (void)arg;
    return (i.x + tess_process()) % npes;
}

#line 11001
static void misuse_usermap(void)
{
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME | TESS_ARRAY_FIELD_MAP,
                             .name = "umap", .ndims = 1, .extents = {4}, .elem_size = 8,
                             .map = TESS_MAP_USER, .map_fn = map_by_process};
    tess_array_h a;
#line 11007
    CHECK_OK(tess_array_create(&p, &a));
}

#line 11051
static void misuse_nomask(void)
{
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "nomask", .ndims = 1,
                             .extents = {4}, .elem_size = 8, .map = TESS_MAP_ROUND_ROBIN};
    tess_array_h a;
#line 11056
    CHECK_OK(tess_array_create(&p, &a));
}

#line 11101
static void misuse_redproc(tess_ctx_h ctx)
{
    int          odd = tess_process() == 1;
    const void  *v   = odd ? (const void *)&onef : (const void *)&one;
    tess_dtype_t t   = odd ? TESS_DOUBLE : TESS_INT32;
    tess_op_t    o   = odd ? TESS_MAX : TESS_SUM;
#line 11111
    tess_contribute(ctx, 3, v, 1, t, o, tess_cb_return());
}

#line 11151
static void misuse_nofinalize(void)
{
    MPI_Finalize();
    exit(0);
}

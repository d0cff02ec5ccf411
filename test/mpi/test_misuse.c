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
 *
 * The misuse calls sit at the end of the file under #line directives, so that the patterns
 * can name their exact line (test_misuse.c:9001 and so on). Without a valid mode the program
 * exits 2, which the harness does not accept as a misuse death (no pattern match). */
#include "tess_test.h"

#include <tessera/gpu.h>

static tess_array_h arr, victim;
static tess_entry_t E_KICK, E_NOOP;
static const char  *mode;

static void misuse_index(void);
static void misuse_entry(void);
static void misuse_destroyed(void);
static void misuse_outside(void);
static void misuse_twice(tess_ctx_h ctx);
static void misuse_notmsg(void);
static void misuse_devmany(void);

static void noop(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)ctx, (void)e, (void)msg, (void)size;
}

/* Element 1 of "misarr" (on the second process with 2 ranks x 1 PE) does the misuse. */
static void kick(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e, (void)msg, (void)size;
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
}

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        CHECK_OK(tess_broadcast(arr, E_KICK, NULL, 0));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "index") && strcmp(mode, "entry") && strcmp(mode, "destroyed") &&
        strcmp(mode, "outside") && strcmp(mode, "twice") && strcmp(mode, "notmsg") &&
        strcmp(mode, "devmany")) {
        fprintf(stderr, "usage: test_misuse index|entry|destroyed|outside|twice|notmsg|devmany\n");
        return 2;
    }
    CHECK_OK(tess_entry_register("kick", kick, &E_KICK));
    CHECK_OK(tess_entry_register("noop", noop, &E_NOOP));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "misarr", .ndims = 1,
                             .extents = {4}, .elem_size = 8};
    CHECK_OK(tess_array_create(&p, &arr));
    p.name       = "victim";
    p.extents[0] = 3;
    CHECK_OK(tess_array_create(&p, &victim));

    /* A clean phase first: the runtime works, and victim receives messages. */
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, NULL, NULL));
    if (!strcmp(mode, "outside"))
        misuse_outside();
    if (!strcmp(mode, "destroyed"))
        CHECK_OK(tess_array_destroy(victim));
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
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

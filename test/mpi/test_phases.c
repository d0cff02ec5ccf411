/* test_phases: several tess_run phases with MPI in between.
 *
 *   phase 1 (until exit): each element sends its value to its right neighbour, which adds it
 *           in; then a reduction to element 0, which ends the phase with tess_exit_with(sum).
 *   between: tess_result gives phase 1's value on every rank; tess_array_local and
 *           tess_array_foreach agree; an MPI_Allreduce on MPI_COMM_WORLD of local state matches
 *           the phase's value; then every element's state is changed from the main thread.
 *   phase 2 (until quiescence): each element sends its (changed) state to its left
 *           neighbour, which checks it sees the change; no value: TESS_ERR_NOT_FOUND.
 *   phase 3 (until exit): tess_exit() without a value: TESS_ERR_NOT_FOUND again; then
 *   phase 4: tess_exit_with a 40-byte value: a smaller buffer gives TESS_ERR_TRUNCATED with the
 *           first bytes and the full size. */
#include "tess_test.h"

typedef struct {
    int64_t value;
    int64_t from_left;    /* phase 1: the left neighbour's value */
    int64_t from_right;   /* phase 2: the right neighbour's changed value */
    int64_t epoch;        /* set between phases by the main thread */
    int     got1, got2;
} elem_t;

static tess_array_h arr;
static tess_entry_t E_P1, E_P1RECV, E_SUM, E_P2, E_P2RECV, E_EXIT, E_EXITV;
static int32_t      n;
static int64_t      phase_epoch; /* written by main between phases, read by entries */

static int64_t initial(int64_t i) { return 1000 + 7 * i * i - 3 * i; }
static int64_t changed(int64_t i, int64_t sum) { return sum - 11 * i; }

static void ctor(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    ((elem_t *)e)->value = initial(tess_ctx_linear(ctx));
}

static void p1(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    int64_t me = tess_ctx_linear(ctx);
    CHECK_OK(tess_send(arr, tess_idx1((int32_t)((me + 1) % n)), E_P1RECV, &el->value,
                       sizeof(el->value)));
}

static void p1recv(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    int64_t me = tess_ctx_linear(ctx);
    CHECK(size == sizeof(int64_t) && !el->got1);
    memcpy(&el->from_left, msg, sizeof(int64_t));
    CHECK(el->from_left == initial((me + n - 1) % n));
    el->got1 = 1;
    int64_t v = el->value + el->from_left;
    CHECK_OK(tess_contribute(ctx, 1, &v, 1, TESS_INT64, TESS_SUM,
                             tess_cb_element(arr, tess_idx1(0), E_SUM)));
}

static void sum_done(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e;
    CHECK(tess_ctx_linear(ctx) == 0 && size == sizeof(int64_t));
    CHECK_OK(tess_exit_with(msg, size));
}

static void p2(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)msg, (void)size;
    elem_t *el = e;
    int64_t me = tess_ctx_linear(ctx);
    CHECK_MSG(el->epoch == phase_epoch && phase_epoch == 2, "element %lld: epoch %lld in phase "
              "%lld", (long long)me, (long long)el->epoch, (long long)phase_epoch);
    int64_t out[2] = {el->value, el->epoch};
    CHECK_OK(tess_send(arr, tess_idx1((int32_t)((me + n - 1) % n)), E_P2RECV, out, sizeof(out)));
}

static int64_t sum1;

static void p2recv(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    elem_t *el = e;
    int64_t me = tess_ctx_linear(ctx), in[2];
    CHECK(size == sizeof(in) && !el->got2);
    memcpy(in, msg, sizeof(in));
    /* The neighbour's state as the main thread changed it between the phases. */
    CHECK_MSG(in[0] == changed((me + 1) % n, sum1) && in[1] == 2, "element %lld got %lld/%lld",
              (long long)me, (long long)in[0], (long long)in[1]);
    el->from_right = in[0];
    el->got2       = 1;
}

static void do_exit(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e, (void)msg, (void)size;
    if (tess_ctx_linear(ctx) == n - 1)
        CHECK_OK(tess_exit());
}

static void do_exit_value(tess_ctx_h ctx, void *e, const void *msg, size_t size)
{
    (void)e, (void)msg, (void)size;
    if (tess_ctx_linear(ctx) == n / 2) {
        char v[40];
        for (int i = 0; i < 40; i++)
            v[i] = (char)('a' + i % 26);
        CHECK_OK(tess_exit_with(v, sizeof(v)));
    }
}

static tess_entry_t start_entry;

static void start(void *arg)
{
    (void)arg;
    if (tess_process() == 0)
        CHECK_OK(tess_broadcast(arr, start_entry, NULL, 0));
}

typedef struct {
    int64_t sum;
    int64_t count;
} acc_t;

static void sum_state(tess_ctx_h ctx, void *e, void *arg)
{
    elem_t *el = e;
    acc_t  *a  = arg;
    CHECK(el->got1 && el->from_left == initial((tess_ctx_linear(ctx) + n - 1) % n));
    CHECK(tess_array_local(arr, tess_ctx_index(ctx)) == e);
    a->sum += el->value + el->from_left;
    a->count++;
}

static void change_state(tess_ctx_h ctx, void *e, void *arg)
{
    elem_t *el = e;
    el->value  = changed(tess_ctx_linear(ctx), *(int64_t *)arg);
    el->epoch  = 2;
}

static void check_p2(tess_ctx_h ctx, void *e, void *arg)
{
    (void)arg;
    elem_t *el = e;
    CHECK(el->got2 && el->from_right == changed((tess_ctx_linear(ctx) + 1) % n, sum1));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    n = 3 * tess_num_pes() + 2;
    CHECK_OK(tess_entry_register("p1", p1, &E_P1));
    CHECK_OK(tess_entry_register("p1recv", p1recv, &E_P1RECV));
    CHECK_OK(tess_entry_register("sum", sum_done, &E_SUM));
    CHECK_OK(tess_entry_register("p2", p2, &E_P2));
    CHECK_OK(tess_entry_register("p2recv", p2recv, &E_P2RECV));
    CHECK_OK(tess_entry_register("exit", do_exit, &E_EXIT));
    CHECK_OK(tess_entry_register("exit_value", do_exit_value, &E_EXITV));
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_NAME, .name = "phased", .ndims = 1,
                             .extents = {n}, .elem_size = sizeof(elem_t), .ctor = ctor};
    CHECK_OK(tess_array_create(&p, &arr));

    /* No phase yet: no value. */
    int64_t v = 0;
    CHECK(tess_result(&v, sizeof(v), NULL) == TESS_ERR_NOT_FOUND);

    /* Phase 1. */
    phase_epoch = 1;
    start_entry = E_P1;
    CHECK_OK(tess_run(TESS_RUN_UNTIL_EXIT, start, NULL));
    size_t len = 0;
    CHECK_OK(tess_result(&v, sizeof(v), &len));
    int64_t want = 0;
    for (int64_t i = 0; i < n; i++)
        want += initial(i) + initial((i + n - 1) % n);
    CHECK_MSG(len == sizeof(v) && v == want, "phase 1 returned %lld (%zu bytes), expected %lld",
              (long long)v, len, (long long)want);
    /* tess_result can be read again, and a NULL size pointer is fine. */
    int64_t v2 = 0;
    CHECK_OK(tess_result(&v2, sizeof(v2), NULL));
    CHECK(v2 == v);

    /* Between phases: the same sum from the local elements, through MPI. */
    acc_t a = {0, 0};
    CHECK_OK(tess_array_foreach(arr, sum_state, &a));
    int64_t mine[2] = {a.sum, a.count}, all[2];
    MPI_Allreduce(mine, all, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK(all[0] == v && all[1] == n && a.count == tess_array_num_local(arr));
    for (int32_t i = 0; i < n; i++) {
        elem_t *el = tess_array_local(arr, tess_idx1(i));
        int     loc;
        CHECK_OK(tess_array_location(arr, tess_idx1(i), &loc));
        CHECK((el != NULL) == (tess_pe_process(loc) == tess_process()));
    }
    CHECK(tess_array_local(arr, tess_idx1(n)) == NULL && tess_array_local(arr, tess_idx1(-1)) == NULL);
    sum1 = all[0];
    CHECK_OK(tess_array_foreach(arr, change_state, &sum1));
    phase_epoch = 2;

    /* Phase 2: sees the changes; ends at quiescence without a value. */
    start_entry = E_P2;
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, start, NULL));
    CHECK_OK(tess_array_foreach(arr, check_p2, NULL));
    len = 99;
    CHECK(tess_result(&v, sizeof(v), &len) == TESS_ERR_NOT_FOUND && len == 0);

    /* Phase 3: tess_exit without a value. */
    start_entry = E_EXIT;
    CHECK_OK(tess_run(TESS_RUN_UNTIL_EXIT, start, NULL));
    CHECK(tess_result(&v, sizeof(v), &len) == TESS_ERR_NOT_FOUND);

    /* Phase 4: a 40-byte value into a 16-byte buffer. */
    start_entry = E_EXITV;
    CHECK_OK(tess_run(TESS_RUN_UNTIL_EXIT, start, NULL));
    char small[16 + 1];
    memset(small, 0, sizeof(small));
    CHECK(tess_result(small, 16, &len) == TESS_ERR_TRUNCATED && len == 40);
    for (int i = 0; i < 16; i++)
        CHECK(small[i] == (char)('a' + i % 26));
    CHECK(small[16] == 0);
    char big[64];
    CHECK_OK(tess_result(big, sizeof(big), &len));
    CHECK(len == 40 && big[39] == (char)('a' + 39 % 26));

    /* A phase with nothing to do: the old value is gone. */
    CHECK_OK(tess_run(TESS_RUN_UNTIL_QUIESCENCE, NULL, NULL));
    CHECK(tess_result(big, sizeof(big), &len) == TESS_ERR_NOT_FOUND);
    if (tess_process() == 0)
        printf("phases: %d elements, 5 phases: ok\n", n);
    test_fini();
    return 0;
}

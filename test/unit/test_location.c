/* test_location: element indices and initial placement without MPI — linearize/delinearize
 * round trips on 1-3 D arrays with odd extents, out-of-range indices, and the block,
 * round-robin and user maps. */
#include "objects/objects.h"
#include "tess_test.h"

static tess_array_t make_array(int ndims, int32_t x, int32_t y, int32_t z)
{
    tess_array_t a;
    memset(&a, 0, sizeof(a));
    a.ndims  = ndims;
    a.ext[0] = x;
    a.ext[1] = ndims >= 2 ? y : 1;
    a.ext[2] = ndims >= 3 ? z : 1;
    a.size   = (int64_t)a.ext[0] * a.ext[1] * a.ext[2];
    return a;
}

static void test_round_trip(int ndims, int32_t x, int32_t y, int32_t z)
{
    tess_array_t a    = make_array(ndims, x, y, z);
    char        *seen = calloc((size_t)a.size, 1);
    CHECK(seen);
    int64_t expect = 0;
    /* Row-major, x slowest: visiting x, then y, then z in nested order gives 0, 1, 2, … */
    for (int32_t i = 0; i < a.ext[0]; i++)
        for (int32_t j = 0; j < a.ext[1]; j++)
            for (int32_t k = 0; k < a.ext[2]; k++) {
                tess_index_t idx = {i, j, k};
                int64_t      lin = tess_obj_linearize(&a, idx);
                CHECK_MSG(lin == expect, "%dD (%d,%d,%d) -> %lld, expected %lld", ndims, i, j, k,
                          (long long)lin, (long long)expect);
                CHECK(!seen[lin]);
                seen[lin]        = 1;
                tess_index_t back = tess_obj_delinearize(&a, lin);
                CHECK(back.x == i && back.y == j && back.z == k);
                expect++;
            }
    CHECK(expect == a.size);
    for (int64_t l = 0; l < a.size; l++) {
        tess_index_t idx = tess_obj_delinearize(&a, l);
        CHECK(tess_obj_linearize(&a, idx) == l);
        CHECK(idx.x >= 0 && idx.x < a.ext[0] && idx.y >= 0 && idx.y < a.ext[1] && idx.z >= 0 &&
              idx.z < a.ext[2]);
    }
    free(seen);

    /* Out of range in every dimension, including the ones the array does not have. */
    const tess_index_t bad[] = {
        {-1, 0, 0}, {a.ext[0], 0, 0}, {0, -1, 0}, {0, a.ext[1], 0}, {0, 0, -1},
        {0, 0, a.ext[2]}, {INT32_MAX, 0, 0}, {INT32_MIN, 0, 0}, {0, INT32_MAX, INT32_MAX},
        {a.ext[0] - 1, a.ext[1], a.ext[2] - 1},
    };
    for (size_t b = 0; b < TESS_ARRAY_LEN(bad); b++)
        CHECK_MSG(tess_obj_linearize(&a, bad[b]) == -1, "%dD: (%d,%d,%d) accepted", ndims,
                  bad[b].x, bad[b].y, bad[b].z);
    /* The last valid index. */
    tess_index_t last = {a.ext[0] - 1, a.ext[1] - 1, a.ext[2] - 1};
    CHECK(tess_obj_linearize(&a, last) == a.size - 1);
}

static void test_linear_large(void)
{
    /* A big 3-D array: 64-bit linear indices, no overflow in the products. */
    tess_array_t a   = make_array(3, 9973, 1021, 101); /* ~1.03e9 elements */
    tess_index_t idx = {9972, 1020, 100};
    CHECK(tess_obj_linearize(&a, idx) == a.size - 1);
    tess_index_t mid = {5000, 17, 99};
    int64_t      l   = tess_obj_linearize(&a, mid);
    CHECK(l == ((int64_t)5000 * 1021 + 17) * 101 + 99);
    tess_index_t b = tess_obj_delinearize(&a, l);
    CHECK(b.x == 5000 && b.y == 17 && b.z == 99);
}

/* ---- maps -------------------------------------------------------------------------------- */

static tess_array_params_t params_1d(int32_t n, uint64_t mask, tess_map_t map)
{
    tess_array_params_t p = {.field_mask = mask, .ndims = 1, .extents = {n}, .map = map};
    return p;
}

static void test_block(int64_t size, int npes)
{
    tess_array_params_t p   = params_1d((int32_t)size, 0, TESS_MAP_BLOCK);
    int64_t            *cnt = calloc((size_t)npes, sizeof(int64_t));
    CHECK(cnt);
    int prev = 0;
    for (int64_t l = 0; l < size; l++) {
        int pe = tess_obj_map(&p, size, l, npes);
        CHECK_MSG(pe >= 0 && pe < npes, "block %lld/%d: element %lld on PE %d", (long long)size,
                  npes, (long long)l, pe);
        CHECK_MSG(pe >= prev, "block %lld/%d: not contiguous at %lld", (long long)size, npes,
                  (long long)l);
        prev = pe;
        cnt[pe]++;
    }
    int64_t lo = size, hi = 0;
    for (int q = 0; q < npes; q++) {
        lo = cnt[q] < lo ? cnt[q] : lo;
        hi = cnt[q] > hi ? cnt[q] : hi;
    }
    CHECK_MSG(hi - lo <= 1, "block %lld/%d: sizes %lld..%lld", (long long)size, npes,
              (long long)lo, (long long)hi);
    if (size >= npes)
        CHECK(lo >= 1); /* every PE has work */
    else
        CHECK(hi == 1); /* no PE gets two while another gets none */
    /* The same with the map field set explicitly. */
    tess_array_params_t q = params_1d((int32_t)size, TESS_ARRAY_FIELD_MAP, TESS_MAP_BLOCK);
    for (int64_t l = 0; l < size; l += 1 + size / 50)
        CHECK(tess_obj_map(&q, size, l, npes) == tess_obj_map(&p, size, l, npes));
    free(cnt);
}

static void test_block_large(void)
{
    /* Near the 2^40 limit, linear * npes overflows 64 bits unless computed wider. */
    int64_t             size = ((int64_t)1 << 40) - 1;
    int                 npes = 1 << 20;
    tess_array_params_t p    = {.ndims = 1, .extents = {1}};
    int                 prev = 0;
    for (int64_t l = 0; l < size; l += size / 997) {
        int pe = tess_obj_map(&p, size, l, npes);
        CHECK(pe >= prev && pe < npes);
        prev = pe;
    }
    CHECK(tess_obj_map(&p, size, size - 1, npes) == npes - 1);
    CHECK(tess_obj_map(&p, size, 0, npes) == 0);
}

static void test_round_robin(void)
{
    for (int npes = 1; npes <= 9; npes++) {
        tess_array_params_t p = params_1d(100, TESS_ARRAY_FIELD_MAP, TESS_MAP_ROUND_ROBIN);
        for (int64_t l = 0; l < 100; l++)
            CHECK(tess_obj_map(&p, 100, l, npes) == (int)(l % npes));
    }
}

typedef struct user_arg {
    int calls;
    int bad_args;
    int ndims;
    int32_t ext[3];
} user_arg_t;

static int user_map(tess_index_t i, const int32_t extents[3], int num_pes, void *arg)
{
    user_arg_t *u = arg;
    u->calls++;
    for (int d = 0; d < 3; d++)
        if (extents[d] != u->ext[d])
            u->bad_args++;
    if (i.x < 0 || i.x >= extents[0] || i.y < 0 || i.y >= extents[1] || i.z < 0 ||
        i.z >= extents[2])
        u->bad_args++;
    return (i.x * 7 + i.y * 3 + i.z) % num_pes;
}

static void test_user(int ndims, int32_t x, int32_t y, int32_t z)
{
    user_arg_t          u = {.ndims = ndims, .ext = {x, ndims >= 2 ? y : 1, ndims >= 3 ? z : 1}};
    tess_array_params_t p = {.field_mask = TESS_ARRAY_FIELD_MAP, .ndims = ndims,
                             .extents = {x, ndims >= 2 ? y : 0, ndims >= 3 ? z : 0},
                             .map = TESS_MAP_USER, .map_fn = user_map, .map_arg = &u};
    tess_array_t a    = make_array(ndims, x, y, z);
    for (int64_t l = 0; l < a.size; l++) {
        tess_index_t i  = tess_obj_delinearize(&a, l);
        int          pe = tess_obj_map(&p, a.size, l, 5);
        CHECK(pe == (i.x * 7 + i.y * 3 + i.z) % 5);
    }
    CHECK(u.calls == a.size);
    CHECK_MSG(u.bad_args == 0, "the user map got %d bad extents or indices", u.bad_args);
}

int main(void)
{
    test_round_trip(1, 7, 0, 0);
    test_round_trip(1, 1, 0, 0);
    test_round_trip(2, 5, 3, 0);
    test_round_trip(2, 1, 9, 0);
    test_round_trip(3, 3, 5, 7);
    test_round_trip(3, 11, 1, 13);
    test_linear_large();
    static const int64_t sizes[] = {1, 2, 3, 7, 8, 13, 100, 1000, 1001};
    static const int     npes[]  = {1, 2, 3, 4, 7, 8, 16, 1024};
    for (size_t s = 0; s < TESS_ARRAY_LEN(sizes); s++)
        for (size_t n = 0; n < TESS_ARRAY_LEN(npes); n++)
            test_block(sizes[s], npes[n]);
    test_block_large();
    test_round_robin();
    test_user(1, 9, 0, 0);
    test_user(2, 4, 5, 0);
    test_user(3, 3, 2, 5);
    printf("location: ok\n");
    return 0;
}

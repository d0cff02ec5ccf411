/* test_reduce_ops: tess_reduce_apply for every (type, op) against a plain serial computation,
 * including integer wrap-around, negative min/max, logical ops giving 1/0 on floats, bitwise
 * ops rejected on floating types, and tess_reduce_check. No MPI. */
#include "core/core.h"
#include "tess_test.h"


#define N 37

static const tess_op_t all_ops[] = {TESS_SUM, TESS_PROD, TESS_MIN, TESS_MAX,
                                    TESS_LAND, TESS_LOR, TESS_BAND, TESS_BOR};
static const tess_dtype_t all_types[] = {TESS_INT32, TESS_INT64, TESS_FLOAT, TESS_DOUBLE};

static int is_float(tess_dtype_t t) { return t == TESS_FLOAT || t == TESS_DOUBLE; }
static int is_bitwise(tess_op_t o) { return o == TESS_BAND || o == TESS_BOR; }

/* Serial reference, one value at a time, written out per type (no shared macro with the code
 * under test). Integer sum/prod wrap: computed in the unsigned type. */
static int32_t ref_i32(tess_op_t op, int32_t a, int32_t b)
{
    switch (op) {
    case TESS_SUM:  return (int32_t)(uint32_t)((uint32_t)a + (uint32_t)b);
    case TESS_PROD: return (int32_t)(uint32_t)((uint32_t)a * (uint32_t)b);
    case TESS_MIN:  return a < b ? a : b;
    case TESS_MAX:  return a > b ? a : b;
    case TESS_LAND: return (a != 0 && b != 0) ? 1 : 0;
    case TESS_LOR:  return (a != 0 || b != 0) ? 1 : 0;
    case TESS_BAND: return a & b;
    case TESS_BOR:  return a | b;
    }
    abort();
}

static int64_t ref_i64(tess_op_t op, int64_t a, int64_t b)
{
    switch (op) {
    case TESS_SUM:  return (int64_t)((uint64_t)a + (uint64_t)b);
    case TESS_PROD: return (int64_t)((uint64_t)a * (uint64_t)b);
    case TESS_MIN:  return a < b ? a : b;
    case TESS_MAX:  return a > b ? a : b;
    case TESS_LAND: return (a != 0 && b != 0) ? 1 : 0;
    case TESS_LOR:  return (a != 0 || b != 0) ? 1 : 0;
    case TESS_BAND: return a & b;
    case TESS_BOR:  return a | b;
    }
    abort();
}

static double ref_f64(tess_op_t op, double a, double b)
{
    switch (op) {
    case TESS_SUM:  return a + b;
    case TESS_PROD: return a * b;
    case TESS_MIN:  return a < b ? a : b;
    case TESS_MAX:  return a > b ? a : b;
    case TESS_LAND: return (a != 0 && b != 0) ? 1.0 : 0.0;
    case TESS_LOR:  return (a != 0 || b != 0) ? 1.0 : 0.0;
    default: abort();
    }
}

static float ref_f32(tess_op_t op, float a, float b)
{
    switch (op) {
    case TESS_SUM:  return a + b;
    case TESS_PROD: return a * b;
    case TESS_MIN:  return a < b ? a : b;
    case TESS_MAX:  return a > b ? a : b;
    case TESS_LAND: return (a != 0 && b != 0) ? 1.0f : 0.0f;
    case TESS_LOR:  return (a != 0 || b != 0) ? 1.0f : 0.0f;
    default: abort();
    }
}

/* Values with negatives, zeros, extremes and (for floats) fractions and -0.0. */
static void gen_values(tess_dtype_t t, void *buf, int n, uint64_t *rng)
{
    for (int i = 0; i < n; i++) {
        uint64_t r    = test_rand(rng);
        int      kind = (int)(r % 8);
        switch (t) {
        case TESS_INT32: {
            int32_t v = kind == 0 ? 0 : kind == 1 ? INT32_MAX : kind == 2 ? INT32_MIN
                      : kind == 3 ? -(int32_t)(r >> 40 & 1023) : (int32_t)(uint32_t)(r >> 16);
            ((int32_t *)buf)[i] = v;
            break;
        }
        case TESS_INT64: {
            int64_t v = kind == 0 ? 0 : kind == 1 ? INT64_MAX : kind == 2 ? INT64_MIN
                      : kind == 3 ? -(int64_t)(r >> 40 & 1023) : (int64_t)test_rand(rng);
            ((int64_t *)buf)[i] = v;
            break;
        }
        case TESS_FLOAT: {
            float v = kind == 0 ? 0.0f : kind == 1 ? -0.0f : kind == 2 ? 0.25f
                    : kind == 3 ? -1e30f : (float)((int64_t)(r >> 20 & 0xffff) - 32768) / 8.0f;
            ((float *)buf)[i] = v;
            break;
        }
        case TESS_DOUBLE: {
            double v = kind == 0 ? 0.0 : kind == 1 ? -0.0 : kind == 2 ? 1e-300
                     : kind == 3 ? -1e300 : (double)((int64_t)(r >> 12) - (1ll << 51)) / 1024.0;
            ((double *)buf)[i] = v;
            break;
        }
        }
    }
}

/* Equal values (floats by value: min/max may return either of 0.0 and -0.0, which compare
 * equal; the inputs have no NaN). */
static int same(tess_dtype_t t, const void *a, const void *b, int i)
{
    switch (t) {
    case TESS_INT32:  return ((const int32_t *)a)[i] == ((const int32_t *)b)[i];
    case TESS_INT64:  return ((const int64_t *)a)[i] == ((const int64_t *)b)[i];
    case TESS_FLOAT:  return ((const float *)a)[i] == ((const float *)b)[i];
    case TESS_DOUBLE: return ((const double *)a)[i] == ((const double *)b)[i];
    }
    return 0;
}

static void test_apply_all(void)
{
    uint64_t rng = 777;
    for (size_t ti = 0; ti < TESS_ARRAY_LEN(all_types); ti++) {
        tess_dtype_t t  = all_types[ti];
        size_t       es = tess_dtype_size(t);
        for (size_t oi = 0; oi < TESS_ARRAY_LEN(all_ops); oi++) {
            tess_op_t op = all_ops[oi];
            for (int rep = 0; rep < 20; rep++) {
                unsigned char dst[N * 8], src[N * 8], want[N * 8], orig[N * 8];
                gen_values(t, dst, N, &rng);
                gen_values(t, src, N, &rng);
                memcpy(orig, dst, sizeof(orig));
                tess_status_t st = tess_reduce_apply(op, t, dst, src, N);
                if (is_float(t) && is_bitwise(op)) {
                    CHECK_MSG(st == TESS_ERR_INVALID, "%s on %s accepted", tess_op_name(op),
                              tess_dtype_name(t));
                    CHECK(!memcmp(dst, orig, N * es)); /* and nothing written */
                    continue;
                }
                CHECK_MSG(st == TESS_OK, "%s on %s: %d", tess_op_name(op), tess_dtype_name(t),
                          (int)st);
                for (int i = 0; i < N; i++) {
                    switch (t) {
                    case TESS_INT32:
                        ((int32_t *)want)[i] = ref_i32(op, ((int32_t *)orig)[i],
                                                       ((int32_t *)src)[i]);
                        break;
                    case TESS_INT64:
                        ((int64_t *)want)[i] = ref_i64(op, ((int64_t *)orig)[i],
                                                       ((int64_t *)src)[i]);
                        break;
                    case TESS_FLOAT:
                        ((float *)want)[i] = ref_f32(op, ((float *)orig)[i], ((float *)src)[i]);
                        break;
                    case TESS_DOUBLE:
                        ((double *)want)[i] = ref_f64(op, ((double *)orig)[i],
                                                      ((double *)src)[i]);
                        break;
                    }
                    CHECK_MSG(same(t, dst, want, i), "%s %s value %d differs", tess_dtype_name(t),
                              tess_op_name(op), i);
                }
                /* src is read only. */
                if (rep == 0) {
                    unsigned char src2[N * 8];
                    memcpy(src2, src, sizeof(src2));
                    tess_reduce_apply(op, t, dst, src, N);
                    CHECK(!memcmp(src, src2, N * es));
                }
            }
        }
    }
}

static void test_apply_cases(void)
{
    /* Wrap-around of integer sums and products. */
    int32_t a32[4] = {INT32_MAX, INT32_MIN, 65536, -1};
    int32_t b32[4] = {1, -1, 65536, INT32_MIN};
    CHECK_OK(tess_reduce_apply(TESS_SUM, TESS_INT32, a32, b32, 4));
    CHECK(a32[0] == INT32_MIN && a32[1] == INT32_MAX && a32[2] == 131072 && a32[3] == INT32_MAX);
    int32_t c32[4] = {INT32_MAX, INT32_MIN, 65536, -1};
    CHECK_OK(tess_reduce_apply(TESS_PROD, TESS_INT32, c32, b32, 4));
    CHECK(c32[0] == INT32_MAX && c32[1] == INT32_MIN && c32[2] == 0 && c32[3] == INT32_MIN);
    int64_t a64[3] = {INT64_MAX, INT64_MIN, (int64_t)1 << 32};
    int64_t b64[3] = {1, -1, (int64_t)1 << 32};
    CHECK_OK(tess_reduce_apply(TESS_SUM, TESS_INT64, a64, b64, 3));
    CHECK(a64[0] == INT64_MIN && a64[1] == INT64_MAX && a64[2] == (int64_t)1 << 33);
    int64_t c64[3] = {INT64_MAX, INT64_MIN, (int64_t)1 << 32};
    CHECK_OK(tess_reduce_apply(TESS_PROD, TESS_INT64, c64, b64, 3));
    CHECK(c64[0] == INT64_MAX && c64[1] == INT64_MIN && c64[2] == 0);

    /* Min and max with negatives. */
    int32_t m1[3] = {-5, 3, -2147483647}, m2[3] = {-7, -3, 0};
    CHECK_OK(tess_reduce_apply(TESS_MIN, TESS_INT32, m1, m2, 3));
    CHECK(m1[0] == -7 && m1[1] == -3 && m1[2] == -2147483647);
    double d1[3] = {-0.5, -1e300, 2.0}, d2[3] = {-0.25, 1.0, -2.0};
    CHECK_OK(tess_reduce_apply(TESS_MAX, TESS_DOUBLE, d1, d2, 3));
    CHECK(d1[0] == -0.25 && d1[1] == 1.0 && d1[2] == 2.0);
    float f1[2] = {-3.5f, 7.0f}, f2[2] = {-3.25f, -7.0f};
    CHECK_OK(tess_reduce_apply(TESS_MIN, TESS_FLOAT, f1, f2, 2));
    CHECK(f1[0] == -3.5f && f1[1] == -7.0f);

    /* Logical ops give exactly 1 or 0, also on floats; -0.0 is false. */
    float l1[5] = {0.5f, 0.0f, -2.0f, -0.0f, 0.0f}, l2[5] = {2.0f, 3.0f, -1e-30f, 1.0f, 0.0f};
    float l3[5];
    memcpy(l3, l1, sizeof(l1));
    CHECK_OK(tess_reduce_apply(TESS_LAND, TESS_FLOAT, l1, l2, 5));
    CHECK(l1[0] == 1.0f && l1[1] == 0.0f && l1[2] == 1.0f && l1[3] == 0.0f && l1[4] == 0.0f);
    CHECK_OK(tess_reduce_apply(TESS_LOR, TESS_FLOAT, l3, l2, 5));
    CHECK(l3[0] == 1.0f && l3[1] == 1.0f && l3[2] == 1.0f && l3[3] == 1.0f && l3[4] == 0.0f);
    double g1[2] = {0.125, 0.0}, g2[2] = {-4.0, -0.0};
    CHECK_OK(tess_reduce_apply(TESS_LOR, TESS_DOUBLE, g1, g2, 2));
    CHECK(g1[0] == 1.0 && g1[1] == 0.0);
    int64_t i1[3] = {-5, 0, 7}, i2[3] = {9, 9, 0};
    CHECK_OK(tess_reduce_apply(TESS_LAND, TESS_INT64, i1, i2, 3));
    CHECK(i1[0] == 1 && i1[1] == 0 && i1[2] == 0);

    /* Bitwise. */
    int32_t w1[2] = {0x0ff0, -1}, w2[2] = {0x00ff, INT32_MIN};
    CHECK_OK(tess_reduce_apply(TESS_BAND, TESS_INT32, w1, w2, 2));
    CHECK(w1[0] == 0x00f0 && w1[1] == INT32_MIN);
    int64_t v1[1] = {(int64_t)1 << 62}, v2[1] = {1};
    CHECK_OK(tess_reduce_apply(TESS_BOR, TESS_INT64, v1, v2, 1));
    CHECK(v1[0] == ((int64_t)1 << 62 | 1));
    float  fb[1] = {1.0f};
    double db[1] = {1.0};
    CHECK(tess_reduce_apply(TESS_BAND, TESS_FLOAT, fb, fb, 1) == TESS_ERR_INVALID);
    CHECK(tess_reduce_apply(TESS_BOR, TESS_FLOAT, fb, fb, 1) == TESS_ERR_INVALID);
    CHECK(tess_reduce_apply(TESS_BAND, TESS_DOUBLE, db, db, 1) == TESS_ERR_INVALID);
    CHECK(tess_reduce_apply(TESS_BOR, TESS_DOUBLE, db, db, 1) == TESS_ERR_INVALID);
    CHECK(fb[0] == 1.0f && db[0] == 1.0);

    /* Unknown ops and types, and count 0 (nothing changes). */
    CHECK(tess_reduce_apply((tess_op_t)8, TESS_INT32, w1, w2, 1) == TESS_ERR_INVALID);
    CHECK(tess_reduce_apply((tess_op_t)-1, TESS_INT64, v1, v2, 1) == TESS_ERR_INVALID);
    CHECK(tess_reduce_apply(TESS_SUM, (tess_dtype_t)4, w1, w2, 1) == TESS_ERR_INVALID);
    int32_t z1[1] = {5}, z2[1] = {6};
    CHECK_OK(tess_reduce_apply(TESS_SUM, TESS_INT32, z1, z2, 0));
    CHECK(z1[0] == 5);
}

static void test_check(void)
{
    for (size_t ti = 0; ti < TESS_ARRAY_LEN(all_types); ti++)
        for (size_t oi = 0; oi < TESS_ARRAY_LEN(all_ops); oi++) {
            tess_dtype_t  t  = all_types[ti];
            tess_op_t     op = all_ops[oi];
            tess_status_t st = tess_reduce_check(17, t, op);
            if (is_float(t) && is_bitwise(op)) {
                CHECK(st == TESS_ERR_INVALID);
                CHECK(strstr(tess_error_detail(), tess_op_name(op)));
                CHECK(strstr(tess_error_detail(), tess_dtype_name(t)));
            } else {
                CHECK_MSG(st == TESS_OK, "%s %s", tess_dtype_name(t), tess_op_name(op));
            }
            CHECK(tess_reduce_check(1, t, op) == st);
        }
    CHECK(tess_reduce_check(0, TESS_INT32, TESS_SUM) == TESS_ERR_INVALID);
    CHECK(tess_reduce_check(-1, TESS_INT32, TESS_SUM) == TESS_ERR_INVALID);
    CHECK(tess_reduce_check(1, (tess_dtype_t)4, TESS_SUM) == TESS_ERR_INVALID);
    CHECK(tess_reduce_check(1, (tess_dtype_t)-1, TESS_SUM) == TESS_ERR_INVALID);
    CHECK(tess_reduce_check(1, TESS_INT32, (tess_op_t)8) == TESS_ERR_INVALID);
    CHECK(tess_reduce_check(1, TESS_INT32, (tess_op_t)-1) == TESS_ERR_INVALID);

    CHECK(tess_dtype_size(TESS_INT32) == 4 && tess_dtype_size(TESS_INT64) == 8);
    CHECK(tess_dtype_size(TESS_FLOAT) == 4 && tess_dtype_size(TESS_DOUBLE) == 8);
    CHECK(tess_dtype_size((tess_dtype_t)9) == 0);
    CHECK(!strcmp(tess_op_name(TESS_LAND), "TESS_LAND") &&
          !strcmp(tess_dtype_name(TESS_FLOAT), "TESS_FLOAT"));
    CHECK(!strcmp(tess_op_name((tess_op_t)99), "?") && !strcmp(tess_dtype_name((tess_dtype_t)99), "?"));
}

int main(void)
{
    test_apply_all();
    test_apply_cases();
    test_check();
    printf("reduce_ops: ok\n");
    return 0;
}

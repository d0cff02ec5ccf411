/* reduce_ops.c — the reduction operators over the four element types. Logical operators work on
 * every type (nonzero is true, the result is 1 or 0); bitwise operators on the integer types. */
#include "core_int.h"

size_t tess_dtype_size(tess_dtype_t type)
{
    switch (type) {
    case TESS_INT32:  return 4;
    case TESS_INT64:  return 8;
    case TESS_FLOAT:  return 4;
    case TESS_DOUBLE: return 8;
    }
    return 0;
}

const char *tess_dtype_name(tess_dtype_t type)
{
    static const char *const names[] = {"TESS_INT32", "TESS_INT64", "TESS_FLOAT", "TESS_DOUBLE"};
    return (unsigned)type < TESS_ARRAY_LEN(names) ? names[type] : "?";
}

const char *tess_op_name(tess_op_t op)
{
    static const char *const names[] = {"TESS_SUM", "TESS_PROD", "TESS_MIN",  "TESS_MAX",
                                        "TESS_LAND", "TESS_LOR", "TESS_BAND", "TESS_BOR"};
    return (unsigned)op < TESS_ARRAY_LEN(names) ? names[op] : "?";
}

#define RED_LOOP(T, EXPR)                                                                    \
    do {                                                                                     \
        T       *d = dst;                                                                    \
        const T *s = src;                                                                    \
        for (int i = 0; i < count; i++) {                                                    \
            T a = d[i], b = s[i];                                                            \
            d[i] = (T)(EXPR);                                                                \
        }                                                                                    \
    } while (0)

/* Integer sums and products wrap (computed unsigned): signed overflow would be undefined. */
#define RED_ARITH(T, UT)                                                                     \
    switch (op) {                                                                            \
    case TESS_SUM:  RED_LOOP(T, (UT)a + (UT)b); return TESS_OK;                              \
    case TESS_PROD: RED_LOOP(T, (UT)a * (UT)b); return TESS_OK;                              \
    case TESS_MIN:  RED_LOOP(T, b < a ? b : a); return TESS_OK;                              \
    case TESS_MAX:  RED_LOOP(T, b > a ? b : a); return TESS_OK;                              \
    case TESS_LAND: RED_LOOP(T, (a != 0) && (b != 0)); return TESS_OK;                       \
    case TESS_LOR:  RED_LOOP(T, (a != 0) || (b != 0)); return TESS_OK;                       \
    default: break;                                                                          \
    }

tess_status_t tess_reduce_apply(tess_op_t op, tess_dtype_t type, void *dst, const void *src,
                                int count)
{
    switch (type) {
    case TESS_INT32:
        RED_ARITH(int32_t, uint32_t)
        if (op == TESS_BAND) { RED_LOOP(int32_t, a & b); return TESS_OK; }
        if (op == TESS_BOR)  { RED_LOOP(int32_t, a | b); return TESS_OK; }
        break;
    case TESS_INT64:
        RED_ARITH(int64_t, uint64_t)
        if (op == TESS_BAND) { RED_LOOP(int64_t, a & b); return TESS_OK; }
        if (op == TESS_BOR)  { RED_LOOP(int64_t, a | b); return TESS_OK; }
        break;
    case TESS_FLOAT:
        RED_ARITH(float, float)
        break;
    case TESS_DOUBLE:
        RED_ARITH(double, double)
        break;
    }
    return TESS_ERR_INVALID;
}

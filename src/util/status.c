/* status.c — status strings, the per-thread error detail, and fatal errors. */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Thread_local char tess_detail[512];
static tess_abort_fn_t    tess_abort_fn;
static _Atomic(tess_cleanup_fn_t) tess_cleanups[8];

const char *tess_status_string(tess_status_t status)
{
    switch (status) {
    case TESS_OK:              return "success";
    case TESS_INPROGRESS:      return "operation in progress";
    case TESS_ERR_INVALID:     return "invalid argument";
    case TESS_ERR_NO_MEMORY:   return "out of memory";
    case TESS_ERR_MPI:         return "MPI error";
    case TESS_ERR_UCX:         return "UCX error";
    case TESS_ERR_GPU:         return "device runtime error";
    case TESS_ERR_STATE:       return "invalid state for this call";
    case TESS_ERR_UNSUPPORTED: return "not supported";
    case TESS_ERR_MISMATCH:    return "ranks disagree";
    case TESS_ERR_NOT_FOUND:   return "not found";
    case TESS_ERR_SYSTEM:      return "system call failed";
    case TESS_ERR_TRUNCATED:   return "buffer too small";
    case TESS_ERR_CORRUPT:     return "corrupt message";
    case TESS_ERR_BUSY:        return "resource busy";
    }
    return "unknown status";
}

const char *tess_error_detail(void)
{
    return tess_detail;
}

void tess_error_clear(void)
{
    tess_detail[0] = '\0';
}

static void detail_vset(tess_status_t status, const char *fmt, va_list ap)
{
    /* Formatted apart first: an argument may be tess_error_detail() itself (a lower layer's
     * text passed on), and vsnprintf must not write into what it reads. */
    char tmp[sizeof(tess_detail)];
    int  n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    memcpy(tess_detail, tmp, sizeof(tmp));
    if (n >= 0 && (size_t)n < sizeof(tess_detail) - 4)
        snprintf(tess_detail + n, sizeof(tess_detail) - (size_t)n, " (%s)",
                 tess_status_string(status));
}

tess_status_t tess_error_at(tess_status_t status, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    detail_vset(status, fmt, ap);
    va_end(ap);
    tess_log_at(TESS_LOG_ERROR, file, line, "%s", tess_detail);
    return status;
}

tess_status_t tess_error_quiet(tess_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    detail_vset(status, fmt, ap);
    va_end(ap);
    return status;
}

void tess_set_abort_fn(tess_abort_fn_t fn)
{
    tess_abort_fn = fn;
}

void tess_add_abort_cleanup(tess_cleanup_fn_t fn)
{
    for (size_t i = 0; i < TESS_ARRAY_LEN(tess_cleanups); i++) {
        tess_cleanup_fn_t none = NULL;
        if (atomic_compare_exchange_strong(&tess_cleanups[i], &none, fn))
            return;
    }
    tess_warn("too many abort cleanups; one is not registered");
}

void tess_remove_abort_cleanup(tess_cleanup_fn_t fn)
{
    for (size_t i = 0; i < TESS_ARRAY_LEN(tess_cleanups); i++) {
        tess_cleanup_fn_t f = fn;
        atomic_compare_exchange_strong(&tess_cleanups[i], &f, NULL);
    }
}

static void tess_run_cleanups(void)
{
    for (size_t i = TESS_ARRAY_LEN(tess_cleanups); i-- > 0;) {
        tess_cleanup_fn_t fn = atomic_exchange(&tess_cleanups[i], NULL);
        if (fn)
            fn();
    }
}

_Noreturn void tess_fatal_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* Always printed, whatever the log level: tess_log_vat does not look at the level (the
     * tess_log macro does), so there is nothing to change — and writing the global level here
     * raced with every other thread's logging. */
    tess_log_vat(-1, file, line, fmt, ap);
    va_end(ap);
    fflush(stderr);
    tess_run_cleanups();
    if (tess_abort_fn)
        tess_abort_fn(134);
    _exit(134);
}

tess_status_t tess_check_field_mask(uint64_t mask, const tess_mask_field_t *f, size_t n,
                                    const char *who)
{
    for (size_t i = 0; i < n; i++)
        if (f[i].set && !(mask & f[i].bit))
            return tess_error(TESS_ERR_INVALID, "%s: %s is set but field_mask lacks %s, so it "
                              "would be ignored (add the bit, or leave the field zero)", who,
                              f[i].field, f[i].bit_name);
    return TESS_OK;
}

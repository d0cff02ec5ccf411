/*
 * tessera/status.h — the part of Tessera's API that every other part builds on: the status type
 * every function returns, its text, the log levels, and TESS_API, the mark of the functions the
 * library exports. <tessera.h> includes it; it needs neither MPI nor a device runtime.
 *
 * Status. Functions return tess_status_t: TESS_OK (0), TESS_INPROGRESS (> 0) or a negative error.
 * The error is logged once where it was found; tess_error_detail() returns that text for the
 * calling thread.
 */
#ifndef TESSERA_STATUS_H
#define TESSERA_STATUS_H

/* The library is built with hidden visibility: it exports the functions its installed headers
 * declare with TESS_API and nothing else. */
#if defined(__GNUC__) || defined(__clang__)
#define TESS_API __attribute__((visibility("default")))
#else
#define TESS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tess_status {
    TESS_OK               = 0,
    TESS_INPROGRESS       = 1,   /**< operation started, completes later */
    TESS_ERR_INVALID      = -1,  /**< an argument is invalid */
    TESS_ERR_NO_MEMORY    = -2,  /**< host or device memory exhausted */
    TESS_ERR_MPI          = -3,  /**< an MPI call failed, or MPI is not usable */
    TESS_ERR_UCX          = -4,  /**< a UCX call failed */
    TESS_ERR_GPU          = -5,  /**< a device runtime (CUDA, HIP, host backend) call failed */
    TESS_ERR_STATE        = -6,  /**< the call is not valid now (not initialised, inside a phase…) */
    TESS_ERR_UNSUPPORTED  = -7,  /**< not supported by this build or backend */
    TESS_ERR_MISMATCH     = -8,  /**< ranks disagree about a collective call */
    TESS_ERR_NOT_FOUND    = -9,  /**< no such object */
    TESS_ERR_SYSTEM       = -10, /**< an operating-system call failed */
    TESS_ERR_TRUNCATED    = -11, /**< a buffer is too small for the data */
    TESS_ERR_CORRUPT      = -12, /**< a message failed validation */
    TESS_ERR_BUSY         = -13  /**< a resource is temporarily exhausted */
} tess_status_t;

/** Short text of a status ("invalid argument"). Any thread. Never NULL. */
TESS_API const char *tess_status_string(tess_status_t status);

/** Full text of the error of the last Tessera call on the calling thread: every error status a
 *  call returns comes with one; after a call that succeeded it is "". Any thread. The string
 *  stays valid until the next Tessera call on this thread. (The tess_gpu_* calls of
 *  tessera/gpu.h set it when they fail but do not clear it when they succeed.) */
TESS_API const char *tess_error_detail(void);

/** Log levels (tess_params_t.log_level, TESS_LOG, +tess-log). */
typedef enum tess_log_level {
    TESS_LOG_ERROR = 0,
    TESS_LOG_WARN  = 1,
    TESS_LOG_INFO  = 2,
    TESS_LOG_DEBUG = 3,
    TESS_LOG_TRACE = 4
} tess_log_level_t;

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_STATUS_H */

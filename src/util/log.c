/* log.c — leveled logging to stderr with a "[tessera r<rank> pe<pe>]" prefix. */
#include "util.h"

#include <stdio.h>
#include <strings.h>

int                     tess_log_level = TESS_LOG_WARN;
_Thread_local int       tess_log_pe    = -1;
static int              tess_log_rank  = -1;

static const char *const tess_level_names[] = {"error", "warn", "info", "debug", "trace"};

void tess_log_set_rank(int rank)
{
    tess_log_rank = rank;
}

int tess_log_level_parse(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < (int)TESS_ARRAY_LEN(tess_level_names); i++)
        if (!strcasecmp(s, tess_level_names[i]))
            return i;
    if (s[0] >= '0' && s[0] <= '4' && s[1] == '\0')
        return s[0] - '0';
    return -1;
}

void tess_log_vat(int level, const char *file, int line, const char *fmt, va_list ap)
{
    char        buf[1024];
    const char *base = strrchr(file, '/');
    const char *lname = level < 0 ? "FATAL" : tess_level_names[TESS_MIN(level, 4)];
    int n = snprintf(buf, sizeof(buf), "[tessera r%d pe%d] %s %s:%d: ", tess_log_rank,
                     tess_log_pe, lname, base ? base + 1 : file, line);
    if (n < 0)
        return;
    if ((size_t)n < sizeof(buf))
        vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    /* One write per line so lines of different threads do not interleave. */
    fprintf(stderr, "%s\n", buf);
}

void tess_log_at(int level, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tess_log_vat(level, file, line, fmt, ap);
    va_end(ap);
}

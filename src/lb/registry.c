/*
 * registry.c — load-balancing strategies by name: the built-ins (strategy.c, evencount.c) and
 * up to LB_MAX_REGISTERED registered by the program (tess_lb_register), looked up by
 * tess_lb_find, listed for error messages, and the nearest built-in name for a misspelt one.
 */
#include "lb.h"
#include "util/util.h"

#include <stdio.h>
#include <string.h>

#define LB_MAX_REGISTERED 16
#define LB_NAME_MAX       64

typedef struct lb_named {
    char                  name[LB_NAME_MAX];
    tess_lb_strategy_fn_t fn;
    void                 *arg;
} lb_named_t;

static const lb_named_t lb_builtins[] = {
    {"greedy", tess_lb_greedy, NULL},
    {"refine", tess_lb_refine, NULL},
    {"greedyrefine", tess_lb_greedy_refine, NULL},
    {"hybrid", tess_lb_hybrid, NULL},
    {"evencount", tess_lb_evencount, NULL},
    {"rotate", tess_lb_rotate, NULL},
    {"none", tess_lb_none, NULL},
};

/* Registered in main before the first step (one thread), read by PE 0 during steps. */
static lb_named_t lb_registered[LB_MAX_REGISTERED];
static int        lb_nregistered;

static const lb_named_t *lb_builtin_find(const char *name)
{
    for (size_t i = 0; i < TESS_ARRAY_LEN(lb_builtins); i++)
        if (strcmp(lb_builtins[i].name, name) == 0)
            return &lb_builtins[i];
    return NULL;
}

static lb_named_t *lb_registered_find(const char *name)
{
    for (int i = 0; i < lb_nregistered; i++)
        if (strcmp(lb_registered[i].name, name) == 0)
            return &lb_registered[i];
    return NULL;
}

tess_status_t tess_lb_register(const char *name, tess_lb_strategy_fn_t fn, void *arg)
{
    tess_error_clear();
    if (!name || !name[0])
        return tess_error(TESS_ERR_INVALID, "tess_lb_register: the name is %s",
                          name ? "empty" : "NULL");
    if (!fn)
        return tess_error(TESS_ERR_INVALID, "tess_lb_register(\"%s\"): the function is NULL",
                          name);
    if (strlen(name) >= LB_NAME_MAX)
        return tess_error(TESS_ERR_INVALID, "tess_lb_register: name \"%.20s...\" longer than %d",
                          name, LB_NAME_MAX - 1);
    /* Built-ins are looked up first, so a registration under their name would never be used. */
    if (lb_builtin_find(name))
        return tess_error(TESS_ERR_INVALID, "tess_lb_register: \"%s\" is a built-in strategy",
                          name);
    lb_named_t *e = lb_registered_find(name);
    if (!e) {
        if (lb_nregistered == LB_MAX_REGISTERED)
            return tess_error(TESS_ERR_UNSUPPORTED,
                              "tess_lb_register: \"%s\": at most %d strategies can be registered",
                              name, LB_MAX_REGISTERED);
        e = &lb_registered[lb_nregistered++];
        strcpy(e->name, name); /* length checked above */
    }
    e->fn  = fn;
    e->arg = arg;
    return TESS_OK;
}

tess_lb_strategy_fn_t tess_lb_find(const char *name, void **arg_p)
{
    const lb_named_t *e = name ? lb_builtin_find(name) : NULL;
    if (!e && name)
        e = lb_registered_find(name);
    if (arg_p)
        *arg_p = e ? e->arg : NULL;
    return e ? e->fn : NULL;
}

const char *tess_lb_builtin_near(const char *name)
{
    for (size_t i = 0; name && i < TESS_ARRAY_LEN(lb_builtins); i++)
        if (tess_edit_distance(name, lb_builtins[i].name) <= (strlen(name) >= 8 ? 2 : 1))
            return lb_builtins[i].name;
    return NULL;
}

const char *tess_lb_names(char *buf, size_t len)
{
    size_t n = 0;
    buf[0]   = '\0';
    for (size_t i = 0; i < TESS_ARRAY_LEN(lb_builtins) && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", lb_builtins[i].name);
    for (int i = 0; i < lb_nregistered && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "; registered: ",
                              lb_registered[i].name);
    return buf;
}

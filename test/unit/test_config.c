/* test_config: tess_config_load without MPI — defaults, tess_params_t fields, TESS_* variables
 * over params, +flags over variables (and taken out of argv), and errors that name the option. */
#include "core/core.h"
#include "tess_test.h"

/* Every option's variable unset: the defaults apply. */
static void clear_env(void)
{
    size_t                    n;
    const tess_option_info_t *o = tess_config_options(&n);
    CHECK(n >= 20);
    for (size_t i = 0; i < n; i++) {
        CHECK(o[i].name && *o[i].name && o[i].env && !strncmp(o[i].env, "TESS_", 5));
        CHECK(o[i].deflt && o[i].help && *o[i].help);
        CHECK(!o[i].flag || o[i].flag[0] == '+');
        unsetenv(o[i].env);
    }
}

/* An argv the loader may edit, from a NULL-terminated list. */
typedef struct args {
    int   argc;
    char *argv[32];
    char  store[32][64];
} args_t;

static void args_set(args_t *a, const char *const *list)
{
    memset(a, 0, sizeof(*a));
    for (a->argc = 0; list[a->argc]; a->argc++) {
        CHECK(a->argc < 31 && strlen(list[a->argc]) < 64);
        strcpy(a->store[a->argc], list[a->argc]);
        a->argv[a->argc] = a->store[a->argc];
    }
    a->argv[a->argc] = NULL;
}

static tess_status_t load_args(args_t *a, const tess_params_t *p)
{
    char **av = a->argv;
    return tess_config_load(&a->argc, &av, p);
}

/* The remaining argv is exactly `want` (NULL-terminated). */
static void check_argv(const args_t *a, const char *const *want)
{
    int n = 0;
    while (want[n])
        n++;
    CHECK_MSG(a->argc == n, "argc %d, expected %d", a->argc, n);
    for (int i = 0; i < n; i++)
        CHECK_MSG(a->argv[i] && !strcmp(a->argv[i], want[i]), "argv[%d] = '%s', expected '%s'", i,
                  a->argv[i] ? a->argv[i] : "(null)", want[i]);
    CHECK(a->argv[n] == NULL);
}

/* The call fails with TESS_ERR_INVALID and the detail contains every string given. */
#define CHECK_BAD(call, ...)                                                                  \
    do {                                                                                      \
        tess_status_t st_ = (call);                                                           \
        CHECK_MSG(st_ == TESS_ERR_INVALID, "%s returned %d", #call, (int)st_);                \
        const char *const want_[] = {__VA_ARGS__, NULL};                                      \
        for (int w_ = 0; want_[w_]; w_++)                                                     \
            CHECK_MSG(strstr(tess_error_detail(), want_[w_]), "detail '%s' lacks '%s'",       \
                      tess_error_detail(), want_[w_]);                                        \
    } while (0)

static void test_defaults(void)
{
    clear_env();
    tess_cfg.ppn = 99;
    CHECK_OK(tess_config_load(NULL, NULL, NULL));
    /* The documented defaults (tessera.h, tess_params_t). */
    CHECK(tess_cfg.ppn == 1);
    CHECK(tess_cfg.log_level == TESS_LOG_WARN);
    CHECK(tess_cfg.spin_us == 100);
    CHECK(tess_cfg.bind == 0);
    CHECK(tess_cfg.verbose == 0);
    CHECK(!strcmp(tess_cfg.gpu, "auto"));
    CHECK(tess_cfg.streams == 64);
    CHECK(tess_cfg.host_arena == (size_t)256 << 20);
    CHECK(tess_cfg.comm_buf == (size_t)64 << 20);
    CHECK(tess_cfg.bounce_chunk == (size_t)1 << 20);
    CHECK(tess_cfg.vnode_size == 0);
    CHECK(!strcmp(tess_cfg.ipc, "auto") && !strcmp(tess_cfg.devcomm_path, "auto"));
    CHECK(tess_log_level == TESS_LOG_WARN);

    /* An argv without runtime flags is left as it is; argc/argv may be NULL separately. */
    args_t a;
    static const char *const plain[] = {"prog", "-x", "--ppn", "4", "+foo", "+ppnx", "ppn", NULL};
    args_set(&a, plain);
    CHECK_OK(load_args(&a, NULL));
    check_argv(&a, plain);
    CHECK(tess_cfg.ppn == 1);
    int argc = 1;
    CHECK_OK(tess_config_load(&argc, NULL, NULL));
    CHECK_OK(tess_config_load(NULL, (char ***)NULL, NULL));
}

static void test_params(void)
{
    clear_env();
    tess_params_t p = {
        .field_mask = TESS_PARAM_FIELD_PPN | TESS_PARAM_FIELD_LOG_LEVEL |
                      TESS_PARAM_FIELD_SPIN_US | TESS_PARAM_FIELD_BIND |
                      TESS_PARAM_FIELD_VERBOSE | TESS_PARAM_FIELD_GPU | TESS_PARAM_FIELD_STREAMS,
        .ppn = 3, .log_level = TESS_LOG_DEBUG, .spin_us = 5, .bind = 1, .verbose = 1,
        .gpu = "host", .streams = 7,
    };
    CHECK_OK(tess_config_load(NULL, NULL, &p));
    CHECK(tess_cfg.ppn == 3 && tess_cfg.log_level == TESS_LOG_DEBUG && tess_cfg.spin_us == 5);
    CHECK(tess_cfg.bind == 1 && tess_cfg.verbose == 1 && !strcmp(tess_cfg.gpu, "host"));
    CHECK(tess_cfg.streams == 7);
    CHECK(tess_log_level == TESS_LOG_DEBUG);

    /* Zero fields whose bit is not set keep the defaults. */
    tess_params_t q = {.field_mask = TESS_PARAM_FIELD_STREAMS, .streams = 7};
    CHECK_OK(tess_config_load(NULL, NULL, &q));
    CHECK(tess_cfg.ppn == 1 && tess_cfg.log_level == TESS_LOG_WARN && tess_cfg.spin_us == 100);
    CHECK(tess_cfg.bind == 0 && tess_cfg.verbose == 0 && !strcmp(tess_cfg.gpu, "auto"));
    CHECK(tess_cfg.streams == 7);
    q = (tess_params_t){0};
    CHECK_OK(tess_config_load(NULL, NULL, &q));
    CHECK(tess_cfg.ppn == 1 && tess_cfg.streams == 64);

    /* A field set without its bit would be ignored: refused, naming the field and the bit; so
     * is a bit that names no field. */
    static const char *const field[] = {"ppn", "log_level", "spin_us", "bind", "verbose", "gpu",
                                        "streams"};
    for (int i = 0; i < 7; i++) {
        q            = p;
        q.field_mask = p.field_mask & ~(1ull << i);
        CHECK_BAD(tess_config_load(NULL, NULL, &q), field[i], "field_mask lacks");
    }
    q            = p;
    q.field_mask = p.field_mask | (1ull << 40);
    CHECK_BAD(tess_config_load(NULL, NULL, &q), "name no field");

    /* Bad field values name the field. */
    q     = p;
    q.ppn = 0;
    CHECK_BAD(tess_config_load(NULL, NULL, &q), "ppn", ">= 1");
    q         = p;
    q.streams = -2;
    CHECK_BAD(tess_config_load(NULL, NULL, &q), "streams", ">= 1");
    q     = p;
    q.gpu = "quantum";
    CHECK_BAD(tess_config_load(NULL, NULL, &q), "gpu", "quantum");
    q         = p;
    q.spin_us = -1;
    CHECK_BAD(tess_config_load(NULL, NULL, &q), "spin");
    q           = p;
    q.log_level = (tess_log_level_t)17;
    CHECK_BAD(tess_config_load(NULL, NULL, &q), "log");
}

static void test_env(void)
{
    clear_env();
    tess_params_t p = {.field_mask = TESS_PARAM_FIELD_PPN | TESS_PARAM_FIELD_GPU |
                                     TESS_PARAM_FIELD_BIND | TESS_PARAM_FIELD_SPIN_US,
                       .ppn = 3, .gpu = "cuda", .bind = 0, .spin_us = 9};
    setenv("TESS_PPN", "5", 1);
    setenv("TESS_GPU", "host", 1);
    setenv("TESS_BIND", "yes", 1);
    setenv("TESS_LOG", "info", 1);
    setenv("TESS_HOST_ARENA", "3m", 1);
    setenv("TESS_VNODE_SIZE", "2", 1);
    setenv("TESS_IPC", "staged", 1);
    CHECK_OK(tess_config_load(NULL, NULL, &p));
    CHECK(tess_cfg.ppn == 5 && !strcmp(tess_cfg.gpu, "host") && tess_cfg.bind == 1);
    CHECK(tess_cfg.spin_us == 9); /* not in the environment: params stay */
    CHECK(tess_cfg.log_level == TESS_LOG_INFO && tess_log_level == TESS_LOG_INFO);
    CHECK(tess_cfg.host_arena == (size_t)3 << 20 && tess_cfg.vnode_size == 2);
    CHECK(!strcmp(tess_cfg.ipc, "staged"));
    /* An empty variable counts as unset. */
    setenv("TESS_PPN", "", 1);
    CHECK_OK(tess_config_load(NULL, NULL, &p));
    CHECK(tess_cfg.ppn == 3);

    /* Bad values are errors naming the variable and the option. */
    clear_env();
    setenv("TESS_PPN", "abc", 1);
    CHECK_BAD(tess_config_load(NULL, NULL, NULL), "TESS_PPN", "ppn", "abc");
    setenv("TESS_PPN", "0", 1);
    CHECK_BAD(tess_config_load(NULL, NULL, NULL), "TESS_PPN", "ppn");
    setenv("TESS_PPN", "2000", 1);
    CHECK_BAD(tess_config_load(NULL, NULL, NULL), "TESS_PPN", "ppn");
    clear_env();
    setenv("TESS_BIND", "maybe", 1);
    CHECK_BAD(tess_config_load(NULL, NULL, NULL), "TESS_BIND", "bind", "maybe");
    clear_env();
    setenv("TESS_HOST_ARENA", "12q", 1);
    CHECK_BAD(tess_config_load(NULL, NULL, NULL), "TESS_HOST_ARENA", "host_arena");
    clear_env();
    setenv("TESS_LOG", "loud", 1);
    CHECK_BAD(tess_config_load(NULL, NULL, NULL), "TESS_LOG", "log", "loud");
    clear_env();
    setenv("TESS_DEVCOMM_PATH", "pigeon", 1);
    CHECK_BAD(tess_config_load(NULL, NULL, NULL), "TESS_DEVCOMM_PATH", "devcomm_path");
    clear_env();
    setenv("TESS_LB_TARGET", "a-string-longer-than-its-field", 1);
    CHECK_BAD(tess_config_load(NULL, NULL, NULL), "TESS_LB_TARGET", "lb_target");
    clear_env();
}

static void test_flags(void)
{
    args_t a;
    clear_env();
    setenv("TESS_PPN", "2", 1);
    setenv("TESS_LOG", "error", 1);
    setenv("TESS_BIND", "1", 1);
    static const char *const in1[] = {"prog", "a", "+ppn", "4", "b", "+tess-log", "debug",
                                      "-c", "+tess-bind", "0", "d", NULL};
    static const char *const out1[] = {"prog", "a", "b", "-c", "d", NULL};
    args_set(&a, in1);
    CHECK_OK(load_args(&a, NULL));
    check_argv(&a, out1);
    CHECK(tess_cfg.ppn == 4 && tess_cfg.log_level == TESS_LOG_DEBUG && tess_cfg.bind == 0);
    clear_env();

    /* +flag=value; a boolean flag alone (before a non-boolean argument, and last). */
    static const char *const in2[] = {"prog", "+ppn=6", "x", "+tess-bind", "z", "+tess-spin=0",
                                      "+tess-verbose", NULL};
    static const char *const out2[] = {"prog", "x", "z", NULL};
    args_set(&a, in2);
    CHECK_OK(load_args(&a, NULL));
    check_argv(&a, out2);
    CHECK(tess_cfg.ppn == 6 && tess_cfg.bind == 1 && tess_cfg.spin_us == 0);
    CHECK(tess_cfg.verbose == 1);

    static const char *const in3[] = {"prog", "+tess-bind", NULL};
    static const char *const out3[] = {"prog", NULL};
    args_set(&a, in3);
    CHECK_OK(load_args(&a, NULL));
    check_argv(&a, out3);
    CHECK(tess_cfg.bind == 1);

    /* The command line beats the environment, which beats params. */
    tess_params_t p = {.field_mask = TESS_PARAM_FIELD_PPN | TESS_PARAM_FIELD_STREAMS,
                       .ppn = 3, .streams = 11};
    setenv("TESS_PPN", "5", 1);
    setenv("TESS_STREAMS", "12", 1);
    static const char *const in4[] = {"prog", "+ppn", "7", NULL};
    args_set(&a, in4);
    CHECK_OK(load_args(&a, &p));
    check_argv(&a, out3);
    CHECK(tess_cfg.ppn == 7 && tess_cfg.streams == 12);
    static const char *const in5[] = {"prog", "+tess-streams=13", "+tess-gpu", "host",
                                      "+tess-lb", "greedy", "+tess-lb-target", "pe", NULL};
    args_set(&a, in5);
    CHECK_OK(load_args(&a, &p));
    check_argv(&a, out3);
    CHECK(tess_cfg.ppn == 5 && tess_cfg.streams == 13 && !strcmp(tess_cfg.gpu, "host"));
    CHECK(!strcmp(tess_cfg.lb, "greedy") && !strcmp(tess_cfg.lb_target, "pe"));
    clear_env();

    /* Errors: an unknown +tess- flag, a missing value, bad values — each naming the option. */
    static const char *const bad1[] = {"prog", "+tess-foo", NULL};
    args_set(&a, bad1);
    CHECK_BAD(load_args(&a, NULL), "+tess-foo");
    static const char *const bad1b[] = {"prog", "x", "+tess-foo=3", NULL};
    args_set(&a, bad1b);
    CHECK_BAD(load_args(&a, NULL), "+tess-foo");
    static const char *const bad2[] = {"prog", "+ppn", NULL};
    args_set(&a, bad2);
    CHECK_BAD(load_args(&a, NULL), "+ppn");
    static const char *const bad3[] = {"prog", "+ppn", "0", NULL};
    args_set(&a, bad3);
    CHECK_BAD(load_args(&a, NULL), "+ppn", "ppn");
    static const char *const bad4[] = {"prog", "+ppn=two", NULL};
    args_set(&a, bad4);
    CHECK_BAD(load_args(&a, NULL), "ppn", "two");
    static const char *const bad5[] = {"prog", "+tess-gpu", "foo", NULL};
    args_set(&a, bad5);
    CHECK_BAD(load_args(&a, NULL), "gpu", "foo");
    static const char *const bad6[] = {"prog", "+tess-log=loud", NULL};
    args_set(&a, bad6);
    CHECK_BAD(load_args(&a, NULL), "log", "loud");
    static const char *const bad7[] = {"prog", "+tess-bind=maybe", NULL};
    args_set(&a, bad7);
    CHECK_BAD(load_args(&a, NULL), "bind", "maybe");
    static const char *const bad8[] = {"prog", "+tess-spin", "-3", NULL};
    args_set(&a, bad8);
    CHECK_BAD(load_args(&a, NULL), "spin", "-3");
}

int main(void)
{
    test_defaults();
    test_params();
    test_env();
    test_flags();
    printf("config: ok\n");
    return 0;
}

/* tessera-info — what this Tessera was built with, and its runtime options.
 *
 *   tessera-info             version, MPI, backends built, the UCX in use and its transports
 *   tessera-info --options   every option as a Markdown table (README.md carries the same)
 *   tessera-info --version   the version alone
 *   tessera-info --help      usage; any other argument is an error
 * Without an argument it also checks the TESS_* variables of the environment: an invalid value
 * or a name that is not an option is reported, and the exit status is then 1. */
#include "core/core.h"
#include "ucx_info.h"

#include <stdio.h>
#include <string.h>

extern const char tess_version_string[];

static void usage(FILE *f)
{
    fprintf(f, "usage: tessera-info [--options | --version | --help]\n"
               "  (no argument)  the version, the MPI and the device backends of this build, "
               "and a check of the\n"
               "                 TESS_* variables set in the environment (exit status 1 when "
               "one is invalid)\n"
               "  --options      every runtime option (TESS_* variable, +flag, default, "
               "meaning) as a Markdown table\n"
               "  --version      the version\n"
               "  --help         this text\n");
}

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "--options") && strcmp(argv[1], "--help") &&
                     strcmp(argv[1], "-h") && strcmp(argv[1], "--version"))) {
        fprintf(stderr, "tessera-info: unknown argument '%s'\n", argv[argc > 2 && !strcmp(
                argv[1], "--options") ? 2 : 1]);
        usage(stderr);
        return 2;
    }
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        printf("%s\n", tess_version_string);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--options")) {
        size_t                    n;
        const tess_option_info_t *o = tess_config_options(&n);
        printf("| variable | flag | default | meaning |\n| --- | --- | --- | --- |\n");
        for (size_t i = 0; i < n; i++)
            printf("| `%s` | %s%s%s | `%s` | %s |\n", o[i].env, o[i].flag ? "`" : "",
                   o[i].flag ? o[i].flag : "—", o[i].flag ? "`" : "", o[i].deflt, o[i].help);
        return 0;
    }
    printf("%s\n", tess_version_string);
    printf("MPI: %s\n", TESS_MPI_FLAVOR);
    printf("device backends: host");
#ifdef HAVE_CUDA
    printf(", cuda");
#endif
#ifdef HAVE_HIP
    printf(", hip");
#endif
    printf("\nhwloc: ");
#ifdef HAVE_HWLOC
    printf("yes\n");
#else
    printf("no\n");
#endif
    fflush(stdout);
    tess_print_ucx_info(stdout);
#ifdef TESS_SANITIZER
    printf("sanitizer: %s\n", TESS_SANITIZER);
#endif
    fflush(stdout);
    int bad = tess_config_check_values();
    if (bad) {
        printf("environment: %d TESS_* setting%s invalid or unknown (reported above); tess_init "
               "would refuse an invalid one\n", bad, bad == 1 ? " is" : "s are");
        return 1;
    }
    printf("environment: the TESS_* settings are valid\n");
    return 0;
}

/* version.c — the library's version string. */
#include <tessera.h>

#define TESS_STR2(x) #x
#define TESS_STR(x)  TESS_STR2(x)

const char tess_version_string[] = "tessera " TESS_STR(TESS_VERSION_MAJOR) "."
    TESS_STR(TESS_VERSION_MINOR) "." TESS_STR(TESS_VERSION_PATCH);

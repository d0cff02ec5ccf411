# TESS_COMPILER_OPTIONS: --enable-debug, --enable-asan, --enable-tsan, --enable-werror.
# Results go into TESS_CFLAGS / TESS_LDFLAGS, which every Makefile.am uses, and
# TESS_LIB_CFLAGS / TESS_LIB_LDFLAGS, those of the library's own sources; the global CFLAGS the
# user gave are left alone.
AC_DEFUN([TESS_COMPILER_OPTIONS], [
AC_ARG_ENABLE([debug],
  [AS_HELP_STRING([--enable-debug], [build with -O0 -g and internal assertions])],
  [], [enable_debug=no])
AC_ARG_ENABLE([asan],
  [AS_HELP_STRING([--enable-asan], [build with AddressSanitizer])],
  [], [enable_asan=no])
AC_ARG_ENABLE([tsan],
  [AS_HELP_STRING([--enable-tsan], [build with ThreadSanitizer])],
  [], [enable_tsan=no])
AC_ARG_ENABLE([werror],
  [AS_HELP_STRING([--disable-werror], [do not treat warnings as errors])],
  [], [enable_werror=yes])

AS_IF([test "x$enable_asan" = xyes && test "x$enable_tsan" = xyes],
  [AC_MSG_ERROR([--enable-asan and --enable-tsan cannot be combined])])

TESS_CFLAGS="-std=gnu11 -Wall -Wextra"
TESS_LDFLAGS=""
AS_IF([test "x$enable_werror" = xyes], [TESS_CFLAGS="$TESS_CFLAGS -Werror"])
AS_IF([test "x$enable_debug" = xyes],
  [TESS_CFLAGS="$TESS_CFLAGS -O0 -g3"
   AC_DEFINE([TESS_DEBUG], [1], [internal assertions enabled])],
  [TESS_CFLAGS="$TESS_CFLAGS -O2 -g"])
tess_sanitizer=none
AS_IF([test "x$enable_asan" = xyes],
  [tess_sanitizer=address
   TESS_CFLAGS="$TESS_CFLAGS -fsanitize=address -fno-omit-frame-pointer"
   TESS_LDFLAGS="$TESS_LDFLAGS -fsanitize=address"])
AS_IF([test "x$enable_tsan" = xyes],
  [tess_sanitizer=thread
   TESS_CFLAGS="$TESS_CFLAGS -fsanitize=thread -fno-omit-frame-pointer"
   TESS_LDFLAGS="$TESS_LDFLAGS -fsanitize=thread"])
AS_IF([test "x$tess_sanitizer" != xnone],
  [AC_DEFINE_UNQUOTED([TESS_SANITIZER], ["$tess_sanitizer"], [sanitizer the build uses])])
AC_SUBST([TESS_CFLAGS])
AC_SUBST([TESS_LDFLAGS])
AC_SUBST([tess_sanitizer])

# The library's calls to its own functions bind inside it, without a PLT entry each: nothing
# is meant to interpose Tessera's functions, and a chained reduction round makes dozens.
TESS_LIB_LDFLAGS=""
tess_save_LDFLAGS=$LDFLAGS
LDFLAGS="$LDFLAGS -shared -Wl,-Bsymbolic-functions"
AC_MSG_CHECKING([whether the linker binds a library's own functions with -Bsymbolic-functions])
AC_LINK_IFELSE([AC_LANG_PROGRAM([[]], [[]])],
  [TESS_LIB_LDFLAGS="-Wl,-Bsymbolic-functions"
   AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])])
LDFLAGS=$tess_save_LDFLAGS
AC_SUBST([TESS_LIB_LDFLAGS])

# The library exports its API and nothing else: its sources are compiled with hidden
# visibility, and the installed headers mark each public function TESS_API (default
# visibility). tools/check-exports holds the shared library to it in make check.
TESS_LIB_CFLAGS=""
tess_save_CFLAGS=$CFLAGS
CFLAGS="$CFLAGS -fvisibility=hidden -Werror"
AC_MSG_CHECKING([whether $CC builds with hidden visibility (-fvisibility=hidden)])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[__attribute__((visibility("default"))) int tess_f(void);
int tess_f(void) { return 0; }]], [[]])],
  [TESS_LIB_CFLAGS="-fvisibility=hidden"
   AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])])
CFLAGS=$tess_save_CFLAGS
AC_SUBST([TESS_LIB_CFLAGS])
])

# AX_PTHREAD_SIMPLE: POSIX threads through -pthread (gcc and clang both take it).
AC_DEFUN([AX_PTHREAD_SIMPLE], [
PTHREAD_CFLAGS="-pthread"
PTHREAD_LIBS="-pthread"
AC_SUBST([PTHREAD_CFLAGS])
AC_SUBST([PTHREAD_LIBS])
])

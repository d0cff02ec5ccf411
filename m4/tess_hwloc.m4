# TESS_CHECK_HWLOC: hwloc is optional (PE binding). --with-hwloc=yes|no|DIR, default guess:
# used when found, a hard error only when asked for. Results: HWLOC_CPPFLAGS, HWLOC_LDFLAGS,
# HWLOC_LIBS, AM_CONDITIONAL HAVE_HWLOC.
AC_DEFUN([TESS_CHECK_HWLOC], [
AC_ARG_WITH([hwloc],
  [AS_HELP_STRING([--with-hwloc=yes|no|DIR], [use hwloc to bind PEs (default: guess)])],
  [], [with_hwloc=guess])
tess_have_hwloc=no
HWLOC_CPPFLAGS=""
HWLOC_LDFLAGS=""
HWLOC_LIBS=""
AS_IF([test "x$with_hwloc" != xno], [
  AS_CASE([$with_hwloc],
    [yes|guess], [],
    [HWLOC_CPPFLAGS="-I$with_hwloc/include"
     HWLOC_LDFLAGS="-L$with_hwloc/lib -Wl,-rpath,$with_hwloc/lib"])
  tess_save_CPPFLAGS="$CPPFLAGS"
  tess_save_LDFLAGS="$LDFLAGS"
  tess_save_LIBS="$LIBS"
  CPPFLAGS="$CPPFLAGS $HWLOC_CPPFLAGS"
  LDFLAGS="$LDFLAGS $HWLOC_LDFLAGS"
  AC_CHECK_HEADER([hwloc.h],
    [AC_CHECK_LIB([hwloc], [hwloc_topology_init],
      [tess_have_hwloc=yes; HWLOC_LIBS="-lhwloc"])])
  CPPFLAGS="$tess_save_CPPFLAGS"
  LDFLAGS="$tess_save_LDFLAGS"
  LIBS="$tess_save_LIBS"
  AS_IF([test "x$tess_have_hwloc" = xno && test "x$with_hwloc" != xguess],
    [AC_MSG_ERROR([hwloc was requested but not found: install libhwloc-dev or fix --with-hwloc])])
])
AS_IF([test "x$tess_have_hwloc" = xyes], [AC_DEFINE([HAVE_HWLOC], [1], [hwloc is available])])
AM_CONDITIONAL([HAVE_HWLOC], [test "x$tess_have_hwloc" = xyes])
AC_SUBST([HWLOC_CPPFLAGS])
AC_SUBST([HWLOC_LDFLAGS])
AC_SUBST([HWLOC_LIBS])
])

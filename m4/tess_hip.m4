# TESS_CHECK_HIP: the HIP backend. --with-hip=yes|no|DIR, default guess (DIR: /opt/rocm, then
# the system paths where Debian's libamdhip64-dev puts it). The runtime calls the HIP runtime API
# from C; kernels need hipcc, which is optional (HIPCC, AM_CONDITIONAL HAVE_HIPCC).
# Results: HIP_CPPFLAGS, HIP_LDFLAGS, HIP_LIBS, AM_CONDITIONAL HAVE_HIP.
AC_DEFUN([TESS_CHECK_HIP], [
AC_ARG_WITH([hip],
  [AS_HELP_STRING([--with-hip=yes|no|DIR], [build the HIP backend (default: guess)])],
  [], [with_hip=guess])
tess_have_hip=no
HIP_CPPFLAGS=""
HIP_LDFLAGS=""
HIP_LIBS=""
HIPCC=""
AS_IF([test "x$with_hip" != xno], [
  AS_CASE([$with_hip],
    [yes|guess], [AS_IF([test -d /opt/rocm/include/hip], [tess_hip_dir=/opt/rocm], [tess_hip_dir=""])],
    [tess_hip_dir="$with_hip"])
  AS_IF([test -n "$tess_hip_dir"],
    [HIP_CPPFLAGS="-I$tess_hip_dir/include"
     HIP_LDFLAGS="-L$tess_hip_dir/lib -Wl,-rpath,$tess_hip_dir/lib"])
  HIP_CPPFLAGS="$HIP_CPPFLAGS -D__HIP_PLATFORM_AMD__"
  tess_save_CPPFLAGS="$CPPFLAGS"
  tess_save_LDFLAGS="$LDFLAGS"
  tess_save_LIBS="$LIBS"
  CPPFLAGS="$CPPFLAGS $HIP_CPPFLAGS"
  LDFLAGS="$LDFLAGS $HIP_LDFLAGS"
  AC_CHECK_HEADER([hip/hip_runtime_api.h],
    [AC_CHECK_LIB([amdhip64], [hipIpcGetMemHandle], [tess_have_hip=yes; HIP_LIBS="-lamdhip64"])])
  CPPFLAGS="$tess_save_CPPFLAGS"
  LDFLAGS="$tess_save_LDFLAGS"
  LIBS="$tess_save_LIBS"
  AS_IF([test "x$tess_have_hip" = xno && test "x$with_hip" != xguess],
    [AC_MSG_ERROR([HIP was requested but hip/hip_runtime_api.h or libamdhip64 was not found])])
  AS_IF([test "x$tess_have_hip" = xyes],
    [AC_PATH_PROG([HIPCC], [hipcc], [], [$tess_hip_dir/bin$PATH_SEPARATOR$PATH])])
])
AS_IF([test "x$tess_have_hip" = xyes], [AC_DEFINE([HAVE_HIP], [1], [the HIP backend is built])])
AM_CONDITIONAL([HAVE_HIP], [test "x$tess_have_hip" = xyes])
AM_CONDITIONAL([HAVE_HIPCC], [test -n "$HIPCC"])
AC_SUBST([HIP_CPPFLAGS])
AC_SUBST([HIP_LDFLAGS])
AC_SUBST([HIP_LIBS])
AC_SUBST([HIPCC])
])

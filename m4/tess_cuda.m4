# TESS_CHECK_CUDA: the CUDA backend. --with-cuda=yes|no|DIR, default guess (DIR defaults to
# /usr/local/cuda). Needs cuda_runtime.h, libcudart and nvcc. The runtime calls the CUDA runtime
# API from C; the driver functions it needs come through cudaGetDriverEntryPointByVersion, so
# nothing links libcuda and a build with CUDA still loads on a machine without a driver.
# Results: CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS, NVCC, NVCC_FLAGS, AM_CONDITIONAL HAVE_CUDA.
AC_DEFUN([TESS_CHECK_CUDA], [
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda=yes|no|DIR], [build the CUDA backend (default: guess, DIR=/usr/local/cuda)])],
  [], [with_cuda=guess])
AC_ARG_VAR([NVCC_ARCH], [nvcc -gencode/-arch flags for CUDA kernels (default: sm_90 plus PTX)])
tess_have_cuda=no
CUDA_CPPFLAGS=""
CUDA_LDFLAGS=""
CUDA_LIBS=""
NVCC=""
AS_IF([test "x$with_cuda" != xno], [
  AS_CASE([$with_cuda],
    [yes|guess], [tess_cuda_dir=/usr/local/cuda],
    [tess_cuda_dir="$with_cuda"])
  tess_cuda_libdir="$tess_cuda_dir/lib64"
  AS_IF([test -d "$tess_cuda_libdir"], [], [tess_cuda_libdir="$tess_cuda_dir/lib"])
  CUDA_CPPFLAGS="-I$tess_cuda_dir/include"
  CUDA_LDFLAGS="-L$tess_cuda_libdir -Wl,-rpath,$tess_cuda_libdir"
  tess_save_CPPFLAGS="$CPPFLAGS"
  tess_save_LDFLAGS="$LDFLAGS"
  tess_save_LIBS="$LIBS"
  CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
  LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
  AC_CHECK_HEADER([cuda_runtime_api.h],
    [AC_CHECK_LIB([cudart], [cudaGetDriverEntryPointByVersion],
      [AC_PATH_PROG([NVCC], [nvcc], [], [$tess_cuda_dir/bin$PATH_SEPARATOR$PATH])
       AS_IF([test -n "$NVCC"], [tess_have_cuda=yes; CUDA_LIBS="-lcudart"])])])
  CPPFLAGS="$tess_save_CPPFLAGS"
  LDFLAGS="$tess_save_LDFLAGS"
  LIBS="$tess_save_LIBS"
  AS_IF([test "x$tess_have_cuda" = xno && test "x$with_cuda" != xguess],
    [AC_MSG_ERROR([CUDA was requested but cuda_runtime_api.h, libcudart (>= 12.5) or nvcc was not found under $tess_cuda_dir])])
])
AS_IF([test -z "$NVCC_ARCH"],
  [NVCC_ARCH="-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"])
AS_IF([test "x$tess_have_cuda" = xyes], [AC_DEFINE([HAVE_CUDA], [1], [the CUDA backend is built])])
AM_CONDITIONAL([HAVE_CUDA], [test "x$tess_have_cuda" = xyes])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LDFLAGS])
AC_SUBST([CUDA_LIBS])
AC_SUBST([NVCC])
])

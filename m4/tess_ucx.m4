# TESS_CHECK_UCX: UCX is required. --with-ucx=DIR names a prefix; the default asks pkg-config,
# then the system paths. Results: UCX_CPPFLAGS, UCX_LDFLAGS, UCX_LIBS.
AC_DEFUN([TESS_CHECK_UCX], [
AC_ARG_WITH([ucx],
  [AS_HELP_STRING([--with-ucx=DIR], [UCX installation prefix (required; default: pkg-config or system)])],
  [], [with_ucx=guess])
AS_IF([test "x$with_ucx" = xno], [AC_MSG_ERROR([UCX is required: --without-ucx is not possible])])

UCX_CPPFLAGS=""
UCX_LDFLAGS=""
UCX_LIBS="-lucp -luct -lucs"
AS_CASE([$with_ucx],
  [yes|guess], [PKG_CHECK_MODULES([UCXPC], [ucx], [UCX_CPPFLAGS="$UCXPC_CFLAGS"], [:])],
  dnl -isystem: a newer UCX's headers warn under -Wextra -Werror (as the system's would not).
  [UCX_CPPFLAGS="-isystem $with_ucx/include"
   AS_IF([test -d "$with_ucx/lib64"], [UCX_LDFLAGS="-L$with_ucx/lib64 -Wl,-rpath,$with_ucx/lib64"],
         [UCX_LDFLAGS="-L$with_ucx/lib -Wl,-rpath,$with_ucx/lib"])])

tess_save_CPPFLAGS="$CPPFLAGS"
tess_save_LDFLAGS="$LDFLAGS"
tess_save_LIBS="$LIBS"
CPPFLAGS="$CPPFLAGS $UCX_CPPFLAGS"
LDFLAGS="$LDFLAGS $UCX_LDFLAGS"
AC_CHECK_HEADER([ucp/api/ucp.h], [],
  [AC_MSG_ERROR([UCX headers not found (ucp/api/ucp.h): install libucx-dev or pass --with-ucx=DIR])])
AC_CHECK_LIB([ucp], [ucp_am_send_nbx], [],
  [AC_MSG_ERROR([libucp with ucp_am_send_nbx (UCX >= 1.10) not found])], [-lucs])
AC_CHECK_DECLS([UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL], [], [], [[#include <ucp/api/ucp.h>]])
CPPFLAGS="$tess_save_CPPFLAGS"
LDFLAGS="$tess_save_LDFLAGS"
LIBS="$tess_save_LIBS"
AC_SUBST([UCX_CPPFLAGS])
AC_SUBST([UCX_LDFLAGS])
AC_SUBST([UCX_LIBS])
])

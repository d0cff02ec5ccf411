# TESS_PROG_MPICC: the C compiler is the MPI wrapper named by MPICC (default: mpicc).
# Open MPI and MPICH both work; Debian ships them side by side as mpicc.openmpi and mpicc.mpich.
AC_DEFUN([TESS_PROG_MPICC], [
AC_ARG_VAR([MPICC], [MPI C compiler wrapper used to build Tessera (default: mpicc)])
AC_ARG_VAR([MPIEXEC], [MPI launcher used by the tests (default: matches MPICC)])
AS_IF([test -z "$MPICC"], [AC_CHECK_PROGS([MPICC], [mpicc mpicc.openmpi mpicc.mpich])])
AS_IF([test -z "$MPICC"],
  [AC_MSG_ERROR([no MPI compiler wrapper found: install Open MPI or MPICH (libopenmpi-dev or libmpich-dev), or set MPICC])])
CC="$MPICC"
])

# TESS_CHECK_MPI: checks the MPI library, finds its flavor and the launcher the tests use.
AC_DEFUN([TESS_CHECK_MPI], [
AC_CHECK_HEADER([mpi.h], [],
  [AC_MSG_ERROR([$MPICC cannot compile an MPI program (mpi.h not found)])])
AC_MSG_CHECKING([that $MPICC links MPI_Init_thread])
AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
  [[int p; return MPI_Init_thread(0, 0, MPI_THREAD_FUNNELED, &p);]])],
  [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no]); AC_MSG_ERROR([$MPICC does not link MPI programs])])

AC_MSG_CHECKING([MPI flavor])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef OMPI_MAJOR_VERSION
#error not Open MPI
#endif]], [])], [tess_mpi_flavor=openmpi],
  [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef MPICH_VERSION
#error not MPICH
#endif]], [])], [tess_mpi_flavor=mpich], [tess_mpi_flavor=unknown])])
AC_MSG_RESULT([$tess_mpi_flavor])

AS_IF([test -z "$MPIEXEC"],
  [AS_CASE([$tess_mpi_flavor:$MPICC],
    [*:*.mpich], [AC_PATH_PROGS([MPIEXEC], [mpiexec.mpich mpiexec.hydra mpiexec])],
    [*:*.openmpi], [AC_PATH_PROGS([MPIEXEC], [mpirun.openmpi mpirun])],
    [mpich:*], [AC_PATH_PROGS([MPIEXEC], [mpiexec.mpich mpiexec.hydra mpiexec])],
    [AC_PATH_PROGS([MPIEXEC], [mpirun mpiexec])])])
AS_IF([test -z "$MPIEXEC"], [AC_MSG_WARN([no MPI launcher found: multi-rank tests will fail])])
# Open MPI refuses to oversubscribe cores (and to run as root) unless told to.
AS_CASE([$tess_mpi_flavor],
  [openmpi], [MPIEXEC_FLAGS="--oversubscribe"
              AS_IF([test "`id -u`" = 0], [MPIEXEC_FLAGS="$MPIEXEC_FLAGS --allow-run-as-root"])],
  [MPIEXEC_FLAGS=""])
AC_SUBST([MPIEXEC_FLAGS])
AC_SUBST([tess_mpi_flavor])
AC_DEFINE_UNQUOTED([TESS_MPI_FLAVOR], ["$tess_mpi_flavor"], [MPI implementation built against])
])

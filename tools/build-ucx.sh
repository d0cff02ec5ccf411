#!/bin/sh
# tools/build-ucx.sh SOURCE [PREFIX]: build UCX with CUDA support into PREFIX (default
# build-cuda/ucx, inside the CUDA build tree of tools/gpu-build.sh so that it travels with it).
#
# Why: a GPU machine's packaged UCX may be built without the CUDA transports (cuda_copy,
# cuda_ipc), and Tessera's direct RDMA path (the receiver's ucp_get into device memory) cannot
# run with it (TESS_RDMA=direct refuses to start; auto stages through host memory). This builds a
# released UCX on the machine with nvcc, small enough to copy along: shared libraries only,
# stripped, no docs/java/go/static, no libbfd/valgrind/fuse. Build it on a system at least as old
# as the GPU machine's (glibc).
#
# SOURCE, where to get it: UCX is at https://github.com/openucx/ucx. Any of
#   - a release tarball, ucx-X.Y.Z.tar.gz from https://github.com/openucx/ucx/releases
#     (configure is already generated),
#   - a source tree: the tarball unpacked, or a checkout (bootstrapped with ./autogen.sh),
#   - a git repository (a clone or a bare mirror of github.com/openucx/ucx): tag UCX_TAG (default
#     v1.20.1, the first line with CUDA 13 support) is taken from it with git archive.
# SOURCE is never modified: the build runs in a scratch tree, UCX_WORK (default build-ucx-src/).
#
# Idempotent: a finished install is recorded in PREFIX/.build-ucx.stamp (source + options); run
# again it does nothing unless they changed. Knobs: UCX_JOBS (default 2; run under nice),
# CUDA_HOME (default /usr/local/cuda), UCX_GENCODE (nvcc -gencode options for UCX's own CUDA
# kernels, default sm_90: H100, H200).
#
# NVML: UCX's CUDA support needs nvml.h and libnvidia-ml at build time. Where the toolkit lacks
# them (a build machine without the driver and without the cuda-nvml-dev package), set NVML_H to
# a copy of nvml.h (the public header is in https://github.com/NVIDIA/go-nvml, gen/nvml/nvml.h);
# a link-only stub libnvidia-ml.so.1 is built beside it, and at run time the driver's real
# libnvidia-ml.so.1 is loaded.
#
# Relocation: libraries, modules and programs get RUNPATH $ORIGIN, $ORIGIN/.. and $ORIGIN/../lib
# (beside PREFIX/lib, which libtool adds), and UCX finds its transport modules in <dir of
# libucs.so>/ucx, so the prefix works wherever it is copied. Binaries that should use it (not the
# system's UCX) need LD_LIBRARY_PATH=PREFIX/lib (tools/gpu-run sets it).
set -e
usage="usage: tools/build-ucx.sh SOURCE [PREFIX]"
src=${1:?$usage}
cd "$(dirname "$0")/.."
root=$PWD
case $src in /*) ;; *) src=$root/$src ;; esac
prefix=${2:-$root/build-cuda/ucx}
case $prefix in /*) ;; *) prefix=$root/$prefix ;; esac
tag=${UCX_TAG:-v1.20.1}
work=${UCX_WORK:-$root/build-ucx-src}
jobs=${UCX_JOBS:-2}
cuda=${CUDA_HOME:-/usr/local/cuda}
gencode=${UCX_GENCODE:--gencode=arch=compute_90,code=sm_90}
if [ -f "$src" ]; then
    kind=tarball src_id=$(basename "$src")
elif [ -f "$src/configure.ac" ] || [ -f "$src/configure" ]; then
    kind=tree src_id="$src $(git -C "$src" describe --tags 2>/dev/null || true)"
elif git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    kind=git src_id="$tag"
else
    echo "build-ucx.sh: $src is neither a UCX tarball, a source tree nor a git repository" >&2
    echo "$usage" >&2
    exit 1
fi

opts="--disable-static --disable-debug --disable-assertions --disable-params-check
 --enable-mt --enable-cma --disable-doxygen-doc --disable-examples
 --with-cuda=$cuda --with-nvcc-gencode=$gencode --without-rocm --without-ze --without-gdrcopy
 --without-java --without-go --without-bfd --without-valgrind --without-fuse3
 --without-knem --without-xpmem --without-ugni --without-mad"
stamp="$src_id $(echo $opts) runpath=\$ORIGIN:\$ORIGIN/..:\$ORIGIN/../lib"
if [ -f "$prefix/.build-ucx.stamp" ] && [ "$(cat "$prefix/.build-ucx.stamp")" = "$stamp" ]; then
    echo "build-ucx.sh: $prefix is up to date ($src_id)"
    exit 0
fi

rm -rf "$work"
mkdir -p "$work"
extra_cppflags= extra_ldflags=
if [ ! -f "$cuda/include/nvml.h" ]; then
    shim=$work/nvml-shim
    mkdir -p "$shim/include" "$shim/lib"
    if [ -n "${NVML_H:-}" ] && [ -f "$NVML_H" ]; then
        cp "$NVML_H" "$shim/include/nvml.h"
    else
        echo "build-ucx.sh: no nvml.h in $cuda/include; set NVML_H to a copy of it" \
             "(github.com/NVIDIA/go-nvml, gen/nvml/nvml.h)" >&2
        exit 1
    fi
    # Link-only stub: every NVML entry point UCX calls (plain and _v2 names).
    for f in nvmlInit nvmlInit_v2 nvmlShutdown nvmlErrorString nvmlDeviceGetHandleByIndex \
             nvmlDeviceGetHandleByIndex_v2 nvmlDeviceGetNvLinkRemotePciInfo \
             nvmlDeviceGetNvLinkRemotePciInfo_v2 nvmlDeviceGetGpuFabricInfo \
             nvmlDeviceGetGpuFabricInfoV nvmlDeviceGetFieldValues nvmlDeviceGetCount \
             nvmlDeviceGetCount_v2 nvmlDeviceGetPciInfo nvmlDeviceGetPciInfo_v3; do
        echo "int $f(void) { return 999; }"
    done >"$shim/stub.c"
    cc -shared -fPIC -o "$shim/lib/libnvidia-ml.so.1" -Wl,-soname,libnvidia-ml.so.1 "$shim/stub.c"
    ln -sf libnvidia-ml.so.1 "$shim/lib/libnvidia-ml.so"
    extra_cppflags="-I$shim/include"
    extra_ldflags="-L$shim/lib"
fi
case $kind in
tarball) tar -C "$work" --strip-components=1 -xzf "$src" ;;
tree)    (cd "$src" && tar -cf - --exclude=.git .) | tar -C "$work" -xf - ;;
git)     git -C "$src" archive --format=tar "$tag" | tar -C "$work" -xf - ;;
esac
cd "$work"
# autogen.sh bakes the git branch and revision of its directory into UCX (ucx_info -v): keep git
# from climbing out of the scratch tree into an enclosing repository (this one), whose branch and
# revision it would report as UCX's. The scratch tree has no .git, so they stay empty.
[ -x configure ] || GIT_CEILING_DIRECTORIES=$(dirname "$work") ./autogen.sh >autogen.log 2>&1
# Options that an older/newer configure does not know are ignored by autoconf (with a warning).
# shellcheck disable=SC2086
./configure --prefix="$prefix" $opts CPPFLAGS="$extra_cppflags" LDFLAGS="$extra_ldflags" \
    >configure.log 2>&1 || { tail -30 config.log >&2; exit 1; }
# \$$ORIGIN: make turns $$ into $, the shell keeps \$ORIGIN literal for the linker. One RUNPATH
# for all: $ORIGIN (libraries), $ORIGIN/.. (modules in lib/ucx), $ORIGIN/../lib (programs in bin).
o='\$$ORIGIN'
make -j"$jobs" LDFLAGS="$extra_ldflags -Wl,-rpath,$o -Wl,-rpath,$o/.. -Wl,-rpath,$o/../lib -Wl,--enable-new-dtags" \
    >make.log 2>&1 || { tail -40 make.log >&2; exit 1; }
rm -rf "$prefix"
make install >install.log 2>&1 || { tail -20 install.log >&2; exit 1; }

# Trim to what runs: shared libs, modules, ucx_info and ucx_perftest, headers, pkg-config.
cd "$prefix"
rm -rf share lib/cmake etc
find . -name '*.la' -delete
find . -name '*.a' -delete
for b in bin/*; do
    case ${b#bin/} in ucx_info|ucx_perftest) ;; *) rm -f "$b" ;; esac
done
strip --strip-unneeded lib/*.so.* lib/ucx/*.so* bin/* 2>/dev/null || true
echo "$stamp" >.build-ucx.stamp
echo "build-ucx.sh: UCX ($src_id) in $prefix ($(du -sh . | cut -f1))"

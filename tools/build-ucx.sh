#!/bin/sh
# build-ucx.sh [PREFIX]: build UCX with CUDA support from its public source into PREFIX
# (default build-cuda/ucx, ignored by git, carried to the H200 machine with build-cuda/).
#
# Why: the GPU machine's UCX (1.16) is a runtime without CUDA transports, so the direct RDMA path
# (receiver's ucp_get into device memory) cannot run with it. This builds a released UCX here
# (Debian 12, glibc 2.36; runs on the device's glibc 2.39) with cuda_copy/cuda_ipc, small enough to
# travel: shared libraries only, stripped, no docs/java/go/static, no libbfd/valgrind/fuse.
#
# Source: the openucx/ucx git repository (UCX_GIT, default the local mirror that the `fetch` tool
# makes of github:openucx/ucx), tag UCX_TAG (default v1.20.1, the first line with CUDA 13 support),
# exported with `git archive` and bootstrapped with ./autogen.sh. Or UCX_TARBALL=path/to/ucx-X.tar.gz
# (a release tarball: configure is already generated).
# Idempotent: a finished install is recorded in PREFIX/.build-ucx.stamp (tag + options); run again
# it does nothing unless the tag or options changed. Scratch tree: UCX_WORK (default build-ucx-src/).
# Knobs: UCX_JOBS (default 2; run under nice), CUDA_HOME (default /usr/local/cuda),
# UCX_GENCODE (nvcc -gencode options for UCX's own CUDA kernels, default sm_90 for the H200).
#
# NVML: UCX's CUDA support needs nvml.h and libnvidia-ml at build time. Where the toolkit lacks
# them (this machine has no driver and no cuda-nvml-dev), NVML_H names a public nvml.h (default:
# the mirror of github:NVIDIA/go-nvml, gen/nvml/nvml.h) and a link-only stub libnvidia-ml.so.1 is
# built beside it; at run time the driver's real libnvidia-ml.so.1 is loaded.
#
# Relocation: the libraries get RUNPATH $ORIGIN (modules: $ORIGIN/..), and UCX finds its transport
# modules in <dir of libucs.so>/ucx, so the prefix works wherever it is copied. Binaries that should
# use it (not the system's UCX) need LD_LIBRARY_PATH=PREFIX/lib (tools/device-run.sh sets it).
set -e
cd "$(dirname "$0")/.."
root=$PWD
prefix=${1:-$root/build-cuda/ucx}
case $prefix in /*) ;; *) prefix=$root/$prefix ;; esac
tag=${UCX_TAG:-v1.20.1}
git_dir=${UCX_GIT:-/work/.mirror/openucx+ucx/repo}
work=${UCX_WORK:-$root/build-ucx-src}
jobs=${UCX_JOBS:-2}
cuda=${CUDA_HOME:-/usr/local/cuda}
gencode=${UCX_GENCODE:--gencode=arch=compute_90,code=sm_90}

opts="--disable-static --disable-debug --disable-assertions --disable-params-check
 --enable-mt --enable-cma --disable-doxygen-doc --disable-examples
 --with-cuda=$cuda --with-nvcc-gencode=$gencode --without-rocm --without-ze --without-gdrcopy
 --without-java --without-go --without-bfd --without-valgrind --without-fuse3
 --without-knem --without-xpmem --without-ugni --without-mad"
stamp="$tag $(echo $opts)"
if [ -f "$prefix/.build-ucx.stamp" ] && [ "$(cat "$prefix/.build-ucx.stamp")" = "$stamp" ]; then
    echo "build-ucx.sh: $prefix is up to date ($tag)"
    exit 0
fi

rm -rf "$work"
mkdir -p "$work"
extra_cppflags= extra_ldflags=
if [ ! -f "$cuda/include/nvml.h" ]; then
    nvml_h=${NVML_H:-/work/.mirror/NVIDIA+go-nvml/repo/gen/nvml/nvml.h}
    shim=$work/nvml-shim
    mkdir -p "$shim/include" "$shim/lib"
    if [ -f "$nvml_h" ]; then
        cp "$nvml_h" "$shim/include/nvml.h"
    elif [ -d /work/.mirror/NVIDIA+go-nvml/repo ]; then
        git -C /work/.mirror/NVIDIA+go-nvml/repo show HEAD:gen/nvml/nvml.h >"$shim/include/nvml.h"
    else
        echo "build-ucx.sh: no nvml.h in $cuda/include; set NVML_H to a copy of it" >&2
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
if [ -n "$UCX_TARBALL" ]; then
    tar -C "$work" --strip-components=1 -xzf "$UCX_TARBALL"
else
    [ -d "$git_dir" ] || { echo "build-ucx.sh: no UCX git repository at $git_dir (set UCX_GIT)" >&2; exit 1; }
    git -C "$git_dir" archive --format=tar "$tag" | tar -C "$work" -xf -
fi
cd "$work"
[ -x configure ] || ./autogen.sh >autogen.log 2>&1
# Options that an older/newer configure does not know are ignored by autoconf (with a warning).
# shellcheck disable=SC2086
./configure --prefix="$prefix" $opts CPPFLAGS="$extra_cppflags" LDFLAGS="$extra_ldflags" \
    >configure.log 2>&1 || { tail -30 config.log >&2; exit 1; }
# \$$ORIGIN: make turns $$ into $, the shell keeps \$ORIGIN literal for the linker.
make -j"$jobs" LDFLAGS="$extra_ldflags -Wl,-rpath,\\\$\$ORIGIN -Wl,--enable-new-dtags" >make.log 2>&1 || { tail -40 make.log >&2; exit 1; }
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
echo "build-ucx.sh: UCX $tag in $prefix ($(du -sh . | cut -f1))"

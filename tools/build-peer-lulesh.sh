#!/bin/sh
# tools/build-peer-lulesh.sh SRC OUTDIR: build LLNL's CUDA port of LULESH 2.0 (github LLNL/LULESH,
# branch 2.0.2-dev, folder cuda/src) with nvcc alone (one GPU, no MPI) into OUTDIR/lulesh-cuda,
# the peer our LULESH programs are compared with on the GPU.
#
# SRC is any of:
#   - a checkout of LLNL/LULESH at branch 2.0.2-dev (it has cuda/src/lulesh.cu),
#   - the cuda/src folder itself,
#   - a git repository (clone or bare mirror) of LLNL/LULESH: commit $LULESH_CUDA_REF
#     (default 46c0ffcc503c..., the head of 2.0.2-dev) is taken from it with git archive.
# SRC is never modified: the sources are copied to OUTDIR/lulesh-cuda-src/cuda/src and the
# patches below are applied there.
#
# Flags: LLNL's cuda/build/Makefile.CRAY release flags (-O3 -DNDEBUG) for one architecture,
# -arch=$ARCH (default sm_90, the H200), without -DUSE_MPI (lulesh.cu tests it with #ifdef, so
# even -DUSE_MPI=0 would pull in mpi.h). The code builds unchanged with CUDA 13.0; warning 177
# (an unused function) is silenced. The CUDA runtime is linked statically (nvcc's default), so
# the binary needs only the driver on the GPU machine.
#
# Patches (examples/lulesh/reference/, see its README.md):
#   cuda-print-precision.patch: the closing report's origin energy and plane-0 symmetry figures
#   printed with %.15e instead of %12.6e (output only; nothing else changes).
#
# Environment: NVCC (default /usr/local/cuda/bin/nvcc), ARCH (default sm_90),
# LULESH_CUDA_REF (commit taken when SRC is a git repository).
set -e
usage="usage: $0 SRC OUTDIR"
src=${1:?$usage}
out=${2:?$usage}
top=$(cd "$(dirname "$0")/.." && pwd)
patches="$top/examples/lulesh/reference/cuda-print-precision.patch"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
ARCH=${ARCH:-sm_90}
REF=${LULESH_CUDA_REF:-46c0ffcc503c300ed3ef364103499958a5c4ee16}

[ -x "$NVCC" ] || { echo "build-peer-lulesh.sh: no nvcc at $NVCC (set NVCC)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$out/lulesh-cuda-src
rm -rf "$work"
mkdir -p "$work/cuda/src"

if [ -f "$src/cuda/src/lulesh.cu" ]; then
    from="$src/cuda/src"
elif [ -f "$src/lulesh.cu" ] && [ -f "$src/sm_utils.inl" ]; then
    from="$src"
elif git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$src" archive "$REF" cuda/src | tar -x -C "$work"
    rm -f "$work"/cuda/src/*.lmesh "$work"/cuda/src/.DS_Store   # unstructured meshes (-u), unused
    from=""
    echo "sources: $src at $REF"
else
    echo "build-peer-lulesh.sh: $src holds neither cuda/src/lulesh.cu, lulesh.cu nor a git repository" >&2
    exit 1
fi
if [ -n "$from" ]; then
    cp "$from"/*.cu "$from"/*.h "$from"/*.inl "$work/cuda/src/"
    echo "sources: $from"
fi

cd "$work"
for p in $patches; do
    if patch -p1 -s -f -R --dry-run <"$p" >/dev/null 2>&1; then
        echo "patch $(basename "$p"): already applied in the sources"
    else
        patch -p1 -s <"$p"
        echo "patch $(basename "$p"): applied"
    fi
done

cd cuda/src
flags="-O3 -DNDEBUG -arch=$ARCH -diag-suppress 177 -I."
echo "$("$NVCC" --version | tail -1)"
for f in allocator lulesh lulesh-comms lulesh-comms-gpu; do
    echo "$NVCC $flags -c $f.cu -o $f.o"
    "$NVCC" $flags -c $f.cu -o $f.o
done
echo "$NVCC -arch=$ARCH allocator.o lulesh.o lulesh-comms.o lulesh-comms-gpu.o -o $out/lulesh-cuda"
"$NVCC" -arch="$ARCH" allocator.o lulesh.o lulesh-comms.o lulesh-comms-gpu.o -o "$out/lulesh-cuda"
rm -f ./*.o

cat <<EOF
built $out/lulesh-cuda ($ARCH)
run it on the GPU machine (one GPU; it writes xyz.asc, all node coordinates, into the current
directory when it ends, so run it in a scratch directory, not under \$OUT):
  cd \$(mktemp -d) && $out/lulesh-cuda -s 128            # to the stop time t = 1e-2
  cd \$(mktemp -d) && $out/lulesh-cuda -s 128 -i 100     # 100 cycles (the 3rd argument is ignored; the 4th is the count)
  $out/lulesh-cuda -s 30    # compare: the CPU reference prints 932 cycles, 2.025074785071994e+05
it prints "Run completed", the origin energy, the plane-0 symmetry figures, the elapsed time and
"FOM = ... (z/s)": 1000 / (grind time in microseconds per element per cycle), i.e. element-cycles
per second divided by 1000 (the reference's own FOM, despite the "z/s" label).
EOF

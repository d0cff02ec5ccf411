# sweep-lib.sh — the scaffolding the example apps' sweep.sh scripts share; sourced, not run:
#   launch      the mpirun command line as an array (all processes on one node, as root too)
#   mps_on      starts the CUDA MPS daemon once, where there is one; mps_off stops it (on EXIT too)
#   field OUT K the value of K=... on the RESULT line of a program's output OUT
# It also sets OMPI_MCA_btl_vader_single_copy_mechanism to none unless it is set.
launch=(mpirun --bind-to none --oversubscribe)
[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}

mps=0
mps_on() {
    [ $mps = 1 ] && return
    command -v nvidia-cuda-mps-control >/dev/null || return
    nvidia-cuda-mps-control -d && mps=1 && sleep 1
}
mps_off() {
    [ $mps = 1 ] || return
    echo quit | nvidia-cuda-mps-control; mps=0; sleep 1
}
trap mps_off EXIT

field() { echo "$1" | grep '^RESULT' | tr ' ' '\n' | sed -n "s/^$2=//p"; }

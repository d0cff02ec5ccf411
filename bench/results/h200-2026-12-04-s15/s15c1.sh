#!/usr/bin/env bash
# Session 15, call 1: LULESH surface-only node-force pass: tests on CUDA, A/B old/new, ncu kernel times.
set -u
top=$(pwd); b=$top/build-cuda
export LD_LIBRARY_PATH=$b/src/.libs:$b/ucx/lib
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl=^uct
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export TESS_SRCDIR=$top TESS_BUILDDIR=$b
O=$OUT/r; mkdir -p $O
mpi=(mpirun --oversubscribe --bind-to none)
L=$b/examples/lulesh
nvidia-cuda-mps-control -d; sleep 1
t0=$SECONDS
TESS_GPU=cuda timeout 200 $b/test/runtests --timeout-scale 2 lulesh > $O/tests.log 2>&1
echo "lulesh tests ($((SECONDS-t0)) s): $(grep -E '^[0-9]+ passed' $O/tests.log)" | tee $O/summary.txt
grep -E '^FAIL' $O/tests.log | head | tee -a $O/summary.txt
echo quit | nvidia-cuda-mps-control; sleep 1
ms() { echo "$1" | grep "^RESULT" | head -1 | tr ' ' '\n' | awk -F= '$1=="elapsed"{e=$2} $1=="iterations"{i=$2} END{if (i) printf "%.4f", e*1e3/i}'; }
for rep in 1 2 3; do
for n in 128 256; do
  it=150; [ $n = 256 ] && it=80
  line="$n rep $rep:"
  for v in old new; do
    d=$L; [ $v = old ] && d=$L/old
    o=$(timeout 60 "${mpi[@]}" -n 1 $d/lulesh_mpi -q -s $n -i $it 2>&1); echo "$o" > $O/mpi-$v-$n-$rep.txt
    m=$(ms "$o"); eval mpi_$v=$m
    o=$(timeout 60 "${mpi[@]}" -n 1 $d/lulesh_tess +ppn 1 -q -g $n -odf 8 -i $it 2>&1); echo "$o" > $O/tess-$v-$n-$rep.txt
    t=$(echo "$o" | grep "^RESULT-TESS" | tr ' ' '\n' | sed -n 's/^ms_per_cycle=//p')
    line="$line mpi-$v $m tess-$v $t ($(awk -v a="$t" -v b="$m" 'BEGIN{if(b>0) printf "%.3f", a/b}'))"
  done
  echo "$line" | tee -a $O/summary.txt
done
done
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
t0=$SECONDS
timeout 150 $NCU --metrics gpu__time_duration.sum --csv $L/lulesh_mpi -q -s 256 -i 5 > $O/ncu-mpi-256.csv 2> $O/ncu-mpi-256.err
echo "ncu mpi rc $? $((SECONDS-t0)) s" | tee -a $O/summary.txt
t0=$SECONDS
timeout 200 $NCU --metrics gpu__time_duration.sum --csv $L/lulesh_tess +ppn 1 -q -g 256 -odf 8 -i 5 > $O/ncu-tess-256.csv 2> $O/ncu-tess-256.err
echo "ncu tess rc $? $((SECONDS-t0)) s" | tee -a $O/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r

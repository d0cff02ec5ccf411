#!/usr/bin/env bash
# Session 16, call 1: EOS and time constraints in one kernel (its last block writes the pinned
# host block) against the previous main (old): lulesh tests on CUDA, MPI on 8 ranks, LLNL peer,
# ODF 8 A/B at 128³ and 256³ (each against its own lulesh_mpi), ncu kernel times at 256³.
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
ms() { echo "$1" | grep "^RESULT" | head -1 | tr ' ' '\n' | awk -F= '$1=="elapsed"{e=$2} $1=="iterations"{i=$2} END{if (i) printf "%.4f", e*1e3/i}'; }
tms() { echo "$1" | grep "^RESULT-TESS" | tr ' ' '\n' | sed -n 's/^ms_per_cycle=//p'; }
nvidia-cuda-mps-control -d; sleep 1
t0=$SECONDS
TESS_GPU=cuda timeout 200 $b/test/runtests --timeout-scale 2 lulesh > $O/tests.log 2>&1
echo "lulesh tests ($((SECONDS-t0)) s): $(grep -E '^[0-9]+ passed' $O/tests.log)" | tee $O/summary.txt
grep -E '^FAIL' $O/tests.log | head | tee -a $O/summary.txt
for s in 64 128; do
  line="mpi 8 ranks (MPS) -s $s:"
  for v in old new; do
    d=$L; [ $v = old ] && d=$L/old
    o=$(timeout 90 "${mpi[@]}" -n 8 $d/lulesh_mpi -q -s $s -i 100 2>&1); echo "$o" > $O/mpi8-$v-$s.txt
    line="$line $v $(ms "$o")"
  done
  echo "$line" | tee -a $O/summary.txt
done
echo quit | nvidia-cuda-mps-control; sleep 1
t0=$SECONDS
ITERS=200 timeout 120 $top/examples/lulesh/gpu-compare $b $b/peer/lulesh-cuda > $O/compare.txt 2>&1
echo "gpu-compare rc $? ($((SECONDS-t0)) s)" | tee -a $O/summary.txt; cat $O/compare.txt | tee -a $O/summary.txt
for rep in 1 2 3; do
for n in 128 256; do
  it=150; [ $n = 256 ] && it=80
  line="$n rep $rep:"
  for v in old new; do
    d=$L; [ $v = old ] && d=$L/old
    o=$(timeout 60 "${mpi[@]}" -n 1 $d/lulesh_mpi -q -s $n -i $it 2>&1); echo "$o" > $O/mpi-$v-$n-$rep.txt
    m=$(ms "$o"); line="$line | mpi-$v $m"
    for f in nodes none; do
      [ $v = old ] && [ $f = none ] && continue
      o=$(LULESH_FUSE=$f timeout 60 "${mpi[@]}" -n 1 -x LULESH_FUSE $d/lulesh_tess +ppn 1 -q -g $n -odf 8 -i $it 2>&1); echo "$o" > $O/tess-$v-$f-$n-$rep.txt
      t=$(tms "$o")
      line="$line $v-$f $t ($(awk -v a="$t" -v b="$m" 'BEGIN{if(b>0) printf "%.3f", a/b}'))"
    done
  done
  echo "$line" | tee -a $O/summary.txt
done
done
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
t0=$SECONDS
timeout 100 $NCU --metrics gpu__time_duration.sum --csv $L/lulesh_tess +ppn 1 -q -g 256 -odf 8 -i 3 > $O/ncu-tess-256.csv 2> $O/ncu.err
timeout 60 $NCU --metrics gpu__time_duration.sum --csv $L/lulesh_mpi -q -s 256 -i 3 > $O/ncu-mpi-256.csv 2>> $O/ncu.err
echo "ncu rc $? $((SECONDS-t0)) s" | tee -a $O/summary.txt
grep -h "^RESULT" $O/*.txt | awk '{for(i=1;i<=NF;i++) if ($i ~ /^(prog|s|n|origin_energy|iterations|domains)=/) printf "%s ", $i; print ""}' | sort | uniq -c > $O/energies.txt
cd $OUT && tar czf r.tgz r && rm -rf r

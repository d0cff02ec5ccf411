#!/bin/sh
# Run the reference cases and write one stdout file per case (CASE.txt) and reports.csv here.
# Usage: sh run.sh [WORKDIR]   (WORKDIR as given to build.sh; default /tmp/lulesh-ref-build)
# RUN_CASES="s5-np1 s10-np1" runs only those cases (reports.csv then lists only them).
# 8 and 27 ranks oversubscribe a small machine; Open MPI is told to allow it.
set -e
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/lulesh-ref-build}
ser=$work/serial/lulesh2.0
mpi=$work/mpi/lulesh2.0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_hwloc_base_binding_policy=none
MPIRUN=${MPIRUN:-mpirun.openmpi}

# case  ranks  build  options (s first)
cases="
s5-np1             1  serial -s 5
s6-np1             1  serial -s 6
s10-np1            1  serial -s 10
s15-np1            1  serial -s 15
s20-np1            1  serial -s 20
s30-np1            1  serial -s 30
s10-np1-mpi        1  mpi    -s 10
s3-np8             8  mpi    -s 3
s5-np8             8  mpi    -s 5
s10-np8            8  mpi    -s 10
s5-np27           27  mpi    -s 5
s10-r11-b4-c4-np1  1  serial -s 10 -r 11 -b 4 -c 4
s10-r1-np1         1  serial -s 10 -r 1
s10-r21-b2-c8-np1  1  serial -s 10 -r 21 -b 2 -c 8
s5-b4-c4-np8       8  mpi    -s 5 -b 4 -c 4
s5-r1-np8          8  mpi    -s 5 -r 1
s10-i50-np1        1  serial -s 10 -i 50
s5-i50-np8         8  mpi    -s 5 -i 50
"
csv=$here/reports.csv
echo "case,ranks,s,options,iterations,final_origin_energy,max_abs_diff,total_abs_diff,max_rel_diff,global_n,build" > "$csv"
echo "$cases" | while read -r name ranks build opts; do
  [ -n "$name" ] || continue
  if [ -n "$RUN_CASES" ]; then
    case " $RUN_CASES " in *" $name "*) ;; *) continue ;; esac
  fi
  if [ "$build" = serial ]; then
    nice "$ser" $opts < /dev/null > "$here/$name.txt"
  else
    nice $MPIRUN -n "$ranks" "$mpi" $opts < /dev/null > "$here/$name.txt"
  fi
  s=$(echo "$opts" | awk '{print $2}')
  rest=$(echo "$opts" | cut -d' ' -f3-)
  [ "$rest" = "$opts" ] && rest=""
  p=$(awk -v r="$ranks" 'BEGIN { printf "%d", r^(1/3) + 0.5 }')
  awk -v name="$name" -v ranks="$ranks" -v s="$s" -v rest="$rest" -v n=$((s * p)) -v build="$build" '
    /Iteration count/     { it = $NF }
    /Final Origin Energy/ { e = $NF }
    /MaxAbsDiff/          { ma = $NF }
    /TotalAbsDiff/        { ta = $NF }
    /MaxRelDiff/          { mr = $NF }
    END { printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", name, ranks, s, rest, it, e, ma, ta, mr, n, build }
  ' "$here/$name.txt" >> "$csv"
  tail -n 1 "$csv"
done

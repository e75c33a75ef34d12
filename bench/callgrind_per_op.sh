#!/bin/bash
# Instructions per command (callgrind, 1 worker): SERVER_BIN PORT; set VGX to e.g.
#   --toggle-collect='pion::server::CommandService::Dispatch(*' to count only command handling.
# Prints Ir per op for lookup, membership, set and get of 100 B values (pion-bench, 1 client,
# 20000 requests).
BIN=$1; PORT=$2; B=${PION_BENCH:-$(dirname "$0")/../build/release/bin/pion-bench}
B=$(realpath "$B"); D=$(mktemp -d); cd "$D"
valgrind --tool=callgrind $VGX --callgrind-out-file=$D/cg.%p $BIN --port $PORT --kvcache --workers 1 --appendonly no --dir $D >$D/vg.log 2>&1 &
VP=$!
for i in $(seq 1 200); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.5; done
N=20000
for w in lookup membership set get; do
  $B --port $PORT --workload $w --ns cg$w --payload 100 --clients 1 --requests 2000 >/dev/null 2>&1
  callgrind_control -z $VP >/dev/null
  $B --port $PORT --workload $w --payload 100 --clients 1 --requests $N --ns cg$w --no-setup >$D/$w.out 2>&1
  callgrind_control -d $w $VP >/dev/null
  f=$(ls -t $D/cg.$VP.* 2>/dev/null | head -1)
  ir=$(grep -m1 "^summary:\|^totals:" $f | awk '{print $2}')
  echo "$w Ir=$ir per_op=$((ir / N))"
done
kill $VP; wait $VP 2>/dev/null

#!/bin/bash
# Instructions per request (callgrind Ir, user space only) of one server for the
# small-command rows of the `small` and `strings` suites: GET/SET -d 100,
# PING_MBULK, KV.PREFIX.LOOKUP (redis: GET) and KV.PREFIX.MEMBERSHIP 1 hash
# (redis: SISMEMBER), 50 redis-benchmark clients at -P 1 and -P 16. The server
# runs under valgrind with instrumentation off; it is switched on
# (callgrind_control) only around each fixed -n run, so start-up, set-up and
# the warm-up runs are not counted. Repeatable on a loaded machine
# (bench/results/LOG.md "Small commands: instructions per request").
# usage: bench/callgrind_small.sh pion|redis BIN OUTDIR   (N=20000 requests per row)
set -u
kind=$1; bin=$2; out=$3; mkdir -p $out
N=${N:-20000}
port=$(/usr/bin/python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
d=$(mktemp -d ${TMPDIR:-/tmp}/pion-cg.XXXX)
if [ $kind = pion ]; then
  valgrind --tool=callgrind --callgrind-out-file=$out/cg.%p --instr-atstart=no $bin --kvcache --port $port --bind 127.0.0.1 --dir $d --appendonly no --workers 1 > $out/server.log 2>&1 &
else
  valgrind --tool=callgrind --callgrind-out-file=$out/cg.%p --instr-atstart=no $bin --port $port --bind 127.0.0.1 --save '' --appendonly no --dir $d > $out/server.log 2>&1 &
fi
vpid=$!
for i in $(seq 1 300); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.2; done
if [ $kind = pion ]; then
  redis-cli -p $port KV.PREFIX.REGISTER smallns 64 fp16 BLOCKS 16 1 ABCDEFGH
  /usr/bin/python3 - $port <<'PY'
import socket,sys
s=socket.create_connection(('127.0.0.1',int(sys.argv[1])))
row=b'\x00\x3c'*64
for side in (b'smallns_pk',b'smallns_pv'):
    args=[b'V.STOREBATCH',side,b'0',b'0',b'1',row,b'FMT',b'F16']
    m=b'*%d\r\n'%len(args)+b''.join(b'$%d\r\n%s\r\n'%(len(a),a) for a in args)
    s.sendall(m); print(s.recv(100))
PY
  LOOK="KV.PREFIX.LOOKUP smallns"; MEMB="KV.PREFIX.MEMBERSHIP smallns 1 ABCDEFGH"
else
  redis-cli -p $port SET smallkey abc; redis-cli -p $port SADD smallset ABCDEFGH
  LOOK="GET smallkey"; MEMB="SISMEMBER smallset ABCDEFGH"
fi
redis-benchmark -p $port -c 50 -n 2000 -t set,get -d 100 -q >/dev/null  # warm (key exists)
run() { # name P args...
  local name=$1 P=$2; shift 2
  redis-benchmark -p $port -c 50 -n 1000 -P $P -q "$@" > /dev/null  # warm conns
  callgrind_control -z $vpid >/dev/null
  callgrind_control -i on $vpid >/dev/null
  redis-benchmark -p $port -c 50 -n $N -P $P -q "$@" > /dev/null
  callgrind_control -i off $vpid >/dev/null
  callgrind_control -d "$name-P$P" $vpid >/dev/null
  f=$(ls -t $out/cg.* | head -1); mv $f $out/$name-P$P.cg
  ir=$(callgrind_annotate $out/$name-P$P.cg 2>/dev/null | grep -m1 "PROGRAM TOTALS" | awk '{print $1}' | tr -d ,)
  echo "$kind $name -P $P: $ir Ir total, $((ir / N)) Ir/request"
}
for P in 1 16; do
  run GET100 $P -t get -d 100
  run SET100 $P -t set -d 100
  run PING_MBULK $P -t ping_mbulk
  run LOOKUP $P $LOOK
  run MEMBERSHIP $P $MEMB
done
redis-cli -p $port shutdown nosave >/dev/null 2>&1 || redis-cli -p $port shutdown >/dev/null 2>&1
wait $vpid
rm -rf $d

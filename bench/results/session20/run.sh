#!/bin/bash
# Session 20 final: quick before/after pair + projector/reconciler per tree, then the full run on main.
OUT=${1:-/work/wt/final20/out}; mkdir -p $OUT
BEFORE=/work/wt/base; AFTER=/work/main
PEERS=agentledger,langgraph-sqlite,dbos-postgres,floor-kafka,floor-kafka-txn,floor-kafka-txn3
stopall() { for d in /work/main /work/wt/*/; do [ -x $d/.venv/bin/agentledger ] && (cd $d && .venv/bin/agentledger stack down >/dev/null 2>&1); done; }
one() { # tree tag
  stopall
  echo "== $2 $(git -C $1 rev-parse --short HEAD) start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
  (cd $1 && .venv/bin/python -m bench --quick --peers $PEERS --json $OUT/$2.json --plots $OUT/$2-plots > $OUT/$2.txt 2>&1)
  echo "== $2 end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
}
svc() {
  stopall
  echo "== svc $2 start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
  (cd $1 && .venv/bin/python -m bench.projector --events 200000 --lag-rate 1000 --lag-seconds 10 --json $OUT/proj-$2.json > $OUT/proj-$2.txt 2>&1)
  (cd $1 && .venv/bin/python -m bench.reconciler --intents 1000 --latency-ms 10 --json $OUT/rec-$2.json > $OUT/rec-$2.txt 2>&1)
  echo "== svc $2 end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
}
full() {
  stopall
  echo "== full $(git -C $AFTER rev-parse --short HEAD) start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
  (cd $AFTER && .venv/bin/python -m bench --json bench/results/bench.json --plots bench/results > $OUT/full.txt 2>&1)
  echo "== full end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
}
case "${2:-all}" in
  pair) one $BEFORE before-1; one $AFTER after-1 ;;
  pair2) one $AFTER after-2; one $BEFORE before-2 ;;
  svc) svc $BEFORE before; svc $AFTER after ;;
  full) full ;;
  all) one $BEFORE before-1; one $AFTER after-1; svc $BEFORE before; svc $AFTER after; full ;;
esac
stopall

#!/bin/bash
OUT=/work/wt/final16/out; BEFORE=/work/wt/base; AFTER=/work/main
PEERS=agentledger,langgraph-sqlite,dbos-postgres,floor-kafka,floor-kafka-txn,floor-kafka-txn3
stopall() { for d in /work/main /work/wt/*/; do [ -x $d/.venv/bin/agentledger ] && (cd $d && .venv/bin/agentledger stack down >/dev/null 2>&1); done; }
one() { stopall
  echo "== $2 $(git -C $1 rev-parse --short HEAD) start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
  (cd $1 && .venv/bin/python -m bench --quick --peers $PEERS --json $OUT/$2.json --plots $OUT/$2-plots > $OUT/$2.txt 2>&1)
  echo "== $2 end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt; }
svc() { stopall
  echo "== svc $2 start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
  (cd $1 && .venv/bin/python -m bench.projector --events 200000 --lag-rate 1000 --lag-seconds 10 --json $OUT/proj-$2.json > $OUT/proj-$2.txt 2>&1)
  (cd $1 && .venv/bin/python -m bench.reconciler --intents 1000 --latency-ms 10 --json $OUT/rec-$2.json > $OUT/rec-$2.txt 2>&1)
  echo "== svc $2 end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt; }
m1() { stopall
  echo "== 1M $2 start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
  (cd $1 && .venv/bin/python -m bench.projector --events 1000000 --rebuild-only --json $OUT/1m-$2.json > $OUT/1m-$2.txt 2>&1)
  echo "== 1M $2 end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt; }
one $AFTER after-2; one $BEFORE before-2; svc $AFTER after2; svc $BEFORE before2; m1 $AFTER after; m1 $BEFORE before
stopall

#!/bin/bash
OUT=/work/wt/final/out2; mkdir -p $OUT
stopall() { for d in /work/main /work/wt/*/; do [ -x $d/.venv/bin/agentledger ] && (cd $d && .venv/bin/agentledger stack down >/dev/null 2>&1); done; }
for pair in 1 2; do for t in after before; do
  tree=/work/main; [ $t = before ] && tree=/work/wt/base
  stopall
  echo "== $t-$pair start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
  (cd $tree && .venv/bin/python -m bench --quick --peers agentledger,langgraph-sqlite --json $OUT/$t-$pair.json > $OUT/$t-$pair.txt 2>&1)
  echo "== $t-$pair end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
done; done
stopall

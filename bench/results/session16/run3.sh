#!/bin/bash
OUT=/work/wt/final16/out; AFTER=/work/main
stopall() { for d in /work/main /work/wt/*/; do [ -x $d/.venv/bin/agentledger ] && (cd $d && .venv/bin/agentledger stack down >/dev/null 2>&1); done; }
stopall
echo "== full2 $(git -C $AFTER rev-parse --short HEAD) start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
(cd $AFTER && .venv/bin/python -m bench --json bench/results/bench.json --plots bench/results > $OUT/full2.txt 2>&1)
echo "== full2 end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
stopall

#!/bin/bash
# Session 20: one quick bench of one tree under the bench lock, on this checkout's harness and
# stack; the tree's services/ come first on PYTHONPATH. usage: quick.sh TAG TREE
OUT=/work/wt/resume6/bench/results/session20-resume12
TAG=$1; TREE=$2
echo "start $(date -u +%T) $(cat /proc/loadavg)" > $OUT/quick-$TAG.txt
PYTHONPATH=$TREE/services:/work/wt/resume6 flock /work/bench.lock \
  .venv/bin/python -m bench --quick --peers agentledger,langgraph-sqlite --json $OUT/quick-$TAG.json >> $OUT/quick-$TAG.txt 2>&1
echo "end $(date -u +%T) $(cat /proc/loadavg)" >> $OUT/quick-$TAG.txt

#!/bin/bash
# Session 19: one quick bench of one tree under the bench lock, on this checkout's harness and
# stack; the tree's services/ come first on PYTHONPATH (children and the projector inherit it).
# usage: quick.sh TAG TREE   (run from /work/wt/resume5)
OUT=/work/wt/resume5/bench/results/session19-resume12
TAG=$1; TREE=$2
echo "start $(date -u +%T) $(cat /proc/loadavg)" > $OUT/quick-$TAG.txt
PYTHONPATH=$TREE/services:/work/wt/resume5 flock /work/bench.lock \
  .venv/bin/python -m bench --quick --peers agentledger,langgraph-sqlite --json $OUT/quick-$TAG.json >> $OUT/quick-$TAG.txt 2>&1
echo "end $(date -u +%T) $(cat /proc/loadavg)" >> $OUT/quick-$TAG.txt

#!/bin/bash
# Throwaway (session 19): txcpu.py on a broker started for it with config $2 (as run.sh).
W=/work/wt/lagjit; O=$W/bench/results/session19-lagjit
tag=$1; cfg=$2; rounds=${3:-8}; txns=${4:-2000}
case $cfg in
  base) export LAGJIT_GC="-XX:+UseG1GC -XX:MaxGCPauseMillis=20" LAGJIT_JVM= ;;
  c1) export LAGJIT_GC="-XX:+UseG1GC -XX:MaxGCPauseMillis=20" LAGJIT_JVM="-XX:TieredStopAtLevel=1" ;;
  serial) export LAGJIT_GC="-XX:+UseSerialGC" LAGJIT_JVM= ;;
  *) echo "bad config $cfg"; exit 2 ;;
esac
cd $W
.venv/bin/agentledger stack down >/dev/null 2>&1
PATH=$O/bin:$PATH .venv/bin/agentledger stack up >/dev/null 2>&1
B=$(python3 -c "import json; print(json.load(open('$W/.agentledger/stack.json'))['kafka']['pid'])")
echo "== tx $tag cfg=$cfg start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) broker $B" >> $O/log.txt
flock /work/bench.lock env PYTHONPATH=$W .venv/bin/python $O/txcpu.py.txt $rounds $txns $B $tag 2>/dev/null | grep '^{' | tee -a $O/txcpu.jsonl
echo "== tx $tag end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/log.txt

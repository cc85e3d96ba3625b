#!/bin/bash
# Throwaway (session 19): the quick bench's step rows on a broker started for it with config $2.
W=/work/wt/lagjit; O=$W/bench/results/session19-lagjit
tag=$1; cfg=$2
case $cfg in
  base) export LAGJIT_GC="-XX:+UseG1GC -XX:MaxGCPauseMillis=20" LAGJIT_JVM= ;;
  serial) export LAGJIT_GC="-XX:+UseSerialGC" LAGJIT_JVM= ;;
  c1) export LAGJIT_GC="-XX:+UseG1GC -XX:MaxGCPauseMillis=20" LAGJIT_JVM="-XX:TieredStopAtLevel=1" ;;
esac
cd $W
.venv/bin/agentledger stack down >/dev/null 2>&1
PATH=$O/bin:$PATH .venv/bin/agentledger stack up >/dev/null 2>&1
echo "== q $tag cfg=$cfg start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/log.txt
flock /work/bench.lock .venv/bin/python -m bench --quick --peers agentledger,floor-kafka-txn --json $O/$tag.json > $O/$tag.txt 2>&1
echo "== q $tag end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/log.txt
grep -E 'step latency p50|step latency p99|CPU µs per step, 1 run|projector lag' $O/$tag.txt | sed "s/^/$tag /" | tee -a $O/quick.txt

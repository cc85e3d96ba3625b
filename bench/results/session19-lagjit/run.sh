#!/bin/bash
# Throwaway (session 19): one bench.projector run on a stack started for it with the broker's
# JVM flags of config $2, under the bench lock; the sampler beside it.
# Usage: run.sh TAG CONFIG [bench args...]   CONFIG: base | c1 | serial
W=/work/wt/lagjit; O=$W/bench/results/session19-lagjit
tag=$1; cfg=$2; shift 2
case $cfg in
  base) export LAGJIT_GC="-XX:+UseG1GC -XX:MaxGCPauseMillis=20" LAGJIT_JVM= ;;
  c1) export LAGJIT_GC="-XX:+UseG1GC -XX:MaxGCPauseMillis=20" LAGJIT_JVM="-XX:TieredStopAtLevel=1" ;;
  serial) export LAGJIT_GC="-XX:+UseSerialGC" LAGJIT_JVM= ;;
  *) echo "bad config $cfg"; exit 2 ;;
esac
fresh() {
  cd $W
  .venv/bin/agentledger stack down >/dev/null 2>&1
  PATH=$O/bin:$PATH .venv/bin/agentledger stack up >/dev/null 2>&1
}
inner() {
  cd $W
  B=$(python3 -c "import json; print(json.load(open('$W/.agentledger/stack.json'))['kafka']['pid'])")
  echo "== $tag cfg=$cfg args=$* start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) broker $B: $(tr '\0' ' ' < /proc/$B/cmdline | cut -c1-140)" >> $O/log.txt
  python3 $O/sample.py.txt $B $O/samples-$tag.jsonl & S=$!
  LAGJIT_DUMP=$O/lags-$tag.json PYTHONPATH=$W .venv/bin/python $O/benchwrap.py.txt --events 200000 --lag-rate 1000 --lag-seconds 10 "$@" --json $O/$tag.json > $O/$tag.txt 2>&1
  kill $S
  echo "== $tag end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/log.txt
}
fresh  # outside the lock: an idle broker waits for it as cold as it started
export -f inner; export tag cfg O W
if [ -n "$LAGJIT_NOLOCK" ]; then inner "$@"; else flock /work/bench.lock bash -c "inner $*"; fi
python3 $O/summary.py.txt $tag $O/$tag.json $O/samples-$tag.jsonl | tee -a $O/summary.jsonl

# Throwaway (session 19): restart the stack with broker JVM flags, probe, bench.
W=/work/wt/lagjit
O=$W/bench/results/session19-lagjit
bpid() { python3 -c "import json; print(json.load(open('$W/.agentledger/stack.json'))['kafka']['pid'])"; }
fresh() {  # $1 = tag, LAGJIT_GC / LAGJIT_JVM from the environment
  cd $W
  .venv/bin/agentledger stack down >/dev/null
  PATH=$O/bin:$PATH .venv/bin/agentledger stack up >/dev/null
  echo "$1 fresh at $(date -u +%T) broker $(bpid) gc='$LAGJIT_GC' jvm='$LAGJIT_JVM' cmd: $(tr '\0' ' ' < /proc/$(bpid)/cmdline | cut -c1-200)" >> $O/log.txt
}
probe() {  # $1 = tag, $2 = rounds
  cd $W
  PYTHONPATH=$W .venv/bin/python $O/probe.py.txt $2 $(bpid) $1 | tee -a $O/probe-$1.jsonl
}
nicejit() { python3 $O/renice.py.txt $(bpid) >> $O/log.txt; }

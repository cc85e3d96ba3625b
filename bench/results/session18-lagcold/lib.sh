W=/work/wt/lagcold
O=/tmp/lagcold
bpid() { python3 -c "import json; print(json.load(open('$W/.agentledger/stack.json'))['kafka']['pid'])"; }
fresh() {  # $1 = tag ; all | kafka | redis
  cd $W
  if [ "$2" = kafka ] || [ "$2" = redis ]; then
    JAVA_TOOL_OPTIONS="-Xlog:gc,safepoint:file=$O/gc-$1-%p.log:uptime,time" .venv/bin/python -c "
import asyncio; from pathlib import Path; from agentledger.stack.local import LocalStack
s=LocalStack(Path('.agentledger'), keep_running=True)
async def m():
    await s.down(['$2']); await s.up(['$2'])
asyncio.run(m())"
  else
    .venv/bin/agentledger stack down >/dev/null
    JAVA_TOOL_OPTIONS="-Xlog:gc,safepoint:file=$O/gc-$1-%p.log:uptime,time" .venv/bin/agentledger stack up >/dev/null
  fi
  echo "$1 fresh($2) at $(date -u +%T) broker $(bpid)" >> $O/log.txt
}
sampler() { python3 $O/sample.py $(bpid) $O/samples-$1.jsonl & echo $! > $O/sampler.pid; }
stop_sampler() { kill $(cat $O/sampler.pid); }
bp() {  # $1 = tag
  cd $W
  echo "$1 start $(date -u +%T) load $(cat /proc/loadavg)" >> $O/log.txt
  flock /work/bench.lock .venv/bin/python -m bench.projector --events 200000 --lag-rate 1000 --lag-seconds 10 --json $O/$1.json > $O/$1.txt 2>&1
  echo "$1 end $(date -u +%T) load $(cat /proc/loadavg)" >> $O/log.txt
  python3 -c "
import json; d=json.load(open('$O/$1.json')); e=d['end_to_end']; f=d['floor']['kafka_delivery_lag']
print('$1', 'p50', e['lag_p50_ms'], 'p99', e['lag_p99_ms'], 'tenth', e['last_tenth_lag_p50_ms'], 'bench', e['bench_cpu_share'], 'proj', e['projector_cpu_share'], 'redis', e['redis_cpu_share'], 'broker', e.get('broker_cpu_share'), 'floor', f.get('lag_p50_ms'), f.get('lag_p99_ms'), 'evs', d['projector']['events_applied_per_s'])" | tee -a $O/log.txt
}
bp2() {  # $1 = tag, rest = extra args
  tag=$1; shift
  cd $W
  echo "$tag start $(date -u +%T) load $(cat /proc/loadavg) args $*" >> $O/log.txt
  flock /work/bench.lock .venv/bin/python -m bench.projector --events 200000 --lag-rate 1000 --lag-seconds 10 "$@" --json $O/$tag.json > $O/$tag.txt 2>&1
  echo "$tag end $(date -u +%T) load $(cat /proc/loadavg)" >> $O/log.txt
  python3 -c "
import json; d=json.load(open('$O/$tag.json')); e=d['end_to_end']; f=d['floor']['kafka_delivery_lag']
w=[(r.get('lag_p99_ms'), r.get('broker_cpu_share')) for r in d['floor'].get('broker_warmup', [])]
print('$tag', 'p50', e['lag_p50_ms'], 'p99', e['lag_p99_ms'], 'tenth', e['last_tenth_lag_p50_ms'], 'bench', e['bench_cpu_share'], 'proj', e['projector_cpu_share'], 'redis', e['redis_cpu_share'], 'broker', e.get('broker_cpu_share'), 'floor', f.get('lag_p50_ms'), f.get('lag_p99_ms'), 'evs', d['projector']['events_applied_per_s'], 'warmup', w)" | tee -a $O/log.txt
}

#!/bin/bash
# $1 = tree (base|txnv2), $2 = tag
cd /work/wt/$1
echo "$1 $2 start $(date -u +%H:%M:%S) load $(cat /proc/loadavg)" >> /tmp/txnv2-bench/log.txt
flock /work/bench.lock timeout 400 .venv/bin/python -m bench --quick --peers agentledger,langgraph-sqlite,dbos-postgres,floor-kafka-txn --json /tmp/txnv2-bench/$1-$2.json > /tmp/txnv2-bench/$1-$2.txt 2>&1
echo "$1 $2 end $(date -u +%H:%M:%S) rc=$? load $(cat /proc/loadavg)" >> /tmp/txnv2-bench/log.txt

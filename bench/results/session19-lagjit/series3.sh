#!/bin/bash
# Throwaway (session 19): after series2, a quick-bench pair and a cold lag pair.
O=/work/wt/lagjit/bench/results/session19-lagjit; cd $O
while kill -0 14353 2>/dev/null; do sleep 5; done
./qrun.sh Qbase1 base; ./qrun.sh Qserial1 serial
./run.sh Cserial1 serial --broker-warmup-seconds 0; ./run.sh Cbase1 base --broker-warmup-seconds 0
echo "series3 done $(date -u +%T)" >> log.txt

#!/bin/bash
# Throwaway (session 19): after series2, the quick-bench pair (the cold pair dropped: the lock queue).
O=/work/wt/lagjit/bench/results/session19-lagjit; cd $O
while kill -0 14353 2>/dev/null; do sleep 5; done
./qrun.sh Qserial1 serial; ./qrun.sh Qbase1 base
echo "series4 done $(date -u +%T)" >> log.txt

#!/bin/bash
# Throwaway (session 19): the alternated series, each run taking the bench lock on its own.
O=/work/wt/lagjit/bench/results/session19-lagjit
cd $O
./run.sh Wbase1 base
./run.sh Wc1a c1
./run.sh Wserial1 serial
./run.sh Wbase2 base
./run.sh Wc1b c1
./run.sh Wserial2 serial
./run.sh Cbase1 base --broker-warmup-seconds 0
./run.sh Cc1a c1 --broker-warmup-seconds 0
./run.sh Cserial1 serial --broker-warmup-seconds 0
./run.sh Cbase2 base --broker-warmup-seconds 0
echo "series done $(date -u +%T)" >> $O/log.txt

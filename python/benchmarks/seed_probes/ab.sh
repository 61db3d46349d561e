#!/bin/bash
# Alternates the SDK of another tree (OLD_SRC, default /tmp/pyseed-base/python/src: `git archive`
# of the base commit's python/src) and this tree's (NEW_SRC, default: the one PYTHON imports), N
# rounds, each run in a fresh LAKESHORE_HOME:
#   cd python/benchmarks/seed_probes; LAKESHORE_BIN=... PYTHON=../../.venv/bin/python ./ab.sh 4 enq8.py 5000  (or 3 burn.py 5000 4)
n=$1; shift
for r in $(seq $n); do
  for side in old new; do
    d=$(mktemp -d)
    if [ $side = old ]; then pp=${OLD_SRC:-/tmp/pyseed-base/python/src}; else pp=${NEW_SRC:-}; fi
    echo -n "$side load=$(cut -d' ' -f1 /proc/loadavg) "
    PYTHONPATH=$pp LAKESHORE_HOME=$d LAKESHORE_BIN=${LAKESHORE_BIN:-lakeshore} ${PYTHON:-python} "$@"
    rm -rf $d
  done
done

#!/bin/sh
# make bench: run every scripts/bench-*.sh there is, one after another. Each is
# guarded: a failing (or missing-dependency) benchmark is reported and the others
# still run; the exit status is 1 if any failed.
#   HC_BIN=bin sh scripts/bench.sh [NAME...]     (NAME: kernels, run, ... ; default all)
# Environment passed through: HC_BIN, HC_FIXTURES, THREADS and each script's own.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
HC_BIN=${HC_BIN:-$here/bin}
export HC_BIN

if [ $# -gt 0 ]; then
    scripts=
    for n; do
        [ -f "scripts/bench-$n.sh" ] || { echo "bench: scripts/bench-$n.sh: no such benchmark" >&2; exit 2; }
        scripts="$scripts scripts/bench-$n.sh"
    done
else
    scripts=$(ls scripts/bench-*.sh 2>/dev/null)
fi
[ -n "$scripts" ] || { echo "bench: no scripts/bench-*.sh"; exit 0; }

passed='' failed=''
for s in $scripts; do
    name=$(basename "$s" .sh)
    echo "=== $name"
    start=$(date +%s)
    if sh "$s"; then passed="$passed $name"; r=ok; else rc=$?; failed="$failed $name(exit $rc)"; r="FAILED (exit $rc)"; fi
    echo "=== $name: $r, $(( $(date +%s) - start )) s"
    echo
done
echo "bench: ran:${passed:- none}"
[ -z "$failed" ] || { echo "bench: failed:$failed"; exit 1; }

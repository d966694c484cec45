#!/bin/sh
# hc-profile throughput (corpus tokens/s) beside hc-run's prompt-processing
# tokens/s on the same model, same threads, same batches (prompt = window), and
# beside hc-run --perplexity over the same windows: like profiling (whose hook
# needs every position of every layer) it evaluates the whole last layer for
# every token, which a prompt (-n 0) no longer does (hc_eval computes only k
# and v there for all but the last token), so "ratio" = profile ÷ perplexity.
# Models: stories260K (fixture) and a synthetic ReLU model (DIM x NFF, LAYERS).
#   HC_BIN=bin THREADS=2 CTX=512 WINDOWS=8 DIM=512 NFF=1376 LAYERS=4 sh scripts/bench-profile.sh
set -eu
HC_BIN=${HC_BIN:-$(pwd)/bin}
HC_FIXTURES=${HC_FIXTURES:-../shared/fixtures}
THREADS=${THREADS:-$(nproc)}
CTX=${CTX:-512}
WINDOWS=${WINDOWS:-8}
DIM=${DIM:-512}
NFF=${NFF:-1376}
LAYERS=${LAYERS:-4}
T=$(mktemp -d "${TMPDIR:-/tmp}/hcbench.XXXXXX")
trap 'rm -rf "$T"' EXIT

CORPUS=$HC_FIXTURES/tinystories-calib.txt
if [ ! -f "$CORPUS" ]; then
    # no fixtures: a corpus of plain words
    CORPUS=$T/corpus.txt
    sh "$(dirname "$0")/plain-words.sh" 40000 >"$CORPUS"
fi

echo "threads: $THREADS, window/prompt: $CTX tokens, profile: $WINDOWS windows"
printf '%-28s %14s %14s %14s %8s\n' model "run prompt t/s" "run ppl t/s" "profile t/s" ratio

# bench NAME MODEL CHARS: the best of 3 hc-run prompt evaluations (the first
# CHARS bytes of the corpus: n tokens after BOS), the best of 3 hc-run
# --perplexity runs over the first WINDOWS x CHARS bytes in windows of n+1, and
# the best of 3 profiling runs over WINDOWS windows of the same n tokens after
# BOS (-c n+1): the same batches, so the difference is what profiling adds
bench() {
    best=0 bestp=0 bestl=0
    head -c $(($3 * WINDOWS)) "$CORPUS" >"$T/ppl.txt"
    for i in 1 2 3; do
        "$HC_BIN/hc-run" -m "$2" -p "$(head -c "$3" "$CORPUS")" -n 0 -c "$CTX" -b "$CTX" -t "$THREADS" \
            >/dev/null 2>"$T/run.err"
        n=$(awk '/^prompt:/ { print $2 - 1 }' "$T/run.err")
        r=$(awk '/^prompt:/ { v = $(NF - 1); sub(/^\(/, "", v); print v }' "$T/run.err")
        best=$(awk -v a="$best" -v b="$r" 'BEGIN { print (b > a) ? b : a }')
        l=$("$HC_BIN/hc-run" -m "$2" --perplexity "$T/ppl.txt" -c $((n + 1)) -b "$CTX" -t "$THREADS" 2>&1 |
            awk '/^perplexity:.*tok\/s/ { print $(NF - 1) }')
        bestl=$(awk -v a="$bestl" -v b="${l:-0}" 'BEGIN { print (b > a) ? b : a }')
        "$HC_BIN/hc-profile" -m "$2" -f "$CORPUS" -o "$T/stats.gguf" -c $((n + 1)) --tokens $((n * WINDOWS)) \
            -t "$THREADS" >"$T/prof.out"
        p=$(awk '{ print $NF == "tok/s" ? $(NF - 1) : 0 }' "$T/prof.out")
        bestp=$(awk -v a="$bestp" -v b="$p" 'BEGIN { print (b > a) ? b : a }')
    done
    awk -v n="$1" -v r="$best" -v l="$bestl" -v p="$bestp" \
        'BEGIN { printf "%-28s %14.1f %14.1f %14.1f %8.2f\n", n, r, l, p, (l > 0 ? p / l : 0) }'
}

if [ -f "$HC_FIXTURES/stories260K.gguf" ]; then
    bench stories260K "$HC_FIXTURES/stories260K.gguf" 1000
else
    echo "stories260K: no fixtures, skipped"
fi
"$HC_BIN/hc-convert" synth -o "$T/synth.gguf" --dim "$DIM" --n-ff "$NFF" --layers "$LAYERS" --heads 8 \
    --ctx "$CTX" --act relu --hot-fraction 0.1 >/dev/null
bench "synth ${DIM}x${NFF}x${LAYERS} relu" "$T/synth.gguf" $(( CTX * 3 / 4 ))

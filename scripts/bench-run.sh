#!/bin/sh
# hc-run speed: generation and prompt tokens/s on stories260K and on a
# synthetic model with LLaMA-7B layer shapes (dim 4096, n_ff 11008) in F32,
# Q8_0 and Q4_0, with the achieved weight bandwidth (weight bytes read per
# token × tokens/s) beside the machine's measured read bandwidth.
#   HC_BIN=bin THREADS=2 LAYERS=2 GEN=32 sh scripts/bench-run.sh
# Writes its models to a temporary directory (F32: ~0.8 GB per layer).
set -eu
HC_BIN=${HC_BIN:-$(pwd)/bin}
HC_FIXTURES=${HC_FIXTURES:-../shared/fixtures}
THREADS=${THREADS:-$(nproc)}
LAYERS=${LAYERS:-2}
GEN=${GEN:-32}
T=$(mktemp -d "${TMPDIR:-/tmp}/hcbench.XXXXXX")
trap 'rm -rf "$T"' EXIT

${CC:-cc} -O2 -pthread scripts/bench_membw.c -o "$T/bench_membw"
MEMBW=$("$T/bench_membw" 1024 "$THREADS" | awk '/^best/ {print $2}')
echo "memory read bandwidth: $MEMBW GB/s (scripts/bench_membw.c, $THREADS threads)"
echo "threads: $THREADS"
printf '%-26s %12s %12s %14s %10s\n' model "prompt tok/s" "gen tok/s" "weights GB/s" "% of mem"

# bench NAME MODEL PROMPT: one generation run and one prompt (--logits) run
bench() {
    "$HC_BIN/hc-run" -m "$2" -p "" -n "$GEN" --temp 0 -t "$THREADS" -v >/dev/null 2>"$T/gen.err"
    "$HC_BIN/hc-run" -m "$2" -p "$3" --logits -t "$THREADS" >/dev/null 2>"$T/pp.err"
    awk -v name="$1" -v membw="$MEMBW" '
        FNR == 1 { f++ }
        f == 1 && /weights read per token:/ { bytes = $5 }
        f == 1 && /^generation:/ { gen = $(NF - 1); sub(/^\(/, "", gen) }
        f == 2 && /^prompt:/ { pp = $(NF - 1); sub(/^\(/, "", pp) }
        END { bw = bytes * gen / 1e9
              printf "%-26s %12.1f %12.1f %14.2f %9.0f%%\n", name, pp, gen, bw, 100 * bw / membw }' \
        "$T/gen.err" "$T/pp.err"
}

if [ -f "$HC_FIXTURES/stories260K.gguf" ]; then
    bench stories260K "$HC_FIXTURES/stories260K.gguf" "$(head -c 1200 "$HC_FIXTURES/tinystories-calib.txt")"
else
    echo "stories260K: no fixtures, skipped"
fi

"$HC_BIN/hc-convert" synth -o "$T/big-f32.gguf" --dim 4096 --n-ff 11008 --layers "$LAYERS" \
    --heads 32 --kv-heads 32 --vocab 512 --ctx 512 --act silu --type f32 --seed 1 >/dev/null
PROMPT=$(awk 'BEGIN { for (i = 0; i < 30; i++) printf "a b c d " }')
bench "7B-shape x$LAYERS F32" "$T/big-f32.gguf" "$PROMPT"
for q in Q8_0 Q4_0; do
    "$HC_BIN/hc-quantize" -q "$T/big-f32.gguf" "$T/big-$q.gguf" "$q" >/dev/null
    bench "7B-shape x$LAYERS $q" "$T/big-$q.gguf" "$PROMPT"
    rm -f "$T/big-$q.gguf"
done

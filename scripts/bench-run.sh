#!/bin/sh
# hc-run speed: generation and prompt tokens/s on stories260K and on a
# synthetic model with LLaMA-7B layer shapes (dim 4096, n_ff 11008) in F32,
# Q8_0 and Q4_0, with the achieved weight bandwidth (weight bytes read per
# token × tokens/s) beside the machine's read bandwidth measured just before
# and after each model (the higher of the two: a shared machine's bandwidth
# changes by the minute), and their ratio. stories260K's weights sit in cache,
# so its ratio can pass 100%.
#   HC_BIN=bin THREADS="1 2" LAYERS=2 GEN=32 REPS=3 sh scripts/bench-run.sh
# Generation is the best of REPS runs (the least disturbed by other load);
# the load average is printed at the start and the end. With LLAMA_BENCH=path
# to llama.cpp's llama-bench, its generation speed on the same files and
# thread count is printed beside ours. Takes about a minute (2 layers).
# ARCHS="qwen2 opt ..." adds each family's 7B-layer-shaped synthetic model in Q4_0
# (made from an F16 synth: ~0.4 GB per layer, deleted once quantized); BASE=0
# leaves out stories260K and the F32/Q8_0/Q4_0 llama rows (e.g. for LAYERS=32:
# a full 7B-shaped model, ~3.6 GB in Q4_0, per family).
# Writes its models to a temporary directory (F32: ~0.8 GB per layer).
set -eu
HC_BIN=${HC_BIN:-$(pwd)/bin}
HC_FIXTURES=${HC_FIXTURES:-../shared/fixtures}
THREADS=${THREADS:-$(nproc)}
LAYERS=${LAYERS:-2}
GEN=${GEN:-32}
REPS=${REPS:-3}
LLAMA_BENCH=${LLAMA_BENCH:-}
T=$(mktemp -d "${TMPDIR:-/tmp}/hcbench.XXXXXX")
trap 'rm -rf "$T"' EXIT

O=${O:-build}
make --no-print-directory -s O="$O" "$O/bench/bench_membw"
MEMBW=$O/bench/bench_membw
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
printf '%-22s %3s %10s %10s %9s %9s %6s %10s\n' model thr "prompt t/s" "gen t/s" "wts GB/s" "mem GB/s" "ratio" "llama t/s"

# membw T: best read GB/s with T threads (512 MiB, best of 3 passes)
membw() { "$MEMBW" 512 "$1" | awk -v t="$1" '$1 == t {print $2}'; }

# bench NAME MODEL PROMPT: for each thread count, REPS generation runs and one prompt (--logits) run
bench() {
    for t in $THREADS; do
        mem=$(membw "$t")
        : >"$T/gen.err"
        i=0
        while [ "$i" -lt "$REPS" ]; do
            "$HC_BIN/hc-run" -m "$2" -p "" -n "$GEN" --temp 0 -t "$t" -v >/dev/null 2>>"$T/gen.err"
            i=$((i + 1))
        done
        "$HC_BIN/hc-run" -m "$2" -p "$3" --logits -t "$t" >/dev/null 2>"$T/pp.err"
        mem2=$(membw "$t")   # the higher of before and after: the conservative ratio
        mem=$(echo "$mem $mem2" | awk '{ print ($1 > $2) ? $1 : $2 }')
        llama=-
        if [ -n "$LLAMA_BENCH" ]; then
            llama=$("$LLAMA_BENCH" -m "$2" -p 0 -n "$GEN" -t "$t" -r "$REPS" -o csv 2>/dev/null |
                awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /avg_ts/) c = i; next }
                         c { v = $c; gsub(/"/, "", v); printf "%.1f", v }')
            [ -n "$llama" ] || llama=fail
        fi
        awk -v name="$1" -v t="$t" -v mem="$mem" -v llama="$llama" '
            FNR == 1 { f++ }
            f == 1 && /weights read per token:/ { bytes = $5 }
            f == 1 && /^generation:/ { g = $(NF - 1); sub(/^\(/, "", g); if (g + 0 > gen) gen = g + 0 }
            f == 2 && /^prompt:/ { pp = $(NF - 1); sub(/^\(/, "", pp) }
            END { bw = bytes * gen / 1e9
                  printf "%-22s %3d %10.1f %10.1f %9.2f %9.1f %5.0f%% %10s\n", name, t, pp, gen, bw, mem, 100 * bw / mem, llama }' \
            "$T/gen.err" "$T/pp.err"
    done
}

PROMPT=$(awk 'BEGIN { for (i = 0; i < 30; i++) printf "a b c d " }')
if [ "${BASE:-1}" = 0 ]; then
    :
elif [ -f "$HC_FIXTURES/stories260K.gguf" ]; then
    bench stories260K "$HC_FIXTURES/stories260K.gguf" "$(head -c 1200 "$HC_FIXTURES/tinystories-calib.txt")"
else
    echo "stories260K: no fixtures, skipped"
fi

if [ "${BASE:-1}" != 0 ]; then
    "$HC_BIN/hc-convert" synth -o "$T/big-f32.gguf" --dim 4096 --n-ff 11008 --layers "$LAYERS" \
        --heads 32 --kv-heads 32 --vocab 512 --ctx 512 --act silu --type f32 --seed 1 >/dev/null
    bench "7B-shape x$LAYERS F32" "$T/big-f32.gguf" "$PROMPT"
    for q in Q8_0 Q4_0; do
        "$HC_BIN/hc-quantize" -q "$T/big-f32.gguf" "$T/big-$q.gguf" "$q" >/dev/null
        bench "7B-shape x$LAYERS $q" "$T/big-$q.gguf" "$PROMPT"
        rm -f "$T/big-$q.gguf"
    done
    rm -f "$T/big-f32.gguf"
fi
# ARCHS="llama qwen2 bamboo opt falcon": the same shapes as each family's tensor set
# (hc-convert synth --arch), Q4_0, dense
for a in ${ARCHS:-}; do
    "$HC_BIN/hc-convert" synth --arch "$a" -o "$T/arch-f16.gguf" --dim 4096 --n-ff 11008 --layers "$LAYERS" \
        --heads 32 --kv-heads 32 --vocab 512 --ctx 512 --act relu --type f16 --seed 1 >/dev/null 2>&1
    "$HC_BIN/hc-quantize" -q "$T/arch-f16.gguf" "$T/arch-q4.gguf" Q4_0 >/dev/null
    rm -f "$T/arch-f16.gguf"
    bench "$a x$LAYERS Q4_0" "$T/arch-q4.gguf" "$PROMPT"
    rm -f "$T/arch-q4.gguf"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); kernels: $(sed -n 's/.*kernels: \([a-z0-9]*\).*/\1/p' "$T/gen.err" | head -1)"

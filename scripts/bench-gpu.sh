#!/bin/sh
# The GPU check: prompt and decode speed of one synthetic ReLU model on the
# CPU alone (dense, sparse) and with hot neurons on the OpenCL device (hybrid
# at budgets of BUDGETS times the file, where the largest holds every FFN
# neuron), in F16 and Q4_0; with the device's copy bandwidth measured in the
# same run (bench_cldev), what share of the model's bytes and of the FFN's
# activations the device holds and serves, and the device's FFN rate (its hot
# rows' bytes per token over its FFN time per token) against that bandwidth.
# docs/measurements.md ("The GPU check") records each run with its device.
#
# The model (issue 33's table): hc-convert synth --dim 4096 --n-ff 11008
# --layers 8 --heads 32 --vocab 32000 --ctx 2048 --act relu --hot-fraction
# 0.05 --hot-skew 1; hc-profile on 1024 tokens of CORPUS, hc-solve --ctx 512;
# hc-run -p PROMPT (45 tokens) -n GEN --temp 0 -t THREADS, best of REPS.
#
# SMOKE=1: a small model (dim 256, 2 layers, hc-solve --ctx 256: its f32 KV
# cache at 512 positions would outweigh its weights) and 8 tokens: checks the
# whole script on any OpenCL device (PoCL: tests/test_bench_gpu.sh) in
# seconds; its figures mean nothing.
# Environment: HC_BIN (default bin), O (make's build folder, default build),
# THREADS (default: online CPUs), TYPES ("f16 q4_0"), BUDGETS ("0.5 0.75 1.5"),
# GEN (64), REPS (1), CORPUS (default: the fixtures' tinystories-calib.txt,
# else models/synth-corpus.txt), SOLVE_OPTS (more hc-solve options), KEEP (keep
# the temporary folder), HC_OPENCL_DEVICE (the device), SMOKE.
set -eu
cd "$(dirname "$0")/.."
HC_BIN=${HC_BIN:-$(pwd)/bin}
O=${O:-build}
HC_FIXTURES=${HC_FIXTURES:-../shared/fixtures}
THREADS=${THREADS:-$(nproc)}
TYPES=${TYPES:-f16 q4_0}
BUDGETS=${BUDGETS:-0.5 0.75 1.5}
REPS=${REPS:-1}
SMOKE=${SMOKE:-0}
if [ "$SMOKE" = 1 ]; then
    SHAPE="--dim 256 --n-ff 688 --layers 2 --heads 4 --vocab 512 --ctx 256"
    GEN=${GEN:-8}
    COPY_MIB=16
    SOLVE_OPTS=${SOLVE_OPTS:---sync-us 0}   # a layer this small never pays for a synchronisation
    SOLVE_CTX=256
else
    SHAPE="--dim 4096 --n-ff 11008 --layers 8 --heads 32 --vocab 32000 --ctx 2048"
    GEN=${GEN:-64}
    COPY_MIB=1024
    SOLVE_OPTS=${SOLVE_OPTS:-}
    SOLVE_CTX=512
fi
PROMPT="Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her \
friends and her dog, and every day"
T=$(mktemp -d "${TMPDIR:-/tmp}/hcgpu.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT INT TERM

make --no-print-directory -s O="$O" -j2 "$O/bench/bench_cldev"
for p in hc-convert hc-quantize hc-profile hc-solve hc-run; do
    [ -x "$HC_BIN/$p" ] || { echo "bench-gpu: no $HC_BIN/$p (make)" >&2; exit 1; }
done
CORPUS=${CORPUS:-$HC_FIXTURES/tinystories-calib.txt}
[ -f "$CORPUS" ] || CORPUS=models/synth-corpus.txt

"$O/bench/bench_cldev" "$COPY_MIB" >"$T/dev.txt"
cat "$T/dev.txt"
COPY=$(sed -n 's/^copy: \([0-9.]*\) GB\/s.*/\1/p' "$T/dev.txt")
echo "model: synth $SHAPE, ReLU, hot fraction 0.05, skew 1; $THREADS threads; prompt $PROMPT"
echo "       ... ($GEN tokens generated, best of $REPS)"

# run NAME ARGS: "prompt_tps decode_tps device_bytes served% device_ms_per_token"
# from hc-run's stderr (prompt:/generation: lines, the hybrid and sparse reports)
run() {
    name=$1; shift
    : >"$T/$name.err"
    for r in $(seq "$REPS"); do
        "$HC_BIN/hc-run" -p "$PROMPT" -n "$GEN" --temp 0 -t "$THREADS" "$@" >"$T/$name.txt" 2>>"$T/$name.err"
    done
    awk 'function bytes(v, u) { return v * (u == "KiB" ? 1024 : u == "MiB" ? 1048576 : u == "GiB" ? 1073741824 : 1) }
         function tps(s) { sub(/^\(/, "", s); return s + 0 }
         /^prompt:/ { t = tps($(NF - 1)); if (t > pp) pp = t }
         /^generation:/ { t = tps($(NF - 1)); if (t > tg) tg = t }
         /^hybrid: .* neurons on the device \(/ { v = $(NF - 1); u = $NF; sub(/^\(/, "", v); sub(/\)$/, "", u)
                                                 db = bytes(v, u) }
         /device served/ { for (i = 1; i <= NF; i++) {
                               if ($i == "served") { sv = $(i + 1); sub(/%$/, "", sv) }
                               if ($i == "device" && $(i + 1) ~ /^[0-9.]+$/) dms = $(i + 1) }
                           for (i = 1; i <= NF; i++) if ($i == "for") ntok = $(i + 1) }
         END { per = (ntok > 0 && dms != "") ? dms / ntok : "-"
               printf "%s %s %s %s %s\n", pp + 0, tg + 0, db + 0, (sv == "" ? "-" : sv), per }' "$T/$name.err"
}

printf '%-6s %-18s %10s %10s %8s %8s %12s %8s\n' type run "prompt t/s" "decode t/s" "dev MB" "served" \
    "dev FFN GB/s" "% copy"
# rows TYPE "NAME RESULT": one line of the table
rows() {
    set -- $2
    awk -v t="$type" -v n="$1" -v pp="$2" -v tg="$3" -v db="$4" -v sv="$5" -v ms="$6" -v copy="$COPY" 'BEGIN {
        rate = ms == "-" || ms == 0 ? "-" : sprintf("%.1f", db / (ms / 1e3) / 1e9)
        pct = rate == "-" || copy == "" ? "-" : sprintf("%.1f", 100 * rate / copy)
        printf "%-6s %-18s %10.1f %10.1f %8.1f %8s %12s %8s\n", t, n, pp, tg, db / 1e6, sv, rate, pct }'
}

"$HC_BIN/hc-convert" synth -o "$T/m-f16.gguf" $SHAPE --act relu --type f16 --hot-fraction 0.05 --hot-skew 1 \
    --seed 1 >/dev/null 2>&1
for type in $TYPES; do
    M=$T/m-$type.gguf
    [ "$type" = f16 ] || "$HC_BIN/hc-quantize" -q -t "$THREADS" "$T/m-f16.gguf" "$M" "$(echo "$type" | tr a-z A-Z)"
    "$HC_BIN/hc-profile" -m "$M" -f "$CORPUS" -o "$T/s-$type.gguf" --tokens 1024 -c 256 -t "$THREADS" >/dev/null 2>&1
    size=$(wc -c <"$M")
    rows "$type" "dense-CPU $(run dense -m "$M" --dense)"
    rows "$type" "sparse-CPU $(run sparse -m "$M" --sparse --disable-gpu-index)"
    for b in $BUDGETS; do
        bytes=$(awk -v s="$size" -v b="$b" 'BEGIN { printf "%.0f", s * b }')
        if ! "$HC_BIN/hc-solve" -m "$M" -s "$T/s-$type.gguf" --vram-budget "$bytes" --ctx "$SOLVE_CTX" $SOLVE_OPTS \
                -o "$T/i.gpuidx" >/dev/null 2>"$T/solve.err"; then
            printf '%-6s %-18s %s\n' "$type" "hybrid-${b}x" "skipped: $(sed 's/.*: --vram-budget/--vram-budget/' "$T/solve.err")"
            continue
        fi
        rows "$type" "hybrid-${b}x $(run "hybrid$b" -m "$M" --gpu-index "$T/i.gpuidx")"
        cmp -s "$T/sparse.txt" "$T/hybrid$b.txt" || echo "  (hybrid ${b}x: text differs from the sparse CPU's)"
    done
    [ "$type" = f16 ] || rm -f "$M"
done
echo "dev MB: the hot rows on the device; served: its share of the FFN's non-zero activations;"
echo "dev FFN GB/s: hot-row bytes per token / device FFN time per token (an upper bound on what it read);"
echo "% copy: that rate against the device's copy bandwidth above. Attention, the KV cache and the"
echo "output head still run on the CPU (issue 33)."

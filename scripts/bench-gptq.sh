#!/bin/sh
# GPTQ: time to quantize one LLaMA-7B-shaped layer on this machine, both
# shapes (ffn_gate/up: 11008 outputs x 4096 inputs; ffn_down: 4096 x 11008),
# with random weights and random calibration inputs (timing only); then the
# sparse FFN's speed on INT4-GPTQ rows against Q4_0 rows (below).
# Usage: scripts/bench-gptq.sh [threads (default: online CPUs)] [tokens (default 2048)]
# Environment: O (make's build folder, default build), CC.
set -e
cd "$(dirname "$0")/.."
O=${O:-build}
T=${1:-$(nproc)}
TOK=${2:-2048}

make --no-print-directory -s O="$O" ${CC:+CC="$CC"} -j2 "$O/bench/bench_gptq"
echo "== GPTQ, one LLaMA-7B layer"
"$O/bench/bench_gptq" 11008 4096 "$TOK" "$T"
"$O/bench/bench_gptq" 4096 11008 "$TOK" "$T"

# Sparse FFN speed: INT4-GPTQ rows against Q4_0 rows, the same 4.5 bits per gate/up
# weight as hc-run stores them (4-bit codes plus, per 128, an f32 scale and zero term;
# or per 32, an fp16 scale). hc-run keeps a GPTQ ffn_down's 4-bit columns but turns a
# Q4_0 ffn_down into Q8_0 rows (docs/design/gptq.md). A synthetic ReLU model
# (hc-convert synth, planted hot set HOT) quantized both ways (GPTQ --rtn: the same
# grid without the Hessian; speed does not depend on the values); generation from
# BOS, best of REPS runs. Environment: HC_BIN, DIM, FF, LAYERS, HOT, GEN, REPS.
HC_BIN=${HC_BIN:-$(pwd)/bin}
if [ ! -x "$HC_BIN/hc-run" ] || [ ! -x "$HC_BIN/hc-quantize" ] || [ ! -x "$HC_BIN/hc-convert" ]; then
    echo "== sparse FFN INT4-GPTQ vs Q4_0: skipped ($HC_BIN has no hc-run/hc-quantize/hc-convert: make)"
    exit 0
fi
DIM=${DIM:-2048} FF=${FF:-5504} LAYERS=${LAYERS:-2} HOT=${HOT:-0.1} GEN=${GEN:-32} REPS=${REPS:-3}
D=$(mktemp -d "${TMPDIR:-/tmp}/hcbench.XXXXXX")
trap 'rm -rf "$D"' EXIT
"$HC_BIN/hc-convert" synth -o "$D/m.gguf" --dim "$DIM" --n-ff "$FF" --layers "$LAYERS" --heads 16 --vocab 512 \
    --ctx 256 --act relu --type f16 --hot-fraction "$HOT" --hot-skew 1 --seed 1 >/dev/null 2>&1
printf 'once upon a time there was a little girl who liked to play\n' >"$D/calib.txt"
"$HC_BIN/hc-quantize" -q -t "$T" "$D/m.gguf" "$D/gptq.gguf" GPTQ --rtn --calib "$D/calib.txt" --ctx 16
"$HC_BIN/hc-quantize" -q -t "$T" --pure "$D/m.gguf" "$D/q4_0.gguf" Q4_0
echo "== sparse FFN, INT4-GPTQ (g128 asym) vs Q4_0: ReLU synth dim $DIM, n_ff $FF, $LAYERS layers, hot $HOT;"
echo "   $GEN tokens from BOS, $T threads, best of $REPS; $("$HC_BIN/hc-run" -m "$D/gptq.gguf" -p "" -n 1 -v 2>&1 |
    grep -o 'kernels: [a-z0-9]*')"
printf '%-6s %-8s %9s %9s %8s %14s\n' model ffn "tok/s" "FFN ms" skipped "weights/token"
for q in gptq q4_0; do
    for mode in dense sparse; do
        : >"$D/err"
        v=''; [ $mode = dense ] && v=-v   # the sparse report comes without -v, which would add the recall check
        for r in $(seq "$REPS"); do
            "$HC_BIN/hc-run" -m "$D/$q.gguf" -p "" -n "$GEN" --temp 0 -t "$T" "--$mode" $v >/dev/null 2>>"$D/err"
        done
        awk -v q="$q" -v mode="$mode" '
            /^generation:/ { t = $(NF - 1); sub(/^\(/, "", t); if (t + 0 > tps + 0) tps = t }
            /FFN time/ { for (i = 1; i <= NF; i++) if ($i == "time") { m = $(i + 1); sub(/:$/, "", m)
                         if (ms == "" || m + 0 < ms + 0) ms = m } }
            /all layers: skipped/ { sk = $5; for (i = 1; i <= NF; i++) if ($i == "read") { b = $(i + 1) " " $(i + 2) } }
            END { printf "%-6s %-8s %9s %9s %8s %14s\n", q, mode, tps, ms == "" ? "-" : ms, sk == "" ? "-" : sk,
                  b == "" ? "-" : b }' "$D/err"
    done
done

#!/bin/sh
# Many prompts at once (hc-run --parallel, issue 39): summed decode tokens/s
# of N sequences in one batch against one sequence, measured in the same
# run on the same file and threads, on a synthetic model with LLaMA-7B layer
# shapes (dim 4096, n_ff 11008, SiLU) in TYPE (Q4_0, Q8_0, BF16, F32 by
# hc-quantize; GPTQ by hc-quantize GPTQ, calibrated on CALIB_TOKENS (256)
# tokens of plain-words.sh's text, which takes minutes; or F16), large
# enough that decoding one sequence is bound by reading the
# weights. How far N sequences gain depends on how far the products of N
# rows stay bound by the weights' bytes rather than by the kernels' compute
# (docs/measurements.md, "Many prompts at once").
#   HC_BIN=bin TYPE=Q4_0 THREADS=2 LAYERS=4 GEN=64 NS="1 2 4 8" REPS=3 sh scripts/bench-parallel.sh
# For each N: the decode line of hc-run -f PROMPTS --parallel N (steps that
# hold only next tokens, summed over the sequences; best of REPS) and its
# ratio to N = 1 (the same 8 prompts one at a time through the same code),
# beside the plain run's generation tokens/s (hc-run -p, no --parallel). The
# runs go in REPS rounds (plain, then each N), so that every N meets the
# minutes the others meet: on a shared machine the memory's speed drifts
# from minute to minute, and the ratio of two bests taken minutes apart
# drifts with it. Beside the ratio of the bests, the median over the rounds
# of each round's own ratio to N = 1 (the first of NS). With
# LLAMA_BATCHED_BENCH=path to llama.cpp's llama-batched-bench, its S_TG t/s at
# each N (-npp 8 -ntg GEN -npl N) on the same file and threads is printed
# beside ours. Writes its model (~0.12 GB per layer in Q4_0, 0.4 GB in F16) to
# a temporary directory. RUN_ARGS: more hc-run options for every run (-ngl 99:
# the whole model and the paged cache on the OpenCL device).
set -eu
HC_BIN=${HC_BIN:-$(pwd)/bin}
THREADS=${THREADS:-$(nproc)}
LAYERS=${LAYERS:-4}
TYPE=${TYPE:-Q4_0}
GEN=${GEN:-64}
NS=${NS:-1 2 4 8}
REPS=${REPS:-3}
RUN_ARGS=${RUN_ARGS:-}
LLAMA_BATCHED_BENCH=${LLAMA_BATCHED_BENCH:-}
T=$(mktemp -d "${TMPDIR:-/tmp}/hcbench.XXXXXX")
trap 'rm -rf "$T"' EXIT

"$HC_BIN/hc-convert" synth -o "$T/f16.gguf" --dim 4096 --n-ff 11008 --layers "$LAYERS" --heads 32 --act silu \
    --type f16 --ctx 1024 >/dev/null
M=$T/f16.gguf
if [ "$TYPE" = GPTQ ]; then
    sh "$(dirname "$0")/plain-words.sh" 4000 >"$T/calib.txt"
    "$HC_BIN/hc-quantize" -q "$T/f16.gguf" "$T/$TYPE.gguf" GPTQ --calib "$T/calib.txt" \
        --calib-tokens "${CALIB_TOKENS:-256}" --ctx 64 >/dev/null
elif [ "$TYPE" != F16 ]; then
    "$HC_BIN/hc-quantize" -q "$T/f16.gguf" "$T/$TYPE.gguf" "$TYPE" >/dev/null
fi
if [ "$TYPE" != F16 ]; then
    rm "$T/f16.gguf"
    M=$T/$TYPE.gguf
fi
i=0
while [ "$i" -lt 8 ]; do echo "prompt number $i: once upon a time"; i=$((i + 1)); done >"$T/prompts.txt"

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $LAYERS layers 4096 x 11008 $TYPE, -t $THREADS, $GEN tokens${RUN_ARGS:+, $RUN_ARGS}"
# decode TOOL-ARGS...: the decode tok/s of one run
decode() {
    # shellcheck disable=SC2086  # RUN_ARGS is a list of options
    "$HC_BIN/hc-run" -m "$M" -t "$THREADS" -n "$GEN" --temp 0 $RUN_ARGS "$@" 2>&1 >/dev/null |
        awk '/^decode:/ { s = $0; sub(/.*\(/, "", s); print s + 0; p = 1 } /^generation:/ && !p { s = $0; sub(/.*\(/, "", s); g = s + 0 }
             END { if (!p && g) print g }' | tail -n 1
}
# REPS rounds; $T/runs gets one line per run: round, N (or plain), tok/s
r=0
while [ "$r" -lt "$REPS" ]; do
    echo "$r plain $(decode -p "prompt number 0: once upon a time")"
    for n in $NS; do echo "$r $n $(decode -f "$T/prompts.txt" --parallel "$n")"; done
    r=$((r + 1))
done >"$T/runs"
# best N: the best tok/s of N's runs; rounds N: the median over the rounds of
# N's tok/s over the first of NS's in the same round
best() { awk -v n="$1" '$2 == n && $3 > b { b = $3 } END { print b + 0 }' "$T/runs"; }
rounds() {
    awk -v n="$1" -v one="$2" '$2 == one { o[$1] = $3 } $2 == n { v[$1] = $3 }
        END { for (r in v) if (o[r] > 0) print v[r] / o[r] }' "$T/runs" | sort -n |
        awk '{ a[NR] = $1 } END { m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.2fx", m }'
}
printf '%-10s %12s %8s %14s %14s\n' N "decode t/s" ratio "rounds' ratio" "llama.cpp t/s"
printf '%-10s %12s %8s %14s %14s\n' plain "$(best plain)" - - -
one=${NS%% *}
for n in $NS; do
    v=$(best "$n")
    llama=-
    if [ -n "$LLAMA_BATCHED_BENCH" ]; then
        llama=$("$LLAMA_BATCHED_BENCH" -m "$M" -t "$THREADS" -c 4096 -b 512 -npp 8 -ntg "$GEN" -npl "$n" 2>/dev/null |
            awk -F'|' 'NF > 8 && $2 + 0 > 0 { v = $(NF - 3); gsub(/ /, "", v); print v }' | tail -n 1)
        [ -n "$llama" ] || llama=fail
    fi
    printf '%-10s %12s %8s %14s %14s\n' "$n" "$v" "$(echo "$v $(best "$one")" | awk '{ printf "%.2fx", $1 / $2 }')" \
        "$(rounds "$n" "$one")" "$llama"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

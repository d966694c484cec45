#!/bin/sh
# Sparse and hybrid FFN speed on synthetic ReLU models with a planted power law
# (hc-convert synth --act relu --hot-fraction F --hot-skew S): generation
# tokens/s and FFN time of the dense FFN, the sparse CPU FFN and the hybrid
# (and prompt tokens/s: a PROMPT_REPEAT-times repeated sentence, one batch)
# (hot neurons from hc-profile + hc-solve on the OpenCL device), and the FFN
# speedup of the sparse CPU FFN against the ideal 1 / (1 - sparsity), where
# sparsity is the fraction of up+down rows skipped (the gate is always read,
# so the byte-exact ideal is 1 / (1/3 + 2/3 (1 - sparsity)); both are shown).
# Then the perplexity cost of --sparse-threshold on stories260K (SiLU).
#   HC_BIN=bin THREADS=2 DIM=2048 FF=5504 LAYERS=2 GEN=32 REPS=3 VRAM=112M sh scripts/bench-hybrid.sh
set -eu
HC_BIN=${HC_BIN:-$(pwd)/bin}
HC_FIXTURES=${HC_FIXTURES:-../shared/fixtures}
THREADS=${THREADS:-$(nproc)}
DIM=${DIM:-2048}
FF=${FF:-5504}
LAYERS=${LAYERS:-2}
GEN=${GEN:-32}
REPS=${REPS:-3}
VRAM=${VRAM:-112M}
HOTS=${HOTS:-0.02 0.05 0.1 0.3}
PROMPT_REPEAT=${PROMPT_REPEAT:-6}
PROMPT=$(i=0; while [ $i -lt "$PROMPT_REPEAT" ]; do printf 'once upon a time there was a little girl who '; i=$((i + 1)); done)
T=$(mktemp -d "${TMPDIR:-/tmp}/hcbench.XXXXXX")
trap 'rm -rf "$T"' EXIT
CORPUS="$HC_FIXTURES/tinystories-calib.txt"

# run NAME ARGS...: generation from BOS, best of REPS runs (the machine may be
# shared); prints "tok/s ffn_ms skipped% device_share"
run() {
    name=$1; shift
    : >"$T/$name.err"
    for r in $(seq "$REPS"); do
        "$HC_BIN/hc-run" -p "" -n "$GEN" --temp 0 -t "$THREADS" "$@" >/dev/null 2>>"$T/$name.err"
    done
    awk '/^generation:/ { t = $(NF - 1); sub(/^\(/, "", t); if (t + 0 > tps + 0) tps = t }
         /FFN time/ { for (i = 1; i <= NF; i++) if ($i == "time") { m = $(i + 1); sub(/:$/, "", m)
                      if (ms == "" || m + 0 < ms + 0) ms = m } }
         /all layers: skipped/ { sk = $5; sub(/%$/, "", sk) }
         /device served/ { for (i = 1; i <= NF; i++) if ($i == "served") { sh = $(i + 1) } }
         END { printf "%s %s %s %s\n", tps, ms, sk == "" ? 0 : sk, sh == "" ? "-" : sh }' "$T/$name.err"
}

# runp ARGS...: prompt tokens/s (one batch), best of REPS
runp() {
    for r in $(seq "$REPS"); do
        "$HC_BIN/hc-run" -p "$PROMPT" -n 1 --temp 0 -t "$THREADS" "$@" 2>&1 >/dev/null | grep '^prompt:'
    done | awk '{ t = $(NF - 1); sub(/^\(/, "", t); if (t + 0 > b + 0) b = t; n = $2 } END { printf "%s %s\n", b, n }'
}

echo "synthetic ReLU model: dim $DIM, n_ff $FF, $LAYERS layers, F16; $GEN tokens generated from BOS;"
echo "$THREADS threads; best of $REPS runs"
"$HC_BIN/hc-run" --help >/dev/null
if command -v clinfo >/dev/null; then
    echo "OpenCL devices: $(clinfo -l 2>/dev/null | sed -n 's/.*Device #[0-9]*: //p' | paste -sd ';' -)"
fi
echo "(with PoCL the OpenCL 'device' is this CPU: the hybrid column then measures the"
echo " split's overhead on shared cores, not a GPU's speed)"
printf '%-6s %8s | %9s %9s | %9s %9s %8s | %9s %9s %7s | %8s %8s %8s | %8s %8s %8s\n' \
    hot skipped "dense t/s" "FFN ms" "sparse t/s" "FFN ms" "speedup" "hybr t/s" "FFN ms" "dev %" "ideal" "ideal-b" "achieved" \
    "pp dense" "pp sprs" "pp hybr"
for hot in $HOTS; do
    M="$T/m.gguf"
    "$HC_BIN/hc-convert" synth -o "$M" --dim "$DIM" --n-ff "$FF" --layers "$LAYERS" --heads 16 --vocab 512 \
        --ctx 256 --act relu --type f16 --hot-fraction "$hot" --hot-skew 1 --seed 1 >/dev/null 2>&1
    set -- $(run dense -m "$M" --dense -v)
    d_tps=$1 d_ms=$2
    set -- $(run sparse -m "$M" --sparse)
    s_tps=$1 s_ms=$2 skip=$3
    set -- $(runp -m "$M" --dense)
    pd=$1 n_prompt=$2
    set -- $(runp -m "$M" --sparse)
    ps=$1
    h_tps=n/a h_ms=n/a share=n/a ph=n/a
    if [ -f "$CORPUS" ] && [ -x "$HC_BIN/hc-profile" ] && [ -x "$HC_BIN/hc-solve" ] &&
       "$HC_BIN/hc-profile" -m "$M" -f "$CORPUS" -o "$T/s.gguf" --tokens 1024 -c 256 -t "$THREADS" >/dev/null 2>&1 &&
       "$HC_BIN/hc-solve" -m "$M" -s "$T/s.gguf" --vram-budget "$VRAM" -o "$T/m.gpuidx" >/dev/null 2>&1; then
        set -- $(run hybrid -m "$M" --gpu-index "$T/m.gpuidx")
        h_tps=$1 h_ms=$2 share=$4
        set -- $(runp -m "$M" --gpu-index "$T/m.gpuidx")
        ph=$1
    fi
    awk -v hot="$hot" -v sk="$skip" -v dt="$d_tps" -v dm="$d_ms" -v st="$s_tps" -v sm="$s_ms" \
        -v ht="$h_tps" -v hm="$h_ms" -v sh="$share" -v pd="$pd" -v ps="$ps" -v ph="$ph" 'BEGIN {
        s = sk / 100
        printf "%-6s %7.1f%% | %9.1f %9.1f | %9.1f %9.1f %7.2fx | %9s %9s %7s | %7.2fx %7.2fx %7.0f%% | %8s %8s %8s\n",
            hot, sk, dt, dm, st, sm, dm / sm, ht, hm, sh, 1 / (1 - s), 1 / (1 / 3 + 2 / 3 * (1 - s)),
            100 * (dm / sm) / (1 / (1 / 3 + 2 / 3 * (1 - s))), pd, ps, ph }'
    rm -f "$M" "$T/m.gpuidx"
done
echo "speedup = dense FFN ms / sparse FFN ms; ideal = 1/(1 - skipped); ideal-b = bytes-read ideal"
echo "(gate rows always read); achieved = speedup / ideal-b; pp = prompt tok/s of a $n_prompt-token"
echo "prompt in one batch (-n 1; dense, sparse CPU, hybrid)"

S="$HC_FIXTURES/stories260K.gguf"
if [ -f "$S" ] && [ -f "$CORPUS" ]; then
    echo
    echo "perplexity cost of --sparse-threshold on stories260K (SiLU, skips |silu(gate)| < T), -c 256:"
    printf '%-10s %10s %9s\n' threshold perplexity skipped
    head -c 60000 "$CORPUS" >"$T/ppl.txt"
    for th in dense 0.01 0.03 0.1 0.3; do
        if [ "$th" = dense ]; then a="--dense"; else a="--sparse-threshold $th"; fi
        "$HC_BIN/hc-run" -m "$S" --perplexity "$T/ppl.txt" -c 256 -t "$THREADS" $a >"$T/ppl.out" 2>"$T/ppl.err"
        awk -v th="$th" '/^perplexity:/ && FNR == NR { p = $2 } /all layers: skipped/ { sk = $5 }
             END { printf "%-10s %10.4f %9s\n", th, p, sk == "" ? "0%" : sk }' "$T/ppl.out" "$T/ppl.err"
    done
fi

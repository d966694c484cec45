#!/bin/sh
# hc-profile predictors: (1) training time per layer for a LLaMA-7B-shaped
# layer (n_embd 4096, n_ff 11008) and (2) hc-run generation speed on a
# synthetic ReLU model: dense, exact sparsity (--sparse: every gate row
# computed, up/down rows only for active neurons) and predictors (gate, up and
# down rows only for predicted neurons).
#
# (1) uses a one-layer synthetic model of that shape (hc-convert synth, F16,
# planted hot set): its activations are synthetic, so recall/sparsity there
# say nothing about a real 7B model; only the time is the point.
#   HC_BIN=bin THREADS=2 TOKENS=5110 EPOCHS=1 RANK=1024 sh scripts/bench-predictors.sh
# Environment: HC_BIN, THREADS (default: online CPUs), TOKENS, EPOCHS, RANK,
# DIM/NFF/LAYERS (model of part 2: 1024/4096/4), GEN (generated tokens, 128).
set -eu
HC_BIN=${HC_BIN:-$(pwd)/bin}
THREADS=${THREADS:-$(nproc)}
TOKENS=${TOKENS:-5110}
EPOCHS=${EPOCHS:-1}
RANK=${RANK:-1024}
DIM=${DIM:-1024}
NFF=${NFF:-4096}
LAYERS=${LAYERS:-4}
GEN=${GEN:-128}
T=$(mktemp -d "${TMPDIR:-/tmp}/hcbench.XXXXXX")
trap 'rm -rf "$T"' EXIT

# a corpus of plain words (the synthetic vocabulary is bytes)
awk 'BEGIN { srand(1); split("the cat sat on a mat and looked at big red ball she was happy day dog ran fast home", w);
             for (i = 0; i < 60000; i++) printf "%s%s", w[int(rand() * 20) + 1], (i % 12 == 11) ? ".\n" : " " }' >"$T/corpus.txt"

echo "== training time per layer: n_embd 4096, n_ff 11008, rank $RANK, $TOKENS corpus tokens, $EPOCHS epoch(s), $THREADS threads"
"$HC_BIN/hc-convert" synth -o "$T/l7b.gguf" --dim 4096 --n-ff 11008 --layers 1 --heads 32 --ctx 512 \
    --act relu --type f16 --hot-fraction 0.1 >/dev/null
"$HC_BIN/hc-profile" predictors -m "$T/l7b.gguf" -f "$T/corpus.txt" -o "$T/l7b.sparse.gguf" -c 512 \
    --tokens "$TOKENS" --epochs "$EPOCHS" --rank "$RANK" --mem 4G -t "$THREADS" | tee "$T/l7b.txt"
awk -v e="$EPOCHS" '/kept/ { for (i = 1; i <= NF; i++) if ($i == "kept") n = $(i + 1) }
     $1 == "0" && NF > 10 { printf "train_s %.2f for %d tokens x %d epochs: %.3f s per 1000 token-epochs\n", $NF, n, e, $NF / (n * e / 1000) }' "$T/l7b.txt"
rm -f "$T/l7b.gguf" "$T/l7b.sparse.gguf"

echo "== hc-run generation, synthetic ReLU model dim $DIM, n_ff $NFF, $LAYERS layers, $THREADS threads, $GEN tokens (best of 3)"
"$HC_BIN/hc-convert" synth -o "$T/m.gguf" --dim "$DIM" --n-ff "$NFF" --layers "$LAYERS" --act relu \
    --hot-fraction 0.1 --ctx 512 >/dev/null
"$HC_BIN/hc-profile" predictors -m "$T/m.gguf" -f "$T/corpus.txt" -o "$T/m.sparse.gguf" -c 256 --tokens 20000 \
    -t "$THREADS" >"$T/m.txt"
sed -n '2,$p' "$T/m.txt"
# gen NAME ARGS...: best generation tok/s of 3 runs
gen() {
    name=$1; shift
    best=0
    for i in 1 2 3; do
        "$HC_BIN/hc-run" "$@" -p "the cat sat on the mat" -n "$GEN" --temp 0 -t "$THREADS" >/dev/null 2>"$T/run.err"
        r=$(awk '/^generation:/ { v = $(NF - 1); sub(/^\(/, "", v); print v }' "$T/run.err")
        best=$(awk -v a="$best" -v b="$r" 'BEGIN { print (b > a) ? b : a }')
    done
    skipped=$(awk '/all layers: skipped/ { print $5 }' "$T/run.err")
    printf '%-40s %10.1f tok/s  skipped %s\n' "$name" "$best" "${skipped:--}"
    echo "$best" >"$T/$name.tps"
}
gen dense -m "$T/m.gguf" --dense
gen exact-sparse -m "$T/m.gguf" --sparse
gen predictors -m "$T/m.sparse.gguf"
awk -v a="$(cat "$T/exact-sparse.tps")" -v b="$(cat "$T/predictors.tps")" -v d="$(cat "$T/dense.tps")" \
    'BEGIN { printf "predictors vs exact sparsity: %.2fx; vs dense: %.2fx\n", b / a, b / d }'

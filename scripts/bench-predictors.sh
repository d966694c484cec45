#!/bin/sh
# hc-profile predictors: (1) training time per layer for a LLaMA-7B-shaped
# layer (n_embd 4096, n_ff 11008) and (2) the sparse FFN with predictors on a
# synthetic ReLU model whose neurons fire on ACTIVE of the tokens
# (hc-convert synth --active-fraction ACTIVE --gate-rank GATE_RANK: which ones
# fire is predictable from the input, docs/hc-convert.md): truly active and
# predicted active fractions, their ratio and the recall on held-out text,
# then decode speed and FFN time of the dense FFN, exact sparsity (--sparse:
# every gate row computed, up/down rows only for active neurons) and the
# predictors (gate, up and down rows only for predicted neurons), against the
# ideal: the FFN weight bytes each token needs (predictor + rows read, as
# hc-run -v counts them) at the read bandwidth bench_membw measures; and the
# read rate of scattered rows and of scattered pairs of rows (bench_gather),
# the listed rows' own bound.
#
# (1) uses a one-layer synthetic model of that shape (hc-convert synth, F16,
# planted hot set): its activations are synthetic, so recall/sparsity there
# say nothing about a real 7B model; only the time is the point.
#   HC_BIN=bin THREADS=2 TOKENS=5110 EPOCHS=1 RANK=1024 sh scripts/bench-predictors.sh
#   PART=2 HC_BIN=bin THREADS=1 sh scripts/bench-predictors.sh     (part 2 only)
# Environment: HC_BIN, THREADS (default: online CPUs), PART (1, 2 or both:
# default), TOKENS, EPOCHS, RANK (part 1); part 2: DIM/NFF/LAYERS
# (1024/4096/4), ACTIVE (0.08), GATE_RANK (32), PRANK (predictor rank, 128),
# TRAIN (training corpus bytes, 16000), TRAIN_THREADS (hc-profile's -t:
# THREADS), GEN (generated tokens, 128), REPS (3), WORK (a folder kept for
# part 2's model, trained predictors and texts, reused when there: rerun the
# speed rows without training again; default: a temporary folder).
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
PART=${PART:-both}
ACTIVE=${ACTIVE:-0.08}
GATE_RANK=${GATE_RANK:-32}
PRANK=${PRANK:-128}
TRAIN=${TRAIN:-16000}
REPS=${REPS:-3}
TRAIN_THREADS=${TRAIN_THREADS:-$THREADS}
T=$(mktemp -d "${TMPDIR:-/tmp}/hcbench.XXXXXX")
trap 'rm -rf "$T"' EXIT

if [ "$PART" != 2 ]; then
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
fi

[ "$PART" = 1 ] && exit 0

# Random bytes (each a token of the synthetic vocabulary: byte tokens and
# printable characters) cover what the random model generates; a corpus of
# a few words would train the predictors on a few dozen inputs only.
W=${WORK:-$T}
mkdir -p "$W"
if [ ! -f "$W/m.sparse.gguf" ]; then
LC_ALL=C awk -v n="$TRAIN" 'BEGIN { srand(3); for (i = 0; i < n; i++) { c = int(rand() * 255) + 1; printf "%c", c == 13 ? 32 : c } }' >"$W/train.txt"
LC_ALL=C awk 'BEGIN { srand(4); for (i = 0; i < 4000; i++) { c = int(rand() * 255) + 1; printf "%c", c == 13 ? 32 : c } }' >"$W/heldout.txt"

echo "== sparse FFN with predictors: synthetic ReLU model dim $DIM, n_ff $NFF, $LAYERS layers, F16,"
echo "   --active-fraction $ACTIVE --gate-rank $GATE_RANK; predictors rank $PRANK on $TRAIN corpus tokens"
echo "   ($TRAIN_THREADS training threads); hc-run: $THREADS threads"
"$HC_BIN/hc-convert" synth -o "$W/m.gguf" --dim "$DIM" --n-ff "$NFF" --layers "$LAYERS" --act relu --type f16 \
    --active-fraction "$ACTIVE" --gate-rank "$GATE_RANK" --ctx 512 >/dev/null
"$HC_BIN/hc-profile" predictors -m "$W/m.gguf" -f "$W/train.txt" -o "$W/m.sparse.gguf" -c 256 --rank "$PRANK" \
    -t "$TRAIN_THREADS" >"$W/m.txt"
fi
sed 's/^[^:]*: //' "$W/m.txt"

# held-out accuracy, as hc-run counts it (every token's true active set computed beside)
"$HC_BIN/hc-run" -m "$W/m.sparse.gguf" --perplexity "$W/heldout.txt" -c 256 -t "$THREADS" -v 2>&1 >/dev/null |
    awk '/all layers: skipped/ { for (i = 1; i <= NF; i++) { if ($i == "predicted") p = $(i + 2); if ($i == "truly") t = $(i + 2)
                                                             if ($i == "recall") r = $(i + 1) }
                                  sub(/%,?/, "", p); sub(/%,?/, "", t)
                                  printf "held-out text: truly active %.2f%%, predicted active %.2f%%, predicted / truly %.2f, recall %s\n", t, p, p / t, r }'

# run NAME ARGS...: decode GEN tokens from BOS; prints "tok/s ffn_ms_per_token ffn_bytes_per_token dense_bytes"
run() {
    "$HC_BIN/hc-run" -p "" -n "$GEN" --temp 0 -t "$THREADS" "$@" 2>&1 >/dev/null |
        awk 'function b(v, u) { return v * (u == "KiB" ? 1024 : u == "MiB" ? 1048576 : u == "GiB" ? 1073741824 : 1) }
             /^generation:/ { t = $(NF - 1); sub(/^\(/, "", t) }
             /FFN time/ { for (i = 1; i <= NF; i++) if ($i == "time") { ms = $(i + 1); n = $(i + 4) } }
             /all layers: skipped/ { for (i = 1; i <= NF; i++) if ($i == "read") { u = $(i + 2); sub(/\/token$/, "", u)
                                        rd = b($(i + 1), u); db = b($(i + 4), $(i + 5)) } }
             END { printf "%s %s %s %s\n", t, ms / n, rd, db }'
}
MEMBW_BIN=$(dirname "$HC_BIN")/build/bench/bench_membw
[ -x "$MEMBW_BIN" ] || MEMBW_BIN=build/bench/bench_membw
bw=$("$MEMBW_BIN" 512 "$THREADS" | awk -v t="$THREADS" '$1 == t { print $2 }')
echo "read bandwidth ($THREADS threads, bench_membw): $bw GB/s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
# the sparse rows' own bound: scattered F16 rows of DIM at ACTIVE of the rows, 1 thread,
# next row prefetched into L2, 2 MiB pages (as hc-run reads them), and its streaming pass;
# then runs of two rows (a neuron's gate and up rows side by side, as decode reads them)
for rb in $((DIM * 2)) $((DIM * 4)); do
    "$(dirname "$MEMBW_BIN")/bench_gather" "$rb" "$ACTIVE" 256 |
        awk -v rb="$rb" '$1 == "2M" && $2 == "L2" && $3 == 1 { g = $4 } $1 == "2M" && $2 == "stream" { s = $4 }
             END { printf "scattered %d-byte rows (1 thread, bench_gather): %s GB/s; its sequential pass %s GB/s\n", rb, g, s }'
done
# interleaved runs: dense (-v for its FFN time), exact sparsity, predictors
for r in $(seq "$REPS"); do
    run -m "$W/m.gguf" --dense -v >>"$T/dense.r"
    run -m "$W/m.gguf" --sparse >>"$T/exact.r"
    run -m "$W/m.sparse.gguf" >>"$T/pred.r"
done
# the dense bytes come from the sparse runs' report (the dense FFN prints none)
db=$(awk '{ print $4 }' "$T/exact.r" | head -n 1)
# "x ideal": FFN time / (bytes read at bench_membw's bandwidth); "x dense rate": FFN time /
# (bytes read at the rate the dense FFN reached in the same runs)
dms=$(sort -n -k 2 "$T/dense.r" | awk 'NR == 1 { print $2 }')
printf '%-12s %9s %12s %14s %12s %9s %13s\n' FFN "tok/s" "FFN ms/tok" "FFN MiB/tok" "ideal ms" "x ideal" "x dense rate"
for name in dense exact pred; do
    sort -n -k 2 "$T/$name.r" | awk -v n="$name" -v bw="$bw" -v db="$db" -v dms="$dms" 'NR == 1 {
        rd = n == "dense" ? db : $3; ideal = rd / (bw * 1e9) * 1e3
        printf "%-12s %9.1f %12.3f %14.2f %12.3f %9.2f %13.2f\n", n, $1, $2, rd / 1048576, ideal, $2 / ideal, $2 / (dms * rd / db) }'
done
# prompts: 256-token windows of the held-out text (the multi-token kernels): FFN ms per
# token and FFN bytes per token as hc-run counts them (each token's own rows, the
# predictor once per token), against the same ideal
pp() {
    "$HC_BIN/hc-run" "$@" --perplexity "$W/heldout.txt" -c 256 -t "$THREADS" 2>&1 >/dev/null |
        awk 'function b(v, u) { return v * (u == "KiB" ? 1024 : u == "MiB" ? 1048576 : u == "GiB" ? 1073741824 : 1) }
             /FFN time/ { for (i = 1; i <= NF; i++) if ($i == "time") ms = $(i + 1) / $(i + 4) }
             /all layers: skipped/ { for (i = 1; i <= NF; i++) if ($i == "read") { u = $(i + 2); sub(/\/token$/, "", u)
                                        rd = b($(i + 1), u) } }
             END { printf "%.3f %s\n", ms, rd }'
}
for r in $(seq "$REPS"); do
    pp -m "$W/m.gguf" --dense -v >>"$T/dense.p"
    pp -m "$W/m.sparse.gguf" >>"$T/pred.p"
done
printf 'prompt (256-token windows) FFN ms/token, best of %s: dense %s, predictors %s\n' "$REPS" \
    "$(sort -n "$T/dense.p" | awk 'NR == 1 { print $1 }')" "$(sort -n "$T/pred.p" | awk 'NR == 1 { print $1 }')"
sort -n "$T/pred.p" | awk -v bw="$bw" 'NR == 1 { ideal = $2 / (bw * 1e9) * 1e3
    printf "prompt predictors: FFN %.2f MiB/token, ideal %.3f ms/token, x ideal %.2f\n", $2 / 1048576, ideal, $1 / ideal }'
awk -v d="$(sort -n -k 2 "$T/dense.r" | head -n 1)" -v p="$(sort -n -k 2 "$T/pred.r" | head -n 1)" 'BEGIN {
    split(d, a, " "); split(p, b, " ")
    printf "predictors vs dense: decode %.2fx, FFN time %.2fx (runs with the lowest FFN time of %s)\n", b[1] / a[1], a[2] / b[2], "'"$REPS"'" }'

#!/bin/sh
# make demo: the whole pipeline (scripts/pipeline.sh) on a generated ReLU model with a
# planted hot-neuron set, then on stories260K when ../shared/fixtures exists, and a
# summary of what each step found. Runs in seconds.
#   HC_BIN=bin sh scripts/demo.sh        (artefacts in $DEMO_OUT, default build/demo)
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
HC_BIN=${HC_BIN:-$here/bin}
HC_FIXTURES=${HC_FIXTURES:-$here/../shared/fixtures}
OUT=${DEMO_OUT:-$here/build/demo}
THREADS=${THREADS:-2}
export HC_BIN

rule() { echo; echo "=== $*"; echo; }

# json_layers FILE KEY...: one line per element of the "layers" array of a
# cJSON-formatted report, the values of KEY... in that order (no JSON tool needed)
json_layers() {
    f=$1; shift
    awk -v keys="$*" '
        BEGIN { n = split(keys, k, " ") }
        /"layers":/ { inl = 1; next }
        inl && /^\t[]}]/ { inl = 0 }
        inl {
            line = $0; gsub(/[\t",]/, "", line); split(line, kv, ":")
            v[kv[1]] = kv[2]
            if (kv[1] == k[n]) { out = ""; for (i = 1; i <= n; i++) out = out (i > 1 ? " " : "") v[k[i]]; print out }
        }' "$f"
}
# json_get FILE KEY: first top-level-or-nested scalar KEY outside "layers"
json_get() {
    awk -v key="$2" '
        /"layers":/ { exit }
        { line = $0; gsub(/[\t",]/, "", line); split(line, kv, ":"); if (kv[1] == key) { print kv[2]; exit } }' "$1"
}
size() { wc -c <"$1" | awk '{ b = $1; if (b >= 1048576) printf "%.1f MiB", b / 1048576; else if (b >= 1024) printf "%.1f KiB", b / 1024; else printf "%d B", b }'; }
# toks LOG: the generation rate hc-run printed
toks() { awk '/^generation:/ { for (i = 1; i <= NF; i++) if ($i == "tok/s)") { v = $(i - 1); sub(/^\(/, "", v); print v } }' "$1" 2>/dev/null; }

# summary DIR: what each step of one pipeline run found
summary() {
    d=$1
    echo "--- what each step found"
    echo "sizes:"
    for f in model.gguf model-quant.gguf stats.gguf model.gpuidx; do
        [ -f "$d/$f" ] && printf '  %-18s %10s\n' "$f" "$(size "$d/$f")"
    done
    if [ -f "$d/profile.json" ]; then
        echo "activations (hc-profile show), per layer: how often a neuron fires on average,"
        echo "and the share of neurons, hottest first, that covers 80% / 99% of all activations:"
        json_layers "$d/profile.json" layer mean_rate cover80 cover99 |
            awk '{ printf "  layer %2d: fires on %5.1f%% of tokens; %5.1f%% of neurons cover 80%%, %5.1f%% cover 99%%\n",
                   $1, 100 * $2, 100 * $3, 100 * $4 }'
    fi
    if [ -f "$d/solve.json" ]; then
        nff=$(json_get "$d/solve.json" n_ff)
        echo "placement (hc-solve, budget $(json_get "$d/solve.json" vram_budget) bytes:" \
             "dense part $(json_get "$d/solve.json" dense_total), FFN capacity $(json_get "$d/solve.json" ffn_capacity)):"
        json_layers "$d/solve.json" layer gpu_neurons gpu_bytes coverage |
            awk -v nff="$nff" '{ printf "  layer %2d: %5d of %d neurons on the GPU, %8d bytes, %6.2f%% of its activations\n",
                                  $1, $2, nff, $3, 100 * $4 }'
        awk '/"totals":/ { t = 1 } t { line = $0; gsub(/[\t",]/, "", line); split(line, kv, ":"); v[kv[1]] = kv[2] }
             t && /"coverage":/ { printf "  total:    %5d of %d neurons, %d bytes, %.2f%% of all activations served by the GPU\n",
                                  v["gpu_neurons"], v["neurons"], v["gpu_bytes"], 100 * v["coverage"]; exit }' "$d/solve.json"
    fi
    echo "hc-run, generation tokens/s (greedy, $THREADS threads; tiny models, so mostly overhead):"
    printf '  %-8s %10s\n' dense "$(toks "$d/logs/run.err")"
    if [ -f "$d/run-sparse.txt" ]; then
        printf '  %-8s %10s   (%s)\n' sparse "$(toks "$d/logs/run-sparse.err")" \
            "$(sed -n 's/^sparse: all layers: //p' "$d/logs/run-sparse.err")"
    else
        echo "  sparse   skipped: not available (this hc-run has no --sparse)"
    fi
    if [ -f "$d/run-hybrid.txt" ]; then
        printf '  %-8s %10s   (%s)\n' hybrid "$(toks "$d/logs/run-hybrid.err")" \
            "$(sed -n 's/.*device served \(.*\)/device served \1/p' "$d/logs/run-hybrid.err")"
        sed -n 's/^opencl: /  OpenCL: /p' "$d/logs/run-hybrid.err"
        cmp -s "$d/run-dense.txt" "$d/run-hybrid.txt" && echo "  hybrid text = dense text"
    else
        echo "  hybrid   skipped: not available (this hc-run has no --gpu-index)"
    fi
}

cat <<'EOF'
hotcold demo: convert -> quantize -> profile -> solve -> run

  checkpoint ──hc-convert──> model.gguf ──hc-quantize──> model-quant.gguf
       corpus ──hc-profile (model-quant.gguf)──> stats.gguf
       stats.gguf + model-quant.gguf + VRAM budget ──hc-solve──> model.gpuidx
       model-quant.gguf (+ model.gpuidx) ──hc-run──> text, tokens/s
EOF

# ---------------------------------------------------------------- synthetic model
SYNTH="--act relu --hot-fraction 0.1 --hot-skew 2 --dim 256 --n-ff 1024 --layers 4 --ctx 256"
rule "1. A synthetic ReLU model with a planted hot set ($SYNTH)"
cat <<'EOF'
hc-convert synth plants a hot set: the top 10% of each layer's FFN neurons fire often
(rate falling off as a power law), the rest rarely. The corpus is models/synth-corpus.txt.
The budget (3 MiB) holds the dense part and a fraction of the FFN rows; tiny FFNs make
hc-solve's default per-layer minimum larger than a layer, so --min-layer-neurons 0.
EOF
echo
sh "$here/scripts/pipeline.sh" -o "$OUT/synth" --synth "$SYNTH" -q Q4_0 --vram-budget 3M -t "$THREADS" \
    --solve-opts "--min-layer-neurons 0 --ctx 256" -p "Once upon a time" -n 64 || exit $?
echo
summary "$OUT/synth"
echo "what the budget buys (hc-solve --sweep, same model and statistics):"
"$HC_BIN/hc-solve" -m "$OUT/synth/model-quant.gguf" -s "$OUT/synth/stats.gguf" --min-layer-neurons 0 --ctx 256 \
    --sweep 2824K,3M,3328K,3584K,4M,4608K 2>/dev/null | sed 's/^/  /'

# ---------------------------------------------------------------- stories260K
if [ -f "$HC_FIXTURES/stories260K.bin" ] && [ -f "$HC_FIXTURES/tok512.bin" ] &&
   [ -f "$HC_FIXTURES/tinystories-calib.txt" ]; then
    rule "2. stories260K (llama2.c checkpoint from $HC_FIXTURES)"
    cat <<'EOF'
A real (tiny) TinyStories model: SiLU FFN, so "active" means |h| > 0.01 and far more
neurons fire than in a ReLU model. Profiled on the first 32768 tokens of
tinystories-calib.txt. Budget 800 KiB: the dense part takes ~710 KiB (most of it the
512-token f32 KV cache, 640 KiB), leaving ~90 KiB for the 168 KiB of FFN rows.
EOF
    echo
    sh "$here/scripts/pipeline.sh" -o "$OUT/stories260K" --src "$HC_FIXTURES/stories260K.bin" \
        --tokenizer "$HC_FIXTURES/tok512.bin" --corpus "$HC_FIXTURES/tinystories-calib.txt" \
        -q Q4_0 --vram-budget 800K -t "$THREADS" --profile-opts "--tokens 32768" --solve-opts "--min-layer-neurons 0" \
        -p "Once upon a time" -n 64 || exit $?
    echo
    summary "$OUT/stories260K"
else
    rule "2. stories260K: skipped ($HC_FIXTURES has no stories260K.bin, tok512.bin, tinystories-calib.txt)"
fi
echo
echo "demo: done; artefacts in $OUT"

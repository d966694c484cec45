#!/bin/sh
# A SiLU model through the whole pipeline, as a ReLU one (issue 21):
# calibrate -> profile -> predictors -> solve -> hybrid, on stories260K.
#  - hc-profile of a calibrated model counts its calibrated active sets
#    (about 1 - S of the neurons per layer, threshold 0), not |h| > 0.01;
#  - hc-solve places neurons from those counts;
#  - with the predictors, the hybrid run (hot neurons on the OpenCL device,
#    PoCL's CPU device here) gives the sparse-CPU run's logits;
#  - the device applies the calibrated contribution rule: the hybrid run
#    skips per layer what calibrate skipped on its corpus, with the CPU's
#    perplexity, and hc-run -v's recall (against the calibrated set) is 1.
. tests/lib.sh
need_programs silu_pipeline hc-profile hc-solve hc-run
P="$HC_BIN/hc-profile"
R="$HC_BIN/hc-run"
M="$HC_FIXTURES/stories260K.gguf"
if [ ! -f "$M" ] || [ ! -f "$HC_FIXTURES/tinystories-calib.txt" ]; then skip silu_pipeline "no fixtures"; finish; fi
head -c 12000 "$HC_FIXTURES/tinystories-calib.txt" >"$T/c.txt"

check calibrate sh -c "'$P' calibrate -m '$M' -f '$T/c.txt' -c 128 --target-sparsity 0.5 -o '$T/cal.gguf' >'$T/cal.txt'"
check profile "$P" -m "$T/cal.gguf" -f "$T/c.txt" -c 128 -o "$T/stats.gguf"
check profile_dense "$P" -m "$M" -f "$T/c.txt" -c 128 -o "$T/dense-stats.gguf"
"$P" show "$T/stats.gguf" --json >"$T/stats.json"
"$P" show "$T/dense-stats.gguf" --json >"$T/dense-stats.json"
# calibrated: threshold 0 and half of the neurons per layer; the dense model's |h| > 0.01 counts far more
check profile_counts_calibrated_sets python3 -c "
import json, sys
c = json.load(open('$T/stats.json')); d = json.load(open('$T/dense-stats.json'))
rates = [l['mean_rate'] for l in c['layers']]
sys.exit(not (c['threshold'] == 0 and len(rates) == 5 and all(0.45 <= r <= 0.55 for r in rates)
              and all(l['mean_rate'] > 0.8 for l in d['layers'])))"

check predictors sh -c "'$P' predictors -m '$T/cal.gguf' -f '$T/c.txt' -c 128 --epochs 2 -o '$T/pred.gguf' >/dev/null 2>&1"
# about half of the FFN on the device: dense part 450.8 KiB + 322 KiB of neurons;
# hc-run's model also holds the predictors (PWRI, 153.7 KiB), which hc-run
# places with the dense part: its budget has room for them too
check solve "$HC_BIN/hc-solve" -m "$T/cal.gguf" -s "$T/stats.gguf" --vram-budget 780K --ctx 128 --min-layer-neurons 0 \
    -o "$T/idx.gpuidx"
Q="Once upon a time there was a little girl"
"$R" -m "$T/pred.gguf" -p "$Q" --logits -n 0 -t 2 >"$T/cpu.txt" 2>"$T/cpu.err"
if "$R" -m "$T/pred.gguf" -p "$Q" --logits -n 0 -t 2 --gpu-index "$T/idx.gpuidx" --vram-budget 940K -c 128 -v \
       >"$T/hybrid.txt" 2>"$T/hybrid.err" && grep -q "^hybrid: .* on the device" "$T/hybrid.err"; then
    check hybrid_splits grep -Eq "^hybrid: .*: [1-9][0-9]* of 860 neurons on the device" "$T/hybrid.err"
    check hybrid_both_sides grep -Eq "device served [1-9][0-9]?\.[0-9]% of activations" "$T/hybrid.err"
    # every layer's attention and predictor on the device: the hot rows' sums stay there (no wait for them)
    check hybrid_one_exchange sh -c "grep -q '^offload: 5 of 5 layers' '$T/hybrid.err' && ! grep -q waited '$T/hybrid.err'"
    same_logits hybrid_equals_sparse_cpu_with_predictors "$T/cpu.txt" "$T/hybrid.txt"
elif ! "$R" --list-devices >/dev/null 2>&1; then
    skip hybrid_equals_sparse_cpu_with_predictors "no OpenCL device: $(head -c 200 "$T/hybrid.err")"
    finish
else
    fail hybrid_equals_sparse_cpu_with_predictors "$(grep -v "^sparse: *layer" "$T/hybrid.err" | head -c 600)"
    finish
fi

# the exact calibrated rule on the device: calibrate's per-layer skipped fraction, the CPU's perplexity
"$R" -m "$T/cal.gguf" --perplexity "$T/c.txt" -c 128 -v >"$T/cpu.ppl" 2>"$T/cpu-ppl.err"
"$R" -m "$T/cal.gguf" --perplexity "$T/c.txt" -c 128 -v --gpu-index "$T/idx.gpuidx" --vram-budget 780K \
    >"$T/hybrid.ppl" 2>"$T/hybrid-ppl.err"
if awk 'FNR == NR { if ($1 ~ /^[0-9]+$/ && NF == 4) want[$1] = $4 * 100; next }
        /^sparse: layer/ { l = $3 + 0; got = $5 + 0; n++
                           if (!(l in want) || got - want[l] > 0.006 || want[l] - got > 0.006) bad = bad " layer " l ": " got " vs " want[l] }
        END { if (n != 5 || bad != "") { print n " layers" bad; exit 1 } }' "$T/cal.txt" "$T/hybrid-ppl.err" >"$T/cmp"
then ok hybrid_skips_calibrated; else fail hybrid_skips_calibrated "$(cat "$T/cmp")"; fi
check hybrid_used_device grep -q "^hybrid: .* on the device" "$T/hybrid-ppl.err"
check hybrid_recall_of_calibrated_set grep -q "^sparse: all layers: .*, recall 1.0000$" "$T/hybrid-ppl.err"
check cpu_recall_of_calibrated_set grep -q "^sparse: all layers: .*, recall 1.0000$" "$T/cpu-ppl.err"
# the CPU's perplexity up to rounding (the device sums in another order)
check hybrid_perplexity_is_cpu awk 'FNR == NR { a = $2; next } { b = $2 } END { exit !(a > 0 && (a - b) / a < 1e-4 && (b - a) / a < 1e-4) }' \
    "$T/cpu.ppl" "$T/hybrid.ppl"
finish

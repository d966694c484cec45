#!/bin/sh
# hc-solve prices each GPU neuron as hc-run stores it: the bytes the solver
# places equal the bytes hc-run gathers onto the device, for every weight type
# (an untransposed Q8_0/Q4_0 ffn_down becomes per-neuron Q8_0 rows in hc-run).
. tests/lib.sh
"$HC_BIN/hc-convert" synth --dim 128 --n-ff 512 --hot-fraction 0.1 --hot-skew 2 -o "$T/m.gguf" 2>/dev/null
for q in F16 Q8_0 Q4_0; do
    "$HC_BIN/hc-quantize" -q --pure "$T/m.gguf" "$T/$q.gguf" "$q"
    "$HC_BIN/hc-profile" -m "$T/$q.gguf" -f models/synth-corpus.txt -o "$T/$q.stats" >/dev/null 2>&1
    "$HC_BIN/hc-solve" -m "$T/$q.gguf" -s "$T/$q.stats" --vram-budget 900K --min-layer-neurons 0 -o "$T/$q.gpuidx" \
        >"$T/solve.out" 2>&1
    placed=$(sed -n 's/^placed .*neurons ([0-9.]*%), \(.*\)$/\1/p' "$T/solve.out")
    "$HC_BIN/hc-run" -m "$T/$q.gguf" --gpu-index "$T/$q.gpuidx" --vram-budget 900K -p x -n 2 \
        >/dev/null 2>"$T/run.err"
    device=$(sed -n 's/^hybrid: .* on the device (\(.*\))$/\1/p' "$T/run.err")
    if [ -n "$placed" ] && [ "$placed" = "$device" ]; then ok "solver_bytes_are_device_bytes_$q"
    else fail "solver_bytes_are_device_bytes_$q" "hc-solve placed '$placed', hc-run gathered '$device'"; fi
done
finish

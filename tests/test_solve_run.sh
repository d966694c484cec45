#!/bin/sh
# hc-solve prices each GPU neuron as hc-run stores it: the bytes the solver
# places equal the bytes hc-run gathers onto the device, for every weight type
# (an untransposed Q8_0/Q4_0 ffn_down becomes per-neuron Q8_0 rows in hc-run), and its
# KV cache at the type hc-run will hold (-ctk/-ctv).
. tests/lib.sh
"$HC_BIN/hc-convert" synth --dim 128 --n-ff 512 --hot-fraction 0.1 --hot-skew 2 -o "$T/m.gguf" 2>/dev/null
for q in F16 Q8_0 Q4_0; do
    "$HC_BIN/hc-quantize" -q --pure "$T/m.gguf" "$T/$q.gguf" "$q"
    "$HC_BIN/hc-profile" -m "$T/$q.gguf" -f models/synth-corpus.txt -o "$T/$q.stats" >/dev/null 2>&1
    "$HC_BIN/hc-solve" -m "$T/$q.gguf" -s "$T/$q.stats" --vram-budget 900K --min-layer-neurons 0 -o "$T/$q.gpuidx" \
        >"$T/solve_$q.out" 2>&1
    placed=$(sed -n 's/^placed .*neurons ([0-9.]*%), \(.*\)$/\1/p' "$T/solve_$q.out")
    "$HC_BIN/hc-run" -m "$T/$q.gguf" --gpu-index "$T/$q.gpuidx" --vram-budget 900K -p x -n 2 \
        >/dev/null 2>"$T/run.err"
    device=$(sed -n 's/^hybrid: .* on the device (\(.*\))$/\1/p' "$T/run.err")
    if [ -n "$placed" ] && [ "$placed" = "$device" ]; then ok "solver_bytes_are_device_bytes_$q"
    else fail "solver_bytes_are_device_bytes_$q" "hc-solve placed '$placed', hc-run gathered '$device'"; fi
done
# an index solved for other FFN weights (the Q4_0 file's, run on the F16 one) is named in a warning;
# the model's own is not
"$HC_BIN/hc-run" -m "$T/F16.gguf" --gpu-index "$T/Q4_0.gpuidx" --vram-budget 900K -p x -n 2 >/dev/null 2>"$T/other.err"
"$HC_BIN/hc-run" -m "$T/F16.gguf" --gpu-index "$T/F16.gpuidx" --vram-budget 900K -p x -n 2 >/dev/null 2>"$T/own.err"
if grep -q "^hc-run: $T/Q4_0.gpuidx: solved for FFN weights other than this model's (hash [0-9a-f]\{16\}, this model's [0-9a-f]\{16\}: another model, or another type of this one)" "$T/other.err" &&
   ! grep -q 'solved for FFN weights other' "$T/own.err"; then ok solver_index_of_other_weights
else fail solver_index_of_other_weights "$(cat "$T/other.err" "$T/own.err")"; fi
# -ctk/-ctv f16 (llama.cpp's flags): the KV cache priced at 2 bytes an element, half f32's, so a
# budget whose dense part is mostly cache places far more neurons, and hc-run with the same cache
# gathers what hc-solve placed
kv_bytes() { sed -n 's/^dense .*(ctx [0-9]*, \([0-9]*\) bytes a KV element pair)$/\1/p' "$1"; }
n_placed() { sed -n 's/^placed *\([0-9]*\) of.*/\1/p' "$1"; }
for kv in f32 f16; do
    "$HC_BIN/hc-solve" -m "$T/Q4_0.gguf" -s "$T/Q4_0.stats" --vram-budget 640K --min-layer-neurons 0 -ctk $kv \
        --cache-type-v $kv -o "$T/$kv.gpuidx" >"$T/solve_$kv.out" 2>&1
    "$HC_BIN/hc-run" -m "$T/Q4_0.gguf" --gpu-index "$T/$kv.gpuidx" --vram-budget 640K -p x -n 2 -ctk $kv -ctv $kv \
        >/dev/null 2>"$T/run_$kv.err"
    placed=$(sed -n 's/^placed .*neurons ([0-9.]*%), \(.*\)$/\1/p' "$T/solve_$kv.out")
    device=$(sed -n 's/^hybrid: .* on the device (\(.*\))$/\1/p' "$T/run_$kv.err")
    if [ -n "$placed" ] && [ "$placed" = "$device" ]; then ok "solver_cache_${kv}_bytes"
    else fail "solver_cache_${kv}_bytes" "hc-solve '$placed', hc-run '$device'"; fi
done
if [ "$(kv_bytes "$T/solve_f32.out")" = 8 ] && [ "$(kv_bytes "$T/solve_f16.out")" = 4 ] &&
   [ "$(n_placed "$T/solve_f16.out")" -gt $(($(n_placed "$T/solve_f32.out") * 4)) ]
then ok solver_f16_cache
else fail solver_f16_cache "$(grep -h -e '^dense' -e '^placed' "$T/solve_f32.out" "$T/solve_f16.out")"; fi
ctx_train=$("$HC_BIN/hc-gguf" dump "$T/Q4_0.gguf" | sed -n 's/.*llama[.]context_length *u32 *= *\([0-9]*\).*/\1/p')
check_fails solver_ctx_beyond_model "--ctx $((ctx_train + 1)) exceeds the model's context_length $ctx_train" \
    "$HC_BIN/hc-solve" -m "$T/Q4_0.gguf" -s "$T/Q4_0.stats" --vram-budget 900K --ctx $((ctx_train + 1))
check_fails solver_cache_type_q8_0 "--cache-type-k q8_0: a KV cache of q8_0 is not implemented (f32 or f16)" \
    "$HC_BIN/hc-solve" -m "$T/Q4_0.gguf" -s "$T/Q4_0.stats" --vram-budget 900K -ctk q8_0
# bytes in --json keep every digit (cJSON's doubles keep 15): 99999 TiB is 109950063265972224
"$HC_BIN/hc-solve" -m "$T/Q4_0.gguf" -s "$T/Q4_0.stats" --vram-budget 99999T --json >"$T/big.json" 2>/dev/null
if python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["vram_budget"] == 109950063265972224' \
    "$T/big.json" 2>/dev/null; then ok solver_json_bytes_exact
else fail solver_json_bytes_exact "$(head -c 200 "$T/big.json")"; fi
finish

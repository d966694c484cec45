#!/bin/sh
# An INT4-GPTQ model through the rest of the chain on a small synthetic model:
# hc-convert synth -> hc-quantize GPTQ --calib -> hc-profile -> hc-solve ->
# hc-run. The statistics identify the GPTQ model (its FFN hash is not the
# empty one, and differs from the unquantized model's), hc-solve prices its
# neurons from the companion tensors, and hc-run, which has no GPTQ sparse
# kernels, says so in one line and runs the dense FFN (same text) for --sparse,
# --gpu-index and an index found beside the model. Then scripts/pipeline.sh
# --quant GPTQ end to end.
. tests/lib.sh
for p in hc-convert hc-quantize hc-profile hc-solve hc-run; do
    if [ ! -x "$HC_BIN/$p" ]; then skip gptq_pipeline "$HC_BIN/$p not built"; finish; fi
done
C=models/synth-corpus.txt
M=$T/m.gguf Q=$T/q.gguf
EMPTY=cbf29ce484222325   # FNV-1a offset basis: nothing hashed

check synth "$HC_BIN/hc-convert" synth -o "$M" --act relu --hot-fraction 0.1 --hot-skew 2
check quantize "$HC_BIN/hc-quantize" -q -t 2 "$M" "$Q" GPTQ --calib "$C" --calib-tokens 512 --ctx 64
check profile "$HC_BIN/hc-profile" -m "$Q" -f "$C" -o "$T/s.gguf" -t 2
check profile_f32 "$HC_BIN/hc-profile" -m "$M" -f "$C" -o "$T/s32.gguf" -t 2 --tokens 256
hash() { "$HC_BIN/hc-profile" show "$1" | sed -n 's/^model ffn_hash \([0-9a-f]*\).*/\1/p'; }
h=$(hash "$T/s.gguf") h32=$(hash "$T/s32.gguf")
if [ -n "$h" ] && [ "$h" != $EMPTY ] && [ "$h" != "$h32" ]; then ok stats_identify_gptq_model
else fail stats_identify_gptq_model "GPTQ hash '$h', F32 hash '$h32'"; fi

S="$HC_BIN/hc-solve -m $Q -s $T/s.gguf --min-layer-neurons 0"
check solve $S --vram-budget 450K -o "$T/q.gpuidx" --report "$T/r.json"
# placed neurons within the FFN capacity, each priced from qweight + scales + qzeros
if awk '/"ffn_capacity":/ { gsub(/[^0-9]/, ""); cap = $0 + 0 } /"totals":/ { t = 1 }
        t && /"gpu_neurons":/ { gsub(/[^0-9]/, ""); n = $0 + 0 } t && /"gpu_bytes":/ { gsub(/[^0-9]/, ""); b = $0 + 0 }
        /"neuron_bytes":/ { gsub(/[^0-9]/, ""); nb = $0 + 0 }
        END { exit !(n > 0 && b <= cap && nb > 0 && nb < 400) }' "$T/r.json"; then ok solve_places_gptq_neurons
else fail solve_places_gptq_neurons "$(head -c 600 "$T/r.json")"; fi
check_fails solve_rejects_other_stats "FFN weights hash" $S -s "$T/s32.gguf" --vram-budget 450K -o "$T/x.gpuidx"

R="$HC_BIN/hc-run -m $Q -p Once -n 12 --temp 0 -t 2"
$R --dense >"$T/dense.txt" 2>/dev/null || fail run_dense "exit status $?"
# run_falls_back NAME ARGS...: exit 0, the dense text, one hc-run line naming the refusal
run_falls_back() {
    name=$1; shift
    if $R "$@" >"$T/$name.txt" 2>"$T/$name.err" && cmp -s "$T/dense.txt" "$T/$name.txt" &&
       [ "$(grep -c '^hc-run: .*INT4-GPTQ.*running the dense FFN' "$T/$name.err")" = 1 ]; then ok "$name"
    else fail "$name" "$(cat "$T/$name.err")"; fi
}
run_falls_back run_sparse_falls_back --sparse
run_falls_back run_gpu_index_falls_back --gpu-index "$T/q.gpuidx"
cp "$T/q.gpuidx" "$Q.generated.gpuidx"
run_falls_back run_auto_index_falls_back

out=$T/pipe
if sh scripts/pipeline.sh -o "$out" --quant GPTQ --corpus "$C" --vram-budget 500K --solve-opts "--min-layer-neurons 0" \
       --quant-opts "--calib-tokens 512 --ctx 64" -n 8 -t 2 >"$T/pipe.out" 2>"$T/pipe.err" &&
   [ -s "$out/model.gpuidx" ] && [ -s "$out/run-dense.txt" ] && grep -q 'it ran the dense FFN' "$T/pipe.out"; then
    ok pipeline_quant_gptq
else fail pipeline_quant_gptq "$(tail -3 "$T/pipe.err")"; fi
finish

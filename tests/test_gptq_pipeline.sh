#!/bin/sh
# An INT4-GPTQ model through the rest of the chain on a small synthetic model:
# hc-convert synth -> hc-quantize GPTQ --calib -> hc-profile -> hc-solve ->
# hc-run. The statistics identify the GPTQ model (its FFN hash is not the
# empty one, and differs from the unquantized model's), hc-solve prices its
# neurons as the runtime stores INT4 rows (docs/design/gptq.md), and hc-run
# runs the sparse FFN (--sparse) and the hybrid one (--gpu-index: hot INT4
# rows on the OpenCL device) with the dense text, skipping inactive neurons.
# Then scripts/pipeline.sh --quant GPTQ end to end.
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
# placed neurons within the FFN capacity, each priced as hc-run stores it: gate and up
# rows of 64 codes (32 bytes) and one f32 pair per group of 128 (8 bytes), a down
# column of 64 codes and a 4-byte group index; per layer one pairs table of
# 64 pairs for each of the 2 groups of ffn_down's 256 inputs (1 KiB)
if awk '/"ffn_capacity":/ { gsub(/[^0-9]/, ""); cap = $0 + 0 } /"totals":/ { t = 1 }
        t && /"gpu_neurons":/ { gsub(/[^0-9]/, ""); n = $0 + 0 } t && /"gpu_bytes":/ { gsub(/[^0-9]/, ""); b = $0 + 0 }
        /"neuron_bytes":/ { gsub(/[^0-9]/, ""); if ($0 + 0 != 116) bad = 1 }
        /"gptq_down_pairs":/ { gsub(/[^0-9]/, ""); pairs = $0 + 0 }
        END { exit !(n > 0 && b <= cap && b == 116 * n && pairs == 2048 && !bad) }' "$T/r.json"; then
    ok solve_prices_gptq_rows
else fail solve_prices_gptq_rows "$(head -c 900 "$T/r.json")"; fi
check_fails solve_rejects_other_stats "FFN weights hash" $S -s "$T/s32.gguf" --vram-budget 450K -o "$T/x.gpuidx"

R="$HC_BIN/hc-run -m $Q -p Once -n 12 --temp 0 -t 2"
$R --dense >"$T/dense.txt" 2>/dev/null || fail run_dense "exit status $?"
# run_same NAME PATTERN ARGS...: exit 0, the dense text, PATTERN in the verbose log
run_same() {
    name=$1 pat=$2; shift 2
    if $R -v "$@" >"$T/$name.txt" 2>"$T/$name.err" && cmp -s "$T/dense.txt" "$T/$name.txt" &&
       grep -q "$pat" "$T/$name.err" && ! grep -q 'running the dense FFN\|CPU only' "$T/$name.err"; then ok "$name"
    else fail "$name" "$(cat "$T/$name.err")"; fi
}
run_same run_sparse 'all layers: skipped  *[1-9][0-9]*\.[0-9]*% of neurons' --sparse
run_same run_gpu_index 'device served [1-9][0-9.]*% of activations' --gpu-index "$T/q.gpuidx" --vram-budget 450K
# the device holds what hc-solve priced: placed neurons + the pairs tables
placed=$(awk '/"totals":/ { t = 1 } t && /"gpu_bytes":/ { gsub(/[^0-9]/, ""); print $0 + 2048; exit }' "$T/r.json")
want=$(awk -v b="$placed" 'BEGIN { printf "%.1f KiB", b / 1024 }')
if grep -q "neurons on the device ($want)" "$T/run_gpu_index.err"; then ok run_device_bytes_as_priced
else fail run_device_bytes_as_priced "want $want: $(grep hybrid: "$T/run_gpu_index.err")"; fi

out=$T/pipe
if sh scripts/pipeline.sh -o "$out" --quant GPTQ --corpus "$C" --vram-budget 500K --solve-opts "--min-layer-neurons 0" \
       --quant-opts "--calib-tokens 512 --ctx 64" -n 8 -t 2 >"$T/pipe.out" 2>"$T/pipe.err" &&
   [ -s "$out/model.gpuidx" ] && [ -s "$out/run-dense.txt" ] && grep -q 'hybrid text = dense text' "$T/pipe.out"; then
    ok pipeline_quant_gptq
else fail pipeline_quant_gptq "$(tail -3 "$T/pipe.err")"; fi
finish

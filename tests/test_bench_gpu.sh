#!/bin/sh
# scripts/bench-gpu.sh in its smoke mode on the OpenCL device that is here
# (PoCL's CPU device in CI): every row of the table comes out with positive
# speeds, the device runs hold bytes there, a budget too small for the dense
# part is reported (hc-solve's message) and skipped, a budget of the dense part
# and half the FFN's bytes holds less than everything and has its decode ratio
# to the dense CPU's printed (issue 34's goal), full offload (-ngl 99)
# and the largest budget put every FFN neuron on the device, and each type
# ends with the full-offload / scalar-CPU decode ratio. Whether a device text
# equals the dense CPU's is reported by the script, not checked here
# (tests/test_offload.sh and test_hybrid check the device's results).
. tests/lib.sh
if ! "$HC_BIN/hc-run" --list-devices >/dev/null 2>&1; then
    skip bench_gpu_smoke "no OpenCL device (hc-run --list-devices)"
    finish
fi
O=${HC_TESTS:+${HC_TESTS%/tests}}
cp runtime/opencl/kernels/backend.cl "$T/variant.cl"
if SMOKE=1 THREADS=2 O=${O:-build} BINARIES="$T/bin" VARIANTS="$T/variant.cl" sh scripts/bench-gpu.sh >"$T/out" 2>"$T/err"
then ok bench_gpu_smoke
else fail bench_gpu_smoke "exit $?: $(tail -c 300 "$T/err")"; fi
# the kernel table: each product, the hot rows and attention in GB/s against the copy bandwidth
for k in "mv F16" "mm Q4_0" "mt Q8_0" "hot Q4_0" "attention"; do
    if grep -Eq "^$k .* [0-9.]+ MiB +[0-9.]+ ms +[0-9.]+ GB/s +[0-9.]+%$" "$T/out"; then ok "bench_gpu_kernel_${k% *}"
    else fail "bench_gpu_kernel_${k% *}" "$(head -n 30 "$T/out")"; fi
done
# a variant of kernels/backend.cl timed in its place: its table's rows follow
if awk '/^the kernel table again with .*variant.cl in place of/ { v = 1; next }
        v && /^mm Q4_0 .* [0-9.]+ GB\/s +[0-9.]+%$/ { f = 1 } END { exit !f }' "$T/out"
then ok bench_gpu_variant; else fail bench_gpu_variant "$(grep -A 3 'table again' "$T/out")"; fi
# what the driver made of each kernel (one line each, both programs), and the programs' binaries kept
if awk '$1 == "backend" && $2 == "mm64_q4" && $3 ~ /^[0-9]+$/ && $4 > 0 && $5 > 0 { m = 1 }
        $1 == "hot_rows" && $2 == "down1_q4_0" && $5 > 0 { h = 1 } END { exit !(m && h) }' "$T/out" &&
   [ -s "$T/bin/backend.bin" ] && [ -s "$T/bin/hot_rows.bin" ]
then ok bench_gpu_kernels_built; else fail bench_gpu_kernels_built "$(grep -E '^(backend|hot_rows) ' "$T/out" | head)"; fi
# columns: type run prompt decode devMiB dev% served decGB/s %copy
for t in f16 q4_0; do
    for r in dense-CPU dense-CPU-scalar sparse-CPU hybrid-ffn0.5 hybrid-0.75x hybrid-1.5x full-offload full-offload-inv \
             full-offload-kv16 default; do
        if awk -v t="$t" -v r="$r" '$1 == t && $2 == r && $3 + 0 > 0 && $4 + 0 > 0 { f = 1 } END { exit !f }' "$T/out"
        then ok "bench_gpu_row_${t}_$r"; else fail "bench_gpu_row_${t}_$r" "$(cat "$T/out")"; fi
    done
    # the device runs say what they put there: bytes, and a share of the activations
    if awk -v t="$t" '$1 == t && $2 ~ /^(hybrid-ffn0.5|hybrid-0.75x|hybrid-1.5x|full-offload)$/ && $5 + 0 > 0 && $7 != "-" { n++ }
                      END { exit n != 4 }' "$T/out"
    then ok "bench_gpu_device_bytes_$t"; else fail "bench_gpu_device_bytes_$t" "$(cat "$T/out")"; fi
    # unasked, nothing goes on a CPU device
    if awk -v t="$t" '$1 == t && $2 == "default" && $5 + 0 == 0 { f = 1 } END { exit !f }' "$T/out"
    then ok "bench_gpu_default_not_on_cpu_device_$t"; else fail "bench_gpu_default_not_on_cpu_device_$t" "$(cat "$T/out")"; fi
    if awk -v t="$t" '$1 == t && ($2 == "hybrid-1.5x" || $2 == "full-offload") && $7 == "all" && $8 + 0 > 0 { n++ }
                      END { exit n != 2 }' "$T/out" && ! grep -q "($t full-offload:" "$T/out"
    then ok "bench_gpu_every_neuron_$t"; else fail "bench_gpu_every_neuron_$t" "$(cat "$T/out")"; fi
    if grep -q "^$t *full-offload decode / dense-CPU-scalar decode: [0-9][0-9]* %" "$T/out"; then ok "bench_gpu_ratio_$t"
    else fail "bench_gpu_ratio_$t" "$(cat "$T/out")"; fi
    # the dense part and half the FFN's bytes: the budget issue 34's goal names, and its ratio
    if awk -v t="$t" '$1 == t && $2 == "hybrid-ffn0.5" && $3 + 0 > 0 { d = $5 } $1 == t && $2 == "hybrid-1.5x" { a = $5 }
                      END { exit !(d > 0 && d < a) }' "$T/out" &&
       grep -Eq "^$t +hybrid-ffn0.5 decode / dense-CPU decode: [0-9.]+x \(issue 34 goal" "$T/out"
    then ok "bench_gpu_ffn_half_$t"; else fail "bench_gpu_ffn_half_$t" "$(cat "$T/out")"; fi
    if grep -Eq "^$t +long prompt \([0-9]+ tokens\): dense-CPU [0-9.]+ t/s, full-offload [0-9.]+ t/s: [0-9.]+x .*--batch-invariant [0-9.]+ t/s" "$T/out"
    then ok "bench_gpu_long_prompt_$t"; else fail "bench_gpu_long_prompt_$t" "$(cat "$T/out")"; fi
    if grep -Eq "^$t +device kernels: [0-9.]+ ms between them" "$T/out" && grep -q "^$t *device transfers: " "$T/out" &&
       grep -Eq "^$t +opencl: the quantized products' integer dots: (bytes widened|dp4a)" "$T/out"
    then ok "bench_gpu_profile_$t"; else fail "bench_gpu_profile_$t" "$(cat "$T/out")"; fi
done
if grep -q "^q4_0 *hybrid-0.5x *skipped: --vram-budget .* is too small: the dense part needs" "$T/out"
then ok bench_gpu_small_budget_said; else fail bench_gpu_small_budget_said "$(cat "$T/out")"; fi

# beside PowerInfer: a stand-in for its main that prints its timing lines; the row says hc / PowerInfer
cat >"$T/pi" <<'PI'
#!/bin/sh
echo "llama_print_timings: prompt eval time =     100.00 ms /    40 tokens (    2.50 ms per token,   400.00 tokens per second)" >&2
echo "llama_print_timings:        eval time =     500.00 ms /     7 runs   (   71.43 ms per token,    14.00 tokens per second)" >&2
PI
chmod +x "$T/pi"
if SMOKE=1 THREADS=2 KERNELS=0 TYPES=q4_0 O=${O:-build} POWERINFER="$T/pi" PI_MODEL="$HC_FIXTURES/stories260K.gguf" \
       PI_BUDGETS=0.001 sh scripts/bench-gpu.sh >"$T/pi.out" 2>"$T/pi.err" &&
   grep -Eq "^0.001G +hc vs PowerInfer +400.0 +14.0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$T/pi.out"
then ok bench_gpu_beside_powerinfer
elif [ ! -f "$HC_FIXTURES/stories260K.gguf" ]; then skip bench_gpu_beside_powerinfer "no $HC_FIXTURES/stories260K.gguf"
else fail bench_gpu_beside_powerinfer "$(tail -n 5 "$T/pi.out" "$T/pi.err")"; fi
# without PI_MODEL: the F16 model made into PowerInfer's (predictors), its index solved by hc-solve
# beside it for each budget (the stand-in fails without MODEL.generated.gpuidx)
cat >"$T/pi2" <<'PI'
#!/bin/sh
[ "$1" = -m ] && [ -f "$2.generated.gpuidx" ] || { echo "no $2.generated.gpuidx" >&2; exit 1; }
echo "llama_print_timings: prompt eval time =     100.00 ms /    40 tokens (    2.50 ms per token,   400.00 tokens per second)" >&2
echo "llama_print_timings:        eval time =     500.00 ms /     7 runs   (   71.43 ms per token,    14.00 tokens per second)" >&2
PI
chmod +x "$T/pi2"
# (and SCALAR=0, LONG_BYTES=0: no scalar CPU's row, no long prompt)
if SMOKE=1 THREADS=2 KERNELS=0 TYPES=f16 BUDGETS=1.5 SCALAR=0 LONG_BYTES=0 PI_EPOCHS=2 O=${O:-build} \
       POWERINFER="$T/pi2" sh scripts/bench-gpu.sh >"$T/pi2.out" 2>"$T/pi2.err" &&
   [ "$(grep -Ec "^[0-9.]+G +hc vs PowerInfer +400.0 +14.0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$T/pi2.out")" = 2 ]
then ok bench_gpu_powerinfer_model_made
else fail bench_gpu_powerinfer_model_made "$(tail -n 5 "$T/pi2.out" "$T/pi2.err")"; fi
if grep -q 'dense-CPU ' "$T/pi2.out" && ! grep -q 'dense-CPU-scalar\|long prompt' "$T/pi2.out"
then ok bench_gpu_knobs_leave_out; else fail bench_gpu_knobs_leave_out "$(cat "$T/pi2.out")"; fi
finish

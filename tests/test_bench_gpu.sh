#!/bin/sh
# scripts/bench-gpu.sh in its smoke mode on the OpenCL device that is here
# (PoCL's CPU device in CI): the whole table comes out, a budget too small for
# the dense part is reported and skipped, the largest budget puts (nearly) every FFN
# neuron on the device, and every hybrid text equals the sparse CPU's.
. tests/lib.sh
if ! "$HC_BIN/hc-run" --list-devices >/dev/null 2>&1; then
    skip bench_gpu_smoke "no OpenCL device (hc-run --list-devices)"
    finish
fi
O=${HC_TESTS:+${HC_TESTS%/tests}}
if SMOKE=1 THREADS=2 O=${O:-build} sh scripts/bench-gpu.sh >"$T/out" 2>"$T/err"; then ok bench_gpu_smoke
else fail bench_gpu_smoke "exit $?: $(tail -c 300 "$T/err")"; fi
for row in "f16 dense-CPU" "f16 sparse-CPU" "q4_0 dense-CPU" "q4_0 hybrid-1.5x"; do
    set -- $row
    if awk -v t="$1" -v r="$2" '$1 == t && $2 == r && $3 + 0 > 0 && $4 + 0 > 0 { f = 1 } END { exit !f }' "$T/out"
    then ok "bench_gpu_row_$1_$2"; else fail "bench_gpu_row_$1_$2" "$(cat "$T/out")"; fi
done
if grep -q "^q4_0 *hybrid-0.5x *skipped: --vram-budget .* is too small" "$T/out"; then ok bench_gpu_small_budget_said
else fail bench_gpu_small_budget_said "$(cat "$T/out")"; fi
if awk '$2 == "hybrid-1.5x" && $6 + 0 >= 90 { n++ } END { exit n != 2 }' "$T/out"; then ok bench_gpu_full_budget_serves_all
else fail bench_gpu_full_budget_serves_all "$(cat "$T/out")"; fi
if grep -q "text differs" "$T/out"; then fail bench_gpu_hybrid_text "$(grep "text differs" "$T/out")"
else ok bench_gpu_hybrid_text; fi
finish

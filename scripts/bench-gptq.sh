#!/bin/sh
# GPTQ: time to quantize one LLaMA-7B-shaped layer on this machine, both
# shapes (ffn_gate/up: 11008 outputs x 4096 inputs; ffn_down: 4096 x 11008),
# with random weights and random calibration inputs (timing only).
# Usage: scripts/bench-gptq.sh [threads (default: online CPUs)] [tokens (default 2048)]
# Environment: O (build folder, default build/bench-gptq), CC.
set -e
cd "$(dirname "$0")/.."
O=${O:-build/bench-gptq}
CC=${CC:-cc}
T=${1:-$(nproc)}
TOK=${2:-2048}

make --no-print-directory -s O="$O" BIN="$O/bin" -j2 "$O/lib/libhc_quantizer.a" "$O/lib/libhc_runtime.a" "$O/lib/libhc_common.a"
"$CC" -O2 -std=c11 -D_GNU_SOURCE -pthread -Icommon -Iruntime -Iquantizer $(pkg-config --cflags openblas) \
    scripts/bench_gptq.c "$O/lib/libhc_quantizer.a" "$O/lib/libhc_runtime.a" "$O/lib/libhc_common.a" \
    $(pkg-config --libs openblas 2>/dev/null || echo -lopenblas) -lcjson -lm -o "$O/bench_gptq"
echo "== GPTQ, one LLaMA-7B layer"
"$O/bench_gptq" 11008 4096 "$TOK" "$T"
"$O/bench_gptq" 4096 11008 "$TOK" "$T"

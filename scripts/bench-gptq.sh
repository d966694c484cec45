#!/bin/sh
# GPTQ: time to quantize one LLaMA-7B-shaped layer on this machine, both
# shapes (ffn_gate/up: 11008 outputs x 4096 inputs; ffn_down: 4096 x 11008),
# with random weights and random calibration inputs (timing only).
# Usage: scripts/bench-gptq.sh [threads (default: online CPUs)] [tokens (default 2048)]
# Environment: O (make's build folder, default build), CC.
set -e
cd "$(dirname "$0")/.."
O=${O:-build}
T=${1:-$(nproc)}
TOK=${2:-2048}

make --no-print-directory -s O="$O" ${CC:+CC="$CC"} -j2 "$O/bench/bench_gptq"
echo "== GPTQ, one LLaMA-7B layer"
"$O/bench/bench_gptq" 11008 4096 "$TOK" "$T"
"$O/bench/bench_gptq" 4096 11008 "$TOK" "$T"

#!/bin/sh
# hc-solve speed on LLaMA-7B-shaped (32 x 11008) and 70B-shaped (80 x 28672)
# instances with synthetic power-law statistics and mixed quantization
# (scripts/solve-bench-gen.c). Prints, per budget, the GLPK status, the gap
# reached, the solve time and the coverage against the greedy baseline.
# Targets: under 10 s (7B) and 60 s (70B) with a gap <= 0.1%.
#
#   sh scripts/bench-solve.sh            (HC_BIN=bin; O: make's build folder, default build)
set -eu
HC_BIN=${HC_BIN:-bin}
O=${O:-build}
T=$(mktemp -d "${TMPDIR:-/tmp}/hcbench.XXXXXX")
trap 'rm -rf "$T"' EXIT

make --no-print-directory -s O="$O" "$O/bench/solve-bench-gen"
SOLVE_GEN=$O/bench/solve-bench-gen

# A number from hc-solve's JSON (cJSON prints one "key": value per line).
field() { grep -m1 "\"$1\":" "$2" | sed 's/.*:[[:space:]]*//; s/,$//; s/"//g'; }

# The narrow n_embd makes a neuron too cheap for the default cost model to
# offload; a fixed per-layer minimum of 512 neurons keeps the constraint binding.
MIN=512

bench() {  # NAME N_LAYER N_FF LIMIT_S [hc-solve options]
    name=$1; nl=$2; nff=$3; limit=$4; shift 4
    "$SOLVE_GEN" "$T/$name.gguf" "$T/$name.stats" "$nl" "$nff"
    # The whole FFN fits in 1 TiB: learn the dense part and the FFN bytes.
    "$HC_BIN/hc-solve" -m "$T/$name.gguf" -s "$T/$name.stats" --vram-budget 1T --greedy --json \
        --min-layer-neurons 0 -o "$T/all.gpuidx" >"$T/all.json"
    dense=$(field dense_total "$T/all.json")
    ffn=$(field gpu_bytes "$T/all.json")
    echo "$name: $nl layers x $nff neurons, dense $dense B, FFN $ffn B, min $MIN neurons per layer $*"
    printf '  %-7s %-10s %10s %9s %9s %10s %10s  %s\n' share status gap glpk_s wall_s coverage greedy target
    for pct in 10 25 40 55 70 85; do
        budget=$((dense + ffn * pct / 100))
        t0=$(date +%s.%N)
        "$HC_BIN/hc-solve" -m "$T/$name.gguf" -s "$T/$name.stats" --vram-budget "$budget" --json \
            --min-layer-neurons $MIN --time-limit "$limit" -o "$T/$name.gpuidx" "$@" >"$T/r.json"
        t1=$(date +%s.%N)
        awk -v pct="$pct" -v st="$(field status "$T/r.json")" -v gap="$(field gap "$T/r.json")" \
            -v s="$(field seconds "$T/r.json")" -v t0="$t0" -v t1="$t1" -v lim="$limit" \
            -v cov="$(field coverage "$T/r.json")" -v gcov="$(field greedy_coverage "$T/r.json")" 'BEGIN {
            ok = (t1 - t0 < lim && gap <= 0.001) ? "ok" : "MISSED";
            printf "  %5d%%  %-10s %9.5f%% %9.2f %9.2f %9.4f%% %9.4f%%  %s\n",
                   pct, st, 100 * gap, s, t1 - t0, 100 * cov, 100 * gcov, ok }'
    done
    rm -f "$T/$name.gguf" "$T/$name.stats"
}

bench 7B 32 11008 10
bench 7B 32 11008 10 --gap 0
bench 70B 80 28672 60

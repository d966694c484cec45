#!/bin/sh
# Matvec kernel speed against the machine's memory bandwidth.
# Builds scripts/bench_membw.c and scripts/bench_kernels.c with make (the
# project's flags, into $O/bench), then prints read bandwidth by threads and,
# per weight type on a 4096 x 11008 matrix, B=1 GB/s of weights (and its share
# of the bandwidth) and B=16/64 GFLOP/s.
# Usage: scripts/bench-kernels.sh [threads (default: online CPUs)] [isa: avx512|avx2|scalar]
# Environment: O (make's build folder, default build), CC.
set -e
cd "$(dirname "$0")/.."
O=${O:-build}
T=${1:-$(nproc)}
ISA=${2:-}

make --no-print-directory -s O="$O" ${CC:+CC="$CC"} -j2 "$O/bench/bench_membw" "$O/bench/bench_kernels"
O=$O/bench

echo "== memory read bandwidth (GB/s by threads)"
"$O/bench_membw" 512 "$T" | tee "$O/membw.txt"
echo "== matvec"
"$O/bench_kernels" "$T" $ISA | tee "$O/kernels.txt"

# B=1 GB/s as a share of the read bandwidth measured with the same thread count.
echo "== B=1 share of memory bandwidth (same threads)"
awk 'NR == FNR { if ($1 != "best") bw[$1] = $2; next }
     $1 ~ /^(F32|F16|BF16|Q8_0|Q4_0)$/ {
         line = sprintf("%-5s", $1)
         for (t = 1; $(2 + t) != "|"; t++) line = line sprintf("  %dT %3.0f%%", t, 100 * $(2 + t) / bw[t])
         print line
     }' "$O/membw.txt" "$O/kernels.txt"

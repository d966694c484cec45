#!/bin/sh
# Matvec kernel speed against the machine's memory bandwidth.
# Builds the kernel objects (runtime/kernels*.c and weight.c), libhc_common, scripts/bench_membw.c and scripts/bench_kernels.c,
# then prints read bandwidth by threads and, per weight type on a 4096 x 11008
# matrix, B=1 GB/s of weights (and its share of the bandwidth) and B=16/64 GFLOP/s.
# Usage: scripts/bench-kernels.sh [threads (default: online CPUs)] [isa: avx512|avx2|scalar]
# Environment: O (build folder, default build/bench-kernels), CC.
set -e
cd "$(dirname "$0")/.."
O=${O:-build/bench-kernels}
CC=${CC:-cc}
T=${1:-$(nproc)}
ISA=${2:-}

# only the kernels from runtime/, so work in progress elsewhere there cannot break it
KOBJ=$(for f in runtime/kernels*.c runtime/weight.c; do echo "$O/obj/${f%.c}.o"; done)
make --no-print-directory -s O="$O" BIN="$O/bin" -j2 $KOBJ "$O/lib/libhc_common.a"
"$CC" -O2 -pthread scripts/bench_membw.c -o "$O/bench_membw"
"$CC" -O2 -std=c11 -D_GNU_SOURCE -pthread -Icommon -Iruntime scripts/bench_kernels.c \
    $KOBJ "$O/lib/libhc_common.a" -lcjson -lm -o "$O/bench_kernels"

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

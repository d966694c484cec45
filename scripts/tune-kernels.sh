#!/bin/sh
# The table row of this CPU model for runtime/cpu/kernel_table.c: for each
# weight type, the instruction set its kernels should take here.
#
#   sh scripts/tune-kernels.sh
#
# Times every instruction set this CPU runs (avx2, avx512; AVX-512 Q4_0 the
# three ways it runs: from the file mapping with word or with dword
# permutes, and from hc-run's copy in chunks of 16 blocks; AVX-512 Q8_0 and
# AVX2 Q4_0 from the mapping and from the chunks) with
# build/bench/bench_kernels on one thread, in thread CPU time, ROUNDS rounds
# with the sets alternating (the median of the rounds): decode (B = 1, DIM x 2048) and a
# prompt tile (B = 64, DIM x 1024). A type takes the set whose worse ratio to
# the fastest set (decode or prompt) is highest, ties to the wider set: every
# product, gathered row and AXPY of a type runs on one set (their rows' bits
# must agree), so one set serves both; Q4_0's and Q8_0's AVX-512, and Q4_0's
# AVX2, count their best way (the copy's chunks, where hc-run copies, or the mapping's layout),
# and the row's word-permute field is the faster permute, for rows left in the
# mapping (--mmap, the sparse FFN's). Where the CPU has AVX512_BF16, AVX-512
# BF16 is timed with vdpbf16ps and with its FMAs (avx512-nobf16), and the row's
# last field is 0 (the FMAs) when their worse ratio is the higher. Where
# AVX-512 runs, decode from memory
# (bench_kernels pool, one thread, DIM x 11008, F16, BF16, Q8_0 and Q4_0 in
# chunks, INT4-GPTQ) is timed reading rows one at a time and as streams,
# ROUNDS rounds alternating: the row's streams field is 1 when their
# product/read ratios, multiplied over the five types, beat one at a time. Prints the CPU,
# each figure and the row to paste (docs/design/kernels.md, "Choosing the kernels").
#
# Environment (defaults): DIM=4096 ROUNDS=5 REPS=20 (products per timing, best of).
set -eu
DIM=${DIM:-4096}
ROUNDS=${ROUNDS:-5}
REPS=${REPS:-20}
make -s build/bench/bench_kernels >/dev/null
B=build/bench/bench_kernels
T=$(mktemp -d "${TMPDIR:-/tmp}/hctune.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM

name=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
vendor=$(sed -n 's/^vendor_id[[:space:]]*: //p' /proc/cpuinfo | head -1)
family=$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1)
model=$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "cpu: $name ($vendor family $family model $model)"

# AVX-512 Q4_0 three ways (word or dword permutes: the row's word-permute field; chunks), AVX-512 Q8_0 and AVX2
# Q4_0 two, AVX-512 BF16 two (vdpbf16ps or its FMAs, where the CPU has it)
isas=""
for isa in avx2 avx2-chunks avx512-vpermt2d avx512-vpermt2w avx512-chunks; do
    "$B" cpu "$isa" 32 1 1 1 >/dev/null 2>&1 && isas="$isas $isa"
done
case $isas in *avx512*) grep -qw avx512_bf16 /proc/cpuinfo && isas="$isas avx512-nobf16" ;; esac
[ -n "$isas" ] || { echo "tune-kernels: this CPU runs neither avx2 nor avx512 kernels" >&2; exit 1; }

# rounds: each set's decode and prompt figures, sets alternating
r=0
while [ "$r" -lt "$ROUNDS" ]; do
    for isa in $isas; do
        set=${isa%-vpermt2d}
        types="F32 F16 BF16 Q8_0 Q4_0 GPTQ"
        [ "$isa" = avx512-nobf16 ] && types=BF16   # the only type it changes
        TYPES=$types "$B" cpu "$isa" "$DIM" 2048 1 "$REPS" | awk -v i="$set" 'NR > 1 { print i, "decode", $1, $2 }' >>"$T/all"
        TYPES=$types "$B" cpu "$isa" "$DIM" 1024 64 3 | awk -v i="$set" 'NR > 1 { print i, "prompt", $1, $2 }' >>"$T/all"
    done
    r=$((r + 1))
done

# AVX-512 decode from memory, a row at a time against streams
: >"$T/decode"
r=0
case $isas in *avx512*)
    while [ "$r" -lt "$ROUNDS" ]; do
        for v in rows streams; do
            TYPES="F16 BF16 Q8_0 Q4_0 GPTQ" "$B" pool "avx512-chunks-$v" "$DIM" 11008 1 10 |
                awk -v v="$v" '$2 == "product" { print v, $1, $9 }' >>"$T/decode"
        done
        r=$((r + 1))
    done ;;
esac

# best GFLOP/s per (set, op, type); per type the set with the highest worse ratio
awk -v fam="$family" -v model="$model" -v vendor="$vendor" '
FILENAME ~ /decode$/ { nd[$1, $2]++; dv[$1, $2, nd[$1, $2]] = $3; next }
$1 == "avx512-chunks" ? ($3 == "Q4_0" || $3 == "Q8_0") : $1 == "avx2-chunks" || $1 == "avx512-vpermt2w" ? $3 == "Q4_0" : $1 == "avx512-nobf16" ? $3 == "BF16" : 1 {
    k = $1 SUBSEP $2 SUBSEP $3; nv[k]++; v[k, nv[k]] = $4; has[$1, $3] = 1; sets[$1] = 1 }
END {
    # each figure: the median of the rounds (the best of REPS of a round now and
    # then reads far above the rest)
    for (k in nv) {
        for (a = 1; a <= nv[k]; a++) for (b = a + 1; b <= nv[k]; b++)
            if (v[k, b] < v[k, a]) { x = v[k, a]; v[k, a] = v[k, b]; v[k, b] = x }
        best[k] = v[k, int((nv[k] + 1) / 2)]
    }
    split("F32 F16 BF16 Q8_0 Q4_0 GPTQ", order, " ")
    split("avx2 avx2-chunks avx512 avx512-vpermt2w avx512-chunks avx512-nobf16", cand, " ")
    row = ""; wperm = 0; bf16dp = 1
    for (n = 1; n <= 6; n++) {
        t = order[n]; top["decode"] = 0; top["prompt"] = 0
        for (s in sets) for (op in top) if (has[s, t] && best[s, op, t] > top[op]) top[op] = best[s, op, t]
        pick = ""; score = -1
        for (c = 1; c <= 6; c++) {
            i = cand[c]
            if (!has[i, t]) continue
            d = best[i, "decode", t] / top["decode"]; p = best[i, "prompt", t] / top["prompt"]
            m = d < p ? d : p; mof[i] = m
            printf "%-5s %-15s decode %8.1f GFLOP/s (%.2f)  prompt %8.1f GFLOP/s (%.2f)\n", t, i,
                   best[i, "decode", t], d, best[i, "prompt", t], p
            if (m >= score) { score = m; pick = i }
        }
        if (t == "Q4_0" && has["avx512-vpermt2w", t] && mof["avx512-vpermt2w"] >= mof["avx512"]) wperm = 1
        if (t == "BF16" && has["avx512-nobf16", t] && mof["avx512-nobf16"] > mof["avx512"]) bf16dp = 0
        row = row (n > 1 ? ", " : "") (pick ~ /^avx2/ ? "A2" : "A5")
    }
    # the median product/read ratio per (way, type); streams when their product wins
    split("F16 BF16 Q8_0 Q4_0 GPTQ", dtypes, " "); prod = 1; timed = 0
    for (d = 1; d <= 5; d++) {
        t = dtypes[d]
        for (k = 1; k <= 2; k++) {
            way = k == 1 ? "rows" : "streams"; n = nd[way, t]
            for (a = 1; a <= n; a++) for (b = a + 1; b <= n; b++)
                if (dv[way, t, b] < dv[way, t, a]) { x = dv[way, t, a]; dv[way, t, a] = dv[way, t, b]; dv[way, t, b] = x }
            med[way] = n ? dv[way, t, int((n + 1) / 2)] : 0
        }
        if (!med["rows"] || !med["streams"]) continue
        printf "%-5s AVX-512 decode from memory: a row at a time %.2f of a read, as streams %.2f\n", t, med["rows"], med["streams"]
        prod *= med["streams"] / med["rows"]; timed++
    }
    streams = timed && prod > 1
    printf "row: { \"NAME\", \"%s\", %d, %d, %d, { { %s }, %d, %d, %d } },\n", vendor, fam, model, model, row, wperm,
           streams, bf16dp
}' "$T/decode" "$T/all"

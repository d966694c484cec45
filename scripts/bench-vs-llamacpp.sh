#!/bin/sh
# hotcold against llama.cpp, side by side on the same GGUF files (issue 20).
# Not part of `make test`; takes minutes to hours (see SIZE below).
#
#   HC_BIN=bin sh scripts/bench-vs-llamacpp.sh
#
# Once, under $PEER (default build/peer, ignored by git; no third-party code is
# committed): `pip download` of PyPI's llama-cpp-python sdist (VERSION, default
# 0.3.36 = llama.cpp 0c1e570), unpacked, and its vendored llama.cpp built for the
# CPU (Release, GGML_NATIVE=ON) with only llama-bench, llama-quantize, and
# llama-simple and llama-tokenize (for scripts/families-vs-llamacpp.sh), at
# `nice` (10). Needs: pip, cmake, a C++ compiler (Debian: `apt-get install
# cmake g++`), network access to PyPI the first time. A later run reuses the build.
#
# Models (kept in $MODELS, default $PEER/models): `hc-convert synth` writes a random LLaMA-shaped
# F16 model (DIM × NFF, LAYERS layers, vocab 512), and `hc-quantize --pure` makes
# the other TYPES from it. Both programs then run the same file with the same
# thread count, interleaved (hc, llama.cpp, hc, ...), REPS rounds; the table
# shows medians. TYPES may name GPTQ (not in the default list: making it takes
# minutes): `hc-quantize GPTQ` (native INT4, g128 asym, 4.5 bits per weight)
# calibrated on CALIB_TOKENS tokens (default 256, in windows of 64) of a
# generated text, run by hc-run against llama.cpp on the Q4_0 file (llama.cpp
# cannot read GPTQ; Q4_0 is its type of the same size), decode and ppN only:
#   decode   GEN tokens after an empty prompt (hc-run -p "" -n GEN; llama-bench -p 0 -n GEN)
#   ppN      one prompt of N tokens (hc-run --logits; llama-bench -p N -n 0)
#   dN       GEN tokens after a prompt of N tokens (decoding at depth N, where
#            attention reads N positions of keys and values a token and layer;
#            N + GEN <= 1024: hc-run -p <N tokens> -n GEN, its generation line;
#            llama-bench -d N -p 0 -n GEN; llama.cpp's cache in LLAMA_KV, hc's in HC_KV)
#   quant    F16 -> TYPE, seconds (hc-quantize --pure -t; llama-quantize --pure), TYPES
#            Q8_0/Q4_0 only; output written to a temporary directory and deleted
# "% bw" = weight bytes per token (hc-run -v) × decode t/s ÷ the read bandwidth
# that scripts/bench_membw.c measures with the same thread count just before and
# after that type's rows (the higher of the two). "load" = the 1-minute load
# average when the row finished: on a shared machine, read the figures with it.
# ppN rows also give each side's GFLOP/s, counting the products' FLOPs each side
# does (2 per weight element and token; attention scores, norms and the like,
# under 1 % at these sizes, not counted): llama.cpp computes the last layer's
# FFN (after the attention output product) only for the token whose logits
# are wanted, and both sides compute the classifier for that token only.
# HC_PRUNE says what hc-run does in the last layer for the tokens before the
# last: "kv" (only their k and v products: hc-run since that pruning, default),
# "ffn" (all but the FFN, as llama.cpp) or "none" (everything: older builds). "hc % peak" = hc's GFLOP/s ÷ (threads × one
# core's peak at hc's instruction set, scripts/bench_peak.c, measured once per
# run): the f32 FMA peak for the float types, the vpdpbusd (int8)
# peak for Q8_0/Q4_0/GPTQ where the kernels use it (AVX-512 VNNI; on AVX2 the FMA
# peak, so a quantized kernel can pass 100 %), the vdpbf16ps peak for BF16 where
# hc's kernels use it (AVX-512 BF16 and a row that takes it; hc-run -v says "BF16 by
# FMAs" otherwise, and the FMA peak counts). It is wall-clock, so a shared
# machine lowers it; "hc kernel % peak" is the kernel alone in thread CPU time
# (bench_kernels cpu ISA DIM 2048 N: the type's product with N vectors), which
# load hardly moves. The peaks are printed below the table.
#
# Environment (defaults): TYPES="F32 F16 BF16 Q8_0 Q4_0" THREADS="1 2" TESTS="decode
# pp128 pp512 quant" REPS=3 GEN=32 DIM=4096 NFF=11008 LAYERS=8 VERSION=0.3.36
# MODELS=$PEER/models HC_PRUNE=kv LLAMA_KV=f16 (llama.cpp's default KV cache type)
# HC_KV=f32 (hc-run's default; f16: -ctk f16 -ctv f16, llama.cpp's). HC_KERNELS=avx2 (or avx512, scalar) makes hc-run and
# hc-quantize use that instruction set's kernels (docs/hc-run.md, ENVIRONMENT).
# LLAMA_ISA=avx2 builds and runs llama.cpp without AVX-512 (AVX2, FMA, F16C;
# under $PEER/llama-build-avx2): with HC_KERNELS=avx2, the AVX2-only comparison on
# an AVX-512 machine. LLAMA_ISA=avx512: AVX-512 with VBMI, VNNI and BF16 but
# without AMX (under $PEER/llama-build-avx512), for a CPU that reports AMX where
# it cannot run it (a VM: the native build's AMX kernels died there with SIGILL
# on Q8_0/Q4_0 prompts). Default: native (GGML_NATIVE, under $PEER/llama-build).
set -eu
HC_BIN=${HC_BIN:-$(pwd)/bin}
PEER=${PEER:-$(pwd)/build/peer}
VERSION=${VERSION:-0.3.36}
TYPES=${TYPES:-F32 F16 BF16 Q8_0 Q4_0}
THREADS=${THREADS:-1 2}
TESTS=${TESTS:-decode pp128 pp512 quant}
REPS=${REPS:-3}
GEN=${GEN:-32}
DIM=${DIM:-4096}
NFF=${NFF:-11008}
LAYERS=${LAYERS:-8}
HC_PRUNE=${HC_PRUNE:-kv}
LLAMA_KV=${LLAMA_KV:-f16}
HC_KV=${HC_KV:-f32}
case $HC_PRUNE in kv|ffn|none) ;; *) echo "bench-vs-llamacpp: HC_PRUNE is kv, ffn or none, not '$HC_PRUNE'" >&2; exit 1 ;; esac
VOCAB=512
CALIB_TOKENS=${CALIB_TOKENS:-256}

MODELS=${MODELS:-$PEER/models}
mkdir -p "$PEER" "$MODELS"
PEER=$(cd "$PEER" && pwd)
MODELS=$(cd "$MODELS" && pwd)
case ${LLAMA_ISA:=native} in
native) LBUILD=$PEER/llama-build; ISA_FLAGS=-DGGML_NATIVE=ON ;;
avx2) LBUILD=$PEER/llama-build-avx2
      ISA_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF" ;;
avx512) LBUILD=$PEER/llama-build-avx512
      ISA_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON
                 -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON" ;;
*) echo "bench-vs-llamacpp: LLAMA_ISA is native, avx2 or avx512, not '$LLAMA_ISA'" >&2; exit 1 ;;
esac
LB=$LBUILD/bin
T=$(mktemp -d "${TMPDIR:-/tmp}/hcvs.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM

need() { command -v "$1" >/dev/null 2>&1 || { echo "bench-vs-llamacpp: needs $1 ($2)" >&2; exit 1; }; }

# build_peer: download and build llama.cpp once
build_peer() {
    [ -x "$LB/llama-bench" ] && [ -x "$LB/llama-quantize" ] && [ -x "$LB/llama-simple" ] &&
        [ -x "$LB/llama-tokenize" ] && return 0
    need pip "python3-pip, or any pip"
    need cmake "Debian: apt-get install cmake"
    need c++ "Debian: apt-get install g++"
    sdist=$PEER/llama_cpp_python-$VERSION.tar.gz
    [ -f "$sdist" ] || pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$PEER"
    src=$PEER/src/llama_cpp_python-$VERSION/vendor/llama.cpp
    [ -d "$src" ] || { rm -rf "$PEER/src" && mkdir "$PEER/src" && tar xzf "$sdist" -C "$PEER/src"; }
    # llama-simple is one of llama.cpp's examples
    # shellcheck disable=SC2086   # ISA_FLAGS: several words
    nice cmake -S "$src" -B "$LBUILD" -DCMAKE_BUILD_TYPE=Release $ISA_FLAGS \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=ON >"$LBUILD.cmake.log"
    nice cmake --build "$LBUILD" -j2 --target llama-bench llama-quantize llama-simple llama-tokenize \
        >"$LBUILD.build.log"
}

# model TYPE: path of the synthetic model in TYPE, made once
model() {
    base=$MODELS/synth-$DIM-$NFF-$LAYERS
    [ -f "$base-F16.gguf" ] || "$HC_BIN/hc-convert" synth -o "$base-F16.gguf" --dim "$DIM" --n-ff "$NFF" \
        --layers "$LAYERS" --heads 32 --kv-heads 32 --vocab "$VOCAB" --ctx 1024 --act silu --type f16 \
        --seed 1 >/dev/null
    [ -f "$base-$1.gguf" ] || case $1 in
    GPTQ) sh "$(dirname "$0")/plain-words.sh" 4000 >"$T/calib.txt"
          "$HC_BIN/hc-quantize" -q "$base-F16.gguf" "$base-GPTQ.gguf" GPTQ --calib "$T/calib.txt" \
              --calib-tokens "$CALIB_TOKENS" --ctx 64 ;;
    *) "$HC_BIN/hc-quantize" -q --pure "$base-F16.gguf" "$base-$1.gguf" "$1" ;;
    esac
    echo "$base-$1.gguf"
}

# membw T: best read GB/s with T threads (512 MiB)
membw() { "$MEMBW" 512 "$1" | awk -v t="$1" '$1 == t { print $2 }'; }

# prompt_text N MODEL: a prompt that hc-run tokenizes to N tokens (BOS included)
prompt_text() {
    probe=$(awk 'BEGIN { for (i = 0; i < 100; i++) printf "a " }')
    extra=$(( $("$HC_BIN/hc-run" -m "$2" --tokenize -p "$probe" 2>/dev/null | wc -w) - 100 ))
    awk -v n=$(($1 - extra)) 'BEGIN { for (i = 0; i < n; i++) printf "a " }'
}

# llama_ts ARGS...: llama-bench's t/s for one run
llama_ts() {
    "$LB/llama-bench" -r 1 -o csv "$@" 2>/dev/null |
        awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /avg_ts/) c = i; next }
                 c { v = $c; gsub(/"/, "", v); print v }'
}

# hc_ts LINE ARGS...: tok/s from hc-run's "LINE:" timing line
hc_ts() {
    line=$1; shift
    "$HC_BIN/hc-run" "$@" -v 2>"$T/hc.err" >/dev/null
    awk -v l="$line:" '$1 == l { v = $(NF - 1); sub(/^\(/, "", v); print v }' "$T/hc.err"
}

secs_of() { s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); awk -v a="$s" -v b="$e" 'BEGIN { printf "%.3f", b - a }'; }

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# row TEST TYPE THREADS: REPS interleaved rounds, medians appended to $T/raw
row() {
    test=$1 type=$2 t=$3 m=$(model "$2")
    lm=$m   # llama.cpp's file: the same, or Q4_0 for GPTQ
    [ "$type" = GPTQ ] && lm=$(model Q4_0)
    : >"$T/hc" && : >"$T/ll"
    case $test in pp*) p=$(prompt_text "${test#pp}" "$m") ;; d*) p=$(prompt_text "${test#d}" "$m") ;; esac
    i=0
    while [ "$i" -lt "$REPS" ]; do
        case $test in
        decode) hc_ts generation -m "$m" -p "" -n "$GEN" --temp 0 -t "$t" >>"$T/hc"
                llama_ts -m "$lm" -p 0 -n "$GEN" -t "$t" >>"$T/ll" ;;
        pp*)    hc_ts prompt -m "$m" -p "$p" --logits -t "$t" >>"$T/hc"
                llama_ts -m "$lm" -p "${test#pp}" -n 0 -t "$t" >>"$T/ll" ;;
        d*)     hc_ts generation -m "$m" -p "$p" -n "$GEN" --temp 0 -t "$t" -ctk "$HC_KV" -ctv "$HC_KV" >>"$T/hc"
                llama_ts -m "$lm" -d "${test#d}" -p 0 -n "$GEN" -t "$t" -ctk "$LLAMA_KV" -ctv "$LLAMA_KV" >>"$T/ll" ;;
        quant)  secs_of "$HC_BIN/hc-quantize" -q --pure -t "$t" "$(model F16)" "$T/q.gguf" "$type" >>"$T/hc"
                echo >>"$T/hc"; rm -f "$T/q.gguf"
                secs_of "$LB/llama-quantize" --pure "$(model F16)" "$T/q.gguf" "$type" "$t" >>"$T/ll"
                echo >>"$T/ll"; rm -f "$T/q.gguf" ;;
        esac
        i=$((i + 1))
    done
    bytes=$(awk '/weights read per token:/ { print $5 }' "$T/hc.err" 2>/dev/null || true)
    kg=-   # ppN: hc's kernel alone, thread CPU time (bench_kernels cpu: DIM x 2048, B = N)
    kisa=$isa   # on the rows as hc-run copied them: Q4_0 in chunks of 16 blocks where it says so
    grep -q "Q4_0 matrices in chunks of 16" "$T/hc.err" 2>/dev/null && kisa=$isa-chunks
    case $kernels in *"BF16 by FMAs"*) kisa=$kisa-nobf16 ;; esac   # and BF16 by FMAs where the row says so
    case $test in pp*) kg=$("$O/bench/bench_kernels" cpu "$kisa" "$DIM" 2048 "${test#pp}" 3 2>/dev/null |
                           awk -v ty="$type" '$1 == ty { print $2 }') ;; esac
    echo "$test $type $t $(median <"$T/hc") $(median <"$T/ll") ${bytes:-0} $(cut -d' ' -f1 /proc/loadavg) ${kg:--}" >>"$T/raw"
}

# table BW FPEAK QPEAK BPEAK: the rows in $T/raw as markdown, "% bw" against BW GB/s,
# "% peak" against FPEAK (float types), QPEAK (Q8_0/Q4_0/GPTQ) or BPEAK (BF16) GFLOP/s per thread
table() {
    awk -v bw="$1" -v fpeak="$2" -v qpeak="$3" -v bpeak="$4" -v d="$DIM" -v f="$NFF" -v l="$LAYERS" -v v="$VOCAB" -v prune="$HC_PRUNE" '
    # FLOPs of one prompt of n tokens; cut = the last layer products done for the last token only
    function flops(n, cut) { return 2 * (n * l * (4 * d * d + 3 * d * f) - (n - 1) * cut + v * d) }
    {
        test = $1; hc = $4; ll = $5; bytes = $6; t = $3
        peak = (($2 ~ /^Q/ || $2 == "GPTQ") && qpeak > 0) ? qpeak : ($2 == "BF16" && bpeak > 0) ? bpeak : fpeak
        if (hc == "-" || ll == "-" || hc == 0 || ll == 0) ratio = "-"
        else ratio = sprintf("%.2f", test == "quant" ? ll / hc : hc / ll)
        hb = lb = hg = lg = hp = kp = "-"
        if (test == "decode" && bw > 0) {
            if (hc != "-") hb = sprintf("%.0f%%", 100 * bytes * hc / 1e9 / bw)
            if (ll != "-") lb = sprintf("%.0f%%", 100 * bytes * ll / 1e9 / bw)
        }
        if (test ~ /^pp/) {
            n = substr(test, 3) + 0
            hcut = prune == "none" ? 0 : 3 * d * f + (prune == "kv" ? 2 * d * d : 0)   # kv: q and wo too
            if (hc != "-") { hg = sprintf("%.0f", flops(n, hcut) / n * hc / 1e9)
                             if (peak > 0) hp = sprintf("%.0f%%", 100 * hg / (peak * t)) }
            if (ll != "-") lg = sprintf("%.0f", flops(n, 3 * d * f) / n * ll / 1e9)
            if ($8 != "-" && peak > 0) kp = sprintf("%.0f%%", 100 * $8 / peak)
        }
        if (test != "quant") { if (hc != "-") hc = sprintf("%.1f", hc); if (ll != "-") ll = sprintf("%.1f", ll) }
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", test, $2, t, hc, ll, ratio, hb, lb, hg, lg, hp, kp, $7 }' "$T/raw"
}

build_peer
O=${O:-build}
make --no-print-directory -s O="$O" "$O/bench/bench_membw" "$O/bench/bench_peak" "$O/bench/bench_kernels"
MEMBW=$O/bench/bench_membw
# each type's instruction set, as hc-run -v names them (HC_KERNELS, the CPU
# model's table row or the best the CPU runs: docs/hc-run.md)
kernels=$("$HC_BIN/hc-run" -m "$(model F16)" -p "" -n 1 -t 1 -v 2>&1 >/dev/null | sed -n 's/^kernels by type: //p')
"$O/bench/bench_peak" >"$T/peak"
# peaks TYPE: one core's peaks at the instruction set of TYPE's kernels
peaks() {
    case $1 in GPTQ) k=INT4-GPTQ ;; *) k=$1 ;; esac
    isa=$(echo "$kernels" | tr ',' '\n' | awk -v k="$k" '$1 == k { print $2; exit }')   # not "BF16 by ..."
    case $isa in avx512) peak_name=fma512 ;; avx2) peak_name=fma256 ;; *) peak_name=none ;; esac
    peak=$(awk -v n="$peak_name" '$1 == n { print $2 }' "$T/peak")
    qpeak=0
    bpeak=0
    [ "$isa" = avx512 ] && qpeak=$(awk '$1 == "dpbusd" { print $2 }' "$T/peak") &&
        bpeak=$(awk '$1 == "dpbf16" { print $2 }' "$T/peak")
    case $kernels in *"BF16 by FMAs"*) bpeak=0 ;; esac   # BF16 on the FMAs: their peak
    return 0
}
start_load=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$T/table"
for type in $TYPES; do
    model "$type" >/dev/null
    peaks "$type"
    for t in $THREADS; do
        bw1=$(membw "$t")
        : >"$T/raw"
        for test in $TESTS; do
            case $test in quant) case $type in Q8_0|Q4_0) ;; *) continue ;; esac ;; esac
            row "$test" "$type" "$t"
        done
        bw2=$(membw "$t")
        bw=$(echo "$bw1 $bw2" | awk '{ print ($1 > $2) ? $1 : $2 }')   # the conservative ratio
        table "$bw" "${peak:-0}" "${qpeak:-0}" "${bpeak:-0}" >>"$T/table"
        echo "$type -t $t: read bandwidth $bw1 / $bw2 GB/s (before / after)" >>"$T/bw"
    done
done

cpuinfo() { sed -n "s/^$1[[:space:]]*: //p" /proc/cpuinfo | head -1; }
echo "hotcold $("$HC_BIN/hc-run" --version 2>&1 | head -1) vs llama.cpp from llama-cpp-python $VERSION (LLAMA_ISA=$LLAMA_ISA)"
echo "hc kernels: $kernels"
echo "model: hc-convert synth, dim $DIM, n_ff $NFF, $LAYERS layers, vocab 512; $REPS interleaved runs, medians"
echo "CPU: $(cpuinfo 'model name') ($(cpuinfo vendor_id) family $(cpuinfo 'cpu family') model $(cpuinfo model)), $(nproc) CPUs, $(grep -o -w 'avx512f\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "load average at start: $start_load; at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| test | type | threads | hc | llama.cpp | hc ÷ llama.cpp | hc % bw | llama.cpp % bw | hc GFLOP/s | llama.cpp GFLOP/s | hc % peak | hc kernel % peak | load |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
cat "$T/table"
echo
echo "(decode, ppN and dN: tokens/s; dN: llama.cpp's KV cache $LLAMA_KV, hc's $HC_KV; quant: seconds, and the ratio is llama.cpp's time ÷ hc's; GFLOP/s: last layer for the earlier tokens: hc-run HC_PRUNE=$HC_PRUNE, llama.cpp ffn; GPTQ rows: llama.cpp runs the Q4_0 file)"
echo "one core's peak, GFLOP/s (bench_peak, thread CPU time): $(tr '\n' ' ' <"$T/peak")(hc % peak against $peak_name$([ "${qpeak:-0}" != 0 ] && echo ", Q8_0/Q4_0/GPTQ against dpbusd")$([ "${bpeak:-0}" != 0 ] && echo ", BF16 against dpbf16"))"
cat "$T/bw"

#!/bin/sh
# Benchmark (not a test): hc-quantize on a >= 1 GiB F32 synthetic LLaMA
# (dim 4096, n_ff 11008, 2 layers: ~1.6 GB) to Q8_0 and Q4_0 at -t 1 and -t 2.
# Prints MB/s of input, and the ratio to this machine's raw I/O rate for the
# same job measured in the same run: reading the input (cat) plus writing as
# many bytes as the output with fsync (dd), as hc-quantize fsyncs its output.
# Runs llama-quantize too when it is on PATH.
# Big files go to $BENCH_DIR (default: a temporary folder) and are deleted.
#   HC_BIN=bin sh scripts/bench-quantize.sh
set -eu
HC_BIN=${HC_BIN:-bin}
LAYERS=${LAYERS:-2}
DIR=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/hcbench.XXXXXX")
trap 'rm -rf "$DIR"' EXIT INT TERM

now() { date +%s.%N; }
# secs START END
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", n / s / 1e6 }'; }

IN=$DIR/f32.gguf
"$HC_BIN/hc-convert" synth -o "$IN" --dim 4096 --n-ff 11008 --layers "$LAYERS" --heads 32 \
    --vocab 1000 --type f32
SIZE=$(stat -c %s "$IN")
echo "input: $IN, $SIZE bytes ($(awk -v n="$SIZE" 'BEGIN { printf "%.2f", n / 1073741824 }') GiB), $(nproc) CPUs"

cat "$IN" >/dev/null   # the same page-cache state for every run below

# raw I/O seconds for this input and an output of N bytes
raw_io() {
    t0=$(now); cat "$IN" >/dev/null; t1=$(now)
    dd if=/dev/zero of="$DIR/raw" bs=1M count=$(($1 / 1048576)) conv=fsync status=none; t2=$(now)
    rm -f "$DIR/raw"
    secs "$t0" "$t2"
}
row() {   # tool type threads seconds out_bytes raw_seconds
    printf '%-15s %-5s %3s %8s %8s %8s %8s %8s\n' "$1" "$2" "$3" "$4" "$(rate "$SIZE" "$4")" \
        "$(awk -v n="$5" 'BEGIN { printf "%.1f", n / 1048576 }')" "$(rate "$SIZE" "$6")" \
        "$(awk -v a="$6" -v b="$4" 'BEGIN { printf "%.2f", a / b }')"
}
printf '%-15s %-5s %3s %8s %8s %8s %8s %8s\n' tool type -t seconds "MB/s in" "out MiB" "raw MB/s" "vs raw"
for type in Q8_0 Q4_0; do
    for t in 1 2; do
        t0=$(now); "$HC_BIN/hc-quantize" -q -t "$t" "$IN" "$DIR/out.gguf" "$type"; t1=$(now)
        out=$(stat -c %s "$DIR/out.gguf")
        rm -f "$DIR/out.gguf"
        row hc-quantize "$type" "$t" "$(secs "$t0" "$t1")" "$out" "$(raw_io "$out")"
        if command -v llama-quantize >/dev/null 2>&1; then
            t0=$(now); llama-quantize "$IN" "$DIR/out.gguf" "$type" "$t" >/dev/null 2>&1; t1=$(now)
            out=$(stat -c %s "$DIR/out.gguf")
            rm -f "$DIR/out.gguf"
            row llama-quantize "$type" "$t" "$(secs "$t0" "$t1")" "$out" "$(raw_io "$out")"
        fi
    done
done
echo "(vs raw: raw I/O time / hc-quantize time; 1.00 = as fast as reading the input and writing the output)"

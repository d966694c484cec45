#!/bin/sh
# Each program's normal path on small inputs under valgrind memcheck: no
# invalid access, no use of uninitialised values, no definite or indirect
# leak (exit 99 = valgrind found something; its report is shown).
# About 45 s: `make test` runs it only with HC_VALGRIND=1 (`make valgrind` sets it).
. tests/lib.sh
if [ -z "${HC_VALGRIND:-}" ]; then
    skip valgrind "slow: make valgrind (or HC_VALGRIND=1)"
    finish
elif ! command -v valgrind >/dev/null 2>&1; then
    skip valgrind "valgrind not installed"
    finish
elif grep -q __asan_init "$HC_BIN/hc-gguf" 2>/dev/null; then
    skip valgrind "ASan build: valgrind needs plain programs"
    finish
fi
# OpenBLAS/OpenMP and OpenCL keep per-thread pools that valgrind calls
# "possibly lost"/"still reachable": only definite and indirect leaks count.
# tests/valgrind.supp: reports from the system's libraries that are not bugs
# (hc-run lists the OpenCL devices, which loads the ICD with dlopen).
VG="valgrind -q --error-exitcode=99 --suppressions=tests/valgrind.supp --leak-check=full \
    --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# vg NAME COMMAND...: the command must exit 0 with valgrind silent
vg() {
    name=$1; shift
    $VG "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq 0 ]; then ok "vg_$name"
    else fail "vg_$name" "exit $rc: $(grep -m3 -E '==[0-9]+== [A-Z]|definitely|indirectly|Invalid|uninitialised|hc-' "$T/err" | tr '\n' ' ' | head -c 400)"; fi
}
# vg_fails NAME COMMAND...: a refused input exits 1 with valgrind silent
vg_fails() {
    name=$1; shift
    $VG "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq 1 ]; then ok "vg_$name"
    else fail "vg_$name" "exit $rc (want 1): $(head -c 400 "$T/err")"; fi
}

M="$T/m.gguf"
vg convert_synth "$HC_BIN/hc-convert" synth -o "$M" --dim 32 --n-ff 64 --layers 2 --heads 4 --vocab 300 --ctx 64
vg gguf_check "$HC_BIN/hc-gguf" check "$M"
vg gguf_dump "$HC_BIN/hc-gguf" dump "$M"
vg gguf_dump_json "$HC_BIN/hc-gguf" dump --json "$M"
vg quantize_q8 "$HC_BIN/hc-quantize" -q "$M" "$T/q8.gguf" q8_0
vg quantize_q4 "$HC_BIN/hc-quantize" -q -t 2 "$M" "$T/q4.gguf" q4_0
vg run "$HC_BIN/hc-run" -m "$T/q8.gguf" -p "once upon a time" -n 4 --temp 0 -t 1
printf 'the cat sat on the mat. the dog ran.\n%.0s' 1 2 3 4 5 6 7 8 >"$T/corpus.txt"
vg profile "$HC_BIN/hc-profile" -m "$M" -f "$T/corpus.txt" -o "$T/s.gguf" -c 16 -t 1
vg profile_show "$HC_BIN/hc-profile" show "$T/s.gguf"
vg profile_merge "$HC_BIN/hc-profile" merge "$T/s.gguf" "$T/s.gguf" -o "$T/s2.gguf"
vg solve "$HC_BIN/hc-solve" -m "$M" -s "$T/s.gguf" --vram-budget 1M -o "$T/m.gpuidx" --time-limit 5
vg solve_greedy "$HC_BIN/hc-solve" -m "$M" -s "$T/s.gguf" --vram-budget 1M -o "$T/g.gpuidx" --greedy
head -c 3000 "$M" >"$T/short.gguf"
vg_fails gguf_truncated "$HC_BIN/hc-gguf" check "$T/short.gguf"
vg_fails quantize_truncated "$HC_BIN/hc-quantize" -q "$T/short.gguf" "$T/x.gguf" q8_0
if have_fixtures; then
    vg convert_llama2c "$HC_BIN/hc-convert" llama2c "$HC_FIXTURES/stories260K.bin" "$HC_FIXTURES/tok512.bin" -o "$T/s260.gguf"
    vg run_stories "$HC_BIN/hc-run" -m "$HC_FIXTURES/stories260K.gguf" -p "Once" -n 8 --temp 0 -t 1
    # byte-level BPE: tokenizer.json -> GGUF, then the PCRE2 pre-tokenizer and the merges
    vg convert_hf_bpe "$HC_BIN/hc-convert" hf "$HC_FIXTURES/hf-tokenizers/bpe-llama3" -o "$T/bpe.gguf"
    vg run_tokenize_bpe "$HC_BIN/hc-run" -m "$T/bpe.gguf" --tokenize -p "Hello, world! 12345 it's <|end_of_text|>"
else
    skip vg_fixtures "no $HC_FIXTURES"
fi
finish

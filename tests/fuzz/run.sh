#!/bin/sh
# Run fuzz targets built by `make fuzz`: run.sh SECONDS NAME...
# Seeds build/fuzz/corpus/NAME (seeds.py + fixtures), fuzzes NAME for SECONDS,
# prints one summary line per target; a crash leaves its input in
# build/fuzz/crashes/NAME/ and makes the exit status 1.
set -u
secs=$1; shift
O=${FUZZ_O:-build/fuzz}
FIX=${HC_FIXTURES:-../shared/fixtures}
status=0
# the targets write their input to a scratch file: keep that off the disk
[ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && export TMPDIR=/dev/shm
if command -v python3 >/dev/null 2>&1; then
    python3 tests/fuzz/seeds.py "$O/corpus" || exit 1
else
    echo "fuzz: no python3: generated seeds skipped (fixtures and an empty input only)"
fi
# fixture seeds, by the target that parses them (copied, never committed)
seed() { [ -f "$FIX/$2" ] && mkdir -p "$O/corpus/$1" && cp "$FIX/$2" "$O/corpus/$1/fixture-$2"; }
seed gguf ggml-vocab-llama-spm.gguf; seed gguf stories260K.gguf
seed tokenizer ggml-vocab-llama-spm.gguf.inp
if [ -f "$FIX/tok512.bin" ]; then      # tokenizer.bin for a 512-token vocab: mode byte 1, n-1 = 511
    mkdir -p "$O/corpus/llama2c"
    { printf '\001\377\001'; cat "$FIX/tok512.bin"; } >"$O/corpus/llama2c/fixture-tok512.bin"
fi
for name in "$@"; do
    bin=$O/fuzz/fuzz_$name corpus=$O/corpus/$name crashes=$O/crashes/$name/ log=$O/log/$name.log
    mkdir -p "$corpus" "$crashes" "$O/log"
    [ -n "$(ls "$corpus")" ] || printf '' >"$corpus/empty"
    # Targets that catch hc_die (FUZZ_TRY) hide what the dying code allocated
    # from LeakSanitizer; libFuzzer's per-input leak check would still rescan
    # the heap after each such input, 100x slower: leaks are checked at exit only.
    leaks=1
    grep -q FUZZ_TRY "tests/fuzz/fuzz_$name.c" && leaks=0
    # 2 GiB RSS / malloc limit: a parser that allocates what a header declares is a finding
    "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -detect_leaks=$leaks \
        -print_final_stats=1 -artifact_prefix="$crashes" "$corpus" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    n=$(ls "$corpus" | wc -l)
    if [ $rc -eq 0 ]; then
        echo "fuzz_$name: ok, ${execs:-?} execs in ${secs}s, $cov, corpus $n"
    else
        status=1
        art=$(ls -t "$crashes" 2>/dev/null | head -1)
        echo "fuzz_$name: FAILED (exit $rc) after ${execs:-?} execs: $(grep -m1 -E 'ERROR|fuzz check|does not start|hc_die outside' "$log") -> $crashes$art (log $log)"
    fi
done
exit $status

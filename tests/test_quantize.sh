#!/bin/sh
# hc-quantize from the command line: help, usage errors, the progress lines
# (-v; quiet by default when stdout is not a terminal), --quiet, HC_KERNELS, and a full disk (ulimit -f) leaving nothing behind.
. tests/lib.sh
Q=$HC_BIN/hc-quantize

check help sh -c "$Q --help | grep -q 'usage: hc-quantize'"
check_fails no_args 'usage' "$Q"
check_fails bad_threads '\-t' "$Q" -t 0 a.gguf b.gguf Q4_0
check_fails gptq_needs_more 'hc-quantize: ' "$Q" in.gguf out.gguf GPTQ

if ! have_fixtures; then
    skip progress_lines "no fixtures"; skip quiet "no fixtures"; skip disk_full "no fixtures"
    finish
fi
IN=$HC_FIXTURES/stories260K.gguf

"$Q" -v "$IN" "$T/p.gguf" q8_0 -t 2 >"$T/log" 2>"$T/log.err"
if grep -q 'blk.0.ffn_down.weight - \[  172,    64,     1,     1\], type =    f32, rows of 172 are not a multiple of 32: converting to f16' "$T/log" &&
   grep -q 'output.weight - .*converting to q8_0 .. size =     0.12 MiB ->     0.03 MiB' "$T/log" &&
   grep -q "quantizing '.*' to '.*' as Q8_0 using 2 threads" "$T/log" &&
   grep -q '5 tensors kept 16-bit' "$T/log" && [ ! -s "$T/log.err" ]; then
    ok progress_lines
else
    fail progress_lines "$(head -c 300 "$T/log")"
fi

check quiet sh -c "[ -z \"\$($Q --quiet '$IN' '$T/q.gguf' Q4_0 2>&1)\" ] && [ -s '$T/q.gguf' ]"
# stdout not a terminal and no -v: quiet, as a script wants it
check quiet_when_piped sh -c "[ -z \"\$($Q '$IN' '$T/q2.gguf' Q4_0 2>&1)\" ] && cmp '$T/q.gguf' '$T/q2.gguf'"

# HC_KERNELS picks the quantizers' instruction set: the same bytes from every
# one this CPU runs; an unknown name is refused and leaves no file
for k in scalar avx2 avx512; do
    if HC_KERNELS=$k "$Q" -q "$IN" "$T/k-$k.gguf" Q4_0 2>"$T/k.err"; then
        check "kernels_$k" cmp "$T/q.gguf" "$T/k-$k.gguf"
    elif grep -q "is not an instruction set this CPU runs" "$T/k.err"; then
        skip "kernels_$k" "this CPU does not run $k"
    else
        fail "kernels_$k" "$(cat "$T/k.err")"
    fi
done
check_fails kernels_unknown "HC_KERNELS: 'avx9' is not an instruction set" env HC_KERNELS=avx9 "$Q" -q "$IN" "$T/k9.gguf" Q4_0
check kernels_unknown_no_file test ! -e "$T/k9.gguf"

# A file-size limit stands in for a full disk: with SIGXFSZ ignored, writes fail
# with EFBIG. The error must name the output, and no file (not even the
# temporary) may be left in the directory.
mkdir "$T/full"
if (trap '' XFSZ; ulimit -f 64; exec "$Q" -q "$IN" "$T/full/out.gguf" Q8_0) >"$T/out" 2>"$T/err"; then
    fail disk_full "succeeded under ulimit -f 64"
elif [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "^hc-quantize: $T/full/out.gguf: " "$T/err" &&
     [ -z "$(ls -A "$T/full")" ]; then
    ok disk_full
else
    fail disk_full "stderr: $(head -c 300 "$T/err"); left: $(ls -A "$T/full")"
fi
finish

#!/bin/sh
# hc-run's llama.cpp habits: -f FILE and -f -/-p - (prompt from a file or
# standard input), -n -2 (until the context is full), -i (interactive: a line read after each generation is
# appended and generation goes on in the same context), -ngl N (the first N layers
# on the OpenCL device; -ngl 0: none), "[end of text]" on stderr at EOS,
# HC_KERNELS (the kernels' instruction set for the run; without it, by type: -v says which and why),
# -ctk/-ctv (the KV cache's types: f32 or f16).
. tests/lib.sh
R=$HC_BIN/hc-run
M=$T/m.gguf
"$HC_BIN/hc-convert" synth --dim 64 --n-ff 128 --layers 2 --ctx 64 -o "$M" 2>/dev/null || fail synth "hc-convert failed"
run() { "$R" -m "$M" --temp 0 -t 1 "$@"; }

run -p "hello world" -n 8 >"$T/p.txt" 2>/dev/null
printf 'hello world\n' >"$T/prompt.txt"
check run_f sh -c "'$R' -m '$M' --temp 0 -t 1 -f '$T/prompt.txt' -n 8 >'$T/f.txt' && cmp '$T/f.txt' '$T/p.txt'"
check run_f_stdin sh -c "'$R' -m '$M' --temp 0 -t 1 -f - -n 8 <'$T/prompt.txt' | cmp - '$T/p.txt'"
check run_f_pipe sh -c "printf 'hello world\\n' | '$R' -m '$M' --temp 0 -t 1 -f /dev/stdin -n 8 | cmp - '$T/p.txt'"
check run_p_stdin sh -c "'$R' -m '$M' --temp 0 -t 1 -p - -n 8 <'$T/prompt.txt' | cmp - '$T/p.txt'"
check_fails run_f_missing "hc-run: $T/none.txt: No such file" run -f "$T/none.txt"
check_fails run_p_and_f "-p and -f do not go together" run -p x -f "$T/prompt.txt"
check_fails run_i_stdin_prompt "the prompt cannot come from it too" run -i -f -

# -i: the first part is the plain run's text; each input line is echoed and
# followed by 8 more tokens in the same context (prompt + lines counted as fed)
printf 'once more\nand again\n' | run -p "hello world" -n 8 -i >"$T/i.txt" 2>"$T/i.err"
n_p=$(wc -c <"$T/p.txt")
if [ "$(head -c "$n_p" "$T/i.txt")" = "$(cat "$T/p.txt")" ] &&
   [ "$(tail -c +$((n_p + 1)) "$T/i.txt" | head -n 1)" = "once more" ] && grep -aq "and again$" "$T/i.txt" && [ "$(wc -c <"$T/i.txt")" -gt $((n_p + 25)) ] &&
   grep -q "^generation: *24 tokens" "$T/i.err"; then ok run_interactive
else fail run_interactive "$(cat "$T/i.txt"; cat "$T/i.err")"; fi
# -i in a context as long as the model's 2^20 positions (a 1 GiB f32 cache): only the pages of
# the positions written are made (the whole cache's were); under ASan the allocator's shadow of
# the cache adds 1/8 of it
"$HC_BIN/hc-convert" synth --dim 64 --layers 2 --ctx 1048576 -o "$T/long.gguf" 2>/dev/null
rss=$(printf 'more\n' | python3 -c 'import resource, subprocess, sys
subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$R" -m "$T/long.gguf" -p hello -n 4 -t 1 -i)
if [ "${rss:-0}" -gt 0 ] && [ "$rss" -lt 524288 ]; then ok run_interactive_long_context_memory
else fail run_interactive_long_context_memory "peak RSS ${rss} KiB (want < 512 MiB, half the cache)"; fi
# the same context: it fills up (-c 24: 3 prompt tokens + 8 + a line + 8 ...)
printf 'once more\nand again\nand a third time\n' | run -p "hello world" -n 8 -i -c 24 >"$T/c.txt" 2>"$T/c.err"
if [ $? -eq 0 ] && grep -q "context of 24 tokens is full" "$T/c.err"; then ok run_interactive_one_context
else fail run_interactive_one_context "$(cat "$T/c.err")"; fi

# -n -2 (llama.cpp's "until the context is filled"): the text of any -n that
# fills it, with no warning (the end asked for); -n -1 (endless, by shifting
# the context) is refused by name
run -p "hello world" -n 21 -c 24 >"$T/n21.txt" 2>/dev/null
run -p "hello world" -n -2 -c 24 >"$T/n2.txt" 2>"$T/n2.err"
if [ $? -eq 0 ] && cmp -s "$T/n2.txt" "$T/n21.txt" && ! grep -q "is full" "$T/n2.err"; then ok run_n_until_full
else fail run_n_until_full "$(cat "$T/n2.err")"; fi
check_fails run_n_endless "-n -1 (llama.cpp's endless generation, which shifts the context) is not supported" run -p x -n -1

# -ngl N: the first N layers on the OpenCL device (all of them: the whole
# model), the same text; -ngl 0: no device
for a in "-ngl 99:of 2 layers (attention, norms, KV cache), the output head, every FFN neuron" \
         "--n-gpu-layers 99:the output head, every FFN neuron" "-ngl 1:offload: 1 of 2 layers" "-ngl 0:"; do
    opt=${a%%:*} want=${a#*:}
    name=run_ngl_$(echo "$opt" | tr -c 'a-z0-9\n' _)
    # shellcheck disable=SC2086
    if ! run -p "hello world" -n 8 $opt >"$T/n.txt" 2>"$T/n.err" || ! cmp -s "$T/n.txt" "$T/p.txt"; then
        fail "$name" "$(cat "$T/n.err")"
    elif [ -z "$want" ] && grep -q '^offload:' "$T/n.err"; then fail "$name" "placed: $(cat "$T/n.err")"
    elif [ -n "$want" ] && ! grep -q "$want" "$T/n.err" && ! grep -q 'running on the CPU only' "$T/n.err"; then
        fail "$name" "not placed: $(cat "$T/n.err")"
    else ok "$name"; fi
done
check_fails run_ngl_bad "bad value for -ngl: 'x'" run -ngl x
# -ngl 0 beside --device: the CPU, said in one warning
if run -p "hello world" -n 8 -ngl 0 --device 0 >"$T/n.txt" 2>"$T/n.err" && cmp -s "$T/n.txt" "$T/p.txt" &&
   grep -qx 'hc-run: -ngl 0: running on the CPU only (--device not used)' "$T/n.err"; then ok run_ngl0_device
else fail run_ngl0_device "$(cat "$T/n.err")"; fi
# --sparse-threshold beside layers whose FFN the device runs (dense there): said, not dropped
for a in "99:--sparse-threshold: not used: every layer's FFN is on the device, where it runs dense" \
         "1:--sparse-threshold: the FFN of the first 1 of 2 layers runs dense on the device; the sparse FFN computes the rest"; do
    n=${a%%:*} want=${a#*:}
    if ! run -p "hello world" -n 4 -ngl "$n" --sparse-threshold 0.01 >/dev/null 2>"$T/n.err"; then
        fail "run_ngl${n}_sparse_threshold" "$(cat "$T/n.err")"
    elif grep -q 'running on the CPU only' "$T/n.err"; then skip "run_ngl${n}_sparse_threshold" "no OpenCL device"
    elif grep -qxF "hc-run: $want" "$T/n.err"; then ok "run_ngl${n}_sparse_threshold"
    else fail "run_ngl${n}_sparse_threshold" "$(cat "$T/n.err")"; fi
done
# -v with a device: its transfers, launches and each kernel's time on it
if run -p "hello world" -n 8 -ngl 99 -v >"$T/v.txt" 2>"$T/v.err" && grep -q 'running on the CPU only' "$T/v.err"; then
    skip run_verbose_device_kernels "no OpenCL device"
elif grep -q '^device transfers: [0-9]* .*; [1-9][0-9]* kernel launches$' "$T/v.err" &&
     grep -Eq '^device kernels: [0-9.]+ ms between them; the most costly [1-8], [0-9.]+ ms: [a-z0-9_]+ [0-9.]+ ms \([1-9][0-9]*, [0-9.]+ us each\)' "$T/v.err"
then ok run_verbose_device_kernels
else fail run_verbose_device_kernels "$(cat "$T/v.err")"; fi

# -ctk/-ctv (llama.cpp's spelling): an f16 KV cache on the CPU (-v says so); llama.cpp's
# other cache types refused by name; with -ngl the OpenCL device holds the f16 cache
# itself (the whole model there, no fallback), the CPU's f16 text
check run_cache_f16 sh -c "'$R' -m '$M' --temp 0 -t 1 -p x -n 2 -ctk f16 --cache-type-v f16 -v 2>&1 >/dev/null | grep -q '^KV cache: k F16, v F16'"
check_fails run_cache_type_q8_0 "--cache-type-k q8_0: a KV cache of q8_0 is not implemented (f32 or f16)" run -p x -n 1 -ctk q8_0
check_fails run_cache_type_bad "bad value for --cache-type-v: 'f8' (f32 or f16)" run -p x -n 1 -ctv f8
run -p "hello world" -n 8 -ctk f16 >"$T/c16.txt" 2>/dev/null
if ! run -p "hello world" -n 8 -ngl 99 -ctk f16 >"$T/d16.txt" 2>"$T/d16.err"; then fail run_cache_f16_device "$(cat "$T/d16.err")"
elif grep -q 'running on the CPU only' "$T/d16.err"; then skip run_cache_f16_device "no OpenCL device"
elif grep -q "the output head, every FFN neuron" "$T/d16.err" && ! grep -q "not implemented" "$T/d16.err" &&
     cmp -s "$T/c16.txt" "$T/d16.txt"; then ok run_cache_f16_device
else fail run_cache_f16_device "$(cat "$T/d16.err")"; fi

# HC_KERNELS: the scalar reference runs on every CPU (-v names it); an unknown set is refused
check run_hc_kernels_scalar sh -c "HC_KERNELS=scalar '$R' -m '$M' --temp 0 -t 1 -p x -n 2 -v 2>&1 >/dev/null | grep -q 'kernels: scalar;'"
check run_hc_kernels_why sh -c "HC_KERNELS=scalar '$R' -m '$M' --temp 0 -t 1 -p x -n 2 -v 2>&1 >/dev/null | grep -q '^kernels by type: F32 scalar, .*Q4_0 scalar, .*(HC_KERNELS)'"
# without it, each type's from this CPU model's table row, or the best the CPU runs (-v says which)
check run_kernels_by_type sh -c "'$R' -m '$M' --temp 0 -t 1 -p x -n 2 -v 2>&1 >/dev/null | grep -q '^kernels by type: F32 .*INT4-GPTQ [a-z0-9]*.* (\(table\|cpuid\): '"
check_fails run_hc_kernels_unknown "HC_KERNELS: 'avx9' is not an instruction set this CPU runs" env HC_KERNELS=avx9 "$R" -m "$M" -p x -n 1

# --reset-gpu-index: MODEL.generated.gpuidx made again by hc-solve for the budget
# (the same bytes as hc-solve run by hand), then used (asked for: even on a CPU device)
"$HC_BIN/hc-profile" -m "$M" -f models/synth-corpus.txt --tokens 600 -o "$T/m.stats" 2>/dev/null >/dev/null
"$HC_BIN/hc-solve" -m "$M" -s "$T/m.stats" --vram-budget 409600 -o "$T/direct.gpuidx" >/dev/null 2>&1
echo stale >"$M.generated.gpuidx"
if run -p "hello world" -n 8 --reset-gpu-index --stats "$T/m.stats" --vram-budget 400K >"$T/r.txt" 2>"$T/r.err" &&
   cmp -s "$M.generated.gpuidx" "$T/direct.gpuidx" && cmp -s "$T/r.txt" "$T/p.txt" &&
   grep -q "^reset-gpu-index: .*hc-solve -m $M -s $T/m.stats --vram-budget 409600" "$T/r.err" &&
   grep -q "^hybrid: $M.generated.gpuidx\|running on the CPU only" "$T/r.err"; then ok run_reset_gpu_index
else fail run_reset_gpu_index "$(cat "$T/r.err")"; fi
# ... priced for the run's cache: with -ctk/-ctv f16, hc-solve's bytes with the same flags
"$HC_BIN/hc-solve" -m "$M" -s "$T/m.stats" --vram-budget 409600 -ctk f16 -ctv f16 -o "$T/direct16.gpuidx" >/dev/null 2>&1
if run -p "hello world" -n 8 --reset-gpu-index --stats "$T/m.stats" --vram-budget 400K -ctk f16 -ctv f16 >/dev/null \
       2>"$T/r16.err" && cmp -s "$M.generated.gpuidx" "$T/direct16.gpuidx" &&
   grep -q "^reset-gpu-index: .*hc-solve -m $M -s $T/m.stats --vram-budget 409600 -o .* -ctk f16 -ctv f16" "$T/r16.err"
then ok run_reset_gpu_index_f16_cache
else fail run_reset_gpu_index_f16_cache "$(cat "$T/r16.err")"; fi
rm -f "$M.generated.gpuidx"
check_fails run_reset_needs_stats "hc-solve failed" run -p x -n 1 --reset-gpu-index --vram-budget 400K
check_fails run_reset_not_with_index "does not go with --gpu-index" run --reset-gpu-index --gpu-index "$T/direct.gpuidx"
check_fails run_stats_alone "--stats is for --reset-gpu-index" run --stats "$T/m.stats"

# --seed -1 (llama.cpp's random seed): drawn, printed on stderr, and that seed repeats the run;
# seeds outside 0..2^64-1 refused, not wrapped
"$R" -m "$M" -p "hello" -n 16 --temp 1 -t 1 --seed -1 >"$T/r1.txt" 2>"$T/r1.err"
drawn=$(sed -n 's/^seed: *\([0-9]*\) (drawn for --seed -1)$/\1/p' "$T/r1.err")
check run_seed_drawn_repeats sh -c "[ -n '$drawn' ] && '$R' -m '$M' -p hello -n 16 --temp 1 -t 1 --seed '$drawn' 2>/dev/null | cmp - '$T/r1.txt'"
check_fails run_seed_too_large "bad value for --seed: '18446744073709551616'" run -p x -n 1 --seed 18446744073709551616
check_fails run_seed_negative "bad value for --seed: '-2'" run -p x -n 1 --seed -2

# EOS: generation stops and says so on stderr (stories260K stops within 400 tokens)
S=$HC_FIXTURES/stories260K.gguf
if [ -f "$S" ]; then
    "$R" -m "$S" -p "Once" -n 400 --temp 0 >"$T/s.txt" 2>"$T/s.err"
    if grep -qx '\[end of text\]' "$T/s.err" && ! grep -q 'end of text' "$T/s.txt"; then ok run_end_of_text
    else fail run_end_of_text "$(cat "$T/s.err")"; fi
else
    skip run_end_of_text "no fixtures"
fi
finish

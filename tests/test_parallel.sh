#!/bin/sh
# hc-run -f PROMPTS --parallel N (issue 39): every completion of a batch is
# byte for byte the text of its prompt run alone (greedy; stories260K, dense
# and with the sparse FFN, and two hf-tiny families: qwen2's NeoX RoPE and
# biases, opt's learned positions),
# also when a small --kv-budget forces preemption (the caches swapped to host
# memory, or recomputed; an f16 cache too), with other block sizes (--block-size), and on the
# OpenCL device (-ngl 99, its blocks swapped, in f32 and in f16); a prompt longer than the context is refused
# on its own line while the others go on; sampled texts do not depend on N;
# JSON Lines in (per-prompt n_predict, temp, seed; unknown keys refused by
# name) and out (--json).
. tests/lib.sh
need_programs parallel hc-run hc-convert
R=$HC_BIN/hc-run
S=$HC_FIXTURES/stories260K.gguf
if [ ! -f "$S" ]; then skip parallel "no $S"; finish; fi
cat >"$T/p.txt" <<'P'
Once upon a time
The little dog
Lily wanted to

One day, a big
Tom and Sam
The sun was
She looked at the
A bird flew
P

# solo_all NAME MODEL N OUT [opts]: each prompt's plain run, as --parallel labels it
solo_all() {
    m=$2; n=$3; out=$4; shift 4
    : >"$out"
    l=0
    while IFS= read -r line; do
        l=$((l + 1))
        [ -z "$line" ] && continue
        printf -- '--- line %d ---\n' "$l" >>"$out"
        "$R" -m "$m" -p "$line" -n "$n" -t 2 "$@" >>"$out" 2>/dev/null || return 1
        echo >>"$out"
    done <"$T/p.txt"
}
# same NAME A B: the files are the same bytes
same() { if cmp -s "$2" "$3"; then ok "$1"; else fail "$1" "$(diff "$2" "$3" | head -c 400)"; fi; }

solo_all stories "$S" 40 "$T/solo.txt" --temp 0
"$R" -m "$S" -f "$T/p.txt" --parallel 8 -n 40 --temp 0 -t 2 >"$T/par.txt" 2>"$T/par.err"
same parallel_greedy_stories "$T/solo.txt" "$T/par.txt"
if grep -q "^batch: .*8 prompts (0 refused), at most 8 at once" "$T/par.err" && grep -q "^decode: " "$T/par.err"; then
    ok parallel_timings
else fail parallel_timings "$(cat "$T/par.err")"; fi
"$R" -m "$S" -f "$T/p.txt" -np 3 -n 40 --temp 0 -t 1 >"$T/np3.txt" 2>/dev/null
same parallel_np_alias_threads "$T/solo.txt" "$T/np3.txt"

# preemption: 10 blocks of 16 positions for 8 sequences of up to 49 tokens; each preempted
# sequence's cache swapped to host memory (the default), recomputed (--preemption-mode
# recompute), or recomputed because the swap space does not hold it
"$R" -m "$S" -f "$T/p.txt" --parallel 8 -n 40 --temp 0 -t 2 -c 64 --kv-budget 200K >"$T/pre.txt" 2>"$T/pre.err"
if grep -q "^batch: .* \([1-9][0-9]*\) preempted (\1 swapped)" "$T/pre.err"; then
    same parallel_preempted_swapped "$T/solo.txt" "$T/pre.txt"
else fail parallel_preempted_swapped "not all swapped: $(grep batch "$T/pre.err")"; fi
for how in "--preemption-mode recompute" "--swap-space 1K"; do
    "$R" -m "$S" -f "$T/p.txt" --parallel 8 -n 40 --temp 0 -t 2 -c 64 --kv-budget 200K $how >"$T/rec.txt" 2>"$T/rec.err"
    name=parallel_preempted_recomputed_$(echo "$how" | tr -dc 'a-z')
    if grep -q "^batch: .* [1-9][0-9]* preempted (0 swapped)" "$T/rec.err"; then same "$name" "$T/solo.txt" "$T/rec.txt"
    else fail "$name" "$(grep batch "$T/rec.err")"; fi
done
# an f16 KV cache (-ctk/-ctv f16): half the bytes a block, so half the budget holds the
# same 10 blocks; the batch's texts are the f16 cache's solo runs, swapped or not
solo_all stories "$S" 40 "$T/solo16.txt" --temp 0 -ctk f16 -ctv f16
"$R" -m "$S" -f "$T/p.txt" --parallel 8 -n 40 --temp 0 -t 2 -c 64 --kv-budget 100K -ctk f16 -ctv f16 \
    >"$T/pre16.txt" 2>"$T/pre16.err"
if grep -q "^batch: .* \([1-9][0-9]*\) preempted (\1 swapped); KV cache 10 blocks" "$T/pre16.err"; then
    same parallel_f16_cache_swapped "$T/solo16.txt" "$T/pre16.txt"
else fail parallel_f16_cache_swapped "$(grep batch "$T/pre16.err")"; fi
check_fails parallel_preemption_mode "bad value for --preemption-mode: 'later' (swap or recompute)" \
    "$R" -m "$S" -f "$T/p.txt" --parallel 8 --preemption-mode later
check_fails parallel_budget_too_small "less than one context of 64 positions" \
    "$R" -m "$S" -f "$T/p.txt" --parallel 8 -c 64 --kv-budget 40K
# other block sizes (--block-size, vLLM's): the same texts, preempted or not
for bs in 4 64; do
    "$R" -m "$S" -f "$T/p.txt" --parallel 8 -n 40 --temp 0 -t 2 -c 64 --kv-budget 200K --block-size $bs \
        >"$T/bs$bs.txt" 2>"$T/bs$bs.err"
    if grep -q "^batch: .*KV cache [0-9]* blocks of $bs positions" "$T/bs$bs.err"; then
        same "parallel_block_size_$bs" "$T/solo.txt" "$T/bs$bs.txt"
    else fail "parallel_block_size_$bs" "$(grep batch "$T/bs$bs.err")"; fi
done
grep -q "^batch: .* [1-9][0-9]* preempted" "$T/bs4.err" && ok parallel_block_size_preempted ||
    fail parallel_block_size_preempted "$(grep batch "$T/bs4.err")"
check_fails parallel_block_size_power_of_two "bad value for --block-size: 12 (a power of two)" \
    "$R" -m "$S" -f "$T/p.txt" --parallel 8 --block-size 12
check_fails parallel_block_size_range "--block-size" "$R" -m "$S" -f "$T/p.txt" --parallel 8 --block-size 2
check_fails parallel_block_size_alone "--swap-space go with --parallel" "$R" -m "$S" -p x --block-size 32
check_fails parallel_swap_space_alone "--swap-space go with --parallel" "$R" -m "$S" -p x --swap-space 1G

# the sparse FFN (SiLU skipping |act(gate)| < 0.3): each row keeps its own neurons, the step reads their union
solo_all sparse "$S" 40 "$T/solo_sparse.txt" --temp 0 --sparse-threshold 0.3
"$R" -m "$S" -f "$T/p.txt" --parallel 8 -n 40 --temp 0 -t 2 --sparse-threshold 0.3 -v >"$T/par_sparse.txt" 2>"$T/sp.err"
same parallel_sparse "$T/solo_sparse.txt" "$T/par_sparse.txt"
grep -q "^sparse: [0-9.]* rows per CPU step: up and down rows of" "$T/sp.err" && ok parallel_sparse_union ||
    fail parallel_sparse_union "$(grep '^sparse' "$T/sp.err" | head -c 300)"

# a prompt longer than the context (-c 16) among them: refused alone, the others run, exit 1
{ sed -n 1,2p "$T/p.txt"; echo "Once upon a time there was a little girl named Lily who loved to play outside"; \
  sed -n 3p "$T/p.txt"; } >"$T/long.txt"
"$R" -m "$S" -f "$T/long.txt" --parallel 8 -n 8 --temp 0 -t 2 -c 16 >"$T/long.out" 2>"$T/long.err"
rc=$?
"$R" -m "$S" -p "Lily wanted to" -n 8 --temp 0 -t 2 -c 16 >"$T/l4.txt" 2>/dev/null
if [ $rc -eq 1 ] && grep -q "hc-run: $T/long.txt:3: prompt has [0-9]* tokens, more than the context of 16 (-c); refused" "$T/long.err" &&
   [ "$(grep -c '^--- line' "$T/long.out")" -eq 3 ] && ! grep -q '^--- line 3 ---' "$T/long.out" &&
   [ "$(sed -n '/^--- line 4 ---$/{n;p;}' "$T/long.out")" = "$(cat "$T/l4.txt")" ]; then ok parallel_refused_alone
else fail parallel_refused_alone "rc $rc: $(cat "$T/long.err" "$T/long.out" | head -c 400)"; fi

# sampling: each sequence's own sampler, so N changes no text; one of them is its plain run
for n in 1 3 8; do "$R" -m "$S" -f "$T/p.txt" --parallel $n -n 30 --temp 0.9 --seed 7 -t 2 >"$T/s$n.txt" 2>/dev/null; done
if cmp -s "$T/s1.txt" "$T/s3.txt" && cmp -s "$T/s1.txt" "$T/s8.txt"; then ok parallel_sampled_independent_of_n
else fail parallel_sampled_independent_of_n "$(diff "$T/s1.txt" "$T/s8.txt" | head -c 300)"; fi
"$R" -m "$S" -p "The little dog" -n 30 --temp 0.9 --seed 7 -t 2 >"$T/s_dog.txt" 2>/dev/null
[ "$(sed -n '/^--- line 2 ---$/{n;p;}' "$T/s8.txt")" = "$(cat "$T/s_dog.txt")" ] && ok parallel_sampled_solo ||
    fail parallel_sampled_solo "$(cat "$T/s_dog.txt")"

# JSON Lines in and out: per-prompt settings; the completion is the plain run's text after the prompt
cat >"$T/j.txt" <<'P'
{"prompt": "The little dog", "n_predict": 12, "temp": 0.7, "seed": 3}
Lily wanted to
{"prompt": "A bird flew", "temp": 0}
P
"$R" -m "$S" -f "$T/j.txt" -np 2 --json -n 20 --temp 0 -t 2 >"$T/j.out" 2>"$T/j.err"
"$R" -m "$S" -p "The little dog" -n 12 --temp 0.7 --seed 3 -t 2 >"$T/j1.txt" 2>/dev/null
"$R" -m "$S" -p "Lily wanted to" -n 20 --temp 0 -t 2 >"$T/j2.txt" 2>/dev/null
"$R" -m "$S" -p "A bird flew" -n 20 --temp 0 -t 2 >"$T/j3.txt" 2>/dev/null
if python3 - "$T/j.out" "$T/j1.txt" "$T/j2.txt" "$T/j3.txt" >"$T/why" 2>&1 <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["line"] for r in rows] == [1, 2, 3], rows
for r, f in zip(rows, sys.argv[2:]):
    solo, c = open(f).read(), r["completion"]
    assert c and solo.endswith(c) and solo[:-len(c)].strip() == r["prompt"].strip(), (r, solo)
    assert r["stop"] in ("length", "eos"), r
assert rows[0]["tokens_generated"] <= 12 and rows[1]["tokens_generated"] <= 20
PY
then ok parallel_json_lines; else fail parallel_json_lines "$(cat "$T/why" | tail -3)"; fi
# bytes that are not UTF-8 (and a NUL) in a prompt: the JSON still parses (U+FFFD for each stray byte)
printf 'Once \377\376 upon\nThe c\000at\n' >"$T/u.txt"
"$R" -m "$S" -f "$T/u.txt" -np 2 --json -n 8 --temp 0 -t 2 >"$T/u.out" 2>/dev/null
if python3 - "$T/u.out" >"$T/why" 2>&1 <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], "rb").read().decode("utf-8").splitlines()]
assert [r["prompt"] for r in rows] == ["Once \ufffd\ufffd upon", "The cat"], rows
assert all(r["completion"] and r["stop"] == "length" for r in rows), rows
PY
then ok parallel_json_utf8; else fail parallel_json_utf8 "$(tail -3 "$T/why")"; fi
# "seed": -1 draws one for that line (below 2^53, so a JSON line can hold it), as --seed -1, and
# says which on stderr and in the JSON: the plain run with it repeats the text (which, sampled,
# may hold newlines: compared as the JSON's completion, as parallel_json_lines does)
printf '{"prompt": "The little dog", "seed": -1, "temp": 0.9}\nLily wanted to\n' >"$T/d.txt"
"$R" -m "$S" -f "$T/d.txt" -np 2 -n 16 --temp 0 -t 2 --json >"$T/dj.out" 2>"$T/dj.err"
drawn=$(sed -n 's/^.*d\.txt:1: seed \([0-9]*\) (drawn for "seed": -1)$/\1/p' "$T/dj.err")
"$R" -m "$S" -p "The little dog" -n 16 --temp 0.9 --seed "${drawn:-0}" -t 2 >"$T/d1.txt" 2>/dev/null
if [ -n "$drawn" ] && python3 - "$T/dj.out" "$drawn" "$T/d1.txt" >"$T/why" 2>&1 <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
seed, solo = int(sys.argv[2]), open(sys.argv[3]).read()
assert rows[0]["seed"] == seed < 2**53 and "seed" not in rows[1], rows
c = rows[0]["completion"]
assert c and solo.endswith(c) and solo[:-len(c)].strip() == rows[0]["prompt"].strip(), (rows[0], solo)
PY
then ok parallel_json_seed_drawn; else fail parallel_json_seed_drawn "seed '$drawn': $(tail -3 "$T/why")"; fi
printf '{"prompt": "x", "seed": 1.5}\n' >"$T/bad3.txt"
check_fails parallel_json_seed_fraction "$T/bad3.txt:1: \"seed\" must be a whole number 0..2^53-1, or -1 to draw one" \
    "$R" -m "$S" -f "$T/bad3.txt" -np 2
printf '{"prompt": "x", "tmp": 1}\n' >"$T/bad.txt"
check_fails parallel_json_unknown_key "$T/bad.txt:1: unknown key 'tmp'" "$R" -m "$S" -f "$T/bad.txt" -np 2
# U+0000 would end cJSON's string, the prompt cut short: refused, escaped or raw; an escaped
# backslash before u0000 is text
printf '{"prompt": "ab\\u0000cd"}\n' >"$T/nul1.txt"
check_fails parallel_json_nul_escape "$T/nul1.txt:1: a line starting with '{' must be a JSON object: U+0000 in JSON is not supported" "$R" -m "$S" -f "$T/nul1.txt" -np 2
printf '{"prompt": "ab\000cd"}\n' >"$T/nul2.txt"
check_fails parallel_json_nul_raw "$T/nul2.txt:1: a line starting with '{' must be a JSON object: U+0000 in JSON is not supported" "$R" -m "$S" -f "$T/nul2.txt" -np 2
printf '{"prompt": "ab\\\\u0000cd"}\n' >"$T/nul3.txt"
if "$R" -m "$S" -f "$T/nul3.txt" -np 2 -n 2 --temp 0 -t 2 2>"$T/err" | grep -q '^ab\\u0000cd'; then ok parallel_json_backslash_u0000
else fail parallel_json_backslash_u0000 "$(head -c 300 "$T/err")"; fi
# CRLF line endings: the same prompts, not each with a CR at its end
sed 's/$/\r/' "$T/p.txt" >"$T/p_crlf.txt"
"$R" -m "$S" -f "$T/p_crlf.txt" --parallel 8 -n 40 --temp 0 -t 2 >"$T/par_crlf.txt" 2>/dev/null
same parallel_crlf_lines "$T/solo.txt" "$T/par_crlf.txt"
# a byte order mark before the first line's '{' (as some editors write it): still JSON, not the text
printf '\357\273\277{"prompt": "Lily wanted to", "n_predict": 20}\n' >"$T/bom.txt"
"$R" -m "$S" -f "$T/bom.txt" -np 2 --temp 0 -t 2 >"$T/bom.out" 2>/dev/null
sed 1d "$T/bom.out" >"$T/bom1.txt"
{ cat "$T/j2.txt"; echo; } >"$T/j2n.txt"   # the plain run ends without a newline
same parallel_json_after_bom "$T/j2n.txt" "$T/bom1.txt"
printf 'fine\n{"prompt": 3}\n' >"$T/bad2.txt"
check_fails parallel_json_bad_type "$T/bad2.txt:2: \"prompt\" must be a string" "$R" -m "$S" -f "$T/bad2.txt" -np 2
check_fails parallel_needs_file "--parallel runs the prompts of -f FILE" "$R" -m "$S" -p x --parallel 2
check_fails parallel_json_alone "--json, --kv-budget, --block-size, --preemption-mode and --swap-space go with --parallel" "$R" -m "$S" -p x --json

# hf-tiny families: qwen2 (NeoX RoPE, q/k/v biases), opt (learned positions)
H=$HC_FIXTURES/hf-tiny
for fam in qwen2 opt; do
    if [ ! -d "$H/$fam" ]; then skip "parallel_greedy_$fam" "no $H/$fam"; continue; fi
    if ! "$HC_BIN/hc-convert" hf "$H/$fam" -o "$T/$fam.gguf" --outtype f32 >/dev/null 2>"$T/err"; then
        fail "parallel_greedy_$fam" "convert: $(head -c 300 "$T/err")"; continue
    fi
    solo_all "$fam" "$T/$fam.gguf" 24 "$T/solo_$fam.txt" --temp 0
    "$R" -m "$T/$fam.gguf" -f "$T/p.txt" --parallel 8 -n 24 --temp 0 -t 2 >"$T/par_$fam.txt" 2>"$T/err"
    same "parallel_greedy_$fam" "$T/solo_$fam.txt" "$T/par_$fam.txt"
done

# the OpenCL device (PoCL here): the whole model there, the cache's blocks on it
if "$R" --list-devices >/dev/null 2>&1; then
    # --parallel keeps each row's bits whatever the batch (--batch-invariant): the plain runs with it
    solo_all stories_dev "$S" 40 "$T/solo_dev.txt" --temp 0 -ngl 99 --batch-invariant
    "$R" -m "$S" -f "$T/p.txt" --parallel 8 -n 40 --temp 0 -t 2 -ngl 99 >"$T/par_dev.txt" 2>"$T/par_dev.err"
    if grep -q "every FFN neuron" "$T/par_dev.err"; then same parallel_device "$T/solo_dev.txt" "$T/par_dev.txt"
    else fail parallel_device "not on the device: $(head -c 300 "$T/par_dev.err")"; fi
    same parallel_device_is_cpu_text "$T/solo.txt" "$T/par_dev.txt"
    grep -q "^opencl: .*; every row with its bits alone (--batch-invariant)$" "$T/par_dev.err" &&
        ok parallel_device_batch_invariant || fail parallel_device_batch_invariant "$(grep opencl "$T/par_dev.err")"
    "$R" -m "$S" -f "$T/p.txt" --parallel 8 -n 40 --temp 0 -t 2 -ngl 99 -c 64 --kv-budget 200K --block-size 8 \
        >"$T/par_dev8.txt" 2>"$T/par_dev8.err"
    if grep -q "^batch: .* \([1-9][0-9]*\) preempted (\1 swapped)" "$T/par_dev8.err"; then
        same parallel_device_swapped "$T/solo_dev.txt" "$T/par_dev8.txt"
    else fail parallel_device_swapped "$(grep batch "$T/par_dev8.err")"; fi
    # an f16 cache on the device too: half the budget holds the same blocks; swapped, each
    # prompt's solo f16 text there
    solo_all stories_dev16 "$S" 40 "$T/solo_dev16.txt" --temp 0 -ngl 99 --batch-invariant -ctk f16 -ctv f16
    "$R" -m "$S" -f "$T/p.txt" --parallel 8 -n 40 --temp 0 -t 2 -ngl 99 -c 64 --kv-budget 100K --block-size 8 \
        -ctk f16 -ctv f16 >"$T/par_dev16.txt" 2>"$T/par_dev16.err"
    if grep -q "every FFN neuron" "$T/par_dev16.err" &&
       grep -q "^batch: .* \([1-9][0-9]*\) preempted (\1 swapped)" "$T/par_dev16.err"; then
        same parallel_device_f16_cache_swapped "$T/solo_dev16.txt" "$T/par_dev16.txt"
    else fail parallel_device_f16_cache_swapped "$(grep -e batch -e offload -e 'not impl' "$T/par_dev16.err")"; fi
    # the placement prices the pool's cache, as hc-solve --ctx: a budget that holds the whole
    # model with one sequence's cache holds less of it with four, and all of it again with
    # four in f16
    for np in 1 4 4f16; do
        # shellcheck disable=SC2046   # the cache's flags: two words or none
        "$R" -m "$S" -f "$T/p.txt" --parallel ${np%f16} -c 128 -n 4 --temp 0 -t 2 --device 0 --vram-budget 1400K \
            $([ "$np" = 4f16 ] && echo -ctk f16 -ctv f16) >/dev/null 2>"$T/np$np.err"
    done
    if grep -q "^offload: 5 of 5 layers .*, every FFN neuron on the device" "$T/np1.err" &&
       grep -q "^offload: 5 of 5 layers (attention, norms, KV cache), the output head on the device" "$T/np4.err" &&
       grep -q "^offload: 5 of 5 layers .*, every FFN neuron on the device" "$T/np4f16.err"
    then ok parallel_device_prices_pool
    else fail parallel_device_prices_pool "$(grep -h offload "$T/np1.err" "$T/np4.err" "$T/np4f16.err")"; fi
else skip parallel_device "no OpenCL device"; fi
finish

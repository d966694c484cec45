#!/bin/sh
# hc-gguf on the real fixtures and on broken files.
. tests/lib.sh
G="$HC_BIN/hc-gguf"
S="$HC_FIXTURES/stories260K.gguf"
V="$HC_FIXTURES/ggml-vocab-llama-spm.gguf"

# contains NAME PATTERN FILE: FILE (stdout of the last check) matches PATTERN
contains() { if grep -q -- "$2" "$3"; then ok "$1"; else fail "$1" "no '$2' in $3: $(head -c 300 "$3")"; fi; }
# one_line NAME: the last command printed exactly one line on stderr and nothing on stdout
one_line() {
    if [ "$(wc -l <"$T/err")" -eq 1 ] && [ ! -s "$T/out" ]; then ok "$1"
    else fail "$1" "stderr: $(head -c 300 "$T/err") stdout: $(head -c 100 "$T/out")"; fi
}

check help "$G" --help
contains help_text "usage: hc-gguf dump" "$T/out"
check_fails no_args "usage" "$G"
check_fails unknown_command "unknown command 'show'" "$G" show "$S"
check_fails check_takes_no_json "apply to dump only" "$G" check --json "$S"

printf 'XXXX\3\0\0\0' >"$T/magic.gguf"
check_fails bad_magic "hc-gguf: $T/magic.gguf: offset 0: bad magic" "$G" check "$T/magic.gguf"
one_line bad_magic_one_line
check_fails missing_file "No such file" "$G" dump "$T/none.gguf"

if ! have_fixtures; then
    skip fixtures "no $HC_FIXTURES"
    finish
fi

check check_stories "$G" check "$S"
contains check_stories_summary "ok: GGUF v3, 19 KVs, 48 tensors, 1171200 bytes of tensor data" "$T/out"
check check_vocab "$G" check "$V"
contains check_vocab_summary "22 KVs, 0 tensors" "$T/out"

check dump_stories "$G" dump "$S"
contains dump_header "data offset: 14176" "$T/out"
contains dump_kv "llama.feed_forward_length  *u32  *= 172" "$T/out"
contains dump_string "general.architecture  *string  *= \"llama\"" "$T/out"
contains dump_array_abbreviated 'string\[512\] *= \["<unk>", "<s>", "</s>",.*, \.\.\. 504 more\]' "$T/out"
contains dump_tensor "blk.4.ffn_down.weight  *F32  *\[172, 64\]  *offset 1082880  *44032 bytes" "$T/out"
check dump_full "$G" dump --full "$S"
if grep -q '504 more' "$T/out"; then fail dump_full_complete "--full still abbreviates"; else ok dump_full_complete; fi

# A truncated copy: the last tensors' data is missing.
head -c 1000000 "$S" >"$T/trunc.gguf"
check_fails truncated "runs past end of file" "$G" check "$T/trunc.gguf"
one_line truncated_one_line
check_fails truncated_dump "hc-gguf: $T/trunc.gguf: offset" "$G" dump "$T/trunc.gguf"
one_line truncated_dump_no_output

# The same file with PowerInfer's magic: accepted and reported as PWRI.
{ printf PWRI; tail -c +5 "$S"; } >"$T/pwri.gguf"
check pwri "$G" check "$T/pwri.gguf"
contains pwri_variant "ok: PWRI v3" "$T/out"

if command -v python3 >/dev/null 2>&1; then
    check json_stories sh -c "'$G' dump --json '$S' | python3 -c '
import json, sys
d = json.load(sys.stdin)
kv = {k[\"key\"]: k for k in d[\"kv\"]}
assert d[\"n_tensors\"] == 48 and len(d[\"tensors\"]) == 48 and d[\"data_offset\"] == 14176, d[\"n_tensors\"]
assert kv[\"llama.feed_forward_length\"][\"value\"] == 172
assert kv[\"tokenizer.ggml.tokens\"][\"n\"] == 512 and len(kv[\"tokenizer.ggml.tokens\"][\"value\"]) == 512
assert abs(kv[\"llama.attention.layer_norm_rms_epsilon\"][\"value\"] - 1e-5) < 1e-12
assert kv[\"tokenizer.ggml.seperator_token_id\"][\"value\"] == 4294967295
t = d[\"tensors\"][1]
assert t[\"name\"] == \"output_norm.weight\" and t[\"shape\"] == [64] and t[\"offset\"] == 131072 and t[\"bytes\"] == 256
'"
    check json_vocab sh -c "'$G' dump --json '$V' | python3 -c '
import json, sys
d = json.load(sys.stdin)
kv = {k[\"key\"]: k for k in d[\"kv\"]}
assert d[\"n_kv\"] == 22 and d[\"tensors\"] == []
assert len(kv[\"tokenizer.ggml.tokens\"][\"value\"]) == 32000
assert kv[\"tokenizer.ggml.tokens\"][\"value\"][:3] == [\"<unk>\", \"<s>\", \"</s>\"]
assert kv[\"tokenizer.ggml.add_bos_token\"][\"value\"] is True
'"
else
    skip json_stories "no python3"
    skip json_vocab "no python3"
fi
finish

#!/bin/sh
# hc-profile command line: help, usage errors (one line, exit 1, no output file).
. tests/lib.sh
P="$HC_BIN/hc-profile"

check profile_help "$P" --help
for sub in merge import-powerinfer show; do
    check "profile_help_$sub" "$P" "$sub" --help
done
grep -q "import-powerinfer DIR" "$T/out" && ok profile_help_text || fail profile_help_text "usage lacks import-powerinfer"
check_fails profile_needs_model "need -m MODEL" "$P" -f x.txt -o "$T/o.gguf"
check_fails profile_needs_output "no output file" "$P" -m m.gguf -f x.txt
check_fails profile_bad_shard "bad value for --shard" "$P" -m m.gguf -f x.txt -o "$T/o.gguf" --shard 2/2
check_fails profile_bad_threshold "bad value for --threshold" "$P" -m m.gguf -f x.txt -o "$T/o.gguf" --threshold -1
check_fails profile_bad_ctx "bad value for -c" "$P" -m m.gguf -f x.txt -o "$T/o.gguf" -c 1
check_fails profile_missing_model "hc-profile: $T/none.gguf" "$P" -m "$T/none.gguf" -f x.txt -o "$T/o.gguf"
check_fails merge_no_inputs "no input files" "$P" merge -o "$T/o.gguf"
check_fails merge_missing "hc-profile: $T/a.gguf" "$P" merge "$T/a.gguf" -o "$T/o.gguf"
check_fails show_not_stats "hc-profile: " "$P" show "$0"
check_fails import_no_dir "cannot open directory" "$P" import-powerinfer "$T/nodir" -o "$T/o.gguf"
[ ! -e "$T/o.gguf" ] && ok profile_no_partial_output || fail profile_no_partial_output "$T/o.gguf exists"
finish

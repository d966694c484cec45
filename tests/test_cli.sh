#!/bin/sh
# The command line every program and subcommand shares: --help and -h print
# the usage on stdout and exit 0; --version prints "PROGRAM VERSION", one
# version for all, starting with the VERSION file's; a bad option is one line "hc-NAME: ..."
# on stderr naming the option and pointing at --help, exit 1, nothing on
# stdout; every multithreaded tool takes -t.
. tests/lib.sh

# helps NAME PROGRAM [SUBCOMMAND]: --help and -h, same text, starting "usage: PROGRAM"
helps() {
    name=$1; shift
    prog=$1
    if "$HC_BIN/$@" --help >"$T/help" 2>"$T/err" && [ ! -s "$T/err" ] &&
        head -1 "$T/help" | grep -q "^usage: $prog"; then ok "${name}_help"
    else fail "${name}_help" "$* --help: $(head -c 200 "$T/err") $(head -c 100 "$T/help")"; fi
    if "$HC_BIN/$@" -h >"$T/out" 2>"$T/err" && [ ! -s "$T/err" ] && cmp -s "$T/out" "$T/help"; then ok "${name}_h"
    else fail "${name}_h" "$* -h differs from --help or failed: $(head -c 200 "$T/err")"; fi
    if "$HC_BIN/$@" --version >"$T/out" 2>"$T/err" && [ ! -s "$T/err" ] && [ "$(wc -l <"$T/out")" -eq 1 ] &&
        grep -q "^$prog $(cat VERSION)" "$T/out"; then
        ok "${name}_version"; sed "s/^$prog //" "$T/out" >>"$T/versions"
    else fail "${name}_version" "$* --version: $(head -c 200 "$T/err") $(head -c 100 "$T/out")"; fi
}

# refuses NAME PATTERN PROGRAM [ARGS...]: exit 1, stdout empty, stderr one
# line "PROGRAM: ..." matching PATTERN
refuses() {
    r_name=$1; r_pat=$2; shift 2
    r_prog=$1
    "$HC_BIN/$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -ne 1 ]; then fail "$r_name" "$* exited $rc (want 1): $(head -c 200 "$T/err")"
    elif [ -s "$T/out" ]; then fail "$r_name" "$* wrote to stdout: $(head -c 100 "$T/out")"
    elif [ "$(wc -l <"$T/err")" -ne 1 ]; then fail "$r_name" "$* wrote $(wc -l <"$T/err") lines: $(head -c 300 "$T/err")"
    elif ! grep -q "^$r_prog: " "$T/err"; then fail "$r_name" "line does not start with '$r_prog: ': $(cat "$T/err")"
    elif ! grep -q -- "$r_pat" "$T/err"; then fail "$r_name" "line lacks '$r_pat': $(cat "$T/err")"
    else ok "$r_name"; fi
}

# bad_options NAME PROGRAM [SUBCOMMAND]: an unknown long and short option
H="(see [a-z0-9 -]*--help)\$"    # the hint that ends an option error
bad_options() {
    b_name=$1; shift
    refuses "${b_name}_unknown_long" "unknown option '--no-such-option' $H" "$@" --no-such-option
    refuses "${b_name}_unknown_short" "unknown option '-Z' $H" "$@" -Z
}

helps gguf hc-gguf
helps gguf_dump hc-gguf dump
bad_options gguf hc-gguf
refuses gguf_dump_unknown "unknown option '--no-such-option' $H" hc-gguf dump --no-such-option x.gguf
refuses gguf_flag_value "option '--json' takes no value $H" hc-gguf dump --json=1 x.gguf

helps convert hc-convert
refuses convert_unknown "unknown command '--no-such-option' (.*see --help)" hc-convert --no-such-option
for c in llama2c hf synth; do
    helps "convert_$c" hc-convert "$c"
    bad_options "convert_$c" hc-convert "$c"
done
refuses convert_needs_value "option '--outtype' needs a value $H" hc-convert hf --outtype
refuses convert_seed_base "bad value for --seed: '0x10' (expected 0..18446744073709551615)" hc-convert synth -o "$T/s.gguf" --seed 0x10
refuses convert_seed_negative "bad value for --seed: '-1'" hc-convert synth -o "$T/s.gguf" --seed -1

helps quantize hc-quantize
bad_options quantize hc-quantize
refuses quantize_needs_value "option '-t' needs a value $H" hc-quantize -t

helps profile hc-profile
bad_options profile hc-profile
for c in merge import-powerinfer show predictors calibrate; do
    helps "profile_$c" hc-profile "$c"
    bad_options "profile_$c" hc-profile "$c"
done
refuses profile_merge_needs_value "option '--output' needs a value $H" hc-profile merge --output

helps solve hc-solve
bad_options solve hc-solve
refuses solve_needs_value "option '--svg' needs a value $H" hc-solve --svg
refuses solve_ctx_zero "bad value for --ctx: '0' (expected 1..16777216)" hc-solve -m x.gguf -s y.gguf --vram-budget 1G --ctx 0

helps run hc-run
bad_options run hc-run
refuses run_flag_value "option '--logits' takes no value $H" hc-run --logits=yes

# -t N in every tool that runs threads: listed in --help, checked as 1..256
for p in "hc-quantize" "hc-profile" "hc-profile predictors" "hc-profile calibrate" "hc-run"; do
    name=$(echo "$p" | sed 's/^hc-//; s/ /_/g')
    # shellcheck disable=SC2086 # $p is a program and maybe a subcommand
    if "$HC_BIN"/$p --help | grep -q -- "-t, --threads N"; then ok "${name}_threads_help"
    else fail "${name}_threads_help" "$p --help lists no '-t, --threads N'"; fi
    # shellcheck disable=SC2086
    refuses "${name}_threads_zero" "bad value for -t: '0'" $p -t 0
    # shellcheck disable=SC2086
    refuses "${name}_threads_many" "bad value for -t: '257'" $p -t 257
done

# scripts/install-deps.sh: --help prints its usage (and installs nothing), a bad option is refused
if sh scripts/install-deps.sh --help >"$T/out" 2>"$T/err" && head -1 "$T/out" | grep -q "^usage: sh scripts/install-deps.sh" &&
   [ ! -s "$T/err" ]; then ok install_deps_help
else fail install_deps_help "$(head -c 200 "$T/err")"; fi
check_fails install_deps_bad_option "unknown option '--frobnicate'" sh scripts/install-deps.sh --frobnicate

if [ "$(sort -u "$T/versions" | wc -l)" -eq 1 ]; then ok one_version
else fail one_version "programs report different versions: $(sort -u "$T/versions" | tr '\n' ';')"; fi

finish

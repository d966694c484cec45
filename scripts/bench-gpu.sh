#!/bin/sh
# The GPU check (issue 33's table): prompt and decode speed of one synthetic
# ReLU model, in F16 and Q4_0, run
#   dense-CPU         hc-run -ngl 0 --dense
#   dense-CPU-scalar  the same with HC_KERNELS=scalar (the CPU's scalar kernels)
#   sparse-CPU        hc-run -ngl 0 --sparse --disable-gpu-index
#   hybrid-Bx         hc-solve --vram-budget B --ctx CTX -o IDX, then hc-run
#                     --gpu-index IDX --vram-budget B -c CTX, for each B in BUDGETS
#                     times the file (attention, norms, KV cache and head first,
#                     then hot FFN neurons; a budget that holds every neuron runs
#                     the whole model on the device)
#   hybrid-ffnF       the same for a BUDGETS entry ffnF: a budget of the dense part
#                     (hc-solve's report: attention, norms, head, KV cache) plus F
#                     times the FFN's bytes (issue 34's goal: with ffn0.5, decode
#                     >= 4x the dense CPU's; the script prints the ratio)
#   full-offload      hc-run -ngl 99 -c CTX (every layer, the head, every FFN neuron)
#   full-offload-inv  the same with --batch-invariant (each row as alone, --parallel's
#                     mode: products one row at a time, no tiles)
#   full-offload-kv16 full-offload with an f16 KV cache (-ctk f16 -ctv f16: llama.cpp's and
#                     PowerInfer's default; half the bytes attention reads)
#   default           hc-run -c CTX: no option asks for a placement, so hc-run prices one with
#                     hc-solve's cost model and makes it only where it pays (a GPU; never a CPU
#                     device), with a note when it says "offload: not chosen"
# with the device's copy bandwidth measured in the same run (bench_cldev).
# First the kernel table (bench_clops table: the backend's products for decode,
# a 64-token prompt and ffn_down_t, the hot rows, attention, and a small step's
# launch, on one layer's shapes N x FF, in GB/s of the bytes each must read and
# their share of the copy bandwidth); KERNELS=0 leaves it out. Where the quantized
# products use dp4a, their rows follow again with the bytes widened (HC_CL_DP4A=0).
# Then what the driver made of each kernel (bench_clops kernels: private bytes an
# item, which on a GPU are registers spilled and arrays kept in memory; local bytes;
# the largest group, which NVIDIA lowers for a kernel's registers); with BINARIES=DIR
# the programs' binaries are kept there (PTX on NVIDIA: PTX=DIR/backend.bin sh
# scripts/sass-loops.sh KERNEL... counts the card's own loops, registers and spills).
# VARIANTS="A.cl B.cl": the kernel table again with each file, a variant of
# runtime/opencl/kernels/backend.cl, built in its place (bench_clops' HC_CL_SOURCE):
# one run weighs several kernel changes on a GPU without a rebuild.
# Columns: prompt and decode tokens/s; the bytes hc-run put on the device
# (its "offload:" line plus the hot rows of its "hybrid:" line) and their share
# of the file's bytes (the KV cache counts too, so it may pass 100 %); the
# device's share of the FFN's activations (the sparse report's "device served";
# "all" when every FFN neuron is on the device); and, where every weight is on
# the device, its decode bandwidth: the weights read per token (hc-run -v) times
# decode tokens/s, against the copy bandwidth. Then, per type, full offload's
# decode speed over the scalar CPU's (issue 33's bar on PoCL: >= 70 %), and a
# note for every device run whose text differs from the dense CPU's (on a random
# synthetic model a near-tie may flip greedily: reported, not an error), and the dense
# CPU's, full offload's and full offload's with --batch-invariant prompt speed on a
# long prompt (LONG_BYTES of CORPUS, default 2200: about 512 tokens; -c and -b
# LONG_CTX, default 1024; issue 34's goal: 20x). With PROFILE=1 (the default), one
# more full-offload run with -v (its queue timed, so not among the rows) says where
# the device's time went: its "device transfers", "device kernels" (the most costly
# kernels and the time between kernels) and quantized products' "integer dots"
# lines, each prefixed by the type.
# docs/measurements.md ("The GPU check") records each run with its device.
#
# The model: hc-convert synth SHAPE --act relu --hot-fraction 0.05 --hot-skew 1,
# SHAPE by default issue 33's --dim 4096 --n-ff 11008 --layers 8 --heads 32
# --vocab 32000 --ctx 2048; hc-profile on 1024 tokens of CORPUS; hc-run -p PROMPT
# -n GEN --temp 0 -t THREADS -c CTX, best of REPS.
#
# Beside PowerInfer (the anchor of issue 34), when POWERINFER names its `main` (built from
# SJTU-IPADS/PowerInfer with -DLLAMA_CUBLAS=ON; never committed): on PI_MODEL, a PowerInfer
# model (PWRI, with predictors; hc-run reads the same file), or without it on the F16 model
# above made into one (hc-profile predictors --epochs PI_EPOCHS, default 10, on PI_TOKENS,
# default 1024, corpus tokens), for each of
# PI_BUDGETS (GiB; default "4 8" for a given PI_MODEL, 0.5 and 0.75 of the file for the one
# made here): for the one made here, hc-solve writes PI_MODEL.generated.gpuidx from its
# statistics (hc-profile, as above; PowerInfer's own solver then does not run); then
# PowerInfer's `main -m PI_MODEL --vram-budget B -p PROMPT -n GEN -t THREADS --temp 0 -c CTX`
# (which solves MODEL.generated.gpuidx when the file is missing), then hc-run on the same
# file and budget (it uses the same MODEL.generated.gpuidx), and hc / PowerInfer of prompt
# and decode tokens/s (PowerInfer's llama_print_timings lines). POWERINFER_LIBS: folders of
# its CUDA libraries (libcudart and libcublas 13, e.g. a PyTorch installation's
# nvidia/*/lib), added to its LD_LIBRARY_PATH alone.
#
# SMOKE=1: a small model (dim 256, 2 layers, CTX 128), 8 tokens and a small kernel
# table (256 x 704): checks the
# whole script on any OpenCL device (PoCL: tests/test_bench_gpu.sh) in seconds;
# its figures mean nothing.
# Environment: HC_BIN (default bin), O (make's build folder, default build),
# THREADS (default: online CPUs), TYPES ("f16 q4_0"), BUDGETS ("0.5 ffn0.5 0.75 1.5"),
# SHAPE (hc-convert synth's shape options), CTX (hc-solve --ctx and hc-run -c, 512;
# at most SHAPE's --ctx), GEN (64), REPS (1),
# COPY_MIB (bench_cldev's buffers, 1024), KERNEL_SHAPE (the table's "N FF POSITIONS
# REPS", default "4096 11008 2048 10"), KERNELS (1), CORPUS (default: the fixtures'
# tinystories-calib.txt, else models/synth-corpus.txt), SOLVE_OPTS (more hc-solve
# options), KEEP (keep the temporary folder), BINARIES (a folder for the kernels'
# binaries), VARIANTS, HC_OPENCL_DEVICE (the device), SCALAR (0:
# leave out the scalar CPU's row, minutes on a large model), LONG_BYTES (0: no long
# prompt), LONG_CTX, PROFILE (0: no -v run), PI_EPOCHS, PI_TOKENS, SMOKE.
set -eu
cd "$(dirname "$0")/.."
HC_BIN=${HC_BIN:-$(pwd)/bin}
O=${O:-build}
HC_FIXTURES=${HC_FIXTURES:-../shared/fixtures}
THREADS=${THREADS:-$(nproc)}
TYPES=${TYPES:-f16 q4_0}
BUDGETS=${BUDGETS:-0.5 ffn0.5 0.75 1.5}
REPS=${REPS:-1}
SMOKE=${SMOKE:-0}
SCALAR=${SCALAR:-1}
PI_EPOCHS=${PI_EPOCHS:-10}
PI_TOKENS=${PI_TOKENS:-1024}
if [ "$SMOKE" = 1 ]; then
    SHAPE=${SHAPE:-"--dim 256 --n-ff 688 --layers 2 --heads 4 --vocab 512 --ctx 256"}
    CTX=${CTX:-128}
    GEN=${GEN:-8}
    COPY_MIB=${COPY_MIB:-16}
    KERNEL_SHAPE=${KERNEL_SHAPE:-"256 704 128 2"}
    LONG_BYTES=${LONG_BYTES:-200}
    LONG_CTX=${LONG_CTX:-256}
    SOLVE_OPTS=${SOLVE_OPTS:---sync-us 0}   # a layer this small never pays for a synchronisation
else
    SHAPE=${SHAPE:-"--dim 4096 --n-ff 11008 --layers 8 --heads 32 --vocab 32000 --ctx 2048"}
    CTX=${CTX:-512}
    GEN=${GEN:-64}
    COPY_MIB=${COPY_MIB:-1024}
    SOLVE_OPTS=${SOLVE_OPTS:-}
    LONG_BYTES=${LONG_BYTES:-2200}
    LONG_CTX=${LONG_CTX:-1024}
fi
PROMPT="Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her \
friends and her dog, and every day"
T=$(mktemp -d "${TMPDIR:-/tmp}/hcgpu.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT INT TERM

make --no-print-directory -s O="$O" -j2 "$O/bench/bench_cldev" "$O/bench/bench_clops"
for p in hc-convert hc-quantize hc-profile hc-solve hc-run; do
    [ -x "$HC_BIN/$p" ] || { echo "bench-gpu: no $HC_BIN/$p (make)" >&2; exit 1; }
done
CORPUS=${CORPUS:-$HC_FIXTURES/tinystories-calib.txt}
[ -f "$CORPUS" ] || CORPUS=models/synth-corpus.txt

"$O/bench/bench_cldev" "$COPY_MIB" >"$T/dev.txt"
cat "$T/dev.txt"
if [ "${KERNELS:-1}" = 1 ]; then
    # shellcheck disable=SC2086  # the shape is four numbers
    "$O/bench/bench_clops" table ${KERNEL_SHAPE:-4096 11008 2048 10} | tail -n +2 | tee "$T/table.txt"
    if grep -q 'integer dots: dp4a' "$T/table.txt"; then
        echo "the quantized rows again with the bytes widened (HC_CL_DP4A=0), to weigh dp4a in the same run:"
        # shellcheck disable=SC2086
        HC_CL_DP4A=0 "$O/bench/bench_clops" table ${KERNEL_SHAPE:-4096 11008 2048 10} | grep -E '^(mv|mm|mt|hot) Q'
    fi
    echo
    for v in ${VARIANTS:-}; do
        echo "the kernel table again with $v in place of kernels/backend.cl:"
        # shellcheck disable=SC2086
        HC_CL_SOURCE=$v "$O/bench/bench_clops" table ${KERNEL_SHAPE:-4096 11008 2048 10} | tail -n +5
        echo
    done
    [ -z "${BINARIES:-}" ] || mkdir -p "$BINARIES"
    # a diagnostic: its failure must not end a run on a lent machine
    "$O/bench/bench_clops" kernels ${BINARIES:+"$BINARIES"} || echo "bench-gpu: bench_clops kernels failed (above)"
    echo
fi
COPY=$(sed -n 's/^copy: \([0-9.]*\) GB\/s.*/\1/p' "$T/dev.txt")
echo "model: synth $SHAPE, ReLU, hot fraction 0.05, skew 1; $THREADS threads; context $CTX; prompt $PROMPT"
echo "       ... ($GEN tokens generated, best of $REPS)"

# run NAME ARGS: hc-run REPS times (stdout in $T/NAME.txt, stderr in $T/NAME.err), then
# "prompt_tps decode_tps device_bytes served every weights_per_token" from its stderr:
# the prompt:/generation: lines (best of REPS), the offload: and hybrid: lines (the
# bytes on the device), the sparse report's "device served" (else "-"), every = 1 when
# every layer and every FFN neuron is on the device, and -v's "weights read per token" (else 0).
run() {
    name=$1; shift
    : >"$T/$name.err"
    for r in $(seq "$REPS"); do
        "$HC_BIN/hc-run" -p "$PROMPT" -n "$GEN" --temp 0 -t "$THREADS" -c "$CTX" "$@" \
            >"$T/$name.txt" 2>>"$T/$name.err"
    done
    awk 'function bytes(v, u) { return v * (u == "KiB" ? 1024 : u == "MiB" ? 1048576 : u == "GiB" ? 1073741824 : 1) }
         function tps(s) { sub(/^\(/, "", s); return s + 0 }
         /^prompt:/ { t = tps($(NF - 1)); if (t > pp) pp = t }
         /^generation:/ { t = tps($(NF - 1)); if (t > tg) tg = t }
         /^weights read per token:/ { wpt = $5 }
         /^offload: / { s = $0; sub(/.* on the device, /, "", s); split(s, a, " "); off = bytes(a[1], a[2])
                        if ($2 == $4 && /every FFN neuron/) every = 1 }   # N of N layers
         /^hybrid: .* neurons on the device \(/ { v = $(NF - 1); u = $NF; sub(/^\(/, "", v); sub(/\)$/, "", u)
                                                 hot = bytes(v, u) }
         /^hybrid: .* 0 of [0-9]+ neurons on the device/ { sv = 0 }
         /device served/ { sv = $0; sub(/.*device served /, "", sv); sub(/%.*/, "", sv) }
         END { printf "%s %s %.0f %s %d %.0f\n", pp + 0, tg + 0, off + hot, (every ? "all" : sv == "" ? "-" : sv),
                      every, wpt + 0 }' "$T/$name.err"
}

printf '%-6s %-17s %10s %10s %9s %7s %7s %10s %7s\n' type run "prompt t/s" "decode t/s" "dev MiB" "dev %" \
    "served" "dec GB/s" "% copy"
# row NAME ARGS: run NAME with hc-run ARGS, then its line of the table for $type (file
# size $size; WPT, the weights read per token, from the dense-CPU row's -v)
row() {
    name=$1; shift
    r=$(run "$name" "$@") || { echo "bench-gpu: $name failed: $(tail -n 3 "$T/$name.err")" >&2; exit 1; }
    set -- $r
    [ "$name" != dense-CPU ] || WPT=$6
    awk -v t="$type" -v n="$name" -v pp="$1" -v tg="$2" -v db="$3" -v sv="$4" -v every="$5" -v wpt="$WPT" \
        -v size="$size" -v copy="$COPY" 'BEGIN {
        rate = (every == 1 && wpt > 0) ? sprintf("%.1f", wpt * tg / 1e9) : "-"
        pct = (rate == "-" || copy == "") ? "-" : sprintf("%.1f", 100 * rate / copy)
        printf "%-6s %-17s %10.1f %10.1f %9.1f %7.1f %7s %10s %7s\n", t, n, pp, tg, db / 1048576,
               100 * db / size, sv, rate, pct }'
    echo "$2" >"$T/$name.decode"
}
# same_text NAME: a note when run NAME's text differs from the dense CPU's, saying
# which other CPU runs it equals (a near-tie that the dense CPU's SIMD kernels flip
# shows as equal to the scalar and sparse CPU's)
same_text() {
    cmp -s "$T/dense-CPU.txt" "$T/$1.txt" && return
    same=
    cmp -s "$T/dense-CPU-scalar.txt" "$T/$1.txt" && same="$same, equals the dense-CPU-scalar's"
    cmp -s "$T/sparse-CPU.txt" "$T/$1.txt" && same="$same, equals the sparse CPU's"
    echo "  ($type $1: text differs from the dense CPU's${same:-, and from the scalar and sparse CPU's})"
}

# ffn_budget F: the bytes of the dense part as hc-solve counts it at CTX (its report's dense_total)
# plus F times the FFN's (n_ff neurons of neuron_bytes a layer), for $M
ffn_budget() {
    "$HC_BIN/hc-solve" -m "$M" -s "$T/s-$type.gguf" --vram-budget "$((size * 2))" --ctx "$CTX" --greedy --json \
        -o "$T/probe.gpuidx" 2>/dev/null |
        awk -v f="$1" '/"dense_total":/ { d = $2 + 0 } /"n_ff":/ { n = $2 + 0 } /"neuron_bytes":/ { ffn += n * $2 }
                       END { printf "%.0f", d + f * ffn }'
}

# long_prompt: the dense CPU's and full offload's speed on a long prompt (LONG_BYTES of
# CORPUS, about 512 tokens; -n 1), and full offload's over the dense CPU's (issue 34's goal: 20x)
long_prompt() {
    [ "$LONG_BYTES" -gt 0 ] || return 0
    head -c "$LONG_BYTES" "$CORPUS" >"$T/long.txt"
    for how in dense-CPU full-offload full-offload-inv; do
        case $how in dense-CPU) a="-ngl 0 --dense" ;; full-offload) a="-ngl 99" ;; *) a="-ngl 99 --batch-invariant" ;; esac
        # shellcheck disable=SC2086  # a is options
        "$HC_BIN/hc-run" -m "$M" -f "$T/long.txt" -n 1 --temp 0 -t "$THREADS" -c "$LONG_CTX" -b "$LONG_CTX" $a \
            >/dev/null 2>"$T/long-$how.err" || { echo "bench-gpu: long prompt, $how: $(tail -n 3 "$T/long-$how.err")" >&2; exit 1; }
    done
    awk -v t="$type" '/^prompt:/ { n[FILENAME] = $2; v[FILENAME] = $(NF - 1); sub(/^\(/, "", v[FILENAME]) }
        END { c = v[ARGV[1]] + 0; g = v[ARGV[2]] + 0; i = v[ARGV[3]] + 0
              printf "%-6s long prompt (%s tokens): dense-CPU %.1f t/s, full-offload %.1f t/s: %.1fx (goal >= 20x); " \
                     "--batch-invariant %.1f t/s: %.1fx\n", t, n[ARGV[1]], c, g, (c > 0 ? g / c : 0), i, (c > 0 ? i / c : 0) }' \
        "$T/long-dense-CPU.err" "$T/long-full-offload.err" "$T/long-full-offload-inv.err"
}

"$HC_BIN/hc-convert" synth -o "$T/m-f16.gguf" $SHAPE --act relu --type f16 --hot-fraction 0.05 --hot-skew 1 \
    --seed 1 >/dev/null 2>&1
for type in $TYPES; do
    M=$T/m-$type.gguf
    [ "$type" = f16 ] || "$HC_BIN/hc-quantize" -q -t "$THREADS" "$T/m-f16.gguf" "$M" "$(echo "$type" | tr a-z A-Z)"
    "$HC_BIN/hc-profile" -m "$M" -f "$CORPUS" -o "$T/s-$type.gguf" --tokens 1024 -c 256 -t "$THREADS" >/dev/null 2>&1
    size=$(wc -c <"$M")
    row dense-CPU -m "$M" -ngl 0 --dense -v
    [ "$SCALAR" = 0 ] || (export HC_KERNELS=scalar; row dense-CPU-scalar -m "$M" -ngl 0 --dense)
    row sparse-CPU -m "$M" -ngl 0 --sparse --disable-gpu-index
    for b in $BUDGETS; do
        case $b in
        ffn*) name=hybrid-$b bytes=$(ffn_budget "${b#ffn}") ;;
        *) name=hybrid-${b}x bytes=$(awk -v s="$size" -v b="$b" 'BEGIN { printf "%.0f", s * b }') ;;
        esac
        if ! "$HC_BIN/hc-solve" -m "$M" -s "$T/s-$type.gguf" --vram-budget "$bytes" --ctx "$CTX" $SOLVE_OPTS \
                -o "$T/i.gpuidx" >/dev/null 2>"$T/solve.err"; then
            printf '%-6s %-17s %s\n' "$type" "$name" "skipped: $(sed 's/.*: --vram-budget/--vram-budget/' "$T/solve.err")"
            continue
        fi
        row "$name" -m "$M" --gpu-index "$T/i.gpuidx" --vram-budget "$bytes"
        same_text "$name"
    done
    row full-offload -m "$M" -ngl 99
    row full-offload-inv -m "$M" -ngl 99 --batch-invariant   # each row as alone (--parallel's mode): mv_T, no tiles
    row full-offload-kv16 -m "$M" -ngl 99 -ctk f16 -ctv f16
    row default -m "$M"   # no option asking for a placement: hc-run's own choice, priced (issue 34)
    grep -q '^offload: not chosen' "$T/default.err" && echo "  ($type default: $(grep '^offload: not chosen' "$T/default.err"))"
    grep -q '^offload: \([0-9]*\) of \1 layers.*every FFN neuron' "$T/full-offload.err" ||
        echo "  ($type full-offload: $(grep '^offload:' "$T/full-offload.err" || echo 'no offload line'))"
    same_text full-offload
    for f in "$T"/hybrid-ffn*.decode; do
        [ -f "$f" ] || continue
        name=${f##*/}
        awk -v t="$type" -v n="${name%.decode}" -v h="$(cat "$f")" -v c="$(cat "$T/dense-CPU.decode")" 'BEGIN {
            printf "%-6s %s decode / dense-CPU decode: %.1fx (issue 34 goal with ffn0.5: >= 4x)\n", t, n,
                   (c > 0 ? h / c : 0) }'
        rm -f "$f"
    done
    [ "$SCALAR" = 0 ] ||
        awk -v t="$type" -v f="$(cat "$T/full-offload.decode")" -v s="$(cat "$T/dense-CPU-scalar.decode")" 'BEGIN {
            printf "%-6s full-offload decode / dense-CPU-scalar decode: %.0f %% (issue 33 bar on PoCL: >= 70 %%)\n",
                   t, (s > 0 ? 100 * f / s : 0) }'
    long_prompt
    if [ "${PROFILE:-1}" = 1 ]; then
        "$HC_BIN/hc-run" -m "$M" -ngl 99 -v -p "$PROMPT" -n "$GEN" --temp 0 -t "$THREADS" -c "$CTX" \
            >/dev/null 2>"$T/profile.err" || true
        grep -E '^(device transfers|device kernels|opencl: the quantized)' "$T/profile.err" | sed "s/^/$type   /"
    fi
    [ "$type" = f16 ] || rm -f "$M"
done
# pi_tps FILE: "prompt_tps decode_tps" of PowerInfer's llama_print_timings lines
pi_tps() {
    awk '/llama_print_timings: *prompt eval time/ { p = $(NF - 3) }
         /llama_print_timings: *eval time/ { g = $(NF - 3) }
         END { printf "%s %s\n", p + 0, g + 0 }' "$1"
}
if [ -n "${POWERINFER:-}" ]; then
    [ -x "$POWERINFER" ] || { echo "bench-gpu: POWERINFER: no program $POWERINFER" >&2; exit 1; }
    PI_STATS=
    if [ -z "${PI_MODEL:-}" ]; then
        PI_MODEL=$T/pi-f16.gguf PI_STATS=$T/s-pi.gguf
        { "$HC_BIN/hc-profile" predictors -m "$T/m-f16.gguf" -f "$CORPUS" -o "$PI_MODEL" --epochs "$PI_EPOCHS" \
              --tokens "$PI_TOKENS" -c 256 -t "$THREADS" &&
          "$HC_BIN/hc-profile" -m "$PI_MODEL" -f "$CORPUS" -o "$PI_STATS" --tokens 1024 -c 256 -t "$THREADS"; } \
            >/dev/null 2>"$T/pred.err" || { echo "bench-gpu: hc-profile failed: $(tail -n 3 "$T/pred.err")" >&2; exit 1; }
        PI_BUDGETS=${PI_BUDGETS:-$(awk -v s="$(wc -c <"$PI_MODEL")" 'BEGIN { printf "%.3f %.3f", s * 0.5 / 1073741824,
                                                                           s * 0.75 / 1073741824 }')}
    fi
    [ -f "$PI_MODEL" ] || { echo "bench-gpu: PI_MODEL: no file $PI_MODEL" >&2; exit 1; }
    printf '%-6s %-17s %10s %10s %10s %10s %7s %7s\n' budget run "PI pp t/s" "PI tg t/s" "hc pp t/s" "hc tg t/s" \
        "hc/PI pp" "hc/PI tg"
    for b in ${PI_BUDGETS:-4 8}; do
        bytes=$(awk -v b="$b" 'BEGIN { printf "%.0f", b * 1073741824 }')
        if [ -n "$PI_STATS" ] && ! "$HC_BIN/hc-solve" -m "$PI_MODEL" -s "$PI_STATS" --vram-budget "$bytes" --ctx "$CTX" \
                $SOLVE_OPTS -o "$PI_MODEL.generated.gpuidx" >/dev/null 2>"$T/solve.err"; then
            printf '%-6s %-17s %s\n' "${b}G" "hc vs PowerInfer" "skipped: $(sed 's/.*: --vram-budget/--vram-budget/' "$T/solve.err")"
            continue
        fi
        LD_LIBRARY_PATH=${POWERINFER_LIBS:+$POWERINFER_LIBS:}${LD_LIBRARY_PATH:-} \
            "$POWERINFER" -m "$PI_MODEL" --vram-budget "$b" -p "$PROMPT" -n "$GEN" -t "$THREADS" --temp 0 -c "$CTX" \
            >"$T/pi.txt" 2>"$T/pi.err" || { echo "bench-gpu: PowerInfer failed: $(tail -n 3 "$T/pi.err")" >&2; exit 1; }
        r=$(run "hc-pi-$b" -m "$PI_MODEL" --vram-budget "$bytes") ||
            { echo "bench-gpu: hc-run failed: $(tail -n 3 "$T/hc-pi-$b.err")" >&2; exit 1; }
        set -- $(pi_tps "$T/pi.err") $r
        awk -v b="$b" -v pp="$1" -v tg="$2" -v hp="$3" -v ht="$4" 'BEGIN {
            printf "%-6s %-17s %10.1f %10.1f %10.1f %10.1f %7.2f %7.2f\n", b "G", "hc vs PowerInfer", pp, tg, hp, ht,
                   (pp > 0 ? hp / pp : 0), (tg > 0 ? ht / tg : 0) }'
    done
fi
echo "dev MiB: what hc-run put on the device (offload: line, plus the hybrid: line's hot rows);"
echo "dev %: that against the file's bytes (the KV cache at context $CTX counts, so it may pass 100);"
echo "served: the device's share of the FFN's non-zero activations (all: every FFN neuron there);"
echo "dec GB/s: weights read per token (hc-run -v) x decode t/s, where every weight is on the device;"
echo "% copy: that against the device's copy bandwidth above."

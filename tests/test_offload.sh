#!/bin/sh
# The model on an OpenCL device (issue 33): for every family checkpoint of
# $HC_FIXTURES/hf-tiny and every weight type the device takes (F32, F16,
# BF16, Q8_0, Q4_0; INT4-GPTQ for one family), hc-run's logits with the whole
# model on the device (-ngl 99: prompt batched, and token by token with
# -b 1) and with only its first layer there (-ngl 1: the residual stream
# crosses over) are the CPU's within 1e-4 of the largest logit, and with
# --batch-invariant (F32) the batched prompt's logits are -b 1's bit for bit;
# the llama2.c model's greedy text on the device is run.c's. On PoCL here; on a
# machine without an OpenCL device every case is a skip.
. tests/lib.sh
C="$HC_BIN/hc-convert"
Q="$HC_BIN/hc-quantize"
R="$HC_BIN/hc-run"
H="$HC_FIXTURES/hf-tiny"
if [ ! -d "$H" ]; then skip offload "no $H"; finish; fi
if ! command -v python3 >/dev/null; then skip offload "no python3"; finish; fi
if ! "$R" --list-devices >/dev/null 2>&1; then skip offload "no OpenCL device"; finish; fi

# batch_invariant NAME MODEL: with --batch-invariant the whole model on the
# device gives the prompt's logits batched with the bits of -b 1 (each row
# its own bits whatever the batch: --parallel's texts are their plain runs')
batch_invariant() {
    p="The dog ran to the park and found a big red ball."
    if "$R" -m "$2" -p "$p" --logits -n 0 -t 2 -ngl 99 --batch-invariant >"$T/all.txt" 2>"$T/err" &&
       "$R" -m "$2" -p "$p" --logits -n 0 -t 2 -ngl 99 --batch-invariant -b 1 >"$T/one.txt" 2>>"$T/err"; then
        if cmp -s "$T/all.txt" "$T/one.txt"; then ok "offload_batch_invariant_$1"
        else fail "offload_batch_invariant_$1" "batched logits differ from -b 1's"; fi
    else
        fail "offload_batch_invariant_$1" "$(head -c 300 "$T/err")"
    fi
}

# placements NAME MODEL: the CPU's logits, then each placement's against them
placements() {
    name=$1; m=$2; p="The dog ran to the park and found a big red ball."
    if ! "$R" -m "$m" -p "$p" --logits -n 0 -t 2 -ngl 0 >"$T/cpu.txt" 2>"$T/err"; then
        fail "offload_$name" "cpu run: $(head -c 300 "$T/err")"; return
    fi
    for run in "full:-ngl 99:of the output head, every FFN neuron" "full_decode:-ngl 99 -b 1:every FFN neuron" \
               "first_layer:-ngl 1:offload: 1 of "; do
        case_name=${run%%:*}; rest=${run#*:}; opts=${rest%%:*}; want=${rest#*:}
        # shellcheck disable=SC2086
        if ! "$R" -m "$m" -p "$p" --logits -n 0 -t 2 $opts >"$T/dev.txt" 2>"$T/err"; then
            fail "offload_${case_name}_$name" "$(head -c 300 "$T/err")"
        elif ! grep -q "^offload: " "$T/err" || ! grep -q "${want#of }" "$T/err"; then
            fail "offload_${case_name}_$name" "not placed as asked: $(head -c 400 "$T/err")"
        else
            same_logits "offload_${case_name}_$name" "$T/cpu.txt" "$T/dev.txt" 1e-4
        fi
    done
}

for d in "$H"/*/; do
    f=$(basename "$d")
    [ -f "$d/ref.json" ] || continue
    if ! "$C" hf "$d" -o "$T/$f-f32.gguf" --outtype f32 >/dev/null 2>"$T/err"; then
        fail "offload_$f" "convert: $(head -c 300 "$T/err")"; continue
    fi
    placements "$f-f32" "$T/$f-f32.gguf"
    batch_invariant "$f-f32" "$T/$f-f32.gguf"
    for t in f16 bf16 q8_0 q4_0; do
        if "$Q" -q "$T/$f-f32.gguf" "$T/$f-$t.gguf" "$t" >/dev/null 2>"$T/err"; then
            placements "$f-$t" "$T/$f-$t.gguf"
        else
            fail "offload_$f-$t" "quantize: $(head -c 300 "$T/err")"
        fi
        rm -f "$T/$f-$t.gguf"
    done
    [ "$f" = llama-relu ] || rm -f "$T/$f-f32.gguf"
done

CAL=$HC_FIXTURES/tinystories-calib.txt
if [ -f "$CAL" ] && "$Q" -q "$T/llama-relu-f32.gguf" "$T/llama-relu-gptq.gguf" GPTQ --calib "$CAL" --ctx 64 \
       --calib-tokens 256 --group-size 32 >/dev/null 2>"$T/err"; then
    placements llama-relu-gptq "$T/llama-relu-gptq.gguf"
elif [ -f "$CAL" ]; then fail offload_gptq "$(head -c 300 "$T/err")"
else skip offload_gptq "no $CAL"; fi

# llama2.c's stories260K: the whole model on the device says what run.c says
S=$HC_FIXTURES/stories260K.gguf
G=$HC_FIXTURES/stories260K-greedy200.txt
if [ -f "$S" ] && [ -f "$G" ]; then
    if "$R" -m "$S" -p "Once upon a time" -n 199 --temp 0 -t 2 -ngl 99 >"$T/g.txt" 2>"$T/err" &&
       grep -q "every FFN neuron" "$T/err" && python3 - "$G" "$T/g.txt" >"$T/why" <<'PY'
import sys
ref, got = open(sys.argv[1]).read(), open(sys.argv[2]).read()
n = len(got)
print("first difference at byte %d of %d" % (next((i for i in range(min(n, len(ref))) if ref[i] != got[i]), min(n, len(ref))), n))
# -n 199 runs past the reference's end (its 200 steps count the prompt's):
# the texts agree when one starts the other, over more than 400 bytes
sys.exit(0 if min(n, len(ref)) > 400 and (ref.startswith(got) or got.startswith(ref)) else 1)
PY
    then ok offload_stories260K_greedy_text
    else fail offload_stories260K_greedy_text "$(cat "$T/why" 2>/dev/null) $(head -c 300 "$T/err")"; fi
else
    skip offload_stories260K_greedy_text "no $S or $G"
fi
finish

#!/bin/sh
# hc-profile predictors: command line and bad inputs (one line, exit 1, no output file).
. tests/lib.sh
P="$HC_BIN/hc-profile"
"$HC_BIN/hc-convert" synth -o "$T/m.gguf" --dim 32 --n-ff 64 --layers 1 --act relu --hot-fraction 0.2 >/dev/null
awk 'BEGIN { for (i = 0; i < 600; i++) printf "the cat sat on the mat %d\n", i }' >"$T/c.txt"

check help sh -c "'$P' predictors --help | grep -q -- --rank-auto"
check help_lists_predictors sh -c "'$P' --help | grep -q 'hc-profile predictors'"
check_fails no_output "no output file" "$P" predictors -m "$T/m.gguf" -f "$T/c.txt"
check_fails no_model "need -m MODEL" "$P" predictors -f "$T/c.txt" -o "$T/o.gguf"
check_fails bad_recall "bad value for --recall" "$P" predictors -m "$T/m.gguf" -f "$T/c.txt" -o "$T/o.gguf" --recall 1.5
check_fails rank_and_auto "do not go together" "$P" predictors -m "$T/m.gguf" -f "$T/c.txt" -o "$T/o.gguf" --rank 8 --rank-auto
check_fails bad_type "expected f32 or f16" "$P" predictors -m "$T/m.gguf" -f "$T/c.txt" -o "$T/o.gguf" --pred-type q4_0
check_fails missing_model "nope.gguf" "$P" predictors -m "$T/nope.gguf" -f "$T/c.txt" -o "$T/o.gguf"
check_fails missing_corpus "nope.txt" "$P" predictors -m "$T/m.gguf" -f "$T/nope.txt" -o "$T/o.gguf"
check_fails too_few_windows "too few to hold out" "$P" predictors -m "$T/m.gguf" -f "$T/c.txt" -o "$T/o.gguf" --tokens 300 -c 200
check_fails tiny_mem "keeps no" "$P" predictors -m "$T/m.gguf" -f "$T/c.txt" -o "$T/o.gguf" --mem 100
if [ -e "$T/o.gguf" ]; then fail no_partial_output "$T/o.gguf exists after errors"; else ok no_partial_output; fi
check_fails sparse_input "already a sparse model" sh -c "'$P' predictors -m '$T/m.gguf' -f '$T/c.txt' -o '$T/s.gguf' --epochs 1 -c 64 >/dev/null && '$P' predictors -m '$T/s.gguf' -f '$T/c.txt' -o '$T/s2.gguf'"
# a model whose activation is never exactly 0 (SiLU, GELU) and that is not calibrated:
# refused by name, unless --act-threshold defines "active"
"$HC_BIN/hc-convert" synth -o "$T/silu.gguf" --dim 32 --n-ff 64 --layers 1 --act silu >/dev/null
check_fails silu_uncalibrated "predictors need a ReLU model; this one's FFN activation is SiLU" \
    "$P" predictors -m "$T/silu.gguf" -f "$T/c.txt" -o "$T/o.gguf" --epochs 1 -c 64
check silu_act_threshold "$P" predictors -m "$T/silu.gguf" -f "$T/c.txt" -o "$T/silu.sparse.gguf" --epochs 1 -c 64 \
    --act-threshold 0.01
if [ -d "$HC_FIXTURES/hf-tiny/falcon" ] &&
   "$HC_BIN/hc-convert" hf "$HC_FIXTURES/hf-tiny/falcon" -o "$T/falcon.gguf" --outtype f32 >/dev/null 2>&1; then
    check_fails gelu_falcon "FFN activation is GELU, never exactly 0" \
        "$P" predictors -m "$T/falcon.gguf" -f "$T/c.txt" -o "$T/o.gguf" --epochs 1 -c 64
else
    skip gelu_falcon "no $HC_FIXTURES/hf-tiny/falcon"
fi
if [ -e "$T/o.gguf" ]; then fail no_output_when_refused "$T/o.gguf exists"; else ok no_output_when_refused; fi
# --rank-auto, --pred-type f16 and --svg run end to end; the report has one line per layer
check rank_auto sh -c "'$P' predictors -m '$T/m.gguf' -f '$T/c.txt' -o '$T/a.gguf' --rank-auto --epochs 2 -c 64 --pred-type f16 --svg '$T/a.svg' >'$T/a.txt' && grep -q '^    0 ' '$T/a.txt' && grep -q '</svg>' '$T/a.svg' && '$HC_BIN/hc-gguf' check '$T/a.gguf'"
finish

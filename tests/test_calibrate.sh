#!/bin/sh
# hc-profile calibrate end to end on stories260K: the command line, bad
# inputs (one line, exit 1, no output), and hc-run applying the calibrated
# thresholds: the skipped fraction hc-run -v measures per layer on the
# calibration corpus is calibrate's, the FFN bytes are reported, --dense and
# --sparse-threshold override.
. tests/lib.sh
need_programs calibrate hc-profile hc-run
P="$HC_BIN/hc-profile"
R="$HC_BIN/hc-run"
M="$HC_FIXTURES/stories260K.gguf"
check help sh -c "'$P' calibrate --help | grep -q -- --target-sparsity && '$P' --help | grep -q 'hc-profile calibrate'"
if [ ! -f "$M" ] || [ ! -f "$HC_FIXTURES/tinystories-calib.txt" ]; then skip calibrate_e2e "no fixtures"; finish; fi
head -c 12000 "$HC_FIXTURES/tinystories-calib.txt" >"$T/c.txt"
C="-m $M -f $T/c.txt -c 128"

# shellcheck disable=SC2086 # $C is a list of options
{
check_fails no_target "no --target-sparsity" "$P" calibrate $C -o "$T/o.gguf"
check_fails target_one "bad value for --target-sparsity: '1'" "$P" calibrate $C -o "$T/o.gguf" --target-sparsity 1
check_fails bad_criterion "bad value for --criterion: 'up'" "$P" calibrate $C -o "$T/o.gguf" --target-sparsity 0.5 --criterion up
check_fails same_output "same file as the input" "$P" calibrate $C -o "$M" --target-sparsity 0.5
check_fails missing_corpus "nope.txt" "$P" calibrate -m "$M" -f "$T/nope.txt" -o "$T/o.gguf" --target-sparsity 0.5
head -c 2000 "$T/c.txt" >"$T/short.txt"
check_fails short_corpus "need at least 2048" "$P" calibrate -m "$M" -f "$T/short.txt" -c 2048 -o "$T/o.gguf" --target-sparsity 0.5
if [ -e "$T/o.gguf" ]; then fail no_partial_output "$T/o.gguf exists after errors"; else ok no_partial_output; fi

for crit in contribution gate; do
    check "calibrate_$crit" sh -c "'$P' calibrate $C -o '$T/$crit.gguf' --target-sparsity 0.4 --criterion $crit -t 2 >'$T/$crit.txt'"
    "$R" -m "$T/$crit.gguf" --perplexity "$T/c.txt" -c 128 -v >"$T/$crit.ppl" 2>"$T/$crit.err"
    # calibrate's "skipped" column (fraction) against hc-run's per-layer percentage (2 decimals)
    if awk -v crit="$crit" '
        FNR == NR { if ($1 ~ /^[0-9]+$/ && NF == 4) want[$1] = $4 * 100; next }
        /^sparse: layer/ { l = $3 + 0; got = $5 + 0; n++
                           if (!(l in want) || got - want[l] > 0.006 || want[l] - got > 0.006) bad = bad " layer " l ": " got " vs " want[l] }
        END { if (n != 5 || bad != "") { print crit ": " n " layers" bad; exit 1 } }' "$T/$crit.txt" "$T/$crit.err" >"$T/cmp"
    then ok "run_skips_calibrated_$crit"; else fail "run_skips_calibrated_$crit" "$(cat "$T/cmp")"; fi
    check "run_reports_bytes_$crit" grep -q "all layers: skipped  40.*FFN weights read .*/token of 645.0 KiB" "$T/$crit.err"
done
check contribution_line grep -q "calibrated per-layer thresholds on |act(gate)·up|·‖down‖" "$T/contribution.err"
check gate_line grep -q "calibrated per-layer thresholds on |act(gate)|" "$T/gate.err"
# the model copy holds the keys; --dense is the original model, --sparse-threshold overrides
check keys sh -c "'$HC_BIN/hc-gguf' dump '$T/gate.gguf' | grep -q 'hotcold.sparse_thresholds' && '$HC_BIN/hc-gguf' dump '$T/gate.gguf' | grep -q 'hotcold.sparse_criterion.*gate'"
"$R" -m "$M" --perplexity "$T/c.txt" -c 128 >"$T/dense.ppl" 2>/dev/null
"$R" -m "$T/gate.gguf" --perplexity "$T/c.txt" -c 128 --dense >"$T/off.ppl" 2>"$T/off.err"
check dense_is_original cmp "$T/dense.ppl" "$T/off.ppl"
check dense_no_sparse_line sh -c "! grep -q '^sparse' '$T/off.err'"
"$R" -m "$T/gate.gguf" --perplexity "$T/c.txt" -c 128 --sparse-threshold 0.1 >"$T/g.ppl" 2>"$T/g.err"
check threshold_overrides grep -q "SiLU: skips |silu(gate)| < threshold, threshold 0.1" "$T/g.err"
# predictors of a calibrated model learn its calibrated active set: true sparsity about S = 0.4
check predictors_calibrated sh -c "'$P' predictors -m '$T/contribution.gguf' -f '$T/c.txt' -c 128 --epochs 2 -o '$T/p.gguf' >'$T/p.txt' 2>&1"
if awk '$1 ~ /^[0-9]+$/ && NF >= 6 { n++; if ($6 < 0.35 || $6 > 0.45) bad = 1 } END { exit !(n == 5 && !bad) }' "$T/p.txt"
then ok predictors_true_sparsity; else fail predictors_true_sparsity "$(cat "$T/p.txt")"; fi
"$R" -m "$T/p.gguf" --perplexity "$T/c.txt" -c 128 >/dev/null 2>"$T/p.err"
check predictors_run grep -q "calibrated per-layer thresholds on .*, candidates chosen by the predictor" "$T/p.err"
# the sweep: table, JSON and SVG
head -c 6000 "$T/c.txt" >"$T/held.txt"
check sweep sh -c "HC_BIN='$HC_BIN' sh scripts/sweep-sparsity.sh -m '$M' -f '$T/c.txt' -e '$T/held.txt' -c 128 -s 0.5 -k 'gate contribution predicted' -P '--epochs 2' -d '$T/sw' --json '$T/s.json' --svg '$T/s.svg' >'$T/s.md' 2>/dev/null"
check sweep_table grep -q '^| 0.5 | .* skipped, .* bytes | .* skipped, .* bytes | .* skipped, .* bytes |$' "$T/s.md"
check sweep_json python3 -c "import json, sys; d = json.load(open('$T/s.json')); sys.exit(d['model'] != '$M' or len(d['rows']) != 6 or d['rows'][4]['criterion'] != 'contribution')"
# the predictors skip on top of the calibrated rule: at least the exact contribution's fraction
check sweep_predicted_skips_more python3 -c "import json, sys; r = json.load(open('$T/s.json'))['rows']; sys.exit(not (r[5]['criterion'] == 'predicted' and r[5]['skipped'] >= r[4]['skipped'] - 0.02))"
# the bytes of a predictor row are hc-run's "FFN weights read ... (Z%)" (not its predicted-active %)
"$R" -m "$T/sw/predicted-0.5-r0.95.gguf" --perplexity "$T/held.txt" -c 128 2>&1 >/dev/null |
    sed -n 's/^sparse: all layers: .*(\([0-9.]*\)%).*/\1/p' >"$T/pb.txt"
check sweep_predicted_bytes python3 -c "import json, sys; r = json.load(open('$T/s.json'))['rows'][5]; sys.exit(abs(r['ffn_bytes_pct'] - float(open('$T/pb.txt').read())) > 1e-9)"
check sweep_svg sh -c "grep -c '<polyline' '$T/s.svg' | grep -qx 3 && grep -q 'perplexity (held-out)' '$T/s.svg' && grep -q 'skipped FFN neurons' '$T/s.svg'"
# the recall chosen for a target perplexity: a loose target takes the lowest recall of the list
# (most skipped) and writes its model; one the calibrated thresholds already miss is refused
CR="sh scripts/choose-recall.sh -m $T/contribution.gguf -f $T/c.txt -e $T/held.txt -c 128 -P --epochs=2 -r"
check choose_recall sh -c "HC_BIN='$HC_BIN' $CR '0.5 0.99' --target-ppl-increase 100000 -o '$T/chosen.gguf' >'$T/cr.md' 2>'$T/cr.err'"
check choose_recall_lowest grep -q '^chosen: recall 0.5: perplexity' "$T/cr.md"
check choose_recall_rows grep -q '^| 0.5 | 0\.[0-9]* | [0-9.]*% | [0-9.]*% | [0-9.]*% | [0-9.]* (+' "$T/cr.md"
check choose_recall_model sh -c "'$HC_BIN/hc-gguf' dump '$T/chosen.gguf' | grep -q 'blk.0.fc1'"
if HC_BIN="$HC_BIN" $CR '0.5 0.99' --target-ppl-increase 0.0001 -o "$T/none.gguf" >/dev/null 2>"$T/cr0.err"; then
    fail choose_recall_unreachable "succeeded"
elif grep -q "calibrated thresholds alone give perplexity" "$T/cr0.err" && [ ! -e "$T/none.gguf" ]; then
    ok choose_recall_unreachable
else fail choose_recall_unreachable "$(cat "$T/cr0.err")"; fi
}
finish

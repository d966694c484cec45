#!/bin/sh
# Calibrated sparsity of a SiLU model at S = 0.5 (docs/design/sparse-hybrid.md,
# "Calibrated sparsity for SiLU models"): FFN time and FFN weight bytes read per
# generated token for the dense FFN, the per-layer gate quantile, the exact
# contribution criterion and the predicted contribution set, against the ideal
# of the bytes actually needed: the gate, up and down rows of the neurons the
# run kept and nothing else, (1 - skipped) of the dense bytes.
#   HC_BIN=bin [HC_FIXTURES=../shared/fixtures] [THREADS=1] [GEN=256] [MODEL=M.gguf] sh scripts/bench-silu.sh
# MODEL: another SiLU model (default stories260K.gguf of the fixtures).
# The thresholds are calibrated on the first CALIB_BYTES (default 60000) bytes of tinystories-calib.txt;
# the predictors are trained there too (--recall 0.9). Generation is greedy from
# the prompt "Once upon a time", one token per step (the bytes of each token).
set -eu
HC_BIN=${HC_BIN:-bin}
HC_FIXTURES=${HC_FIXTURES:-../shared/fixtures}
THREADS=${THREADS:-1}
GEN=${GEN:-256}
CALIB_BYTES=${CALIB_BYTES:-60000}
M=${MODEL:-$HC_FIXTURES/stories260K.gguf}
[ -f "$M" ] && [ -f "$HC_FIXTURES/tinystories-calib.txt" ] || { echo "bench-silu: no fixtures in $HC_FIXTURES (skipped)"; exit 0; }
T=$(mktemp -d "${TMPDIR:-/tmp}/bench-silu.XXXXXX")
trap 'rm -rf "$T"' EXIT
head -c "$CALIB_BYTES" "$HC_FIXTURES/tinystories-calib.txt" >"$T/calib.txt"
"$HC_BIN/hc-profile" calibrate -m "$M" -f "$T/calib.txt" -c 256 --target-sparsity 0.5 --criterion gate -o "$T/gate.gguf" >/dev/null
"$HC_BIN/hc-profile" calibrate -m "$M" -f "$T/calib.txt" -c 256 --target-sparsity 0.5 -o "$T/contribution.gguf" >/dev/null
"$HC_BIN/hc-profile" predictors -m "$T/contribution.gguf" -f "$T/calib.txt" -c 256 --recall 0.9 \
    -o "$T/predicted.gguf" >/dev/null 2>&1

run() {   # NAME MODEL OPTIONS: the run, its stderr in $T/NAME.err
    # shellcheck disable=SC2086
    "$HC_BIN/hc-run" -m "$2" -p "Once upon a time" -n "$GEN" --temp 0 -t "$THREADS" $3 >/dev/null 2>"$T/$1.err"
}
row() {   # NAME: one line of the table from $T/NAME.err (the dense FFN's bytes from gate.err)
    awk -v name="$1" '
        FNR == NR { if (/^sparse: all layers/) { d = $0; sub(/.* of /, "", d); sub(/ \(.*/, "", d) } next }
        /^prompt:/ { n = $2 } /^generation:/ { n += $2 }
        /^dense: FFN time/ { t = $4 }
        /^sparse: FFN time/ { t = $4 }
        /^sparse: all layers/ { s = $5; b = $0; sub(/.*read /, "", b); sub(/\/token.*/, "", b); p = $NF; gsub(/[()%]/, "", p) }
        END { if (s == "") { s = "0%"; b = d; p = 100 }
              k = s; sub("%", "", k)
              printf "| %s | %s | %.3f | %s | %s%% | %.1f%% | %.2f |\n", name, s, t / n, b, p, 100 - k, p / (100 - k) }' \
        "$T/gate.err" "$T/$1.err"
}
run dense "$M" "--dense -v"
run gate "$T/gate.gguf" ""
run contribution "$T/contribution.gguf" ""
run predicted "$T/predicted.gguf" ""
echo "$(basename "$M"), S = 0.5, $GEN generated tokens, -t $THREADS; ideal: the rows of the kept neurons only"
echo "| FFN | skipped | FFN ms/token | FFN bytes read/token | of dense | ideal (kept rows) | read / ideal |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for r in dense gate contribution predicted; do row $r; done

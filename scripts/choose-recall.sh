#!/bin/sh
# The predictors' recall/sparsity trade-off of a calibrated SiLU model chosen
# for a target perplexity (docs/design/sparse-hybrid.md, "Calibrated sparsity
# for SiLU models"). A lower target recall lets the predictors skip more
# neurons (gate, up and down rows) and costs perplexity; this picks the lowest
# recall of a list whose held-out perplexity stays within the target.
#
# Perplexity grows as the recall falls (more neurons skipped), so the list is
# searched by bisection: each try trains the predictors
# (hc-profile predictors --recall R on CALIB) and measures
# hc-run --perplexity HELDOUT -v. The reference is the dense model; the
# calibrated thresholds alone are measured first, and when they already miss
# the target no recall can meet it (the predictors only skip more).
set -eu
usage="usage: scripts/choose-recall.sh -m CALIBRATED.gguf -f CALIB.txt -e HELDOUT.txt --target-ppl-increase P [options]
  -m MODEL                 a model calibrated by hc-profile calibrate
  -f CALIB                 corpus the predictors are trained on (hc-profile predictors -f)
  -e HELDOUT               held-out text for the perplexity (hc-run --perplexity)
  --target-ppl-increase P  allowed perplexity increase over the dense model, in %
  -c CTX                   window length for both (default 256)
  -t N                     threads (default: the programs')
  -r LIST                  target recalls to choose from (default \"0.8 0.85 0.9 0.95 0.98 0.99 0.995\")
  -P OPTS                  more hc-profile predictors options (e.g. \"--epochs 4\")
  -o OUT                   write the chosen predictor model (PWRI) to OUT
  -d DIR                   keep the models and logs in DIR (default: a temporary folder);
                           predictor models already there (rR.gguf) are reused
  -h, --help               this help
Prints one row per recall tried: the recall and predicted-active fraction hc-run
measures on the held-out text (against the calibrated active set), the skipped
fraction, the FFN weight bytes read (% of dense) and the perplexity; then the
choice. Exit status 1 when no recall of the list meets the target."
BIN=${HC_BIN:-$(dirname "$0")/../bin}
model= calib= held= target= ctx=256 threads= recalls="0.8 0.85 0.9 0.95 0.98 0.99 0.995" popts= out= dir=
while [ $# -gt 0 ]; do
    case $1 in
    -m) model=$2; shift 2 ;;
    -f) calib=$2; shift 2 ;;
    -e) held=$2; shift 2 ;;
    --target-ppl-increase) target=$2; shift 2 ;;
    -c) ctx=$2; shift 2 ;;
    -t) threads="-t $2"; shift 2 ;;
    -r) recalls=$2; shift 2 ;;
    -P) popts=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    -d) dir=$2; shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "choose-recall.sh: unknown option '$1' (see --help)" >&2; exit 1 ;;
    esac
done
[ -n "$model" ] && [ -n "$calib" ] && [ -n "$held" ] && [ -n "$target" ] ||
    { echo "choose-recall.sh: need -m, -f, -e and --target-ppl-increase (see --help)" >&2; exit 1; }
if [ -z "$dir" ]; then dir=$(mktemp -d "${TMPDIR:-/tmp}/recall.XXXXXX"); trap 'rm -rf "$dir"' EXIT; fi
mkdir -p "$dir"
# the list in increasing order, one per line
recalls=$(printf '%s\n' $recalls | sort -g)
n=$(printf '%s\n' "$recalls" | wc -l)

# perplexity MODEL OPTIONS: "perplexity skipped% bytes% predicted% recall" on stdout
measure() {
    # shellcheck disable=SC2086 # $threads is empty or "-t N"
    "$BIN/hc-run" -m "$1" --perplexity "$held" -c "$ctx" $threads -v $2 >"$dir/ppl.out" 2>"$dir/ppl.err" ||
        { cat "$dir/ppl.err" >&2; exit 1; }
    awk '/^perplexity:/ { p = $2 } END { printf "%s ", p }' "$dir/ppl.out"
    awk '/^sparse: all layers: skipped/ {
             s = $5; sub("%", "", s); b = $0; sub(/.*\(/, "", b); sub(/%.*/, "", b)
             pa = "-"; if (match($0, /predicted active +[0-9.]+%/)) { pa = substr($0, RSTART, RLENGTH); sub(/.* /, "", pa); sub("%", "", pa) }
             r = "-"; if (match($0, /recall [0-9.]+/)) r = substr($0, RSTART + 7, RLENGTH - 7) }
         END { if (s == "") { s = 0; b = 100; pa = "-"; r = "-" } printf "%s %s %s %s\n", s, b, pa, r }' "$dir/ppl.err"
}
limit() { awk -v d="$1" -v p="$target" 'BEGIN { printf "%.6g", d * (1 + p / 100) }'; }
within() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
row() { awk -v d="$dense" -v name="$1" -v p="$2" -v s="$3" -v b="$4" -v pa="$5" -v r="$6" \
            'BEGIN { printf "| %s | %s | %s | %s%% | %s%% | %.4f (%+.2f%%) |\n", name, r, pa == "-" ? "-" : pa "%", s, b, p, 100 * (p / d - 1) }'; }

res=$(measure "$model" --dense)
set -- $res
dense=$1
max=$(limit "$dense")
echo "$(basename "$model"): dense perplexity $dense on $(basename "$held"); target +$target% (at most $max)"
echo "| predictors' target recall | recall (held-out) | predicted active | skipped | FFN bytes | perplexity |"
echo "| --- | --- | --- | --- | --- | --- |"
res=$(measure "$model" "")
set -- $res
row "none (calibrated thresholds)" "$@"
if ! within "$1" "$max"; then
    echo "choose-recall.sh: the calibrated thresholds alone give perplexity $1, over the target $max: calibrate a lower --target-sparsity" >&2
    exit 1
fi

# bisection over the sorted list: lo..hi (1-based) still open; best = lowest recall known to meet the target
lo=1 hi=$n best=
while [ "$lo" -le "$hi" ]; do
    mid=$(( (lo + hi) / 2 ))
    r=$(printf '%s\n' "$recalls" | sed -n "${mid}p")
    # shellcheck disable=SC2086 # $threads, $popts: several words
    [ -f "$dir/r$r.gguf" ] || "$BIN/hc-profile" predictors -m "$model" -f "$calib" -c "$ctx" $threads --recall "$r" $popts -o "$dir/r$r.gguf" \
        >"$dir/r$r.txt" 2>"$dir/r$r.err" || { cat "$dir/r$r.err" >&2; exit 1; }
    res=$(measure "$dir/r$r.gguf" "")
    set -- $res
    row "$r" "$@"
    if within "$1" "$max"; then best=$r; bestline="$*"; hi=$((mid - 1)); else lo=$((mid + 1)); fi
done
if [ -z "$best" ]; then
    echo "choose-recall.sh: no recall of the list meets the target (the highest gives more than $max)" >&2
    exit 1
fi
set -- $bestline
echo "chosen: recall $best: perplexity $1, ${2}% of the neurons skipped, ${3}% of the dense FFN bytes read"
[ -z "$out" ] || { cp "$dir/r$best.gguf" "$out.tmp" && mv "$out.tmp" "$out"; }

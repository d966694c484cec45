#!/bin/sh
# Held-out perplexity against the skipped fraction of FFN neurons, for each
# way of choosing the skipped neurons of a SiLU model (docs/design/sparse-hybrid.md,
# "Calibrated sparsity for SiLU models"):
#   global        one threshold on |act(gate)| for all layers (hc-profile calibrate --global)
#   gate          per-layer quantile of |act(gate)| (CATS; calibrate --criterion gate)
#   contribution  per-layer quantile of |act(gate)*up|*|down_j| (calibrate, the default)
#   predicted     the contribution thresholds with PowerInfer-style predictors trained on
#                 the calibrated active set (hc-profile predictors --recall R): gate, up
#                 and down rows of the neurons predicted inactive are skipped too
# For each target S the thresholds are calibrated on CALIB and the perplexity
# measured with hc-run --perplexity on HELDOUT; the skipped fraction and the FFN
# bytes are the ones hc-run measures on HELDOUT.
set -eu
usage="usage: scripts/sweep-sparsity.sh -m MODEL.gguf -f CALIB.txt -e HELDOUT.txt [options]
  -m MODEL       GGUF model (SiLU)
  -f CALIB       calibration corpus (hc-profile calibrate -f)
  -e HELDOUT     held-out text for the perplexity (hc-run --perplexity)
  -c CTX         window length for both (default 256)
  -t N           threads (default: hc-run's)
  -s LIST        target sparsities (default \"0.2 0.3 0.4 0.5 0.6 0.7\"; S = 0 is the dense run)
  -k LIST        criteria (default \"global gate contribution predicted\")
  -r RECALL      predictors' target recall for 'predicted' (default 0.95)
  -P OPTS        more hc-profile predictors options for 'predicted' (e.g. \"--epochs 4\")
  -d DIR         keep the calibrated models and logs in DIR (default: a temporary folder);
                 models already there (by criterion, S and recall) are reused, so a second
                 run with more criteria or targets computes only what is missing
  --json FILE    the rows as JSON
  --svg FILE     perplexity against skipped fraction, one curve per criterion
  -h, --help     this help
Prints a Markdown table: per target S and criterion the perplexity (change against
dense), the measured skipped fraction and the FFN weight bytes read (% of dense)."
BIN=${HC_BIN:-$(dirname "$0")/../bin}
model= calib= held= ctx=256 threads= targets="0.2 0.3 0.4 0.5 0.6 0.7" crits="global gate contribution predicted" recall=0.95 popts= dir= json= svg=
while [ $# -gt 0 ]; do
    case $1 in
    -m) model=$2; shift 2 ;;
    -f) calib=$2; shift 2 ;;
    -e) held=$2; shift 2 ;;
    -c) ctx=$2; shift 2 ;;
    -t) threads="-t $2"; shift 2 ;;
    -s) targets=$2; shift 2 ;;
    -k) crits=$2; shift 2 ;;
    -r) recall=$2; shift 2 ;;
    -P) popts=$2; shift 2 ;;
    -d) dir=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --svg) svg=$2; shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "sweep-sparsity.sh: unknown option '$1' (see --help)" >&2; exit 1 ;;
    esac
done
[ -n "$model" ] && [ -n "$calib" ] && [ -n "$held" ] || { echo "sweep-sparsity.sh: need -m, -f and -e (see --help)" >&2; exit 1; }
for c in $crits; do
    case $c in global|gate|contribution|predicted) ;; *) echo "sweep-sparsity.sh: unknown criterion '$c'" >&2; exit 1 ;; esac
done
if [ -z "$dir" ]; then dir=$(mktemp -d "${TMPDIR:-/tmp}/sweep.XXXXXX"); trap 'rm -rf "$dir"' EXIT; fi
mkdir -p "$dir"
rows="$dir/rows.tsv"
: >"$rows"

# one hc-run --perplexity on the held-out text: "perplexity skipped% bytes%" on stdout
measure() {
    # shellcheck disable=SC2086 # $threads is empty or "-t N"
    "$BIN/hc-run" -m "$1" --perplexity "$held" -c "$ctx" $threads $2 >"$dir/ppl.out" 2>"$dir/ppl.err" ||
        { cat "$dir/ppl.err" >&2; exit 1; }
    awk '/^perplexity:/ { p = $2 } END { printf "%s ", p }' "$dir/ppl.out"
    awk '/^sparse: all layers: skipped/ { s = $5; sub("%", "", s); match($0, /\([0-9.]+%\)/); b = substr($0, RSTART + 1, RLENGTH - 3) }
         END { if (s == "") { s = 0; b = 100 } printf "%s %s\n", s, b }' "$dir/ppl.err"
}

echo "dense" >&2
res=$(measure "$model" --dense)   # a failed run stops the script here (set -e)
set -- $res
dense=$1
for c in $crits; do printf '0\t%s\t%s\t%s\t%s\n' "$c" "$1" "$2" "$3" >>"$rows"; done
# calibrate CRITERION S: the calibrated model's path on stdout (made once)
calibrate() {
    out="$dir/$1-$2.gguf"
    case $1 in
    global) opts="--criterion gate --global" ;;
    gate) opts="--criterion gate" ;;
    contribution) opts="--criterion contribution" ;;
    esac
    # shellcheck disable=SC2086 # $threads, $opts: several words
    [ -f "$out" ] || "$BIN/hc-profile" calibrate -m "$model" -f "$calib" -c "$ctx" $threads --target-sparsity "$2" \
        $opts -o "$out" >"$dir/$1-$2.txt" || exit 1
    echo "$out"
}
for s in $targets; do
    for c in $crits; do
        echo "S = $s, $c" >&2
        if [ "$c" = predicted ]; then
            out="$dir/predicted-$s-r$recall.gguf"
            cal=$(calibrate contribution "$s")
            # shellcheck disable=SC2086
            [ -f "$out" ] || "$BIN/hc-profile" predictors -m "$cal" -f "$calib" -c "$ctx" $threads --recall "$recall" $popts -o "$out" \
                >"$out.txt" 2>"$out.err" || { cat "$out.err" >&2; exit 1; }
        else
            out=$(calibrate "$c" "$s")
        fi
        res=$(measure "$out" "")
        set -- $res
        printf '%s\t%s\t%s\t%s\t%s\n' "$s" "$c" "$1" "$2" "$3" >>"$rows"
    done
done

# the table: one row per S, one column per criterion
awk -F '\t' -v dense="$dense" -v crits="$crits" '
    BEGIN { nc = split(crits, C, " ") }
    { if (!($1 in seen)) { seen[$1] = 1; S[++ns] = $1 }
      cell[$1, $2] = sprintf("%.3f (%+.1f%%), %.1f%% skipped, %.0f%% bytes", $3, 100 * ($3 / dense - 1), $4, $5) }
    END {
        printf "| target S |"; for (i = 1; i <= nc; i++) printf " %s |", C[i]; printf "\n| --- |"
        for (i = 1; i <= nc; i++) printf " --- |"; printf "\n"
        for (r = 1; r <= ns; r++) { printf "| %s |", S[r]; for (i = 1; i <= nc; i++) printf " %s |", cell[S[r], C[i]]; printf "\n" }
    }' "$rows"

if [ -n "$json" ]; then
    # the paths through the environment (awk -v would read their backslashes as escapes), quoted for JSON
    model=$model calib=$calib held=$held awk -F '\t' -v ctx="$ctx" -v dense="$dense" -v recall="$recall" '
        function str(s,  o, i, c) {   # a char at a time: gsub replacements treat backslashes differently in each awk
            for (i = 1; i <= length(s); i++) {
                c = substr(s, i, 1)
                o = o (c == "\\" || c == "\"" ? "\\" c : c == "\t" ? "\\t" : c)
            }
            return "\"" o "\""
        }
        BEGIN { printf "{\"model\": %s, \"calibration\": %s, \"heldout\": %s, \"ctx\": %d, \"predictor_recall\": %s, \"dense_perplexity\": %s, \"rows\": [", str(ENVIRON["model"]), str(ENVIRON["calib"]), str(ENVIRON["held"]), ctx, recall, dense }
        { printf "%s\n  {\"target\": %s, \"criterion\": \"%s\", \"perplexity\": %s, \"skipped\": %s, \"ffn_bytes_pct\": %s}", (NR > 1 ? "," : ""), $1, $2, $3, $4 / 100, $5 }
        END { printf "\n]}\n" }' "$rows" >"$json.tmp" && mv "$json.tmp" "$json"
fi

if [ -n "$svg" ]; then
    awk -F '\t' -v title="$(basename "$model"): held-out perplexity on $(basename "$held") (-c $ctx), thresholds calibrated on $(basename "$calib"), predictors' recall $recall" \
        -v crits="$crits" '
        BEGIN { nc = split(crits, C, " "); col["global"] = "#1f77b4"; col["gate"] = "#2ca02c"; col["contribution"] = "#d62728"; col["predicted"] = "#9467bd"
                X0 = 70; X1 = 560; Y0 = 40; Y1 = 340; ymin = 1e30; ymax = -1e30 }
        { n[$2]++; x[$2, n[$2]] = $4 / 100; y[$2, n[$2]] = $3; if ($3 < ymin) ymin = $3; if ($3 > ymax) ymax = $3 }
        function px(v) { return X0 + v / 0.8 * (X1 - X0) }
        function py(v) { return Y1 - (v - ymin) / (ymax - ymin) * (Y1 - Y0) }
        function esc(s) { gsub("&", "\\&amp;", s); gsub("<", "\\&lt;", s); gsub(">", "\\&gt;", s); return s }
        END {
            if (ymax <= ymin) ymax = ymin + 1
            pad = (ymax - ymin) * 0.05; ymin -= pad; ymax += pad
            printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"400\" font-family=\"sans-serif\">\n"
            printf "<text x=\"10\" y=\"20\" font-size=\"12\">%s</text>\n", esc(title)
            printf "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", X0, Y0, X1 - X0, Y1 - Y0
            for (k = 0; k <= 8; k++) printf "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%d</text>\n", px(k / 10), Y1 + 14, k * 10
            for (k = 0; k <= 4; k++) { v = ymin + (ymax - ymin) * k / 4
                printf "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%.2f</text>\n", X0 - 4, py(v) + 3, v }
            printf "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">skipped FFN neurons on the held-out text (%%, all layers)</text>\n", (X0 + X1) / 2, Y1 + 32
            printf "<text x=\"16\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 16 %d)\">perplexity (held-out)</text>\n", (Y0 + Y1) / 2, (Y0 + Y1) / 2
            for (i = 1; i <= nc; i++) { c = C[i]; printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col[c]
                for (k = 1; k <= n[c]; k++) printf "%.1f,%.1f ", px(x[c, k]), py(y[c, k]); printf "\"/>\n"
                for (k = 1; k <= n[c]; k++) printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", px(x[c, k]), py(y[c, k]), col[c]
                printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/><text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n", X1 + 12, Y0 + 10 + 18 * i, X1 + 32, Y0 + 10 + 18 * i, col[c], X1 + 36, Y0 + 14 + 18 * i, c }
            printf "</svg>\n"
        }' "$rows" >"$svg.tmp" && mv "$svg.tmp" "$svg"
fi

#!/bin/sh
# Tokenizer speed: hc-run --tokenize against Hugging Face tokenizers (Python,
# `pip install tokenizers`) on the same text and the same byte-level BPE: the
# fixture hf-tokenizers/bpe-llama3 converted by hc-convert hf, on
# tinystories-calib.txt (197 KB). Prints both rates (best of REPS runs, the
# tokenization alone: hc-run's own timing, tokenizers' encode() call) and
# checks that both give the same ids (the text without one final newline,
# which hc-run -f drops, as llama.cpp does).
#   HC_BIN=bin REPS=5 TEXT=file sh scripts/bench-tokenize.sh
set -eu
HC_BIN=${HC_BIN:-$(pwd)/bin}
HC_FIXTURES=${HC_FIXTURES:-../shared/fixtures}
REPS=${REPS:-5}
TEXT=${TEXT:-$HC_FIXTURES/tinystories-calib.txt}
FIX=$HC_FIXTURES/hf-tokenizers/bpe-llama3
[ -f "$FIX/tokenizer.json" ] && [ -f "$TEXT" ] || { echo "bench-tokenize: no fixtures ($FIX, $TEXT)"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/hcbench.XXXXXX")
trap 'rm -rf "$T"' EXIT

"$HC_BIN/hc-convert" hf "$FIX" -o "$T/bpe.gguf" >/dev/null 2>"$T/convert.err" || { cat "$T/convert.err"; exit 1; }
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; text: $TEXT ($(wc -c <"$TEXT") bytes)"
i=0
while [ "$i" -lt "$REPS" ]; do
    "$HC_BIN/hc-run" -m "$T/bpe.gguf" --tokenize -f "$TEXT" >"$T/ids" 2>>"$T/err"
    i=$((i + 1))
done
# "tokenize:   N bytes -> K tokens in X ms (Y MB/s)": the fastest run
best=$(awk '/^tokenize:/ {print $8, $5, $2}' "$T/err" | sort -n | head -1)
set -- $best
printf '%-28s %8d tokens %9.2f ms %8.2f MB/s %10.0f tokens/s\n' "hotcold (hc-run --tokenize)" "$2" "$1" \
    "$(echo "$3 $1" | awk '{print $1 / $2 / 1000}')" "$(echo "$2 $1" | awk '{print $1 / $2 * 1000}')"

if ! python3 -c 'import tokenizers' 2>/dev/null; then
    echo "tokenizers (Python): not installed (pip install tokenizers): no comparison"
    exit 0
fi
python3 - "$FIX/tokenizer.json" "$TEXT" "$T/ids" "$REPS" <<'EOF'
import sys, time
import tokenizers
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
text = open(sys.argv[2], encoding="utf-8").read()
if text.endswith("\n"):
    text = text[:-1]            # hc-run -f drops one final newline
ours = [int(x) for x in open(sys.argv[3]).read().split()]
best = None
for _ in range(int(sys.argv[4])):
    t0 = time.perf_counter()
    ids = tok.encode(text).ids
    dt = time.perf_counter() - t0
    best = dt if best is None or dt < best else best
name = "tokenizers %s (Python)" % tokenizers.__version__
print("%-28s %8d tokens %9.2f ms %8.2f MB/s %10.0f tokens/s" % (
    name, len(ids), best * 1e3, len(text.encode()) / best / 1e6, len(ids) / best))
print("same ids: %s" % ("yes" if ids == ours else "NO (%d vs %d tokens)" % (len(ours), len(ids))))
sys.exit(0 if ids == ours else 1)
EOF

#!/bin/sh
# Model families against llama.cpp (issue 17): does llama.cpp load the dense GGUF
# that `hc-convert hf` writes for each checkpoint of $HC_FIXTURES/hf-tiny, and
# does its greedy text equal hc-run's? Not part of `make test` (needs the
# llama.cpp build of scripts/bench-vs-llamacpp.sh); takes seconds.
#
#   HC_BIN=bin PEER=build/peer sh scripts/families-vs-llamacpp.sh
#
# llama.cpp is the one scripts/bench-vs-llamacpp.sh builds under $PEER (run it
# once; it builds llama-simple and llama-tokenize too). For each folder and TYPE:
#   loads     llama-simple runs the file (else the reason it gave)
#   prompt    llama-tokenize --ids and hc-run --tokenize give the same ids
#   greedy    llama-simple's text (greedy, GEN tokens after PROMPT) equals
#             hc-run --temp 0's, byte for byte
# plus the ReLU llama written with --llama-arch (the old architecture name),
# which llama.cpp runs with SiLU; written by default (llama-relu) it must refuse it.
#
# Environment (defaults): TYPES="f32 f16" GEN=32 PROMPT="The dog ran to the park".
set -eu
HC_BIN=${HC_BIN:-$(pwd)/bin}
HC_FIXTURES=${HC_FIXTURES:-../shared/fixtures}
PEER=${PEER:-$(pwd)/build/peer}
TYPES=${TYPES:-f32 f16}
GEN=${GEN:-32}
PROMPT=${PROMPT:-The dog ran to the park}
LB=$PEER/llama-build/bin
H=$HC_FIXTURES/hf-tiny
for p in llama-simple llama-tokenize; do
    [ -x "$LB/$p" ] || { echo "families-vs-llamacpp: no $LB/$p (run scripts/bench-vs-llamacpp.sh once)" >&2; exit 1; }
done
[ -d "$H" ] || { echo "families-vs-llamacpp: no $H" >&2; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/hcfam.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM

# row NAME TYPE [hc-convert options]: one table line for folder NAME
row() {
    name=$1 type=$2; shift 2
    m=$T/$name-$type.gguf
    "$HC_BIN/hc-convert" hf "$H/$name" -o "$m" --outtype "$type" "$@" >/dev/null 2>&1
    label="$name $type${1:+ $*}"
    if ! "$LB/llama-simple" -m "$m" -n "$GEN" "$PROMPT" >"$T/ll" 2>"$T/ll.err"; then
        why=$(grep -o "error loading model: .*" "$T/ll.err" | head -1 | sed 's/error loading model: //')
        echo "| $label | no: ${why:-exit status $?} | - | - |"
        return
    fi
    "$LB/llama-tokenize" -m "$m" -p "$PROMPT" --ids --log-disable 2>/dev/null | tail -1 | tr -d '[],' >"$T/lt"
    "$HC_BIN/hc-run" -m "$m" -p "$PROMPT" --tokenize 2>/dev/null >"$T/ht"
    ids=no; [ "$(cat "$T/lt")" = "$(cat "$T/ht")" ] && ids=yes
    sed '1s/^<s> //' "$T/ll" | sed '$ { /^$/d; }' >"$T/ll.txt"
    "$HC_BIN/hc-run" -m "$m" -p "$PROMPT" -n "$GEN" --temp 0 -t 1 >"$T/hc.txt" 2>/dev/null
    printf '\n' >>"$T/hc.txt"
    if cmp -s "$T/ll.txt" "$T/hc.txt"; then same=yes
    else
        n=$(cmp "$T/ll.txt" "$T/hc.txt" 2>/dev/null | sed -n 's/.* byte \([0-9]*\),.*/\1/p')
        same="no (texts part at byte ${n:-?} of $(wc -c <"$T/hc.txt"))"
    fi
    echo "| $label | yes | $ids | $same |"
}

echo "hotcold $("$HC_BIN/hc-run" --version 2>&1 | head -1) vs llama.cpp in $PEER; prompt \"$PROMPT\", $GEN tokens, greedy"
echo
echo "| checkpoint, type | llama.cpp loads | prompt ids equal | greedy text equal |"
echo "| --- | --- | --- | --- |"
for d in "$H"/*/; do
    d=${d%/}; name=$(basename "$d")
    [ -f "$d/config.json" ] || continue
    for type in $TYPES; do row "$name" "$type"; done
done
[ -d "$H/llama-relu" ] && row llama-relu f32 --llama-arch
echo
echo "Expected: bamboo and opt are PowerInfer's architectures (llama.cpp has neither); llama.cpp runs"
echo "every llama file with SiLU, so llama-relu's text with --llama-arch differs (a different model"
echo "there); written by default (architecture llama-relu) it refuses the file instead."

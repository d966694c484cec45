#!/bin/sh
# Data safety, second round (docs/hardening.md): outputs that are not regular
# files, signals during a write, output lost on stdout, an address-space limit.
. tests/lib.sh
need_programs safety hc-convert hc-quantize hc-profile hc-solve hc-run hc-gguf
C="$HC_BIN/hc-convert" Q="$HC_BIN/hc-quantize" R="$HC_BIN/hc-run"
P="$HC_BIN/hc-profile" S="$HC_BIN/hc-solve" G="$HC_BIN/hc-gguf"

M="$T/m.gguf"
"$C" synth -o "$M" --dim 32 --n-ff 64 --layers 2 --heads 4 --vocab 300 --ctx 64 >/dev/null 2>&1 || { fail setup synth; finish; }
"$Q" "$M" "$T/q8.gguf" q8_0 >/dev/null 2>&1 || { fail setup quantize; finish; }

# ---------------------------------------------------------------- outputs that are not regular files
# A symbolic link to a character device: written in place, never replaced.
ln -s /dev/null "$T/null.gguf"
check special_chardev "$Q" "$M" "$T/null.gguf" q8_0
if [ -L "$T/null.gguf" ] && [ "$(readlink "$T/null.gguf")" = /dev/null ]; then ok special_chardev_kept
else fail special_chardev_kept "the link to /dev/null was replaced"; fi
check special_chardev_convert "$C" synth -o "$T/null.gguf" --dim 32 --n-ff 64 --layers 1
[ -L "$T/null.gguf" ] && ok special_chardev_convert_kept || fail special_chardev_convert_kept "replaced"

# A FIFO: streamed in place; the reader gets the very bytes of a file output.
mkfifo "$T/fifo.gguf"
timeout 60 cat "$T/fifo.gguf" >"$T/from-fifo.gguf" &
reader=$!
check special_fifo "$Q" "$M" "$T/fifo.gguf" q8_0
[ -p "$T/fifo.gguf" ] || kill $reader 2>/dev/null   # replaced: nobody writes to the reader's FIFO
wait $reader
if [ -p "$T/fifo.gguf" ] && cmp -s "$T/from-fifo.gguf" "$T/q8.gguf"; then ok special_fifo_streamed
else fail special_fifo_streamed "FIFO replaced or its bytes differ"; fi
if ls -A "$T" | grep -q '\.tmp'; then fail special_fifo_no_temporary "$(ls -A "$T" | grep '\.tmp')"; else ok special_fifo_no_temporary; fi

# What /dev/stdout is (a link to /proc/self/fd/1; our own link, so that a
# failure replaces nothing outside T): on a pipe it is streamed; on a regular
# file that file is written, the link kept.
ln -s /proc/self/fd/1 "$T/stdout.gguf"
"$Q" "$M" "$T/stdout.gguf" q8_0 2>/dev/null | cat >"$T/from-pipe.gguf"
cmp -s "$T/from-pipe.gguf" "$T/q8.gguf" && ok special_stdout_pipe || fail special_stdout_pipe "bytes differ"
"$Q" "$M" "$T/stdout.gguf" q8_0 >"$T/from-stdout.gguf" 2>/dev/null
cmp -s "$T/from-stdout.gguf" "$T/q8.gguf" && ok special_stdout_file || fail special_stdout_file "bytes differ"
[ -L "$T/stdout.gguf" ] && ok special_stdout_kept || fail special_stdout_kept "the link was replaced"

# A symbolic link to a regular file: the file is replaced, the link stays.
mkdir -p "$T/real"
: >"$T/real/target.gguf"
ln -s real/target.gguf "$T/link.gguf"
check special_link_regular "$Q" "$M" "$T/link.gguf" q8_0
if [ -L "$T/link.gguf" ] && cmp -s "$T/real/target.gguf" "$T/q8.gguf"; then ok special_link_regular_target
else fail special_link_regular_target "link replaced or target not written"; fi

# A dangling link and a socket are refused in one line, before any work.
ln -s "$T/nowhere/x.gguf" "$T/dangling.gguf"
check_fails special_dangling "dangling.gguf: output is a symbolic link to a missing file" "$Q" "$M" "$T/dangling.gguf" q8_0
[ -L "$T/dangling.gguf" ] && ok special_dangling_kept || fail special_dangling_kept "replaced"
if python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$T/sock.gguf" 2>/dev/null; then
    check_fails special_socket "sock.gguf: output is not a regular file, a FIFO or a character device" "$Q" "$M" "$T/sock.gguf" q8_0
    [ -S "$T/sock.gguf" ] && ok special_socket_kept || fail special_socket_kept "replaced"
else
    skip special_socket "cannot make a socket here"
fi

# Every writer: -o of hc-convert, hc-profile, hc-solve with --report and --svg.
printf 'the cat sat on the mat. the dog ran.\n%.0s' 1 2 3 4 5 6 7 8 >"$T/corpus.txt"
check special_profile "$P" -m "$M" -f "$T/corpus.txt" -o "$T/null.gguf" -c 16 -t 1
"$P" -m "$M" -f "$T/corpus.txt" -o "$T/s.gguf" -c 16 -t 1 >/dev/null 2>&1
ln -s /dev/null "$T/null.gpuidx"; ln -s /dev/null "$T/null.json"; ln -s /dev/null "$T/null.svg"
check special_solve "$S" -m "$M" -s "$T/s.gguf" --vram-budget 1M --greedy -o "$T/null.gpuidx" --report "$T/null.json" --svg "$T/null.svg"
n=0; for f in null.gguf null.gpuidx null.json null.svg; do [ -L "$T/$f" ] && n=$((n + 1)); done
[ $n -eq 4 ] && ok special_every_writer_kept || fail special_every_writer_kept "only $n of 4 links kept"

# ---------------------------------------------------------------- signals during a write
# SIGINT, SIGTERM, SIGHUP once the temporary holds data: the process dies of
# the signal (status 128+N) and its temporary is gone. A background job of a
# script starts with SIGINT ignored (and a tool keeps an ignored signal
# ignored, as nohup wants): env --default-signal gives it the default back.
signalled() {
    sig=$1 num=$2
    mkdir -p "$T/sig$sig"
    env --default-signal="$sig" "$C" synth -o "$T/sig$sig/big.gguf" --dim 512 --n-ff 2048 --layers 8 --vocab 4096 >/dev/null 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 600 ]; do
        tmp=$(ls -A "$T/sig$sig" | grep '\.tmp' | head -1)
        [ -n "$tmp" ] && [ "$(wc -c <"$T/sig$sig/$tmp" 2>/dev/null || echo 0)" -gt 100000 ] && break
        sleep 0.05; i=$((i + 1))
    done
    kill -"$sig" $pid 2>/dev/null
    wait $pid
    rc=$?
    if [ -z "$tmp" ]; then skip "signal_$sig" "no temporary file seen before the end"
    elif [ $rc -ne $((128 + num)) ]; then fail "signal_$sig" "exit $rc (want $((128 + num)))"
    elif [ -n "$(ls -A "$T/sig$sig")" ]; then fail "signal_$sig" "left: $(ls -A "$T/sig$sig")"
    else ok "signal_$sig"; fi
}
if env --default-signal=INT true 2>/dev/null; then
    signalled INT 2; signalled TERM 15; signalled HUP 1
else
    skip signals "env has no --default-signal"
fi

# ulimit -f without ignoring SIGXFSZ (the earlier test in test_faults.sh
# ignores it): "File too large", exit 1, no temporary.
mkdir -p "$T/fsz"
(ulimit -f 20; exec "$C" synth -o "$T/fsz/a.gguf" --dim 64 --n-ff 256 --layers 2) >/dev/null 2>"$T/err"
rc=$?
if [ $rc -ne 1 ] || ! grep -q "a.gguf: write failed: File too large" "$T/err"; then fail sigxfsz "exit $rc: $(cat "$T/err")"
elif [ -n "$(ls -A "$T/fsz")" ]; then fail sigxfsz "left: $(ls -A "$T/fsz")"
else ok sigxfsz; fi

# ---------------------------------------------------------------- output lost on stdout
# stdout is /dev/full: exit 1 with one line, never 0 with the output gone
# (the reason is named when the failed write is the last one).
lost() {
    name=$1; shift
    "$@" >/dev/full 2>"$T/err"
    rc=$?
    last=$(tail -n 1 "$T/err")
    if [ $rc -ne 1 ]; then fail "$name" "exit $rc (want 1)"
    elif ! printf '%s\n' "$last" | grep -q '^hc-[a-z]*: standard output: write failed'; then fail "$name" "last line: $last"
    else ok "$name"; fi
}
if [ -c /dev/full ]; then
    lost stdout_run_generate "$R" -m "$M" -p "the cat" -n 4 -t 1
    lost stdout_run_logits "$R" -m "$M" -p "the cat" --logits -t 1
    lost stdout_run_tokenize "$R" -m "$M" -p "the cat" --tokenize
    lost stdout_profile_show "$P" show "$T/s.gguf"
    lost stdout_profile_show_json "$P" show "$T/s.gguf" --json
    lost stdout_solve_json "$S" -m "$M" -s "$T/s.gguf" --vram-budget 1M --greedy --json
    lost stdout_solve_sweep "$S" -m "$M" -s "$T/s.gguf" --sweep 1M,2M --greedy
    lost stdout_gguf_dump "$G" dump "$M"
    lost stdout_version "$P" --version
else
    skip stdout_lost "no /dev/full"
fi

# ---------------------------------------------------------------- a reader that has gone
# stdout a pipe whose read end is closed before the program starts (what
# `| head` becomes): no program dies of SIGPIPE. Text on stdout stops quietly
# with status 0 (hc-run stops generating at once: no timings follow); a GGUF
# streamed there is a failed write naming the output, status 1.
gone() {
    name=$1 want=$2; shift 2
    python3 - "$@" >"$T/gone" 2>&1 <<'PY'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)   # SIGPIPE as the shell leaves it
print(p.returncode)
sys.stdout.write(p.stderr.decode(errors="replace"))
PY
    rc=$(head -n 1 "$T/gone") err=$(tail -n +2 "$T/gone")
    if [ "$rc" != "$want" ]; then fail "$name" "exit $rc (want $want): $err"
    elif [ "$want" = 0 ] && printf '%s\n' "$err" | grep -q 'write failed'; then fail "$name" "stderr: $err"
    elif [ "$want" != 0 ] && ! printf '%s\n' "$err" | grep -q 'write failed: Broken pipe'; then fail "$name" "stderr: $err"
    else ok "$name"; fi
}
"$C" synth -o "$T/v.gguf" --dim 32 --n-ff 64 --layers 1 --heads 4 --vocab 20000 --ctx 64 >/dev/null 2>&1 || fail setup_vocab synth
gone pipe_gone_run 0 "$R" -m "$M" -p "the cat" -n 32 -t 1
grep -q '^prompt:' "$T/gone" && fail pipe_gone_run_stops "generated to the end: $(cat "$T/gone")" || ok pipe_gone_run_stops
gone pipe_gone_run_logits 0 "$R" -m "$M" -p "the cat" --logits -t 1
gone pipe_gone_gguf_dump 0 "$G" dump --json "$T/v.gguf"
gone pipe_gone_help 0 "$R" --help
gone pipe_gone_quantize 1 "$Q" "$M" /dev/stdout q8_0

# ---------------------------------------------------------------- non-finite weights
# One weight of blk.1.ffn_down made infinite (then NaN): hc-run stops at the
# first logits with one line, as hc-quantize and hc-profile refuse the file.
nonfinite() {
    python3 - "$M" "$T/$1.gguf" "$2" <<'PY'
import json, struct, subprocess, sys, os
src, dst, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
j = json.loads(subprocess.run([os.environ["HC_BIN"] + "/hc-gguf", "dump", "--json", src], capture_output=True, check=True).stdout)
t = next(t for t in j["tensors"] if t["name"] == "blk.1.ffn_down.weight" and t["type"] == "F32")
b = bytearray(open(src, "rb").read())
struct.pack_into("<f", b, j["data_offset"] + t["offset"], value)
open(dst, "wb").write(b)
PY
}
export HC_BIN
for v in inf nan; do
    if nonfinite "$v" "$v"; then
        check_fails "nonfinite_${v}_generate" "$v.gguf: the logits are not finite" "$R" -m "$T/$v.gguf" -p "the cat" -n 4 -t 1
        check_fails "nonfinite_${v}_logits" "$v.gguf: the logits are not finite" "$R" -m "$T/$v.gguf" -p "the cat" --logits -t 1
    else
        fail "nonfinite_$v" "cannot write the model"
    fi
done
check_fails nonfinite_perplexity "the logits are not finite" "$R" -m "$T/nan.gguf" --perplexity "$T/corpus.txt" -c 16 -t 1

# ---------------------------------------------------------------- parsers' cost
# A safetensors header of 300000 entries: refused for the missing tensors
# in well under a second; the pairwise name check it replaced took 100 s and
# more (timeout 60: 124 means the cost is back).
if have_fixtures; then
    mkdir -p "$T/st"
    cp "$HC_FIXTURES/hf-tokenizers/bpe-llama3/config.json" "$HC_FIXTURES/hf-tokenizers/bpe-llama3/tokenizer.json" "$T/st/"
    python3 - "$T/st/model.safetensors" <<'PY'
import json, struct, sys
h = {"t%d" % i: {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(300000)}
b = json.dumps(h, separators=(",", ":")).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(b)) + b)
PY
    check_fails safetensors_many_entries "missing tensor 'model.embed_tokens.weight'" timeout 60 "$C" hf "$T/st" -o "$T/st.gguf"
else
    skip safetensors_many_entries "no fixtures"
fi

# A pre-tokenizer regex, and a normalizer Replace regex, that read to the end
# of the text from every position (tokenizer.json written here): tokenizing
# 1 MB is refused in one line naming the model once the reading passes
# 64 bytes per byte + 64 MiB (about a second), where it took hours (timeout
# 60: 124 means the cost is back). The fixture's real pre-tokenizer
# (llama-bpe) tokenizes the same 1 MB.
if have_fixtures; then
    python3 - "$HC_FIXTURES" "$T" <<'PY'
import json, os, sys
fix, t = os.path.abspath(sys.argv[1]), sys.argv[2]
bpe = os.path.join(fix, "hf-tokenizers", "bpe-llama3")
for name in ("scan-pre", "scan-norm", "llama-bpe"):
    j = json.load(open(os.path.join(bpe, "tokenizer.json")))
    if name == "scan-pre":
        j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\w(?=[\s\S]*X)|[\s\S]"
    if name == "scan-norm":
        j["normalizer"] = {"type": "Replace", "pattern": {"Regex": r"\w(?=[\s\S]*X)"}, "content": "b"}
    d = os.path.join(t, name)
    os.makedirs(d)
    for f in ("config.json", "model.safetensors"):
        os.symlink(os.path.join(bpe, f), os.path.join(d, f))
    json.dump(j, open(os.path.join(d, "tokenizer.json"), "w"))
text = open(os.path.join(fix, "tinystories-calib.txt"), encoding="utf-8").read()
open(os.path.join(t, "prompt-1m.txt"), "w", encoding="utf-8").write((text * (1 + 2**20 // len(text)))[:2**20])
PY
    for m in scan-pre scan-norm llama-bpe; do "$C" hf "$T/$m" -o "$T/$m.gguf" >/dev/null 2>&1 || fail "convert_$m" "hc-convert hf"; done
    check_fails tokenize_scan_pre "^hc-run: prompt: cannot tokenize: $T/scan-pre.gguf: pre-tokenizer regex 1 reads the text over and over: splitting [0-9]* bytes took more than" \
        timeout 60 "$R" -m "$T/scan-pre.gguf" --tokenize -f "$T/prompt-1m.txt"
    [ "$(wc -l <"$T/err")" -eq 1 ] && ok tokenize_scan_pre_one_line || fail tokenize_scan_pre_one_line "$(cat "$T/err")"
    check_fails tokenize_scan_normalizer "^hc-run: prompt: cannot tokenize: $T/scan-norm.gguf: normalizer Replace regex reads the text over and over" \
        timeout 60 "$R" -m "$T/scan-norm.gguf" --tokenize -f "$T/prompt-1m.txt"
    [ "$(wc -l <"$T/err")" -eq 1 ] && ok tokenize_scan_normalizer_one_line || fail tokenize_scan_normalizer_one_line "$(cat "$T/err")"
    check tokenize_llama_bpe_1m timeout 60 "$R" -m "$T/llama-bpe.gguf" --tokenize -f "$T/prompt-1m.txt"
else
    skip tokenize_scan "no fixtures"
fi

# ---------------------------------------------------------------- block_count
# block_count 1 in a file with two layers: refused by every program that runs
# it, not run without layer 1 (hc-quantize carries every tensor: it may).
python3 - "$M" "$T/blocks.gguf" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
k = b.find(b".block_count") + len(b".block_count")
assert struct.unpack_from("<II", b, k) == (4, 2)    # u32, two layers
struct.pack_into("<I", b, k + 4, 1)
open(sys.argv[2], "wb").write(b)
PY
check_fails block_count_short "blocks.gguf: tensor blk.1.* is past block_count 1" "$R" -m "$T/blocks.gguf" -p "the cat" -n 2 -t 1
check_fails block_count_short_profile "tensor blk.1.* is past block_count 1" "$P" -m "$T/blocks.gguf" -f "$T/corpus.txt" -o "$T/blocks-s.gguf" -c 16 -t 1

# ---------------------------------------------------------------- hc-run -i
# A line that does not fit the context is dropped, and not counted as
# evaluated in the closing "prompt: N tokens" line.
np=$("$R" -m "$M" -p "the cat" --tokenize 2>/dev/null | wc -w)
printf 'the dog ran on the mat the dog ran on the mat the dog ran on the mat the dog ran on the mat\n' >"$T/long-line.txt"
"$R" -m "$M" -p "the cat" -n 2 -c 16 -t 1 -i <"$T/long-line.txt" >/dev/null 2>"$T/err"
if grep -q "context of 16 tokens is full" "$T/err" && grep -q "^prompt: *$np tokens" "$T/err"; then ok interactive_dropped_line
else fail interactive_dropped_line "want 'prompt: $np tokens': $(grep -E 'prompt|full' "$T/err" | tr '\n' ' ')"; fi

# ---------------------------------------------------------------- long paths
# A directory of 4085 characters: DIR/config.json does not fit a 4096-byte
# buffer; it used to be cut to DIR/config.js. Refused in one line instead.
D="$T/long"
while [ ${#D} -lt 3880 ]; do D="$D/dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"; done
D="$D/$(printf '%*s' $((4084 - ${#D})) '' | tr ' ' e)"
if mkdir -p "$D" 2>/dev/null && [ ${#D} -eq 4085 ]; then
    : >"$D/config.js"   # what the cut name would open
    check_fails long_path_hf "path longer than 4095 bytes" "$C" hf "$D" -o "$T/long.gguf"
else
    skip long_path_hf "cannot make a directory of 4085 characters here"
fi

# ---------------------------------------------------------------- an address-space limit
# OpenBLAS's thread pool used to start at load and hang the exit under
# `ulimit -v` 100-160 MB: every program must end (timeout 60 s: 124 is a hang).
if grep -q __asan_init "$Q" 2>/dev/null; then
    skip ulimit_v "ASan build: no address-space limit"
else
    vlim() { (ulimit -v 150000; exec timeout 60 "$@") >/dev/null 2>"$T/err"; }
    for p in "$Q" "$P" "$R" "$S" "$C" "$G"; do
        vlim "$p" --version
        rc=$?
        [ $rc -eq 0 ] && ok "ulimit_v_version_${p##*/}" || fail "ulimit_v_version_${p##*/}" "exit $rc: $(head -c 200 "$T/err")"
    done
    vlim "$Q" "$M" "$T/v.gguf" q8_0
    rc=$?
    [ $rc -eq 0 ] && cmp -s "$T/v.gguf" "$T/q8.gguf" && ok ulimit_v_quantize || fail ulimit_v_quantize "exit $rc: $(head -c 200 "$T/err")"
    vlim "$P" -m "$M" -f "$T/corpus.txt" -o "$T/v-s.gguf" -c 16 -t 2
    rc=$?
    [ $rc -eq 0 ] && ok ulimit_v_profile || fail ulimit_v_profile "exit $rc: $(head -c 200 "$T/err")"
    # an endless pipe as the prompt: one line and exit 1 when the memory runs out, no signal death
    vlim "$R" -m "$M" -f /dev/zero -n 1
    rc=$?
    [ $rc -eq 1 ] && grep -q '^hc-run: /dev/zero: out of memory after [0-9]* bytes$' "$T/err" && ok ulimit_v_endless_prompt ||
        fail ulimit_v_endless_prompt "exit $rc: $(head -c 200 "$T/err")"
fi

finish

#!/bin/sh
# Faults: a full disk (RLIMIT_FSIZE, and a tiny tmpfs where mount is allowed),
# SIGKILL while writing, unreadable and truncated inputs, and huge declared
# sizes under a small address-space limit. Every writer must leave nothing
# under the final name (or the previous file there untouched), no temporary
# file after an error, and its inputs byte-identical. HC_FAULTS_SHOW=1 prints
# each tool's message (docs/hardening.md quotes them).
. tests/lib.sh
C="$HC_BIN/hc-convert" G="$HC_BIN/hc-gguf" Q="$HC_BIN/hc-quantize" R="$HC_BIN/hc-run"
P="$HC_BIN/hc-profile" S="$HC_BIN/hc-solve"

# refused NAME PATTERN COMMAND...: exit 1; stderr ends with one line
# "hc-NAME: ..." holding PATTERN (progress notes may come before it)
refused() {
    name=$1; pat=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    last=$(tail -n 1 "$T/err")
    [ -n "${HC_FAULTS_SHOW:-}" ] && echo "# $name: $last"
    if [ $rc -ne 1 ]; then fail "$name" "exit $rc (want 1): $(head -c 300 "$T/err")"
    elif ! printf '%s\n' "$last" | grep -q '^hc-[a-z]*: '; then fail "$name" "last line is not 'hc-...: ': $last"
    elif ! printf '%s\n' "$last" | grep -q -- "$pat"; then fail "$name" "no '$pat' in: $last"
    else ok "$name"; fi
}
# no_output NAME DIR FILE: neither FILE nor a temporary file is in DIR
no_output() {
    if [ -e "$2/$3" ]; then fail "$1" "$2/$3 exists"
    elif ls -A "$2" | grep -q '\.tmp'; then fail "$1" "temporary file left: $(ls -A "$2" | grep '\.tmp')"
    else ok "$1"; fi
}
sums() { for f in "$@"; do cksum <"$f"; done; }

# ---------------------------------------------------------------- inputs
M="$T/m.gguf"
"$C" synth -o "$M" --dim 32 --n-ff 64 --layers 2 --heads 4 --vocab 300 --ctx 64 || { fail setup "synth"; finish; }
printf 'the cat sat on the mat. the dog ran.\n%.0s' 1 2 3 4 5 6 7 8 >"$T/corpus.txt"
"$P" -m "$M" -f "$T/corpus.txt" -o "$T/s.gguf" -c 16 -t 1 >/dev/null 2>&1 || { fail setup "profile"; finish; }
"$S" -m "$M" -s "$T/s.gguf" --vram-budget 1M --greedy -o "$T/m.gpuidx" >/dev/null 2>&1 || { fail setup "solve"; finish; }
"$C" synth -o "$T/big.gguf" --dim 256 --n-ff 1024 --layers 8 --vocab 2048 >/dev/null 2>&1 || { fail setup "synth big"; finish; }
INPUTS="$M $T/big.gguf $T/corpus.txt $T/s.gguf $T/m.gpuidx"
have_fixtures && INPUTS="$INPUTS $HC_FIXTURES/stories260K.bin $HC_FIXTURES/tok512.bin"
before=$(sums $INPUTS)

# ---------------------------------------------------------------- full disk
# RLIMIT_FSIZE with SIGXFSZ ignored: write() fails with EFBIG part-way.
mkdir -p "$T/full"
fsz() { (trap '' XFSZ; ulimit -f "$1"; shift; exec "$@"); }
refused full_synth "File too large" fsz 20 "$C" synth -o "$T/full/a.gguf" --dim 64 --n-ff 256 --layers 2
no_output full_synth_clean "$T/full" a.gguf
refused full_quantize "File too large" fsz 8 "$Q" -q "$M" "$T/full/q.gguf" q8_0
no_output full_quantize_clean "$T/full" q.gguf
refused full_profile "File too large" fsz 1 "$P" -m "$M" -f "$T/corpus.txt" -o "$T/full/s.gguf" -c 16 -t 1
no_output full_profile_clean "$T/full" s.gguf
refused full_merge "File too large" fsz 1 "$P" merge "$T/s.gguf" "$T/s.gguf" -o "$T/full/s2.gguf"
no_output full_merge_clean "$T/full" s2.gguf
refused full_solve "File too large" fsz 1 "$S" -m "$M" -s "$T/s.gguf" --vram-budget 1M --greedy -o "$T/full/m.gpuidx"
no_output full_solve_clean "$T/full" m.gpuidx
if have_fixtures; then
    refused full_llama2c "File too large" fsz 100 "$C" llama2c "$HC_FIXTURES/stories260K.bin" "$HC_FIXTURES/tok512.bin" -o "$T/full/l.gguf"
    no_output full_llama2c_clean "$T/full" l.gguf
fi
# A previous file under the final name survives a failed write.
cp "$M" "$T/full/keep.gguf"
refused full_keeps_old "File too large" fsz 8 "$Q" -q "$M" "$T/full/keep.gguf" q8_0
if cmp -s "$M" "$T/full/keep.gguf"; then ok full_keeps_old_file; else fail full_keeps_old_file "changed"; fi

# An output no disk holds (25.5 TiB): refused before any work, where the
# file system reserves space (util-linux's fallocate says whether it does).
reserves=0
fallocate -l 4096 "$T/full/probe" 2>/dev/null && reserves=1
rm -f "$T/full/probe"
if [ $reserves = 1 ]; then
    refused too_big_synth "huge.gguf: the output needs 25.5 TiB: " \
        timeout 60 "$C" synth -o "$T/full/huge.gguf" --dim 1000000 --n-ff 1000000 --layers 1
    no_output too_big_synth_clean "$T/full" huge.gguf
else
    skip too_big_synth "this file system reserves no space (fallocate)"
fi

# A real ENOSPC: a 64 KiB tmpfs (needs mount permission). The output's size
# is reserved before any work (af_reserve), so the refusal says what it
# needs and what is free.
mkdir -p "$T/mnt"
if mount -t tmpfs -o size=64k hcfaults "$T/mnt" 2>/dev/null; then
    refused enospc_synth "a.gguf: the output needs 781.8 KiB: No space left on device (64.0 KiB free on its file system)" \
        "$C" synth -o "$T/mnt/a.gguf"
    no_output enospc_synth_clean "$T/mnt" a.gguf
    refused enospc_quantize "q.gguf: the output needs .*: No space left on device (.* free on its file system)" \
        "$Q" -q "$M" "$T/mnt/q.gguf" f16
    no_output enospc_quantize_clean "$T/mnt" q.gguf
    # GPTQ's size is known only after calibration: the least it can take is
    # checked before, so the refusal comes first (no "gptq:" line of the work)
    refused enospc_gptq "q.gguf: the output needs at least .*: No space left on device (.* free on its file system)" \
        "$Q" -v "$T/big.gguf" "$T/mnt/q.gguf" gptq --calib "$T/corpus.txt" --ctx 16 --calib-tokens 64
    if grep -q '^gptq:' "$T/out"; then fail enospc_gptq_first "calibrated before refusing"; else ok enospc_gptq_first; fi
    no_output enospc_gptq_clean "$T/mnt" q.gguf
    # predictors: the input's tensors are most of the output; checked before collection and training
    refused enospc_predictors "p.gguf: the output needs at least .*: No space left on device" \
        "$P" predictors -m "$M" -f "$T/corpus.txt" -o "$T/mnt/p.gguf" --ctx 16 -t 1
    no_output enospc_predictors_clean "$T/mnt" p.gguf
    umount "$T/mnt"
else
    skip enospc "cannot mount a tmpfs here"
fi

# ---------------------------------------------------------------- SIGKILL mid-write
# Start a big write, kill -9 once its temporary file has data: nothing under
# the final name (or the old file there intact); the input unchanged.
killed() {
    name=$1 dir=$2 out=$3; shift 3
    "$@" >/dev/null 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 600 ]; do
        tmp=$(ls -A "$dir" | grep '\.tmp' | head -1)
        [ -n "$tmp" ] && [ "$(wc -c <"$dir/$tmp" 2>/dev/null || echo 0)" -gt 100000 ] && break
        sleep 0.05; i=$((i + 1))
    done
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    st=$?   # 137: killed; anything else: it ended (and renamed its output) between the check and the kill
    if [ -z "$tmp" ]; then skip "$name" "no temporary file seen before the end"
    elif [ $st -ne 137 ]; then skip "$name" "the write ended before the kill (exit $st)"
    elif [ -e "$dir/$out" ] && ! cmp -s "$dir/$out" "$T/old.gguf"; then fail "$name" "$dir/$out was replaced"
    else ok "$name"; fi
    rm -f "$dir"/.*.tmp*
}
mkdir -p "$T/kill"
killed kill_synth "$T/kill" big.gguf "$C" synth -o "$T/kill/big.gguf" --dim 512 --n-ff 2048 --layers 8 --vocab 4096
cp "$M" "$T/old.gguf"; cp "$M" "$T/kill/q.gguf"
killed kill_quantize_keeps_old "$T/kill" q.gguf "$Q" -q -t 1 "$T/big.gguf" "$T/kill/q.gguf" f16

# ---------------------------------------------------------------- unreadable inputs
# (root ignores chmod 000: a directory and a FIFO stand in for unreadable files)
mkdir -p "$T/dir.gguf"
refused dir_gguf "$T/dir.gguf" "$G" check "$T/dir.gguf"
refused dir_quantize "$T/dir.gguf" "$Q" "$T/dir.gguf" "$T/x.gguf" q8_0
refused dir_run "$T/dir.gguf" "$R" -m "$T/dir.gguf" -n 1
refused dir_profile "$T/dir.gguf" "$P" -m "$T/dir.gguf" -f "$T/corpus.txt" -o "$T/x.gguf"
refused dir_solve_stats "$T/dir.gguf" "$S" -m "$M" -s "$T/dir.gguf" --vram-budget 1M -o "$T/x.gpuidx"
refused dir_llama2c "$T/dir.gguf" "$C" llama2c "$T/dir.gguf" "$T/dir.gguf" -o "$T/x.gguf"
refused dir_corpus "$T/dir.gguf" "$P" -m "$M" -f "$T/dir.gguf" -o "$T/x.gguf"
mkfifo "$T/fifo.gguf"
(printf 'GGUF junk' >"$T/fifo.gguf" &)
refused fifo_gguf "$T/fifo.gguf" timeout 20 "$G" check "$T/fifo.gguf"
if [ "$(id -u)" -ne 0 ]; then
    cp "$M" "$T/locked.gguf"; chmod 000 "$T/locked.gguf"
    refused unreadable_gguf "Permission denied" "$G" check "$T/locked.gguf"
else
    skip unreadable_chmod "root reads chmod 000 files"
fi
refused missing_run "No such file" "$R" -m "$T/none.gguf" -n 1
no_output no_stray_outputs "$T" x.gguf

# ---------------------------------------------------------------- truncated inputs
head -c 5000 "$M" >"$T/short.gguf"
head -c 1000 "$T/s.gguf" >"$T/short-stats.gguf"
head -c 300 "$T/m.gpuidx" >"$T/short.gpuidx"
refused short_gguf "past end of file" "$G" check "$T/short.gguf"
refused short_dump "offset" "$G" dump "$T/short.gguf"
refused short_quantize "past end of file" "$Q" "$T/short.gguf" "$T/x.gguf" q8_0
refused short_run "past end of file" "$R" -m "$T/short.gguf" -n 1
refused short_profile "past end of file" "$P" -m "$T/short.gguf" -f "$T/corpus.txt" -o "$T/x.gguf"
refused short_solve_model "past end of file" "$S" -m "$T/short.gguf" -s "$T/s.gguf" --vram-budget 1M -o "$T/x.gpuidx"
refused short_solve_stats "past end of file" "$S" -m "$M" -s "$T/short-stats.gguf" --vram-budget 1M -o "$T/x.gpuidx"
refused short_merge "past end of file" "$P" merge "$T/s.gguf" "$T/short-stats.gguf" -o "$T/x.gguf"
refused short_show "past end of file" "$P" show "$T/short-stats.gguf"
refused short_gpuidx "cannot fit" "$R" -m "$M" -n 1 --gpu-index "$T/short.gpuidx"
: >"$T/empty"
refused empty_gguf "offset 0" "$G" check "$T/empty"
if have_fixtures; then
    head -c 100000 "$HC_FIXTURES/stories260K.bin" >"$T/short.bin"
    head -c 3000 "$HC_FIXTURES/tok512.bin" >"$T/short-tok.bin"
    refused short_llama2c "header describes" "$C" llama2c "$T/short.bin" "$HC_FIXTURES/tok512.bin" -o "$T/x.gguf"
    refused short_tokenizer "ends at token" "$C" llama2c "$HC_FIXTURES/stories260K.bin" "$T/short-tok.bin" -o "$T/x.gguf"
    # a token's bytes holding a NUL (the token was cut there when written): the second byte of
    # token 300, and of the first piece that begins with U+2581 "the" in a SentencePiece model
    python3 - "$HC_FIXTURES/tok512.bin" "$T/nul-tok.bin" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read()); at = 4
for i in range(300):
    at += 8 + struct.unpack_from('<i', b, at + 4)[0]
b[at + 9] = 0
open(sys.argv[2], 'wb').write(b)
PY
    refused nul_tokenizer "nul-tok.bin: token 300 holds a NUL byte" "$C" llama2c "$HC_FIXTURES/stories260K.bin" "$T/nul-tok.bin" -o "$T/x.gguf"
    if [ -d "$HC_FIXTURES/hf-tiny/llama-relu" ]; then
        mkdir -p "$T/nulspm" && cp "$HC_FIXTURES/hf-tiny/llama-relu/"* "$T/nulspm/" && chmod u+w "$T/nulspm/"*
        python3 -c "import sys; p=sys.argv[1]; b=open(p,'rb').read(); i=b.index(b'\xe2\x96\x81the'); open(p,'wb').write(b[:i+4]+b'\0'+b[i+5:])" "$T/nulspm/tokenizer.model"
        refused nul_spm_piece "tokenizer.model: piece [0-9]* holds a NUL byte" "$C" hf "$T/nulspm" -o "$T/x.gguf"
    fi
fi
no_output no_stray_outputs_short "$T" x.gguf

# ---------------------------------------------------------------- huge declared sizes
# Tiny files declaring 2^40 elements: refused from the header, before any
# allocation, also under a 1 GiB address-space limit (not with ASan, which
# reserves terabytes of shadow memory).
le64() { v=$1; i=0; while [ $i -lt 8 ]; do printf "\\$(printf %03o $((v & 255)))"; v=$((v >> 8)); i=$((i + 1)); done; }
le32() { v=$1; i=0; while [ $i -lt 4 ]; do printf "\\$(printf %03o $((v & 255)))"; v=$((v >> 8)); i=$((i + 1)); done; }
gstr() { le64 ${#1}; printf %s "$1"; }
# one F32 tensor of [2^20, 2^20] elements, no data
{ printf GGUF; le32 3; le64 1; le64 0; gstr w; le32 2; le64 1048576; le64 1048576; le32 0; le64 0; } >"$T/huge-tensor.gguf"
# an array KV of 2^40 u8
{ printf GGUF; le32 3; le64 0; le64 1; gstr k; le32 9; le32 0; le64 1099511627776; } >"$T/huge-array.gguf"
# 2^40 KVs and 2^40 tensors
{ printf GGUF; le32 3; le64 1099511627776; le64 1099511627776; } >"$T/huge-count.gguf"
# llama2.c: dim 2^20, hidden 2^22, 4096 layers
{ le32 1048576; le32 4194304; le32 4096; le32 1; le32 1; le32 32000; le32 256; } >"$T/huge.bin"
# tokenizer.bin whose first token claims 2^31-1 bytes
{ le32 10; le32 0; le32 2147483647; } >"$T/huge-tok.bin"
# safetensors: header length 2^40; and a [2^20, 2^20] F32 tensor in 8 bytes
mkdir -p "$T/hf1" "$T/hf2"
{ le64 1099511627776; printf '{}'; } >"$T/hf1/model.safetensors"
h='{"w":{"dtype":"F32","shape":[1048576,1048576],"data_offsets":[0,8]}}'
{ le64 ${#h}; printf %s "$h"; le64 0; } >"$T/hf2/model.safetensors"
for d in hf1 hf2; do
    printf '{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_hidden_layers":1,"num_attention_heads":4,"vocab_size":300}' >"$T/$d/config.json"
    printf %s '{"normalizer":{"type":"Replace","pattern":{"String":" "},"content":"\u2581"},"model":{"type":"BPE",'\
'"byte_fallback":true,"vocab":{"<unk>":0,"<s>":1,"</s>":2},"merges":[]}}' >"$T/$d/tokenizer.json"
done
asan=0
grep -q __asan_init "$G" 2>/dev/null && asan=1
vmem() { if [ $asan = 1 ]; then "$@"; else (ulimit -v 1048576; exec "$@"); fi; }
[ $asan = 1 ] && skip huge_ulimit "ASan build: no address-space limit"
refused huge_tensor "runs past end of file" vmem "$G" check "$T/huge-tensor.gguf"
refused huge_tensor_run "runs past end of file" vmem "$R" -m "$T/huge-tensor.gguf" -n 1
refused huge_array "exceeds 2^30" vmem "$G" check "$T/huge-array.gguf"
refused huge_count "huge-count.gguf: offset" vmem "$G" dump "$T/huge-count.gguf"
refused huge_count_quantize "huge-count.gguf: offset" vmem "$Q" "$T/huge-count.gguf" "$T/x.gguf" q8_0
refused huge_llama2c "huge.bin" vmem "$C" llama2c "$T/huge.bin" "$T/huge-tok.bin" -o "$T/x.gguf"
if have_fixtures; then
    refused huge_tokenizer "runs past the end of the file" vmem "$C" llama2c "$HC_FIXTURES/stories260K.bin" "$T/huge-tok.bin" -o "$T/x.gguf"
fi
refused huge_st_header "not a safetensors file" vmem "$C" hf "$T/hf1" -o "$T/x.gguf"
refused huge_st_shape "byte size does not match" vmem "$C" hf "$T/hf2" -o "$T/x.gguf"
no_output no_stray_outputs_huge "$T" x.gguf

# ---------------------------------------------------------------- control bytes in names
# A key named "a<LF>b" twice: the message quotes it, on one line.
{ printf GGUF; le32 3; le64 0; le64 2; gstr "$(printf 'a\nb')"; le32 4; le32 1; gstr "$(printf 'a\nb')"; le32 4; le32 2; } >"$T/ctl.gguf"
refused control_bytes_one_line "duplicate key 'a?b'" "$G" check "$T/ctl.gguf"

# ---------------------------------------------------------------- issue 19: data safety
# 1. An output that is one of the inputs (same name, a symbolic link, a hard
#    link), or given twice, is refused before any work; the inputs stay intact.
ln -s "$M" "$T/link.gguf"; ln "$M" "$T/hard.gguf"
refused same_solve_model "same file as the input" "$S" -m "$M" -s "$T/s.gguf" --vram-budget 1M --greedy -o "$M"
refused same_solve_report "same file as the input $T/s.gguf" "$S" -m "$M" -s "$T/s.gguf" --vram-budget 1M --greedy -o "$T/x.gpuidx" --report "$T/s.gguf"
refused same_solve_svg "same file as the input" "$S" -m "$M" -s "$T/s.gguf" --vram-budget 1M --greedy -o "$T/x.gpuidx" --svg "$M"
refused same_solve_twice "given twice" "$S" -m "$M" -s "$T/s.gguf" --vram-budget 1M --greedy -o "$T/x.gpuidx" --report "$T/x.gpuidx"
refused same_profile "same file as the input" "$P" -m "$M" -f "$T/corpus.txt" -o "$M" -c 16 -t 1
refused same_profile_corpus "same file as the input" "$P" -m "$M" -f "$T/corpus.txt" -o "$T/corpus.txt" -c 16 -t 1
refused same_quantize "same file as the input" "$Q" "$M" "$M" q8_0
refused same_quantize_symlink "same file as the input" "$Q" "$T/link.gguf" "$M" q8_0
refused same_quantize_hardlink "hard.gguf: output is the same file as the input" "$Q" "$M" "$T/hard.gguf" q8_0
refused same_merge "same file as the input" "$P" merge "$T/s.gguf" "$T/s.gguf" -o "$T/s.gguf"
refused same_show_svg "same file as the input" "$P" show "$T/s.gguf" --svg "$T/s.gguf"
refused same_predictors "same file as the input" "$P" predictors -m "$M" -f "$T/corpus.txt" -o "$M"
if have_fixtures; then
    cp "$HC_FIXTURES/stories260K.bin" "$T/ck.bin"
    refused same_llama2c "same file as the input" "$C" llama2c "$T/ck.bin" "$HC_FIXTURES/tok512.bin" -o "$T/ck.bin"
    if cmp -s "$T/ck.bin" "$HC_FIXTURES/stories260K.bin"; then ok same_llama2c_intact; else fail same_llama2c_intact "changed"; fi
fi
mkdir -p "$T/hfin"
cp "$T/hf1/config.json" "$T/hfin/"
refused same_hf_dir_file "same file as the input" "$C" hf "$T/hfin" -o "$T/hfin/config.json"
refused output_is_dir "output is a directory" "$Q" "$M" "$T/dir.gguf" q8_0
rm -f "$T/link.gguf" "$T/hard.gguf"

# 2. An input that shrinks while mapped: one line, exit 1, no temporary (the
#    handler itself: tests/test_common.c test_sigbus_on_shrunk_map).
mkdir -p "$T/shrink"
cp "$T/big.gguf" "$T/shrink/in.gguf"
"$Q" -t 1 "$T/shrink/in.gguf" "$T/shrink/q.gguf" f16 >/dev/null 2>"$T/shrink.err" &
pid=$!
i=0
while [ $i -lt 600 ]; do
    tmp=$(ls -A "$T/shrink" | grep '\.tmp' | head -1)
    [ -n "$tmp" ] && [ "$(wc -c <"$T/shrink/$tmp" 2>/dev/null || echo 0)" -gt 100000 ] && break
    sleep 0.05; i=$((i + 1))
done
[ -n "$tmp" ] && : >"$T/shrink/in.gguf"
wait $pid; rc=$?
if [ -z "$tmp" ]; then skip shrink_quantize "hc-quantize ended before the input could be truncated"
elif [ $rc -eq 0 ]; then skip shrink_quantize "hc-quantize had read every tensor before the truncation"
elif [ $rc -ne 1 ]; then fail shrink_quantize "exit $rc (want 1; 135 is SIGBUS)"
elif ! grep -q "in.gguf: file changed while being read" "$T/shrink.err"; then fail shrink_quantize "$(tail -1 "$T/shrink.err")"
else no_output shrink_quantize "$T/shrink" q.gguf; fi

# 3. A zip bomb: activation_0.pt whose storage declares 256 MiB of deflated
#    zeros (a 256 KiB file) is refused before inflating; peak memory stays small.
#    bomb3: a 1 MB file whose storage declares the 16 MiB its tensor needs but
#    inflates to 1 GiB is refused after reading 16 MiB + 1 byte.
mkdir -p "$T/bomb" "$T/bomb2" "$T/bomb3"
python3 - "$T/bomb/activation_0.pt" "$T/bomb2/activation_0.pt" "$T/bomb3/activation_0.pt" <<'PY' || fail zip_bomb_setup "python3"
import struct, sys, zipfile, zlib
def pint(v): return b"J" + struct.pack("<i", v)
def binunicode(s): return b"X" + struct.pack("<I", len(s)) + s.encode()
def pickle(numel, n):   # torch.save of a 1-D FloatStorage tensor of n elements
    return (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nq\x00((" + binunicode("storage") +
            b"ctorch\nFloatStorage\nq\x01" + binunicode("0") + binunicode("cpu") + pint(numel) +
            b"tq\x02Q" + pint(0) + pint(n) + b"\x85" + pint(1) + b"\x85\x89ccollections\nOrderedDict\n)Rtq\x03Rq\x04.")
def write(path, numel, data):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", pickle(numel, numel))
        z.writestr("archive/data/0", data)
write(sys.argv[1], 1 << 26, bytes(1 << 28))   # 2^26 floats: 256 MiB of zeros
write(sys.argv[2], 65, struct.pack("<65f", *range(65)))   # one neuron more than the model's 64
def rawzip(path, entries):   # (name, method, data as stored, declared size, crc): zipfile cannot lie
    out, cd = b"", b""
    for name, method, data, size, crc in entries:
        head = struct.pack("<HHHIIIIHH", 20, 0, method, 0, crc, len(data), size, len(name), 0) + name.encode()
        cd += struct.pack("<IH", 0x02014b50, 20) + head[:-len(name)] + struct.pack("<HHHII", 0, 0, 0, 0, len(out)) + name.encode()
        out += struct.pack("<I", 0x04034b50) + head + data
    open(path, "wb").write(out + cd + struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, len(entries), len(entries), len(cd), len(out), 0))
c = zlib.compressobj(9, zlib.DEFLATED, -15)   # 1 MiB of zeros after a full flush repeats: 1 GiB in 1 MB
gib = (c.compress(bytes(1 << 20)) + c.flush(zlib.Z_FULL_FLUSH)) * 1024 + b"\x03\x00"
pk = pickle(1 << 22, 1 << 22)
rawzip(sys.argv[3], [("archive/data.pkl", 0, pk, len(pk), zlib.crc32(pk)), ("archive/data/0", 8, gib, 1 << 24, 0)])
PY
# peak_rss CMD...: runs CMD (stderr into bomb.err), writes its peak RSS in KiB
# (getrusage) to bomb.rss; the exit status passes through
peak_rss() {
    python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
open(sys.argv[1], "w").write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)' "$T/bomb.rss" "$@" 2>"$T/bomb.err"
}
peak_rss "$P" import-powerinfer "$T/bomb" -o "$T/x.gguf"
rc=$?
last=$(tail -1 "$T/bomb.err")
rss=$(cat "$T/bomb.rss")
if [ $rc -ne 1 ] || ! printf '%s\n' "$last" | grep -q "more than the 16777216 expected"; then fail zip_bomb "exit $rc: $last"
elif [ "$rss" -gt 65536 ]; then fail zip_bomb_memory "peak RSS ${rss} KiB (want < 64 MiB)"
else ok zip_bomb; fi
refused zip_bomb_model "more than the 64 expected" "$P" import-powerinfer "$T/bomb2" -m "$M" -o "$T/x.gguf"
peak_rss "$P" import-powerinfer "$T/bomb3" -o "$T/x.gguf"
rc=$?
last=$(tail -1 "$T/bomb.err")
rss=$(cat "$T/bomb.rss")
if [ $rc -ne 1 ] || ! printf '%s\n' "$last" | grep -q "bomb3/activation_0.pt: entry 'archive/data/0' of 16777216 bytes: more data than declared"; then
    fail zip_bomb_inflated "exit $rc: $last"
elif [ "$rss" -gt 65536 ]; then fail zip_bomb_inflated_memory "peak RSS ${rss} KiB (want < 64 MiB)"
else ok zip_bomb_inflated; fi

# 4. hc-gguf dump prints control bytes of tensor names escaped, on one line.
{ printf GGUF; le32 3; le64 1; le64 0; gstr "$(printf 'a\nb\033[31m')"; le32 1; le64 1; le32 0; le64 0; printf '\0\0\0\0\0\0\0\0'; le32 0; } >"$T/ctlname.gguf"
if "$G" dump "$T/ctlname.gguf" >"$T/dump.txt" 2>&1 && ! grep -q "$(printf '\033')" "$T/dump.txt" &&
   grep -q 'a\\nb\\x1b\[31m' "$T/dump.txt"; then ok dump_escapes_tensor_names
else fail dump_escapes_tensor_names "$(cat -v "$T/dump.txt" | tail -3)"; fi
# C1 controls too: U+009B (CSI, bytes C2 9B) and a lone 0x9B byte (a CSI to a
# terminal that is not UTF-8), in a tensor name (dump; 8 bytes like the one
# above, so the data stays where it is) and a key (message).
{ printf GGUF; le32 3; le64 1; le64 0; gstr "$(printf 'a\302\233[1mb\233')"; le32 1; le64 1; le32 0; le64 0; printf '\0\0\0\0\0\0\0\0'; le32 0; } >"$T/c1name.gguf"
if "$G" dump "$T/c1name.gguf" >"$T/dump.txt" 2>&1 && ! grep -q "$(printf '\233')" "$T/dump.txt" &&
   grep -q 'a\\u009b\[1mb\\x9b' "$T/dump.txt"; then ok dump_escapes_c1
else fail dump_escapes_c1 "$(cat -v "$T/dump.txt" | tail -3)"; fi
{ printf GGUF; le32 3; le64 0; le64 2; gstr "$(printf 'k\302\233x\233')"; le32 4; le32 1; gstr "$(printf 'k\302\233x\233')"; le32 4; le32 2; } >"$T/c1key.gguf"
refused c1_one_line "duplicate key 'k?x?'" "$G" check "$T/c1key.gguf"

# 5, 7. A special token id outside the vocabulary is refused at load, naming
#    the file (once) and the key.
R19=tests/regress/model
refused bos_out_of_range "bos-out-of-range.gguf: tokenizer.ggml.bos_token_id = 1000000000 is not a token id" "$R" -m "$R19/bos-out-of-range.gguf" -n 1
if [ "$(grep -o 'bos-out-of-range.gguf' "$T/err" | wc -l)" -eq 1 ]; then ok tokenizer_error_names_file_once
else fail tokenizer_error_names_file_once "$(tail -1 "$T/err")"; fi

# 6. import-powerinfer refuses a layer file it cannot use instead of ignoring it.
mkdir -p "$T/act"
cp "$T/bomb2/activation_0.pt" "$T/act/activation_0.pt"
cp "$T/bomb2/activation_0.pt" "$T/act/activation_5000.pt"
refused import_layer_4096 "activation_5000.pt: layer 5000, but import-powerinfer reads at most 4096 layers" "$P" import-powerinfer "$T/act" -o "$T/x.gguf"
rm "$T/act/activation_5000.pt"; cp "$T/act/activation_0.pt" "$T/act/activation_2.pt"; cp "$T/act/activation_0.pt" "$T/act/activation_1.pt"
refused import_layer_past_model "activation_2.pt: layer 2, but the model has 2 layers" "$P" import-powerinfer "$T/act" -m "$M" -o "$T/x.gguf"

# 8. hc-solve writes its index, report and drawing together or not at all:
#    the drawing does not fit under the file size limit, so nothing is left.
mkdir -p "$T/group"
refused solve_outputs_together "x.svg: write failed" fsz 4 "$S" -m "$M" -s "$T/s.gguf" --vram-budget 1M --greedy -o "$T/group/x.gpuidx" --report "$T/group/x.json" --svg "$T/group/x.svg"
if [ -z "$(ls -A "$T/group")" ]; then ok solve_outputs_together_clean; else fail solve_outputs_together_clean "left: $(ls -A "$T/group")"; fi

# 9. hc-solve and import-powerinfer -m refuse a model hc-run refuses, with its message.
refused solve_unrunnable_model "head dimension 1 is odd" "$S" -m "$R19/odd-head-dim.gguf" -s "$T/s.gguf" --vram-budget 1M -o "$T/x.gpuidx"
refused solve_bad_bos "bos_token_id = 1000000000" "$S" -m "$R19/bos-out-of-range.gguf" -s "$T/s.gguf" --vram-budget 1M -o "$T/x.gpuidx"
refused import_unrunnable_model "head dimension 1 is odd" "$P" import-powerinfer "$T/act" -m "$R19/odd-head-dim.gguf" -o "$T/x.gguf"

# 10. A later write to the same target removes the temporaries of a writer
#     that is gone (SIGKILL), and keeps those of one still running.
mkdir -p "$T/stale"
sh -c 'exit 0' & gone=$!; wait $gone
: >"$T/stale/.s.gguf.tmp$gone.0"; : >"$T/stale/.s.gguf.tmp$$.0"
"$C" synth -o "$T/stale/s.gguf" >/dev/null 2>&1
if [ -e "$T/stale/.s.gguf.tmp$gone.0" ]; then fail stale_temporary_removed "the dead writer's temporary is still there"
elif [ ! -e "$T/stale/.s.gguf.tmp$$.0" ]; then fail stale_temporary_removed "a live writer's temporary was removed"
else ok stale_temporary_removed; fi
rm -f "$T/stale/.s.gguf.tmp$$.0"

# 11. hc-profile predictors checks that it can write its output before reading
#     the corpus or training (the missing corpus would be the later error).
refused predictors_output_first "cannot create a temporary file in $T/nodir" "$P" predictors -m "$M" -f "$T/none.txt" -o "$T/nodir/p.gguf"
no_output no_stray_outputs_issue19 "$T" x.gguf

# ---------------------------------------------------------------- inputs untouched
after=$(sums $INPUTS)
if [ "$before" = "$after" ]; then ok inputs_unchanged; else fail inputs_unchanged "a checksum changed"; fi
finish

#!/bin/sh
# Model families (issue 17): hc-convert hf + hc-run reproduce the logits that
# transformers computed for every checkpoint of $HC_FIXTURES/hf-tiny (ref.json)
# to 1e-5 of the largest logit; config keys that change the math are
# implemented (old and new rope keys, tied embeddings stored either way,
# sliding windows within the context) or refused by name; for the ReLU
# families (gated, symmetric dReLU, sequential) the sparse FFN and the hybrid
# split (hc-profile + hc-solve + --gpu-index on the OpenCL device) give the
# dense logits.
. tests/lib.sh
C="$HC_BIN/hc-convert"
R="$HC_BIN/hc-run"
H="$HC_FIXTURES/hf-tiny"
if [ ! -d "$H" ]; then skip families "no $H"; finish; fi
if ! command -v python3 >/dev/null; then skip families "no python3"; finish; fi

# logits_match NAME DIR [REF_DIR] [hc-run options]: convert DIR (f32) and compare
# the last-position logits of REF_DIR/ref.json's prompt with its logits.
logits_match() {
    name=$1; dir=$2; ref=${3:-$2}; shift 2; [ $# -gt 0 ] && shift
    prompt=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt'])" "$ref/ref.json")
    if ! "$C" hf "$dir" -o "$T/$name.gguf" --outtype f32 >/dev/null 2>"$T/err"; then
        fail "$name" "convert: $(head -c 300 "$T/err")"; return
    fi
    if ! "$R" -m "$T/$name.gguf" -p "$prompt" --logits -n 0 -t 2 "$@" >"$T/$name.txt" 2>"$T/err"; then
        fail "$name" "run: $(head -c 300 "$T/err")"; return
    fi
    if python3 - "$ref/ref.json" "$T/$name.txt" >"$T/why" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1]))["logits"]
got = [float(x) for x in open(sys.argv[2])]
top = max(abs(x) for x in ref)
d = max(abs(a - b) for a, b in zip(ref, got)) / top if len(got) == len(ref) else float("inf")
print("%d logits, max difference %.3g of the largest" % (len(got), d))
sys.exit(0 if d <= 1e-5 else 1)
PY
    then ok "$name"; else fail "$name" "$(cat "$T/why")"; fi
}

# variant NAME SRC PYTHON: a copy of SRC (links to its files) whose config.json
# the Python statements edit as `c`.
variant() {
    mkdir -p "$T/$1"
    for f in "$2"/*; do ln -sf "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$T/$1/"; done
    rm "$T/$1/config.json"
    python3 -c "import json,sys; c=json.load(open(sys.argv[1])); $3; json.dump(c, open(sys.argv[2], 'w'))" \
        "$2/config.json" "$T/$1/config.json"
}

for d in "$H"/*/; do
    d=${d%/}
    [ -f "$d/ref.json" ] && logits_match "$(basename "$d")" "$d"
done

# The weights copied into 2 MiB pages (--no-mmap; the default where the kernel
# gives them) or run from the file mapping (--mmap): the same bits for every
# family (Falcon's q/k/v are row views of one tensor, tied embeddings share
# theirs) and with the sparse FFN, which copies its own rows
mmap_same() {   # NAME [hc-run options]
    name=$1; shift
    if "$R" -m "$T/$name.gguf" -p "the cat" --logits -n 0 -t 2 -v --mmap "$@" >"$T/map.txt" 2>"$T/map.err" &&
       "$R" -m "$T/$name.gguf" -p "the cat" --logits -n 0 -t 2 -v --no-mmap "$@" >"$T/copy.txt" 2>"$T/copy.err" &&
       grep -q "^weights: in the file mapping" "$T/map.err" && grep -q "^weights: copied" "$T/copy.err" &&
       cmp -s "$T/map.txt" "$T/copy.txt"; then ok "mmap_same_bits_$name${1:-}"
    else fail "mmap_same_bits_$name${1:-}" "logits differ or a run failed: $(tail -c 200 "$T/copy.err")"; fi
}
for d in "$H"/*/; do
    d=$(basename "$d")
    [ -f "$T/$d.gguf" ] && mmap_same "$d"
done
[ -f "$T/llama-relu.gguf" ] && mmap_same llama-relu --sparse
# Q4_0 and Q8_0 (hc-quantize --pure): where the type runs on AVX-512 the copy is in chunks of 16
# blocks (runtime/x16.h), Falcon's row views and the tied embeddings too: still the mapping's bits
for q in Q4_0 Q8_0; do
    for d in falcon llama-tied-gqa; do
        [ -f "$T/$d.gguf" ] || continue
        if ! "$HC_BIN/hc-quantize" -q --pure "$T/$d.gguf" "$T/$d-$q.gguf" $q >/dev/null 2>"$T/err"; then
            fail "mmap_same_bits_$d-$q" "quantize: $(head -c 200 "$T/err")"; continue
        fi
        mmap_same "$d-$q"
        if grep -q "$q avx512" "$T/copy.err"; then
            grep -q "^weights: copied into 2 MiB pages, [1-9][0-9]* Q4_0/Q8_0 matrices in chunks of 16 blocks" \
                "$T/copy.err" && ok "chunks_copied_$d-$q" || fail "chunks_copied_$d-$q" "$(grep '^weights' "$T/copy.err")"
        else skip "chunks_copied_$d-$q" "$q does not run on AVX-512 here"; fi
    done
done

# The sparse FFN's own copies of the gate and up rows are in chunks of 16 blocks where the type's
# kernels read those (x16.h: Q4_0 on AVX2 or AVX-512, Q8_0 on AVX-512); test_hybrid checks their
# logits against the dense FFN's
for q in Q4_0 Q8_0; do
    m="$T/llama-relu-$q.gguf"
    if ! { [ -f "$T/llama-relu.gguf" ] && "$HC_BIN/hc-quantize" -q --pure "$T/llama-relu.gguf" "$m" $q >/dev/null 2>&1 &&
           "$R" -m "$m" -p "the cat" -n 1 -t 2 -v --sparse >/dev/null 2>"$T/chunks.err"; }; then
        fail "sparse_chunks_copied_$q" "quantize or run failed: $(tail -c 200 "$T/chunks.err")"; continue
    fi
    ran=avx512; [ $q = Q4_0 ] && ran=avx
    if grep -q "$q $ran" "$T/chunks.err"; then
        grep -q "^sparse: .*(gate and up rows in chunks of 16 blocks;" "$T/chunks.err" && ok "sparse_chunks_copied_$q" ||
            fail "sparse_chunks_copied_$q" "$(grep '^sparse' "$T/chunks.err" | head -c 300)"
    else skip "sparse_chunks_copied_$q" "$q's kernels here read ggml's layout"; fi
done

# Budgets that hold every layer's attention and the output head, and some of the FFN neurons:
# the hot rows' sums stay on the device and the CPU sends its cold share (one exchange per
# layer); the same neurons are skipped as on the CPU, and greedy text is the CPU's
P="The dog ran to the park and found a big red ball."
for f in llama-relu:1200K opt:1600K bamboo:1200K; do
    b=${f#*:}; f=${f%:*}; m="$T/$f.gguf"
    "$R" -m "$m" -p "$P" --logits -n 0 -t 2 >"$T/dense.txt" 2>/dev/null
    "$R" -m "$m" -p "$P" --logits -n 0 -t 2 --sparse >"$T/sparse.txt" 2>/dev/null
    same_logits "sparse_equals_dense_$f" "$T/dense.txt" "$T/sparse.txt"
    if "$HC_BIN/hc-profile" -m "$m" -f models/synth-corpus.txt -o "$T/$f.stats" >/dev/null 2>"$T/hybrid.err" &&
       "$HC_BIN/hc-solve" -m "$m" -s "$T/$f.stats" --vram-budget "$b" --min-layer-neurons 0 -o "$T/$f.gpuidx" \
           >/dev/null 2>"$T/hybrid.err" &&
       "$R" -m "$m" -p "$P" --logits -n 0 -t 2 --gpu-index "$T/$f.gpuidx" --vram-budget "$b" >"$T/hybrid.txt" \
           2>"$T/hybrid.err" && grep -q "^hybrid: .* [0-9]* of [0-9]* neurons on the device" "$T/hybrid.err" &&
       grep -q "^offload: 3 of 3 layers (attention, norms, KV cache), the output head on the device" "$T/hybrid.err"; then
        same_logits "hybrid_equals_dense_$f" "$T/dense.txt" "$T/hybrid.txt"
        "$R" -m "$m" -p "$P" -n 12 --temp 0 -t 2 -v --sparse >"$T/sparse.gen" 2>"$T/sparse.err"
        "$R" -m "$m" -p "$P" -n 12 --temp 0 -t 2 -v --gpu-index "$T/$f.gpuidx" --vram-budget "$b" >"$T/hybrid.gen" \
            2>"$T/hybrid.err"
        cpu=$(grep -o "all layers: skipped *[0-9.]*%" "$T/sparse.err")
        dev=$(grep -o "all layers: skipped *[0-9.]*%" "$T/hybrid.err")
        if [ -n "$cpu" ] && [ "$cpu" = "$dev" ] && cmp -s "$T/sparse.gen" "$T/hybrid.gen" &&
           grep -q "recall 1.0000" "$T/hybrid.err" && grep -q "device served [1-9][0-9.]*% of activations" "$T/hybrid.err" &&
           ! grep -q "waited" "$T/hybrid.err"; then ok "hybrid_one_exchange_$f"
        else fail "hybrid_one_exchange_$f" "CPU '$cpu', device '$dev'; $(grep -h 'FFN time' "$T/hybrid.err")"; fi
    elif grep -q "OpenCL" "$T/hybrid.err" 2>/dev/null; then
        skip "hybrid_equals_dense_$f" "no OpenCL device: $(head -c 200 "$T/hybrid.err")"
    else
        fail "hybrid_equals_dense_$f" "$(tail -c 300 "$T/hybrid.err" 2>/dev/null)"
    fi
done

# BF16 hot rows on the device (their own kernels: bf16 rows times the bf16-rounded input): a
# split of llama-relu in BF16 gives the sparse CPU's logits (the dense BF16 FFN rounds h to
# bf16 for its down product, the sparse one does not)
m=$T/llama-relu-bf16.gguf
if "$HC_BIN/hc-quantize" "$T/llama-relu.gguf" "$m" BF16 >/dev/null 2>"$T/bf16.err" &&
   "$HC_BIN/hc-profile" -m "$m" -f models/synth-corpus.txt -o "$T/bf16.stats" >/dev/null 2>>"$T/bf16.err" &&
   "$HC_BIN/hc-solve" -m "$m" -s "$T/bf16.stats" --vram-budget 600K --min-layer-neurons 0 -o "$T/bf16.gpuidx" \
       >/dev/null 2>>"$T/bf16.err" &&
   "$R" -m "$m" -p "$P" --logits -n 0 -t 2 --sparse >"$T/sparse.txt" 2>>"$T/bf16.err" &&
   "$R" -m "$m" -p "$P" --logits -n 0 -t 2 --gpu-index "$T/bf16.gpuidx" --vram-budget 600K >"$T/hybrid.txt" \
       2>"$T/hybrid.err"; then
    if grep -q "^hybrid: .* [1-9][0-9]* of [0-9]* neurons on the device" "$T/hybrid.err"; then
        same_logits hybrid_bf16_equals_sparse "$T/sparse.txt" "$T/hybrid.txt"
    elif grep -q "OpenCL" "$T/hybrid.err"; then skip hybrid_bf16_equals_sparse "no OpenCL device"
    else fail hybrid_bf16_equals_sparse "no hot rows on the device: $(grep -h 'hybrid\|offload' "$T/hybrid.err")"; fi
else
    fail hybrid_bf16_equals_sparse "$(tail -c 300 "$T/bf16.err" "$T/hybrid.err" 2>/dev/null)"
fi

# hc-solve's bytes per neuron count the per-neuron biases the device stores: OPT (F32) has
# an up row, a down row and ffn_up.bias (2·n_embd·4 + 4), llama-relu three rows; the sum over
# the chosen neurons is what hc-run then puts on the device
neuron_bytes() {   # NAME BUDGET EXPECTED
    e=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['hidden_size'])" "$H/$1/config.json")
    want=$(( $3 * e * 4 ${4:-} ))
    if "$HC_BIN/hc-profile" -m "$T/$1.gguf" -f models/synth-corpus.txt -o "$T/nb.stats" >/dev/null 2>"$T/err" &&
       "$HC_BIN/hc-solve" -m "$T/$1.gguf" -s "$T/nb.stats" --vram-budget "$2" --min-layer-neurons 0 -o "$T/nb.gpuidx" \
           --report "$T/nb.json" >/dev/null 2>"$T/err" &&
       python3 - "$T/nb.json" "$want" >"$T/why" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
got = {l["neuron_bytes"] for l in j["layers"]}
print("neuron_bytes %s, expected %s; gpu_bytes %d" % (sorted(got), sys.argv[2], j["totals"]["gpu_bytes"]))
sys.exit(0 if got == {int(sys.argv[2])} and j["totals"]["gpu_neurons"] > 0 else 1)
PY
    then ok "solver_neuron_bytes_$1"; else fail "solver_neuron_bytes_$1" "$(cat "$T/why" "$T/err" | head -c 300)"; fi
    kib=$(python3 -c "import json,sys; print('%.1f KiB' % (json.load(open(sys.argv[1]))['totals']['gpu_bytes'] / 1024))" "$T/nb.json")
    if "$R" -m "$T/$1.gguf" -p hi -n 1 --gpu-index "$T/nb.gpuidx" --vram-budget "$2" >/dev/null 2>"$T/err"; then
        if grep -q "on the device ($kib)" "$T/err"; then ok "device_bytes_equal_solver_$1"
        else fail "device_bytes_equal_solver_$1" "solver $kib; $(grep hybrid "$T/err")"; fi
    elif grep -q "OpenCL" "$T/err"; then skip "device_bytes_equal_solver_$1" "no OpenCL device"
    else fail "device_bytes_equal_solver_$1" "$(head -c 300 "$T/err")"; fi
}
neuron_bytes opt 1700K 2 "+ 4"
neuron_bytes llama-relu 1000K 3

# a GELU model's statistics say gelu (they said silu), and their reader takes them
if [ ! -f "$T/falcon.gguf" ]; then skip stats_activation_gelu "no falcon model"
elif "$HC_BIN/hc-profile" -m "$T/falcon.gguf" -f models/synth-corpus.txt -o "$T/falcon.stats" >/dev/null 2>"$T/err" &&
     "$HC_BIN/hc-profile" show "$T/falcon.stats" --json 2>>"$T/err" | grep -q '"activation":[[:space:]]*"gelu"'
then ok stats_activation_gelu
else fail stats_activation_gelu "$(head -c 300 "$T/err")"; fi

# GPTQ of Falcon's fused attn_qkv, quantized as the one layer it is: the same file whatever
# -t, hc-run loads the native companions (Q, K, V as row views) and the Q4_0 export, and the
# perplexity stays within 2% of F32's (the tiny random models' is ~510)
CAL=$HC_FIXTURES/tinystories-calib.txt
for f in falcon falcon-mq; do
    if [ ! -f "$CAL" ]; then skip "gptq_$f" "no $CAL"; continue; fi
    head -c 20000 "$CAL" >"$T/eval.txt"
    g="GPTQ --calib $CAL --ctx 64 --calib-tokens 1024 --group-size 32"
    if "$HC_BIN/hc-quantize" -q "$T/$f.gguf" "$T/$f-g1.gguf" $g -t 1 >/dev/null 2>"$T/err" &&
       "$HC_BIN/hc-quantize" -q "$T/$f.gguf" "$T/$f-g2.gguf" $g -t 2 >/dev/null 2>>"$T/err" &&
       "$HC_BIN/hc-quantize" -q "$T/$f.gguf" "$T/$f-q4.gguf" GPTQ --calib "$CAL" --ctx 64 --calib-tokens 1024 \
           --export q4_0 >/dev/null 2>>"$T/err" &&
       "$HC_BIN/hc-gguf" dump "$T/$f-g1.gguf" | grep -q "blk.0.attn_qkv.weight.qweight" &&
       "$HC_BIN/hc-gguf" dump "$T/$f-q4.gguf" | grep -q "blk.0.attn_qkv.weight  *Q4_0"; then
        if cmp -s "$T/$f-g1.gguf" "$T/$f-g2.gguf"; then ok "gptq_${f}_threads_same_file"
        else fail "gptq_${f}_threads_same_file" "-t 1 and -t 2 differ"; fi
        for m in "$f" "$f-g1" "$f-q4"; do
            "$R" -m "$T/$m.gguf" --perplexity "$T/eval.txt" -c 128 -t 2 2>/dev/null | sed -n 's/^perplexity: //p' >"$T/$m.ppl"
        done
        if python3 - "$T/$f.ppl" "$T/$f-g1.ppl" "$T/$f-q4.ppl" >"$T/why" <<'PY'
import sys
base, native, q4 = (float(open(p).read() or "nan") for p in sys.argv[1:])
print("perplexity F32 %.3f, GPTQ native %.3f, GPTQ Q4_0 %.3f" % (base, native, q4))
sys.exit(0 if abs(native / base - 1) < 0.02 and abs(q4 / base - 1) < 0.02 else 1)
PY
        then ok "gptq_${f}_perplexity"; else fail "gptq_${f}_perplexity" "$(cat "$T/why")"; fi
    else
        fail "gptq_$f" "$(head -c 300 "$T/err")"
    fi
done

# hc-convert synth --arch: every family's tensor set loads; sparse = dense
for a in llama qwen2 bamboo opt falcon; do
    if "$C" synth --arch "$a" --dim 64 --n-ff 256 --layers 2 --heads 4 --kv-heads 2 --hot-fraction 0.2 \
           -o "$T/s-$a.gguf" >/dev/null 2>"$T/err" &&
       "$HC_BIN/hc-gguf" dump "$T/s-$a.gguf" | grep -q "general.architecture .*\"$a\"" &&
       "$R" -m "$T/s-$a.gguf" -p "the cat sat" --logits -n 0 >"$T/dense.txt" 2>"$T/err" &&
       "$R" -m "$T/s-$a.gguf" -p "the cat sat" --logits -n 0 --sparse >"$T/sparse.txt" 2>"$T/err"; then
        same_logits "synth_arch_$a" "$T/dense.txt" "$T/sparse.txt"
    else
        fail "synth_arch_$a" "$(head -c 300 "$T/err")"
    fi
done
check_fails synth_bad_arch "expected llama, qwen2" "$C" synth --arch gpt2 -o "$T/x.gguf"

# Llama 3 scaling in the old keys (rope_theta + rope_scaling), same model
variant old-rope-keys "$H/llama3-ropescale" \
    'p = c.pop("rope_parameters"); c["rope_theta"] = p.pop("rope_theta"); c["rope_scaling"] = p'
logits_match old_rope_keys "$T/old-rope-keys" "$H/llama3-ropescale"

# head_dim != hidden_size / heads, against a plain-Python reference forward pass
mkdir -p "$T/headdim"
ln -s "$(cd "$H/llama-silu" && pwd)/tokenizer.model" "$T/headdim/"
if python3 tests/hf_headdim_ref.py "$H/llama-silu" "$T/headdim" 2>"$T/err"; then
    logits_match head_dim_not_hidden_over_heads "$T/headdim"
    check head_dim_keys sh -c "'$HC_BIN/hc-gguf' dump '$T/head_dim_not_hidden_over_heads.gguf' | grep -q 'llama.attention.key_length.*12'"
else
    fail head_dim_not_hidden_over_heads "reference: $(head -c 300 "$T/err")"
fi

# tied embeddings stored as lm_head.weight only
mkdir -p "$T/tied-head"
for f in config.json tokenizer.model ref.json; do ln -s "$(cd "$H/llama-tied-gqa" && pwd)/$f" "$T/tied-head/"; done
python3 - "$H/llama-tied-gqa/model.safetensors" "$T/tied-head/model.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
hdr["lm_head.weight"] = hdr.pop("model.embed_tokens.weight")
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
PY
logits_match tied_lm_head_only "$T/tied-head" "$H/llama-tied-gqa"

# ProSparse: FATReLU with threshold 0 is ReLU (transformers' logits); with 0.05 the dense
# FFN (zeroing gate values below it) and the sparse one (its keep rule) agree, and differ from ReLU
variant fat0 "$H/llama-relu" 'c["architectures"] = ["SparseLlamaForCausalLM"]; c["hidden_act"] = "fatrelu"; c["hidden_act_param"] = 0.0'
logits_match fatrelu_zero_is_relu "$T/fat0" "$H/llama-relu"
variant fat "$H/llama-relu" 'c["architectures"] = ["SparseLlamaForCausalLM"]; c["hidden_act"] = "fatrelu"; c["hidden_act_param"] = 0.05'
if "$C" hf "$T/fat" -o "$T/fat.gguf" --outtype f32 >/dev/null 2>&1 &&
   "$HC_BIN/hc-gguf" dump "$T/fat.gguf" | grep -q "hotcold.ffn_act_threshold .*0.05" &&
   "$R" -m "$T/fat.gguf" -p "$P" --logits -n 0 -t 2 >"$T/fd.txt" 2>/dev/null &&
   "$R" -m "$T/fat.gguf" -p "$P" --logits -n 0 -t 2 --sparse >"$T/fs.txt" 2>/dev/null &&
   "$R" -m "$T/llama-relu.gguf" -p "$P" --logits -n 0 -t 2 >"$T/fr.txt" 2>/dev/null; then
    same_logits fatrelu_sparse_equals_dense "$T/fd.txt" "$T/fs.txt"
    if cmp -s "$T/fd.txt" "$T/fr.txt"; then fail fatrelu_differs_from_relu "same logits"; else ok fatrelu_differs_from_relu; fi
else
    fail fatrelu_sparse_equals_dense "convert or run failed"
fi

# ProSparse as SparseLLM/prosparse-llama-2-7b's and -13b's config.json write it (every key of
# theirs, on llama-relu's shapes): SparseLlamaForCausalLM, model_type sparsellama, hidden_act
# fatrelu, hidden_act_param 0.01, pretraining_tp 1, max_length, rope_scaling null, auto_map
variant prosparse "$H/llama-relu" 'c.pop("rope_parameters"); c.update({"_name_or_path": "SparseLLM/prosparse-llama-2-7b",
    "architectures": ["SparseLlamaForCausalLM"], "auto_map": {"AutoConfig": "configuration_sparsellama.SparseLlamaConfig",
    "AutoModel": "modeling_sparsellama.SparseLlamaForCausalLM", "AutoModelForCausalLM": "modeling_sparsellama.SparseLlamaForCausalLM"},
    "hidden_act": "fatrelu", "hidden_act_param": 0.01, "model_type": "sparsellama", "pretraining_tp": 1, "pad_token_id": 0,
    "rope_scaling": None, "torch_dtype": "bfloat16", "transformers_version": "4.31.0.dev0", "max_length": 4096})'
if "$C" hf "$T/prosparse" -o "$T/prosparse.gguf" --outtype f32 >/dev/null 2>"$T/err" &&
   "$HC_BIN/hc-gguf" dump "$T/prosparse.gguf" >"$T/dump" &&
   grep -q "hotcold.ffn_act_threshold .*0.01" "$T/dump" && grep -q 'hotcold.ffn_activation .*"relu"' "$T/dump" &&
   grep -q 'general.architecture .*"llama-relu"' "$T/dump" && grep -q "llama-relu.rope.freq_base .*10000" "$T/dump"; then
    ok prosparse_real_config_keys
else
    fail prosparse_real_config_keys "$(head -c 300 "$T/err")"
fi

# A dense ReLU llama is written as architecture llama-relu by default (which
# llama.cpp does not know, so it refuses the file instead of running it with
# SiLU); --relu-arch insists on it; --llama-arch writes the old llama file,
# with a warning naming the option. hc-run gives the same logits bit for bit.
if "$C" hf "$H/llama-relu" -o "$T/relu-arch.gguf" --outtype f32 --relu-arch >/dev/null 2>"$T/err" &&
   ! grep -q "SiLU" "$T/err" &&
   "$HC_BIN/hc-gguf" dump "$T/relu-arch.gguf" | grep -q 'general.architecture .*"llama-relu"' &&
   "$HC_BIN/hc-gguf" dump "$T/llama-relu.gguf" | grep -q 'general.architecture .*"llama-relu"' &&
   "$R" -m "$T/relu-arch.gguf" -p "$P" --logits -n 0 -t 2 >"$T/ra.txt" 2>"$T/err" &&
   "$R" -m "$T/llama-relu.gguf" -p "$P" --logits -n 0 -t 2 >"$T/rl.txt" 2>>"$T/err" && cmp -s "$T/ra.txt" "$T/rl.txt"; then
    ok relu_arch_is_the_default
else
    fail relu_arch_is_the_default "$(head -c 300 "$T/err")"
fi
if "$C" hf "$H/llama-relu" -o "$T/plain.gguf" --outtype f32 --llama-arch >/dev/null 2>"$T/err" &&
   grep -q -- 'SiLU.*--llama-arch' "$T/err" &&
   "$HC_BIN/hc-gguf" dump "$T/plain.gguf" | grep -q 'general.architecture .*"llama"' &&
   "$R" -m "$T/plain.gguf" -p "$P" --logits -n 0 -t 2 >"$T/pl.txt" 2>"$T/err" && cmp -s "$T/pl.txt" "$T/rl.txt"; then
    ok llama_arch_keeps_the_old_name
else
    fail llama_arch_keeps_the_old_name "$(head -c 300 "$T/err")"
fi
check_fails llama_arch_refuses_silu "llama-arch is for ReLU llama models" "$C" hf "$H/llama-silu" -o "$T/x.gguf" --llama-arch
check_fails relu_arch_refuses_silu "relu-arch is for ReLU llama models" "$C" hf "$H/llama-silu" -o "$T/x.gguf" --relu-arch
check_fails relu_arch_refuses_opt "relu-arch is for ReLU llama models" "$C" hf "$H/opt" -o "$T/x.gguf" --relu-arch

# a sliding window: exact within it, a longer context refused by name
variant window "$H/mistral" 'c["sliding_window"] = 64'
logits_match sliding_window_within "$T/window" "$H/mistral" -c 64
check_fails sliding_window_beyond "sliding_window 64" "$R" -m "$T/sliding_window_within.gguf" -p hi -n 1 -c 100
check sliding_window_key sh -c "'$HC_BIN/hc-gguf' dump '$T/sliding_window_within.gguf' | grep -q 'llama.attention.sliding_window.*64'"

# linear scaling: written as llama.cpp's keys and applied (positions / factor)
variant linear "$H/llama-silu" 'c["rope_parameters"] = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}'
check linear_scaling sh -c "'$C' hf '$T/linear' -o '$T/lin.gguf' >/dev/null && '$HC_BIN/hc-gguf' dump '$T/lin.gguf' | grep -q 'rope.scaling.factor.*2' && '$R' -m '$T/lin.gguf' -p 'The dog' --logits -n 0 >'$T/lin.txt' && '$C' hf '$H/llama-silu' -o '$T/nolin.gguf' >/dev/null && '$R' -m '$T/nolin.gguf' -p 'The dog' --logits -n 0 >'$T/nolin.txt' && ! cmp -s '$T/lin.txt' '$T/nolin.txt'"

# every key that changes the math and is not implemented: refused by name
refuses() {
    variant "r-$1" "$H/$2" "$3"
    check_fails "refuses_$1" "$4" "$C" hf "$T/r-$1" -o "$T/r.gguf"
}
refuses yarn llama-silu 'c["rope_parameters"]["rope_type"] = "yarn"' "'yarn' is not supported"
refuses old_dynamic llama-silu 'c.pop("rope_parameters"); c["rope_scaling"] = {"type": "dynamic", "factor": 2.0}' "rope_scaling.type.*dynamic"
refuses partial_rotary llama-silu 'c["partial_rotary_factor"] = 0.5' "partial_rotary_factor"
refuses attn_softcap llama-silu 'c["attn_logit_softcapping"] = 50.0' "attn_logit_softcapping"
refuses final_softcap llama-silu 'c["final_logit_softcapping"] = 30.0' "final_logit_softcapping"
refuses act_param_without_fatrelu llama-relu 'c["hidden_act_param"] = 0.01' "hidden_act_param"
refuses gelu_llama llama-silu 'c["hidden_act"] = "gelu"' "hidden_act.*gelu"
refuses attention_bias llama-silu 'c["attention_bias"] = True' "attention_bias"
refuses qwen_window qwen2 'c["use_sliding_window"] = True; c["sliding_window"] = 16' "use_sliding_window"
refuses layer_types qwen2 'c["layer_types"][1] = "sliding_attention"' "sliding_attention"
refuses alibi falcon 'c["alibi"] = True' '"alibi": true'
refuses sequential_falcon falcon 'c["parallel_attn"] = False' "parallel_attn"
refuses falcon_one_norm_gqa falcon 'c["num_ln_in_parallel_attn"] = 1' "num_ln_in_parallel_attn"
refuses falcon_rw falcon-mq 'c["multi_query"] = False' "multi_query"
refuses falcon_bias falcon 'c["bias"] = True' '"bias"'
refuses opt_postnorm opt 'c["do_layer_norm_before"] = False' "do_layer_norm_before"
refuses opt_project opt 'c["word_embed_proj_dim"] = 48' "project_in"
refuses opt_gelu opt 'c["activation_function"] = "gelu"' "activation_function"
refuses parallel_residual llama-silu 'c["use_parallel_residual"] = True' "use_parallel_residual"
refuses unknown_arch llama-silu 'c["architectures"] = ["GemmaForCausalLM"]' "GemmaForCausalLM"
finish

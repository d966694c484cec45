#!/usr/bin/env python3
"""Seed corpora for the fuzz targets: seeds.py OUT writes OUT/NAME/seed-* for
every target (small valid files of each format, written here independently of
the C writers, plus a few near-misses). Standard library only."""
import io, json, os, struct, sys, zipfile

OUT = sys.argv[1]
seeds = {}

def add(target, name, data):
    seeds.setdefault(target, []).append((name, data if isinstance(data, bytes) else data.encode()))

# ------------------------------------------------------------------ GGUF
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
          U64: "<Q", I64: "<q", F64: "<d"}

def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b

def gval(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gval(et, x) for x in items)
    return struct.pack(SCALAR[t], v)

# ggml type -> (block elements, block bytes); PWRI writes I32 as 18
TSIZE = {0: (1, 4), 1: (1, 2), 8: (32, 34), 2: (32, 18), 26: (1, 4), 27: (1, 8), 28: (1, 8), 30: (1, 2)}

def gguf(kvs, tensors, magic=b"GGUF", align=32):
    """kvs: [(key, type, value)]; tensors: [(name, type, ne, data bytes)]."""
    h = magic + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        h += gstr(k) + struct.pack("<I", t) + gval(t, v)
    off, blobs = 0, b""
    for name, t, ne, data in tensors:
        ft = 18 if magic == b"PWRI" and t == 26 else t
        h += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        h += struct.pack("<IQ", ft, off)
        pad = (-len(data)) % align
        blobs += data + b"\0" * pad
        off += len(data) + pad
    h += b"\0" * ((-len(h)) % align)
    return h + blobs

def f32s(vals):
    return struct.pack("<%df" % len(vals), *vals)

def i32s(vals):
    return struct.pack("<%di" % len(vals), *vals)

# a vocab: <unk> <s> </s>, bytes, a few pieces
toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["\u2581", "a", "b", "\u2581a", "ab", "\u2581ab"]
types = [2, 3, 3] + [6] * 256 + [1] * 6
vocab_kvs = [("general.architecture", STR, "llama"), ("tokenizer.ggml.model", STR, "llama"),
             ("tokenizer.ggml.tokens", ARR, (STR, toks)),
             ("tokenizer.ggml.scores", ARR, (F32, [float(-i) for i in range(len(toks))])),
             ("tokenizer.ggml.token_type", ARR, (I32, types)),
             ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2)]
every_type = [("k.u8", U8, 1), ("k.i8", I8, -1), ("k.u16", U16, 2), ("k.i16", I16, -2), ("k.u32", U32, 3),
              ("k.i32", I32, -3), ("k.f32", F32, 0.5), ("k.bool", BOOL, True), ("k.u64", U64, 4),
              ("k.i64", I64, -4), ("k.f64", F64, 0.25), ("k.arr", ARR, (U16, [1, 2, 3])),
              ("general.alignment", U32, 32)]
small_tensors = [("w.f32", 0, [4, 2], f32s(range(8))), ("w.f16", 1, [4], b"\0\x3c" * 4),
                 ("w.q8", 8, [32, 1], b"\0\x3c" + bytes(range(32))), ("w.i32", 26, [3], i32s([1, 2, 3]))]
add("gguf", "seed-vocab.gguf", gguf(vocab_kvs, []))
# byte-level BPE ("gpt2"): GPT-2's byte-to-unicode characters, merges, pre-tokenizer
def gpt2_char(b):
    printable = 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255
    return chr(b if printable else 256 + b if b <= 32 else b + 162 if b <= 160 else 323)
bl_toks = [gpt2_char(b) for b in range(256)] + ["Ġt", "he", "Ġthe", "<|s|>"]
bl_merges = ["Ġ t", "h e", "Ġt he"]
bl_kvs = [("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.tokens", ARR, (STR, bl_toks)),
          ("tokenizer.ggml.token_type", ARR, (I32, [1] * 259 + [3])),
          ("tokenizer.ggml.merges", ARR, (STR, bl_merges)), ("tokenizer.ggml.bos_token_id", U32, 259)]
add("gguf", "seed-bpe-named.gguf", gguf(bl_kvs + [("tokenizer.ggml.pre", STR, "llama-bpe")], []))
add("gguf", "seed-bpe-regex.gguf", gguf(bl_kvs + [("hotcold.tokenizer.pre_regex", ARR, (STR, ["\\p{N}", " ?\\p{L}+"])),
                                                  ("hotcold.tokenizer.ignore_merges", BOOL, True)], []))
add("gguf", "seed-types.gguf", gguf(every_type, small_tensors))
add("gguf", "seed-types.pwri", gguf(every_type, small_tensors, magic=b"PWRI"))
add("gguf", "seed-empty.gguf", gguf([], []))

# .gpuidx: per layer gpu_idx [n_ff] (0/1) then gpu_bucket
def gpuidx(marks, magic=b"PWRI"):
    kvs = [("general.architecture", STR, "generic.gpu_index"),
           ("generic.gpu_index.block_count", U32, len(marks)), ("split.vram_capacity", U64, 4096)]
    ts = []
    for l, m in enumerate(marks):
        ts.append(("blk.%d.gpu_idx" % l, 26, [len(m)], i32s(m)))
        ts.append(("blk.%d.gpu_bucket" % l, 26, [sum(m)], i32s([j for j, x in enumerate(m) if x])))
    return gguf(kvs, ts, magic)
add("gpuidx", "seed-2x8.gpuidx", gpuidx([[1, 0, 1, 1, 0, 0, 0, 1], [0] * 8]))
add("gpuidx", "seed-gguf.gpuidx", gpuidx([[1, 1, 0, 0]], magic=b"GGUF"))

# stats (common/stats.h)
def stats(n_layer, n_ff):
    kvs = [("general.architecture", STR, "hotcold.stats"), ("hotcold.stats.version", U32, 1),
           ("hotcold.stats.arch", STR, "llama"), ("hotcold.stats.n_layer", U32, n_layer),
           ("hotcold.stats.n_ff", U32, n_ff), ("hotcold.stats.n_embd", U32, 8),
           ("hotcold.stats.activation", STR, "relu"), ("hotcold.stats.threshold", F32, 0.0),
           ("hotcold.stats.n_tokens", U64, 100), ("hotcold.stats.ffn_hash", STR, "0123456789abcdef"),
           ("hotcold.stats.corpus", STR, "seed"), ("hotcold.stats.ctx", U32, 16)]
    ts = []
    for l in range(n_layer):
        ts.append(("blk.%d.act_count" % l, 27, [n_ff], struct.pack("<%dq" % n_ff, *[(l + j) % 100 for j in range(n_ff)])))
        ts.append(("blk.%d.act_sum" % l, 28, [n_ff], struct.pack("<%dd" % n_ff, *[0.5 * j for j in range(n_ff)])))
    return gguf(kvs, ts)
add("stats", "seed-2x8.stats", stats(2, 8))
add("stats", "seed-1x1.stats", stats(1, 1))

# ------------------------------------------------------------------ hc-run's prompts file (--parallel)
add("prompts", "seed-lines.txt", "Once upon a time\n\nThe little dog\n")
add("prompts", "seed-jsonl.txt", '{"prompt": "A bird", "n_predict": 12, "temp": 0.7, "seed": 3}\nplain line\n'
    '{"prompt": "x\\u00e9", "temp": 0}\n')
add("prompts", "seed-bad.txt", '{"prompt": "x", "tmp": 1}\n')

# ------------------------------------------------------------------ safetensors
def safetensors(entries, meta=True):
    hdr, data = {}, b""
    if meta:
        hdr["__metadata__"] = {"format": "pt"}
    for name, dtype, shape, blob in entries:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    j = json.dumps(hdr).encode()
    return struct.pack("<Q", len(j)) + j + data
add("safetensors", "seed-mixed.safetensors", safetensors([
    ("model.embed_tokens.weight", "F32", [2, 4], f32s(range(8))),
    ("model.norm.weight", "BF16", [4], b"\x80\x3f" * 4), ("x.f16", "F16", [2, 2], b"\0\x3c" * 4),
    ("x.i64", "I64", [1], struct.pack("<q", 7)), ("x.empty", "F32", [0], b"")]))
add("safetensors", "seed-nometa.safetensors", safetensors([("a", "F32", [1], f32s([1.0]))], meta=False))
# tensors of no bytes where another begins and between two (they overlap nothing)
add("safetensors", "seed-zero-bytes.safetensors", safetensors([
    ("a", "F32", [2], f32s([1.0, 2.0])), ("z", "F32", [0], b""), ("b", "F32", [2], f32s([3.0, 4.0])),
    ("z2", "F32", [2, 0], b"")], meta=False))

# ------------------------------------------------------------------ Hugging Face config / tokenizer
cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
       "intermediate_size": 172, "num_hidden_layers": 2, "num_attention_heads": 8,
       "num_key_value_heads": 4, "vocab_size": 512, "max_position_embeddings": 256,
       "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "bos_token_id": 1,
       "eos_token_id": [2, 3], "pad_token_id": 0, "tie_word_embeddings": False, "rope_scaling": None,
       "head_dim": 8, "torch_dtype": "float32"}
add("hfconfig", "seed-config.json", json.dumps(cfg))
add("hfconfig", "seed-relu.json", json.dumps(dict(cfg, hidden_act="relu", tie_word_embeddings=True)))
# the other families' keys (gguf-tools/convert_hf_config.c)
add("hfconfig", "seed-llama3.json", json.dumps(dict(cfg, head_dim=16, rope_parameters={
    "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64})))
add("hfconfig", "seed-opt.json", json.dumps(dict(cfg, architectures=["OPTForCausalLM"], ffn_dim=96,
    activation_function="relu", do_layer_norm_before=True, word_embed_proj_dim=cfg["hidden_size"])))
# a key twice (the last counts), rope_scaling with a type and its factor
add("hfconfig", "seed-duplicate-key.json", json.dumps(cfg)[:-1] + ', "rms_norm_eps": 1e-5, "rms_norm_eps": 1e-6}')
add("hfconfig", "seed-rope-linear.json", json.dumps(dict(cfg, rope_scaling={"type": "linear", "factor": 2.0})))
add("hfconfig", "seed-falcon.json", json.dumps(dict(cfg, architectures=["FalconForCausalLM"], ffn_hidden_size=96,
    new_decoder_architecture=True, num_kv_heads=2, num_ln_in_parallel_attn=2, parallel_attn=True, alibi=False)))

def vocab_prefix(model, n_vocab):      # fuzz_hftok: mode byte, n_vocab - 1 (u16)
    return bytes([model]) + struct.pack("<H", n_vocab - 1)
tj_vocab = {t: i for i, t in enumerate(toks)}
tok_json = {"version": "1.0", "added_tokens": [{"id": i, "content": toks[i], "special": True} for i in range(3)],
            "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": True, "vocab": tj_vocab,
                      "merges": ["\u2581 a", ["a", "b"], "\u2581a b"]}}
add("hftok", "seed-bpe.json", vocab_prefix(0, len(toks) + 2) + json.dumps(tok_json).encode())
bl_json = {"version": "1.0", "added_tokens": [{"id": 259, "content": "<|s|>", "special": True}],
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}| ?\\p{L}+|\\s+"}, "behavior": "Isolated"},
               {"type": "Digits", "individual_digits": True}, {"type": "ByteLevel", "use_regex": False}]},
           "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|s|>"}},
                              {"Sequence": {"id": "A"}}], "special_tokens": {"<|s|>": {"ids": [259]}}},
           "model": {"type": "BPE", "ignore_merges": True, "vocab": {t: i for i, t in enumerate(bl_toks)},
                     "merges": bl_merges}}
add("hftok", "seed-bytelevel.json", vocab_prefix(0, len(bl_toks)) + json.dumps(bl_json).encode())
add("hftok", "seed-gpt2.json", vocab_prefix(0, len(bl_toks)) + json.dumps(dict(
    bl_json, pre_tokenizer={"type": "ByteLevel"}, post_processor={"type": "ByteLevel"})).encode())
# normalizers: one that fits the growth bound, and an expanding one it refuses
add("hftok", "seed-normalizer.json", vocab_prefix(0, len(bl_toks)) + json.dumps(dict(bl_json, normalizer={
    "type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Replace", "pattern": {"String": " "},
    "content": "\u2581"}, {"type": "Prepend", "prepend": "\u2581"}]})).encode())
add("hftok", "seed-normalizer-bomb.json", vocab_prefix(0, len(bl_toks)) + json.dumps(dict(bl_json, normalizer={
    "type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"Regex": ""}, "content": "aa"}] * 8})).encode())
uni = {"version": "1.0", "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": True,
       "vocab": [[t, -float(i)] for i, t in enumerate(toks)]}}
add("hftok", "seed-unigram.json", vocab_prefix(0, len(toks)) + json.dumps(uni).encode())

def pb_varint(v):
    out = b""
    while True:
        b = v & 0x7f
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out
def pb_piece(text, score, typ):
    t = text.encode()
    body = b"\x0a" + pb_varint(len(t)) + t + b"\x15" + struct.pack("<f", score) + b"\x18" + pb_varint(typ)
    return b"\x0a" + pb_varint(len(body)) + body
spm = b"".join(pb_piece(t, -float(i), {2: 2, 3: 3, 6: 6}.get(types[i], 1)) for i, t in enumerate(toks))
spm += b"\x12\x04\x08\x01\x10\x02"      # trainer_spec with two varint fields (skipped)
add("hftok", "seed-spm.model", vocab_prefix(1, len(toks)) + spm)

# ------------------------------------------------------------------ llama2.c
def l2c(dim=8, hidden=16, layers=1, heads=2, kv=2, vocab=4, seq=4, shared=True, v1=False):
    hs, kvd = dim // heads, dim * kv // heads
    n = vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * kvd * dim + 3 * hidden * dim) + dim
    if v1:
        hdr = struct.pack("<Ii7iB", 0x616b3432, 1, dim, hidden, layers, heads, kv, vocab, seq, int(shared))
        hdr += b"\0" * (256 - len(hdr))
    else:
        hdr = struct.pack("<7i", dim, hidden, layers, heads, kv, vocab if shared else -vocab, seq)
        n += seq * hs
    if not shared:
        n += vocab * dim
    return hdr + f32s([0.01 * (i % 7) for i in range(n)])
add("llama2c", "seed-legacy.bin", b"\0\0\0" + l2c())
add("llama2c", "seed-unshared.bin", b"\0\0\0" + l2c(shared=False, kv=1))
add("llama2c", "seed-v1.bin", b"\0\0\0" + l2c(v1=True))
tb = struct.pack("<i", 8) + b"".join(struct.pack("<fi", -float(i), len(t.encode())) + t.encode()
                                     for i, t in enumerate(["<unk>", "<s>", "</s>", "<0x0A>", " a", "ab", ""]))
add("llama2c", "seed-tokenizer.bin", b"\x01" + struct.pack("<H", 6) + tb)

# ------------------------------------------------------------------ torch.save (pickle, zip, .pt)
def pint(v):
    if 0 <= v < 256: return b"K" + bytes([v])
    if 0 <= v < 65536: return b"M" + struct.pack("<H", v)
    return b"J" + struct.pack("<i", v)
def binunicode(s):
    return b"X" + struct.pack("<I", len(s)) + s.encode()
def torch_pickle(storage, numel, shape, stride, offset=0):
    memo = iter(range(256))
    q = lambda: b"q" + bytes([next(memo)])
    tup = lambda v: b"".join(pint(x) for x in v) + bytes([0x84 + len(v)]) if 1 <= len(v) <= 3 else \
        (b"(" + b"".join(pint(x) for x in v) + b"t" if v else b")")
    p = b"\x80\x02" + b"ctorch._utils\n_rebuild_tensor_v2\n" + q() + b"((" + binunicode("storage") + q()
    p += b"ctorch\n" + storage.encode() + b"\n" + q() + binunicode("0") + q() + binunicode("cpu") + q()
    p += pint(numel) + b"t" + q() + b"Q" + pint(offset) + tup(shape) + q() + tup(stride) + q()
    p += b"\x89" + b"ccollections\nOrderedDict\n" + q() + b")R" + q() + b"t" + q() + b"R" + q() + b"."
    return p
def pt(storage, data, numel, deflate=False):
    pk = torch_pickle(storage, numel, [numel], [1])
    bio = io.BytesIO()
    mode = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(bio, "w", mode) as z:
        z.writestr("archive/data.pkl", pk)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/data/0", data)
        z.writestr("archive/version", "3\n")
    return bio.getvalue()
add("pickle", "seed-float.pkl", torch_pickle("FloatStorage", 8, [8], [1]))
add("pickle", "seed-2d.pkl", torch_pickle("HalfStorage", 300, [3, 100], [100, 1], offset=0))
add("pickle", "seed-4d.pkl", torch_pickle("LongStorage", 70000, [2, 5, 7, 1000], [35000, 7000, 1000, 1]))
fl = f32s([0.5 * i for i in range(8)])
for target in ("zip", "ptfile"):
    add(target, "seed-stored.pt", pt("FloatStorage", fl, 8))
    add(target, "seed-deflated.pt", pt("FloatStorage", fl, 8, deflate=True))
add("ptfile", "seed-long.pt", pt("LongStorage", struct.pack("<4q", 1, 2, 3, 4), 4))
add("ptfile", "seed-half.pt", pt("HalfStorage", b"\0\x3c" * 5, 5, deflate=True))

# ------------------------------------------------------------------ model
# A runnable llama of n_embd 8, 2 heads, n_ff 16, one layer, the vocab above:
# plain F32, PowerInfer's PWRI (ffn_down_t, predictor fc1/fc2), and attn_q as
# GPTQ companions (group size 8).
def llama(variant="plain", extra_kvs=()):
    E, F, V = 8, 16, len(toks)
    kvs = vocab_kvs + [("llama.context_length", U32, 32), ("llama.embedding_length", U32, E),
                       ("llama.block_count", U32, 1), ("llama.feed_forward_length", U32, F),
                       ("llama.attention.head_count", U32, 2),
                       ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5)]
    kvs = [kv for kv in kvs if kv[0] not in {k for k, _, _ in extra_kvs}] + list(extra_kvs)   # extra ones win
    def w(name, n, rows):
        return (name, 0, [n, rows], f32s([0.01 * (i % 7) for i in range(n * rows)]))
    ts = [w("token_embd.weight", E, V), w("output_norm.weight", E, 1), w("blk.0.attn_norm.weight", E, 1),
          w("blk.0.ffn_norm.weight", E, 1), w("blk.0.attn_k.weight", E, E), w("blk.0.attn_v.weight", E, E),
          w("blk.0.attn_output.weight", E, E), w("blk.0.ffn_gate.weight", E, F), w("blk.0.ffn_up.weight", E, F)]
    if variant == "gptq":
        kvs += [("hotcold.gptq.bits", U32, 4), ("hotcold.gptq.group_size", U32, 8),
                ("hotcold.gptq.zero_format", STR, "v2")]
        ts += [("blk.0.attn_q.weight.qweight", 26, [E, 1], i32s([0x76543210] * E)),
               ("blk.0.attn_q.weight.scales", 1, [E, 1], b"\0\x3c" * E),
               ("blk.0.attn_q.weight.qzeros", 26, [1, 1], i32s([0x77777777]))]
    else:
        ts.append(w("blk.0.attn_q.weight", E, E))
    if variant == "pwri":
        ts += [w("blk.0.ffn_down_t.weight", E, F), w("blk.0.fc1.weight", E, 8), w("blk.0.fc2.weight", 8, F)]
        kvs.append(("powerinfer.sparse_threshold", F32, 0.0))
    else:
        ts.append(w("blk.0.ffn_down.weight", F, E))
    return gguf(kvs, ts, magic=b"PWRI" if variant == "pwri" else b"GGUF")

for v in ("plain", "pwri", "gptq"):
    add("model", "seed-%s.gguf" % v, llama(v))
add("model", "seed-bos.gguf", llama(extra_kvs=[("tokenizer.ggml.padding_token_id", U32, 0xFFFFFFFF)]))

# ------------------------------------------------------------------ tokenizer text
for i, text in enumerate(["\x01Hello world", "\x03 the  thing\n\tin ing", "\x07e\u2581t <|u|><|c|>",
                          "\x01\u65e5\u00e9 \xff\xfe broken".encode("utf-8", "surrogateescape").decode("latin-1")]):
    add("tokenizer", "seed-%d.txt" % i, text.encode("latin-1") if i == 3 else text.encode())
# bit 3: the byte-level BPE vocab
for i, text in enumerate(["\x09Hello the thing 12345 it's\r\n\n  x", "\x0b<|c|>the<|u|> ing\u00e9\U0001f999",
                          "\x08\u0301\u20dd \u3000\u2028 \u00bd\u0663"]):
    add("tokenizer", "seed-bpe-%d.txt" % i, text.encode())
add("tokenizer", "seed-bpe-broken.txt", b"\x09a\xffb\xc3 \xed\xa0\x80\xf4\x90\x80\x80 q")

for target, files in seeds.items():
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    for name, data in files:
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
print("fuzz: seeds for %d targets in %s" % (len(seeds), OUT))

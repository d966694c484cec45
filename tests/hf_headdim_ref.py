"""A Llama checkpoint whose head_dim (12) is not hidden_size / heads (32 / 4), and
   its logits from a plain-Python forward pass with transformers Llama semantics
   (RMSNorm, rotate-half RoPE, grouped-query attention, SwiGLU), written as
   OUT/model.safetensors, OUT/config.json and OUT/ref.json (the prompt and ids of
   SRC/ref.json). Used by tests/test_families.sh: no fixture has such a head_dim.
   usage: python3 hf_headdim_ref.py SRC_DIR OUT_DIR"""
import json, math, random, struct, sys
src, out = sys.argv[1], sys.argv[2]
E, H, KV, HD, F, L, V = 32, 4, 2, 12, 48, 2, 512
rnd = random.Random(7)
def mat(r, c, s=0.15): return [[rnd.gauss(0, s) for _ in range(c)] for _ in range(r)]
W = {"model.embed_tokens.weight": mat(V, E, 0.5), "lm_head.weight": mat(V, E), "model.norm.weight": [[1 + rnd.gauss(0, 0.1) for _ in range(E)]]}
for l in range(L):
    p = "model.layers.%d." % l
    W[p + "self_attn.q_proj.weight"] = mat(H * HD, E); W[p + "self_attn.k_proj.weight"] = mat(KV * HD, E)
    W[p + "self_attn.v_proj.weight"] = mat(KV * HD, E); W[p + "self_attn.o_proj.weight"] = mat(E, H * HD)
    W[p + "mlp.gate_proj.weight"] = mat(F, E); W[p + "mlp.up_proj.weight"] = mat(F, E); W[p + "mlp.down_proj.weight"] = mat(E, F)
    W[p + "input_layernorm.weight"] = [[1 + rnd.gauss(0, 0.1) for _ in range(E)]]
    W[p + "post_attention_layernorm.weight"] = [[1 + rnd.gauss(0, 0.1) for _ in range(E)]]
hdr, blob = {}, b""
for k, m in W.items():
    flat = [v for row in m for v in row]
    shape = [len(m), len(m[0])] if len(m) > 1 or k.endswith("embed_tokens.weight") else [len(m[0])]
    data = struct.pack("<%df" % len(flat), *flat)
    hdr[k] = {"dtype": "F32", "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
    blob += data
    W[k] = [list(struct.unpack("<%df" % len(row), struct.pack("<%df" % len(row), *row))) for row in m]  # f32 values
h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
open(out + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + blob)
cfg = json.load(open(src + "/config.json"))
cfg.update(hidden_size=E, num_attention_heads=H, num_key_value_heads=KV, head_dim=HD, intermediate_size=F, num_hidden_layers=L)
json.dump(cfg, open(out + "/config.json", "w"))
ids = json.load(open(src + "/ref.json"))["ids"]
def mv(m, x): return [sum(a * b for a, b in zip(row, x)) for row in m]
def rms(x, w): s = 1 / math.sqrt(sum(v * v for v in x) / len(x) + 1e-6); return [wi * v * s for wi, v in zip(w[0], x)]
inv = [1 / 10000.0 ** (2 * i / HD) for i in range(HD // 2)]
def rope(v, pos):
    o = list(v)
    for h0 in range(0, len(v), HD):
        for i in range(HD // 2):
            c, s = math.cos(pos * inv[i]), math.sin(pos * inv[i])
            a, b = v[h0 + i], v[h0 + i + HD // 2]
            o[h0 + i], o[h0 + i + HD // 2] = a * c - b * s, b * c + a * s
    return o
xs = [list(W["model.embed_tokens.weight"][t]) for t in ids]
for l in range(L):
    p = "model.layers.%d." % l
    ks, vs = [], []
    new = []
    for pos, x in enumerate(xs):
        hn = rms(x, W[p + "input_layernorm.weight"])
        q = rope(mv(W[p + "self_attn.q_proj.weight"], hn), pos)
        ks.append(rope(mv(W[p + "self_attn.k_proj.weight"], hn), pos)); vs.append(mv(W[p + "self_attn.v_proj.weight"], hn))
        att = []
        for hh in range(H):
            g = hh // (H // KV)
            sc = [sum(q[hh * HD + i] * ks[t][g * HD + i] for i in range(HD)) / math.sqrt(HD) for t in range(pos + 1)]
            mx = max(sc); e = [math.exp(v - mx) for v in sc]; z = sum(e)
            att += [sum(e[t] / z * vs[t][g * HD + i] for t in range(pos + 1)) for i in range(HD)]
        x = [a + b for a, b in zip(x, mv(W[p + "self_attn.o_proj.weight"], att))]
        hn = rms(x, W[p + "post_attention_layernorm.weight"])
        gt, up = mv(W[p + "mlp.gate_proj.weight"], hn), mv(W[p + "mlp.up_proj.weight"], hn)
        act = [g / (1 + math.exp(-g)) * u for g, u in zip(gt, up)]
        new.append([a + b for a, b in zip(x, mv(W[p + "mlp.down_proj.weight"], act))])
    xs = new
logits = mv(W["lm_head.weight"], rms(xs[-1], W["model.norm.weight"]))
r = json.load(open(src + "/ref.json")); r["logits"] = logits
json.dump(r, open(out + "/ref.json", "w"))

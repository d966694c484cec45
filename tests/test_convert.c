/* hc-convert: llama2.c (legacy, v1, unshared classifier) against llama.cpp's
 * own conversion of stories260K; HF directories this test writes itself
 * (safetensors F32/F16/BF16, sharded and not, tokenizer.json/.model,
 * predictors) checked tensor by tensor; synth validity, determinism and its
 * planted hot set measured by running the model; error cases leave no file. */
#include "harness.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "convert.h"
#include "ggml_types.h"
#include "gguf.h"
#include "model.h"
#include "tokenizer.h"

#define CONVERT th_bin("hc-convert")

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.' || (e->d_name[1] && strcmp(e->d_name, ".."));
    closedir(d);
    return n;
}

static const gguf_kv *kv(const gguf_file *f, const char *key)
{
    int i = gguf_find_kv(f, key);
    return i < 0 ? NULL : &f->kv[i];
}

/* ------------------------------------------------------------------ llama2.c */

/* llama2.c legacy layout of stories260K (docs/formats.md, "Inputs: llama2.c checkpoints"). */
enum { D = 64, HID = 172, NL = 5, NH = 8, NKV = 4, VOC = 512, SEQ = 512, KVD = D * NKV / NH };

static void test_stories_byte_identical(void)
{
    const char *bin = th_fixture("stories260K.bin"), *tok = th_fixture("tok512.bin");
    const char *ref = th_fixture("stories260K.gguf");
    if (!bin) SKIP("no fixtures");
    const char *out = th_tmp("s2048.gguf");
    CHECK(th_sh("%s llama2c %s %s -o %s --ctx 2048", CONVERT, bin, tok, out) == 0);
    size_t n1, n2;
    unsigned char *a = th_read(out, &n1), *b = th_read(ref, &n2);
    CHECK(a && b);
    int same = n1 == n2 && !memcmp(a, b, n1);
    free(a);
    free(b);
    CHECKF(same, "whole file differs from llama.cpp's conversion (%zu vs %zu bytes)", n1, n2);
}

/* Default context: every tensor byte-equal, every KV equal except context_length. */
static void test_stories_tensors_and_kvs(void)
{
    const char *bin = th_fixture("stories260K.bin"), *tok = th_fixture("tok512.bin");
    if (!bin) SKIP("no fixtures");
    const char *out = th_tmp("s.gguf");
    CHECK(th_sh("%s llama2c %s %s -o %s", CONVERT, bin, tok, out) == 0);
    char err[256];
    gguf_file *f = gguf_open(out, err, sizeof err), *r = gguf_open(th_fixture("stories260K.gguf"), err, sizeof err);
    CHECK(f && r);
    CHECK(f->n_tensors == 48 && r->n_tensors == 48 && f->n_kv == r->n_kv);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *a = &f->tensors[i], *b = &r->tensors[i];
        CHECKF(!strcmp(a->name, b->name) && a->type == b->type && a->n_dims == b->n_dims &&
               a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->nbytes == b->nbytes &&
               !memcmp(a->data, b->data, a->nbytes), "tensor %s differs", b->name);
    }
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *a = &f->kv[i], *b = &r->kv[i];
        CHECKF(!strcmp(a->key, b->key) && a->type == b->type && a->n == b->n, "KV %llu: %s vs %s",
               (unsigned long long)i, a->key, b->key);
        if (!strcmp(a->key, "llama.context_length")) {
            CHECK(gguf_kv_num(a, 0) == 512 && gguf_kv_num(b, 0) == 2048);
        } else if (a->strs) {
            for (uint64_t k = 0; k < a->n; k++)
                CHECKF(a->strs[k].len == b->strs[k].len && !memcmp(a->strs[k].ptr, b->strs[k].ptr, a->strs[k].len),
                       "%s[%llu]", a->key, (unsigned long long)k);
        } else {
            size_t es = gguf_vtype_size(a->type == GGUF_TYPE_ARRAY ? a->arr_type : a->type);
            CHECKF(!memcmp(a->data, b->data, es * a->n), "KV %s value differs", a->key);
        }
    }
    gguf_close(f);
    gguf_close(r);
}

/* Rebuild stories260K in llama2.c's version-1 layout: same GGUF must come out. */
static void test_llama2c_v1(void)
{
    const char *bin = th_fixture("stories260K.bin"), *tok = th_fixture("tok512.bin");
    if (!bin) SKIP("no fixtures");
    size_t n;
    unsigned char *leg = th_read(bin, &n);
    CHECK(leg && n == 1056540);
    const float *w = (const float *)(leg + 28);
    const size_t emb = (size_t)VOC * D, att = NL * D, wq = (size_t)NL * D * D, wk = (size_t)NL * KVD * D;
    const size_t w1 = (size_t)NL * HID * D;
    /* legacy offsets (floats) */
    const float *p_emb = w, *p_att = p_emb + emb, *p_wq = p_att + att, *p_wk = p_wq + wq, *p_wv = p_wk + wk,
                *p_wo = p_wv + wk, *p_ffn = p_wo + wq, *p_w1 = p_ffn + att, *p_w2 = p_w1 + w1,
                *p_w3 = p_w2 + w1, *p_fin = p_w3 + w1;
    const size_t total = 256 + 4 * (att + att + D + emb + wq + 2 * wk + wq + 3 * w1);
    unsigned char *v1 = calloc(1, total);
    CHECK(v1);
    uint32_t magic = 0x616b3432;
    int32_t hdr[8] = {1, D, HID, NL, NH, NKV, VOC, SEQ};
    memcpy(v1, &magic, 4);
    memcpy(v1 + 4, hdr, sizeof hdr);
    v1[36] = 1;                      /* shared classifier */
    size_t at = 256;
#define PUT(p, cnt) (memcpy(v1 + at, p, 4 * (cnt)), at += 4 * (cnt))
    PUT(p_att, att); PUT(p_ffn, att); PUT(p_fin, D); PUT(p_emb, emb);
    PUT(p_wq, wq); PUT(p_wk, wk); PUT(p_wv, wk); PUT(p_wo, wq); PUT(p_w1, w1); PUT(p_w2, w1); PUT(p_w3, w1);
#undef PUT
    CHECK(at == total);
    CHECK(th_write(th_tmp("v1.bin"), v1, total) == 0);
    free(v1);
    free(leg);
    CHECK(th_sh("%s llama2c %s %s -o %s", CONVERT, bin, tok, th_tmp("leg.gguf")) == 0);
    CHECK(th_sh("%s llama2c %s %s -o %s", CONVERT, th_tmp("v1.bin"), tok, th_tmp("v1.gguf")) == 0);
    CHECK(th_sh("cmp %s %s", th_tmp("leg.gguf"), th_tmp("v1.gguf")) == 0);
}

/* Negative vocab: a separate classifier after freq_cis becomes output.weight. */
static void test_llama2c_unshared(void)
{
    const char *bin = th_fixture("stories260K.bin"), *tok = th_fixture("tok512.bin");
    if (!bin) SKIP("no fixtures");
    size_t n;
    unsigned char *leg = th_read(bin, &n);
    CHECK(leg);
    unsigned char *u = malloc(n + 4 * (size_t)VOC * D);
    CHECK(u);
    memcpy(u, leg, n);
    int32_t neg = -VOC;
    memcpy(u + 20, &neg, 4);
    float *cls = (float *)(u + n);
    for (size_t i = 0; i < (size_t)VOC * D; i++) cls[i] = (float)i * 0.25f - 3.0f;
    CHECK(th_write(th_tmp("unshared.bin"), u, n + 4 * (size_t)VOC * D) == 0);
    CHECK(th_sh("%s llama2c %s %s -o %s", CONVERT, th_tmp("unshared.bin"), tok, th_tmp("u.gguf")) == 0);
    char err[256];
    gguf_file *f = gguf_open(th_tmp("u.gguf"), err, sizeof err);
    CHECK(f);
    const gguf_tensor *o = gguf_get_tensor(f, "output.weight"), *e = gguf_get_tensor(f, "token_embd.weight");
    CHECK(o && e && o->nbytes == 4 * (size_t)VOC * D);
    CHECK(!memcmp(o->data, cls, o->nbytes));
    CHECK(!memcmp(e->data, leg + 28, e->nbytes));
    gguf_close(f);
    free(u);
    free(leg);
}

static void test_llama2c_errors(void)
{
    const char *bin = th_fixture("stories260K.bin"), *tok = th_fixture("tok512.bin");
    if (!bin) SKIP("no fixtures");
    char out[512];   /* th_tmp's buffers rotate: keep a copy */
    snprintf(out, sizeof out, "%s", th_tmp("bad/out.gguf"));
    th_sh("mkdir -p %s/bad", th_tmpdir());
    /* truncated checkpoint */
    CHECK(th_sh("head -c 1056536 %s > %s", bin, th_tmp("trunc.bin")) == 0);
    CHECK(th_sh("%s llama2c %s %s -o %s", CONVERT, th_tmp("trunc.bin"), tok, out) == 1);
    CHECKF(strstr(th_last_err(), "trunc.bin: file is 1056536 bytes"), "%s", th_last_err());
    /* tokenizer that does not have the checkpoint's 512 tokens */
    CHECK(th_sh("head -c 6000 %s > %s", tok, th_tmp("tok.bin")) == 0);
    CHECK(th_sh("%s llama2c %s %s -o %s", CONVERT, bin, th_tmp("tok.bin"), out) == 1);
    CHECKF(strstr(th_last_err(), "tok.bin: "), "%s", th_last_err());
    /* missing file */
    CHECK(th_sh("%s llama2c %s/none.bin %s -o %s", CONVERT, th_tmpdir(), tok, out) == 1);
    CHECKF(strstr(th_last_err(), "none.bin: No such file"), "%s", th_last_err());
    /* v1 of another version */
    unsigned char hdr[256] = {0x32, 0x34, 0x6b, 0x61, 2};
    CHECK(th_write(th_tmp("v2.bin"), hdr, sizeof hdr) == 0);
    CHECK(th_sh("%s llama2c %s %s -o %s", CONVERT, th_tmp("v2.bin"), tok, out) == 1);
    CHECKF(strstr(th_last_err(), "unsupported llama2.c version 2"), "%s", th_last_err());
    CHECKF(!strchr(th_last_err(), '\n') || strchr(th_last_err(), '\n')[1] == 0, "not one line");
    CHECK(count_entries(th_tmp("bad")) == 0);
}

/* --------------------------------------------------------------------- HF */

typedef struct {
    char name[96];
    int nd;
    int64_t shape[2];
    float *x;                /* values exactly representable in the written dtype */
} hft;

typedef struct {
    int E, F, L, H, KV, V, tied, relu;
    hft t[128];              /* 3 + 9 per layer: 13 layers at most */
    int n;
} hfm;

static uint32_t rng = 12345;
static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

static float round_to(const char *dtype, float x)
{
    if (!strcmp(dtype, "F16")) return fp16_to_fp32(fp32_to_fp16(x));
    if (!strcmp(dtype, "BF16")) return bf16_to_fp32(fp32_to_bf16(x));
    return x;
}

static void add_t(hfm *m, const char *dtype, const char *name, int nd, int64_t d0, int64_t d1)
{
    if (m->n == (int)(sizeof m->t / sizeof m->t[0])) {
        fprintf(stderr, "test_convert: add_t: more than %d tensors\n", m->n);
        exit(2);
    }
    hft *t = &m->t[m->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->nd = nd;
    t->shape[0] = d0;
    t->shape[1] = nd > 1 ? d1 : 1;
    t->x = malloc((size_t)(d0 * t->shape[1]) * sizeof *t->x);
    for (int64_t i = 0; i < d0 * t->shape[1]; i++) t->x[i] = round_to(dtype, frand());
}

static void hf_make(hfm *m, const char *dtype)
{
    char nm[96];
    int hd = m->E / m->H;
    m->n = 0;
    add_t(m, dtype, "model.embed_tokens.weight", 2, m->V, m->E);
    add_t(m, dtype, "model.norm.weight", 1, m->E, 0);
    if (!m->tied) add_t(m, dtype, "lm_head.weight", 2, m->V, m->E);
    for (int l = 0; l < m->L; l++) {
#define L_(what, nd, a, b) (snprintf(nm, sizeof nm, "model.layers.%d.%s.weight", l, what), add_t(m, dtype, nm, nd, a, b))
        L_("self_attn.q_proj", 2, m->H * hd, m->E);
        L_("self_attn.k_proj", 2, m->KV * hd, m->E);
        L_("self_attn.v_proj", 2, m->KV * hd, m->E);
        L_("self_attn.o_proj", 2, m->E, m->H * hd);
        L_("mlp.gate_proj", 2, m->F, m->E);
        L_("mlp.up_proj", 2, m->F, m->E);
        L_("mlp.down_proj", 2, m->E, m->F);
        L_("input_layernorm", 1, m->E, 0);
        L_("post_attention_layernorm", 1, m->E, 0);
#undef L_
    }
}

static void hf_free(hfm *m)
{
    for (int i = 0; i < m->n; i++) free(m->t[i].x);
    m->n = 0;
}

static const hft *hf_get(const hfm *m, const char *fmt, int l)
{
    char nm[96];
    snprintf(nm, sizeof nm, fmt, l);
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, nm)) return &m->t[i];
    return NULL;
}

/* Write tensors [from, to) of m as one safetensors file. */
static int st_write(const char *path, const hft *t, int n, const char *dtype)
{
    size_t es = strcmp(dtype, "F32") ? 2 : 4, off = 0;
    char *hdr = malloc(1 << 16);
    size_t h = (size_t)snprintf(hdr, 1 << 16, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)(t[i].shape[0] * t[i].shape[1]) * es;
        if (t[i].nd == 2)
            h += (size_t)snprintf(hdr + h, (1 << 16) - h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                                  t[i].name, dtype, (long long)t[i].shape[0], (long long)t[i].shape[1], off, off + bytes);
        else
            h += (size_t)snprintf(hdr + h, (1 << 16) - h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}",
                                  t[i].name, dtype, (long long)t[i].shape[0], off, off + bytes);
        off += bytes;
    }
    hdr[h++] = '}';
    while (h % 8) hdr[h++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint64_t hl = h;
    fwrite(&hl, 8, 1, f);
    fwrite(hdr, 1, h, f);
    for (int i = 0; i < n; i++)
        for (int64_t k = 0; k < t[i].shape[0] * t[i].shape[1]; k++) {
            float x = t[i].x[k];
            uint16_t v = !strcmp(dtype, "F16") ? fp32_to_fp16(x) : fp32_to_bf16(x);
            if (es == 4) fwrite(&x, 4, 1, f);
            else fwrite(&v, 2, 1, f);
        }
    free(hdr);
    return fclose(f);
}

/* SPM-style tokenizer.json (LLaMA's normalizers): specials, 256 bytes, a few pieces, 3 merges. */
static void write_tokenizer_json(const char *path)
{
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},"
               "{\"id\":1,\"content\":\"<s>\",\"special\":true},{\"id\":2,\"content\":\"</s>\",\"special\":true}],"
               "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
               "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]},"
               "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"byte_fallback\":true,\"vocab\":{"
               "\"<unk>\":0,\"<s>\":1,\"</s>\":2");
    for (int b = 0; b < 256; b++) fprintf(f, ",\"<0x%02X>\":%d", b, 3 + b);
    fprintf(f, ",\"\xe2\x96\x81\":259,\"a\":260,\"b\":261,\"\xe2\x96\x81" "a\":262,\"ab\":263,\"\xe2\x96\x81" "ab\":264},"
               "\"merges\":[\"\xe2\x96\x81 a\",[\"a\",\"b\"],\"\xe2\x96\x81" "a b\"]}}");
    fclose(f);
}

static void write_config(const char *dir, const hfm *m, const char *extra)
{
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    fprintf(f, "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":%d,"
               "\"intermediate_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
               "\"num_key_value_heads\":%d,\"vocab_size\":%d,\"max_position_embeddings\":1024,"
               "\"rms_norm_eps\":1e-06,\"rope_theta\":500000.0,\"hidden_act\":\"%s\","
               "\"tie_word_embeddings\":%s,\"bos_token_id\":1,\"eos_token_id\":2%s}",
            m->E, m->F, m->L, m->H, m->KV, m->V, m->relu ? "relu" : "silu", m->tied ? "true" : "false", extra);
    fclose(f);
}

/* A complete HF directory; shards > 1 writes model-0000i-of-0000n + index. */
static void write_hf_dir(const char *dir, const hfm *m, const char *dtype, int shards)
{
    char p[512];
    th_sh("mkdir -p '%s'", dir);
    write_config(dir, m, "");
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    write_tokenizer_json(p);
    if (shards == 1) {
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        st_write(p, m->t, m->n, dtype);
        return;
    }
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    FILE *ix = fopen(p, "w");
    fprintf(ix, "{\"metadata\":{},\"weight_map\":{");
    int per = (m->n + shards - 1) / shards;
    for (int s = 0; s < shards; s++) {
        int a = s * per, b = a + per < m->n ? a + per : m->n;
        char shard[64];
        snprintf(shard, sizeof shard, "model-%05d-of-%05d.safetensors", s + 1, shards);
        snprintf(p, sizeof p, "%s/%s", dir, shard);
        st_write(p, m->t + a, b - a, dtype);
        for (int i = a; i < b; i++) fprintf(ix, "%s\"%s\":\"%s\"", i ? "," : "", m->t[i].name, shard);
    }
    fprintf(ix, "}}");
    fclose(ix);
}

/* Expected GGUF value of element k of a converted tensor with output type `type`. */
static float as_out(uint32_t type, float x)
{
    return type == GGML_TYPE_F16 ? fp16_to_fp32(fp32_to_fp16(x))
         : type == GGML_TYPE_BF16 ? bf16_to_fp32(fp32_to_bf16(x)) : x;
}

static float tensor_at(const gguf_tensor *t, size_t k)
{
    const uint16_t *h = t->data;
    return t->type == GGML_TYPE_F32 ? ((const float *)t->data)[k]
         : t->type == GGML_TYPE_F16 ? fp16_to_fp32(h[k]) : bf16_to_fp32(h[k]);
}

/* GGUF tensor == expected floats (rows x cols, row-major), exactly. */
static int same(const gguf_tensor *t, uint32_t type, const float *want, int64_t rows, int64_t cols)
{
    if (!t || t->type != type || t->ne[0] != cols || t->ne[1] != rows) return 0;
    for (int64_t k = 0; k < rows * cols; k++)
        if (tensor_at(t, (size_t)k) != as_out(type, want[k])) return 0;
    return 1;
}

/* llama.cpp's permute: rows viewed as [heads][2][half] are reordered to
 * [heads][half][2] (swapaxes 1,2). */
static float *permuted(const hft *t, int heads)
{
    int64_t rows = t->shape[0], cols = t->shape[1], half = rows / heads / 2;
    float *o = malloc((size_t)(rows * cols) * sizeof *o);
    for (int64_t h = 0; h < heads; h++)
        for (int64_t two = 0; two < 2; two++)
            for (int64_t i = 0; i < half; i++)
                memcpy(o + ((h * half + i) * 2 + two) * cols, t->x + ((h * 2 + two) * half + i) * cols,
                       (size_t)cols * sizeof *o);
    return o;
}

/* Check every tensor of a converted HF model against the source values. */
static const char *check_hf(const char *path, const hfm *m, uint32_t wtype, int sparse)
{
    static char why[256];
    char err[256];
    gguf_file *f = gguf_open(path, err, sizeof err);
    if (!f) return "cannot open output";
    const char *bad = NULL;
    int hd = m->E / m->H;
#define T(n, ...) (snprintf(why, sizeof why, n, __VA_ARGS__), gguf_get_tensor(f, why))
    if (!same(gguf_get_tensor(f, "token_embd.weight"), wtype, hf_get(m, "model.embed_tokens.weight", 0)->x, m->V, m->E))
        bad = "token_embd";
    else if (!same(gguf_get_tensor(f, "output_norm.weight"), GGML_TYPE_F32, hf_get(m, "model.norm.weight", 0)->x, 1, m->E))
        bad = "output_norm";
    else if (m->tied ? gguf_get_tensor(f, "output.weight") != NULL
                     : !same(gguf_get_tensor(f, "output.weight"), wtype, hf_get(m, "lm_head.weight", 0)->x, m->V, m->E))
        bad = "output";
    else if ((uint64_t)(2 + !m->tied + 9 * m->L + (sparse ? 2 * m->L : 0)) != f->n_tensors)
        bad = "tensor count";
    for (int l = 0; l < m->L && !bad; l++) {
        float *q = permuted(hf_get(m, "model.layers.%d.self_attn.q_proj.weight", l), m->H);
        float *k = permuted(hf_get(m, "model.layers.%d.self_attn.k_proj.weight", l), m->KV);
        const hft *down = hf_get(m, "model.layers.%d.mlp.down_proj.weight", l);
        if (!same(T("blk.%d.attn_q.weight", l), wtype, q, m->H * hd, m->E)) bad = "attn_q (permutation)";
        else if (!same(T("blk.%d.attn_k.weight", l), wtype, k, m->KV * hd, m->E)) bad = "attn_k (permutation)";
        else if (!same(T("blk.%d.attn_v.weight", l), wtype, hf_get(m, "model.layers.%d.self_attn.v_proj.weight", l)->x, m->KV * hd, m->E)) bad = "attn_v";
        else if (!same(T("blk.%d.attn_output.weight", l), wtype, hf_get(m, "model.layers.%d.self_attn.o_proj.weight", l)->x, m->E, m->H * hd)) bad = "attn_output";
        else if (!same(T("blk.%d.ffn_gate.weight", l), wtype, hf_get(m, "model.layers.%d.mlp.gate_proj.weight", l)->x, m->F, m->E)) bad = "ffn_gate";
        else if (!same(T("blk.%d.ffn_up.weight", l), wtype, hf_get(m, "model.layers.%d.mlp.up_proj.weight", l)->x, m->F, m->E)) bad = "ffn_up";
        else if (!same(T("blk.%d.attn_norm.weight", l), GGML_TYPE_F32, hf_get(m, "model.layers.%d.input_layernorm.weight", l)->x, 1, m->E)) bad = "attn_norm";
        else if (!same(T("blk.%d.ffn_norm.weight", l), GGML_TYPE_F32, hf_get(m, "model.layers.%d.post_attention_layernorm.weight", l)->x, 1, m->E)) bad = "ffn_norm";
        else if (!sparse && !same(T("blk.%d.ffn_down.weight", l), wtype, down->x, m->E, m->F)) bad = "ffn_down";
        else if (sparse) {
            float *tr = malloc((size_t)(m->E * m->F) * sizeof *tr);
            for (int64_t j = 0; j < m->F; j++)
                for (int64_t c = 0; c < m->E; c++) tr[j * m->E + c] = down->x[c * m->F + j];
            if (T("blk.%d.ffn_down.weight", l)) bad = "ffn_down present in a sparse file";
            else if (!same(T("blk.%d.ffn_down_t.weight", l), wtype, tr, m->F, m->E)) bad = "ffn_down_t (transpose)";
            free(tr);
        }
        free(q);
        free(k);
    }
#undef T
    gguf_close(f);
    if (bad) snprintf(why, sizeof why, "%s", bad);
    return bad ? why : NULL;
}

static void test_hf_f32_unsharded(void)
{
    hfm m = {.E = 64, .F = 96, .L = 2, .H = 4, .KV = 2, .V = 300};
    hf_make(&m, "F32");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/a/tiny", th_tmpdir());
    write_hf_dir(dir, &m, "F32", 1);
    CHECK(th_sh("%s hf %s -o %s --outtype f32", CONVERT, dir, th_tmp("hf.gguf")) == 0);
    const char *why = check_hf(th_tmp("hf.gguf"), &m, GGML_TYPE_F32, 0);
    CHECKF(!why, "%s", why);

    char err[256];
    gguf_file *f = gguf_open(th_tmp("hf.gguf"), err, sizeof err);
    CHECK(f);
    float fv;
    uint32_t u;
    char *s = NULL;
    CHECK(gguf_get_f32(f, "llama.rope.freq_base", &fv) == 0 && fv == 500000.0f);
    CHECK(gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &fv) == 0 && fv == 1e-6f);
    CHECK(gguf_get_u32(f, "llama.attention.head_count_kv", &u) == 0 && u == 2);
    CHECK(gguf_get_u32(f, "llama.context_length", &u) == 0 && u == 1024);
    CHECK(gguf_get_u32(f, "llama.rope.dimension_count", &u) == 0 && u == 16);
    CHECK(gguf_get_u32(f, "general.file_type", &u) == 0 && u == 0);
    CHECK(gguf_get_str(f, "general.name", &s) == 0 && !strcmp(s, "tiny"));
    free(s);
    CHECK(gguf_get_str(f, "hotcold.ffn_activation", &s) == 0 && !strcmp(s, "silu"));
    free(s);
    /* vocabulary from tokenizer.json */
    const gguf_kv *tok = kv(f, "tokenizer.ggml.tokens"), *sc = kv(f, "tokenizer.ggml.scores"),
                  *ty = kv(f, "tokenizer.ggml.token_type");
    CHECK(tok && sc && ty && tok->n == 300 && sc->n == 300 && ty->n == 300);
    CHECK(gguf_kv_num(ty, 0) == 2 && gguf_kv_num(ty, 1) == 3 && gguf_kv_num(ty, 2) == 3);
    CHECK(gguf_kv_num(ty, 3) == 6 && gguf_kv_num(ty, 258) == 6 && gguf_kv_num(ty, 260) == 1);
    CHECK(tok->strs[264].len == 5 && !memcmp(tok->strs[264].ptr, "\xe2\x96\x81" "ab", 5));
    CHECK(gguf_kv_num(sc, 262) == 0 && gguf_kv_num(sc, 263) == -1 && gguf_kv_num(sc, 264) == -2);
    CHECK(tok->strs[299].len == 8 && !memcmp(tok->strs[299].ptr, "[PAD299]", 8) && gguf_kv_num(ty, 299) == 5);
    gguf_close(f);
    if (file_exists(th_bin("hc-gguf"))) CHECK(th_sh("%s check %s", th_bin("hc-gguf"), th_tmp("hf.gguf")) == 0);
    hf_free(&m);
}

/* Sharded F16 input, same directory name: the same file as unsharded input. */
static void test_hf_sharded_f16(void)
{
    hfm m = {.E = 32, .F = 64, .L = 3, .H = 4, .KV = 4, .V = 280, .tied = 1, .relu = 1};
    hf_make(&m, "F16");
    char d1[512], d2[512];
    snprintf(d1, sizeof d1, "%s/s1/model", th_tmpdir());
    snprintf(d2, sizeof d2, "%s/s3/model", th_tmpdir());
    write_hf_dir(d1, &m, "F16", 1);
    write_hf_dir(d2, &m, "F16", 3);
    CHECK(th_sh("%s hf %s -o %s --outtype f16", CONVERT, d1, th_tmp("s1.gguf")) == 0);
    CHECK(th_sh("%s hf %s -o %s --outtype f16", CONVERT, d2, th_tmp("s3.gguf")) == 0);
    CHECK(th_sh("cmp %s %s", th_tmp("s1.gguf"), th_tmp("s3.gguf")) == 0);
    const char *why = check_hf(th_tmp("s3.gguf"), &m, GGML_TYPE_F16, 0);
    CHECKF(!why, "%s", why);
    char err[256], *s = NULL;
    gguf_file *f = gguf_open(th_tmp("s3.gguf"), err, sizeof err);
    CHECK(f && gguf_get_str(f, "hotcold.ffn_activation", &s) == 0 && !strcmp(s, "relu"));
    free(s);
    gguf_close(f);
    hc_model *mm = hc_model_load(th_tmp("s3.gguf"), err, sizeof err);   /* tied: no output.weight */
    CHECKF(mm, "%s", err);
    CHECK(mm->hp.act == HC_ACT_RELU && mm->hp.n_layer == 3);
    hc_model_free(mm);
    /* deterministic: convert again, same bytes */
    CHECK(th_sh("%s hf %s -o %s --outtype f16", CONVERT, d2, th_tmp("s3b.gguf")) == 0);
    CHECK(th_sh("cmp %s %s", th_tmp("s3.gguf"), th_tmp("s3b.gguf")) == 0);
    hf_free(&m);
}

/* BF16 in -> F32 out exact; F32 in -> BF16 out rounded like ggml. */
static void test_hf_bf16(void)
{
    hfm m = {.E = 32, .F = 64, .L = 1, .H = 2, .KV = 1, .V = 270};
    hf_make(&m, "BF16");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bf/m", th_tmpdir());
    write_hf_dir(dir, &m, "BF16", 2);
    CHECK(th_sh("%s hf %s -o %s --outtype f32", CONVERT, dir, th_tmp("bf.gguf")) == 0);
    const char *why = check_hf(th_tmp("bf.gguf"), &m, GGML_TYPE_F32, 0);
    CHECKF(!why, "%s", why);
    hf_free(&m);
    hfm m2 = {.E = 32, .F = 64, .L = 1, .H = 2, .KV = 1, .V = 270};
    hf_make(&m2, "F32");
    snprintf(dir, sizeof dir, "%s/bf2/m", th_tmpdir());
    write_hf_dir(dir, &m2, "F32", 1);
    CHECK(th_sh("%s hf %s -o %s --outtype bf16", CONVERT, dir, th_tmp("bf2.gguf")) == 0);
    why = check_hf(th_tmp("bf2.gguf"), &m2, GGML_TYPE_BF16, 0);
    CHECKF(!why, "%s", why);
    hf_free(&m2);
}

/* tokenizer.model (SentencePiece protobuf) is preferred over tokenizer.json. */
static size_t pb_piece(unsigned char *o, const char *piece, float score, int type)
{
    size_t n = strlen(piece), k = 0;
    unsigned char inner[128];
    inner[k++] = 0x0a;
    inner[k++] = (unsigned char)n;
    memcpy(inner + k, piece, n);
    k += n;
    inner[k++] = 0x15;
    memcpy(inner + k, &score, 4);
    k += 4;
    if (type != 1) { inner[k++] = 0x18; inner[k++] = (unsigned char)type; }
    o[0] = 0x0a;
    o[1] = (unsigned char)k;
    memcpy(o + 2, inner, k);
    return k + 2;
}

/* A trainer spec of model_type t (0: none) and a normalizer spec of the given fields. */
#define SPM_BPE "\x12\x02\x18\x02"                       /* trainer_spec { model_type: BPE } */
#define SPM_NORM_KEEP_SPACES "\x1a\x02\x20\x00"          /* normalizer_spec { remove_extra_whitespaces: 0 } */

/* tokenizer.model in dir: <unk>, <s>, </s>, 256 bytes, "▁the", "x", then the specs; hc-convert's exit code. */
static int write_spm_and_convert(const char *dir, const char *specs, size_t specs_len, const char *out)
{
    char p[600];
    unsigned char *buf = malloc(1 << 16);
    size_t n = 0;
    n += pb_piece(buf + n, "<unk>", 0, 2);
    n += pb_piece(buf + n, "<s>", 0, 3);
    n += pb_piece(buf + n, "</s>", 0, 3);
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        n += pb_piece(buf + n, s, 0, 6);
    }
    n += pb_piece(buf + n, "\xe2\x96\x81the", -1.5f, 1);
    n += pb_piece(buf + n, "x", -7.25f, 1);
    memcpy(buf + n, specs, specs_len);
    n += specs_len;
    snprintf(p, sizeof p, "%s/tokenizer.model", dir);
    int rc = th_write(p, buf, n);
    free(buf);
    return rc ? -1 : th_sh("%s hf %s -o %s --outtype f32", CONVERT, dir, out);
}

static void test_hf_sentencepiece_model(void)
{
    hfm m = {.E = 32, .F = 32, .L = 1, .H = 2, .KV = 2, .V = 262};
    hf_make(&m, "F32");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/spm/m", th_tmpdir());
    write_hf_dir(dir, &m, "F32", 1);
    hf_free(&m);
    /* LLaMA's: BPE, whitespace kept; a trainer field the vocabulary does not need is skipped */
    static const char llama[] = "\x12\x04\x18\x02\x20\x07" SPM_NORM_KEEP_SPACES;
    CHECK(write_spm_and_convert(dir, llama, sizeof llama - 1, th_tmp("spm.gguf")) == 0);
    char err[256];
    gguf_file *f = gguf_open(th_tmp("spm.gguf"), err, sizeof err);
    CHECK(f);
    const gguf_kv *tok = kv(f, "tokenizer.ggml.tokens"), *sc = kv(f, "tokenizer.ggml.scores"),
                  *ty = kv(f, "tokenizer.ggml.token_type");
    CHECK(tok && tok->n == 262 && tok->strs[259].len == 6 && !memcmp(tok->strs[259].ptr, "\xe2\x96\x81the", 6));
    CHECK(gguf_kv_num(sc, 259) == -1.5 && gguf_kv_num(sc, 260) == -7.25);
    CHECK(gguf_kv_num(ty, 0) == 2 && gguf_kv_num(ty, 1) == 3 && gguf_kv_num(ty, 100) == 6 && gguf_kv_num(ty, 260) == 1);
    CHECK(gguf_kv_num(ty, 261) == 5);                 /* padding */
    int b = 0;
    CHECK(gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &b) == 0 && b == 1);
    CHECK(gguf_find_kv(f, "hotcold.tokenizer.unigram") < 0);
    gguf_close(f);
    /* beside it, tokenizer.json's added tokens and post-processor (null: nothing added), and
     * tokenizer_config.json's add_bos_token / add_eos_token, which win */
    char p[600];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    static const char tj[] = "{\"added_tokens\":[{\"id\":261,\"content\":\"<extra>\",\"special\":true}],"
                             "\"post_processor\":null,\"model\":{\"type\":\"BPE\",\"vocab\":{}}}";
    CHECK(th_write(p, tj, sizeof tj - 1) == 0);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    CHECK(th_write(p, "{\"add_eos_token\": true, \"add_bos_token\": null}", 46) == 0);
    CHECK(write_spm_and_convert(dir, llama, sizeof llama - 1, th_tmp("spm-json.gguf")) == 0);
    f = gguf_open(th_tmp("spm-json.gguf"), err, sizeof err);
    CHECK(f);
    tok = kv(f, "tokenizer.ggml.tokens");
    ty = kv(f, "tokenizer.ggml.token_type");
    CHECK(tok && tok->strs[261].len == 7 && !memcmp(tok->strs[261].ptr, "<extra>", 7) && gguf_kv_num(ty, 261) == 3);
    CHECK(gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b) == 0 && b == 0);
    CHECK(gguf_get_bool(f, "tokenizer.ggml.add_eos_token", &b) == 0 && b == 1);
    gguf_close(f);
    CHECK(th_write(p, "{\"add_bos_token\": \"yes\"}", 24) == 0);
    CHECK(write_spm_and_convert(dir, llama, sizeof llama - 1, th_tmp("spm-bad.gguf")) == 1);
    CHECKF(strstr(th_last_err(), "tokenizer_config.json: add_bos_token is not true or false"), "%s", th_last_err());
    th_sh("rm -f %s %s/tokenizer.json", p, dir);
    /* a Unigram model (the proto's default type) runs Viterbi; add_dummy_prefix false is no space prefix */
    static const char unigram[] = "\x1a\x04\x18\x00\x20\x00";
    CHECK(write_spm_and_convert(dir, unigram, sizeof unigram - 1, th_tmp("spm-uni.gguf")) == 0);
    f = gguf_open(th_tmp("spm-uni.gguf"), err, sizeof err);
    CHECK(f);
    CHECK(gguf_get_bool(f, "hotcold.tokenizer.unigram", &b) == 0 && b == 1);
    CHECK(gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &b) == 0 && b == 0);
    gguf_close(f);
    /* what the runtime does not do is refused by name */
    static const struct { const char *specs; size_t len; const char *want; } bad[] = {
        { "\x12\x02\x18\x03" SPM_NORM_KEEP_SPACES, 8, "trainer_spec.model_type WORD is not supported (UNIGRAM, BPE)" },
        { "\x12\x05\x18\x02\xc0\x01\x01" SPM_NORM_KEEP_SPACES, 11, "trainer_spec.treat_whitespace_as_suffix is not supported" },
        { SPM_BPE, 4, "normalizer_spec: remove_extra_whitespaces (true by default) is not supported" },
        { SPM_BPE "\x1a\x05\x20\x00\x12\x01\x41", 11, "normalizer_spec: precompiled_charsmap (a Unicode normalization) is not supported" },
        { SPM_BPE "\x1a\x04\x20\x00\x28\x00", 10, "normalizer_spec: escape_whitespaces false is not supported" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(write_spm_and_convert(dir, bad[i].specs, bad[i].len, th_tmp("spm-bad.gguf")) == 1 &&
               strstr(th_last_err(), "tokenizer.model: ") && strstr(th_last_err(), bad[i].want),
               "case %zu: %s", i, th_last_err());
        CHECK(!file_exists(th_tmp("spm-bad.gguf")));
    }
}

/* --predictors: PWRI magic, sparse_threshold, fc1/fc2, ffn_down_t. Eleven layers: the names
 * "10.fc1.weight" .. "9.fc2.weight" sort apart from the layers' order (a name index sorted
 * before the layer prefixes were added once missed "9.fc2.weight"). */
enum { PRED_LAYERS = 11 };
static void test_hf_predictors(void)
{
    hfm m = {.E = 32, .F = 64, .L = PRED_LAYERS, .H = 4, .KV = 2, .V = 270, .relu = 1};
    hf_make(&m, "F32");
    char dir[512], pd[512], p[600];
    snprintf(dir, sizeof dir, "%s/pi/m", th_tmpdir());
    snprintf(pd, sizeof pd, "%s/pi/pred", th_tmpdir());
    write_hf_dir(dir, &m, "F32", 1);
    th_sh("mkdir -p %s", pd);
    hfm pr[PRED_LAYERS] = {{.n = 0}};
    int r[PRED_LAYERS];
    for (int l = 0; l < PRED_LAYERS; l++) {
        r[l] = 16 + 8 * (l % 2);
        add_t(&pr[l], "F16", "fc1.weight", 2, r[l], m.E);
        add_t(&pr[l], "F16", "fc2.weight", 2, m.F, r[l]);
        snprintf(p, sizeof p, "%s/model_%d.safetensors", pd, l);
        CHECK(st_write(p, pr[l].t, 2, "F16") == 0);
    }
    snprintf(p, sizeof p, "%s/config.json", pd);
    CHECK(th_write(p, "{\"sparse_threshold\": 0.25}", 26) == 0);
    CHECK(th_sh("%s hf %s -o %s --outtype f16 --predictors %s", CONVERT, dir, th_tmp("pi.gguf"), pd) == 0);
    const char *why = check_hf(th_tmp("pi.gguf"), &m, GGML_TYPE_F16, 1);
    CHECKF(!why, "%s", why);
    char err[256];
    gguf_file *f = gguf_open(th_tmp("pi.gguf"), err, sizeof err);
    CHECK(f && f->variant == GGUF_VARIANT_PWRI);
    unsigned char *raw = th_read(th_tmp("pi.gguf"), NULL);
    CHECK(raw && !memcmp(raw, "PWRI", 4));
    free(raw);
    float thr;
    CHECK(gguf_get_f32(f, "powerinfer.sparse_threshold", &thr) == 0 && thr == 0.25f);
    for (int l = 0; l < PRED_LAYERS; l++) {
        char nm[64];
        snprintf(nm, sizeof nm, "blk.%d.fc1.weight", l);
        CHECK(same(gguf_get_tensor(f, nm), GGML_TYPE_F16, pr[l].t[0].x, r[l], m.E));
        snprintf(nm, sizeof nm, "blk.%d.fc2.weight", l);
        CHECK(same(gguf_get_tensor(f, nm), GGML_TYPE_F16, pr[l].t[1].x, m.F, r[l]));
        hf_free(&pr[l]);
    }
    gguf_close(f);
    if (file_exists(th_bin("hc-gguf"))) CHECK(th_sh("%s check %s", th_bin("hc-gguf"), th_tmp("pi.gguf")) == 0);
    /* the runtime takes it as a sparse ReLU model with its threshold */
    hc_model *mm = hc_model_load(th_tmp("pi.gguf"), err, sizeof err);
    CHECKF(mm, "%s", err);
    CHECK(mm->hp.act == HC_ACT_RELU && mm->hp.sparse_threshold == 0.25f && mm->hp.n_head_kv == 2);
    hc_model_free(mm);
    /* a threshold hc-run --sparse-threshold would refuse: inf in the file (refused at load), 1e999 in
     * the predictors' config.json (refused at conversion) */
    size_t n;
    unsigned char *b = th_read(th_tmp("pi.gguf"), &n);
    unsigned char *k = b ? memmem(b, n, "powerinfer.sparse_threshold", 27) : NULL;
    CHECK(k);
    if (k) {
        memcpy(k + 27 + 4, &(float){ INFINITY }, 4);   /* after the key: the type (u32), then the value */
        CHECK(th_write(th_tmp("pi-inf.gguf"), b, n) == 0);
        mm = hc_model_load(th_tmp("pi-inf.gguf"), err, sizeof err);
        CHECKF(!mm && strstr(err, "powerinfer.sparse_threshold inf is not a finite number"), "%s", mm ? "loaded" : err);
        hc_model_free(mm);
    }
    free(b);
    CHECK(th_write(p, "{\"sparse_threshold\": 1e999}", 27) == 0);
    CHECK(th_sh("%s hf %s -o %s --predictors %s", CONVERT, dir, th_tmp("pi2.gguf"), pd) == 1);
    CHECKF(strstr(th_last_err(), "sparse_threshold is not a finite number"), "%s", th_last_err());
    CHECK(th_write(p, "{\"sparse_threshold\": 0.25}", 26) == 0);
    /* .pt predictors are refused with a pointer to the fix */
    th_sh("mkdir -p %s/pt && touch %s/pt/model_0.pt", th_tmpdir(), th_tmpdir());
    CHECK(th_sh("%s hf %s -o %s --predictors %s/pt", CONVERT, dir, th_tmp("pt.gguf"), th_tmpdir()) == 1);
    CHECKF(strstr(th_last_err(), "model_0.pt: PyTorch pickle"), "%s", th_last_err());
    CHECK(!file_exists(th_tmp("pt.gguf")));
    hf_free(&m);
}

/* Each bad input: exit 1, one line naming the file, no output. */
/* A shell command that replaces the first FROM in DIR/model.safetensors' header by TO (the header's
 * length rewritten); RESHAPE gives the first tensor of shape FROM the shape TO (same bytes). */
#define HEADER_SUB(from, to)                                                                                \
    "python3 -c \"import struct,sys; p=sys.argv[1]; b=open(p,'rb').read(); n=struct.unpack('<Q',b[:8])[0]; " \
    "h=b[8:8+n].replace(b'" from "',b'" to "',1); "                                                          \
    "open(p,'wb').write(struct.pack('<Q',len(h))+h+b[8+n:])\" DIR/model.safetensors"
#define RESHAPE(from, to) HEADER_SUB("\\\"shape\\\":" from, "\\\"shape\\\":" to)

/* A shell command that runs the Python statements EXPR on j, DIR/tokenizer.json's JSON, and writes it back. */
#define TJ_EDIT(expr)                                                                                        \
    "python3 -c \"import json,sys; p=sys.argv[1]; j=json.load(open(p)); " expr "; json.dump(j,open(p,'w'))\" " \
    "DIR/tokenizer.json"

static void test_hf_errors(void)
{
    hfm m = {.E = 32, .F = 32, .L = 1, .H = 2, .KV = 2, .V = 270};
    hf_make(&m, "F32");
    char dir[512], p[600];
    snprintf(dir, sizeof dir, "%s/err/m", th_tmpdir());
    char out[512];   /* th_tmp's buffers rotate: keep a copy */
    snprintf(out, sizeof out, "%s", th_tmp("err/out/x.gguf"));
    th_sh("mkdir -p %s/err/out", th_tmpdir());
    struct { const char *setup, *want; } cases[] = {
        {"rm -f DIR/config.json", "config.json: No such file"},
        {"echo '{\"hidden_size\": 32,' > DIR/config.json", "config.json: JSON does not parse"},
        /* JSON inputs have size limits (cJSON takes ~40 times the text) */
        {"head -c 2097152 /dev/zero | tr '\\0' ' ' >> DIR/config.json", "bytes, more than the 1048576 this JSON file may have"},
        {"head -c 67108865 /dev/zero | tr '\\0' ' ' >> DIR/tokenizer.json", "bytes, more than the 67108864 this JSON file may have"},
        {"sed -i 's/LlamaForCausalLM/GPT2LMHeadModel/' DIR/config.json", "unsupported architecture 'GPT2LMHeadModel'"},
        /* values every other tool refuses: refused here, not written */
        {"sed -i 's/\"rope_theta\":500000.0/\"rope_theta\":0/' DIR/config.json", "\"rope_theta\": 0 is not a positive number"},
        {"sed -i 's/\"rope_theta\":500000.0/\"rope_theta\":-1/' DIR/config.json", "\"rope_theta\": -1 is not a positive number"},
        {"sed -i 's/\"max_position_embeddings\":1024/\"max_position_embeddings\":0/' DIR/config.json",
         "context length (max_position_embeddings) is not in 1..2^24"},
        {"sed -i 's/\"max_position_embeddings\":1024/\"max_position_embeddings\":4294967295/' DIR/config.json",
         "context length (max_position_embeddings) is not in 1..2^24"},
        {"sed -i 's/\"rms_norm_eps\":1e-06/\"rms_norm_eps\":1e300/' DIR/config.json", "norm epsilon (rms_norm_eps) is not in (0, 1)"},
        /* as transformers reads config.json: of a key given twice, the last */
        {"sed -i 's/\"rms_norm_eps\":1e-06/\"rms_norm_eps\":1e-06,\"rms_norm_eps\":2/' DIR/config.json",
         "norm epsilon (rms_norm_eps) is not in (0, 1)"},
        {"sed -i 's/\"vocab_size\":270/\"vocab_size\":[270]/' DIR/config.json", "\"vocab_size\" is not a non-negative integer"},
        /* a JSON input is one value: a second one appended would be ignored */
        {"echo '{\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4}}' >> DIR/config.json",
         "config.json: text after the JSON value, at byte"},
        {"echo '{}' >> DIR/tokenizer.json", "tokenizer.json: text after the JSON value, at byte"},
        {HEADER_SUB("{", "{}{"), "model.safetensors: safetensors header: text after the JSON value, at byte 2"},
        /* a padding id the runtime would refuse */
        {"sed -i 's/}$/,\"pad_token_id\":300}/' DIR/config.json",
         "config.json: pad_token_id 300 is not a token id (the vocabulary has 270 tokens)"},
        {"sed -i 's/}$/,\"rope_scaling\":{\"type\":null,\"factor\":4.0}}/' DIR/config.json",
         "\"rope_scaling.type\" is missing or not a string, but the factor is 4"},
        {"sed -i 's/\"num_hidden_layers\":1/\"num_hidden_layers\":2/' DIR/config.json", "missing tensor 'model.layers.1"},
        {"sed -i 's/\"shape\":\\[32,32\\]/\"shape\":[32,33]/' DIR/model.safetensors", "byte size does not match dtype x shape"},
        {"sed -i 's/\"dtype\":\"F32\",\"shape\":\\[32\\]/\"dtype\":\"I32\",\"shape\":[32]/' DIR/model.safetensors", "unsupported dtype I32"},
        /* every dimension, as they are */
        {RESHAPE("[32]", "[32,1]"), "has shape [32, 1], expected [32]"},
        {RESHAPE("[32,32]", "[32,32,1]"), "has shape [32, 32, 1], expected [32, 32]"},
        {"sed -i 's/\"data_offsets\":\\[0,/\"data_offsets\":[4,/' DIR/model.safetensors", "byte size does not match"},
        /* cJSON ends a string at U+0000: the name would be model.norm.weight without a word */
        {HEADER_SUB("model.norm.weight\\\"", "model.norm.weight\\u0000\\\""),
         "model.safetensors: safetensors header: U+0000 in JSON is not supported"},
        {"sed -i 's/LlamaForCausalLM/LlamaForCausalLM\\\\u0000/' DIR/config.json", "config.json: U+0000 in JSON is not supported"},
        {"rm DIR/model.safetensors", "no model.safetensors"},
        {"rm DIR/tokenizer.json", "no tokenizer.model or tokenizer.json"},
        /* tokenizers' vocab is one-to-one: an id or a piece given twice is refused, not one of them lost */
        {"sed -i 's/\"b\":261/\"b\":260/' DIR/tokenizer.json", "model.vocab: id 260 is given to 'a' and to 'b'"},
        {"sed -i 's/\"b\":261/\"a\":261/' DIR/tokenizer.json", "model.vocab['a'] is given twice"},
        {"sed -i 's/\"type\":\"Prepend\"/\"type\":\"NFKC\"/' DIR/tokenizer.json",
         "normalizer type 'NFKC' is not supported"},
        /* a SentencePiece-style tokenizer.json: what its encoding does not follow */
        {TJ_EDIT("j['model']['dropout']=0.1"), "tokenizer.json: model: BPE dropout is not supported"},
        {TJ_EDIT("j['model']['ignore_merges']=True"), "model: ignore_merges is not supported for SentencePiece-style"},
        {TJ_EDIT("j['model']['byte_fallback']=False"), "model: byte pieces <0xHH> without byte_fallback"},
        {TJ_EDIT("n=j['normalizer']['normalizers']; n.insert(0,n[0])"), "added twice (normalizer Prepend twice)"},
        {TJ_EDIT("j['pre_tokenizer']={'type':'Metaspace','replacement':'\\u2581'}"),
         "added twice (normalizer Prepend and pre_tokenizer Metaspace)"},
        {TJ_EDIT("j['normalizer']['normalizers'].pop()"), "spaces are not replaced by"},
        {TJ_EDIT("j['normalizer']=None; j['pre_tokenizer']={'type':'Metaspace','replacement':'\\u2581'}; "
                 "j['model']['vocab']['a\\u2581b']=265"),
         "pre_tokenizer: Metaspace split with pieces that hold"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        th_sh("rm -rf %s", dir);
        write_hf_dir(dir, &m, "F32", 1);
        char cmd[1024], *at;
        snprintf(cmd, sizeof cmd, "%s", cases[i].setup);
        while ((at = strstr(cmd, "DIR"))) {
            char rest[1024];
            snprintf(rest, sizeof rest, "%s", at + 3);
            snprintf(at, sizeof cmd - (size_t)(at - cmd), "%s%s", dir, rest);
        }
        CHECK(th_sh("%s", cmd) == 0);
        int rc = th_sh("%s hf %s -o %s --outtype f32", CONVERT, dir, out);
        const char *e = th_last_err();
        CHECKF(rc == 1 && strstr(e, cases[i].want) && !strncmp(e, "hc-convert: ", 12) && strchr(e, '\n') == e + strlen(e) - 1,
               "case %zu (%s): rc %d, stderr: %s", i, cases[i].setup, rc, e);
        CHECKF(count_entries(th_tmp("err/out")) == 0, "case %zu left a file", i);
    }
    /* Replace without Prepend: no space prefix; a null post-processor adds no BOS */
    th_sh("rm -rf %s", dir);
    write_hf_dir(dir, &m, "F32", 1);
    char cmd[600];
    snprintf(cmd, sizeof cmd, TJ_EDIT("j['normalizer']['normalizers'].pop(0); j['post_processor']=None"));
    char *at = strstr(cmd, "DIR");
    snprintf(p, sizeof p, "%.*s%s%s", (int)(at - cmd), cmd, dir, at + 3);
    CHECK(th_sh("%s", p) == 0);
    CHECK(th_sh("%s hf %s -o %s --outtype f32", CONVERT, dir, out) == 0);
    char err[256];
    gguf_file *f = gguf_open(out, err, sizeof err);
    int b = 1, b2 = 1;
    CHECK(f && gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &b) == 0 && b == 0 &&
          gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b2) == 0 && b2 == 0);
    gguf_close(f);
    th_sh("rm -f %s", out);
    /* a weight F16 cannot hold is refused by name, not written as inf; BF16 holds it */
    th_sh("rm -rf %s", dir);
    write_hf_dir(dir, &m, "F32", 1);
    CHECK(th_sh("python3 -c \"import json,struct,sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); "
                "n=struct.unpack('<Q',b[:8])[0]; o=json.loads(b[8:8+n])['model.layers.0.mlp.up_proj.weight']['data_offsets'][0]; "
                "b[8+n+o+4:8+n+o+8]=struct.pack('<f',1e5); open(p,'wb').write(b)\" %s/model.safetensors", dir) == 0);
    CHECK(th_sh("%s hf %s -o %s --outtype f16", CONVERT, dir, out) == 1);
    CHECKF(strstr(th_last_err(), "tensor blk.0.ffn_up.weight: value 100000 at [0, 1] is beyond F16's range"), "%s",
           th_last_err());
    CHECK(count_entries(th_tmp("err/out")) == 0);
    CHECK(th_sh("%s hf %s -o %s --outtype bf16", CONVERT, dir, out) == 0);
    th_sh("rm -f %s", out);
    snprintf(p, sizeof p, "%s/nonexistent", th_tmpdir());
    CHECK(th_sh("%s hf %s -o %s", CONVERT, p, out) == 1 && count_entries(th_tmp("err/out")) == 0);
    hf_free(&m);
}

/* ------------------------------------------------------------------ synth */

/* st_add_file on a safetensors file of this header and 64 data bytes: 0 or
 * -1 with the message in err. */
static int st_header(const char *header, st_set *s, char *err, size_t errlen)
{
    size_t hl = strlen(header);
    unsigned char *b = calloc(1, 8 + hl + 64);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    const char *path = th_tmp("header.safetensors");
    int rc = th_write(path, b, 8 + hl + 64);
    free(b);
    return rc ? -1 : st_add_file(s, path, "", err, errlen);
}

#define ST_F32(name, n, b, e) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[" #n "],\"data_offsets\":[" #b "," #e "]}"

/* Header checks: a tensor of no bytes overlaps nothing, even where another
 * begins or inside one; overlaps and names given twice are refused; many
 * tensors are sorted, not compared pairwise, and every one is found. */
static void test_safetensors_header(void)
{
    static const struct { const char *header, *refusal; } cases[] = {
        { "{" ST_F32("a", 2, 0, 8) "," ST_F32("z", 0, 8, 8) "," ST_F32("b", 2, 8, 16) "}", NULL },
        { "{" ST_F32("b", 2, 8, 16) "," ST_F32("z", 0, 8, 8) "," ST_F32("a", 2, 0, 8) "}", NULL },
        { "{" ST_F32("a", 4, 0, 16) "," ST_F32("z", 0, 4, 4) "}", NULL },
        { "{" ST_F32("a", 2, 0, 8) "," ST_F32("b", 2, 4, 12) "}", "tensors 'a' and 'b' overlap" },
        { "{" ST_F32("a", 2, 0, 8) "," ST_F32("a", 2, 8, 16) "}", "tensor 'a': appears twice" },
    };
    char err[512];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        st_set s = {0};
        int rc = st_header(cases[i].header, &s, err, sizeof err);
        if (cases[i].refusal) CHECKF(rc != 0 && strstr(err, cases[i].refusal), "case %zu: %s", i, rc ? err : "accepted");
        else CHECKF(rc == 0, "case %zu: %s", i, err);
        st_free(&s);
    }
    enum { N = 20000 };
    size_t cap = (size_t)N * 80 + 2, k = 0;
    char *h = malloc(cap);
    h[k++] = '{';
    for (int i = 0; i < N; i++)
        k += (size_t)snprintf(h + k, cap - k, "%s\"t%d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}",
                              i ? "," : "", (i * 7919) % N);
    snprintf(h + k, cap - k, "}");
    st_set s = {0};
    CHECKF(st_header(h, &s, err, sizeof err) == 0, "%s", err);
    int found = 0;
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "t%d", i);
        long j = st_find(&s, name);
        found += j >= 0 && !strcmp(s.t[j].name, name);
    }
    CHECK(found == N && st_find(&s, "t-1") < 0);
    st_free(&s);
    free(h);
}

static void test_synth_valid_deterministic(void)
{
    const char *a = th_tmp("syn_a.gguf"), *b = th_tmp("syn_b.gguf"), *c = th_tmp("syn_c.gguf");
    const char *opts = "--dim 96 --n-ff 160 --layers 3 --heads 6 --kv-heads 2 --vocab 400 --ctx 128 --type f16 --hot-fraction 0.2 --hot-skew 2";
    CHECK(th_sh("%s synth %s --seed 7 -o %s", CONVERT, opts, a) == 0);
    CHECK(th_sh("%s synth %s --seed 7 -o %s", CONVERT, opts, b) == 0);
    CHECK(th_sh("%s synth %s --seed 8 -o %s", CONVERT, opts, c) == 0);
    CHECK(th_sh("cmp -s %s %s", a, b) == 0);
    CHECK(th_sh("cmp -s %s %s", a, c) != 0);
    if (file_exists(th_bin("hc-gguf"))) CHECK(th_sh("%s check %s", th_bin("hc-gguf"), a) == 0);
    char err[256];
    gguf_file *f = gguf_open(a, err, sizeof err);
    CHECKF(f, "%s", err);
    const gguf_tensor *k = gguf_get_tensor(f, "blk.2.attn_k.weight"), *g = gguf_get_tensor(f, "blk.0.ffn_gate.weight");
    const gguf_tensor *n = gguf_get_tensor(f, "blk.1.ffn_norm.weight");
    CHECK(k && k->type == GGML_TYPE_F16 && k->ne[0] == 96 && k->ne[1] == 32);
    CHECK(g && g->ne[0] == 96 && g->ne[1] == 160 && n && n->type == GGML_TYPE_F32);
    CHECK(f->n_tensors == 3 + 9 * 3);
    uint32_t hot;
    CHECK(gguf_get_u32(f, "hotcold.synth.hot_count", &hot) == 0 && hot == 32);
    /* each layer's order is a permutation of the neurons */
    for (int l = 0; l < 3; l++) {
        char key[64];
        snprintf(key, sizeof key, "hotcold.synth.order.%d", l);
        const gguf_kv *o = kv(f, key);
        CHECK(o && o->type == GGUF_TYPE_ARRAY && o->arr_type == GGUF_TYPE_INT32 && o->n == 160);
        int seen[160] = {0};
        for (int j = 0; j < 160; j++) {
            double v = gguf_kv_num(o, (uint64_t)j);
            CHECK(v >= 0 && v < 160 && !seen[(int)v]);
            seen[(int)v] = 1;
        }
    }
    gguf_close(f);
    CHECK(th_sh("%s synth --vocab 100 -o %s", CONVERT, th_tmp("syn_bad.gguf")) == 1);
    CHECK(th_sh("%s synth --heads 5 -o %s", CONVERT, th_tmp("syn_bad.gguf")) == 1);
    CHECK(!file_exists(th_tmp("syn_bad.gguf")));
}

/* The synth vocabulary tokenizes ASCII text with pieces, not only bytes. */
static void test_synth_vocab_tokenizes(void)
{
    const char *p = th_tmp("syn_v.gguf");
    CHECK(th_sh("%s synth --vocab 2000 -o %s", CONVERT, p) == 0);
    char err[256];
    gguf_file *f = gguf_open(p, err, sizeof err);
    CHECK(f);
    hc_tokenizer *t = hc_tokenizer_load(f, err, sizeof err);
    CHECKF(t, "%s", err);
    const char *text = "the cat sat on the mat";
    int32_t ids[64];
    int n = hc_tokenize(t, text, strlen(text), 0, 0, ids, 64);
    CHECKF(n > 0 && n < (int)strlen(text), "%d tokens", n);
    for (int i = 0; i < n; i++) CHECK(ids[i] >= 259);          /* no byte fallback needed */
    char buf[64];
    size_t len = 0;
    for (int i = 0; i < n; i++) len += (size_t)hc_token_to_piece(t, i ? ids[i - 1] : -1, ids[i], buf + len, (int)(sizeof buf - len));
    CHECK(len == strlen(text) + 1 && !memcmp(buf + 1, text, len - 1));   /* with SPM's leading space */
    hc_tokenizer_free(t);
    gguf_close(f);
}

typedef struct {
    int n_ff;
    int64_t *fired;        /* [layer][n_ff] */
    int tokens;
} fire_count;

static void count_hook(void *user, int layer, int point, const float *x, int B, int n, int pos0)
{
    fire_count *c = user;
    (void)pos0;
    if (point != HC_HOOK_FFN_ACT) return;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < n; j++) c->fired[(size_t)layer * (size_t)n + (size_t)j] += x[(size_t)b * (size_t)n + (size_t)j] != 0.0f;
    if (layer == 0) c->tokens += B;
}

/* Run the model at path over NTOK tokens of random lowercase words (many
 * distinct tokens, as real text has): per layer and neuron, the number of
 * tokens it fired on, into *fired ([layers][ff], free it; NULL on failure). */
enum { NTOK = 400 };
static void fire_counts(const char *path, int layers, int ff, int64_t **fired)
{
    char err[256];
    *fired = NULL;
    hc_model *m = hc_model_load(path, err, sizeof err);
    CHECKF(m, "%s", err);
    hc_tokenizer *t = hc_tokenizer_load(m->file, err, sizeof err);
    CHECK(t);
    char text[8192];
    size_t len = 0;
    uint32_t s = 99;
    while (len < sizeof text - 16) {
        s = s * 1664525u + 1013904223u;
        int wl = 1 + (int)((s >> 24) % 6);
        for (int i = 0; i < wl; i++) {
            s = s * 1664525u + 1013904223u;
            text[len++] = (char)('a' + (s >> 16) % 26);
        }
        text[len++] = ' ';
    }
    int32_t *ids = malloc(4096 * sizeof *ids);
    int n = hc_tokenize(t, text, len, 1, 0, ids, 4096);
    CHECK(n >= NTOK);
    fire_count fc = {.n_ff = ff, .fired = calloc((size_t)layers * (size_t)ff, sizeof(int64_t))};
    hc_ctx_params cp = {.n_ctx = 512, .n_batch = 64, .n_threads = 1, .hook = count_hook, .hook_user = &fc};
    hc_ctx *ctx = hc_ctx_new(m, &cp, err, sizeof err);
    CHECKF(ctx, "%s", err);
    CHECKF(hc_eval(ctx, ids, NTOK, 0, NULL, HC_LOGITS_NONE) == 0, "%s", hc_ctx_error(ctx));
    CHECK(fc.tokens == NTOK);
    free(ids);
    hc_ctx_free(ctx);
    hc_tokenizer_free(t);
    hc_model_free(m);
    *fired = fc.fired;
}

/* Run the model over text: the planted hot neurons must be the ones that fire. */
static void test_synth_hot_set_is_hot(void)
{
    enum { FF = 512, LAYERS = 4 };
    const char *p = th_tmp("syn_hot.gguf");
    CHECK(th_sh("%s synth --dim 128 --n-ff %d --layers %d --heads 4 --vocab 1024 --ctx 512 "
                "--hot-fraction 0.1 --hot-skew 1 --seed 3 -o %s", CONVERT, FF, LAYERS, p) == 0);
    int64_t *fired;
    fire_counts(p, LAYERS, FF, &fired);
    CHECK(fired);
    char err[256];
    gguf_file *f = gguf_open(p, err, sizeof err);
    CHECKF(f, "%s", err);
    uint32_t n_hot;
    CHECK(gguf_get_u32(f, "hotcold.synth.hot_count", &n_hot) == 0 && n_hot == 51);
    for (int l = 0; l < LAYERS; l++) {
        char key[64];
        snprintf(key, sizeof key, "hotcold.synth.order.%d", l);
        const gguf_kv *o = kv(f, key);
        CHECK(o && o->n == FF);
        const int64_t *cnt = fired + (size_t)l * FF;
        double hot_rate = 0, cold_rate = 0, err_sum = 0;
        int n_cold = 0;
        for (int k = 0; k < FF; k++) {
            int j = (int)gguf_kv_num(o, (uint64_t)k);
            double rate = (double)cnt[j] / NTOK, want = 0.9 / (1.0 + (double)k / n_hot);
            err_sum += fabs(rate - want);
            if (k < (int)n_hot) hot_rate += rate / n_hot;
            else if (k >= 4 * (int)n_hot) { cold_rate += rate; n_cold++; }
        }
        cold_rate /= n_cold;
        /* planted: hot mean 0.9 ln2 = 0.62, ranks >= 4H about 0.13 */
        CHECKF(hot_rate > 0.5 && cold_rate < 0.2, "layer %d: hot %.3f cold %.3f", l, hot_rate, cold_rate);
        CHECKF(err_sum / FF < 0.06, "layer %d: mean |rate - planted| = %.3f", l, err_sum / FF);
        /* the planted hot neurons are among the measured 2H most active (the law
         * is smooth, so ranks just past H fire almost as often as rank H) */
        int in_top = 0;
        for (int k = 0; k < (int)n_hot; k++) {
            int j = (int)gguf_kv_num(o, (uint64_t)k), above = 0;
            for (int i = 0; i < FF; i++) above += cnt[i] > cnt[j];
            in_top += above < 2 * (int)n_hot;
        }
        
        CHECKF(in_top >= (int)(0.95 * n_hot), "layer %d: %d of %u planted hot neurons in the measured top 2H",
               l, in_top, n_hot);
    }
    free(fired);
    gguf_close(f);
}

/* The number of linearly independent rows of w (Gram-Schmidt in double, a
 * row counts when its remainder keeps more than 1e-4 of its norm). */
static int matrix_rank(const hc_weight *w)
{
    int n = w->n, rank = 0;
    double *basis = malloc(sizeof(double) * (size_t)n * (size_t)n);
    float *row = malloc(sizeof(float) * (size_t)n);
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int r = 0; r < w->rows && rank < n; r++) {
        hc_weight_row(w, r, row);
        double n0 = 0, n1 = 0;
        for (int i = 0; i < n; i++) n0 += (double)row[i] * row[i];
        for (int i = 0; i < n; i++) v[i] = row[i];
        for (int k = 0; k < rank; k++) {
            const double *b = basis + (size_t)k * n;
            double d = 0;
            for (int i = 0; i < n; i++) d += v[i] * b[i];
            for (int i = 0; i < n; i++) v[i] -= d * b[i];
        }
        for (int i = 0; i < n; i++) n1 += v[i] * v[i];
        if (n1 <= 1e-8 * n0) continue;
        for (int i = 0; i < n; i++) basis[(size_t)rank * n + i] = v[i] / sqrt(n1);
        rank++;
    }
    free(basis);
    free(row);
    free(v);
    return rank;
}

/* --active-fraction P: every layer's neurons fire on about P of the tokens;
 * --gate-rank K: the gate has rank K + 1 (K directions and u), the other
 * matrices full rank. */
static void test_synth_active_fraction_gate_rank(void)
{
    enum { FF = 512, LAYERS = 3, DIM = 128 };
    const char *p = th_tmp("syn_act.gguf");
    CHECK(th_sh("%s synth --dim %d --n-ff %d --layers %d --heads 4 --vocab 1024 --ctx 512 "
                "--active-fraction 0.08 --gate-rank 8 --seed 3 -o %s", CONVERT, DIM, FF, LAYERS, p) == 0);
    int64_t *fired;
    fire_counts(p, LAYERS, FF, &fired);
    CHECK(fired);
    for (int l = 0; fired && l < LAYERS; l++) {
        double rate = 0;
        for (int j = 0; j < FF; j++) rate += (double)fired[(size_t)l * FF + j] / ((double)NTOK * FF);
        CHECKF(rate > 0.06 && rate < 0.10, "layer %d: %.4f of neurons fire, planted 0.08", l, rate);
    }
    free(fired);
    char err[256];
    hc_model *m = hc_model_load(p, err, sizeof err);
    CHECKF(m, "%s", err);
    if (!m) return;
    CHECKF(matrix_rank(&m->layers[1].ffn_gate) == 9, "gate rank %d", matrix_rank(&m->layers[1].ffn_gate));
    CHECK(matrix_rank(&m->layers[1].ffn_up) == DIM - 1);   /* orthogonal to u */
    hc_model_free(m);
    CHECK(th_sh("%s synth --active-fraction 0.1 --hot-fraction 0.1 -o %s 2>/dev/null", CONVERT, th_tmp("syn_bad.gguf")) == 1);
    CHECK(th_sh("%s synth --dim 64 --gate-rank 65 -o %s 2>/dev/null", CONVERT, th_tmp("syn_bad.gguf")) == 1);
    CHECK(th_sh("%s synth --active-fraction 1 -o %s 2>/dev/null", CONVERT, th_tmp("syn_bad.gguf")) == 1);
    CHECK(!file_exists(th_tmp("syn_bad.gguf")));
}

int main(void)
{
    RUN(test_stories_byte_identical);
    RUN(test_stories_tensors_and_kvs);
    RUN(test_llama2c_v1);
    RUN(test_llama2c_unshared);
    RUN(test_llama2c_errors);
    RUN(test_hf_f32_unsharded);
    RUN(test_hf_sharded_f16);
    RUN(test_hf_bf16);
    RUN(test_hf_sentencepiece_model);
    RUN(test_hf_predictors);
    RUN(test_hf_errors);
    RUN(test_safetensors_header);
    RUN(test_synth_valid_deterministic);
    RUN(test_synth_vocab_tokenizes);
    RUN(test_synth_hot_set_is_hot);
    RUN(test_synth_active_fraction_gate_rank);
    return th_done();
}

/* hc-convert hf: each family's Hugging Face tensors -> GGUF tensors, named
 * as llama.cpp's converter names them (PowerInfer's for bamboo and opt):
 * docs/formats.md, "Model families". Q and K of the llama and bamboo
 * architectures are permuted from HF's rotate-half layout back to GGUF's
 * adjacent pairs; qwen2 and falcon keep rotate-half (llama.cpp runs them with
 * NeoX RoPE). Falcon's fused query_key_value is reordered to all Q rows, then
 * K, then V. 2-D weights are stored in the chosen type, 1-D ones stay F32. */
#include "convert_hf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ggml_types.h"

/* "[d0, d1, ...]" of n dimensions into buf. */
static const char *shape_str(const int64_t *d, uint32_t n, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (uint32_t i = 0; i < n && k < len; i++) k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

/* The tensor `name` of set s with the given PyTorch shape, as a converter source. */
static const st_tensor *take(st_set *s, const char *name, uint32_t n_dims, int64_t d0, int64_t d1)
{
    long i = st_find(s, name);
    if (i < 0) hc_die("%s: missing tensor '%s'", s->where, name);
    st_tensor *t = &s->t[i];
    const char *file = s->paths[t->file];
    if (t->type == UINT32_MAX) hc_die("%s: tensor '%s': unsupported dtype %s (F32, F16 or BF16)", file, name, t->dtype);
    const int64_t want[2] = { d0, d1 };
    if (t->n_dims != n_dims || t->shape[0] != d0 || (n_dims == 2 && t->shape[1] != d1)) {
        char has[160], expected[64];
        hc_die("%s: tensor '%s' has shape %s, expected %s", file, name, shape_str(t->shape, t->n_dims, has, sizeof has),
               shape_str(want, n_dims, expected, sizeof expected));
    }
    t->used = 1;
    return t;
}

/* Add output tensor `name` from HF tensor `src` (shape [rows, cols], or [cols] when rows is 0). */
static cv_tensor *emit(cv_tensors *ts, st_set *s, uint32_t wtype, const char *src, int64_t rows,
                       int64_t cols, const char *name)
{
    const st_tensor *t = take(s, src, rows ? 2 : 1, rows ? rows : cols, cols);
    cv_tensor *o = cv_add(ts, rows ? wtype : GGML_TYPE_F32, rows ? 2 : 1, cols, rows, "%s", name);
    o->src = t->data;
    o->src_type = t->type;
    return o;
}

static void mark_used(st_set *s, const char *name)
{
    long i = st_find(s, name);
    if (i >= 0) s->t[i].used = 1;
}

/* Llama 3 rope scaling as llama.cpp stores it: rope_freqs.weight[i] divides
 * the frequency of pair i (1 for short wavelengths, factor for long ones,
 * smoothly in between), which is what transformers' llama3 rope computes. */
static void gen_rope_factors(const cv_tensor *t, int64_t row0, int64_t nrows, float *out)
{
    const hf_config *c = t->gen_ctx;
    uint32_t dim = c->hp.head_dim;
    double lo_wave = c->rope_orig_ctx / c->low_freq, hi_wave = c->rope_orig_ctx / c->high_freq;
    (void)row0;
    (void)nrows;
    for (uint32_t i = 0; i < dim / 2; i++) {
        float freq = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)dim);
        double wave = 2 * M_PI / freq, f;
        if (wave < hi_wave) {
            f = 1;
        } else if (wave > lo_wave) {
            f = c->rope_factor;
        } else {
            double smooth = (c->rope_orig_ctx / wave - c->low_freq) / (c->high_freq - c->low_freq);
            f = 1 / ((1 - smooth) / c->rope_factor + smooth);
        }
        out[i] = (float)f;
    }
}

typedef struct {
    const hf_config *c;
    st_set *s;
    uint32_t wtype;
    cv_tensors *ts;
    uint32_t l;
    int transpose_down;        /* predictors: ffn_down as ffn_down_t */
} mapper;

/* Layer tensor HF "<prefix>.<l>.<what>" -> "blk.<l>.<gguf>". */
static cv_tensor *layer_t(mapper *m, const char *prefix, const char *what, int64_t rows, int64_t cols,
                          const char *gguf)
{
    char src[256], dst[GGUF_MAX_NAME + 1];
    snprintf(src, sizeof src, "%s.%u.%s", prefix, m->l, what);
    snprintf(dst, sizeof dst, "blk.%u.%s", m->l, gguf);
    return emit(m->ts, m->s, m->wtype, src, rows, cols, dst);
}

/* The down projection [E, F]: ffn_down, or ffn_down_t (row j = column j) for PWRI. */
static void down_t(mapper *m, const char *prefix, const char *what, const char *bias)
{
    int64_t E = m->c->hp.n_embd, F = m->c->hp.n_ff;
    if (!m->transpose_down) {
        layer_t(m, prefix, what, E, F, "ffn_down.weight");
        if (bias) layer_t(m, prefix, bias, 0, E, "ffn_down.bias");
        return;
    }
    cv_tensor *d = layer_t(m, prefix, what, E, F, "ffn_down_t.weight");
    d->layout = CV_TRANSPOSE;
    d->ne[0] = E;
    d->ne[1] = F;
    if (bias) layer_t(m, prefix, bias, 0, E, "ffn_down_t.bias");
}

/* LLaMA, Mistral, Qwen2, Bamboo: model.layers.N.{self_attn,mlp}.* */
static void map_llama_layer(mapper *m)
{
    const cv_hparams *hp = &m->c->hp;
    const char *P = "model.layers";
    int64_t E = hp->n_embd, F = hp->n_ff, Q = (int64_t)hp->head_dim * hp->n_head;
    int64_t K = (int64_t)hp->head_dim * hp->n_head_kv;
    int permute = m->c->family != HF_QWEN2;
    cv_tensor *q = layer_t(m, P, "self_attn.q_proj.weight", Q, E, "attn_q.weight");
    cv_tensor *k = layer_t(m, P, "self_attn.k_proj.weight", K, E, "attn_k.weight");
    if (permute) {
        q->layout = k->layout = CV_PERMUTE;
        q->heads = hp->n_head;
        k->heads = hp->n_head_kv;
    }
    layer_t(m, P, "self_attn.v_proj.weight", K, E, "attn_v.weight");
    if (m->c->family == HF_QWEN2) {
        layer_t(m, P, "self_attn.q_proj.bias", 0, Q, "attn_q.bias");
        layer_t(m, P, "self_attn.k_proj.bias", 0, K, "attn_k.bias");
        layer_t(m, P, "self_attn.v_proj.bias", 0, K, "attn_v.bias");
    }
    layer_t(m, P, "self_attn.o_proj.weight", E, Q, "attn_output.weight");
    layer_t(m, P, "input_layernorm.weight", 0, E, "attn_norm.weight");
    layer_t(m, P, "mlp.gate_proj.weight", F, E, "ffn_gate.weight");
    down_t(m, P, "mlp.down_proj.weight", NULL);
    layer_t(m, P, "mlp.up_proj.weight", F, E, "ffn_up.weight");
    layer_t(m, P, "post_attention_layernorm.weight", 0, E, "ffn_norm.weight");
    char src[128];
    snprintf(src, sizeof src, "model.layers.%u.self_attn.rotary_emb.inv_freq", m->l);
    mark_used(m->s, src);    /* recomputed by the runtime */
}

/* OPT: model.decoder.layers.N.*, every product with a bias. */
static void map_opt_layer(mapper *m)
{
    int64_t E = m->c->hp.n_embd, F = m->c->hp.n_ff;
    const char *P = "model.decoder.layers";
    static const char *const proj[][2] = { { "q_proj", "attn_q" }, { "k_proj", "attn_k" }, { "v_proj", "attn_v" },
                                           { "out_proj", "attn_output" } };
    char hf[64], gg[64];
    for (int i = 0; i < 4; i++) {
        snprintf(hf, sizeof hf, "self_attn.%s.weight", proj[i][0]);
        snprintf(gg, sizeof gg, "%s.weight", proj[i][1]);
        layer_t(m, P, hf, E, E, gg);
        snprintf(hf, sizeof hf, "self_attn.%s.bias", proj[i][0]);
        snprintf(gg, sizeof gg, "%s.bias", proj[i][1]);
        layer_t(m, P, hf, 0, E, gg);
    }
    layer_t(m, P, "self_attn_layer_norm.weight", 0, E, "attn_norm.weight");
    layer_t(m, P, "self_attn_layer_norm.bias", 0, E, "attn_norm.bias");
    layer_t(m, P, "final_layer_norm.weight", 0, E, "ffn_norm.weight");
    layer_t(m, P, "final_layer_norm.bias", 0, E, "ffn_norm.bias");
    layer_t(m, P, "fc1.weight", F, E, "ffn_up.weight");
    layer_t(m, P, "fc1.bias", 0, F, "ffn_up.bias");
    down_t(m, P, "fc2.weight", "fc2.bias");
}

/* Falcon: transformer.h.N.*; query_key_value reordered (CV_FALCON_QKV). */
static void map_falcon_layer(mapper *m)
{
    const cv_hparams *hp = &m->c->hp;
    int64_t E = hp->n_embd, F = hp->n_ff, hd = E / hp->n_head;
    const char *P = "transformer.h";
    cv_tensor *qkv = layer_t(m, P, "self_attention.query_key_value.weight", hd * (hp->n_head + 2 * hp->n_head_kv), E,
                             "attn_qkv.weight");
    qkv->layout = CV_FALCON_QKV;
    qkv->heads = hp->n_head;
    qkv->heads_kv = hp->n_head_kv;
    layer_t(m, P, "self_attention.dense.weight", E, E, "attn_output.weight");
    char src[128];
    snprintf(src, sizeof src, "%s.%u.ln_attn.weight", P, m->l);
    if (st_find(m->s, src) >= 0) {   /* new decoder architecture, named as llama.cpp names it */
        layer_t(m, P, "ln_mlp.weight", 0, E, "attn_norm.weight");
        layer_t(m, P, "ln_mlp.bias", 0, E, "attn_norm.bias");
        layer_t(m, P, "ln_attn.weight", 0, E, "attn_norm_2.weight");
        layer_t(m, P, "ln_attn.bias", 0, E, "attn_norm_2.bias");
    } else {
        layer_t(m, P, "input_layernorm.weight", 0, E, "attn_norm.weight");
        layer_t(m, P, "input_layernorm.bias", 0, E, "attn_norm.bias");
    }
    layer_t(m, P, "mlp.dense_h_to_4h.weight", F, E, "ffn_up.weight");
    down_t(m, P, "mlp.dense_4h_to_h.weight", NULL);
}

/* token_embd / output with tied embeddings stored either way: a tied
 * checkpoint may hold the embedding, lm_head, or both (the same values). */
static void map_embeddings(mapper *m, const char *embed)
{
    int64_t E = m->c->hp.n_embd, V = m->c->hp.n_vocab;
    int have_embed = st_find(m->s, embed) >= 0, have_head = st_find(m->s, "lm_head.weight") >= 0;
    if (m->c->tied && !have_embed && have_head) {
        emit(m->ts, m->s, m->wtype, "lm_head.weight", V, E, "token_embd.weight");
        return;
    }
    emit(m->ts, m->s, m->wtype, embed, V, E, "token_embd.weight");
    if (!m->c->tied) emit(m->ts, m->s, m->wtype, "lm_head.weight", V, E, "output.weight");
    else mark_used(m->s, "lm_head.weight");
}

static void map_globals(mapper *m)
{
    const hf_config *c = m->c;
    int64_t E = c->hp.n_embd;
    switch ((enum hf_family)c->family) {
    case HF_LLAMA: case HF_QWEN2: case HF_BAMBOO:
        map_embeddings(m, "model.embed_tokens.weight");
        emit(m->ts, m->s, m->wtype, "model.norm.weight", 0, E, "output_norm.weight");
        break;
    case HF_OPT: {
        map_embeddings(m, "model.decoder.embed_tokens.weight");
        emit(m->ts, m->s, m->wtype, "model.decoder.final_layer_norm.weight", 0, E, "output_norm.weight");
        emit(m->ts, m->s, m->wtype, "model.decoder.final_layer_norm.bias", 0, E, "output_norm.bias");
        /* OPT's table starts at position -2 (offset 2); position_embd row p is position p */
        int64_t n = c->hp.n_ctx;
        cv_tensor *pe = emit(m->ts, m->s, m->wtype, "model.decoder.embed_positions.weight", n + 2, E,
                             "position_embd.weight");
        pe->src = (const char *)pe->src + 2 * (size_t)E * ggml_type_size(pe->src_type);
        pe->ne[1] = n;
        break;
    }
    case HF_FALCON:
        map_embeddings(m, "transformer.word_embeddings.weight");
        emit(m->ts, m->s, m->wtype, "transformer.ln_f.weight", 0, E, "output_norm.weight");
        emit(m->ts, m->s, m->wtype, "transformer.ln_f.bias", 0, E, "output_norm.bias");
        break;
    }
    if (c->rope == HF_ROPE_LLAMA3) {
        cv_tensor *r = cv_add(m->ts, GGML_TYPE_F32, 1, c->hp.head_dim / 2, 1, "rope_freqs.weight");
        r->gen = gen_rope_factors;
        r->gen_ctx = c;
    }
}

/* PowerInfer predictors of layer l: fc1 [r, E] and fc2 [F, r]. */
static void map_predictor(mapper *m, st_set *pred, const char *pred_dir)
{
    int64_t E = m->c->hp.n_embd, F = m->c->hp.n_ff;
    char src[64], dst[GGUF_MAX_NAME + 1];
    snprintf(src, sizeof src, "%u.fc1.weight", m->l);
    long i = st_find(pred, src);
    int64_t r = i >= 0 && pred->t[i].n_dims == 2 ? pred->t[i].shape[0] : 0;
    if (r <= 0) hc_die("%s/model_%u.safetensors: no 2-D fc1.weight", pred_dir, m->l);
    snprintf(dst, sizeof dst, "blk.%u.fc1.weight", m->l);
    emit(m->ts, pred, m->wtype, src, r, E, dst);
    snprintf(src, sizeof src, "%u.fc2.weight", m->l);
    snprintf(dst, sizeof dst, "blk.%u.fc2.weight", m->l);
    emit(m->ts, pred, m->wtype, src, F, r, dst);
}

void hf_map_tensors(const hf_config *c, st_set *s, st_set *pred, const char *pred_dir, uint32_t wtype,
                    cv_tensors *ts)
{
    mapper m = { c, s, wtype, ts, 0, pred != NULL };
    map_globals(&m);
    for (m.l = 0; m.l < c->hp.n_layer; m.l++) {
        switch ((enum hf_family)c->family) {
        case HF_LLAMA: case HF_QWEN2: case HF_BAMBOO: map_llama_layer(&m); break;
        case HF_OPT: map_opt_layer(&m); break;
        case HF_FALCON: map_falcon_layer(&m); break;
        }
        if (pred) map_predictor(&m, pred, pred_dir);
    }
}

/* hc-convert hf: a Hugging Face LLaMA directory (config.json, safetensors,
 * tokenizer) -> llama GGUF; with --predictors, PowerInfer's sparse variant
 * ("PWRI" magic, blk.N.fc1/fc2 predictor tensors, ffn_down stored transposed as
 * ffn_down_t, powerinfer.sparse_threshold): docs/formats.md, "PowerInfer sparse
 * models (PWRI)".
 *
 * Q and K are permuted from HF's rotate-half layout back to GGUF's adjacent
 * pairs (docs/formats.md, "Tensors"); K with the KV head count. 2-D weights are stored
 * in --outtype, 1-D ones stay F32, as llama.cpp's converter does. */
#include "convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "ggml_types.h"

typedef struct {
    cv_hparams hp;
    float rope_theta;
    int relu, tied;
} hf_config;

static cJSON *read_json(const char *path)
{
    char err[512];
    size_t len;
    char *txt = hc_read_file(path, &len, err, sizeof err);
    if (!txt) hc_die("%s", err);
    cJSON *j = cJSON_ParseWithLength(txt, len);
    free(txt);
    if (!cJSON_IsObject(j)) hc_die("%s: JSON does not parse (or is not an object)", path);
    return j;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* config.json field as a positive 32-bit count; def 0 means required. */
static uint32_t cfg_u32(const cJSON *cfg, const char *path, const char *key, uint32_t def)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsArray(j)) j = cJSON_GetArrayItem(j, 0);      /* eos_token_id may be a list */
    if (!j || cJSON_IsNull(j)) {
        if (!def) hc_die("%s: missing \"%s\"", path, key);
        return def;
    }
    double d = cJSON_IsNumber(j) ? j->valuedouble : -1;
    if (!(d >= 0 && d <= 4294967295.0) || d != (double)(uint32_t)d)
        hc_die("%s: \"%s\" is not a non-negative integer", path, key);
    return (uint32_t)d;
}

static double cfg_num(const cJSON *cfg, const char *path, const char *key, double def)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!j || cJSON_IsNull(j)) return def;
    if (!cJSON_IsNumber(j)) hc_die("%s: \"%s\" is not a number", path, key);
    return j->valuedouble;
}

static void read_config(const char *dir, hf_config *c)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    cJSON *cfg = read_json(path);

    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(cfg, "architectures");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(cfg, "model_type");
    const char *arch = cJSON_IsArray(archs) && cJSON_IsString(archs->child) ? archs->child->valuestring
                       : cJSON_IsString(mt) ? mt->valuestring : "(none)";
    if (strcmp(arch, "LlamaForCausalLM") && strcmp(arch, "llama"))
        hc_die("%s: unsupported architecture '%s' (only LlamaForCausalLM)", path, arch);
    const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(cfg, "rope_scaling");
    if (scaling && !cJSON_IsNull(scaling)) hc_die("%s: rope_scaling is not supported", path);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "attention_bias")) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "mlp_bias")))
        hc_die("%s: bias tensors (attention_bias/mlp_bias) are not supported", path);
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(cfg, "hidden_act");
    const char *a = cJSON_IsString(act) ? act->valuestring : "silu";
    if (strcmp(a, "silu") && strcmp(a, "relu"))
        hc_die("%s: unsupported hidden_act '%s' (silu or relu)", path, a);
    c->relu = !strcmp(a, "relu");
    c->tied = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "tie_word_embeddings"));

    cv_hparams *hp = &c->hp;
    hp->n_embd = cfg_u32(cfg, path, "hidden_size", 0);
    hp->n_ff = cfg_u32(cfg, path, "intermediate_size", 0);
    hp->n_layer = cfg_u32(cfg, path, "num_hidden_layers", 0);
    hp->n_head = cfg_u32(cfg, path, "num_attention_heads", 0);
    hp->n_head_kv = cfg_u32(cfg, path, "num_key_value_heads", hp->n_head);
    hp->n_vocab = cfg_u32(cfg, path, "vocab_size", 0);
    hp->n_ctx = cfg_u32(cfg, path, "max_position_embeddings", 2048);
    hp->bos_id = cfg_u32(cfg, path, "bos_token_id", 1);
    hp->eos_id = cfg_u32(cfg, path, "eos_token_id", 2);
    hp->pad_id = cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(cfg, "pad_token_id"))
                 ? cfg_u32(cfg, path, "pad_token_id", 1) : UINT32_MAX;
    hp->eps = (float)cfg_num(cfg, path, "rms_norm_eps", 1e-6);    /* HF LlamaConfig default */
    c->rope_theta = (float)cfg_num(cfg, path, "rope_theta", 10000.0);
    uint32_t head_dim = cfg_u32(cfg, path, "head_dim", hp->n_head ? hp->n_embd / hp->n_head : 1);
    if (hp->n_head && head_dim != hp->n_embd / hp->n_head)
        hc_die("%s: head_dim %u != hidden_size / num_attention_heads", path, head_dim);
    if (hp->n_embd > (1u << 20) || hp->n_ff > (1u << 22) || hp->n_layer > 4096 || hp->n_vocab > (1u << 24))
        hc_die("%s: implausible sizes", path);
    cJSON_Delete(cfg);
}

/* The safetensors of a model directory: model.safetensors, or the shards that
 * model.safetensors.index.json's weight_map names (each must hold its tensors). */
static void open_weights(const char *dir, st_set *s)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (exists(path)) {
        if (st_add_file(s, path, err, sizeof err)) hc_die("%s", err);
        return;
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (!exists(path))
        hc_die("%s: no model.safetensors or model.safetensors.index.json (only safetensors is read)", dir);
    cJSON *ix = read_json(path);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(ix, "weight_map");
    if (!cJSON_IsObject(map) || !map->child) hc_die("%s: no weight_map", path);
    for (const cJSON *e = map->child; e; e = e->next) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/') || !e->valuestring[0])
            hc_die("%s: weight_map['%s'] is not a file name in %s", path, e->string, dir);
        char shard[4096];
        snprintf(shard, sizeof shard, "%s/%s", dir, e->valuestring);
        size_t f = 0;
        while (f < s->n_files && strcmp(s->paths[f], shard)) f++;
        if (f == s->n_files && st_add_file(s, shard, err, sizeof err)) hc_die("%s", err);
        long t = st_find(s, e->string);
        if (t < 0 || s->t[t].file != f)
            hc_die("%s: tensor '%s' is not in %s", path, e->string, e->valuestring);
    }
    cJSON_Delete(ix);
}

/* The tensor `name` of set s with the given PyTorch shape, as a converter source. */
static const st_tensor *take(st_set *s, const char *name, uint32_t n_dims, int64_t d0, int64_t d1)
{
    long i = st_find(s, name);
    if (i < 0) hc_die("%s: missing tensor '%s'", s->where, name);
    st_tensor *t = &s->t[i];
    const char *file = s->paths[t->file];
    if (t->type == UINT32_MAX) hc_die("%s: tensor '%s': unsupported dtype %s (F32, F16 or BF16)", file, name, t->dtype);
    if (t->n_dims != n_dims || t->shape[0] != d0 || (n_dims == 2 && t->shape[1] != d1))
        hc_die("%s: tensor '%s' has shape [%lld%s%lld], expected [%lld%s%lld]", file, name,
               (long long)t->shape[0], t->n_dims > 1 ? ", " : "", t->n_dims > 1 ? (long long)t->shape[1] : 0LL,
               (long long)d0, n_dims > 1 ? ", " : "", n_dims > 1 ? (long long)d1 : 0LL);
    t->used = 1;
    return t;
}

/* Add output tensor `name` from HF tensor `src` (shape [rows, cols] or [cols]). */
static cv_tensor *emit(cv_tensors *ts, st_set *s, uint32_t wtype, const char *src, int64_t rows,
                       int64_t cols, const char *name)
{
    const st_tensor *t = take(s, src, rows ? 2 : 1, rows ? rows : cols, cols);
    cv_tensor *o = cv_add(ts, rows ? wtype : GGML_TYPE_F32, rows ? 2 : 1, cols, rows, "%s", name);
    o->src = t->data;
    o->src_type = t->type;
    return o;
}

/* PowerInfer predictors: DIR/model_N.safetensors with fc1.weight [r, n_embd]
 * and fc2.weight [n_ff, r] for each layer; DIR/config.json may give
 * sparse_threshold. Returns 1 and sets *thr when the threshold is given. */
static int open_predictors(const char *dir, const cv_hparams *hp, st_set *pred, float *thr)
{
    char path[4096], err[512];
    for (uint32_t l = 0; l <= hp->n_layer; l++) {
        snprintf(path, sizeof path, "%s/model_%u.safetensors", dir, l);
        if (l == hp->n_layer) {
            if (exists(path)) hc_die("%s: more predictor files than the model's %u layers", dir, hp->n_layer);
            break;
        }
        if (!exists(path)) {
            snprintf(path, sizeof path, "%s/model_%u.pt", dir, l);
            if (exists(path))
                hc_die("%s: PyTorch pickle predictors are not read; convert them to "
                       "model_%u.safetensors (see the hc-convert documentation)", path, l);
            hc_die("%s: missing model_%u.safetensors (one predictor per layer)", dir, l);
        }
        size_t first = pred->n;
        if (st_add_file(pred, path, err, sizeof err)) hc_die("%s", err);
        /* prefix this layer's names so that one set holds every layer */
        for (size_t i = first; i < pred->n; i++) {
            char *n = malloc(strlen(pred->t[i].name) + 16);
            if (!n) hc_die("out of memory");
            sprintf(n, "%u.%s", l, pred->t[i].name);
            free(pred->t[i].name);
            pred->t[i].name = n;
        }
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!exists(path)) return 0;
    cJSON *cfg = read_json(path);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, "sparse_threshold");
    int have = t != NULL;
    if (have && !cJSON_IsNumber(t)) hc_die("%s: sparse_threshold is not a number", path);
    if (have) *thr = (float)t->valuedouble;
    cJSON_Delete(cfg);
    return have;
}

/* general.name: the directory's last component. */
static void dir_name(const char *dir, char *name, size_t len)
{
    snprintf(name, len, "%s", dir);
    for (size_t n = strlen(name); n > 1 && name[n - 1] == '/'; n--) name[n - 1] = 0;
    const char *slash = strrchr(name, '/');
    if (slash && slash[1]) memmove(name, slash + 1, strlen(slash));
}

/* Mark an HF tensor the converter skips (recomputed or shared) as used. */
static void skip(st_set *s, const char *name)
{
    long i = st_find(s, name);
    if (i >= 0) s->t[i].used = 1;
}

/* Layer l's tensors, in llama.cpp's order; with predictors, ffn_down is
 * stored transposed (ffn_down_t) and the layer's fc1/fc2 follow. */
static void layer_tensors(cv_tensors *ts, st_set *s, st_set *pred, const cv_hf_opts *o, const cv_hparams *hp,
                          uint32_t l)
{
    const int64_t E = hp->n_embd, F = hp->n_ff;
    const int64_t hd = E / hp->n_head, Q = hd * hp->n_head, K = hd * hp->n_head_kv;
    const uint32_t wtype = o->type;
    char src[128], dst[GGUF_MAX_NAME + 1];
#define HF(what, rows, cols, gguf)                                                   \
    (snprintf(src, sizeof src, "model.layers.%u.%s.weight", l, what),               \
     snprintf(dst, sizeof dst, "blk.%u.%s.weight", l, gguf),                         \
     emit(ts, s, wtype, src, rows, cols, dst))
    cv_tensor *q = HF("self_attn.q_proj", Q, E, "attn_q");
    q->layout = CV_PERMUTE;
    q->heads = hp->n_head;
    cv_tensor *k = HF("self_attn.k_proj", K, E, "attn_k");
    k->layout = CV_PERMUTE;
    k->heads = hp->n_head_kv;
    HF("self_attn.v_proj", K, E, "attn_v");
    HF("self_attn.o_proj", E, Q, "attn_output");
    HF("input_layernorm", 0, E, "attn_norm");
    HF("mlp.gate_proj", F, E, "ffn_gate");
    if (o->predictors) {
        /* ffn_down_t: row j = column j of down_proj [E, F], i.e. ne {E, F} */
        cv_tensor *d = HF("mlp.down_proj", E, F, "ffn_down_t");
        d->layout = CV_TRANSPOSE;
        d->ne[0] = E;
        d->ne[1] = F;
    } else {
        HF("mlp.down_proj", E, F, "ffn_down");
    }
    HF("mlp.up_proj", F, E, "ffn_up");
    HF("post_attention_layernorm", 0, E, "ffn_norm");
#undef HF
    snprintf(src, sizeof src, "model.layers.%u.self_attn.rotary_emb.inv_freq", l);
    skip(s, src);                     /* recomputed by the runtime */
    if (!o->predictors) return;
    snprintf(src, sizeof src, "%u.fc1.weight", l);
    long i = st_find(pred, src);
    int64_t r = i >= 0 && pred->t[i].n_dims == 2 ? pred->t[i].shape[0] : 0;
    if (r <= 0) hc_die("%s/model_%u.safetensors: no 2-D fc1.weight", o->predictors, l);
    snprintf(dst, sizeof dst, "blk.%u.fc1.weight", l);
    emit(ts, pred, wtype, src, r, E, dst);
    snprintf(src, sizeof src, "%u.fc2.weight", l);
    snprintf(dst, sizeof dst, "blk.%u.fc2.weight", l);
    emit(ts, pred, wtype, src, F, r, dst);
}

/* Every tensor of the output; then every input tensor must have been used. */
static void hf_tensors(cv_tensors *ts, st_set *s, st_set *pred, const cv_hf_opts *o, const hf_config *cfg)
{
    const cv_hparams *hp = &cfg->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab;
    emit(ts, s, o->type, "model.embed_tokens.weight", V, E, "token_embd.weight");
    emit(ts, s, o->type, "model.norm.weight", 0, E, "output_norm.weight");
    if (!cfg->tied) emit(ts, s, o->type, "lm_head.weight", V, E, "output.weight");
    else skip(s, "lm_head.weight");
    for (uint32_t l = 0; l < hp->n_layer; l++) layer_tensors(ts, s, pred, o, hp, l);
    for (size_t i = 0; i < s->n; i++)
        if (!s->t[i].used)
            hc_die("%s: unexpected tensor '%s' (not part of a LLaMA model)", s->paths[s->t[i].file], s->t[i].name);
    for (size_t i = 0; i < pred->n; i++)
        if (!pred->t[i].used)
            hc_die("%s: unexpected tensor '%s' (a predictor has fc1.weight and fc2.weight)",
                   pred->paths[pred->t[i].file], strchr(pred->t[i].name, '.') + 1);
}

int cv_convert_hf(const cv_hf_opts *o, char *err, size_t errlen)
{
    const char *dir = o->dir;
    hf_config cfg = {0};
    read_config(dir, &cfg);
    cv_hparams *hp = &cfg.hp;
    char name[256];
    dir_name(dir, name, sizeof name);
    hp->name = name;
    if (o->predictors && !cfg.relu)
        hc_die("%s/config.json: --predictors needs a ReLU model (hidden_act is silu): "
               "PowerInfer's sparse FFN skips neurons whose ReLU output is zero", dir);

    cv_vocab v;
    char why[512];
    if (cv_hf_vocab(dir, hp->n_vocab, &v, &hp->unk_id, err, errlen)) {
        cv_vocab_free(&v);
        return -1;
    }
    if (v.bos_id >= 0) hp->bos_id = (uint32_t)v.bos_id;      /* the token the post-processor adds */
    if (cv_check_hparams(hp, why, sizeof why)) {
        snprintf(err, errlen, "%s/config.json: %s", dir, why);
        cv_vocab_free(&v);
        return -1;
    }

    st_set s = {.where = dir}, pred = {.where = o->predictors};
    open_weights(dir, &s);
    float thr = 0.0f;
    int have_thr = o->predictors ? open_predictors(o->predictors, hp, &pred, &thr) : 0;
    cv_tensors ts = {0};
    hf_tensors(&ts, &s, &pred, o, &cfg);

    gguf_writer *w = gguf_writer_new(o->predictors ? GGUF_VARIANT_PWRI : GGUF_VARIANT_GGUF);
    cv_set_llama_kvs(w, hp, &v);
    gguf_set_f32(w, "llama.rope.freq_base", cfg.rope_theta);
    gguf_set_u32(w, "general.file_type", o->type == GGML_TYPE_F32 ? 0 : o->type == GGML_TYPE_F16 ? 1 : 32);
    gguf_set_str(w, "hotcold.ffn_activation", cfg.relu ? "relu" : "silu");
    if (have_thr) gguf_set_f32(w, "powerinfer.sparse_threshold", thr);
    int rc = cv_write(w, &ts, o->out, err, errlen);
    gguf_writer_free(w);
    cv_tensors_free(&ts);
    st_free(&s);
    st_free(&pred);
    cv_vocab_free(&v);
    return rc;
}

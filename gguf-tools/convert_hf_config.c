/* hc-convert hf: config.json -> hf_config. The family comes from
 * architectures[0] (else model_type); each key that changes the math is
 * either carried into the GGUF or refused with one line naming it and its
 * value, never ignored (docs/hc-convert.md, "Families"). */
#include "convert_hf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"

static const struct {
    const char *cls, *model_type, *arch;
    int family;
} families[] = {
    { "LlamaForCausalLM", "llama", "llama", HF_LLAMA },
    { "SparseLlamaForCausalLM", "sparsellama", "llama", HF_LLAMA },   /* ProSparse (FATReLU) */
    { "MistralForCausalLM", "mistral", "llama", HF_LLAMA },     /* llama.cpp writes Mistral as llama */
    { "Qwen2ForCausalLM", "qwen2", "qwen2", HF_QWEN2 },
    { "BambooForCausalLM", "bamboo", "bamboo", HF_BAMBOO },    /* PowerInfer's architecture */
    { "OPTForCausalLM", "opt", "opt", HF_OPT },
    { "FalconForCausalLM", "falcon", "falcon", HF_FALCON },
};

typedef struct {
    const cJSON *cfg;
    const char *path;
} cfgref;

/* obj's member key; of a key given twice, the last (Python's json.load,
 * so transformers, keeps the last; cJSON's lookup finds the first). */
static const cJSON *member(const cJSON *obj, const char *key)
{
    const cJSON *last = NULL;
    for (const cJSON *e = cJSON_IsObject(obj) ? obj->child : NULL; e; e = e->next)
        if (e->string && !strcmp(e->string, key)) last = e;
    return last;
}

static const cJSON *item(const cfgref *c, const char *key)
{
    const cJSON *j = member(c->cfg, key);
    return j && !cJSON_IsNull(j) ? j : NULL;
}

/* A field as a non-negative 32-bit integer; def 0 means required. */
static uint32_t cfg_u32(const cfgref *c, const char *key, uint32_t def)
{
    const cJSON *j = item(c, key);
    if (cJSON_IsArray(j) && !strcmp(key, "eos_token_id")) j = cJSON_GetArrayItem(j, 0);   /* may be a list */
    if (!j) {
        if (!def) hc_die("%s: missing \"%s\"", c->path, key);
        return def;
    }
    uint64_t u;
    if (!hc_json_index(j, (uint64_t)UINT32_MAX + 1, &u))
        hc_die("%s: \"%s\" is not a non-negative integer", c->path, key);
    return (uint32_t)u;
}

static double num_of(const cfgref *c, const cJSON *obj, const char *key, double def)
{
    const cJSON *j = member(obj, key);
    if (!j || cJSON_IsNull(j)) return def;
    if (!cJSON_IsNumber(j)) hc_die("%s: \"%s\" is not a number", c->path, key);
    return j->valuedouble;
}

static double cfg_num(const cfgref *c, const char *key, double def) { return num_of(c, c->cfg, key, def); }

static int cfg_bool(const cfgref *c, const char *key, int def)
{
    const cJSON *j = item(c, key);
    if (!j) return def;
    if (!cJSON_IsBool(j)) hc_die("%s: \"%s\" is not true or false", c->path, key);
    return cJSON_IsTrue(j);
}

static const char *cfg_str(const cfgref *c, const char *key, const char *def)
{
    const cJSON *j = item(c, key);
    if (!j) return def;
    if (!cJSON_IsString(j)) hc_die("%s: \"%s\" is not a string", c->path, key);
    return j->valuestring;
}

/* Keys of other model families that change the math; present here, they
 * would be silently ignored, so any value but "off" is refused. */
static void refuse_foreign(const cfgref *c)
{
    static const char *const off[] = {
        "attn_logit_softcapping", "final_logit_softcapping", "logit_scale", "embedding_multiplier",
        "residual_multiplier", "attention_multiplier", "logits_scaling",
        "qk_layernorm", "use_qk_norm", "clip_qkv", "alibi", "use_parallel_residual", "moe_intermediate_size",
        "num_local_experts", "num_experts",
    };
    for (size_t i = 0; i < sizeof off / sizeof *off; i++) {
        const cJSON *j = item(c, off[i]);
        if (!j || cJSON_IsFalse(j) || (cJSON_IsNumber(j) && j->valuedouble == 0)) continue;
        char *v = cJSON_PrintUnformatted(j);
        hc_die("%s: \"%s\": %s is not supported", c->path, off[i], v ? v : "?");
    }
    double prf = cfg_num(c, "partial_rotary_factor", 1.0);
    if (prf != 1.0) hc_die("%s: \"partial_rotary_factor\": %g is not supported (partial rotary)", c->path, prf);
    const cJSON *lt = item(c, "layer_types");
    for (const cJSON *e = lt ? lt->child : NULL; e; e = e->next)
        if (!cJSON_IsString(e) || strcmp(e->valuestring, "full_attention"))
            hc_die("%s: \"layer_types\": '%s' is not supported (only full_attention)", c->path,
                   cJSON_IsString(e) ? e->valuestring : "?");
}

/* rope_theta and rope scaling: transformers 5's rope_parameters, or the
 * older rope_theta + rope_scaling. Types default, linear and llama3. */
static void read_rope(const cfgref *c, hf_config *h)
{
    const cJSON *rp = item(c, "rope_parameters");
    const cJSON *sc = rp ? rp : item(c, "rope_scaling");
    h->rope_theta = (float)cfg_num(c, "rope_theta", 10000.0);
    if (rp) h->rope_theta = (float)num_of(c, rp, "rope_theta", h->rope_theta);
    if (!(h->rope_theta > 0 && isfinite(h->rope_theta)))
        hc_die("%s: \"rope_theta\": %g is not a positive number", c->path, h->rope_theta);
    if (!sc) return;
    if (!cJSON_IsObject(sc)) hc_die("%s: \"%s\" is not an object", c->path, rp ? "rope_parameters" : "rope_scaling");
    const cJSON *t = member(sc, "rope_type");
    if (!t || cJSON_IsNull(t)) t = member(sc, "type");
    const char *key = rp ? "rope_parameters.rope_type" : "rope_scaling.type";
    h->rope_factor = (float)num_of(c, sc, "factor", 1.0);
    /* no type says "default": a factor would be dropped without a word */
    if (!cJSON_IsString(t) && h->rope_factor != 1.0f)
        hc_die("%s: \"%s\" is missing or not a string, but the factor is %g", c->path, key, h->rope_factor);
    const char *type = cJSON_IsString(t) ? t->valuestring : "default";
    if (!strcmp(type, "default")) {
        h->rope = HF_ROPE_NONE;
    } else if (!strcmp(type, "linear")) {
        h->rope = HF_ROPE_LINEAR;
    } else if (!strcmp(type, "llama3")) {
        h->rope = HF_ROPE_LLAMA3;
        h->low_freq = (float)num_of(c, sc, "low_freq_factor", 1.0);
        h->high_freq = (float)num_of(c, sc, "high_freq_factor", 4.0);
        double o = num_of(c, sc, "original_max_position_embeddings", 8192);
        if (!(o >= 1 && o < 1e9) || !(h->high_freq > h->low_freq))
            hc_die("%s: %s llama3 has original_max_position_embeddings %g, low/high_freq_factor %g/%g", c->path,
                   key, o, h->low_freq, h->high_freq);
        h->rope_orig_ctx = (uint32_t)o;
    } else {
        hc_die("%s: \"%s\": '%s' is not supported (default, linear, llama3)", c->path, key, type);
    }
    if (h->rope != HF_ROPE_NONE && !(h->rope_factor > 0 && isfinite(h->rope_factor)))
        hc_die("%s: rope scaling factor %g is not positive", c->path, h->rope_factor);
}

/* LLaMA, Mistral, Qwen2, Bamboo: the LlamaConfig keys. */
static void read_llama_like(const cfgref *c, hf_config *h)
{
    cv_hparams *hp = &h->hp;
    if (cfg_bool(c, "attention_bias", 0) || cfg_bool(c, "mlp_bias", 0))
        hc_die("%s: \"attention_bias\"/\"mlp_bias\": true is not supported for %s", c->path, hp->arch);
    h->act = cfg_str(c, "hidden_act", "silu");
    double t = cfg_num(c, "hidden_act_param", 0);
    if (!strcmp(h->act, "fatrelu")) {   /* ProSparse: x >= t ? x : 0 */
        if (!(t >= 0 && t < 1e6)) hc_die("%s: \"hidden_act_param\": %g is not a FATReLU threshold", c->path, t);
        h->act = "relu";
        h->act_threshold = (float)t;
    } else if (t != 0) {
        hc_die("%s: \"hidden_act_param\": %g is not supported with hidden_act '%s'", c->path, t, h->act);
    }
    if (strcmp(h->act, "silu") && strcmp(h->act, "relu"))
        hc_die("%s: \"hidden_act\": '%s' is not supported (silu, relu or fatrelu)", c->path, h->act);
    hp->n_ff = cfg_u32(c, "intermediate_size", 0);
    hp->n_head_kv = cfg_u32(c, "num_key_value_heads", hp->n_head);
    hp->eps = (float)cfg_num(c, "rms_norm_eps", 1e-6);    /* HF LlamaConfig default */
    hp->head_dim = cfg_u32(c, "head_dim", hp->n_head && hp->n_embd % hp->n_head == 0 ? hp->n_embd / hp->n_head : 0);
    if (hp->head_dim == 0) hc_die("%s: \"head_dim\" is missing or 0", c->path);
    uint32_t sw = cfg_u32(c, "sliding_window", UINT32_MAX);
    if (h->family == HF_QWEN2 && cfg_bool(c, "use_sliding_window", 0))
        hc_die("%s: \"use_sliding_window\": true is not supported", c->path);
    if (h->family != HF_QWEN2 && sw < hp->n_ctx) h->sliding_window = sw;
    read_rope(c, h);
}

/* OPT: pre-LayerNorm decoders with biases and learned positions only. */
static void read_opt(const cfgref *c, hf_config *h)
{
    cv_hparams *hp = &h->hp;
    h->act = cfg_str(c, "activation_function", "relu");
    if (strcmp(h->act, "relu")) hc_die("%s: \"activation_function\": '%s' is not supported (relu)", c->path, h->act);
    if (!cfg_bool(c, "do_layer_norm_before", 1))
        hc_die("%s: \"do_layer_norm_before\": false (post-norm OPT-350m) is not supported", c->path);
    if (cfg_bool(c, "_remove_final_layer_norm", 0))
        hc_die("%s: \"_remove_final_layer_norm\": true is not supported", c->path);
    if (!cfg_bool(c, "layer_norm_elementwise_affine", 1))
        hc_die("%s: \"layer_norm_elementwise_affine\": false is not supported", c->path);
    uint32_t proj = cfg_u32(c, "word_embed_proj_dim", hp->n_embd);
    if (proj != hp->n_embd)
        hc_die("%s: \"word_embed_proj_dim\": %u differs from hidden_size %u (project_in/project_out are not "
               "supported)", c->path, proj, hp->n_embd);
    hp->n_ff = cfg_u32(c, "ffn_dim", 0);
    hp->n_head_kv = hp->n_head;
    hp->eps = 1e-5f;                                        /* nn.LayerNorm's default, as OPT uses it */
    hp->layer_norm = 1;
    hp->no_rope = 1;
    if (!cfg_bool(c, "enable_bias", 1)) hc_die("%s: \"enable_bias\": false is not supported", c->path);
}

/* Falcon: parallel attention + MLP; new decoder architecture (GQA, two norms)
 * or Falcon-7B style (multi-query, one norm). */
static void read_falcon(const cfgref *c, hf_config *h)
{
    cv_hparams *hp = &h->hp;
    if (!cfg_bool(c, "parallel_attn", 1))
        hc_die("%s: \"parallel_attn\": false (sequential Falcon) is not supported", c->path);
    h->act = cfg_str(c, "activation", "gelu");
    if (strcmp(h->act, "gelu") && strcmp(h->act, "relu"))
        hc_die("%s: \"activation\": '%s' is not supported (gelu or relu)", c->path, h->act);
    int new_arch = cfg_bool(c, "new_decoder_architecture", 0);
    if (new_arch) {
        hp->n_head_kv = cfg_u32(c, "num_kv_heads", hp->n_head);
        uint32_t nln = cfg_u32(c, "num_ln_in_parallel_attn", 2);
        if (nln != 2) hc_die("%s: \"num_ln_in_parallel_attn\": %u is not supported (2)", c->path, nln);
    } else if (cfg_bool(c, "multi_query", 1)) {
        hp->n_head_kv = 1;
    } else {
        hc_die("%s: \"multi_query\": false without new_decoder_architecture is not supported", c->path);
    }
    hp->n_ff = cfg_u32(c, "ffn_hidden_size", 4 * hp->n_embd);
    hp->eps = (float)cfg_num(c, "layer_norm_epsilon", 1e-5);
    hp->layer_norm = 1;
    if (cfg_bool(c, "bias", 0)) hc_die("%s: \"bias\": true is not supported for Falcon", c->path);
    read_rope(c, h);
}

static void pick_family(const cfgref *c, hf_config *h)
{
    const cJSON *archs = item(c, "architectures");
    const char *cls = cJSON_IsArray(archs) && cJSON_IsString(archs->child) ? archs->child->valuestring : NULL;
    const char *mt = cfg_str(c, "model_type", NULL);
    for (size_t i = 0; i < sizeof families / sizeof *families; i++)
        if (cls ? !strcmp(cls, families[i].cls) : mt && !strcmp(mt, families[i].model_type)) {
            h->family = families[i].family;
            h->hp.arch = families[i].arch;
            return;
        }
    hc_die("%s: unsupported architecture '%s' (Llama, Mistral, Qwen2, Bamboo, OPT, Falcon)", c->path,
           cls ? cls : mt ? mt : "(none)");
}

void hf_read_config(const char *dir, hf_config *h)
{
    char path[4096], err[1024];
    if (hc_path(path, sizeof path, err, sizeof err, "%s/config.json", dir)) hc_die("%s", err);
    cJSON *json = hc_read_json(path, HF_MAX_CONFIG_JSON, err, sizeof err);
    if (!json) hc_die("%s", err);
    cfgref c = { json, path };
    pick_family(&c, h);
    refuse_foreign(&c);
    h->tied = cfg_bool(&c, "tie_word_embeddings", h->family == HF_OPT || h->family == HF_FALCON);

    cv_hparams *hp = &h->hp;
    hp->n_embd = cfg_u32(&c, "hidden_size", 0);
    hp->n_layer = cfg_u32(&c, "num_hidden_layers", 0);
    hp->n_head = cfg_u32(&c, "num_attention_heads", 0);
    hp->n_vocab = cfg_u32(&c, "vocab_size", 0);
    hp->n_ctx = cfg_u32(&c, "max_position_embeddings", 2048);
    hp->bos_id = cfg_u32(&c, "bos_token_id", 1);
    hp->eos_id = cfg_u32(&c, "eos_token_id", 2);
    hp->pad_id = cJSON_IsNumber(item(&c, "pad_token_id")) ? cfg_u32(&c, "pad_token_id", 1) : UINT32_MAX;
    switch ((enum hf_family)h->family) {
    case HF_LLAMA: case HF_QWEN2: case HF_BAMBOO: read_llama_like(&c, h); break;
    case HF_OPT: read_opt(&c, h); break;
    case HF_FALCON: read_falcon(&c, h); break;
    }
    h->act = !strcmp(h->act, "relu") ? "relu" : !strcmp(h->act, "gelu") ? "gelu" : "silu";  /* outlive json */
    if (hp->n_embd > (1u << 20) || hp->n_ff > (1u << 22) || hp->n_layer > 4096 || hp->n_vocab > (1u << 24) ||
        hp->head_dim > (1u << 16))
        hc_die("%s: implausible sizes", path);
    cJSON_Delete(json);
}

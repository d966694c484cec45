/* hc-convert hf: a Hugging Face checkpoint directory (config.json,
 * safetensors, tokenizer) of a supported family (convert_hf_config.c) ->
 * GGUF (convert_hf_tensors.c names its tensors); with --predictors, PowerInfer's sparse variant
 * ("PWRI" magic, blk.N.fc1/fc2 predictor tensors, ffn_down stored transposed as
 * ffn_down_t, powerinfer.sparse_threshold): docs/formats.md, "PowerInfer sparse
 * models (PWRI)".
 */
#include "convert_hf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "ggml_types.h"

static cJSON *read_json(const char *path)
{
    char err[1024];
    cJSON *j = hc_read_json(path, HF_MAX_INDEX_JSON, err, sizeof err);
    if (!j) hc_die("%s", err);
    return j;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The safetensors of a model directory: model.safetensors, or the shards that
 * model.safetensors.index.json's weight_map names (each must hold its tensors). */
static void open_weights(const char *dir, st_set *s)
{
    char path[4096], err[512];
    if (hc_path(path, sizeof path, err, sizeof err, "%s/model.safetensors", dir)) hc_die("%s", err);
    if (exists(path)) {
        if (st_add_file(s, path, "", err, sizeof err)) hc_die("%s", err);
        return;
    }
    if (hc_path(path, sizeof path, err, sizeof err, "%s/model.safetensors.index.json", dir)) hc_die("%s", err);
    if (!exists(path))
        hc_die("%s: no model.safetensors or model.safetensors.index.json (only safetensors is read)", dir);
    cJSON *ix = read_json(path);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(ix, "weight_map");
    if (!cJSON_IsObject(map) || !map->child) hc_die("%s: no weight_map", path);
    for (const cJSON *e = map->child; e; e = e->next) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/') || !e->valuestring[0])
            hc_die("%s: weight_map['%s'] is not a file name in %s", path, e->string, dir);
        char shard[4096];
        if (hc_path(shard, sizeof shard, err, sizeof err, "%s/%s", dir, e->valuestring)) hc_die("%s", err);
        size_t f = 0;
        while (f < s->n_files && strcmp(s->paths[f], shard)) f++;
        if (f == s->n_files && st_add_file(s, shard, "", err, sizeof err)) hc_die("%s", err);
        long t = st_find(s, e->string);
        if (t < 0 || s->t[t].file != f)
            hc_die("%s: tensor '%s' is not in %s", path, e->string, e->valuestring);
    }
    cJSON_Delete(ix);
}

/* PowerInfer predictors: DIR/model_N.safetensors with fc1.weight [r, n_embd]
 * and fc2.weight [n_ff, r] for each layer; DIR/config.json may give
 * sparse_threshold. Returns 1 and sets *thr when the threshold is given. */
static int open_predictors(const char *dir, const cv_hparams *hp, st_set *pred, float *thr)
{
    char path[4096], err[512];
    for (uint32_t l = 0; l <= hp->n_layer; l++) {
        if (hc_path(path, sizeof path, err, sizeof err, "%s/model_%u.safetensors", dir, l)) hc_die("%s", err);
        if (l == hp->n_layer) {
            if (exists(path)) hc_die("%s: more predictor files than the model's %u layers", dir, hp->n_layer);
            break;
        }
        if (!exists(path)) {
            if (hc_path(path, sizeof path, err, sizeof err, "%s/model_%u.pt", dir, l)) hc_die("%s", err);
            if (exists(path))
                hc_die("%s: PyTorch pickle predictors are not read; convert them to "
                       "model_%u.safetensors (see the hc-convert documentation)", path, l);
            hc_die("%s: missing model_%u.safetensors (one predictor per layer)", dir, l);
        }
        /* the layer prefixes the names so that one set holds every layer */
        char prefix[16];
        snprintf(prefix, sizeof prefix, "%u.", l);
        if (st_add_file(pred, path, prefix, err, sizeof err)) hc_die("%s", err);
    }
    if (hc_path(path, sizeof path, err, sizeof err, "%s/config.json", dir)) hc_die("%s", err);
    if (!exists(path)) return 0;
    cJSON *cfg = read_json(path);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, "sparse_threshold");
    int have = t != NULL;
    if (have && !(cJSON_IsNumber(t) && isfinite((float)t->valuedouble)))
        hc_die("%s: sparse_threshold is not a finite number", path);
    if (have) *thr = (float)t->valuedouble;
    cJSON_Delete(cfg);
    return have;
}

/* One line for each way the runtime a written file's format belongs to would
 * misrun it (docs/formats.md, "Which files run where"). */
static void warn_misrun(const hf_config *c, const char *out, int pwri, uint32_t wtype)
{
    if (!pwri && !strcmp(c->hp.arch, "llama") && strcmp(c->act, "silu"))
        hc_warn("%s: llama.cpp and PowerInfer run every dense llama file with SiLU (they ignore "
                "hotcold.ffn_activation = %s): there this is a different model; without --llama-arch it is "
                "written as llama-relu, which they refuse, and PowerInfer's sparse file (--predictors) runs it as "
                "ReLU", out, c->act);
    if (pwri && wtype != GGML_TYPE_F16)
        hc_warn("%s: PowerInfer reads every ffn_down_t type but Q4_0 as F16 without a check, so it would print "
                "garbage with this %s file; --outtype f16 is the type it runs", out, ggml_type_name(wtype));
    if (c->sliding_window)
        hc_warn("%s: llama.cpp ignores %s.attention.sliding_window %u and attends to the whole context beyond it "
                "(hc-run refuses a longer context)", out, c->hp.arch, c->sliding_window);
}

/* The keys of a family beyond cv_set_llama_kvs: RoPE base and linear
 * scaling (llama3 scaling is the rope_freqs.weight tensor), sliding window. */
static void set_family_kvs(gguf_writer *w, const hf_config *c)
{
    char k[96];
    if (c->family != HF_OPT) {
        snprintf(k, sizeof k, "%s.rope.freq_base", c->hp.arch);
        gguf_set_f32(w, k, c->rope_theta);
    }
    if (c->rope == HF_ROPE_LINEAR) {
        snprintf(k, sizeof k, "%s.rope.scaling.type", c->hp.arch);
        gguf_set_str(w, k, "linear");
        snprintf(k, sizeof k, "%s.rope.scaling.factor", c->hp.arch);
        gguf_set_f32(w, k, c->rope_factor);
    }
    if (c->sliding_window) {
        snprintf(k, sizeof k, "%s.attention.sliding_window", c->hp.arch);
        gguf_set_u32(w, k, c->sliding_window);
    }
}

/* general.name: the directory's last component. */
static void dir_name(const char *dir, char *name, size_t len)
{
    snprintf(name, len, "%s", dir);
    for (size_t n = strlen(name); n > 1 && name[n - 1] == '/'; n--) name[n - 1] = 0;
    const char *slash = strrchr(name, '/');
    if (slash && slash[1]) memmove(name, slash + 1, strlen(slash));
}

/* Every source tensor of the checkpoint and the predictors must have been used. */
static void check_used(const st_set *s, const st_set *pred, const char *arch)
{
    for (size_t i = 0; i < s->n; i++)
        if (!s->t[i].used)
            hc_die("%s: unexpected tensor '%s' (not part of a %s model)", s->paths[s->t[i].file], s->t[i].name, arch);
    for (size_t i = 0; i < pred->n; i++)
        if (!pred->t[i].used)
            hc_die("%s: unexpected tensor '%s' (a predictor has fc1.weight and fc2.weight)",
                   pred->paths[pred->t[i].file], strchr(pred->t[i].name, '.') + 1);
}

int cv_convert_hf(const cv_hf_opts *o, char *err, size_t errlen)
{
    const char *dir = o->dir, *pred_dir = o->predictors, *out = o->out;
    const uint32_t wtype = o->type;
    hf_config cfg = {0};
    hf_read_config(dir, &cfg);
    cv_hparams *hp = &cfg.hp;
    char name[256], why[512];
    dir_name(dir, name, sizeof name);
    hp->name = name;
    /* a dense ReLU llama: "llama-relu" unless --llama-arch, since llama.cpp
     * and PowerInfer run every dense "llama" file with SiLU (docs/formats.md) */
    int relu_llama = cfg.family == HF_LLAMA && !strcmp(cfg.act, "relu");
    if ((o->relu_arch || o->llama_arch) && !relu_llama)
        hc_die("%s/config.json: --%s is for ReLU llama models (this is %s with %s)", dir,
               o->relu_arch ? "relu-arch" : "llama-arch", hp->arch, cfg.act);
    if (relu_llama && !pred_dir && !o->llama_arch) hp->arch = "llama-relu";
    if (pred_dir && strcmp(cfg.act, "relu"))
        hc_die("%s/config.json: --predictors needs a ReLU model (the activation is %s): "
               "PowerInfer's sparse FFN skips neurons whose ReLU output is zero", dir, cfg.act);

    cv_vocab v;
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

    st_set s = {.where = dir}, pred = {.where = pred_dir};
    open_weights(dir, &s);
    float thr = 0.0f;
    int have_thr = pred_dir ? open_predictors(pred_dir, hp, &pred, &thr) : 0;

    cv_tensors ts = {0};
    hf_map_tensors(&cfg, &s, pred_dir ? &pred : NULL, pred_dir, wtype, &ts);
    check_used(&s, &pred, hp->arch);

    gguf_writer *w = gguf_writer_new(pred_dir ? GGUF_VARIANT_PWRI : GGUF_VARIANT_GGUF);
    cv_set_llama_kvs(w, hp, &v);
    set_family_kvs(w, &cfg);
    gguf_set_u32(w, "general.file_type", wtype == GGML_TYPE_F32 ? 0 : wtype == GGML_TYPE_F16 ? 1 : 32);
    gguf_set_str(w, "hotcold.ffn_activation", cfg.act);
    if (have_thr) gguf_set_f32(w, "powerinfer.sparse_threshold", thr);
    if (cfg.act_threshold > 0) gguf_set_f32(w, "hotcold.ffn_act_threshold", cfg.act_threshold);
    int rc = cv_write(w, &ts, out, err, errlen);
    if (rc == 0) warn_misrun(&cfg, out, pred_dir != NULL, wtype);
    gguf_writer_free(w);
    cv_tensors_free(&ts);
    st_free(&s);
    st_free(&pred);
    cv_vocab_free(&v);
    return rc;
}

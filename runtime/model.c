/* Model loading: hyper-parameters as llama.cpp reads them, every tensor
 * checked for presence, shape and a supported type before anything runs. */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "ggml_types.h"
#include "kernels.h"
#include "kernels_gptq.h"

typedef struct {
    hc_model *m;
    char *err;
    size_t errlen;
    size_t n_norm;   /* vector floats handed out so far */
    const char *arch;   /* the family's architecture name, prefix of its keys */
    char key[96];       /* akey's result */
    unsigned char *used;   /* [n_tensors]: read by the loader (the rest is refused) */
} loader;

__attribute__((format(printf, 2, 3)))
static int fail(loader *L, const char *fmt, ...)
{
    int n = snprintf(L->err, L->errlen, "%s: ", L->m->path);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < L->errlen) vsnprintf(L->err + n, L->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static int key_error(loader *L, const char *key, int rc, const char *want)
{
    if (rc == -1) return fail(L, "missing key %s", key);
    int i = gguf_find_kv(L->m->file, key);
    return fail(L, "key %s has type %s, expected %s", key,
                gguf_vtype_name(L->m->file->kv[i].type), want);
}

/* A positive u32 hyper-parameter; *out untouched when optional and absent. */
static int get_dim(loader *L, const char *key, int required, int *out)
{
    uint32_t v;
    int rc = gguf_get_u32(L->m->file, key, &v);
    if (rc == -1 && !required) return 0;
    if (rc) return key_error(L, key, rc, "u32");
    if (v == 0 || v > (1u << 24)) return fail(L, "key %s = %u is out of range", key, v);
    *out = (int)v;
    return 0;
}

static int get_f32(loader *L, const char *key, int required, float *out)
{
    int rc = gguf_get_f32(L->m->file, key, out);
    if (rc == -1 && !required) return 0;
    return rc ? key_error(L, key, rc, "f32") : 0;
}

/* The tensor of that name, marked as read, or NULL. */
static const gguf_tensor *find_tensor(loader *L, const char *name)
{
    int i = gguf_find_tensor(L->m->file, name);
    if (i < 0) return NULL;
    L->used[i] = 1;
    return &L->m->file->tensors[i];
}

/* The model families (model.h, "Model families"): general.architecture and
 * the seam's values. A new family adds a row, and the compiler then names
 * every switch its new enum values must reach. Key names are ARCH.*. */
static const struct family {
    const char *arch;
    int norm, pos, ffn_kind, residual, act;
} families[] = {
    { "llama",  HC_NORM_RMS,   HC_POS_ROPE,      HC_FFN_GATED,      HC_RESIDUAL_SEQUENTIAL, HC_ACT_SILU },
    /* a dense ReLU llama that llama.cpp and PowerInfer refuse instead of running with SiLU */
    { "llama-relu", HC_NORM_RMS, HC_POS_ROPE,    HC_FFN_GATED,      HC_RESIDUAL_SEQUENTIAL, HC_ACT_RELU },
    { "qwen2",  HC_NORM_RMS,   HC_POS_ROPE_NEOX, HC_FFN_GATED,      HC_RESIDUAL_SEQUENTIAL, HC_ACT_SILU },
    { "bamboo", HC_NORM_RMS,   HC_POS_ROPE,      HC_FFN_SYMMETRIC,  HC_RESIDUAL_SEQUENTIAL, HC_ACT_RELU },
    { "opt",    HC_NORM_LAYER, HC_POS_LEARNED,   HC_FFN_SEQUENTIAL, HC_RESIDUAL_SEQUENTIAL, HC_ACT_RELU },
    { "falcon", HC_NORM_LAYER, HC_POS_ROPE_NEOX, HC_FFN_SEQUENTIAL, HC_RESIDUAL_PARALLEL,   HC_ACT_GELU },
};

/* "ARCH.suffix" for the model's architecture. */
static const char *akey(loader *L, const char *suffix)
{
    snprintf(L->key, sizeof L->key, "%s.%s", L->arch, suffix);
    return L->key;
}

static int load_family(loader *L)
{
    hc_hparams *hp = &L->m->hp;
    char *s = NULL;
    int rc = gguf_get_str(L->m->file, "general.architecture", &s);
    if (rc) return key_error(L, "general.architecture", rc, "string");
    const struct family *fam = NULL;
    for (size_t i = 0; i < sizeof families / sizeof *families; i++)
        if (strcmp(s, families[i].arch) == 0) fam = &families[i];
    if (!fam) fail(L, "unsupported architecture '%s' (hc-run runs llama, llama-relu, qwen2, bamboo, opt, falcon)", s);
    free(s);
    if (!fam) return -1;
    L->arch = fam->arch;
    hp->norm = fam->norm;
    hp->pos = fam->pos;
    hp->ffn_kind = fam->ffn_kind;
    hp->residual = fam->residual;
    hp->act = fam->act;
    return 0;
}

/* hotcold.ffn_activation, when present, overrides the family's activation. */
static int load_activation(loader *L)
{
    static const char *const names[] = { [HC_ACT_SILU] = "silu", [HC_ACT_RELU] = "relu", [HC_ACT_GELU] = "gelu" };
    char *s = NULL;
    int rc = gguf_get_str(L->m->file, "hotcold.ffn_activation", &s);
    if (rc == -1) return 0;
    if (rc) return key_error(L, "hotcold.ffn_activation", rc, "string");
    int act = -1;
    for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (strcmp(s, names[i]) == 0) act = i;
    if (act < 0) fail(L, "hotcold.ffn_activation '%s' is not relu, silu or gelu", s);
    free(s);
    if (act < 0) return -1;
    L->m->hp.act = act;
    return 0;
}

/* ARCH.rope.scaling.type: none or linear, any other type refused by name
 * rather than run unscaled; as llama.cpp reads them, the type defaults to
 * linear, the factor is rope.scaling.factor or the older rope.scale_linear,
 * and "none" scales nothing; an attention factor other than 1 (it scales q
 * and k) is refused. */
static int load_rope_scaling(loader *L)
{
    hc_hparams *hp = &L->m->hp;
    char *s = NULL;
    hp->rope_scale = 1.0f;
    hp->rope_scaling = HC_ROPE_SCALING_NONE;
    int rc = gguf_get_str(L->m->file, akey(L, "rope.scaling.type"), &s);
    if (rc == -2) return key_error(L, L->key, rc, "string");
    int ok = rc == -1 || strcmp(s, "none") == 0 || strcmp(s, "linear") == 0;
    if (!ok) fail(L, "%s '%s' is not supported (none, linear; Llama 3 scaling is rope_freqs.weight)", L->key, s);
    int none = rc == 0 && strcmp(s, "none") == 0;
    free(s);
    if (!ok) return -1;
    float attn = 1.0f;
    if (get_f32(L, akey(L, "rope.scaling.attn_factor"), 0, &attn)) return -1;
    if (attn != 1.0f) return fail(L, "%s %g is not supported (1: q and k unscaled)", L->key, attn);
    if (gguf_find_kv(L->m->file, akey(L, "rope.scaling.factor")) < 0) akey(L, "rope.scale_linear");
    if (get_f32(L, L->key, 0, &hp->rope_scale)) return -1;
    if (!(hp->rope_scale > 0)) return fail(L, "%s %g must be positive", L->key, hp->rope_scale);
    if (none) hp->rope_scale = 1.0f;
    if (hp->rope_scale != 1.0f) hp->rope_scaling = HC_ROPE_SCALING_LINEAR;
    return 0;
}

static int load_heads(loader *L)
{
    hc_hparams *hp = &L->m->hp;
    hp->n_head_kv = hp->n_head;
    if (get_dim(L, akey(L, "attention.head_count_kv"), 0, &hp->n_head_kv)) return -1;
    if (hp->n_head % hp->n_head_kv)
        return fail(L, "head_count %d is not a multiple of head_count_kv %d", hp->n_head, hp->n_head_kv);
    hp->head_dim = hp->n_embd % hp->n_head ? 0 : hp->n_embd / hp->n_head;
    if (get_dim(L, akey(L, "attention.key_length"), 0, &hp->head_dim)) return -1;
    int v_dim = hp->head_dim;
    if (get_dim(L, akey(L, "attention.value_length"), 0, &v_dim)) return -1;
    if (hp->head_dim == 0) return fail(L, "n_embd %d is not a multiple of head_count %d", hp->n_embd, hp->n_head);
    if (v_dim != hp->head_dim)
        return fail(L, "%s %d differs from the key length %d (not supported)", L->key, v_dim, hp->head_dim);
    if (hp->head_dim % 2) return fail(L, "head dimension %d is odd (RoPE rotates pairs)", hp->head_dim);
    int n_rot = hp->head_dim;
    if (get_dim(L, akey(L, "rope.dimension_count"), 0, &n_rot)) return -1;
    if (n_rot != hp->head_dim && hp->pos != HC_POS_LEARNED)
        return fail(L, "%s %d differs from the head dimension %d (partial rotary is not supported)",
                    L->key, n_rot, hp->head_dim);
    return 0;
}

static int load_hparams(loader *L)
{
    hc_hparams *hp = &L->m->hp;
    if (load_family(L)) return -1;
    hp->rope_base = 10000.0f;
    const char *eps = hp->norm == HC_NORM_RMS ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon";
    if (get_dim(L, akey(L, "context_length"), 1, &hp->n_ctx_train) ||
        get_dim(L, akey(L, "embedding_length"), 1, &hp->n_embd) ||
        get_dim(L, akey(L, "block_count"), 1, &hp->n_layer) ||
        get_dim(L, akey(L, "feed_forward_length"), 1, &hp->n_ff) ||
        get_dim(L, akey(L, "attention.head_count"), 1, &hp->n_head) ||
        get_dim(L, akey(L, "attention.sliding_window"), 0, &hp->sliding_window) ||
        get_f32(L, akey(L, eps), 1, &hp->rms_eps) ||
        get_f32(L, akey(L, "rope.freq_base"), 0, &hp->rope_base) ||
        get_f32(L, "powerinfer.sparse_threshold", 0, &hp->sparse_threshold) ||
        get_f32(L, "hotcold.ffn_act_threshold", 0, &hp->act_threshold) ||
        load_heads(L) || load_rope_scaling(L) || load_activation(L))
        return -1;
    if (!(hp->rms_eps >= 0 && hp->rms_eps < 1)) return fail(L, "norm epsilon %g is out of range", hp->rms_eps);
    if (!(hp->rope_base > 0)) return fail(L, "%s.rope.freq_base %g must be positive", L->arch, hp->rope_base);
    /* as hc-run --sparse-threshold takes it: a finite number */
    if (!isfinite(hp->sparse_threshold))
        return fail(L, "powerinfer.sparse_threshold %g is not a finite number", hp->sparse_threshold);
    if (!strcmp(L->arch, "llama-relu") && hp->act != HC_ACT_RELU)
        return fail(L, "hotcold.ffn_activation must be relu in a llama-relu file");
    if (hp->act_threshold != 0 && !(hp->act_threshold > 0 && hp->act == HC_ACT_RELU && hp->ffn_kind == HC_FFN_GATED))
        return fail(L, "hotcold.ffn_act_threshold %g needs a positive value and a gated ReLU FFN", hp->act_threshold);
    return 0;
}

static const char *shape_str(const gguf_tensor *t, char *buf, size_t len)
{
    int n = snprintf(buf, len, "[%lld", (long long)t->ne[0]);
    for (uint32_t d = 1; d < t->n_dims && n > 0 && (size_t)n < len; d++)
        n += snprintf(buf + n, len - (size_t)n, ", %lld", (long long)t->ne[d]);
    if (n > 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, "]");
    return buf;
}

/* g (malloc'd, loaded) into the model's GPTQ weights, freed with the model;
 * out of memory: g freed, -1. */
static int keep_gptq(loader *L, hc_gptq *g)
{
    hc_gptq **list = realloc(L->m->gptq, sizeof *list * (size_t)(L->m->n_gptq + 1));
    if (!list) {
        hc_gptq_free(g);
        free(g);
        return fail(L, "out of memory");
    }
    L->m->gptq = list;
    list[L->m->n_gptq++] = g;
    return 0;
}

/* The GPTQ companions of name as weight w (kernels_gptq.h): 1 if there are none. */
static int load_gptq(loader *L, const char *name, int n, int rows, hc_weight *w)
{
    hc_gptq *g = malloc(sizeof *g);
    if (!g) return fail(L, "out of memory");
    char msg[256];
    int rc = hc_gptq_from_gguf(L->m->file, name, n, rows, g, msg, sizeof msg);
    if (rc != 0) {
        free(g);
        return rc > 0 ? 1 : fail(L, "%s", msg);
    }
    if (keep_gptq(L, g)) return -1;
    static const char *const companions[] = { "qweight", "scales", "qzeros", "g_idx" };
    for (size_t i = 0; i < sizeof companions / sizeof companions[0]; i++) {
        char nm[GGUF_MAX_NAME + 16];
        snprintf(nm, sizeof nm, "%s.%s", name, companions[i]);
        find_tensor(L, nm);
    }
    *w = (hc_weight){ .kind = HC_WEIGHT_GPTQ, .type = GGML_TYPE_I32, .n = n, .rows = g->rows, .ext = g };
    return 0;
}

/* A 2-D matrix {n, rows}; rows < 0 accepts any row count (the predictor's r).
 * Absent: error when required, else w->kind stays NONE. */
static int load_weight(loader *L, const char *name, int n, int rows, int required, hc_weight *w)
{
    const gguf_tensor *t = find_tensor(L, name);
    memset(w, 0, sizeof *w);
    if (!t) {
        int rc = load_gptq(L, name, n, rows, w);
        if (rc <= 0) return rc;
        return required ? fail(L, "missing tensor %s", name) : 0;
    }
    char got[96];
    if (t->ne[0] != n || (rows >= 0 && t->ne[1] != rows) || t->ne[1] < 1 || t->ne[1] > INT32_MAX ||
        t->ne[2] != 1 || t->ne[3] != 1) {
        if (rows >= 0)
            return fail(L, "tensor %s has shape %s, expected [%d, %d]", name, shape_str(t, got, sizeof got), n, rows);
        return fail(L, "tensor %s has shape %s, expected [%d, r]", name, shape_str(t, got, sizeof got), n);
    }
    if (!hc_kernel_supports(t->type)) {
        const char *tn = ggml_type_name(t->type);
        return fail(L, "tensor %s has type %s, which hc-run does not support (F32, F16, BF16, Q8_0, Q4_0)",
                    name, tn ? tn : "unknown");
    }
    *w = (hc_weight){ .kind = HC_WEIGHT_GGML, .type = t->type, .data = t->data, .n = n, .rows = (int)t->ne[1] };
    return 0;
}

/* A vector [n] (norm, bias, rope factors), widened to f32 into the model's
 * vector storage; absent and optional: *out = NULL. */
static int load_vec(loader *L, const char *name, int n, int required, const float **out)
{
    hc_weight w;
    *out = NULL;
    if (load_weight(L, name, n, 1, required, &w)) return -1;
    if (w.kind == HC_WEIGHT_NONE) return 0;
    float *dst = L->m->norms + L->n_norm;
    hc_weight_row(&w, 0, dst);
    L->n_norm += (size_t)n;
    *out = dst;
    return 0;
}

/* Floats of every vector load_vec may hand out (norms, biases, factors). */
static size_t vec_floats(const hc_hparams *hp)
{
    size_t E = (size_t)hp->n_embd, Q = (size_t)hp->n_head * (size_t)hp->head_dim;
    size_t KV = (size_t)hp->n_head_kv * (size_t)hp->head_dim, F = (size_t)hp->n_ff;
    return (size_t)hp->n_layer * (5 * E + Q + 2 * KV + 2 * F) + 2 * E + (size_t)hp->head_dim;
}

#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s, il), nm)

/* Rows [r0, r0 + rows) of a ggml weight, as a weight of its own. */
/* Rows [r0, r0 + rows) of w as *v: ggml rows share the mapping, GPTQ rows the
 * repacked weight (a view kept with the model's GPTQ weights). */
static int row_view(loader *L, const hc_weight *w, int r0, int rows, hc_weight *v)
{
    *v = *w;
    v->rows = rows;
    if (w->kind == HC_WEIGHT_GGML) {
        v->data = (const char *)w->data + ggml_row_size(w->type, w->n) * (size_t)r0;
        return 0;
    }
    hc_gptq *g = malloc(sizeof *g);
    if (!g) return fail(L, "out of memory");
    *g = hc_gptq_rows(w->ext, r0, rows);
    v->ext = g;
    return keep_gptq(L, g);
}

/* q, k, v: three tensors, or one fused attn_qkv (Falcon; ggml rows or
 * INT4-GPTQ) whose Q, K and V rows follow each other; its views share it. */
static int load_qkv(loader *L, int il, hc_layer *ly)
{
    const hc_hparams *hp = &L->m->hp;
    int E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    char nm[GGUF_MAX_NAME + 1];
    if (gguf_find_tensor(L->m->file, NAME("attn_qkv.weight")) < 0 &&
        gguf_find_tensor(L->m->file, NAME("attn_qkv.weight.qweight")) < 0) {
        return load_weight(L, NAME("attn_q.weight"), E, Q, 1, &ly->attn_q) ||
               load_weight(L, NAME("attn_k.weight"), E, KV, 1, &ly->attn_k) ||
               load_weight(L, NAME("attn_v.weight"), E, KV, 1, &ly->attn_v) ? -1 : 0;
    }
    hc_weight qkv;
    if (load_weight(L, NAME("attn_qkv.weight"), E, Q + 2 * KV, 1, &qkv)) return -1;
    if (qkv.kind != HC_WEIGHT_GGML && qkv.kind != HC_WEIGHT_GPTQ)
        return fail(L, "tensor %s must be stored as ggml rows or INT4-GPTQ", nm);
    return row_view(L, &qkv, 0, Q, &ly->attn_q) || row_view(L, &qkv, Q, KV, &ly->attn_k) ||
           row_view(L, &qkv, Q + KV, KV, &ly->attn_v) ? -1 : 0;
}

static int load_layer(loader *L, int il)
{
    const hc_hparams *hp = &L->m->hp;
    hc_layer *ly = &L->m->layers[il];
    int E = hp->n_embd, F = hp->n_ff, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    int gate = hp->ffn_kind != HC_FFN_SEQUENTIAL;
    char nm[GGUF_MAX_NAME + 1];
    /* Falcon, as llama.cpp names it: with attn_norm_2 (new decoder architecture)
     * attention uses attn_norm_2 (HF ln_attn) and the FFN attn_norm (HF ln_mlp);
     * without it both blocks share attn_norm (Falcon-7B) */
    int two_norms = hp->residual == HC_RESIDUAL_PARALLEL &&
                    gguf_find_tensor(L->m->file, NAME("attn_norm_2.weight")) >= 0;
    int shared_norm = hp->residual == HC_RESIDUAL_PARALLEL && !two_norms;
    if (two_norms && (load_vec(L, NAME("attn_norm.weight"), E, 1, &ly->ffn_norm) ||
                      load_vec(L, NAME("attn_norm.bias"), E, 0, &ly->ffn_norm_b)))
        return -1;
    if (load_vec(L, two_norms ? NAME("attn_norm_2.weight") : NAME("attn_norm.weight"), E, 1, &ly->attn_norm) ||
        load_vec(L, two_norms ? NAME("attn_norm_2.bias") : NAME("attn_norm.bias"), E, 0, &ly->attn_norm_b) ||
        (hp->residual != HC_RESIDUAL_PARALLEL &&
         (load_vec(L, NAME("ffn_norm.weight"), E, 1, &ly->ffn_norm) ||
          load_vec(L, NAME("ffn_norm.bias"), E, 0, &ly->ffn_norm_b))) ||
        load_qkv(L, il, ly) ||
        load_vec(L, NAME("attn_q.bias"), Q, 0, &ly->attn_q_b) ||
        load_vec(L, NAME("attn_k.bias"), KV, 0, &ly->attn_k_b) ||
        load_vec(L, NAME("attn_v.bias"), KV, 0, &ly->attn_v_b) ||
        load_weight(L, NAME("attn_output.weight"), Q, E, 1, &ly->attn_output) ||
        load_vec(L, NAME("attn_output.bias"), E, 0, &ly->attn_output_b) ||
        load_weight(L, NAME("ffn_gate.weight"), E, F, gate, &ly->ffn_gate) ||
        load_vec(L, NAME("ffn_gate.bias"), F, 0, &ly->ffn_gate_b) ||
        load_weight(L, NAME("ffn_up.weight"), E, F, 1, &ly->ffn_up) ||
        load_vec(L, NAME("ffn_up.bias"), F, 0, &ly->ffn_up_b) ||
        load_weight(L, NAME("ffn_down_t.weight"), E, F, 0, &ly->ffn_down_t) ||
        load_weight(L, NAME("ffn_down.weight"), F, E, ly->ffn_down_t.kind == HC_WEIGHT_NONE, &ly->ffn_down) ||
        load_vec(L, ly->ffn_down_t.kind == HC_WEIGHT_NONE ? NAME("ffn_down.bias") : NAME("ffn_down_t.bias"), E, 0,
                 &ly->ffn_down_b) ||
        load_weight(L, NAME("fc1.weight"), E, -1, 0, &ly->fc1))
        return -1;
    if (shared_norm) {
        ly->ffn_norm = ly->attn_norm;
        ly->ffn_norm_b = ly->attn_norm_b;
    }
    if (!gate && ly->ffn_gate.kind != HC_WEIGHT_NONE)
        return fail(L, "tensor %s: a %s FFN has no gate", NAME("ffn_gate.weight"), L->arch);
    if (ly->fc1.kind != HC_WEIGHT_NONE) {
        if (load_weight(L, NAME("fc2.weight"), ly->fc1.rows, F, 1, &ly->fc2)) return -1;
    } else if (gguf_find_tensor(L->m->file, NAME("fc2.weight")) >= 0) {
        return fail(L, "tensor %s has no blk.%d.fc1.weight", nm, il);
    }
#undef NAME
    return 0;
}

/* The model's own tensors: embeddings, learned positions, rope factors, output. */
static int load_globals(loader *L)
{
    hc_model *m = L->m;
    hc_hparams *hp = &m->hp;
    if (load_weight(L, "token_embd.weight", hp->n_embd, hp->n_vocab, 1, &m->token_embd) ||
        load_weight(L, "output.weight", hp->n_embd, hp->n_vocab, 0, &m->output) ||
        load_vec(L, "output_norm.weight", hp->n_embd, 1, &m->output_norm) ||
        load_vec(L, "output_norm.bias", hp->n_embd, 0, &m->output_norm_b) ||
        load_weight(L, "position_embd.weight", hp->n_embd, hp->n_ctx_train, hp->pos == HC_POS_LEARNED,
                    &m->pos_embd) ||
        load_vec(L, "rope_freqs.weight", hp->head_dim / 2, 0, &m->rope_factors))
        return -1;
    if (m->output.kind == HC_WEIGHT_NONE) m->output = m->token_embd;   /* tied embeddings */
    if (m->pos_embd.kind != HC_WEIGHT_NONE && hp->pos != HC_POS_LEARNED)
        return fail(L, "tensor position_embd.weight: %s uses rotary positions", L->arch);
    if (m->rope_factors) {
        if (hp->rope_scaling != HC_ROPE_SCALING_NONE)
            return fail(L, "rope_freqs.weight and %s.rope.scaling.type linear do not go together", L->arch);
        hp->rope_scaling = HC_ROPE_SCALING_FACTORS;
        for (int i = 0; i < hp->head_dim / 2; i++)
            if (!(m->rope_factors[i] > 0)) return fail(L, "rope_freqs.weight[%d] = %g is not positive", i, m->rope_factors[i]);
    }
    return 0;
}

/* Every tensor read: one the loader does not know (a q/k norm, an expert
 * router, a bias of a family without one) or one another shadows (attn_q
 * beside attn_qkv) would leave a different model run without a word, as
 * llama.cpp refuses a file with tensors it did not take. A blk.N.* with N at
 * or past block_count is named as such. Checked by hc_model_load, which every
 * program that runs a model calls; hc_model_check (hc-quantize, hc-solve:
 * they read a model without running it, and hc-quantize carries every tensor
 * into its output) does not. */
static int check_all_used(loader *L)
{
    const gguf_file *f = L->m->file;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        if (L->used[i]) continue;
        const char *name = f->tensors[i].name;
        char *end = NULL;
        unsigned long il = strncmp(name, "blk.", 4) ? 0 : strtoul(name + 4, &end, 10);
        if (end && end != name + 4 && *end == '.' && il >= (unsigned long)L->m->hp.n_layer)
            return fail(L, "tensor %s is past block_count %d (its layer would be ignored)", name, L->m->hp.n_layer);
        return fail(L, "tensor %s is not used by a %s model as hc-run runs it (it would be ignored)", name, L->arch);
    }
    return 0;
}

/* Fault the tensor data into the page tables now, as llama.cpp's
 * MAP_POPULATE does: the first token then streams weights instead of taking
 * a page fault every 4 KiB. Advice only: failure changes nothing. */
static void map_weights(const gguf_file *f)
{
    if (!f->owns_map || f->data_offset >= f->size) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), off = (size_t)f->data_offset & ~(page - 1);
    void *p = (void *)(f->base + off);
    madvise(p, f->size - off, MADV_WILLNEED);
#ifdef MADV_POPULATE_READ
    madvise(p, f->size - off, MADV_POPULATE_READ);
#endif
}

/* The model at path; with all_used, every tensor of the file must be read. */
static hc_model *open_model(const char *path, int all_used, char *err, size_t errlen)
{
    hc_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        snprintf(err, errlen, "%s: out of memory", path);
        free(m);
        return NULL;
    }
    loader L = { m, err, errlen, 0, "", "", NULL };
    m->file = gguf_open(path, err, errlen);
    if (!m->file || load_hparams(&L)) goto bad;
    hc_hparams *hp = &m->hp;
    if (!(L.used = calloc(m->file->n_tensors + 1, 1))) { fail(&L, "out of memory"); goto bad; }

    const gguf_tensor *te = find_tensor(&L, "token_embd.weight");
    if (!te) { fail(&L, "missing tensor token_embd.weight"); goto bad; }
    if (te->ne[1] < 1 || te->ne[1] > INT32_MAX) { fail(&L, "token_embd.weight has %lld rows", (long long)te->ne[1]); goto bad; }
    hp->n_vocab = (int)te->ne[1];
    int vocab = hp->n_vocab;
    if (get_dim(&L, akey(&L, "vocab_size"), 0, &vocab)) goto bad;
    if (vocab != hp->n_vocab) { fail(&L, "%s %d differs from token_embd.weight's %d rows", L.key, vocab, hp->n_vocab); goto bad; }

    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    m->norms = malloc(sizeof(float) * vec_floats(hp));
    if (!m->layers || !m->norms) { fail(&L, "out of memory"); goto bad; }
    if (load_globals(&L)) goto bad;
    for (int il = 0; il < hp->n_layer; il++)
        if (load_layer(&L, il)) goto bad;
    if (all_used && check_all_used(&L)) goto bad;
    free(L.used);
    return m;
bad:
    free(L.used);
    hc_model_free(m);
    return NULL;
}

hc_model *hc_model_open(const char *path, char *err, size_t errlen) { return open_model(path, 0, err, errlen); }

hc_model *hc_model_load(const char *path, char *err, size_t errlen)
{
    hc_model *m = open_model(path, 1, err, errlen);
    if (m) map_weights(m->file);
    return m;
}

int hc_window_len(const hc_hparams *hp, int ctx)
{
    if (ctx) return ctx;
    return hp->n_ctx_train > 0 && hp->n_ctx_train < 512 ? hp->n_ctx_train : 512;
}

void hc_model_free(hc_model *m)
{
    if (!m) return;
    gguf_close(m->file);
    for (int i = 0; i < m->n_gptq; i++) {
        hc_gptq_free(m->gptq[i]);
        free(m->gptq[i]);
    }
    free(m->gptq);
    free(m->weights_copy);
    free(m->layers);
    free(m->norms);
    free(m->path);
    free(m);
}

uint64_t hc_model_token_bytes(const hc_model *m)
{
    uint64_t b = hc_weight_bytes(&m->output) + hc_weight_bytes(&m->token_embd) / (uint64_t)m->hp.n_vocab;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const hc_layer *ly = &m->layers[il];
        b += hc_weight_bytes(&ly->attn_q) + hc_weight_bytes(&ly->attn_k) + hc_weight_bytes(&ly->attn_v) +
             hc_weight_bytes(&ly->attn_output) + hc_weight_bytes(&ly->ffn_gate) + hc_weight_bytes(&ly->ffn_up) +
             hc_weight_bytes(ly->ffn_down.kind != HC_WEIGHT_NONE ? &ly->ffn_down : &ly->ffn_down_t);
    }
    return b;
}

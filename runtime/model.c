/* Model loading: hyper-parameters as llama.cpp reads them, every tensor
 * checked for presence, shape and a supported type before anything runs. */
#include "model.h"

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
    size_t n_norm;   /* norm floats handed out so far */
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

/* The model families (model.h, "Model families"): general.architecture and
 * the seam's values. A new family adds a row, and the compiler then names
 * every switch its new enum values must reach. */
static const struct family {
    const char *arch;
    int norm, pos, rope_scaling, ffn_kind, residual;
} families[] = {
    { "llama", HC_NORM_RMS, HC_POS_ROPE, HC_ROPE_SCALING_NONE, HC_FFN_GATED, HC_RESIDUAL_SEQUENTIAL },
};

static int load_family(loader *L)
{
    hc_hparams *hp = &L->m->hp;
    char *s = NULL;
    int rc = gguf_get_str(L->m->file, "general.architecture", &s);
    if (rc) return key_error(L, "general.architecture", rc, "string");
    const struct family *fam = NULL;
    for (size_t i = 0; i < sizeof families / sizeof *families; i++)
        if (strcmp(s, families[i].arch) == 0) fam = &families[i];
    if (!fam) fail(L, "unsupported architecture '%s' (hc-run runs llama)", s);
    free(s);
    if (!fam) return -1;
    hp->norm = fam->norm;
    hp->pos = fam->pos;
    hp->rope_scaling = fam->rope_scaling;
    hp->ffn_kind = fam->ffn_kind;
    hp->residual = fam->residual;
    return 0;
}

static int load_hparams(loader *L)
{
    hc_hparams *hp = &L->m->hp;
    gguf_file *f = L->m->file;
    char *s = NULL;
    int rc, ok;
    if (load_family(L)) return -1;

    hp->rope_base = 10000.0f;
    hp->act = HC_ACT_SILU;
    if (get_dim(L, "llama.context_length", 1, &hp->n_ctx_train) ||
        get_dim(L, "llama.embedding_length", 1, &hp->n_embd) ||
        get_dim(L, "llama.block_count", 1, &hp->n_layer) ||
        get_dim(L, "llama.feed_forward_length", 1, &hp->n_ff) ||
        get_dim(L, "llama.attention.head_count", 1, &hp->n_head) ||
        get_f32(L, "llama.attention.layer_norm_rms_epsilon", 1, &hp->rms_eps) ||
        get_f32(L, "llama.rope.freq_base", 0, &hp->rope_base) ||
        get_f32(L, "powerinfer.sparse_threshold", 0, &hp->sparse_threshold))
        return -1;
    hp->n_head_kv = hp->n_head;
    if (get_dim(L, "llama.attention.head_count_kv", 0, &hp->n_head_kv)) return -1;
    if (hp->n_embd % hp->n_head || hp->n_head % hp->n_head_kv)
        return fail(L, "n_embd %d, head_count %d, head_count_kv %d do not divide",
                    hp->n_embd, hp->n_head, hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if (hp->head_dim % 2) return fail(L, "head dimension %d is odd (RoPE rotates pairs)", hp->head_dim);
    int n_rot = hp->head_dim;
    if (get_dim(L, "llama.rope.dimension_count", 0, &n_rot)) return -1;
    if (n_rot != hp->head_dim)
        return fail(L, "llama.rope.dimension_count %d differs from the head dimension %d (invalid n_rot)",
                    n_rot, hp->head_dim);
    if (!(hp->rms_eps >= 0 && hp->rms_eps < 1)) return fail(L, "rms epsilon %g is out of range", hp->rms_eps);
    if (!(hp->rope_base > 0)) return fail(L, "llama.rope.freq_base %g must be positive", hp->rope_base);

    rc = gguf_get_str(f, "hotcold.ffn_activation", &s);
    if (rc == -2) return key_error(L, "hotcold.ffn_activation", rc, "string");
    if (rc == 0) {
        ok = 1;
        if (strcmp(s, "relu") == 0) hp->act = HC_ACT_RELU;
        else if (strcmp(s, "silu") != 0) ok = 0;
        if (!ok) fail(L, "hotcold.ffn_activation '%s' is neither relu nor silu", s);
        free(s);
        if (!ok) return -1;
    }
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

/* The GPTQ companions of name as weight w (kernels_gptq.h): 1 if there are none. */
static int load_gptq(loader *L, const char *name, int n, int rows, hc_weight *w)
{
    hc_gptq *g = malloc(sizeof *g);
    hc_gptq **list = g ? realloc(L->m->gptq, sizeof *list * (size_t)(L->m->n_gptq + 1)) : NULL;
    if (!list) {
        free(g);
        return fail(L, "out of memory");
    }
    L->m->gptq = list;
    char msg[256];
    int rc = hc_gptq_from_gguf(L->m->file, name, n, rows, g, msg, sizeof msg);
    if (rc != 0) {
        free(g);
        return rc > 0 ? 1 : fail(L, "%s", msg);
    }
    list[L->m->n_gptq++] = g;
    *w = (hc_weight){ .kind = HC_WEIGHT_GPTQ, .type = GGML_TYPE_I32, .n = n, .rows = g->rows, .ext = g };
    return 0;
}

/* A 2-D matrix {n, rows}; rows < 0 accepts any row count (the predictor's r).
 * Absent: error when required, else w->kind stays NONE. */
static int load_weight(loader *L, const char *name, int n, int rows, int required, hc_weight *w)
{
    const gguf_tensor *t = gguf_get_tensor(L->m->file, name);
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

/* A norm vector [n], widened to f32 into the model's norm storage. */
static int load_norm(loader *L, const char *name, const float **out)
{
    int n = L->m->hp.n_embd;
    hc_weight w;
    if (load_weight(L, name, n, 1, 1, &w)) return -1;
    float *dst = L->m->norms + L->n_norm;
    hc_weight_row(&w, 0, dst);
    L->n_norm += (size_t)n;
    *out = dst;
    return 0;
}

static int load_layer(loader *L, int il)
{
    const hc_hparams *hp = &L->m->hp;
    hc_layer *ly = &L->m->layers[il];
    int E = hp->n_embd, F = hp->n_ff, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    char nm[GGUF_MAX_NAME + 1];
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s, il), nm)
    if (load_norm(L, NAME("attn_norm.weight"), &ly->attn_norm) ||
        load_norm(L, NAME("ffn_norm.weight"), &ly->ffn_norm) ||
        load_weight(L, NAME("attn_q.weight"), E, Q, 1, &ly->attn_q) ||
        load_weight(L, NAME("attn_k.weight"), E, KV, 1, &ly->attn_k) ||
        load_weight(L, NAME("attn_v.weight"), E, KV, 1, &ly->attn_v) ||
        load_weight(L, NAME("attn_output.weight"), Q, E, 1, &ly->attn_output) ||
        load_weight(L, NAME("ffn_gate.weight"), E, F, 1, &ly->ffn_gate) ||
        load_weight(L, NAME("ffn_up.weight"), E, F, 1, &ly->ffn_up) ||
        load_weight(L, NAME("ffn_down_t.weight"), E, F, 0, &ly->ffn_down_t) ||
        load_weight(L, NAME("ffn_down.weight"), F, E, ly->ffn_down_t.kind == HC_WEIGHT_NONE, &ly->ffn_down) ||
        load_weight(L, NAME("fc1.weight"), E, -1, 0, &ly->fc1))
        return -1;
    if (ly->fc1.kind != HC_WEIGHT_NONE) {
        if (load_weight(L, NAME("fc2.weight"), ly->fc1.rows, F, 1, &ly->fc2)) return -1;
    } else if (gguf_find_tensor(L->m->file, NAME("fc2.weight")) >= 0) {
        return fail(L, "tensor %s has no blk.%d.fc1.weight", nm, il);
    }
#undef NAME
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

hc_model *hc_model_open(const char *path, char *err, size_t errlen)
{
    hc_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        snprintf(err, errlen, "%s: out of memory", path);
        free(m);
        return NULL;
    }
    loader L = { m, err, errlen, 0 };
    m->file = gguf_open(path, err, errlen);
    if (!m->file || load_hparams(&L)) goto bad;
    hc_hparams *hp = &m->hp;

    const gguf_tensor *te = gguf_get_tensor(m->file, "token_embd.weight");
    if (!te) { fail(&L, "missing tensor token_embd.weight"); goto bad; }
    if (te->ne[1] < 1 || te->ne[1] > INT32_MAX) { fail(&L, "token_embd.weight has %lld rows", (long long)te->ne[1]); goto bad; }
    hp->n_vocab = (int)te->ne[1];
    int vocab = hp->n_vocab;
    if (get_dim(&L, "llama.vocab_size", 0, &vocab)) goto bad;
    if (vocab != hp->n_vocab) { fail(&L, "llama.vocab_size %d differs from token_embd.weight's %d rows", vocab, hp->n_vocab); goto bad; }

    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    m->norms = malloc(sizeof(float) * (size_t)hp->n_embd * (2 * (size_t)hp->n_layer + 1));
    if (!m->layers || !m->norms) { fail(&L, "out of memory"); goto bad; }
    if (load_weight(&L, "token_embd.weight", hp->n_embd, hp->n_vocab, 1, &m->token_embd) ||
        load_weight(&L, "output.weight", hp->n_embd, hp->n_vocab, 0, &m->output) ||
        load_norm(&L, "output_norm.weight", &m->output_norm))
        goto bad;
    if (m->output.kind == HC_WEIGHT_NONE) m->output = m->token_embd;   /* tied embeddings */
    for (int il = 0; il < hp->n_layer; il++)
        if (load_layer(&L, il)) goto bad;
    return m;
bad:
    hc_model_free(m);
    return NULL;
}

hc_model *hc_model_load(const char *path, char *err, size_t errlen)
{
    hc_model *m = hc_model_open(path, err, errlen);
    if (m) map_weights(m->file);
    return m;
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

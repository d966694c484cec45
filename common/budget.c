/* What the VRAM budget must hold before FFN neurons, per layer and in total,
 * and what one neuron costs (budget.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "cli.h"

const char *const hc_budget_fixed_names[HC_FIX_COUNT] = { "attention", "predictors", "norms", "output", "kv_cache",
                                                          "gptq_down_pairs" };

/* INT4-GPTQ weights (hc-quantize GPTQ, docs/formats.md, "INT4-GPTQ tensors"): `<name>` is
 * replaced by these companion tensors. */
static const char *const gptq_parts[] = { "qweight", "scales", "qzeros", "g_idx" };

/* An FFN neuron weight, or one of its GPTQ companions. */
static int is_ffn_weight(const char *suffix)
{
    static const char *const ffn[] = { "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "ffn_down_t.weight" };
    for (size_t i = 0; i < sizeof ffn / sizeof ffn[0]; i++) {
        size_t n = strlen(ffn[i]);
        if (strncmp(suffix, ffn[i], n))
            continue;
        if (!suffix[n])
            return 1;
        for (size_t c = 0; c < sizeof gptq_parts / sizeof gptq_parts[0]; c++)
            if (suffix[n] == '.' && !strcmp(suffix + n + 1, gptq_parts[c]))
                return 1;
    }
    return 0;
}

/* Charges tensor t to its fixed part: a layer's (blk.L.*) or the output head.
 * FFN neurons and the token embeddings stay on the CPU. */
static int charge(hc_budget *b, const gguf_file *m, const gguf_tensor *t, char *err, size_t errlen)
{
    const char *name = t->name;
    if (strncmp(name, "blk.", 4)) {
        /* With tied embeddings the head multiplies by token_embd, so that goes to the GPU. */
        if (strcmp(name, "token_embd.weight") || gguf_find_tensor(m, "output.weight") < 0)
            b->fixed[HC_FIX_OUTPUT] += t->nbytes;     /* output, output_norm, rope_freqs, ... */
        return 0;
    }
    char *end;
    unsigned long l = strtoul(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || l >= b->n_layer) {
        snprintf(err, errlen, "%s: tensor %s is not in a layer 0..%" PRIu32, m->path, name, b->n_layer - 1);
        return -1;
    }
    const char *suffix = end + 1;
    if (is_ffn_weight(suffix))
        return 0;
    int part = !strncmp(suffix, "attn_", 5) ? HC_FIX_ATTN :
               !strncmp(suffix, "fc1.", 4) || !strncmp(suffix, "fc2.", 4) ? HC_FIX_PRED :
               HC_FIX_NORM;   /* ffn_norm and other small per-layer tensors (biases) */
    b->layer[l].part[part] += t->nbytes;
    return 0;
}

static const gguf_tensor *layer_tensor(const gguf_file *m, uint32_t l, const char *what)
{
    char name[GGUF_MAX_NAME + 1];
    snprintf(name, sizeof name, "blk.%" PRIu32 ".%s", l, what);
    return gguf_get_tensor(m, name);
}

/* A block weight as stored: the ggml tensor blk.l.what, or its GPTQ companions. */
typedef struct {
    const gguf_tensor *t;          /* ggml tensor, or NULL */
    const gguf_tensor *qweight;    /* GPTQ: I32 [N outputs, ceil(K inputs / 8)], or NULL */
} stored_weight;

/* 1 found, 0 absent, -1 with a message (GPTQ companions incomplete or mistyped). */
static int layer_weight(const gguf_file *m, uint32_t l, const char *what, stored_weight *w, char *err, size_t errlen)
{
    static const uint32_t types[] = { GGML_TYPE_I32, GGML_TYPE_F16, GGML_TYPE_I32, GGML_TYPE_I32 };
    memset(w, 0, sizeof *w);
    if ((w->t = layer_tensor(m, l, what)))
        return 1;
    for (size_t c = 0; c < sizeof gptq_parts / sizeof gptq_parts[0]; c++) {
        char name[GGUF_MAX_NAME + 16];
        snprintf(name, sizeof name, "blk.%" PRIu32 ".%s.%s", l, what, gptq_parts[c]);
        const gguf_tensor *t = gguf_get_tensor(m, name);
        if (c == 0 && !t)
            return 0;
        if (!t && c == 3)
            break;                     /* g_idx is optional */
        if (!t || t->type != types[c]) {
            snprintf(err, errlen, "%s: GPTQ weight blk.%" PRIu32 ".%s: %s %s", m->path, l, what, name,
                     !t ? "is missing" : "has the wrong type");
            return -1;
        }
        if (c == 0)
            w->qweight = t;
    }
    return 1;
}

/* <arch>.<what>, a positive integer; absent: dflt, or an error when dflt is 0. */
static int get_dim(const gguf_file *m, const char *arch, const char *what, uint32_t dflt, uint32_t *out, char *err,
                   size_t errlen)
{
    char key[128];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", arch, what);
    if (dflt && gguf_find_kv(m, key) < 0) {
        *out = dflt;
        return 0;
    }
    if (gguf_get_int(m, key, &v) != 0 || v <= 0 || v > UINT32_MAX) {
        snprintf(err, errlen, "%s: %s is missing or not a positive integer", m->path, key);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* The tensor must be 2-D [ne0, ne1] with rows that ggml can gather. */
static int check_shape(const gguf_file *m, uint32_t l, const char *what, const gguf_tensor *t, int64_t ne0,
                       int64_t ne1, char *err, size_t errlen)
{
    if (t->n_dims != 2 || t->ne[0] != ne0 || t->ne[1] != ne1) {
        snprintf(err, errlen, "%s: blk.%" PRIu32 ".%s has shape [%" PRId64 ", %" PRId64 "], expected [%" PRId64
                 ", %" PRId64 "]", m->path, l, what, t->ne[0], t->ne[1], ne0, ne1);
        return -1;
    }
    return 0;
}

/* A stored weight must be the 2-D [ne0 = inputs, ne1 = outputs] ggml tensor,
 * or GPTQ companions whose qweight is [outputs, ceil(inputs / 8)]. */
static int check_weight(const gguf_file *m, uint32_t l, const char *what, const stored_weight *w, int64_t ne0,
                        int64_t ne1, char *err, size_t errlen)
{
    if (w->t)
        return check_shape(m, l, what, w->t, ne0, ne1, err, errlen);
    const gguf_tensor *q = w->qweight;
    if (q->n_dims != 2 || q->ne[0] != ne1 || q->ne[1] != (ne0 + 7) / 8) {
        snprintf(err, errlen, "%s: blk.%" PRIu32 ".%s.qweight has shape [%" PRId64 ", %" PRId64 "], expected [%"
                 PRId64 ", %" PRId64 "] (GPTQ of a [%" PRId64 ", %" PRId64 "] weight)", m->path, l, what, q->ne[0],
                 q->n_dims > 1 ? q->ne[1] : 1, ne1, (ne0 + 7) / 8, ne0, ne1);
        return -1;
    }
    return 0;
}

/* INT4-GPTQ as the runtime stores it (docs/design/gptq.md, "Sparse and hybrid
 * rows"): a gate/up row of k inputs is its codes (k rounded up to 32, two per
 * byte) and one f32 {scale, -scale*zero} pair per group; a down column (input
 * j of ffn_down) is its n_embd codes and a 4-byte group index, and the layer's
 * columns share one pairs table, n_embd pairs per group of ffn_down. */
static uint64_t gptq_row_bytes(uint64_t k, uint64_t gs) { return (k + 31) / 32 * 16 + 8 * ((k + gs - 1) / gs); }

/* Bytes of one neuron of layer l: a gate row, an up row and a down_t row, each
 * n_embd elements of the type the runtime stores it in (an untransposed
 * ffn_down is gathered per neuron into n_embd elements of its type, or of Q8_0
 * for Q8_0/Q4_0, whose blocks run along n_ff; a GPTQ ffn_down into down
 * columns, whose shared pairs table goes to *pairs). A bias of the gate or up
 * product (OPT's up) adds the neuron's float, as the device stores it
 * (runtime/hybrid.c); ffn_down's bias is per output, not per neuron. */
static int neuron_bytes(const gguf_file *m, uint32_t l, uint32_t n_embd, uint32_t n_ff, uint64_t *out,
                        uint64_t *pairs, char *err, size_t errlen)
{
    stored_weight up, gate, down_t, down;
    int has_up, has_gate, has_down_t, has_down = 0;
    if ((has_up = layer_weight(m, l, "ffn_up.weight", &up, err, errlen)) < 0 ||
        (has_gate = layer_weight(m, l, "ffn_gate.weight", &gate, err, errlen)) < 0 ||
        (has_down_t = layer_weight(m, l, "ffn_down_t.weight", &down_t, err, errlen)) < 0 ||
        (!has_down_t && (has_down = layer_weight(m, l, "ffn_down.weight", &down, err, errlen)) < 0))
        return -1;
    if (!has_up || (!has_down_t && !has_down)) {
        snprintf(err, errlen, "%s: blk.%" PRIu32 ".%s is missing", m->path, l,
                 !has_up ? "ffn_up.weight" : "ffn_down.weight (or ffn_down_t.weight)");
        return -1;
    }
    if (check_weight(m, l, "ffn_up.weight", &up, n_embd, n_ff, err, errlen) ||
        (has_gate && check_weight(m, l, "ffn_gate.weight", &gate, n_embd, n_ff, err, errlen)) ||
        (has_down_t && check_weight(m, l, "ffn_down_t.weight", &down_t, n_embd, n_ff, err, errlen)) ||
        (has_down && check_weight(m, l, "ffn_down.weight", &down, n_ff, n_embd, err, errlen)))
        return -1;
    const stored_weight *rows[3] = { has_gate ? &gate : NULL, &up, has_down_t ? &down_t : &down };
    uint64_t sum = 0;
    *pairs = 0;
    for (int i = 0; i < 3; i++) {
        if (!rows[i])
            continue;
        const gguf_tensor *t = rows[i]->t;
        if (!t) {
            uint32_t gs = 0;
            if (rows[i] == &down_t || gguf_get_u32(m, "hotcold.gptq.group_size", &gs) || gs < 1) {
                snprintf(err, errlen, "%s: blk.%" PRIu32 ": %s", m->path, l, rows[i] == &down_t ?
                         "an INT4-GPTQ ffn_down_t has no sparse rows in hc-run (GPTQ ffn_down does)" :
                         "INT4-GPTQ weights need hotcold.gptq.group_size (u32)");
                return -1;
            }
            if (rows[i] == &down) {
                sum += (n_embd + 31) / 32 * 16 + 4;
                *pairs = (uint64_t)8 * n_embd * ((n_ff + gs - 1) / gs);
            } else {
                sum += gptq_row_bytes(n_embd, gs);
            }
            continue;
        }
        uint32_t type = t->type;
        /* hc-run turns an untransposed Q8_0/Q4_0 ffn_down into per-neuron Q8_0
         * rows (F32 when n_embd is not whole blocks): runtime/sparse.c (down rows). */
        if (rows[i] == &down && (type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0))
            type = n_embd % QK8_0 ? GGML_TYPE_F32 : GGML_TYPE_Q8_0;
        uint32_t blck = ggml_blck_size(type);
        if (n_embd % blck) {
            snprintf(err, errlen, "%s: blk.%" PRIu32 ": a neuron's row of %" PRIu32 " %s elements is not whole "
                     "blocks of %" PRIu32, m->path, l, n_embd, ggml_type_name(type), blck);
            return -1;
        }
        sum += ggml_row_size(type, n_embd);
    }
    char name[64];
    snprintf(name, sizeof name, "blk.%" PRIu32 ".ffn_gate.bias", l);
    sum += has_gate && gguf_find_tensor(m, name) >= 0 ? sizeof(float) : 0;
    snprintf(name, sizeof name, "blk.%" PRIu32 ".ffn_up.bias", l);
    sum += gguf_find_tensor(m, name) >= 0 ? sizeof(float) : 0;
    *out = sum;
    return 0;
}

/* Elements of one position's K (or V) row in hc-run's cache: head_count_kv
 * heads of key_length (default n_embd / head_count), as runtime/model.c reads them. */
static int kv_dim(const gguf_file *m, const char *arch, uint32_t n_embd, uint64_t *out, char *err, size_t errlen)
{
    uint32_t n_head, n_head_kv, head_dim;
    if (get_dim(m, arch, "attention.head_count", 0, &n_head, err, errlen) ||
        get_dim(m, arch, "attention.head_count_kv", n_head, &n_head_kv, err, errlen) ||
        get_dim(m, arch, "attention.key_length", n_embd % n_head ? 0 : n_embd / n_head, &head_dim, err, errlen))
        return -1;
    *out = (uint64_t)n_head_kv * head_dim;
    return 0;
}

int hc_kv_bytes(uint32_t type_k, uint32_t type_v) { return (int)(ggml_row_size(type_k, 1) + ggml_row_size(type_v, 1)); }

int hc_budget_read(hc_budget *b, const gguf_file *m, int64_t ctx, int kv_bytes, char *err, size_t errlen)
{
    memset(b, 0, sizeof *b);
    char *arch = NULL;
    if (gguf_get_str(m, "general.architecture", &arch) != 0) {
        snprintf(err, errlen, "%s: general.architecture is missing or not a string", m->path);
        return -1;
    }
    uint64_t kv_row;
    int rc = get_dim(m, arch, "block_count", 0, &b->n_layer, err, errlen) ||
             get_dim(m, arch, "feed_forward_length", 0, &b->n_ff, err, errlen) ||
             get_dim(m, arch, "embedding_length", 0, &b->n_embd, err, errlen) ||
             kv_dim(m, arch, b->n_embd, &kv_row, err, errlen) ||
             (ctx < 0 && get_dim(m, arch, "context_length", 0, &b->ctx, err, errlen)) ? -1 : 0;
    char key[128];
    int64_t train;
    snprintf(key, sizeof key, "%s.context_length", arch);
    b->ctx_train = gguf_get_int(m, key, &train) == 0 && train > 0 && train <= UINT32_MAX ? (uint32_t)train : 0;
    free(arch);
    if (rc)
        return -1;
    if (ctx >= 0)
        b->ctx = (uint32_t)ctx;
    b->kv_bytes = kv_bytes;
    if (!(b->layer = calloc(b->n_layer, sizeof *b->layer))) {
        snprintf(err, errlen, "%s: out of memory", m->path);
        return -1;
    }
    for (uint32_t l = 0; l < b->n_layer; l++) {
        hc_budget_layer *L = &b->layer[l];
        if (neuron_bytes(m, l, b->n_embd, b->n_ff, &L->neuron_bytes, &L->part[HC_FIX_GPTQ_PAIRS], err, errlen))
            goto fail;
        L->part[HC_FIX_KV] = (uint64_t)b->ctx * kv_row * (uint64_t)kv_bytes;   /* K and V */
    }
    for (uint64_t i = 0; i < m->n_tensors; i++)
        if (charge(b, m, &m->tensors[i], err, errlen))
            goto fail;
    for (uint32_t l = 0; l < b->n_layer; l++)
        for (int i = 0; i < HC_FIX_COUNT; i++)
            b->fixed[i] += b->layer[l].part[i];
    for (int i = 0; i < HC_FIX_COUNT; i++)
        b->fixed_total += b->fixed[i];
    return 0;
fail:
    hc_budget_free(b);
    return -1;
}

void hc_budget_free(hc_budget *b)
{
    free(b->layer);
    b->layer = NULL;
}

int hc_budget_capacity(const hc_budget *b, const char *model_path, uint64_t vram_budget,
                       uint64_t *capacity, char *err, size_t errlen)
{
    uint64_t used = 0;
    for (int i = 0; i < HC_FIX_COUNT; i++) {
        if (used + b->fixed[i] <= vram_budget) {
            used += b->fixed[i];
            continue;
        }
        char sb[32], sf[32], sp[32];
        snprintf(err, errlen, "%s: --vram-budget %s is too small: the dense part needs %s before any FFN neuron "
                 "(it runs out at %s, %s)", model_path, hc_format_size(vram_budget, sb, sizeof sb),
                 hc_format_size(b->fixed_total, sf, sizeof sf), hc_budget_fixed_names[i],
                 hc_format_size(b->fixed[i], sp, sizeof sp));
        return -1;
    }
    *capacity = vram_budget - used;
    return 0;
}

uint64_t hc_budget_layer_dense(const hc_budget *b, uint32_t l)
{
    const uint64_t *p = b->layer[l].part;
    return p[HC_FIX_ATTN] + p[HC_FIX_PRED] + p[HC_FIX_NORM];
}

int hc_budget_place_pays(const hc_budget *b, uint32_t n_layers, int ffn, int head, double *saved, double *cost)
{
    uint64_t bytes = head ? b->fixed[HC_FIX_OUTPUT] : 0;
    for (uint32_t l = 0; l < n_layers && l < b->n_layer; l++) {
        bytes += hc_budget_layer_dense(b, l);
        if (ffn) bytes += b->layer[l].neuron_bytes * (uint64_t)b->n_ff + b->layer[l].part[HC_FIX_GPTQ_PAIRS];
    }
    *saved = (double)bytes * (1.0 / HC_COST_CPU_BW - 1.0 / HC_COST_GPU_BW);
    *cost = HC_COST_LAYER_S * (double)n_layers + HC_COST_SYNC_S * (double)((ffn ? 0 : n_layers) + (n_layers || head ? 1 : 0));
    return *saved > *cost;
}

uint32_t hc_budget_layers(const hc_budget *b, uint64_t vram_budget)
{
    uint64_t used = 0;
    uint32_t l = 0;
    for (; l < b->n_layer; l++) {
        uint64_t need = hc_budget_layer_dense(b, l) + b->layer[l].part[HC_FIX_KV];
        if (need > vram_budget - used)
            break;
        used += need;
    }
    return l;
}

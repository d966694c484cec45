/* What the VRAM budget must hold before FFN neurons, and what one neuron costs. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "solve.h"

const char *const solve_fixed_names[FIX_COUNT] = { "attention", "predictors", "norms", "output", "kv_cache" };

/* ggml's KV cache is F16 by default (PowerInfer's llama.cpp too). */
#define KV_ELT_BYTES 2

static int is_ffn_weight(const char *suffix)
{
    return !strcmp(suffix, "ffn_gate.weight") || !strcmp(suffix, "ffn_up.weight") ||
           !strcmp(suffix, "ffn_down.weight") || !strcmp(suffix, "ffn_down_t.weight");
}

/* Which dense part a tensor belongs to; -1 for FFN neurons and the token
 * embeddings, which stay on the CPU. */
static int classify(const gguf_file *m, const char *name)
{
    if (!strncmp(name, "blk.", 4)) {
        const char *suffix = strchr(name + 4, '.');
        if (!suffix)
            return FIX_NORM;
        suffix++;
        if (is_ffn_weight(suffix))
            return -1;
        if (!strncmp(suffix, "attn_", 5))
            return FIX_ATTN;
        if (!strncmp(suffix, "fc1.", 4) || !strncmp(suffix, "fc2.", 4))
            return FIX_PRED;
        return FIX_NORM;      /* ffn_norm and other small per-layer tensors (biases) */
    }
    /* With tied embeddings the head multiplies by token_embd, so that goes to the GPU. */
    if (!strcmp(name, "token_embd.weight"))
        return gguf_find_tensor(m, "output.weight") < 0 ? FIX_OUTPUT : -1;
    return FIX_OUTPUT;        /* output, output_norm, rope_freqs, ... */
}

static const gguf_tensor *layer_tensor(const gguf_file *m, uint32_t l, const char *what)
{
    char name[GGUF_MAX_NAME + 1];
    snprintf(name, sizeof name, "blk.%" PRIu32 ".%s", l, what);
    return gguf_get_tensor(m, name);
}

static int get_dim(const gguf_file *m, const char *arch, const char *what, uint32_t *out, char *err, size_t errlen)
{
    char key[128];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", arch, what);
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

/* Bytes of one neuron of layer l: a gate row, an up row and a down_t row, each
 * n_embd elements of that tensor's type (an untransposed ffn_down is gathered
 * per neuron into the same n_embd elements of its type). */
static int neuron_bytes(const gguf_file *m, uint32_t l, uint32_t n_embd, uint32_t n_ff, uint64_t *out,
                        char *err, size_t errlen)
{
    const gguf_tensor *up = layer_tensor(m, l, "ffn_up.weight");
    const gguf_tensor *gate = layer_tensor(m, l, "ffn_gate.weight");
    const gguf_tensor *down_t = layer_tensor(m, l, "ffn_down_t.weight");
    const gguf_tensor *down = down_t ? NULL : layer_tensor(m, l, "ffn_down.weight");
    if (!up || (!down_t && !down)) {
        snprintf(err, errlen, "%s: blk.%" PRIu32 ".%s is missing", m->path, l,
                 !up ? "ffn_up.weight" : "ffn_down.weight (or ffn_down_t.weight)");
        return -1;
    }
    if (check_shape(m, l, "ffn_up.weight", up, n_embd, n_ff, err, errlen) ||
        (gate && check_shape(m, l, "ffn_gate.weight", gate, n_embd, n_ff, err, errlen)) ||
        (down_t && check_shape(m, l, "ffn_down_t.weight", down_t, n_embd, n_ff, err, errlen)) ||
        (down && check_shape(m, l, "ffn_down.weight", down, n_ff, n_embd, err, errlen)))
        return -1;
    const gguf_tensor *rows[3] = { gate, up, down_t ? down_t : down };
    uint64_t sum = 0;
    for (int i = 0; i < 3; i++) {
        if (!rows[i])
            continue;
        uint32_t blck = ggml_blck_size(rows[i]->type);
        if (n_embd % blck) {
            snprintf(err, errlen, "%s: blk.%" PRIu32 ": a neuron's row of %" PRIu32 " %s elements is not whole "
                     "blocks of %" PRIu32, m->path, l, n_embd, ggml_type_name(rows[i]->type), blck);
            return -1;
        }
        sum += ggml_row_size(rows[i]->type, n_embd);
    }
    *out = sum;
    return 0;
}

int solve_budget_read(solve_budget *b, const gguf_file *m, uint32_t ctx, char *err, size_t errlen)
{
    memset(b, 0, sizeof *b);
    char *arch = NULL;
    if (gguf_get_str(m, "general.architecture", &arch) != 0) {
        snprintf(err, errlen, "%s: general.architecture is missing or not a string", m->path);
        return -1;
    }
    int rc = get_dim(m, arch, "block_count", &b->n_layer, err, errlen) ||
             get_dim(m, arch, "feed_forward_length", &b->n_ff, err, errlen) ||
             get_dim(m, arch, "embedding_length", &b->n_embd, err, errlen) ? -1 : 0;
    free(arch);
    if (rc)
        return -1;
    b->ctx = ctx;
    b->neuron_bytes = solve_alloc(b->n_layer * sizeof *b->neuron_bytes);
    for (uint32_t l = 0; l < b->n_layer; l++) {
        if (neuron_bytes(m, l, b->n_embd, b->n_ff, &b->neuron_bytes[l], err, errlen))
            goto fail;
        /* K and V of every position: the rows of attn_k and attn_v (GQA-aware). */
        const gguf_tensor *k = layer_tensor(m, l, "attn_k.weight"), *v = layer_tensor(m, l, "attn_v.weight");
        uint64_t kv_rows = (uint64_t)(k ? k->ne[1] : 0) + (uint64_t)(v ? v->ne[1] : 0);
        b->fixed[FIX_KV] += (uint64_t)ctx * kv_rows * KV_ELT_BYTES;
    }
    for (uint64_t i = 0; i < m->n_tensors; i++) {
        int part = classify(m, m->tensors[i].name);
        if (part >= 0)
            b->fixed[part] += m->tensors[i].nbytes;
    }
    for (int i = 0; i < FIX_COUNT; i++)
        b->fixed_total += b->fixed[i];
    return 0;
fail:
    solve_budget_free(b);
    return -1;
}

void solve_budget_free(solve_budget *b)
{
    free(b->neuron_bytes);
    b->neuron_bytes = NULL;
}

int solve_budget_capacity(const solve_budget *b, const char *model_path, uint64_t vram_budget,
                          uint64_t *capacity, char *err, size_t errlen)
{
    uint64_t used = 0;
    for (int i = 0; i < FIX_COUNT; i++) {
        if (used + b->fixed[i] <= vram_budget) {
            used += b->fixed[i];
            continue;
        }
        char sb[32], sf[32], sp[32];
        snprintf(err, errlen, "%s: --vram-budget %s is too small: the dense part needs %s before any FFN neuron "
                 "(it runs out at %s, %s)", model_path, hc_format_size(vram_budget, sb, sizeof sb),
                 hc_format_size(b->fixed_total, sf, sizeof sf), solve_fixed_names[i],
                 hc_format_size(b->fixed[i], sp, sizeof sp));
        return -1;
    }
    *capacity = vram_budget - used;
    return 0;
}

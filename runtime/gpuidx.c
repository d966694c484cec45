/* .gpuidx reader (see gpuidx.h). */
#include "gpuidx.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gguf.h"

/* t must be a 1-D I32 tensor of n elements (n < 0: any length). */
static const char *check_i32(const gguf_tensor *t, int64_t n, char *why, size_t len)
{
    if (t->type != GGML_TYPE_I32) {
        const char *tn = ggml_type_name(t->type);
        snprintf(why, len, "has type %s, expected I32", tn ? tn : "unknown");
        return why;
    }
    if (t->n_dims > 1) {
        snprintf(why, len, "has %u dimensions, expected 1", t->n_dims);
        return why;
    }
    if (n >= 0 && t->ne[0] != n) {
        snprintf(why, len, "has %lld elements, expected n_ff = %lld of the model", (long long)t->ne[0], (long long)n);
        return why;
    }
    return NULL;
}

hc_gpuidx *hc_gpuidx_load(const char *path, int n_layer, int n_ff, char *err, size_t errlen)
{
    gguf_file *f = gguf_open(path, err, errlen);
    if (!f) return NULL;
    hc_gpuidx *g = calloc(1, sizeof *g);
    int32_t *mark = malloc(sizeof *mark * (size_t)n_ff);
    char why[160];
#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); goto bad; } while (0)
    if (!g || !mark) BAD("%s: out of memory", path);
    g->n_layer = n_layer;
    g->n_ff = n_ff;
    int rc = gguf_get_u64(f, "split.vram_capacity", &g->vram_capacity);
    if (rc) BAD("%s: %s split.vram_capacity (u64): not a PowerInfer GPU index", path,
                rc == -1 ? "missing key" : "wrong type of key");
    char *hash = NULL, *end = NULL;
    rc = gguf_get_str(f, "hotcold.solve.model_ffn_hash", &hash);
    if (rc == 0) g->model_ffn_hash = strlen(hash) == 16 && isxdigit((unsigned char)hash[0]) ? strtoull(hash, &end, 16) : 0;
    int bad_hash = rc == -2 || (rc == 0 && (!end || *end || !g->model_ffn_hash));
    free(hash);
    if (bad_hash) BAD("%s: hotcold.solve.model_ffn_hash is not 16 hex digits", path);
    uint32_t blocks;
    rc = gguf_get_u32(f, "generic.gpu_index.block_count", &blocks);
    if (rc == -2) BAD("%s: generic.gpu_index.block_count is not a u32", path);
    if (rc == 0 && blocks != (uint32_t)n_layer) BAD("%s: index for %u layers, the model has %d", path, blocks, n_layer);
    if (f->n_tensors != 2 * (uint64_t)n_layer)
        BAD("%s: %llu tensors, expected 2 per layer = %d (the number of gpu splits does not match the "
            "layers of the model)", path, (unsigned long long)f->n_tensors, 2 * n_layer);
    g->n_gpu = calloc((size_t)n_layer, sizeof *g->n_gpu);
    g->bucket = calloc((size_t)n_layer, sizeof *g->bucket);
    if (!g->n_gpu || !g->bucket) BAD("%s: out of memory", path);
    for (int l = 0; l < n_layer; l++) {
        /* By position, as PowerInfer: tensor 2l is gpu_idx, 2l+1 gpu_bucket. */
        const gguf_tensor *ti = &f->tensors[2 * l], *tb = &f->tensors[2 * l + 1];
        if (check_i32(ti, n_ff, why, sizeof why)) BAD("%s: tensor %s (gpu_idx of layer %d) %s", path, ti->name, l, why);
        if (check_i32(tb, -1, why, sizeof why)) BAD("%s: tensor %s (gpu_bucket of layer %d) %s", path, tb->name, l, why);
        memcpy(mark, ti->data, sizeof *mark * (size_t)n_ff);
        int k = 0;
        for (int j = 0; j < n_ff; j++) {
            if (mark[j] != 0 && mark[j] != 1) BAD("%s: %s[%d] = %d, expected 0 or 1", path, ti->name, j, mark[j]);
            k += mark[j];
        }
        if (tb->ne[0] != k) BAD("%s: %s has %lld neurons but %s marks %d", path, tb->name, (long long)tb->ne[0], ti->name, k);
        g->n_gpu[l] = k;
        g->bucket[l] = malloc(sizeof(int32_t) * (size_t)(k ? k : 1));
        if (!g->bucket[l]) BAD("%s: out of memory", path);
        memcpy(g->bucket[l], tb->data, sizeof(int32_t) * (size_t)k);
        for (int i = 0; i < k; i++) {
            int32_t v = g->bucket[l][i];
            const char *bad = v < 0 || v >= n_ff ? "is out of range"
                            : i > 0 && v <= g->bucket[l][i - 1] ? "is not ascending"
                            : !mark[v] ? "is not marked in gpu_idx" : NULL;
            if (bad) BAD("%s: %s[%d] = %d %s (n_ff %d)", path, tb->name, i, v, bad, n_ff);
        }
    }
#undef BAD
    free(mark);
    gguf_close(f);
    return g;
bad:
    free(mark);
    hc_gpuidx_free(g);
    gguf_close(f);
    return NULL;
}

void hc_gpuidx_free(hc_gpuidx *g)
{
    if (!g) return;
    for (int l = 0; g->bucket && l < g->n_layer; l++) free(g->bucket[l]);
    free(g->bucket);
    free(g->n_gpu);
    free(g);
}

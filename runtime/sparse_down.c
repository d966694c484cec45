/* The down projection as one contiguous row of n_embd per neuron, so that
 * skipping a neuron skips its bytes (PowerInfer's ffn_down_t).
 *
 * A PWRI file's ffn_down_t is used as it is. Otherwise ffn_down {n_ff, n_embd}
 * is transposed at load: F32, F16 and BF16 element by element (exact, same
 * type). Q8_0 and Q4_0 blocks run along n_ff and cannot be moved: their
 * values are dequantized (exact in f32) and each neuron's row is quantized
 * again to Q8_0 with ggml's reference quantizer (quants.h). Q8_0 rather than
 * Q4_0 for both because a second 4-bit rounding would double the error of the
 * first one; re-rounding to 8 bits adds at most half a step of 1/127 of each
 * 32-block's largest value. Rows of n_embd not a multiple of 32 stay F32. */
#include "sparse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml_types.h"
#include "quants.h"

/* The down projection of a layer must be ggml rows (checked for all layers
 * before anything is made). */
static int check_down(const hc_model *m, int layer, char *err, size_t errlen)
{
    const hc_layer *ly = &m->layers[layer];
    int t = ly->ffn_down_t.kind != HC_WEIGHT_NONE;
    const hc_weight *w = t ? &ly->ffn_down_t : &ly->ffn_down;
    if (w->kind == HC_WEIGHT_GGML) return 0;
    snprintf(err, errlen, "%s: blk.%d.%s.weight is %s; the sparse FFN needs ggml rows for the down projection%s",
             m->path, layer, t ? "ffn_down_t" : "ffn_down",
             w->kind == HC_WEIGHT_GPTQ ? "INT4-GPTQ" : "not stored as ggml rows",
             w->kind == HC_WEIGHT_GPTQ ? " (no GPTQ sparse kernels)" : "");
    return -1;
}

int hc_sparse_check(const hc_model *m, char *err, size_t errlen)
{
    for (int l = 0; l < m->hp.n_layer; l++)
        if (check_down(m, l, err, errlen)) return -1;
    return 0;
}

int hc_sparse_down_rows(const hc_model *m, int layer, hc_weight *out, void **owned, char *err, size_t errlen)
{
    const hc_layer *ly = &m->layers[layer];
    int E = m->hp.n_embd, F = m->hp.n_ff;
    *owned = NULL;
    if (check_down(m, layer, err, errlen)) return -1;
    if (ly->ffn_down_t.kind != HC_WEIGHT_NONE) {
        *out = ly->ffn_down_t;
        return 0;
    }
    const hc_weight *w = &ly->ffn_down;
    uint32_t type = w->type;
    int quant = type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0;
    if (quant) type = E % QK8_0 ? GGML_TYPE_F32 : GGML_TYPE_Q8_0;
    size_t rb = ggml_row_size(type, E);
    char *dst = malloc(rb * (size_t)F);
    float *col = quant ? malloc(sizeof(float) * (size_t)E * F) : NULL;
    if (!dst || (quant && !col)) {
        free(dst);
        free(col);
        snprintf(err, errlen, "%s: out of memory transposing blk.%d.ffn_down.weight", m->path, layer);
        return -1;
    }
    if (quant) {
        /* col[e * F + j] = down[e][j]; then neuron j's row is col[. * F + j]. */
        for (int e = 0; e < E; e++) hc_weight_row(w, e, col + (size_t)e * F);
        float *row = malloc(sizeof(float) * (size_t)E);
        if (!row) {
            free(dst);
            free(col);
            snprintf(err, errlen, "%s: out of memory", m->path);
            return -1;
        }
        for (int j = 0; j < F; j++) {
            for (int e = 0; e < E; e++) row[e] = col[(size_t)e * F + j];
            if (type == GGML_TYPE_Q8_0) quantize_row_q8_0_ref(row, (block_q8_0 *)(dst + (size_t)j * rb), E);
            else memcpy(dst + (size_t)j * rb, row, rb);
        }
        free(row);
        free(col);
    } else {
        /* F32: 4-byte elements; F16, BF16: 2-byte elements (bit copies), in
         * 64 x 64 blocks so that both sides stay in cache. */
        enum { TB = 64 };
        for (int e0 = 0; e0 < E; e0 += TB)
            for (int j0 = 0; j0 < F; j0 += TB) {
                int e1 = e0 + TB < E ? e0 + TB : E, j1 = j0 + TB < F ? j0 + TB : F;
                for (int e = e0; e < e1; e++) {
                    if (type == GGML_TYPE_F32) {
                        const uint32_t *src = (const uint32_t *)w->data + (size_t)e * F;
                        for (int j = j0; j < j1; j++) ((uint32_t *)dst)[(size_t)j * E + e] = src[j];
                    } else {
                        const uint16_t *src = (const uint16_t *)w->data + (size_t)e * F;
                        for (int j = j0; j < j1; j++) ((uint16_t *)dst)[(size_t)j * E + e] = src[j];
                    }
                }
            }
    }
    *out = (hc_weight){ .kind = HC_WEIGHT_GGML, .type = type, .data = dst, .n = E, .rows = F };
    *owned = dst;
    return 0;
}

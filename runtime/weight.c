/* Dispatch of weight products on the storage kind (see weight.h). */
#include "weight.h"

#include <stdlib.h>
#include "ggml_types.h"
#include "kernels.h"
#include "kernels_gptq.h"

size_t hc_weight_act_bytes(const hc_weight *w)
{
    switch (w->kind) {
    case HC_WEIGHT_GGML: return hc_act_bytes(w->type, w->n);
    case HC_WEIGHT_GPTQ: return hc_gptq_act_bytes(w->ext);
    default: abort();
    }
}

void hc_weight_act_prepare(const hc_weight *w, const float *x, void *act)
{
    switch (w->kind) {
    case HC_WEIGHT_GGML: hc_act_prepare(w->type, x, w->n, act); return;
    case HC_WEIGHT_GPTQ: hc_gptq_act_prepare(w->ext, x, act); return;
    default: abort();
    }
}

int hc_weight_same_act(const hc_weight *a, const hc_weight *b)
{
    if (a->kind == HC_WEIGHT_GPTQ && b->kind == HC_WEIGHT_GPTQ) return hc_gptq_same_act(a->ext, b->ext);
    return a->kind == b->kind && a->type == b->type && a->n == b->n && a->kind == HC_WEIGHT_GGML;
}

void hc_weight_matvec(const hc_weight *w, int row0, int row1, const void *acts,
                      size_t act_stride, int B, float *y, size_t y_stride)
{
    switch (w->kind) {
    case HC_WEIGHT_GGML:
        hc_matvec(w->type, w->data, w->n, row0, row1, acts, act_stride, B, y, y_stride);
        return;
    case HC_WEIGHT_GPTQ: hc_gptq_matvec(w->ext, row0, row1, acts, act_stride, B, y, y_stride); return;
    default: abort();
    }
}

void hc_weight_matvec_rows(const hc_weight *w, const int32_t *idx, int k, const void *act, float *y)
{
    switch (w->kind) {
    case HC_WEIGHT_GGML: hc_matvec_rows(w->type, w->data, w->n, idx, k, act, y); return;
    case HC_WEIGHT_GPTQ:
        for (int i = 0; i < k; i++) hc_gptq_matvec(w->ext, idx[i], idx[i] + 1, act, 0, 1, y + i, 0);
        return;
    default: abort();
    }
}

void hc_weight_row(const hc_weight *w, int r, float *out)
{
    switch (w->kind) {
    case HC_WEIGHT_GGML:
        hc_row_to_f32(w->type, (const char *)w->data + (size_t)r * ggml_row_size(w->type, w->n), w->n, out);
        return;
    case HC_WEIGHT_GPTQ: hc_gptq_row(w->ext, r, out); return;
    default: abort();
    }
}

size_t hc_weight_bytes(const hc_weight *w)
{
    switch (w->kind) {
    case HC_WEIGHT_NONE: return 0;
    case HC_WEIGHT_GGML: return (size_t)w->rows * ggml_row_size(w->type, w->n);
    case HC_WEIGHT_GPTQ: return hc_gptq_bytes(w->ext);
    default: abort();
    }
}

/* The feed-forward block: all neurons (dense) or a subset (hot/cold split).
 * down(act(gate·x) * (up·x)), with act = SiLU (SwiGLU) or ReLU. */
#include "forward.h"

#include <math.h>
#include <string.h>
#include "ggml_types.h"
#include "kernels.h"

#define ROW_UNIT 16      /* listed rows per chunk unit */
#define COL_UNIT 32      /* a quant block: column ranges start on block boundaries */

void hc_ffn_act(int act, float *gate, const float *up, int n)
{
    if (act == HC_ACT_RELU) {
        for (int i = 0; i < n; i++) gate[i] = (gate[i] > 0.0f ? gate[i] : 0.0f) * up[i];
    } else {
        for (int i = 0; i < n; i++) {
            float val = gate[i];
            val *= (1.0f / (1.0f + expf(-val)));
            gate[i] = val * up[i];
        }
    }
}

typedef struct {
    const hc_weight *w;      /* one row of n_embd per neuron */
    const int32_t *idx;      /* NULL: neurons 0..k-1 */
    const float *h;          /* [B][h_stride], value i belongs to neuron idx[i] (or i) */
    size_t h_stride;
    int k, B, n_chunks;
    float *out;              /* [B][n_embd] += */
} down_rows_task;

/* A chunk is a column range of the output, to which the neurons are added in
 * list order, so the sums are the same for any thread count. Zero
 * activations (ReLU) skip their row. */
static void down_rows_run(void *arg, int chunk, int ith)
{
    const down_rows_task *t = arg;
    int E = t->w->n, lo, hi;
    (void)ith;
    hc_split(E, COL_UNIT, chunk, t->n_chunks, &lo, &hi);
    if (lo >= hi) return;
    size_t row_bytes = ggml_row_size(t->w->type, E), off = ggml_row_size(t->w->type, lo);
    for (int b = 0; b < t->B; b++) {
        const float *h = t->h + (size_t)b * t->h_stride;
        float *y = t->out + (size_t)b * E + lo;
        for (int i = 0; i < t->k; i++) {
            if (h[i] == 0.0f) continue;
            size_t r = (size_t)(t->idx ? t->idx[i] : i);
            hc_axpy_row(t->w->type, (const char *)t->w->data + r * row_bytes + off, hi - lo, h[i], y);
        }
    }
}

void hc_ctx_down_accum(hc_ctx *ctx, const hc_weight *w, const int32_t *idx, const float *h, size_t h_stride,
                       int k, int B, float *out)
{
    if (k <= 0) return;
    size_t work = (size_t)k * (size_t)w->n * (size_t)B;
    int nc = hc_pool_chunks(ctx->pool, (w->n + COL_UNIT - 1) / COL_UNIT, work);
    down_rows_task t = { w, idx, h, h_stride, k, B, nc, out };
    hc_pool_run(ctx->pool, down_rows_run, &t, nc);
}

typedef struct {
    const hc_weight *w;
    const int32_t *idx;
    const void *acts;
    size_t act_stride, y_stride;
    int k, B, n_chunks;
    float *y;
} rows_task;

static void rows_run(void *arg, int chunk, int ith)
{
    const rows_task *t = arg;
    int lo, hi;
    (void)ith;
    hc_split(t->k, ROW_UNIT, chunk, t->n_chunks, &lo, &hi);
    if (lo >= hi) return;
    for (int b = 0; b < t->B; b++)
        hc_weight_matvec_rows(t->w, t->idx + lo, hi - lo, (const char *)t->acts + (size_t)b * t->act_stride,
                              t->y + (size_t)b * t->y_stride + lo);
}

void hc_ctx_matvec_rows(hc_ctx *ctx, const hc_weight *w, const int32_t *idx, int k, const void *acts, int B,
                        float *y, size_t y_stride)
{
    if (k <= 0) return;
    size_t work = (size_t)k * (size_t)w->n * (size_t)B;
    int nc = hc_pool_chunks(ctx->pool, (k + ROW_UNIT - 1) / ROW_UNIT, work);
    rows_task t = { w, idx, acts, ctx->act_stride, y_stride, k, B, nc, y };
    hc_pool_run(ctx->pool, rows_run, &t, nc);
}

/* gate and up of B rows into ctx->gate / ctx->up ([B][n_ff]), through f. */
static void gate_up(hc_ctx *ctx, const hc_layer *ly, const float *x_norm, int B,
                    void (*f)(hc_ctx *, const hc_weight *, const void *, int, float *, void *), void *arg)
{
    size_t need = hc_weight_act_bytes(&ly->ffn_gate);
    if (hc_weight_act_bytes(&ly->ffn_up) > need) need = hc_weight_act_bytes(&ly->ffn_up);
    void *ag = hc_ctx_acts(ctx, 0, need), *au = ag;
    hc_prepare(ctx, &ly->ffn_gate, x_norm, B, ag);
    if (!hc_weight_same_act(&ly->ffn_gate, &ly->ffn_up)) {
        au = hc_ctx_acts(ctx, 1, need);
        hc_prepare(ctx, &ly->ffn_up, x_norm, B, au);
    }
    f(ctx, &ly->ffn_gate, ag, B, ctx->gate, arg);
    f(ctx, &ly->ffn_up, au, B, ctx->up, arg);
}

static void all_rows(hc_ctx *ctx, const hc_weight *w, const void *acts, int B, float *y, void *arg)
{
    (void)arg;
    hc_matvec_prepared(ctx, w, acts, B, y, (size_t)w->rows);
}

void hc_ffn_dense(hc_ctx *ctx, int layer, const float *x_norm, int B, float *out)
{
    const hc_hparams *hp = &ctx->model->hp;
    const hc_layer *ly = &ctx->model->layers[layer];
    int F = hp->n_ff, E = hp->n_embd;
    gate_up(ctx, ly, x_norm, B, all_rows, NULL);
    for (int b = 0; b < B; b++) hc_ffn_act(hp->act, ctx->gate + (size_t)b * F, ctx->up + (size_t)b * F, F);
    hc_hook_call(ctx, layer, HC_HOOK_FFN_ACT, ctx->gate, B, F, ctx->cur_pos0);
    if (ly->ffn_down.kind != HC_WEIGHT_NONE) {
        hc_ctx_matvec(ctx, &ly->ffn_down, ctx->gate, B, out);
    } else {
        memset(out, 0, sizeof(float) * (size_t)B * E);
        hc_ctx_down_accum(ctx, &ly->ffn_down_t, NULL, ctx->gate, (size_t)F, F, B, out);
    }
}

typedef struct {
    const int32_t *idx;
    int k, F;
} row_list;

static void listed_rows(hc_ctx *ctx, const hc_weight *w, const void *acts, int B, float *y, void *arg)
{
    const row_list *sel = arg;
    hc_ctx_matvec_rows(ctx, w, sel->idx, sel->k, acts, B, y, (size_t)sel->F);
}

void hc_ffn_partial(hc_ctx *ctx, int layer, const float *x_norm, int B,
                    const int32_t *idx, int k, float *out_accum, float *h)
{
    const hc_hparams *hp = &ctx->model->hp;
    const hc_layer *ly = &ctx->model->layers[layer];
    int F = hp->n_ff, E = hp->n_embd;
    if (k <= 0) return;
    row_list sel = { idx, k, F };
    gate_up(ctx, ly, x_norm, B, listed_rows, &sel);
    for (int b = 0; b < B; b++) {
        float *g = ctx->gate + (size_t)b * F;
        hc_ffn_act(hp->act, g, ctx->up + (size_t)b * F, k);
        if (h) memcpy(h + (size_t)b * k, g, sizeof(float) * (size_t)k);
    }
    if (ly->ffn_down_t.kind != HC_WEIGHT_NONE) {
        hc_ctx_down_accum(ctx, &ly->ffn_down_t, idx, ctx->gate, (size_t)F, k, B, out_accum);
        return;
    }
    /* Column access into ffn_down: scatter h over a zeroed n_ff vector and
     * run the dense product (exact; reads every weight). */
    memset(ctx->up, 0, sizeof(float) * (size_t)B * F);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < k; i++) ctx->up[(size_t)b * F + idx[i]] = ctx->gate[(size_t)b * F + i];
    hc_ctx_matvec(ctx, &ly->ffn_down, ctx->up, B, ctx->part);
    for (size_t i = 0; i < (size_t)B * E; i++) out_accum[i] += ctx->part[i];
}

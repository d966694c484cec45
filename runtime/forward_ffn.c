/* The feed-forward block: all neurons (dense) or a subset (hot/cold split).
 * down(act(gate·x) * (up·x)), with act = SiLU (SwiGLU) or ReLU. */
#include "forward.h"

#include <math.h>
#include <string.h>

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

/* gate and up of B rows into ctx->gate / ctx->up ([B][n_ff]), through f. */
static void gate_up(hc_ctx *ctx, const hc_layer *ly, const float *x_norm, int B,
                    void (*f)(hc_ctx *, const hc_weight *, const void *, int, float *, void *), void *arg)
{
    void *ag, *au;
    hc_ctx_prepare_gate_up(ctx, ly, x_norm, B, &ag, &au);
    f(ctx, &ly->ffn_gate, ag, B, ctx->gate, arg);
    f(ctx, &ly->ffn_up, au, B, ctx->up, arg);
}

static void all_rows(hc_ctx *ctx, const hc_weight *w, const void *acts, int B, float *y, void *arg)
{
    (void)arg;
    hc_ctx_matvec_prepared(ctx, w, acts, B, y, (size_t)w->rows);
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

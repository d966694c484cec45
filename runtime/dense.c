/* The dense FFN: every neuron of a layer, the context's FFN unless
 * hc_ctx_params.ffn replaces it. Gated (hc_ffn_kind HC_FFN_GATED):
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

/* The gated FFN; the activations are made in h when the context wants them. */
static void gated(hc_ctx *ctx, int layer, const float *x_norm, int B, float *out, float *h)
{
    const hc_hparams *hp = &hc_ctx_model(ctx)->hp;
    const hc_layer *ly = &hc_ctx_model(ctx)->layers[layer];
    int F = hp->n_ff, E = hp->n_embd;
    float *G = h ? h : hc_ctx_ffn_scratch(ctx, 0), *U = hc_ctx_ffn_scratch(ctx, 1);
    void *ag, *au;
    hc_ctx_prepare_gate_up(ctx, ly, x_norm, B, &ag, &au);
    hc_ctx_matvec_prepared(ctx, &ly->ffn_gate, ag, B, G, (size_t)F);
    hc_ctx_matvec_prepared(ctx, &ly->ffn_up, au, B, U, (size_t)F);
    for (int b = 0; b < B; b++) hc_ffn_act(hp->act, G + (size_t)b * F, U + (size_t)b * F, F);
    if (ly->ffn_down.kind != HC_WEIGHT_NONE) {
        hc_ctx_matvec(ctx, &ly->ffn_down, G, B, out);
    } else {
        memset(out, 0, sizeof(float) * (size_t)B * E);
        hc_ctx_down_accum(ctx, &ly->ffn_down_t, NULL, G, (size_t)F, F, B, out);
    }
}

void hc_ffn_dense(hc_ctx *ctx, int layer, const float *x_norm, int B, float *out, float *h)
{
    switch ((enum hc_ffn_kind)hc_ctx_model(ctx)->hp.ffn_kind) {
    case HC_FFN_GATED:
        gated(ctx, layer, x_norm, B, out, h);
        break;
    }
}

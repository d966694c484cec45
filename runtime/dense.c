/* The dense FFN: every neuron of a layer, the context's FFN unless
 * hc_ctx_params.ffn replaces it, for each hc_ffn_kind: gated
 * down(act(gate·x) * (up·x)) (LLaMA: SiLU = SwiGLU, or ReLU), symmetric
 * down(act(gate·x) * act(up·x)) (Bamboo's dReLU), sequential
 * down(act(up·x + b)) (OPT, Falcon), each product with its bias if any. */
#include "forward.h"

#include <math.h>
#include <string.h>

float hc_act1(int act, float x)
{
    switch ((enum hc_act)act) {
    case HC_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case HC_ACT_GELU: return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2));
    case HC_ACT_SILU: break;
    }
    return x * (1.0f / (1.0f + expf(-x)));
}

void hc_ffn_act(int act, float *gate, const float *up, int n)
{
    for (int i = 0; i < n; i++) gate[i] = hc_act1(act, gate[i]) * up[i];
}

/* out = down · H (+ its bias), through ffn_down or PWRI's ffn_down_t rows. */
static void down(hc_ctx *ctx, const hc_layer *ly, const float *H, int B, float *out)
{
    const hc_hparams *hp = &hc_ctx_model(ctx)->hp;
    if (ly->ffn_down.kind != HC_WEIGHT_NONE) {
        hc_ctx_matvec(ctx, &ly->ffn_down, H, B, out);
    } else {
        memset(out, 0, sizeof(float) * (size_t)B * (size_t)hp->n_embd);
        hc_ctx_down_accum(ctx, &ly->ffn_down_t, NULL, H, (size_t)hp->n_ff, hp->n_ff, B, out);
    }
    hc_add_bias(out, ly->ffn_down_b, B, hp->n_embd);
}

typedef struct {
    const hc_hparams *hp;
    const hc_layer *ly;
    float *H, *U;
} act_task;

/* Rows [lo, hi) of H (and U): the biases, then the FFN kind's activation. */
static void act_range(void *arg, int lo, int hi)
{
    const act_task *t = arg;
    const hc_hparams *hp = t->hp;
    const hc_layer *ly = t->ly;
    int F = hp->n_ff, B = hi - lo;
    size_t n = (size_t)B * (size_t)F;
    float *H = t->H + (size_t)lo * (size_t)F, *U = t->U + (size_t)lo * (size_t)F;
    enum hc_ffn_kind kind = (enum hc_ffn_kind)hp->ffn_kind;
    if (kind != HC_FFN_SEQUENTIAL) {
        hc_add_bias(H, ly->ffn_gate_b, B, F);
        hc_add_bias(U, ly->ffn_up_b, B, F);
    }
    switch (kind) {
    case HC_FFN_GATED:
        if (hp->act_threshold > 0)   /* FATReLU: below the threshold the neuron is off */
            for (size_t i = 0; i < n; i++) if (H[i] < hp->act_threshold) H[i] = 0.0f;
        hc_ffn_act(hp->act, H, U, (int)n);
        break;
    case HC_FFN_SYMMETRIC:
        for (size_t i = 0; i < n; i++) H[i] = hc_act1(hp->act, H[i]) * hc_act1(hp->act, U[i]);
        break;
    case HC_FFN_SEQUENTIAL:
        hc_add_bias(H, ly->ffn_up_b, B, F);
        for (size_t i = 0; i < n; i++) H[i] = hc_act1(hp->act, H[i]);
        break;
    }
}

void hc_ffn_neurons(hc_ctx *ctx, int layer, const float *x_norm, int B, float *H)
{
    const hc_hparams *hp = &hc_ctx_model(ctx)->hp;
    const hc_layer *ly = &hc_ctx_model(ctx)->layers[layer];
    int F = hp->n_ff;
    float *U = hc_ctx_ffn_scratch(ctx, 1);
    if ((enum hc_ffn_kind)hp->ffn_kind == HC_FFN_SEQUENTIAL) {
        hc_ctx_matvec(ctx, &ly->ffn_up, x_norm, B, H);
    } else {
        void *ag, *au;
        hc_ctx_prepare_gate_up(ctx, ly, x_norm, B, &ag, &au);
        hc_ctx_matvec_prepared(ctx, &ly->ffn_gate, ag, B, H, (size_t)F);
        hc_ctx_matvec_prepared(ctx, &ly->ffn_up, au, B, U, (size_t)F);
    }
    /* elementwise, so the rows split over the pool (SiLU's expf: 1.3 % of a
     * 128-token prompt at one thread, serial before) */
    act_task t = { hp, ly, H, U };
    hc_pool_ranges(hc_ctx_pool(ctx), act_range, &t, B, (size_t)B * (size_t)F * 8);
}

void hc_ffn_dense(hc_ctx *ctx, int layer, const float *x_norm, int B, float *out, float *h)
{
    float *H = h ? h : hc_ctx_ffn_scratch(ctx, 0);
    hc_ffn_neurons(ctx, layer, x_norm, B, H);
    down(ctx, &hc_ctx_model(ctx)->layers[layer], H, B, out);
}

/* The dense FFN: every neuron of a layer, the context's FFN unless
 * hc_ctx_params.ffn replaces it, for each hc_ffn_kind: gated
 * down(act(gate·x) * (up·x)) (LLaMA: SiLU = SwiGLU, or ReLU), symmetric
 * down(act(gate·x) * act(up·x)) (Bamboo's dReLU), sequential
 * down(act(up·x + b)) (OPT, Falcon), each product with its bias if any;
 * on the backend its layer's FFN runs on (backend.h). */
#include "cpu/cpu.h"
#include "ctx_internal.h"
#include "forward.h"

#include <string.h>

float hc_act1(int act, float x)
{
    switch ((enum hc_act)act) {
    case HC_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case HC_ACT_GELU: return hc_cpu_gelu(x);
    case HC_ACT_SILU: break;
    }
    return hc_cpu_silu(x);
}

/* H[B][n_ff] = every neuron's activation (one row: in one step where the
 * backend can); U: up's scratch. */
static void neurons(hc_ctx *ctx, hc_backend *be, const hc_blayer *ly, hc_view xn, int B, hc_view H, hc_view U)
{
    const hc_hparams *hp = &ctx->model->hp;
    size_t F = (size_t)hp->n_ff;
    if (B == 1 && be->ops->ffn_neurons && !be->ops->ffn_neurons(be, hp, ly, xn, H)) return;
    if ((enum hc_ffn_kind)hp->ffn_kind == HC_FFN_SEQUENTIAL) {
        be->ops->matmul(be, xn, B, &(hc_mm){ &ly->up, 0, 0, H, F, 0 }, 1);
    } else {
        hc_mm gu[2] = { { &ly->gate, 0, 0, H, F, 0 }, { &ly->up, 0, 0, U, F, 0 } };
        be->ops->matmul(be, xn, B, gu, 2);
    }
    be->ops->ffn_act(be, hp, &ly->gate_b, &ly->up_b, H, U, B);
}

void hc_ffn_dense_on(hc_ctx *ctx, const hc_rows *R, const hc_blayer *ly, hc_view xn, int B, hc_view H, hc_view out,
                     int add)
{
    hc_backend *be = R->be;
    neurons(ctx, be, ly, xn, B, H, R->ffn[1]);
    /* out = down · H (or out += it), through ffn_down or PWRI's ffn_down_t rows */
    be->ops->matmul(be, H, B, &(hc_mm){ &ly->down, 0, ly->down_t, out, (size_t)ctx->model->hp.n_embd, add }, 1);
    be->ops->add_bias(be, out, &ly->down_b, B, ctx->model->hp.n_embd);
}

void hc_ffn_neurons(hc_ctx *ctx, int layer, const float *x_norm, int B, float *H)
{
    const hc_rows *C = &ctx->rows[HC_ON_CPU];
    neurons(ctx, C->be, &ctx->layers[layer], hc_cpu_view(x_norm), B, hc_cpu_view(H), C->ffn[1]);
}

void hc_ffn_dense(hc_ctx *ctx, int layer, const float *x_norm, int B, float *out, float *h)
{
    const hc_rows *C = &ctx->rows[HC_ON_CPU];
    hc_view H = h ? hc_cpu_view(h) : C->ffn[0];
    hc_ffn_dense_on(ctx, C, &ctx->layers[layer], hc_cpu_view(x_norm), B, H, hc_cpu_view(out), 0);
}

/* Building blocks of the forward pass shared by forward.c, the FFNs
 * (dense.c, sparse.c) and the threaded products: the threaded products of
 * matmul.h, an FFN's scratch. Not needed by programs, which use model.h; none
 * of it exposes the context's fields (ctx_internal.h). */
#ifndef HC_FORWARD_H
#define HC_FORWARD_H

#include "backend.h"
#include "matmul.h"
#include "model.h"

/* Scratch 0 or 1 of the FFN being run: [n_batch][n_ff] floats each, its
 * own during its call (the context uses neither), contents undefined. */
float *hc_ctx_ffn_scratch(hc_ctx *ctx, int which);
/* Bytes between the prepared activations of hc_ctx_acts / hc_ctx_prepare (matmul.h). */
size_t hc_ctx_act_stride(const hc_ctx *ctx);
/* During an FFN's call for a layer whose residual stream is on a device
 * (x and its norm read back for it): a view of that backend where the FFN
 * may leave a share of its out[B][n_embd], and say so with
 * hc_ctx_ffn_left_on_device; out then holds the rest, and the forward pass
 * adds the two on the device (the hybrid FFN's hot rows: one exchange per
 * layer). A view of no buffer otherwise. */
hc_view hc_ctx_ffn_device_share(const hc_ctx *ctx);
void hc_ctx_ffn_left_on_device(hc_ctx *ctx);
/* H[B][n_ff] = every neuron's activation (the input of down) of the layer's
 * FFN kind, as the dense FFN computes it; uses FFN scratch 1. */
void hc_ffn_neurons(hc_ctx *ctx, int layer, const float *x_norm, int B, float *H);
/* act(x) for enum hc_act, as the CPU's vectors compute it (cpu/vmath.h:
 * SiLU within 3.5 ulp of x / (1 + e^-x), GELU with its own erf). */
float hc_act1(int act, float x);
/* y[B][n] += bias (NULL: none): the biases of q/k/v/o and of the FFN's matrices. */
void hc_add_bias(float *y, const float *bias, int B, int n);

#endif

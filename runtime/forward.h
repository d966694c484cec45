/* Building blocks of the forward pass shared by forward.c, the FFNs
 * (dense.c, sparse.c) and the threaded products: the threaded products of
 * matmul.h, an FFN's scratch. Not needed by programs, which use model.h; none
 * of it exposes the context's fields (ctx_internal.h). */
#ifndef HC_FORWARD_H
#define HC_FORWARD_H

#include "matmul.h"
#include "model.h"

/* Scratch 0 or 1 of the FFN being run: [n_batch][n_ff] floats each, its
 * own during its call (the context uses neither), contents undefined. */
float *hc_ctx_ffn_scratch(hc_ctx *ctx, int which);
/* Bytes between the prepared activations of hc_ctx_acts / hc_ctx_prepare (matmul.h). */
size_t hc_ctx_act_stride(const hc_ctx *ctx);
/* H[B][n_ff] = every neuron's activation (the input of down) of the layer's
 * FFN kind, as the dense FFN computes it; uses FFN scratch 1. */
void hc_ffn_neurons(hc_ctx *ctx, int layer, const float *x_norm, int B, float *H);
/* act(x) for enum hc_act (SiLU written as run.c, GELU with erf). */
float hc_act1(int act, float x);
/* h = act(gate) * up over n values, in place of gate: the gated FFN's
 * neuron (hc_ffn_kind HC_FFN_GATED). */
void hc_ffn_act(int act, float *gate, const float *up, int n);
/* y[B][n] += bias (NULL: none): the biases of q/k/v/o and of the FFN's matrices. */
void hc_add_bias(float *y, const float *bias, int B, int n);

#endif

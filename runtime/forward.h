/* Building blocks of the forward pass shared by forward.c, the FFNs
 * (dense.c, sparse.c) and the threaded products: prepared activations,
 * threaded products, an FFN's scratch. Not needed by programs, which use
 * model.h; none of it exposes the context's fields (ctx_internal.h). */
#ifndef HC_FORWARD_H
#define HC_FORWARD_H

#include "model.h"

/* Scratch 0 or 1 of the FFN being run: [n_batch][n_ff] floats each, its
 * own during its call (the context uses neither), contents undefined. */
float *hc_ctx_ffn_scratch(hc_ctx *ctx, int which);
/* Bytes between the prepared activations of hc_ctx_acts / hc_prepare. */
size_t hc_ctx_act_stride(const hc_ctx *ctx);
/* Activation buffer 0 or 1 ([n_batch] vectors of ctx->act_stride bytes),
 * grown (contents lost) when a weight needs more than stride bytes. */
void *hc_ctx_acts(hc_ctx *ctx, int second, size_t stride);
/* Prepare B rows x[B][w->n] for w into acts (stride ctx->act_stride). */
void hc_prepare(hc_ctx *ctx, const hc_weight *w, const float *x, int B, void *acts);
/* The prepared x_norm rows for ffn_gate (*ag) and ffn_up (*au; the same buffer
 * when both weights take the same activation form). */
void hc_prepare_gate_up(hc_ctx *ctx, const hc_layer *ly, const float *x_norm, int B, void **ag, void **au);
/* y[b*y_stride + r] = row r of w · activation b, threads split over rows. */
void hc_matvec_prepared(hc_ctx *ctx, const hc_weight *w, const void *acts, int B, float *y, size_t y_stride);
/* y[b*y_stride + i] = row idx[i] of w · activation b (B prepared activations,
 * ctx->act_stride apart), i < k; threads split over the list. */
void hc_ctx_matvec_rows(hc_ctx *ctx, const hc_weight *w, const int32_t *idx, int k, const void *acts, int B,
                        float *y, size_t y_stride);
/* out[b][w->n] += sum over i < k of h[b*h_stride + i] · row idx[i] of w (row i
 * when idx is NULL), w one row of n_embd per neuron (ffn_down_t). Threads split
 * over columns and add in list order: the same sums for any thread count. */
void hc_ctx_down_accum(hc_ctx *ctx, const hc_weight *w, const int32_t *idx, const float *h, size_t h_stride,
                       int k, int B, float *out);
/* h = act(gate) * up over n values (SiLU written as run.c): the gated FFN's
 * neuron (hc_ffn_kind HC_FFN_GATED). */
void hc_ffn_act(int act, float *gate, const float *up, int n);

#endif

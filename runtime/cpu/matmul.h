/* Threaded products: the layer between the forward pass and the kernels.
 * Each function takes the context for its thread pool and its prepared
 * activation buffers, cuts the work into chunks of whole row (or column)
 * units that do not depend on the thread count, and runs every chunk through
 * the weight type's kernels (kernels.h), so results are the same bits for
 * any -t. Not needed by programs, which use model.h. */
#ifndef HC_MATMUL_H
#define HC_MATMUL_H

#include "model.h"
#include "threads.h"

/* Activation buffer 0 or 1 ([n_batch] vectors of hc_ctx_act_stride(ctx) bytes),
 * grown (contents lost) when a weight needs more than stride bytes. */
void *hc_ctx_acts(hc_ctx *ctx, int second, size_t stride);
/* Prepare B rows x[B][w->n] for w into acts (stride hc_ctx_act_stride(ctx)). */
void hc_ctx_prepare(hc_ctx *ctx, const hc_weight *w, const float *x, int B, void *acts);
/* The prepared x_norm rows for ffn_gate (*ag) and ffn_up (*au; the same buffer
 * when both weights take the same activation form). */
void hc_ctx_prepare_gate_up(hc_ctx *ctx, const hc_layer *ly, const float *x_norm, int B, void **ag, void **au);

/* y[b*y_stride + r] = row r of w · activation b, threads split over rows. */
void hc_ctx_matvec_prepared(hc_ctx *ctx, const hc_weight *w, const void *acts, int B, float *y, size_t y_stride);
/* The same on a pool, with the activations already as w's kernels on isa
 * read them (hc_weight_arrange, or the prepared ones when the kernels need no
 * arrangement; xs bytes apart): the split hc_ctx_matvec_prepared runs
 * (bench_kernels pool measures it). */
void hc_pool_matvec(hc_pool *pool, const hc_weight *w, int isa, const void *xa, size_t xs, int B, float *y,
                    size_t y_stride);
/* The products of n <= HC_MATVEC_MANY weights that hc_matvec_joins with
 * the same activations, y[p] = w[p] · them: their rows end to end in one
 * pool run, so that the threads wait once, not n times. Each row's bits are
 * hc_pool_matvec's. */
enum { HC_MATVEC_MANY = 3 };
void hc_pool_matvec_many(hc_pool *pool, const hc_weight *const *w, float *const *y, int n, int isa, const void *xa,
                         size_t xs, int B, size_t y_stride);
/* The products of n weights that hc_matvec_joins (q, k and v; gate and
 * up) on the B prepared activations at acts, as hc_pool_matvec_many (n = 1:
 * hc_ctx_matvec_prepared): a decoded layer's seven products ran in seven
 * pool runs, now four. */
void hc_ctx_matvec_many(hc_ctx *ctx, const hc_weight *const *w, const void *acts, int B, float *const *y,
                        size_t y_stride, int n);
/* Whether b's product can run in a's (hc_ctx_matvec_many): the same type,
 * layout and row length, and so the same arranged activation. */
int hc_matvec_joins(const hc_weight *a, const hc_weight *b);
/* (hc_ctx_matvec, the public product of model.h: hc_ctx_prepare, then hc_ctx_matvec_prepared.) */

/* y[b*y_stride + i] = row step·idx[i] of w · activation b (B prepared
 * activations, hc_ctx_act_stride(ctx) apart), i < k; threads split over the
 * list. step: 1, or 2 for one of two matrices stored side by side
 * (hc_weight_matvec_rows). */
void hc_ctx_matvec_rows(hc_ctx *ctx, const hc_weight *w, const int32_t *idx, int k, int step, const void *acts,
                        int B, float *y, size_t y_stride);
/* Rows listed per activation (a prompt's sparse FFN: each token's own
 * neurons): for b < B, y[at[b] + i] = row step·idx[at[b] + i] of w · activation b
 * for i < at[b + 1] - at[b]; acts as hc_ctx_matvec_prepared. One pool run,
 * the threads splitting the activations; a row's value is hc_ctx_matvec_rows'
 * (the gathered B = 1 kernel). */
void hc_ctx_matvec_rows_each(hc_ctx *ctx, const hc_weight *w, const int32_t *idx, const size_t *at, int step,
                             const void *acts, int B, float *y);
/* out[b][w->n] += sum over i < k of h[b*h_stride + i] · row idx[i] of w (row i
 * when idx is NULL), w one row of n_embd per neuron (ffn_down_t). Threads split
 * over columns and add in list order: the same sums for any thread count. */
void hc_ctx_down_accum(hc_ctx *ctx, const hc_weight *w, const int32_t *idx, const float *h, size_t h_stride,
                       int k, int B, float *out);
/* The same for B > 1 rows from per-neuron lists already made: list position
 * i (neuron idx[i], or i) adds nz_h[p] times its row to out row nz_b[p] for p
 * in [nz_at[i], nz_at[i + 1]) (rows ascending; hc_ctx_down_accum makes
 * these lists from h): the bits of hc_ctx_down_accum. */
void hc_ctx_down_lists(hc_ctx *ctx, const hc_weight *w, const int32_t *idx, int k, int B, const int32_t *nz_b,
                       const float *nz_h, const size_t *nz_at, float *out);

#endif

/* A weight matrix as the forward pass sees it: `rows` output rows of `n`
 * inputs, and the products every caller runs on it. The functions below go
 * through the traits entry of the weight's type (kernels.h, weight.c), so a
 * caller may replace a weight (GPTQ swaps in quantized blocks, the hybrid
 * path gathers rows) without touching the forward pass. A new weight type
 * adds one traits entry and its kernel in each instruction set's file. */
#ifndef HC_WEIGHT_H
#define HC_WEIGHT_H

#include <stddef.h>
#include <stdint.h>

enum hc_weight_kind {
    HC_WEIGHT_NONE = 0,   /* absent (optional tensor not in the file) */
    HC_WEIGHT_GGML = 1,   /* rows of ggml type `type`, ggml layout (ne[0] = n, ne[1] = rows) */
    HC_WEIGHT_GPTQ = 2,   /* INT4-GPTQ, ext = struct hc_gptq (runtime/kernels_gptq.h) */
    HC_WEIGHT_X16 = 3,    /* Q4_0 or Q8_0 rows (type) in chunks of 16 blocks (runtime/x16.h): the
                           * model's copy and the sparse FFN's, where the type's kernels read them */
};

typedef struct {
    int kind;             /* enum hc_weight_kind */
    uint32_t type;        /* enum ggml_type when kind == HC_WEIGHT_GGML */
    const void *data;     /* rows × ggml_row_size(type, n) bytes (mapping or caller memory) */
    int n;                /* row length = input dimension (ggml ne[0]) */
    int rows;             /* output dimension (ggml ne[1]) */
    void *ext;            /* kind-specific data for other kinds (e.g. GPTQ) */
} hc_weight;

/* `isa` below is an instruction set of kernels.h: hc_isa() for the one in
 * use, HC_ISA_SCALAR for the reference. */

/* Bytes of one prepared activation vector (n floats) for this weight. */
size_t hc_weight_act_bytes(const hc_weight *w);
/* Prepare x (w->n floats) for products with w. */
void hc_weight_prepare(const hc_weight *w, int isa, const float *x, void *act);
/* 1 if two weights take the same prepared activation (so q/k/v, gate/up share it). */
int hc_weight_same_act(const hc_weight *a, const hc_weight *b);
/* Bytes of one arranged activation vector (a multiple of 64) for w's kernels
 * on isa; 0 when they read the prepared activation as is. */
size_t hc_weight_arranged_bytes(const hc_weight *w, int isa);
/* The B prepared activations (act_stride apart) rearranged for the inner
 * loops of w's kernels on isa, into xa (hc_weight_arranged_bytes apart, xa
 * aligned to 64). Done once per product, before the rows are split among
 * threads: only when hc_weight_arranged_bytes is not 0. */
void hc_weight_arrange(const hc_weight *w, int isa, const void *acts, size_t act_stride, int B, void *xa);
/* y[b*y_stride + r - row0] = row r · activation b, for r in [row0, row1), b < B;
 * activation b at (char *)xa + b*xs: arranged (hc_weight_arrange) when
 * hc_weight_arranged_bytes(w, isa) is not 0, else the prepared one. B = 1
 * streams the rows one at a time; B > 1 (prompts) runs register tiles over
 * panels of rows that stay in L2. Each value is the bits of the row's dot
 * whatever B, row0 or row1, so any split of rows among threads gives
 * identical results. */
void hc_weight_matvec(const hc_weight *w, int isa, int row0, int row1, const void *xa, size_t xs, int B, float *y,
                      size_t y_stride);
/* Gathered rows, one activation (arranged as for hc_weight_matvec):
 * y[i] = row step·idx[i] · xa, i < k. step 1: rows idx[i]; step 2: the rows
 * of one of two matrices stored side by side, row by row (w->data at the
 * first one's row 0 or the second one's; the sparse FFN's gate and up), each
 * listed neuron's row read as from its own matrix. */
void hc_weight_matvec_rows(const hc_weight *w, int isa, const int32_t *idx, int k, int step, const void *xa,
                           float *y);
/* y[0 .. c1 - c0) += a · columns [c0, c1) of row r (c0 a multiple of 32):
 * the down projection of one neuron stored as a row (ffn_down_t). */
void hc_weight_axpy(const hc_weight *w, int isa, int r, int c0, int c1, float a, float *y);
/* Ask the cache for columns [c0, c1) of row r of ggml rows, or the same
 * share of a row in chunks of 16 (no-op for GPTQ): listed rows (the sparse FFN's) form no stream a hardware
 * prefetcher follows, so the loops over them fetch the next row meanwhile
 * (measured 2.5-5x on 8 % of a matrix's F16 rows; docs/design/sparse-hybrid.md).
 * Into L2 (prefetcht1), not L1: a 2 KiB row is 32 lines, more than L1 can
 * have in flight, and the row's loads then wait on its own prefetches
 * (sparse decode FFN 25 % faster than with prefetcht0, docs/measurements.md). */
void hc_weight_prefetch(const hc_weight *w, int r, int c0, int c1);
/* The same for nt outputs y + rows[t] * y_stride with their own a[t], the row
 * read once: the bits of nt hc_weight_axpy calls (kernels.h, axpy_multi). */
void hc_weight_axpy_multi(const hc_weight *w, int isa, int r, int c0, int c1, int nt, const float *a,
                          const int32_t *rows, float *y, size_t y_stride);
/* Row r widened to f32 (w->n floats). */
void hc_weight_row(const hc_weight *w, int r, float *out);
/* "INT4-GPTQ", or the ggml type's name. */
const char *hc_weight_type_name(const hc_weight *w);
/* Bytes of weight data read by one full matvec (for bandwidth figures). */
size_t hc_weight_bytes(const hc_weight *w);

#endif

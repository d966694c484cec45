/* Matrix-vector kernels over weights in their stored ggml type.
 * Each public function dispatches at run time to AVX-512 / AVX2 / scalar code;
 * the *_ref functions are the portable scalar references the tests compare against.
 *
 * A weight matrix is `rows` rows of `n` elements, each row ggml_row_size(type, n)
 * bytes, rows consecutive (ggml layout: ne[0] = n, ne[1] = rows).
 * Activations are "prepared" once per vector for the weight type, as ggml does:
 *   F32  weights: the f32 vector itself;   F16 weights: f16 copy (or f32 — kernel's choice);
 *   BF16 weights: f32 (or bf16);           Q8_0 / Q4_0 weights: Q8_0 blocks (block_q8_0).
 * The prepared form is opaque to callers: use hc_act_bytes/hc_act_prepare. */
#ifndef HC_KERNELS_H
#define HC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* 1 if the runtime supports weights of this type for matvec. */
int hc_kernel_supports(uint32_t type);
/* Bytes needed for a prepared activation vector of n elements for weights of `type`. */
size_t hc_act_bytes(uint32_t type, int n);
/* Prepare x (n floats) for dot products with weights of `type`. */
void hc_act_prepare(uint32_t type, const float *x, int n, void *act);

/* y[r - row0] = dot(row r of W, x) for r in [row0, row1), for B activation vectors:
 * activation b is at (char*)acts + b*act_stride, its result row goes to y + b*y_stride.
 * (B > 1 is the batched prompt path: each weight row is read once for all B vectors.) */
void hc_matvec(uint32_t type, const void *W, int n, int row0, int row1,
               const void *acts, size_t act_stride, int B, float *y, size_t y_stride);
void hc_matvec_ref(uint32_t type, const void *W, int n, int row0, int row1,
                   const void *acts, size_t act_stride, int B, float *y, size_t y_stride);

/* Gathered rows: like hc_matvec with B = 1 but over the rows listed in idx[0..k)
 * (sparse FFN: only active neurons): y[i] = dot(row idx[i], x). */
void hc_matvec_rows(uint32_t type, const void *W, int n, const int32_t *idx, int k,
                    const void *act, float *y);

/* y[0..n) += a * row  (a row of W in its stored type, dequantized on the fly):
 * the down projection of one neuron stored as a row (ffn_down_t). */
void hc_axpy_row(uint32_t type, const void *row, int n, float a, float *y);
void hc_axpy_row_ref(uint32_t type, const void *row, int n, float a, float *y);

/* Dequantize / widen one row to f32. */
void hc_row_to_f32(uint32_t type, const void *row, int n, float *out);

/* Name of the instruction set the dispatcher picked ("avx512", "avx2", "scalar"). */
const char *hc_kernel_isa(void);
/* Force a path for tests/benchmarks: "avx512", "avx2", "scalar", or NULL for the best. 0 if available. */
int hc_kernel_force(const char *isa);

#endif

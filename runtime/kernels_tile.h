/* Internal to the kernels: register-tiled batched matvec (B > 1) for F32, F16
 * and BF16 weights, and for Q8_0 / Q4_0 weights against Q8_0 activations
 * (there the single-row kernel's integer block sums, scale products and FMAs:
 * see the files). A micro-kernel computes R rows x T vectors at once, each
 * weight load shared by T vectors and each activation load by R rows, while
 * every (row, vector) result goes through the very FMAs, accumulator lanes and
 * final reduction of the instruction set's single-row dot_float: the results
 * are bit-identical to B = 1 whatever the tile, the batch or the row split. */
#ifndef HC_KERNELS_TILE_H
#define HC_KERNELS_TILE_H

#include <stddef.h>

#include "kernels_impl.h"

/* y[b * y_stride + i] = dot(row r0 + i, vector b) for i < nr, b < B; the rows
 * are rb bytes apart in W, the prepared vectors (f32, or Q8_0 blocks for
 * quantized weights) act_stride bytes apart in acts. */
typedef void (*hc_gemm_fn)(const char *W, size_t rb, int r0, int nr, const char *acts, size_t act_stride,
                           int B, float *y, size_t y_stride, int n);

/* The tiled kernel of instruction set `is` for kernel type k, or NULL (the
 * caller then loops over the per-row dots). */
hc_gemm_fn hc_tile_gemm(const struct hc_isa *is, int k);

#if defined(__x86_64__)
extern const hc_gemm_fn hc_tile_avx512[HC_K_COUNT];
extern const hc_gemm_fn hc_tile_avx2[HC_K_COUNT];
#endif

#endif

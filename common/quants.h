/* ggml's reference quantizers, bit for bit (docs/formats.md, "Q8_0 and Q4_0 blocks"):
 * quantize_row_q4_0_ref / quantize_row_q8_0_ref as llama.cpp builds them on x86-64
 * (no FMA contraction), and the matching dequantizers. k must be a multiple of 32. */
#ifndef HC_QUANTS_H
#define HC_QUANTS_H

#include <stdint.h>
#include "ggml_types.h"

void quantize_row_q4_0_ref(const float *x, block_q4_0 *y, int64_t k);
void quantize_row_q8_0_ref(const float *x, block_q8_0 *y, int64_t k);
void dequantize_row_q4_0(const block_q4_0 *x, float *y, int64_t k);
void dequantize_row_q8_0(const block_q8_0 *x, float *y, int64_t k);
void dequantize_row_q4_1(const block_q4_1 *x, float *y, int64_t k);

/* Fast versions (SIMD where available) that produce exactly the same bytes as
 * the reference functions; used by hc-quantize. */
void quantize_row_q4_0(const float *x, block_q4_0 *y, int64_t k);
void quantize_row_q8_0(const float *x, block_q8_0 *y, int64_t k);

/* Added by hc-quantize's owner: choose the implementation explicitly, so tests
 * can hold every SIMD level against the reference. A level above what the CPU
 * supports falls back to the best one it does. */
enum { HC_SIMD_SCALAR = 0, HC_SIMD_AVX2 = 1, HC_SIMD_AVX512 = 2 };
int hc_quant_simd_level(void);    /* best level of this CPU (AVX2 counts with F16C only) */
/* 1 if the CPU has F16C (cpuid leaf 1: clang's __builtin_cpu_supports does not know it). */
int hc_cpu_has_f16c(void);
void quantize_row_q4_0_at(const float *x, block_q4_0 *y, int64_t k, int level);
void quantize_row_q8_0_at(const float *x, block_q8_0 *y, int64_t k, int level);
/* n F16 values to F32, the bits fp16_to_fp32 gives (vcvtph2ps: exact, NaNs
 * quieted the same way), at a SIMD level as above. */
void fp16_row_to_f32_at(const uint16_t *h, float *y, int64_t n, int level);
/* n F32 values to F16, the bits fp32_to_fp16 gives (vcvtps2ph, round to
 * nearest even; a group of 8 with a NaN goes through fp32_to_fp16), at a
 * SIMD level as above. */
void fp32_row_to_f16_at(const float *x, uint16_t *h, int64_t n, int level);

/* (int8_t)v as x86-64 executes it (cvttss2si, low byte; 0 for NaN and out of
 * range), which ggml's x86 build does where C leaves the result undefined. */
int8_t hc_f32_to_i8_x86(float v);

/* quants_x86.c (call only at a level hc_quant_simd_level() allows). */
void quantize_row_q4_0_avx2(const float *x, block_q4_0 *y, int64_t k);
void quantize_row_q8_0_avx2(const float *x, block_q8_0 *y, int64_t k);
void quantize_row_q4_0_avx512(const float *x, block_q4_0 *y, int64_t k);
void quantize_row_q8_0_avx512(const float *x, block_q8_0 *y, int64_t k);
void fp16_row_to_f32_avx2(const uint16_t *h, float *y, int64_t n);
void fp16_row_to_f32_avx512(const uint16_t *h, float *y, int64_t n);
void fp32_row_to_f16_avx2(const float *x, uint16_t *h, int64_t n);

#endif

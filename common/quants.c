/* ggml's Q4_0/Q8_0 reference quantizers and dequantizers, bit for bit as
 * llama.cpp's x86-64 build computes them (docs/formats.md, "Q8_0 and Q4_0 blocks").
 * The fast entry points dispatch to quants_x86.c when the CPU allows. */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include "quants.h"

/* (int8_t)v exactly as x86-64 executes it: cvttss2si to a 32-bit integer,
 * then keep the low byte. NaN and out-of-range values give 0x80000000, whose
 * low byte is 0. In C the conversion is undefined there, so spell it out;
 * it matters only for blocks whose scale overflows (NaN, inf, denormals). */
int8_t hc_f32_to_i8_x86(float v)
{
    if (!(v > -2147483904.0f && v < 2147483648.0f))
        return 0;
    return (int8_t)(uint8_t)((uint32_t)(int32_t)v & 0xff);
}

void quantize_row_q4_0_ref(const float *x, block_q4_0 *y, int64_t k)
{
    for (int64_t i = 0; i < k / QK4_0; i++, x += QK4_0) {
        float amax = 0.0f, max = 0.0f;   /* keep the sign of the largest |x| */
        for (int j = 0; j < QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;   /* from the fp32 d, as ggml */
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[j + QK4_0 / 2] * id;
            /* two statements' worth of rounding: -ffp-contract=off keeps the
             * multiply and the add separate, as llama.cpp's x86 build */
            int8_t q0 = hc_f32_to_i8_x86(x0 + 8.5f);
            int8_t q1 = hc_f32_to_i8_x86(x1 + 8.5f);
            if (q0 > 15) q0 = 15;
            if (q1 > 15) q1 = 15;
            y[i].qs[j] = (uint8_t)((uint8_t)q0 | ((uint8_t)q1 << 4));
        }
    }
}

void quantize_row_q8_0_ref(const float *x, block_q8_0 *y, int64_t k)
{
    for (int64_t i = 0; i < k / QK8_0; i++, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) {
            const float a = fabsf(x[j]);
            amax = amax > a ? amax : a;   /* ggml's MAX(): a NaN restarts the scan */
        }
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++)
            y[i].qs[j] = hc_f32_to_i8_x86(roundf(x[j] * id));
    }
}

void dequantize_row_q4_0(const block_q4_0 *x, float *y, int64_t k)
{
    for (int64_t i = 0; i < k / QK4_0; i++, y += QK4_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = (float)((x[i].qs[j] & 0x0f) - 8) * d;
            y[j + QK4_0 / 2] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_row_q4_1(const block_q4_1 *x, float *y, int64_t k)
{
    for (int64_t i = 0; i < k / QK4_1; i++, y += QK4_1) {
        const float d = fp16_to_fp32(x[i].d), m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (float)(x[i].qs[j] & 0x0f) * d + m;
            y[j + QK4_1 / 2] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

void dequantize_row_q8_0(const block_q8_0 *x, float *y, int64_t k)
{
    for (int64_t i = 0; i < k / QK8_0; i++, y += QK8_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_0; j++)
            y[j] = (float)x[i].qs[j] * d;
    }
}

/* ------------------------------------------------------------ dispatch */

/* Asked once per process: cpuid is a VM exit (7 us on this project's
 * VMs), and the kernels' dispatch asks on every attention and every f16
 * cache row (threads racing here store the same value). */
int hc_cpu_has_f16c(void)
{
#if defined(__x86_64__) || defined(__i386__)
    static atomic_int known = -1;
    int has = atomic_load_explicit(&known, memory_order_relaxed);
    if (has < 0) {
        unsigned a, b, c, d;
        has = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        atomic_store_explicit(&known, has, memory_order_relaxed);
    }
    return has;
#else
    return 0;
#endif
}

int hc_quant_simd_level(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        return HC_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2") && hc_cpu_has_f16c())
        return HC_SIMD_AVX2;
#endif
    return HC_SIMD_SCALAR;
}

static int clamp_level(int level)
{
    const int best = hc_quant_simd_level();
    return level < best ? level : best;
}

void quantize_row_q4_0_at(const float *x, block_q4_0 *y, int64_t k, int level)
{
    switch (clamp_level(level)) {
#if defined(__x86_64__) || defined(__i386__)
    case HC_SIMD_AVX512: quantize_row_q4_0_avx512(x, y, k); return;
    case HC_SIMD_AVX2:   quantize_row_q4_0_avx2(x, y, k); return;
#endif
    default:             quantize_row_q4_0_ref(x, y, k); return;
    }
}

void quantize_row_q8_0_at(const float *x, block_q8_0 *y, int64_t k, int level)
{
    switch (clamp_level(level)) {
#if defined(__x86_64__) || defined(__i386__)
    case HC_SIMD_AVX512: quantize_row_q8_0_avx512(x, y, k); return;
    case HC_SIMD_AVX2:   quantize_row_q8_0_avx2(x, y, k); return;
#endif
    default:             quantize_row_q8_0_ref(x, y, k); return;
    }
}

void fp16_row_to_f32_at(const uint16_t *h, float *y, int64_t n, int level)
{
#if defined(__x86_64__) || defined(__i386__)
    static void (*const simd[])(const uint16_t *, float *, int64_t) = {
        [HC_SIMD_AVX2] = fp16_row_to_f32_avx2, [HC_SIMD_AVX512] = fp16_row_to_f32_avx512 };
    if (clamp_level(level) > HC_SIMD_SCALAR) {
        simd[clamp_level(level)](h, y, n);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++)
        y[j] = fp16_to_fp32(h[j]);
}

void fp32_row_to_f16_at(const float *x, uint16_t *h, int64_t n, int level)
{
#if defined(__x86_64__) || defined(__i386__)
    if (clamp_level(level) > HC_SIMD_SCALAR) {   /* F16C at either level */
        fp32_row_to_f16_avx2(x, h, n);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++)
        h[j] = fp32_to_fp16(x[j]);
}

void quantize_row_q4_0(const float *x, block_q4_0 *y, int64_t k)
{
    quantize_row_q4_0_at(x, y, k, HC_SIMD_AVX512);
}

void quantize_row_q8_0(const float *x, block_q8_0 *y, int64_t k)
{
    quantize_row_q8_0_at(x, y, k, HC_SIMD_AVX512);
}

/* Portable scalar kernels: the reference every SIMD path is tested against,
 * and the fallback where no SIMD path runs. Float dots accumulate in double
 * (as ggml's scalar vec_dot_f32 does); quantized dots follow
 * ggml_vec_dot_q{4,8}_0_q8_0_generic: an integer sum per block, scaled by d_w*d_x. */
#include "kernels_impl.h"

#include "ggml_types.h"
#include "quants.h"

static float dot_f32(const void *row, const void *act, int n)
{
    const float *w = row, *x = act;
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)w[i] * x[i];
    return (float)s;
}

static float dot_f16(const void *row, const void *act, int n)
{
    const uint16_t *w = row;
    const float *x = act;
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)fp16_to_fp32(w[i]) * x[i];
    return (float)s;
}

static float dot_bf16(const void *row, const void *act, int n)
{
    const uint16_t *w = row;
    const float *x = act;
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)bf16_to_fp32(w[i]) * x[i];
    return (float)s;
}

static float dot_q8_0(const void *row, const void *act, int n)
{
    const block_q8_0 *w = row, *x = act;
    float s = 0;
    for (int b = 0; b < n / QK8_0; b++) {
        int isum = 0;
        for (int j = 0; j < QK8_0; j++) isum += w[b].qs[j] * x[b].qs[j];
        s += (float)isum * (fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d));
    }
    return s;
}

static float dot_q4_0(const void *row, const void *act, int n)
{
    const block_q4_0 *w = row;
    const block_q8_0 *x = act;
    float s = 0;
    for (int b = 0; b < n / QK4_0; b++) {
        int isum = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            isum += ((w[b].qs[j] & 15) - 8) * x[b].qs[j];
            isum += ((w[b].qs[j] >> 4) - 8) * x[b].qs[j + QK4_0 / 2];
        }
        s += (float)isum * (fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d));
    }
    return s;
}

/* The reference takes its rows one at a time. */
#define ROWS_OF(f) \
    static void f##_rows(const void *const *rows, int nr, const void *act, int n, float *y) \
    { for (int i = 0; i < nr; i++) y[i] = f(rows[i], act, n); }
ROWS_OF(dot_f32)
ROWS_OF(dot_f16)
ROWS_OF(dot_bf16)
ROWS_OF(dot_q8_0)
ROWS_OF(dot_q4_0)

static void axpy_f32(const void *row, int n, float a, float *y)
{
    const float *w = row;
    for (int i = 0; i < n; i++) y[i] += a * w[i];
}

static void axpy_f16(const void *row, int n, float a, float *y)
{
    const uint16_t *w = row;
    for (int i = 0; i < n; i++) y[i] += a * fp16_to_fp32(w[i]);
}

static void axpy_bf16(const void *row, int n, float a, float *y)
{
    const uint16_t *w = row;
    for (int i = 0; i < n; i++) y[i] += a * bf16_to_fp32(w[i]);
}

static void axpy_q8_0(const void *row, int n, float a, float *y)
{
    const block_q8_0 *w = row;
    for (int b = 0; b < n / QK8_0; b++, y += QK8_0) {
        float d = fp16_to_fp32(w[b].d);
        for (int j = 0; j < QK8_0; j++) y[j] += a * (w[b].qs[j] * d);
    }
}

static void axpy_q4_0(const void *row, int n, float a, float *y)
{
    const block_q4_0 *w = row;
    for (int b = 0; b < n / QK4_0; b++, y += QK4_0) {
        float d = fp16_to_fp32(w[b].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] += a * (((w[b].qs[j] & 15) - 8) * d);
            y[j + QK4_0 / 2] += a * (((w[b].qs[j] >> 4) - 8) * d);
        }
    }
}

static void quantize_q8(const float *x, int n, void *blocks)
{
    quantize_row_q8_0_ref(x, blocks, n);
}

const struct hc_isa hc_isa_scalar = {
    .name = "scalar",
    .dot = { dot_f32_rows, dot_f16_rows, dot_bf16_rows, dot_q8_0_rows, dot_q4_0_rows },
    .axpy = { axpy_f32, axpy_f16, axpy_bf16, axpy_q8_0, axpy_q4_0 },
    .quantize_q8 = quantize_q8,
};

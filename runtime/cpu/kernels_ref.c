/* Portable scalar kernels: the reference every SIMD path is tested against,
 * and the fallback where no SIMD path runs. Float dots accumulate in double
 * (as ggml's scalar vec_dot_f32 does); BF16 dots multiply the bf16 weights by
 * the bf16-rounded activation (exact products) and sum in double, as
 * ggml_vec_dot_bf16's scalar loop does (docs/design/kernels.md); quantized dots follow
 * ggml_vec_dot_q{4,8}_0_q8_0_generic: an integer sum per block, scaled by
 * d_w*d_x. No arranged activations and no register tiles: the shared loops
 * (weight.c) take one row and one vector at a time. */
#include "kernels.h"

#include <string.h>

#include "ggml_types.h"
#include "kernels_gptq.h"
#include "x16.h"
#include "quants.h"

void hc_act_copy(const hc_weight *w, const float *x, void *act) { memcpy(act, x, (size_t)w->n * sizeof(float)); }

/* The bf16 activation, element by element (the SIMD kernels' act_bf16 give
 * the same bits several at a time). */
static void act_bf16(const hc_weight *w, const float *x, void *act)
{
    uint16_t *h = act;
    for (int i = 0; i < w->n; i++) h[i] = fp32_to_bf16(x[i]);
}

/* A whole number of 4 KiB pages plus 4 cache lines: vector v of a batch
 * starts 4v lines further into the page than vector 0, so the register
 * tile's activation streams and its weight rows (whose strides are often
 * multiples of 4 KiB) do not all fall into the same sets of the 8-way L1
 * cache (unpadded 16 KiB strides held the AVX-512 F32 tile at 64 GFLOP/s,
 * padded it reaches 93: docs/measurements.md). */
size_t hc_float_arranged_bytes(int n) { return ((size_t)n * sizeof(float) + 4095) / 4096 * 4096 + 256; }

void hc_float_arrange(const void *act, int n, void *xa) { memcpy(xa, act, (size_t)n * sizeof(float)); }

/* The same padding for the bf16 activations (8 KiB strides at 4096 columns). */
size_t hc_bf16_arranged_bytes(int n) { return ((size_t)n * sizeof(uint16_t) + 4095) / 4096 * 4096 + 256; }

void hc_bf16_arrange(const void *act, int n, void *xa) { memcpy(xa, act, (size_t)n * sizeof(uint16_t)); }

static const void *ggml_row(const hc_weight *w, int r)
{
    return (const char *)w->data + (size_t)r * ggml_row_size(w->type, w->n);
}

/* Element i of a F32, F16 or BF16 row. */
static float elem(uint32_t type, const void *row, int i)
{
    if (type == GGML_TYPE_F32) return ((const float *)row)[i];
    uint16_t h = ((const uint16_t *)row)[i];
    return type == GGML_TYPE_F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

static float dot_float(const hc_weight *w, int r, const void *act)
{
    const void *row = ggml_row(w, r);
    const float *x = act;
    double s = 0;
    for (int i = 0; i < w->n; i++) s += (double)elem(w->type, row, i) * x[i];
    return (float)s;
}

static float dot_bf16(const hc_weight *w, int r, const void *act)
{
    const uint16_t *row = ggml_row(w, r), *x = act;
    double s = 0;
    for (int i = 0; i < w->n; i++) s += (double)bf16_to_fp32(row[i]) * bf16_to_fp32(x[i]);
    return (float)s;
}

static void axpy_float(const hc_weight *w, int r, int c0, int c1, float a, float *y)
{
    const void *row = ggml_row(w, r);
    for (int i = c0; i < c1; i++) y[i - c0] += a * elem(w->type, row, i);
}

static float dot_q8_0(const hc_weight *w, int r, const void *act)
{
    const block_q8_0 *x = act;
    float s = 0;
    for (int b = 0; b < w->n / QK8_0; b++) {
        block_q8_0 buf;
        const block_q8_0 *wb = hc_q8_0_block(w, r, b, &buf);
        int isum = 0;
        for (int j = 0; j < QK8_0; j++) isum += wb->qs[j] * x[b].qs[j];
        s += (float)isum * (fp16_to_fp32(wb->d) * fp16_to_fp32(x[b].d));
    }
    return s;
}

static void axpy_q8_0(const hc_weight *w, int r, int c0, int c1, float a, float *y)
{
    for (int b = c0 / QK8_0; b < c1 / QK8_0; b++, y += QK8_0) {
        block_q8_0 buf;
        const block_q8_0 *wb = hc_q8_0_block(w, r, b, &buf);
        float d = fp16_to_fp32(wb->d);
        for (int j = 0; j < QK8_0; j++) y[j] += a * (wb->qs[j] * d);
    }
}

static float dot_q4_0(const hc_weight *w, int r, const void *act)
{
    const block_q8_0 *x = act;
    float s = 0;
    for (int b = 0; b < w->n / QK4_0; b++) {
        block_q4_0 buf;
        const block_q4_0 *wb = hc_q4_0_block(w, r, b, &buf);
        int isum = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            isum += ((wb->qs[j] & 15) - 8) * x[b].qs[j];
            isum += ((wb->qs[j] >> 4) - 8) * x[b].qs[j + QK4_0 / 2];
        }
        s += (float)isum * (fp16_to_fp32(wb->d) * fp16_to_fp32(x[b].d));
    }
    return s;
}

static void axpy_q4_0(const hc_weight *w, int r, int c0, int c1, float a, float *y)
{
    for (int b = c0 / QK4_0; b < c1 / QK4_0; b++, y += QK4_0) {
        block_q4_0 buf;
        const block_q4_0 *wb = hc_q4_0_block(w, r, b, &buf);
        float d = fp16_to_fp32(wb->d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] += a * (((wb->qs[j] & 15) - 8) * d);
            y[j + QK4_0 / 2] += a * (((wb->qs[j] >> 4) - 8) * d);
        }
    }
}

static void prepare_q8(const hc_weight *w, const float *x, void *act) { quantize_row_q8_0_ref(x, act, w->n); }

/* INT4-GPTQ on the int8 activation (kernels_gptq.h): per block the integer
 * sum of code·x̃, per group the blocks' isum·d_b summed in float, then the
 * groups in order: s_g·that + (−s_g z_g)·X̃_g. */
static float dot_gptq_int8(const hc_gptq *g, int r, const void *act)
{
    const uint8_t *row = hc_gptq_codes(g, r);
    const float *sm = hc_gptq_sm(g, r), *xz = hc_gptq_xz(g, act);
    const int gb = g->gs / 32, nb = g->kp / 32;
    float acc = 0.0f;
    for (int j = 0; j < g->n_groups; j++) {
        float s = 0.0f;
        for (int b = j * gb; b < (j + 1) * gb && b < nb; b++) {
            int isum = 0;
            for (int k = 32 * b; k < 32 * b + 32; k++) isum += hc_gptq_code(row, k) * hc_gptq_xq(act, k);
            s += (float)isum * hc_gptq_xd(act, b);
        }
        acc += sm[2 * j] * s + sm[2 * j + 1] * xz[2 * j + 1];
    }
    return acc;
}

/* INT4-GPTQ on the f32 activation (gs % 32 != 0): per group the code·x sum,
 * then scale and zero term. */
static float dot_gptq(const hc_weight *w, int r, const void *act)
{
    const hc_gptq *g = w->ext;
    if (hc_gptq_int8(g)) return dot_gptq_int8(g, r, act);
    const uint8_t *row = hc_gptq_codes(g, r);
    const float *sm = hc_gptq_sm(g, r), *x = act, *sums = x + g->kp;
    float acc = 0.0f;
    for (int j = 0; j < g->n_groups; j++) {
        float dot = 0.0f;
        for (int k = j * g->gs; k < hc_gptq_group_end(g, j); k++) dot += (float)hc_gptq_code(row, k) * x[k];
        acc += sm[2 * j] * dot + sm[2 * j + 1] * sums[j];
    }
    return acc;
}

/* Column c of row r is at position i with perm[i] == c (i == c without perm:
 * then only positions [c0, c1) are visited). */
void hc_ref_gptq_axpy(const hc_weight *w, int r, int c0, int c1, float a, float *y)
{
    const hc_gptq *g = w->ext;
    const uint8_t *row = hc_gptq_codes(g, r);
    const float *sm = hc_gptq_sm(g, r);
    const int i0 = g->perm ? 0 : c0, i1 = g->perm ? g->n : c1;
    for (int j = i0 / g->gs; j < g->n_groups && j * g->gs < i1; j++) {
        const int k0 = j * g->gs > i0 ? j * g->gs : i0, k1 = (j + 1) * g->gs < i1 ? (j + 1) * g->gs : i1;
        for (int i = k0; i < k1; i++) {
            const int c = g->perm ? g->perm[i] : i;
            if (c >= c0 && c < c1) y[c - c0] += a * (sm[2 * j] * (float)hc_gptq_code(row, i) + sm[2 * j + 1]);
        }
    }
}

void hc_ref_gptq_prepare(const hc_weight *w, const float *x, void *act) { hc_gptq_act_prepare(w->ext, x, act); }

void hc_ref_gptq_tile(const hc_weight *w, const int *rows, int rm, const void *const *x, int tm, float *y)
{
    for (int t = 0; t < tm; t++)
        for (int r = 0; r < rm; r++) y[t * rm + r] = dot_gptq(w, rows[r], x[t]);
}

const hc_kernel hc_ref_float = { .prepare = hc_act_copy, .dot = dot_float, .axpy = axpy_float };
const hc_kernel hc_ref_bf16 = { .prepare = act_bf16, .dot = dot_bf16, .axpy = axpy_float };
/* Q8_0 and Q4_0 in either layout: ggml's (HC_WEIGHT_GGML) or in chunks of 16 (HC_WEIGHT_X16). */
const hc_kernel hc_ref_q8_0 = { .prepare = prepare_q8, .dot = dot_q8_0, .axpy = axpy_q8_0 };
const hc_kernel hc_ref_q4_0 = { .prepare = prepare_q8, .dot = dot_q4_0, .axpy = axpy_q4_0 };
const hc_kernel hc_ref_gptq = { .prepare = hc_ref_gptq_prepare, .dot = dot_gptq, .axpy = hc_ref_gptq_axpy };

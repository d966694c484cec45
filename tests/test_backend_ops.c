/* Every step of runtime/backend.h on every backend, against a scalar
 * reference written here (the formulas of forward.c and dense.c; for the
 * products the CPU's scalar kernels, hc_weight_matvec(HC_ISA_SCALAR), on
 * the input as the CPU prepares it for the weight's type: Q8_0 blocks for
 * Q8_0/Q4_0, bf16-rounded for BF16, GPTQ's int8 blocks; for transposed
 * products the dequantized rows times the f32 input in double). One table
 * of cases (operation x weight type x shape), run on each backend of the
 * backends table (the CPU's, with its own kernels and with the scalar
 * ones, and the OpenCL device's): adding a backend is one row there. A
 * backend that cannot be opened (no OpenCL device) is reported as skipped.
 * Each case also runs twice and must give the same bits (no atomics, sums
 * in a fixed order). test_clb_geometry holds the OpenCL backend's launch
 * geometry against a GPU's and PoCL's figures (plain C, no device). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/cpu.h"
#include "ggml_types.h"
#include "harness.h"
#include "kernels.h"
#include "kernels_gptq.h"
#include "model.h"
#include "opencl.h"
#include "quants.h"
#include "random_gptq.h"
#include "weight.h"

/* ------------------------------------------------------------ backends */

typedef struct {
    const char *name;
    /* the backend, or NULL + why: *skip set when there is nothing to test
     * (no device; the case is skipped), else a failure (kernels that do not build) */
    hc_backend *(*open)(int *skip, char *why, size_t len);
    void (*close)(hc_backend *be);
    /* largest |error| / largest |reference|: products of F32/F16/BF16
     * weights and transposed ones, of quantized ones (Q8_0, Q4_0, GPTQ: the
     * same integer block sums as the CPU, scaled and summed in another
     * order), the other steps (additions: exact) */
    double tol_mm, tol_mm_q, tol;
} backend_row;

static hc_cl *the_cl;
static hc_backend *open_opencl_flags(int flags, int *skip, char *why, size_t len)
{
    *skip = 0;
    if (!(the_cl = hc_cl_open(NULL, flags, why, len))) {
        *skip = 1;
        return NULL;
    }
    hc_backend *be = hc_cl_backend_new(the_cl, why, len);
    if (!be) {
        hc_cl_free(the_cl);
        the_cl = NULL;
    }
    return be;
}
static hc_backend *open_opencl(int *skip, char *why, size_t len) { return open_opencl_flags(0, skip, why, len); }
static void close_opencl(hc_backend *be)
{
    be->ops->free(be);
    hc_cl_free(the_cl);
    the_cl = NULL;
}

/* The OpenCL backend launched as on an H200 (132 units, groups up to
 * 1024): the groups and trees a GPU gets, on whatever device is there. */
static const hc_clb_device h200 = { 132, 1024, 1 };
static hc_backend *open_opencl_gpu(int *skip, char *why, size_t len)
{
    hc_backend *be = open_opencl(skip, why, len);
    if (be) hc_cl_backend_geometry(be, &h200);
    return be;
}
/* The same where every row keeps its bits whatever the batch (--batch-invariant) */
static hc_backend *open_opencl_inv(int *skip, char *why, size_t len)
{
    return open_opencl_flags(HC_CL_BATCH_INVARIANT, skip, why, len);
}
static hc_backend *open_opencl_inv_gpu(int *skip, char *why, size_t len)
{
    hc_backend *be = open_opencl_inv(skip, why, len);
    if (be) hc_cl_backend_geometry(be, &h200);
    return be;
}

/* Whether the dots d (fell back: fell) are what HC_CL_DP4A=want gives:
 * widened at 0; at 1 dp4a, or widened after the build with it failed. */
static int dots_as_asked(const char *d, int fell, int want)
{
    if (!want) return !strcmp(d, "bytes widened") && !fell;
    return fell ? strstr(d, "bytes widened: the build with dp4a failed (") == d : !strncmp(d, "dp4a (PTX", 9);
}

/* Built asking for PTX's dp4a whatever the device (HC_CL_DP4A=1): on an
 * NVIDIA GPU the quantized products with it, elsewhere (PoCL) without it
 * after the build with it failed, as hc_cl_backend_dots says, and the hot
 * rows' program alike (hc_cl_dots). HC_CL_DP4A=0 goes without it on any
 * device. */
static hc_backend *open_opencl_dp4a(int *skip, char *why, size_t len)
{
    hc_backend *be = NULL;
    for (int want = 0; want < 2; want++) {
        int fell = 0, rows_fell = 0;
        setenv("HC_CL_DP4A", want ? "1" : "0", 1);
        be = open_opencl(skip, why, len);
        unsetenv("HC_CL_DP4A");
        if (!be) return NULL;
        const char *d = hc_cl_backend_dots(be, &fell), *rd = hc_cl_dots(the_cl, &rows_fell);
        if (!dots_as_asked(d, fell, want) || !dots_as_asked(rd, rows_fell, want)) {
            snprintf(why, len, "HC_CL_DP4A=%d: %s (fell back: %d); hot rows: %s (fell back: %d)", want, d, fell, rd,
                     rows_fell);
            close_opencl(be);
            return NULL;
        }
        if (!want) close_opencl(be);
    }
    return be;
}

/* The CPU backend of a context (its pool and prepared-input buffers) on a
 * small model of its own: with the best kernels this CPU runs, and with
 * the scalar ones, whose products are the reference's bits. */
static hc_model *cpu_model;
static hc_ctx *cpu_ctx;
static int cpu_threads = 2;   /* the CPU backend's pool */
static hc_backend *open_cpu(int *skip, char *why, size_t len)
{
    const char *path = th_tmp("cpu.gguf");
    hc_ctx_params p = { .n_threads = cpu_threads };
    *skip = 0;
    if (th_sh("%s synth --dim 64 --n-ff 128 --layers 1 -o %s", th_bin("hc-convert"), path)) {
        snprintf(why, len, "hc-convert synth: %s", th_last_err());
        return NULL;
    }
    if (!(cpu_model = hc_model_load(path, why, len)) || !(cpu_ctx = hc_ctx_new(cpu_model, &p, why, len))) return NULL;
    return hc_cpu_backend_new(cpu_ctx);
}
static hc_backend *open_cpu_scalar(int *skip, char *why, size_t len)
{
    hc_kernel_force("scalar");
    return open_cpu(skip, why, len);
}
static void close_cpu(hc_backend *be)
{
    be->ops->free(be);
    hc_ctx_free(cpu_ctx);
    hc_model_free(cpu_model);
    hc_kernel_force(NULL);
}

static const backend_row backends[] = {
    /* the CPU: products in its instruction set's order (tests/test_kernels.c
     * holds those to the scalar kernels), attention in its lanes' order
     * (1500 positions: 2.1e-6 of the largest) */
    { "cpu", open_cpu, close_cpu, 5e-6, 2e-6, 5e-6 },
    { "cpu_scalar", open_cpu_scalar, close_cpu, 5e-6, 0, 5e-6 },
    { "opencl", open_opencl, close_opencl, 5e-6, 2e-6, 2e-6 },
    { "opencl_gpu_geometry", open_opencl_gpu, close_opencl, 5e-6, 2e-6, 2e-6 },
    { "opencl_batch_invariant", open_opencl_inv, close_opencl, 5e-6, 2e-6, 2e-6 },
    { "opencl_batch_invariant_gpu_geometry", open_opencl_inv_gpu, close_opencl, 5e-6, 2e-6, 2e-6 },
    { "opencl_dp4a", open_opencl_dp4a, close_opencl, 5e-6, 2e-6, 2e-6 },
};

/* ------------------------------------------------------------ the cases */

enum { OP_MM, OP_MM_T, OP_NORM, OP_ROPE, OP_ACT, OP_ATTN, OP_BIAS, OP_ADD, OP_NEURONS, OP_NORM_MM };
enum { T_F32, T_F16, T_BF16, T_Q8_0, T_Q4_0, T_GPTQ, T_GPTQ_PERM, N_T };
static const char *const t_names[N_T] = { "F32", "F16", "BF16", "Q8_0", "Q4_0", "GPTQ", "GPTQ-act-order" };
static const uint32_t t_ggml[5] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };

/* a, b, c, d, e by operation:
 *   OP_MM, OP_MM_T  rows, n, B                 (t: the weight type)
 *   OP_NORM         n_embd, B, bias            (t: enum hc_norm)
 *   OP_ROPE         head_dim, heads, rows, pos0 (t: enum hc_pos)
 *   OP_ACT          n_ff, B, biases, threshold x 100 (t: enum hc_ffn_kind, d: enum hc_act)
 *   OP_ATTN         head_dim, n_head, n_head_kv, B, pos0 (t & KV_BLOCK: positions per block, 0: HC_KV_BLOCK; the
 *                   cache's blocks in reverse order; with t, the cache of the positions before pos0
 *                   swapped out with kv_copy and back into other blocks first; the B rows' q and k
 *                   rotated (RoPE) first, k in one step with its store where a device can; the bits
 *                   KV_F16_K and KV_F16_V of t: k and v as halves (-ctk/-ctv f16); then the stored
 *                   values, read back with kv_copy, are the reference's, each within f16's rounding of
 *                   what was stored)
 *   OP_BIAS, OP_ADD n, B (OP_ADD: t 1 adds a second term)
 *   OP_NEURONS      n_ff, n, kind, act, biases and threshold x 100 (t: the weights' type; one input row:
 *                   ffn_neurons, which must equal the backend's own matmul and ffn_act bit for bit; then
 *                   a down product of its output of the same type, with product_after)
 *   OP_NORM_MM      rows, n, B (t: the weight's type): RMSNorm, then a product of its output (a device may
 *                   make the product's input form in the norm's launch), which must equal the same with the
 *                   norm's output read in between, bit for bit */
typedef struct {
    int op, t, a, b, c, d, e;
} op_case;
enum { KV_BLOCK = 0xfff, KV_F16_K = 1 << 12, KV_F16_V = 1 << 13 };   /* OP_ATTN's t */

#define MM3(rows, n, B) { OP_MM, T_F32, rows, n, B, 0, 0 }, { OP_MM, T_F16, rows, n, B, 0, 0 }, \
                        { OP_MM, T_BF16, rows, n, B, 0, 0 }
#define MMQ(rows, n, B) { OP_MM, T_Q8_0, rows, n, B, 0, 0 }, { OP_MM, T_Q4_0, rows, n, B, 0, 0 }, \
                        { OP_MM, T_GPTQ, rows, n, B, 0, 0 }, { OP_MM, T_GPTQ_PERM, rows, n, B, 0, 0 }
#define MMT(rows, n, B) { OP_MM_T, T_F32, rows, n, B, 0, 0 }, { OP_MM_T, T_F16, rows, n, B, 0, 0 }, \
                        { OP_MM_T, T_BF16, rows, n, B, 0, 0 }, { OP_MM_T, T_Q8_0, rows, n, B, 0, 0 }, \
                        { OP_MM_T, T_Q4_0, rows, n, B, 0, 0 }
#define ACTS(kind, n, B, bias, thr) { OP_ACT, kind, n, B, bias, HC_ACT_SILU, thr }, \
                                    { OP_ACT, kind, n, B, bias, HC_ACT_RELU, thr }, \
                                    { OP_ACT, kind, n, B, bias, HC_ACT_GELU, thr }
#define NEURONS(t, kind) { OP_NEURONS, t, 128, 96, kind, HC_ACT_SILU, 0 }, { OP_NEURONS, t, 64, 256, kind, HC_ACT_RELU, 20 }, \
                         { OP_NEURONS, t, 37, 64, kind, HC_ACT_GELU, 10 }
#define NEURONS_ALL(kind) NEURONS(T_F32, kind), NEURONS(T_F16, kind), NEURONS(T_BF16, kind), NEURONS(T_Q8_0, kind), \
                          NEURONS(T_Q4_0, kind), NEURONS(T_GPTQ, kind)

static const op_case cases[] = {
    /* products: B = 1 (decode), 7 (a tile of 16), 19 (a tile of 64), 70 (two);
     * rows not a multiple of mv's 4 or the tiles' 64; n with a tail that is
     * not whole blocks; n = 4096 at B > 1: sliced on a GPU's geometry */
    MM3(37, 48, 1), MM3(37, 48, 7), MM3(64, 291, 1), MM3(64, 291, 19), MM3(300, 4096, 1), MM3(5, 64, 19),
    MM3(100, 4096, 7), MM3(130, 200, 70),
    MMQ(37, 64, 1), MMQ(37, 64, 7), MMQ(64, 288, 1), MMQ(64, 288, 19), MMQ(300, 4096, 1), MMQ(6, 256, 19),
    MMQ(100, 4096, 7), MMQ(130, 192, 70),
    MMT(45, 64, 1), MMT(45, 96, 7), MMT(300, 288, 1), MMT(1000, 64, 19),
    MMT(45, 96, 9),   /* transposed: a tile of 8 input rows, then one alone (the decode loop) */
    /* transposed, float rows of 100 outputs: a last unit of 8 columns that is not whole */
    { OP_MM_T, T_F32, 45, 100, 3, 0, 0 }, { OP_MM_T, T_F16, 45, 100, 3, 0, 0 }, { OP_MM_T, T_BF16, 45, 100, 1, 0, 0 },
    { OP_NORM, HC_NORM_RMS, 48, 1, 0, 0, 0 }, { OP_NORM, HC_NORM_RMS, 288, 7, 0, 0, 0 }, { OP_NORM, HC_NORM_RMS, 4096, 3, 0, 0, 0 },
    { OP_NORM, HC_NORM_LAYER, 48, 1, 0, 0, 0 }, { OP_NORM, HC_NORM_LAYER, 64, 7, 1, 0, 0 }, { OP_NORM, HC_NORM_LAYER, 288, 2, 1, 0, 0 },
    { OP_NORM, HC_NORM_LAYER, 2336, 2, 1, 0, 0 },   /* 9 groups of 256 and 32: eight loads a step, then the rest */
    { OP_ROPE, HC_POS_ROPE, 8, 6, 1, 5, 0 }, { OP_ROPE, HC_POS_ROPE, 64, 4, 7, 100, 0 },
    { OP_ROPE, HC_POS_ROPE_NEOX, 8, 6, 1, 5, 0 }, { OP_ROPE, HC_POS_ROPE_NEOX, 64, 4, 7, 1000, 0 },
    { OP_ROPE, HC_POS_LEARNED, 8, 6, 3, 0, 0 },
    ACTS(HC_FFN_GATED, 300, 1, 0, 0), ACTS(HC_FFN_GATED, 256, 7, 1, 0), ACTS(HC_FFN_GATED, 256, 3, 1, 20),
    ACTS(HC_FFN_SYMMETRIC, 300, 1, 0, 0), ACTS(HC_FFN_SYMMETRIC, 256, 7, 1, 0),
    ACTS(HC_FFN_SEQUENTIAL, 300, 1, 0, 0), ACTS(HC_FFN_SEQUENTIAL, 256, 7, 1, 0),
    { OP_ATTN, 0, 8, 4, 2, 1, 0 }, { OP_ATTN, 0, 8, 4, 2, 1, 9 }, { OP_ATTN, 0, 64, 4, 2, 1, 300 },
    { OP_ATTN, 0, 256, 2, 1, 3, 40 }, { OP_ATTN, 0, 6, 4, 2, 5, 20 }, { OP_ATTN, 0, 64, 4, 4, 7, 0 },
    { OP_ATTN, 0, 8, 4, 2, 7, 50 }, { OP_ATTN, 0, 64, 2, 1, 19, 1500 },
    { OP_ATTN, 4, 8, 4, 2, 7, 50 }, { OP_ATTN, 64, 64, 4, 2, 5, 300 }, { OP_ATTN, 1024, 8, 4, 2, 3, 20 },
    { OP_ATTN, 16, 64, 4, 2, 7, 100 },
    { OP_ATTN, KV_F16_K | KV_F16_V, 64, 4, 2, 7, 300 }, { OP_ATTN, KV_F16_K | KV_F16_V, 6, 4, 2, 5, 20 },
    { OP_ATTN, 16 | KV_F16_K, 64, 4, 2, 7, 100 }, { OP_ATTN, 4 | KV_F16_V, 8, 4, 2, 7, 50 },
    { OP_ATTN, KV_F16_K | KV_F16_V, 64, 2, 1, 19, 1500 },
    { OP_ATTN, 0, 128, 4, 2, 1, 700 }, { OP_ATTN, KV_F16_K | KV_F16_V, 128, 4, 2, 3, 200 },   /* a GPU: 4 slices of 32 lanes */
    { OP_BIAS, 0, 300, 3, 0, 0, 0 }, { OP_ADD, 0, 1000, 1, 0, 0, 0 }, { OP_ADD, 1, 300, 7, 0, 0, 0 },
    NEURONS_ALL(HC_FFN_GATED), NEURONS_ALL(HC_FFN_SYMMETRIC), NEURONS_ALL(HC_FFN_SEQUENTIAL),
    { OP_NORM_MM, T_Q8_0, 40, 256, 1, 0, 0 }, { OP_NORM_MM, T_Q4_0, 40, 256, 1, 0, 0 },
    { OP_NORM_MM, T_Q4_0, 70, 4096, 3, 0, 0 }, { OP_NORM_MM, T_GPTQ_PERM, 40, 256, 1, 0, 0 },
    { OP_NORM_MM, T_F16, 40, 256, 1, 0, 0 },
};

/* ------------------------------------------------------------ inputs */

static uint64_t rng = 11;
static float frand(void)   /* uniform in [-1, 1) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) / 8388608.0) - 1.0f;
}
static float *rand_vec(size_t n, float scale)
{
    float *v = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) v[i] = frand() * scale;
    return v;
}

/* A random INT4-GPTQ weight, loaded (repacked) into *g; act-order: the
 * groups' inputs shuffled through g_idx. */
static int random_gptq(int in, int out, int gs, int act_order, hc_gptq *g, char *err, size_t errlen)
{
    int G = (in + gs - 1) / gs;
    int32_t *gi = malloc(sizeof *gi * (size_t)in);
    for (int k = 0; k < in; k++) gi[k] = act_order ? (k * 7 + 3) % G : k / gs;
    int rc = th_random_gptq(in, out, gs, gi, &rng, g, err, errlen);
    free(gi);
    return rc;
}

/* rows x n weight of type t into *w (storage in *mem or *g). */
static int make_weight(int t, int rows, int n, hc_weight *w, void **mem, hc_gptq *g, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    *mem = NULL;
    w->n = n;
    w->rows = rows;
    if (t >= T_GPTQ) {
        w->kind = HC_WEIGHT_GPTQ;
        w->ext = g;
        return random_gptq(n, rows, 32, t == T_GPTQ_PERM, g, err, errlen);
    }
    w->kind = HC_WEIGHT_GGML;
    w->type = t_ggml[t];
    size_t rb = ggml_row_size(w->type, n);
    char *d = malloc(rb * (size_t)rows);
    float *f = rand_vec((size_t)n, 0.5f);
    for (int r = 0; r < rows; r++) {
        char *row = d + rb * (size_t)r;
        for (int i = 0; i < n; i++) f[i] = frand() * 0.5f;
        switch (t) {
        case T_F32: memcpy(row, f, rb); break;
        case T_F16: for (int i = 0; i < n; i++) ((uint16_t *)row)[i] = fp32_to_fp16(f[i]); break;
        case T_BF16: for (int i = 0; i < n; i++) ((uint16_t *)row)[i] = fp32_to_bf16(f[i]); break;
        case T_Q8_0: quantize_row_q8_0_ref(f, (block_q8_0 *)row, n); break;
        case T_Q4_0: quantize_row_q4_0_ref(f, (block_q4_0 *)row, n); break;
        }
    }
    free(f);
    w->data = *mem = d;
    return 0;
}

/* ------------------------------------------------------------ references */

static void ref_norm(int kind, const float *x, const float *w, const float *bias, int n, float eps, float *o)
{
    double s = 0, mean = 0, var = 0;
    if (kind == HC_NORM_RMS) {
        for (int j = 0; j < n; j++) s += (double)x[j] * x[j];
        double inv = 1.0 / sqrt(s / n + eps);
        for (int j = 0; j < n; j++) o[j] = (float)(w[j] * (inv * x[j]));
        return;
    }
    for (int j = 0; j < n; j++) mean += x[j];
    mean /= n;
    for (int j = 0; j < n; j++) var += (x[j] - mean) * (x[j] - mean);
    double inv = 1.0 / sqrt(var / n + eps);
    for (int j = 0; j < n; j++) o[j] = (float)(w[j] * ((x[j] - mean) * inv) + (bias ? bias[j] : 0.0));
}

static void ref_rope(int mode, const float *freq, int hd, float *v, int dim, int pos)
{
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        float val = (float)pos * freq[i], fcr = cosf(val), fci = sinf(val);
        for (int h = 0; h < dim; h += hd) {
            int i0 = mode == HC_POS_ROPE ? h + 2 * i : h + i, i1 = mode == HC_POS_ROPE ? i0 + 1 : i0 + half;
            float v0 = v[i0], v1 = v[i1];
            v[i0] = v0 * fcr - v1 * fci;
            v[i1] = v0 * fci + v1 * fcr;
        }
    }
}

static float act1(int act, float x)
{
    switch (act) {
    case HC_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case HC_ACT_GELU: return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2));
    default: return x * (1.0f / (1.0f + expf(-x)));
    }
}

/* dense.c act_range */
static void ref_act(int kind, int act, float thr, const float *gb, const float *ub, float *H, const float *U, int B,
                    int F)
{
    for (int b = 0; b < B; b++)
        for (int f = 0; f < F; f++) {
            float h = H[b * F + f], u = U[b * F + f];
            if (kind == HC_FFN_SEQUENTIAL) {
                if (ub) h += ub[f];
                h = act1(act, h);
            } else {
                if (gb) h += gb[f];
                if (ub) u += ub[f];
                if (kind == HC_FFN_GATED) {
                    if (thr > 0 && h < thr) h = 0.0f;
                    h = act1(act, h) * u;
                } else {
                    h = act1(act, h) * act1(act, u);
                }
            }
            H[b * F + f] = h;
        }
}

/* ------------------------------------------------------------ running one case */

typedef struct {
    hc_backend *be;
    const hc_backend_ops *o;
    char err[512];
} run_ctx;

/* Every buffer holds its floats PAD floats in, so every step is run on
 * views with an offset. */
enum { PAD = 5 };
#define V(b) ((hc_view){ (b), PAD * sizeof(float) })
static hc_buf *upload(run_ctx *r, const float *v, size_t n)
{
    hc_buf *b = r->o->buf_new(r->be, sizeof(float) * (n + PAD), r->err, sizeof r->err);
    if (b && v && n) r->o->write(r->be, V(b), v, sizeof(float) * n);
    return b;
}

/* a vector as the steps take it (dev NULL when the backend needs none) */
static hc_bvec bvec(run_ctx *r, const float *v, int n)
{
    hc_bvec b = { v, n, NULL };
    if (v && r->o->vec_new) b.dev = r->o->vec_new(r->be, v, n, r->err, sizeof r->err);
    return b;
}
static void bvec_free(run_ctx *r, hc_bvec *b)
{
    if (b->dev) r->o->dev_free(r->be, b->dev);
}

static hc_hparams hparams(void)
{
    hc_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.rms_eps = 1e-5f;
    return hp;
}

/* The rows of a step: n positions from pos0 of one sequence whose n_blocks
 * blocks of `block` positions lie in the pool from block `first` on in
 * reverse order (the last block first), so the cache is read through its
 * block table. */
enum { MAX_ROWS = 2048 };
typedef struct {
    int32_t pos[MAX_ROWS], seq[MAX_ROWS], table[MAX_ROWS / HC_KV_BLOCK_MIN + 1];
    hc_seq_rows rows;
} step_rows;
static const hc_seq_rows *rows_at(step_rows *s, int pos0, int n, int first, int n_blocks, int block)
{
    if (n > MAX_ROWS || n_blocks > MAX_ROWS / HC_KV_BLOCK_MIN + 1) abort();
    for (int b = 0; b < n; b++) {
        s->pos[b] = pos0 + b;
        s->seq[b] = 0;
    }
    for (int i = 0; i < n_blocks; i++) s->table[i] = first + n_blocks - 1 - i;
    s->rows = (hc_seq_rows){ n, s->pos, s->seq, s->table, 1, n_blocks, block };
    return &s->rows;
}

/* Swapping as the scheduler does it, in layer 1 of kv: the first n blocks
 * of a sequence's table (rows_at's of n_blocks from block 0) out to host
 * memory, NaN into them (so that what is read later comes from the copy),
 * then into the first n of its table from block n_blocks on. 0, or -1 +
 * r->err. */
static int swap_blocks(run_ctx *r, hc_kv *kv, int kv_dim, int block, int n, int n_blocks)
{
    const hc_backend_ops *o = r->o;
    static step_rows from, to;
    rows_at(&from, 0, 0, 0, n_blocks, block);
    rows_at(&to, 0, 0, n_blocks, n_blocks, block);
    size_t floats = 2 * (size_t)n * (size_t)block * (size_t)kv_dim;
    float *host = malloc(sizeof(float) * floats), *nan = malloc(sizeof(float) * floats);
    int rc = -1;
    if (host && nan) {
        for (size_t i = 0; i < floats; i++) nan[i] = NAN;
        rc = o->kv_copy(r->be, kv, 1, from.table, n, host, 1, r->err, sizeof r->err) ||
             o->kv_copy(r->be, kv, 1, from.table, n, nan, 0, r->err, sizeof r->err) ||
             o->kv_copy(r->be, kv, 1, to.table, n, host, 0, r->err, sizeof r->err) ? -1 : 0;
    }
    free(host);
    free(nan);
    return rc;
}

/* The k and v values layer 1 of kv holds for positions 0..npos-1 of the
 * sequence of rows (its block table), read with kv_copy and widened: into
 * out, npos rows of kv_dim floats of k, then as many of v. 0, or -1 +
 * r->err. */
static float cache_elem(uint32_t type, const char *at)
{
    return type == GGML_TYPE_F16 ? fp16_to_fp32(*(const uint16_t *)at) : *(const float *)at;
}
static int cache_values(run_ctx *r, hc_kv *kv, const hc_seq_rows *rows, int npos, int kv_dim, uint32_t tk,
                        uint32_t tv, float *out)
{
    const int n = hc_blocks_for(npos, rows->block);
    const size_t elems = (size_t)rows->block * (size_t)kv_dim;   /* a block's of k, of v */
    const size_t kb = ggml_row_size(tk, (int64_t)elems), vb = ggml_row_size(tv, (int64_t)elems);
    char *host = malloc((size_t)n * (kb + vb));
    int rc = host ? r->o->kv_copy(r->be, kv, 1, rows->table, n, host, 1, r->err, sizeof r->err) : -1;
    for (int p = 0; !rc && p < npos; p++)
        for (int e = 0; e < kv_dim; e++) {
            const char *blk = host + (size_t)(p / rows->block) * (kb + vb);
            const size_t at = (size_t)(p % rows->block) * (size_t)kv_dim + (size_t)e;
            out[(size_t)p * kv_dim + e] = cache_elem(tk, blk + at * ggml_row_size(tk, 1));
            out[((size_t)npos + p) * kv_dim + e] = cache_elem(tv, blk + kb + at * ggml_row_size(tv, 1));
        }
    free(host);
    return rc;
}

/* Runs case c on r's backend into out (n_out floats) and its reference
 * into ref. 0, or -1 + r->err. */
/* A weight of type t, rows x n, with its backend's copy; free with weight_free. */
typedef struct {
    hc_weight w;
    hc_gptq g;
    void *mem;
    hc_bmat m;
} test_weight;

static int weight_new(run_ctx *r, int t, int rows, int n, test_weight *tw)
{
    memset(tw, 0, sizeof *tw);
    if (make_weight(t, rows, n, &tw->w, &tw->mem, &tw->g, r->err, sizeof r->err)) return -1;
    tw->m = (hc_bmat){ &tw->w, r->o->mat_new ? r->o->mat_new(r->be, &tw->w, r->err, sizeof r->err) : NULL };
    return 0;
}

static void weight_free(run_ctx *r, test_weight *tw)
{
    if (tw->m.dev) r->o->dev_free(r->be, tw->m.dev);
    if (tw->w.kind == HC_WEIGHT_GPTQ) hc_gptq_free(&tw->g);
    free(tw->mem);
}

/* The product of m (rows x n) on the B rows of n floats at src that
 * produce(r, arg) writes, queued right after it (a device may make the
 * product's input form in the producer's launch) and with src read in
 * between: 0 when the two agree bit for bit (into out and ref), else -1 +
 * r->err. */
static int product_after(run_ctx *r, const hc_bmat *m, int rows, int n, int B, hc_view src,
                         void (*produce)(run_ctx *, void *), void *arg, float *out, float *ref)
{
    const hc_backend_ops *o = r->o;
    int rc = -1;
    float *tmp = malloc(sizeof(float) * (size_t)B * n);
    hc_buf *by = upload(r, NULL, (size_t)B * rows);
    if (by && (m->dev || o->host(src))) {
        const hc_mm it = { m, 0, 0, V(by), (size_t)rows, 0 };
        rc = 0;
        for (int pass = 0; pass < 2 && !rc; pass++) {
            produce(r, arg);
            if (pass) rc = o->read(r->be, src, tmp, sizeof(float) * (size_t)B * n, r->err, sizeof r->err);
            o->matmul(r->be, src, B, &it, 1);
            rc = rc || o->read(r->be, V(by), pass ? ref : out, sizeof(float) * (size_t)B * rows, r->err, sizeof r->err);
        }
        for (int i = 0; i < B * rows && !rc; i++)
            if (memcmp(&out[i], &ref[i], sizeof(float))) {
                snprintf(r->err, sizeof r->err, "output %d: %g with the input read between, %g without", i, ref[i],
                         out[i]);
                rc = -1;
            }
    }
    if (by) o->buf_free(r->be, by);
    free(tmp);
    return rc;
}

typedef struct {
    const hc_hparams *hp;
    const hc_blayer *ly;
    hc_view x, h;
} neurons_step;

static void produce_neurons(run_ctx *r, void *arg)
{
    const neurons_step *s = arg;
    if (!r->o->ffn_neurons || r->o->ffn_neurons(r->be, s->hp, s->ly, s->x, s->h)) {
        const int seq = s->hp->ffn_kind == HC_FFN_SEQUENTIAL;   /* as dense.c, without up's scratch: h twice */
        const hc_mm it = { seq ? &s->ly->up : &s->ly->gate, 0, 0, s->h, (size_t)s->hp->n_ff, 0 };
        r->o->matmul(r->be, s->x, 1, &it, 1);
        r->o->ffn_act(r->be, s->hp, &s->ly->gate_b, &s->ly->up_b, s->h, s->h, 1);
    }
}

/* OP_NEURONS: out = ffn_neurons of one row (where the backend has it), ref =
 * the same backend's matmul and ffn_act; -1 + r->err when they differ. */
static int run_neurons(run_ctx *r, const op_case *c, hc_hparams *hp, float *out, float *ref)
{
    const hc_backend_ops *o = r->o;
    int F = c->a, n = c->b, rc = -1;
    hp->n_ff = F;
    hp->ffn_kind = c->c;
    hp->act = c->d;
    hp->act_threshold = (float)c->e / 100.0f;
    test_weight gate, up;
    if (weight_new(r, c->t, F, n, &gate)) return -1;
    if (weight_new(r, c->t, F, n, &up)) { weight_free(r, &gate); return -1; }
    float *x = rand_vec((size_t)n, 1.0f), *gbv = c->e ? rand_vec((size_t)F, 0.5f) : NULL;
    float *ubv = c->e ? rand_vec((size_t)F, 0.5f) : NULL;
    hc_blayer ly;
    memset(&ly, 0, sizeof ly);
    ly.gate = gate.m;
    ly.up = up.m;
    ly.gate_b = bvec(r, gbv, F);
    ly.up_b = bvec(r, ubv, F);
    hc_buf *bx = upload(r, x, (size_t)n), *bh = upload(r, NULL, (size_t)F), *bg = upload(r, NULL, 2 * (size_t)F);
    if (bx && bh && bg) {
        const int seq = c->c == HC_FFN_SEQUENTIAL;
        hc_view g = V(bg), u = hc_view_at(V(bg), sizeof(float) * (size_t)F);
        const hc_mm gu2[2] = { { seq ? &ly.up : &ly.gate, 0, 0, g, (size_t)F, 0 }, { &ly.up, 0, 0, u, (size_t)F, 0 } };
        o->matmul(r->be, V(bx), 1, gu2, seq ? 1 : 2);
        o->ffn_act(r->be, hp, &ly.gate_b, &ly.up_b, g, u, 1);
        int fused = o->ffn_neurons && !o->ffn_neurons(r->be, hp, &ly, V(bx), V(bh));
        if (!o->read(r->be, g, ref, sizeof(float) * (size_t)F, r->err, sizeof r->err) &&
            !o->read(r->be, fused ? V(bh) : g, out, sizeof(float) * (size_t)F, r->err, sizeof r->err)) {
            rc = 0;
            for (int i = 0; i < F && !rc; i++)
                if (memcmp(&out[i], &ref[i], sizeof(float))) {
                    snprintf(r->err, sizeof r->err, "neuron %d: %g from ffn_neurons, %g from matmul and ffn_act", i,
                             out[i], ref[i]);
                    rc = -1;
                }
        }
        test_weight down;   /* the down product of h (a device may make its input form with h) */
        if (!rc && F % 32 == 0 && !weight_new(r, c->t, 48, F, &down)) {
            ly.down = down.m;
            float *po = malloc(sizeof(float) * 48), *pr = malloc(sizeof(float) * 48);
            neurons_step st = { hp, &ly, V(bx), V(bh) };
            rc = product_after(r, &down.m, 48, F, 1, V(bh), produce_neurons, &st, po, pr);
            free(po);
            free(pr);
            weight_free(r, &down);
        }
    }
    hc_buf *bs[] = { bx, bh, bg };
    for (int i = 0; i < 3; i++)
        if (bs[i]) o->buf_free(r->be, bs[i]);
    weight_free(r, &gate);
    weight_free(r, &up);
    bvec_free(r, &ly.gate_b);
    bvec_free(r, &ly.up_b);
    free(x);
    free(gbv);
    free(ubv);
    return rc;
}

typedef struct {
    const hc_hparams *hp;
    hc_bvec *w;
    hc_view x, o;
    int B;
} norm_step;

static void produce_norm(run_ctx *r, void *arg)
{
    const norm_step *s = arg;
    hc_bvec none = { NULL, 0, NULL };
    r->o->norm(r->be, s->hp, s->w, &none, s->x, s->o, s->B);
}

/* OP_NORM_MM: RMSNorm, then a product of its output (product_after) */
static int run_norm_mm(run_ctx *r, const op_case *c, hc_hparams *hp, float *out, float *ref)
{
    int rows = c->a, n = c->b, B = c->c, rc = -1;
    hp->n_embd = n;
    float *x = rand_vec((size_t)B * n, 2.0f), *nw = rand_vec((size_t)n, 1.0f);
    hc_bvec wv = bvec(r, nw, n);
    hc_buf *bx = upload(r, x, (size_t)B * n), *bo = upload(r, NULL, (size_t)B * n);
    test_weight tw;
    if (bx && bo && !weight_new(r, c->t, rows, n, &tw)) {
        norm_step s = { hp, &wv, V(bx), V(bo), B };
        rc = product_after(r, &tw.m, rows, n, B, V(bo), produce_norm, &s, out, ref);
        weight_free(r, &tw);
    }
    if (bx) r->o->buf_free(r->be, bx);
    if (bo) r->o->buf_free(r->be, bo);
    bvec_free(r, &wv);
    free(x);
    free(nw);
    return rc;
}

typedef struct {
    hc_kv *kv;
    const hc_hparams *hp;
    hc_view q, o;
    int B;
} attn_step;

static void produce_attention(run_ctx *r, void *arg)
{
    const attn_step *s = arg;
    r->o->attention(r->be, s->kv, 1, s->hp, s->q, 0, s->B, s->o);
}

static int run_case(run_ctx *r, const op_case *c, float *out, float *ref, size_t n_out, int seed)
{
    const hc_backend_ops *o = r->o;
    hc_hparams hp = hparams();
    rng = 1000 + (uint64_t)seed;
    int rc = -1;
    hc_buf *bx = NULL, *by = NULL, *bz = NULL;
    static step_rows rw;
    switch (c->op) {
    case OP_MM:
    case OP_MM_T: {
        int rows = c->a, n = c->b, B = c->c, tr = c->op == OP_MM_T;
        hc_weight w;
        hc_gptq g;
        void *mem;
        memset(&g, 0, sizeof g);
        if (make_weight(c->t, rows, n, &w, &mem, &g, r->err, sizeof r->err)) return -1;
        int in = tr ? rows : n, outn = tr ? n : rows;
        float *x = rand_vec((size_t)B * in, 1.0f), *row = malloc(sizeof(float) * (size_t)n);
        /* two items sharing x: all B rows into y (stride outn), rows 1.. added
         * onto z0 in z with a wider stride (q of the last rows; the residual
         * stream); B = 1: three items, y and twice z (at 0 and zs), which a
         * device may run in two launches (q, k and v; not y with the adds) */
        size_t zs = (size_t)outn + 3, zn = B > 1 ? (size_t)B * zs : 2 * zs;
        float *z0 = rand_vec(zn, 1.0f);
        hc_bmat m = { &w, o->mat_new ? o->mat_new(r->be, &w, r->err, sizeof r->err) : NULL };
        bx = upload(r, x, (size_t)B * in);
        by = upload(r, NULL, (size_t)B * outn);
        bz = upload(r, z0, zn);
        if (bx && by && bz && (m.dev || o->host(V(bx)))) {
            hc_mm items[3] = { { &m, 0, tr, V(by), (size_t)outn, 0 }, { &m, B > 1, tr, V(bz), zs, 1 },
                               { &m, 0, tr, hc_view_at(V(bz), sizeof(float) * zs), zs, 1 } };
            o->matmul(r->be, V(bx), B, items, B > 1 ? 2 : 3);
            float *z = malloc(sizeof(float) * zn);
            if (!o->read(r->be, V(by), out, sizeof(float) * (size_t)B * outn, r->err, sizeof r->err) &&
                !o->read(r->be, V(bz), z, sizeof(float) * zn, r->err, sizeof r->err)) {
                rc = 0;
                for (int b = B > 1; b < (B > 1 ? B : 2); b++)   /* z's rows must be z0's plus y's */
                    for (int i = 0; i < outn; i++) {
                        const size_t e = (size_t)(b - (B > 1)) * zs + i;
                        const float want = z0[e] + out[(size_t)(B > 1 ? b : 0) * outn + i];
                        if (memcmp(&z[e], &want, sizeof(float))) {
                            snprintf(r->err, sizeof r->err, "item %d: row %d, %d differs", B > 1 ? 1 : b + 1, b, i);
                            rc = -1;
                        }
                    }
            }
            free(z);
        } else if (!m.dev && r->err[0] == 0) {
            snprintf(r->err, sizeof r->err, "no device copy of the weight");
        }
        if (tr) {   /* reference: x times the dequantized rows (the CPU's axpy: f32 input), in double */
            double *acc = calloc((size_t)B * outn, sizeof *acc);
            for (int i = 0; i < rows; i++) {
                hc_weight_row(&w, i, row);
                for (int b = 0; b < B; b++)
                    for (int j = 0; j < n; j++) acc[(size_t)b * outn + j] += (double)x[(size_t)b * in + i] * row[j];
            }
            for (size_t i = 0; i < n_out; i++) ref[i] = (float)acc[i];
            free(acc);
        } else {    /* reference: the CPU's scalar product on its prepared input */
            const size_t ab = hc_weight_act_bytes(&w), arr = hc_weight_arranged_bytes(&w, HC_ISA_SCALAR);
            char *acts = malloc(ab * (size_t)B), *xa = acts;
            for (int b = 0; b < B; b++) hc_weight_prepare(&w, HC_ISA_SCALAR, x + (size_t)b * in, acts + (size_t)b * ab);
            if (arr) {
                xa = aligned_alloc(64, arr * (size_t)B);
                hc_weight_arrange(&w, HC_ISA_SCALAR, acts, ab, B, xa);
            }
            hc_weight_matvec(&w, HC_ISA_SCALAR, 0, rows, xa, arr ? arr : ab, B, ref, (size_t)rows);
            if (xa != acts) free(xa);
            free(acts);
        }
        if (m.dev) o->dev_free(r->be, m.dev);
        free(x);
        free(z0);
        free(row);
        free(mem);
        if (w.kind == HC_WEIGHT_GPTQ) hc_gptq_free(&g);
        break;
    }
    case OP_NORM: {
        int n = c->a, B = c->b;
        hp.norm = c->t;
        hp.n_embd = n;
        float *x = rand_vec((size_t)B * n, 2.0f), *wv = rand_vec((size_t)n, 1.0f), *bv = c->c ? rand_vec((size_t)n, 1.0f) : NULL;
        for (int i = 0; i < B * n; i++) x[i] += 0.5f;   /* a mean LayerNorm must take away */
        hc_bvec w = bvec(r, wv, n), bias = bvec(r, bv, n);
        bx = upload(r, x, (size_t)B * n);
        by = upload(r, NULL, (size_t)B * n);
        if (bx && by) {
            o->norm(r->be, &hp, &w, &bias, V(bx), V(by), B);
            rc = o->read(r->be, V(by), out, sizeof(float) * n_out, r->err, sizeof r->err);
        }
        for (int b = 0; b < B; b++) ref_norm(c->t, x + (size_t)b * n, wv, bv, n, hp.rms_eps, ref + (size_t)b * n);
        bvec_free(r, &w);
        bvec_free(r, &bias);
        free(x);
        free(wv);
        free(bv);
        break;
    }
    case OP_ROPE: {
        int hd = c->a, dim = c->a * c->b, n = c->c, pos0 = c->d;
        hp.pos = c->t;
        hp.head_dim = hd;
        float *v = rand_vec((size_t)n * dim, 1.0f), *freq = malloc(sizeof(float) * (size_t)hd / 2);
        for (int i = 0; i < hd; i += 2) freq[i / 2] = 1.0f / powf(10000.0f, (float)i / (float)hd);
        hc_bvec f = bvec(r, freq, hd / 2);
        bx = upload(r, v, (size_t)n * dim);
        if (bx) {
            o->batch(r->be, rows_at(&rw, pos0, n, 0, 1 + (pos0 + n) / HC_KV_BLOCK, HC_KV_BLOCK));
            /* as two sets of rows, the second from row n / 2 on (k and q) */
            const hc_rope_rows two[2] = { { V(bx), dim, n / 2, 0 },
                                          { hc_view_at(V(bx), sizeof(float) * (size_t)(n / 2) * dim), dim, n - n / 2,
                                            n / 2 } };
            o->rope(r->be, &hp, &f, two, 2);
            rc = o->read(r->be, V(bx), out, sizeof(float) * n_out, r->err, sizeof r->err);
        }
        if (c->t != HC_POS_LEARNED)
            for (int b = 0; b < n; b++) ref_rope(c->t, freq, hd, v + (size_t)b * dim, dim, pos0 + b);
        memcpy(ref, v, sizeof(float) * n_out);
        bvec_free(r, &f);
        free(v);
        free(freq);
        break;
    }
    case OP_ACT: {
        int F = c->a, B = c->b;
        hp.ffn_kind = c->t;
        hp.act = c->d;
        hp.n_ff = F;
        hp.act_threshold = (float)c->e / 100.0f;
        float *g = rand_vec((size_t)B * F, 3.0f), *u = rand_vec((size_t)B * F, 3.0f);
        float *gbv = c->c ? rand_vec((size_t)F, 0.5f) : NULL, *ubv = c->c ? rand_vec((size_t)F, 0.5f) : NULL;
        hc_bvec gb = bvec(r, gbv, F), ub = bvec(r, ubv, F);
        bx = upload(r, g, (size_t)B * F);
        by = upload(r, u, (size_t)B * F);
        if (bx && by) {
            o->ffn_act(r->be, &hp, &gb, &ub, V(bx), V(by), B);
            rc = o->read(r->be, V(bx), out, sizeof(float) * n_out, r->err, sizeof r->err);
        }
        ref_act(c->t, c->d, hp.act_threshold, gbv, ubv, g, u, B, F);
        memcpy(ref, g, sizeof(float) * n_out);
        bvec_free(r, &gb);
        bvec_free(r, &ub);
        free(g);
        free(u);
        free(gbv);
        free(ubv);
        break;
    }
    case OP_ATTN: {
        int hd = c->a, nh = c->b, nkv = c->c, B = c->d, pos0 = c->e, n_ctx = pos0 + B + 5;
        int block = c->t & KV_BLOCK ? c->t & KV_BLOCK : HC_KV_BLOCK;
        int q_dim = nh * hd, kv_dim = nkv * hd, npos = pos0 + B;
        hp.head_dim = hd;
        hp.n_head = nh;
        hp.n_head_kv = nkv;
        hp.n_layer = 2;
        hp.n_embd = q_dim;
        float *q = rand_vec((size_t)B * q_dim, 1.0f), *k = rand_vec((size_t)npos * kv_dim, 1.0f);
        float *v = rand_vec((size_t)npos * kv_dim, 1.0f), *freq = malloc(sizeof(float) * (size_t)hd / 2);
        for (int i = 0; i < hd; i += 2) freq[i / 2] = 1.0f / powf(10000.0f, (float)i / (float)hd);
        hc_bvec f = bvec(r, freq, hd / 2);
        hp.pos = HC_POS_ROPE;
        uint8_t on[2] = { 0, 1 };
        int n_blocks = hc_blocks_for(n_ctx, block), at = 0;   /* at: where the sequence's blocks start */
        const uint32_t tk = c->t & KV_F16_K ? GGML_TYPE_F16 : GGML_TYPE_F32,
                       tv = c->t & KV_F16_V ? GGML_TYPE_F16 : GGML_TYPE_F32;
        hc_kv *kv = o->kv_new(r->be, &hp, 2 * n_blocks, n_blocks, block, n_ctx, on, tk, tv, r->err, sizeof r->err);
        /* the cache's values when it holds halves: k's npos rows, then v's */
        float *stored = c->t & (KV_F16_K | KV_F16_V) ? calloc(2 * (size_t)npos * kv_dim, sizeof(float)) : NULL;
        bx = upload(r, q, (size_t)B * q_dim);
        by = upload(r, k, (size_t)npos * kv_dim);
        bz = upload(r, v, (size_t)npos * kv_dim);
        hc_buf *bo = upload(r, NULL, (size_t)B * q_dim);
        if (kv && bx && by && bz && bo) {
            /* the earlier positions in two stores, then the B rows' own */
            size_t row = sizeof(float) * (size_t)kv_dim;
            int p1 = pos0 / 2;
            if (p1 > 0) {
                o->batch(r->be, rows_at(&rw, 0, p1, 0, n_blocks, block));
                o->kv_store(r->be, kv, 1, p1, V(by), V(bz));
            }
            if (pos0 > p1) {
                o->batch(r->be, rows_at(&rw, p1, pos0 - p1, 0, n_blocks, block));
                o->kv_store(r->be, kv, 1, pos0 - p1, hc_view_at(V(by), row * p1), hc_view_at(V(bz), row * p1));
            }
            if (c->t & KV_BLOCK && pos0 > 0) {   /* swapped out and back into the pool's other half, NaN left behind */
                at = n_blocks;
                rc = swap_blocks(r, kv, kv_dim, block, hc_blocks_for(pos0, block), n_blocks);
            }
            o->batch(r->be, rows_at(&rw, pos0, B, at, n_blocks, block));
            const hc_rope_rows kq[2] = { { hc_view_at(V(by), row * pos0), kv_dim, B, 0 }, { V(bx), q_dim, B, 0 } };
            o->rope(r->be, &hp, &f, kq, 2);
            o->kv_store(r->be, kv, 1, B, hc_view_at(V(by), row * pos0), hc_view_at(V(bz), row * pos0));
            o->attention(r->be, kv, 1, &hp, V(bx), 0, B, V(bo));
            rc = o->read(r->be, V(bo), out, sizeof(float) * n_out, r->err, sizeof r->err);
            if (!rc && stored) rc = cache_values(r, kv, &rw.rows, npos, kv_dim, tk, tv, stored);
            if (!rc && q_dim % 32 == 0) {   /* a Q4_0 product of the output, as the o projection */
                float *po = malloc(sizeof(float) * 16 * (size_t)B), *pr = malloc(sizeof(float) * 16 * (size_t)B);
                attn_step s = { kv, &hp, V(bx), V(bo), B };
                test_weight tw;
                rc = weight_new(r, T_Q4_0, 16, q_dim, &tw) ||
                     product_after(r, &tw.m, 16, q_dim, B, V(bo), produce_attention, &s, po, pr);
                weight_free(r, &tw);
                free(po);
                free(pr);
            }
        }
        for (int b = 0; b < B; b++) {   /* the rows' q and k, rotated */
            ref_rope(HC_POS_ROPE, freq, hd, q + (size_t)b * q_dim, q_dim, pos0 + b);
            ref_rope(HC_POS_ROPE, freq, hd, k + (size_t)(pos0 + b) * kv_dim, kv_dim, pos0 + b);
        }
        for (size_t i = 0; stored && !rc && i < 2 * (size_t)npos * kv_dim; i++) {   /* the cache's values */
            float *want = i < (size_t)npos * kv_dim ? &k[i] : &v[i - (size_t)npos * kv_dim];
            if (!(fabsf(stored[i] - *want) <= 1e-3f * fabsf(*want) + 1e-7f)) {
                snprintf(r->err, sizeof r->err, "the cache holds %g for %g (element %zu)", stored[i], *want, i);
                rc = -1;
            }
            *want = stored[i];
        }
        free(stored);
        double *sc = malloc(sizeof(double) * (size_t)npos);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < nh; h++) {
                const float *qr = q + (size_t)b * q_dim + (size_t)h * hd;
                int kh = h / (nh / nkv), last = pos0 + b;
                double mx = -INFINITY, sum = 0;
                for (int p = 0; p <= last; p++) {
                    double s = 0;
                    for (int d = 0; d < hd; d++) s += (double)qr[d] * k[(size_t)p * kv_dim + (size_t)kh * hd + d];
                    sc[p] = s / sqrt((double)hd);
                    if (sc[p] > mx) mx = sc[p];
                }
                for (int p = 0; p <= last; p++) sum += (sc[p] = exp(sc[p] - mx));
                for (int d = 0; d < hd; d++) {
                    double s = 0;
                    for (int p = 0; p <= last; p++) s += sc[p] / sum * v[(size_t)p * kv_dim + (size_t)kh * hd + d];
                    ref[(size_t)b * q_dim + (size_t)h * hd + d] = (float)s;
                }
            }
        free(sc);
        if (kv) o->kv_free(r->be, kv);
        if (bo) o->buf_free(r->be, bo);
        bvec_free(r, &f);
        free(q);
        free(k);
        free(v);
        free(freq);
        break;
    }
    case OP_BIAS:
    case OP_ADD: {
        int n = c->a, B = c->b;
        size_t N = (size_t)n * B;
        float *x = rand_vec(N, 1.0f), *a = rand_vec(N, 1.0f), *bb = rand_vec(N, 1.0f), *bias = rand_vec((size_t)n, 1.0f);
        hc_bvec bv = bvec(r, bias, n);
        bx = upload(r, x, N);
        by = upload(r, a, N);
        bz = upload(r, bb, N);
        if (bx && by && bz) {
            if (c->op == OP_BIAS) o->add_bias(r->be, V(bx), &bv, B, n);
            else o->add(r->be, V(bx), V(by), c->t ? V(bz) : (hc_view){ NULL, 0 }, N);
            rc = o->read(r->be, V(bx), out, sizeof(float) * n_out, r->err, sizeof r->err);
        }
        for (size_t i = 0; i < N; i++)
            ref[i] = c->op == OP_BIAS ? x[i] + bias[i % (size_t)n] : c->t ? x[i] + (a[i] + bb[i]) : x[i] + a[i];
        bvec_free(r, &bv);
        free(x);
        free(a);
        free(bb);
        free(bias);
        break;
    }
    case OP_NEURONS:
        rc = run_neurons(r, c, &hp, out, ref);
        break;
    case OP_NORM_MM:
        rc = run_norm_mm(r, c, &hp, out, ref);
        break;
    }
    if (bx) o->buf_free(r->be, bx);
    if (by) o->buf_free(r->be, by);
    if (bz) o->buf_free(r->be, bz);
    return rc;
}

static size_t case_outputs(const op_case *c)
{
    switch (c->op) {
    case OP_MM: return (size_t)c->a * c->c;
    case OP_MM_T: return (size_t)c->b * c->c;
    case OP_NORM: return (size_t)c->a * c->b;
    case OP_ROPE: return (size_t)c->a * c->b * c->c;
    case OP_ACT: return (size_t)c->a * c->b;
    case OP_NEURONS: return (size_t)c->a;
    case OP_NORM_MM: return (size_t)c->a * c->c;
    case OP_ATTN: return (size_t)c->a * c->b * c->d;
    default: return (size_t)c->a * c->b;
    }
}

static void describe(const op_case *c, char *s, size_t len)
{
    static const char *const ops[] = { "matmul", "matmul transposed", "norm", "rope", "ffn_act", "attention",
                                       "add_bias", "add", "ffn_neurons", "norm then matmul" };
    if (c->op == OP_MM || c->op == OP_MM_T || c->op == OP_NORM_MM)
        snprintf(s, len, "%s %s %dx%d B=%d", ops[c->op], t_names[c->t], c->a, c->b, c->c);
    else if (c->op == OP_NEURONS)
        snprintf(s, len, "%s %s %dx%d kind %d act %d (%d)", ops[c->op], t_names[c->t], c->a, c->b, c->c, c->d, c->e);
    else
        snprintf(s, len, "%s (%d; %d %d %d %d %d)", ops[c->op], c->t, c->a, c->b, c->c, c->d, c->e);
}

static const backend_row *cur;

static void test_ops(void)
{
    char why[512];
    int no_device;
    hc_backend *be = cur->open(&no_device, why, sizeof why);
    if (!be) {
        static char skip[600];
        snprintf(skip, sizeof skip, "%s: %s", cur->name, why);
        CHECKF(no_device, "%s", skip);
        SKIP(skip);
    }
    run_ctx r = { be, be->ops, "" };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases && !bad; i++) {
        const op_case *c = &cases[i];
        size_t n = case_outputs(c);
        float *out = calloc(n, sizeof *out), *ref = calloc(n, sizeof *ref), *again = calloc(n, sizeof *again);
        char what[128];
        describe(c, what, sizeof what);
        r.err[0] = 0;
        if (run_case(&r, c, out, ref, n, (int)i) || run_case(&r, c, again, ref, n, (int)i)) {
            th_fail(__FILE__, __LINE__, "%s %s: %s", cur->name, what, r.err);
            bad = 1;
        } else {
            double mx = 0, e = 0;
            size_t at = 0;
            for (size_t j = 0; j < n; j++) {
                if (fabs(ref[j]) > mx) mx = fabs(ref[j]);
                double d = fabs((double)out[j] - ref[j]);
                if (!(d <= e)) { e = d; at = j; }
            }
            double tol = c->op == OP_MM && c->t >= T_Q8_0 ? cur->tol_mm_q : c->op == OP_MM || c->op == OP_MM_T ? cur->tol_mm
                                                                                                            : cur->tol;
            if (c->op == OP_ADD || c->op == OP_BIAS) tol = 0;
            if (getenv("HC_TEST_VERBOSE")) fprintf(stderr, "%s %s: error %.3g of largest %.3g\n", cur->name, what, e, mx);
            if (!(e <= tol * mx)) {
                th_fail(__FILE__, __LINE__, "%s %s: error %g of largest %g at %zu (%g, reference %g)", cur->name, what,
                        e, mx, at, out[at], ref[at]);
                bad = 1;
            } else if (memcmp(out, again, sizeof(float) * n)) {
                th_fail(__FILE__, __LINE__, "%s %s: two runs differ", cur->name, what);
                bad = 1;
            }
        }
        free(out);
        free(ref);
        free(again);
    }
    cur->close(be);
}

/* The CPU's attention and FFN activations on every instruction set this
 * CPU runs (attention.c and cpu.c compile them once per set, the one
 * HC_KERNELS forces chosen): the same bits on each, the activations' 300
 * and 256 neurons a row in vectors of 8 and a tail. */
static void test_cpu_isas(void)
{
    static const char *const isas[] = { "scalar", "avx2", "avx512" };
    char why[512];
    int skip, sets = 0;
    hc_backend *be = open_cpu(&skip, why, sizeof why);
    CHECKF(be, "%s", why);
    run_ctx r = { be, be->ops, "" };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const op_case *c = &cases[i];
        if (c->op != OP_ATTN && c->op != OP_ACT) continue;
        size_t n = case_outputs(c);
        float *first = calloc(n, sizeof *first), *out = calloc(n, sizeof *out), *ref = calloc(n, sizeof *ref);
        char what[128];
        describe(c, what, sizeof what);
        sets = 0;
        for (size_t s = 0; s < sizeof isas / sizeof *isas; s++) {
            if (hc_kernel_force(isas[s])) continue;   /* not on this CPU */
            CHECKF(!run_case(&r, c, sets ? out : first, ref, n, (int)i), "%s on %s: %s", what, isas[s], r.err);
            CHECKF(!sets || !memcmp(first, out, sizeof(float) * n), "%s: %s's bits differ from scalar's", what, isas[s]);
            sets++;
        }
        free(first);
        free(out);
        free(ref);
    }
    close_cpu(be);   /* and back to the choice by type */
    if (sets < 2) SKIP("this CPU runs only the scalar kernels");
}

/* ------------------------------------------------------------ batch invariance */

/* The product of tw on B rows of `in` floats at x, into out ([B][outs]):
 * all rows in one step (one_by_one 0) or each row a step of its own. */
static int product_rows(run_ctx *r, test_weight *tw, int tr, const float *x, int B, int in, int outs, int one_by_one,
                        float *out)
{
    int rc = 0;
    for (int b0 = 0; b0 < B && !rc; b0 += one_by_one ? 1 : B) {
        const int nb = one_by_one ? 1 : B;
        hc_buf *bx = upload(r, x + (size_t)b0 * in, (size_t)nb * in), *by = upload(r, NULL, (size_t)nb * outs);
        rc = !bx || !by;
        if (!rc) {
            r->o->matmul(r->be, V(bx), nb, &(hc_mm){ &tw->m, 0, tr, V(by), (size_t)outs, 0 }, 1);
            rc = r->o->read(r->be, V(by), out + (size_t)b0 * outs, sizeof(float) * (size_t)nb * outs, r->err,
                            sizeof r->err);
        }
        if (bx) r->o->buf_free(r->be, bx);
        if (by) r->o->buf_free(r->be, by);
    }
    return rc;
}

/* Attention of B rows at positions pos0.. of one sequence (heads of hd
 * floats, nh of them over nkv KV heads), into out: all rows in one step or
 * each alone; the cache's k and v of type kvt (GGML_TYPE_F32 or F16), its
 * inputs rounded to f16 first when f16_inputs. */
static int attention_rows_as(run_ctx *r, int hd, int nh, int nkv, int B, int pos0, int one_by_one, uint32_t kvt,
                             int f16_inputs, float *out)
{
    const hc_backend_ops *o = r->o;
    static step_rows rw;
    hc_hparams hp = hparams();
    hp.head_dim = hd, hp.n_head = nh, hp.n_head_kv = nkv, hp.n_layer = 1, hp.n_embd = nh * hd;
    const int q_dim = nh * hd, kv_dim = nkv * hd, npos = pos0 + B, n_blocks = hc_blocks_for(npos, HC_KV_BLOCK);
    rng = 77;
    float *q = rand_vec((size_t)B * q_dim, 1.0f), *k = rand_vec((size_t)npos * kv_dim, 1.0f),
          *v = rand_vec((size_t)npos * kv_dim, 1.0f);
    for (size_t i = 0; f16_inputs && i < (size_t)npos * (size_t)kv_dim; i++) {
        k[i] = fp16_to_fp32(fp32_to_fp16(k[i]));
        v[i] = fp16_to_fp32(fp32_to_fp16(v[i]));
    }
    hc_kv *kv = o->kv_new(r->be, &hp, n_blocks, n_blocks, HC_KV_BLOCK, npos, NULL, kvt, kvt, r->err, sizeof r->err);
    hc_buf *bq = upload(r, q, (size_t)B * q_dim), *bk = upload(r, k, (size_t)npos * kv_dim),
           *bv = upload(r, v, (size_t)npos * kv_dim), *bo = upload(r, NULL, (size_t)B * q_dim);
    int rc = !kv || !bq || !bk || !bv || !bo;
    if (!rc) {
        o->batch(r->be, rows_at(&rw, 0, npos, 0, n_blocks, HC_KV_BLOCK));
        o->kv_store(r->be, kv, 0, npos, V(bk), V(bv));
        o->batch(r->be, rows_at(&rw, pos0, B, 0, n_blocks, HC_KV_BLOCK));
        const size_t row = sizeof(float) * q_dim;
        for (int b0 = 0; b0 < B; b0 += one_by_one ? 1 : B)
            o->attention(r->be, kv, 0, &hp, hc_view_at(V(bq), row * b0), b0, one_by_one ? 1 : B,
                         hc_view_at(V(bo), row * b0));
        rc = o->read(r->be, V(bo), out, row * B, r->err, sizeof r->err);
    }
    if (kv) o->kv_free(r->be, kv);
    hc_buf *bufs[] = { bq, bk, bv, bo };
    for (int i = 0; i < 4; i++)
        if (bufs[i]) o->buf_free(r->be, bufs[i]);
    free(q);
    free(k);
    free(v);
    return rc;
}
static int attention_rows(run_ctx *r, int hd, int nh, int nkv, int B, int pos0, int one_by_one, float *out)
{
    return attention_rows_as(r, hd, nh, nkv, B, pos0, one_by_one, GGML_TYPE_F32, 0, out);
}

/* With HC_CL_BATCH_INVARIANT each row of a step has the bits it has alone
 * (--parallel's texts are their plain runs'): products of every type
 * (transposed too) and attention over several chunks, on the device's own
 * geometry and an H200's. */
static void test_batch_invariant(void)
{
    static const int mm[][3] = { { 100, 4096, 7 }, { 130, 192, 70 } }, mt[][3] = { { 1000, 64, 19 }, { 300, 96, 7 } };
    char why[512];
    int no_device;
    for (int gpu = 0; gpu < 2; gpu++) {
        hc_backend *be = (gpu ? open_opencl_inv_gpu : open_opencl_inv)(&no_device, why, sizeof why);
        CHECKF(be || no_device, "%s", why);
        if (!be) SKIP("no OpenCL device");
        run_ctx r = { be, be->ops, "" };
        for (int tr = 0; tr < 2; tr++)
            for (int t = 0; t < (tr ? T_GPTQ : N_T); t++)
                for (int s = 0; s < 2; s++) {
                    const int rows = (tr ? mt : mm)[s][0], n = (tr ? mt : mm)[s][1], B = (tr ? mt : mm)[s][2];
                    const int in = tr ? rows : n, outs = tr ? n : rows;
                    test_weight tw;
                    rng = 5;
                    float *x = rand_vec((size_t)B * in, 1.0f), *all = calloc((size_t)B * outs, sizeof(float)),
                          *one = calloc((size_t)B * outs, sizeof(float));
                    int rc = weight_new(&r, t, rows, n, &tw) || product_rows(&r, &tw, tr, x, B, in, outs, 0, all) ||
                             product_rows(&r, &tw, tr, x, B, in, outs, 1, one);
                    CHECKF(!rc, "%s%s %dx%d: %s", t_names[t], tr ? " transposed" : "", rows, n, r.err);
                    CHECKF(rc || !memcmp(all, one, sizeof(float) * (size_t)B * outs),
                           "%s geometry: %s%s %dx%d: %d rows at once differ from one at a time", gpu ? "GPU" : "own",
                           t_names[t], tr ? " transposed" : "", rows, n, B);
                    weight_free(&r, &tw);
                    free(x);
                    free(all);
                    free(one);
                }
        static const int at[][2] = { { 19, 300 }, { 7, 1500 }, { 33, 0 } };
        for (int i = 0; i < 3; i++) {
            const int B = at[i][0], pos0 = at[i][1];
            float *all = calloc((size_t)B * 256, sizeof(float)), *one = calloc((size_t)B * 256, sizeof(float));
            int rc = attention_rows(&r, 64, 4, 2, B, pos0, 0, all) || attention_rows(&r, 64, 4, 2, B, pos0, 1, one);
            CHECKF(!rc, "attention: %s", r.err);
            CHECKF(rc || !memcmp(all, one, sizeof(float) * (size_t)B * 256),
                   "%s geometry: attention of %d rows from position %d differs from one at a time", gpu ? "GPU" : "own",
                   B, pos0);
            free(all);
            free(one);
        }
        close_opencl(be);
    }
}

/* The CPU's attention gives each row the same bits whether its run holds
 * several tokens (a head at a time) or one (decoding: a block of heads
 * position by position, the blocks sized by the threads): for 1, 2 and 3
 * threads, heads of 64 and of 12 floats (not whole lanes), 4 over 2 KV
 * heads, 6 over 3 and 5 over 5 (blocks that do not divide them), every row
 * the bits of the first run's. */
static void test_cpu_attention_blocks(void)
{
    static const int shapes[][3] = { { 64, 4, 2 }, { 12, 6, 3 }, { 32, 5, 5 } };
    enum { B = 9, POS0 = 300 };
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int hd = shapes[s][0], nh = shapes[s][1], nkv = shapes[s][2], n = B * nh * hd;
        float *first = calloc((size_t)n, sizeof(float)), *out = calloc((size_t)n, sizeof(float));
        for (int threads = 1; threads <= 3; threads++)
            for (int one = 0; one < 2; one++) {
                char why[512];
                int skip;
                cpu_threads = threads;
                hc_backend *be = open_cpu(&skip, why, sizeof why);
                CHECKF(be, "%s", why);
                run_ctx r = { be, be->ops, "" };
                int rc = attention_rows(&r, hd, nh, nkv, B, POS0, one, threads == 1 && !one ? first : out);
                close_cpu(be);
                CHECKF(!rc, "attention: %s", r.err);
                CHECKF((threads == 1 && !one) || !memcmp(first, out, sizeof(float) * (size_t)n),
                       "hd %d, %d heads over %d: %d threads, rows %s: bits differ from 1 thread's step", hd, nh, nkv,
                       threads, one ? "one at a time" : "in one step");
            }
        cpu_threads = 2;
        free(first);
        free(out);
    }
}

/* The CPU's f16 KV cache (-ctk/-ctv f16): on inputs that f16 holds
 * exactly, the bits of the f32 cache, on every instruction set this CPU runs
 * (F16C's widening and fp16_to_fp32's agree), for a prompt's rows in one
 * step and each alone (its groups, lone tokens and the heads' passes); on
 * others, within f16's rounding of it, and not equal (the cache is f16
 * indeed). Heads of 64 and of 12 floats (not whole lanes), 4 over 2 KV heads
 * and 6 over 3. */
static void test_attention_f16_cache(void)
{
    static const char *const isas[] = { "scalar", "avx2", "avx512" };
    static const int shapes[][3] = { { 64, 4, 2 }, { 12, 6, 3 } };
    enum { B = 9, POS0 = 300 };
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int hd = shapes[s][0], nh = shapes[s][1], nkv = shapes[s][2], n = B * nh * hd;
        float *f32 = calloc((size_t)n, sizeof(float)), *f16 = calloc((size_t)n, sizeof(float));
        float *first = calloc((size_t)n, sizeof(float));
        int sets = 0;
        for (size_t i = 0; i < sizeof isas / sizeof *isas; i++) {
            if (hc_kernel_force(isas[i])) continue;   /* not on this CPU */
            for (int one = 0; one < 2; one++) {
                char why[512];
                int skip;
                hc_backend *be = open_cpu(&skip, why, sizeof why);
                CHECKF(be, "%s", why);
                hc_kernel_force(isas[i]);   /* again: close_cpu of the round before set it back */
                run_ctx r = { be, be->ops, "" };
                int rc = attention_rows_as(&r, hd, nh, nkv, B, POS0, one, GGML_TYPE_F32, 1, f32) ||
                         attention_rows_as(&r, hd, nh, nkv, B, POS0, one, GGML_TYPE_F16, 1, f16);
                CHECKF(!rc, "attention: %s", r.err);
                CHECKF(!memcmp(f32, f16, sizeof(float) * (size_t)n),
                       "hd %d, %d heads over %d, %s, rows %s: an f16 cache of f16 values differs from the f32 cache",
                       hd, nh, nkv, isas[i], one ? "one at a time" : "in one step");
                CHECKF(sets++ == 0 || !memcmp(first, f16, sizeof(float) * (size_t)n),
                       "hd %d, %d heads over %d: %s, rows %s: bits differ from the first set's", hd, nh, nkv, isas[i],
                       one ? "one at a time" : "in one step");
                if (sets == 1) memcpy(first, f16, sizeof(float) * (size_t)n);
                if (!one) {
                    rc = attention_rows_as(&r, hd, nh, nkv, B, POS0, 0, GGML_TYPE_F32, 0, f32) ||
                         attention_rows_as(&r, hd, nh, nkv, B, POS0, 0, GGML_TYPE_F16, 0, f16);
                    CHECKF(!rc, "attention: %s", r.err);
                    double most = 0;
                    for (int j = 0; j < n; j++) most = fmax(most, fabs((double)f32[j] - f16[j]));
                    CHECKF(most > 0 && most < 2e-3, "hd %d, %d heads over %d, %s: f16 cache %g from the f32 one", hd, nh,
                           nkv, isas[i], most);
                }
                close_cpu(be);
            }
        }
        free(f32);
        free(f16);
        free(first);
    }
}

/* The largest error of f(x) against ref(x) (in double) over every 97th
 * float x in [lo, hi] (lo <= 0 <= hi; the magnitudes' bit patterns in steps
 * of 97 on each side of 0), beyond slack·|x|·2^-24, in units of the last
 * place of ref(x) as a float; *at: where. */
static double worst_ulp(float (*f)(float), double (*ref)(double), float lo, float hi, double slack, float *at)
{
    double worst = 0;
    for (int neg = 0; neg < 2; neg++) {
        float end = neg ? -lo : hi;
        uint32_t last;
        memcpy(&last, &end, sizeof last);
        for (uint32_t b = 0; b <= last; b += 97) {
            float m, x;
            memcpy(&m, &b, sizeof m);
            x = neg ? -m : m;
            double r = ref((double)x), e = fabs((double)f(x) - r) - slack * fabs((double)x) * 0x1p-24;
            int exp2;
            frexp(fabs(r) > 0x1p-126 ? r : 0x1p-126, &exp2);
            double ulps = e / ldexp(1.0, exp2 - 24);
            if (ulps > worst) worst = ulps, *at = x;
        }
    }
    return worst;
}

/* The attention's softmax exponential (hc_cpu_exp, vmath.h): within 1 ulp
 * of e^x rounded from double over [-87.33, 0] (every float there was checked
 * once: 1 ulp at most), exactly 1 at 0, 0 below FLT_MIN's logarithm and for
 * -inf, NaN for NaN. */
static void test_softmax_exp(void)
{
    float at = 0;
    double worst = worst_ulp(hc_cpu_exp, exp, -87.33f, 0.0f, 0, &at);
    CHECKF(worst <= 1, "e^%.9g: %.2f ulp from exp", at, worst);
    CHECK(hc_cpu_exp(0.0f) == 1.0f && hc_cpu_exp(-0.0f) == 1.0f);
    CHECK(hc_cpu_exp(-88.0f) == 0.0f && hc_cpu_exp(-1e30f) == 0.0f && hc_cpu_exp(-INFINITY) == 0.0f);
    CHECK(isnan(hc_cpu_exp(NAN)));
}

static double silu_ref(double x) { return x / (1.0 + exp(-x)); }

/* The FFN's SiLU (hc_cpu_silu, vmath.h): within 3.5 ulp of x / (1 + e^-x)
 * rounded from double over [-87.33, 100], -0 below, and the special values
 * as x / (1 + expf(-x)) gives them. */
static void test_silu(void)
{
    float at = 0;
    double worst = worst_ulp(hc_cpu_silu, silu_ref, -87.33f, 100.0f, 0, &at);
    CHECKF(worst <= 3.5, "SiLU(%.9g): %.2f ulp from x / (1 + exp(-x))", at, worst);
    CHECK(hc_cpu_silu(0.0f) == 0.0f && signbit(hc_cpu_silu(-0.0f)));
    CHECK(hc_cpu_silu(-88.0f) == 0.0f && signbit(hc_cpu_silu(-88.0f)) && hc_cpu_silu(-1e30f) == 0.0f);
    CHECK(hc_cpu_silu(INFINITY) == INFINITY && isnan(hc_cpu_silu(-INFINITY)) && isnan(hc_cpu_silu(NAN)));
}

static double gelu_ref(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

/* The FFN's GELU (hc_cpu_gelu, vmath.h): within 1.5 ulp of GELU from double,
 * beyond |x|·2^-24 (where 1 + erf(x/√2) is small: v/2 · (1 + erff(v/√2))
 * cancels there), over [-20, 20]; the special values as that formula. */
static void test_gelu(void)
{
    float at = 0;
    double worst = worst_ulp(hc_cpu_gelu, gelu_ref, -20.0f, 20.0f, 1, &at);
    CHECKF(worst <= 1.5, "GELU(%.9g): %.2f ulp beyond |x|·2^-24 from double", at, worst);
    CHECK(hc_cpu_gelu(0.0f) == 0.0f && signbit(hc_cpu_gelu(-0.0f)) && hc_cpu_gelu(100.0f) == 100.0f);
    CHECK(hc_cpu_gelu(INFINITY) == INFINITY && isnan(hc_cpu_gelu(-INFINITY)) && isnan(hc_cpu_gelu(NAN)));
}

/* What the device does not take, NULL and the type named: a weight of a
 * type its kernels lack, a KV cache of a type other than f32 and f16. */
static void test_unsupported(void)
{
    char why[512];
    int no_device;
    hc_backend *be = open_opencl(&no_device, why, sizeof why);
    CHECKF(be || no_device, "%s", why);
    if (!be) SKIP("no OpenCL device");
    static const block_q4_1 blk[4];
    hc_weight w = { HC_WEIGHT_GGML, GGML_TYPE_Q4_1, blk, 32, 4, NULL };
    char err[256] = "";
    void *m = be->ops->mat_new(be, &w, err, sizeof err);
    CHECKF(!m && strstr(err, "Q4_1"), "%s", err);
    hc_hparams hp = hparams();
    hc_kv *kv = be->ops->kv_new(be, &hp, 4, 4, HC_KV_BLOCK, 64, NULL, GGML_TYPE_F16, GGML_TYPE_Q8_0, err, sizeof err);
    CHECKF(!kv && strstr(err, "Q8_0") && strstr(err, "not implemented"), "device kv_new of q8_0: %s", kv ? "made" : err);
    /* a failed step is sticky: read and sync report it */
    hc_buf *b = be->ops->buf_new(be, 64, err, sizeof err);
    hc_bmat bm = { &w, NULL };
    hc_mm it = { &bm, 0, 0, { b, 0 }, 4, 0 };
    be->ops->matmul(be, (hc_view){ b, 0 }, 1, &it, 1);
    float y[4];
    CHECK(be->ops->sync(be, err, sizeof err) == -1 && strstr(err, "without a device copy"));
    CHECK(be->ops->read(be, (hc_view){ b, 0 }, y, sizeof y, err, sizeof err) == -1);
    be->ops->buf_free(be, b);
    close_opencl(be);
}

/* ------------------------------------------------------------ launch geometry */

/* 7B shapes (dim 4096, n_ff 11008, 32 heads, ctx 2048, vocab 32000) on an
 * H200-like GPU (132 units, groups up to 1024) and a PoCL-like CPU device
 * (2 units): every launch has a group per unit or more where the problem
 * has that many rows, heads x positions or elements; local sizes are powers
 * of two within the device's limit, and local memory within NVIDIA's 48 KiB. */
static void test_clb_geometry(void)
{
    const hc_clb_device devs[] = { { 132, 1024, 1 }, { 2, 4096, 0 }, { 108, 1024, 1 }, { 16, 256, 1 } };
    const int E = 4096, F = 11008, H = 32, CTX = 2048, V = 32000;
    for (size_t i = 0; i < sizeof devs / sizeof *devs; i++) {
        const hc_clb_device *d = &devs[i];
        const size_t cu = d->cu, lm = 48 * 1024;
        /* products: q/k/v/o (E x E), gate/up (F x E), down (E x F), output (V x E) */
        const int shapes[][2] = { { E, E }, { F, E }, { E, F }, { V, E } };
        for (size_t s = 0; s < 4; s++)
            for (int B = 1; B <= 512; B *= 8) {
                const int rows = shapes[s][0], n = shapes[s][1];
                if (B == 1) {   /* float rows (units of 8), quantized ones (blocks of 32) */
                    for (int unit = HC_CLB_UNIT_F; unit <= HC_CLB_UNIT_Q; unit += HC_CLB_UNIT_Q - HC_CLB_UNIT_F) {
                        size_t lanes = hc_clb_mv_lanes(d, n / unit), R = hc_clb_mv_rows(d, lanes);
                        size_t l = lanes * R, g = ((size_t)rows + R - 1) / R;
                        CHECKF(g >= cu && l <= d->wg_max && (lanes & (lanes - 1)) == 0 && (R & (R - 1)) == 0 &&
                                   sizeof(float) * l <= lm && (!d->gpu || (l >= 128 && lanes >= 32)),
                               "device %zu: product %dx%d: %zu groups of %zu x %zu", i, rows, n, g, lanes, R);
                        /* every lane has a unit of the row to read */
                        CHECK(lanes * (size_t)unit <= (size_t)n);
                        /* one row's Q8 form on a GPU: a step's lanes read words of one run side by side */
                        if (unit == HC_CLB_UNIT_Q)
                            CHECKF(hc_clb_q8_interleaved(d, 1) == d->gpu &&
                                       (!d->gpu || HC_CLB_Q8_RUN % lanes == 0),
                                   "device %zu: product %dx%d: %zu lanes, runs of %d", i, rows, n, lanes,
                                   (int)HC_CLB_Q8_RUN);
                        /* the FFN neurons that make h's Q8_0 form too: groups of 32 rows */
                        size_t gl = hc_clb_glu_lanes(d, n / unit);
                        CHECKF((gl & (gl - 1)) == 0 && 32 * gl <= d->wg_max && gl * (size_t)unit <= (size_t)n &&
                                   (!d->gpu || (32 * gl >= 128 && HC_CLB_Q8_RUN % gl == 0)),
                               "device %zu: FFN neurons %dx%d: %zu lanes", i, rows, n, gl);
                    }
                    continue;
                }
                CHECK(!hc_clb_q8_interleaved(d, B));   /* the tiles read a block's 32 code bytes whole */
                /* tiled: the groups (tiles x slices) fill the device, each slice 8 blocks or more, local memory
                 * (the tiles of 32 inputs as floats, a row apiece padded by one, and the scale pairs) within 48 KiB */
                const size_t tile = (size_t)hc_clb_mm_tile(B);
                const int S = hc_clb_mm_slices(d, rows, n, B);
                size_t g = ((size_t)rows + HC_CLB_MM_ROWS - 1) / HC_CLB_MM_ROWS * ((B + tile - 1) / tile) * (size_t)S;
                size_t mem = 32 * sizeof(float) * (HC_CLB_MM_ROWS + 1 + tile + 1) + 2 * sizeof(float) * (HC_CLB_MM_ROWS + tile);
                CHECKF(g >= cu && HC_CLB_MM_ITEMS <= d->wg_max && mem <= lm && S >= 1 && S <= 16 &&
                           (S == 1 || (size_t)n / 32 / (size_t)S >= 8) && (tile == 64 || tile >= (size_t)B),
                       "device %zu: product %dx%d B %d: %zu groups (%d slices)", i, rows, n, B, g, S);
            }
        /* ffn_down_t: 4096 outputs over 11008 rows, decode and prompts; on a GPU 32 groups a compute unit
         * where the rows allow (32 a slice or more), the slices' sums within HC_CLB_T_PART */
        for (int B = 1; B <= 512; B *= 8) {
            size_t tl = hc_clb_t_local(d, E / 8), S = (size_t)hc_clb_t_slices(d, E / 8, F, B);
            size_t tg = (E / 8 + tl - 1) / tl * S * (((size_t)B + HC_CLB_TOKENS - 1) / HC_CLB_TOKENS);
            CHECKF(tg >= cu && tl <= d->wg_max && S * 32 <= (size_t)F && S * (size_t)B * E <= HC_CLB_T_PART &&
                       (!d->gpu || B > 1 || tg >= 16 * cu),
                   "device %zu: transposed, B %d: %zu groups, %zu slices", i, B, tg, S);
        }
        /* batch-invariant: one row's slices for every batch, in launches of rows whose sums fit */
        const int Sf = hc_clb_t_slices_fixed(d, E / 8, F), tr = hc_clb_t_rows(E / 8, Sf);
        CHECKF(Sf >= 1 && Sf <= HC_CLB_T_FIXED && Sf == (hc_clb_t_slices(d, E / 8, F, 1) < HC_CLB_T_FIXED
                                                            ? hc_clb_t_slices(d, E / 8, F, 1) : HC_CLB_T_FIXED) &&
                   tr >= 1 && (size_t)Sf * (size_t)tr * E <= HC_CLB_T_PART,
               "device %zu: batch-invariant transposed: %d slices, %d rows a launch", i, Sf, tr);
        /* attention: decode at several positions, and a prompt */
        const int npos[] = { 1, 17, 512, CTX };
        for (size_t p = 0; p < 4; p++)
            for (int B = 1; B <= 64; B *= 64) {
                int n = npos[p] + B - 1, ch = hc_clb_attn_chunk(d, H, B, n);
                size_t l = hc_clb_attn_local(d, 128), g = (size_t)H * B * (size_t)((n + ch - 1) / ch);
                size_t could = (size_t)H * B * (size_t)((n + 15) / 16), W = (size_t)hc_clb_attn_lanes(128);
                size_t tile = (size_t)hc_clb_attn_tile(128) * (W + 1);   /* the tile of scores in local memory */
                size_t ob = hc_clb_attn_sums(l, 128);                       /* the slices' value sums */
                CHECKF(g >= (could < cu ? could : cu) && ch <= HC_CLB_CHUNK_MAX &&
                       sizeof(float) * ((size_t)ch + l + ob + tile) <= lm && l <= d->wg_max && tile >= 16 * (W + 1) &&
                       (!d->gpu || l % W == 0),   /* a GPU: a row's lanes side by side, whole slices */
                       "device %zu: attention of %d positions, B %d: chunks of %d, %zu groups", i, n, B, ch, g);
            }
        CHECK(hc_clb_attn_chunk(d, H, 1, CTX) < CTX || cu <= (size_t)H);
        CHECK(HC_CLB_CHUNK_FIXED <= HC_CLB_CHUNK_MAX);   /* batch-invariant attention's chunks */
        /* norms: one group per row, within the limit */
        CHECK(hc_clb_norm_local(d, E) <= d->wg_max && hc_clb_norm_local(d, E) <= (size_t)E);
        /* element-wise: rope pairs, biases, the FFN activation, the logits */
        const size_t ns[] = { E / 2, E, (size_t)F, (size_t)V, 7 };
        for (size_t k = 0; k < 5; k++) {
            size_t l = hc_clb_ew_local(d, ns[k]), g = (ns[k] + l - 1) / l;
            CHECKF(g >= (ns[k] < cu ? ns[k] : cu) && l <= d->wg_max, "device %zu: %zu elements: %zu groups", i, ns[k], g);
        }
    }
}

int main(void)
{
    RUN(test_clb_geometry);
    for (size_t i = 0; i < sizeof backends / sizeof *backends; i++) {
        char name[64];
        cur = &backends[i];
        snprintf(name, sizeof name, "test_ops_%s", cur->name);
        th_run(name, test_ops);
    }
    RUN(test_cpu_isas);
    RUN(test_cpu_attention_blocks);
    RUN(test_attention_f16_cache);
    RUN(test_batch_invariant);
    RUN(test_softmax_exp);
    RUN(test_silu);
    RUN(test_gelu);
    RUN(test_unsupported);
    return th_done();
}

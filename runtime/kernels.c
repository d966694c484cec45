/* Public kernel API: type checks, the run-time choice of instruction set, and
 * the row / batch loops shared by every instruction set (kernels_impl.h). */
#include "kernels.h"
#include "kernels_impl.h"
#include "kernels_tile.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <stdatomic.h>
#include <string.h>

#include "cli.h"
#include "ggml_types.h"
#include "quants.h"

/* Batched matvec: weight rows are processed in tiles of about this many bytes,
 * so a tile stays in L2 while every activation vector is dotted with it. */
#define TILE_BYTES (256 * 1024)

static int kidx(uint32_t type)
{
    switch (type) {
    case GGML_TYPE_F32:  return HC_K_F32;
    case GGML_TYPE_F16:  return HC_K_F16;
    case GGML_TYPE_BF16: return HC_K_BF16;
    case GGML_TYPE_Q8_0: return HC_K_Q8_0;
    case GGML_TYPE_Q4_0: return HC_K_Q4_0;
    default:             return -1;
    }
}

static int checked_kidx(uint32_t type, int n)
{
    int k = kidx(type);
    if (k < 0) hc_die("kernels: no matvec kernel for weight type %u", type);
    if (k >= HC_K_Q8_0 && n % QK8_0) hc_die("kernels: row of %d elements is not whole blocks", n);
    return k;
}

#if defined(__x86_64__)
/* clang's __builtin_cpu_supports does not know "f16c": ask cpuid (leaf 1, ecx). */
static int has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

static const struct hc_isa *best_isa(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    int base = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    if (base && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni"))
        return &hc_isa_avx512;
    if (base) return &hc_isa_avx2;
#endif
    return &hc_isa_scalar;
}

/* Chosen on first use; threads racing here all store the same value.
 * Tests and benchmarks change it with hc_kernel_force between runs. */
static _Atomic(const struct hc_isa *) cur_isa;

static const struct hc_isa *isa(void)
{
    const struct hc_isa *is = atomic_load_explicit(&cur_isa, memory_order_relaxed);
    if (!is) {
        is = best_isa();
        atomic_store_explicit(&cur_isa, is, memory_order_relaxed);
    }
    return is;
}

int hc_kernel_force(const char *name)
{
    const struct hc_isa *best = best_isa();
    if (!name) { atomic_store(&cur_isa, best); return 0; }
    const struct hc_isa *order[] = {
#if defined(__x86_64__)
        &hc_isa_avx512, &hc_isa_avx2,
#endif
        &hc_isa_scalar,
    };
    size_t i = 0, nisa = sizeof order / sizeof order[0];
    while (i < nisa && order[i] != best) i++;    /* the best and everything below it run here */
    for (; i < nisa; i++)
        if (!strcmp(order[i]->name, name)) { atomic_store(&cur_isa, order[i]); return 0; }
    return -1;
}

const char *hc_kernel_isa(void) { return isa()->name; }

int hc_kernel_supports(uint32_t type) { return kidx(type) >= 0; }

size_t hc_act_bytes(uint32_t type, int n)
{
    int k = kidx(type);
    if (k < 0) return 0;
    /* F32/F16/BF16 weights dot against the f32 vector itself (more exact than
     * ggml's f16 copy, and the weights, not the activations, bound the speed). */
    return k >= HC_K_Q8_0 ? (size_t)(n / QK8_0) * sizeof(block_q8_0) : (size_t)n * sizeof(float);
}

void hc_act_prepare(uint32_t type, const float *x, int n, void *act)
{
    if (checked_kidx(type, n) >= HC_K_Q8_0) isa()->quantize_q8(x, n, act);
    else memcpy(act, x, (size_t)n * sizeof(float));
}

/* y[i] = dot(row i, act) for i < nr, row i = idx ? idx[i] : r0 + i, `group`
 * rows per call: the instruction set's own row loop where it has one. */
static void dot_range(const struct hc_isa *is, int k, const char *W, size_t rb, const int32_t *idx,
                      int r0, int nr, int group, const void *act, int n, float *y)
{
    if (is->dots[k]) {
        is->dots[k](W, rb, idx, r0, nr, group, act, n, y);
        return;
    }
    const void *rows[HC_DOT_ROWS];
    for (int i0 = 0; i0 < nr; i0 += group) {
        int g = nr - i0 < group ? nr - i0 : group;
        for (int i = 0; i < g; i++) rows[i] = W + (size_t)(idx ? idx[i0 + i] : r0 + i0 + i) * rb;
        is->dot[k](rows, g, act, n, y + i0);
    }
}

/* B = 1 streams the weights from memory one row at a time: a single ascending
 * stream is what hardware prefetchers follow (interleaving four rows halved
 * the speed of Q8_0/Q4_0 on Zen). B > 1 works on tiles that sit in L2, where
 * four rows per call share the activation work. */
static void matvec(const struct hc_isa *is, uint32_t type, const void *W, int n, int row0, int row1,
                   const void *acts, size_t act_stride, int B, float *y, size_t y_stride)
{
    int k = checked_kidx(type, n);
    size_t rb = ggml_row_size(type, n);
    hc_gemm_fn gemm = B > 1 ? hc_tile_gemm(is, k) : NULL;   /* register-tiled (kernels_tile.h) */
    if (gemm) { gemm(W, rb, row0, row1 - row0, acts, act_stride, B, y, y_stride, n); return; }
    int tile = row1 - row0, group = B > 1 ? HC_DOT_ROWS : 1;
    if (B > 1 && (size_t)tile * rb > TILE_BYTES) tile = rb >= TILE_BYTES ? 1 : (int)(TILE_BYTES / rb);
    for (int t0 = row0; t0 < row1; t0 += tile) {
        int t1 = row1 - t0 < tile ? row1 : t0 + tile;
        for (int b = 0; b < B; b++)
            dot_range(is, k, W, rb, NULL, t0, t1 - t0, group, (const char *)acts + (size_t)b * act_stride, n,
                      y + (size_t)b * y_stride + (t0 - row0));
    }
}

void hc_matvec(uint32_t type, const void *W, int n, int row0, int row1,
               const void *acts, size_t act_stride, int B, float *y, size_t y_stride)
{
    matvec(isa(), type, W, n, row0, row1, acts, act_stride, B, y, y_stride);
}

void hc_matvec_ref(uint32_t type, const void *W, int n, int row0, int row1,
                   const void *acts, size_t act_stride, int B, float *y, size_t y_stride)
{
    matvec(&hc_isa_scalar, type, W, n, row0, row1, acts, act_stride, B, y, y_stride);
}

void hc_matvec_rows(uint32_t type, const void *W, int n, const int32_t *idx, int k,
                    const void *act, float *y)
{
    /* one row at a time, as the B = 1 matvec */
    dot_range(isa(), checked_kidx(type, n), W, ggml_row_size(type, n), idx, 0, k, 1, act, n, y);
}

void hc_axpy_row(uint32_t type, const void *row, int n, float a, float *y)
{
    isa()->axpy[checked_kidx(type, n)](row, n, a, y);
}

void hc_axpy_row_ref(uint32_t type, const void *row, int n, float a, float *y)
{
    hc_isa_scalar.axpy[checked_kidx(type, n)](row, n, a, y);
}

void hc_row_to_f32(uint32_t type, const void *row, int n, float *out)
{
    const uint16_t *h = row;
    switch (type) {
    case GGML_TYPE_F32:  memcpy(out, row, (size_t)n * sizeof(float)); return;
    case GGML_TYPE_F16:  for (int i = 0; i < n; i++) out[i] = fp16_to_fp32(h[i]); return;
    case GGML_TYPE_BF16: for (int i = 0; i < n; i++) out[i] = bf16_to_fp32(h[i]); return;
    case GGML_TYPE_Q8_0: dequantize_row_q8_0(row, out, n); return;
    case GGML_TYPE_Q4_0: dequantize_row_q4_0(row, out, n); return;
    case GGML_TYPE_Q4_1: dequantize_row_q4_1(row, out, n); return;
    default: hc_die("kernels: cannot convert weight type %u to f32", type);
    }
}

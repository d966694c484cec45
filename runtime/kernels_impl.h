/* Internal to the kernels: one table of functions per instruction set.
 * kernels.c owns the public API and the row/batch loops; each kernels_ISA.c
 * provides the per-row dot products, axpy and the Q8_0 activation quantizer. */
#ifndef HC_KERNELS_IMPL_H
#define HC_KERNELS_IMPL_H

#include <stddef.h>
#include <stdint.h>

/* Weight types the kernels handle, as dense table indices. */
enum { HC_K_F32, HC_K_F16, HC_K_BF16, HC_K_Q8_0, HC_K_Q4_0, HC_K_COUNT };

/* y[i] = dot(rows[i], act) for i < nr, 1 <= nr <= HC_DOT_ROWS, rows of n elements.
 * Several rows per call share the activation work; y[i] is bit-identical
 * whatever nr is, so results never depend on how callers split the rows. */
#define HC_DOT_ROWS 4
typedef void (*hc_dot_fn)(const void *const *rows, int nr, const void *act, int n, float *y);
/* y[0..n) += a * row. */
typedef void (*hc_axpy_fn)(const void *row, int n, float a, float *y);
/* x (n floats, n % 32 == 0) -> n/32 block_q8_0, bit-identical to quantize_row_q8_0_ref. */
typedef void (*hc_q8_fn)(const float *x, int n, void *blocks);

/* Optional, per type: y[i] = dot(row i, act) for i < nr, row i at
 * W + (idx ? idx[i] : r0 + i) * rb, `group` (1 or HC_DOT_ROWS) rows per pass
 * over act. Lets an instruction set rearrange the activation once for many
 * rows; it must give each row the bits its dot gives. NULL: kernels.c loops
 * over dot. */
typedef void (*hc_dots_fn)(const char *W, size_t rb, const int32_t *idx, int r0, int nr, int group,
                           const void *act, int n, float *y);

struct hc_isa {
    const char *name;
    hc_dot_fn dot[HC_K_COUNT];
    hc_axpy_fn axpy[HC_K_COUNT];
    hc_q8_fn quantize_q8;
    hc_dots_fn dots[HC_K_COUNT];
};

/* The F32, F16 and BF16 dot and axpy entries of a SIMD table, from the file's
 * dot_float(kind, row, act, n) and axpy_float(kind, row, n, a, y); T is the
 * file's target attribute. */
#define HC_FLOAT_KERNELS                                                                        \
    T static void dot_f32(const void *const *w, int nr, const void *x, int n, float *y)         \
    { for (int i = 0; i < nr; i++) y[i] = dot_float(HC_K_F32, w[i], x, n); }                    \
    T static void dot_f16(const void *const *w, int nr, const void *x, int n, float *y)         \
    { for (int i = 0; i < nr; i++) y[i] = dot_float(HC_K_F16, w[i], x, n); }                    \
    T static void dot_bf16(const void *const *w, int nr, const void *x, int n, float *y)        \
    { for (int i = 0; i < nr; i++) y[i] = dot_float(HC_K_BF16, w[i], x, n); }                   \
    T static void axpy_f32(const void *w, int n, float a, float *y) { axpy_float(HC_K_F32, w, n, a, y); }   \
    T static void axpy_f16(const void *w, int n, float a, float *y) { axpy_float(HC_K_F16, w, n, a, y); }   \
    T static void axpy_bf16(const void *w, int n, float a, float *y) { axpy_float(HC_K_BF16, w, n, a, y); }

/* An hc_dots_fn NAME: act arranged once into PER(nb) values of XT by ARR (on
 * the stack up to STACK, else ALIGN-aligned on the heap), then `group` rows per
 * pass through ROWS(R, rows, xa, nb, y). T is the file's target attribute. */
#define HC_DOTS_ROWS(NAME, XT, ARR, PER, STACK, ALIGN, ROWS)                                    \
    T static void NAME(const char *W, size_t rb, const int32_t *idx, int r0, int nr, int group, \
                       const void *act, int n, float *y)                                        \
    {                                                                                           \
        int nb = n / 32, np = PER(nb);                                                          \
        XT stack[STACK], *xa = stack;                                                           \
        if (np > (STACK) && !(xa = _mm_malloc(sizeof *xa * (size_t)np, ALIGN)))                 \
            hc_die("kernels: out of memory");                                                   \
        ARR(act, nb, xa);                                                                       \
        for (int i0 = 0; i0 < nr; i0 += group) {                                                \
            const char *rows[HC_DOT_ROWS];                                                      \
            int g = nr - i0 < group ? nr - i0 : group;                                          \
            for (int i = 0; i < g; i++) rows[i] = W + (size_t)(idx ? idx[i0 + i] : r0 + i0 + i) * rb; \
            if (g == HC_DOT_ROWS) ROWS(HC_DOT_ROWS, rows, xa, nb, y + i0);                      \
            else for (int i = 0; i < g; i++) ROWS(1, rows + i, xa, nb, y + i0 + i);             \
        }                                                                                       \
        if (xa != stack) _mm_free(xa);                                                          \
    }

extern const struct hc_isa hc_isa_scalar;
#if defined(__x86_64__)
extern const struct hc_isa hc_isa_avx2;
extern const struct hc_isa hc_isa_avx512;
#endif

#endif

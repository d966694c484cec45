/* INT4-GPTQ weights: repacking at load, prepared activations, and the
 * product (scalar reference, AVX2+FMA, AVX-512). See kernels_gptq.h. */
#include "kernels_gptq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml_types.h"
#include "kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Code of position k in a repacked row. */
static inline int code_at(const uint8_t *row, int k)
{
    const uint8_t b = row[(k / 32) * 16 + (k % 16)];
    return k % 32 < 16 ? b & 15 : b >> 4;
}

static inline int nib(const int32_t *words, size_t i, int j) { return (int)(((uint32_t)words[i] >> (4 * j)) & 15u); }

/* perm from g_idx: inputs stably sorted by group; NULL when g_idx is k / gs. */
static int sort_by_group(hc_gptq *g, const int32_t *g_idx, char *err, size_t errlen)
{
    int trivial = 1;
    for (int k = 0; k < g->n; k++) {
        if (g_idx[k] < 0 || g_idx[k] >= g->n_groups) {
            snprintf(err, errlen, "g_idx[%d] = %d is not a group of 0..%d", k, g_idx[k], g->n_groups - 1);
            return -1;
        }
        trivial &= g_idx[k] == k / g->gs;
    }
    if (trivial) return 0;
    int *start = calloc((size_t)g->n_groups + 1, sizeof *start);
    if (!start || !(g->perm = malloc(sizeof *g->perm * (size_t)g->n))) {
        free(start);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int k = 0; k < g->n; k++) start[g_idx[k] + 1]++;
    for (int i = 0; i < g->n_groups; i++) {
        const int want = i < g->n_groups - 1 ? g->gs : g->n - i * g->gs;
        if (start[i + 1] != want) {
            snprintf(err, errlen, "g_idx gives group %d %d inputs, expected %d", i, start[i + 1], want);
            free(start);
            return -1;
        }
        start[i + 1] += start[i];
    }
    for (int k = 0; k < g->n; k++) g->perm[start[g_idx[k]]++] = k;
    free(start);
    return 0;
}

int hc_gptq_load(hc_gptq *g, int n, int rows, int gs, const int32_t *qweight, const uint16_t *scales,
                 const int32_t *qzeros, const int32_t *g_idx, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    g->n = n;
    g->rows = rows;
    g->gs = gs;
    g->n_groups = (n + gs - 1) / gs;
    g->kp = (n + 31) / 32 * 32;
    if (g_idx && sort_by_group(g, g_idx, err, errlen) != 0) {
        hc_gptq_free(g);
        return -1;
    }
    const size_t rb = (size_t)g->kp / 2, G = (size_t)g->n_groups, zw = (size_t)(rows + 7) / 8;
    g->codes = calloc((size_t)rows, rb);
    g->sm = malloc(sizeof(float) * 2 * G * (size_t)rows);
    if (!g->codes || !g->sm) {
        hc_gptq_free(g);
        snprintf(err, errlen, "out of memory for a %d x %d GPTQ weight", rows, n);
        return -1;
    }
    for (int r = 0; r < rows; r++) {
        uint8_t *row = g->codes + (size_t)r * rb;
        for (int i = 0; i < n; i++) {
            const int k = g->perm ? g->perm[i] : i;
            const int q = nib(qweight, (size_t)(k / 8) * (size_t)rows + (size_t)r, k % 8);
            row[(i / 32) * 16 + (i % 16)] |= (uint8_t)(i % 32 < 16 ? q : q << 4);
        }
        for (size_t j = 0; j < G; j++) {
            const float s = fp16_to_fp32(scales[j * (size_t)rows + (size_t)r]);
            const int z = nib(qzeros, j * zw + (size_t)(r / 8), r % 8);
            g->sm[((size_t)r * G + j) * 2] = s;
            g->sm[((size_t)r * G + j) * 2 + 1] = -s * (float)z;
        }
    }
    return 0;
}

void hc_gptq_free(hc_gptq *g)
{
    free(g->codes);
    free(g->sm);
    free(g->perm);
    g->codes = NULL;
    g->sm = NULL;
    g->perm = NULL;
}

size_t hc_gptq_act_bytes(const hc_gptq *g) { return sizeof(float) * ((size_t)g->kp + (size_t)g->n_groups); }

void hc_gptq_act_prepare(const hc_gptq *g, const float *x, void *act)
{
    float *xa = act, *sums = xa + g->kp;
    for (int i = 0; i < g->n; i++) xa[i] = x[g->perm ? g->perm[i] : i];
    for (int i = g->n; i < g->kp; i++) xa[i] = 0.0f;
    for (int j = 0; j < g->n_groups; j++) {
        const int k1 = j == g->n_groups - 1 ? g->n : (j + 1) * g->gs;
        float s = 0.0f;
        for (int k = j * g->gs; k < k1; k++) s += xa[k];
        sums[j] = s;
    }
}

int hc_gptq_same_act(const hc_gptq *a, const hc_gptq *b)
{
    if (a->n != b->n || a->gs != b->gs || !a->perm != !b->perm) return 0;
    return !a->perm || memcmp(a->perm, b->perm, sizeof *a->perm * (size_t)a->n) == 0;
}

/* Positions of group j: [j*gs, end) where the last group runs to kp (zero padding). */
static inline int group_end(const hc_gptq *g, int j) { return j == g->n_groups - 1 ? g->kp : (j + 1) * g->gs; }

typedef float (*row_dot_fn)(const hc_gptq *g, const uint8_t *row, const float *sm, const float *x);

static float row_dot_ref(const hc_gptq *g, const uint8_t *row, const float *sm, const float *x)
{
    const float *sums = x + g->kp;
    float acc = 0.0f;
    for (int j = 0; j < g->n_groups; j++) {
        float dot = 0.0f;
        for (int k = j * g->gs; k < group_end(g, j); k++) dot += (float)code_at(row, k) * x[k];
        acc += sm[2 * j] * dot + sm[2 * j + 1] * sums[j];
    }
    return acc;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
static float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma")))
static float row_dot_avx2(const hc_gptq *g, const uint8_t *row, const float *sm, const float *x)
{
    const float *sums = x + g->kp;
    const __m128i mask = _mm_set1_epi8(15);
    float acc = 0.0f;
    for (int j = 0; j < g->n_groups; j++) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        for (int k = j * g->gs; k < group_end(g, j); k += 32) {
            const __m128i q = _mm_loadu_si128((const __m128i *)(row + k / 2));
            const __m128i lo = _mm_and_si128(q, mask), hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
            a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), _mm256_loadu_ps(x + k), a0);
            a1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), _mm256_loadu_ps(x + k + 8), a1);
            a2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), _mm256_loadu_ps(x + k + 16), a2);
            a3 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), _mm256_loadu_ps(x + k + 24), a3);
        }
        const float dot = hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        acc += sm[2 * j] * dot + sm[2 * j + 1] * sums[j];
    }
    return acc;
}

__attribute__((target("avx512f,avx512bw")))
static float row_dot_avx512(const hc_gptq *g, const uint8_t *row, const float *sm, const float *x)
{
    const float *sums = x + g->kp;
    const __m128i mask = _mm_set1_epi8(15);
    float acc = 0.0f;
    for (int j = 0; j < g->n_groups; j++) {
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        for (int k = j * g->gs; k < group_end(g, j); k += 32) {
            const __m128i q = _mm_loadu_si128((const __m128i *)(row + k / 2));
            const __m128i lo = _mm_and_si128(q, mask), hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
            a0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lo)), _mm512_loadu_ps(x + k), a0);
            a1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(hi)), _mm512_loadu_ps(x + k + 16), a1);
        }
        const float dot = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
        acc += sm[2 * j] * dot + sm[2 * j + 1] * sums[j];
    }
    return acc;
}
#endif

static void matvec(row_dot_fn dot, const hc_gptq *g, int row0, int row1, const void *acts, size_t act_stride,
                   int B, float *y, size_t y_stride)
{
    const size_t rb = (size_t)g->kp / 2, G2 = 2 * (size_t)g->n_groups;
    for (int r = row0; r < row1; r++)
        for (int b = 0; b < B; b++)
            y[(size_t)b * y_stride + (size_t)(r - row0)] =
                dot(g, g->codes + (size_t)r * rb, g->sm + (size_t)r * G2,
                    (const float *)((const char *)acts + (size_t)b * act_stride));
}

static row_dot_fn pick(const hc_gptq *g)
{
#if defined(__x86_64__)
    if (g->gs % 32 == 0) {
        const char *isa = hc_kernel_isa();
        if (!strcmp(isa, "avx512")) return row_dot_avx512;
        if (!strcmp(isa, "avx2")) return row_dot_avx2;
    }
#else
    (void)g;
#endif
    return row_dot_ref;
}

void hc_gptq_matvec(const hc_gptq *g, int row0, int row1, const void *acts, size_t act_stride,
                    int B, float *y, size_t y_stride)
{
    matvec(pick(g), g, row0, row1, acts, act_stride, B, y, y_stride);
}

void hc_gptq_matvec_ref(const hc_gptq *g, int row0, int row1, const void *acts, size_t act_stride,
                        int B, float *y, size_t y_stride)
{
    matvec(row_dot_ref, g, row0, row1, acts, act_stride, B, y, y_stride);
}

void hc_gptq_row(const hc_gptq *g, int r, float *out)
{
    const uint8_t *row = g->codes + (size_t)r * ((size_t)g->kp / 2);
    const float *sm = g->sm + (size_t)r * 2 * (size_t)g->n_groups;
    for (int i = 0; i < g->n; i++) {
        const int j = i / g->gs;
        out[g->perm ? g->perm[i] : i] = sm[2 * j] * (float)code_at(row, i) + sm[2 * j + 1];
    }
}

size_t hc_gptq_bytes(const hc_gptq *g)
{
    return (size_t)g->rows * ((size_t)g->kp / 2 + sizeof(float) * 2 * (size_t)g->n_groups);
}

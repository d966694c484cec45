/* INT4-GPTQ weights: repacking at load, prepared activations, rows in f32.
 * The product is in the instruction set files (see kernels_gptq.h). */
#include "kernels_gptq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml_types.h"
#include "hugepage.h"

static inline int nib(const int32_t *words, size_t i, int j) { return (int)(((uint32_t)words[i] >> (4 * j)) & 15u); }

/* Code q at position k of a repacked row (zero before). */
static void set_code(uint8_t *row, int k, int q)
{
    row[(k / 32) * 16 + (k % 16)] |= (uint8_t)(k % 32 < 16 ? q : q << 4);
}

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
    g->n_sm = rows;
    if (g_idx && sort_by_group(g, g_idx, err, errlen) != 0) {
        hc_gptq_free(g);
        return -1;
    }
    const size_t rb = (size_t)g->kp / 2, G = (size_t)g->n_groups, zw = (size_t)(rows + 7) / 8;
    /* 2 MiB pages: decode streams these rows (hugepage.c) */
    g->codes = hc_huge_alloc((size_t)rows * rb);
    g->sm = hc_huge_alloc(sizeof(float) * 2 * G * (size_t)rows);
    if (!g->codes || !g->sm) {
        hc_gptq_free(g);
        snprintf(err, errlen, "out of memory for a %d x %d GPTQ weight", rows, n);
        return -1;
    }
    memset(g->codes, 0, (size_t)rows * rb);
    /* the file is input-major (word k/8 holds 8 inputs of every output):
     * rows in blocks of 16, so each cache line of words read serves 16 rows
     * (row by row, every word read was a line of its own; a 2-layer 4096 x
     * 11008 model loaded in 1.6-2.0 s instead of 2.0-2.3: the per-code work
     * is the rest) */
    for (int r0 = 0; r0 < rows; r0 += 16) {
        const int r1 = rows - r0 < 16 ? rows : r0 + 16;
        for (int i = 0; i < n; i++) {
            const int k = g->perm ? g->perm[i] : i;
            const int32_t *words = qweight + (size_t)(k / 8) * (size_t)rows;
            for (int r = r0; r < r1; r++) set_code(g->codes + (size_t)r * rb, i, nib(words, (size_t)r, k % 8));
        }
        for (size_t j = 0; j < G; j++)
            for (int r = r0; r < r1; r++) {
                const float s = fp16_to_fp32(scales[j * (size_t)rows + (size_t)r]);
                const int z = nib(qzeros, j * zw + (size_t)(r / 8), r % 8);
                g->sm[((size_t)r * G + j) * 2] = s;
                g->sm[((size_t)r * G + j) * 2 + 1] = -s * (float)z;
            }
    }
    return 0;
}

hc_gptq hc_gptq_rows(const hc_gptq *g, int r0, int rows)
{
    hc_gptq v = *g;
    v.rows = rows;
    v.codes = g->codes + (size_t)r0 * (size_t)(g->kp / 2);
    if (g->sm_row) v.sm_row = g->sm_row + r0;   /* shared pairs: the same table */
    else v.sm = g->sm + (size_t)r0 * 2 * (size_t)g->n_groups;
    v.view = 1;
    return v;
}

void hc_gptq_free(hc_gptq *g)
{
    if (!g->view) {
        free(g->codes);
        free(g->sm);
        free(g->perm);
        free(g->sm_row);
    }
    g->codes = NULL;
    g->sm = NULL;
    g->perm = NULL;
    g->sm_row = NULL;
}

size_t hc_gptq_act_bytes(const hc_gptq *g)
{
    if (hc_gptq_int8(g))
        return (sizeof(hc_gptq_xchunk) + sizeof(hc_gptq_xplanes) + sizeof(hc_gptq_xplanes8)) * (size_t)hc_gptq_chunks(g) +
               sizeof(float) * hc_gptq_xz_floats(g);
    return sizeof(float) * ((size_t)g->kp + (size_t)g->n_groups);
}

/* roundf(v) for |v| < 2^23 without the library call (v − trunc(v) is exact
 * there): 3 % of GPTQ decode went to roundf and fmaxf calls. */
static inline int round_half_away(float v)
{
    const int t = (int)v;
    const float f = v - (float)t;
    return t + (f >= 0.5f) - (f <= -0.5f);
}

/* The int8 activation (kernels_gptq.h): per block of 32 positions ggml's
 * Q8_0 rounding with an f32 scale; X̃_g summed block by block in float. */
static void act_prepare_int8(const hc_gptq *g, const float *x, void *act)
{
    memset(act, 0, hc_gptq_act_bytes(g));
    for (int b = 0; b < g->kp / 32; b++) {
        float v[32], amax = 0.0f;
        for (int i = 0; i < 32; i++) {
            const int k = 32 * b + i;
            v[i] = k < g->n ? x[g->perm ? g->perm[k] : k] : 0.0f;
            amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;   /* fmaxf, inline */
        }
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        int8_t q[32];
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            q[i] = (int8_t)round_half_away(v[i] * id);
            sum += q[i];
        }
        hc_gptq_act_block(g, act, b, q, d, sum);
    }
}

void hc_gptq_act_prepare(const hc_gptq *g, const float *x, void *act)
{
    if (hc_gptq_int8(g)) {
        act_prepare_int8(g, x, act);
        return;
    }
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

int hc_gptq_act_begin(const hc_gptq *g, const float *x, void *act)
{
    if (!hc_gptq_int8(g)) {
        hc_gptq_act_prepare(g, x, act);
        return 0;
    }
    memset(act, 0, hc_gptq_act_bytes(g));
    return 1;
}

int hc_gptq_same_act(const hc_gptq *a, const hc_gptq *b)
{
    if (a->n != b->n || a->gs != b->gs || !a->perm != !b->perm) return 0;
    return !a->perm || memcmp(a->perm, b->perm, sizeof *a->perm * (size_t)a->n) == 0;
}

void hc_gptq_row(const hc_gptq *g, int r, float *out)
{
    const uint8_t *row = hc_gptq_codes(g, r);
    const float *sm = hc_gptq_sm(g, r);
    for (int i = 0; i < g->n; i++) {
        const int j = i / g->gs;
        out[g->perm ? g->perm[i] : i] = sm[2 * j] * (float)hc_gptq_code(row, i) + sm[2 * j + 1];
    }
}

size_t hc_gptq_rows_bytes(const hc_gptq *g, int k)
{
    const size_t pairs = sizeof(float) * 2 * (size_t)g->n_groups;
    if (!g->sm_row) return (size_t)k * ((size_t)g->kp / 2 + pairs);
    return (size_t)k * ((size_t)g->kp / 2 + sizeof(int32_t)) + (size_t)g->n_sm * pairs;
}

size_t hc_gptq_bytes(const hc_gptq *g) { return hc_gptq_rows_bytes(g, g->rows); }

int hc_gptq_columns(const hc_gptq *w, hc_gptq *c)
{
    const int E = w->rows, F = w->n;
    *c = (hc_gptq){ .n = E, .rows = F, .gs = 1, .n_groups = E, .kp = (E + 31) / 32 * 32, .n_sm = w->n_groups };
    const size_t rb = (size_t)c->kp / 2, pairs = 2 * (size_t)E;
    c->codes = calloc((size_t)F, rb);
    c->sm = malloc(sizeof(float) * pairs * (size_t)c->n_sm);
    c->sm_row = malloc(sizeof(int32_t) * (size_t)F);
    if (!c->codes || !c->sm || !c->sm_row) {
        hc_gptq_free(c);
        return -1;
    }
    /* position i of w's rows is input (neuron) perm[i], of group i / gs */
    for (int i = 0; i < F; i++) c->sm_row[w->perm ? w->perm[i] : i] = i / w->gs;
    for (int e = 0; e < E; e++) {
        const uint8_t *src = hc_gptq_codes(w, e);
        const float *sm = hc_gptq_sm(w, e);
        for (int i = 0; i < F; i++) set_code(c->codes + (size_t)(w->perm ? w->perm[i] : i) * rb, e, hc_gptq_code(src, i));
        for (int j = 0; j < w->n_groups; j++) {
            c->sm[(size_t)j * pairs + 2 * (size_t)e] = sm[2 * j];
            c->sm[(size_t)j * pairs + 2 * (size_t)e + 1] = sm[2 * j + 1];
        }
    }
    return 0;
}

int hc_gptq_gather(const hc_gptq *w, const int32_t *idx, int k, hc_gptq *out)
{
    const size_t rb = (size_t)w->kp / 2, pairs = 2 * (size_t)w->n_groups;
    *out = *w;
    out->rows = k;
    out->n_sm = w->sm_row ? w->n_sm : k;
    out->codes = malloc(rb * (size_t)k);
    out->sm = malloc(sizeof(float) * pairs * (size_t)out->n_sm);
    out->perm = w->perm ? malloc(sizeof(int32_t) * (size_t)w->n) : NULL;
    out->sm_row = w->sm_row ? malloc(sizeof(int32_t) * (size_t)k) : NULL;
    if (!out->codes || !out->sm || (w->perm && !out->perm) || (w->sm_row && !out->sm_row)) {
        hc_gptq_free(out);
        return -1;
    }
    if (w->perm) memcpy(out->perm, w->perm, sizeof(int32_t) * (size_t)w->n);
    if (w->sm_row) memcpy(out->sm, w->sm, sizeof(float) * pairs * (size_t)w->n_sm);
    for (int i = 0; i < k; i++) {
        memcpy(out->codes + (size_t)i * rb, hc_gptq_codes(w, idx[i]), rb);
        if (w->sm_row) out->sm_row[i] = w->sm_row[idx[i]];
        else memcpy(out->sm + (size_t)i * pairs, hc_gptq_sm(w, idx[i]), sizeof(float) * pairs);
    }
    return 0;
}

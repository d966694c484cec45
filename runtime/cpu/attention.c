/* The CPU's KV cache and attention: the cache a pool of blocks of
 * kv_block positions in 2 MiB pages, read through each sequence's block
 * table (backend.h), and causal grouped-query attention over it written for
 * the host's vector units (scores, softmax and the mix of the values as
 * llama2.c's run.c computes them, in an order that does not depend on the
 * thread count, the batch or where the blocks are). */
#include "cpu_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml_types.h"
#include "hugepage.h"
#include "kernels.h"
#include "quants.h"
#include "vmath.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define ATT_TOKENS 16   /* tokens of one head per attention work item (attn_run): each K/V
                          * row, a cache miss, is read once for them (4: 22 % of a 512-token
                          * Q4_0 prompt's time against the weight products, 16: 15 %) */
#define ATT_GROUP 8      /* tokens whose dots and mixes share each key and value load (att_dots) */
#define ATT_POS 4        /* positions whose dots one token computes side by side (att_dots_pos) */
#define HEADS_POS 8      /* positions a step of lone tokens takes at a time (heads_scores, heads_mix) in
                          * blocks that hold them (4 in blocks of 4): 5-7 % faster than 4 */
/* floats from one token's (or head's) scores to the next's: a cache line past
 * the context, so that the rows of the tokens or heads read side by side do
 * not all fall in one L1 set (n_ctx a multiple of 1024: 4 KiB apart) */
#define ATT_ROW(n_ctx) ((size_t)(n_ctx) + 16)
/* score rows of attention scratch per thread: ATT_TOKENS tokens' or n_head heads' */
#define ATT_SCORE_ROWS(n_head) ((size_t)((n_head) > ATT_TOKENS ? (n_head) : ATT_TOKENS))
/* floats of attention scratch per thread: the score rows, then a group's q
 * interleaved (attn_group) */
#define ATT_SCRATCH(n_ctx, n_head, hd) (ATT_SCORE_ROWS(n_head) * ATT_ROW(n_ctx) + (size_t)ATT_GROUP * (size_t)(hd))

/* attn_one's ATT_POS positions side by side lie in one block (blocks are powers of two) */
_Static_assert(HC_KV_BLOCK_MIN % ATT_POS == 0, "a block holds whole groups of ATT_POS positions");

/* How a cache's elements are read (hc_ctx_params' type_k, type_v): f32, or
 * f16 widened by vcvtph2ps (F16C) or by fp16_to_fp32, the same exact
 * values. A constant in each compiled attention (attn_run), so that its
 * loops are made for the form. */
enum { KV_F32, KV_F16, KV_F16_SOFT };

struct hc_kv {
    int n_ctx, kv_dim, n_blocks, shift;   /* a block: 1 << shift positions */
    uint32_t type_k, type_v;   /* GGML_TYPE_F32 or GGML_TYPE_F16 (hc_ctx_params) */
    char *k, *v;           /* [n_layer][n_blocks][1 << shift][kv_dim] elements each (layers that are off: never touched) */
    float *scores;         /* [n_threads][ATT_SCRATCH] */
    int *runs;             /* [n_batch + 1]: the first row of each work item's tokens (hc_cpu_attention) */
};

hc_kv *hc_cpu_kv_new(hc_backend *be, const hc_hparams *hp, int n_blocks, int n_warm, int block, int n_ctx,
                     const uint8_t *on, uint32_t type_k, uint32_t type_v, char *err, size_t errlen)
{
    hc_cpu *c = (hc_cpu *)be;
    hc_kv *kv = calloc(1, sizeof *kv);
    size_t kv_dim = (size_t)hp->n_head_kv * (size_t)hp->head_dim;
    size_t elems = (size_t)hp->n_layer * (size_t)n_blocks * (size_t)block * kv_dim;
    size_t scratch = sizeof(float) * (size_t)hc_pool_size(c->pool) * ATT_SCRATCH(n_ctx, hp->n_head, hp->head_dim);
    if (kv) {
        kv->n_ctx = n_ctx;
        kv->kv_dim = (int)kv_dim;
        kv->type_k = type_k;
        kv->type_v = type_v;
        kv->n_blocks = n_blocks;
        kv->shift = __builtin_ctz((unsigned)block);
        kv->runs = malloc(sizeof *kv->runs * ((size_t)hc_ctx_n_batch(c->ctx) + 1));
        /* in 2 MiB pages: one token's attention reads a head's slice of every
         * position, kv_dim floats apart, so with 4 KiB pages nearly each key and
         * value row cost a TLB miss */
        kv->k = hc_huge_alloc(ggml_row_size(type_k, (int64_t)elems));
        kv->v = hc_huge_alloc(ggml_row_size(type_v, (int64_t)elems));
        kv->scores = hc_cpu_alloc(scratch);
    }
    if (!kv || !kv->k || !kv->v || !kv->scores || !kv->runs) {
        snprintf(err, errlen, "out of memory for a KV cache of %d blocks of %d positions", n_blocks, block);
        hc_cpu_kv_free(be, kv);
        return NULL;
    }
    /* The blocks the caller will write (one context's whole cache, or the
     * most a --parallel run holds at once) get their pages now, as llama.cpp
     * clears its cache at creation: made by the first writes, mid-product,
     * they cost a 512-token BF16 prompt 4-7 % and --parallel 8 decode 5 %
     * (docs/measurements.md). The layers that are off never get pages. */
    const int64_t layer_elems = (int64_t)n_blocks * block * (int64_t)kv_dim;
    const int64_t warm_elems = (int64_t)n_warm * block * (int64_t)kv_dim;
    const size_t k_layer = ggml_row_size(type_k, layer_elems), k_warm = ggml_row_size(type_k, warm_elems);
    const size_t v_layer = ggml_row_size(type_v, layer_elems), v_warm = ggml_row_size(type_v, warm_elems);
    for (int l = 0; l < hp->n_layer && n_warm; l++) {
        if (on && !on[l]) continue;
        memset(kv->k + k_layer * (size_t)l, 0, k_warm);
        memset(kv->v + v_layer * (size_t)l, 0, v_warm);
    }
    return kv;
}

void hc_cpu_kv_free(hc_backend *be, hc_kv *kv)
{
    (void)be;
    if (!kv) return;
    free(kv->k);
    free(kv->v);
    free(kv->scores);
    free(kv->runs);
    free(kv);
}

/* A head's slice of one layer's k or v as a sequence reads it: position
 * p's row at kv_row(p), through the sequence's block table; its elements
 * in form t (a constant where the attention is compiled, so the loops are
 * made for it). */
typedef struct {
    const char *base;       /* the layer's block 0, at the head's offset */
    const int32_t *table;   /* the sequence's blocks */
    size_t row;             /* bytes from one position's row to the next's in a block */
    int shift;              /* a block: 1 << shift positions */
    int t;                  /* KV_F32, KV_F16 or KV_F16_SOFT */
} kv_pages;

static inline __attribute__((always_inline)) const char *kv_row(const kv_pages *c, int p)
{
    unsigned u = (unsigned)p;
    unsigned in_block = u & ((1u << c->shift) - 1);
    return c->base + (((size_t)c->table[u >> c->shift] << c->shift) | in_block) * c->row;
}

/* Bytes of e elements in form t. */
static inline __attribute__((always_inline)) size_t kv_bytes(int t, size_t e) { return t == KV_F32 ? 4 * e : 2 * e; }

#if defined(__x86_64__)
/* 8 f16 at h widened (F16C); only called where the attention's instruction
 * set has it (not inlined into the others' code, where it is never reached). */
__attribute__((target("avx,f16c"))) static inline void kv_widen8(const void *h, float *f)
{
    _mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
}
#else
static inline void kv_widen8(const void *h, float *f)
{
    for (int j = 0; j < 8; j++) f[j] = fp16_to_fp32(((const uint16_t *)h)[j]);
}
#endif

/* Element i of a row in form t. */
static inline __attribute__((always_inline)) float kv_elem(int t, const char *row, size_t i)
{
    if (t == KV_F32) {
        float f;
        memcpy(&f, row + 4 * i, sizeof f);
        return f;
    }
    uint16_t h;
    memcpy(&h, row + 2 * i, sizeof h);
    return fp16_to_fp32(h);
}

static kv_pages kv_pages_of(const hc_kv *kv, const char *cache, int t, int layer, const hc_seq_rows *r, int b)
{
    size_t row = kv_bytes(t, (size_t)kv->kv_dim), layer_off = ((size_t)layer * (size_t)kv->n_blocks << kv->shift) * row;
    return (kv_pages){ cache + layer_off, r->table + (size_t)r->seq[b] * (size_t)r->max_blocks, row, kv->shift, t };
}

/* The form a cache of type (GGML_TYPE_F32 or F16) is stored in. */
static int kv_form(uint32_t type) { return type == GGML_TYPE_F16 ? KV_F16 : KV_F32; }

/* n floats at x into a cache row in form t (f16: rounded to nearest even, as fp32_to_fp16). */
static void kv_put(int t, char *row, const float *x, size_t n)
{
    if (t == KV_F32) memcpy(row, x, sizeof(float) * n);
    else fp32_row_to_f16_at(x, (uint16_t *)(void *)row, (int64_t)n, HC_SIMD_AVX512);   /* the best this CPU has */
}

void hc_cpu_kv_store(hc_backend *be, hc_kv *kv, int layer, int B, hc_view k, hc_view v)
{
    const hc_seq_rows *r = ((hc_cpu *)be)->rows;
    size_t n = (size_t)kv->kv_dim;
    const float *ks = hc_cpu_host(k), *vs = hc_cpu_host(v);
    for (int b = 0; b < B; b++) {
        kv_pages kc = kv_pages_of(kv, kv->k, kv_form(kv->type_k), layer, r, b),
                 vc = kv_pages_of(kv, kv->v, kv_form(kv->type_v), layer, r, b);
        kv_put(kc.t, (char *)kv_row(&kc, r->pos[b]), ks + (size_t)b * n, n);
        kv_put(vc.t, (char *)kv_row(&vc, r->pos[b]), vs + (size_t)b * n, n);
    }
}

int hc_cpu_kv_copy(hc_backend *be, hc_kv *kv, int layer, const int32_t *ids, int n, void *host, int out, char *err,
                   size_t errlen)
{
    (void)be, (void)err, (void)errlen;
    size_t elems = ((size_t)1 << kv->shift) * (size_t)kv->kv_dim;   /* a block's */
    size_t kb = ggml_row_size(kv->type_k, (int64_t)elems), vb = ggml_row_size(kv->type_v, (int64_t)elems);
    for (int i = 0; i < n; i++) {
        char *k = kv->k + ((size_t)layer * (size_t)kv->n_blocks + (size_t)ids[i]) * kb,
             *v = kv->v + ((size_t)layer * (size_t)kv->n_blocks + (size_t)ids[i]) * vb;
        char *hk = (char *)host + (size_t)i * (kb + vb), *hv = hk + kb;
        if (out) {
            memcpy(hk, k, kb);
            memcpy(hv, v, vb);
        } else {
            memcpy(k, hk, kb);
            memcpy(v, hv, vb);
        }
    }
    return 0;
}

typedef struct {
    const hc_kv *kv;
    const hc_hparams *hp;
    const hc_seq_rows *rows;
    const float *q;
    float *out;
    int layer, row0, n_runs, n_chunks;
    int pass, blocks, heads;   /* attn_items: the pass, its parts per run, heads per ATT_MIX part */
} attn_task;

/* q · k over n floats in ATT_LANES interleaved partial sums (the tail into
 * lane 0), added pairwise at the end: independent chains in vector
 * registers, where one running sum would wait on each add's latency (with a
 * prompt of B tokens the scores are B²/2 of these per head). A fixed order:
 * the same bits for any thread count or batch. The dots and mixes run
 * ATT_GROUP tokens at a time, each key and value load shared by them and
 * their sums kept in registers; a single token runs attn_one. Every token
 * still gets its own operations in its own order. */
#define ATT_LANES 8
#define MIX_GROUPS 8   /* lane groups of its output one token mixes at once (att_mix_one) */
#define MIX_W 2        /* lane groups of its output a group of tokens mixes at once (att_mix), at most */
typedef hc_vf att_vec;   /* ATT_LANES floats (vmath.h) */

/* *v = elements [i, i + ATT_LANES) of a row in form t. */
static inline __attribute__((always_inline)) void kv_vec(int t, const char *row, size_t i, att_vec *v)
{
    typedef float att_vec_u __attribute__((vector_size(ATT_LANES * sizeof(float)), aligned(4), may_alias));
    float f[ATT_LANES];
    if (t == KV_F32) {   /* a load into a register (through an array: two 16-byte halves stored, one 32-byte reload) */
        *v = *(const att_vec_u *)(const void *)(row + 4 * i);
        return;
    }
    if (t == KV_F16) kv_widen8(row + 2 * i, f);
    else
        for (int j = 0; j < ATT_LANES; j++) f[j] = kv_elem(t, row, i + (size_t)j);
    memcpy(v, f, sizeof *v);
}

/* v[0], v[1] = elements [i, i + 2·ATT_LANES) of a row in form t: f32 as one
 * load whose halves are taken apart in registers (two loads side by side
 * were made one wide load, split through the stack). */
static inline __attribute__((always_inline)) void kv_vec2(int t, const char *row, size_t i, att_vec *v)
{
    typedef float att_vec2_u __attribute__((vector_size(2 * ATT_LANES * sizeof(float)), aligned(4), may_alias));
    if (t != KV_F32) {
        kv_vec(t, row, i, &v[0]);
        kv_vec(t, row, i + ATT_LANES, &v[1]);
        return;
    }
    att_vec2_u w = *(const att_vec2_u *)(const void *)(row + 4 * i);
    v[0] = __builtin_shufflevector(w, w, 0, 1, 2, 3, 4, 5, 6, 7);
    v[1] = __builtin_shufflevector(w, w, 8, 9, 10, 11, 12, 13, 14, 15);
}

/* The lanes l summed pairwise: l[j] += l[j + w] for w = ATT_LANES / 2,
 * ..., 1; the result in l[0]. */
static inline __attribute__((always_inline)) float att_pairwise(float *l)
{
    _Pragma("GCC unroll 4")
    for (int w = ATT_LANES / 2; w > 0; w /= 2)
        _Pragma("GCC unroll 4")
        for (int j = 0; j < w; j++) l[j] += l[j + w];
    return l[0];
}

/* The dot of a q row and a key row from its lane sums *s (elements up to
 * i): the tail [i, n) added to lane 0, then the lanes summed pairwise. */
static inline __attribute__((always_inline)) float att_lanes_sum(const att_vec *s, const float *q, int t, const char *k,
                                                                 int i, int n)
{
    float l[ATT_LANES];
    memcpy(l, s, sizeof l);
    for (int r = i; r < n; r++) l[0] += q[r] * kv_elem(t, k, (size_t)r);
    return att_pairwise(l);
}

/* sc[g] = att_lanes_sum's tree of the lane sums s[g], for the ATT_LANES
 * rows at once: each level adds, in every row, the same two values as
 * att_lanes_sum's l[j] += l[j + w] (the rows' lanes regrouped by shuffles
 * between the levels: 7 shuffles and 7 adds for 8 rows, where row by row
 * took the stack and a fifth of a long prompt's attention). */
static inline __attribute__((always_inline)) void att_lanes_sums(const att_vec *s, att_vec *r)
{
    _Static_assert(ATT_LANES == 8, "the shuffles below are for 8 lanes");
    att_vec t[4], e[2];
    _Pragma("GCC unroll 4")
    for (int i = 0; i < 4; i++)   /* w = 4: rows 2i, 2i + 1, lanes j + (j + 4), j < 4, in each half */
        t[i] = __builtin_shufflevector(s[2 * i], s[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11) +
               __builtin_shufflevector(s[2 * i], s[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15);
    _Pragma("GCC unroll 2")
    for (int i = 0; i < 2; i++)   /* w = 2: rows 4i .. 4i + 3, lanes 0 + 2 and 1 + 3 of each */
        e[i] = __builtin_shufflevector(t[2 * i], t[2 * i + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
               __builtin_shufflevector(t[2 * i], t[2 * i + 1], 2, 3, 10, 11, 6, 7, 14, 15);
    /* w = 1: lane 0 + 1 of each row, in the order rows 0, 2, 1, 3, 4, 6, 5, 7 */
    att_vec x = __builtin_shufflevector(e[0], e[1], 0, 2, 4, 6, 8, 10, 12, 14) +
                __builtin_shufflevector(e[0], e[1], 1, 3, 5, 7, 9, 11, 13, 15);
    *r = __builtin_shufflevector(x, x, 0, 2, 1, 3, 4, 6, 5, 7);
}

/* sc[g] = q[g] · k over n floats for g < G; qt: the whole lanes of the G
 * rows interleaved (by attn_group), so that one pointer reaches all of them
 * (eight row pointers left too few registers: a sum went to the stack); the
 * tail of a row that is not whole lanes is read from q. */
static inline __attribute__((always_inline)) void att_dots(int G, const float *qt, const float *const *q, int t,
                                                           const char *k, int n, float *sc)
{
    att_vec s[ATT_GROUP] = { 0 };
    int i = 0;
    for (; i + ATT_LANES <= n; i += ATT_LANES, qt += G * ATT_LANES) {
        att_vec kv, qv;
        kv_vec(t, k, (size_t)i, &kv);
        _Pragma("GCC unroll 8")
        for (int g = 0; g < G; g++) {
            memcpy(&qv, qt + g * ATT_LANES, sizeof qv);
            s[g] += qv * kv;
        }
    }
    if (G < ATT_LANES || i < n) {   /* a short group, or a head size not whole lanes */
        for (int g = 0; g < G; g++) sc[g] = att_lanes_sum(&s[g], q[g], t, k, i, n);
        return;
    }
    att_vec r;
    att_lanes_sums(s, &r);
    memcpy(sc, &r, sizeof r);
}

/* One token: sc[j] = q · k_j over n floats for j < P (k_j k_stride bytes on),
 * att_dots' operations for each position, the P sums side by side (one
 * after another, each waited on the last add of the one before). */
static inline __attribute__((always_inline)) void att_dots_pos(int P, const float *q, int t, const char *k,
                                                               size_t k_stride, int n, float *sc)
{
    att_vec s[HEADS_POS] = { 0 };
    int i = 0;
    for (; i + ATT_LANES <= n; i += ATT_LANES) {
        att_vec qv, kv;
        memcpy(&qv, q + i, sizeof qv);
        _Pragma("GCC unroll 8")
        for (int j = 0; j < P; j++) {
            kv_vec(t, k + (size_t)j * k_stride, (size_t)i, &kv);
            s[j] += qv * kv;
        }
    }
    if (P < ATT_LANES || i < n) {   /* fewer positions, or a head size not whole lanes */
        for (int j = 0; j < P; j++) sc[j] = att_lanes_sum(&s[j], q, t, k + (size_t)j * k_stride, i, n);
        return;
    }
    att_vec r;
    att_lanes_sums(s, &r);
    memcpy(sc, &r, sizeof r);
}

/* out[g][i0 + j] = Σ_p a[g][p] · v_p[i0 + j] for j < W·ATT_LANES, g < G, p
 * from 0 to last[g] ascending (v_p = kv_row(vc, p)), starting from 0 as a
 * zeroed output would. Positions up to p_all are within every token's
 * range. A block's rows lie kv_dim apart: one table look-up per block. W
 * lane groups a pass (MIX_W where the registers hold G·W sums): each lane
 * has its own sum, so the width changes no bits, and a wider pass reads
 * whole cache lines of each value row in half the passes. */
static inline __attribute__((always_inline)) void att_mix(int G, int W, const float *const *a, const int *last,
                                                          int p_all, const kv_pages *vc, int i0, float *const *out)
{
    att_vec o[ATT_GROUP][MIX_W] = { 0 };
    for (int p = 0; p <= last[G - 1];) {
        const char *vp = kv_row(vc, p);
        int end = p + (1 << vc->shift) <= last[G - 1] + 1 ? p + (1 << vc->shift) : last[G - 1] + 1;
        for (; p < end; p++, vp += vc->row) {
            att_vec vv[MIX_W];
            if (W == 1) kv_vec(vc->t, vp, (size_t)i0, &vv[0]);
            else kv_vec2(vc->t, vp, (size_t)i0, vv);
            if (p <= p_all) {
                _Pragma("GCC unroll 8")
                for (int g = 0; g < G; g++)
                    for (int w = 0; w < W; w++) o[g][w] += a[g][p] * vv[w];
            } else {
                _Pragma("GCC unroll 8")
                for (int g = 0; g < G; g++)
                    if (p <= last[g])
                        for (int w = 0; w < W; w++) o[g][w] += a[g][p] * vv[w];
            }
        }
    }
    for (int g = 0; g < G; g++) memcpy(out[g] + i0, o[g], (size_t)W * sizeof *o[g]);
}

/* One token: out[i0 + c] = Σ_p a[p] · v_p[i0 + c] for c < G·ATT_LANES, p
 * from 0 to last ascending, att_mix's operations for each lane, G lane
 * groups at once (one group at a time, each position's add waited on the
 * one before). */
static inline __attribute__((always_inline)) void att_mix_one(int G, const float *a, int last, const kv_pages *vc,
                                                              int i0, float *out)
{
    att_vec o[MIX_GROUPS] = { 0 };
    for (int p = 0; p <= last;) {
        const char *vp = kv_row(vc, p);
        int end = p + (1 << vc->shift) <= last + 1 ? p + (1 << vc->shift) : last + 1;
        for (; p < end; p++, vp += vc->row) {
            _Pragma("GCC unroll 8")
            for (int g = 0; g < G; g++) {
                att_vec vv;
                kv_vec(vc->t, vp, (size_t)(i0 + g * ATT_LANES), &vv);
                o[g] += a[p] * vv;
            }
        }
    }
    memcpy(out + i0, o, (size_t)G * sizeof *o);
}

float hc_cpu_exp(float x)
{
    hc_vf v = { x };
    hc_vexp(&v);
    return v[0];
}

/* Softmax of att[0..n) in place, ATT_LANES positions at a time (a short
 * tail as a vector padded with -inf, whose e^x are 0): the largest, e^(s -
 * largest) (hc_vexp, vmath.h), their sum in ATT_LANES interleaved partial sums added
 * pairwise at the end (as the dots: the same order in every attention and
 * batch, where one running sum waited on each add), and the divisions. */
static inline __attribute__((always_inline)) void softmax(float *att, int n)
{
    typedef float att_vec_u __attribute__((vector_size(ATT_LANES * sizeof(float)), aligned(4), may_alias));
    att_vec m, v, s = { 0 };
    float f[ATT_LANES], sum;
    const int whole = n - n % ATT_LANES, tail = n - whole;
    for (int j = 0; j < ATT_LANES; j++) f[j] = j < tail ? att[whole + j] : -INFINITY;
    memcpy(&m, f, sizeof m);
    for (int p = 0; p < whole; p += ATT_LANES) {   /* lane by lane, NaN never chosen (as a > max) */
        v = *(const att_vec_u *)(const void *)(att + p);
        m = (att_vec)(((hc_vi)v & (v > m)) | ((hc_vi)m & ~(v > m)));
    }
    float max = att[0];
    for (int j = 0; j < ATT_LANES; j++) if (m[j] > max) max = m[j];
    for (int p = 0; p < whole; p += ATT_LANES) {
        v = *(const att_vec_u *)(const void *)(att + p) - max;
        hc_vexp(&v);
        *(att_vec_u *)(void *)(att + p) = v;
        s += v;
    }
    if (tail) {
        memcpy(&v, f, sizeof v);
        v -= max;
        hc_vexp(&v);
        s += v;
        memcpy(att + whole, &v, sizeof(float) * (size_t)tail);
    }
    memcpy(f, &s, sizeof f);
    sum = att_pairwise(f);
    for (int p = 0; p < whole; p += ATT_LANES) *(att_vec_u *)(void *)(att + p) /= sum;
    for (int p = whole; p < n; p++) att[p] /= sum;
}

/* Σ_p a[p] · v_p[i] for p from 0 to last ascending (v_p = kv_row(vc, p)):
 * one output of a head size that is not whole lanes. */
static inline __attribute__((always_inline)) float att_mix_lane(const float *a, int last, const kv_pages *vc, int i)
{
    float o = 0.0f;
    for (int p = 0; p <= last; p++) o += a[p] * kv_elem(vc->t, kv_row(vc, p), (size_t)i);
    return o;
}

/* G <= ATT_GROUP consecutive tokens of one head, the first at position pos
 * (a short group repeats its last token): token g's scores over positions
 * 0..pos + g into sc + g·sc_stride, their softmax, and its mix of the values
 * into out + g·q_dim; qt: room for ATT_GROUP·head_dim floats. */
static inline __attribute__((always_inline)) void attn_group(int G, int mw, const float *q, int q_dim,
                                                             const kv_pages *kc, const kv_pages *vc, int hd, int pos,
                                                             float scale, float *sc, int sc_stride, float *qt,
                                                             float *out)
{
    const float *qg[ATT_GROUP], *ag[ATT_GROUP];
    float *sg[ATT_GROUP], *og[ATT_GROUP];
    int last[ATT_GROUP];
    for (int g = 0; g < ATT_GROUP; g++) {
        int r = g < G ? g : G - 1;
        qg[g] = q + (size_t)r * q_dim;
        ag[g] = sg[g] = sc + (size_t)r * sc_stride;
        og[g] = out + (size_t)r * q_dim;
        last[g] = pos + r;
    }
    for (int c = 0; c + ATT_LANES <= hd; c += ATT_LANES)   /* q's lanes interleaved for att_dots */
        for (int g = 0; g < ATT_GROUP; g++) memcpy(qt + (size_t)(c * ATT_GROUP + g * ATT_LANES), qg[g] + c, ATT_LANES * sizeof *qt);
    for (int p = 0; p <= last[ATT_GROUP - 1]; p++) {
        float d[ATT_GROUP];
        att_dots(ATT_GROUP, qt, qg, kc->t, kv_row(kc, p), hd, d);
        _Pragma("GCC unroll 8")   /* stores of their own: as a loop, a masked scatter */
        for (int g = 0; g < ATT_GROUP; g++)
            if (p <= last[g]) sg[g][p] = d[g] / scale;
    }
    for (int g = 0; g < G; g++) softmax(sg[g], last[g] + 1);
    int i0 = 0;
    for (; mw > 1 && i0 + mw * ATT_LANES <= hd; i0 += mw * ATT_LANES) att_mix(ATT_GROUP, mw, ag, last, pos, vc, i0, og);
    for (; i0 + ATT_LANES <= hd; i0 += ATT_LANES) att_mix(ATT_GROUP, 1, ag, last, pos, vc, i0, og);
    for (; i0 < hd; i0++)   /* a head size that is not whole lanes */
        for (int g = 0; g < G; g++) og[g][i0] = att_mix_lane(ag[g], last[g], vc, i0);
}

/* One token of one head at position pos (the operations attn_group gives a
 * group of one, so its bits): its scores over positions 0..pos into sc, their softmax,
 * and its mix of the values into out; ATT_POS positions' dots and
 * MIX_GROUPS lane groups of the mix at a time. */
static inline __attribute__((always_inline)) void attn_one(const float *q, const kv_pages *kc, const kv_pages *vc,
                                                           int hd, int pos, float scale, float *sc, float *out)
{
    int p = 0;
    for (; p + ATT_POS <= pos + 1; p += ATT_POS) {   /* p a multiple of ATT_POS: the ATT_POS rows in one block */
        float d[ATT_POS];
        att_dots_pos(ATT_POS, q, kc->t, kv_row(kc, p), kc->row, hd, d);
        for (int j = 0; j < ATT_POS; j++) sc[p + j] = d[j] / scale;
    }
    for (; p <= pos; p++) {
        float d;
        att_dots_pos(1, q, kc->t, kv_row(kc, p), kc->row, hd, &d);
        sc[p] = d / scale;
    }
    softmax(sc, pos + 1);
    int i0 = 0;
    for (; i0 + MIX_GROUPS * ATT_LANES <= hd; i0 += MIX_GROUPS * ATT_LANES) att_mix_one(MIX_GROUPS, sc, pos, vc, i0, out);
    for (; i0 + ATT_LANES <= hd; i0 += ATT_LANES) att_mix_one(1, sc, pos, vc, i0, out);
    for (; i0 < hd; i0++) out[i0] = att_mix_lane(sc, pos, vc, i0);   /* not whole lanes */
}

/* A lone token's attention, position by position across its heads: a
 * position's keys (and values) of all heads are one run of memory, which the
 * prefetchers follow at the read bandwidth, where one head's slice of each
 * position (512 bytes, 16 KiB a row apart at LLaMA-7B's width) read at less
 * than half of it, and half a row per thread between the two. Each head gets
 * attn_one's operations in attn_one's order, so its bits. Head h reads KV
 * head h / group; kc and vc at head offset 0; head h's scores at sc + h ·
 * sc_stride. Both passes take P positions at a time (HEADS_POS, or ATT_POS
 * in blocks smaller: rows of one block): a head's dots of the P rows side
 * by side, and each lane of
 * its mix loaded and stored once for them, where one position at a time left
 * each head's short chain of adds waiting on its row (decode attention over
 * 2700 positions read the cache at 45 % of the read bandwidth).
 * heads_scores_pos: the scores of all nh heads (q: the token's rows of them)
 * at positions [p, p + P). */
static inline __attribute__((always_inline)) void heads_scores_pos(int P, const float *q, const kv_pages *kc, int group,
                                                                   int nh, int hd, int p, float scale, float *sc,
                                                                   int sc_stride)
{
    const char *kp = kv_row(kc, p);
    for (int h = 0; h < nh; h++) {
        float d[HEADS_POS];
        att_dots_pos(P, q + (size_t)h * hd, kc->t, kp + kv_bytes(kc->t, (size_t)(h / group) * hd), kc->row, hd, d);
        for (int j = 0; j < P; j++) sc[(size_t)h * sc_stride + p + j] = d[j] / scale;
    }
}

/* heads_scores: their scores at positions [p0, p1), P at a time from a
 * multiple of P. */
static inline __attribute__((always_inline)) void heads_scores(const float *q, const kv_pages *kc, int group, int nh,
                                                               int hd, int p0, int p1, float scale, float *sc,
                                                               int sc_stride)
{
    const int P = 1 << kc->shift >= HEADS_POS ? HEADS_POS : ATT_POS;
    int p = p0;
    for (; p < p1 && p % P; p++) heads_scores_pos(1, q, kc, group, nh, hd, p, scale, sc, sc_stride);
    if (P == HEADS_POS)
        for (; p + HEADS_POS <= p1; p += HEADS_POS) heads_scores_pos(HEADS_POS, q, kc, group, nh, hd, p, scale, sc, sc_stride);
    else
        for (; p + ATT_POS <= p1; p += ATT_POS) heads_scores_pos(ATT_POS, q, kc, group, nh, hd, p, scale, sc, sc_stride);
    for (; p < p1; p++) heads_scores_pos(1, q, kc, group, nh, hd, p, scale, sc, sc_stride);
}

/* heads_mix_pos: positions [p, p + P) of heads [h0, h1) mixed into their
 * rows at out, each lane's adds in ascending positions. */
static inline __attribute__((always_inline)) void heads_mix_pos(int P, const float *sc, int sc_stride,
                                                                const kv_pages *vc, int group, int h0, int h1, int hd,
                                                                int p, float *out)
{
    const char *vp = kv_row(vc, p);
    for (int h = h0; h < h1; h++) {
        const float *a = sc + (size_t)h * sc_stride + p;
        const char *v = vp + kv_bytes(vc->t, (size_t)(h / group) * hd);
        float *o = out + (size_t)h * hd;
        int i = 0;
        for (; i + ATT_LANES <= hd; i += ATT_LANES) {
            att_vec ov, vv;
            memcpy(&ov, o + i, sizeof ov);
            _Pragma("GCC unroll 8")
            for (int j = 0; j < P; j++) {
                kv_vec(vc->t, v + (size_t)j * vc->row, (size_t)i, &vv);
                ov += a[j] * vv;
            }
            memcpy(o + i, &ov, sizeof ov);
        }
        for (; i < hd; i++)   /* not whole lanes */
            for (int j = 0; j < P; j++) o[i] += a[j] * kv_elem(vc->t, v + (size_t)j * vc->row, (size_t)i);
    }
}

/* heads_mix: for heads [h0, h1), the softmax of their scores over 0..pos and
 * the mix of the values into out (the token's rows of all heads), added
 * there P positions at a time (the rows stay in L1). */
static inline __attribute__((always_inline)) void heads_mix(float *sc, int sc_stride, const kv_pages *vc, int group,
                                                            int h0, int h1, int hd, int pos, float *out)
{
    for (int h = h0; h < h1; h++) softmax(sc + (size_t)h * sc_stride, pos + 1);
    memset(out + (size_t)h0 * hd, 0, sizeof(float) * (size_t)(h1 - h0) * hd);
    int p = 0;   /* p a multiple of P: the P rows in one block */
    if (1 << vc->shift >= HEADS_POS)
        for (; p + HEADS_POS <= pos + 1; p += HEADS_POS) heads_mix_pos(HEADS_POS, sc, sc_stride, vc, group, h0, h1, hd, p, out);
    else
        for (; p + ATT_POS <= pos + 1; p += ATT_POS) heads_mix_pos(ATT_POS, sc, sc_stride, vc, group, h0, h1, hd, p, out);
    for (; p <= pos; p++) heads_mix_pos(1, sc, sc_stride, vc, group, h0, h1, hd, p, out);
}

/* Per work item (a run of tokens, hc_cpu_attention) one of t->blocks parts:
 * - pass ATT_WHOLE: runs of several tokens a head each (up to ATT_TOKENS
 *   consecutive tokens of one sequence: scores over 0..pos, softmax, mix of
 *   V; each key and value row read once for the item's tokens; a lone token
 *   among them by attn_one), and in a step of lone tokens (t->blocks 1)
 *   each token all its heads (heads_scores and heads_mix, scores in the
 *   thread's scratch);
 * - with fewer lone tokens than threads, two passes: ATT_SCORES, the
 *   scores of all heads over a part of the positions, into the run's own
 *   scratch (thread run's: there are more threads than runs), then ATT_MIX,
 *   a block of t->heads heads' softmax and mix.
 * Every token still gets its own operations in its own order (positions
 * ascending), so the bits do not depend on the grouping, the parts, the
 * passes nor on what else is in the batch. */
enum { ATT_WHOLE, ATT_SCORES, ATT_MIX };
static inline __attribute__((always_inline)) void attn_items(const attn_task *t, int chunk, int ith, int kt, int vt,
                                                             int mw)
{
    const hc_kv *kv = t->kv;
    const hc_hparams *hp = t->hp;
    const hc_seq_rows *r = t->rows;
    int hd = hp->head_dim, nh = hp->n_head, q_dim = nh * hd, n_ctx = kv->n_ctx, group = nh / hp->n_head_kv;
    int row_sc = (int)ATT_ROW(n_ctx);
    float scale = sqrtf((float)hd);
    int lo, hi;
    /* the chunks from the last: among lone tokens the last tokens' first (a
     * token's work grows with its position, and the pool hands chunks out
     * in order, so the costliest no longer come last, when the other
     * threads have nothing left to take); a prompt's chunks hold heads'
     * runs, alike in work */
    hc_split(t->n_runs * t->blocks, 1, t->n_chunks - 1 - chunk, t->n_chunks, &lo, &hi);
    for (int item = lo; item < hi; item++) {
        /* a head's runs one after another (its slice of the cache, read by
         * each of them, then stays in the caches); a lone token's parts */
        int multi = t->pass == ATT_WHOLE && t->blocks > 1;
        int run = multi ? item % t->n_runs : item / t->blocks, part = multi ? item / t->n_runs : item % t->blocks;
        int b0 = kv->runs[run], nb = kv->runs[run + 1] - b0, row = t->row0 + b0, pos = r->pos[row];
        float *att = kv->scores + (size_t)(t->pass == ATT_WHOLE ? ith : run) * ATT_SCRATCH(n_ctx, nh, hd);
        const float *q = t->q + (size_t)b0 * q_dim;
        float *out = t->out + (size_t)b0 * q_dim;
        kv_pages kc = kv_pages_of(kv, kv->k, kt, t->layer, r, row), vc = kv_pages_of(kv, kv->v, vt, t->layer, r, row);
        if (t->pass == ATT_SCORES) {
            heads_scores(q, &kc, group, nh, hd, (int)((int64_t)(pos + 1) * part / t->blocks),
                         (int)((int64_t)(pos + 1) * (part + 1) / t->blocks), scale, att, row_sc);
        } else if (t->pass == ATT_MIX) {
            int h0 = part * t->heads, h1 = h0 + t->heads < nh ? h0 + t->heads : nh;
            heads_mix(att, row_sc, &vc, group, h0, h1, hd, pos, out);
        } else if (nb == 1 && t->blocks == 1) {
            heads_scores(q, &kc, group, nh, hd, 0, pos + 1, scale, att, row_sc);
            heads_mix(att, row_sc, &vc, group, 0, nh, hd, pos, out);
        } else {
            float *qt = att + ATT_SCORE_ROWS(nh) * (size_t)row_sc;
            size_t koff = (size_t)(part / group) * hd, h = (size_t)part * hd;
            kc.base += kv_bytes(kt, koff);
            vc.base += kv_bytes(vt, koff);
            for (int g0 = 0; g0 < nb; g0 += ATT_GROUP) {
                int G = nb - g0 < ATT_GROUP ? nb - g0 : ATT_GROUP;
                const float *qg = q + (size_t)g0 * q_dim + h;
                float *sc = att + (size_t)g0 * row_sc, *og = out + (size_t)g0 * q_dim + h;
                if (G == 1) attn_one(qg, &kc, &vc, hd, pos + g0, scale, sc, og);
                else attn_group(G, mw, qg, q_dim, &kc, &vc, hd, pos + g0, scale, sc, row_sc, qt, og);
            }
        }
    }
}

/* attn_items compiled for each instruction set, the one the kernels use
 * (hc_isa_top: HC_KERNELS chooses this one too): the lanes of att_dots and
 * att_mix then fill one wider register, with the same operations per lane
 * and no fused multiply-adds (-ffp-contract=off), so the bits do not change
 * (tests/test_backend_ops.c, test_cpu_isas). AVX-512 with VL, as the
 * kernels' set has it: its 32 registers hold att_dots' 8 sums, which
 * without VL (16 usable for 8-lane vectors) went to the stack, two of them
 * on every step. With F16C (every CPU that runs the AVX2 kernels), as an f16
 * cache's rows are widened there; the scalar build widens them with
 * fp16_to_fp32, the same values. One compiled attention for each form of k
 * and v. */
#define ATTN_RUN(name, target, kt, vt, mw) \
    target static void name(void *arg, int chunk, int ith) { attn_items(arg, chunk, ith, kt, vt, mw); }
#define AVX512 __attribute__((target("avx512f,avx512vl,f16c")))
#define AVX2 __attribute__((target("avx2,f16c")))
ATTN_RUN(attn_avx512, AVX512, KV_F32, KV_F32, MIX_W)
ATTN_RUN(attn_avx512_v16, AVX512, KV_F32, KV_F16, MIX_W)
ATTN_RUN(attn_avx512_k16, AVX512, KV_F16, KV_F32, MIX_W)
ATTN_RUN(attn_avx512_kv16, AVX512, KV_F16, KV_F16, MIX_W)
ATTN_RUN(attn_avx2, AVX2, KV_F32, KV_F32, 1)
ATTN_RUN(attn_avx2_v16, AVX2, KV_F32, KV_F16, 1)
ATTN_RUN(attn_avx2_k16, AVX2, KV_F16, KV_F32, 1)
ATTN_RUN(attn_avx2_kv16, AVX2, KV_F16, KV_F16, 1)
ATTN_RUN(attn_scalar, , KV_F32, KV_F32, 1)
ATTN_RUN(attn_scalar_v16, , KV_F32, KV_F16_SOFT, 1)
ATTN_RUN(attn_scalar_k16, , KV_F16_SOFT, KV_F32, 1)
ATTN_RUN(attn_scalar_kv16, , KV_F16_SOFT, KV_F16_SOFT, 1)
/* [instruction set][k's form][v's form] (kv_form: KV_F32 or KV_F16) */
static void (*const attn_run[HC_ISA_COUNT][2][2])(void *, int, int) = {
    [HC_ISA_SCALAR] = { { attn_scalar, attn_scalar_v16 }, { attn_scalar_k16, attn_scalar_kv16 } },
    [HC_ISA_AVX2] = { { attn_avx2, attn_avx2_v16 }, { attn_avx2_k16, attn_avx2_kv16 } },
    [HC_ISA_AVX512] = { { attn_avx512, attn_avx512_v16 }, { attn_avx512_k16, attn_avx512_kv16 } },
};

/* The n rows cut into runs: consecutive positions of one sequence, at most
 * ATT_TOKENS of them (kv->runs, relative to row0). */
void hc_cpu_attention(hc_backend *be, hc_kv *kv, int layer, const hc_hparams *hp, hc_view q, int row0, int n,
                      hc_view out)
{
    hc_cpu *c = (hc_cpu *)be;
    const hc_seq_rows *r = c->rows;
    size_t positions = 0;
    int n_runs = 0;
    for (int i = 0; i < n; i++) {
        int b = row0 + i;
        if (!i || i - kv->runs[n_runs - 1] == ATT_TOKENS || r->seq[b] != r->seq[b - 1] || r->pos[b] != r->pos[b - 1] + 1)
            kv->runs[n_runs++] = i;
        positions += (size_t)r->pos[b] + 1;
    }
    kv->runs[n_runs] = n;
    size_t work = 2 * positions * (size_t)hp->n_head * (size_t)hp->head_dim;
    attn_task t = { kv, hp, r, hc_cpu_host(q), hc_cpu_host(out), layer, row0, n_runs, 0, ATT_WHOLE, hp->n_head, 1 };
    int threads = hc_pool_size(c->pool);
    if (n_runs == n) {   /* lone tokens (decoding): all heads an item, or parts of them for every thread */
        int parts = (threads + n_runs - 1) / n_runs;
        t.heads = (hp->n_head + parts - 1) / parts;
        t.blocks = (hp->n_head + t.heads - 1) / t.heads;
        if (t.blocks > 1) {   /* the scores, then the mix: half the work each */
            work /= 2;
            t.pass = ATT_SCORES;
            t.n_chunks = hc_pool_chunks(c->pool, n_runs * t.blocks, work);
            hc_pool_run(c->pool, attn_run[hc_isa_top()][kv_form(kv->type_k)][kv_form(kv->type_v)], &t, t.n_chunks);
            t.pass = ATT_MIX;
        }
    }
    t.n_chunks = hc_pool_chunks(c->pool, n_runs * t.blocks, work);
    hc_pool_run(c->pool, attn_run[hc_isa_top()][kv_form(kv->type_k)][kv_form(kv->type_v)], &t, t.n_chunks);
}

/* The forward pass in the order it runs: the context, the family seam
 * (norm, positions), embedding, attention, the layer, the FFN call, output
 * and hc_eval. Numerics follow llama2.c run.c (RMSNorm, RoPE, softmax
 * written the same way; the attention dot sums in ATT_LANES partial sums) so
 * greedy decoding matches it token for token. */
#include "forward.h"
#include "cli.h"
#include "ctx_internal.h"
#include "hugepage.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATT_TOKENS 16   /* tokens of one head per attention work item (attn_run): each K/V
                          * row, a cache miss, is read once for them (4: 22 % of a 512-token
                          * Q4_0 prompt's time against the weight products, 16: 15 %) */
#define ATT_GROUP 8      /* tokens whose dots and mixes share each key and value load (att_dots) */
/* floats of attention scratch per thread: the scores of ATT_TOKENS tokens,
 * then a group's q interleaved (attn_group) */
#define ATT_SCRATCH(n_ctx, hd) ((size_t)ATT_TOKENS * (size_t)(n_ctx) + (size_t)ATT_GROUP * (size_t)(hd))

static void *xalloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 1)) return NULL;
    return p;
}

/* The batch scratch: written once now, so its pages fault in with the
 * model's load and not in the middle of the first prompt's products (5 % of
 * a 128-token BF16 prompt; llama.cpp's tools pay theirs in a warm-up run).
 * Not the KV cache: it fills position by position, and at n_ctx it can be
 * far larger than a session uses. */
static void *scratch_alloc(size_t n)
{
    void *p = xalloc(n);
    if (p) memset(p, 0, n);
    return p;
}

static size_t max_act_bytes(const hc_model *m)
{
    size_t b = hc_weight_act_bytes(&m->output);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const hc_layer *ly = &m->layers[il];
        const hc_weight *ws[] = { &ly->attn_q, &ly->attn_k, &ly->attn_v, &ly->attn_output,
                                  &ly->ffn_gate, &ly->ffn_up, &ly->ffn_down };
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
            if (ws[i]->kind != HC_WEIGHT_NONE && hc_weight_act_bytes(ws[i]) > b) b = hc_weight_act_bytes(ws[i]);
    }
    return b;
}

/* Rotation frequencies of a head's pairs: run.c's 1 / base^(i / head_size)
 * for even i. Rope scaling (hp->rope_scaling) divides them: linear by
 * rope.scaling.factor, llama3 by each pair's rope_freqs.weight factor. */
static void rope_freqs(const hc_model *m, float *freq)
{
    const hc_hparams *hp = &m->hp;
    for (int i = 0; i < hp->head_dim; i += 2)
        freq[i / 2] = 1.0f / powf(hp->rope_base, (float)i / (float)hp->head_dim);
    for (int i = 0; i < hp->head_dim / 2; i++) {
        switch ((enum hc_rope_scaling)hp->rope_scaling) {
        case HC_ROPE_SCALING_NONE: break;
        case HC_ROPE_SCALING_LINEAR: freq[i] /= hp->rope_scale; break;
        case HC_ROPE_SCALING_FACTORS: freq[i] /= m->rope_factors[i]; break;
        }
    }
}

hc_ctx *hc_ctx_new(const hc_model *m, const hc_ctx_params *p, char *err, size_t errlen)
{
    const hc_hparams *hp = &m->hp;
    int n_ctx = p && p->n_ctx > 0 ? p->n_ctx : (hp->n_ctx_train < 2048 ? hp->n_ctx_train : 2048);
    if (n_ctx > hp->n_ctx_train) {
        snprintf(err, errlen, "%s: context %d exceeds the model's context_length %d", m->path, n_ctx, hp->n_ctx_train);
        return NULL;
    }
    if (hp->sliding_window && n_ctx > hp->sliding_window) {
        snprintf(err, errlen, "%s: context %d exceeds attention.sliding_window %d (sliding-window attention is "
                 "not implemented; use -c %d or less)", m->path, n_ctx, hp->sliding_window, hp->sliding_window);
        return NULL;
    }
    int n_batch = p && p->n_batch > 0 ? p->n_batch : 512;
    if (n_batch > n_ctx) n_batch = n_ctx;
    int nt = p && p->n_threads > 0 ? p->n_threads : 1;

    hc_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) goto oom;
    ctx->model = m;
    ctx->n_ctx = n_ctx;
    ctx->n_batch = n_batch;
    if (p) {
        ctx->hook = p->hook;
        ctx->hook_user = p->hook_user;
        ctx->ffn = p->ffn;
        ctx->ffn_user = p->ffn_user;
    }
    size_t E = (size_t)hp->n_embd, Qd = (size_t)hp->n_head * (size_t)hp->head_dim;
    size_t KV = (size_t)hp->n_head_kv * (size_t)hp->head_dim, nb = (size_t)n_batch, F = (size_t)hp->n_ff;
    size_t kv_bytes = sizeof(float) * (size_t)hp->n_layer * (size_t)n_ctx * KV;
    ctx->pool = hc_pool_new(nt);
    /* in 2 MiB pages: one token's attention reads a head's slice of every
     * position, kv_dim floats apart, so with 4 KiB pages nearly each key and
     * value row cost a TLB miss */
    ctx->k_cache = hc_huge_alloc(kv_bytes);
    ctx->v_cache = hc_huge_alloc(kv_bytes);
    ctx->x = scratch_alloc(sizeof(float) * nb * E);
    ctx->xn = scratch_alloc(sizeof(float) * nb * E);
    ctx->tmp = scratch_alloc(sizeof(float) * nb * E);
    ctx->tmp2 = scratch_alloc(sizeof(float) * nb * E);
    ctx->q = scratch_alloc(sizeof(float) * nb * Qd);
    ctx->att = scratch_alloc(sizeof(float) * nb * Qd);
    ctx->ffn_buf[0] = scratch_alloc(sizeof(float) * nb * F);
    ctx->ffn_buf[1] = scratch_alloc(sizeof(float) * nb * F);
    ctx->h = ctx->hook ? scratch_alloc(sizeof(float) * nb * F) : NULL;
    ctx->scores = xalloc(sizeof(float) * (size_t)nt * ATT_SCRATCH(n_ctx, hp->head_dim));
    ctx->rope_freq = xalloc(sizeof(float) * (size_t)hp->head_dim / 2);
    if (!ctx->pool || !ctx->k_cache || !ctx->v_cache || !ctx->x || !ctx->xn || !ctx->tmp || !ctx->tmp2 || !ctx->q || !ctx->att ||
        !ctx->ffn_buf[0] || !ctx->ffn_buf[1] || (ctx->hook && !ctx->h) || !ctx->scores || !ctx->rope_freq)
        goto oom;
    hc_ctx_acts(ctx, 0, max_act_bytes(m));
    memset(ctx->acts, 0, ctx->act_stride * nb);   /* batch scratch too (scratch_alloc) */
    memset(ctx->acts2, 0, ctx->act_stride * nb);
    rope_freqs(m, ctx->rope_freq);
    return ctx;
oom:
    snprintf(err, errlen, "%s: out of memory for a context of %d tokens", m->path, n_ctx);
    hc_ctx_free(ctx);
    return NULL;
}

void hc_ctx_free(hc_ctx *ctx)
{
    if (!ctx) return;
    if (ctx->pool) hc_pool_free(ctx->pool);
    void *bufs[] = { ctx->k_cache, ctx->v_cache, ctx->x, ctx->xn, ctx->tmp, ctx->tmp2, ctx->q, ctx->att, ctx->ffn_buf[0],
                     ctx->ffn_buf[1], ctx->h, ctx->scores, ctx->rope_freq, ctx->acts, ctx->acts2,
                     ctx->arranged };
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(ctx);
}

const hc_model *hc_ctx_model(const hc_ctx *ctx) { return ctx->model; }
int hc_ctx_n_batch(const hc_ctx *ctx) { return ctx->n_batch; }
hc_pool *hc_ctx_pool(hc_ctx *ctx) { return ctx->pool; }
const char *hc_ctx_error(const hc_ctx *ctx) { return ctx->err; }
float *hc_ctx_ffn_scratch(hc_ctx *ctx, int which) { return ctx->ffn_buf[which != 0]; }
size_t hc_ctx_act_stride(const hc_ctx *ctx) { return ctx->act_stride; }

/* ------------------------------------------------------------ the family seam */

/* o = w * x / sqrt(mean(x²) + eps), written as run.c does. */
static void rmsnorm(float *o, const float *x, const float *w, int n, float eps)
{
    float ss = 0.0f;
    for (int j = 0; j < n; j++) ss += x[j] * x[j];
    ss /= n;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int j = 0; j < n; j++) o[j] = w[j] * (ss * x[j]);
}

/* o = w * (x - mean) / sqrt(var + eps) + bias (bias may be NULL). */
static void layernorm(float *o, const float *x, const float *w, const float *bias, int n, float eps)
{
    float mean = 0.0f, var = 0.0f;
    for (int j = 0; j < n; j++) mean += x[j];
    mean /= n;
    for (int j = 0; j < n; j++) var += (x[j] - mean) * (x[j] - mean);
    var /= n;
    float inv = 1.0f / sqrtf(var + eps);
    for (int j = 0; j < n; j++) o[j] = w[j] * ((x[j] - mean) * inv) + (bias ? bias[j] : 0.0f);
}

typedef struct {
    const hc_hparams *hp;
    const float *w, *bias, *x;
    float *o;
} norm_task;

static void norm_range(void *arg, int lo, int hi)
{
    const norm_task *t = arg;
    const hc_hparams *hp = t->hp;
    size_t E = (size_t)hp->n_embd;
    for (int b = lo; b < hi; b++) {
        switch ((enum hc_norm)hp->norm) {
        case HC_NORM_RMS: rmsnorm(t->o + b * E, t->x + b * E, t->w, (int)E, hp->rms_eps); break;
        case HC_NORM_LAYER: layernorm(t->o + b * E, t->x + b * E, t->w, t->bias, (int)E, hp->rms_eps); break;
        }
    }
}

/* o[B][n_embd] = the family's norm of x with weights w (and bias, NULL if
 * none), the rows split over the pool (each row's own sums, so its bits). */
static void norm_rows(hc_ctx *ctx, const float *w, const float *bias, const float *x, float *o, int B)
{
    const hc_hparams *hp = &ctx->model->hp;
    norm_task t = { hp, w, bias, x, o };
    hc_pool_ranges(ctx->pool, norm_range, &t, B, (size_t)B * (size_t)hp->n_embd);
}

void hc_add_bias(float *y, const float *bias, int B, int n)
{
    if (!bias) return;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n; i++) y[(size_t)b * n + i] += bias[i];
}

/* Rotate adjacent pairs of n floats (whole heads) at position pos. */
static void rope(const hc_ctx *ctx, float *v, int n, int pos)
{
    int hd = ctx->model->hp.head_dim;
    for (int i = 0; i < hd; i += 2) {
        float val = (float)pos * ctx->rope_freq[i / 2];
        float fcr = cosf(val), fci = sinf(val);
        for (int j = i; j < n; j += hd) {
            float v0 = v[j], v1 = v[j + 1];
            v[j] = v0 * fcr - v1 * fci;
            v[j + 1] = v0 * fci + v1 * fcr;
        }
    }
}

/* Rotate the two halves of each head (NeoX style: element i with i + hd/2). */
static void rope_neox(const hc_ctx *ctx, float *v, int n, int pos)
{
    int hd = ctx->model->hp.head_dim, half = hd / 2;
    for (int i = 0; i < half; i++) {
        float val = (float)pos * ctx->rope_freq[i];
        float fcr = cosf(val), fci = sinf(val);
        for (int j = i; j < n; j += hd) {
            float v0 = v[j], v1 = v[j + half];
            v[j] = v0 * fcr - v1 * fci;
            v[j + half] = v0 * fci + v1 * fcr;
        }
    }
}

typedef struct {
    const hc_ctx *ctx;
    float *v;
    int dim, pos0;
} pos_task;

static void pos_range(void *arg, int lo, int hi)
{
    const pos_task *t = arg;
    for (int b = lo; b < hi; b++) {
        float *row = t->v + (size_t)b * (size_t)t->dim;
        if (t->ctx->model->hp.pos == HC_POS_ROPE) rope(t->ctx, row, t->dim, t->pos0 + b);
        else rope_neox(t->ctx, row, t->dim, t->pos0 + b);
    }
}

/* The positions pos0.. of n rows of v ([n][dim], q or k), the rows split
 * over the pool; learned positions were added by hc_embed. */
static void positions(hc_ctx *ctx, float *v, int dim, int n, int pos0)
{
    switch ((enum hc_pos)ctx->model->hp.pos) {
    case HC_POS_ROPE:
    case HC_POS_ROPE_NEOX: {
        pos_task t = { ctx, v, dim, pos0 };
        hc_pool_ranges(ctx->pool, pos_range, &t, n, (size_t)n * (size_t)dim * 4);
        break;
    }
    case HC_POS_LEARNED:
        break;
    }
}

/* ------------------------------------------------------------ the layers */

static void hook(hc_ctx *ctx, int layer, int point, const float *x, int B, int n, int pos0)
{
    if (ctx->hook) ctx->hook(ctx->hook_user, layer, point, x, B, n, pos0);
}

void hc_embed(hc_ctx *ctx, const int32_t *tokens, int B, int pos0, float *x)
{
    const hc_model *m = ctx->model;
    int E = m->hp.n_embd;
    for (int b = 0; b < B; b++) hc_weight_row(&m->token_embd, tokens[b], x + (size_t)b * E);
    if (m->hp.pos != HC_POS_LEARNED) return;
    for (int b = 0; b < B; b++) {
        float *row = ctx->tmp;
        hc_weight_row(&m->pos_embd, pos0 + b, row);
        for (int i = 0; i < E; i++) x[(size_t)b * E + i] += row[i];
    }
}

typedef struct {
    hc_ctx *ctx;
    int layer, B, pos0, n_chunks;
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
#define ATT_POS 4      /* positions whose dots one token computes side by side (att_dots_pos) */
#define MIX_GROUPS 8   /* lane groups of its output one token mixes at once (att_mix_one) */
typedef float att_vec __attribute__((vector_size(ATT_LANES * sizeof(float))));

/* The dot of a q row and a key row from its lane sums *s (elements up to
 * i): the tail [i, n) added to lane 0, then the lanes summed pairwise. */
static inline __attribute__((always_inline)) float att_lanes_sum(const att_vec *s, const float *q, const float *k, int i,
                                                                 int n)
{
    float l[ATT_LANES];
    memcpy(l, s, sizeof l);
    for (int r = i; r < n; r++) l[0] += q[r] * k[r];
    _Pragma("GCC unroll 4")
    for (int w = ATT_LANES / 2; w > 0; w /= 2)
        _Pragma("GCC unroll 4")
        for (int j = 0; j < w; j++) l[j] += l[j + w];
    return l[0];
}

/* sc[g] = q[g] · k over n floats for g < G; qt: the whole lanes of the G
 * rows interleaved (by attn_group), so that one pointer reaches all of them
 * (eight row pointers left too few registers: a sum went to the stack); the
 * tail of a row that is not whole lanes is read from q. */
static inline __attribute__((always_inline)) void att_dots(int G, const float *qt, const float *const *q,
                                                           const float *k, int n, float *sc)
{
    att_vec s[ATT_GROUP] = { 0 };
    int i = 0;
    for (; i + ATT_LANES <= n; i += ATT_LANES, qt += G * ATT_LANES) {
        att_vec kv, qv;
        memcpy(&kv, k + i, sizeof kv);
        _Pragma("GCC unroll 8")
        for (int g = 0; g < G; g++) {
            memcpy(&qv, qt + g * ATT_LANES, sizeof qv);
            s[g] += qv * kv;
        }
    }
    for (int g = 0; g < G; g++) sc[g] = att_lanes_sum(&s[g], q[g], k, i, n);
}

/* One token: sc[j] = q · k_j over n floats for j < P (k_j = k + j·k_stride),
 * att_dots' operations for each position, the P sums side by side (one
 * after another, each waited on the last add of the one before). */
static inline __attribute__((always_inline)) void att_dots_pos(int P, const float *q, const float *k, size_t k_stride,
                                                               int n, float *sc)
{
    att_vec s[ATT_POS] = { 0 };
    int i = 0;
    for (; i + ATT_LANES <= n; i += ATT_LANES) {
        att_vec qv, kv;
        memcpy(&qv, q + i, sizeof qv);
        _Pragma("GCC unroll 8")
        for (int j = 0; j < P; j++) {
            memcpy(&kv, k + (size_t)j * k_stride + i, sizeof kv);
            s[j] += qv * kv;
        }
    }
    for (int j = 0; j < P; j++) sc[j] = att_lanes_sum(&s[j], q, k + (size_t)j * k_stride, i, n);
}

/* out[g][i0 + j] = Σ_p a[g][p] · v_p[i0 + j] for j < ATT_LANES, g < G, p from 0
 * to last[g] ascending (v_p = v + p·v_stride), starting from 0 as a zeroed
 * output would. Positions up to p_all are within every token's range. */
static inline __attribute__((always_inline)) void att_mix(int G, const float *const *a, const int *last, int p_all,
                                                          const float *v, size_t v_stride, int i0,
                                                          float *const *out)
{
    att_vec o[ATT_GROUP] = { 0 };
    int p = 0;
    for (; p <= p_all; p++) {
        att_vec vv;
        memcpy(&vv, v + (size_t)p * v_stride + i0, sizeof vv);
        _Pragma("GCC unroll 8")
        for (int g = 0; g < G; g++) o[g] += a[g][p] * vv;
    }
    for (; p <= last[G - 1]; p++) {
        att_vec vv;
        memcpy(&vv, v + (size_t)p * v_stride + i0, sizeof vv);
        _Pragma("GCC unroll 8")
        for (int g = 0; g < G; g++)
            if (p <= last[g]) o[g] += a[g][p] * vv;
    }
    for (int g = 0; g < G; g++) memcpy(out[g] + i0, &o[g], sizeof o[g]);
}

/* One token: out[i0 + c] = Σ_p a[p] · v_p[i0 + c] for c < G·ATT_LANES, p
 * from 0 to last ascending, att_mix's operations for each lane, G lane
 * groups at once (one group at a time, each position's add waited on the
 * one before). */
static inline __attribute__((always_inline)) void att_mix_one(int G, const float *a, int last, const float *v,
                                                              size_t v_stride, int i0, float *out)
{
    att_vec o[MIX_GROUPS] = { 0 };
    for (int p = 0; p <= last; p++) {
        const float *vp = v + (size_t)p * v_stride + i0;
        _Pragma("GCC unroll 8")
        for (int g = 0; g < G; g++) {
            att_vec vv;
            memcpy(&vv, vp + g * ATT_LANES, sizeof vv);
            o[g] += a[p] * vv;
        }
    }
    memcpy(out + i0, o, (size_t)G * sizeof *o);
}

/* Softmax of att[0..n) in place. */
static void softmax(float *att, int n)
{
    float max = att[0], sum = 0.0f;
    for (int p = 1; p < n; p++) if (att[p] > max) max = att[p];
    for (int p = 0; p < n; p++) { att[p] = expf(att[p] - max); sum += att[p]; }
    for (int p = 0; p < n; p++) att[p] /= sum;
}

/* Σ_p a[p] · v_p for p from 0 to last ascending (v_p = v + p·v_stride): one
 * output of a head size that is not whole lanes. */
static inline __attribute__((always_inline)) float att_mix_lane(const float *a, int last, const float *v, size_t v_stride)
{
    float o = 0.0f;
    for (int p = 0; p <= last; p++) o += a[p] * v[(size_t)p * v_stride];
    return o;
}

/* G <= ATT_GROUP consecutive tokens of one head, the first at position pos
 * (a short group repeats its last token): token g's scores over positions
 * 0..pos + g into sc + g·sc_stride, their softmax, and its mix of the values
 * into out + g·q_dim; qt: room for ATT_GROUP·head_dim floats. */
static inline __attribute__((always_inline)) void attn_group(int G, const float *q, int q_dim, const float *kc,
                                                             const float *vc, int kv_dim, int hd, int pos, float scale,
                                                             float *sc, int sc_stride, float *qt, float *out)
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
        att_dots(ATT_GROUP, qt, qg, kc + (size_t)p * kv_dim, hd, d);
        for (int g = 0; g < ATT_GROUP; g++)
            if (p <= last[g]) sg[g][p] = d[g] / scale;
    }
    for (int g = 0; g < G; g++) softmax(sg[g], last[g] + 1);
    int i0 = 0;
    for (; i0 + ATT_LANES <= hd; i0 += ATT_LANES) att_mix(ATT_GROUP, ag, last, pos, vc, (size_t)kv_dim, i0, og);
    for (; i0 < hd; i0++)   /* a head size that is not whole lanes */
        for (int g = 0; g < G; g++) og[g][i0] = att_mix_lane(ag[g], last[g], vc + i0, (size_t)kv_dim);
}

/* One token of one head at position pos (the operations attn_group gives a
 * group of one, so its bits): its scores over positions 0..pos into sc, their softmax,
 * and its mix of the values into out; ATT_POS positions' dots and
 * MIX_GROUPS lane groups of the mix at a time. */
static inline __attribute__((always_inline)) void attn_one(const float *q, const float *kc, const float *vc, int kv_dim,
                                                           int hd, int pos, float scale, float *sc, float *out)
{
    int p = 0;
    for (; p + ATT_POS <= pos + 1; p += ATT_POS) {
        float d[ATT_POS];
        att_dots_pos(ATT_POS, q, kc + (size_t)p * kv_dim, (size_t)kv_dim, hd, d);
        for (int j = 0; j < ATT_POS; j++) sc[p + j] = d[j] / scale;
    }
    for (; p <= pos; p++) {
        float d;
        att_dots_pos(1, q, kc + (size_t)p * kv_dim, (size_t)kv_dim, hd, &d);
        sc[p] = d / scale;
    }
    softmax(sc, pos + 1);
    int i0 = 0;
    for (; i0 + MIX_GROUPS * ATT_LANES <= hd; i0 += MIX_GROUPS * ATT_LANES)
        att_mix_one(MIX_GROUPS, sc, pos, vc, (size_t)kv_dim, i0, out);
    for (; i0 + ATT_LANES <= hd; i0 += ATT_LANES) att_mix_one(1, sc, pos, vc, (size_t)kv_dim, i0, out);
    for (; i0 < hd; i0++) out[i0] = att_mix_lane(sc, pos, vc + i0, (size_t)kv_dim);   /* not whole lanes */
}

/* One head and up to ATT_TOKENS consecutive tokens per work item: scores over
 * 0..pos, softmax, mix of V. Each key and value row is read once for the
 * item's tokens; every token still gets its own operations in its own order
 * (positions ascending), so the bits do not depend on the grouping. */
/* Compiled for AVX-512 and AVX2 as well (chosen at load time): the lanes of
 * att_dots and att_mix then fill one wider register, with the same operations
 * per lane, so the bits do not change. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void attn_run(void *arg, int chunk, int ith)
{
    const attn_task *t = arg;
    hc_ctx *ctx = t->ctx;
    const hc_hparams *hp = &ctx->model->hp;
    int hd = hp->head_dim, kv_dim = hp->n_head_kv * hd, q_dim = hp->n_head * hd;
    int group = hp->n_head / hp->n_head_kv, n_tb = (t->B + ATT_TOKENS - 1) / ATT_TOKENS;
    size_t layer_off = (size_t)t->layer * (size_t)ctx->n_ctx * (size_t)kv_dim;
    float scale = sqrtf((float)hd);
    int lo, hi;
    /* the last tokens' chunks first: a token's work grows with its position,
     * and the pool hands chunks out in order, so the costliest no longer
     * come last, when the other threads have nothing left to take */
    hc_split(n_tb * hp->n_head, 1, t->n_chunks - 1 - chunk, t->n_chunks, &lo, &hi);
    for (int item = lo; item < hi; item++) {
        int b0 = item / hp->n_head * ATT_TOKENS, h = item % hp->n_head;
        int nb = t->B - b0 < ATT_TOKENS ? t->B - b0 : ATT_TOKENS;
        size_t koff = (size_t)(h / group) * hd;
        const float *kc = ctx->k_cache + layer_off + koff, *vc = ctx->v_cache + layer_off + koff;
        const float *q = ctx->q + (size_t)b0 * q_dim + (size_t)h * hd;
        float *att = ctx->scores + (size_t)ith * ATT_SCRATCH(ctx->n_ctx, hd), *qt = att + ATT_TOKENS * (size_t)ctx->n_ctx;
        float *out = ctx->att + (size_t)b0 * q_dim + (size_t)h * hd;
        for (int g0 = 0; g0 < nb; g0 += ATT_GROUP) {
            int G = nb - g0 < ATT_GROUP ? nb - g0 : ATT_GROUP, pos = t->pos0 + b0 + g0;
            const float *qg = q + (size_t)g0 * q_dim;
            float *sc = att + (size_t)g0 * ctx->n_ctx, *og = out + (size_t)g0 * q_dim;
            if (G == 1) attn_one(qg, kc, vc, kv_dim, hd, pos, scale, sc, og);
            else attn_group(G, qg, q_dim, kc, vc, kv_dim, hd, pos, scale, sc, ctx->n_ctx, qt, og);
        }
    }
}

/* k and v of ctx->xn's B rows, straight into the cache rows of positions
 * pos0.., and q of its last keep rows; they share one prepared input when
 * their types agree. */
static void qkv(hc_ctx *ctx, const hc_layer *ly, int B, int keep, float *kc, float *vc)
{
    const hc_hparams *hp = &ctx->model->hp;
    int kv_dim = hp->n_head_kv * hp->head_dim, q_dim = hp->n_head * hp->head_dim;
    size_t need = hc_weight_act_bytes(&ly->attn_q);
    if (hc_weight_act_bytes(&ly->attn_k) > need) need = hc_weight_act_bytes(&ly->attn_k);
    if (hc_weight_act_bytes(&ly->attn_v) > need) need = hc_weight_act_bytes(&ly->attn_v);
    void *aq = hc_ctx_acts(ctx, 0, need), *ak = aq, *av = aq;
    hc_ctx_prepare(ctx, &ly->attn_q, ctx->xn, B, aq);
    if (keep)
        hc_ctx_matvec_prepared(ctx, &ly->attn_q, (char *)aq + (size_t)(B - keep) * ctx->act_stride, keep, ctx->q,
                               (size_t)q_dim);
    if (!hc_weight_same_act(&ly->attn_q, &ly->attn_k)) {
        ak = hc_ctx_acts(ctx, 1, need);
        hc_ctx_prepare(ctx, &ly->attn_k, ctx->xn, B, ak);
    }
    hc_ctx_matvec_prepared(ctx, &ly->attn_k, ak, B, kc, (size_t)kv_dim);
    if (!hc_weight_same_act(&ly->attn_q, &ly->attn_v)) {
        av = ak;
        if (!hc_weight_same_act(&ly->attn_k, &ly->attn_v)) {
            av = hc_ctx_acts(ctx, 1, need);
            hc_ctx_prepare(ctx, &ly->attn_v, ctx->xn, B, av);
        }
    }
    hc_ctx_matvec_prepared(ctx, &ly->attn_v, av, B, vc, (size_t)kv_dim);
    hc_add_bias(ctx->q, ly->attn_q_b, keep, q_dim);
    hc_add_bias(kc, ly->attn_k_b, B, kv_dim);
    hc_add_bias(vc, ly->attn_v_b, B, kv_dim);
}

/* out[keep][n_embd] = the attention block of the last keep of x's B rows
 * (rows at positions pos0..); the k and v of all B go to the cache. */
static void attention(hc_ctx *ctx, int layer, const float *x, int B, int keep, int pos0, float *out)
{
    const hc_hparams *hp = &ctx->model->hp;
    const hc_layer *ly = &ctx->model->layers[layer];
    int E = hp->n_embd, kv_dim = hp->n_head_kv * hp->head_dim, q_dim = hp->n_head * hp->head_dim;
    int pos_keep = pos0 + B - keep;
    size_t cache_row = ((size_t)layer * (size_t)ctx->n_ctx + (size_t)pos0) * (size_t)kv_dim;
    float *kc = ctx->k_cache + cache_row, *vc = ctx->v_cache + cache_row;

    norm_rows(ctx, ly->attn_norm, ly->attn_norm_b, x, ctx->xn, B);
    hook(ctx, layer, HC_HOOK_ATTN_IN, ctx->xn, B, E, pos0);
    qkv(ctx, ly, B, keep, kc, vc);
    positions(ctx, kc, kv_dim, B, pos0);
    if (!keep) return;
    positions(ctx, ctx->q, q_dim, keep, pos_keep);
    size_t work = 2 * (size_t)keep * (size_t)q_dim * (size_t)(pos0 + B);
    int items = (keep + ATT_TOKENS - 1) / ATT_TOKENS * hp->n_head;
    attn_task at = { ctx, layer, keep, pos_keep, hc_pool_chunks(ctx->pool, items, work) };
    hc_pool_run(ctx->pool, attn_run, &at, at.n_chunks);
    hook(ctx, layer, HC_HOOK_ATTN_OUT, ctx->att, keep, q_dim, pos_keep);
    hc_ctx_matvec(ctx, &ly->attn_output, ctx->att, keep, out);
    hc_add_bias(out, ly->attn_output_b, keep, E);
}

void hc_ffn_forward(hc_ctx *ctx, int layer, const float *ffn_inp, const float *x_norm, int B, int pos0, float *out)
{
    float *h = ctx->hook ? ctx->h : NULL;
    if (ctx->ffn) ctx->ffn(ctx->ffn_user, ctx, layer, ffn_inp, x_norm, B, out, h);
    else hc_ffn_dense(ctx, layer, x_norm, B, out, h);
    if (h) hook(ctx, layer, HC_HOOK_FFN_ACT, h, B, ctx->model->hp.n_ff, pos0);
}

/* out[B][n_embd] = the FFN block of x: its norm, then the context's FFN. */
static void ffn_block(hc_ctx *ctx, int layer, const float *x, int B, int pos0, float *out)
{
    const hc_hparams *hp = &ctx->model->hp;
    hook(ctx, layer, HC_HOOK_FFN_INP, x, B, hp->n_embd, pos0);
    const hc_layer *ly = &ctx->model->layers[layer];
    norm_rows(ctx, ly->ffn_norm, ly->ffn_norm_b, x, ctx->xn, B);
    hook(ctx, layer, HC_HOOK_FFN_IN, ctx->xn, B, hp->n_embd, pos0);
    hc_ffn_forward(ctx, layer, x, ctx->xn, B, pos0, out);
}

/* The layer on x's B rows in place, keeping only the last keep: the others
 * only leave their k and v in the cache (the rest of them would feed nothing
 * after the last layer, which is where hc_eval asks for keep < B, as
 * llama.cpp does). Each kept row gets the same bits as with keep = B. */
static void layer_forward(hc_ctx *ctx, int layer, float *x, int B, int keep, int pos0)
{
    int E = ctx->model->hp.n_embd, pos_keep = pos0 + B - keep;
    float *xk = x + (size_t)(B - keep) * (size_t)E;
    size_t n = (size_t)keep * (size_t)E;
    attention(ctx, layer, x, B, keep, pos0, ctx->tmp);
    if (!keep) return;
    switch ((enum hc_residual)ctx->model->hp.residual) {
    case HC_RESIDUAL_SEQUENTIAL:
        for (size_t i = 0; i < n; i++) xk[i] += ctx->tmp[i];
        ffn_block(ctx, layer, xk, keep, pos_keep, ctx->tmp);
        for (size_t i = 0; i < n; i++) xk[i] += ctx->tmp[i];
        break;
    case HC_RESIDUAL_PARALLEL:   /* Falcon: x += ffn(norm2(x)) + attn(norm(x)) */
        ffn_block(ctx, layer, xk, keep, pos_keep, ctx->tmp2);
        for (size_t i = 0; i < n; i++) xk[i] += ctx->tmp2[i] + ctx->tmp[i];
        break;
    }
}

void hc_layer_forward(hc_ctx *ctx, int layer, float *x, int B, int pos0) { layer_forward(ctx, layer, x, B, B, pos0); }

void hc_output(hc_ctx *ctx, const float *x, int B, float *logits)
{
    const hc_model *m = ctx->model;
    norm_rows(ctx, m->output_norm, m->output_norm_b, x, ctx->xn, B);
    hc_ctx_matvec(ctx, &m->output, ctx->xn, B, logits);
}

/* 0, or -1 with the reason when one of the n rows of logits is not finite:
 * weights with NaN or infinities (hc-quantize and hc-profile refuse them
 * too) would otherwise run on and sample garbage. */
static int finite_logits(hc_ctx *ctx, const float *logits, int n)
{
    const int V = ctx->model->hp.n_vocab;
    for (size_t i = 0; i < (size_t)n * (size_t)V; i++)
        if (!isfinite(logits[i])) {
            snprintf(ctx->err, sizeof ctx->err, "%s: the logits are not finite (logit %d = %g): the weights hold "
                     "NaN or infinite values, or the activations overflow", ctx->model->path, (int)(i % (size_t)V),
                     logits[i]);
            return -1;
        }
    return 0;
}

int hc_eval(hc_ctx *ctx, const int32_t *tokens, int n_tokens, int pos0, float *logits, int which)
{
    const hc_hparams *hp = &ctx->model->hp;
    if (n_tokens < 0 || pos0 < 0 || pos0 > ctx->n_ctx - n_tokens) {
        snprintf(ctx->err, sizeof ctx->err, "positions %d..%d do not fit the context of %d tokens",
                 pos0, pos0 + n_tokens - 1, ctx->n_ctx);
        return -1;
    }
    for (int i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab) {
            snprintf(ctx->err, sizeof ctx->err, "token id %d is outside the vocabulary of %d", tokens[i], hp->n_vocab);
            return -1;
        }
    for (int s = 0; s < n_tokens; s += ctx->n_batch) {
        int B = n_tokens - s < ctx->n_batch ? n_tokens - s : ctx->n_batch;
        hc_embed(ctx, tokens + s, B, pos0 + s, ctx->x);
        /* HC_LOGITS_LAST without a hook: the last layer only for the row whose logits are wanted */
        int keep_last = which != HC_LOGITS_LAST || ctx->hook ? B : s + B == n_tokens;
        for (int il = 0; il < hp->n_layer; il++)
            layer_forward(ctx, il, ctx->x, B, il == hp->n_layer - 1 ? keep_last : B, pos0 + s);
        if (which == HC_LOGITS_ALL)
            hc_output(ctx, ctx->x, B, logits + (size_t)s * (size_t)hp->n_vocab);
        else if (which == HC_LOGITS_LAST && s + B == n_tokens)
            hc_output(ctx, ctx->x + (size_t)(B - 1) * hp->n_embd, 1, logits);
    }
    return finite_logits(ctx, logits, which == HC_LOGITS_ALL ? n_tokens : which == HC_LOGITS_LAST && n_tokens > 0);
}

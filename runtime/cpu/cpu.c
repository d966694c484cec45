/* The CPU backend's table (backend.h): host buffers, the threaded products
 * of matmul.h, and the family's norms, positions and FFN neuron on the
 * pool, each row's operations in run.c's order whatever the thread count. */
#include "cpu_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "ctx_internal.h"
#include "forward.h"
#include "kernels.h"
#include "vmath.h"

void *hc_cpu_alloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1)) return NULL;
    memset(p, 0, bytes);
    return p;
}

static hc_buf all_memory = { NULL };

hc_view hc_cpu_view(const void *p) { return (hc_view){ &all_memory, (size_t)(uintptr_t)p }; }

static float *cpu_host(hc_view v) { return hc_cpu_host(v); }
float *hc_cpu_ptr(hc_view v) { return hc_cpu_host(v); }

static hc_buf *cpu_buf_new(hc_backend *be, size_t bytes, char *err, size_t errlen)
{
    (void)be;
    hc_buf *b = malloc(sizeof *b);
    if (b && !(b->p = hc_cpu_alloc(bytes))) {
        free(b);
        b = NULL;
    }
    if (!b) snprintf(err, errlen, "out of memory for %zu bytes of activations", bytes);
    return b;
}

static void cpu_buf_free(hc_backend *be, hc_buf *b)
{
    (void)be;
    if (b) free(b->p);
    free(b);
}

static void cpu_write(hc_backend *be, hc_view dst, const void *src, size_t bytes)
{
    (void)be;
    memcpy(hc_cpu_host(dst), src, bytes);
}

static int cpu_read(hc_backend *be, hc_view src, void *dst, size_t bytes, char *err, size_t errlen)
{
    (void)be, (void)err, (void)errlen;
    memcpy(dst, hc_cpu_host(src), bytes);
    return 0;
}

/* n floats for a product that is added (hc_mm's add), kept for the next */
static float *product_scratch(hc_cpu *c, size_t n)
{
    if (n > c->sum_n) {
        free(c->sum);
        if (!(c->sum = malloc(sizeof(float) * n))) hc_die("out of memory for a product of %zu floats", n);
        c->sum_n = n;
    }
    return c->sum;
}

/* The items' products on one input: each weight's prepared activations made
 * once and shared by the items that take the same form (q, k and v; gate and
 * up), in the context's two buffers, sized for the largest first (growing
 * one loses both). A transposed item (ffn_down_t) adds its rows in list
 * order (hc_ctx_down_accum). */
static void cpu_matmul(hc_backend *be, hc_view x, int B, const hc_mm *items, int n_items)
{
    hc_cpu *c = (hc_cpu *)be;
    hc_ctx *ctx = c->ctx;
    const float *xs = hc_cpu_host(x);
    size_t need = 0;
    for (int i = 0; i < n_items; i++)
        if (!items[i].transposed && hc_weight_act_bytes(items[i].w->host) > need) need = hc_weight_act_bytes(items[i].w->host);
    const hc_weight *held[2] = { NULL, NULL };   /* the weight whose form each buffer holds */
    void *acts[2] = { NULL, NULL };
    if (need) {
        acts[0] = hc_ctx_acts(ctx, 0, need);
        acts[1] = hc_ctx_acts(ctx, 1, need);
    }
    for (int i = 0; i < n_items; i++) {
        const hc_mm *it = &items[i];
        const hc_weight *w = it->w->host;
        int rows = B - it->b0;
        size_t width = (size_t)(it->transposed ? w->n : w->rows), stride = it->add ? width : it->y_stride;
        float *y = it->add ? product_scratch(c, (size_t)rows * width) : hc_cpu_host(it->y);
        if (it->transposed) {   /* rows of w->n floats: one call, else a row per call (the same sums) */
            const float *h = xs + (size_t)it->b0 * (size_t)w->rows;
            int dense = stride == (size_t)w->n, per = dense ? rows : 1;
            for (int b = 0; b < rows; b += per) {
                float *yb = y + (size_t)b * stride;
                memset(yb, 0, sizeof(float) * (size_t)per * (size_t)w->n);
                hc_ctx_down_accum(ctx, w, NULL, h + (size_t)b * (size_t)w->rows, (size_t)w->rows, w->rows, per, yb);
            }
        } else {
            int a = held[0] && hc_weight_same_act(held[0], w) ? 0 : held[1] && hc_weight_same_act(held[1], w) ? 1 : -1;
            if (a < 0) {
                a = held[0] ? 1 : 0;
                hc_ctx_prepare(ctx, w, xs, B, acts[a]);
                held[a] = w;
            }
            const hc_weight *ws[HC_MATVEC_MANY] = { w };
            float *ys[HC_MATVEC_MANY] = { y };
            int n = 1;   /* one input row: the next items that join it run in its pool run */
            for (; rows == 1 && !it->add && n < HC_MATVEC_MANY && i + n < n_items && !it[n].transposed &&
                   !it[n].add && it[n].b0 == it->b0 && hc_matvec_joins(w, it[n].w->host);
                 n++)
                ws[n] = it[n].w->host, ys[n] = hc_cpu_host(it[n].y);
            hc_ctx_matvec_many(ctx, ws, (char *)acts[a] + (size_t)it->b0 * hc_ctx_act_stride(ctx), rows, ys, stride, n);
            i += n - 1;   /* joined only where none adds (it->add: n is 1) */
        }
        if (!it->add) continue;
        float *to = hc_cpu_host(it->y);
        for (int b = 0; b < rows; b++)
            for (size_t r = 0; r < width; r++) to[(size_t)b * it->y_stride + r] += y[(size_t)b * width + r];
    }
}

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

/* the rows split over the pool (each row's own sums, so its bits); an
 * element's two passes weigh about 4 multiply-adds (hc_pool_chunks): at 1,
 * a step of 8 sequences normed them on one thread while the other waited */
static void cpu_norm(hc_backend *be, const hc_hparams *hp, const hc_bvec *w, const hc_bvec *b, hc_view x, hc_view o,
                     int B)
{
    norm_task t = { hp, w->host, b->host, hc_cpu_host(x), hc_cpu_host(o) };
    hc_pool_ranges(((hc_cpu *)be)->pool, norm_range, &t, B, (size_t)B * (size_t)hp->n_embd * 4);
}

/* Rotate adjacent pairs of n floats (whole heads) at position pos. */
static void rope(const float *freq, int hd, float *v, int n, int pos)
{
    for (int i = 0; i < hd; i += 2) {
        float val = (float)pos * freq[i / 2];
        float fcr = cosf(val), fci = sinf(val);
        for (int j = i; j < n; j += hd) {
            float v0 = v[j], v1 = v[j + 1];
            v[j] = v0 * fcr - v1 * fci;
            v[j + 1] = v0 * fci + v1 * fcr;
        }
    }
}

/* Rotate the two halves of each head (NeoX style: element i with i + hd/2). */
static void rope_neox(const float *freq, int hd, float *v, int n, int pos)
{
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        float val = (float)pos * freq[i];
        float fcr = cosf(val), fci = sinf(val);
        for (int j = i; j < n; j += hd) {
            float v0 = v[j], v1 = v[j + half];
            v[j] = v0 * fcr - v1 * fci;
            v[j + half] = v0 * fci + v1 * fcr;
        }
    }
}

typedef struct {
    const hc_hparams *hp;
    const float *freq;
    const int32_t *pos;   /* the rows' positions */
    float *v;
    int dim;
} pos_task;

static void pos_range(void *arg, int lo, int hi)
{
    const pos_task *t = arg;
    for (int b = lo; b < hi; b++) {
        float *row = t->v + (size_t)b * (size_t)t->dim;
        if (t->hp->pos == HC_POS_ROPE) rope(t->freq, t->hp->head_dim, row, t->dim, t->pos[b]);
        else rope_neox(t->freq, t->hp->head_dim, row, t->dim, t->pos[b]);
    }
}

/* learned positions were added by hc_embed */
static void cpu_rope(hc_backend *be, const hc_hparams *hp, const hc_bvec *freq, const hc_rope_rows *r, int count)
{
    hc_cpu *c = (hc_cpu *)be;
    if (hp->pos == HC_POS_LEARNED) return;
    for (int i = 0; i < count; i++) {
        pos_task t = { hp, freq->host, c->rows->pos + r[i].row0, hc_cpu_host(r[i].v), r[i].dim };
        hc_pool_ranges(c->pool, pos_range, &t, r[i].n, (size_t)r[i].n * (size_t)r[i].dim * 4);
    }
}

static void cpu_add_bias(hc_backend *be, hc_view y, const hc_bvec *bias, int B, int n)
{
    (void)be;
    hc_add_bias(hc_cpu_host(y), bias->host, B, n);
}

static void cpu_add(hc_backend *be, hc_view x, hc_view a, hc_view b, size_t n)
{
    (void)be;
    float *xs = hc_cpu_host(x);
    const float *as = hc_cpu_host(a);
    if (!b.buf) {
        for (size_t i = 0; i < n; i++) xs[i] += as[i];
        return;
    }
    const float *bs = hc_cpu_host(b);
    for (size_t i = 0; i < n; i++) xs[i] += as[i] + bs[i];
}

typedef struct {
    const hc_hparams *hp;
    const float *gate_b, *up_b;
    float *H, *U;
} act_task;

float hc_cpu_silu(float x)
{
    hc_vf v = { x };
    hc_vsilu(&v);
    return v[0];
}

float hc_cpu_gelu(float x)
{
    hc_vf v = { x };
    hc_vgelu(&v);
    return v[0];
}

/* The FFN kind's neurons from h (and u) in place of h: f(h)·u (gated),
 * f(h)·f(u) (symmetric), f(h) (sequential), m <= 8 of them as one vector
 * (vmath.h), a short one padded: hc_act1's bits. */
static inline __attribute__((always_inline)) void act_lanes(void (*f)(hc_vf *), int kind, float *h, const float *u,
                                                            size_t m)
{
    hc_vf v = { 0 }, w = { 0 };
    memcpy(&v, h, m * sizeof(float));
    if (kind != HC_FFN_SEQUENTIAL) memcpy(&w, u, m * sizeof(float));
    f(&v);
    if (kind == HC_FFN_SYMMETRIC) f(&w);
    if (kind != HC_FFN_SEQUENTIAL) v *= w;
    memcpy(h, &v, m * sizeof(float));
}

/* act_lanes over n neurons, compiled for AVX2 and for the scalar build (the
 * 8 lanes as SSE pairs): SiLU over 11008 neurons 7 us, 29 in the scalar
 * build's, 36 with an expf a neuron; GELU over 18176 37 us, 110 and 179
 * with an erff a neuron (docs/measurements.md, "The FFN's activation in
 * vectors"). */
#define ACT_ROWS(name, target, f)                                                    \
    target static void name(int kind, float *h, const float *u, size_t n)            \
    {                                                                                \
        size_t i = 0;                                                                \
        for (; i + 8 <= n; i += 8) act_lanes(f, kind, h + i, u + i, 8);              \
        if (i < n) act_lanes(f, kind, h + i, u + i, n - i);                          \
    }
#define AVX2 __attribute__((target("avx2")))
ACT_ROWS(silu_avx2, AVX2, hc_vsilu)
ACT_ROWS(silu_plain, , hc_vsilu)
ACT_ROWS(relu_avx2, AVX2, hc_vrelu)
ACT_ROWS(relu_plain, , hc_vrelu)
ACT_ROWS(gelu_avx2, AVX2, hc_vgelu)
ACT_ROWS(gelu_plain, , hc_vgelu)

/* act_lanes' neurons for enum hc_act act */
static void act_rows(int act, int kind, float *h, const float *u, size_t n)
{
    int avx2 = hc_isa_top() >= HC_ISA_AVX2;
    switch ((enum hc_act)act) {
    case HC_ACT_SILU: (avx2 ? silu_avx2 : silu_plain)(kind, h, u, n); return;
    case HC_ACT_RELU: (avx2 ? relu_avx2 : relu_plain)(kind, h, u, n); return;
    case HC_ACT_GELU: (avx2 ? gelu_avx2 : gelu_plain)(kind, h, u, n); return;
    }
}

/* Rows [lo, hi) of H (and U): the biases, then the FFN kind's activation. */
static void act_range(void *arg, int lo, int hi)
{
    const act_task *t = arg;
    const hc_hparams *hp = t->hp;
    int F = hp->n_ff, B = hi - lo;
    size_t n = (size_t)B * (size_t)F;
    float *H = t->H + (size_t)lo * (size_t)F, *U = t->U + (size_t)lo * (size_t)F;
    enum hc_ffn_kind kind = (enum hc_ffn_kind)hp->ffn_kind;
    if (kind == HC_FFN_SEQUENTIAL) {
        hc_add_bias(H, t->up_b, B, F);
    } else {
        hc_add_bias(H, t->gate_b, B, F);
        hc_add_bias(U, t->up_b, B, F);
    }
    if (kind == HC_FFN_GATED && hp->act_threshold > 0)   /* FATReLU: below the threshold the neuron is off */
        for (size_t i = 0; i < n; i++) if (H[i] < hp->act_threshold) H[i] = 0.0f;
    act_rows(hp->act, kind, H, U, n);
}

/* elementwise, so the rows split over the pool (SiLU's expf was 1.3 % of a
 * 128-token prompt at one thread, serial before) */
static void cpu_ffn_act(hc_backend *be, const hc_hparams *hp, const hc_bvec *gate_b, const hc_bvec *up_b, hc_view g,
                        hc_view u, int B)
{
    act_task t = { hp, gate_b->host, up_b->host, hc_cpu_host(g), u.buf ? hc_cpu_host(u) : NULL };
    hc_pool_ranges(((hc_cpu *)be)->pool, act_range, &t, B, (size_t)B * (size_t)hp->n_ff * 8);
}

static void cpu_batch(hc_backend *be, const hc_seq_rows *rows) { ((hc_cpu *)be)->rows = rows; }

static int cpu_sync(hc_backend *be, char *err, size_t errlen)
{
    (void)be, (void)err, (void)errlen;
    return 0;
}

static void cpu_free(hc_backend *be)
{
    free(((hc_cpu *)be)->sum);
    free(be);
}

static const hc_backend_ops cpu_ops = {
    .name = "cpu",
    .free = cpu_free,
    .buf_new = cpu_buf_new,
    .buf_free = cpu_buf_free,
    .write = cpu_write,
    .read = cpu_read,
    .host = cpu_host,
    .matmul = cpu_matmul,
    .norm = cpu_norm,
    .rope = cpu_rope,
    .add_bias = cpu_add_bias,
    .add = cpu_add,
    .ffn_act = cpu_ffn_act,
    .batch = cpu_batch,
    .kv_new = hc_cpu_kv_new,
    .kv_free = hc_cpu_kv_free,
    .kv_store = hc_cpu_kv_store,
    .kv_copy = hc_cpu_kv_copy,
    .attention = hc_cpu_attention,
    .sync = cpu_sync,
};

hc_backend *hc_cpu_backend_new(hc_ctx *ctx)
{
    hc_cpu *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->be.ops = &cpu_ops;
    c->ctx = ctx;
    c->pool = hc_ctx_pool(ctx);
    return &c->be;
}

/* Predictor training, threshold calibration and evaluation.
 *
 * The predictor of a layer maps the FFN input x [n_embd] to one logit per FFN
 * neuron: z = W2 · relu(W1 · x), W1 [r][n_embd] (fc1), W2 [n_ff][r] (fc2).
 * Loss per sample: Σ_j pw·y_j·softplus(-z_j) + (1-y_j)·softplus(z_j), a binary
 * cross-entropy on the logits whose active targets weigh pw (recall matters
 * more than precision). Adam with a cosine-decayed step, minibatches in a
 * seeded order; the inputs are divided by their RMS over the training set
 * while training and the factor is folded into W1 at the end, so the stored
 * predictor reads the raw residual stream.
 *
 * Every matrix product is one hc_sgemm (row-major; OpenBLAS in pieces fixed
 * by the shape, blas_fixed.h):
 *   forward   A1 = X·W1ᵀ [B][r]   H1 = relu(A1)   Z = H1·W2ᵀ [B][n_ff]
 *   backward  dZ = ∂loss/∂Z       dW2 = dZᵀ·H1    dH1 = dZ·W2
 *             dA1 = dH1 ⊙ [A1 > 0]                 dW1 = dA1ᵀ·X
 * The elementwise steps run in a fixed order, so a run depends only on its
 * inputs and the seed, not on the thread count. */
#include "predictors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas_fixed.h"
#include "cli.h"
#include "ggml_types.h"

#define ADAM_B1 0.9f
#define ADAM_B2 0.999f
#define ADAM_EPS 1e-8f
#define EVAL_ROWS 256          /* rows per forward chunk in calibration / evaluation */

/* Uniform on [-a, a). */
static float uniform(uint64_t *s, float a)
{
    return ((float)(hc_splitmix64(s) >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * a;
}

static int bit(const uint8_t *row, int j) { return row[j >> 3] >> (j & 7) & 1; }

void hc_pred_net_free(hc_pred_net *net)
{
    free(net->w1);
    free(net->w2);
    net->w1 = net->w2 = NULL;
}

void hc_pred_net_round(hc_pred_net *net, uint32_t type)
{
    if (type != GGML_TYPE_F16) return;
    size_t n1 = (size_t)net->r * net->n_embd, n2 = (size_t)net->n_ff * net->r;
    for (size_t i = 0; i < n1; i++) net->w1[i] = fp16_to_fp32(fp32_to_fp16(net->w1[i]));
    for (size_t i = 0; i < n2; i++) net->w2[i] = fp16_to_fp32(fp32_to_fp16(net->w2[i]));
}

/* z[n][n_ff] and a1[n][r] (relu applied in place) for n raw rows x. */
static void forward(hc_pool *pool, const hc_pred_net *net, const float *x, int n, float *a1, float *z)
{
    int r = net->r, E = net->n_embd, F = net->n_ff;
    hc_sgemm(pool, CblasNoTrans, CblasTrans, n, r, E, 1.0f, x, E, net->w1, E, 0.0f, a1, r);
    for (size_t i = 0; i < (size_t)n * r; i++) a1[i] = a1[i] > 0.0f ? a1[i] : 0.0f;
    hc_sgemm(pool, CblasNoTrans, CblasTrans, n, F, r, 1.0f, a1, r, net->w2, r, 0.0f, z, F);
}

typedef struct {
    float *p, *m, *v, *g;
    size_t n;
} adam_param;

static void adam_step(adam_param *a, float lr, int t)
{
    float c1 = 1.0f - powf(ADAM_B1, (float)t), c2 = 1.0f - powf(ADAM_B2, (float)t);
    float step = lr * sqrtf(c2) / c1;
    for (size_t i = 0; i < a->n; i++) {
        float g = a->g[i];
        a->m[i] = ADAM_B1 * a->m[i] + (1.0f - ADAM_B1) * g;
        a->v[i] = ADAM_B2 * a->v[i] + (1.0f - ADAM_B2) * g * g;
        a->p[i] -= step * a->m[i] / (sqrtf(a->v[i]) + ADAM_EPS);
    }
}

/* log(1 + e^z) without overflow. */
static double softplus(float z)
{
    return (z > 0 ? z : 0.0) + log1p(exp(-fabs((double)z)));
}

/* Scratch of one training run: the Adam state of both matrices and one
 * minibatch's inputs X, targets Y, logits Z (then dZ), A1 and dH1. */
typedef struct {
    adam_param p1, p2;
    float *X, *Y, *Z, *A1, *dH;
    float inv;                 /* input scale: 1 / RMS of x over the training set */
} trainer;

/* One minibatch: rows perm[0..B) of s forward, the loss summed into *loss,
 * backward, and Adam step t of total (cosine-decayed step size). */
static void train_batch(hc_pool *pool, hc_pred_net *net, trainer *tr, const hc_pred_set *s, const int64_t *perm, int B,
                        const hc_pred_train_opts *o, int64_t t, int64_t total, double *loss)
{
    const int E = s->n_embd, F = s->n_ff, r = net->r;
    const size_t yb = hc_pred_ybytes(F);
    const float pw = o->pos_weight;
    float *X = tr->X, *Y = tr->Y, *Z = tr->Z, *A1 = tr->A1, *dH = tr->dH;
    for (int b = 0; b < B; b++) {
        const float *xs = s->x + (size_t)perm[b] * E;
        const uint8_t *ys = s->y + (size_t)perm[b] * yb;
        for (int k = 0; k < E; k++) X[(size_t)b * E + k] = xs[k] * tr->inv;
        for (int j = 0; j < F; j++) Y[(size_t)b * F + j] = (float)bit(ys, j);
    }
    forward(pool, net, X, B, A1, Z);
    /* dZ in place, loss on the side */
    const float scale = 1.0f / (float)B;
    for (size_t i = 0; i < (size_t)B * F; i++) {
        float z = Z[i], sg = 1.0f / (1.0f + expf(-z));
        if (Y[i] != 0.0f) {
            *loss += pw * softplus(-z);
            Z[i] = pw * (sg - 1.0f) * scale;
        } else {
            *loss += softplus(z);
            Z[i] = sg * scale;
        }
    }
    /* dW2 = dZᵀ·H1, dH1 = dZ·W2 (before W2 moves), dA1, dW1 = dA1ᵀ·X */
    hc_sgemm(pool, CblasTrans, CblasNoTrans, F, r, B, 1.0f, Z, F, A1, r, 0.0f, tr->p2.g, r);
    hc_sgemm(pool, CblasNoTrans, CblasNoTrans, B, r, F, 1.0f, Z, F, net->w2, r, 0.0f, dH, r);
    for (size_t i = 0; i < (size_t)B * r; i++) dH[i] = A1[i] > 0.0f ? dH[i] : 0.0f;
    hc_sgemm(pool, CblasTrans, CblasNoTrans, r, E, B, 1.0f, dH, r, X, E, 0.0f, tr->p1.g, E);
    float lr = o->lr * 0.5f * (1.0f + cosf(3.14159265f * (float)(t - 1) / (float)total));
    adam_step(&tr->p1, lr, (int)(t < 1 << 30 ? t : 1 << 30));
    adam_step(&tr->p2, lr, (int)(t < 1 << 30 ? t : 1 << 30));
}

/* Lay the scratch out in buf; the input scale of s; seeded initial weights. */
static void train_init(hc_pred_net *net, trainer *tr, float *buf, const hc_pred_set *s, int Bm, uint64_t *rng)
{
    const int E = s->n_embd, F = s->n_ff, r = net->r;
    const size_t n1 = (size_t)r * E, n2 = (size_t)F * r;
    tr->p1 = (adam_param){ net->w1, buf, buf + n1, buf + 2 * n1, n1 };
    float *rest = buf + 3 * n1;
    tr->p2 = (adam_param){ net->w2, rest, rest + n2, rest + 2 * n2, n2 };
    memset(buf, 0, sizeof(float) * 3 * n1);
    memset(rest, 0, sizeof(float) * 3 * n2);
    tr->X = rest + 3 * n2;
    tr->Y = tr->X + (size_t)Bm * E;
    tr->Z = tr->Y + (size_t)Bm * F;
    tr->A1 = tr->Z + (size_t)Bm * F;
    tr->dH = tr->A1 + (size_t)Bm * r;

    double ss = 0;
    for (size_t i = 0; i < (size_t)s->n * E; i++) ss += (double)s->x[i] * s->x[i];
    tr->inv = ss > 0 ? (float)(1.0 / sqrt(ss / ((double)s->n * E))) : 1.0f;

    float a1 = sqrtf(6.0f / (float)E), a2 = sqrtf(3.0f / (float)r);
    for (size_t i = 0; i < n1; i++) net->w1[i] = uniform(rng, a1);
    for (size_t i = 0; i < n2; i++) net->w2[i] = uniform(rng, a2);
}

int hc_pred_train(hc_pool *pool, const hc_pred_set *s, const hc_pred_train_opts *o, hc_pred_net *net, double *loss)
{
    const int E = s->n_embd, F = s->n_ff, r = o->rank, Bm = o->batch;
    const size_t n1 = (size_t)r * E, n2 = (size_t)F * r;
    memset(net, 0, sizeof *net);
    if (s->n < 1) return -1;
    *net = (hc_pred_net){ .r = r, .n_embd = E, .n_ff = F };
    float *buf = malloc(sizeof(float) * (4 * (n1 + n2) + (size_t)Bm * (E + 2 * (size_t)F + 2 * (size_t)r)));
    int64_t *perm = malloc(sizeof *perm * (size_t)s->n);
    net->w1 = malloc(sizeof(float) * n1);
    net->w2 = malloc(sizeof(float) * n2);
    if (!buf || !perm || !net->w1 || !net->w2) {
        free(buf);
        free(perm);
        hc_pred_net_free(net);
        return -1;
    }
    trainer tr;
    uint64_t rng = o->seed;
    train_init(net, &tr, buf, s, Bm, &rng);
    for (int64_t i = 0; i < s->n; i++) perm[i] = i;

    const int64_t steps_per_epoch = (s->n + Bm - 1) / Bm, total = steps_per_epoch * o->epochs;
    int64_t t = 0;
    double epoch_loss = 0;
    for (int ep = 0; ep < o->epochs; ep++) {
        for (int64_t i = s->n - 1; i > 0; i--) {      /* Fisher-Yates */
            int64_t j = (int64_t)((hc_splitmix64(&rng) >> 11) % (uint64_t)(i + 1));
            int64_t tmp = perm[i]; perm[i] = perm[j]; perm[j] = tmp;
        }
        epoch_loss = 0;
        for (int64_t b0 = 0; b0 < s->n; b0 += Bm) {
            int B = (int)(s->n - b0 < Bm ? s->n - b0 : Bm);
            train_batch(pool, net, &tr, s, perm + b0, B, o, ++t, total, &epoch_loss);
        }
    }
    for (size_t i = 0; i < n1; i++) net->w1[i] *= tr.inv;   /* read raw x */
    if (loss) *loss = epoch_loss / ((double)s->n * F);
    free(buf);
    free(perm);
    return 0;
}

/* Call fn on the logits of every chunk of rows of s. */
typedef void (*chunk_fn)(void *user, const hc_pred_set *s, int64_t row0, int n, const float *z);

static int for_each_chunk(hc_pool *pool, const hc_pred_net *net, const hc_pred_set *s, chunk_fn fn, void *user)
{
    float *a1 = malloc(sizeof(float) * EVAL_ROWS * (size_t)net->r);
    float *z = malloc(sizeof(float) * EVAL_ROWS * (size_t)net->n_ff);
    if (!a1 || !z) { free(a1); free(z); return -1; }
    for (int64_t r0 = 0; r0 < s->n; r0 += EVAL_ROWS) {
        int n = (int)(s->n - r0 < EVAL_ROWS ? s->n - r0 : EVAL_ROWS);
        forward(pool, net, s->x + (size_t)r0 * net->n_embd, n, a1, z);
        fn(user, s, r0, n, z);
    }
    free(a1);
    free(z);
    return 0;
}

typedef struct {
    float *pos;     /* logits of active pairs */
    uint64_t n;
} pos_list;

static void collect_pos(void *user, const hc_pred_set *s, int64_t row0, int n, const float *z)
{
    pos_list *p = user;
    size_t yb = hc_pred_ybytes(s->n_ff);
    for (int b = 0; b < n; b++) {
        const uint8_t *y = s->y + (size_t)(row0 + b) * yb;
        for (int j = 0; j < s->n_ff; j++)
            if (bit(y, j)) p->pos[p->n++] = z[(size_t)b * s->n_ff + j];
    }
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

uint64_t hc_pred_count_active(const hc_pred_set *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < (size_t)s->n * hc_pred_ybytes(s->n_ff); i++) n += (uint64_t)__builtin_popcount(s->y[i]);
    return n;
}

int hc_pred_calibrate(hc_pool *pool, const hc_pred_net *net, const hc_pred_set *s, double recall, float *t)
{
    uint64_t P = hc_pred_count_active(s);
    if (P == 0) return 1;
    pos_list p = { malloc(sizeof(float) * P), 0 };
    if (!p.pos || for_each_chunk(pool, net, s, collect_pos, &p) != 0) { free(p.pos); return -1; }
    qsort(p.pos, P, sizeof *p.pos, cmp_float);
    /* may miss the k lowest active logits; 1e-6 absorbs the rounding of (1-R)·P */
    uint64_t k = (uint64_t)floor((1.0 - recall) * (double)P + 1e-6);
    if (k >= P) k = P - 1;
    *t = p.pos[k];
    free(p.pos);
    return 0;
}

typedef struct {
    hc_pred_counts c;
    float t;
} eval_acc;

static void count_chunk(void *user, const hc_pred_set *s, int64_t row0, int n, const float *z)
{
    eval_acc *a = user;
    size_t yb = hc_pred_ybytes(s->n_ff);
    for (int b = 0; b < n; b++) {
        const uint8_t *y = s->y + (size_t)(row0 + b) * yb;
        for (int j = 0; j < s->n_ff; j++) {
            int pred = z[(size_t)b * s->n_ff + j] >= a->t, act = bit(y, j);
            a->c.tp += pred & act;
            a->c.fp += pred & (act ^ 1);
            a->c.fn += (pred ^ 1) & act;
            a->c.tn += (pred | act) ^ 1;
        }
    }
}

int hc_pred_evaluate(hc_pool *pool, const hc_pred_net *net, const hc_pred_set *s, float t, hc_pred_counts *c)
{
    eval_acc a = { { 0, 0, 0, 0 }, t };
    int rc = for_each_chunk(pool, net, s, count_chunk, &a);
    *c = a.c;
    return rc;
}

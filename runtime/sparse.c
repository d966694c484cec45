/* The sparse / hybrid FFN (see sparse.h). */
#include "sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "forward.h"
#include "kernels.h"

/* "Truly active" for the recall check, as hc-profile counts: |h| > 0 for
 * ReLU, |h| > 0.01 for SiLU (whose h is almost never exactly 0). */
#define SILU_ACTIVE 0.01f

typedef struct {
    hc_weight down;          /* one row per neuron */
    void *down_owned;
    int32_t *cold;           /* neurons the CPU computes; NULL = all */
    int n_cold;
    int32_t *hot;            /* bucket: neurons on the device */
    int n_hot;
    hc_cl_layer *dev;
    hc_sparse_stats st;
} layer_state;

struct hc_sparse {
    const hc_model *m;
    hc_sparse_params p;
    int predictor;
    float t_act;
    layer_state *L;
    int E, F, r_max, k_max;
    /* scratch */
    int32_t *cand, *uni;     /* [F]: candidates; neurons some row keeps */
    float *ones;             /* [F] */
    uint8_t *mask;           /* [B][k_max] device candidates */
    float *ydev, *hdev;      /* [B][E], [B][k_max] */
    float *pred, *hidden, *hfull, *truth;   /* [B][F], [B][r], [B][F], [B][F] */
    int cap_b;               /* rows the [B] buffers hold (0: regrow) */
    double t_ffn, t_cpu, t_dev, t_wait;
    char dev_err[300];
};

/* ------------------------------------------------------------ B rows */

typedef struct {
    int B;
    const float *pred;       /* [B][F] predictor output or NULL */
    const void *act_g, *act_u;   /* B prepared rows, ctx->act_stride apart */
    float *out;              /* [B][E] += */
    float *hfull;            /* [B][F] h of every neuron (hook) or NULL */
} rows_in;

static int is_candidate(const hc_sparse *s, const float *pred, int b, int j)
{
    return !pred || pred[(size_t)b * s->F + j] >= s->p.threshold;
}

/* The CPU's share of B rows: candidates among idx[0..n) (NULL: all neurons).
 * The gate rows of the neurons that are a candidate of any row are computed
 * for all B rows at once (the batched kernel reads each weight row once), a
 * row's non-candidates and act(gate) values that fail the keep rule are set
 * to 0, and the up and down rows are read only for the union of the neurons
 * some row keeps, again for all rows at once; a row's h is 0 wherever it does
 * not keep the neuron, and the down step skips zero h. Every value and every
 * sum is the one computing the row alone would give (same rows, same order:
 * the union is ascending like each row's own list), so B rows at once give
 * the bits of B single tokens, and B = 1 is the generation path. ctx->gate and
 * ctx->up ([n_batch][F], unused by a replacement FFN) hold gate/h and up. */
static void cpu_part(hc_sparse *s, hc_ctx *ctx, int layer, const int32_t *idx, int n, const rows_in *in)
{
    const hc_layer *ly = &s->m->layers[layer];
    layer_state *L = &s->L[layer];
    int F = s->F, B = in->B;
    size_t sF = (size_t)F;
    float *G = ctx->gate, *U = ctx->up;
    int k = 0;
    const int32_t *cand = s->cand;
    if (!idx && !in->pred && B > 1) {
        /* every neuron of a batch: the contiguous batched kernel (B = 1 takes
         * the gathered kernel over all rows below: measured faster, same bits) */
        k = F;
        cand = NULL;
        hc_ctx_matvec_prepared(ctx, &ly->ffn_gate, in->act_g, B, G, sF);
    } else {
        for (int i = 0; i < n; i++) {
            int j = idx ? idx[i] : i, any = !in->pred;
            for (int b = 0; b < B && !any; b++) any = is_candidate(s, in->pred, b, j);
            if (any) s->cand[k++] = j;
        }
        hc_ctx_matvec_rows(ctx, &ly->ffn_gate, s->cand, k, in->act_g, B, G, sF);
    }
    for (int b = 0; b < B; b++) hc_ffn_act(s->m->hp.act, G + (size_t)b * sF, s->ones, k);
    /* keep rule per row; union; compact every row to the union (nu <= i) */
    int nu = 0;
    uint64_t kept = 0, hit = 0;
    for (int i = 0; i < k; i++) {
        int j = cand ? cand[i] : i, any = 0;
        for (int b = 0; b < B; b++) {
            float *a = G + (size_t)b * sF + i;
            int keep = hc_keep_act(*a, s->t_act) && is_candidate(s, in->pred, b, j);
            if (!keep) *a = 0.0f;
            any |= keep;
            kept += (uint64_t)keep;
            if (s->p.check && keep) hit += s->truth[(size_t)b * sF + j] != 0.0f;
        }
        if (!any) continue;
        for (int b = 0; b < B; b++) G[(size_t)b * sF + nu] = G[(size_t)b * sF + i];
        s->uni[nu++] = j;
    }
    L->st.computed += kept;
    L->st.hit += hit;
    hc_ctx_matvec_rows(ctx, &ly->ffn_up, s->uni, nu, in->act_u, B, U, sF);
    uint64_t served = 0;
    for (int b = 0; b < B; b++) {
        float *g = G + (size_t)b * sF;
        const float *u = U + (size_t)b * sF;
        for (int i = 0; i < nu; i++) {
            /* kept <=> a != 0: a kept neuron's h as computed alone; others stay 0 (not -0) */
            float h = g[i] != 0.0f ? g[i] * u[i] : 0.0f;
            g[i] = h;
            served += h != 0.0f;
        }
        if (in->hfull)
            for (int i = 0; i < nu; i++) in->hfull[(size_t)b * sF + s->uni[i]] = g[i];
    }
    L->st.served_cpu += served;
    hc_ctx_down_accum(ctx, &L->down, s->uni, G, sF, nu, B, in->out);
}

/* Device done or failed: add its share, or compute the hot neurons here. */
static void finish_device(hc_sparse *s, hc_ctx *ctx, int layer, const rows_in *in)
{
    layer_state *L = &s->L[layer];
    double t0 = hc_now();
    if (hc_cl_layer_finish(L->dev, s->ydev, s->hdev, &s->t_dev, s->dev_err, sizeof s->dev_err)) {
        hc_warn("%s; the CPU computes every neuron from now on", s->dev_err);
        cpu_part(s, ctx, layer, L->hot, L->n_hot, in);
        return;
    }
    s->t_wait += hc_now() - t0;
    int E = s->E, k = L->n_hot;
    for (size_t i = 0; i < (size_t)in->B * (size_t)E; i++) in->out[i] += s->ydev[i];
    for (int b = 0; b < in->B; b++)
        for (int r = 0; r < k; r++) {
            float h = s->hdev[(size_t)b * k + r];
            if (h == 0.0f) continue;
            size_t j = (size_t)b * s->F + (size_t)L->hot[r];
            L->st.served_dev++;
            L->st.computed++;
            if (in->hfull) in->hfull[j] = h;
            if (s->p.check) L->st.hit += s->truth[j] != 0.0f;
        }
}

/* ------------------------------------------------------------ the FFN */

static int grow_rows(hc_sparse *s, int B)
{
    if (B <= s->cap_b) return 0;
    size_t bf = sizeof(float) * (size_t)B * (size_t)s->F, kb = (size_t)B * (size_t)(s->k_max ? s->k_max : 1);
    void **bufs[7] = { (void **)&s->pred, (void **)&s->hidden, (void **)&s->hfull, (void **)&s->truth,
                       (void **)&s->ydev, (void **)&s->mask, (void **)&s->hdev };
    size_t sizes[7] = { bf, sizeof(float) * (size_t)B * (size_t)(s->r_max ? s->r_max : 1), bf, bf,
                        sizeof(float) * (size_t)B * (size_t)s->E, kb, sizeof(float) * kb };
    int ok = 1;
    for (int i = 0; i < 7; i++) {
        void *p = realloc(*bufs[i], sizes[i]);
        if (p) *bufs[i] = p;
        else ok = 0;
    }
    if (!ok) return -1;
    s->cap_b = B;
    return 0;
}

/* Truly active neurons of B rows: |act(gate) * up| above the profiler's cut. */
static void true_active(hc_sparse *s, hc_ctx *ctx, int layer, const float *x_norm, int B)
{
    const hc_layer *ly = &s->m->layers[layer];
    size_t n = (size_t)B * (size_t)s->F;
    hc_ctx_matvec(ctx, &ly->ffn_gate, x_norm, B, s->truth);
    hc_ctx_matvec(ctx, &ly->ffn_up, x_norm, B, s->hfull);
    hc_ffn_act(s->m->hp.act, s->truth, s->hfull, (int)n);
    float cut = s->m->hp.act == HC_ACT_RELU ? 0.0f : SILU_ACTIVE;
    for (size_t i = 0; i < n; i++) s->truth[i] = fabsf(s->truth[i]) > cut;
}

/* All B rows (a prompt batch, or one generated token) in one pass: the device
 * is given its rows first and only waited for at the end, after the CPU has
 * computed the cold neurons of every row. */
static void sparse_ffn(void *user, hc_ctx *ctx, int layer, const float *ffn_inp, const float *x_norm, int B, float *out)
{
    hc_sparse *s = user;
    const hc_layer *ly = &s->m->layers[layer];
    layer_state *L = &s->L[layer];
    int E = s->E, F = s->F;
    if (grow_rows(s, B)) {   /* no error path through ctx->ffn: the dense FFN is exact */
        hc_warn("out of memory for the sparse FFN of %d rows; this step runs dense", B);
        hc_ffn_dense(ctx, layer, x_norm, B, out);
        return;
    }
    double t_start = hc_now(), t0 = t_start;
    if (s->p.check) true_active(s, ctx, layer, x_norm, B);
    if (s->predictor) {
        hc_ctx_matvec(ctx, &ly->fc1, ffn_inp, B, s->hidden);
        for (size_t i = 0; i < (size_t)B * (size_t)ly->fc1.rows; i++) if (s->hidden[i] < 0.0f) s->hidden[i] = 0.0f;
        hc_ctx_matvec(ctx, &ly->fc2, s->hidden, B, s->pred);
    }
    void *ag, *au;
    hc_ctx_prepare_gate_up(ctx, ly, x_norm, B, &ag, &au);
    if (ctx->hook) memset(s->hfull, 0, sizeof(float) * (size_t)B * F);
    memset(out, 0, sizeof(float) * (size_t)B * E);
    rows_in in = { B, s->predictor ? s->pred : NULL, ag, au, out, ctx->hook ? s->hfull : NULL };

    int on_dev = L->dev && !s->dev_err[0];
    if (on_dev) {
        int k = L->n_hot;
        for (int b = 0; b < B; b++)
            for (int r = 0; r < k; r++) s->mask[(size_t)b * k + r] = (uint8_t)is_candidate(s, in.pred, b, L->hot[r]);
        if (hc_cl_layer_start(L->dev, ag, ctx->act_stride, B, s->mask, s->m->hp.act, s->t_act, s->dev_err,
                              sizeof s->dev_err)) {
            hc_warn("%s; the CPU computes every neuron from now on", s->dev_err);
            on_dev = 0;
        }
    }
    if (on_dev || !L->dev) cpu_part(s, ctx, layer, L->cold, L->cold ? L->n_cold : F, &in);
    else cpu_part(s, ctx, layer, NULL, F, &in);
    s->t_cpu += hc_now() - t0;
    if (on_dev) finish_device(s, ctx, layer, &in);

    L->st.tokens += (uint64_t)B;
    if (in.pred)
        for (size_t i = 0; i < (size_t)B * F; i++) L->st.predicted += in.pred[i] >= s->p.threshold;
    if (s->p.check)
        for (size_t i = 0; i < (size_t)B * F; i++) L->st.truth += s->truth[i] != 0.0f;
    if (ctx->hook) hc_hook_call(ctx, layer, HC_HOOK_FFN_ACT, s->hfull, B, F, ctx->cur_pos0);
    s->t_ffn += hc_now() - t_start;
}

/* ------------------------------------------------------------ setup */

hc_sparse *hc_sparse_new(const hc_model *m, const hc_sparse_params *p, char *err, size_t errlen)
{
    const hc_hparams *hp = &m->hp;
    if (hc_sparse_check(m, err, errlen)) return NULL;
    hc_sparse *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->m = m;
    s->p = *p;
    s->E = hp->n_embd;
    s->F = hp->n_ff;
    s->predictor = p->use_predictor;
    for (int l = 0; l < hp->n_layer; l++) {
        if (m->layers[l].fc1.kind == HC_WEIGHT_NONE) s->predictor = 0;
        else if (m->layers[l].fc1.rows > s->r_max) s->r_max = m->layers[l].fc1.rows;
    }
    s->t_act = s->predictor ? 0.0f : p->threshold;
    s->L = calloc((size_t)hp->n_layer, sizeof *s->L);
    s->cand = malloc(sizeof(int32_t) * (size_t)s->F);
    s->uni = malloc(sizeof(int32_t) * (size_t)s->F);
    s->ones = malloc(sizeof(float) * (size_t)s->F);
    if (!s->L || !s->cand || !s->uni || !s->ones) goto oom;
    for (int j = 0; j < s->F; j++) s->ones[j] = 1.0f;
    for (int l = 0; l < hp->n_layer; l++)
        if (hc_sparse_down_rows(m, l, &s->L[l].down, &s->L[l].down_owned, err, errlen)) {
            hc_sparse_free(s);
            return NULL;
        }
    return s;
oom:
    snprintf(err, errlen, "%s: out of memory for the sparse FFN", m->path);
    hc_sparse_free(s);
    return NULL;
}

void hc_sparse_free(hc_sparse *s)
{
    if (!s) return;
    for (int l = 0; s->L && l < s->m->hp.n_layer; l++) {
        free(s->L[l].down_owned);
        free(s->L[l].cold);
        free(s->L[l].hot);
        hc_cl_layer_free(s->L[l].dev);
    }
    void *bufs[] = { s->L, s->cand, s->uni, s->ones, s->mask, s->ydev, s->hdev, s->pred, s->hidden, s->hfull,
                     s->truth };
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(s);
}

int hc_sparse_uses_predictor(const hc_sparse *s) { return s->predictor; }
const hc_weight *hc_sparse_down(const hc_sparse *s, int layer) { return &s->L[layer].down; }

int hc_sparse_set_hot(hc_sparse *s, int layer, const int32_t *bucket, int k, hc_cl_layer *dev)
{
    layer_state *L = &s->L[layer];
    if (k == 0) {   /* back to the CPU */
        free(L->hot);
        free(L->cold);
        hc_cl_layer_free(L->dev);
        L->hot = L->cold = NULL;
        L->n_hot = L->n_cold = 0;
        L->dev = dev;
        return 0;
    }
    if (k > s->k_max) {   /* the [B][k_max] buffers are regrown on the next step */
        s->k_max = k;
        s->cap_b = 0;
    }
    int32_t *hot = malloc(sizeof(int32_t) * (size_t)k), *cold = malloc(sizeof(int32_t) * (size_t)(s->F - k + 1));
    if (!hot || !cold) {
        free(hot);
        free(cold);
        return -1;
    }
    memcpy(hot, bucket, sizeof(int32_t) * (size_t)k);
    int n = 0, i = 0;
    for (int j = 0; j < s->F; j++) {
        if (i < k && bucket[i] == j) i++;
        else cold[n++] = j;
    }
    free(L->hot);
    free(L->cold);
    hc_cl_layer_free(L->dev);
    *L = (layer_state){ .down = L->down, .down_owned = L->down_owned, .cold = cold, .n_cold = n,
                        .hot = hot, .n_hot = k, .dev = dev, .st = L->st };
    return 0;
}

void hc_sparse_attach(hc_sparse *s, hc_ctx *ctx)
{
    ctx->ffn = sparse_ffn;
    ctx->ffn_user = s;
}

/* ------------------------------------------------------------ reporting */

hc_sparse_stats hc_sparse_get_stats(const hc_sparse *s, int layer)
{
    if (layer >= 0) return s->L[layer].st;
    hc_sparse_stats t = { 0 };
    for (int l = 0; l < s->m->hp.n_layer; l++) {
        const hc_sparse_stats *a = &s->L[l].st;
        t.tokens += a->tokens;
        t.computed += a->computed;
        t.predicted += a->predicted;
        t.served_cpu += a->served_cpu;
        t.served_dev += a->served_dev;
        t.truth += a->truth;
        t.hit += a->hit;
    }
    return t;
}

const char *hc_sparse_device_error(const hc_sparse *s) { return s->dev_err[0] ? s->dev_err : NULL; }

static double ratio(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : 0.0; }

static void report_line(const hc_sparse *s, FILE *f, const char *what, const hc_sparse_stats *st)
{
    double slots = (double)st->tokens * s->F;
    fprintf(f, "%s: skipped %5.1f%% of neurons", what, slots > 0 ? 100.0 * (1.0 - (double)st->computed / slots) : 0.0);
    if (s->predictor) fprintf(f, ", predicted active %5.1f%%", slots > 0 ? 100.0 * (double)st->predicted / slots : 0.0);
    if (s->p.check) fprintf(f, ", recall %.4f", ratio(st->hit, st->truth));
    fputc('\n', f);
}

void hc_sparse_report(const hc_sparse *s, FILE *f, int per_layer)
{
    hc_sparse_stats t = hc_sparse_get_stats(s, -1);
    if (per_layer)
        for (int l = 0; l < s->m->hp.n_layer; l++) {
            char what[32];
            snprintf(what, sizeof what, "sparse: layer %2d", l);
            report_line(s, f, what, &s->L[l].st);
        }
    report_line(s, f, "sparse: all layers", &t);
    int any_dev = 0;
    for (int l = 0; l < s->m->hp.n_layer; l++) any_dev |= s->L[l].dev != NULL;
    fprintf(f, "sparse: FFN time %.2f ms: CPU %.2f ms", s->t_ffn * 1e3, s->t_cpu * 1e3);
    if (any_dev)
        fprintf(f, ", device %.2f ms (waited %.2f ms); device served %.1f%% of activations",
                s->t_dev * 1e3, s->t_wait * 1e3, 100.0 * ratio(t.served_dev, t.served_dev + t.served_cpu));
    fputc('\n', f);
}

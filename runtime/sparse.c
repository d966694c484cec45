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
    int32_t *all, *list;     /* [F] identity; neurons being computed */
    float *g, *u, *ones;     /* [F] */
    uint8_t *mask, *comp;    /* [k_max]; [F] computed map (check) */
    float *ydev, *hdev;      /* [E], [k_max] */
    float *pred, *hidden, *hfull, *truth;   /* [B][F], [B][r], [B][F], [B][F] */
    int cap_b;               /* rows the [B] buffers hold */
    double t_ffn, t_cpu, t_dev, t_wait;
    char dev_err[300];
};

/* ------------------------------------------------------------ one token */

typedef struct {
    const float *pred;       /* [F] predictor output or NULL */
    const void *act_g, *act_u;
    float *out;              /* [E] += */
    float *hfull;            /* [F] h of every neuron (hook) or NULL */
} token;

/* The CPU's share: candidates among idx[0..n) (NULL: all neurons). */
static void cpu_part(hc_sparse *s, hc_ctx *ctx, int layer, const int32_t *idx, int n, const token *tk)
{
    const hc_layer *ly = &s->m->layers[layer];
    layer_state *L = &s->L[layer];
    if (!idx) idx = s->all;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!tk->pred || tk->pred[idx[i]] >= s->p.threshold) s->list[k++] = idx[i];
    hc_ctx_matvec_rows(ctx, &ly->ffn_gate, s->list, k, tk->act_g, 1, s->g, 0);
    hc_ffn_act(s->m->hp.act, s->g, s->ones, k);
    int kept = 0;
    for (int i = 0; i < k; i++)
        if (hc_keep_act(s->g[i], s->t_act)) {
            s->list[kept] = s->list[i];
            s->g[kept++] = s->g[i];
        }
    hc_ctx_matvec_rows(ctx, &ly->ffn_up, s->list, kept, tk->act_u, 1, s->u, 0);
    for (int i = 0; i < kept; i++) {
        float h = s->g[i] * s->u[i];
        s->g[i] = h;
        L->st.served_cpu += h != 0.0f;
        if (tk->hfull) tk->hfull[s->list[i]] = h;
        if (s->p.check) s->comp[s->list[i]] = 1;
    }
    L->st.computed += (uint64_t)kept;
    hc_ctx_down_accum(ctx, &L->down, s->list, s->g, 0, kept, 1, tk->out);
}

/* Device done or failed: add its share, or compute the hot neurons here. */
static void finish_device(hc_sparse *s, hc_ctx *ctx, int layer, const token *tk)
{
    layer_state *L = &s->L[layer];
    double t0 = hc_now();
    if (hc_cl_layer_finish(L->dev, s->ydev, s->hdev, &s->t_dev, s->dev_err, sizeof s->dev_err)) {
        hc_warn("%s; the CPU computes every neuron from now on", s->dev_err);
        cpu_part(s, ctx, layer, L->hot, L->n_hot, tk);
        return;
    }
    s->t_wait += hc_now() - t0;
    for (int e = 0; e < s->E; e++) tk->out[e] += s->ydev[e];
    for (int r = 0; r < L->n_hot; r++) {
        float h = s->hdev[r];
        if (h == 0.0f) continue;
        L->st.served_dev++;
        L->st.computed++;
        if (tk->hfull) tk->hfull[L->hot[r]] = h;
        if (s->p.check) s->comp[L->hot[r]] = 1;
    }
}

/* ------------------------------------------------------------ the FFN */

static int grow_rows(hc_sparse *s, int B)
{
    if (B <= s->cap_b) return 0;
    size_t bf = sizeof(float) * (size_t)B * (size_t)s->F;
    float *bufs[4];
    bufs[0] = realloc(s->pred, bf);
    if (bufs[0]) s->pred = bufs[0];
    bufs[1] = realloc(s->hidden, sizeof(float) * (size_t)B * (size_t)(s->r_max ? s->r_max : 1));
    if (bufs[1]) s->hidden = bufs[1];
    bufs[2] = realloc(s->hfull, bf);
    if (bufs[2]) s->hfull = bufs[2];
    bufs[3] = realloc(s->truth, bf);
    if (bufs[3]) s->truth = bufs[3];
    if (!bufs[0] || !bufs[1] || !bufs[2] || !bufs[3]) return -1;
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
    size_t need = hc_weight_act_bytes(&ly->ffn_gate);
    if (hc_weight_act_bytes(&ly->ffn_up) > need) need = hc_weight_act_bytes(&ly->ffn_up);
    void *ag = hc_ctx_acts(ctx, 0, need), *au = hc_ctx_acts(ctx, 1, need);
    int same = hc_weight_same_act(&ly->ffn_gate, &ly->ffn_up);
    if (ctx->hook) memset(s->hfull, 0, sizeof(float) * (size_t)B * F);
    s->t_cpu += hc_now() - t0;

    for (int b = 0; b < B; b++) {
        t0 = hc_now();
        const float *xb = x_norm + (size_t)b * E;
        token tk = { s->predictor ? s->pred + (size_t)b * F : NULL, ag, same ? ag : au, out + (size_t)b * E,
                     ctx->hook ? s->hfull + (size_t)b * F : NULL };
        hc_weight_act_prepare(&ly->ffn_gate, xb, ag);
        if (!same) hc_weight_act_prepare(&ly->ffn_up, xb, au);
        memset(tk.out, 0, sizeof(float) * (size_t)E);
        if (s->p.check) memset(s->comp, 0, (size_t)F);
        int on_dev = L->dev && !s->dev_err[0];
        if (on_dev) {
            for (int r = 0; r < L->n_hot; r++) s->mask[r] = !tk.pred || tk.pred[L->hot[r]] >= s->p.threshold;
            if (hc_cl_layer_start(L->dev, ag, s->mask, s->m->hp.act, s->t_act, s->dev_err, sizeof s->dev_err)) {
                hc_warn("%s; the CPU computes every neuron from now on", s->dev_err);
                on_dev = 0;
            }
        }
        if (on_dev || !L->dev) cpu_part(s, ctx, layer, L->cold, L->cold ? L->n_cold : F, &tk);
        else cpu_part(s, ctx, layer, NULL, F, &tk);
        s->t_cpu += hc_now() - t0;
        if (on_dev) finish_device(s, ctx, layer, &tk);

        L->st.tokens++;
        if (tk.pred)
            for (int j = 0; j < F; j++) L->st.predicted += tk.pred[j] >= s->p.threshold;
        if (s->p.check) {
            const float *tr = s->truth + (size_t)b * F;
            for (int j = 0; j < F; j++) {
                L->st.truth += tr[j] != 0.0f;
                L->st.hit += tr[j] != 0.0f && s->comp[j];
            }
        }
    }
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
    s->all = malloc(sizeof(int32_t) * (size_t)s->F);
    s->list = malloc(sizeof(int32_t) * (size_t)s->F);
    s->g = malloc(sizeof(float) * (size_t)s->F);
    s->u = malloc(sizeof(float) * (size_t)s->F);
    s->ones = malloc(sizeof(float) * (size_t)s->F);
    s->comp = malloc((size_t)s->F);
    s->ydev = malloc(sizeof(float) * (size_t)s->E);
    if (!s->L || !s->all || !s->list || !s->g || !s->u || !s->ones || !s->comp || !s->ydev) goto oom;
    for (int j = 0; j < s->F; j++) {
        s->all[j] = j;
        s->ones[j] = 1.0f;
    }
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
    void *bufs[] = { s->L, s->all, s->list, s->g, s->u, s->ones, s->mask, s->comp, s->ydev, s->hdev,
                     s->pred, s->hidden, s->hfull, s->truth };
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
    if (k > s->k_max) {
        uint8_t *mask = realloc(s->mask, (size_t)k);
        if (mask) s->mask = mask;
        float *h = realloc(s->hdev, sizeof(float) * (size_t)k);
        if (h) s->hdev = h;
        if (!mask || !h) return -1;
        s->k_max = k;
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

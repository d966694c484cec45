/* hc-profile predictors: collect, train per layer, calibrate, evaluate, write.
 *
 * One global threshold. PowerInfer reads one powerinfer.sparse_threshold for
 * every layer and computes neuron j iff z_j >= threshold, z = fc2·relu(fc1·x).
 * Each layer gets its own calibrated threshold t_l. The global one is g = +1
 * when every t_l >= T_FLOOR, else g = -1 and every t_l > -T_FLOOR is lowered
 * to -T_FLOOR (which only adds neurons). Layer l's fc2 is then multiplied by
 * g / t_l > 0, so z_j >= t_l becomes z'_j >= g for the stored weights, in
 * PowerInfer and hc-run alike. The reported
 * recall / precision are measured afterwards with the stored (scaled,
 * rounded) weights on test tokens that neither training nor calibration saw. */
#include "predictors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ggml_types.h"
#include "profile.h"
#include "sparse.h"

#define T_FLOOR 1e-3f     /* calibrated thresholds above -T_FLOOR are lowered to it */

static int default_rank(int E, int div)
{
    int r = E / div / 8 * 8;
    return r < 8 ? 8 : r;
}

static double ratio(uint64_t a, uint64_t b, double if_zero) { return b ? (double)a / (double)b : if_zero; }

/* Train the candidates of layer l, keep the cheapest (predictor weights plus
 * the FFN rows it leaves to compute, on the calibration set) in *best. */
static int fit_layer(hc_pool *pool, const hc_pred_opts *o, hc_pred_set *sets[HC_PRED_NSETS], int l,
                     const int *cand, int n_cand, hc_progress *bar, int *done, hc_pred_net *best,
                     hc_pred_layer *out, char *err, size_t errlen)
{
    const hc_pred_set *tr = &sets[HC_PRED_TRAIN][l], *ca = &sets[HC_PRED_CALIB][l];
    const int E = tr->n_embd, F = tr->n_ff;
    uint64_t P = hc_pred_count_active(tr), N = (uint64_t)tr->n * (uint64_t)F;
    float pw = o->pos_weight;
    if (pw == 0) pw = P ? fmaxf(1.0f, (float)sqrt((double)(N - P) / (double)P)) : 1.0f;
    double best_cost = INFINITY;
    float best_t = 0;
    for (int c = 0; c < n_cand; c++) {
        double t0 = hc_now(), loss;
        hc_pred_net net;
        hc_pred_train_opts to = { cand[c], o->epochs, o->batch, o->lr, pw,
                                  o->seed * 0x9e3779b97f4a7c15ULL + (uint64_t)l * 1000003u + (uint64_t)cand[c] };
        if (hc_pred_train(pool, tr, &to, &net, &loss) != 0) goto oom;
        hc_pred_net_round(&net, o->pred_type);
        float t = -1.0f;    /* no active calibration pair: keep the scale */
        int rc = hc_pred_calibrate(pool, &net, ca, o->recall, &t);
        double cost = 0;
        hc_pred_counts k;
        if (rc < 0 || (n_cand > 1 && hc_pred_evaluate(pool, &net, ca, t, &k) != 0)) { hc_pred_net_free(&net); goto oom; }
        if (n_cand > 1)
            cost = (double)cand[c] * (E + F) + 3.0 * E * F * ratio(k.tp + k.fp, k.tp + k.fp + k.tn + k.fn, 1);
        if (cost < best_cost) {
            hc_pred_net_free(best);
            *best = net;
            best_cost = cost;
            best_t = t;
            out->loss = loss;
            out->rank = cand[c];
            out->train_s = hc_now() - t0;
        } else {
            hc_pred_net_free(&net);
        }
        hc_progress_update(bar, (uint64_t)++*done);
    }
    out->threshold = best_t;
    out->params = (uint64_t)best->r * (uint64_t)(E + F);
    out->bytes = out->params * (o->pred_type == GGML_TYPE_F16 ? 2 : 4);
    return 0;
oom:
    snprintf(err, errlen, "%s: layer %d: out of memory while training", o->model, l);
    return -1;
}

/* Fold layer l's threshold into its fc2 (global threshold g = +-1), round,
 * and measure the stored predictor on the test tokens. */
static int finish_layer(hc_pool *pool, const hc_pred_opts *o, const hc_pred_set *te, int l, float g,
                        hc_pred_net *net, hc_pred_layer *out, char *err, size_t errlen)
{
    const size_t n2 = (size_t)net->n_ff * net->r;
    float t = out->threshold;
    if (g < 0 && t > -T_FLOOR) t = -T_FLOOR;    /* lower: keeps the recall, costs neurons */
    float alpha = g / t;
    for (size_t i = 0; i < n2; i++) net->w2[i] *= alpha;
    hc_pred_net_round(net, o->pred_type);
    for (size_t i = 0; i < n2; i++)
        if (!isfinite(net->w2[i])) {
            snprintf(err, errlen, "%s: layer %d: fc2 scaled by %g does not fit %s; use --pred-type f32", o->model, l,
                     (double)alpha, ggml_type_name(o->pred_type));
            return -1;
        }
    hc_pred_counts k;
    if (hc_pred_evaluate(pool, net, te, g, &k) != 0) {
        snprintf(err, errlen, "%s: layer %d: out of memory", o->model, l);
        return -1;
    }
    uint64_t tot = k.tp + k.fp + k.tn + k.fn;
    out->recall = ratio(k.tp, k.tp + k.fn, 1);
    out->precision = ratio(k.tp, k.tp + k.fp, 1);
    out->pred_sparsity = ratio(k.tn + k.fn, tot, 0);
    out->true_sparsity = ratio(k.tn + k.fp, tot, 0);
    return 0;
}

/* The options with every 0 ("default") replaced by its value. */
static hc_pred_opts with_defaults(const hc_pred_opts *oin)
{
    hc_pred_opts o = *oin;
    if (!o.batch) o.batch = 32;
    if (o.recall == 0) o.recall = 0.99f;
    if (o.holdout == 0) o.holdout = 0.2f;
    if (!o.mem) o.mem = 2ull << 30;
    if (o.n_threads < 1) o.n_threads = 1;
    if (o.pred_type != GGML_TYPE_F16) o.pred_type = GGML_TYPE_F32;
    return o;
}

/* The ranks each layer tries: n_embd/16, /8, /4, /2 with --rank-auto, else one. */
static int rank_candidates(const hc_pred_opts *o, int n_embd, int cand[4])
{
    int n_cand = 0;
    if (o->rank_auto) {
        for (int div = 16; div >= 2; div /= 2) {
            int r = default_rank(n_embd, div);
            if (!n_cand || cand[n_cand - 1] != r) cand[n_cand++] = r;
        }
    } else {
        cand[n_cand++] = o->rank ? o->rank : default_rank(n_embd, 4);
    }
    return n_cand;
}

/* Train every layer, choose the global threshold and fold it into each fc2. */
static int train_layers(hc_pool *pool, const hc_pred_opts *o, int n_embd, hc_pred_set *sets[HC_PRED_NSETS],
                        hc_pred_net *nets, hc_pred_report *rep, char *err, size_t errlen)
{
    const int L = rep->n_layer;
    int cand[4], n_cand = rank_candidates(o, n_embd, cand);
    hc_pred_opts ot = *o;    /* every layer keeps the same number of training tokens */
    int64_t n = sets[HC_PRED_TRAIN][0].n > 0 ? sets[HC_PRED_TRAIN][0].n : 1;
    if (!ot.epochs) ot.epochs = (int)fmax(10.0, ceil((double)HC_PRED_MIN_STEPS * ot.batch / (double)n));
    if (ot.lr == 0) ot.lr = fminf(3e-3f, HC_PRED_LR_WIDTH / (float)n_embd);
    rep->lr = ot.lr;
    rep->epochs = ot.epochs;
    rep->batch = ot.batch;
    o = &ot;
    hc_progress bar;
    int done_steps = 0;
    hc_progress_start(&bar, "train", (uint64_t)L * (uint64_t)n_cand, "fits");
    double t0 = hc_now();
    for (int l = 0; l < L; l++)
        if (fit_layer(pool, o, sets, l, cand, n_cand, &bar, &done_steps, &nets[l], &rep->layers[l], err, errlen) != 0) {
            hc_progress_end(&bar);
            return -1;
        }
    hc_progress_end(&bar);
    rep->train_s = hc_now() - t0;
    /* one threshold for all layers: +1 when every calibrated threshold is
     * positive, else -1 (positive ones are lowered to -T_FLOOR) */
    rep->global_threshold = 1.0f;
    for (int l = 0; l < L; l++)
        if (rep->layers[l].threshold < T_FLOOR) rep->global_threshold = -1.0f;
    for (int l = 0; l < L; l++)
        if (finish_layer(pool, o, &sets[HC_PRED_TEST][l], l, rep->global_threshold, &nets[l], &rep->layers[l], err,
                         errlen) != 0)
            return -1;
    return 0;
}

int hc_predictors_run(const hc_pred_opts *oin, hc_pred_report *rep, char *err, size_t errlen)
{
    hc_pred_opts o = with_defaults(oin);
    memset(rep, 0, sizeof *rep);

    hc_pred_set *sets[HC_PRED_NSETS] = { 0 };
    hc_pred_net *nets = NULL;
    hc_pool *pool = NULL;
    int rc = -1, L = 0;
    hc_model *m = hc_model_load(o.model, err, errlen);
    if (!m) return -1;
    const hc_hparams *hp = &m->hp;
    L = hp->n_layer;
    rep->n_layer = L;
    rep->n_embd = hp->n_embd;
    rep->n_ff = hp->n_ff;
    /* a calibrated model: active = kept by its calibrated sparse FFN (h != 0) */
    int calibrated = gguf_find_kv(m->file, HC_KEY_SPARSE_THRESHOLDS) >= 0;
    if (hp->act != HC_ACT_RELU && !calibrated && !o.act_threshold_set) {
        /* SiLU and GELU are never exactly 0: "active" needs a definition */
        snprintf(err, errlen, "%s: predictors need a ReLU model; this one's FFN activation is %s, never exactly 0: "
                 "calibrate it first (hc-profile calibrate) or define active as |h| > T with --act-threshold T",
                 o.model, hp->act == HC_ACT_GELU ? "GELU" : "SiLU");
        goto done;
    }
    rep->act_threshold = o.act_threshold_set ? o.act_threshold : 0.0f;
    if (!(rep->layers = calloc((size_t)L, sizeof *rep->layers)) || !(nets = calloc((size_t)L, sizeof *nets))) {
        snprintf(err, errlen, "%s: out of memory", o.model);
        goto done;
    }
    for (int l = 0; l < L; l++)
        if (m->layers[l].ffn_down.kind == HC_WEIGHT_NONE) {
            snprintf(err, errlen, "%s: layer %d has no ffn_down (already a sparse model?); give the dense model",
                     o.model, l);
            goto done;
        }
    if (o.output && hc_pred_check_room(m, &o, err, errlen) != 0) goto done;
    if (hc_pred_collect(&o, m, sets, rep, err, errlen) != 0) goto done;
    if (!(pool = hc_pool_new(o.n_threads))) {
        snprintf(err, errlen, "%s: cannot start %d threads", o.model, o.n_threads);
        goto done;
    }
    if (train_layers(pool, &o, hp->n_embd, sets, nets, rep, err, errlen) != 0) goto done;
    if (o.output && hc_pred_write(m, nets, &o, rep, err, errlen) != 0) goto done;
    if (o.svg) {
        char title[512];
        snprintf(title, sizeof title, "%s: predictors trained on %s, recall target %g, %lld test tokens",
                 o.model, o.corpus, (double)o.recall, (long long)rep->n_test);
        if (hc_pred_svg(rep, title, o.svg, err, errlen) != 0) goto done;
    }
    rc = 0;
done:
    for (int k = 0; k < HC_PRED_NSETS; k++) hc_pred_sets_free(sets[k], L);
    for (int l = 0; nets && l < L; l++) hc_pred_net_free(&nets[l]);
    free(nets);
    if (pool) hc_pool_free(pool);
    hc_model_free(m);
    return rc;
}

int hc_pred_default_type(const char *model, uint32_t *type, char *err, size_t errlen)
{
    gguf_file *f = gguf_open(model, err, errlen);
    if (!f) return -1;
    const gguf_tensor *t = gguf_get_tensor(f, "blk.0.ffn_up.weight");
    *type = t && t->type == GGML_TYPE_F32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
    gguf_close(f);
    return 0;
}

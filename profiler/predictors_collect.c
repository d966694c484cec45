/* Training data for the predictors: the corpus through the runtime, keeping
 * per layer the FFN input (HC_HOOK_FFN_INP: the residual stream before
 * ffn_norm, PowerInfer's predictor input for LLaMA) and the true active set
 * (HC_HOOK_FFN_ACT: |h| > T, h = act(gate)·up). A model calibrated by
 * hc-profile calibrate runs with its sparse FFN (hc_ffn_setup, as hc-run runs
 * it), so h != 0 is exactly the calibrated active set (criterion >= the
 * layer's threshold), with the earlier layers sparse as at run time.
 *
 * Windows as hc-profile's: BOS + CTX-1 corpus tokens, one batch from position
 * 0, the BOS row not kept. Held-out windows are evenly spread over the corpus
 * (window w is held out when floor((w+1)·H/W) > floor(w·H/W), H of W windows)
 * and alternate between the calibration set (threshold choice) and the test
 * set (the report). Memory: each set keeps a uniform reservoir sample
 * (Algorithm R, seeded) of its tokens, the same tokens for every layer, sized
 * from --mem. */
#include "predictors.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ffn_setup.h"
#include "profile.h"

void hc_pred_sets_free(hc_pred_set *sets, int n_layer)
{
    if (!sets) return;
    for (int l = 0; l < n_layer; l++) {
        free(sets[l].x);
        free(sets[l].y);
    }
    free(sets);
}

typedef struct {
    hc_pred_set *set;          /* [n_layer] of the current window's stream */
    const int64_t *slot;       /* [ctx]: reservoir slot of position p, or -1 */
    float thr;
} keeper;

static void hook(void *user, int layer, int point, const float *x, int B, int n, int pos0)
{
    const keeper *k = user;
    if (point != HC_HOOK_FFN_INP && point != HC_HOOK_FFN_ACT) return;
    hc_pred_set *s = &k->set[layer];
    size_t yb = hc_pred_ybytes(s->n_ff);
    for (int b = 0; b < B; b++) {
        int64_t sl = k->slot[pos0 + b];
        if (sl < 0) continue;
        const float *row = x + (size_t)b * n;
        if (point == HC_HOOK_FFN_INP) {
            memcpy(s->x + (size_t)sl * n, row, sizeof(float) * (size_t)n);
            continue;
        }
        uint8_t *y = s->y + (size_t)sl * yb;
        memset(y, 0, yb);
        for (int j = 0; j < n; j++)
            if (fabsf(row[j]) > k->thr) y[j >> 3] |= (uint8_t)(1u << (j & 7));
    }
}

static int64_t window_len(int64_t w, int64_t per, int64_t n_used)
{
    return (w + 1) * per < n_used ? per : n_used - w * per;
}

/* Set of window w: train, or calibration / test alternately among held-out ones. */
static int window_set(int64_t w, int64_t n_win, int64_t n_hold)
{
    int64_t a = w * n_hold / n_win, b = (w + 1) * n_hold / n_win;
    if (b == a) return HC_PRED_TRAIN;
    return a % 2 ? HC_PRED_TEST : HC_PRED_CALIB;
}

/* The windows of the corpus and the reservoir capacity of each set. */
typedef struct {
    int ctx_len;
    int64_t n_used, per, n_win, n_hold;   /* tokens used, per window, windows, held out */
    int64_t cap[HC_PRED_NSETS];
} plan;

/* Reservoir capacities from the memory budget (every kept token costs L rows
 * of x and y; the calibration of one layer also holds up to n_ff logits per
 * calibration token) and the sets of that size. 0, or -1 with err (sets freed
 * by the caller). */
static int alloc_sets(const hc_pred_opts *o, const hc_hparams *hp, plan *pl, hc_pred_set *sets[HC_PRED_NSETS],
                      char *err, size_t errlen)
{
    const int L = hp->n_layer, E = hp->n_embd, F = hp->n_ff;
    int64_t total[HC_PRED_NSETS] = { 0 };
    for (int64_t w = 0; w < pl->n_win; w++)
        total[window_set(w, pl->n_win, pl->n_hold)] += window_len(w, pl->per, pl->n_used);
    double row = (double)L * (4.0 * E + (double)hc_pred_ybytes(F)), h = o->holdout;
    double C = (double)o->mem / (row + h / 2 * 4.0 * F);
    double share[HC_PRED_NSETS] = { 1 - h, h / 2, h / 2 };
    for (int k = 0; k < HC_PRED_NSETS; k++) {
        int64_t cap = (int64_t)(C * share[k]);
        if (cap > total[k]) cap = total[k];
        pl->cap[k] = cap;
        if (cap < 1) {
            snprintf(err, errlen, "%s: --mem %" PRIu64 " bytes keeps no %s token; raise it", o->model, o->mem,
                     k == HC_PRED_TRAIN ? "training" : "held-out");
            return -1;
        }
        if (!(sets[k] = calloc((size_t)L, sizeof *sets[k]))) goto oom;
        for (int l = 0; l < L; l++) {
            hc_pred_set *s = &sets[k][l];
            *s = (hc_pred_set){ .n = cap, .n_embd = E, .n_ff = F };
            s->x = malloc(sizeof(float) * (size_t)cap * E);
            s->y = malloc(hc_pred_ybytes(F) * (size_t)cap);
            if (!s->x || !s->y) goto oom;
        }
    }
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory for the samples (lower --mem)", o->model);
    return -1;
}

/* Every window through the model, the hook keeping the sampled positions'
 * rows in their set; the counts into rep. 0, or -1 with err. */
static int run_windows(const hc_pred_opts *o, const hc_model *m, const plan *pl, const int32_t *toks, int bos,
                       hc_pred_set *sets[HC_PRED_NSETS], hc_pred_report *rep, char *err, size_t errlen)
{
    const int ctx_len = pl->ctx_len;
    int rc = -1;
    hc_ctx *ctx = NULL;
    hc_ffn *ffn = NULL;
    int32_t *win = NULL;
    int64_t *slot = NULL;
    if (!(win = malloc(sizeof *win * (size_t)ctx_len)) || !(slot = malloc(sizeof *slot * (size_t)ctx_len))) {
        snprintf(err, errlen, "%s: out of memory for the samples (lower --mem)", o->model);
        goto done;
    }
    keeper kp = { .slot = slot, .thr = rep->act_threshold };
    hc_ctx_params cp = { .n_ctx = ctx_len, .n_batch = ctx_len, .n_threads = o->n_threads, .hook = hook, .hook_user = &kp };
    hc_ffn_opts fo = { .no_gpu_index = 1 };
    if (!(ffn = hc_ffn_setup(m, &fo, stderr, err, errlen))) goto done;
    hc_ffn_attach(ffn, &cp);
    if (!(ctx = hc_ctx_new(m, &cp, err, errlen))) goto done;
    int64_t seen[HC_PRED_NSETS] = { 0 };
    uint64_t rng = o->seed ^ 0x5eed5eed5eed5eedULL;
    hc_progress bar;
    hc_progress_start(&bar, "collect", (uint64_t)pl->n_used, "tokens");
    double t0 = hc_now();
    win[0] = bos;
    slot[0] = -1;
    for (int64_t w = 0; w < pl->n_win; w++) {
        int64_t k = window_len(w, pl->per, pl->n_used);
        int st = window_set(w, pl->n_win, pl->n_hold);
        int any = 0;
        for (int64_t p = 1; p <= k; p++) {       /* Algorithm R */
            int64_t i = seen[st]++, sl = i;
            if (i >= pl->cap[st]) {
                sl = (int64_t)(hc_splitmix64(&rng) % (uint64_t)(i + 1));
                if (sl >= pl->cap[st]) sl = -1;
            }
            slot[p] = sl;
            any |= sl >= 0;
        }
        if (any) {
            memcpy(win + 1, toks + w * pl->per, sizeof *win * (size_t)k);
            kp.set = sets[st];
            if (hc_eval(ctx, win, (int)k + 1, 0, NULL, HC_LOGITS_NONE) != 0) {
                hc_progress_end(&bar);
                snprintf(err, errlen, "%s: window %" PRId64 ": %s", o->corpus, w, hc_ctx_error(ctx));
                goto done;
            }
        }
        rep->n_tokens += k;
        hc_progress_update(&bar, (uint64_t)rep->n_tokens);
    }
    hc_progress_end(&bar);
    rep->collect_s = hc_now() - t0;
    rep->n_train = pl->cap[HC_PRED_TRAIN];
    rep->n_calib = pl->cap[HC_PRED_CALIB];
    rep->n_test = pl->cap[HC_PRED_TEST];
    rep->seen_train = seen[HC_PRED_TRAIN];
    rep->seen_calib = seen[HC_PRED_CALIB];
    rep->seen_test = seen[HC_PRED_TEST];
    rc = 0;
done:
    hc_ctx_free(ctx);
    hc_ffn_free(ffn);
    free(slot);
    free(win);
    return rc;
}

int hc_pred_collect(const hc_pred_opts *o, const hc_model *m, hc_pred_set *sets[HC_PRED_NSETS],
                    hc_pred_report *rep, char *err, size_t errlen)
{
    const hc_hparams *hp = &m->hp;
    int rc = -1;
    int32_t *toks = NULL;
    hc_tokenizer *tok = NULL;
    memset(sets, 0, sizeof(hc_pred_set *) * HC_PRED_NSETS);

    plan pl = { .ctx_len = hc_window_len(hp, o->ctx) };
    if (pl.ctx_len < 2 || pl.ctx_len > hp->n_ctx_train) {
        snprintf(err, errlen, "%s: context %d must be in [2, %d] (the model's context length)", o->model,
                 pl.ctx_len, hp->n_ctx_train);
        return -1;
    }
    if (!(tok = hc_model_tokenizer(m, err, errlen))) return -1;
    int bos = hc_tokenizer_bos(tok);
    if (bos < 0) { snprintf(err, errlen, "%s: the vocabulary has no BOS token", o->model); goto done; }
    int64_t n_all;
    if (!(toks = hc_tokenize_file(tok, o->corpus, &n_all, err, errlen))) goto done;
    pl.n_used = o->max_tokens && o->max_tokens < n_all ? o->max_tokens : n_all;
    pl.per = pl.ctx_len - 1;
    pl.n_win = (pl.n_used + pl.per - 1) / pl.per;
    pl.n_hold = (int64_t)llround(o->holdout * (double)pl.n_win);
    if (pl.n_hold < 2) pl.n_hold = 2;
    if (pl.n_win - pl.n_hold < 1) {
        snprintf(err, errlen, "%s: %" PRId64 " windows of %d tokens are too few to hold out %" PRId64
                 " (use more text or a smaller -c)", o->corpus, pl.n_win, pl.ctx_len, pl.n_hold);
        goto done;
    }
    if (alloc_sets(o, hp, &pl, sets, err, errlen) == 0 &&
        run_windows(o, m, &pl, toks, bos, sets, rep, err, errlen) == 0)
        rc = 0;
done:
    if (rc != 0)
        for (int k = 0; k < HC_PRED_NSETS; k++) { hc_pred_sets_free(sets[k], hp->n_layer); sets[k] = NULL; }
    free(toks);
    hc_tokenizer_free(tok);
    return rc;
}

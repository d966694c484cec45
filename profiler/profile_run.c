/* Profiling: run the corpus through the model in windows and count, per
 * layer and neuron, the tokens on which |h| > T, h = act(gate)*up being the
 * input of ffn_down (the runtime's HC_HOOK_FFN_ACT). A model calibrated by
 * hc-profile calibrate (hotcold.sparse_thresholds) runs with its calibrated
 * sparse FFN (hc_ffn_setup, as hc-run runs it) and T defaults to 0, so the
 * counts are of its calibrated active sets (criterion >= the layer's
 * threshold, the earlier layers sparse as at run time).
 *
 * Windows: the corpus is tokenized once (no BOS); window w holds corpus
 * tokens [w*(ctx-1), (w+1)*(ctx-1)) after a BOS, evaluated as one batch from
 * position 0. The BOS row is not counted (it is the same in every window),
 * so n_tokens is the number of corpus tokens. A shard I/N evaluates windows
 * w % N == I; windows are independent and every total is an integer (counts,
 * and sums of |h| rounded to multiples of 2^-24), so the shards add up to
 * exactly one run whatever the thread count or the shard split. */
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ffn_setup.h"
#include "model.h"
#include "profile.h"
#include "sparse.h"
#include "tokenizer.h"

#define SUM_SCALE 16777216.0   /* 2^24: fixed-point unit of the sums */
#define MAX_ABS_H 1e9f         /* keeps |h| * 2^24 well inside int64 */

typedef struct {
    hc_ctx *ctx;
    int64_t *count, *sumq;      /* [n_layer][n_ff] */
    float thr;
    atomic_int bad_layer;       /* -1, or a layer with a non-finite h or an overflowing sum */
    /* the call being counted */
    const float *h;
    int layer, row0, B, n, n_chunks;
} counter;

/* Neurons [lo, hi) of chunk `chunk`: each neuron's totals have one writer. */
static void count_task(void *arg, int chunk, int ith)
{
    counter *c = arg;
    int lo, hi;
    (void)ith;
    hc_split(c->n, 64, chunk, c->n_chunks, &lo, &hi);
    int64_t *cnt = c->count + (size_t)c->layer * c->n, *sq = c->sumq + (size_t)c->layer * c->n;
    for (int b = c->row0; b < c->B; b++) {
        const float *h = c->h + (size_t)b * c->n;
        for (int j = lo; j < hi; j++) {
            float a = fabsf(h[j]);
            if (!(a < MAX_ABS_H) || __builtin_add_overflow(sq[j], (int64_t)((double)a * SUM_SCALE + 0.5), &sq[j])) {
                atomic_store_explicit(&c->bad_layer, c->layer, memory_order_relaxed);
                continue;
            }
            cnt[j] += a > c->thr;
        }
    }
}

static void hook(void *user, int layer, int point, const float *x, int B, int n, int pos0)
{
    counter *c = user;
    if (point != HC_HOOK_FFN_ACT) return;
    c->h = x;
    c->layer = layer;
    c->B = B;
    c->n = n;
    c->row0 = pos0 == 0;   /* skip the BOS row */
    hc_pool *pool = hc_ctx_pool(c->ctx);
    c->n_chunks = hc_pool_chunks(pool, (n + 63) / 64, (size_t)B * (size_t)n);
    hc_pool_run(pool, count_task, c, c->n_chunks);
}

static int is_calibrated(const hc_model *m) { return gguf_find_kv(m->file, HC_KEY_SPARSE_THRESHOLDS) >= 0; }

/* Corpus tokens in window w (the last one may be short). */
static int64_t window_len(int64_t w, int64_t per, int64_t n_used)
{
    return (w + 1) * per < n_used ? per : n_used - w * per;
}

/* Model identity and counting rule into s. */
static int describe(hc_stats *s, const hc_model *m, const hc_profile_opts *o, char *err, size_t errlen)
{
    char *arch = NULL;
    if (gguf_get_str(m->file, "general.architecture", &arch) != 0 || strlen(arch) >= sizeof s->arch) {
        snprintf(err, errlen, "%s: bad general.architecture", o->model);
        free(arch);
        return -1;
    }
    snprintf(s->arch, sizeof s->arch, "%s", arch);
    free(arch);
    int relu = m->hp.act == HC_ACT_RELU, calibrated = is_calibrated(m);
    snprintf(s->activation, sizeof s->activation, "%s", relu ? "relu" : m->hp.act == HC_ACT_GELU ? "gelu" : "silu");
    s->threshold = o->threshold_set ? o->threshold : relu || calibrated ? 0.0f : HC_SILU_THRESHOLD;
    s->n_embd = (uint32_t)m->hp.n_embd;
    s->ffn_hash = hc_ffn_hash(m->file);
    return 0;
}

/* The corpus identity: file name, tokens used, their hash, and the shard. */
static void corpus_id(hc_stats *s, const hc_profile_opts *o, const int32_t *toks, int64_t n_used)
{
    const char *base = strrchr(o->corpus, '/');
    base = base ? base + 1 : o->corpus;
    int w = snprintf(s->corpus, sizeof s->corpus, "%.160s tokens=%" PRId64 " fnv=%016" PRIx64, base, n_used,
                     hc_fnv1a64(toks, (size_t)n_used * sizeof *toks, HC_FNV_INIT));
    if (o->shard_n > 1)
        snprintf(s->corpus + w, sizeof s->corpus - (size_t)w, HC_SHARD_TAG "%d/%d", o->shard_i, o->shard_n);
}

/* This shard's windows through the model, the hook counting into s and sumq;
 * then the sums into s. 0, or -1 with err. */
static int count_windows(const hc_profile_opts *o, const hc_model *m, const int32_t *toks, int64_t n_used, int bos,
                         hc_stats *s, int64_t *sumq, double *eval_s, char *err, size_t errlen)
{
    const int ctx_len = (int)s->ctx;
    int rc = -1;
    hc_ctx *ctx = NULL;
    hc_ffn *ffn = NULL;
    int32_t *win = malloc((size_t)ctx_len * sizeof *win);
    if (!win) {
        snprintf(err, errlen, "%s: out of memory", o->model);
        return -1;
    }
    counter c = { .count = s->count, .sumq = sumq, .thr = s->threshold };
    atomic_init(&c.bad_layer, -1);
    hc_ctx_params cp = { .n_ctx = ctx_len, .n_batch = ctx_len, .n_threads = o->n_threads, .hook = hook, .hook_user = &c };
    /* a calibrated model: its calibrated sparse FFN, as hc-run runs it */
    hc_ffn_opts fo = { .no_gpu_index = 1 };
    if (is_calibrated(m)) {
        if (!(ffn = hc_ffn_setup(m, &fo, stderr, err, errlen))) goto done;
        hc_ffn_attach(ffn, &cp);
    }
    if (!(ctx = hc_ctx_new(m, &cp, err, errlen))) goto done;
    c.ctx = ctx;

    int64_t per = ctx_len - 1, n_win = (n_used + per - 1) / per, todo = 0;
    for (int64_t wi = o->shard_i; wi < n_win; wi += o->shard_n)
        todo += window_len(wi, per, n_used);
    hc_progress bar;
    hc_progress_start(&bar, "profile", (uint64_t)todo, "tokens");
    win[0] = bos;
    double t0 = hc_now();
    for (int64_t wi = o->shard_i; wi < n_win; wi += o->shard_n) {
        int64_t k = window_len(wi, per, n_used);
        memcpy(win + 1, toks + wi * per, (size_t)k * sizeof *win);
        if (hc_eval(ctx, win, (int)k + 1, 0, NULL, HC_LOGITS_NONE) != 0) {
            hc_progress_end(&bar);
            snprintf(err, errlen, "%s: window %" PRId64 ": %s", o->corpus, wi, hc_ctx_error(ctx));
            goto done;
        }
        s->n_tokens += (uint64_t)k;
        hc_progress_update(&bar, s->n_tokens);
    }
    hc_progress_end(&bar);
    if (eval_s) *eval_s = hc_now() - t0;
    int bad = atomic_load(&c.bad_layer);
    if (bad >= 0) {
        snprintf(err, errlen, "%s: layer %d: an FFN activation is not finite or a sum of |h| overflows", o->model, bad);
        goto done;
    }
    for (size_t j = 0; j < (size_t)s->n_layer * s->n_ff; j++) s->sum[j] = (double)sumq[j] / SUM_SCALE;
    rc = 0;
done:
    hc_ctx_free(ctx);
    hc_ffn_free(ffn);
    free(win);
    return rc;
}

hc_stats *hc_profile_run(const hc_profile_opts *o, double *eval_s, char *err, size_t errlen)
{
    hc_stats *s = NULL;
    hc_tokenizer *tok = NULL;
    int32_t *toks = NULL;
    int64_t *sumq = NULL;
    hc_model *m = hc_model_load(o->model, err, errlen);
    if (!m) return NULL;
    const hc_hparams *hp = &m->hp;
    int ctx_len = hc_window_len(hp, o->ctx);
    if (ctx_len < 2 || (hp->n_ctx_train > 0 && ctx_len > hp->n_ctx_train)) {
        snprintf(err, errlen, "%s: context %d must be in [2, %d] (the model's context length)", o->model,
                 ctx_len, hp->n_ctx_train);
        goto done;
    }
    if (!(tok = hc_model_tokenizer(m, err, errlen))) goto done;
    int bos = hc_tokenizer_bos(tok);
    if (bos < 0) { snprintf(err, errlen, "%s: the vocabulary has no BOS token", o->model); goto done; }
    int64_t n_all;
    if (!(toks = hc_tokenize_file(tok, o->corpus, &n_all, err, errlen))) goto done;
    int64_t n_used = o->max_tokens && o->max_tokens < n_all ? o->max_tokens : n_all;

    if (!(s = hc_stats_new((uint32_t)hp->n_layer, (uint32_t)hp->n_ff)) ||
        !(sumq = calloc((size_t)hp->n_layer * hp->n_ff, sizeof *sumq))) {
        snprintf(err, errlen, "%s: out of memory", o->model);
        goto fail;
    }
    if (describe(s, m, o, err, errlen) != 0) goto fail;
    s->ctx = (uint32_t)ctx_len;
    corpus_id(s, o, toks, n_used);
    if (count_windows(o, m, toks, n_used, bos, s, sumq, eval_s, err, errlen) != 0) goto fail;
    goto done;
fail:
    hc_stats_free(s);
    s = NULL;
done:
    free(sumq);
    free(toks);
    hc_tokenizer_free(tok);
    hc_model_free(m);
    return s;
}

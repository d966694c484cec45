/* Calibration of the sparse FFN's per-layer thresholds (calibrate.h).
 *
 * The corpus is cut into windows exactly as hc-run --perplexity cuts it
 * (tokens with BOS, n_tok / ctx windows of ctx tokens, each starting with
 * BOS), so the fraction measured by hc-run -v on the same corpus and -c is
 * the one calibrated. Layer l is calibrated by one pass over all windows with
 * the sparse FFN, layers 0..l-1 at their final thresholds and layers l.. at
 * threshold 0; the criterion values of layer l (every token, every neuron)
 * are the ones the sparse FFN computes (its observer), and the threshold is
 * the k-th smallest of them, k = floor(S * count). global: one pass with no
 * neuron skipped collects every layer's values and one threshold, their
 * k-th smallest, goes to every layer (the fraction skipped at run time then
 * differs from S, since skipping changes the later layers' inputs; that is
 * the global threshold of hc-run --sparse-threshold). Every value is computed
 * with thread-independent sums, so the thresholds, and the file, do not
 * depend on -t. */
#include "calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "model.h"
#include "sparse.h"
#include "tokenizer.h"

/* Values of one layer held at once: 4 bytes each. */
#define MAX_VALUES ((uint64_t)1 << 30)

float hc_select_kth(float *v, size_t n, size_t k)
{
    /* finite floats >= 0 order as their bit patterns: pick the high 16 bits,
     * then the low 16 bits among the values with those high bits */
    uint64_t *hist = calloc(65536, sizeof *hist);
    if (!hist) return NAN;
    uint32_t hi = 0, lo = 0;
    for (int pass = 0; pass < 2; pass++) {
        memset(hist, 0, 65536 * sizeof *hist);
        for (size_t i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, &v[i], sizeof b);
            if (pass == 0) hist[b >> 16]++;
            else if (b >> 16 == hi) hist[b & 0xffff]++;
        }
        uint32_t bin = 0;
        while (k >= hist[bin]) k -= hist[bin++];
        if (pass == 0) hi = bin;
        else lo = bin;
    }
    free(hist);
    uint32_t b = hi << 16 | lo;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

typedef struct {
    int layer;               /* the layer being calibrated; -1: all */
    float *vals;             /* its values, in token order */
    uint64_t n, cap;
    int bad;                 /* a value not finite */
} collector;

static void observe(void *user, int layer, const float *crit, int B, int n_ff)
{
    collector *c = user;
    if (c->layer >= 0 && layer != c->layer) return;
    size_t n = (size_t)B * (size_t)n_ff;
    if (c->n + n > c->cap) {   /* more rows than the windows hold: cannot happen */
        c->bad = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) c->bad |= !(crit[i] < INFINITY);
    memcpy(c->vals + c->n, crit, n * sizeof *crit);
    c->n += n;
}

/* One pass over the windows with thresholds thr, collecting layer c->layer. */
static int run_pass(const hc_model *m, const hc_calib_opts *o, const float *thr, const int32_t *toks, int n_win,
                    int ctx_len, int bos, collector *c, char *err, size_t errlen)
{
    hc_sparse_params sp = { .criterion = o->criterion, .layer_thr = thr, .observe = observe, .observe_user = c };
    hc_sparse *s = hc_sparse_new(m, &sp, err, errlen);
    if (!s) return -1;
    hc_ctx_params cp = { .n_ctx = ctx_len, .n_batch = ctx_len, .n_threads = o->n_threads };
    hc_sparse_attach(s, &cp);
    hc_ctx *ctx = hc_ctx_new(m, &cp, err, errlen);
    int32_t *win = malloc(sizeof *win * (size_t)ctx_len);
    int rc = ctx && win ? 0 : -1;
    if (ctx && !win) snprintf(err, errlen, "%s: out of memory", o->model);
    c->n = 0;
    for (int w = 0; w < n_win && rc == 0; w++) {
        memcpy(win, toks + (size_t)w * ctx_len, sizeof *win * (size_t)ctx_len);
        win[0] = bos;
        if (hc_eval(ctx, win, ctx_len, 0, NULL, HC_LOGITS_NONE)) {
            snprintf(err, errlen, "%s: window %d: %s", o->corpus, w, hc_ctx_error(ctx));
            rc = -1;
        }
    }
    if (rc == 0 && (c->bad || c->n != c->cap)) {
        snprintf(err, errlen, "%s: layer %d: %s", o->model, c->layer,
                 c->bad ? "a criterion value is not finite" : "the sparse FFN did not report every token");
        rc = -1;
    }
    free(win);
    hc_ctx_free(ctx);
    hc_sparse_free(s);
    return rc;
}

/* The copy of the model with the calibration keys, atomically. */
static int write_model(const hc_model *m, const hc_calib_opts *o, const float *thr, char *err, size_t errlen)
{
    const gguf_file *f = m->file;
    gguf_writer *w = gguf_writer_new(f->variant);
    if (!w) {
        snprintf(err, errlen, "%s: out of memory", o->output);
        return -1;
    }
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_set_kv(w, &f->kv[i]);
    gguf_set_str(w, HC_KEY_SPARSE_CRITERION, hc_sparse_criterion_name(o->criterion));
    gguf_set_arr(w, HC_KEY_SPARSE_THRESHOLDS, GGUF_TYPE_FLOAT32, thr, (uint64_t)m->hp.n_layer);
    gguf_set_f32(w, HC_KEY_SPARSE_TARGET, (float)o->target);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    int rc = gguf_writer_write(w, o->output, err, errlen);
    gguf_writer_free(w);
    return rc;
}

/* The corpus as hc-run --perplexity tokenizes it; *n_win windows of ctx_len. */
static int32_t *corpus_tokens(const hc_model *m, const hc_tokenizer *tok, const hc_calib_opts *o, int ctx_len,
                              int *n_win, char *err, size_t errlen)
{
    size_t len;
    char *text = hc_read_file(o->corpus, &len, err, errlen);
    if (!text) return NULL;
    int n = hc_tokenize(tok, text, len, 1, 0, NULL, 0);
    int32_t *t = n > 0 ? malloc(sizeof *t * (size_t)n) : NULL;
    if (!t || hc_tokenize(tok, text, len, 1, 0, t, n) != n) {
        snprintf(err, errlen, "%s: cannot tokenize: %s", o->corpus, hc_tokenize_error());
        free(t);
        t = NULL;
    } else if ((*n_win = n / ctx_len) < 1) {
        snprintf(err, errlen, "%s: %d tokens, need at least %d (one window of -c)", o->corpus, n, ctx_len);
        free(t);
        t = NULL;
    } else if ((uint64_t)*n_win * (uint64_t)ctx_len * (uint64_t)m->hp.n_ff * (uint64_t)(o->global ? m->hp.n_layer : 1) >
               MAX_VALUES) {
        snprintf(err, errlen, "%s: %d windows of %d tokens x %d neurons is more than %llu values per layer; use a "
                 "shorter corpus", o->corpus, *n_win, ctx_len, m->hp.n_ff, (unsigned long long)MAX_VALUES);
        free(t);
        t = NULL;
    }
    free(text);
    return t;
}

/* Thresholds of every layer into out[] (thr is the working copy). */
static int calibrate_layers(const hc_model *m, const hc_calib_opts *o, const int32_t *toks, int n_win, int ctx_len,
                            int bos, hc_calib_layer *out, char *err, size_t errlen)
{
    int L = m->hp.n_layer, passes = o->global ? 1 : L;
    float *thr = calloc((size_t)L, sizeof *thr);
    collector c = { .cap = (uint64_t)n_win * (uint64_t)ctx_len * (uint64_t)m->hp.n_ff * (uint64_t)(o->global ? L : 1) };
    c.vals = malloc(sizeof(float) * c.cap);
    int rc = thr && c.vals ? 0 : -1;
    if (rc) snprintf(err, errlen, "%s: out of memory for %llu criterion values", o->model, (unsigned long long)c.cap);
    for (int l = 0; l < passes && rc == 0; l++) {
        c.layer = o->global ? -1 : l;
        if ((rc = run_pass(m, o, thr, toks, n_win, ctx_len, bos, &c, err, errlen))) break;
        uint64_t k = (uint64_t)floor(o->target * (double)c.n);
        float t = hc_select_kth(c.vals, c.n, k);
        uint64_t skip = 0;
        for (uint64_t i = 0; i < c.n; i++) skip += c.vals[i] < t || c.vals[i] == 0.0f;
        for (int j = o->global ? 0 : l; j < (o->global ? L : l + 1); j++) {
            out[j] = (hc_calib_layer){ .threshold = t, .values = c.n, .skipped = skip };
            thr[j] = t;
        }
    }
    if (rc == 0) rc = write_model(m, o, thr, err, errlen);
    free(c.vals);
    free(thr);
    return rc;
}

int hc_calibrate(const hc_calib_opts *o, hc_calib_layer **layers, int *n_layer, char *err, size_t errlen)
{
    *layers = NULL;
    hc_model *m = hc_model_load(o->model, err, errlen);
    if (!m) return -1;
    hc_tokenizer *tok = hc_model_tokenizer(m, err, errlen);
    int32_t *toks = NULL;
    int rc = -1, n_win = 0;
    int ctx_len = hc_window_len(&m->hp, o->ctx);
    if (!tok) {
        /* err is set */
    } else if (hc_tokenizer_bos(tok) < 0) {
        snprintf(err, errlen, "%s: the vocabulary has no BOS token", o->model);
    } else if (ctx_len < 2 || ctx_len > m->hp.n_ctx_train) {
        snprintf(err, errlen, "%s: -c %d must be in [2, %d] (the model's context length)", o->model, ctx_len,
                 m->hp.n_ctx_train);
    } else if ((toks = corpus_tokens(m, tok, o, ctx_len, &n_win, err, errlen))) {
        *layers = calloc((size_t)m->hp.n_layer, sizeof **layers);
        *n_layer = m->hp.n_layer;
        if (!*layers) snprintf(err, errlen, "%s: out of memory", o->model);
        else rc = calibrate_layers(m, o, toks, n_win, ctx_len, hc_tokenizer_bos(tok), *layers, err, errlen);
    }
    if (rc) {
        free(*layers);
        *layers = NULL;
    }
    free(toks);
    hc_tokenizer_free(tok);
    hc_model_free(m);
    return rc;
}

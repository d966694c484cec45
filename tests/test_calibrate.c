/* hc-profile calibrate (profiler/calibrate.c): the k-th smallest against a
 * sort, the thresholds against a sort of the criterion values the sparse FFN
 * computes with them, thread-count independence, and the refusals of
 * malformed calibration keys. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "cli.h"
#include "gguf.h"
#include "harness.h"
#include "model.h"
#include "sparse.h"
#include "tokenizer.h"

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void test_select_kth_vs_sort(void)
{
    uint64_t seed = 7;
    for (int trial = 0; trial < 40; trial++) {
        size_t n = 1 + (size_t)(hc_splitmix64(&seed) % (trial < 20 ? 50 : 20000));
        float *v = malloc(n * sizeof *v), *s = malloc(n * sizeof *s);
        CHECK(v && s);
        for (size_t i = 0; i < n; i++) {
            uint64_t r = hc_splitmix64(&seed);
            /* zeros, ties (few distinct values), subnormals and a wide range */
            v[i] = r % 5 == 0 ? 0.0f : r % 5 == 1 ? (float)(r % 3) : r % 5 == 2 ? 1e-41f * (float)(r % 7)
                                                                      : (float)ldexp((double)(r >> 40), -(int)(r % 60));
            s[i] = v[i];
        }
        qsort(s, n, sizeof *s, cmp_float);
        for (size_t k = 0; k < n; k += n < 60 ? 1 : n / 37) {
            float got = hc_select_kth(v, n, k);
            CHECKF(got == s[k], "n %zu k %zu: %g, sorted %g", n, k, (double)got, (double)s[k]);
        }
        free(v);
        free(s);
    }
}

/* Every layer's criterion values over the corpus windows, as hc-run
 * --perplexity -c ctx cuts them, with the sparse FFN at thresholds thr. */
typedef struct {
    float *vals[8];
    size_t n[8], cap;
} all_layers;

static void keep_all(void *user, int layer, const float *crit, int B, int n_ff)
{
    all_layers *a = user;
    size_t n = (size_t)B * (size_t)n_ff;
    if (layer >= 8 || a->n[layer] + n > a->cap) return;
    memcpy(a->vals[layer] + a->n[layer], crit, n * sizeof *crit);
    a->n[layer] += n;
}

static const char *corpus(void)
{
    const char *full = th_fixture("tinystories-calib.txt");
    if (!full) return NULL;
    size_t len;
    unsigned char *text = th_read(full, &len);
    const char *path = th_tmp("corpus.txt");
    if (!text || th_write(path, text, len < 12000 ? len : 12000)) path = NULL;
    free(text);
    return path;
}

/* A pass of the sparse FFN with the file's thresholds; 0 or -1. */
static int oracle_pass(const char *path, int criterion, int ctx_len, const char *text_path, all_layers *a, float *thr,
                       hc_sparse_stats *st)
{
    char err[512];
    hc_model *m = hc_model_load(path, err, sizeof err);
    hc_tokenizer *tok = m ? hc_tokenizer_load(m->file, err, sizeof err) : NULL;
    int kt = m ? gguf_find_kv(m->file, HC_KEY_SPARSE_THRESHOLDS) : -1;
    if (!tok || kt < 0 || m->hp.n_layer > 8) return -1;
    for (int l = 0; l < m->hp.n_layer; l++) thr[l] = (float)gguf_kv_num(&m->file->kv[kt], (uint64_t)l);
    size_t len;
    unsigned char *text = th_read(text_path, &len);
    int n = hc_tokenize(tok, (const char *)text, len, 1, 0, NULL, 0);
    int32_t *t = malloc(sizeof *t * (size_t)n);
    hc_tokenize(tok, (const char *)text, len, 1, 0, t, n);
    int n_win = n / ctx_len;
    a->cap = (size_t)n_win * (size_t)ctx_len * (size_t)m->hp.n_ff;
    for (int l = 0; l < m->hp.n_layer; l++) a->vals[l] = malloc(a->cap * sizeof(float));
    hc_sparse_params sp = { .criterion = criterion, .layer_thr = thr, .observe = keep_all, .observe_user = a };
    hc_sparse *s = hc_sparse_new(m, &sp, err, sizeof err);
    hc_ctx_params cp = { .n_ctx = ctx_len, .n_batch = 50, .n_threads = 2 };
    hc_sparse_attach(s, &cp);
    hc_ctx *ctx = hc_ctx_new(m, &cp, err, sizeof err);
    for (int w = 0; w < n_win; w++) {
        t[(size_t)w * ctx_len] = hc_tokenizer_bos(tok);
        hc_eval(ctx, t + (size_t)w * ctx_len, ctx_len, 0, NULL, HC_LOGITS_NONE);
    }
    for (int l = 0; l < m->hp.n_layer; l++) st[l] = hc_sparse_get_stats(s, l);
    int L = m->hp.n_layer;
    hc_ctx_free(ctx);
    hc_sparse_free(s);
    free(t);
    free(text);
    hc_tokenizer_free(tok);
    hc_model_free(m);
    return L;
}

static void check_criterion(int criterion, double S)
{
    const char *model = th_fixture("stories260K.gguf"), *text = corpus();
    if (!model || !text) SKIP("no fixtures");
    const char *name = hc_sparse_criterion_name(criterion);
    char out[2][256], err[512];
    hc_calib_layer *ls[2];
    int L = 0;
    for (int i = 0; i < 2; i++) {
        snprintf(out[i], sizeof out[i], "%s", th_tmp(i ? "t2.gguf" : "t1.gguf"));
        hc_calib_opts o = { .model = model, .corpus = text, .output = out[i], .target = S, .criterion = criterion,
                            .ctx = 128, .n_threads = i + 1 };
        CHECKF(hc_calibrate(&o, &ls[i], &L, err, sizeof err) == 0, "%s", err);
    }
    size_t la, lb;
    unsigned char *a = th_read(out[0], &la), *b = th_read(out[1], &lb);
    CHECKF(a && b && la == lb && memcmp(a, b, la) == 0, "%s: -t 1 and -t 2 files differ", name);
    free(a);
    free(b);

    all_layers al = { 0 };
    float thr[8];
    hc_sparse_stats st[8];
    CHECK(oracle_pass(out[0], criterion, 128, text, &al, thr, st) == L);
    for (int l = 0; l < L; l++) {
        size_t n = al.n[l], k = (size_t)floor(S * (double)n), skip = 0;
        CHECKF(n == ls[0][l].values, "%s layer %d: %zu values, calibrate saw %llu", name, l, n,
               (unsigned long long)ls[0][l].values);
        for (size_t i = 0; i < n; i++) skip += al.vals[l][i] < thr[l] || al.vals[l][i] == 0.0f;
        qsort(al.vals[l], n, sizeof(float), cmp_float);
        CHECKF(thr[l] == al.vals[l][k] && thr[l] == ls[0][l].threshold, "%s layer %d: threshold %.9g, sorted[%zu] %.9g",
               name, l, (double)thr[l], k, (double)al.vals[l][k]);
        /* the fraction skipped at run time: k up to the ties at the threshold
         * (values below it are skipped, and zeros) */
        size_t ties = 0;
        for (size_t i = 0; i < n; i++) ties += al.vals[l][i] == thr[l];
        int near_k = thr[l] > 0 ? skip <= k && k < skip + ties : skip == ties && k < ties;
        uint64_t skipped = (uint64_t)n - st[l].computed;
        CHECKF(skip == ls[0][l].skipped && near_k && skipped == skip,
               "%s layer %d: skipped %zu (run %llu), k %zu, ties %zu", name, l, skip, (unsigned long long)skipped, k,
               ties);
        free(al.vals[l]);
    }
    free(ls[0]);
    free(ls[1]);
}

static void test_contribution_quantile(void) { check_criterion(HC_CRIT_CONTRIBUTION, 0.37); }
static void test_gate_quantile(void) { check_criterion(HC_CRIT_GATE, 0.5); }

/* A copy of t1.gguf with the calibration keys changed; hc-run must refuse it. */
static void check_refused(const char *key, int kind, const char *pattern)
{
    char err[512];
    gguf_file *f = gguf_open(th_tmp("t1.gguf"), err, sizeof err);
    CHECKF(f, "%s", err);
    gguf_writer *w = gguf_writer_new(f->variant);
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_set_kv(w, &f->kv[i]);
    float two[2] = { 0.1f, 0.2f }, neg[5] = { 0.1f, -1, 0, 0, 0 };
    if (kind == 0) gguf_set_str(w, key, "silu");
    else if (kind == 1) gguf_set_arr(w, key, GGUF_TYPE_FLOAT32, two, 2);
    else if (kind == 2) gguf_set_arr(w, key, GGUF_TYPE_FLOAT32, neg, 5);
    else gguf_remove_key(w, key);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        gguf_add_tensor(w, f->tensors[i].name, f->tensors[i].type, f->tensors[i].n_dims, f->tensors[i].ne,
                        f->tensors[i].data);
    const char *bad = th_tmp("bad.gguf");
    CHECKF(gguf_writer_write(w, bad, err, sizeof err) == 0, "%s", err);
    gguf_writer_free(w);
    gguf_close(f);
    CHECKF(th_sh("%s -m %s -p Once -n 2", th_bin("hc-run"), bad) == 1 && strstr(th_last_err(), pattern) &&
               strstr(th_last_err(), "bad.gguf"), "%s: %s", key, th_last_err());
}

static void test_bad_keys_refused(void)
{
    if (!th_fixture("stories260K.gguf")) SKIP("no fixtures");
    check_refused(HC_KEY_SPARSE_CRITERION, 0, "neither gate nor contribution");
    check_refused(HC_KEY_SPARSE_THRESHOLDS, 1, "array of 5 float32");
    check_refused(HC_KEY_SPARSE_THRESHOLDS, 2, "[1] = -1 is not");
    check_refused(HC_KEY_SPARSE_THRESHOLDS, 3, "go together");
}

int main(void)
{
    RUN(test_select_kth_vs_sort);
    RUN(test_contribution_quantile);
    RUN(test_gate_quantile);
    RUN(test_bad_keys_refused);
    return th_done();
}

/* hc-profile predictors: threshold calibration, training on a synthetic ReLU
 * model with a planted hot set (recall, sparsity), the PWRI output, the sparse
 * model's perplexity under hc-run, determinism, and stories260K (SiLU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_types.h"
#include "gguf.h"
#include "harness.h"
#include "predictors.h"

static char err[512];
static char synth[512], corpus[512], sparse[512];
static int have_sparse;

/* Plain words, deterministic: text the synthetic model tokenizes byte by byte. */
static void write_corpus(const char *path, int words)
{
    static const char *w[] = { "the", "cat", "sat", "on", "a", "mat", "and", "looked", "at", "big", "red", "ball",
                               "she", "was", "happy", "day", "dog", "ran", "fast", "home" };
    FILE *f = fopen(path, "w");
    uint32_t s = 12345;
    for (int i = 0; i < words; i++) {
        s = s * 1664525u + 1013904223u;
        fprintf(f, "%s%s", w[(s >> 16) % 20], i % 12 == 11 ? ".\n" : " ");
    }
    fclose(f);
}

static void setup(void)
{
    snprintf(synth, sizeof synth, "%s", th_tmp("synth.gguf"));
    snprintf(corpus, sizeof corpus, "%s", th_tmp("corpus.txt"));
    snprintf(sparse, sizeof sparse, "%s", th_tmp("synth.sparse.gguf"));
    write_corpus(corpus, 6000);
    if (th_sh("%s synth -o '%s' --dim 64 --n-ff 256 --layers 2 --act relu --hot-fraction 0.1 --hot-skew 1 --seed 3",
              th_bin("hc-convert"), synth) != 0) {
        fprintf(stderr, "hc-convert synth failed: %s\n", th_last_err());
        exit(2);
    }
}

/* Logits z = x (E = r = F = 1, unit weights, x > 0): the threshold is exact. */
static void test_calibrate_exact(void)
{
    float x[100], w1 = 1, w2 = 1;
    uint8_t y[100];
    for (int i = 0; i < 100; i++) { x[i] = (float)(100 - i); y[i] = 1; }
    hc_pred_set s = { .n = 100, .n_embd = 1, .n_ff = 1, .x = x, .y = y };
    hc_pred_net net = { .r = 1, .n_embd = 1, .n_ff = 1, .w1 = &w1, .w2 = &w2 };
    float t = 0;
    CHECK(hc_pred_calibrate(NULL, &net, &s, 0.9, &t) == 0);
    CHECKF(t == 11.0f, "t = %g", (double)t);            /* may miss 1..10 */
    hc_pred_counts c;
    CHECK(hc_pred_evaluate(NULL, &net, &s, t, &c) == 0);
    CHECK(c.tp == 90 && c.fn == 10 && c.fp == 0 && c.tn == 0);
    for (int i = 0; i < 100; i += 2) y[i] = 0;           /* the even x are inactive */
    CHECK(hc_pred_calibrate(NULL, &net, &s, 1.0, &t) == 0 && t == 1.0f);
    CHECK(hc_pred_evaluate(NULL, &net, &s, 1.5f, &c) == 0 && c.tp == 49 && c.fn == 1 && c.fp == 50 && c.tn == 0);
    memset(y, 0, sizeof y);
    CHECK(hc_pred_calibrate(NULL, &net, &s, 0.99, &t) == 1);   /* nothing active */
}

/* The bar: >= 0.99 recall on held-out test tokens (neither trained on nor used
 * for the threshold) at a predicted sparsity close to the true one. */
static void test_synth_relu(void)
{
    hc_pred_opts o = { .model = synth, .corpus = corpus, .output = sparse, .svg = th_tmp("synth.svg"),
                       .recall = 0.995f, .ctx = 128, .n_threads = 2, .seed = 1, .pred_type = GGML_TYPE_F32,
                       .epochs = 20 };
    hc_pred_report rep;
    int rc = hc_predictors_run(&o, &rep, err, sizeof err);
    CHECKF(rc == 0, "%s", err);
    have_sparse = 1;
    CHECK(rep.n_layer == 2 && rep.n_test > 1000 && rep.n_calib > 1000 && rep.n_train > 5 * rep.n_test);
    CHECK(rep.global_threshold == 1.0f || rep.global_threshold == -1.0f);
    for (int l = 0; l < rep.n_layer; l++) {
        const hc_pred_layer *y = &rep.layers[l];
        fprintf(stderr, "layer %d: r %d recall %.4f precision %.4f sparsity %.4f (true %.4f)\n", l, y->rank,
                y->recall, y->precision, y->pred_sparsity, y->true_sparsity);
        CHECKF(y->recall >= 0.99, "layer %d recall %.4f", l, y->recall);
        CHECKF(y->true_sparsity > 0.6, "layer %d true sparsity %.4f: no planted sparsity", l, y->true_sparsity);
        CHECKF(y->pred_sparsity > y->true_sparsity - 0.05, "layer %d predicted sparsity %.4f, true %.4f", l,
               y->pred_sparsity, y->true_sparsity);
        CHECK(y->rank == 16 && y->params == 16u * (64 + 256) && y->bytes == 4 * y->params);
    }
    size_t n;
    unsigned char *svg = th_read(th_tmp("synth.svg"), &n);
    CHECK(svg && n > 100 && strstr((char *)svg, "</svg>"));
    /* the plot names its input, labels its axes with their units, has a legend of
     * line swatches, and round tick values (at most two significant digits) */
    const char *doc = (const char *)svg;
    CHECK(doc && strstr(doc, synth) && strstr(doc, ">layer</text>") && strstr(doc, "fraction (0 to 1)") &&
          strstr(doc, "parameters / FFN parameters"));
    int swatches = 0, ticks = 0, round = 1;
    for (const char *q = doc; q && (q = strstr(q, "<line ")); q++) swatches++;
    for (const char *q = doc; q && (q = strstr(q, "text-anchor='end' font-size='10'>")); q++) {
        double v = atof(q + strlen("text-anchor='end' font-size='10'>"));
        double m = v > 0 ? v / pow(10, floor(log10(v))) : 0;   /* mantissa in [1, 10) */
        ticks++;
        if (fabs(m * 10 - (double)lround(m * 10)) > 1e-6) round = 0;
    }
    CHECKF(swatches == 4 && ticks == 10 && round, "%d swatches, %d ticks, round %d", swatches, ticks, round);
    free(svg);
    free(rep.layers);
}

/* PWRI, every input KV, fc1/fc2 shapes, ffn_down_t = transpose of ffn_down,
 * every other tensor byte-identical. */
static void test_pwri_file(void)
{
    if (!have_sparse) SKIP("no sparse model (test_synth_relu failed)");
    gguf_file *in = gguf_open(synth, err, sizeof err), *out = gguf_open(sparse, err, sizeof err);
    CHECKF(in && out, "%s", err);
    CHECK(in->variant == GGUF_VARIANT_GGUF && out->variant == GGUF_VARIANT_PWRI);
    float thr;
    CHECK(gguf_get_f32(out, "powerinfer.sparse_threshold", &thr) == 0 && fabsf(thr) == 1.0f);
    for (uint64_t i = 0; i < in->n_kv; i++) {
        int k = gguf_find_kv(out, in->kv[i].key);
        CHECKF(k >= 0, "missing KV %s", in->kv[i].key);
        CHECK(out->kv[k].type == in->kv[i].type && out->kv[k].n == in->kv[i].n);
    }
    CHECK(out->n_tensors == in->n_tensors + 4);
    for (uint64_t i = 0; i < in->n_tensors; i++) {
        const gguf_tensor *t = &in->tensors[i];
        int l;
        if (sscanf(t->name, "blk.%d.ffn_down.weight", &l) == 1 && strstr(t->name, "ffn_down.weight")) {
            char nm[64];
            snprintf(nm, sizeof nm, "blk.%d.ffn_down_t.weight", l);
            const gguf_tensor *d = gguf_get_tensor(out, nm);
            CHECKF(d, "missing %s", nm);
            CHECK(!gguf_get_tensor(out, t->name));
            CHECK(d->type == GGML_TYPE_F32 && d->ne[0] == t->ne[1] && d->ne[1] == t->ne[0]);
            const float *a = t->data, *b = d->data;
            for (int64_t r = 0; r < t->ne[1]; r++)
                for (int64_t c = 0; c < t->ne[0]; c++) CHECK(b[c * t->ne[1] + r] == a[r * t->ne[0] + c]);
            continue;
        }
        const gguf_tensor *o = gguf_get_tensor(out, t->name);
        CHECKF(o && o->type == t->type && o->nbytes == t->nbytes && !memcmp(o->data, t->data, t->nbytes),
               "tensor %s differs", t->name);
    }
    for (int l = 0; l < 2; l++) {
        char n1[64], n2[64];
        snprintf(n1, sizeof n1, "blk.%d.fc1.weight", l);
        snprintf(n2, sizeof n2, "blk.%d.fc2.weight", l);
        const gguf_tensor *a = gguf_get_tensor(out, n1), *b = gguf_get_tensor(out, n2);
        CHECK(a && b && a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32);
        CHECK(a->n_dims == 2 && a->ne[0] == 64 && a->ne[1] == 16 && b->ne[0] == 16 && b->ne[1] == 256);
    }
    gguf_close(in);
    gguf_close(out);
}

/* hc-run's perplexity (its last stdout line "perplexity: X"). */
static int ppl(const char *model, const char *extra, double *out)
{
    if (th_sh("%s -m '%s' --perplexity '%s' -c 128 -t 2 %s", th_bin("hc-run"), model, corpus, extra) != 0) return -1;
    const char *s = strstr(th_last_out(), "perplexity: ");
    return s && sscanf(s, "perplexity: %lf", out) == 1 ? 0 : -1;
}

/* The last-position logits of a prompt (hc-run --logits), n_vocab = 512. */
static int logits(const char *model, const char *extra, const char *prompt, double *out)
{
    if (th_sh("%s -m '%s' -p '%s' --logits -n 0 -t 2 %s", th_bin("hc-run"), model, prompt, extra) != 0) return -1;
    const char *s = th_last_out();
    for (int i = 0; i < 512; i++) {
        char *end;
        out[i] = strtod(s, &end);
        if (end == s) return -1;
        s = end;
    }
    return 0;
}

/* hc-run with the predictors (its sparse path reads powerinfer.sparse_threshold)
 * against the dense model: perplexity within 2%. The synthetic model's FFN
 * moves the perplexity little (skipping every neuron changes it by well under
 * 2%), so that bar cannot fail here; the logits can: the predictors must lose
 * less than 5% of the FFN's effect on them (|dense - predicted| against
 * |dense - no FFN neuron|). */
static void test_sparse_quality(void)
{
    if (!have_sparse) SKIP("no sparse model (test_synth_relu failed)");
    double dense, pred;
    CHECKF(ppl(synth, "", &dense) == 0, "dense: %s", th_last_err());
    CHECKF(ppl(sparse, "", &pred) == 0, "sparse: %s", th_last_err());
    CHECKF(strstr(th_last_err(), "neurons chosen by the predictor"), "hc-run did not use the predictors: %s",
           th_last_err());
    fprintf(stderr, "perplexity: dense %.4f, predictors %.4f\n", dense, pred);
    CHECK(fabs(pred / dense - 1) < 0.02);
    static const char *prompts[] = { "the cat sat on a mat", "she was happy and the dog ran home fast",
                                     "big red ball" };
    static double ld[512], lp[512], ln[512];
    double e_pred = 0, e_none = 0;
    for (int k = 0; k < 3; k++) {
        CHECKF(logits(synth, "", prompts[k], ld) == 0, "%s", th_last_err());
        CHECKF(logits(sparse, "", prompts[k], lp) == 0, "%s", th_last_err());
        CHECKF(logits(sparse, "--sparse-threshold 1e30", prompts[k], ln) == 0, "%s", th_last_err());
        for (int i = 0; i < 512; i++) {
            e_pred += (lp[i] - ld[i]) * (lp[i] - ld[i]);
            e_none += (ln[i] - ld[i]) * (ln[i] - ld[i]);
        }
    }
    fprintf(stderr, "logit error: predictors %.3g, no FFN neuron %.3g\n", sqrt(e_pred), sqrt(e_none));
    CHECK(e_none > 0 && sqrt(e_pred) < 0.05 * sqrt(e_none));
}

/* The CLI with the same seed at -t 2 and -t 1: byte-identical (the
 * products' bits do not follow the thread count); another seed differs. */
static void test_deterministic(void)
{
    char a[512], b[512], c[512];
    snprintf(a, sizeof a, "%s", th_tmp("d1.gguf"));
    snprintf(b, sizeof b, "%s", th_tmp("d2.gguf"));
    snprintf(c, sizeof c, "%s", th_tmp("d3.gguf"));
    const char *args = "-c 128 --tokens 8000 --epochs 2";
    CHECKF(th_sh("%s predictors -m '%s' -f '%s' -o '%s' %s -t 2", th_bin("hc-profile"), synth, corpus, a, args) == 0,
           "%s", th_last_err());
    CHECK(strstr(th_last_out(), "layer  rank  recall"));
    CHECK(th_sh("%s predictors -m '%s' -f '%s' -o '%s' %s -t 1", th_bin("hc-profile"), synth, corpus, b, args) == 0);
    CHECK(th_sh("%s predictors -m '%s' -f '%s' -o '%s' %s -t 2 --seed 2", th_bin("hc-profile"), synth, corpus, c,
                args) == 0);
    size_t na, nb, nc;
    unsigned char *da = th_read(a, &na), *db = th_read(b, &nb), *dc = th_read(c, &nc);
    CHECK(da && db && dc);
    CHECK(na == nb && !memcmp(da, db, na));
    CHECK(na == nc && memcmp(da, dc, na) != 0);
    free(da);
    free(db);
    free(dc);
}

/* SiLU: refused without --act-threshold; with it, runs end to end and reports
 * what it measured; hc-run loads the file. */
static void test_stories260k(void)
{
    const char *m = th_fixture("stories260K.gguf"), *text = th_fixture("tinystories-calib.txt");
    if (!m) SKIP("no fixtures");
    char out[512];
    snprintf(out, sizeof out, "%s", th_tmp("st.sparse.gguf"));
    hc_pred_opts o = { .model = m, .corpus = text, .output = out, .ctx = 256, .max_tokens = 12000, .n_threads = 2,
                       .seed = 1, .pred_type = GGML_TYPE_F16 };
    hc_pred_report rep;
    /* SiLU is never exactly 0: refused until "active" is defined */
    CHECK(hc_predictors_run(&o, &rep, err, sizeof err) == -1 && strstr(err, "predictors need a ReLU model") &&
          strstr(err, "SiLU") && strstr(err, "--act-threshold"));
    o.act_threshold_set = 1;
    o.act_threshold = 0.01f;
    int rc = hc_predictors_run(&o, &rep, err, sizeof err);
    CHECKF(rc == 0, "%s", err);
    CHECK(rep.act_threshold == 0.01f && rep.n_layer == 5);
    for (int l = 0; l < rep.n_layer; l++) {
        const hc_pred_layer *y = &rep.layers[l];
        fprintf(stderr, "stories260K layer %d: recall %.4f precision %.4f sparsity %.4f (true %.4f)\n", l, y->recall,
                y->precision, y->pred_sparsity, y->true_sparsity);
        CHECK(y->recall >= 0 && y->recall <= 1 && y->precision > 0 && y->bytes == 2 * y->params);
        CHECK(y->pred_sparsity <= y->true_sparsity + (1 - y->recall) + 1e-9);
    }
    gguf_file *f = gguf_open(out, err, sizeof err);
    CHECKF(f, "%s", err);
    int k = gguf_find_kv(f, "hotcold.predictor.recall");
    CHECK(k >= 0 && f->kv[k].n == 5 && (float)gguf_kv_num(&f->kv[k], 0) == (float)rep.layers[0].recall);
    gguf_close(f);
    CHECKF(th_sh("%s -m '%s' -p 'Once upon a time' -n 8 --temp 0 -t 2 -v", th_bin("hc-run"), out) == 0, "%s",
           th_last_err());
    CHECK(strstr(th_last_err(), "recall"));
    free(rep.layers);
}

int main(void)
{
    setup();
    RUN(test_calibrate_exact);
    RUN(test_synth_relu);
    RUN(test_pwri_file);
    RUN(test_sparse_quality);
    RUN(test_deterministic);
    RUN(test_stories260k);
    return th_done();
}

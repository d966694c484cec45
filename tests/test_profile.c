/* hc-profile: merge, show, profiling runs (windows, shards, threads), bad inputs,
 * and the planted hot set of a synthetic model. */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model.h"
#include "profile.h"
#include "stats.h"
#include "tokenizer.h"

static char err[512];
static char hp[512];   /* the program */

static hc_stats *make_stats(uint32_t n_layer, uint32_t n_ff, uint64_t n_tokens, int seed)
{
    hc_stats *s = hc_stats_new(n_layer, n_ff);
    strcpy(s->arch, "llama");
    strcpy(s->activation, "relu");
    snprintf(s->corpus, sizeof s->corpus, "corpus%d", seed);
    s->n_embd = 16;
    s->ctx = 64;
    s->n_tokens = n_tokens;
    s->ffn_hash = 0x1234;
    for (size_t i = 0; i < (size_t)n_layer * n_ff; i++) {
        s->count[i] = (int64_t)((i * 7 + (size_t)seed * 13) % (n_tokens + 1));
        s->sum[i] = 0.25 * (double)s->count[i];
    }
    return s;
}

static void write_or_die(const hc_stats *s, const char *path)
{
    if (hc_stats_write(s, path, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); exit(2); }
}

/* ------------------------------------------------------------ merge */

static void test_merge_adds(void)
{
    hc_stats *a = make_stats(2, 5, 100, 1), *b = make_stats(2, 5, 50, 2);
    char pa[512], pb[512], po[512];
    snprintf(pa, sizeof pa, "%s", th_tmp("ma.gguf"));
    snprintf(pb, sizeof pb, "%s", th_tmp("mb.gguf"));
    snprintf(po, sizeof po, "%s", th_tmp("mo.gguf"));
    write_or_die(a, pa);
    write_or_die(b, pb);
    CHECKF(th_sh("%s merge '%s' '%s' -o '%s'", hp, pa, pb, po) == 0, "%s", th_last_err());
    hc_stats *o = hc_stats_read(po, err, sizeof err);
    CHECKF(o, "%s", err);
    CHECK(o->n_tokens == 150 && o->ffn_hash == 0x1234 && o->ctx == 64 && o->n_embd == 16);
    CHECK(strcmp(o->corpus, "corpus1 + corpus2") == 0);
    for (size_t i = 0; i < 10; i++) CHECK(o->count[i] == a->count[i] + b->count[i] && o->sum[i] == a->sum[i] + b->sum[i]);
    hc_stats_free(o);
    hc_stats_free(a);
    hc_stats_free(b);
}

static void test_merge_refuses(void)
{
    static const char *const fields[] = { "threshold", "activation", "n_ff", "ffn_hash", "ctx", "arch", "n_layer" };
    char pa[512], pb[512], po[512];
    snprintf(pa, sizeof pa, "%s", th_tmp("ra.gguf"));
    snprintf(pb, sizeof pb, "%s", th_tmp("rb.gguf"));
    snprintf(po, sizeof po, "%s", th_tmp("ro.gguf"));
    hc_stats *a = make_stats(2, 6, 10, 1);
    write_or_die(a, pa);
    for (int k = 0; k < 7; k++) {
        hc_stats *b = make_stats(k == 6 ? 3 : 2, k == 2 ? 7 : 6, 10, 2);
        if (k == 0) b->threshold = 0.5f;
        if (k == 1) strcpy(b->activation, "silu");
        if (k == 3) b->ffn_hash = 0x9999;
        if (k == 4) b->ctx = 128;
        if (k == 5) strcpy(b->arch, "falcon");
        write_or_die(b, pb);
        hc_stats_free(b);
        CHECK(th_sh("%s merge '%s' '%s' -o '%s'", hp, pa, pb, po) == 1);
        const char *e = th_last_err();
        CHECKF(strncmp(e, "hc-profile: ", 12) == 0 && strstr(e, pb) && strstr(e, fields[k]), "%s: %s", fields[k], e);
        CHECK(th_sh("test -e '%s'", po) != 0);
    }
    /* a corrupt input names itself */
    th_write(pb, "GGUF", 4);
    CHECK(th_sh("%s merge '%s' '%s' -o '%s'", hp, pa, pb, po) == 1);
    CHECKF(strstr(th_last_err(), pb), "%s", th_last_err());
    CHECK(th_sh("test -e '%s'", po) != 0);
    hc_stats_free(a);
}

/* ------------------------------------------------------------ show */

static void test_show_facts(void)
{
    /* one layer of 10 neurons over 100 tokens: counts 50 30 10 5 5 0 ...
     * 80% of the 100 activations: 2 neurons, 90%: 3, 99%: 5; mean rate 0.1 */
    hc_stats *s = make_stats(2, 10, 100, 0);
    static const int64_t c[10] = { 0, 5, 50, 0, 10, 0, 30, 5, 0, 0 };
    for (int j = 0; j < 10; j++) s->count[j] = c[j], s->count[10 + j] = 100;
    char p[512], svg[512];
    snprintf(p, sizeof p, "%s", th_tmp("show.gguf"));
    snprintf(svg, sizeof svg, "%s", th_tmp("show.svg"));
    write_or_die(s, p);
    hc_stats_free(s);
    CHECKF(th_sh("%s show '%s' --json --svg '%s'", hp, p, svg) == 0, "%s", th_last_err());
    cJSON *j = cJSON_Parse(th_last_out());
    CHECK(j);
    cJSON *l0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "layers"), 0);
    cJSON *l1 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "layers"), 1);
    CHECK(cJSON_GetObjectItem(j, "n_tokens")->valuedouble == 100);
    CHECK(cJSON_GetObjectItem(l0, "neurons")->valuedouble == 10);
    CHECK(fabs(cJSON_GetObjectItem(l0, "mean_rate")->valuedouble - 0.1) < 1e-12);
    CHECK(cJSON_GetObjectItem(l0, "cover80")->valuedouble == 0.2);
    CHECK(cJSON_GetObjectItem(l0, "cover90")->valuedouble == 0.3);
    CHECK(cJSON_GetObjectItem(l0, "cover99")->valuedouble == 0.5);
    CHECK(cJSON_GetObjectItem(l1, "mean_rate")->valuedouble == 1.0);   /* every neuron always on */
    CHECK(cJSON_GetObjectItem(l1, "cover80")->valuedouble == 0.8);
    cJSON_Delete(j);
    /* the plot: one curve per layer, a complete document */
    char *doc = (char *)th_read(svg, NULL);
    CHECK(doc && strncmp(doc, "<svg ", 5) == 0 && strstr(doc, "</svg>\n"));
    /* it names its input and the units of both axes; ticks are plain numbers */
    CHECK(doc && strstr(doc, p) && strstr(doc, "share of tokens (log scale)") &&
          strstr(doc, "neuron rank, hottest first") && strstr(doc, ">0.1</text>") && !strstr(doc, ">1e"));
    int curves = 0;
    for (const char *q = doc; (q = strstr(q, "<polyline")); q++) curves++;
    CHECK(curves == 2);
    free(doc);
    /* the table */
    CHECK(th_sh("%s show '%s'", hp, p) == 0);
    CHECKF(strstr(th_last_out(), "    0       10     0.1000   0.2000   0.3000   0.5000"), "%s", th_last_out());
    CHECK(th_sh("%s show '%s/nope.gguf'", hp, th_tmpdir()) == 1);
}

/* ------------------------------------------------------------ profiling */

typedef struct { int64_t *count; int n_ff; float thr; } ref_counter;

static void ref_hook(void *user, int layer, int point, const float *x, int B, int n, int pos0)
{
    ref_counter *r = user;
    if (point != HC_HOOK_FFN_ACT) return;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < n; j++)
            if (pos0 + b > 0 && fabsf(x[(size_t)b * n + j]) > r->thr) r->count[(size_t)layer * n + j]++;
}

/* One window evaluated here through the runtime API, counted directly:
 * hc-profile -c 9 --tokens 8 must give the same counts. */
static void test_profile_one_window(void)
{
    const char *model = th_fixture("stories260K.gguf"), *corpus = th_fixture("tinystories-calib.txt");
    if (!model) SKIP("no fixtures");
    char out[512];
    snprintf(out, sizeof out, "%s", th_tmp("w.gguf"));
    CHECKF(th_sh("%s -m '%s' -f '%s' -o '%s' -c 9 --tokens 8 -t 2", hp, model, corpus, out) == 0, "%s", th_last_err());
    hc_stats *s = hc_stats_read(out, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK(s->n_tokens == 8 && s->ctx == 9 && strcmp(s->activation, "silu") == 0 && s->threshold == HC_SILU_THRESHOLD);

    hc_model *m = hc_model_load(model, err, sizeof err);
    hc_tokenizer *tok = hc_tokenizer_load(m->file, err, sizeof err);
    size_t len;
    char *text = (char *)th_read(corpus, &len);
    int32_t *ids = malloc((len + 16) * sizeof *ids);
    int n = hc_tokenize(tok, text, len, 0, 0, ids + 1, (int)len + 15);
    CHECK(n >= 8);
    ids[0] = hc_tokenizer_bos(tok);
    ref_counter r = { calloc((size_t)m->hp.n_layer * m->hp.n_ff, sizeof(int64_t)), m->hp.n_ff, HC_SILU_THRESHOLD };
    hc_ctx_params cp = { .n_ctx = 9, .n_batch = 4, .n_threads = 1,   /* other batching, same numbers */
                         .hook = ref_hook, .hook_user = &r };
    hc_ctx *ctx = hc_ctx_new(m, &cp, err, sizeof err);
    CHECK(hc_eval(ctx, ids, 9, 0, NULL, HC_LOGITS_NONE) == 0);
    int64_t total = 0;
    for (size_t i = 0; i < (size_t)m->hp.n_layer * m->hp.n_ff; i++) {
        CHECKF(s->count[i] == r.count[i], "neuron %zu: %lld vs %lld", i, (long long)s->count[i], (long long)r.count[i]);
        total += r.count[i];
    }
    CHECK(total > 0 && total < 8 * (int64_t)m->hp.n_layer * m->hp.n_ff);   /* neither none nor all */
    CHECK(s->ffn_hash == hc_ffn_hash(m->file));
    free(r.count);
    hc_ctx_free(ctx);
    free(ids);
    free(text);
    hc_tokenizer_free(tok);
    hc_model_free(m);
    hc_stats_free(s);
}

static int same_file(const char *a, const char *b) { return th_sh("cmp -s '%s' '%s'", a, b) == 0; }

/* Shards (any order) merge into exactly the single run; threads change nothing. */
static void test_profile_shards(void)
{
    const char *model = th_fixture("stories260K.gguf"), *corpus = th_fixture("tinystories-calib.txt");
    if (!model) SKIP("no fixtures");
    char one[512], one_t1[512], sh[3][512], merged[512], part[512];
    snprintf(one, sizeof one, "%s", th_tmp("one.gguf"));
    snprintf(one_t1, sizeof one_t1, "%s", th_tmp("one_t1.gguf"));
    snprintf(merged, sizeof merged, "%s", th_tmp("merged.gguf"));
    snprintf(part, sizeof part, "%s", th_tmp("part.gguf"));
    const char *args = "-c 400 --tokens 1500";   /* 400x172 h values: 2 counting chunks with -t 2 */
    CHECKF(th_sh("%s -m '%s' -f '%s' -o '%s' %s -t 2", hp, model, corpus, one, args) == 0, "%s", th_last_err());
    CHECK(th_sh("%s -m '%s' -f '%s' -o '%s' %s -t 1", hp, model, corpus, one_t1, args) == 0);
    CHECK(same_file(one, one_t1));
    for (int i = 0; i < 3; i++) {
        snprintf(sh[i], sizeof sh[i], "%s/shard%d.gguf", th_tmpdir(), i);
        CHECK(th_sh("%s -m '%s' -f '%s' -o '%s' %s --shard %d/3 -t %d", hp, model, corpus, sh[i], args, i, 1 + i % 2) == 0);
    }
    CHECK(th_sh("%s merge '%s' '%s' '%s' -o '%s'", hp, sh[2], sh[0], sh[1], merged) == 0);
    CHECK(same_file(one, merged));
    /* two of three shards: fewer tokens, and the corpus says which shards */
    CHECK(th_sh("%s merge '%s' '%s' -o '%s'", hp, sh[0], sh[1], part) == 0);
    hc_stats *a = hc_stats_read(one, err, sizeof err), *p = hc_stats_read(part, err, sizeof err);
    CHECK(a && p && p->n_tokens < a->n_tokens && strstr(p->corpus, " shard=0/3 + ") && a->n_tokens == 1500);
    CHECK(strstr(a->corpus, "tinystories-calib.txt tokens=1500 fnv=") == a->corpus);
    hc_stats_free(a);
    hc_stats_free(p);
}

/* A real corpus end to end, then the summary of what it measured. */
static void test_profile_calib(void)
{
    const char *model = th_fixture("stories260K.gguf"), *corpus = th_fixture("tinystories-calib.txt");
    if (!model) SKIP("no fixtures");
    char out[512];
    snprintf(out, sizeof out, "%s", th_tmp("calib.gguf"));
    CHECKF(th_sh("%s -m '%s' -f '%s' -o '%s' --tokens 3000 --threshold 0.05", hp, model, corpus, out) == 0, "%s",
           th_last_err());
    CHECK(strstr(th_last_out(), "3000 tokens, 5 layers x 172 neurons"));
    hc_stats *s = hc_stats_read(out, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK(s->threshold == 0.05f && s->ctx == 512 && s->n_tokens == 3000);
    /* the sum of |h| bounds the activations: each active token contributes > T */
    for (size_t i = 0; i < 5 * 172; i++) CHECK(s->sum[i] >= 0.05 * (double)s->count[i] - 1e-6);
    hc_stats_free(s);
    CHECK(th_sh("%s show '%s'", hp, out) == 0 && strstr(th_last_out(), "3000 tokens"));
}

static void test_profile_bad_inputs(void)
{
    const char *model = th_fixture("stories260K.gguf"), *corpus = th_fixture("tinystories-calib.txt");
    if (!model) SKIP("no fixtures");
    char out[512], empty[512], trunc[512];
    snprintf(out, sizeof out, "%s", th_tmp("bad.gguf"));
    snprintf(empty, sizeof empty, "%s", th_tmp("empty.txt"));
    snprintf(trunc, sizeof trunc, "%s", th_tmp("trunc.gguf"));
    th_write(empty, "", 0);
    CHECK(th_sh("%s -m '%s' -f '%s' -o '%s'", hp, model, empty, out) == 1);
    CHECKF(strstr(th_last_err(), "empty corpus"), "%s", th_last_err());
    CHECK(th_sh("%s -m '%s' -f '%s/none.txt' -o '%s'", hp, model, th_tmpdir(), out) == 1);
    CHECK(th_sh("head -c 3000 '%s' > '%s'", model, trunc) == 0);
    CHECK(th_sh("%s -m '%s' -f '%s' -o '%s'", hp, trunc, corpus, out) == 1);
    CHECKF(strstr(th_last_err(), "hc-profile: ") && strstr(th_last_err(), trunc), "%s", th_last_err());
    CHECK(th_sh("%s -m '%s' -f '%s' -o '%s' -c 4096", hp, model, corpus, out) == 1);
    CHECKF(strstr(th_last_err(), "context 4096"), "%s", th_last_err());
    CHECK(th_sh("%s -m '%s' -f '%s' -o '%s' --shard 3/3", hp, model, corpus, out) == 1);
    CHECK(th_sh("%s -m '%s' -f '%s'", hp, model, corpus) == 1);
    CHECK(th_sh("test -e '%s'", out) != 0);
    /* statistics of another model */
    char mine[512], other[512];
    snprintf(mine, sizeof mine, "%s", th_tmp("mine.gguf"));
    snprintf(other, sizeof other, "%s", th_tmp("other.gguf"));
    CHECK(th_sh("%s -m '%s' -f '%s' -o '%s' --tokens 50", hp, model, corpus, mine) == 0);
    hc_stats *s = hc_stats_read(mine, err, sizeof err);
    CHECK(s);
    s->ffn_hash ^= 1;
    write_or_die(s, other);
    hc_stats_free(s);
    CHECK(th_sh("%s merge '%s' '%s' -o '%s'", hp, mine, other, out) == 1);
    CHECKF(strstr(th_last_err(), "ffn_hash"), "%s", th_last_err());
}

/* Text of pseudo-random words (no fixture needed). */
static void write_corpus(const char *path, int n_words)
{
    static const char *const words[] = { "the", "cat", "sat", "on", "a", "mat", "and", "looked", "at", "big",
                                         "red", "ball", "she", "was", "happy", "day", "tom", "ran", "to", "park" };
    FILE *f = fopen(path, "w");
    uint32_t x = 12345;
    for (int i = 0; i < n_words; i++) {
        x = x * 1664525u + 1013904223u;
        fprintf(f, "%s%s", words[(x >> 16) % 20], i % 12 == 11 ? ".\n" : " ");
    }
    fclose(f);
}

static int cmp_desc_count(const void *a, const void *b, void *counts)
{
    const int64_t *c = counts;
    int x = *(const int *)a, y = *(const int *)b;
    return c[x] != c[y] ? (c[x] < c[y]) - (c[x] > c[y]) : x - y;
}

/* hc-convert synth plants a hot set (ranked per layer in hotcold.synth.order.L):
 * the profile must find it. */
static void test_planted_hot_set(void)
{
    char model[512], corpus[512], out[512];
    snprintf(model, sizeof model, "%s", th_tmp("synth.gguf"));
    snprintf(corpus, sizeof corpus, "%s", th_tmp("words.txt"));
    snprintf(out, sizeof out, "%s", th_tmp("synth.stats"));
    CHECKF(th_sh("%s synth -o '%s' --dim 64 --n-ff 256 --layers 2 --act relu --hot-fraction 0.1 --hot-skew 2 --seed 7",
                 th_bin("hc-convert"), model) == 0, "%s", th_last_err());
    write_corpus(corpus, 6000);
    CHECKF(th_sh("%s -m '%s' -f '%s' -o '%s' -c 128 --tokens 3000 -t 1", hp, model, corpus, out) == 0, "%s",
           th_last_err());
    hc_stats *s = hc_stats_read(out, err, sizeof err);
    gguf_file *f = gguf_open(model, err, sizeof err);
    CHECKF(s && f, "%s", err);
    CHECK(strcmp(s->activation, "relu") == 0 && s->threshold == 0);
    uint32_t H = 0;
    CHECK(gguf_get_u32(f, "hotcold.synth.hot_count", &H) == 0 && H == 26);
    for (int l = 0; l < 2; l++) {
        char key[64];
        snprintf(key, sizeof key, "hotcold.synth.order.%d", l);
        int k = gguf_find_kv(f, key);
        CHECK(k >= 0 && f->kv[k].n == 256);
        const int64_t *c = s->count + (size_t)l * 256;
        int by_count[256], measured[256], planted[256];
        for (int j = 0; j < 256; j++) by_count[j] = j;
        qsort_r(by_count, 256, sizeof by_count[0], cmp_desc_count, (void *)c);
        for (int r = 0; r < 256; r++) {
            measured[by_count[r]] = r;
            planted[(int)gguf_kv_num(&f->kv[k], (uint64_t)r)] = r;
        }
        /* the hotter half of the planted set ranks within the measured top H, and
         * the 10 most active neurons measured are all planted ones; ranks near H
         * differ too little in rate to be sorted exactly by 3000 tokens */
        for (uint32_t r = 0; r < H / 2; r++) {
            int j = (int)gguf_kv_num(&f->kv[k], r);
            CHECKF(measured[j] < (int)H, "layer %d: planted rank %u measured at rank %d", l, r, measured[j]);
        }
        for (int r = 0; r < 10; r++)
            CHECKF(planted[by_count[r]] < (int)H, "layer %d: measured rank %d is planted rank %d", l, r, planted[by_count[r]]);
        /* and the whole order agrees (Spearman's rho; about 0.75 measured) */
        double d2 = 0;
        for (int j = 0; j < 256; j++) d2 += (double)(measured[j] - planted[j]) * (measured[j] - planted[j]);
        double rho = 1 - 6 * d2 / (256.0 * (256.0 * 256 - 1));
        CHECKF(rho > 0.5, "layer %d: rank correlation %.3f", l, rho);
        CHECK(c[(int)gguf_kv_num(&f->kv[k], 0)] > (int64_t)s->n_tokens / 2);
    }
    gguf_close(f);
    hc_stats_free(s);
}

int main(void)
{
    snprintf(hp, sizeof hp, "%s", th_bin("hc-profile"));
    RUN(test_merge_adds);
    RUN(test_merge_refuses);
    RUN(test_show_facts);
    RUN(test_profile_one_window);
    RUN(test_profile_shards);
    RUN(test_profile_calib);
    RUN(test_profile_bad_inputs);
    RUN(test_planted_hot_set);
    return th_done();
}

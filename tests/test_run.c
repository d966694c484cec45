/* The runtime: greedy decoding of stories260K against llama2.c, thread
 * determinism, batched vs token-by-token evaluation, the FFN seam (partial =
 * dense, down_t = down), hooks, sampler, perplexity and load errors. Small
 * synthetic models are written with the GGUF writer. */
#include "harness.h"

#include <sys/wait.h>
#include <unistd.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "forward.h"
#include "ggml_types.h"
#include "gguf.h"
#include "model.h"
#include "quants.h"
#include "sampler.h"

/* ------------------------------------------------------------ synthetic models */

enum { E = 128, NH = 4, NKV = 2, FF = 320, NL = 2, V = 300, CTX = 64 };

typedef struct {
    uint32_t type;         /* type of the layer matrices */
    int relu;              /* hotcold.ffn_activation = relu */
    int down_t;            /* PWRI: ffn_down_t instead of ffn_down, plus fc1/fc2 */
    int tied;              /* no output.weight */
    const char *omit;      /* tensor left out */
    const char *reshape;   /* tensor written with one row fewer */
    const char *arch;      /* general.architecture (default llama) */
    void (*more)(gguf_writer *w);   /* further keys or tensors */
} synth;

static uint64_t rng = 1;
static float frand(void)   /* uniform in [-1, 1) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) / 8388608.0) - 1.0f;
}

static void *blobs[256];
static int n_blobs;

/* rows×n values (transposed storage when transpose: rows and n swapped). */
static void add_matrix(gguf_writer *w, const synth *s, const char *name, int n, int rows, float scale,
                       uint32_t type, int transpose)
{
    float *f = malloc(sizeof(float) * (size_t)n * rows);
    for (size_t i = 0; i < (size_t)n * rows; i++) f[i] = frand() * scale;
    if (transpose) {
        float *t = malloc(sizeof(float) * (size_t)n * rows);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < n; c++) t[(size_t)c * rows + r] = f[(size_t)r * n + c];
        free(f);
        f = t;
        int tmp = n; n = rows; rows = tmp;
    }
    if (s->reshape && strcmp(name, s->reshape) == 0) rows--;
    if (s->omit && strcmp(name, s->omit) == 0) { free(f); return; }
    void *data = f;
    if (type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) {
        data = malloc(ggml_row_size(type, n) * (size_t)rows);
        for (int r = 0; r < rows; r++) {
            char *dst = (char *)data + ggml_row_size(type, n) * (size_t)r;
            const float *src = f + (size_t)r * n;
            if (type == GGML_TYPE_Q8_0) quantize_row_q8_0_ref(src, (block_q8_0 *)dst, n);
            else if (type == GGML_TYPE_Q4_0) quantize_row_q4_0_ref(src, (block_q4_0 *)dst, n);
            else if (type == GGML_TYPE_BF16) for (int c = 0; c < n; c++) ((uint16_t *)dst)[c] = fp32_to_bf16(src[c]);
            else for (int c = 0; c < n; c++) ((uint16_t *)dst)[c] = fp32_to_fp16(src[c]);
        }
        free(f);
    } else if (type == GGML_TYPE_Q4_1) {   /* unsupported by the runtime: any bytes do */
        data = calloc((size_t)rows, ggml_row_size(type, n));
        free(f);
    }
    int64_t ne[2] = { n, rows };
    blobs[n_blobs++] = data;
    gguf_add_tensor(w, name, type, rows == 1 && !transpose ? 1 : 2, ne, data);
}

static const char *write_model(const char *file, const synth *s)
{
    const char *path = th_tmp(file);
    gguf_writer *w = gguf_writer_new(s->down_t ? GGUF_VARIANT_PWRI : GGUF_VARIANT_GGUF);
    gguf_set_str(w, "general.architecture", s->arch ? s->arch : "llama");
    gguf_set_u32(w, "llama.context_length", CTX);
    gguf_set_u32(w, "llama.embedding_length", E);
    gguf_set_u32(w, "llama.block_count", NL);
    gguf_set_u32(w, "llama.feed_forward_length", FF);
    gguf_set_u32(w, "llama.attention.head_count", NH);
    gguf_set_u32(w, "llama.attention.head_count_kv", NKV);
    gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    if (s->relu) gguf_set_str(w, "hotcold.ffn_activation", "relu");
    rng = 12345;
    uint32_t t = s->type;
    int KVD = E / NH * NKV;
    add_matrix(w, s, "token_embd.weight", E, V, 1.0f, GGML_TYPE_F32, 0);
    add_matrix(w, s, "output_norm.weight", E, 1, 1.0f, GGML_TYPE_F32, 0);
    if (!s->tied) add_matrix(w, s, "output.weight", E, V, 0.2f, t, 0);
    for (int l = 0; l < NL; l++) {
        char nm[64];
#define M(suffix, n, rows, scale, type, tr) \
        (snprintf(nm, sizeof nm, "blk.%d." suffix, l), add_matrix(w, s, nm, n, rows, scale, type, tr))
        M("attn_norm.weight", E, 1, 1.0f, GGML_TYPE_F32, 0);
        M("attn_q.weight", E, E, 0.15f, t, 0);
        M("attn_k.weight", E, KVD, 0.15f, t, 0);
        M("attn_v.weight", E, KVD, 0.15f, t, 0);
        M("attn_output.weight", E, E, 0.1f, t, 0);
        M("ffn_norm.weight", E, 1, 1.0f, GGML_TYPE_F32, 0);
        M("ffn_gate.weight", E, FF, 0.15f, t, 0);
        M("ffn_up.weight", E, FF, 0.15f, t, 0);
        if (s->down_t) {
            M("ffn_down_t.weight", FF, E, 0.1f, t, 1);
            uint64_t saved = rng;   /* predictors leave the main stream as the dense model's */
            M("fc1.weight", E, 32, 0.1f, t, 0);
            M("fc2.weight", 32, FF, 0.1f, t, 0);
            rng = saved;
        } else {
            M("ffn_down.weight", FF, E, 0.1f, t, 0);
        }
#undef M
    }
    if (s->more) s->more(w);
    char err[256];
    int rc = gguf_writer_write(w, path, err, sizeof err);
    gguf_writer_free(w);
    while (n_blobs) free(blobs[--n_blobs]);
    if (rc) { fprintf(stderr, "write_model: %s\n", err); return NULL; }
    return path;
}

static hc_model *load(const char *path)
{
    char err[256];
    hc_model *m = hc_model_load(path, err, sizeof err);
    if (!m) fprintf(stderr, "load: %s\n", err);
    return m;
}

static hc_ctx *new_ctx(const hc_model *m, int threads, int n_batch)
{
    char err[256];
    hc_ctx_params p = { .n_ctx = CTX, .n_batch = n_batch, .n_threads = threads };
    return hc_ctx_new(m, &p, err, sizeof err);
}

static const int32_t toks[24] = { 1, 17, 250, 3, 99, 42, 42, 7, 123, 299, 0, 5,
                                  64, 65, 66, 200, 201, 13, 8, 77, 150, 151, 2, 9 };

/* Logits of all positions of toks[0..n), evaluated in batches of n_batch
 * (n_batch 1: token by token). */
static float *run_all(const hc_model *m, int threads, int n_batch, int n)
{
    hc_ctx *ctx = new_ctx(m, threads, n_batch);
    float *lg = malloc(sizeof(float) * V * (size_t)n);
    if (!ctx || !lg) { hc_ctx_free(ctx); free(lg); return NULL; }
    int ok = 1;
    if (n_batch == 1) {
        for (int i = 0; i < n && ok; i++) ok = hc_eval(ctx, toks + i, 1, i, lg + (size_t)i * V, HC_LOGITS_LAST) == 0;
    } else {
        ok = hc_eval(ctx, toks, n, 0, lg, HC_LOGITS_ALL) == 0;
    }
    hc_ctx_free(ctx);
    if (!ok) { free(lg); return NULL; }
    return lg;
}

static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > num) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return num / (den > 0 ? den : 1);
}

/* Copies of the last command's stdout / stderr (the harness reuses one buffer). */
static char out_buf[4096], err_buf[4096];
static void grab(void)
{
    snprintf(out_buf, sizeof out_buf, "%s", th_last_out());
    snprintf(err_buf, sizeof err_buf, "%s", th_last_err());
}

/* ------------------------------------------------------------ cases */

static void test_greedy200(void)
{
    const char *model = th_fixture("stories260K.gguf"), *want = th_fixture("stories260K-greedy200.txt");
    if (!model) SKIP("no fixtures");
    size_t wl, gl;
    unsigned char *w = th_read(want, &wl);
    CHECK(w != NULL);
    for (int t = 1; t <= 2; t++) {
        const char *out = th_tmp("greedy.txt");
        int rc = th_sh("'%s' -m '%s' -p '' -n 200 --temp 0 -t %d > '%s'", th_bin("hc-run"), model, t, out);
        unsigned char *g = th_read(out, &gl);
        int same = g && gl == wl && memcmp(g, w, wl) == 0;
        free(g);
        if (rc != 0 || !same) { free(w); CHECKF(0, "-t %d: rc %d, output differs from run.c (%zu vs %zu bytes)", t, rc, gl, wl); }
    }
    free(w);
}

static void test_logits_threads_cli(void)
{
    const char *model = th_fixture("stories260K.gguf");
    if (!model) SKIP("no fixtures");
    const char *a = th_tmp("l1.txt"), *b = th_tmp("l2.txt");
    CHECK(th_sh("'%s' -m '%s' -p 'Once upon a time' --logits -t 1 > '%s'", th_bin("hc-run"), model, a) == 0);
    CHECK(th_sh("'%s' -m '%s' -p 'Once upon a time' --logits -t 2 > '%s'", th_bin("hc-run"), model, b) == 0);
    size_t la, lb;
    unsigned char *x = th_read(a, &la), *y = th_read(b, &lb);
    int lines = 0;
    for (size_t i = 0; x && i < la; i++) lines += x[i] == '\n';
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    CHECK(same);
    CHECKF(lines == 512, "%d logits", lines);
}

/* Bit-identical logits for 1 and 2 threads, on shapes that engage the
 * parallel paths (split tails, several weight types). */
static void test_threads_bit_identical(void)
{
    uint32_t types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_BF16 };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        synth s = { .type = types[i], .relu = i % 2 };
        hc_model *m = load(write_model("thr.gguf", &s));
        CHECK(m != NULL);
        float *a = run_all(m, 1, 24, 24), *b = run_all(m, 2, 24, 24), *c = run_all(m, 2, 1, 24);
        float *d = run_all(m, 1, 1, 24);
        int ok = a && b && c && d && memcmp(a, b, sizeof(float) * V * 24) == 0 &&
                 memcmp(c, d, sizeof(float) * V * 24) == 0;
        free(a); free(b); free(c); free(d);
        hc_model_free(m);
        CHECKF(ok, "type %s", ggml_type_name(types[i]));
    }
}

/* A batch, chunks of 7 and token-by-token evaluation give the same bits: a
 * row's products do not depend on the batch, and attention gives each token
 * its own operations whether it runs alone or in a group of ATT_GROUP
 * (forward.c; a short group repeats its last token). */
static void test_batch_equals_sequential(void)
{
    uint32_t types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        synth s = { .type = types[i] };
        hc_model *m = load(write_model("batch.gguf", &s));
        CHECK(m != NULL);
        float *seq = run_all(m, 2, 1, 24), *all = run_all(m, 2, 24, 24), *chunks = run_all(m, 2, 7, 24);
        CHECK(seq && all && chunks);
        int same_all = memcmp(all, seq, sizeof(float) * V * 24) == 0;
        int same_chunks = memcmp(chunks, seq, sizeof(float) * V * 24) == 0;
        double d1 = max_rel_diff(all, seq, (size_t)V * 24), d2 = max_rel_diff(chunks, seq, (size_t)V * 24);
        free(seq); free(all); free(chunks);
        hc_model_free(m);
        CHECKF(same_all && same_chunks, "%s: batched vs sequential rel diff %g, chunked %g",
               ggml_type_name(types[i]), d1, d2);
    }
}

/* HC_LOGITS_LAST runs the last layer for the last row only (the others leave
 * just their k and v): the same bits as the last row of HC_LOGITS_ALL, in one
 * batch or in chunks, and the cache it leaves gives the next token the same
 * logits too. */
static void test_last_equals_all(void)
{
    uint32_t types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        synth s = { .type = types[i], .relu = i % 2 };
        hc_model *m = load(write_model("last.gguf", &s));
        CHECK(m != NULL);
        float *all = run_all(m, 2, 24, 24), last[V], next_all[V], next_last[V];
        int ok = all != NULL;
        for (int nb = 7; ok && nb <= 24; nb += 17) {
            hc_ctx *ca = new_ctx(m, 2, 24), *cl = new_ctx(m, 2, nb);
            float *scratch = malloc(sizeof(float) * V * 23);
            ok = ca && cl && scratch && hc_eval(cl, toks, 23, 0, last, HC_LOGITS_LAST) == 0 &&
                 hc_eval(ca, toks, 23, 0, scratch, HC_LOGITS_ALL) == 0 &&
                 memcmp(last, scratch + (size_t)V * 22, sizeof last) == 0 &&
                 hc_eval(cl, toks + 23, 1, 23, next_last, HC_LOGITS_LAST) == 0 &&
                 hc_eval(ca, toks + 23, 1, 23, next_all, HC_LOGITS_LAST) == 0 &&
                 memcmp(next_last, next_all, sizeof next_all) == 0 &&
                 memcmp(next_last, all + (size_t)V * 23, sizeof next_all) == 0;
            free(scratch);
            hc_ctx_free(ca);
            hc_ctx_free(cl);
        }
        free(all);
        hc_model_free(m);
        CHECKF(ok, "type %s", ggml_type_name(types[i]));
    }
}

/* A PWRI model (ffn_down_t, predictors) computes the same function as the
 * model whose ffn_down it stores transposed (same random stream). */
static void test_down_t_equals_down(void)
{
    synth a = { .type = GGML_TYPE_F32, .relu = 1 }, b = a;
    b.down_t = 1;
    hc_model *ma = load(write_model("dense.gguf", &a));
    CHECK(ma != NULL);
    float *la = run_all(ma, 2, 24, 24);
    hc_model_free(ma);
    hc_model *mb = load(write_model("sparse.gguf", &b));
    CHECK(mb != NULL && la != NULL);
    const hc_layer *ly = &mb->layers[1];
    int shapes = ly->ffn_down_t.kind == HC_WEIGHT_GGML && ly->ffn_down.kind == HC_WEIGHT_NONE &&
                 ly->ffn_down_t.rows == FF && ly->ffn_down_t.n == E &&
                 ly->fc1.rows == 32 && ly->fc1.n == E && ly->fc2.rows == FF && ly->fc2.n == 32;
    float *lb = run_all(mb, 2, 24, 24), *lc = run_all(mb, 1, 1, 24);
    hc_model_free(mb);
    double d = lb ? max_rel_diff(lb, la, (size_t)V * 24) : 1, d1 = lc ? max_rel_diff(lc, la, (size_t)V * 24) : 1;
    free(la); free(lb); free(lc);
    CHECK(shapes);
    CHECKF(d < 1e-5 && d1 < 1e-5, "down_t vs down logits: %g (batched), %g (token by token)", d, d1);
}

typedef struct {
    int calls[NL][HC_HOOK_COUNT];
    int bad;
    float ffn_act0[FF];      /* FFN activation of layer 0, last token */
} hook_log;

static void hook(void *user, int layer, int point, const float *x, int B, int n, int pos0)
{
    hook_log *L = user;
    int want_n[HC_HOOK_COUNT] = { E, E, E, E, FF };
    if (layer < 0 || layer >= NL || point < 0 || point >= HC_HOOK_COUNT || n != want_n[point] || B < 1 || pos0 < 0) {
        L->bad = 1;
        return;
    }
    L->calls[layer][point] += B;
    if (layer == 0 && point == HC_HOOK_FFN_ACT) memcpy(L->ffn_act0, x + (size_t)(B - 1) * n, sizeof L->ffn_act0);
}

typedef struct {
    int calls, with_h;
} ffn_user;

/* A replacement FFN: the dense FFN, counted. */
static void counted_ffn(void *user, hc_ctx *ctx, int layer, const float *ffn_inp, const float *x_norm, int B,
                        float *out, float *h)
{
    ffn_user *u = user;
    (void)ffn_inp;
    u->calls++;
    u->with_h += h != NULL;
    hc_ffn_dense(ctx, layer, x_norm, B, out, h);
}

/* Logits of toks[0..12) with hook and ffn as given (NULL: none, dense). */
static int hooked_run(const hc_model *m, hook_log *L, ffn_user *u, float *lg)
{
    char err[256];
    hc_ctx_params p = { .n_ctx = CTX, .n_batch = 5, .n_threads = 2, .hook = L ? hook : NULL, .hook_user = L,
                        .ffn = u ? counted_ffn : NULL, .ffn_user = u };
    hc_ctx *ctx = hc_ctx_new(m, &p, err, sizeof err);
    int rc = ctx ? hc_eval(ctx, toks, 12, 0, lg, HC_LOGITS_LAST) : -1;
    hc_ctx_free(ctx);
    return rc;
}

/* Every hook point fires once per token and layer, with the documented row
 * length, also with a replacement FFN: the context calls HC_HOOK_FFN_ACT
 * with the activations the FFN wrote, and hands an FFN no activation buffer
 * when nothing hooks. The replacement's logits are the dense ones. */
static void test_hooks(void)
{
    synth s = { .type = GGML_TYPE_F32, .relu = 1 };
    hc_model *m = load(write_model("hooks.gguf", &s));
    CHECK(m != NULL);
    static hook_log L, Lu;
    ffn_user u = { 0 }, plain = { 0 };
    float lg[V], lgu[V], lgp[V];
    CHECK(hooked_run(m, &L, NULL, lg) == 0 && hooked_run(m, &Lu, &u, lgu) == 0 && hooked_run(m, NULL, &plain, lgp) == 0);
    int ok = !L.bad && !Lu.bad;
    for (int l = 0; l < NL; l++)
        for (int p = 0; p < HC_HOOK_COUNT; p++) ok &= L.calls[l][p] == 12 && Lu.calls[l][p] == 12;
    int zeros = 0;
    for (int j = 0; j < FF; j++) zeros += L.ffn_act0[j] == 0.0f;
    hc_model_free(m);
    CHECK(ok);
    CHECKF(zeros > FF / 10 && zeros < FF, "ReLU FFN activation has %d zeros of %d", zeros, FF);
    CHECK(memcmp(L.ffn_act0, Lu.ffn_act0, sizeof L.ffn_act0) == 0);
    /* unhooked, HC_LOGITS_LAST runs the last layer's FFN for the final chunk only */
    CHECKF(u.calls == 3 * NL && u.with_h == u.calls && plain.calls == 3 * (NL - 1) + 1 && plain.with_h == 0,
           "replacement FFN: %d calls, %d with h; unhooked %d, %d", u.calls, u.with_h, plain.calls, plain.with_h);
    CHECK(memcmp(lg, lgu, sizeof lg) == 0 && memcmp(lg, lgp, sizeof lg) == 0);
}

static void test_tied_and_eval_errors(void)
{
    synth s = { .type = GGML_TYPE_F32, .tied = 1 };
    hc_model *m = load(write_model("tied.gguf", &s));
    CHECK(m != NULL);
    CHECK(m->output.data == m->token_embd.data);
    CHECK(m->hp.rope_base == 10000.0f && m->hp.n_head_kv == NKV && m->hp.act == HC_ACT_SILU);
    hc_ctx *ctx = new_ctx(m, 1, 8);
    float lg[V];
    int32_t bad = V;
    int r1 = hc_eval(ctx, &bad, 1, 0, lg, HC_LOGITS_LAST);
    int r2 = hc_eval(ctx, toks, 2, CTX - 1, lg, HC_LOGITS_LAST);
    int r3 = hc_eval(ctx, toks, 1, CTX - 1, lg, HC_LOGITS_LAST);
    hc_ctx_free(ctx);
    char err[256];
    hc_ctx_params p = { .n_ctx = CTX + 1 };
    hc_ctx *too_big = hc_ctx_new(m, &p, err, sizeof err);
    CHECK(too_big == NULL && strstr(err, "context_length"));
    hc_ctx_params odd_block = { .n_ctx = 8, .kv_block = 12 };
    hc_ctx *odd = hc_ctx_new(m, &odd_block, err, sizeof err);
    CHECK(odd == NULL && strstr(err, "a KV block of 12 positions: not a power of two from 4 to 1024"));
    hc_model_free(m);
    CHECK(r1 == -1 && r2 == -1 && r3 == 0);
}

static void test_sampler(void)
{
    float lg[6] = { 0.5f, 2.0f, -1.0f, 2.0f, 1.9f, 0.0f };
    CHECK(hc_argmax(lg, 6) == 1);
    hc_sampler_params g = { .temp = 0 }, k1 = { .temp = 1.0f, .top_k = 1, .seed = 7 };
    hc_sampler_params p0 = { .temp = 1.0f, .top_p = 0.01f, .seed = 7 }, any = { .temp = 1.0f, .top_p = 1.0f };
    hc_sampler *s = hc_sampler_new(&g, 6), *a = hc_sampler_new(&k1, 6), *b = hc_sampler_new(&p0, 6);
    CHECK(hc_sample(s, lg) == 1 && hc_sample(a, lg) == 1 && hc_sample(b, lg) == 1);
    hc_sampler_free(s); hc_sampler_free(a); hc_sampler_free(b);
    /* same seed, same draws; every token reachable at temperature 1 */
    int seen[6] = { 0 }, same = 1;
    any.seed = 3;
    hc_sampler *x = hc_sampler_new(&any, 6), *y = hc_sampler_new(&any, 6);
    for (int i = 0; i < 2000; i++) {
        int t = hc_sample(x, lg);
        same &= t == hc_sample(y, lg);
        seen[t]++;
    }
    hc_sampler_free(x); hc_sampler_free(y);
    CHECK(same);
    for (int i = 0; i < 6; i++) CHECKF(seen[i] > 0, "token %d never drawn", i);
    CHECK(seen[1] > seen[0] && seen[0] > seen[2]);
}

static void test_split(void)
{
    for (int n = 0; n < 100; n += 7)
        for (int nth = 1; nth <= 5; nth++) {
            int next = 0;
            for (int i = 0; i < nth; i++) {
                int lo, hi;
                hc_split(n, 16, i, nth, &lo, &hi);
                CHECK(lo == next && hi >= lo && (lo % 16 == 0 || lo == n));
                next = hi;
            }
            CHECK(next == n);
        }
    /* hc_pool_run_range: the chunks' ranges tile [0, n) on unit boundaries;
     * with r runs, chunks i, i + r, i + 2r, ... (one thread's claims in
     * turn) are run i's pieces in order, each no larger than the one before
     * by more than a unit; else the chunks are hc_split's parts */
    for (int n = 0; n < 300; n += 37)
        for (int nc = 1; nc <= 24; nc++)
            for (int r = 0; r <= 4; r++) {
                int runs = r > 1 && nc % r == 0, covered = 0;
                for (int i = 0; i < (runs ? r : 1); i++) {
                    int prev_hi = -1, prev_len = 1 << 30;
                    for (int c = i; c < nc; c += runs ? r : 1) {
                        int lo, hi, slo, shi;
                        hc_pool_run_range(n, 4, c, nc, r, &lo, &hi);
                        CHECK(lo <= hi && (lo % 4 == 0 || lo == n) && (hi % 4 == 0 || hi == n));
                        CHECK(prev_hi < 0 || lo == prev_hi);
                        covered += hi - lo;
                        prev_hi = hi;
                        if (runs) CHECK(hi - lo <= prev_len + 4);
                        prev_len = hi - lo;
                        hc_split(n, 4, c, nc, &slo, &shi);
                        if (!runs) CHECK(lo == slo && hi == shi);
                    }
                    if (runs) {
                        int r0, r1;
                        hc_split(n, 4, i, r, &r0, &r1);
                        int lo, hi;
                        hc_pool_run_range(n, 4, i, nc, r, &lo, &hi);
                        CHECK(lo == r0);
                        CHECK(prev_hi == r1);
                    }
                }
                CHECK(covered == n);
            }
}

typedef struct {
    int hits[1000];
    int bad_ith;
} pool_log;

static void pool_chunk(void *arg, int chunk, int ith)
{
    pool_log *L = arg;
    __atomic_fetch_add(&L->hits[chunk], 1, __ATOMIC_RELAXED);
    if (ith < 0 || ith >= 3) L->bad_ith = 1;
}

/* Every chunk runs exactly once per task, over many back-to-back tasks. */
static void test_pool(void)
{
    hc_pool *p = hc_pool_new(3);
    CHECK(p != NULL && hc_pool_size(p) == 3);
    static pool_log L;
    memset(&L, 0, sizeof L);
    int ok = 1;
    for (int task = 0; task < 2000; task++) {
        int n = 1 + task % 1000;
        hc_pool_run(p, pool_chunk, &L, n);
        for (int c = 0; c < n; c++) { ok &= L.hits[c] == 1; L.hits[c] = 0; }
    }
    int small = hc_pool_chunks(p, 100, 100), big = hc_pool_chunks(p, 1000, 1u << 30), few = hc_pool_chunks(p, 5, 1u << 30);
    hc_pool_free(p);
    CHECK(ok && !L.bad_ith);
    CHECKF(small == 1 && big == 12 && few == 5, "chunks %d %d %d", small, big, few);
    /* a chunk count the pool cannot run (0, negative, too many) exits with a
     * message instead of silently running nothing */
    int bad[] = { 0, -3, 1 << 20 };
    for (int i = 0; i < 3; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {   /* a fresh image: exit handlers of this one (the temp dir) must not run */
            char arg[16];
            snprintf(arg, sizeof arg, "%d", bad[i]);
            if (freopen("/dev/null", "w", stderr)) execl("/proc/self/exe", "test_run", "--pool-chunks", arg, (char *)NULL);
            _exit(3);
        }
        int st = 0;
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 1, "hc_pool_run(%d chunks) did not fail loudly", bad[i]);
    }
}

static void range_hits(void *arg, int lo, int hi)
{
    int *hits = arg;
    for (int i = lo; i < hi; i++) __atomic_fetch_add(&hits[i], 1, __ATOMIC_RELAXED);
}

/* hc_pool_ranges covers [0, n) exactly once, with work too small to split
 * (one range on the caller) and large enough for every thread. */
static void test_pool_ranges(void)
{
    hc_pool *p = hc_pool_new(3);
    CHECK(p != NULL);
    static int hits[1000];
    int ok = 1;
    for (int n = 0; n <= 1000; n += 37)
        for (size_t work = 1; work < ((size_t)1 << 32); work <<= 8) {
            memset(hits, 0, sizeof hits);
            hc_pool_ranges(p, range_hits, hits, n, work);
            for (int i = 0; i < 1000; i++) ok &= hits[i] == (i < n);
        }
    hc_pool_free(p);
    CHECK(ok);
}

static void test_perplexity(void)
{
    const char *model = th_fixture("stories260K.gguf"), *calib = th_fixture("tinystories-calib.txt");
    if (!model) SKIP("no fixtures");
    const char *txt = th_tmp("calib-prefix.txt");
    CHECK(th_sh("head -c 6000 '%s' > '%s'", calib, txt) == 0);
    CHECK(th_sh("'%s' -m '%s' --perplexity '%s' -c 128 -t 2", th_bin("hc-run"), model, txt) == 0);
    grab();
    const char *out = out_buf;
    double ppl = 0;
    CHECKF(sscanf(out, "perplexity: %lf\n", &ppl) == 1 && strchr(out, '\n') == out + strlen(out) - 1,
           "stdout: %s", out);
    CHECKF(isfinite(ppl) && ppl > 1.0 && ppl < 50.0, "perplexity %g", ppl);
    /* too short a file for one window */
    const char *small = th_tmp("small.txt");
    CHECK(th_write(small, "Once upon a time.", 17) == 0);
    CHECK(th_sh("'%s' -m '%s' --perplexity '%s' -c 64", th_bin("hc-run"), model, small) == 1);
    grab();
    CHECKF(strstr(err_buf, "need at least 64"), "%s", err_buf);
}

/* A vocabulary with add_bos_token = false (Qwen2's, say): generation and
 * perplexity add no BOS, as llama.cpp; an empty prompt is refused, not run. */
/* A copy of model at out with one u32 key set (a bool for tokenizer.ggml.add_*). */
static int copy_with_key(const char *model, const char *out, const char *key, uint32_t v)
{
    char err[512];
    gguf_file *f = gguf_open(model, err, sizeof err);
    if (!f) return -1;
    gguf_writer *w = gguf_writer_new(f->variant);
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_set_kv(w, &f->kv[i]);
    if (!strncmp(key, "tokenizer.ggml.add_", 19)) gguf_set_bool(w, key, v != 0);
    else gguf_set_u32(w, key, v);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        gguf_add_tensor(w, f->tensors[i].name, f->tensors[i].type, f->tensors[i].n_dims, f->tensors[i].ne,
                        f->tensors[i].data);
    int rc = gguf_writer_write(w, out, err, sizeof err);
    gguf_writer_free(w);
    gguf_close(f);
    return rc;
}

static void test_no_bos_vocabulary(void)
{
    const char *model = th_fixture("stories260K.gguf"), *calib = th_fixture("tinystories-calib.txt");
    if (!model || !calib) SKIP("no fixtures");
    char nobos[600];
    snprintf(nobos, sizeof nobos, "%s", th_tmp("nobos.gguf"));   /* th_tmp's buffer is reused */
    CHECK(copy_with_key(model, nobos, "tokenizer.ggml.add_bos_token", 0) == 0);
    int n_bos = 0, n_nobos = 0;
    CHECK(th_sh("'%s' -m '%s' -p 'Once upon a time' -n 0", th_bin("hc-run"), model) == 0);
    grab();
    CHECKF(sscanf(strstr(err_buf, "prompt:") ? strstr(err_buf, "prompt:") : "", "prompt: %d", &n_bos) == 1, "%s", err_buf);
    CHECK(th_sh("'%s' -m '%s' -p 'Once upon a time' -n 0", th_bin("hc-run"), nobos) == 0);
    grab();
    CHECKF(sscanf(strstr(err_buf, "prompt:") ? strstr(err_buf, "prompt:") : "", "prompt: %d", &n_nobos) == 1, "%s", err_buf);
    CHECKF(n_nobos > 0 && n_bos == n_nobos + 1, "%d tokens with BOS, %d without", n_bos, n_nobos);
    CHECK(th_sh("'%s' -m '%s' -p '' -n 2", th_bin("hc-run"), nobos) == 1);
    grab();
    CHECKF(strstr(err_buf, "nobos.gguf: the vocabulary adds no BOS and the prompt is empty") && !out_buf[0], "%s", err_buf);
    const char *txt = th_tmp("calib-nobos.txt");
    CHECK(th_sh("head -c 6000 '%s' > '%s'", calib, txt) == 0);
    double p1 = 0, p2 = 0;
    CHECK(th_sh("'%s' -m '%s' --perplexity '%s' -c 128", th_bin("hc-run"), model, txt) == 0);
    grab();
    CHECK(sscanf(out_buf, "perplexity: %lf", &p1) == 1);
    CHECKF(th_sh("'%s' -m '%s' --perplexity '%s' -c 128", th_bin("hc-run"), nobos, txt) == 0, "%s", th_last_err());
    grab();
    CHECK(sscanf(out_buf, "perplexity: %lf", &p2) == 1);
    CHECKF(isfinite(p2) && p2 > 1 && p1 != p2, "with BOS %g, without %g", p1, p2);
}

/* tokenizer.ggml.add_eos_token: the prompt ends in EOS wherever hc-run tokenizes one (generation,
 * --parallel, --tokenize), as llama.cpp's add_special; "Once upon" is BOS 403 407. */
static void test_add_eos(void)
{
    const char *model = th_fixture("stories260K.gguf");
    if (!model) SKIP("no fixtures");
    char path[600];
    snprintf(path, sizeof path, "%s", th_tmp("eos.gguf"));
    CHECK(copy_with_key(model, path, "tokenizer.ggml.add_eos_token", 1) == 0);
    CHECK(th_sh("'%s' -m '%s' -p 'Once upon' --tokenize", th_bin("hc-run"), path) == 0);
    grab();
    CHECKF(!strcmp(out_buf, "1 403 407 2\n"), "%s", out_buf);
    CHECK(th_sh("'%s' -m '%s' -p 'Once upon' -n 1 --temp 0", th_bin("hc-run"), path) == 0);
    grab();
    int n = 0;
    CHECKF(sscanf(strstr(err_buf, "prompt:") ? strstr(err_buf, "prompt:") : "", "prompt: %d", &n) == 1 && n == 4, "%s",
           err_buf);
    CHECK(th_write(th_tmp("eos-prompts.txt"), "Once upon\n", 10) == 0);
    CHECK(th_sh("'%s' -m '%s' -f '%s' -np 1 -n 1 --temp 0 --json", th_bin("hc-run"), path, th_tmp("eos-prompts.txt")) == 0);
    grab();
    CHECKF(strstr(out_buf, "\"tokens_prompt\":4"), "%s", out_buf);
}

/* tokenizer.ggml.eot_token_id and eom_token_id end a text as EOS does, alone and with --parallel:
 * greedy, "Once upon" goes on with " a" (id 261), here the end of turn or of message. */
static void test_end_tokens(void)
{
    const char *model = th_fixture("stories260K.gguf");
    if (!model) SKIP("no fixtures");
    static const char *const keys[] = { "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id" };
    for (int k = 0; k < 2; k++) {
        char path[600];
        snprintf(path, sizeof path, "%s", th_tmp("end.gguf"));
        CHECK(copy_with_key(model, path, keys[k], 261) == 0);
        CHECK(th_sh("'%s' -m '%s' -p 'Once upon' -n 8 --temp 0", th_bin("hc-run"), path) == 0);
        grab();
        CHECKF(!strcmp(out_buf, "Once upon") && strstr(err_buf, "[end of text]"), "%s: %s | %s", keys[k], out_buf, err_buf);
        CHECK(th_write(th_tmp("end-prompts.txt"), "Once upon\nOnce upon\n", 20) == 0);
        CHECK(th_sh("'%s' -m '%s' -f '%s' -np 2 -n 8 --temp 0 --json", th_bin("hc-run"), path, th_tmp("end-prompts.txt")) == 0);
        grab();
        CHECKF(strstr(out_buf, "\"stop\":\"eos\""), "%s --parallel: %s", keys[k], out_buf);
    }
    CHECK(th_sh("'%s' -m '%s' -p 'Once upon' -n 3 --temp 0", th_bin("hc-run"), model) == 0);
    grab();
    CHECKF(!strcmp(out_buf, "Once upon a time,"), "without: %s", out_buf);
}

/* hc-run refuses each broken file with one line "hc-run: PATH: ...", exit 1, no stdout. */
static void expect_error(const char *path, const char *pattern)
{
    int rc = th_sh("'%s' -m '%s' -p hello -n 4", th_bin("hc-run"), path);
    grab();
    const char *err = err_buf;
    size_t len = strlen(err);
    char prefix[600];
    snprintf(prefix, sizeof prefix, "hc-run: %s: ", path);
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += err[i] == '\n';
    CHECKF(rc == 1 && lines == 1 && strncmp(err, prefix, strlen(prefix)) == 0 && strstr(err, pattern) &&
           out_buf[0] == 0, "rc %d, stderr: %s", rc, err);
}

/* Further keys and tensors for test_load_errors and test_rope_scaling. */
static float ones[E];
static void q_norm(gguf_writer *w)
{
    for (int i = 0; i < E; i++) ones[i] = 1.0f;
    gguf_add_tensor(w, "blk.0.attn_q_norm.weight", GGML_TYPE_F32, 1, (int64_t[]){ E, 1 }, ones);
}
static void q_beside_qkv(gguf_writer *w)
{
    static float qkv[(size_t)E * (E + 2 * (E / NH * NKV))];
    gguf_add_tensor(w, "blk.1.attn_qkv.weight", GGML_TYPE_F32, 2, (int64_t[]){ E, E + 2 * (E / NH * NKV) }, qkv);
}
static void factor_only(gguf_writer *w) { gguf_set_f32(w, "llama.rope.scaling.factor", 4.0f); }
static void linear_factor(gguf_writer *w)
{
    gguf_set_str(w, "llama.rope.scaling.type", "linear");
    gguf_set_f32(w, "llama.rope.scaling.factor", 4.0f);
}
static void scale_linear(gguf_writer *w) { gguf_set_f32(w, "llama.rope.scale_linear", 4.0f); }
static void none_factor(gguf_writer *w)
{
    gguf_set_str(w, "llama.rope.scaling.type", "none");
    gguf_set_f32(w, "llama.rope.scaling.factor", 4.0f);
}
static void attn_factor(gguf_writer *w) { gguf_set_f32(w, "llama.rope.scaling.attn_factor", 2.0f); }

/* The rope scaling keys as llama.cpp reads them: the type defaults to linear,
 * rope.scale_linear is the factor's older name, "none" scales nothing. */
static void test_rope_scaling(void)
{
    static const struct { void (*more)(gguf_writer *); float scale; } cases[] = {
        { factor_only, 4.0f }, { linear_factor, 4.0f }, { scale_linear, 4.0f }, { none_factor, 1.0f },
    };
    float *ref = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        synth s = { .type = GGML_TYPE_F32, .more = cases[i].more };
        hc_model *m = load(write_model("rope.gguf", &s));
        CHECK(m);
        CHECKF(m->hp.rope_scale == cases[i].scale &&
               m->hp.rope_scaling == (cases[i].scale == 1.0f ? HC_ROPE_SCALING_NONE : HC_ROPE_SCALING_LINEAR),
               "case %zu: scale %g, scaling %d", i, m->hp.rope_scale, m->hp.rope_scaling);
        float *lg = run_all(m, 1, 8, 12);
        if (i == 0) ref = lg;
        else {
            /* position 0 turns by no angle: the later ones tell the scalings apart */
            CHECKF(!memcmp(ref, lg, sizeof *lg * V * 12) == (cases[i].scale == 4.0f), "case %zu: logits", i);
            free(lg);
        }
        hc_model_free(m);
    }
    free(ref);
}

static void test_load_errors(void)
{
    synth miss = { .type = GGML_TYPE_F32, .omit = "blk.1.ffn_up.weight" };
    synth shape = { .type = GGML_TYPE_F32, .reshape = "blk.0.attn_k.weight" };
    synth type = { .type = GGML_TYPE_Q4_1 };
    synth arch = { .type = GGML_TYPE_F32, .arch = "gpt2" };
    synth nodown = { .type = GGML_TYPE_F32, .omit = "blk.0.ffn_down.weight" };
    expect_error(write_model("miss.gguf", &miss), "missing tensor blk.1.ffn_up.weight");
    if (th_failed_case) return;
    expect_error(write_model("shape.gguf", &shape), "tensor blk.0.attn_k.weight has shape [128, 63], expected [128, 64]");
    if (th_failed_case) return;
    expect_error(write_model("type.gguf", &type), "has type Q4_1, which hc-run does not support");
    if (th_failed_case) return;
    expect_error(write_model("arch.gguf", &arch), "unsupported architecture 'gpt2'");
    if (th_failed_case) return;
    expect_error(write_model("nodown.gguf", &nodown), "missing tensor blk.0.ffn_down.weight");
    if (th_failed_case) return;
    /* a tensor the loader does not read: a q norm, or q beside a fused qkv */
    synth qn = { .type = GGML_TYPE_F32, .more = q_norm }, qkv = { .type = GGML_TYPE_F32, .more = q_beside_qkv };
    expect_error(write_model("qnorm.gguf", &qn), "tensor blk.0.attn_q_norm.weight is not used by a llama model as "
                 "hc-run runs it (it would be ignored)");
    if (th_failed_case) return;
    expect_error(write_model("qkv.gguf", &qkv), "tensor blk.1.attn_q.weight is not used by a llama model");
    if (th_failed_case) return;
    synth af = { .type = GGML_TYPE_F32, .more = attn_factor };
    expect_error(write_model("attn-factor.gguf", &af), "llama.rope.scaling.attn_factor 2 is not supported");
    if (th_failed_case) return;
    const char *txt = th_tmp("not.gguf");
    CHECK(th_write(txt, "hello, this is not a model\n", 27) == 0);
    int rc = th_sh("'%s' -m '%s' -p hi", th_bin("hc-run"), txt);
    grab();
    CHECKF(rc == 1 && strncmp(err_buf, "hc-run: ", 8) == 0 && strstr(err_buf, txt) && out_buf[0] == 0,
           "rc %d: %s", rc, err_buf);
    rc = th_sh("'%s' -m '%s'", th_bin("hc-run"), th_tmp("absent.gguf"));
    grab();
    CHECKF(rc == 1 && strchr(err_buf, '\n') == err_buf + strlen(err_buf) - 1, "rc %d: %s", rc, err_buf);
    rc = th_sh("'%s' -m x.gguf -n lots", th_bin("hc-run"));
    grab();
    CHECKF(rc == 1 && strstr(err_buf, "bad value for -n"), "rc %d: %s", rc, err_buf);
    CHECK(th_sh("'%s' --help", th_bin("hc-run")) == 0 && strstr(th_last_out(), "--perplexity"));
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--pool-chunks")) {   /* test_pool's child */
        static pool_log L;
        hc_pool *q = hc_pool_new(2);
        if (q) hc_pool_run(q, pool_chunk, &L, atoi(argv[2]));
        return 0;
    }
    RUN(test_greedy200);
    RUN(test_logits_threads_cli);
    RUN(test_threads_bit_identical);
    RUN(test_batch_equals_sequential);
    RUN(test_last_equals_all);
    RUN(test_down_t_equals_down);
    RUN(test_hooks);
    RUN(test_tied_and_eval_errors);
    RUN(test_sampler);
    RUN(test_split);
    RUN(test_pool);
    RUN(test_pool_ranges);
    RUN(test_perplexity);
    RUN(test_no_bos_vocabulary);
    RUN(test_end_tokens);
    RUN(test_add_eos);
    RUN(test_rope_scaling);
    RUN(test_load_errors);
    return th_done();
}

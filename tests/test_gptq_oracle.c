/* GPTQ against an independent implementation: tests/gptq_ref.py (numpy,
 * float64, written from the paper) quantizes the same weights on the same
 * Hessian and must find hotcold's codes, scales and zeros (following only
 * near-ties of float32 rounding, which it counts), hotcold's layer error,
 * and hotcold's Hessian from the same inputs. Cases cover the native sym /
 * asym grids, ggml's Q4_0 / Q4_1 grids, groups smaller than, equal to and
 * wider than a lazy batch or the row, a last partial group, act-order with
 * static groups, dead inputs and round to nearest. The calibration replay
 * runs hotcold's whole calibration of stories260K and the oracle recomputes
 * it from the llama2.c checkpoint: the windows (BOS then ctx-1 text tokens),
 * every stage's inputs with the earlier stages' quantized weights in place
 * (true-sequential), the Hessians and every weight's codes. numpy comes from
 * tests/numpy-python.sh (PyPI into build/pyenv when missing); the cases skip
 * only when that fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gptq.h"
#include "harness.h"
#include "model.h"
#include "tokenizer.h"

static const char *python;   /* with numpy, or NULL */

static uint64_t rng = 7;
static double urand(void)    /* uniform in (0, 1) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static float nrand(void) { return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand())); }

typedef struct {
    const char *name;
    int N, K, T, gs, sym, act_order, param, rtn, dead;
    float damp;
} oracle_case;

/* Inputs with correlated columns of uneven scale (a random mixing of a few
 * sources) and weights with a few outliers, like a real layer's. */
static void make_layer(const oracle_case *c, float *W, float *X)
{
    const int S = 8;
    float *mix = malloc(sizeof(float) * (size_t)S * c->K), *scale = malloc(sizeof(float) * (size_t)c->K);
    for (int i = 0; i < S * c->K; i++) mix[i] = nrand();
    for (int k = 0; k < c->K; k++) scale[k] = (float)exp(0.7 * nrand());
    for (int t = 0; t < c->T; t++) {
        float src[8];
        for (int s = 0; s < S; s++) src[s] = nrand();
        for (int k = 0; k < c->K; k++) {
            float v = 0.3f * nrand();
            for (int s = 0; s < S; s++) v += 0.3f * src[s] * mix[s * c->K + k];
            X[(size_t)t * c->K + k] = k % 17 == 3 && c->dead ? 0.0f : scale[k] * v;
        }
    }
    for (int i = 0; i < c->N * c->K; i++) W[i] = 0.05f * nrand() * (urand() < 0.01 ? 8.0f : 1.0f);
    free(mix);
    free(scale);
}

static void put(const char *dir, const char *name, const void *data, size_t len)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    th_write(path, data, len);
}

static void run_case(const oracle_case *c)
{
    if (!python) SKIP("no python3 with numpy (tests/numpy-python.sh)");
    const int N = c->N, K = c->K, T = c->T, G = gptq_groups(K, c->gs);
    float *W = malloc(sizeof(float) * (size_t)N * K), *X = malloc(sizeof(float) * (size_t)T * K);
    float *H = malloc(sizeof(float) * (size_t)K * K), *Hw = malloc(sizeof(float) * (size_t)K * K);
    float *Q = malloc(sizeof(float) * (size_t)N * K), *d = malloc(sizeof(float) * (size_t)G * N);
    float *m = malloc(sizeof(float) * (size_t)G * N);
    int32_t *zero = malloc(sizeof(int32_t) * (size_t)G * N);
    uint8_t *codes = malloc((size_t)N * K);
    gptq_grid *grids = malloc(sizeof *grids * (size_t)G * N);
    make_layer(c, W, X);
    gptq_hessian(NULL, X, T, K, H);
    memcpy(Hw, H, sizeof(float) * (size_t)K * K);
    const gptq_params p = { .group_size = c->gs, .sym = c->sym, .act_order = c->act_order, .param = c->param,
                            .damp = c->damp };
    gptq_stats st;
    char err[256];
    int rc = gptq_quantize_layer(NULL, W, N, K, c->rtn ? NULL : Hw, &p, codes, grids, &st, err, sizeof err);
    gptq_dequant(codes, grids, N, K, c->gs, Q);
    const double rel = gptq_rel_error(NULL, W, Q, N, K, X, T);
    for (int i = 0; i < G * N; i++) {
        d[i] = grids[i].d;
        m[i] = grids[i].m;
        zero[i] = grids[i].zero;
    }
    char dir[1024], params[512];
    snprintf(dir, sizeof dir, "%s/%s", th_tmpdir(), c->name);
    th_sh("mkdir -p '%s'", dir);
    static const char *kinds[] = { "native", "q4_0", "q4_1" };
    int n = snprintf(params, sizeof params, "N %d\nK %d\nT %d\ngs %d\nsym %d\nkind %s\nact_order %d\ndamp %.9g\nrtn %d\n",
                     N, K, T, c->gs, c->sym, kinds[c->param], c->act_order, (double)c->damp, c->rtn);
    put(dir, "params.txt", params, (size_t)n);
    put(dir, "W.f32", W, sizeof(float) * (size_t)N * K);
    put(dir, "X.f32", X, sizeof(float) * (size_t)T * K);
    put(dir, "H.f32", H, sizeof(float) * (size_t)K * K);
    put(dir, "codes.u8", codes, (size_t)N * K);
    put(dir, "d.f32", d, sizeof(float) * (size_t)G * N);
    put(dir, "m.f32", m, sizeof(float) * (size_t)G * N);
    put(dir, "zero.i32", zero, sizeof(int32_t) * (size_t)G * N);
    put(dir, "rel.f64", &rel, sizeof rel);
    free(W); free(X); free(H); free(Hw); free(Q); free(d); free(m); free(zero); free(codes); free(grids);
    CHECKF(rc == 0, "%s: %s", c->name, err);
    CHECKF(st.damp == c->damp, "%s: damping raised to %g", c->name, (double)st.damp);
    CHECKF(st.dead == (c->dead && !c->rtn ? (K - 4) / 17 + 1 : 0), "%s: %d dead columns", c->name, st.dead);
    int ok = th_sh("'%s' tests/gptq_ref.py check '%s'", python, dir) == 0;
    printf("# %s: %s", c->name, th_last_out());
    CHECKF(ok, "%s: %s", c->name, th_last_out());
}

/* The layer cases, one test (each prints its figures on a '#' line): every
 * grid (native sym / asym, Q4_0, Q4_1) plain, with act-order over dead inputs
 * and a last partial group, and round to nearest; then a group wider than
 * the row and one wider than a lazy batch with more damping. */
static void test_layers_match_oracle(void)
{
    static const int grids[][2] = { { GPTQ_NATIVE, 1 }, { GPTQ_NATIVE, 0 }, { GPTQ_Q4_0, 1 }, { GPTQ_Q4_1, 0 } };
    static const char *variants[] = { "plain", "act_order_dead", "rtn" };
    static char names[14][64];
    oracle_case cs[14];
    int n = 0;
    for (int g = 0; g < 4; g++)
        for (int v = 0; v < 3; v++, n++) {
            const int native = grids[g][0] == GPTQ_NATIVE;
            snprintf(names[n], sizeof names[n], "%s_%s_%s", native ? "native" : grids[g][0] == GPTQ_Q4_0 ? "q4_0" : "q4_1",
                     grids[g][1] ? "sym" : "asym", variants[v]);
            cs[n] = (oracle_case){ names[n], 40 - 8 * v, v == 1 ? 300 : 256, 600, native && v == 1 ? 128 : 32,
                                   grids[g][1], v == 1, grids[g][0], v == 2, v == 1, 0.01f };
        }
    cs[n++] = (oracle_case){ "native_group_wider_than_row", 24, 64, 300, 128, 1, 0, GPTQ_NATIVE, 0, 0, 0.01f };
    cs[n++] = (oracle_case){ "native_g256_damp_0.1", 24, 384, 800, 256, 0, 0, GPTQ_NATIVE, 0, 0, 0.1f };
    for (int i = 0; i < n; i++) {
        run_case(&cs[i]);
        if (th_failed_case || th_skip_why) return;
    }
}

/* hotcold's calibration of stories260K, replayed by the oracle from the
 * llama2.c checkpoint of the same model and the same text tokens. */
static void test_calibration_replay(void)
{
    const char *gguf = th_fixture("stories260K.gguf"), *bin = th_fixture("stories260K.bin");
    const char *text = th_fixture("tinystories-calib.txt");
    if (!gguf || !bin || !text) SKIP("no fixtures");
    if (!python) SKIP("no python3 with numpy (tests/numpy-python.sh)");
    const gptq_calib_opts co = { .p = { .group_size = 32, .sym = 1, .damp = 0.01f }, .calib_tokens = 1024,
                                 .ctx = 128, .nthreads = 1, .min_cols_multiple = 1, .calib = text, .quiet = 1 };
    gptq_run run;
    char err[512], dir[1024], buf[1100];
    CHECKF(gptq_calibrate(gguf, &co, &run, err, sizeof err) == 0, "%s", err);
    snprintf(dir, sizeof dir, "%s/calib", th_tmpdir());
    th_sh("mkdir -p '%s'", dir);
    hc_model *m = hc_model_load(gguf, err, sizeof err);
    hc_tokenizer *tok = m ? hc_tokenizer_load(m->file, err, sizeof err) : NULL;
    int64_t n = 0;
    int32_t *toks = tok ? hc_tokenize_file(tok, text, &n, err, sizeof err) : NULL;
    const int bos = tok ? hc_tokenizer_bos(tok) : -1;
    hc_tokenizer_free(tok);
    hc_model_free(m);
    if (!toks) gptq_run_free(&run);
    CHECKF(toks, "%s", err);
    put(dir, "tokens.i32", toks, sizeof *toks * (size_t)n);
    free(toks);
    int len = snprintf(buf, sizeof buf, "model %s\ngs %d\nsym %d\ndamp %.9g\nctx %d\ncalib_tokens %d\nbos %d\n", bin,
                       co.p.group_size, co.p.sym, (double)co.p.damp, co.ctx, co.calib_tokens, bos);
    put(dir, "params.txt", buf, (size_t)len);
    FILE *names = fopen(th_tmp("calib/names.txt"), "w");
    for (int i = 0; i < run.n_res; i++) {
        const gptq_result *r = &run.res[i];
        const size_t gn = (size_t)gptq_groups(r->K, co.p.group_size) * r->N;
        float *d = malloc(sizeof(float) * gn), *mm = malloc(sizeof(float) * gn);
        int32_t *zero = malloc(sizeof(int32_t) * gn);
        for (size_t j = 0; j < gn; j++) {
            d[j] = r->grids[j].d;
            mm[j] = r->grids[j].m;
            zero[j] = r->grids[j].zero;
        }
        fprintf(names, "%s\n", r->name);
        char nm[64];
#define PUT(ext, data, bytes) (snprintf(nm, sizeof nm, "%d." ext, i), put(dir, nm, data, bytes))
        PUT("codes.u8", r->codes, (size_t)r->N * r->K);
        PUT("d.f32", d, sizeof(float) * gn);
        PUT("m.f32", mm, sizeof(float) * gn);
        PUT("zero.i32", zero, sizeof(int32_t) * gn);
#undef PUT
        free(d); free(mm); free(zero);
    }
    fclose(names);
    CHECK(run.windows == 8 && run.tokens == 1024);
    gptq_run_free(&run);
    int ok = th_sh("'%s' tests/gptq_ref.py calib '%s'", python, dir) == 0;
    printf("# calibration replay: %s", th_last_out());
    CHECKF(ok, "%s", th_last_out());
}

int main(void)
{
    if (th_sh("sh tests/numpy-python.sh") == 0) {
        static char path[1024];
        snprintf(path, sizeof path, "%s", th_last_out());
        path[strcspn(path, "\n")] = 0;
        python = path;
    } else {
        fprintf(stderr, "%s", th_last_err());
    }
    RUN(test_layers_match_oracle);
    RUN(test_calibration_replay);
    return th_done();
}

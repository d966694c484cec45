/* Sparse and hybrid FFN: the OpenCL kernels against their scalar reference,
 * the .gpuidx validator, sparse CPU = dense (ReLU), hybrid = dense for
 * all-CPU, all-device and mixed splits in F32/F16/Q8_0/Q4_0 and INT4-GPTQ
 * (with and without act-order g_idx), the predictor path, SiLU thresholds,
 * and hc-run's flags. Models come from hc-convert synth (ReLU, planted hot
 * set) and hc-quantize. */
#include "harness.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "budget.h"
#include "ggml_types.h"
#include "gguf.h"
#include "gpuidx.h"
#include "hybrid.h"
#include "kernels.h"
#include "kernels_gptq.h"
#include "model.h"
#include "opencl.h"
#include "quants.h"
#include "random_gptq.h"
#include "sampler.h"
#include "sparse.h"
#include "x16.h"

enum { DIM = 64, FF = 256, NL = 2, CTX = 64, NPROMPT = 10, NGEN = 12 };

static const uint32_t types[4] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };

static uint64_t rng = 7;
static float frand(void)   /* uniform in [-1, 1) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) / 8388608.0) - 1.0f;
}

static const char *pwri_model(const char *src, const char *name, float pred);

/* A synth model of the given activation and type (cached per test binary);
 * down_t: rewritten as a PWRI file with ffn_down_t before quantizing. */
static const char *model_path(const char *act, uint32_t type, int down_t)
{
    static char paths[16][512];
    int slot = (act[0] == 's') * 8 + down_t * 4;
    for (int i = 0; i < 4; i++) if (types[i] == type) slot += i;
    if (paths[slot][0]) return paths[slot];
    char base[64], out[64];
    snprintf(base, sizeof base, "%s-f32.gguf", act);
    snprintf(out, sizeof out, "%s-%s%s.gguf", act, ggml_type_name(type), down_t ? "-t" : "");
    char b[512];
    strcpy(b, th_tmp(base));
    if (th_sh("%s synth -o %s --dim %d --n-ff %d --layers %d --heads 4 --vocab 300 --ctx %d --act %s "
              "--hot-fraction 0.2 --hot-skew 1 --seed 3 2>/dev/null || test -f %s",
              th_bin("hc-convert"), b, DIM, FF, NL, CTX, act, b))
        return NULL;
    if (down_t) {
        char tname[64];
        snprintf(tname, sizeof tname, "%s-F32-t.gguf", act);
        const char *t = pwri_model(b, tname, -1.0f);
        if (!t) return NULL;
        strcpy(b, t);
    }
    if (type == GGML_TYPE_F32) return strcpy(paths[slot], b);
    const char *o = th_tmp(out);
    if (th_sh("%s -q --pure %s %s %s", th_bin("hc-quantize"), b, o, ggml_type_name(type))) return NULL;
    return strcpy(paths[slot], o);
}

static hc_model *load(const char *path)
{
    char err[256];
    hc_model *m = hc_model_load(path, err, sizeof err);
    if (!m) fprintf(stderr, "load: %s\n", err);
    return m;
}

static const int32_t prompt[NPROMPT] = { 1, 72, 101, 108, 108, 111, 44, 32, 119, 111 };

/* Logits of every prompt position (batched), then NGEN greedy tokens. */
typedef struct {
    float logits[NPROMPT * 512];
    int32_t gen[NGEN];
} run_out;

static int run(const hc_model *m, hc_sparse *s, int threads, run_out *o)
{
    char err[256];
    hc_ctx_params p = { .n_ctx = CTX, .n_threads = threads };
    if (s) hc_sparse_attach(s, &p);
    hc_ctx *ctx = hc_ctx_new(m, &p, err, sizeof err);
    if (!ctx) return -1;
    int V = m->hp.n_vocab, rc = hc_eval(ctx, prompt, NPROMPT, 0, o->logits, HC_LOGITS_ALL);
    float last[512];
    memcpy(last, o->logits + (size_t)(NPROMPT - 1) * V, sizeof(float) * (size_t)V);
    for (int i = 0; i < NGEN && !rc; i++) {
        o->gen[i] = hc_argmax(last, V);
        rc = hc_eval(ctx, &o->gen[i], 1, NPROMPT + i, last, HC_LOGITS_LAST);
    }
    hc_ctx_free(ctx);
    return rc;
}

/* Largest |a - b| over the largest |b|. */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, mx = 1e-30;
    for (size_t i = 0; i < n; i++) {
        if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
        if (fabs(b[i]) > mx) mx = fabs(b[i]);
    }
    return d / mx;
}

/* Sparse vs dense: with ffn_down_t (or F32/F16 ffn_down, transposed exactly)
 * both add the same rows and differ only in summation order. A Q8_0/Q4_0
 * ffn_down is re-quantized to Q8_0 rows, and the dense product quantizes h to
 * Q8_0 where the sparse AXPY takes it in f32: about 1% of a logit apart,
 * enough to flip a near tie, so greedy tokens are compared where the sums are
 * the same up to rounding order only. */
static int exact_down(uint32_t type, int down_t) { return down_t || type == GGML_TYPE_F32 || type == GGML_TYPE_F16; }
static double tol_of(uint32_t type, int down_t) { return exact_down(type, down_t) ? 1e-4 : 2e-2; }

static hc_cl *open_cl(void)
{
    char err[256];
    hc_cl *cl = hc_cl_open(NULL, 0, err, sizeof err);
    if (!cl) fprintf(stderr, "opencl: %s\n", err);
    return cl;
}

/* ------------------------------------------------------------ kernels */

static void make_rows(uint32_t type, int k, int n, float scale, void *dst)
{
    float *f = malloc(sizeof(float) * (size_t)n);
    size_t rb = ggml_row_size(type, n);
    for (int r = 0; r < k; r++) {
        char *d = (char *)dst + (size_t)r * rb;
        for (int i = 0; i < n; i++) f[i] = frand() * scale;
        if (type == GGML_TYPE_F32) memcpy(d, f, rb);
        else if (type == GGML_TYPE_F16) for (int i = 0; i < n; i++) ((uint16_t *)d)[i] = fp32_to_fp16(f[i]);
        else if (type == GGML_TYPE_BF16) for (int i = 0; i < n; i++) ((uint16_t *)d)[i] = fp32_to_bf16(f[i]);
        else if (type == GGML_TYPE_Q8_0) quantize_row_q8_0_ref(f, (block_q8_0 *)d, n);
        else quantize_row_q4_0_ref(f, (block_q4_0 *)d, n);
    }
    free(f);
}

/* Groups of gs among n inputs in a shuffled order (act-order's g_idx); the
 * same for every call with the same n and gs. */
static void shuffled_groups(int n, int gs, int32_t *gi)
{
    uint64_t keep = rng;
    rng = (uint64_t)n * 1000 + (uint64_t)gs;
    for (int k = 0; k < n; k++) gi[k] = k / gs;
    for (int k = n - 1; k > 0; k--) {
        frand();
        int j = (int)((rng >> 33) % (uint64_t)(k + 1)), t = gi[k];
        gi[k] = gi[j];
        gi[j] = t;
    }
    rng = keep;
}

/* A random INT4-GPTQ weight of `in` inputs and `out` outputs in groups of gs
 * in act-order (shuffled_groups), loaded into *g. */
static void random_gptq(int in, int out, int gs, hc_gptq *g)
{
    int32_t *gi = malloc(sizeof *gi * (size_t)in);
    char err[256];
    shuffled_groups(in, gs, gi);
    if (th_random_gptq(in, out, gs, gi, &rng, g, err, sizeof err)) th_fail(__FILE__, __LINE__, "gptq: %s", err);
    free(gi);
}

/* k rows of n as *w of type index ti: kernel_types[ti], or (ti = 5)
 * INT4-GPTQ: gate/up rows in act-order groups of 32 (gate and up share
 * g_idx, so one prepared x), or down the columns of a GPTQ ffn_down of k
 * inputs (act-order groups of 16). The storage is *mem or *q. */
static const uint32_t kernel_types[5] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                                          GGML_TYPE_Q4_0 };
enum { N_KT = 6 };
static void make_weight_rows(int ti, int down, int k, int n, hc_weight *w, void **mem, hc_gptq *q)
{
    *mem = NULL;
    if (ti < N_KT - 1) {
        uint32_t type = kernel_types[ti];
        *mem = malloc(ggml_row_size(type, n) * (size_t)k);
        make_rows(type, k, n, 0.3f, *mem);
        *w = (hc_weight){ .kind = HC_WEIGHT_GGML, .type = type, .data = *mem, .n = n, .rows = k };
        return;
    }
    if (down) {
        hc_gptq src;
        random_gptq(k, n, 16, &src);
        if (hc_gptq_columns(&src, q)) th_fail(__FILE__, __LINE__, "gptq columns: out of memory");
        hc_gptq_free(&src);
    } else {
        random_gptq(n, k, 32, q);
    }
    *w = (hc_weight){ .kind = HC_WEIGHT_GPTQ, .type = GGML_TYPE_I32, .n = n, .rows = k, .ext = q };
}

/* Device gate/up/down of every type (INT4-GPTQ included), FFN kind (gated,
 * symmetric with biases, sequential with a bias), both activations, a
 * threshold on |a| or on the contribution |h|·‖down_r‖, and a mask, for a batch of NB tokens (each its own x and mask),
 * against hc_cl_layer_ref token by token; a second run gives the same bits. */
static void test_kernels_vs_ref(void)
{
    hc_cl *cl = open_cl();
    CHECK(cl);
    enum { K = 45, N = 96, NB = 11 };   /* two tiles of tokens (HC_CL_TILE), the second partial */
    char err[256];
    int checked = 0;
    for (int ti = 0; ti < N_KT; ti++)
        for (int di = 0; di < N_KT; di++) {
            hc_weight gate, up, down;
            void *mem[3];
            hc_gptq q[3];
            make_weight_rows(ti, 0, K, N, &gate, &mem[0], &q[0]);
            make_weight_rows(ti, 0, K, N, &up, &mem[1], &q[1]);
            make_weight_rows(di, 1, K, N, &down, &mem[2], &q[2]);
            const char *gt = hc_weight_type_name(&gate), *dt = hc_weight_type_name(&down);
            float x[N], y[NB][N], y2[NB][N], yr[N], h[NB][K], h2[NB][K], hr[K];
            uint8_t mask[NB][K];
            enum { XS = 2048 };   /* a stride larger than the prepared vector (GPTQ's int8 chunks and planes: 1472 bytes) */
            char xp[NB][XS];
            CHECK(hc_weight_act_bytes(&gate) < XS);
            for (int b = 0; b < NB; b++) {
                for (int i = 0; i < N; i++) x[i] = frand();
                for (int r = 0; r < K; r++) mask[b][r] = (r + b) % 7 != 3;
                hc_weight_prepare(&gate, hc_isa(), x, xp[b]);
            }
            float fbias[K], ubias[K], dnorm[K];
            for (int r = 0; r < K; r++) { fbias[r] = 0.2f * frand(); ubias[r] = 0.2f * frand(); dnorm[r] = 2 * fabsf(frand()); }
            for (int kc = 0; kc < 6; kc++) {
            int kind = kc % 3, contrib = kc / 3;
            hc_cl_rows rows = { kind, gate, kind == 2 ? (hc_weight){ 0 } : up, down, kind ? fbias : NULL,
                                kind == 1 ? ubias : NULL, contrib ? dnorm : NULL };
            hc_cl_layer *L = hc_cl_layer_new(cl, &rows, K, N, err, sizeof err);
            CHECKF(L, "%s", err);
            for (int act = 0; act < 2; act++) {
                float t_act = act && !contrib ? 0.0f : 0.05f;
                double dev_s = 0;
                CHECKF(!hc_cl_layer_start(L, xp, XS, NB, &mask[0][0], act, t_act, err, sizeof err), "%s", err);
                CHECKF(!hc_cl_layer_finish(L, &y[0][0], &h[0][0], &dev_s, err, sizeof err), "%s", err);
                CHECKF(!hc_cl_layer_start(L, xp, XS, NB, &mask[0][0], act, t_act, err, sizeof err), "%s", err);
                CHECKF(!hc_cl_layer_finish(L, &y2[0][0], &h2[0][0], &dev_s, err, sizeof err), "%s", err);
                CHECKF(memcmp(y, y2, sizeof y) == 0 && memcmp(h, h2, sizeof h) == 0,
                       "%s/%s kind %d contrib %d act %d: runs differ", gt, dt, kind, contrib, act);
                for (int b = 0; b < NB; b++) {
                    hc_cl_layer_ref(&rows, K, N, xp[b], mask[b], act, t_act, yr, hr);
                    int zeros = 0, zr = 0;
                    for (int r = 0; r < K; r++) { zeros += h[b][r] == 0.0f; zr += hr[r] == 0.0f; }
                    /* 6 masked rows; ReLU zeros about half of the rest, SiLU only |a| < 0.05 */
                    CHECKF(zeros == zr && zeros >= 6 + (act ? 10 : 0) && zeros < K,
                           "%s/%s kind %d contrib %d act %d row %d: %d zero h, reference %d", gt, dt, kind, contrib,
                           act, b, zeros, zr);
                    double dh = rel_diff(h[b], hr, K), dy = rel_diff(y[b], yr, N);
                    CHECKF(dh < 1e-5 && dy < 1e-5, "%s/%s kind %d contrib %d act %d row %d: h %g, y %g", gt, dt, kind,
                           contrib, act, b, dh, dy);
                }
                checked++;
            }
            hc_cl_layer_free(L);
            }
            for (int i = 0; i < 3; i++) {
                free(mem[i]);
                if (!mem[i]) hc_gptq_free(&q[i]);
            }
        }
    CHECK(checked == N_KT * N_KT * 12);
    hc_cl_free(cl);
}

/* The launches fill a GPU: for 7B-, 13B- and 70B-shaped layers on devices of
 * 16 to 132 compute units, one token's down launch has at least twice as
 * many work groups as units (a 4096-wide layer alone is 128 blocks, fewer
 * than an H200's 132 units) and each lane a short chain of rows, and
 * gate_up one per hot row; and the kernel test
 * above runs the sliced down path on PoCL's 2 units. Plain arithmetic: it
 * fails on any machine when a change would starve a GPU. */
static void test_launch_geometry(void)
{
    static const int shapes[][2] = { { 4096, 11008 }, { 5120, 13824 }, { 8192, 28672 } };
    static const unsigned units[] = { 132, 108, 82, 46, 16 };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
            for (int wg = 32; wg <= 64; wg *= 2) {
                const int n = shapes[s][0], k = shapes[s][1], cols = hc_cl_down_cols(wg);
                const long groups = (long)(n + cols - 1) / cols * hc_cl_down_splits(n, k, wg, units[u]);
                const long lanes = wg / (hc_cl_down_cols(wg) / 4), splits = hc_cl_down_splits(n, k, wg, units[u]);
                CHECKF(groups >= 2 * (long)units[u] && k >= (long)units[u], "n %d, k %d, wg %d, %u units: %ld groups",
                       n, k, wg, units[u], groups);
                /* short chains of rows a lane (within the 64 slices) */
                CHECKF((k + lanes * splits - 1) / (lanes * splits) <= HC_CL_DOWN_ROWS || splits == 64,
                       "n %d, k %d, wg %d: %ld slices", n, k, wg, splits);
            }
    CHECK(hc_cl_down_splits(4096, 11008, 64, 132) > 1);
    CHECK(hc_cl_down_splits(96, 45, 64, 2) == 2);   /* test_kernels_vs_ref's layer on PoCL */
    CHECK(hc_cl_down_splits(4096, 8, 64, 132) == 1); /* too few rows to slice */
}

/* ------------------------------------------------------------ .gpuidx */

/* A .gpuidx for nl layers of n_ff neurons; layer l puts neuron j on the
 * device iff on(l, j). corrupt: 0 none, 1 bucket not ascending, 2 bucket out
 * of range, 3 bucket too short, 4 a gpu_idx of 2, 5 no split.vram_capacity,
 * 6 a tensor of F32. */
#define GPUIDX_CAPACITY (64u << 10)   /* the budget the indexes say they were made for */
static const char *write_gpuidx(const char *name, int nl, int n_ff, int (*on)(int, int), int corrupt)
{
    static char paths[24][512];   /* th_tmp's buffers rotate; the tests keep many paths */
    static int n_paths;
    char *path = strcpy(paths[n_paths++ % 24], th_tmp(name));
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_PWRI);
    gguf_set_str(w, "general.architecture", "generic.gpu_index");
    gguf_set_u32(w, "generic.gpu_index.block_count", (uint32_t)nl);
    if (corrupt != 5) gguf_set_u64(w, "split.vram_capacity", GPUIDX_CAPACITY);
    int32_t *idx = calloc((size_t)nl * n_ff, sizeof *idx), *bucket = calloc((size_t)nl * n_ff + 1, sizeof *bucket);
    for (int l = 0; l < nl; l++) {
        int32_t *gi = idx + (size_t)l * n_ff, *gb = bucket + (size_t)l * n_ff;
        int64_t k = 0, ne = n_ff;
        for (int j = 0; j < n_ff; j++) if ((gi[j] = on(l, j))) gb[k++] = j;
        if (l == nl - 1 && k >= 2) {
            if (corrupt == 1) { int32_t t = gb[0]; gb[0] = gb[1]; gb[1] = t; }
            if (corrupt == 2) gb[k - 1] = n_ff;
            if (corrupt == 3) k--;
            if (corrupt == 4) gi[gb[0]] = 2;
        }
        char nm[64];
        snprintf(nm, sizeof nm, "blk.%d.gpu_idx", l);
        gguf_add_tensor(w, nm, corrupt == 6 ? GGML_TYPE_F32 : GGML_TYPE_I32, 1, &ne, gi);
        snprintf(nm, sizeof nm, "blk.%d.gpu_bucket", l);
        gguf_add_tensor(w, nm, GGML_TYPE_I32, 1, &k, gb);
    }
    char err[256];
    int rc = gguf_writer_write(w, path, err, sizeof err);
    gguf_writer_free(w);
    free(idx);
    free(bucket);
    return rc ? NULL : path;
}

static int on_none(int l, int j) { (void)l; (void)j; return 0; }
static int on_all(int l, int j) { (void)l; (void)j; return 1; }
/* layer 0 all but a few on the device, layer 1 every third and the first 40 */
static int on_mixed(int l, int j) { return l == 0 ? j % 50 != 7 : j % 3 == 0 || j < 40; }

static void test_gpuidx_validation(void)
{
    char err[512];
    const char *ok = write_gpuidx("ok.gpuidx", NL, FF, on_mixed, 0);
    hc_gpuidx *g = hc_gpuidx_load(ok, NL, FF, err, sizeof err);
    CHECKF(g, "%s", err);
    int k1 = 0;
    for (int j = 0; j < FF; j++) k1 += on_mixed(1, j);
    CHECK(g->n_gpu[1] == k1 && g->bucket[1][0] == 0 && g->bucket[1][k1 - 1] == 255 && g->vram_capacity == GPUIDX_CAPACITY);
    hc_gpuidx_free(g);
    struct { const char *path; int nl, nff; const char *want; } bad[] = {
        { ok, NL + 1, FF, "index for 2 layers, the model has 3" },
        { write_gpuidx("l3.gpuidx", 3, FF, on_mixed, 0), NL, FF, "index for 3 layers, the model has 2" },
        { ok, NL, FF + 32, "expected n_ff = 288" },
        { write_gpuidx("c1.gpuidx", NL, FF, on_mixed, 1), NL, FF, "is not ascending" },
        { write_gpuidx("c2.gpuidx", NL, FF, on_mixed, 2), NL, FF, "is out of range" },
        { write_gpuidx("c3.gpuidx", NL, FF, on_mixed, 3), NL, FF, "but blk.1.gpu_idx marks" },
        { write_gpuidx("c4.gpuidx", NL, FF, on_mixed, 4), NL, FF, "expected 0 or 1" },
        { write_gpuidx("c5.gpuidx", NL, FF, on_mixed, 5), NL, FF, "split.vram_capacity" },
        { write_gpuidx("c6.gpuidx", NL, FF, on_mixed, 6), NL, FF, "expected I32" },
    };
    th_write(th_tmp("junk.gpuidx"), "PWRI\3\0\0\0garbage", 15);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECKF(bad[i].path, "case %zu: cannot write", i);
        g = hc_gpuidx_load(bad[i].path, bad[i].nl, bad[i].nff, err, sizeof err);
        CHECKF(!g && strstr(err, bad[i].want) && strncmp(err, bad[i].path, strlen(bad[i].path)) == 0,
               "case %zu: %s (want '%s')", i, g ? "accepted" : err, bad[i].want);
    }
    g = hc_gpuidx_load(th_tmp("junk.gpuidx"), NL, FF, err, sizeof err);
    CHECK(!g && strstr(err, "junk.gpuidx"));
}

/* ------------------------------------------------------------ sparse = dense */

static hc_sparse *new_sparse(const hc_model *m, float threshold, int pred, int check)
{
    char err[256];
    hc_sparse_params p = { .threshold = threshold, .use_predictor = pred, .check = check };
    hc_sparse *s = hc_sparse_new(m, &p, err, sizeof err);
    if (!s) fprintf(stderr, "sparse: %s\n", err);
    return s;
}

static void test_sparse_cpu_equals_dense(void)
{
    for (int v = 0; v < 8; v++) {
        int ti = v % 4, dt = v / 4;
        const char *path = model_path("relu", types[ti], dt);
        CHECKF(path, "no %s model (hc-convert / hc-quantize in HC_BIN?)", ggml_type_name(types[ti]));
        hc_model *m = load(path);
        CHECK(m);
        static run_out dense, sp, sp2;
        hc_sparse *s = new_sparse(m, 0.0f, 0, 1);
        CHECK(s);
        /* the gate and up copies in chunks of 16 where the type's kernels read those */
        CHECKF(hc_sparse_chunked(s) == hc_x16_wanted(types[ti]), "%s: chunked %d", ggml_type_name(types[ti]),
               hc_sparse_chunked(s));
        CHECK(run(m, NULL, 2, &dense) == 0 && run(m, s, 2, &sp) == 0);
        size_t n = (size_t)NPROMPT * m->hp.n_vocab;
        double d = rel_diff(sp.logits, dense.logits, n);
        CHECKF(d < tol_of(types[ti], dt), "%s down_t=%d: sparse vs dense %g", ggml_type_name(types[ti]), dt, d);
        CHECKF(!exact_down(types[ti], dt) || memcmp(sp.gen, dense.gen, sizeof sp.gen) == 0, "%s down_t=%d: greedy tokens differ",
               ggml_type_name(types[ti]), dt);
        hc_sparse_stats st = hc_sparse_get_stats(s, -1);
        double skipped = 1.0 - (double)st.computed / ((double)st.tokens * FF);
        CHECKF(st.tokens == (uint64_t)NL * (NPROMPT + NGEN) && skipped > 0.3 && skipped < 0.99 && st.hit == st.truth,
               "%s: tokens %llu skipped %.3f hit %llu of %llu", ggml_type_name(types[ti]),
               (unsigned long long)st.tokens, skipped, (unsigned long long)st.hit, (unsigned long long)st.truth);
        CHECK(run(m, s, 1, &sp2) == 0);
        CHECKF(memcmp(sp.logits, sp2.logits, sizeof(float) * n) == 0, "%s: -t 1 and -t 2 differ", ggml_type_name(types[ti]));
        hc_sparse_free(s);
        hc_model_free(m);
    }
}

/* ------------------------------------------------------------ hybrid = dense */

static void test_hybrid_equals_dense(void)
{
    int (*const splits[3])(int, int) = { on_none, on_all, on_mixed };
    const char *names[3] = { "all-CPU", "all-device", "mixed" };
    for (int v = 0; v < 8; v++) {
        int ti = v % 4, dt = v / 4;
        const char *path = model_path("relu", types[ti], dt);
        CHECK(path);
        hc_model *m = load(path);
        CHECK(m);
        static run_out dense, hy;
        CHECK(run(m, NULL, 2, &dense) == 0);
        for (int si = 0; si < 3; si++) {
            char err[512], gname[32];
            snprintf(gname, sizeof gname, "s%d.gpuidx", si);
            hc_gpuidx *g = hc_gpuidx_load(write_gpuidx(gname, NL, FF, splits[si], 0), NL, FF, err, sizeof err);
            CHECKF(g, "%s", err);
            hc_sparse *s = new_sparse(m, 0.0f, 0, 0);
            CHECK(s);
            hc_cl *cl = hc_hybrid_setup(s, m, g, NULL, 0, err, sizeof err);
            CHECKF(cl, "%s: %s", names[si], err);
            CHECK(run(m, s, 2, &hy) == 0);
            double d = rel_diff(hy.logits, dense.logits, (size_t)NPROMPT * m->hp.n_vocab);
            hc_sparse_stats st = hc_sparse_get_stats(s, -1);
            CHECKF(d < tol_of(types[ti], dt) && (!exact_down(types[ti], dt) || memcmp(hy.gen, dense.gen, sizeof hy.gen) == 0),
                   "%s down_t=%d %s: logits %g, greedy %s", ggml_type_name(types[ti]), dt, names[si], d,
                   memcmp(hy.gen, dense.gen, sizeof hy.gen) ? "differs" : "same");
            CHECKF((si == 0) == (st.served_dev == 0) && (si == 1) == (st.served_cpu == 0) && !hc_sparse_device_error(s),
                   "%s %s: device %llu, cpu %llu", ggml_type_name(types[ti]), names[si],
                   (unsigned long long)st.served_dev, (unsigned long long)st.served_cpu);
            hc_sparse_free(s);
            hc_cl_free(cl);
            hc_gpuidx_free(g);
        }
        hc_model_free(m);
    }
}

/* The relu synth model quantized by hc-quantize GPTQ (groups of 32); with
 * act_order, every GPTQ weight then given a shuffled g_idx (shuffled_groups:
 * one order per input width, so gate and up still share their input), a
 * valid act-order file whose inputs the runtime gathers by group. */
static const char *gptq_model(int act_order)
{
    static char paths[2][512];
    if (paths[act_order][0]) return paths[act_order];
    const char *base = model_path("relu", GGML_TYPE_F32, 0);
    char q[512], err[256];
    strcpy(q, th_tmp("relu-gptq.gguf"));
    if (!base || th_sh("test -f %s || %s -q -t 2 %s %s GPTQ --calib models/synth-corpus.txt --calib-tokens 512 "
                       "--ctx 64 --group-size 32", q, th_bin("hc-quantize"), base, q))
        return NULL;
    if (!act_order) return strcpy(paths[0], q);
    gguf_file *f = gguf_open(q, err, sizeof err);
    if (!f) return NULL;
    gguf_writer *w = gguf_writer_new(f->variant);
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_set_kv(w, &f->kv[i]);
    int32_t *gis[64];
    int n_gi = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        size_t len = strlen(t->name);
        if (len > 6 && strcmp(t->name + len - 6, ".g_idx") == 0) continue;
        gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
        if (len < 8 || strcmp(t->name + len - 8, ".qweight") != 0 || n_gi == 64) continue;
        int64_t n = t->ne[1] * 8;   /* DIM and FF are multiples of 8 */
        char nm[GGUF_MAX_NAME + 16];
        snprintf(nm, sizeof nm, "%.*s.g_idx", (int)(len - 8), t->name);
        gis[n_gi] = malloc(sizeof(int32_t) * (size_t)n);
        shuffled_groups((int)n, 32, gis[n_gi]);
        gguf_add_tensor(w, nm, GGML_TYPE_I32, 1, &n, gis[n_gi++]);
    }
    const char *path = th_tmp("relu-gptq-act-order.gguf");
    int rc = gguf_writer_write(w, path, err, sizeof err);
    gguf_writer_free(w);
    gguf_close(f);
    for (int i = 0; i < n_gi; i++) free(gis[i]);
    return rc ? NULL : strcpy(paths[1], path);
}

/* INT4-GPTQ models, plain and act-order: sparse on the CPU (-t 1 and -t 2 the
 * same bits) near the dense FFN (the dense down product rounds h to int8
 * blocks where the sparse AXPY takes it in f32, as for Q4_0: tol_of), hybrid
 * with every split equal to the sparse CPU run (the same INT4 values and
 * activations added in another order) with the same greedy tokens, skip
 * inactive neurons, and the device holds the rows as priced: per neuron gate and up
 * rows of 64 codes and 2 pairs (48 bytes), a down column of 64 codes and its
 * group index (36 bytes); per layer 8 groups x 64 pairs (4 KiB). */
static void test_gptq_equals_dense(void)
{
    int (*const splits[3])(int, int) = { on_none, on_all, on_mixed };
    const char *names[3] = { "all-CPU", "all-device", "mixed" };
    for (int ao = 0; ao < 2; ao++) {
        const char *path = gptq_model(ao);
        CHECKF(path, "no GPTQ model (hc-quantize in HC_BIN?)");
        hc_model *m = load(path);
        CHECK(m && m->layers[0].ffn_down.kind == HC_WEIGHT_GPTQ && m->layers[1].ffn_gate.kind == HC_WEIGHT_GPTQ);
        CHECK(!((const hc_gptq *)m->layers[0].ffn_down.ext)->perm == !ao);
        static run_out dense, sp, sp1, hy;
        size_t n = (size_t)NPROMPT * m->hp.n_vocab;
        CHECK(run(m, NULL, 2, &dense) == 0);
        hc_sparse *s = new_sparse(m, 0.0f, 0, 1);
        CHECK(s && run(m, s, 2, &sp) == 0);
        hc_sparse_stats st = hc_sparse_get_stats(s, -1);
        double skipped = 1.0 - (double)st.computed / ((double)st.tokens * FF), d = rel_diff(sp.logits, dense.logits, n);
        CHECKF(d < tol_of(GGML_TYPE_Q4_0, 0) && skipped > 0.3 && skipped < 0.99 && st.hit == st.truth,
               "act-order %d: sparse vs dense %g, skipped %.3f", ao, d, skipped);
        hc_sparse_free(s);
        s = new_sparse(m, 0.0f, 0, 0);
        CHECK(s && run(m, s, 1, &sp1) == 0 && memcmp(sp.logits, sp1.logits, sizeof(float) * n) == 0);
        hc_sparse_free(s);
        for (int si = 0; si < 3; si++) {
            char err[512], gname[32];
            snprintf(gname, sizeof gname, "g%d.gpuidx", si);
            hc_gpuidx *g = hc_gpuidx_load(write_gpuidx(gname, NL, FF, splits[si], 0), NL, FF, err, sizeof err);
            s = new_sparse(m, 0.0f, 0, 0);
            CHECK(g && s);
            hc_cl *cl = hc_hybrid_setup(s, m, g, NULL, 0, err, sizeof err);
            CHECKF(cl, "act-order %d %s: %s", ao, names[si], err);
            long hot = 0;
            for (int l = 0; l < NL; l++) hot += g->n_gpu[l];
            CHECK(hc_hybrid_bytes(m, s, g) == (uint64_t)hot * (2 * 48 + 36) + (uint64_t)(si ? NL : 0) * 8 * 64 * 8);
            CHECK(run(m, s, 2, &hy) == 0);
            d = rel_diff(hy.logits, sp.logits, n);
            st = hc_sparse_get_stats(s, -1);
            CHECKF(d < 1e-4 && memcmp(hy.gen, sp.gen, sizeof hy.gen) == 0 && (si == 0) == (st.served_dev == 0) &&
                   (si == 1) == (st.served_cpu == 0) && !hc_sparse_device_error(s) &&
                   st.computed < st.tokens * FF * 7 / 10, "act-order %d %s: logits %g, device %llu, cpu %llu", ao,
                   names[si], d, (unsigned long long)st.served_dev, (unsigned long long)st.served_cpu);
            hc_sparse_free(s);
            hc_cl_free(cl);
            hc_gpuidx_free(g);
        }
        hc_model_free(m);
    }
}

/* A budget below the split's size leaves everything on the CPU. */
static void test_budget_fallback(void)
{
    const char *path = model_path("relu", GGML_TYPE_F16, 0);
    CHECK(path);
    hc_model *m = load(path);
    char err[512];
    hc_gpuidx *g = hc_gpuidx_load(write_gpuidx("b.gpuidx", NL, FF, on_all, 0), NL, FF, err, sizeof err);
    hc_sparse *s = new_sparse(m, 0.0f, 0, 0);
    CHECK(m && g && s);
    uint64_t need = hc_hybrid_bytes(m, s, g);
    CHECK(need == (uint64_t)NL * FF * 3 * DIM * 2);
    hc_cl *cl = hc_hybrid_setup(s, m, g, NULL, need - 1, err, sizeof err);
    CHECKF(!cl && strstr(err, "the budget leaves for it"), "%s", cl ? "accepted" : err);
    static run_out dense, sp;
    CHECK(run(m, NULL, 1, &dense) == 0 && run(m, s, 1, &sp) == 0);
    CHECK(hc_sparse_get_stats(s, -1).served_dev == 0 && memcmp(sp.gen, dense.gen, sizeof sp.gen) == 0);
    cl = hc_hybrid_setup(s, m, g, NULL, need, err, sizeof err);
    CHECKF(cl, "%s", err);
    hc_sparse_free(s);
    hc_cl_free(cl);
    hc_gpuidx_free(g);
    hc_model_free(m);
}

/* ------------------------------------------------------------ batched rows */

/* The FFN of NBR rows at once (the prompt path) gives the bits of the rows
 * one at a time (the generation path), the same counts and the same
 * HC_HOOK_FFN_ACT rows, at -t 1 and -t 2: ReLU on the CPU (F16 ffn_down,
 * Q4_0 ffn_down_t), ReLU split with a device, a predictor with and without a
 * device, a predictor that flags few neurons, and a SiLU threshold. */
enum { NBR = 13 };
static float hook_rows[NBR][FF];
static int hook_calls;
static void ffn_hook(void *user, int layer, int point, const float *x, int B, int n, int pos0)
{
    (void)user; (void)pos0;
    if (point != HC_HOOK_FFN_ACT || layer != 1 || n != FF) return;
    int b0 = *(int *)user;
    memcpy(hook_rows[b0], x, sizeof(float) * (size_t)B * FF);
    hook_calls++;
}

/* a predictor threshold at which 5-10 % of the neurons are candidates: the
 * prompt path of per-row pairs (sparse.c prompt_part) */
#define PRED_FEW 6.0f
static void batch_case(hc_model *m, float threshold, int pred, const char *gpuidx, int threads, const char *what)
{
    char err[512];
    hc_gpuidx *g = gpuidx ? hc_gpuidx_load(gpuidx, NL, FF, err, sizeof err) : NULL;
    hc_sparse *s1 = new_sparse(m, threshold, pred, 1), *sb = new_sparse(m, threshold, pred, 1);
    hc_cl *c1 = g ? hc_hybrid_setup(s1, m, g, NULL, 0, err, sizeof err) : NULL;
    hc_cl *cb = g ? hc_hybrid_setup(sb, m, g, NULL, 0, err, sizeof err) : NULL;
    int b0 = 0;
    hc_ctx_params p1 = { .n_ctx = CTX, .n_threads = threads, .hook = ffn_hook, .hook_user = &b0 }, pb = p1;
    if (s1) hc_sparse_attach(s1, &p1);
    if (sb) hc_sparse_attach(sb, &pb);
    hc_ctx *ctx1 = hc_ctx_new(m, &p1, err, sizeof err), *ctxb = ctx1 ? hc_ctx_new(m, &pb, err, sizeof err) : NULL;
    int ok = s1 && sb && ctxb && (!g || (c1 && cb));
    CHECKF(ok, "%s: setup: %s", what, err);
    int E = m->hp.n_embd;
    static float inp[NBR * DIM], xn[NBR * DIM], one[NBR * DIM], all[NBR * DIM], hooked[NBR][FF];
    for (int i = 0; i < NBR * E; i++) {
        inp[i] = frand();
        xn[i] = frand() * 2.0f;
    }
    for (int layer = 0; layer < NL; layer++) {
        for (b0 = 0; b0 < NBR; b0++)
            hc_ffn_forward(ctx1, layer, inp + (size_t)b0 * E, xn + (size_t)b0 * E, 1, b0, one + (size_t)b0 * E);
        memcpy(hooked, hook_rows, sizeof hooked);
        b0 = 0;
        hc_ffn_forward(ctxb, layer, inp, xn, NBR, 0, all);
        CHECKF(memcmp(one, all, sizeof(float) * NBR * (size_t)E) == 0, "%s -t %d layer %d: rows at once differ from one at a time",
               what, threads, layer);
        if (layer == 1)
            CHECKF(memcmp(hooked, hook_rows, sizeof hooked) == 0, "%s: hooked h differs", what);
    }
    hc_sparse_stats a = hc_sparse_get_stats(s1, -1), b = hc_sparse_get_stats(sb, -1);
    CHECKF(a.tokens == b.tokens && a.computed == b.computed && a.predicted == b.predicted && a.served_cpu == b.served_cpu &&
           a.served_dev == b.served_dev && a.truth == b.truth && a.hit == b.hit && a.computed > 0 &&
           a.computed < a.tokens * FF && (!g || a.served_dev > 0) && hook_calls == NBR + 1,
           "%s: counts differ or trivial (computed %llu / %llu, device %llu / %llu)", what,
           (unsigned long long)a.computed, (unsigned long long)b.computed, (unsigned long long)a.served_dev,
           (unsigned long long)b.served_dev);
    hook_calls = 0;
    hc_ctx_free(ctx1);
    hc_ctx_free(ctxb);
    hc_sparse_free(s1);
    hc_sparse_free(sb);
    hc_cl_free(c1);
    hc_cl_free(cb);
    hc_gpuidx_free(g);
}

static void test_batch_equals_rows(void)
{
    const char *mixed = write_gpuidx("bm.gpuidx", NL, FF, on_mixed, 0);
    hc_model *f16 = load(model_path("relu", GGML_TYPE_F16, 0)), *q4t = load(model_path("relu", GGML_TYPE_Q4_0, 1));
    hc_model *rm = load(pwri_model(model_path("relu", GGML_TYPE_F32, 0), "pr.gguf", 1.0f));
    hc_model *silu = load(model_path("silu", GGML_TYPE_F32, 0)), *gq = load(gptq_model(1));
    CHECK(f16 && q4t && rm && silu && gq && mixed);
    for (int t = 1; t <= 2; t++) {
        hook_calls = 0;
        batch_case(f16, 0.0f, 0, NULL, t, "relu f16");
        batch_case(q4t, 0.0f, 0, NULL, t, "relu q4_0 down_t");
        batch_case(q4t, 0.0f, 0, mixed, t, "relu q4_0 hybrid");
        batch_case(rm, 0.0f, 1, NULL, t, "predictor");
        batch_case(rm, 0.0f, 1, mixed, t, "predictor hybrid");
        batch_case(rm, PRED_FEW, 1, NULL, t, "predictor, few neurons a row");
        batch_case(silu, 0.05f, 0, NULL, t, "silu 0.05");
        batch_case(gq, 0.0f, 0, NULL, t, "relu gptq act-order");
        batch_case(gq, 0.0f, 0, mixed, t, "relu gptq act-order hybrid");
    }
    hc_model_free(f16);
    hc_model_free(q4t);
    hc_model_free(rm);
    hc_model_free(silu);
    hc_model_free(gq);
}

/* ------------------------------------------------------------ predictor */

/* An F32 model as a PWRI file with ffn_down_t and, when pred >= 0, a
 * predictor whose fc2 rows are pred * random (0: p = 0 for every neuron). */
static const char *pwri_model(const char *src, const char *name, float fc2_scale)
{
    char err[256];
    gguf_file *f = src ? gguf_open(src, err, sizeof err) : NULL;
    if (!f) return NULL;
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_PWRI);
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_set_kv(w, &f->kv[i]);
    enum { R = 16 };
    float *down_t = malloc(sizeof(float) * NL * FF * DIM), *fc1 = malloc(sizeof(float) * R * DIM),
          *fc2 = malloc(sizeof(float) * FF * R);
    for (int i = 0; i < R * DIM; i++) fc1[i] = frand();
    for (int i = 0; i < FF * R; i++) fc2[i] = fc2_scale * frand();
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        int l;
        char rest[64];
        if (sscanf(t->name, "blk.%d.%63s", &l, rest) == 2 && strcmp(rest, "ffn_down.weight") == 0) {
            float *d = down_t + (size_t)l * FF * DIM;
            for (int e = 0; e < DIM; e++)
                for (int j = 0; j < FF; j++) d[(size_t)j * DIM + e] = ((const float *)t->data)[(size_t)e * FF + j];
            char nm[64];
            int64_t ne[2] = { DIM, FF }, n1[2] = { DIM, R }, n2[2] = { R, FF };
            snprintf(nm, sizeof nm, "blk.%d.ffn_down_t.weight", l);
            gguf_add_tensor(w, nm, GGML_TYPE_F32, 2, ne, d);
            if (fc2_scale < 0) continue;
            snprintf(nm, sizeof nm, "blk.%d.fc1.weight", l);
            gguf_add_tensor(w, nm, GGML_TYPE_F32, 2, n1, fc1);
            snprintf(nm, sizeof nm, "blk.%d.fc2.weight", l);
            gguf_add_tensor(w, nm, GGML_TYPE_F32, 2, n2, fc2);
        } else {
            gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
        }
    }
    const char *path = th_tmp(name);
    int rc = gguf_writer_write(w, path, err, sizeof err);
    gguf_writer_free(w);
    gguf_close(f);
    free(down_t);
    free(fc1);
    free(fc2);
    return rc ? NULL : path;
}

static void test_predictor(void)
{
    hc_model *dm = load(model_path("relu", GGML_TYPE_F32, 0));
    hc_model *zm = load(pwri_model(model_path("relu", GGML_TYPE_F32, 0), "pz.gguf", 0.0f)), *rm = load(pwri_model(model_path("relu", GGML_TYPE_F32, 0), "pr.gguf", 1.0f));
    CHECK(dm && zm && rm && zm->layers[0].ffn_down_t.kind == HC_WEIGHT_GGML);
    static run_out dense, o;
    CHECK(run(dm, NULL, 2, &dense) == 0);
    size_t n = (size_t)NPROMPT * dm->hp.n_vocab;
    /* p = 0 >= 0: every neuron a candidate, the ReLU skip keeps it exact */
    hc_sparse *s = new_sparse(zm, 0.0f, 1, 1);
    CHECK(s && hc_sparse_uses_predictor(s));
    CHECK(run(zm, s, 2, &o) == 0);
    hc_sparse_stats st = hc_sparse_get_stats(s, -1);
    CHECKF(rel_diff(o.logits, dense.logits, n) < 1e-4 && memcmp(o.gen, dense.gen, sizeof o.gen) == 0 &&
           st.predicted == st.tokens * FF && st.hit == st.truth, "all-active predictor differs from dense");
    hc_sparse_free(s);
    /* p = 0 < 1e-3: nothing computed; the FFN adds nothing */
    s = new_sparse(zm, 1e-3f, 1, 1);
    CHECK(run(zm, s, 2, &o) == 0);
    st = hc_sparse_get_stats(s, -1);
    CHECK(st.computed == 0 && st.predicted == 0 && st.hit == 0 && st.truth > 0);
    CHECK(rel_diff(o.logits, dense.logits, n) > 1e-3);
    hc_sparse_free(s);
    /* a random predictor: some neurons chosen, recall strictly between 0 and 1;
     * the same run split with a device gives the same logits */
    static run_out cpu;
    s = new_sparse(rm, 0.0f, 1, 1);
    CHECK(run(rm, s, 2, &cpu) == 0);
    st = hc_sparse_get_stats(s, -1);
    double recall = (double)st.hit / (double)st.truth;
    CHECKF(st.predicted > 0 && st.predicted < st.tokens * FF && recall > 0.05 && recall < 0.95 &&
           st.computed <= st.predicted, "predicted %llu, recall %.3f", (unsigned long long)st.predicted, recall);
    hc_sparse_free(s);
    char err[512];
    hc_gpuidx *g = hc_gpuidx_load(write_gpuidx("pm.gpuidx", NL, FF, on_mixed, 0), NL, FF, err, sizeof err);
    s = new_sparse(rm, 0.0f, 1, 1);
    hc_cl *cl = g && s ? hc_hybrid_setup(s, rm, g, NULL, 0, err, sizeof err) : NULL;
    CHECKF(cl, "%s", err);
    CHECK(run(rm, s, 2, &o) == 0);
    hc_sparse_stats sh = hc_sparse_get_stats(s, -1);
    CHECKF(rel_diff(o.logits, cpu.logits, n) < 1e-4 && sh.hit == st.hit && sh.computed == st.computed && sh.served_dev > 0,
           "hybrid predictor: %g, hit %llu vs %llu", rel_diff(o.logits, cpu.logits, n),
           (unsigned long long)sh.hit, (unsigned long long)st.hit);
    hc_sparse_free(s);
    hc_cl_free(cl);
    hc_gpuidx_free(g);
    hc_model_free(dm);
    hc_model_free(zm);
    hc_model_free(rm);
}

/* ------------------------------------------------------------ SiLU threshold */

static void test_silu_threshold(void)
{
    const char *path = model_path("silu", GGML_TYPE_F32, 0);
    CHECK(path);
    hc_model *m = load(path);
    CHECK(m && m->hp.act == HC_ACT_SILU);
    static run_out dense, o;
    CHECK(run(m, NULL, 2, &dense) == 0);
    size_t n = (size_t)NPROMPT * m->hp.n_vocab;
    hc_sparse *s = new_sparse(m, 0.0f, 0, 0);
    CHECK(run(m, s, 2, &o) == 0);
    hc_sparse_stats st = hc_sparse_get_stats(s, -1);
    CHECKF(st.computed == st.tokens * FF && rel_diff(o.logits, dense.logits, n) < 1e-4, "threshold 0 is not dense");
    hc_sparse_free(s);
    double prev_skip = 0, prev_d = 0;
    const float ts[2] = { 0.02f, 0.2f };
    for (int i = 0; i < 2; i++) {
        s = new_sparse(m, ts[i], 0, 1);
        CHECK(run(m, s, 2, &o) == 0);
        st = hc_sparse_get_stats(s, -1);
        double skip = 1.0 - (double)st.computed / ((double)st.tokens * FF), d = rel_diff(o.logits, dense.logits, n);
        CHECKF(skip > prev_skip && d > prev_d && d < 0.5 && st.hit < st.truth,
               "T %g: skipped %.3f, logits %g", ts[i], skip, d);
        prev_skip = skip;
        prev_d = d;
        hc_sparse_free(s);
    }
    hc_model_free(m);
}

/* ------------------------------------------------------------ hc-run */

static void test_cli(void)
{
    const char *path = model_path("relu", GGML_TYPE_Q4_0, 1);
    CHECK(path);
    const char *gi = write_gpuidx("cli.gpuidx", NL, FF, on_mixed, 0);
    const char *run = th_bin("hc-run");
    CHECK(th_sh("%s -m %s -p hello -n 8 --temp 0 -t 2 --dense > %s", run, path, th_tmp("dense.txt")) == 0);
    /* a budget that holds the whole model (the device's): all of it runs
     * there, the index is not needed */
    CHECKF(th_sh("%s -m %s -p hello -n 8 --temp 0 -t 2 --gpu-index %s > %s", run, path, gi, th_tmp("full.txt")) == 0,
           "%s", th_last_err());
    const char *e = th_last_err();
    CHECKF(strstr(e, "opencl: device 0: '") && strstr(e, "offload: 2 of 2 layers (attention, norms, KV cache), the "
           "output head, every FFN neuron on the device") && strstr(e, "not needed: every FFN neuron"), "%s", e);
    CHECK(th_sh("cmp %s %s", th_tmp("dense.txt"), th_tmp("full.txt")) == 0);
    /* a budget of the dense part and the index's hot rows, as hc-solve
     * prices them: the layers on the device, the cold neurons on the CPU */
    char err[512];
    hc_model *m = load(path);
    hc_sparse *s = new_sparse(m, 0.0f, 0, 0);
    hc_gpuidx *g = hc_gpuidx_load(gi, NL, FF, err, sizeof err);
    hc_budget b;
    CHECKF(g && hc_budget_read(&b, m->file, -1, 2 * HC_BUDGET_KV_BYTES, err, sizeof err) == 0, "%s", err);
    unsigned long long budget = b.fixed_total + hc_hybrid_bytes(m, s, g);
    hc_budget_free(&b);
    hc_gpuidx_free(g);
    hc_sparse_free(s);
    hc_model_free(m);
    CHECKF(th_sh("%s -m %s -p hello -n 8 --temp 0 -t 2 --gpu-index %s --vram-budget %llu --verbose > %s", run, path,
                 gi, budget, th_tmp("hy.txt")) == 0, "%s", th_last_err());
    e = th_last_err();
    CHECKF(strstr(e, "offload: 2 of 2 layers (attention, norms, KV cache), the output head on the device") &&
           strstr(e, "device served") && strstr(e, "layer  1: skipped"), "%s", e);
    CHECK(th_sh("cmp %s %s", th_tmp("dense.txt"), th_tmp("hy.txt")) == 0);
    /* the model's default index, as PowerInfer looks for it: used on a GPU; on a
     * CPU OpenCL device (PoCL) not used unasked, said in one line, same text */
    CHECK(th_sh("cp %s %s.generated.gpuidx && %s -m %s -p hello -n 8 --temp 0 -t 2 > %s", gi, path, run, path,
                th_tmp("auto.txt")) == 0);
    e = th_last_err();
    int served = strstr(e, "device served") != NULL, cpu = strstr(e, "is a CPU device") != NULL;
    CHECKF(strstr(e, "generated.gpuidx") && served != cpu, "%s", e);
    if (cpu) CHECKF(strstr(e, "(--gpu-index FILE forces it)\n") && !strstr(e, "opencl: device"), "%s", e);
    CHECK(th_sh("cmp %s %s", th_tmp("dense.txt"), th_tmp("auto.txt")) == 0);
    CHECK(th_sh("rm %s.generated.gpuidx", path) == 0);
    /* no OpenCL platform: CPU only, same text */
    CHECKF(th_sh("OCL_ICD_VENDORS=%s OCL_ICD_FILENAMES= %s -m %s -p hello -n 8 --temp 0 --gpu-index %s > %s",
                 th_tmpdir(), run, path, gi, th_tmp("cpu.txt")) == 0, "%s", th_last_err());
    CHECKF(strstr(th_last_err(), "running on the CPU only"), "%s", th_last_err());
    CHECK(th_sh("cmp %s %s", th_tmp("dense.txt"), th_tmp("cpu.txt")) == 0);
    /* budget too small: CPU only, said so */
    CHECK(th_sh("%s -m %s -p hi -n 2 --gpu-index %s --vram-budget 1K", run, path, gi) == 0);
    CHECKF(strstr(th_last_err(), "--vram-budget 1.0 KiB; its neurons run on the CPU"), "%s", th_last_err());
    /* an index for another model, a corrupt one: refused, one line, exit 1 */
    const char *other = write_gpuidx("other.gpuidx", 3, FF, on_mixed, 0);
    CHECK(th_sh("%s -m %s -p hi -n 2 --gpu-index %s", run, path, other) == 1);
    const char *line = strstr(th_last_err(), "hc-run: ");
    CHECKF(line && strstr(line, "other.gpuidx: index for 3 layers, the model has 2\n") &&
           strchr(line, '\n') == line + strlen(line) - 1, "%s", th_last_err());
    const char *c = write_gpuidx("c.gpuidx", NL, FF, on_mixed, 1);
    CHECK(th_sh("%s -m %s -p hi -n 2 --gpu-index %s", run, path, c) == 1 && strstr(th_last_err(), "not ascending"));
}

/* Listing and choosing the device: --list-devices marks the one a run uses,
 * --device N and HC_OPENCL_DEVICE choose it, a number that is not listed is
 * refused in one line (so is an HC_CL_DP4A other than 0 or 1); a vendor library without its ICD file is named with
 * how to register it, and not once an ICD file names it. */
static void test_devices(void)
{
    const char *run = th_bin("hc-run");
    if (th_sh("%s --list-devices", run) != 0) SKIP("no OpenCL platform");
    CHECKF(strstr(th_last_out(), "* device 0: '"), "%s", th_last_out());
    CHECK(th_sh("HC_OPENCL_DEVICE=0 %s --list-devices", run) == 0 && strstr(th_last_out(), "* device 0: '"));
    CHECK(th_sh("HC_OPENCL_DEVICE=31 %s --list-devices", run) == 1);
    CHECKF(strstr(th_last_err(), "HC_OPENCL_DEVICE 31: no such OpenCL device ("), "%s", th_last_err());
    CHECK(th_sh("HC_OPENCL_DEVICE=0 %s --list-devices --device 31", run) == 1);
    CHECKF(strstr(th_last_err(), "--device 31: no such OpenCL device ("), "%s", th_last_err());
    const char *path = model_path("relu", GGML_TYPE_F16, 1);
    const char *gi = write_gpuidx("dev.gpuidx", NL, FF, on_mixed, 0);
    CHECK(path && gi);
    CHECK(th_sh("%s -m %s -p hi -n 2 --gpu-index %s --device 31", run, path, gi) == 1);
    CHECKF(strstr(th_last_err(), "--device 31: no such OpenCL device"), "%s", th_last_err());
    CHECK(th_sh("%s -m %s -p hi -n 2 --gpu-index %s --device 0", run, path, gi) == 0);
    CHECKF(strstr(th_last_err(), "opencl: device 0: '"), "%s", th_last_err());
    /* the variable as the option: refused, not a run on the CPU (unless -ngl 0 asks for none) */
    CHECK(th_sh("HC_OPENCL_DEVICE=31 %s -m %s -p hi -n 2", run, path) == 1);
    CHECKF(strstr(th_last_err(), "HC_OPENCL_DEVICE 31: no such OpenCL device"), "%s", th_last_err());
    CHECK(th_sh("HC_OPENCL_DEVICE=31 %s -m %s -p hi -n 2 -ngl 0", run, path) == 0);
    CHECK(th_sh("HC_CL_DP4A=yes %s -m %s -p hi -n 2 --gpu-index %s --device 0", run, path, gi) == 1);
    CHECKF(strstr(th_last_err(), "HC_CL_DP4A: 'yes' is not 0 or 1"), "%s", th_last_err());

    char lib[512], icd[512];
    snprintf(lib, sizeof lib, "%s/libnvidia-opencl.so.1", th_tmpdir());
    snprintf(icd, sizeof icd, "%s/icd", th_tmpdir());
    CHECK(th_write(lib, "", 0) == 0 && th_sh("mkdir -p %s && echo %s > %s/nvidia.icd", icd, lib, icd) == 0);
    th_sh("LD_LIBRARY_PATH=%s %s --list-devices", th_tmpdir(), run);
    if (strstr(th_last_out(), "GPU)")) SKIP("a GPU is listed: no hint is due");
    CHECKF(strstr(th_last_err(), "libnvidia-opencl.so.1 is installed but no ICD file names it") &&
           strstr(th_last_err(), "/etc/OpenCL/vendors/nvidia.icd"), "%s", th_last_err());
    th_sh("LD_LIBRARY_PATH=%s OCL_ICD_VENDORS=%s %s --list-devices", th_tmpdir(), icd, run);
    CHECKF(!strstr(th_last_err(), "no ICD file names it"), "%s", th_last_err());
}

int main(void)
{
    RUN(test_kernels_vs_ref);
    RUN(test_launch_geometry);
    RUN(test_gpuidx_validation);
    RUN(test_sparse_cpu_equals_dense);
    RUN(test_hybrid_equals_dense);
    RUN(test_gptq_equals_dense);
    RUN(test_budget_fallback);
    RUN(test_batch_equals_rows);
    RUN(test_predictor);
    RUN(test_silu_threshold);
    RUN(test_cli);
    RUN(test_devices);
    return th_done();
}

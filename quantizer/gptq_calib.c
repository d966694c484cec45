/* Calibration through the project's runtime, one block at a time, as the
 * reference's llama_sequential with --true-sequential (docs/design/gptq.md,
 * "Calibration"): the block's inputs are the outputs of the already-quantized
 * blocks before it; within a block the linears are quantized in four stages
 * (q/k/v, output, gate/up, down), and before each stage the block is re-run
 * on its inputs with the earlier stages' quantized weights in place, so
 * every layer's Hessian comes from the inputs it will really see. Layers
 * that read one input (q/k/v; gate/up) share one Hessian. Falcon's fused
 * attn_qkv (one input) is quantized as the one layer it is, and its Q, K
 * and V views then read its dequantized rows. After the last stage one more
 * run gives the next block's inputs.
 *
 * Windows: the text is tokenized without BOS and cut into windows of ctx
 * tokens, each BOS followed by ctx-1 text tokens, at most calib_tokens in all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "gptq.h"
#include "model.h"
#include "tokenizer.h"

enum { N_STAGES = 4 };

/* The stage of each block linear (in model order) and its hook point. */
static const struct {
    const char *name;
    size_t off;               /* hc_weight in hc_layer */
    int stage;
} linears[] = {
    { "attn_q", offsetof(hc_layer, attn_q), 0 },     { "attn_k", offsetof(hc_layer, attn_k), 0 },
    { "attn_v", offsetof(hc_layer, attn_v), 0 },     { "attn_output", offsetof(hc_layer, attn_output), 1 },
    { "ffn_gate", offsetof(hc_layer, ffn_gate), 2 }, { "ffn_up", offsetof(hc_layer, ffn_up), 2 },
    { "ffn_down", offsetof(hc_layer, ffn_down), 3 },
};
enum { N_LINEARS = sizeof linears / sizeof linears[0] };
static const int stage_point[N_STAGES] = { HC_HOOK_ATTN_IN, HC_HOOK_ATTN_OUT, HC_HOOK_FFN_IN, HC_HOOK_FFN_ACT };

typedef struct {
    int layer, point;         /* what to capture (point -1: nothing) */
    float *X;                 /* [T][n] */
    size_t base;              /* first row of the current window */
} capture;

static void capture_hook(void *user, int layer, int point, const float *x, int B, int n, int pos0)
{
    capture *c = user;
    if (layer == c->layer && point == c->point)
        memcpy(c->X + (c->base + (size_t)pos0) * (size_t)n, x, sizeof(float) * (size_t)B * (size_t)n);
}

/* Run block l over every window of xs[T][E]: in place, or on a scratch copy
 * when `keep` (a capture pass that must not change the block's inputs). */
static void run_block(hc_ctx *ctx, capture *cap, int l, float *xs, int windows, int C, int keep, float *scratch)
{
    const size_t E = (size_t)hc_ctx_model(ctx)->hp.n_embd;
    const int n_batch = hc_ctx_n_batch(ctx);
    for (int w = 0; w < windows; w++) {
        float *x = xs + (size_t)w * C * E;
        if (keep) x = memcpy(scratch, x, sizeof(float) * (size_t)C * E);
        cap->base = (size_t)w * C;
        for (int p = 0; p < C; p += n_batch) {
            int B = C - p < n_batch ? C - p : n_batch;
            hc_layer_forward(ctx, l, x + (size_t)p * E, B, p);
        }
    }
}

/* Tokens of the calibration windows, BOS first in each. */
static int32_t *calib_tokens(const hc_model *m, const gptq_calib_opts *co, gptq_run *run, char *err, size_t errlen)
{
    size_t len;
    char *text = hc_read_file(co->calib, &len, err, errlen);
    if (!text) return NULL;
    run->corpus_hash = hc_fnv1a64(text, len, HC_FNV_INIT);
    hc_tokenizer *tok = hc_model_tokenizer(m, err, errlen);
    int32_t *all = NULL, *out = NULL;
    int n = tok ? hc_tokenize(tok, text, len, 0, 0, NULL, 0) : -1;
    if (tok && n >= 0 && (all = malloc(sizeof *all * (size_t)(n ? n : 1))) &&
        hc_tokenize(tok, text, len, 0, 0, all, n) == n) {
        const int C = co->ctx;
        int windows = n / (C - 1);
        if (windows > co->calib_tokens / C) windows = co->calib_tokens / C;
        if (windows < 1) {
            snprintf(err, errlen, "%s: %d tokens, too few for one calibration window of --ctx %d "
                     "(with --calib-tokens %d)", co->calib, n, C, co->calib_tokens);
        } else if ((out = malloc(sizeof *out * (size_t)windows * C))) {
            for (int w = 0; w < windows; w++) {
                out[(size_t)w * C] = hc_tokenizer_bos(tok);
                memcpy(out + (size_t)w * C + 1, all + (size_t)w * (C - 1), sizeof *out * (size_t)(C - 1));
            }
            run->windows = windows;
            run->tokens = windows * C;
        }
    } else if (tok) {
        snprintf(err, errlen, "%s: cannot tokenize: %s", co->calib, hc_tokenize_error());
    }
    if (tok && !out && !err[0]) snprintf(err, errlen, "%s: out of memory", co->calib);
    free(all);
    free(text);
    hc_tokenizer_free(tok);
    return out;
}

/* Quantize one weight on Hessian H (NULL: RTN), put the dequantized copy in its place. */
static int quantize_one(hc_pool *pool, hc_weight *w, const char *name, const float *H, const float *X, int T,
                        const gptq_calib_opts *co, gptq_result *r, char *err, size_t errlen)
{
    const double t0 = hc_now();
    const int N = w->rows, K = w->n, G = gptq_groups(K, co->p.group_size);
    float *W = malloc(sizeof(float) * (size_t)N * K);
    float *Hc = H ? malloc(sizeof(float) * (size_t)K * K) : NULL;
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->N = N;
    r->K = K;
    r->codes = malloc((size_t)N * K);
    r->grids = malloc(sizeof *r->grids * (size_t)G * N);
    r->deq = malloc(sizeof(float) * (size_t)N * K);
    if (!W || (H && !Hc) || !r->codes || !r->grids || !r->deq) {
        free(W);
        free(Hc);
        snprintf(err, errlen, "%s: out of memory for %s", co->calib, name);
        return -1;
    }
    for (int n = 0; n < N; n++) hc_weight_row(w, n, W + (size_t)n * K);
    if (Hc) memcpy(Hc, H, sizeof(float) * (size_t)K * K);
    gptq_stats st;
    char lerr[256];
    int rc = gptq_quantize_layer(pool, W, N, K, Hc, &co->p, r->codes, r->grids, &st, lerr, sizeof lerr);
    free(Hc);
    if (rc != 0) {
        free(W);
        snprintf(err, errlen, "%s: %s: %s", co->calib, name, lerr);
        return -1;
    }
    if (st.damp != co->p.damp)
        hc_warn("%s: Cholesky failed with --damp %g; used %g", name, (double)co->p.damp, (double)st.damp);
    gptq_dequant(r->codes, r->grids, N, K, co->p.group_size, r->deq);
    r->rel_err = gptq_rel_error(pool, W, r->deq, N, K, X, T);
    free(W);
    *w = (hc_weight){ .kind = HC_WEIGHT_GGML, .type = GGML_TYPE_F32, .data = r->deq, .n = K, .rows = N };
    r->seconds = hc_now() - t0;
    if (!co->quiet)
        printf("gptq: %-28s [%5d x %5d] rel. error %.5f  %s%.2f s\n", name, N, K, r->rel_err,
               st.dead ? "dead columns " : "", r->seconds);
    return 0;
}

void gptq_run_free(gptq_run *run)
{
    for (int i = 0; i < run->n_res; i++) {
        free(run->res[i].codes);
        free(run->res[i].grids);
        free(run->res[i].deq);
    }
    free(run->res);
    memset(run, 0, sizeof *run);
}

/* The embeddings of every window's tokens into xs[W * C][n_embd]. */
static void embed_windows(hc_ctx *ctx, const int32_t *toks, int W, int C, float *xs)
{
    const size_t E = (size_t)hc_ctx_model(ctx)->hp.n_embd;
    const int n_batch = hc_ctx_n_batch(ctx);
    for (int w = 0; w < W; w++)
        for (int p = 0; p < C; p += n_batch) {
            int B = C - p < n_batch ? C - p : n_batch;
            hc_embed(ctx, toks + (size_t)w * C + p, B, p, xs + ((size_t)w * C + (size_t)p) * E);
        }
}

/* Falcon's fused attn_qkv of block l (ly's q, k, v are views of its rows,
 * runtime/model.c) as one weight on H, the views then reading its
 * dequantized rows; appended to run->res. */
static int quantize_qkv(hc_pool *pool, hc_layer *ly, int l, const float *X, float *H, int T, const gptq_calib_opts *co,
                        gptq_run *run, char *err, size_t errlen)
{
    hc_weight qkv = ly->attn_q;
    qkv.rows = ly->attn_q.rows + ly->attn_k.rows + ly->attn_v.rows;
    if (qkv.n % co->min_cols_multiple) return 0;
    char name[GGUF_MAX_NAME + 1];
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", l);
    if (H) gptq_hessian(pool, X, T, qkv.n, H);
    int rc = quantize_one(pool, &qkv, name, H, X, T, co, &run->res[run->n_res], err, errlen);
    run->n_res++;   /* on failure: frees what it allocated */
    if (rc != 0) return -1;
    hc_weight *views[3] = { &ly->attn_q, &ly->attn_k, &ly->attn_v };
    for (int i = 0, r0 = 0; i < 3; r0 += views[i]->rows, i++) {
        views[i]->data = (const float *)qkv.data + (size_t)r0 * (size_t)qkv.n;
        views[i]->type = GGML_TYPE_F32;
    }
    return 0;
}

/* Quantize the linears of stage s of block l (ly) on the captured inputs
 * X[T][.] and their Hessian (H NULL: RTN), appending to run->res; `fused`:
 * q, k and v are the rows of one attn_qkv. */
static int quantize_stage(hc_pool *pool, hc_layer *ly, int l, int s, int fused, const float *X, float *H, int T,
                          const gptq_calib_opts *co, gptq_run *run, hc_progress *pr, char *err, size_t errlen)
{
    int hessian_done = 0;
    if (s == 0 && fused) {
        hc_progress_update(pr, (uint64_t)l * N_LINEARS + 3);
        return quantize_qkv(pool, ly, l, X, H, T, co, run, err, errlen);
    }
    for (int i = 0; i < N_LINEARS; i++) {
        if (linears[i].stage != s) continue;
        hc_weight *w = (hc_weight *)((char *)ly + linears[i].off);
        if (w->kind == HC_WEIGHT_NONE) continue;     /* no gate in a sequential FFN */
        char name[GGUF_MAX_NAME + 1];
        snprintf(name, sizeof name, "blk.%d.%s.weight", l, linears[i].name);
        if (w->n % co->min_cols_multiple == 0) {
            if (H && !hessian_done) gptq_hessian(pool, X, T, w->n, H);
            hessian_done = 1;
            if (quantize_one(pool, w, name, H, X, T, co, &run->res[run->n_res], err, errlen) != 0) {
                run->n_res++;   /* frees what it allocated */
                return -1;
            }
            run->n_res++;
        }
        hc_progress_update(pr, (uint64_t)l * N_LINEARS + (uint64_t)i + 1);
    }
    return 0;
}

int gptq_calibrate(const char *path, const gptq_calib_opts *co, gptq_run *run, char *err, size_t errlen)
{
    memset(run, 0, sizeof *run);
    err[0] = 0;
    hc_model *m = hc_model_load(path, err, errlen);
    if (!m) return -1;
    const hc_hparams *hp = &m->hp;
    const int C = co->ctx, L = hp->n_layer;
    hc_ctx *ctx = NULL;
    int32_t *toks = NULL;
    float *xs = NULL, *scratch = NULL, *X = NULL, *H = NULL;
    int rc = -1;
    if (C < 2 || C > hp->n_ctx_train) {
        snprintf(err, errlen, "--ctx %d: must be 2..%d (the model's context_length)", C, hp->n_ctx_train);
        goto done;
    }
    for (int l = 0; l < L; l++)
        if (m->layers[l].ffn_down.kind == HC_WEIGHT_NONE) {
            snprintf(err, errlen, "%s: blk.%d has no ffn_down.weight (PowerInfer ffn_down_t is not supported)", path, l);
            goto done;
        }
    const int fused = gguf_find_tensor(m->file, "blk.0.attn_qkv.weight") >= 0;
    if (!(toks = calib_tokens(m, co, run, err, errlen))) goto done;
    const int T = run->tokens, W = run->windows;
    capture cap = { .point = -1 };
    hc_ctx_params cp = { .n_ctx = C, .n_batch = C < 512 ? C : 512, .n_threads = co->nthreads,
                         .hook = capture_hook, .hook_user = &cap };
    if (!(ctx = hc_ctx_new(m, &cp, err, errlen))) goto done;
    const size_t E = (size_t)hp->n_embd;
    size_t widest = (size_t)hp->n_ff > (size_t)hp->n_head * hp->head_dim ? (size_t)hp->n_ff : (size_t)hp->n_head * hp->head_dim;
    if (widest < E) widest = E;
    xs = malloc(sizeof(float) * (size_t)T * E);
    scratch = malloc(sizeof(float) * (size_t)C * E);
    X = malloc(sizeof(float) * (size_t)T * widest);
    H = co->rtn ? NULL : malloc(sizeof(float) * widest * widest);
    run->res = calloc((size_t)L * N_LINEARS, sizeof *run->res);
    if (!xs || !scratch || !X || (!co->rtn && !H) || !run->res) {
        snprintf(err, errlen, "%s: out of memory for %d calibration tokens", co->calib, T);
        goto done;
    }
    embed_windows(ctx, toks, W, C, xs);
    cap.X = X;
    hc_progress pr;
    hc_progress_start(&pr, "gptq", (uint64_t)L * N_LINEARS, "weights");
    for (int l = 0; l < L; l++) {
        for (int s = 0; s < N_STAGES; s++) {
            cap.layer = l;
            cap.point = stage_point[s];
            run_block(ctx, &cap, l, xs, W, C, 1, scratch);
            cap.point = -1;
            if (quantize_stage(hc_ctx_pool(ctx), &m->layers[l], l, s, fused, X, H, T, co, run, &pr, err, errlen) != 0) {
                hc_progress_end(&pr);
                goto done;
            }
        }
        run_block(ctx, &cap, l, xs, W, C, 0, NULL);   /* inputs of block l+1 */
    }
    hc_progress_end(&pr);
    rc = 0;
done:
    if (rc != 0) gptq_run_free(run);
    free(toks);
    free(xs);
    free(scratch);
    free(X);
    free(H);
    hc_ctx_free(ctx);
    hc_model_free(m);
    return rc;
}

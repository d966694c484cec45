/* The forward pass in the order it runs: the context, embedding, attention,
 * the layer, the FFN call, output and hc_eval. Each step is one call of the
 * backend its layer runs on (backend.h: the CPU's in runtime/cpu/, a
 * device's in runtime/opencl/); this file says what to compute, as llama2.c's
 * forward() does, and moves the residual stream between backends where the
 * placement (place.h) changes. The CPU's numerics follow run.c (RMSNorm, RoPE,
 * softmax written the same way) so greedy decoding matches it token for token. */
#include "forward.h"
#include "blocks.h"
#include "budget.h"
#include "cli.h"
#include "cpu/cpu.h"
#include "ctx_internal.h"
#include "place.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t max_act_bytes(const hc_model *m)
{
    size_t b = hc_weight_act_bytes(&m->output);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const hc_layer *ly = &m->layers[il];
        const hc_weight *ws[] = { &ly->attn_q, &ly->attn_k, &ly->attn_v, &ly->attn_output,
                                  &ly->ffn_gate, &ly->ffn_up, &ly->ffn_down };
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
            if (ws[i]->kind != HC_WEIGHT_NONE && hc_weight_act_bytes(ws[i]) > b) b = hc_weight_act_bytes(ws[i]);
    }
    return b;
}

/* Rotation frequencies of a head's pairs: run.c's 1 / base^(i / head_size)
 * for even i. Rope scaling (hp->rope_scaling) divides them: linear by
 * rope.scaling.factor, llama3 by each pair's rope_freqs.weight factor. */
static void rope_freqs(const hc_model *m, float *freq)
{
    const hc_hparams *hp = &m->hp;
    for (int i = 0; i < hp->head_dim; i += 2)
        freq[i / 2] = 1.0f / powf(hp->rope_base, (float)i / (float)hp->head_dim);
    for (int i = 0; i < hp->head_dim / 2; i++) {
        switch ((enum hc_rope_scaling)hp->rope_scaling) {
        case HC_ROPE_SCALING_NONE: break;
        case HC_ROPE_SCALING_LINEAR: freq[i] /= hp->rope_scale; break;
        case HC_ROPE_SCALING_FACTORS: freq[i] /= m->rope_factors[i]; break;
        }
    }
}

/* The batch rows on backend R->be, one allocation carved into views, and
 * the K and V cache of the layers with on[l] set. -1 + err. */
static int rows_new(hc_ctx *ctx, hc_rows *R, hc_backend *be, const uint8_t *on, char *err, size_t errlen)
{
    const hc_hparams *hp = &ctx->model->hp;
    const hc_backend_ops *op = be->ops;
    size_t nb = (size_t)ctx->n_batch, E = (size_t)hp->n_embd, F = (size_t)hp->n_ff;
    size_t Qd = (size_t)hp->n_head * (size_t)hp->head_dim, KV = (size_t)hp->n_head_kv * (size_t)hp->head_dim;
    /* each view 64-byte aligned: floats rounded up to 16 */
#define ROUND16(n) (((n) + 15) & ~(size_t)15)
    /* the logits of every row on a device (the CPU writes them to the caller's memory) */
    size_t logits = R == &ctx->rows[HC_ON_CPU] ? 0 : nb * (size_t)hp->n_vocab;
    size_t sizes[] = { nb * E, nb * E, nb * E, nb * E, nb * Qd, nb * Qd, nb * KV, nb * KV, nb * F, nb * F, logits };
    hc_view *views[] = { &R->x, &R->xn, &R->tmp, &R->tmp2, &R->q, &R->att, &R->k, &R->v, &R->ffn[0], &R->ffn[1],
                         &R->logits };
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) total += ROUND16(sizes[i]);
    R->be = be;
    if (!(R->buf = op->buf_new(be, total * sizeof(float), err, errlen))) return -1;
    size_t at = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        *views[i] = (hc_view){ R->buf, at * sizeof(float) };
        at += ROUND16(sizes[i]);
    }
#undef ROUND16
    if (op->pinned_new) {
        if (!(R->pinned = op->pinned_new(be, 3 * nb * E * sizeof(float), err, errlen))) return -1;
        R->stage = op->pinned_host(R->pinned);
    }
    R->rope_freq = (hc_bvec){ ctx->rope_freq, hp->head_dim / 2, NULL };
    if (op->vec_new && !(R->rope_freq.dev = op->vec_new(be, ctx->rope_freq, hp->head_dim / 2, err, errlen))) return -1;
    return (R->kv = op->kv_new(be, hp, ctx->n_kv_blocks, ctx->n_kv_warm, ctx->kv_block, ctx->n_ctx, on, ctx->type_k,
                               ctx->type_v, err, errlen)) ? 0 : -1;
}

static void rows_free(hc_rows *R)
{
    if (!R->be) return;
    const hc_backend_ops *op = R->be->ops;
    if (R->kv) op->kv_free(R->be, R->kv);
    if (R->rope_freq.dev) op->dev_free(R->be, R->rope_freq.dev);
    if (R->buf) op->buf_free(R->be, R->buf);
    if (R->pinned) op->buf_free(R->be, R->pinned);
    memset(R, 0, sizeof *R);
}

/* Every layer and the head as the CPU reads them (the host weights). */
static void host_layer(const hc_model *m, int il, hc_blayer *b)
{
    const hc_hparams *hp = &m->hp;
    const hc_layer *ly = &m->layers[il];
    int E = hp->n_embd, F = hp->n_ff, Qd = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    memset(b, 0, sizeof *b);
    b->attn_norm = (hc_bvec){ ly->attn_norm, E, NULL };
    b->attn_norm_b = (hc_bvec){ ly->attn_norm_b, E, NULL };
    b->ffn_norm = (hc_bvec){ ly->ffn_norm, E, NULL };
    b->ffn_norm_b = (hc_bvec){ ly->ffn_norm_b, E, NULL };
    b->q_b = (hc_bvec){ ly->attn_q_b, Qd, NULL };
    b->k_b = (hc_bvec){ ly->attn_k_b, KV, NULL };
    b->v_b = (hc_bvec){ ly->attn_v_b, KV, NULL };
    b->o_b = (hc_bvec){ ly->attn_output_b, E, NULL };
    b->gate_b = (hc_bvec){ ly->ffn_gate_b, F, NULL };
    b->up_b = (hc_bvec){ ly->ffn_up_b, F, NULL };
    b->down_b = (hc_bvec){ ly->ffn_down_b, E, NULL };
    b->q = (hc_bmat){ &ly->attn_q, NULL };
    b->k = (hc_bmat){ &ly->attn_k, NULL };
    b->v = (hc_bmat){ &ly->attn_v, NULL };
    b->o = (hc_bmat){ &ly->attn_output, NULL };
    b->gate = (hc_bmat){ &ly->ffn_gate, NULL };
    b->up = (hc_bmat){ &ly->ffn_up, NULL };
    b->down_t = ly->ffn_down.kind == HC_WEIGHT_NONE;
    b->down = (hc_bmat){ b->down_t ? &ly->ffn_down_t : &ly->ffn_down, NULL };
}

void hc_host_layers(const hc_model *m, hc_blayer *layers, hc_blayer *head)
{
    for (int il = 0; il < m->hp.n_layer; il++) host_layer(m, il, &layers[il]);
    memset(head, 0, sizeof *head);
    head->attn_norm = (hc_bvec){ m->output_norm, m->hp.n_embd, NULL };
    head->attn_norm_b = (hc_bvec){ m->output_norm_b, m->hp.n_embd, NULL };
    head->o = (hc_bmat){ &m->output, NULL };
}

/* Everything on the CPU from now on: the device's rows and cache dropped. */
static void all_on_cpu(hc_ctx *ctx)
{
    rows_free(&ctx->rows[HC_ON_DEV]);
    hc_host_layers(ctx->model, ctx->layers, &ctx->head);
}

hc_ctx *hc_ctx_new(const hc_model *m, const hc_ctx_params *p, char *err, size_t errlen)
{
    const hc_hparams *hp = &m->hp;
    int n_ctx = p && p->n_ctx > 0 ? p->n_ctx : (hp->n_ctx_train < 2048 ? hp->n_ctx_train : 2048);
    if (n_ctx > hp->n_ctx_train) {
        snprintf(err, errlen, "%s: context %d exceeds the model's context_length %d", m->path, n_ctx, hp->n_ctx_train);
        return NULL;
    }
    if (hp->sliding_window && n_ctx > hp->sliding_window) {
        snprintf(err, errlen, "%s: context %d exceeds attention.sliding_window %d (sliding-window attention is "
                 "not implemented; use -c %d or less)", m->path, n_ctx, hp->sliding_window, hp->sliding_window);
        return NULL;
    }
    int kv_block = p && p->kv_block ? p->kv_block : HC_KV_BLOCK;
    uint32_t type_k = p ? p->type_k : GGML_TYPE_F32, type_v = p ? p->type_v : GGML_TYPE_F32;
    if ((type_k != GGML_TYPE_F32 && type_k != GGML_TYPE_F16) || (type_v != GGML_TYPE_F32 && type_v != GGML_TYPE_F16)) {
        snprintf(err, errlen, "a KV cache of %s is not implemented (f32 or f16)",
                 ggml_type_name(type_k != GGML_TYPE_F32 && type_k != GGML_TYPE_F16 ? type_k : type_v));
        return NULL;
    }
    if (kv_block < HC_KV_BLOCK_MIN || kv_block > HC_KV_BLOCK_MAX || (kv_block & (kv_block - 1))) {
        snprintf(err, errlen, "a KV block of %d positions: not a power of two from %d to %d", kv_block,
                 HC_KV_BLOCK_MIN, HC_KV_BLOCK_MAX);
        return NULL;
    }
    /* hc_eval's sequence: the blocks 0.. of its positions */
    int max_blocks = hc_blocks_for(n_ctx, kv_block);
    int n_kv_blocks = p && p->n_kv_blocks > 0 ? p->n_kv_blocks : max_blocks;
    int n_batch = p && p->n_batch > 0 ? p->n_batch : 512;
    if (n_batch > n_kv_blocks * kv_block) n_batch = n_kv_blocks * kv_block;   /* a slot for each row */
    if (n_batch > n_ctx && n_kv_blocks == max_blocks) n_batch = n_ctx;
    int nt = p && p->n_threads > 0 ? p->n_threads : 1;
    const hc_place *place = p && !p->hook ? p->place : NULL;   /* hooks read every row on the host */

    hc_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) goto oom;
    ctx->model = m;
    ctx->n_ctx = n_ctx;
    ctx->n_batch = n_batch;
    ctx->n_kv_blocks = n_kv_blocks;
    ctx->n_kv_warm = p && p->n_kv_warm > 0 ? (p->n_kv_warm < n_kv_blocks ? p->n_kv_warm : n_kv_blocks)
                     : n_kv_blocks <= max_blocks ? n_kv_blocks : 0;
    ctx->kv_block = kv_block;
    ctx->type_k = type_k;
    ctx->type_v = type_v;
    if (p) {
        ctx->hook = p->hook;
        ctx->hook_user = p->hook_user;
        ctx->ffn = p->ffn;
        ctx->ffn_user = p->ffn_user;
    }
    ctx->pool = hc_pool_new(nt);
    ctx->layers = calloc((size_t)hp->n_layer, sizeof *ctx->layers);
    ctx->history = calloc((size_t)n_ctx, sizeof *ctx->history);
    ctx->table = malloc(sizeof *ctx->table * (size_t)max_blocks);
    ctx->pos = malloc(sizeof *ctx->pos * (size_t)n_batch);
    ctx->seq = calloc((size_t)n_batch, sizeof *ctx->seq);
    ctx->rope_freq = malloc(sizeof(float) * (size_t)hp->head_dim / 2);
    ctx->h = ctx->hook ? hc_cpu_alloc(sizeof(float) * (size_t)n_batch * (size_t)hp->n_ff) : NULL;
    if (!ctx->pool || !ctx->layers || !ctx->history || !ctx->table || !ctx->pos || !ctx->seq || !ctx->rope_freq ||
        (ctx->hook && !ctx->h))
        goto oom;
    for (int i = 0; i < max_blocks; i++) ctx->table[i] = i;
    rope_freqs(m, ctx->rope_freq);
    hc_backend *cpu = hc_cpu_backend_new(ctx);
    if (!cpu || rows_new(ctx, &ctx->rows[HC_ON_CPU], cpu, NULL, err, errlen)) {
        if (!cpu) goto oom;
        ctx->rows[HC_ON_CPU].be = cpu;
        hc_ctx_free(ctx);
        return NULL;
    }
    hc_ctx_acts(ctx, 0, max_act_bytes(m));
    memset(ctx->acts, 0, ctx->act_stride * (size_t)n_batch);   /* pages made now, not in the first product */
    memset(ctx->acts2, 0, ctx->act_stride * (size_t)n_batch);
    hc_host_layers(m, ctx->layers, &ctx->head);
    if (place && hc_place_attach(place, ctx->layers, &ctx->head, &ctx->dev_name) &&
        rows_new(ctx, &ctx->rows[HC_ON_DEV], hc_place_device(place), hc_place_kv_layers(place), ctx->err,
                 sizeof ctx->err)) {   /* e.g. no room for this context's cache: the CPU runs it */
        hc_warn("%s: %s; this context runs on the CPU", ctx->dev_name, ctx->err);
        all_on_cpu(ctx);
    }
    return ctx;
oom:
    snprintf(err, errlen, "%s: out of memory for a context of %d tokens", m->path, n_ctx);
    hc_ctx_free(ctx);
    return NULL;
}

void hc_ctx_free(hc_ctx *ctx)
{
    if (!ctx) return;
    rows_free(&ctx->rows[HC_ON_DEV]);
    hc_backend *cpu = ctx->rows[HC_ON_CPU].be;
    rows_free(&ctx->rows[HC_ON_CPU]);
    if (cpu) cpu->ops->free(cpu);
    if (ctx->pool) hc_pool_free(ctx->pool);
    void *bufs[] = { ctx->layers, ctx->history, ctx->table, ctx->pos, ctx->seq, ctx->rope_freq, ctx->h, ctx->acts,
                     ctx->acts2, ctx->arranged };
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(ctx);
}

const hc_model *hc_ctx_model(const hc_ctx *ctx) { return ctx->model; }
int hc_ctx_n_batch(const hc_ctx *ctx) { return ctx->n_batch; }
int hc_ctx_kv_block(const hc_ctx *ctx) { return ctx->kv_block; }
int hc_ctx_kv_bytes(const hc_ctx *ctx) { return hc_kv_bytes(ctx->type_k, ctx->type_v); }
hc_pool *hc_ctx_pool(hc_ctx *ctx) { return ctx->pool; }
const char *hc_ctx_error(const hc_ctx *ctx) { return ctx->err; }
float *hc_ctx_ffn_scratch(hc_ctx *ctx, int which) { return hc_cpu_ptr(ctx->rows[HC_ON_CPU].ffn[which != 0]); }
size_t hc_ctx_act_stride(const hc_ctx *ctx) { return ctx->act_stride; }
int hc_ctx_on_device(const hc_ctx *ctx) { return ctx->rows[HC_ON_DEV].be != NULL; }
hc_view hc_ctx_ffn_device_share(const hc_ctx *ctx) { return ctx->ffn_share; }
void hc_ctx_ffn_left_on_device(hc_ctx *ctx) { ctx->ffn_share_left = ctx->ffn_share.buf != NULL; }

void hc_add_bias(float *y, const float *bias, int B, int n)
{
    if (!bias) return;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n; i++) y[(size_t)b * n + i] += bias[i];
}

/* ------------------------------------------------------------ the layers */

/* The hook on B rows from the step's row row0 (hooks see the position of
 * the first: a context with a hook evaluates one sequence, hc_eval). */
static void hook(hc_ctx *ctx, int layer, int point, hc_view x, int B, int n, int row0)
{
    /* a context with a hook runs on the CPU (hc_ctx_new) */
    if (ctx->hook) ctx->hook(ctx->hook_user, layer, point, hc_cpu_ptr(x), B, n, ctx->step->pos[row0]);
}

/* x[B][n_embd] = the embeddings of tokens at positions pos[] */
static void embed(hc_ctx *ctx, const int32_t *tokens, int B, const int32_t *pos, float *x)
{
    const hc_model *m = ctx->model;
    int E = m->hp.n_embd;
    for (int b = 0; b < B; b++) hc_weight_row(&m->token_embd, tokens[b], x + (size_t)b * E);
    if (m->hp.pos != HC_POS_LEARNED) return;
    float *row = hc_cpu_ptr(ctx->rows[HC_ON_CPU].tmp);
    for (int b = 0; b < B; b++) {
        hc_weight_row(&m->pos_embd, pos[b], row);
        for (int i = 0; i < E; i++) x[(size_t)b * E + i] += row[i];
    }
}

/* The step's rows for B tokens of hc_eval's sequence at pos0.. (sequence 0,
 * its blocks 0.. in order), given to the backends. */
static const hc_seq_rows *one_sequence(hc_ctx *ctx, int B, int pos0)
{
    for (int b = 0; b < B; b++) ctx->pos[b] = pos0 + b;
    ctx->one = (hc_seq_rows){ B, ctx->pos, ctx->seq, ctx->table, 1, hc_blocks_for(ctx->n_ctx, ctx->kv_block),
                               ctx->kv_block };
    return &ctx->one;
}

/* The step's rows, to every backend of the context. */
static void set_step(hc_ctx *ctx, const hc_seq_rows *rows)
{
    ctx->step = rows;
    for (int i = 0; i < 2; i++)
        if (ctx->rows[i].be) ctx->rows[i].be->ops->batch(ctx->rows[i].be, rows);
}

void hc_embed(hc_ctx *ctx, const int32_t *tokens, int B, int pos0, float *x)
{
    embed(ctx, tokens, B, one_sequence(ctx, B, pos0)->pos, x);
}

/* out[keep][n_embd] = the attention block of the last keep of R->x's B rows
 * (the step's rows), or (add) out += it; the k and v of all B go to the
 * cache. */
static void attention(hc_ctx *ctx, int layer, const hc_rows *R, int B, int keep, hc_view out, int add)
{
    const hc_hparams *hp = &ctx->model->hp;
    const hc_blayer *ly = &ctx->layers[layer];
    hc_backend *be = R->be;
    const hc_backend_ops *op = be->ops;
    int E = hp->n_embd, kv_dim = hp->n_head_kv * hp->head_dim, q_dim = hp->n_head * hp->head_dim;
    int row_keep = B - keep;

    op->norm(be, hp, &ly->attn_norm, &ly->attn_norm_b, R->x, R->xn, B);
    hook(ctx, layer, HC_HOOK_ATTN_IN, R->xn, B, E, 0);
    hc_mm qkv[3] = { { &ly->q, B - keep, 0, R->q, (size_t)q_dim, 0 }, { &ly->k, 0, 0, R->k, (size_t)kv_dim, 0 },
                     { &ly->v, 0, 0, R->v, (size_t)kv_dim, 0 } };
    op->matmul(be, R->xn, B, keep ? qkv : qkv + 1, keep ? 3 : 2);
    op->add_bias(be, R->q, &ly->q_b, keep, q_dim);
    op->add_bias(be, R->k, &ly->k_b, B, kv_dim);
    op->add_bias(be, R->v, &ly->v_b, B, kv_dim);
    const hc_rope_rows kq[2] = { { R->k, kv_dim, B, 0 }, { R->q, q_dim, keep, row_keep } };
    op->rope(be, hp, &R->rope_freq, kq, keep ? 2 : 1);
    op->kv_store(be, R->kv, layer, B, R->k, R->v);
    if (!keep) return;
    op->attention(be, R->kv, layer, hp, R->q, row_keep, keep, R->att);
    hook(ctx, layer, HC_HOOK_ATTN_OUT, R->att, keep, q_dim, row_keep);
    if (add && !ly->o_b.host) {   /* the product added onto out by its own launch */
        op->matmul(be, R->att, keep, &(hc_mm){ &ly->o, 0, 0, out, (size_t)E, 1 }, 1);
        return;
    }
    hc_view o = add ? R->tmp2 : out;
    op->matmul(be, R->att, keep, &(hc_mm){ &ly->o, 0, 0, o, (size_t)E, 0 }, 1);
    op->add_bias(be, o, &ly->o_b, keep, E);
    if (add) op->add(be, out, o, (hc_view){ NULL, 0 }, (size_t)keep * (size_t)E);
}

/* hc_ffn_forward on the step's rows from row0 */
static void ffn_forward(hc_ctx *ctx, int layer, const float *ffn_inp, const float *x_norm, int B, int row0, float *out)
{
    float *h = ctx->hook ? ctx->h : NULL;
    if (ctx->ffn) ctx->ffn(ctx->ffn_user, ctx, layer, ffn_inp, x_norm, B, out, h);
    else hc_ffn_dense(ctx, layer, x_norm, B, out, h);
    if (h) hook(ctx, layer, HC_HOOK_FFN_ACT, hc_cpu_view(h), B, ctx->model->hp.n_ff, row0);
}

void hc_ffn_forward(hc_ctx *ctx, int layer, const float *ffn_inp, const float *x_norm, int B, int pos0, float *out)
{
    one_sequence(ctx, B, pos0);
    ctx->step = &ctx->one;
    ffn_forward(ctx, layer, ffn_inp, x_norm, B, 0, out);
}

/* out[B][n_embd] = the context's FFN of R's rows x (its norm in R->xn) on
 * the CPU, from a device: the CPU receives x and its norm and sends back its
 * result (one exchange), which the device adds to the share the FFN left
 * there (hc_ctx_ffn_device_share: the hot rows). -1 when a read failed. */
static int ffn_exchange(hc_ctx *ctx, int layer, const hc_rows *R, hc_view x, int B, int row0, hc_view out)
{
    const hc_hparams *hp = &ctx->model->hp;
    const hc_backend_ops *op = R->be->ops;
    size_t bytes = sizeof(float) * (size_t)B * (size_t)hp->n_embd;
    size_t nE = (size_t)ctx->n_batch * (size_t)hp->n_embd;
    float *hx = R->stage, *hxn = hx + nE, *hout = hxn + nE;   /* pinned where the device has it */
    if (op->read(R->be, x, hx, bytes, ctx->err, sizeof ctx->err) ||
        op->read(R->be, R->xn, hxn, bytes, ctx->err, sizeof ctx->err))
        return -1;   /* hc_eval finds the failure at the step's sync */
    ctx->ffn_share = out;
    ctx->ffn_share_left = 0;
    ffn_forward(ctx, layer, hx, hxn, B, row0, hout);
    ctx->ffn_share = (hc_view){ NULL, 0 };
    /* sent, not waited for: hout is next written after the next layer's read */
    if (!ctx->ffn_share_left) {
        op->send(R->be, out, hout, bytes);
        return 0;
    }
    /* xn was read: its rows take the CPU's share */
    op->send(R->be, R->xn, hout, bytes);
    op->add(R->be, out, R->xn, (hc_view){ NULL, 0 }, (size_t)B * (size_t)hp->n_embd);
    return 0;
}

/* out[B][n_embd] = the FFN block of R's rows x, or (add) out += it: its
 * norm, then the dense FFN where the layer's FFN weights are, or the
 * context's FFN (or the dense one) on the CPU (ffn_exchange from a device).
 * The dense FFN adds its down product onto out itself where there is no
 * bias to add first. */
static void ffn_block(hc_ctx *ctx, int layer, const hc_rows *R, hc_view x, int B, int row0, hc_view out, int add)
{
    const hc_hparams *hp = &ctx->model->hp;
    const hc_blayer *ly = &ctx->layers[layer];
    const hc_backend_ops *op = R->be->ops;
    hook(ctx, layer, HC_HOOK_FFN_INP, x, B, hp->n_embd, row0);
    op->norm(R->be, hp, &ly->ffn_norm, &ly->ffn_norm_b, x, R->xn, B);
    hook(ctx, layer, HC_HOOK_FFN_IN, R->xn, B, hp->n_embd, row0);
    int on_cpu = R->be == ctx->rows[HC_ON_CPU].be, dense = ly->ffn_dev || (on_cpu && !ctx->ffn && !ctx->hook);
    if (dense && (!add || !ly->down_b.host)) {
        hc_ffn_dense_on(ctx, R, ly, R->xn, B, R->ffn[0], out, add);
        return;
    }
    hc_view o = add ? R->tmp : out;
    if (dense) hc_ffn_dense_on(ctx, R, ly, R->xn, B, R->ffn[0], o, 0);
    else if (on_cpu) ffn_forward(ctx, layer, hc_cpu_ptr(x), hc_cpu_ptr(R->xn), B, row0, hc_cpu_ptr(o));
    else if (ffn_exchange(ctx, layer, R, x, B, row0, o)) return;
    if (add) op->add(R->be, out, o, (hc_view){ NULL, 0 }, (size_t)B * (size_t)hp->n_embd);
}

/* The rows where the layer (or the head) runs, with the residual stream's
 * last n of B rows (the ones still needed) moved there when it is on the
 * other backend (*at). */
static const hc_rows *rows_for(hc_ctx *ctx, int dev, int *at, int B, int n)
{
    const hc_rows *R = &ctx->rows[dev], *from = &ctx->rows[*at];
    if (dev != *at) {
        size_t row = sizeof(float) * (size_t)ctx->model->hp.n_embd, bytes = row * (size_t)n;
        hc_view dst = hc_view_at(R->x, row * (size_t)(B - n)), src = hc_view_at(from->x, row * (size_t)(B - n));
        if (dev == HC_ON_DEV) R->be->ops->write(R->be, dst, hc_cpu_ptr(src), bytes);
        else from->be->ops->read(from->be, src, hc_cpu_ptr(dst), bytes, ctx->err, sizeof ctx->err);
        *at = dev;
    }
    return R;
}

/* The layer on the residual stream's B rows in place, keeping only the
 * last keep: the others only leave their k and v in the cache (the rest of
 * them would feed nothing after the last layer, which is where hc_eval asks
 * for keep < B, as llama.cpp does). Each kept row gets the same bits as with
 * keep = B. */
static void layer_forward(hc_ctx *ctx, int layer, int *at, int B, int keep)
{
    const hc_rows *R = rows_for(ctx, ctx->layers[layer].dev, at, B, B);
    const hc_backend_ops *op = R->be->ops;
    size_t E = (size_t)ctx->model->hp.n_embd, n = (size_t)keep * E;
    hc_view xk = hc_view_at(R->x, sizeof(float) * (size_t)(B - keep) * E);
    const int sequential = ctx->model->hp.residual == HC_RESIDUAL_SEQUENTIAL;
    attention(ctx, layer, R, B, keep, sequential ? xk : R->tmp, sequential);   /* x += attn(norm(x)) */
    if (!keep) return;
    if (sequential) {   /* x += ffn(norm2(x)) */
        ffn_block(ctx, layer, R, xk, keep, B - keep, xk, 1);
    } else {   /* Falcon: x += ffn(norm2(x)) + attn(norm(x)) */
        ffn_block(ctx, layer, R, xk, keep, B - keep, R->tmp2, 0);
        op->add(R->be, xk, R->tmp2, R->tmp, n);
    }
    if (op->flush) op->flush(R->be);
}

/* The pieces of hc_eval run on the CPU, for contexts made without a
 * placement (model.h). */
static void pieces_on_cpu(const hc_ctx *ctx, const char *what)
{
    if (hc_ctx_on_device(ctx)) hc_die("%s: a context placed on a device runs only hc_eval", what);
}

void hc_layer_forward(hc_ctx *ctx, int layer, float *x, int B, int pos0)
{
    const hc_rows *C = &ctx->rows[HC_ON_CPU];
    size_t bytes = sizeof(float) * (size_t)B * (size_t)ctx->model->hp.n_embd;
    int at = HC_ON_CPU;
    pieces_on_cpu(ctx, "hc_layer_forward");
    memcpy(hc_cpu_ptr(C->x), x, bytes);
    set_step(ctx, one_sequence(ctx, B, pos0));
    layer_forward(ctx, layer, &at, B, B);
    memcpy(x, hc_cpu_ptr(C->x), bytes);
}

/* logits[B][n_vocab] of R's rows x: the final norm, the output head. */
static void output(hc_ctx *ctx, const hc_rows *R, hc_view x, int B, hc_view logits)
{
    const hc_backend_ops *op = R->be->ops;
    op->norm(R->be, &ctx->model->hp, &ctx->head.attn_norm, &ctx->head.attn_norm_b, x, R->xn, B);
    op->matmul(R->be, R->xn, B, &(hc_mm){ &ctx->head.o, 0, 0, logits, (size_t)ctx->model->hp.n_vocab, 0 }, 1);
}

void hc_output(hc_ctx *ctx, const float *x, int B, float *logits)
{
    pieces_on_cpu(ctx, "hc_output");
    output(ctx, &ctx->rows[HC_ON_CPU], hc_cpu_view(x), B, hc_cpu_view(logits));
}

/* ------------------------------------------------------------ evaluation */

/* One step of the rows' tokens: embedding on the host, the layers where each
 * runs (the last one for the last keep_last rows only), the logits of the
 * last n_out rows back on the host. -1 when a device failed (the line in
 * ctx->err). */
static int eval_batch(hc_ctx *ctx, const int32_t *tokens, const hc_seq_rows *rows, int keep_last, int n_out,
                      float *logits)
{
    const hc_hparams *hp = &ctx->model->hp;
    int at = HC_ON_CPU, B = rows->B;
    set_step(ctx, rows);
    embed(ctx, tokens, B, rows->pos, hc_cpu_ptr(ctx->rows[HC_ON_CPU].x));
    for (int il = 0; il < hp->n_layer; il++) layer_forward(ctx, il, &at, B, il == hp->n_layer - 1 ? keep_last : B);
    if (n_out) {
        const hc_rows *R = rows_for(ctx, ctx->head.dev, &at, B, n_out);
        hc_view x = hc_view_at(R->x, sizeof(float) * (size_t)(B - n_out) * (size_t)hp->n_embd);
        if (R->be == ctx->rows[HC_ON_CPU].be) {
            output(ctx, R, x, n_out, hc_cpu_view(logits));
        } else {
            output(ctx, R, x, n_out, R->logits);
            if (R->be->ops->read(R->be, R->logits, logits, sizeof(float) * (size_t)n_out * (size_t)hp->n_vocab,
                                 ctx->err, sizeof ctx->err))
                return -1;
        }
    }
    const hc_rows *D = &ctx->rows[HC_ON_DEV];
    return D->be && D->be->ops->sync(D->be, ctx->err, sizeof ctx->err) ? -1 : 0;
}

/* B tokens of hc_eval's sequence at pos0, the last of the s in hc_eval's call when last */
static int eval_one(hc_ctx *ctx, const int32_t *tokens, int B, int pos0, int last, float *logits, int which)
{
    /* HC_LOGITS_LAST without a hook: the last layer only for the row whose logits are wanted */
    int keep_last = which == HC_LOGITS_LAST && !ctx->hook ? last : B;
    int n_out = which == HC_LOGITS_ALL ? B : which == HC_LOGITS_LAST && last ? 1 : 0;
    return eval_batch(ctx, tokens, one_sequence(ctx, B, pos0), keep_last, n_out, logits);
}

/* Device failures. The device's work is dropped and everything runs on
 * the CPU from here on: the cache of positions 0..pos0-1 is rebuilt there
 * from the tokens evaluated (ctx->history), so the output is what a CPU-only
 * run gives. */
static void device_failed(hc_ctx *ctx, int pos0)
{
    hc_warn("%s: %s; running on the CPU from here on (the KV cache of %d positions recomputed there)",
            ctx->dev_name ? ctx->dev_name : "device", ctx->err, pos0);
    all_on_cpu(ctx);
    for (int s = 0; s < pos0; s += ctx->n_batch) {
        int B = pos0 - s < ctx->n_batch ? pos0 - s : ctx->n_batch;
        eval_one(ctx, ctx->history + s, B, s, 0, NULL, HC_LOGITS_NONE);
    }
}

/* 0, or -1 with the reason when one of the n rows of logits is not finite:
 * weights with NaN or infinities (hc-quantize and hc-profile refuse them
 * too) would otherwise run on and sample garbage. */
static int finite_logits(hc_ctx *ctx, const float *logits, int n)
{
    const int V = ctx->model->hp.n_vocab;
    for (size_t i = 0; i < (size_t)n * (size_t)V; i++)
        if (!isfinite(logits[i])) {
            snprintf(ctx->err, sizeof ctx->err, "%s: the logits are not finite (logit %d = %g): the weights hold "
                     "NaN or infinite values, or the activations overflow", ctx->model->path, (int)(i % (size_t)V),
                     logits[i]);
            return -1;
        }
    return 0;
}

int hc_eval(hc_ctx *ctx, const int32_t *tokens, int n_tokens, int pos0, float *logits, int which)
{
    const hc_hparams *hp = &ctx->model->hp;
    if (n_tokens < 0 || pos0 < 0 || pos0 > ctx->n_ctx - n_tokens) {
        snprintf(ctx->err, sizeof ctx->err, "positions %d..%d do not fit the context of %d tokens",
                 pos0, pos0 + n_tokens - 1, ctx->n_ctx);
        return -1;
    }
    for (int i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab) {
            snprintf(ctx->err, sizeof ctx->err, "token id %d is outside the vocabulary of %d", tokens[i], hp->n_vocab);
            return -1;
        }
    memcpy(ctx->history + pos0, tokens, sizeof *tokens * (size_t)n_tokens);
    for (int s = 0; s < n_tokens; s += ctx->n_batch) {
        int B = n_tokens - s < ctx->n_batch ? n_tokens - s : ctx->n_batch, last = s + B == n_tokens;
        float *out = which == HC_LOGITS_ALL ? logits + (size_t)s * (size_t)hp->n_vocab : logits;
        if (eval_one(ctx, tokens + s, B, pos0 + s, last, out, which)) {
            device_failed(ctx, pos0 + s);
            eval_one(ctx, tokens + s, B, pos0 + s, last, out, which);
        }
    }
    return finite_logits(ctx, logits, which == HC_LOGITS_ALL ? n_tokens : which == HC_LOGITS_LAST && n_tokens > 0);
}

/* A device failed under hc_eval_rows or hc_ctx_kv_copy: 1, the context on the CPU. */
static int rows_device_failed(hc_ctx *ctx)
{
    hc_warn("%s: %s; running on the CPU from here on (every sequence's KV cache recomputed there)",
            ctx->dev_name ? ctx->dev_name : "device", ctx->err);
    all_on_cpu(ctx);
    return 1;
}

int hc_eval_rows(hc_ctx *ctx, const int32_t *tokens, const hc_seq_rows *rows, int n_out, float *logits)
{
    /* a hook reads every row of the last layer */
    if (eval_batch(ctx, tokens, rows, ctx->hook ? rows->B : n_out, n_out, logits)) return rows_device_failed(ctx);
    return finite_logits(ctx, logits, n_out);
}

int hc_ctx_kv_copy(hc_ctx *ctx, const int32_t *ids, int n, void *host, int out)
{
    const hc_hparams *hp = &ctx->model->hp;
    size_t layer = (size_t)n * (size_t)hc_ctx_kv_bytes(ctx) * (size_t)ctx->kv_block * (size_t)hp->n_head_kv *
                   (size_t)hp->head_dim;   /* bytes */
    for (int l = 0; l < hp->n_layer; l++) {
        const hc_rows *R = &ctx->rows[ctx->layers[l].dev];
        if (R->be->ops->kv_copy(R->be, R->kv, l, ids, n, (char *)host + (size_t)l * layer, out, ctx->err,
                                sizeof ctx->err))
            return rows_device_failed(ctx);
    }
    return 0;
}

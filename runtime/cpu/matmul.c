/* Threaded products: prepared activations and the products of a weight with
 * B vectors, split over the context's thread pool (see matmul.h). */
#include "matmul.h"

#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "ctx_internal.h"
#include "ggml_types.h"
#include "kernels.h"

#define COL_UNIT 32      /* a quant block: column ranges start on block boundaries */

/* bytes aligned to 64 for the kernels' vector loads; out of memory exits. */
static void *buffer64(size_t bytes, const char *what)
{
    void *p;
    if (posix_memalign(&p, 64, bytes)) hc_die("out of memory for %s (%zu bytes)", what, bytes);
    return p;
}

void *hc_ctx_acts(hc_ctx *ctx, int second, size_t stride)
{
    if (stride > ctx->act_stride) {
        free(ctx->acts);
        free(ctx->acts2);
        ctx->act_stride = (stride + 63) & ~(size_t)63;
        size_t bytes = ctx->act_stride * (size_t)ctx->n_batch;
        ctx->acts = buffer64(bytes, "activations");
        ctx->acts2 = buffer64(bytes, "activations");
    }
    return second ? ctx->acts2 : ctx->acts;
}

/* Rows of a batch prepared (x given) or arranged (x NULL: acts into xa),
 * split over the pool: a row's bytes do not depend on the split. Serial
 * before every product, they were 1.5 % of a 128-token prompt's time at
 * one thread, 3 % at two (docs/design/runtime.md). Their work is weighed in
 * multiply-adds (hc_pool_chunks): rounding an element to int8 about 8, an
 * arranged byte about 4; counted as 1, a step of 8 sequences prepared and
 * arranged its 4096-wide activations on one thread while the other waited
 * (with the norms, 4 % of that thread's samples). */
#define PREPARE_WORK 8
#define ARRANGE_WORK 4
typedef struct {
    const hc_weight *w;
    int isa;
    const float *x;
    const char *acts;
    char *xa;
    size_t act_stride, xs;
} rows_prep;

static void prep_rows(void *arg, int lo, int hi)
{
    const rows_prep *t = arg;
    if (!t->x) {
        hc_weight_arrange(t->w, t->isa, t->acts + (size_t)lo * t->act_stride, t->act_stride, hi - lo,
                          t->xa + (size_t)lo * t->xs);
        return;
    }
    for (int b = lo; b < hi; b++)
        hc_weight_prepare(t->w, t->isa, t->x + (size_t)b * (size_t)t->w->n, t->xa + (size_t)b * t->xs);
}

void hc_ctx_prepare(hc_ctx *ctx, const hc_weight *w, const float *x, int B, void *acts)
{
    rows_prep t = { w, hc_isa(), x, NULL, acts, ctx->act_stride, ctx->act_stride };
    hc_pool_ranges(ctx->pool, prep_rows, &t, B, (size_t)B * (size_t)w->n * PREPARE_WORK);
}

/* The B prepared activations at acts as w's kernels on isa read them: arranged
 * once for the whole product into the context's buffer (every thread reads
 * it), or acts itself when the kernels need no arrangement. *xs: the stride. */
static const void *arranged(hc_ctx *ctx, const hc_weight *w, int isa, const void *acts, int B, size_t *xs)
{
    size_t ab = hc_weight_arranged_bytes(w, isa), need = ab * (size_t)B;
    *xs = ctx->act_stride;
    if (!ab) return acts;
    if (need > ctx->arranged_cap) {
        free(ctx->arranged);
        ctx->arranged = buffer64(need, "arranged activations");
        ctx->arranged_cap = need;
    }
    rows_prep t = { w, isa, NULL, acts, ctx->arranged, ctx->act_stride, ab };
    hc_pool_ranges(ctx->pool, prep_rows, &t, B, need * ARRANGE_WORK);
    *xs = ab;
    return ctx->arranged;
}

typedef struct {
    const hc_weight *w[HC_MATVEC_MANY];   /* the products, their rows end to end (each from a multiple of */
    float *y[HC_MATVEC_MANY];             /* ROW_UNIT: start[p]) */
    int start[HC_MATVEC_MANY + 1], n_w;
    int isa;
    const void *xa;          /* the activations the kernels read (see arranged) */
    size_t xs, y_stride;
    int B, n_chunks, regions;   /* chunk c computes the rows hc_pool_run_range gives it */
} matvec_task;

static void matvec_chunk(void *arg, int chunk, int ith)
{
    const matvec_task *t = arg;
    int lo, hi;
    (void)ith;
    hc_pool_run_range(t->start[t->n_w], ROW_UNIT, chunk, t->n_chunks, t->regions, &lo, &hi);
    for (int p = 0; p < t->n_w; p++) {
        int a = lo > t->start[p] ? lo - t->start[p] : 0, b = hi - t->start[p];
        if (b > t->w[p]->rows) b = t->w[p]->rows;
        if (a < b) hc_weight_matvec(t->w[p], t->isa, a, b, t->xa, t->xs, t->B, t->y[p] + a, t->y_stride);
    }
}

/* Decode (B = 1) reads the rows once, from memory: the row pieces go in one
 * run per thread, dealt in turn (hc_pool_run_range), so that each thread
 * reads its own part of the matrix as one ascending stream while a chunk
 * stays about 1/(4·threads) of the product (a thread descheduled on a busy
 * machine still holds back only its chunk). At two threads that made Q8_0,
 * Q4_0 and GPTQ tokens about 1 % faster (0-5 %) than pieces taken in order,
 * the float types within +-1 % (docs/design/kernels.md, "Two threads"). A
 * run's pieces shrink (4, 3, 2, 1 tenths at two threads), so that the thread
 * that ends first waits at most a tenth of the other's run: the two threads'
 * waits in a Q4_0 decode went from 620-676 to 522-545 of ~13 000 samples
 * (docs/design/kernels.md, "Two threads"). B > 1 takes equal pieces in
 * order. Which thread computes a row never changes its bits. */
void hc_pool_matvec_many(hc_pool *pool, const hc_weight *const *w, float *const *y, int n, int isa, const void *xa,
                         size_t xs, int B, size_t y_stride)
{
    matvec_task t = { .n_w = n, .isa = isa, .xa = xa, .xs = xs, .y_stride = y_stride, .B = B };
    size_t work = 0;
    for (int p = 0; p < n; p++) {
        t.w[p] = w[p];
        t.y[p] = y[p];
        t.start[p + 1] = t.start[p] + (w[p]->rows + ROW_UNIT - 1) / ROW_UNIT * ROW_UNIT;
        work += (size_t)w[p]->rows * (size_t)w[p]->n * (size_t)B;
    }
    t.n_chunks = hc_pool_chunks(pool, t.start[n] / ROW_UNIT, work);
    t.regions = B == 1 ? hc_pool_size(pool) : 1;
    hc_pool_run(pool, matvec_chunk, &t, t.n_chunks);
}

void hc_pool_matvec(hc_pool *pool, const hc_weight *w, int isa, const void *xa, size_t xs, int B, float *y,
                    size_t y_stride)
{
    hc_pool_matvec_many(pool, &w, &y, 1, isa, xa, xs, B, y_stride);
}

int hc_matvec_joins(const hc_weight *a, const hc_weight *b)
{
    return a->type == b->type && a->kind == b->kind && a->n == b->n && hc_weight_same_act(a, b);
}

void hc_ctx_matvec_many(hc_ctx *ctx, const hc_weight *const *w, const void *acts, int B, float *const *y,
                        size_t y_stride, int n)
{
    int isa = hc_isa();
    size_t xs;
    const void *xa = arranged(ctx, w[0], isa, acts, B, &xs);
    hc_pool_matvec_many(ctx->pool, w, y, n, isa, xa, xs, B, y_stride);
}

void hc_ctx_matvec_prepared(hc_ctx *ctx, const hc_weight *w, const void *acts, int B, float *y, size_t y_stride)
{
    hc_ctx_matvec_many(ctx, &w, acts, B, &y, y_stride, 1);
}

void hc_ctx_matvec(hc_ctx *ctx, const hc_weight *w, const float *x, int B, float *y)
{
    void *acts = hc_ctx_acts(ctx, 0, hc_weight_act_bytes(w));
    hc_ctx_prepare(ctx, w, x, B, acts);
    hc_ctx_matvec_prepared(ctx, w, acts, B, y, (size_t)w->rows);
}

typedef struct {
    const hc_weight *w;      /* one row of n_embd per neuron */
    const int32_t *idx;      /* NULL: neurons 0..k-1 */
    const float *h;          /* [B][h_stride], value i belongs to neuron idx[i] (or i) */
    size_t h_stride;
    int k, B, n_chunks, unit;
    const int32_t *nz_b;     /* B > 1: the rows with non-zero h of list position i, nz_b[nz_at[i] ..] */
    const float *nz_h;       /* and their h */
    const size_t *nz_at;     /* [k + 1] */
    float *out;              /* [B][n_embd] += */
    int slab;                /* B > 1: columns per slab */
    float *pack;             /* B > 1: [pool size][B][slab], or NULL (no memory: out itself) */
} down_rows_task;

/* A chunk is a column range of the output, to which the neurons are added in
 * list order, so the sums are the same for any thread count. Zero
 * activations (ReLU) skip their row. B > 1 (prompts): each neuron's row is
 * read once for all the rows b of the batch with non-zero h (the multi-token
 * AXPY, kernels.h), from per-neuron lists made once, over slabs of columns
 * small enough that the B output slabs stay in L2 while the neurons are
 * added. The B slabs are packed side by side in the thread's buffer for
 * that: in the output they lie n_embd floats apart (16 KiB for 4096), all
 * in the same few cache sets, and the AXPY waited on them (58 % of a
 * 935-token sparse prompt's samples, docs/measurements.md). Each output
 * still gets its neurons in list order, so B > 1 gives the same bits as
 * B = 1 row by row. */
#define DOWN_SLAB 512
#define DOWN_OUT_BYTES (256 * 1024)   /* the B output slabs of one slab of columns */
static int down_slab(int B)
{
    int slab = (int)(DOWN_OUT_BYTES / sizeof(float) / (size_t)B) / COL_UNIT * COL_UNIT;
    return slab < COL_UNIT ? COL_UNIT : slab > DOWN_SLAB ? DOWN_SLAB : slab;
}

/* Columns [c0, c0 + n) of the B rows of out (n_embd floats apart) to or from
 * pack's B rows of n (to: pack from out). */
static void pack_slab(float *out, size_t E, float *pack, int B, int c0, int n, int to)
{
    for (int b = 0; b < B; b++) {
        float *o = out + (size_t)b * E + c0, *p = pack + (size_t)b * (size_t)n;
        memcpy(to ? p : o, to ? o : p, sizeof(float) * (size_t)n);
    }
}

static void down_chunk(void *arg, int chunk, int ith)
{
    const down_rows_task *t = arg;
    int E = t->w->n, lo, hi;
    hc_split(E, t->unit, chunk, t->n_chunks, &lo, &hi);
    if (lo >= hi) return;
    /* the traits entry's kernel, straight to the instruction set's row AXPY */
    int isa = hc_isa();
    const hc_kernel *kern = hc_kernel_for(t->w, isa);
    if (t->B == 1) {
        int next = 0;   /* the next listed neuron with non-zero h, its row fetched ahead */
        while (next < t->k && t->h[next] == 0.0f) next++;
        while (next < t->k) {
            int i = next++;
            while (next < t->k && t->h[next] == 0.0f) next++;
            if (next < t->k && t->idx) hc_weight_prefetch(t->w, t->idx[next], lo, hi);
            kern->axpy(t->w, t->idx ? t->idx[i] : i, lo, hi, t->h[i], t->out + lo);
        }
        return;
    }
    float *pack = t->pack ? t->pack + (size_t)ith * (size_t)t->B * (size_t)t->slab : NULL;
    for (int c0 = lo; c0 < hi; c0 += t->slab) {
        int c1 = c0 + t->slab < hi ? c0 + t->slab : hi;
        float *y = pack ? pack : t->out + c0;
        size_t ys = pack ? (size_t)(c1 - c0) : (size_t)E;
        if (pack) pack_slab(t->out, (size_t)E, pack, t->B, c0, c1 - c0, 1);
        for (int i = 0; i < t->k; i++) {
            size_t p = t->nz_at[i], n = t->nz_at[i + 1] - p;
            if (i + 1 < t->k) hc_weight_prefetch(t->w, t->idx ? t->idx[i + 1] : i + 1, c0, c1);
            if (n)
                hc_weight_axpy_multi(t->w, isa, t->idx ? t->idx[i] : i, c0, c1, (int)n, t->nz_h + p, t->nz_b + p, y,
                                     ys);
        }
        if (pack) pack_slab(t->out, (size_t)E, pack, t->B, c0, c1 - c0, 0);
    }
}

/* The rows b (ascending) with non-zero h of each list position i < k:
 * nz_b/nz_h[nz_at[i] .. nz_at[i + 1]). Counted, then filled, row by row
 * (h's rows are far apart; walking a column touches a line per row). */
static void nonzero_lists(const float *h, size_t h_stride, int k, int B, int32_t *nz_b, float *nz_h, size_t *nz_at)
{
    memset(nz_at, 0, sizeof(size_t) * ((size_t)k + 1));
    for (int b = 0; b < B; b++) {
        const float *hb = h + (size_t)b * h_stride;
        for (int i = 0; i < k; i++) nz_at[i + 1] += hb[i] != 0.0f;
    }
    for (int i = 0; i < k; i++) nz_at[i + 1] += nz_at[i];
    /* fill with nz_at[i] as position i's cursor, which ends at nz_at[i + 1]; then shift back */
    for (int b = 0; b < B; b++) {
        const float *hb = h + (size_t)b * h_stride;
        for (int i = 0; i < k; i++)
            if (hb[i] != 0.0f) {
                size_t p = nz_at[i]++;
                nz_b[p] = b;
                nz_h[p] = hb[i];
            }
    }
    for (int i = k; i > 0; i--) nz_at[i] = nz_at[i - 1];
    nz_at[0] = 0;
}

void hc_ctx_down_accum(hc_ctx *ctx, const hc_weight *w, const int32_t *idx, const float *h, size_t h_stride,
                       int k, int B, float *out)
{
    if (k <= 0) return;
    size_t work = (size_t)k * (size_t)w->n * (size_t)B;
    int unit = COL_UNIT;
    int32_t *nz_b = NULL;
    float *nz_h = NULL;
    size_t *nz_at = NULL;
    if (B > 1) {
        nz_b = malloc(sizeof(int32_t) * (size_t)B * (size_t)k);
        nz_h = malloc(sizeof(float) * (size_t)B * (size_t)k);
        nz_at = malloc(sizeof(size_t) * ((size_t)k + 1));
        if (!nz_b || !nz_h || !nz_at) {   /* out of memory: one row at a time (same sums) */
            free(nz_b);
            free(nz_h);
            free(nz_at);
            for (int b = 0; b < B; b++)
                hc_ctx_down_accum(ctx, w, idx, h + (size_t)b * h_stride, 0, k, 1, out + (size_t)b * w->n);
            return;
        }
        nonzero_lists(h, h_stride, k, B, nz_b, nz_h, nz_at);
        hc_ctx_down_lists(ctx, w, idx, k, B, nz_b, nz_h, nz_at, out);
        free(nz_b);
        free(nz_h);
        free(nz_at);
        return;
    }
    /* one column range per thread: each range reads a piece of every listed
     * row, and four per thread made those pieces short (544 bytes of a
     * 4096-wide Q8_0 row at two threads), each with its own call and fetch
     * (docs/measurements.md, "The sparse FFN's rows") */
    int nc = hc_pool_chunks(ctx->pool, (w->n + unit - 1) / unit, work);
    if (nc > hc_pool_size(ctx->pool)) nc = hc_pool_size(ctx->pool);
    down_rows_task t = { w, idx, h, h_stride, k, B, nc, unit, NULL, NULL, NULL, out, 0, NULL };
    hc_pool_run(ctx->pool, down_chunk, &t, nc);
}

void hc_ctx_down_lists(hc_ctx *ctx, const hc_weight *w, const int32_t *idx, int k, int B, const int32_t *nz_b,
                       const float *nz_h, const size_t *nz_at, float *out)
{
    if (k <= 0 || !nz_at[k]) return;
    int nc = hc_pool_chunks(ctx->pool, (w->n + DOWN_SLAB - 1) / DOWN_SLAB, nz_at[k] * (size_t)w->n);
    down_rows_task t = { w, idx, NULL, 0, k, B, nc, DOWN_SLAB, nz_b, nz_h, nz_at, out, down_slab(B), NULL };
    t.pack = malloc(sizeof(float) * (size_t)hc_pool_size(ctx->pool) * (size_t)B * (size_t)t.slab);
    hc_pool_run(ctx->pool, down_chunk, &t, nc);
    free(t.pack);
}

typedef struct {
    const hc_weight *w;
    int isa;
    const int32_t *idx;
    const void *xa;          /* the activations the kernels read (see arranged) */
    size_t xs, y_stride;
    int k, step, B, n_chunks, tile;   /* step: row step·idx[i] (hc_weight_matvec_rows) */
    char *scratch;           /* [pool size][tile rows] for B > 1 */
    float *y;
    const size_t *at;        /* hc_ctx_matvec_rows_each: activation b's rows are idx[at[b] .. at[b + 1]) */
} rows_task;

/* B = 1: the gathered kernel. B > 1: the listed rows in tiles of t->tile; a
 * tile whose rows are consecutive is read in place, any other is copied into
 * this thread's scratch; then the batched kernel reads each row once for all
 * B activations (gathering B times would read every row B times). A row's
 * value does not depend on where it is read from or on B (kernels.h). */
static void rows_chunk(void *arg, int chunk, int ith)
{
    const rows_task *t = arg;
    int lo, hi;
    hc_split(t->k, ROW_UNIT, chunk, t->n_chunks, &lo, &hi);
    if (lo >= hi) return;
    if (t->B == 1 || !t->scratch) {
        for (int b = 0; b < t->B; b++)
            hc_weight_matvec_rows(t->w, t->isa, t->idx + lo, hi - lo, t->step, (const char *)t->xa + (size_t)b * t->xs,
                                  t->y + (size_t)b * t->y_stride + lo);
        return;
    }
    size_t rb = ggml_row_size(t->w->type, t->w->n);
    char *buf = t->scratch + (size_t)ith * (size_t)t->tile * rb;
    for (int i0 = lo; i0 < hi; i0 += t->tile) {
        int n = hi - i0 < t->tile ? hi - i0 : t->tile;
        const int32_t *ix = t->idx + i0;
        int run = 1;
        while (t->step == 1 && run < n && ix[run] == ix[0] + run) run++;
        const void *rows;
        if (run == n) {
            rows = (const char *)t->w->data + (size_t)ix[0] * rb;
        } else {
            for (int i = 0; i < n; i++)
                memcpy(buf + (size_t)i * rb, (const char *)t->w->data + (size_t)ix[i] * (size_t)t->step * rb, rb);
            rows = buf;
        }
        hc_weight tile = *t->w;
        tile.data = rows;
        tile.rows = n;
        hc_weight_matvec(&tile, t->isa, 0, n, t->xa, t->xs, t->B, t->y + i0, t->y_stride);
    }
}

/* Rows per gathered tile: about 128 KiB, a multiple of ROW_UNIT. */
#define GATHER_BYTES (128 * 1024)

void hc_ctx_matvec_rows(hc_ctx *ctx, const hc_weight *w, const int32_t *idx, int k, int step, const void *acts,
                        int B, float *y, size_t y_stride)
{
    if (k <= 0) return;
    size_t work = (size_t)k * (size_t)w->n * (size_t)B;
    int nc = hc_pool_chunks(ctx->pool, (k + ROW_UNIT - 1) / ROW_UNIT, work);
    rows_task t = { w, hc_isa(), idx, NULL, 0, y_stride, k, step, B, nc, 0, NULL, y, NULL };
    t.xa = arranged(ctx, w, t.isa, acts, B, &t.xs);
    if (B > 1 && w->kind != HC_WEIGHT_GPTQ) {   /* ggml rows, or in chunks of 16 (rows of the same bytes) */
        size_t rb = ggml_row_size(w->type, w->n);
        t.tile = (int)(GATHER_BYTES / rb) / ROW_UNIT * ROW_UNIT;
        if (t.tile < ROW_UNIT) t.tile = ROW_UNIT;
        t.scratch = malloc((size_t)hc_pool_size(ctx->pool) * (size_t)t.tile * rb);
        if (!t.scratch) t.tile = 0;   /* out of memory: gather per activation (same values) */
    }
    if (B > 1 && w->kind != HC_WEIGHT_GPTQ && !t.scratch) {
        rows_task one = t;
        one.B = 1;
        for (int b = 0; b < B; b++) {
            one.xa = (const char *)t.xa + (size_t)b * t.xs;
            one.y = y + (size_t)b * y_stride;
            hc_pool_run(ctx->pool, rows_chunk, &one, nc);
        }
        return;
    }
    hc_pool_run(ctx->pool, rows_chunk, &t, nc);
    free(t.scratch);
}

static void each_chunk(void *arg, int chunk, int ith)
{
    const rows_task *t = arg;
    int lo, hi;
    (void)ith;
    hc_split(t->B, 1, chunk, t->n_chunks, &lo, &hi);
    for (int b = lo; b < hi; b++)
        hc_weight_matvec_rows(t->w, t->isa, t->idx + t->at[b], (int)(t->at[b + 1] - t->at[b]), t->step,
                              (const char *)t->xa + (size_t)b * t->xs, t->y + t->at[b]);
}

void hc_ctx_matvec_rows_each(hc_ctx *ctx, const hc_weight *w, const int32_t *idx, const size_t *at, int step,
                             const void *acts, int B, float *y)
{
    if (at[B] == 0) return;
    int nc = hc_pool_chunks(ctx->pool, B, at[B] * (size_t)w->n);
    rows_task t = { w, hc_isa(), idx, NULL, 0, 0, 0, step, B, nc, 0, NULL, y, at };
    t.xa = arranged(ctx, w, t.isa, acts, B, &t.xs);
    hc_pool_run(ctx->pool, each_chunk, &t, nc);
}

void hc_ctx_prepare_gate_up(hc_ctx *ctx, const hc_layer *ly, const float *x_norm, int B, void **ag, void **au)
{
    size_t need = hc_weight_act_bytes(&ly->ffn_gate);
    if (hc_weight_act_bytes(&ly->ffn_up) > need) need = hc_weight_act_bytes(&ly->ffn_up);
    *ag = *au = hc_ctx_acts(ctx, 0, need);
    hc_ctx_prepare(ctx, &ly->ffn_gate, x_norm, B, *ag);
    if (!hc_weight_same_act(&ly->ffn_gate, &ly->ffn_up)) {
        *au = hc_ctx_acts(ctx, 1, need);
        hc_ctx_prepare(ctx, &ly->ffn_up, x_norm, B, *au);
    }
}


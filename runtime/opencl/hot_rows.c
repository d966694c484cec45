/* A layer's hot rows on the device and the launches of their two kernels
 * (runtime/opencl.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"
#include "ggml_types.h"
#include "kernels_gptq.h"

struct hc_cl_layer {
    hc_cl *cl;
    int ti_gu, ti_down, k, n, B;   /* B: rows of the batch in flight */
    int splits;                    /* slices of the rows in the down launch (hc_cl_down_splits) */
    int kind;                      /* hc_cl_rows.kind */
    int rb_gu, rb_down, gs;        /* bytes of a row's body on the device; GPTQ group size of gate/up (else 1) */
    int sb_gu, sb_down;            /* bytes of a row's scales, after every row's body (rows_buffer) */
    int split_x;                   /* the prepared x is Q8_0 blocks, split on its way up */
    size_t xb, xdb;                /* bytes of one prepared x, and on the device (16-byte aligned) */
    cl_mem gate, up, down;         /* gate: the first rows; up NULL for a sequential FFN */
    cl_mem first_b, up_b;          /* NULL: none (cl->zeros) */
    cl_mem down_norm;              /* NULL: the gate criterion (cl->zeros unused) */
    cl_mem pairs, pair_row;        /* GPTQ down columns: the pairs table and each row's entry; else NULL */
    cl_mem counts;                 /* hc_cl_layer_counts' three, each a low and a high uint */
    cl_event first, last;
};

/* Grow a device scratch buffer to `need` bytes. */
static int grow(hc_cl *cl, cl_mem *m, size_t *cap, size_t need, char *err, size_t errlen)
{
    if (need <= *cap) return 0;
    if (*m) clReleaseMemObject(*m);
    *m = hc_cl_buffer(cl, CL_MEM_READ_WRITE, need, NULL, err, errlen);
    *cap = *m ? need : 0;
    return *m ? 0 : -1;
}

/* Wait for s's last transfer. */
static void settle(hc_cl_stage *s)
{
    if (!s->done) return;
    clWaitForEvents(1, &s->done);
    clReleaseEvent(s->done);
    s->done = NULL;
}

void hc_cl_stage_free(hc_cl *cl, hc_cl_stage *s)
{
    settle(s);
    if (s->host) {
        clEnqueueUnmapMemObject(cl->q, s->m, s->host, 0, NULL, NULL);
        clFinish(cl->q);
    }
    if (s->m) clReleaseMemObject(s->m);
    *s = (hc_cl_stage){ 0 };
}

/* s's host memory, of at least need bytes and free to write (its last
 * transfer done), or NULL with err. */
static void *stage(hc_cl *cl, hc_cl_stage *s, size_t need, char *err, size_t errlen)
{
    settle(s);
    if (need <= s->cap) return s->host;
    hc_cl_stage_free(cl, s);
    if ((s->host = hc_cl_pinned(cl, need, &s->m, err, errlen))) s->cap = need;
    return s->host;
}

_Static_assert(offsetof(block_q8_0, qs) == 2 && offsetof(block_q4_0, qs) == 2, "a block is its fp16 d, then its codes");

/* nblk Q8_0 or Q4_0 blocks of bb bytes at src as kernels/hot_rows.cl reads
 * them: their codes one after another at codes (16-byte loads, where the
 * blocks' 34 or 18 bytes left the codes unaligned), their fp16 scales at
 * halves. The same bytes. */
static void split_blocks(const uint8_t *src, size_t nblk, size_t bb, uint8_t *codes, uint8_t *halves)
{
    for (size_t i = 0; i < nblk; i++) {
        memcpy(codes + i * (bb - 2), src + i * bb + 2, bb - 2);
        memcpy(halves + 2 * i, src + i * bb, 2);
    }
}

static int block_type(const hc_weight *w)
{
    return w->kind == HC_WEIGHT_GGML && (w->type == GGML_TYPE_Q8_0 || w->type == GGML_TYPE_Q4_0);
}

/* A device buffer of w's rows as kernels/hot_rows.cl reads them: every
 * row's body (*rb bytes), then every row's scales (*sb bytes). F32, F16,
 * BF16 rows as they are, no scales; Q8_0 and Q4_0 split (split_blocks): a
 * row's codes, its fp16 block scales; a GPTQ row's codes, and a gate/up
 * row's pairs as its scales (a down column's pairs table and entries to
 * *pairs and *pair_row). The same bytes in another order: every row's codes
 * 16-byte aligned, which a block's scale or a row's pairs in front left
 * them not. */
static cl_mem rows_buffer(hc_cl *cl, const hc_weight *w, int *rb, int *sb, cl_mem *pairs, cl_mem *pair_row, char *err,
                          size_t errlen)
{
    *sb = 0;
    if (w->kind != HC_WEIGHT_GPTQ) {
        const size_t bytes = ggml_row_size(w->type, w->n) * (size_t)w->rows;
        *rb = (int)ggml_row_size(w->type, w->n);
        if (!block_type(w)) return hc_cl_buffer(cl, CL_MEM_READ_ONLY, bytes, w->data, err, errlen);
        const size_t bb = w->type == GGML_TYPE_Q8_0 ? sizeof(block_q8_0) : sizeof(block_q4_0);
        const size_t nblk = (size_t)w->rows * (size_t)(w->n / 32);
        uint8_t *host = malloc(bytes ? bytes : 1);
        if (!host) {
            snprintf(err, errlen, "OpenCL: out of memory");
            return NULL;
        }
        *rb = (int)((size_t)(w->n / 32) * (bb - 2));
        *sb = 2 * (w->n / 32);
        split_blocks(w->data, nblk, bb, host, host + nblk * (bb - 2));
        cl_mem m = hc_cl_buffer(cl, CL_MEM_READ_ONLY, bytes, host, err, errlen);
        free(host);
        return m;
    }
    const hc_gptq *g = w->ext;
    size_t cb = (size_t)g->kp / 2, pb = sizeof(float) * 2 * (size_t)g->n_groups, own = g->sm_row ? 0 : pb;
    *rb = (int)cb;
    *sb = (int)own;
    if (g->sm_row &&
        (!(*pairs = hc_cl_buffer(cl, CL_MEM_READ_ONLY, pb * (size_t)g->n_sm, g->sm, err, errlen)) ||
         !(*pair_row = hc_cl_buffer(cl, CL_MEM_READ_ONLY, sizeof(int32_t) * (size_t)g->rows, g->sm_row, err, errlen))))
        return NULL;
    const size_t rows = (size_t)g->rows, bytes = (cb + own) * rows;
    char *host = malloc(bytes ? bytes : 1);
    if (!host) {
        snprintf(err, errlen, "OpenCL: out of memory");
        return NULL;
    }
    for (size_t r = 0; r < rows; r++) {
        memcpy(host + r * cb, hc_gptq_codes(g, (int)r), cb);
        memcpy(host + rows * cb + r * own, hc_gptq_sm(g, (int)r), own);
    }
    cl_mem m = hc_cl_buffer(cl, CL_MEM_READ_ONLY, bytes, host, err, errlen);
    free(host);
    return m;
}

hc_cl_layer *hc_cl_layer_new(hc_cl *cl, const hc_cl_rows *rows, int k, int n_embd, char *err, size_t errlen)
{
    hc_cl_layer *L = calloc(1, sizeof *L);
    if (!L) { snprintf(err, errlen, "OpenCL: out of memory"); return NULL; }
    const hc_weight *gu = &rows->first, *dn = &rows->down;
    *L = (hc_cl_layer){ .cl = cl, .ti_gu = hc_cl_type_index(gu), .ti_down = hc_cl_type_index(dn), .k = k, .n = n_embd,
                        .kind = rows->kind, .gs = gu->kind == HC_WEIGHT_GPTQ ? ((const hc_gptq *)gu->ext)->gs : 1 };
    if (!hc_cl_supports(gu, 0) || !hc_cl_supports(dn, 1) || k < 1 || gu->rows != k || dn->rows != k ||
        gu->n != n_embd || dn->n != n_embd) {
        snprintf(err, errlen, "OpenCL: no kernel for %s/%s rows", hc_weight_type_name(gu), hc_weight_type_name(dn));
        goto bad;
    }
    L->xb = hc_weight_act_bytes(gu);
    L->split_x = block_type(gu);
    L->xdb = L->split_x ? (L->xb + 15) / 16 * 16 : L->xb;
    L->splits = hc_cl_down_splits(n_embd, k, (int)cl->wg, cl->info.compute_units);
    size_t bb = sizeof(float) * (size_t)k;
    cl_mem_flags ro = CL_MEM_READ_ONLY;
    if (!(L->gate = rows_buffer(cl, gu, &L->rb_gu, &L->sb_gu, NULL, NULL, err, errlen)) ||
        (rows->up.kind != HC_WEIGHT_NONE &&
         !(L->up = rows_buffer(cl, &rows->up, &L->rb_gu, &L->sb_gu, NULL, NULL, err, errlen))) ||
        !(L->down = rows_buffer(cl, dn, &L->rb_down, &L->sb_down, &L->pairs, &L->pair_row, err, errlen)) ||
        (rows->first_b && !(L->first_b = hc_cl_buffer(cl, ro, bb, rows->first_b, err, errlen))) ||
        (rows->up_b && !(L->up_b = hc_cl_buffer(cl, ro, bb, rows->up_b, err, errlen))) ||
        (rows->down_norm && !(L->down_norm = hc_cl_buffer(cl, ro, bb, rows->down_norm, err, errlen))) ||
        !(L->counts = hc_cl_buffer(cl, CL_MEM_READ_WRITE, sizeof(cl_uint[6]), (cl_uint[6]){ 0 }, err, errlen)))
        goto bad;
    if (cl->zeros_cap < bb) {   /* the bias of rows without one */
        float *z = calloc((size_t)k, sizeof *z);
        if (cl->zeros) clReleaseMemObject(cl->zeros);
        cl->zeros = z ? hc_cl_buffer(cl, ro, bb, z, err, errlen) : NULL;
        cl->zeros_cap = cl->zeros ? bb : 0;
        free(z);
        if (!cl->zeros) goto bad;
    }
    if (grow(cl, &cl->x, &cl->x_cap, L->xdb, err, errlen) || grow(cl, &cl->mask, &cl->mask_cap, (size_t)k, err, errlen) ||
        grow(cl, &cl->h, &cl->h_cap, sizeof(float) * (size_t)k, err, errlen) ||
        grow(cl, &cl->y, &cl->y_cap, sizeof(float) * (size_t)n_embd, err, errlen))
        goto bad;
    return L;
bad:
    hc_cl_layer_free(L);
    return NULL;
}

void hc_cl_layer_free(hc_cl_layer *L)
{
    if (!L) return;
    cl_mem ms[] = { L->gate, L->up, L->down, L->first_b, L->up_b, L->down_norm, L->pairs, L->pair_row, L->counts };
    hc_cl_release(ms, sizeof ms / sizeof *ms);
    free(L);
}

int hc_cl_layer_start(hc_cl_layer *L, const void *x, size_t x_stride, int B, const uint8_t *mask, int act, float t_act,
                      char *err, size_t errlen)
{
    hc_cl *cl = L->cl;
    cl_int n = L->n, k = L->k, a = act;
    const int tiled = B > 1, tile = tiled ? HC_CL_TILE : 1;   /* decode's kernels: one token's work, not a tile's */
    cl_kernel gu = cl->gate_up[tiled][L->ti_gu], dn = cl->down[tiled][L->ti_down];
    size_t xb = L->xb, xdb = L->xdb;
    cl_int xbi = (cl_int)xdb, rbg = L->rb_gu, rbd = L->rb_down, gs = L->gs;
    uint8_t *hx, *hm;
    if (grow(cl, &cl->x, &cl->x_cap, xdb * (size_t)B, err, errlen) ||
        grow(cl, &cl->mask, &cl->mask_cap, (size_t)k * (size_t)B, err, errlen) ||
        grow(cl, &cl->h, &cl->h_cap, sizeof(float) * (size_t)k * (size_t)B, err, errlen) ||
        grow(cl, &cl->y, &cl->y_cap, sizeof(float) * (size_t)n * (size_t)B, err, errlen) ||
        (L->splits > 1 &&
         grow(cl, &cl->part, &cl->part_cap, sizeof(float) * (size_t)n * (size_t)B * (size_t)L->splits, err, errlen)) ||
        !(hx = stage(cl, &cl->up_x, xdb * (size_t)B, err, errlen)) ||
        !(hm = stage(cl, &cl->up_mask, (size_t)k * (size_t)B, err, errlen)))
        return -1;
    L->B = B;
    for (int b = 0; b < B; b++) {
        uint8_t *to = hx + (size_t)b * xdb;
        const uint8_t *from = (const uint8_t *)x + (size_t)b * x_stride;
        if (L->split_x) split_blocks(from, (size_t)n / 32, sizeof(block_q8_0), to, to + n);
        else memcpy(to, from, xb);
    }
    memcpy(hm, mask, (size_t)k * (size_t)B);
    CHECK_CL(clEnqueueWriteBuffer(cl->q, cl->x, CL_FALSE, 0, xdb * (size_t)B, hx, 0, NULL, &cl->up_x.done), "write x");
    if (cl->profile && clRetainEvent(L->first = cl->up_x.done) != CL_SUCCESS) L->first = NULL;
    CHECK_CL(clEnqueueWriteBuffer(cl->q, cl->mask, CL_FALSE, 0, (size_t)k * (size_t)B, hm, 0, NULL, &cl->up_mask.done),
             "write mask");
    cl_mem up = L->up ? L->up : L->gate, fb = L->first_b ? L->first_b : cl->zeros;
    cl_mem ub = L->up_b ? L->up_b : cl->zeros, dnorm = L->down_norm ? L->down_norm : cl->zeros;
    cl_int kind = L->kind, contrib = L->down_norm != NULL;
    CHECK_CL(clSetKernelArg(gu, 0, sizeof(cl_mem), &L->gate), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 1, sizeof(cl_mem), &up), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 2, sizeof(cl_mem), &cl->x), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 3, sizeof(cl_mem), &cl->mask), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 4, sizeof n, &n), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 5, sizeof a, &a), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 6, sizeof t_act, &t_act), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 7, sizeof(cl_mem), &cl->h), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 8, sizeof k, &k), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 9, sizeof xbi, &xbi), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 10, sizeof kind, &kind), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 11, sizeof(cl_mem), &fb), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 12, sizeof(cl_mem), &ub), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 13, sizeof(cl_mem), &dnorm), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 14, sizeof contrib, &contrib), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 15, sizeof rbg, &rbg), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 16, sizeof gs, &gs), "gate_up arg");
    cl_int Bi = B;
    CHECK_CL(clSetKernelArg(gu, 17, sizeof Bi, &Bi), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 18, sizeof L->sb_gu, &L->sb_gu), "gate_up arg");
    const size_t tiles = ((size_t)B + tile - 1) / tile;
    size_t g1[2] = { (size_t)k * cl->wg, tiles }, l1[2] = { cl->wg, 1 };
    CHECK_CL(clEnqueueNDRangeKernel(cl->q, gu, 2, NULL, g1, l1, 0, NULL, NULL), "gate_up kernel");
    CHECK_CL(clSetKernelArg(dn, 0, sizeof(cl_mem), &L->down), "down arg");
    CHECK_CL(clSetKernelArg(dn, 1, sizeof(cl_mem), &cl->h), "down arg");
    CHECK_CL(clSetKernelArg(dn, 2, sizeof k, &k), "down arg");
    CHECK_CL(clSetKernelArg(dn, 3, sizeof n, &n), "down arg");
    CHECK_CL(clSetKernelArg(dn, 4, sizeof(cl_mem), &cl->y), "down arg");
    cl_mem pairs = L->pairs ? L->pairs : cl->zeros, pair_row = L->pair_row ? L->pair_row : cl->zeros;
    CHECK_CL(clSetKernelArg(dn, 5, sizeof rbd, &rbd), "down arg");
    CHECK_CL(clSetKernelArg(dn, 6, sizeof(cl_mem), &pairs), "down arg");
    CHECK_CL(clSetKernelArg(dn, 7, sizeof(cl_mem), &pair_row), "down arg");
    cl_int splits = L->splits;
    CHECK_CL(clSetKernelArg(dn, 8, sizeof splits, &splits), "down arg");
    cl_mem part = splits > 1 ? cl->part : cl->y;   /* one slice writes y and never reads part */
    CHECK_CL(clSetKernelArg(dn, 9, sizeof(cl_mem), &part), "down arg");
    CHECK_CL(clSetKernelArg(dn, 10, sizeof Bi, &Bi), "down arg");
    CHECK_CL(clSetKernelArg(dn, 11, sizeof L->sb_down, &L->sb_down), "down arg");
    const size_t dcols = (size_t)hc_cl_down_cols((int)cl->wg), blocks = ((size_t)n + dcols - 1) / dcols;
    size_t g2[2] = { blocks * (size_t)splits * cl->wg, tiles }, l2[2] = { cl->wg, 1 };
    CHECK_CL(clEnqueueNDRangeKernel(cl->q, dn, 2, NULL, g2, l2, 0, NULL, NULL), "down kernel");
    if (splits > 1) {
        cl_kernel sum = cl->down_sum;
        size_t g3[2] = { ((size_t)n + cl->wg - 1) / cl->wg * cl->wg, (size_t)B }, l3[2] = { cl->wg, 1 };
        CHECK_CL(clSetKernelArg(sum, 0, sizeof(cl_mem), &cl->part), "down_sum arg");
        CHECK_CL(clSetKernelArg(sum, 1, sizeof splits, &splits), "down_sum arg");
        CHECK_CL(clSetKernelArg(sum, 2, sizeof n, &n), "down_sum arg");
        CHECK_CL(clSetKernelArg(sum, 3, sizeof(cl_mem), &cl->y), "down_sum arg");
        CHECK_CL(clEnqueueNDRangeKernel(cl->q, sum, 2, NULL, g3, l3, 0, NULL, NULL), "down_sum kernel");
    }
    CHECK_CL(clFlush(cl->q), "clFlush");
    return 0;
bad:
    if (L->first) clReleaseEvent(L->first);
    L->first = NULL;
    return -1;
}

int hc_cl_layer_finish(hc_cl_layer *L, float *y, float *h, double *dev_s, char *err, size_t errlen)
{
    hc_cl *cl = L->cl;
    cl_ulong t0, t1;
    size_t B = (size_t)L->B, hb = sizeof(float) * (size_t)L->k * B, yb = sizeof(float) * (size_t)L->n * B;
    float *hh = stage(cl, &cl->down_h, hb, err, errlen), *hy = hh ? stage(cl, &cl->down_y, yb, err, errlen) : NULL;
    if (!hy) goto bad;
    CHECK_CL(clEnqueueReadBuffer(cl->q, cl->h, CL_FALSE, 0, hb, hh, 0, NULL, NULL), "read h");
    CHECK_CL(clEnqueueReadBuffer(cl->q, cl->y, CL_TRUE, 0, yb, hy, 0, NULL, cl->profile ? &L->last : NULL), "read y");
    memcpy(h, hh, hb);   /* the in-order queue read h first */
    memcpy(y, hy, yb);
    if (cl->profile) {   /* from the upload of x to the end of the read of y */
        CHECK_CL(clGetEventProfilingInfo(L->first, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL), "profiling");
        CHECK_CL(clGetEventProfilingInfo(L->last, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL), "profiling");
        if (t1 > t0) *dev_s += (double)(t1 - t0) * 1e-9;
        clReleaseEvent(L->first);
        clReleaseEvent(L->last);
        L->first = L->last = NULL;
    }
    return 0;
bad:
    if (L->first) clReleaseEvent(L->first);
    if (L->last) clReleaseEvent(L->last);
    L->first = L->last = NULL;
    return -1;
}


int hc_cl_layer_keep(hc_cl_layer *L, hc_view y, const uint8_t *truth, char *err, size_t errlen)
{
    hc_cl *cl = L->cl;
    cl_int total = L->k * L->B, has_truth = truth != NULL;
    size_t bytes = sizeof(float) * (size_t)L->n * (size_t)L->B;
    size_t groups = cl->info.compute_units ? cl->info.compute_units : 1, g = groups * cl->wg;
    if (L->first) clReleaseEvent(L->first);   /* no device time without a wait */
    L->first = NULL;
    if (truth) {
        uint8_t *ht;
        if (grow(cl, &cl->truth, &cl->truth_cap, (size_t)total, err, errlen) ||
            !(ht = stage(cl, &cl->up_truth, (size_t)total, err, errlen)))
            return -1;
        memcpy(ht, truth, (size_t)total);
        CHECK_CL(clEnqueueWriteBuffer(cl->q, cl->truth, CL_FALSE, 0, (size_t)total, ht, 0, NULL, &cl->up_truth.done),
                 "write truth");
    }
    cl_mem tm = truth ? cl->truth : cl->mask;
    CHECK_CL(clEnqueueCopyBuffer(cl->q, cl->y, y.buf->m, 0, y.off, bytes, 0, NULL, NULL), "copy y");
    CHECK_CL(clSetKernelArg(cl->count_hot, 0, sizeof(cl_mem), &cl->h), "count_hot arg");
    CHECK_CL(clSetKernelArg(cl->count_hot, 1, sizeof(cl_mem), &cl->mask), "count_hot arg");
    CHECK_CL(clSetKernelArg(cl->count_hot, 2, sizeof(cl_mem), &tm), "count_hot arg");
    CHECK_CL(clSetKernelArg(cl->count_hot, 3, sizeof has_truth, &has_truth), "count_hot arg");
    CHECK_CL(clSetKernelArg(cl->count_hot, 4, sizeof total, &total), "count_hot arg");
    CHECK_CL(clSetKernelArg(cl->count_hot, 5, sizeof(cl_mem), &L->counts), "count_hot arg");
    CHECK_CL(clEnqueueNDRangeKernel(cl->q, cl->count_hot, 1, NULL, &g, &cl->wg, 0, NULL, NULL), "count_hot kernel");
    CHECK_CL(clFlush(cl->q), "clFlush");
    return 0;
bad:
    return -1;
}

int hc_cl_layer_counts(hc_cl_layer *L, uint64_t counts[3], char *err, size_t errlen)
{
    cl_uint c[6];
    CHECK_CL(clEnqueueReadBuffer(L->cl->q, L->counts, CL_TRUE, 0, sizeof c, c, 0, NULL, NULL), "read counts");
    for (int i = 0; i < 3; i++) counts[i] = (uint64_t)c[2 * i + 1] << 32 | c[2 * i];
    return 0;
bad:
    return -1;
}

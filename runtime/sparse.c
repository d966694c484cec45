/* The sparse / hybrid FFN (see sparse.h): the down rows, then the one
 * hot/cold path (the CPU's share of a layer's neurons, the device's share),
 * the FFN itself, setup and reporting. */
#include "sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "forward.h"
#include "ggml_types.h"
#include "hugepage.h"
#include "kernels.h"
#include "kernels_gptq.h"
#include "quants.h"
#include "x16.h"

/* ------------------------------------------------------------ row copies */

/* The sparse FFN reads a few scattered rows of each matrix per token; with
 * 4 KiB pages nearly every listed row costs a TLB miss (8 % of the 2 KiB
 * rows of an n_embd 1024 F16 matrix: one row every 25 KiB). So the matrices
 * it reads by rows (gate, up, down) are copied into anonymous memory advised
 * to use 2 MiB pages (transparent huge pages, which a file mapping cannot
 * get): decode FFN 17 % faster on the bench model (docs/measurements.md).
 * The copied pages of the model's file mapping are dropped (clean file
 * pages, faulted back from the page cache if a dense step reads them), so
 * resident memory does not double. Advice only: where madvise fails the copy
 * still holds the same bytes. The gate and up copies take chunks of 16
 * blocks where the type's kernels read those, as the model's own copy
 * (model_memory.c): the dot of ggml's layout unpacked Q4_0 with permutes. */

/* w's rows copied into p row by row; in chunks of 16 (x16.h) where x16 and
 * w's products read them so (x16: read by products, not by AXPY), w then
 * in that layout. Row j of the copy lies at p + (step·j + at)·row bytes. */
static void copy_rows(hc_weight *w, int x16, char *p, int step, int at)
{
    size_t rb = hc_weight_bytes(w) / (size_t)w->rows;
    x16 = x16 && hc_x16_wanted(w->type);
    for (int j = 0; j < w->rows; j++) {
        const char *src = (const char *)w->data + (size_t)j * rb;
        char *dst = p + ((size_t)step * (size_t)j + (size_t)at) * rb;
        if (x16) hc_x16_repack(w->type, src, (uint8_t *)dst, w->n / QK8_0);
        else memcpy(dst, src, rb);
    }
    if (x16) w->kind = HC_WEIGHT_X16;
}

/* *w's rows copied into huge pages (*owned: free it), as copy_rows; w
 * unchanged when it is not ggml rows or memory is short (the same values
 * either way). */
static void huge_rows(const hc_model *m, hc_weight *w, int x16, void **owned)
{
    *owned = NULL;
    if (w->kind != HC_WEIGHT_GGML || !w->rows) return;
    size_t n = hc_weight_bytes(w);
    void *p = hc_huge_alloc(n);
    if (!p) return;
    copy_rows(w, x16, p, 1, 0);
    hc_model_drop_mapped(m, w->data, n);
    w->data = p;
    *owned = p;
}

/* With a predictor nearly every candidate whose gate row is read has its up
 * row read too, and one 4 KiB run reads faster than two scattered 2 KiB rows
 * (bench_gather: 24 against 16-18 GB/s). So where gate and up are ggml rows
 * of the same type and length, they are copied into one huge-page buffer row
 * by row side by side: neuron j's gate row at row 2j, its up row at 2j + 1.
 * *gate and *up become views of it (data at the first gate row or the first
 * up row) read with a row step of 2 (hc_weight_matvec_rows); returns the step
 * (1: nothing paired, the weights unchanged). *owned: free it. */
static int pair_rows(const hc_model *m, hc_weight *gate, hc_weight *up, void **owned)
{
    *owned = NULL;
    if (gate->kind != HC_WEIGHT_GGML || up->kind != HC_WEIGHT_GGML || gate->type != up->type || gate->n != up->n ||
        gate->rows != up->rows || !gate->rows)
        return 1;
    size_t rb = hc_weight_bytes(gate) / (size_t)gate->rows;
    char *p = hc_huge_alloc(2 * rb * (size_t)gate->rows);
    if (!p) return 1;
    copy_rows(gate, 1, p, 2, 0);
    copy_rows(up, 1, p, 2, 1);
    hc_model_drop_mapped(m, gate->data, rb * (size_t)gate->rows);
    hc_model_drop_mapped(m, up->data, rb * (size_t)up->rows);
    gate->data = p;
    up->data = p + rb;
    gate->rows = up->rows = 2 * gate->rows - 1;   /* the rows each view can address */
    *owned = p;
    return 2;
}

/* ------------------------------------------------------------ down rows */

/* Down rows: the down projection as one contiguous row of n_embd per
 * neuron, so that skipping a neuron skips its bytes (PowerInfer's ffn_down_t).
 *
 * A PWRI file's ffn_down_t is used as it is. Otherwise ffn_down {n_ff, n_embd}
 * is transposed at load: F32, F16 and BF16 element by element (exact, same
 * type). Q8_0 and Q4_0 blocks run along n_ff and cannot be moved: their
 * values are dequantized (exact in f32) and each neuron's row is quantized
 * again to Q8_0, the bytes of ggml's reference quantizer (quants.h). Q8_0 rather than
 * Q4_0 for both because a second 4-bit rounding would double the error of the
 * first one; re-rounding to 8 bits adds at most half a step of 1/127 of each
 * 32-block's largest value. Rows of n_embd not a multiple of 32 stay F32.
 * An INT4-GPTQ ffn_down keeps its codes, scales and zeros exactly: its input
 * columns become the down columns of kernels_gptq.h (hc_gptq_columns). */

/* The down projection of a layer must be ggml rows or a GPTQ ffn_down
 * (checked for all layers before anything is made). */
static int check_down(const hc_model *m, int layer, char *err, size_t errlen)
{
    const hc_layer *ly = &m->layers[layer];
    int t = ly->ffn_down_t.kind != HC_WEIGHT_NONE;
    const hc_weight *w = t ? &ly->ffn_down_t : &ly->ffn_down;
    if (w->kind == HC_WEIGHT_GGML || (!t && w->kind == HC_WEIGHT_GPTQ)) return 0;
    snprintf(err, errlen, "%s: blk.%d.%s.weight is %s; the sparse FFN needs ggml rows or an INT4-GPTQ ffn_down for "
             "the down projection", m->path, layer, t ? "ffn_down_t" : "ffn_down",
             w->kind == HC_WEIGHT_GPTQ ? "INT4-GPTQ" : "not stored as ggml rows");
    return -1;
}

int hc_sparse_check(const hc_model *m, char *err, size_t errlen)
{
    switch ((enum hc_ffn_kind)m->hp.ffn_kind) {
    case HC_FFN_GATED:       /* cpu_part and the device kernels: act(gate)·up */
    case HC_FFN_SYMMETRIC:   /* act(gate)·act(up) */
    case HC_FFN_SEQUENTIAL:  /* act(up), no gate */
        break;
    }
    for (int l = 0; l < m->hp.n_layer; l++)
        if (check_down(m, l, err, errlen)) return -1;
    return 0;
}

/* Down rows for one layer: ffn_down_t, or a transpose of ffn_down in *owned
 * (free it), or a GPTQ ffn_down's columns in *cols (hc_gptq_free it). 0 or -1
 * with err. */
static int down_rows(const hc_model *m, int layer, hc_weight *out, void **owned, hc_gptq *cols, char *err,
                     size_t errlen)
{
    const hc_layer *ly = &m->layers[layer];
    int E = m->hp.n_embd, F = m->hp.n_ff;
    *owned = NULL;
    if (check_down(m, layer, err, errlen)) return -1;
    if (ly->ffn_down_t.kind != HC_WEIGHT_NONE) {
        *out = ly->ffn_down_t;
        return 0;
    }
    const hc_weight *w = &ly->ffn_down;
    if (w->kind == HC_WEIGHT_GPTQ) {
        if (hc_gptq_columns(w->ext, cols)) {
            snprintf(err, errlen, "%s: out of memory for the down columns of blk.%d.ffn_down", m->path, layer);
            return -1;
        }
        *out = (hc_weight){ .kind = HC_WEIGHT_GPTQ, .type = w->type, .n = E, .rows = F, .ext = cols };
        return 0;
    }
    uint32_t type = w->type;
    int quant = type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0;
    if (quant) type = E % QK8_0 ? GGML_TYPE_F32 : GGML_TYPE_Q8_0;
    size_t rb = ggml_row_size(type, E);
    char *dst = hc_huge_alloc(rb * (size_t)F);
    float *rows = quant ? malloc(sizeof(float) * (size_t)E * QK8_0) : NULL;
    if (!dst || (quant && !rows)) {
        free(dst);
        free(rows);
        snprintf(err, errlen, "%s: out of memory transposing blk.%d.ffn_down.weight", m->path, layer);
        return -1;
    }
    if (quant) {
        /* Neuron j's row is column j of ffn_down, and block b of every down
         * row holds neurons [32b, 32b + 32): those 32 rows are gathered a
         * block of each down row at a time (each block dequantized once, a
         * line of the weight serving 32 neurons), then quantized with
         * quantize_row_q8_0 (the reference's bytes). A 4096 x 11008 Q4_0
         * layer took 0.57-1.0 s neuron by neuron through an f32 copy of the
         * layer and the reference quantizer, 0.18-0.28 s so. */
        for (int b = 0; b < F / QK8_0; b++) {
            for (int e = 0; e < E; e++) {
                float v[QK8_0];
                union { block_q4_0 q4; block_q8_0 q8; } buf;
                if (w->type == GGML_TYPE_Q8_0) dequantize_row_q8_0(hc_q8_0_block(w, e, b, &buf.q8), v, QK8_0);
                else dequantize_row_q4_0(hc_q4_0_block(w, e, b, &buf.q4), v, QK8_0);
                for (int k = 0; k < QK8_0; k++) rows[(size_t)k * E + e] = v[k];
            }
            for (int k = 0; k < QK8_0; k++) {
                char *to = dst + (size_t)(QK8_0 * b + k) * rb;
                if (type == GGML_TYPE_Q8_0) quantize_row_q8_0(rows + (size_t)k * E, (block_q8_0 *)to, E);
                else memcpy(to, rows + (size_t)k * E, rb);
            }
        }
        free(rows);
    } else {
        /* F32: 4-byte elements; F16, BF16: 2-byte elements (bit copies), in
         * 64 x 64 blocks so that both sides stay in cache. */
        enum { TB = 64 };
        for (int e0 = 0; e0 < E; e0 += TB)
            for (int j0 = 0; j0 < F; j0 += TB) {
                int e1 = e0 + TB < E ? e0 + TB : E, j1 = j0 + TB < F ? j0 + TB : F;
                for (int e = e0; e < e1; e++) {
                    if (type == GGML_TYPE_F32) {
                        const uint32_t *src = (const uint32_t *)w->data + (size_t)e * F;
                        for (int j = j0; j < j1; j++) ((uint32_t *)dst)[(size_t)j * E + e] = src[j];
                    } else {
                        const uint16_t *src = (const uint16_t *)w->data + (size_t)e * F;
                        for (int j = j0; j < j1; j++) ((uint16_t *)dst)[(size_t)j * E + e] = src[j];
                    }
                }
            }
    }
    *out = (hc_weight){ .kind = HC_WEIGHT_GGML, .type = type, .data = dst, .n = E, .rows = F };
    *owned = dst;
    return 0;
}

/* ------------------------------------------------------------ state */

/* "Truly active" for the recall check, as hc-profile counts: |h| > 0 for
 * ReLU, |h| > 0.01 for SiLU (whose h is almost never exactly 0); with
 * calibrated thresholds, kept by the layer's calibrated rule. */
#define SILU_ACTIVE 0.01f

typedef struct {
    hc_weight down;          /* one row per neuron */
    void *down_owned;
    hc_weight first, up;     /* the rows the CPU reads: gate (or up without a gate), up (huge_rows, pair_rows) */
    void *first_owned, *up_owned;
    int step;                /* neuron j's first and up rows: row step·j of each (pair_rows) */
    hc_gptq down_cols;       /* the rows of a GPTQ ffn_down (down.ext) */
    int32_t *cold;           /* neurons the CPU computes; NULL = all */
    int n_cold;
    int32_t *hot;            /* bucket: neurons on the device */
    int n_hot;
    hc_cl_layer *dev;
    uint64_t dev_counts[3];  /* hc_cl_layer_counts as last read (the tokens left on the device) */
    float t_act;             /* keep threshold on the criterion */
    float *norm;             /* [F] ‖down_j‖ (contribution criterion), else NULL */
    size_t rb_gate, rb_up, rb_down;   /* bytes of one row (rb_gate: the first rows) */
    hc_sparse_stats st;
} layer_state;

struct hc_sparse {
    const hc_model *m;
    hc_sparse_params p;
    int predictor;
    int calibrated;          /* per-layer thresholds were given (layer_thr) */
    layer_state *L;
    int E, F, r_max, k_max;
    /* scratch */
    int32_t *cand, *uni;     /* [F]: candidates; neurons some row keeps */
    /* rows_needed's (row, neuron) pairs, row b's at [pair_at[b], pair_at[b + 1]): neuron, list position, product */
    int32_t *pair_row, *pair_pos;
    float *pair_y;
    size_t *pair_at;         /* [cap_rows + 1] */
    size_t cap_pairs;
    int cap_rows;
    uint8_t *any;            /* [F]: some batch row keeps list position i */
    uint8_t *mask;           /* [B][k_max] device candidates */
    float *ydev, *hdev;      /* [B][E], [B][k_max] */
    float *pred, *hidden, *truth;  /* [B][F], [B][r], [B][F] */
    float *crit;             /* [B][F] criterion values for observe */
    int cap_b;               /* rows the [B] buffers hold (0: regrow) */
    int32_t *nz_b;           /* pairs_down's per-neuron lists: rows, h ([nz_cap]), starts and cursors ([F + 1]) */
    float *nz_h;
    size_t nz_cap, *nz_at, *nz_cur;
    void *dec_buf;           /* decode_part's activations and counts */
    size_t dec_cap;
    double t_ffn, t_cpu, t_dev, t_wait;
    char dev_err[300];
};

/* ------------------------------------------------------------ B rows */

typedef struct {
    int B;
    const float *pred;       /* [B][F] predictor output or NULL */
    const void *act_g, *act_u;   /* B prepared rows, hc_ctx_act_stride apart */
    float *out;              /* [B][E] += */
    float *hfull;            /* [B][F] h of every neuron (the context's hook) or NULL */
} rows_in;

static int is_candidate(const hc_sparse *s, const float *pred, int b, int j)
{
    return !pred || pred[(size_t)b * s->F + j] >= s->p.threshold;
}

/* The matrix whose activation decides whether a neuron is kept: the gate,
 * or up for a sequential FFN (no gate) (its copy L->first); its bias; its
 * prepared rows. */
static const hc_weight *first_rows(const layer_state *L, const hc_layer *ly, int kind, const rows_in *in,
                                   const float **bias, const void **acts)
{
    int seq = kind == HC_FFN_SEQUENTIAL;
    *bias = seq ? ly->ffn_up_b : ly->ffn_gate_b;
    *acts = seq ? in->act_u : in->act_g;
    return &L->first;
}

/* h of the kept neurons uni[0..nu) of one row from a = act(first) (0 when not
 * kept) and u = up (unused for a sequential FFN), per FFN kind. */
static void neuron_h(const hc_sparse *s, const hc_layer *ly, const int32_t *uni, int nu, float *g, const float *u)
{
    int act = s->m->hp.act;
    for (int i = 0; i < nu; i++) {
        float h = 0.0f, up = 0.0f;
        if (g[i] != 0.0f) {   /* kept <=> a != 0: a kept neuron's h as computed alone; others stay 0 (not -0) */
            switch ((enum hc_ffn_kind)s->m->hp.ffn_kind) {
            case HC_FFN_GATED:
                up = u[i] + (ly->ffn_up_b ? ly->ffn_up_b[uni[i]] : 0.0f);
                h = g[i] * up;
                break;
            case HC_FFN_SYMMETRIC:
                up = hc_act1(act, u[i] + (ly->ffn_up_b ? ly->ffn_up_b[uni[i]] : 0.0f));
                h = up != 0.0f ? g[i] * up : 0.0f;
                break;
            case HC_FFN_SEQUENTIAL:
                h = g[i];
                break;
            }
        }
        g[i] = h;
    }
}

/* Which (row, list position) pairs a product of B rows needs: the
 * candidates (the gate, with a predictor), or the positions a row keeps
 * (up: a non-zero act(gate) in G). */
enum need { NEED_CANDIDATE, NEED_KEPT };

static int needs(const hc_sparse *s, enum need what, const float *pred, const float *G, int b, int i, int j)
{
    return what == NEED_CANDIDATE ? is_candidate(s, pred, b, j) : G[(size_t)b * s->F + i] != 0.0f;
}

/* rows_needed's pair buffers for B rows and n pairs (out of memory exits). */
static void grow_pairs(hc_sparse *s, int B, size_t n)
{
    if (B > s->cap_rows) {
        size_t *at = realloc(s->pair_at, sizeof(size_t) * ((size_t)B + 1));
        if (!at) hc_die("out of memory for the sparse FFN's lists of %d rows", B);
        s->pair_at = at;
        s->cap_rows = B;
    }
    if (n <= s->cap_pairs) return;
    int32_t *r = realloc(s->pair_row, sizeof(int32_t) * n);
    if (r) s->pair_row = r;
    int32_t *p = realloc(s->pair_pos, sizeof(int32_t) * n);
    if (p) s->pair_pos = p;
    float *y = realloc(s->pair_y, sizeof(float) * n);
    if (y) s->pair_y = y;
    if (!r || !p || !y) hc_die("out of memory for the sparse FFN's lists of %zu neurons", n);
    s->cap_pairs = n;
}

/* Y[b][i] = row list[i] of w · activation b for the pairs that need it, 0
 * for the others; pairs: how many need it. When rows need few of the listed
 * neurons (a quarter or less on average: a prompt's union is much larger
 * than each token's set), each row gathers its own neurons (the rows it
 * shares are read from cache); otherwise all B rows at once for the whole
 * list. A product's value does not depend on B or on where the row is read
 * from (kernels.h), so both give the same bits. */
static void rows_needed(hc_sparse *s, hc_ctx *ctx, const hc_weight *w, int step, const int32_t *list, int k,
                        const void *acts, int B, float *Y, enum need what, const float *pred, const float *G,
                        uint64_t pairs)
{
    size_t sF = (size_t)s->F;
    if (B == 1 || pairs * 4 > (uint64_t)B * (uint64_t)k) {
        hc_ctx_matvec_rows(ctx, w, list, k, step, acts, B, Y, sF);
        return;
    }
    grow_pairs(s, B, pairs + 1);   /* + 1: the list below writes one slot past the last pair */
    size_t n = 0;
    for (int b = 0; b < B; b++) {
        s->pair_at[b] = n;
        for (int i = 0; i < k; i++) {
            s->pair_pos[n] = i;
            s->pair_row[n] = list[i];
            n += (size_t)needs(s, what, pred, G, b, i, list[i]);
        }
    }
    s->pair_at[B] = n;
    hc_ctx_matvec_rows_each(ctx, w, s->pair_row, s->pair_at, step, acts, B, s->pair_y);
    for (int b = 0; b < B; b++) {
        float *y = Y + (size_t)b * sF;
        memset(y, 0, sizeof(float) * (size_t)k);
        for (size_t p = s->pair_at[b]; p < s->pair_at[b + 1]; p++) y[s->pair_pos[p]] = s->pair_y[p];
    }
}

/* The neurons among idx[0..n) (NULL: 0..n-1) that are a candidate of some
 * row, ascending, into s->cand (their number returned); *n_cand += the
 * candidate (row, neuron) pairs when there is a predictor (without one every
 * neuron is a candidate). Row by row: pred's rows are far apart. */
static int candidates(hc_sparse *s, const int32_t *idx, int n, const float *pred, int B, uint64_t *n_cand)
{
    int k = 0;
    if (!pred) {
        for (int i = 0; i < n; i++) s->cand[i] = idx ? idx[i] : i;
        return n;
    }
    memset(s->any, 0, (size_t)n);
    for (int b = 0; b < B; b++) {
        uint64_t c = 0;
        for (int i = 0; i < n; i++) {
            int is = is_candidate(s, pred, b, idx ? idx[i] : i);
            s->any[i] |= (uint8_t)is;
            c += (uint64_t)is;
        }
        *n_cand += c;
    }
    for (int i = 0; i < n; i++)
        if (s->any[i]) s->cand[k++] = idx ? idx[i] : i;
    return k;
}

/* a = act(a + bias) on B rows of list positions i < k (neurons cand[i], or
 * i), and crit (NULL: none) = |a| there. Without a bias a zero is left as it
 * is (a prompt's rows hold zeros for the neurons they do not need): act(0)
 * is +-0, which the gate rule drops like a 0, and crit is already 0. */
static void activate(const hc_sparse *s, float *G, const int32_t *cand, int k, int B, const float *bias, float *crit)
{
    int act = s->m->hp.act;
    size_t sF = (size_t)s->F;
    for (int b = 0; b < B; b++) {
        float *g = G + (size_t)b * sF;
        for (int i = 0; i < k; i++) {
            int j = cand ? cand[i] : i;
            if (!bias && g[i] == 0.0f) continue;
            g[i] = hc_act1(act, bias ? g[i] + bias[j] : g[i]);
            if (crit) crit[(size_t)b * sF + (size_t)j] = fabsf(g[i]);
        }
    }
}

/* The gate rule on B rows of act(gate) values G[b][i] of list positions i <
 * k (neurons cand[i], or i): a value not kept becomes 0; s->uni gets the
 * neurons some row keeps (their number returned, kept pairs added to *n_up)
 * and every row is compacted to them. Row by row: G's rows are far apart. */
static int keep_union(hc_sparse *s, float *G, const int32_t *cand, int k, int B, float t_gate, const float *pred,
                      uint64_t *n_up)
{
    size_t sF = (size_t)s->F;
    memset(s->any, 0, (size_t)k);
    for (int b = 0; b < B; b++) {
        float *g = G + (size_t)b * sF;
        for (int i = 0; i < k; i++) {
            int keep = hc_keep_act(g[i], t_gate) & is_candidate(s, pred, b, cand ? cand[i] : i);
            if (!keep) g[i] = 0.0f;
            s->any[i] |= (uint8_t)keep;
            *n_up += (uint64_t)keep;
        }
    }
    int nu = 0;
    for (int i = 0; i < k; i++)
        if (s->any[i]) s->uni[nu++] = cand ? cand[i] : i;
    for (int b = 0; nu < k && b < B; b++) {
        float *g = G + (size_t)b * sF;
        for (int i = 0, u = 0; i < k; i++)
            if (s->any[i]) g[u++] = g[i];
    }
    return nu;
}

/* After the gate and up rows: h of B rows in G (rows F apart) for the kept
 * neurons s->uni[0..nu); the contribution criterion, the counts, the
 * context's h, then the down rows. */
static void finish_rows(hc_sparse *s, hc_ctx *ctx, int layer, const rows_in *in, float *G, int nu, uint64_t n_cand,
                        uint64_t n_up)
{
    layer_state *L = &s->L[layer];
    int B = in->B, contrib = L->norm != NULL;
    size_t sF = (size_t)s->F;
    uint64_t served = 0, hit = 0;
    for (int b = 0; b < B; b++) {
        float *g = G + (size_t)b * sF;
        for (int i = 0; i < nu; i++) {
            size_t j = (size_t)b * sF + (size_t)s->uni[i];
            if (contrib) {
                float c = hc_contribution(g[i], L->norm[s->uni[i]]);
                if (s->crit) s->crit[j] = c;
                if (!hc_keep_act(c, L->t_act)) g[i] = 0.0f;
            }
            served += g[i] != 0.0f;
            if (s->p.check && g[i] != 0.0f) hit += s->truth[j] != 0.0f;
        }
        if (in->hfull)
            for (int i = 0; i < nu; i++) in->hfull[(size_t)b * sF + s->uni[i]] = g[i];
    }
    L->st.computed += served;
    L->st.hit += hit;
    L->st.served_cpu += served;
    L->st.bytes += n_cand * L->rb_gate + n_up * L->rb_up + served * L->rb_down;
    L->st.steps++;
    L->st.kept += (uint64_t)nu;
    hc_ctx_down_accum(ctx, &L->down, s->uni, G, sF, nu, B, in->out);
}

/* The CPU's share of B rows: candidates among idx[0..n) (NULL: all neurons).
 * The first rows (gate, or up without a gate) of the neurons that are a candidate of any row are computed
 * for all B rows at once (the batched kernel reads each weight row once), a
 * row's non-candidates and act(gate) values that fail the keep rule are set
 * to 0, and the up and down rows are read only for the union of the neurons
 * some row keeps, again for all rows at once; a row's h is 0 wherever it does
 * not keep the neuron, and the down step skips zero h. Every value and every
 * sum is the one computing the row alone would give (same rows, same order:
 * the union is ascending like each row's own list), so B rows at once give
 * the bits of B single tokens, and B = 1 is the generation path. The FFN's
 * scratch (hc_ctx_ffn_scratch) holds gate/h and up. */
static void cpu_part(hc_sparse *s, hc_ctx *ctx, int layer, const int32_t *idx, int n, const rows_in *in)
{
    const hc_layer *ly = &s->m->layers[layer];
    layer_state *L = &s->L[layer];
    int F = s->F, B = in->B;
    size_t sF = (size_t)F;
    float *G = hc_ctx_ffn_scratch(ctx, 0), *U = hc_ctx_ffn_scratch(ctx, 1);
    int k = 0, kind = s->m->hp.ffn_kind, contrib = L->norm != NULL;
    /* the gate rule: the contribution criterion applies its threshold after up */
    float t_gate = contrib ? 0.0f : L->t_act;
    uint64_t n_cand = in->pred ? 0 : (uint64_t)B * (uint64_t)n, n_up = 0;
    const int32_t *cand = s->cand;
    const float *fb;
    const void *fa;
    const hc_weight *first = first_rows(L, ly, kind, in, &fb, &fa);
    if (!idx && !in->pred && L->step == 1) {
        /* every neuron: the product over the contiguous rows (the same bits as
         * gathering them; at B = 1 it reads them as the dense decode does,
         * 6-20 % faster since its rows are in chunks of 16: docs/measurements.md) */
        k = F;
        cand = NULL;
        hc_ctx_matvec_prepared(ctx, first, fa, B, G, sF);
    } else {
        k = candidates(s, idx, n, in->pred, B, &n_cand);
        rows_needed(s, ctx, first, L->step, s->cand, k, fa, B, G, NEED_CANDIDATE, in->pred, NULL,
                    in->pred ? n_cand : (uint64_t)B * (uint64_t)k);
    }
    activate(s, G, cand, k, B, fb, contrib ? NULL : s->crit);
    int nu = keep_union(s, G, cand, k, B, t_gate, in->pred, &n_up);
    if (kind != HC_FFN_SEQUENTIAL)
        rows_needed(s, ctx, &L->up, L->step, s->uni, nu, in->act_u, B, U, NEED_KEPT, NULL, G, n_up);
    for (int b = 0; b < B; b++) neuron_h(s, ly, s->uni, nu, G + (size_t)b * sF, U + (size_t)b * sF);
    finish_rows(s, ctx, layer, in, G, nu, n_cand, n_up);
}

/* One generated token with a predictor, every neuron on the CPU: the
 * predictor's second product, the candidates, their gate rows, the keep
 * rule, the kept neurons' up rows and h in one pool run over ranges of
 * neurons (which neurons a range needs depends only on its own predictor
 * outputs), instead of a run for each product: at 2 threads the waits of
 * five runs per layer were a large part of a token's FFN time. Each value
 * is the same dot of the same row as cpu_part's (kernels.h: a product does
 * not depend on the range or where its rows are listed), so the bits are
 * cpu_part's. */
#define DECODE_UNIT 64   /* neurons: ranges start on multiples of it */

typedef struct {
    hc_sparse *s;
    const hc_layer *ly;
    const layer_state *L;
    int isa, n_chunks;
    const void *x2, *xg, *xu;    /* fc2's, the first rows' and up's activations (arranged when the kernels want) */
    const float *fb;             /* the first rows' bias */
    float *G, *U;                /* [F]: a range's values at its own positions */
    int32_t *counts;             /* [n_chunks][2]: candidates, kept */
} decode_task;

static void decode_chunk(void *arg, int chunk, int ith)
{
    const decode_task *t = arg;
    hc_sparse *s = t->s;
    const layer_state *L = t->L;
    int lo, hi, nc = 0, nu = 0, kind = s->m->hp.ffn_kind;
    (void)ith;
    hc_split(s->F, DECODE_UNIT, chunk, t->n_chunks, &lo, &hi);
    if (lo < hi) {
        hc_weight_matvec(&t->ly->fc2, t->isa, lo, hi, t->x2, 0, 1, s->pred + lo, 0);
        int32_t *cand = s->cand + lo, *uni = s->uni + lo, up = kind != HC_FFN_SEQUENTIAL;
        float *g = t->G + lo, *u = t->U + lo, t_gate = L->norm ? 0.0f : L->t_act;
        for (int j = lo; j < hi; j++)
            if (s->pred[j] >= s->p.threshold) cand[nc++] = j;
        /* candidate by candidate: its gate row, act and the keep rule, then
         * at once its up row, which was fetched with the gate row (one run
         * where pair_rows put them side by side) */
        for (int i = 0; i < nc; i++) {
            if (i + 1 < nc) {
                hc_weight_prefetch(&L->first, L->step * cand[i + 1], 0, L->first.n);
                if (up) hc_weight_prefetch(&L->up, L->step * cand[i + 1], 0, L->up.n);
            }
            float a;
            hc_weight_matvec_rows(&L->first, t->isa, cand + i, 1, L->step, t->xg, &a);
            activate(s, &a, cand + i, 1, 1, t->fb, L->norm ? NULL : s->crit);
            if (!hc_keep_act(a, t_gate)) continue;
            if (up) hc_weight_matvec_rows(&L->up, t->isa, cand + i, 1, L->step, t->xu, u + nu);
            uni[nu] = cand[i];
            g[nu++] = a;
        }
        neuron_h(s, t->ly, uni, nu, g, u);
    }
    t->counts[2 * chunk] = nc;
    t->counts[2 * chunk + 1] = nu;
}

/* w's kernels' arrangement of the prepared activation act in *at (advanced),
 * or act itself when they need none. */
static const void *arranged_one(const hc_weight *w, int isa, const void *act, char **at)
{
    size_t ab = hc_weight_arranged_bytes(w, isa);
    if (!ab) return act;
    char *xa = *at;
    hc_weight_arrange(w, isa, act, 0, 1, xa);
    *at += ab;
    return xa;
}

static void decode_part(hc_sparse *s, hc_ctx *ctx, int layer, const rows_in *in)
{
    const hc_layer *ly = &s->m->layers[layer];
    const layer_state *L = &s->L[layer];
    hc_pool *pool = hc_ctx_pool(ctx);
    int isa = hc_isa(), F = s->F;
    const void *fa;
    decode_task t = { s, ly, L, isa, 0, NULL, NULL, NULL, NULL, hc_ctx_ffn_scratch(ctx, 0), hc_ctx_ffn_scratch(ctx, 1),
                      NULL };
    first_rows(L, ly, s->m->hp.ffn_kind, in, &t.fb, &fa);
    t.n_chunks = hc_pool_chunks(pool, (F + DECODE_UNIT - 1) / DECODE_UNIT, (size_t)F * (size_t)ly->fc2.n);
    size_t need = hc_weight_act_bytes(&ly->fc2) + hc_weight_arranged_bytes(&ly->fc2, isa) +
                  hc_weight_arranged_bytes(&L->first, isa) + hc_weight_arranged_bytes(&L->up, isa) + 64 +
                  sizeof(int32_t) * 2 * (size_t)t.n_chunks;
    if (need > s->dec_cap) {
        free(s->dec_buf);
        if (posix_memalign(&s->dec_buf, 64, need)) hc_die("out of memory for the sparse FFN's activations");
        s->dec_cap = need;
    }
    char *at = s->dec_buf, *x2 = at;
    hc_weight_prepare(&ly->fc2, isa, s->hidden, x2);
    at += (hc_weight_act_bytes(&ly->fc2) + 63) & ~(size_t)63;
    t.x2 = arranged_one(&ly->fc2, isa, x2, &at);
    t.xg = arranged_one(&L->first, isa, fa, &at);
    t.xu = L->up.kind == HC_WEIGHT_NONE ? NULL : arranged_one(&L->up, isa, in->act_u, &at);
    t.counts = (int32_t *)at;
    hc_pool_run(pool, decode_chunk, &t, t.n_chunks);
    /* the ranges' kept neurons and h, ascending, to the front */
    uint64_t n_cand = 0, n_up = 0;
    int nu = 0;
    for (int c = 0; c < t.n_chunks; c++) {
        int lo, hi, k = t.counts[2 * c + 1];
        hc_split(F, DECODE_UNIT, c, t.n_chunks, &lo, &hi);
        memmove(s->uni + nu, s->uni + lo, sizeof(int32_t) * (size_t)k);
        memmove(t.G + nu, t.G + lo, sizeof(float) * (size_t)k);
        nu += k;
        n_cand += (uint64_t)t.counts[2 * c];
        n_up += (uint64_t)k;
    }
    finish_rows(s, ctx, layer, in, t.G, nu, n_cand, n_up);
}

/* prompt_part's end: the kept pairs' h in s->pair_* (n candidate pairs, m
 * kept); the contribution criterion, the counts and the context's h as
 * finish_rows, then the down rows from per-neuron lists of the rows with
 * non-zero h (counted by neuron, filled in row order: rows ascending). */
static void pairs_down(hc_sparse *s, hc_ctx *ctx, int layer, const rows_in *in, size_t n, size_t m)
{
    layer_state *L = &s->L[layer];
    int F = s->F, B = in->B;
    size_t sF = (size_t)F, served = 0;
    uint64_t hit = 0;
    size_t *at = s->nz_at;
    memset(at, 0, sizeof(size_t) * (sF + 1));
    if (m > s->nz_cap) {
        int32_t *nb = realloc(s->nz_b, sizeof(int32_t) * m);
        if (nb) s->nz_b = nb;
        float *nh = realloc(s->nz_h, sizeof(float) * m);
        if (nh) s->nz_h = nh;
        if (!nb || !nh) hc_die("out of memory for the sparse FFN's lists of %zu neurons", m);
        s->nz_cap = m;
    }
    int32_t *nz_b = s->nz_b;
    float *nz_h = s->nz_h;
    for (int b = 0; b < B; b++)
        for (size_t p = s->pair_at[b]; p < s->pair_at[b + 1]; p++) {
            int j = s->pair_row[p];
            size_t bj = (size_t)b * sF + (size_t)j;
            float h = s->pair_y[p];
            if (L->norm) {
                float c = hc_contribution(h, L->norm[j]);
                if (s->crit) s->crit[bj] = c;
                if (!hc_keep_act(c, L->t_act)) h = s->pair_y[p] = 0.0f;
            }
            if (in->hfull) in->hfull[bj] = h;
            if (h == 0.0f) continue;
            served++;
            if (s->p.check) hit += s->truth[bj] != 0.0f;
            at[j + 1]++;
        }
    L->st.computed += served;
    L->st.hit += hit;
    L->st.served_cpu += served;
    L->st.bytes += n * L->rb_gate + m * L->rb_up + served * L->rb_down;
    /* the neurons with some non-zero h, ascending, and their lists' starts */
    int k = 0;
    for (int j = 0; j < F; j++)
        if (at[j + 1]) {
            s->uni[k] = j;
            at[k + 1] = at[k] + at[j + 1];
            s->cand[j] = k++;   /* neuron j's list position, for the fill */
        }
    size_t *cur = s->nz_cur;
    memcpy(cur, at, sizeof(size_t) * ((size_t)k + 1));
    for (int b = 0; b < B; b++)
        for (size_t p = s->pair_at[b]; p < s->pair_at[b + 1]; p++)
            if (s->pair_y[p] != 0.0f) {
                size_t q = cur[s->cand[s->pair_row[p]]]++;
                nz_b[q] = b;
                nz_h[q] = s->pair_y[p];
            }
    hc_ctx_down_lists(ctx, &L->down, s->uni, k, B, nz_b, nz_h, at, in->out);
}

/* A prompt's B rows with a predictor, every neuron on the CPU, when rows
 * need few neurons each (a quarter of n_ff or less on average): the work
 * follows each row's own (row, neuron) pairs instead of [B][union] passes
 * (a prompt's union is nearly every neuron, so cpu_part's bookkeeping
 * walked B x n_ff values some ten times per layer). Candidates per row, their
 * gate rows (one pool run), act and the keep rule compacting the pairs, the
 * kept pairs' up rows (one run), h, the counts, then the down rows from
 * per-neuron lists made by counting. Every value is cpu_part's (same dots,
 * same elementwise rules; each output gets its neurons in ascending order),
 * so the bits are too. Returns 0, having changed nothing the caller reads,
 * where it does not apply (cpu_part then): one row, no predictor, a device,
 * an observer with a bias on the first rows (cpu_part also gives it the
 * criterion of other rows' candidates), or rows needing more neurons. */
static int prompt_part(hc_sparse *s, hc_ctx *ctx, int layer, const rows_in *in)
{
    const hc_layer *ly = &s->m->layers[layer];
    layer_state *L = &s->L[layer];
    int F = s->F, B = in->B, kind = s->m->hp.ffn_kind, act = s->m->hp.act;
    size_t sF = (size_t)F, n = 0;
    const float *fb;
    const void *fa;
    const hc_weight *first = first_rows(L, ly, kind, in, &fb, &fa);
    if (B == 1 || !in->pred || L->dev || (s->crit && fb)) return 0;
    for (int b = 0; b < B; b++) {
        const float *pr = in->pred + (size_t)b * sF;
        grow_pairs(s, B, n + sF);
        s->pair_at[b] = n;
        for (int j = 0; j < F; j++) {
            s->pair_row[n] = j;
            n += pr[j] >= s->p.threshold;
        }
    }
    s->pair_at[B] = n;
    if (n * 4 > (size_t)B * sF) return 0;
    hc_ctx_matvec_rows_each(ctx, first, s->pair_row, s->pair_at, L->step, fa, B, s->pair_y);
    /* act and the keep rule (activate's and keep_union's), the kept pairs compacted in place */
    float t_gate = L->norm ? 0.0f : L->t_act, *crit = L->norm ? NULL : s->crit;
    size_t m = 0;
    for (int b = 0; b < B; b++) {
        size_t p0 = s->pair_at[b], p1 = s->pair_at[b + 1];
        s->pair_at[b] = m;
        for (size_t p = p0; p < p1; p++) {
            int j = s->pair_row[p];
            float a = s->pair_y[p];
            if (fb || a != 0.0f) {
                a = hc_act1(act, fb ? a + fb[j] : a);
                if (crit) crit[(size_t)b * sF + (size_t)j] = fabsf(a);
            }
            if (!hc_keep_act(a, t_gate)) continue;
            s->pair_row[m] = j;
            s->pair_y[m++] = a;
        }
    }
    s->pair_at[B] = m;
    float *U = hc_ctx_ffn_scratch(ctx, 1);
    if (kind != HC_FFN_SEQUENTIAL)
        hc_ctx_matvec_rows_each(ctx, &L->up, s->pair_row, s->pair_at, L->step, in->act_u, B, U);
    for (int b = 0; b < B; b++)
        neuron_h(s, ly, s->pair_row + s->pair_at[b], (int)(s->pair_at[b + 1] - s->pair_at[b]), s->pair_y + s->pair_at[b],
                 U + s->pair_at[b]);
    pairs_down(s, ctx, layer, in, n, m);
    return 1;
}

/* Device done or failed: add its share, or compute the hot neurons here. */
static void finish_device(hc_sparse *s, hc_ctx *ctx, int layer, const rows_in *in)
{
    layer_state *L = &s->L[layer];
    double t0 = hc_now();
    if (hc_cl_layer_finish(L->dev, s->ydev, s->hdev, &s->t_dev, s->dev_err, sizeof s->dev_err)) {
        hc_warn("%s; the CPU computes every neuron from now on", s->dev_err);
        cpu_part(s, ctx, layer, L->hot, L->n_hot, in);
        return;
    }
    s->t_wait += hc_now() - t0;
    int E = s->E, k = L->n_hot;
    for (size_t i = 0; i < (size_t)in->B * (size_t)E; i++) in->out[i] += s->ydev[i];
    for (int b = 0; b < in->B; b++)
        for (int r = 0; r < k; r++) {
            float h = s->hdev[(size_t)b * k + r];
            /* the device reads gate and up rows of its candidates, down rows of non-zero h */
            L->st.bytes += s->mask[(size_t)b * k + r] ? L->rb_gate + L->rb_up : 0;
            if (h == 0.0f) continue;
            L->st.bytes += L->rb_down;
            size_t j = (size_t)b * s->F + (size_t)L->hot[r];
            L->st.served_dev++;
            L->st.computed++;
            if (in->hfull) in->hfull[j] = h;
            if (s->p.check) L->st.hit += s->truth[j] != 0.0f;
        }
}

/* Queue the hot rows on the device before the CPU computes the cold ones;
 * where the forward pass gives a view on the device (hc_ctx_ffn_device_share)
 * and nothing needs h on the host, their sum stays there: *left = 1. 0, or
 * -1 when the device failed (dev_err). */
static int start_device(hc_sparse *s, hc_ctx *ctx, int layer, const rows_in *in, int *left)
{
    layer_state *L = &s->L[layer];
    int k = L->n_hot;
    for (int b = 0; b < in->B; b++)
        for (int r = 0; r < k; r++) s->mask[(size_t)b * k + r] = (uint8_t)is_candidate(s, in->pred, b, L->hot[r]);
    if (hc_cl_layer_start(L->dev, in->act_g, hc_ctx_act_stride(ctx), in->B, s->mask, s->m->hp.act, L->t_act, s->dev_err,
                          sizeof s->dev_err))
        return -1;
    hc_view share = hc_ctx_ffn_device_share(ctx);
    if (!(*left = share.buf && !in->hfull)) return 0;
    if (s->p.check)   /* the mask's bytes again: the truly active hot rows */
        for (int b = 0; b < in->B; b++)
            for (int r = 0; r < k; r++) s->mask[(size_t)b * k + r] = s->truth[(size_t)b * s->F + L->hot[r]] != 0.0f;
    return hc_cl_layer_keep(L->dev, share, s->p.check ? s->mask : NULL, s->dev_err, sizeof s->dev_err);
}

/* ------------------------------------------------------------ the FFN */

static int grow_rows(hc_sparse *s, int B)
{
    if (B <= s->cap_b) return 0;
    size_t bf = sizeof(float) * (size_t)B * (size_t)s->F, kb = (size_t)B * (size_t)(s->k_max ? s->k_max : 1);
    void **bufs[7] = { (void **)&s->pred, (void **)&s->hidden, (void **)&s->truth,
                       (void **)&s->ydev, (void **)&s->mask, (void **)&s->hdev, (void **)&s->crit };
    size_t sizes[7] = { bf, sizeof(float) * (size_t)B * (size_t)(s->r_max ? s->r_max : 1), bf,
                        sizeof(float) * (size_t)B * (size_t)s->E, kb, sizeof(float) * kb, bf };
    int ok = 1;
    for (int i = 0; i < (s->p.observe ? 7 : 6); i++) {
        void *p = realloc(*bufs[i], sizes[i]);
        if (p) *bufs[i] = p;
        else ok = 0;
    }
    if (!ok) return -1;
    s->cap_b = B;
    return 0;
}

/* Truly active neurons of B rows: |h| above the profiler's cut, or with
 * calibrated thresholds the layer's rule computed for every neuron (the
 * contribution of h, or act(first) for the gate criterion). */
static void true_active(hc_sparse *s, hc_ctx *ctx, int layer, const float *x_norm, int B)
{
    const layer_state *L = &s->L[layer];
    const hc_layer *ly = &s->m->layers[layer];
    size_t F = (size_t)s->F, n = (size_t)B * F;
    if (s->calibrated && !L->norm) {
        int seq = s->m->hp.ffn_kind == HC_FFN_SEQUENTIAL;
        const float *fb = seq ? ly->ffn_up_b : ly->ffn_gate_b;
        hc_ctx_matvec(ctx, seq ? &ly->ffn_up : &ly->ffn_gate, x_norm, B, s->truth);
        for (size_t i = 0; i < n; i++)
            s->truth[i] = hc_keep_act(hc_act1(s->m->hp.act, s->truth[i] + (fb ? fb[i % F] : 0.0f)), L->t_act);
        return;
    }
    hc_ffn_neurons(ctx, layer, x_norm, B, s->truth);
    float cut = s->m->hp.act == HC_ACT_RELU ? 0.0f : SILU_ACTIVE;
    for (size_t i = 0; i < n; i++)
        s->truth[i] = s->calibrated ? hc_keep_act(hc_contribution(s->truth[i], L->norm[i % F]), L->t_act)
                                    : fabsf(s->truth[i]) > cut;
}

/* All B rows (a prompt batch, or one generated token) in one pass: the device
 * is given its rows first and only waited for at the end, after the CPU has
 * computed the cold neurons of every row. */
static void sparse_ffn(void *user, hc_ctx *ctx, int layer, const float *ffn_inp, const float *x_norm, int B, float *out,
                       float *h)
{
    hc_sparse *s = user;
    const hc_layer *ly = &s->m->layers[layer];
    layer_state *L = &s->L[layer];
    int E = s->E, F = s->F;
    if (grow_rows(s, B)) {   /* no error path through an hc_ffn_fn: the dense FFN is exact */
        hc_warn("out of memory for the sparse FFN of %d rows; this step runs dense", B);
        hc_ffn_dense(ctx, layer, x_norm, B, out, h);
        return;
    }
    if (s->p.check) true_active(s, ctx, layer, x_norm, B);   /* not timed: the dense FFN again */
    double t_start = hc_now(), t0 = t_start;
    if (s->crit) memset(s->crit, 0, sizeof(float) * (size_t)B * F);
    int fused = B == 1 && s->predictor && !L->dev;   /* decode_part computes fc2 with the rows */
    if (s->predictor) {
        L->st.bytes += (uint64_t)B * (hc_weight_bytes(&ly->fc1) + hc_weight_bytes(&ly->fc2));
        hc_ctx_matvec(ctx, &ly->fc1, ffn_inp, B, s->hidden);
        for (size_t i = 0; i < (size_t)B * (size_t)ly->fc1.rows; i++) if (s->hidden[i] < 0.0f) s->hidden[i] = 0.0f;
        if (!fused) hc_ctx_matvec(ctx, &ly->fc2, s->hidden, B, s->pred);
    }
    void *ag, *au;
    if (ly->ffn_gate.kind != HC_WEIGHT_NONE) {
        hc_ctx_prepare_gate_up(ctx, ly, x_norm, B, &ag, &au);
    } else {
        ag = au = hc_ctx_acts(ctx, 0, hc_weight_act_bytes(&ly->ffn_up));
        hc_ctx_prepare(ctx, &ly->ffn_up, x_norm, B, au);
    }
    if (h) memset(h, 0, sizeof(float) * (size_t)B * F);
    memset(out, 0, sizeof(float) * (size_t)B * E);
    rows_in in = { B, s->predictor ? s->pred : NULL, ag, au, out, h };

    int on_dev = L->dev && !s->dev_err[0], left = 0;
    if (on_dev && start_device(s, ctx, layer, &in, &left)) {
        hc_warn("%s; the CPU computes every neuron from now on", s->dev_err);
        on_dev = left = 0;
    }
    if (fused) {
        decode_part(s, ctx, layer, &in);
    } else if (!prompt_part(s, ctx, layer, &in)) {
        if (on_dev || !L->dev) cpu_part(s, ctx, layer, L->cold, L->cold ? L->n_cold : F, &in);
        else cpu_part(s, ctx, layer, NULL, F, &in);
    }
    s->t_cpu += hc_now() - t0;
    if (left) hc_ctx_ffn_left_on_device(ctx);
    else if (on_dev) finish_device(s, ctx, layer, &in);
    if (s->p.observe) s->p.observe(s->p.observe_user, layer, s->crit, B, F);
    hc_add_bias(out, ly->ffn_down_b, B, E);

    L->st.tokens += (uint64_t)B;
    if (in.pred)
        for (size_t i = 0; i < (size_t)B * F; i++) L->st.predicted += in.pred[i] >= s->p.threshold;
    if (s->p.check)
        for (size_t i = 0; i < (size_t)B * F; i++) L->st.truth += s->truth[i] != 0.0f;
    s->t_ffn += hc_now() - t_start;
}

/* ------------------------------------------------------------ setup */

static size_t row_bytes(const hc_weight *w)
{
    return w->kind != HC_WEIGHT_NONE && w->rows ? hc_weight_bytes(w) / (size_t)w->rows : 0;
}

/* ‖down_j‖ of every neuron (its down row), summed in double in row order. */
static float *down_norms(const hc_weight *down)
{
    float *norm = malloc(sizeof(float) * (size_t)down->rows), *row = malloc(sizeof(float) * (size_t)down->n);
    if (!norm || !row) {
        free(norm);
        free(row);
        return NULL;
    }
    for (int j = 0; j < down->rows; j++) {
        hc_weight_row(down, j, row);
        double ss = 0;
        for (int e = 0; e < down->n; e++) ss += (double)row[e] * row[e];
        norm[j] = (float)sqrt(ss);
    }
    free(row);
    return norm;
}

hc_sparse *hc_sparse_new(const hc_model *m, const hc_sparse_params *p, char *err, size_t errlen)
{
    const hc_hparams *hp = &m->hp;
    if (hc_sparse_check(m, err, errlen)) return NULL;
    hc_sparse *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->m = m;
    s->p = *p;
    s->E = hp->n_embd;
    s->F = hp->n_ff;
    s->predictor = p->use_predictor;
    for (int l = 0; l < hp->n_layer; l++) {
        if (m->layers[l].fc1.kind == HC_WEIGHT_NONE) s->predictor = 0;
        else if (m->layers[l].fc1.rows > s->r_max) s->r_max = m->layers[l].fc1.rows;
    }
    s->calibrated = p->layer_thr != NULL;
    s->p.layer_thr = NULL;   /* copied into the layers below */
    s->L = calloc((size_t)hp->n_layer, sizeof *s->L);
    s->cand = malloc(sizeof(int32_t) * (size_t)s->F);
    s->uni = malloc(sizeof(int32_t) * (size_t)s->F);
    s->any = malloc((size_t)s->F);
    s->nz_at = malloc(sizeof(size_t) * ((size_t)s->F + 1));
    s->nz_cur = malloc(sizeof(size_t) * ((size_t)s->F + 1));
    if (!s->L || !s->cand || !s->uni || !s->any || !s->nz_at || !s->nz_cur) goto oom;
    for (int l = 0; l < hp->n_layer; l++) {
        layer_state *L = &s->L[l];
        const hc_layer *ly = &m->layers[l];
        if (down_rows(m, l, &L->down, &L->down_owned, &L->down_cols, err, errlen)) {
            hc_sparse_free(s);
            return NULL;
        }
        int seq = hp->ffn_kind == HC_FFN_SEQUENTIAL;
        if (!L->down_owned) huge_rows(m, &L->down, 0, &L->down_owned);
        L->first = seq ? ly->ffn_up : ly->ffn_gate;
        if (!seq) L->up = ly->ffn_up;
        L->step = s->predictor && !seq ? pair_rows(m, &L->first, &L->up, &L->first_owned) : 1;
        if (L->step == 1) {
            huge_rows(m, &L->first, 1, &L->first_owned);
            if (!seq) huge_rows(m, &L->up, 1, &L->up_owned);
        }
        L->t_act = p->layer_thr ? p->layer_thr[l] : s->predictor ? 0.0f : p->threshold;
        if (hp->act_threshold > L->t_act) L->t_act = hp->act_threshold;   /* FATReLU is ReLU kept from T on */
        L->rb_gate = row_bytes(seq ? &ly->ffn_up : &ly->ffn_gate);
        L->rb_up = seq ? 0 : row_bytes(&ly->ffn_up);
        L->rb_down = row_bytes(&L->down);
        if (p->criterion == HC_CRIT_CONTRIBUTION && !(L->norm = down_norms(&L->down))) goto oom;
    }
    return s;
oom:
    snprintf(err, errlen, "%s: out of memory for the sparse FFN", m->path);
    hc_sparse_free(s);
    return NULL;
}

void hc_sparse_free(hc_sparse *s)
{
    if (!s) return;
    for (int l = 0; s->L && l < s->m->hp.n_layer; l++) {
        free(s->L[l].down_owned);
        free(s->L[l].first_owned);
        free(s->L[l].up_owned);
        hc_gptq_free(&s->L[l].down_cols);
        free(s->L[l].norm);
        free(s->L[l].cold);
        free(s->L[l].hot);
        hc_cl_layer_free(s->L[l].dev);
    }
    void *bufs[] = { s->nz_b, s->nz_h, s->nz_at, s->nz_cur, s->dec_buf, s->L, s->cand, s->uni, s->pair_row, s->pair_pos, s->pair_y, s->pair_at, s->any, s->mask, s->ydev, s->hdev, s->pred, s->hidden, s->truth, s->crit };
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(s);
}

int hc_sparse_uses_predictor(const hc_sparse *s) { return s->predictor; }
int hc_sparse_chunked(const hc_sparse *s) { return s->m->hp.n_layer > 0 && s->L[0].first.kind == HC_WEIGHT_X16; }
const hc_weight *hc_sparse_down(const hc_sparse *s, int layer) { return &s->L[layer].down; }

const float *hc_sparse_down_norm(const hc_sparse *s, int layer) { return s->L[layer].norm; }

int hc_sparse_set_hot(hc_sparse *s, int layer, const int32_t *bucket, int k, hc_cl_layer *dev)
{
    layer_state *L = &s->L[layer];
    if (k == 0) {   /* back to the CPU */
        free(L->hot);
        free(L->cold);
        hc_cl_layer_free(L->dev);
        L->hot = L->cold = NULL;
        L->n_hot = L->n_cold = 0;
        L->dev = dev;
        return 0;
    }
    if (k > s->k_max) {   /* the [B][k_max] buffers are regrown on the next step */
        s->k_max = k;
        s->cap_b = 0;
    }
    int32_t *hot = malloc(sizeof(int32_t) * (size_t)k), *cold = malloc(sizeof(int32_t) * (size_t)(s->F - k + 1));
    if (!hot || !cold) {
        free(hot);
        free(cold);
        return -1;
    }
    memcpy(hot, bucket, sizeof(int32_t) * (size_t)k);
    int n = 0, i = 0;
    for (int j = 0; j < s->F; j++) {
        if (i < k && bucket[i] == j) i++;
        else cold[n++] = j;
    }
    free(L->hot);
    free(L->cold);
    hc_cl_layer_free(L->dev);
    L->cold = cold;
    L->n_cold = n;
    L->hot = hot;
    L->n_hot = k;
    L->dev = dev;
    return 0;
}

void hc_sparse_attach(hc_sparse *s, hc_ctx_params *p)
{
    p->ffn = sparse_ffn;
    p->ffn_user = s;
}

/* ------------------------------------------------------------ reporting */

static const char *const crit_names[2] = { "gate", "contribution" };

int hc_sparse_criterion_parse(const char *name)
{
    for (int i = 0; i < 2; i++)
        if (strcmp(name, crit_names[i]) == 0) return i;
    return -1;
}

const char *hc_sparse_criterion_name(int criterion) { return crit_names[criterion]; }

/* What the devices of layers [l0, l1) did for the tokens left there, read
 * into dev_counts (a device that has failed keeps the last counts read). */
static void read_device_counts(hc_sparse *s, int l0, int l1)
{
    char err[256];
    for (int l = l0; l < l1; l++)
        if (s->L[l].dev) hc_cl_layer_counts(s->L[l].dev, s->L[l].dev_counts, err, sizeof err);
}

/* A layer's counts, with its device's as last read. */
static hc_sparse_stats layer_stats(const hc_sparse *s, int layer)
{
    const layer_state *L = &s->L[layer];
    hc_sparse_stats st = L->st;
    st.bytes += L->dev_counts[0] * (L->rb_gate + L->rb_up) + L->dev_counts[1] * L->rb_down;
    st.served_dev += L->dev_counts[1];
    st.computed += L->dev_counts[1];
    st.hit += L->dev_counts[2];
    return st;
}

static hc_sparse_stats total_stats(const hc_sparse *s)
{
    hc_sparse_stats t = { 0 };
    for (int l = 0; l < s->m->hp.n_layer; l++) {
        hc_sparse_stats ls = layer_stats(s, l), *a = &ls;
        t.tokens += a->tokens;
        t.computed += a->computed;
        t.bytes += a->bytes;
        t.predicted += a->predicted;
        t.served_cpu += a->served_cpu;
        t.served_dev += a->served_dev;
        t.truth += a->truth;
        t.hit += a->hit;
        t.steps += a->steps;
        t.kept += a->kept;
    }
    return t;
}

hc_sparse_stats hc_sparse_get_stats(hc_sparse *s, int layer)
{
    read_device_counts(s, layer < 0 ? 0 : layer, layer < 0 ? s->m->hp.n_layer : layer + 1);
    return layer >= 0 ? layer_stats(s, layer) : total_stats(s);
}

const char *hc_sparse_device_error(const hc_sparse *s) { return s->dev_err[0] ? s->dev_err : NULL; }

static double ratio(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : 0.0; }

/* Bytes of the dense FFN of a layer (l >= 0) or all layers per token. */
static double dense_bytes(const hc_sparse *s, int layer)
{
    double b = 0;
    for (int l = layer < 0 ? 0 : layer; l < (layer < 0 ? s->m->hp.n_layer : layer + 1); l++) {
        const hc_layer *ly = &s->m->layers[l];   /* the down rows: ffn_down_t in a PWRI file */
        b += (double)s->F * (double)(row_bytes(&ly->ffn_gate) + row_bytes(&ly->ffn_up) + row_bytes(&s->L[l].down));
    }
    return b;
}

static void report_line(const hc_sparse *s, FILE *f, const char *what, int layer, const hc_sparse_stats *st)
{
    double slots = (double)st->tokens * s->F, dense = dense_bytes(s, layer);
    /* per token of the whole model: tokens counts token-layer evaluations */
    double per_tok = (double)st->bytes / ((double)st->tokens / (layer < 0 ? s->m->hp.n_layer : 1));
    char sz[2][32];
    fprintf(f, "%s: skipped %6.2f%% of neurons", what, slots > 0 ? 100.0 * (1.0 - (double)st->computed / slots) : 0.0);
    if (st->tokens)
        fprintf(f, ", FFN weights read %s/token of %s (%.1f%%)", hc_format_size((uint64_t)per_tok, sz[0], sizeof sz[0]),
                hc_format_size((uint64_t)dense, sz[1], sizeof sz[1]), 100.0 * per_tok / dense);
    if (s->predictor) fprintf(f, ", predicted active %5.1f%%", slots > 0 ? 100.0 * (double)st->predicted / slots : 0.0);
    if (s->p.check)
        fprintf(f, ", truly active %5.1f%%, recall %.4f", slots > 0 ? 100.0 * (double)st->truth / slots : 0.0,
                ratio(st->hit, st->truth));
    fputc('\n', f);
}

void hc_sparse_report(hc_sparse *s, FILE *f, int per_layer)
{
    read_device_counts(s, 0, s->m->hp.n_layer);
    hc_sparse_stats t = total_stats(s);
    if (per_layer)
        for (int l = 0; l < s->m->hp.n_layer; l++) {
            char what[32];
            snprintf(what, sizeof what, "sparse: layer %2d", l);
            hc_sparse_stats st = layer_stats(s, l);
            report_line(s, f, what, l, &st);
        }
    report_line(s, f, "sparse: all layers", -1, &t);
    if (t.steps)   /* a batch reads the union of its rows' neurons (hc-run --parallel) */
        fprintf(f, "sparse: %.2f rows per CPU step: up and down rows of %.2f%% of the neurons read per step, the "
                "union of its rows' %.2f%% each\n", ratio(t.tokens, t.steps), 100.0 * ratio(t.kept, t.steps * (uint64_t)s->F),
                100.0 * ratio(t.computed, t.tokens * (uint64_t)s->F));
    int any_dev = 0;
    uint64_t tokens = 0;   /* of the layer that saw the most: some may be dense on a device, the last keeps fewer rows */
    for (int l = 0; l < s->m->hp.n_layer; l++) {
        any_dev |= s->L[l].dev != NULL;
        tokens = s->L[l].st.tokens > tokens ? s->L[l].st.tokens : tokens;
    }
    fprintf(f, "sparse: FFN time %.2f ms for %llu tokens: CPU %.2f ms", s->t_ffn * 1e3,
            (unsigned long long)tokens, s->t_cpu * 1e3);
    if (any_dev && s->t_dev > 0) fprintf(f, ", device %.2f ms (waited %.2f ms)", s->t_dev * 1e3, s->t_wait * 1e3);
    if (any_dev) fprintf(f, "; device served %.1f%% of activations", 100.0 * ratio(t.served_dev, t.served_dev + t.served_cpu));
    fputc('\n', f);
}

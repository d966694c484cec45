/* INT4-GPTQ weights in the runtime (kind HC_WEIGHT_GPTQ of weight.h).
 *
 * The file layout (HF/AutoGPTQ qweight/scales/qzeros/g_idx, see
 * docs/formats.md, "INT4-GPTQ tensors") is repacked once at load into rows: each output
 * row holds its codes in input order, 32 codes per 16 bytes in ggml's Q4
 * nibble order (byte j: code j low, code j+16 high), the row padded with
 * zero codes to a multiple of 32; and per group {scale, -scale*zero} as f32.
 * A non-trivial g_idx is handled by sorting the inputs by group at load
 * (stable counting sort) and gathering x in that order when the activation
 * is prepared, so groups are always contiguous.
 *
 * Product: y_r = Σ_g s_g·(Σ_{k∈g} q_k x_k) + (−s_g z_g)·X_g, where the group
 * sums X_g = Σ_{k∈g} x_k are computed once per activation vector (the
 * zero point costs one multiply-add per group, not per weight).
 *
 * When gs % 32 == 0 (every GPTQ checkpoint: gs 32, 64, 128) the activation
 * is first rounded as ggml rounds Q4_0's: blocks of 32 positions (in perm
 * order) become int8 values x̃ = round(x/d) with d = max|x|/127 kept as f32,
 * and X_g is the sum of those rounded values, X̃_g = Σ_b d_b·Σ_{k∈b} x̃_k
 * (float, blocks in order). So the product is exactly the dequantized row
 * times the rounded activation, Σ_k s_g(q_k − z_g)·d_b x̃_k, up to float
 * rounding: the code sums are integers per block (Σ q·x̃, codes 0..15), then
 * per block · d_b, per group · s_g, plus (−s_g z_g)·X̃_g. The reference
 * (kernels_ref.c) sums a group's blocks in float, then the groups in order;
 * the SIMD kernels take (d_b·s_g)·isum_b per block in lanes and add the zero
 * terms last (docs/design/kernels.md). Other group sizes keep the f32
 * activation and the reference's float product on every instruction set.
 *
 * Down columns (the sparse FFN's down rows of a GPTQ ffn_down, see
 * hc_gptq_columns): neuron j is input column j of ffn_down, so its n_embd
 * codes each have their own scale and zero, those of output row e at group
 * g_idx[j]. Stored as rows of the same kind with groups of one element
 * (gs = 1) whose {scale, -scale*zero} pairs are not per row but per source
 * group: sm holds one row of n_embd pairs per group of ffn_down and sm_row[j]
 * names neuron j's, so the gs neurons of a group share them. */
#ifndef HC_KERNELS_GPTQ_H
#define HC_KERNELS_GPTQ_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "gguf.h"

typedef struct hc_gptq {
    int n, rows;              /* inputs, outputs */
    int gs, n_groups;         /* group size, ceil(n / gs) */
    int kp;                   /* n rounded up to 32 */
    uint8_t *codes;           /* rows × kp/2 bytes */
    float *sm;                /* n_sm × n_groups × {scale, -scale*zero} */
    int32_t *perm;            /* NULL, or [n]: position i holds input perm[i] */
    int view;                 /* rows of another hc_gptq (hc_gptq_rows): owns no storage */
    int32_t *sm_row;          /* NULL: row r's pairs are sm row r (n_sm = rows); else sm row sm_row[r] */
    int n_sm;
} hc_gptq;

/* Rows [r0, r0 + rows) of g as a weight of their own, sharing g's storage
 * (Falcon's fused attn_qkv: its Q, K and V rows); g must outlive it. */
hc_gptq hc_gptq_rows(const hc_gptq *g, int r0, int rows);

/* Repack from the file layout: qweight [ceil(n/8)][rows] I32, scales [G][rows]
 * F16, qzeros [G][ceil(rows/8)] I32 (true zero points), g_idx [n] I32 or NULL
 * (then k / gs). 0, or -1 with a message (bad g_idx, out of memory). */
int hc_gptq_load(hc_gptq *g, int n, int rows, int gs, const int32_t *qweight, const uint16_t *scales,
                 const int32_t *qzeros, const int32_t *g_idx, char *err, size_t errlen);
void hc_gptq_free(hc_gptq *g);

/* The GPTQ companions <name>.qweight/.scales/.qzeros[/.g_idx] of a weight of
 * n inputs and `rows` outputs (rows < 0: any) in a GGUF file written by
 * hc-quantize GPTQ (KVs hotcold.gptq.bits = 4, .group_size, .zero_format
 * "v2"), checked and repacked (gptq_load.c). 1 when the file has no
 * <name>.qweight; 0 when loaded; -1 with "what is wrong" in err. */
int hc_gptq_from_gguf(const gguf_file *f, const char *name, int n, int rows, hc_gptq *g,
                      char *err, size_t errlen);

/* 1 when the product runs on the int8 activation (gs % 32 == 0). */
static inline int hc_gptq_int8(const hc_gptq *g) { return g->gs % 32 == 0; }

/* Prepared activation, int8 product: kp / 32 blocks in chunks of 16, laid
 * out for the SIMD kernels (lane 4m+g of a chunk's reductions is its block
 * 4g+m: kernels_avx512.c), then the group sums as pairs {0, X̃_g} (so a row's
 * {s, −s·z} pairs times them is the zero term), zero-padded to 16 floats,
 * then the chunks in planes (hc_gptq_xplanes), then in the AVX2 tile's
 * planes (hc_gptq_xplanes8). Blocks past kp / 32 are zero with sidx 0. */
#define HC_GPTQ_CHUNK 16
typedef struct {
    int32_t sidx[16];   /* lane 4m+g: 2 x the group of block 4g+m (its scale's index in a row's pairs) */
    float d[16];        /* lane 4m+g: the scale of block 4g+m */
    int8_t lo[4][64];   /* lo[g][16m + i]: element i of block 4g+m, i < 16 */
    int8_t hi[4][64];   /* hi[g][16m + i]: element 16 + i */
    int32_t sidx8[16];  /* the same for the AVX2 kernels' halves of 8 blocks: */
    float d8[16];       /* lane 8h + 4m + p is block 8h + 2p + m */
} hc_gptq_xchunk;

/* After the pairs, the chunks' values again in planes, where the AVX-512
 * tile meets each row's codes after dword permutes (x16.h's hc_x16_act in
 * HC_X16_PLANES, with no correction: the codes are unsigned): lane 4m+g of
 * plane i holds block 4g+m's elements 4i .. 4i + 3 in lo[i] and 16 + 4i ..
 * in hi[i]; d as the chunk's. */
typedef struct {
    int8_t lo[4][64], hi[4][64];
    int32_t corr[16];   /* zero */
    float d[16];
} hc_gptq_xplanes;

/* After those, the chunks' values in planes once more, for the AVX2 tile:
 * in each half h of 8 blocks (the halves of sidx8 and d8) lane 4m + p of
 * plane i holds block 8h + 2p + m's elements 4i .. 4i + 3 (bytes 32h + 4(4m
 * + p) of lo[i]) and 16 + 4i .. (of hi[i]). */
typedef struct {
    int8_t lo[4][64], hi[4][64];
} hc_gptq_xplanes8;

static inline int hc_gptq_chunks(const hc_gptq *g) { return (g->kp / 32 + HC_GPTQ_CHUNK - 1) / HC_GPTQ_CHUNK; }
/* The floats the {0, X̃_g} pairs take, padded to 16. */
static inline size_t hc_gptq_xz_floats(const hc_gptq *g) { return ((size_t)g->n_groups * 2 + 15) / 16 * 16; }
/* The pairs after the chunks, and the planes after them. */
static inline const float *hc_gptq_xz(const hc_gptq *g, const void *act)
{
    return (const float *)((const hc_gptq_xchunk *)act + hc_gptq_chunks(g));
}
static inline const hc_gptq_xplanes *hc_gptq_planes(const hc_gptq *g, const void *act)
{
    return (const hc_gptq_xplanes *)(hc_gptq_xz(g, act) + hc_gptq_xz_floats(g));
}
static inline const hc_gptq_xplanes8 *hc_gptq_planes8(const hc_gptq *g, const void *act)
{
    return (const hc_gptq_xplanes8 *)(hc_gptq_planes(g, act) + hc_gptq_chunks(g));
}
/* An instruction set's prepare of the int8 activation begins here: 1 with
 * act zeroed for its blocks (hc_gptq_act_block); 0 when the group size
 * takes the float activation, then prepared. */
int hc_gptq_act_begin(const hc_gptq *g, const float *x, void *act);
/* Block b of an int8 activation being prepared (zeroed first): its rounded
 * values q, its scale d and Σq into its chunk, the planes and the group
 * sums (X̃_g += d·Σq, called block by block in order: the same floats
 * whichever instruction set rounded the block). */
static inline void hc_gptq_act_block(const hc_gptq *g, void *act, int b, const int8_t q[32], float d, int sum)
{
    hc_gptq_xchunk *c = (hc_gptq_xchunk *)act + b / HC_GPTQ_CHUNK;
    hc_gptq_xplanes *p = (hc_gptq_xplanes *)hc_gptq_planes(g, act) + b / HC_GPTQ_CHUNK;
    hc_gptq_xplanes8 *p8 = (hc_gptq_xplanes8 *)hc_gptq_planes8(g, act) + b / HC_GPTQ_CHUNK;
    float *xz = (float *)hc_gptq_xz(g, act);
    const int G = b % 16 / 4, m = b % 4, l8 = b % 16 / 8 * 8 + 4 * (b % 2) + b % 8 / 2, s = 2 * (b / (g->gs / 32));
    memcpy(c->lo[G] + 16 * m, q, 16);
    memcpy(c->hi[G] + 16 * m, q + 16, 16);
    for (int i = 0; i < 4; i++) {
        memcpy(p->lo[i] + 4 * (4 * m + G), q + 4 * i, 4);
        memcpy(p->hi[i] + 4 * (4 * m + G), q + 16 + 4 * i, 4);
        memcpy(p8->lo[i] + 4 * l8, q + 4 * i, 4);
        memcpy(p8->hi[i] + 4 * l8, q + 16 + 4 * i, 4);
    }
    c->d[4 * m + G] = c->d8[l8] = p->d[4 * m + G] = d;
    c->sidx[4 * m + G] = c->sidx8[l8] = s;
    xz[s + 1] += d * (float)sum;
}

/* The rounded activation's value at position k, and block b's scale. */
static inline int hc_gptq_xq(const void *act, int k)
{
    const hc_gptq_xchunk *c = (const hc_gptq_xchunk *)act + k / 512;
    const int b = k / 32 % 16, i = k % 32;
    return (i < 16 ? c->lo : c->hi)[b / 4][16 * (b % 4) + i % 16];
}
static inline float hc_gptq_xd(const void *act, int b)
{
    return ((const hc_gptq_xchunk *)act)[b / 16].d[4 * (b % 4) + b % 16 / 4];
}

/* Prepared activation otherwise: kp floats of x (gathered by perm,
 * zero-padded), then the n_groups group sums. */
size_t hc_gptq_act_bytes(const hc_gptq *g);
void hc_gptq_act_prepare(const hc_gptq *g, const float *x, void *act);
/* 1 if a prepared activation of a serves b. */
int hc_gptq_same_act(const hc_gptq *a, const hc_gptq *b);

/* The product itself is the hc_kernel of each instruction set file
 * (hc_ref_gptq, hc_avx2_gptq, hc_avx512_gptq: AVX2/AVX-512 on the int8
 * activation, else the scalar reference). Their row accessors: */
static inline const uint8_t *hc_gptq_codes(const hc_gptq *g, int r) { return g->codes + (size_t)r * ((size_t)g->kp / 2); }
static inline const float *hc_gptq_sm(const hc_gptq *g, int r)
{
    return g->sm + (size_t)(g->sm_row ? g->sm_row[r] : r) * 2 * (size_t)g->n_groups;
}
/* Code of position k in a repacked row. */
static inline int hc_gptq_code(const uint8_t *row, int k)
{
    const uint8_t b = row[(k / 32) * 16 + (k % 16)];
    return k % 32 < 16 ? b & 15 : b >> 4;
}
/* Positions of group j: [j*gs, end) where the last group runs to kp (zero padding). */
static inline int hc_gptq_group_end(const hc_gptq *g, int j) { return j == g->n_groups - 1 ? g->kp : (j + 1) * g->gs; }

/* The codes and pairs of the R rows a register tile takes. */
static inline void hc_gptq_tile_rows(const hc_gptq *g, const int *rows, int R, const uint8_t **w, const float **sm)
{
    for (int r = 0; r < R; r++) {
        w[r] = hc_gptq_codes(g, rows[r]);
        sm[r] = hc_gptq_sm(g, rows[r]);
    }
}

/* Row r dequantized (scale·(q − zero)), in input order. */
void hc_gptq_row(const hc_gptq *g, int r, float *out);
/* Bytes the product reads (codes, group parameters, sm_row). */
size_t hc_gptq_bytes(const hc_gptq *g);
/* Bytes of k of its rows gathered (hc_gptq_gather): hc_gptq_bytes for k = rows. */
size_t hc_gptq_rows_bytes(const hc_gptq *g, int k);

/* The down columns of ffn_down w (n = n_ff inputs, rows = n_embd) into *c:
 * rows = n_ff neurons of n = n_embd elements, gs = 1, n_sm = w's groups;
 * element e of neuron j is exactly w's element (e, j) (hc_gptq_row gives
 * the same floats). 0, or -1 out of memory. */
int hc_gptq_columns(const hc_gptq *w, hc_gptq *c);
/* Rows idx[0..k) of w into *out (perm kept; per-row pairs gathered, or the
 * whole shared sm with sm_row gathered). 0, or -1 out of memory. */
int hc_gptq_gather(const hc_gptq *w, const int32_t *idx, int k, hc_gptq *out);

#endif

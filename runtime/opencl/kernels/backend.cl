/* The OpenCL backend's kernels (runtime/backend.h on a device; host side in
 * runtime/opencl/backend.c), OpenCL C 1.2 without extensions: no half
 * arithmetic (vload_half/vstore_half only), no subgroups, no atomics. Built
 * after kernels/common.cl (hsum4, hsum16). A product takes its input
 * in the form the CPU prepares for the weight's type (hc_weight_prepare):
 * f32 for F32/F16, bf16-rounded for BF16, Q8_0 blocks for Q8_0/Q4_0, GPTQ's
 * int8 blocks for INT4-GPTQ; the act_* kernels make those forms with the
 * CPU's rounding, the products multiply as runtime/kernels_ref.c does.
 * Transposed products (ffn_down_t) take the f32 input, as the CPU's axpy.
 * Every sum runs in a fixed order (per-item partial sums in a fixed stride,
 * then a tree in local memory), so results do not depend on scheduling. The
 * host defines the model.h enums (HC_ACT_SILU, HC_NORM_RMS, HC_POS_ROPE,
 * HC_FFN_GATED, ...), TOKENS, MM_ROWS and MM_ITEMS (HC_CLB_TOKENS,
 * HC_CLB_MM_ROWS, HC_CLB_MM_ITEMS of runtime/opencl.h). docs/design/runtime.md,
 * "The OpenCL backend". */
#pragma OPENCL FP_CONTRACT OFF

/* ------------------------------------------------------------ weights
 * A matrix on the device: rows of n inputs at W, and for the quantized
 * formats (q8, q4, g4: kernels/common.cl) their scales at D; f32, f16 and
 * bf16 the elements as stored.
 * w8_T (f32, f16, bf16): elements 8j .. 8j + 7 of row r; w32_T: 32j ..
 * 32j + 31 into lo and hi; w1_T: element k (a row's tail past whole units).
 * The quantized formats are read a block at a time (common.cl's words_T;
 * the transposed product: c8_T). Where a
 * row's bytes are a multiple of 16 (n % 4 == 0 for f32, n % 8 == 0 for f16
 * and bf16; always for the quantized formats, n a multiple of 32), the
 * loads go through ushort8/uint4/float4 pointers: vloadn asks only an
 * element's alignment, and a compiler may split it into narrow loads
 * (NVIDIA's bandwidth needs 16-byte ones), so the widths are spelled out. */
float8 w8_f32(__global const uchar *W, __global const float *D, int n, int r, int j)
{
    __global const float *p = (__global const float *)W + (size_t)r * n + 8 * (size_t)j;
    if (n % 4) return vload8(0, p);
    __global const float4 *q = (__global const float4 *)p;
    return (float8)(q[0], q[1]);
}
float w1_f32(__global const uchar *W, __global const float *D, int n, int r, int k)
{
    return ((__global const float *)W)[(size_t)r * n + k];
}
float8 w8_f16(__global const uchar *W, __global const float *D, int n, int r, int j)
{
    __global const half *p = (__global const half *)W + (size_t)r * n + 8 * (size_t)j;
    if (n % 8) return vload_half8(0, p);
    const ushort8 u = *(__global const ushort8 *)p;   /* converted from a private copy: no cl_khr_fp16 */
    return vload_half8(0, (const half *)&u);
}
float w1_f16(__global const uchar *W, __global const float *D, int n, int r, int k)
{
    return vload_half((size_t)r * n + k, (__global const half *)W);
}
float8 w8_bf16(__global const uchar *W, __global const float *D, int n, int r, int j)
{
    __global const ushort *p = (__global const ushort *)W + (size_t)r * n + 8 * (size_t)j;
    if (n % 8) return as_float8(convert_uint8(vload8(0, p)) << (uint)16);
    /* a word's two halves in place (the low one first): a shift and a mask, where widening the
       eight halves first cost byte moves and split the 16-byte load in two */
    const uint4 w = *(__global const uint4 *)p, m = (uint4)0xffff0000u;
    const uint4 lo = w << (uint)16, hi = w & m;
    return as_float8((uint8)(lo.x, hi.x, lo.y, hi.y, lo.z, hi.z, lo.w, hi.w));
}
float w1_bf16(__global const uchar *W, __global const float *D, int n, int r, int k)
{
    return as_float((uint)((__global const ushort *)W)[(size_t)r * n + k] << 16);
}
#define W32(T) \
void w32_##T(__global const uchar *W, __global const float *D, int n, int r, int j, float16 *lo, float16 *hi) \
{ \
    *lo = (float16)(w8_##T(W, D, n, r, 4 * j), w8_##T(W, D, n, r, 4 * j + 1)); \
    *hi = (float16)(w8_##T(W, D, n, r, 4 * j + 2), w8_##T(W, D, n, r, 4 * j + 3)); \
}
W32(f32)
W32(f16)
W32(bf16)

/* Sum the L values red[i * L + lid] for each of cnt sums i in place: a tree,
 * red[i * L] the result. Every item of the group calls it. */
void tree(__local float *red, int cnt, int lid, int L)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = L / 2; h > 0; h >>= 1) {
        if (lid < h)
            for (int i = 0; i < cnt; i++) red[i * L + lid] += red[i * L + lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* ------------------------------------------------------------ the input's forms
 * act_bf16: o[e] = x[xo + e] rounded to bf16 (round to nearest even, NaN
 * quieted: common's fp32_to_bf16), kept as a float.
 * act_q8: item = block k of row b (B rows of n floats at x + xo, stride n):
 * the block's 32 values (x[perm[i]] when has_perm; 0 past n, up to kp),
 * d = amax/127, q = round(v * (1/d)) (half away from zero, as roundf), as
 * quantize_row_q8_0_ref and GPTQ's act_prepare_int8. The form at X:
 * codes [B][kp] at 0, d [B][kp/32] as floats at doff, d * sum(q) [B][kp/32]
 * at soff (the codes 16-byte aligned: kp a multiple of 32). half_d: d
 * rounded to fp16 (Q8_0 blocks store it so; the codes come from the f32 d,
 * as ggml's), else kept f32 (GPTQ). A row's codes are eight words (four
 * codes each) a block; in a form of one row on a GPU (il, the host's
 * hc_clb_q8_interleaved) word w of Q8_RUN blocks lies side by side, the row
 * padded to whole runs, so that the lanes of mv_T, which take a row's
 * blocks in turn, load one contiguous run of words, where each loading its
 * own block's 32 bytes would touch eight times the cache lines; else (the
 * tiles' rows) a block's 32 bytes lie whole. */
/* an interleaved row's word 0 of block j (word w: Q8_RUN * w words on) */
size_t xword0(int j) { return 8 * (size_t)(j & -Q8_RUN) + (size_t)(j & (Q8_RUN - 1)); }
/* block j's words: elements 0..15 in u, 16..31 in v */
void xwords(__global const uint *xw, int il, int j, uint4 *u, uint4 *v)
{
    if (!il) {
        __global const uint4 *q = (__global const uint4 *)xw + 2 * (size_t)j;
        *u = q[0];
        *v = q[1];
        return;
    }
    __global const uint *p = xw + xword0(j);
    *u = (uint4)(p[0], p[Q8_RUN], p[2 * Q8_RUN], p[3 * Q8_RUN]);
    *v = (uint4)(p[4 * Q8_RUN], p[5 * Q8_RUN], p[6 * Q8_RUN], p[7 * Q8_RUN]);
}

__kernel void act_bf16(__global const float *x, uint xo, int total, __global float *o)
{
    const int e = get_global_id(0);
    if (e >= total) return;
    const uint u = as_uint(x[xo + e]);
    const uint h = (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 64u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    o[e] = as_float(h << 16);
}

/* block blk of row b (its n floats at xr) into act_q8's form: the 32
   values as two vectors (an array indexed by a variable would live in
   memory on a GPU), where the rows are read in order and whole */
void q8_block(__global const float *xr, int n, __global const int *perm, int has_perm, int kp, int b, int blk,
              int half_d, __global uchar *X, uint doff, uint soff, int il)
{
    const int nb = kp / 32, e = b * nb + blk, k0 = 32 * blk;
    float16 lo, hi;
    if (!has_perm && k0 + 32 <= n) {
        lo = vload16(0, xr + k0);
        hi = vload16(1, xr + k0);
    } else {
        float v[32];
        for (int i = 0; i < 32; i++) v[i] = k0 + i < n ? xr[has_perm ? perm[k0 + i] : k0 + i] : 0.0f;
        lo = vload16(0, v);
        hi = vload16(1, v);
    }
    const float16 al = fabs(lo), ah = fabs(hi);   /* amax by halves, each step a > b ? a : b as the CPU's */
    const float16 m16 = select(ah, al, al > ah);
    const float8 m8 = select(m16.hi, m16.lo, m16.lo > m16.hi);
    const float4 m4 = select(m8.hi, m8.lo, m8.lo > m8.hi);
    const float2 m2 = select(m4.hi, m4.lo, m4.lo > m4.hi);
    const float amax = m2.x > m2.y ? m2.x : m2.y;
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    __global float *xd = (__global float *)(X + doff);
    float dd = d;
    if (half_d) {   /* through the slot itself: no half variables without cl_khr_fp16 */
        vstore_half_rte(d, 0, (__global half *)(xd + e));
        dd = vload_half(0, (__global const half *)(xd + e));
    }
    const int16 ql = convert_int16_rtz(round(lo * id)), qh = convert_int16_rtz(round(hi * id));
    const uint4 u = as_uint4(convert_char16(ql)), v = as_uint4(convert_char16(qh));
    if (!il) {
        __global uint4 *q = (__global uint4 *)(X + (size_t)b * kp + k0);   /* 16-byte aligned: kp, k0 multiples of 32 */
        q[0] = u;
        q[1] = v;
    } else {   /* one row */
        __global uint *p = (__global uint *)X + xword0(blk);
        p[0] = u.x, p[Q8_RUN] = u.y, p[2 * Q8_RUN] = u.z, p[3 * Q8_RUN] = u.w;
        p[4 * Q8_RUN] = v.x, p[5 * Q8_RUN] = v.y, p[6 * Q8_RUN] = v.z, p[7 * Q8_RUN] = v.w;
    }
    xd[e] = dd;
    ((__global float *)(X + soff))[e] = d * (float)hsum16(ql + qh);
}

__kernel void act_q8(__global const float *x, uint xo, int n, __global const int *perm, int has_perm, int kp, int B,
                     int half_d, __global uchar *X, uint doff, uint soff, int il)
{
    const int e = get_global_id(0), nb = kp / 32;
    if (e >= B * nb) return;
    q8_block(x + xo + (size_t)(e / nb) * n, n, perm, has_perm, kp, e / nb, e % nb, half_d, X, doff, soff, il);
}

/* ------------------------------------------------------------ products
 * mv_T (one input row at a time), for up to three matrices of one input in
 * one launch (q, k and v; gate and up), on nt input rows (1 but where the
 * backend keeps each row's bits whatever the batch, HC_CL_BATCH_INVARIANT):
 * group G of dimension 1 takes input row G % nt and row group G / nt, so
 * that the groups of one row group, which read the same weights, run
 * together. A group of LR x R items (dimensions 0
 * and 1) takes R rows of one matrix (row groups 0 .. g1-1 the first's, g1 ..
 * g2-1 the second's, then the third's), LR lanes to a row (a warp's worth
 * on a GPU, 1 on a CPU device); lane i sums units i, i + LR, ... of its
 * row, so that the lanes' loads of one step are one contiguous run (16
 * bytes each for f16), then the tail of a row that is not whole units, then
 * a tree over the lanes. A unit is 8 weights for f32, f16, bf16 (four
 * units in flight a step, float8 partial sums by fused multiply-adds, added in a
 * fixed order), a block of 32 for q8, q4, g4 (its integer sum with the Q8
 * input times the scales, BLOCK_T). Matrix i: weights Wi (scales at di),
 * rows_i rows, input row t into yi[yoi + t ysi + r] (acc: added to it). Input
 * row t at x + xo + t n; a quantized product's input is the act_q8 form at X
 * (doff, soff as there), its row xb + t. */
#define MV_MATRICES \
    __global const uchar *W0, uint d0, int rows0, __global float *y0, uint yo0, uint ys0, \
    __global const uchar *W1, uint d1, int rows1, __global float *y1, uint yo1, uint ys1, \
    __global const uchar *W2, uint d2, int rows2, __global float *y2, uint yo2, uint ys2, int g1, int g2, int n, \
    int acc, int nt
#define MV_HEAD \
    const int grp = get_group_id(1) / nt, t = get_group_id(1) % nt, mi = grp < g1 ? 0 : grp < g2 ? 1 : 2; \
    __global const uchar *W = mi == 0 ? W0 : mi == 1 ? W1 : W2; \
    __global float *y = mi == 0 ? y0 : mi == 1 ? y1 : y2; \
    const uint yo = (mi == 0 ? yo0 : mi == 1 ? yo1 : yo2) + (uint)t * (mi == 0 ? ys0 : mi == 1 ? ys1 : ys2); \
    const int rows = mi == 0 ? rows0 : mi == 1 ? rows1 : rows2; \
    __global const float *D = (__global const float *)(W + (mi == 0 ? d0 : mi == 1 ? d1 : d2)); \
    const int lane = get_local_id(0), LR = get_local_size(0), g = get_local_id(1); \
    const int row = (grp - (mi == 0 ? 0 : mi == 1 ? g1 : g2)) * (int)get_local_size(1) + g, r = min(row, rows - 1);
#define MV_TAIL \
    /* y's old value read before the tree's barriers: read after them, PoCL 3.1 \
       added the sum twice for the first item of each group */ \
    const float before = acc && lane == 0 && row < rows ? y[yo + row] : 0.0f; \
    red[g * LR + lane] = s; \
    tree(red + g * LR, 1, lane, LR); \
    if (lane == 0 && row < rows) y[yo + row] = acc ? before + red[g * LR] : red[g * LR];

/* elements 8j .. 8j + 7 of x, through float4 pointers where x is 16-byte
   aligned (al): every lane of every row loads the whole input, so its loads
   are as many as the weights' (vload8 may be eight 4-byte loads) */
float8 x8(__global const float *x, int j, int al)
{
    if (!al) return vload8(j, x);
    __global const float4 *p = (__global const float4 *)x + 2 * (size_t)j;
    return (float8)(p[0], p[1]);
}

/* lane_T: a lane's share of row r's product (units lane, lane + LR, ...,
 * then the row's tail past whole units), the x of mv_T; the float formats'
 * x 16-byte aligned where al, the quantized formats' row xb of act_q8's
 * form. */
#define LANE_F(T) \
float lane_##T##_of(__global const uchar *W, __global const float *D, int n, int r, __global const float *x, \
                    int al, int lane, int LR) \
{ \
    const int nu = n / 8; \
    float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f; \
    int j = lane; \
    for (; j + 3 * LR < nu; j += 4 * LR) { \
        a0 = fma(w8_##T(W, D, n, r, j), x8(x, j, al), a0); \
        a1 = fma(w8_##T(W, D, n, r, j + LR), x8(x, j + LR, al), a1); \
        a2 = fma(w8_##T(W, D, n, r, j + 2 * LR), x8(x, j + 2 * LR, al), a2); \
        a3 = fma(w8_##T(W, D, n, r, j + 3 * LR), x8(x, j + 3 * LR, al), a3); \
    } \
    for (; j < nu; j += LR) a0 = fma(w8_##T(W, D, n, r, j), x8(x, j, al), a0); \
    const float8 a = (a0 + a1) + (a2 + a3); \
    float s = hsum4(a.lo + a.hi); \
    for (int k = nu * 8 + lane; k < n; k += LR) s += w1_##T(W, D, n, r, k) * x[k]; \
    return s; \
} \
/* the aligned case (rows a multiple of 8 elements, x 16-byte aligned) in a \
   loop of its own, without the narrow loads beside: n passed as 8 (n / 8), \
   which the compiler knows is a multiple of 8, so that w8_T's test folds */ \
float lane_##T(__global const uchar *W, __global const float *D, int n, int r, __global const float *x, int al, \
               int lane, int LR) \
{ \
    return al && n % 8 == 0 ? lane_##T##_of(W, D, n / 8 * 8, r, x, 1, lane, LR) \
                            : lane_##T##_of(W, D, n, r, x, al, lane, LR); \
}
/* block j's term of a quantized row (xw: the input's codes, interleaved
   where il; xd, xz its scales) */
#define TERM_Q(T) \
float term_##T(__global const uchar *W, __global const float *D, int n, int r, __global const uint *xw, int il, \
               __global const float *xd, __global const float *xz, int j) \
{ \
    uint4 a, b, u, v; \
    words_##T(W, n, r, j, &a, &b); \
    xwords(xw, il, j, &u, &v); \
    return BLOCK_##T((float)bsum_##T(a, b, u, v), scale_##T(D, n, r, j), xd[j], xz[j]); \
}
/* four blocks a step, their terms added in block order: every load of the
   step in flight at once (a lane of a 4096-wide row has four) */
#define LANE_Q(T) \
TERM_Q(T) \
float lane_##T##_of(__global const uchar *W, __global const float *D, int n, int r, __global const uchar *X, \
                    uint doff, uint soff, int il, int xb, int lane, int LR) \
{ \
    const int nb = n / 32; \
    __global const uint *xw = (__global const uint *)(X + (size_t)xb * n); \
    __global const float *xd = (__global const float *)(X + doff) + (size_t)xb * nb, \
                         *xz = (__global const float *)(X + soff) + (size_t)xb * nb; \
    float s = 0.0f; \
    int j = lane; \
    for (; j + 3 * LR < nb; j += 4 * LR) { \
        const float t0 = term_##T(W, D, n, r, xw, il, xd, xz, j), t1 = term_##T(W, D, n, r, xw, il, xd, xz, j + LR); \
        const float t2 = term_##T(W, D, n, r, xw, il, xd, xz, j + 2 * LR), t3 = term_##T(W, D, n, r, xw, il, xd, xz, j + 3 * LR); \
        s += t0; \
        s += t1; \
        s += t2; \
        s += t3; \
    } \
    for (; j < nb; j += LR) s += term_##T(W, D, n, r, xw, il, xd, xz, j); \
    return s; \
} \
/* il a constant in each call, so that each loop loads one way */ \
float lane_##T(__global const uchar *W, __global const float *D, int n, int r, __global const uchar *X, uint doff, \
               uint soff, int il, int xb, int lane, int LR) \
{ \
    return il ? lane_##T##_of(W, D, n, r, X, doff, soff, 1, xb, lane, LR) \
              : lane_##T##_of(W, D, n, r, X, doff, soff, 0, xb, lane, LR); \
}
LANE_F(f32)
LANE_F(f16)
LANE_F(bf16)
LANE_Q(q8)
LANE_Q(q4)
LANE_Q(g4)

#define PRODUCTS_F(T) \
__kernel void mv_##T(MV_MATRICES, __global const float *x, uint xo, __local float *red) \
{ \
    MV_HEAD \
    const uint xt = xo + (uint)t * (uint)n; \
    const float s = lane_##T(W, D, n, r, x + xt, xt % 4 == 0, lane, LR); \
    MV_TAIL \
}
#define PRODUCTS_Q(T) \
__kernel void mv_##T(MV_MATRICES, __global const uchar *X, uint doff, uint soff, int il, int xb, \
                     __local float *red) \
{ \
    MV_HEAD \
    const float s = lane_##T(W, D, n, r, X, doff, soff, il, xb + t, lane, LR); \
    MV_TAIL \
}

/* ------------------------------------------------------------ prompts: tiled products
 * mm<BN>_T (B > 1 input rows): group (g, t, s) computes rows MM_ROWS*g ..
 * +MM_ROWS of input rows BN*t .. +BN over slice s of the row's 32-blocks
 * (kps of them; one slice: into y, else into slice s's part of the
 * sum_slices buffer, yss floats apart). Each 32-block of the tile's weights
 * and inputs goes once through local memory, and each of the MM_ITEMS items
 * sums 4 rows x TN input rows from there, in registers: rows tr + 16i (i <
 * 4) and input rows TN*tc .. TN*tc + TN-1 of item 16*tc + tr. The float
 * formats stage floats and sum them with fused multiply-adds (float8 or
 * float2); the quantized formats stage their codes as words (words_T, and
 * the input's act_q8 codes) and sum four products at a time (dot_T: dp4a on
 * NVIDIA) in ints, the exact sum of a block's 32 code products (in a float
 * too: |sum| <= 32 * 128 * 127 < 2^24). BLOCK_T adds each block's sum with
 * the scales, the blocks in order: no sum depends on scheduling. The input
 * is the form the weight's type takes (floats, rows xs apart from xo; or
 * act_q8's form, codes rows xs bytes apart, rows from xo on, the scales at
 * doff and soff). */

/* row r's 32-block j (zeros past n) as lo and hi */
#define WLOAD_F(T) \
void wload_##T(__global const uchar *W, __global const float *D, int n, int r, int j, float16 *lo, float16 *hi) \
{ \
    if (32 * j + 32 <= n) { \
        w32_##T(W, D, n, r, j, lo, hi); \
    } else { \
        float v[32]; \
        for (int i = 0; i < 32; i++) v[i] = 32 * j + i < n ? w1_##T(W, D, n, r, 32 * j + i) : 0.0f; \
        *lo = vload16(0, v); \
        *hi = vload16(1, v); \
    } \
}
WLOAD_F(f32)
WLOAD_F(f16)
WLOAD_F(bf16)

/* input row b's 32-block j as lo and hi */
void xload_f(__global const uchar *X, uint xo, uint xs, int n, int b, int j, float16 *lo, float16 *hi)
{
    __global const float *x = (__global const float *)X + xo + (size_t)b * xs + 32 * (size_t)j;
    if (32 * j + 32 <= n) {
        const int al = xo % 4 == 0 && xs % 4 == 0;
        *lo = (float16)(x8(x, 0, al), x8(x, 1, al));
        *hi = (float16)(x8(x, 2, al), x8(x, 3, al));
    } else {
        float v[32];
        for (int i = 0; i < 32; i++) v[i] = 32 * j + i < n ? x[i] : 0.0f;
        *lo = vload16(0, v);
        *hi = vload16(1, v);
    }
}
/* the quantized input row b's block j: its codes' words, and d, d * sum(q) in sm */
void xload_q(__global const uchar *X, uint xo, uint xs, uint doff, uint soff, int n, int b, int j, uint4 *a,
             uint4 *c, float2 *sm)
{
    const size_t row = (size_t)xo + (size_t)b, e = row * (size_t)(n / 32) + (size_t)j;
    __global const uint4 *q = (__global const uint4 *)(X + row * xs + 32 * (size_t)j);
    *a = q[0];
    *c = q[1];
    *sm = (float2)(((__global const float *)(X + doff))[e], ((__global const float *)(X + soff))[e]);
}

/* dot_T of one word w with TN input words x into TN sums a: idot4x2,
 * idot4x8, udot4x2, udot4x8; with the bytes widened, a byte of w times the
 * same byte of the TN words at a time (WB: w's bytes' type), as vectors */
#ifdef HC_DP4A
#define DOTX(D, WB) \
int2 D##x2(uint w, uint2 x, int2 a) { return (int2)(D(w, x.s0, a.s0), D(w, x.s1, a.s1)); } \
int8 D##x8(uint w, uint8 x, int8 a) \
{ \
    return (int8)(D(w, x.s0, a.s0), D(w, x.s1, a.s1), D(w, x.s2, a.s2), D(w, x.s3, a.s3), D(w, x.s4, a.s4), \
                  D(w, x.s5, a.s5), D(w, x.s6, a.s6), D(w, x.s7, a.s7)); \
}
#else
#define DOTXN(D, WB, TN) \
int##TN D##x##TN(uint w, uint##TN x, int##TN a) \
{ \
    const WB##4 b = as_##WB##4(w); \
    return a + (int)b.x * (as_int##TN(x << 24u) >> 24) + (int)b.y * (as_int##TN(x << 16u) >> 24) + \
           (int)b.z * (as_int##TN(x << 8u) >> 24) + (int)b.w * (as_int##TN(x) >> 24); \
}
#define DOTX(D, WB) DOTXN(D, WB, 2) DOTXN(D, WB, 8)
#endif
DOTX(idot4, char)
DOTX(udot4, uchar)
#define DOTX_CAT(D, TN) D##x##TN
#define DOTX_OF(D, TN) DOTX_CAT(D, TN)
#define DOTX_T(T, TN) DOTX_OF(dot_##T, TN)   /* dot_T expanded before the paste: idot4x8, ... */

/* words a, c (eight) into column at of a staging array of `stride` words a row */
void stage8(__local uint *t, int stride, int at, uint4 a, uint4 c)
{
    t[at] = a.x, t[stride + at] = a.y, t[2 * stride + at] = a.z, t[3 * stride + at] = a.w;
    t[4 * stride + at] = c.x, t[5 * stride + at] = c.y, t[6 * stride + at] = c.z, t[7 * stride + at] = c.w;
}

/* What both tiles share: the group's place (MM_HEAD), and its sums into y
 * (MM_STORE). Items 0 .. MM_ROWS-1 stage a weight row each, the last BN
 * items an input row each; each loads block j + 1 into registers before the
 * group sums block j from local memory, so that the loads wait while it
 * sums (the last block loaded again at the end: no branch). */
#define MM_ARGS \
    __global const uchar *W, uint dofs, int n, int rows, __global const uchar *X, uint xo, uint xs, uint doff, \
    uint soff, int B, __global float *y, uint yo, uint ys, uint yss, int kps
#define MM_HEAD(BN, TN) \
    __global const float *D = (__global const float *)(W + dofs); \
    const int lid = get_local_id(0), tr = lid % 16, tc = lid / 16; \
    const int r0 = get_group_id(0) * MM_ROWS, b0 = get_group_id(1) * BN, s = get_group_id(2); \
    const int j1 = min((s + 1) * kps, (n + 31) / 32); \
    const int wi = lid < MM_ROWS, xi = lid >= MM_ITEMS - BN, e = lid - (MM_ITEMS - BN); \
    const int wr = min(r0 + lid, rows - 1), xr = min(b0 + e, B - 1); \
    float##TN acc[MM_ROWS / 16]; \
    for (int i = 0; i < MM_ROWS / 16; i++) acc[i] = 0.0f;
#define MM_STORE(TN) \
    float o[TN]; \
    for (int i = 0; i < MM_ROWS / 16; i++) { \
        const int r = r0 + tr + 16 * i; \
        vstore##TN(acc[i], 0, o); \
        for (int t = 0; t < TN; t++) \
            if (r < rows && b0 + tc * TN + t < B) y[yo + (size_t)s * yss + (size_t)(b0 + tc * TN + t) * ys + r] = o[t]; \
    }

/* A block's sums from the staged tiles, sum[i] for row tr + 16i: K steps of
 * an element (a float, or a word of four codes) of each row times those of
 * the item's TN inputs, by MAC (fmaw2, fmaw8: fused multiply-adds; idot4x2,
 * ...: four-byte dots) */
#define fmaw2(w, x, s) fma((float2)(w), x, s)
#define fmaw8(w, x, s) fma((float8)(w), x, s)
#define MM_SUMS(ST, BN, TN, K, MAC) \
    ST##TN sum[MM_ROWS / 16]; \
    for (int i = 0; i < MM_ROWS / 16; i++) sum[i] = 0; \
    for (int k = 0; k < K; k++) \
        for (int i = 0; i < MM_ROWS / 16; i++) sum[i] = MAC(wt[k * MM_ROWS + tr + 16 * i], vload##TN(tc, xt + k * BN), sum[i]);

#define FSTAGE_LOAD(T, j) \
    if (wi) wload_##T(W, D, n, wr, j, &lo, &hi); \
    else if (xi) xload_f(X, xo, xs, n, xr, j, &lo, &hi);
#define GEMM_F(T, BN, TN) \
__kernel void mm##BN##_##T(MM_ARGS) \
{ \
    __local float wt[32 * MM_ROWS], xt[32 * BN]; \
    MM_HEAD(BN, TN) \
    float16 lo = 0.0f, hi = 0.0f; \
    FSTAGE_LOAD(T, min(s * kps, j1 - 1)) \
    for (int j = s * kps; j < j1; j++) { \
        float v[32]; \
        vstore16(lo, 0, v); \
        vstore16(hi, 1, v); \
        if (wi) \
            for (int i = 0; i < 32; i++) wt[i * MM_ROWS + lid] = v[i]; \
        else if (xi) \
            for (int i = 0; i < 32; i++) xt[i * BN + e] = v[i]; \
        barrier(CLK_LOCAL_MEM_FENCE); \
        FSTAGE_LOAD(T, min(j + 1, j1 - 1)) \
        MM_SUMS(float, BN, TN, 32, fmaw##TN) \
        for (int i = 0; i < MM_ROWS / 16; i++) acc[i] += sum[i]; \
        barrier(CLK_LOCAL_MEM_FENCE); \
    } \
    MM_STORE(TN) \
}

#define QSTAGE_LOAD(T, j) \
    if (wi) { \
        words_##T(W, n, wr, j, &a, &c); \
        sm = scale_##T(D, n, wr, j); \
    } else if (xi) { \
        xload_q(X, xo, xs, doff, soff, n, xr, j, &a, &c, &sm); \
    }
#define GEMM_Q(T, BN, TN) \
__kernel void mm##BN##_##T(MM_ARGS) \
{ \
    __local uint wt[8 * MM_ROWS], xt[8 * BN]; \
    __local float xd[BN], xz[BN]; \
    __local float2 wsc[MM_ROWS]; \
    MM_HEAD(BN, TN) \
    uint4 a = 0, c = 0; \
    float2 sm = 0.0f; \
    QSTAGE_LOAD(T, min(s * kps, j1 - 1)) \
    for (int j = s * kps; j < j1; j++) { \
        if (wi) { \
            stage8(wt, MM_ROWS, lid, a, c); \
            wsc[lid] = sm; \
        } else if (xi) { \
            stage8(xt, BN, e, a, c); \
            xd[e] = sm.x; \
            xz[e] = sm.y; \
        } \
        barrier(CLK_LOCAL_MEM_FENCE); \
        QSTAGE_LOAD(T, min(j + 1, j1 - 1)) \
        MM_SUMS(int, BN, TN, 8, DOTX_T(T, TN)) \
        const float##TN dx = vload##TN(tc, xd), sx = vload##TN(tc, xz); \
        for (int i = 0; i < MM_ROWS / 16; i++) \
            acc[i] += BLOCK_##T(convert_float##TN(sum[i]), wsc[tr + 16 * i], dx, sx); \
        barrier(CLK_LOCAL_MEM_FENCE); \
    } \
    MM_STORE(TN) \
}
GEMM_F(f32, 16, 2) GEMM_F(f32, 64, 8)
GEMM_F(f16, 16, 2) GEMM_F(f16, 64, 8)
GEMM_F(bf16, 16, 2) GEMM_F(bf16, 64, 8)
GEMM_Q(q8, 16, 2) GEMM_Q(q8, 64, 8)
GEMM_Q(q4, 16, 2) GEMM_Q(q4, 64, 8)
GEMM_Q(g4, 16, 2) GEMM_Q(g4, 64, 8)

/* c8_T: the 8 elements of unit u of row r (zeros past n), the transposed
 * product's unit: for f32, f16, bf16 and q8 elements 8u .. 8u + 7 (16 bytes
 * of f16, 8 of q8); for q4 and g4 word u % 4 of block u / 4, 4 code bytes
 * whose low nibbles are elements 4w .. 4w + 3 of the block and high ones
 * 4w + 16 .. 4w + 19 (put8 stores them there), so that each code byte
 * is read once and a warp's loads of a row are one contiguous run.
 * The codes become floats without an int-to-float conversion (common.cl's
 * big4). */
#define COL8_F(T) \
float8 c8_##T(__global const uchar *W, __global const float *D, int n, int r, int u) \
{ \
    if (8 * u + 8 <= n) return w8_##T(W, D, n, r, u); \
    float v[8]; \
    for (int e = 0; e < 8; e++) v[e] = 8 * u + e < n ? w1_##T(W, D, n, r, 8 * u + e) : 0.0f; \
    return vload8(0, v); \
}
COL8_F(f32)
COL8_F(f16)
COL8_F(bf16)
float8 c8_q8(__global const uchar *W, __global const float *D, int n, int r, int u)
{
    const uint2 q = *(__global const uint2 *)(W + (size_t)r * n + 8 * (size_t)u) ^ 0x80808080u;   /* c + 128 */
    return ((float8)(big4(q.x), big4(q.y)) - 8388736.0f) * D[(size_t)r * (n / 32) + u / 4];
}
/* unit u's 4 code bytes of row r (q4, g4): low nibbles, then high, as 2^23 + code */
float8 nib8(__global const uchar *W, int n, int r, int u)
{
    const uint c = ((__global const uint *)(W + (size_t)r * (n / 2)))[u];
    return (float8)(big4(c & 0x0F0F0F0Fu), big4(c >> 4 & 0x0F0F0F0Fu));
}
float8 c8_q4(__global const uchar *W, __global const float *D, int n, int r, int u)
{
    return (nib8(W, n, r, u) - 8388616.0f) * D[(size_t)r * (n / 32) + u / 4];
}
float8 c8_g4(__global const uchar *W, __global const float *D, int n, int r, int u)
{
    const float2 sm = vload2((size_t)r * (n / 32) + u / 4, D);
    return sm.x * (nib8(W, n, r, u) - 8388608.0f) + sm.y;
}
/* the first m (<= 8) of v's elements at o */
void store8(__global float *o, float8 v, int m)
{
    if (m >= 8) {
        vstore8(v, 0, o);
        return;
    }
    float e[8];
    vstore8(v, 0, e);
    for (int i = 0; i < m; i++) o[i] = e[i];
}
/* unit u's 8 sums into row o (n columns): elements 8u .. 8u + 7 (as many as
 * there are), or with nib (NIB_T: q4, g4) the unit's two runs of 4 */
void put8(__global float *o, int u, float8 v, int n, int nib)
{
    if (!nib) {
        store8(o + 8 * (size_t)u, v, n - 8 * u);
        return;
    }
    o += 32 * (size_t)(u / 4) + 4 * (u % 4);
    vstore4(v.lo, 0, o);
    vstore4(v.hi, 0, o + 16);
}
#define NIB_f32 0
#define NIB_f16 0
#define NIB_bf16 0
#define NIB_q8 0
#define NIB_q4 1
#define NIB_g4 1

/* The tile's TOKENS input rows one by one, each index a constant: an array
 * indexed by a variable lives in memory, not registers, on a GPU (a loop
 * over t < nt made every row's step load and store acc). */
#if TOKENS != 8
#error "EACH8 spells out TOKENS = 8 (HC_CLB_TOKENS)"
#endif
#define MT_FMA(t) if (t < nt) acc[t] = fma(w, (float8)(x[(size_t)(t) * k + i]), acc[t]);
#define MT_STORE(t) if (t < nt) put8(y + (size_t)(t) * ys, u, acc[t], n, nib);
#define TRANSPOSED(T) \
/* mt_T, transposed (ffn_down_t): y_b[c] = sum_i x_b[i] * W[i][c]; item = \
   unit u of 8 columns (c8_T; dimension 0: a warp's loads of a row one \
   contiguous run), slice s of the k rows (dimension 1), a tile of TOKENS input rows \
   (dimension 2). One slice: into y; else into part [slices][B][n], added \
   by sum_slices. */ \
__kernel void mt_##T(__global const uchar *W, uint dofs, int n, int k, int rps, __global const float *x, uint xo, \
                     int B, __global float *y, uint yo, uint ys) \
{ \
    __global const float *D = (__global const float *)(W + dofs); \
    const int u = get_global_id(0), s = get_global_id(1), b0 = get_global_id(2) * TOKENS, nib = NIB_##T; \
    if (8 * u >= n) return; \
    const int i0 = s * rps, i1 = min(i0 + rps, k), nt = min(TOKENS, B - b0); \
    x += xo + (size_t)b0 * k; \
    if (nt == 1) {   /* decode: the sums of input row 0 alone, two rows' loads in flight */ \
        float8 a = 0.0f; \
        int i = i0; \
        for (; i + 1 < i1; i += 2) { \
            const float8 w0 = c8_##T(W, D, n, i, u), w1 = c8_##T(W, D, n, i + 1, u); \
            a = fma(w0, (float8)(x[i]), a); \
            a = fma(w1, (float8)(x[i + 1]), a); \
        } \
        if (i < i1) a = fma(c8_##T(W, D, n, i, u), (float8)(x[i]), a); \
        put8(y + yo + ((size_t)s * B + b0) * ys, u, a, n, nib); \
        return; \
    } \
    float8 acc[TOKENS]; \
    for (int t = 0; t < TOKENS; t++) acc[t] = 0.0f; \
    for (int i = i0; i < i1; i++) { \
        const float8 w = c8_##T(W, D, n, i, u); \
        EACH8(MT_FMA) \
    } \
    y += yo + ((size_t)s * B + b0) * ys; \
    EACH8(MT_STORE) \
}

PRODUCTS_F(f32)
PRODUCTS_F(f16)
PRODUCTS_F(bf16)
PRODUCTS_Q(q8)
PRODUCTS_Q(q4)
PRODUCTS_Q(g4)

TRANSPOSED(f32)
TRANSPOSED(f16)
TRANSPOSED(bf16)
TRANSPOSED(q8)
TRANSPOSED(q4)
TRANSPOSED(g4)

/* y[yo + b*ys + c] = sum over s ascending of part[(s*B + b)*n + c], or
   (acc) y plus that sum. */
__kernel void sum_slices(__global const float *part, int S, int B, int n, __global float *y, uint yo, uint ys, int acc)
{
    const int e = get_global_id(0);
    if (e >= B * n) return;
    const int b = e / n, c = e % n;
    float s = 0.0f;
    for (int i = 0; i < S; i++) s += part[((size_t)i * B + b) * n + c];
    __global float *o = y + yo + (size_t)b * ys + c;
    *o = acc ? *o + s : s;
}

/* ------------------------------------------------------------ norm, positions, element-wise */

/* The sum of v over the group (every item calls it), in a fixed tree. */
float group_sum(float v, __local float *red, int lid, int L)
{
    red[lid] = v;
    tree(red, 1, lid, L);
    float s = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return s;
}

/* The item's share of a row's sum, over j = lid, lid + L, ... < n in that
   order: of (x[j] - m)^2 (sq), or of x[j]. Eight loads go out before their
   sums: a decoded row is one group, which would otherwise wait out each
   load's latency in turn (16 for 4096 floats at 256 items). */
float item_sum(__global const float *x, int n, float m, int sq, int lid, int L)
{
    float s = 0.0f;
    int j = lid;
    for (; j + 7 * L < n; j += 8 * L) {
        float v[8];
        for (int i = 0; i < 8; i++) v[i] = x[j + i * L];
        for (int i = 0; i < 8; i++) s += sq ? (v[i] - m) * (v[i] - m) : v[i];
    }
    for (; j < n; j += L) s += sq ? (x[j] - m) * (x[j] - m) : x[j];
    return s;
}

float normed(int rms, float x, float w, float b, float mean, float inv)
{
    return rms ? w * (inv * x) : w * ((x - mean) * inv) + b;
}

/* One group per row b: o = w * (x / sqrt(mean(x^2) + eps)) (RMSNorm), or
   w * ((x - mean) / sqrt(var + eps)) + bias (LayerNorm; bias when has_b);
   the item's outputs, as item_sum walks them, eight loads ahead of their
   stores. */
void norm_row(int kind, int n, float eps, __global const float *w, __global const float *bias, int has_b,
              __global const float *x, __global float *o, __local float *red)
{
    const int lid = get_local_id(0), L = get_local_size(0), rms = kind == HC_NORM_RMS;
    const float mean = rms ? 0.0f : group_sum(item_sum(x, n, 0.0f, 0, lid, L), red, lid, L) / n;
    const float inv = 1.0f / sqrt(group_sum(item_sum(x, n, mean, 1, lid, L), red, lid, L) / n + eps);
    int j = lid;
    for (; j + 7 * L < n; j += 8 * L) {
        float r[8];
        for (int i = 0; i < 8; i++) {
            const int k = j + i * L;
            r[i] = normed(rms, x[k], w[k], has_b ? bias[k] : 0.0f, mean, inv);
        }
        for (int i = 0; i < 8; i++) o[j + i * L] = r[i];
    }
    for (; j < n; j += L) o[j] = normed(rms, x[j], w[j], has_b ? bias[j] : 0.0f, mean, inv);
}

__kernel void norm(int kind, int n, float eps, __global const float *w, __global const float *bias, int has_b,
                   __global const float *x, uint xo, __global float *o, uint oo, __local float *red)
{
    const size_t b = get_group_id(0);
    norm_row(kind, n, eps, w, bias, has_b, x + xo + b * n, o + oo + b * n, red);
}

/* The norm, then its rows in act_q8's form (kp = n, no permutation) by the
   same group: one launch where the products would take two. */
__kernel void norm_q8(int kind, int n, float eps, __global const float *w, __global const float *bias, int has_b,
                      __global const float *x, uint xo, __global float *o, uint oo, __local float *red, int half_d,
                      __global uchar *X, uint doff, uint soff, int il)
{
    const int lid = get_local_id(0), L = get_local_size(0), b = get_group_id(0);
    __global float *row = o + oo + (size_t)b * n;
    norm_row(kind, n, eps, w, bias, has_b, x + xo + (size_t)b * n, row, red);
    barrier(CLK_GLOBAL_MEM_FENCE);   /* the row's values, written by the group's items */
    for (int blk = lid; blk < n / 32; blk += L)
        q8_block(row, n, (__global const int *)0, 0, n, b, blk, half_d, X, doff, soff, il);
}

/* Pair e of the n0 rows of dim0 floats at va + vo0, then of the n1 rows at
   vb + vo1 (k and q; whole heads of hd), row b of a set at position
   pos[row0 + b]: adjacent elements (HC_POS_ROPE) or the two halves of a head. */
#define ROPE_ARGS \
    int mode, int hd, __global const int *pos, __global const float *freq, int dim0, int n0, int row00, \
    __global float *va, uint vo0, int dim1, int n1, int row01, __global float *vb, uint vo1
/* pair e rotated in place: 1 in the first set (its row b, the pair's
   elements i0, i1 of the row and their values r0, r1), 2 in the second, 0
   past both */
int rope_pair(ROPE_ARGS, int e, int *b, int *i0, int *i1, float *r0, float *r1)
{
    const int first = e < n0 * (dim0 / 2);
    if (!first) e -= n0 * (dim0 / 2);
    const int dim = first ? dim0 : dim1, n = first ? n0 : n1, row0 = first ? row00 : row01, half_dim = dim / 2;
    __global float *v = first ? va : vb;
    const uint vo = first ? vo0 : vo1;
    if (e >= n * half_dim) return 0;
    const int j = e % half_dim, h = j / (hd / 2), i = j % (hd / 2);
    *b = e / half_dim;
    const float val = (float)pos[row0 + *b] * freq[i], fcr = cos(val), fci = sin(val);
    __global float *row = v + vo + (size_t)*b * dim;
    *i0 = h * hd + (mode == HC_POS_ROPE ? 2 * i : i);
    *i1 = h * hd + (mode == HC_POS_ROPE ? 2 * i + 1 : i + hd / 2);
    const float v0 = row[*i0], v1 = row[*i1];
    row[*i0] = *r0 = v0 * fcr - v1 * fci;
    row[*i1] = *r1 = v0 * fci + v1 * fcr;
    return first ? 1 : 2;
}

__kernel void rope(ROPE_ARGS)
{
    int b, i0, i1;
    float r0, r1;
    rope_pair(mode, hd, pos, freq, dim0, n0, row00, va, vo0, dim1, n1, row01, vb, vo1, get_global_id(0), &b, &i0, &i1,
              &r0, &r1);
}

__kernel void add_bias(__global float *y, uint yo, __global const float *bias, int n, int total)
{
    const int e = get_global_id(0);
    if (e < total) y[yo + e] += bias[e % n];
}

/* x += a, or x += a + b (has_b) */
__kernel void add(__global float *x, uint xo, __global const float *a, uint ao, __global const float *b, uint bo,
                  int has_b, int total)
{
    const int e = get_global_id(0);
    if (e >= total) return;
    x[xo + e] += has_b ? a[ao + e] + b[bo + e] : a[ao + e];
}

/* dense.c's act_range on a neuron f: h its gate's product (the sequential
   kind: up's), v its up's */
#define NEURON(A) \
float neuron_##A(int kind, float thr, float h, float v, __global const float *gb, int has_gb, \
                 __global const float *ub, int has_ub, int f) \
{ \
    if (kind == HC_FFN_SEQUENTIAL) { \
        if (has_ub) h += ub[f]; \
        return act_##A(h); \
    } \
    if (has_gb) h += gb[f]; \
    if (has_ub) v += ub[f]; \
    if (kind == HC_FFN_GATED) { \
        if (thr > 0.0f && h < thr) h = 0.0f; \
        return act_##A(h) * v; \
    } \
    return act_##A(h) * act_##A(v); \
}

/* the neuron of element e of g[B][n_ff] (u alike), in place */
#define FFN_ACT(A) \
NEURON(A) \
__kernel void ffn_act_##A(int kind, float thr, __global const float *gb, int has_gb, __global const float *ub, \
                          int has_ub, __global float *g, uint go, __global const float *u, uint uo, int n, int total) \
{ \
    const int e = get_global_id(0); \
    if (e >= total) return; \
    const float v = kind == HC_FFN_SEQUENTIAL ? 0.0f : u[uo + e]; \
    g[go + e] = neuron_##A(kind, thr, g[go + e], v, gb, has_gb, ub, has_ub, e % n); \
}
float act_relu(float x) { return x > 0.0f ? x : 0.0f; }
float act_gelu(float x) { return 0.5f * x * (1.0f + erf(x * M_SQRT1_2_F)); }
float act_silu(float x) { return x * (1.0f / (1.0f + exp(-x))); }
FFN_ACT(relu)
FFN_ACT(gelu)
FFN_ACT(silu)

/* glu_T_A: one input row's FFN neurons in one launch, h[ho + f] =
 * neuron_A of rows f of Wg (gate; the sequential kind: up) and Wu (up; not
 * read by the sequential kind), each product summed as mv_T sums it (its
 * lanes, then a tree): the bits of mv_T and ffn_act_A, without their
 * launches between. Groups of LR x R items as mv_T's, on rows rows of n. */
#define GLU_HEAD \
    const int lane = get_local_id(0), LR = get_local_size(0), g = get_local_id(1); \
    const int row = get_group_id(1) * (int)get_local_size(1) + g, r = min(row, rows - 1); \
    __global const float *Dg = (__global const float *)(Wg + dg), *Du = (__global const float *)(Wu + du);
#define GLU_TAIL(A) \
    red[2 * g * LR + lane] = sg; \
    red[(2 * g + 1) * LR + lane] = su; \
    tree(red + 2 * g * LR, 2, lane, LR); \
    if (lane == 0 && row < rows) \
        h[ho + row] = neuron_##A(kind, thr, red[2 * g * LR], red[(2 * g + 1) * LR], gb, has_gb, ub, has_ub, row);
#define GLU_ARGS \
    __global const uchar *Wg, uint dg, __global const uchar *Wu, uint du, int rows, int n, int kind, float thr, \
    __global const float *gb, int has_gb, __global const float *ub, int has_ub, __global float *h, uint ho
#define GLU_F(T, A) \
__kernel void glu_##T##_##A(GLU_ARGS, __global const float *x, uint xo, __local float *red) \
{ \
    GLU_HEAD \
    const int al = xo % 4 == 0; \
    const float sg = lane_##T(Wg, Dg, n, r, x + xo, al, lane, LR); \
    const float su = kind == HC_FFN_SEQUENTIAL ? 0.0f : lane_##T(Wu, Du, n, r, x + xo, al, lane, LR); \
    GLU_TAIL(A) \
}
/* A quantized input; q8: groups of 32 rows, and h in act_q8's form (at X2,
   half_d as there) too, a group's block by its first item: the down
   product's input without a launch of its own. */
#define GLU_Q(T, A) \
__kernel void glu_##T##_##A(GLU_ARGS, __global const uchar *X, uint doff, uint soff, int il, __local float *red, \
                            int q8, int half_d, __global uchar *X2, uint doff2, uint soff2, int il2) \
{ \
    GLU_HEAD \
    const float sg = lane_##T(Wg, Dg, n, r, X, doff, soff, il, 0, lane, LR); \
    const float su = kind == HC_FFN_SEQUENTIAL ? 0.0f : lane_##T(Wu, Du, n, r, X, doff, soff, il, 0, lane, LR); \
    GLU_TAIL(A) \
    if (q8) { \
        barrier(CLK_GLOBAL_MEM_FENCE); /* the group's 32 rows of h */ \
        if (lane == 0 && g == 0) \
            q8_block(h + ho, rows, (__global const int *)0, 0, rows, 0, get_group_id(1), half_d, X2, doff2, soff2, \
                     il2); \
    } \
}
#define GLUS(A) GLU_F(f32, A) GLU_F(f16, A) GLU_F(bf16, A) GLU_Q(q8, A) GLU_Q(q4, A) GLU_Q(g4, A)
GLUS(relu)
GLUS(gelu)
GLUS(silu)

/* ------------------------------------------------------------ the KV cache
 * Blocks of 1 << shift positions; a sequence's position p in slot
 * p % (1 << shift) of block tbl[p >> shift] (runtime/backend.h). */
size_t kv_slot(__global const int *tbl, int p, int shift)
{
    return ((size_t)tbl[p >> shift] << shift) | (size_t)(p & ((1 << shift) - 1));
}

/* Element i of a cache of floats (f16 0) or of halves (f16 1, -ctk/-ctv f16):
   vload_half and vstore_half_rte are OpenCL 1.2's own (no cl_khr_fp16), the
   store rounding to nearest even as the CPU's cache does. */
float kv_get(__global const uchar *c, int f16, size_t i)
{
    return f16 ? vload_half(i, (__global const half *)c) : ((__global const float *)c)[i];
}
void kv_put(__global uchar *c, int f16, size_t i, float x)
{
    if (f16) vstore_half_rte(x, i, (__global half *)c);
    else ((__global float *)c)[i] = x;
}
float4 kv_get4(__global const uchar *c, int f16, size_t at, size_t i)   /* elements at + 4i .. at + 4i + 3 */
{
    return f16 ? vload_half4(i, (__global const half *)c + at) : vload4(i, (__global const float *)c + at);
}

/* element e of the B rows' k and v (kv_dim floats each) into the slot of
 * row b's position pos[b] of its sequence seq[b] */
__kernel void kv_store(__global const float *k, uint ko, __global const float *v, uint vo, __global uchar *kc,
                       __global uchar *vc, int k16, int v16, __global const int *pos, __global const int *seq,
                       __global const int *table, int max_blocks, int shift, int kv_dim, int total)
{
    const int e = get_global_id(0);
    if (e >= total) return;
    const int b = e / kv_dim;
    const size_t dst = kv_slot(table + seq[b] * max_blocks, pos[b], shift) * kv_dim + e % kv_dim;
    kv_put(kc, k16, dst, k[ko + e]);
    kv_put(vc, v16, dst, v[vo + e]);
}

/* rope's pairs, the first set's (k, row0 0) also into the cache, then the
   n0 rows of v (dim0 floats each) into it, as kv_store: one launch for both */
__kernel void rope_store(ROPE_ARGS, __global const float *v, uint vvo, __global uchar *kc, __global uchar *vc,
                         int k16, int v16, __global const int *seq, __global const int *table, int max_blocks,
                         int shift)
{
    const int e = get_global_id(0), pairs = n0 * (dim0 / 2) + n1 * (dim1 / 2);
    int b, i0, i1;
    float r0, r1;
    if (e < pairs) {
        if (rope_pair(mode, hd, pos, freq, dim0, n0, row00, va, vo0, dim1, n1, row01, vb, vo1, e, &b, &i0, &i1, &r0,
                      &r1) == 1) {
            const size_t dst = kv_slot(table + seq[b] * max_blocks, pos[b], shift) * dim0;
            kv_put(kc, k16, dst + i0, r0);
            kv_put(kc, k16, dst + i1, r1);
        }
    } else if (e - pairs < n0 * dim0) {
        b = (e - pairs) / dim0;
        kv_put(vc, v16, kv_slot(table + seq[b] * max_blocks, pos[b], shift) * dim0 + (e - pairs) % dim0,
               v[vvo + e - pairs]);
    }
}

/* ------------------------------------------------------------ attention
 * attn_part: group (chunk c, head h, row b), row b the batch's row0 + b at
 * position P = pos[row0 + b] of its sequence (its blocks tbl): positions
 * c*ch .. of 0..P. A key or value row of head_dim is W = head_dim / 4
 * lanes of 4 (the last one zero-padded). Items are (lane j, slice s): WL =
 * min(L, W) lanes side by side (a GPU: a row's W lanes, so consecutive items
 * read a row's 16-byte pieces, the whole row at once), S = L / WL slices
 * taking every S-th position; where there are fewer items than lanes (a
 * CPU device: one item), an item takes lanes j, j + WL, ... of each row in
 * one pass.
 * Scores: per tile of tp positions, each (position, lane) product of 4 into
 * local memory (kt, rows W + 1 apart against bank conflicts), then each
 * position's lanes summed in order by one item, / sqrt(head_dim), into sc
 * (with one lane an item, each item sums its positions' products as they
 * come: the same order, no tile);
 * their max m, e_p = exp(s_p - m), l = sum e_p; o = sum_p e_p v_p, each
 * slice over its positions ascending (in a register with a lane per item,
 * else in ob), then the slices in order; o into part, m and l into ml.
 * attn_combine: per output element, the chunks in order:
 * out = sum_c exp(m_c - M) o_c / sum_c exp(m_c - M) l_c, M the largest m_c. */

/* Lane j (elements 4j .. 4j + 3, those past n zero) of the row at r. */
float4 q_lane(__global const float *r, int j, int n)
{
    if (4 * j + 4 <= n) return vload4(j, r);
    float4 v = (float4)0.0f;
    v.x = r[4 * j];
    if (4 * j + 1 < n) v.y = r[4 * j + 1];
    if (4 * j + 2 < n) v.z = r[4 * j + 2];
    return v;
}
float4 kv_lane(__global const uchar *c, int f16, size_t at, int j, int n)
{
    /* n (head_dim) a multiple of 4: every row starts on a 4-element bound
       (kv_dim and the head's offset are multiples of n too), so one 16-byte
       (f32) or 8-byte (f16) load, where vload4 may only assume the element's
       alignment and loads one element at a time */
    if (!(n & 3)) {
        if (!f16) return ((__global const float4 *)c)[at / 4 + (size_t)j];
        const uint2 w = ((__global const uint2 *)c)[at / 4 + (size_t)j];
        return vload_half4(0, (__private const half *)&w);
    }
    if (4 * j + 4 <= n) return kv_get4(c, f16, at, (size_t)j);
    float4 v = (float4)0.0f;
    v.x = kv_get(c, f16, at + 4 * j);
    if (4 * j + 1 < n) v.y = kv_get(c, f16, at + 4 * j + 1);
    if (4 * j + 2 < n) v.z = kv_get(c, f16, at + 4 * j + 2);
    return v;
}
/* a lane's 4 products summed as a tree: a position's chain of dependent
   adds is one a lane */
float dot_lane(float4 a, float4 b) { return (a.x * b.x + a.z * b.z) + (a.y * b.y + a.w * b.w); }

__kernel void attn_part(__global const float *q, uint qo, __global const uchar *kc, __global const uchar *vc, int k16,
                        int v16, int hd, int n_head, int group, int kv_dim, __global const int *pos, __global const int *seq,
                        __global const int *table, int max_blocks, int shift, int row0, int ch, int n_chunks, int tp,
                        __global float *part, __global float *ml, __local float *sc, __local float *red,
                        __local float4 *ob, __local float *kt)
{
    const int lid = get_local_id(0), L = get_local_size(0);
    const int c = get_group_id(0), h = get_group_id(1), b = get_group_id(2);
    const int npos = pos[row0 + b] + 1, p0 = c * ch, p1 = min(p0 + ch, npos);
    __global const int *tbl = table + seq[row0 + b] * max_blocks;
    if (p0 >= npos) return;   /* the whole group: no barrier is reached */
    const int W = (hd + 3) / 4, WL = min(L, W), S = L / WL, j0 = lid % WL, s = lid / WL;
    __global const float *qr = q + qo + ((size_t)b * n_head + h) * hd;
    const size_t koff = (size_t)(h / group) * hd;
    const float scale = sqrt((float)hd);
    for (int j = lid; j < W; j += L) ob[j] = q_lane(qr, j, hd);   /* q's lanes, until the values' sums */
    barrier(CLK_LOCAL_MEM_FENCE);
    const float4 q0 = ob[j0];   /* an item's only lane when WL == W */
    float mx = -INFINITY;
    for (int p = p0 + lid; WL == 1 && p < p1; p += L) {   /* an item a position (a CPU device): no tile */
        const size_t kr = kv_slot(tbl, p, shift) * kv_dim + koff;
        float d = 0.0f;
        for (int j = 0; j < W; j++) d += dot_lane(ob[j], kv_lane(kc, k16, kr, j, hd));
        d = d / scale;
        sc[p - p0] = d;
        mx = fmax(mx, d);
    }
    for (int t0 = p0; WL > 1 && t0 < p1; t0 += tp) {
        const int tn = min(tp, p1 - t0);
        for (int p = s; s < S && p < tn; p += S) {
            const size_t kr = kv_slot(tbl, t0 + p, shift) * kv_dim + koff;
            for (int j = j0; j < W; j += WL)
                kt[p * (W + 1) + j] = dot_lane(j == j0 ? q0 : ob[j], kv_lane(kc, k16, kr, j, hd));
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int p = lid; p < tn; p += L) {
            float d = 0.0f;
            for (int j = 0; j < W; j++) d += kt[p * (W + 1) + j];
            d = d / scale;
            sc[t0 - p0 + p] = d;
            mx = fmax(mx, d);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    red[lid] = mx;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = L / 2; w > 0; w >>= 1) {
        if (lid < w) red[lid] = fmax(red[lid], red[lid + w]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    mx = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    float l = 0.0f;
    for (int p = p0 + lid; p < p1; p += L) {
        const float e = exp(sc[p - p0] - mx);
        sc[p - p0] = e;
        l += e;
    }
    l = group_sum(l, red, lid, L);   /* its barriers also publish sc */
    if (s < S) {
        if (WL == W) {   /* a lane per item */
            float4 o = (float4)0.0f;
            for (int p = p0 + s; p < p1; p += S)
                o = fma((float4)sc[p - p0], kv_lane(vc, v16, kv_slot(tbl, p, shift) * kv_dim + koff, j0, hd), o);
            ob[s * W + j0] = o;
        } else {         /* several: each value row in one pass, the sums in ob */
            for (int j = j0; j < W; j += WL) ob[s * W + j] = (float4)0.0f;
            for (int p = p0 + s; p < p1; p += S) {
                const float4 e = (float4)sc[p - p0];
                const size_t vr = kv_slot(tbl, p, shift) * kv_dim + koff;
                for (int j = j0; j < W; j += WL) ob[s * W + j] = fma(e, kv_lane(vc, v16, vr, j, hd), ob[s * W + j]);
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const size_t slot = ((size_t)b * n_head + h) * n_chunks + c;
    __global float *po = part + slot * hd;
    for (int j = lid; j < W; j += L) {
        float4 o = ob[j];
        for (int t = 1; t < S; t++) o += ob[t * W + j];
        if (4 * j + 4 <= hd) vstore4(o, j, po);
        else
            for (int e = 0; e < hd - 4 * j; e++) po[4 * j + e] = e == 0 ? o.x : e == 1 ? o.y : o.z;
    }
    if (lid == 0) {
        ml[2 * slot] = mx;
        ml[2 * slot + 1] = l;
    }
}

/* element e of the B rows' attention from their chunks' partial sums */
void combine_one(__global const float *part, __global const float *ml, int hd, int n_head, __global const int *pos,
                 int row0, int ch, int n_chunks, __global float *out, uint oo, int e)
{
    const int d = e % hd, h = e / hd % n_head, b = e / hd / n_head;
    const int nc = (pos[row0 + b] + ch) / ch;   /* chunks holding positions 0..pos[row0 + b] */
    const size_t slot = ((size_t)b * n_head + h) * n_chunks;
    float M = -INFINITY;
    for (int c = 0; c < nc; c++) M = fmax(M, ml[2 * (slot + c)]);
    float o = 0.0f, l = 0.0f;
    for (int c = 0; c < nc; c++) {
        const float f = exp(ml[2 * (slot + c)] - M);
        o += f * part[(slot + c) * hd + d];
        l += f * ml[2 * (slot + c) + 1];
    }
    out[oo + ((size_t)b * n_head + h) * hd + d] = o / l;
}

__kernel void attn_combine(__global const float *part, __global const float *ml, int hd, int n_head,
                           __global const int *pos, int row0, int ch, int n_chunks, __global float *out, uint oo,
                           int total)
{
    const int e = get_global_id(0);
    if (e < total) combine_one(part, ml, hd, n_head, pos, row0, ch, n_chunks, out, oo, e);
}

/* The same in groups of 32 items (total a multiple of 32: whole 32-blocks of
   rows of n_head * hd), then each group's block in act_q8's form. */
__kernel void attn_combine_q8(__global const float *part, __global const float *ml, int hd, int n_head,
                              __global const int *pos, int row0, int ch, int n_chunks, __global float *out, uint oo,
                              int total, int half_d, __global uchar *X, uint doff, uint soff, int il)
{
    const int e = get_global_id(0), n = n_head * hd;
    combine_one(part, ml, hd, n_head, pos, row0, ch, n_chunks, out, oo, e);
    barrier(CLK_GLOBAL_MEM_FENCE);   /* the block's values, written by the group's items */
    if (get_local_id(0) == 0)
        q8_block(out + oo + (size_t)(e / n) * n, n, (__global const int *)0, 0, n, e / n, e % n / 32, half_d, X, doff,
                 soff, il);
}

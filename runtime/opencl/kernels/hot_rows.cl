/* The hybrid FFN's hot-row kernels (runtime/opencl.h), OpenCL C 1.2. The
 * build embeds this file as a C string (runtime/module.mk); the runtime
 * compiles it for the device it opens.
 * Per stored type T, gate_up1_T and down1_T for one token (decode) and
 * gate_up8_T and down8_T for tiles of TILE tokens, from one body each.
 * A buffer of k rows holds every row's body (rb bytes each), then every
 * row's scales (sb bytes each), from byte k * rb (the host's rows_buffer):
 * F32, F16, BF16 rows as ggml stores them, no scales; Q8_0 and Q4_0 blocks
 * split (the same bytes): a row's codes (rb = n or n/2: common.cl's q8 and
 * q4 forms, 16-byte aligned), its block scales as halves; the prepared Q8_0
 * input of a token likewise, its codes then its halves from byte n. Values
 * d * q (Q8_0), d * (q - 8) (Q4_0). INT4-GPTQ rows (kernels_gptq.h) use the
 * same nibble order without d: a gate/up row is its codes, its scales its
 * groups' {scale, -scale*zero} floats; a down column is its codes, with the
 * pairs of its ffn_down group in a table; value = scale * q + (-scale*zero).
 * WG (work-group size, a power of two) is defined by the host. Sums run in a
 * fixed order (per-item partial sums, then a tree in local memory), so the
 * device's results do not change from run to run. */
#pragma OPENCL FP_CONTRACT OFF
#if TILE != 8
#error "EACH8 spells out TILE = 8 (HC_CL_TILE)"
#endif

/* Partial dot products of one work item (lid of WG) with the inputs of a
   tile (up to TILE tokens, x_bytes apart) whose on8 is set (never past the
   tile's nt tokens), one sum a token in the float8 returned; each weight
   unit is read once for the tile. Items read consecutive vectors (4 floats /
   halves, a 32-value block, or a GPTQ block or code), so a group's loads are
   contiguous. A token's sum is the same whatever shares its tile (the same
   terms in the same order). gs: the GPTQ group size (others ignore it).
   Each comes as dots1_T, for a tile of one token (decode), and dots8_T, for
   a tile of TILE: every loop over a tile's tokens runs to that constant
   (tile_n), spelled out by EACH8 where a body is too large to unroll, so that
   every array index is a constant and the sums stay in registers (an array
   indexed by a variable, or passed by pointer, lives in memory on a GPU), and
   decode does one token's work, not TILE's under a mask. */

/* hsum4, words_T, bsum_T, EACH8: kernels/common.cl, built before this file. */

/* a tile of NT tokens' sums s and flags on as arrays, from the flags' vector */
#define TILE_ARRAYS(NT) \
    const int tile_n = NT; \
    float s[TILE] = { 0.0f }; \
    int on[TILE]; \
    vstore8(on8, 0, on);
#define DOTS_ARGS __global const uchar *w, __global const uchar *sc, __global const uchar *x, int x_bytes, int8 on8, \
                  int n, int gs, int lid
/* Four elements i*4 .. i*4+3 of a row of floats, halves or BF16 halves,
   widened: where al, the row and the unit 8- or 16-byte aligned, in one load
   through a vector pointer (vloadn asks only an element's alignment, and a
   GPU's compiler splits it into one load an element). */
float4 f32x4(int i, __global const float *a, int al) { return al ? ((__global const float4 *)a)[i] : vload4(i, a); }
float4 f16x4(int i, __global const half *a, int al)
{
    if (!al) return vload_half4(i, a);
    const ushort4 u = ((__global const ushort4 *)a)[i];   /* converted from a private copy: no cl_khr_fp16 */
    return vload_half4(0, (const half *)&u);
}
float4 bf16x4(int i, __global const ushort *a, int al)
{
    return as_float4(convert_uint4(al ? ((__global const ushort4 *)a)[i] : vload4(i, a)) << (uint)16);
}
float bf16x1(int i, __global const ushort *a) { return as_float((uint)a[i] << 16); }
/* F32, F16 and BF16 rows (E the stored element): 4-vectors read by load4,
   the tail of a row that is not whole 4-vectors one element at a time by
   load1; the input likewise by xload4 and xload1 (floats, or BF16's
   bf16-rounded activation as stored: 2 bytes an element). Rows of whole
   4-vectors (n % 4 == 0: the rows, and each token's input, aligned) take
   the aligned loads, in a build of their own (al a constant). */
#define DOTS_FLOAT(NT, T, E, load4, load1, XE, xload4, xload1) \
float8 dots##NT##_##T##_of(DOTS_ARGS, int al) { \
    TILE_ARRAYS(NT) \
    __global const E *a = (__global const E *)w; \
    for (int i = lid; i < n / 4; i += WG) { \
        float4 v = load4(i, a, al); \
        for (int t = 0; t < tile_n; t++) \
            if (on[t]) s[t] += hsum4(v * xload4(i, (__global const XE *)(x + (size_t)t * x_bytes), al)); \
    } \
    for (int i = n / 4 * 4 + lid; i < n; i += WG) \
        for (int t = 0; t < tile_n; t++) \
            if (on[t]) s[t] += load1(i, a) * xload1(i, (__global const XE *)(x + (size_t)t * x_bytes)); \
    return vload8(0, s); \
} \
float8 dots##NT##_##T(DOTS_ARGS) { \
    return n % 4 ? dots##NT##_##T##_of(w, sc, x, x_bytes, on8, n, gs, lid, 0) \
                 : dots##NT##_##T##_of(w, sc, x, x_bytes, on8, n, gs, lid, 1); \
}
#define LOAD1_F32(i, a) ((a)[i])
#define DOTS_F32(NT) DOTS_FLOAT(NT, f32, float, f32x4, LOAD1_F32, float, f32x4, LOAD1_F32)
#define DOTS_F16(NT) DOTS_FLOAT(NT, f16, half, f16x4, vload_half, float, f32x4, LOAD1_F32)
#define DOTS_BF16(NT) DOTS_FLOAT(NT, bf16, ushort, bf16x4, bf16x1, ushort, bf16x4, bf16x1)
/* A block's integer sum with the input's: Q4_0's words hold 16 (q - 8)
   (common.cl's words_q4), so its sum is divided by 16, exactly. */
int block_sum_q8_0(uint4 a, uint4 c, uint4 u, uint4 v) { return bsum_q8(a, c, u, v); }
int block_sum_q4_0(uint4 a, uint4 c, uint4 u, uint4 v) { return bsum_q4(a, c, u, v) / 16; }
/* Token t's sum with weight block b's words a (elements 0..15), c (16..31)
   and scale dw: the codes' products summed exactly in int, then scaled by
   d_w * d_x, as ggml. */
#define BLOCK_DOT(t, T) \
    if ((t) < tile_n && on[t]) { \
        __global const uchar *xt = x + (size_t)(t) * x_bytes; \
        __global const uint4 *xq = (__global const uint4 *)xt + 2 * (size_t)b; \
        s[t] += (float)block_sum_##T(a, c, xq[0], xq[1]) * (dw * vload_half(b, (__global const half *)(xt + n))); \
    }
#define BLOCK_DOT_q8_0(t) BLOCK_DOT(t, q8_0)
#define BLOCK_DOT_q4_0(t) BLOCK_DOT(t, q4_0)
/* Q: the type's device form (common.cl's words_Q) */
#define DOTS_Q(NT, T, Q) \
float8 dots##NT##_##T(DOTS_ARGS) { \
    TILE_ARRAYS(NT) \
    for (int b = lid; b < n / 32; b += WG) { \
        uint4 a, c; \
        words_##Q(w, n, 0, b, &a, &c); \
        const float dw = vload_half(b, (__global const half *)sc); \
        EACH8(BLOCK_DOT_##T) \
    } \
    return vload8(0, s); \
}
DOTS_Q(1, q8_0, q8) DOTS_Q(8, q8_0, q8) DOTS_Q(1, q4_0, q4) DOTS_Q(8, q4_0, q4)
/* x: the prepared GPTQ activation (kernels_gptq.h): for gs % 32 == 0 the
   int8 blocks in chunks of 16 (768 bytes: sidx[16] at 0, d[16] at 64,
   lo[4][64] at 128, hi[4][64] at 384; block 4g+m's scale is d[4m+g], its
   element i < 16 lo[g][16m+i], 16 + i hi[g][16m+i]), then the groups' pairs
   {0, X_g} (X_g: the group's sum of d * q); else kp floats in the row's
   position order. */
/* code k of a row of nibbles in 16-byte blocks of 32 (Q4_0, GPTQ: low
   nibbles elements 0..15, high ones 16..31) */
int nibble(__global const uchar *w, int k) {
    uchar b = w[(k / 32) * 16 + k % 16];
    return k % 32 < 16 ? b & 15 : b >> 4;
}
/* Token t's term of GPTQ block b (its codes' words a, c; its group j's
   pair {s, m} in pair; first: b is the group's first block), as the CPU's
   int8 product: s * (the codes' integer sum with the block's int8 input,
   times its d), and the group's m * X_g once, with its first block (X_g in
   the pairs after the input's chunks). */
#define GPTQ_BLOCK(t) \
    if ((t) < tile_n && on[t]) { \
        __global const uchar *xt = x + (size_t)(t) * x_bytes, *xc = xt + (size_t)(b / 16) * 768; \
        const int bb = b % 16, at = 64 * (bb / 4) + 16 * (bb % 4); \
        const float dx = ((__global const float *)(xc + 64))[4 * (bb % 4) + bb / 4]; \
        float term = pair.x * ((float)bsum_g4(a, c, *(__global const uint4 *)(xc + 128 + at), \
                                             *(__global const uint4 *)(xc + 384 + at)) * dx); \
        if (first) term += pair.y * ((__global const float *)(xt + (size_t)chunks * 768))[2 * j + 1]; \
        s[t] += term; \
    }
/* gs % 32 == 0: an item a 32-block at a time (common.cl's words_g4, bsum_g4);
   else an item a position at a time, each code dequantized with its group's
   pair, then times the activation's float (a loop over the tile's tokens,
   which clang unrolls: EACH8's copies of the float loop ran PoCL's prompts
   22 % slower). */
#define DOTS_GPTQ(NT) \
float8 dots##NT##_gptq(DOTS_ARGS) { \
    TILE_ARRAYS(NT) \
    const int nb = (n + 31) / 32, chunks = (nb + 15) / 16; \
    __global const float *sm = (__global const float *)sc; \
    if (gs % 32 == 0) { \
        for (int b = lid; b < nb; b += WG) { \
            const int j = 32 * b / gs, first = 32 * b % gs == 0; \
            const float2 pair = vload2(j, sm); \
            uint4 a, c; \
            words_g4(w, n, 0, b, &a, &c); \
            EACH8(GPTQ_BLOCK) \
        } \
        return vload8(0, s); \
    } \
    for (int k = lid; k < n; k += WG) { \
        int j = k / gs; \
        float v = sm[2 * j] * (float)nibble(w, k) + sm[2 * j + 1]; \
        for (int t = 0; t < tile_n; t++) \
            if (on[t]) s[t] += v * ((__global const float *)(x + (size_t)t * x_bytes))[k]; \
    } \
    return vload8(0, s); \
}
DOTS_F32(1) DOTS_F32(8) DOTS_F16(1) DOTS_F16(8) DOTS_BF16(1) DOTS_BF16(8) DOTS_GPTQ(1) DOTS_GPTQ(8)

/* codes c..c+3 (c a multiple of 4) of a row of nibbles (as nibble) as the
   bytes of one word */
uint nibbles4(__global const uchar *w, int c) {
    const uint q = ((__global const uint *)w)[c / 32 * 4 + c % 16 / 4];
    return c % 32 < 16 ? q & 0x0f0f0f0fu : q >> 4 & 0x0f0f0f0fu;
}
/* Elements c..c+3 of a row (c a multiple of 4, c + 3 < n), widened; d: the
   row's block scales (Q8_0, Q4_0), p: its GPTQ pairs (others ignore them);
   al: the rows are whole 4-vectors (f32x4). */
#define ELEM_ARGS __global const uchar *w, int c, __global const half *d, __global const float *p, int al
float4 elem4_f32(ELEM_ARGS) { return f32x4(c / 4, (__global const float *)w, al); }
float4 elem4_f16(ELEM_ARGS) { return f16x4(c / 4, (__global const half *)w, al); }
float4 elem4_bf16(ELEM_ARGS) { return bf16x4(c / 4, (__global const ushort *)w, al); }
/* the codes as floats by common.cl's big4: Q8_0's signed bytes plus 128 */
float4 elem4_q8_0(ELEM_ARGS) {
    return (big4(((__global const uint *)w)[c / 4] ^ 0x80808080u) - 8388736.0f) * vload_half(c / 32, d);
}
float4 elem4_q4_0(ELEM_ARGS) { return (big4(nibbles4(w, c)) - 8388616.0f) * vload_half(c / 32, d); }
float4 elem4_gptq(ELEM_ARGS) {
    float8 sm = vload8(0, p + 2 * c);
    return sm.even * (big4(nibbles4(w, c)) - 8388608.0f) + sm.odd;
}
/* Element c of a row, widened (the tail of a row when n % 4 != 0: never
   for the block formats, whose rows are whole blocks). */
float elem_f32(ELEM_ARGS) { return ((__global const float *)w)[c]; }
float elem_f16(ELEM_ARGS) { return vload_half(c, (__global const half *)w); }
float elem_bf16(ELEM_ARGS) { return bf16x1(c, (__global const ushort *)w); }
float elem_q8_0(ELEM_ARGS) { return (float)((__global const char *)w)[c] * vload_half(c / 32, d); }
float elem_q4_0(ELEM_ARGS) { return (float)(nibble(w, c) - 8) * vload_half(c / 32, d); }
float elem_gptq(ELEM_ARGS) { return p[2 * c] * (float)nibble(w, c) + p[2 * c + 1]; }
/* The pairs of down row r: a GPTQ column's are the table row smrow[r]. */
#define PAIRS_f32(sm, smrow, r, n) (sm)
#define PAIRS_f16(sm, smrow, r, n) (sm)
#define PAIRS_bf16(sm, smrow, r, n) (sm)
#define PAIRS_q8_0(sm, smrow, r, n) (sm)
#define PAIRS_q4_0(sm, smrow, r, n) (sm)
#define PAIRS_gptq(sm, smrow, r, n) ((sm) + (size_t)smrow[r] * 2 * (n))

/* group_sumsN: the sums of v's first nt (<= N) over the work group, each in
   the same fixed tree order (deterministic; one token's total is the same in
   any tile). */
#define GROUP_SUMS(NT) \
float8 group_sums##NT(__local float *red, float8 v, int nt, int lid) { \
    float s[TILE]; \
    vstore8(v, 0, s); \
    for (int t = 0; t < NT; t++) if (t < nt) red[t * WG + lid] = s[t]; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    for (int h = WG / 2; h > 0; h >>= 1) { \
        if (lid < h) \
            for (int t = 0; t < NT; t++) if (t < nt) red[t * WG + lid] += red[t * WG + lid + h]; \
        barrier(CLK_LOCAL_MEM_FENCE); \
    } \
    for (int t = 0; t < TILE; t++) s[t] = t < NT && t < nt ? red[t * WG] : 0.0f; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    return vload8(0, s); \
}
GROUP_SUMS(1) GROUP_SUMS(8)

/* act: 0 SiLU (as run.c), 1 ReLU, 2 GELU (erf), model.h enum hc_act. */
float act_fn(float g, int act) {
    if (act == 1) return g > 0.0f ? g : 0.0f;
    if (act == 2) return 0.5f * g * (1.0f + erf(g * M_SQRT1_2_F));
    return g * (1.0f / (1.0f + exp(-g)));
}

/* One work group per (hot row, tile of tokens): dimension 1 is the tile of
   tokens b0 = tile_n * tile .. of B, token b's x, mask and h at
   b * x_bytes, b * k, b * k; the row is read once for the tile, and not at
   all when the tile's mask asks none of its tokens. Every branch depends on
   values the whole group shares (the mask of its row and tile, too), so no
   barrier is skipped by part of a group. kind (opencl.h hc_cl_rows): 0 gated
   a * u, 1 symmetric a * act(u), 2 sequential a (gate holds the up rows); fb,
   ub: per-row biases;
   rb, sb: bytes of a row's body and of its scales (the scales from byte
   k * rb); gs: the GPTQ group size.
   contrib: keep by the contribution |h| * dn[r] >= t_act instead of |a| >= t_act.
   gate_up1_T takes one token (decode: a tile of 1) and gate_up8_T tiles of
   TILE, each with loops to its constant tile_n. */
/* token t's gate activation a, kept when a passes the threshold tg, then
   times its up row's (an activation's body is too large for a loop over t
   to be unrolled: EACH8) */
#define GATE_ACT(t) \
    if ((t) < tile_n && on[t]) { \
        float a = act_fn(g[t] + fb[r], act); \
        on[t] = a != 0.0f && (a >= tg || -a >= tg); \
        v[t] = on[t] ? a : 0.0f; \
        any |= on[t]; \
    }
#define UP_ACT(t) if ((t) < tile_n && on[t]) v[t] *= kind == 1 ? act_fn(u[t] + ub[r], act) : u[t] + ub[r];
#define GATE_UP(T, NT) \
__kernel void gate_up##NT##_##T(__global const uchar *gate, __global const uchar *up, __global const uchar *x, \
                                __global const uchar *mask, int n, int act, float t_act, __global float *h, \
                                int k, int x_bytes, int kind, __global const float *fb, \
                                __global const float *ub, __global const float *dn, int contrib, int rb, int gs, int B, \
                                int sb) { \
    __local float red[TILE * WG]; \
    const int tile_n = NT; \
    int r = get_group_id(0), lid = get_local_id(0), b0 = get_group_id(1) * tile_n, nt = min(tile_n, B - b0); \
    float tg = contrib ? 0.0f : t_act; \
    float g[TILE], u[TILE], v[TILE]; \
    int on[TILE], asked = 0, any = 0; \
    for (int t = 0; t < TILE; t++) { \
        on[t] = t < tile_n && t < nt && mask[(size_t)(b0 + t) * k + r]; \
        asked |= on[t]; \
        v[t] = 0.0f; \
    } \
    x += (size_t)b0 * x_bytes; \
    const size_t rs = (size_t)k * rb + (size_t)r * sb;   /* the row's scales */ \
    /* a row no token of the tile asks for is not read (its h stays 0) */ \
    if (asked) { \
        vstore8(group_sums##NT(red, dots##NT##_##T(gate + (size_t)r * rb, gate + rs, x, x_bytes, vload8(0, on), n, gs, \
                                                   lid), nt, lid), 0, g); \
        EACH8(GATE_ACT) \
    } \
    if (kind != 2 && any) { \
        vstore8(group_sums##NT(red, dots##NT##_##T(up + (size_t)r * rb, up + rs, x, x_bytes, vload8(0, on), n, gs, lid), \
                               nt, lid), 0, u); \
        EACH8(UP_ACT) \
    } \
    if (lid == 0) \
        for (int t = 0; t < tile_n; t++) if (t < nt) { \
            float c = fabs(v[t]) * dn[r]; \
            h[(size_t)(b0 + t) * k + r] = contrib && (c == 0.0f || c < t_act) ? 0.0f : v[t]; \
        } \
}
/* One work group per DCOLS output columns, slice of the hot rows and tile of
   tokens (dimension 1: tokens b0 = tile_n * tile .. of B): the k rows are
   cut into `splits` slices (the host chooses enough to fill the device:
   opencl/rows.c, hc_cl_down_splits), and group g takes columns
   (g % blocks) * DCOLS.. of slice g / blocks. DITEMS items each own 4
   adjacent columns and LANES lanes split the slice's rows (lane l adds rows
   lo + l, lo + l + LANES, ... in order, zero h skipped), so the items of a
   lane read one contiguous stretch of a row, once for the tile; the lanes'
   sums are then added in a fixed tree order in local memory. One slice
   writes y; several write part[slice][b][n], which down_sum adds in slice
   order: no result depends on scheduling, nor on what shares a token's tile.
   rb, sb: as gate_up's; sm, smrow: the GPTQ pairs table and each row's
   entry (PAIRS_T). down1_T takes one token (decode) and down8_T tiles of TILE,
   each with loops to its constant tile_n. */
#define DITEMS (WG < 8 ? WG : 8)
#define LANES (WG / DITEMS)
#define DCOLS (4 * DITEMS)
#define DOWN(T, NT) \
__kernel void down##NT##_##T(__global const uchar *down, __global const float *h, int k, int n, __global float *y, \
                             int rb, __global const float *sm, __global const int *smrow, int splits, \
                             __global float *part, int B, int sb) { \
    __local float4 red[TILE * WG]; \
    const int tile_n = NT; \
    int lid = get_local_id(0), item = lid % DITEMS, lane = lid / DITEMS; \
    int b0 = get_group_id(1) * tile_n, nt = min(tile_n, B - b0); \
    int blocks = (n + DCOLS - 1) / DCOLS, g = get_group_id(0), s = g / blocks; \
    int c = g % blocks * DCOLS + 4 * item, lo = (int)((long)k * s / splits), hi = (int)((long)k * (s + 1) / splits); \
    const int al = n % 4 == 0; \
    float4 acc[TILE]; \
    float hr[TILE]; \
    for (int t = 0; t < tile_n; t++) acc[t] = (float4)(0.0f); \
    for (int r = lo + lane; r < hi; r += LANES) { \
        int any = 0; \
        for (int t = 0; t < tile_n; t++) { \
            hr[t] = t < nt ? h[(size_t)(b0 + t) * k + r] : 0.0f; \
            any |= hr[t] != 0.0f; \
        } \
        if (!any) continue; \
        __global const uchar *row = down + (size_t)r * rb; \
        __global const float *p = PAIRS_##T(sm, smrow, r, n); \
        __global const half *d = (__global const half *)(down + (size_t)k * rb + (size_t)r * sb); \
        if (c + 3 < n) { \
            float4 e = elem4_##T(row, c, d, p, al); \
            for (int t = 0; t < tile_n; t++) \
                if (hr[t] != 0.0f) acc[t] += hr[t] * e; \
        } else { \
            float e0 = c < n ? elem_##T(row, c, d, p, al) : 0.0f; \
            float e1 = c + 1 < n ? elem_##T(row, c + 1, d, p, al) : 0.0f; \
            float e2 = c + 2 < n ? elem_##T(row, c + 2, d, p, al) : 0.0f; \
            for (int t = 0; t < tile_n; t++) \
                if (hr[t] != 0.0f) { acc[t].x += hr[t] * e0; acc[t].y += hr[t] * e1; acc[t].z += hr[t] * e2; } \
        } \
    } \
    for (int t = 0; t < tile_n; t++) if (t < nt) red[t * WG + lid] = acc[t]; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    for (int h2 = LANES / 2; h2 > 0; h2 >>= 1) { \
        if (lane < h2) \
            for (int t = 0; t < tile_n; t++) if (t < nt) red[t * WG + lid] += red[t * WG + lid + h2 * DITEMS]; \
        barrier(CLK_LOCAL_MEM_FENCE); \
    } \
    if (lane == 0) \
        for (int t = 0; t < tile_n; t++) if (t < nt) { \
            int b = b0 + t; \
            __global float *yb = splits == 1 ? y + (size_t)b * n : part + ((size_t)s * B + b) * n; \
            float4 v = red[t * WG + lid]; \
            if (c + 3 < n) vstore4(v, c / 4, yb); \
            else { if (c < n) yb[c] = v.x; if (c + 1 < n) yb[c + 1] = v.y; if (c + 2 < n) yb[c + 2] = v.z; } \
        } \
}
/* y[b][c] = the slices' partial sums of column c in slice order (one item each). */
__kernel void down_sum(__global const float *part, int splits, int n, __global float *y) {
    int c = get_global_id(0), b = get_global_id(1), B = get_global_size(1);
    if (c >= n) return;
    float v = part[(size_t)b * n + c];
    for (int s = 1; s < splits; s++) v += part[((size_t)s * B + b) * n + c];
    y[(size_t)b * n + c] = v;
}
/* What the device did for B tokens left on it (hc_cl_layer_keep), among
 * total = B * k: count c = 0 the masked rows (gate and up read), 1 the
 * non-zero h (down rows read), 2 those also set in truth when has_truth.
 * Each group (one per compute unit) sums its items' share in local memory,
 * then adds it to the 64-bit count c held as two uints (counts[2c] low,
 * counts[2c + 1] high: an add that wraps the low word carries one). Integer
 * sums: the counts do not depend on the order. */
__kernel void count_hot(__global const float *h, __global const uchar *mask, __global const uchar *truth,
                        int has_truth, int total, __global uint *counts) {
    __local uint red[3 * WG];
    const int lid = get_local_id(0);
    uint m = 0, a = 0, t = 0;
    for (int i = get_global_id(0); i < total; i += get_global_size(0)) {
        m += mask[i] != 0;
        a += h[i] != 0.0f;
        t += has_truth && h[i] != 0.0f && truth[i] != 0;
    }
    red[lid] = m;
    red[WG + lid] = a;
    red[2 * WG + lid] = t;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s)
            for (int c = 0; c < 3; c++) red[c * WG + lid] += red[c * WG + lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        for (int c = 0; c < 3; c++) {
            uint v = red[c * WG];
            if (v && atomic_add(&counts[2 * c], v) > UINT_MAX - v) atomic_inc(&counts[2 * c + 1]);
        }
}
#define ROW_KERNELS(T) GATE_UP(T, 1) GATE_UP(T, 8) DOWN(T, 1) DOWN(T, 8)
ROW_KERNELS(f32) ROW_KERNELS(f16) ROW_KERNELS(bf16) ROW_KERNELS(q8_0) ROW_KERNELS(q4_0) ROW_KERNELS(gptq)

/* What both OpenCL programs share (runtime/opencl/kernels/backend.cl and
 * hot_rows.cl are each built after this file): horizontal sums, and the
 * integer dot of a 32-value block with a Q8_0 activation block as ggml
 * computes it (ggml_vec_dot_q8_0_q8_0: the codes' products summed exactly
 * in int, then scaled once by the block's d_w * d_x), on the quantized
 * formats' device form (the host's hc_cl_repack):
 *   q8  int8 codes [rows][n], D = float d [rows][n/32]: value d*q
 *   q4  Q4_0: codes [rows][n/2] in 16-byte blocks of 32 (byte i: code i
 *       low, i + 16 high; ggml's order), D = float d [rows][n/32]: value
 *       d*(q - 8)
 *   g4  INT4-GPTQ: codes as q4 (n = the row's kp), D = float2 {s, m}
 *       [rows][n/32], the block's group {scale, -scale*zero}: value s*q + m
 * and the Q8 input in act_q8's form (backend.cl): a row's codes, 16-byte
 * aligned, its blocks' d as floats apart. */
#pragma OPENCL FP_CONTRACT OFF

/* S(0) .. S(7): a tile's 8 tokens spelled out, each index a constant where a
 * loop's body is too large for the compiler to unroll (an array indexed by a
 * variable lives in memory, not registers, on a GPU) */
#define EACH8(S) S(0) S(1) S(2) S(3) S(4) S(5) S(6) S(7)

/* 2^23 + each byte of v (each below 256), as floats: codes become floats
 * without an int-to-float conversion (a quarter-rate instruction on NVIDIA's
 * GPUs). A byte c OR'ed into 0x4B000000 is the float 2^23 + c, and the
 * subtraction of 2^23 (plus an offset) that follows is exact, so the values
 * are convert_float's. */
float4 big4(uint v)
{
    return as_float4((uint4)(v, v >> 8, v >> 16, v >> 24) & 0xFFu | 0x4B000000u);
}

int hsum16(int16 v) { int8 a = v.lo + v.hi; int4 b = a.lo + a.hi; int2 c = b.lo + b.hi; return c.x + c.y; }
float hsum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

/* words_T: block j of row r of a quantized format as eight words of four
 * int8 codes each, elements 0..15 in a and 16..31 in b, in the form that
 * dot_T multiplies with the input's codes (act_q8's, in the same order):
 * q8 its codes; q4 each code q as 16 (q - 8), an int8 (the nibble moved to
 * the byte's top, its top bit flipped), so that the sum is 16 times the
 * block's; g4 the codes as they are, unsigned.
 * scale_T: the block's pair {s, m} (q8: {d, 0}; q4: {d / 16, 0}, exact, so
 * that s * (d/16 * dx) has the bits of s/16 * (d * dx): d and dx are fp16
 * values, their product far from underflow). */
void words_q8(__global const uchar *W, int n, int r, int j, uint4 *a, uint4 *b)
{
    __global const uint4 *q = (__global const uint4 *)(W + (size_t)r * n + 32 * (size_t)j);
    *a = q[0];
    *b = q[1];
}
/* block j's 16 code bytes of row r (q4, g4) */
uint4 codes4(__global const uchar *W, int n, int r, int j)
{
    return ((__global const uint4 *)(W + (size_t)r * (n / 2)))[j];
}
void words_q4(__global const uchar *W, int n, int r, int j, uint4 *a, uint4 *b)
{
    const uint4 c = codes4(W, n, r, j);
    *a = ((c << 4u) & 0xF0F0F0F0u) ^ 0x80808080u;
    *b = (c & 0xF0F0F0F0u) ^ 0x80808080u;
}
void words_g4(__global const uchar *W, int n, int r, int j, uint4 *a, uint4 *b)
{
    const uint4 c = codes4(W, n, r, j);
    *a = c & 0x0F0F0F0Fu;
    *b = (c >> 4u) & 0x0F0F0F0Fu;
}
/* a + the four products of b's and c's bytes, b's signed (idot4) or
   unsigned (udot4), c's signed: CUDA's dp4a. NVIDIA's PTX has it as one
   instruction from compute capability 6.1 on, where the host defines
   HC_DP4A (its OpenCL C takes PTX in asm statements); elsewhere the
   kernels widen the bytes themselves, in vectors (bsum_T, DOTX below), and
   these two, byte by byte, serve only dots_check. */
#ifdef HC_DP4A
int idot4(uint b, uint c, int a)
{
    int d;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(b), "r"(c), "r"(a));
    return d;
}
int udot4(uint b, uint c, int a)
{
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(b), "r"(c), "r"(a));
    return d;
}
#else
int idot4(uint b, uint c, int a)
{
    const char4 x = as_char4(b), y = as_char4(c);
    return a + x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
}
int udot4(uint b, uint c, int a)
{
    const uchar4 x = as_uchar4(b);
    const char4 y = as_char4(c);
    return a + x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
}
#endif
/* out[2i], out[2i+1]: idot4 and udot4 of b[i], c[i] onto i - 32, which the
   host compares with its own sums once the kernels are built: a dp4a whose
   operands or signedness were not what idot4 and udot4 say would differ. */
__kernel void dots_check(__global const uint *b, __global const uint *c, __global int *out)
{
    const int i = get_global_id(0);
    out[2 * i] = idot4(b[i], c[i], i - 32);
    out[2 * i + 1] = udot4(b[i], c[i], i - 32);
}
#define dot_q8 idot4
#define dot_q4 idot4
#define dot_g4 udot4
float2 scale_q8(__global const float *D, int n, int r, int j) { return (float2)(D[(size_t)r * (n / 32) + j], 0.0f); }
float2 scale_q4(__global const float *D, int n, int r, int j)
{
    return (float2)(D[(size_t)r * (n / 32) + j] * 0.0625f, 0.0f);
}
float2 scale_g4(__global const float *D, int n, int r, int j) { return vload2((size_t)r * (n / 32) + j, D); }
/* a block's integer sum (q4: 16 times it): words a, b of a weight block
 * (words_T) times the input block's codes u (elements 0..15), v (16..31):
 * eight dp4a, or (bytes widened) the 32 codes as shorts in two vectors,
 * each product and pair of them exact in 16 bits (|w x| <= 128 * 127), as
 * a CPU device runs fast */
#ifdef HC_DP4A
#define BSUM(T) \
int bsum_##T(uint4 a, uint4 b, uint4 u, uint4 v) \
{ \
    int s = dot_##T(a.x, u.x, 0); \
    s = dot_##T(a.y, u.y, s); \
    s = dot_##T(a.z, u.z, s); \
    s = dot_##T(a.w, u.w, s); \
    s = dot_##T(b.x, v.x, s); \
    s = dot_##T(b.y, v.y, s); \
    s = dot_##T(b.z, v.z, s); \
    return dot_##T(b.w, v.w, s); \
}
#else
#define wide_q8(w) convert_short16(as_char16(w))
#define wide_q4(w) convert_short16(as_char16(w))
#define wide_g4(w) convert_short16(as_uchar16(w))
#define BSUM(T) \
int bsum_##T(uint4 a, uint4 b, uint4 u, uint4 v) \
{ \
    return hsum16(convert_int16(wide_##T(a) * wide_q8(u) + wide_##T(b) * wide_q8(v))); \
}
#endif
BSUM(q8)
BSUM(q4)
BSUM(g4)

/* A block's term from its sum s of the codes' products (a float holding an
 * integer, or a vector of them: the tiled products'), the weight's pair sm,
 * the activation block's scale dx and (GPTQ) its sum d*sum(q) xs: Q8_0/Q4_0
 * as ggml, s * (d_w * d_x); INT4-GPTQ as kernels_ref.c's dot_gptq_int8,
 * s * (s_w * d_x) + m * X (there summed per group first). */
#define BLOCK_q8(s, sm, dx, xs) ((s) * ((sm).x * (dx)))
#define BLOCK_q4(s, sm, dx, xs) ((s) * ((sm).x * (dx)))
#define BLOCK_g4(s, sm, dx, xs) ((sm).x * ((s) * (dx)) + (sm).y * (xs))

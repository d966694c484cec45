/* What both OpenCL programs share (runtime/opencl/kernels/backend.cl and
 * hot_rows.cl are each built after this file): horizontal sums, and the
 * integer dot of a 32-value block with a Q8_0 activation block as ggml
 * computes it (ggml_vec_dot_q8_0_q8_0: the codes' products summed exactly
 * in int, then scaled once by the block's d_w * d_x). */
#pragma OPENCL FP_CONTRACT OFF

/* S(0) .. S(7): a tile's 8 tokens spelled out, each index a constant where a
 * loop's body is too large for the compiler to unroll (an array indexed by a
 * variable lives in memory, not registers, on a GPU) */
#define EACH8(S) S(0) S(1) S(2) S(3) S(4) S(5) S(6) S(7)

int hsum16(int16 v) { int8 a = v.lo + v.hi; int4 b = a.lo + a.hi; int2 c = b.lo + b.hi; return c.x + c.y; }
float hsum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

/* A block's products w_i * x_i in 16 lanes: w elements 0..15 in lo, 16..31
   in hi (int8 codes, or Q4 nibbles with their offset applied), x likewise
   (int8 codes, |x| <= 127 as ggml's Q8_0 quantizer makes them). Products
   and their pairs in 16 bits (|w x| <= 128 * 127, a pair <= 32512: exact;
   CPUs multiply 16-bit lanes far faster than 32-bit ones), then widened. */
int16 iprod32(short16 lo, short16 hi, short16 xl, short16 xh) { return convert_int16(lo * xl + hi * xh); }
/* x's block at xq (32 int8 codes) as lo and hi */
void xload32(__global const char *xq, short16 *xl, short16 *xh)
{
    *xl = convert_short16(vload16(0, xq));
    *xh = convert_short16(vload16(1, xq));
}
/* sum_i w_i * x_i over one block, x the codes at xq */
int idot32(short16 lo, short16 hi, __global const char *xq)
{
    short16 xl, xh;
    xload32(xq, &xl, &xh);
    return hsum16(iprod32(lo, hi, xl, xh));
}

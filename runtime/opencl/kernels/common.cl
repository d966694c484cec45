/* What both OpenCL programs share (runtime/opencl/kernels/backend.cl and
 * hot_rows.cl are each built after this file): horizontal sums, and the
 * integer dot of a 32-value block with a Q8_0 activation block as ggml
 * computes it (ggml_vec_dot_q8_0_q8_0: the codes' products summed exactly
 * in int, then scaled once by the block's d_w * d_x). */
#pragma OPENCL FP_CONTRACT OFF

int hsum16(int16 v) { int8 a = v.lo + v.hi; int4 b = a.lo + a.hi; int2 c = b.lo + b.hi; return c.x + c.y; }
float hsum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

/* sum_i w_i * x_i over one block: w elements 0..15 in lo, 16..31 in hi (as
   ints: int8 codes, or Q4 nibbles with their offset applied), x the 32
   int8 codes at xq */
int idot32(int16 lo, int16 hi, __global const char *xq)
{
    return hsum16(lo * convert_int16(vload16(0, xq)) + hi * convert_int16(vload16(1, xq)));
}

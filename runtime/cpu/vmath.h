/* e^x, SiLU and ReLU on 8 floats at a time (GCC vector extensions), in
 * plain multiplies and adds (no FMA: -ffp-contract=off): every copy the
 * compiler makes of them, for AVX-512, AVX2 or the scalar build, on 8 lanes
 * or on one, gives the same bits. The attention's softmax and the FFN's
 * activations use them, where glibc's expf took a call per element. */
#ifndef HC_VMATH_H
#define HC_VMATH_H

#include <stdint.h>

typedef float hc_vf __attribute__((vector_size(8 * sizeof(float))));
typedef int32_t hc_vi __attribute__((vector_size(8 * sizeof(int32_t))));

/* *v = e^v in each lane, for v <= 0, within 1 ulp where e^v is a normal
 * float: v = n·ln 2 + r with n rounded to nearest (|r| <= ln 2 / 2, ln 2 in
 * two parts as Cody and Waite), Cephes' degree-6 polynomial for e^r, times
 * 2^n built in the exponent bits. v below -87.33 (e^v under FLT_MIN) gives
 * 0, NaN gives NaN. */
static inline __attribute__((always_inline)) void hc_vexp(hc_vf *v)
{
    hc_vf x = *v;
    const float magic = 12582912.0f;   /* 1.5 · 2^23: adding it rounds to an integer */
    hc_vf t = x * 1.44269504088896341f + magic, nf = t - magic;
    hc_vf r = x - nf * 0.693359375f;   /* ln 2's leading bits: nf · them is exact */
    r = r - nf * -2.12194440e-4f;
    hc_vf p = 1.9875691500e-4f * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    hc_vi n = (hc_vi)t - 0x4b400000;   /* t's integer, from its low bits (magic's bits: 0x4b400000) */
    hc_vf y = p * (hc_vf)((n + 127) << 23);
    *v = (hc_vf)((hc_vi)y & ~(x < -87.33654f));   /* under FLT_MIN: 0 */
}

/* *v = SiLU(v) = v / (1 + e^-v) in each lane, through t = e^-|v| (in
 * hc_vexp's range): v / (1 + t) where v >= 0, v·t / (1 + t) below (e^v /
 * (1 + e^v) is the same σ). Within 3 ulp of v / (1 + e^-v) from -87.33 up;
 * below, -0 (the value is under 1e-36 there); +inf for +inf, NaN for -inf
 * and NaN, as x / (1 + expf(-x)) gives. */
static inline __attribute__((always_inline)) void hc_vsilu(hc_vf *v)
{
    const hc_vf x = *v, one = { 1, 1, 1, 1, 1, 1, 1, 1 };
    const hc_vi pos = x >= 0.0f;
    hc_vf t = (hc_vf)((hc_vi)x | (int32_t)0x80000000);   /* -|x| */
    hc_vexp(&t);
    *v = x * (hc_vf)(((hc_vi)one & pos) | ((hc_vi)t & ~pos)) / (one + t);
}

/* *v = ReLU(v): v where v > 0, else +0 (NaN too), as x > 0 ? x : 0. */
static inline __attribute__((always_inline)) void hc_vrelu(hc_vf *v) { *v = (hc_vf)((hc_vi)*v & (*v > 0.0f)); }

#endif

/* e^x, SiLU, GELU and ReLU on 8 floats at a time (GCC vector extensions), in
 * plain multiplies and adds (no FMA: -ffp-contract=off): every copy the
 * compiler makes of them, for AVX-512, AVX2 or the scalar build, on 8 lanes
 * or on one, gives the same bits. The attention's softmax and the FFN's
 * activations use them, where glibc's expf and erff took a call per
 * element. */
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
 * (1 + e^v) is the same σ). Within 3.5 ulp of v / (1 + e^-v) from -87.33 up;
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

/* *p = c[0]·x^(n-1) + c[1]·x^(n-2) + ... + c[n-1] by Horner's rule. */
static inline __attribute__((always_inline)) void hc_vpoly(hc_vf *p, const hc_vf *x, const float *c, int n)
{
    hc_vf s = c[0] * *x + c[1];
    _Pragma("GCC unroll 16")
    for (int i = 2; i < n; i++) s = s * *x + c[i];
    *p = s;
}

/* *v = GELU(v) = v/2 · (1 + erf(v / √2)) in each lane, 1 + erf(z) by
 * two polynomials fitted with mpmath's chebyfit (errors 1.3e-11 and 1.9e-9
 * in what they approximate): 1 + z·P(z²) for |z| < 0.5; above,
 * c = e^-z²·Q(t), Q ≈ erfc(|z|)·e^z² on [0.5, 4] in t = (|z| - 2.25) / 1.75
 * (|z| above 4 taken as 4: c is then under half an ulp of 2), and 1 + erf =
 * c where z < 0, 2 - c where z > 0, so that the small values of negative v
 * keep their relative accuracy where 1 + erff(z) cancelled. Within 1.5 ulp
 * of GELU from double beyond |v|·2^-24 (1.22 the most over every third
 * float in [-20, 20]; test_gelu); +inf for +inf, NaN for -inf and NaN, as
 * v/2 · (1 + erff(v / √2)) gives. */
static inline __attribute__((always_inline)) void hc_vgelu(hc_vf *v)
{
    static const float P[] = { -7.694534279e-04f, 5.200413724e-03f, -2.686314303e-02f, 1.128377401e-01f,
                               -3.761263853e-01f, 1.128379167e+00f };
    static const float Q[] = { 4.625081058e-05f, -1.103268663e-04f, 8.480956929e-05f, -1.790048067e-04f,
                               6.245232599e-04f, -1.331224237e-03f, 2.568922845e-03f, -5.130929176e-03f,
                               1.001375066e-02f, -1.877903808e-02f, 3.394195598e-02f, -5.896352139e-02f,
                               9.797742850e-02f, -1.548513973e-01f, 2.310872587e-01f };
    const hc_vf x = *v, z = x * 0.707106781f, u = z * z, four = { 4, 4, 4, 4, 4, 4, 4, 4 };
    const hc_vf a = (hc_vf)((hc_vi)z & 0x7fffffff);
    const hc_vi in = a < 4.0f;
    const hc_vf t = ((hc_vf)(((hc_vi)a & in) | ((hc_vi)four & ~in)) - 2.25f) * 0.571428571f;
    hc_vf p, q, c = -u;
    hc_vpoly(&p, &u, P, sizeof P / sizeof *P);
    hc_vpoly(&q, &t, Q, sizeof Q / sizeof *Q);
    hc_vexp(&c);
    c = c * q;
    const hc_vi near = a < 0.5f, neg = z < 0.0f;
    const hc_vf big = (hc_vf)(((hc_vi)c & neg) | ((hc_vi)(2.0f - c) & ~neg));
    *v = 0.5f * x * (hc_vf)(((hc_vi)(1.0f + z * p) & near) | ((hc_vi)big & ~near));
}

/* *v = ReLU(v): v where v > 0, else +0 (NaN too), as x > 0 ? x : 0. */
static inline __attribute__((always_inline)) void hc_vrelu(hc_vf *v) { *v = (hc_vf)((hc_vi)*v & (*v > 0.0f)); }

#endif

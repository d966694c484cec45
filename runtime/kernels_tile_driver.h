/* Internal to the tiled kernels: the row panel / vector tile / row tile loops
 * kernels_tile_avx2.c and kernels_tile_avx512.c share. The includer defines
 * T, TI, RM, TM, PANEL and tile(k, R, Tn, w, x, n, y) first; QGEMM's
 * functions take TQ and use RQ, TQN and the named tile and arrange functions. */
#ifndef HC_KERNELS_TILE_DRIVER_H
#define HC_KERNELS_TILE_DRIVER_H

#define TILE(R_, T_) case (R_) * 16 + (T_): if ((R_) <= RM && (T_) <= TM) tile(k, (R_) <= RM ? (R_) : 1, (T_) <= TM ? (T_) : 1, w, x, n, yp); break
#define TILES(R_) TILE(R_, 1); TILE(R_, 2); TILE(R_, 3); TILE(R_, 4); TILE(R_, 5); TILE(R_, 6); TILE(R_, 7); TILE(R_, 8)

TI void gemm(int k, const char *W, size_t rb, int r0, int nr, const char *acts, size_t as, int B, float *y,
             size_t ys, int n)
{
    int panel = nr;
    if ((size_t)nr * rb > PANEL) panel = rb * RM >= PANEL ? RM : (int)(PANEL / rb) / RM * RM;
    for (int p0 = 0; p0 < nr; p0 += panel) {
        int p1 = nr - p0 < panel ? nr : p0 + panel;
        for (int b0 = 0; b0 < B; b0 += TM) {
            int tn = B - b0 < TM ? B - b0 : TM;
            const float *x[TM];
            for (int t = 0; t < tn; t++) x[t] = (const float *)(acts + (size_t)(b0 + t) * as);
            for (int i0 = p0; i0 < p1; i0 += RM) {
                int rn = p1 - i0 < RM ? p1 - i0 : RM;
                const void *w[RM];
                float *yp[TM];
                for (int r = 0; r < rn; r++) w[r] = W + (size_t)(r0 + i0 + r) * rb;
                for (int t = 0; t < tn; t++) yp[t] = y + (size_t)(b0 + t) * ys + i0;
                switch (rn * 16 + tn) {
                TILES(1); TILES(2); TILES(3); TILES(4); TILES(5); TILES(6); TILES(7); TILES(8);
                }
            }
        }
    }
}

T static void gemm_f32(const char *W, size_t rb, int r0, int nr, const char *acts, size_t as, int B, float *y,
                       size_t ys, int n)
{ gemm(HC_K_F32, W, rb, r0, nr, acts, as, B, y, ys, n); }
T static void gemm_f16(const char *W, size_t rb, int r0, int nr, const char *acts, size_t as, int B, float *y,
                       size_t ys, int n)
{ gemm(HC_K_F16, W, rb, r0, nr, acts, as, B, y, ys, n); }
T static void gemm_bf16(const char *W, size_t rb, int r0, int nr, const char *acts, size_t as, int B, float *y,
                        size_t ys, int n)
{ gemm(HC_K_BF16, W, rb, r0, nr, acts, as, B, y, ys, n); }

/* ---- Q8_0 / Q4_0 weights x Q8_0 activations ---- */

#define QTILE(F, RT, TT, R_, T_) case (R_) * 16 + (T_): if ((R_) <= RT && (T_) <= TT) F((R_) <= RT ? (R_) : 1, (T_) <= TT ? (T_) : 1, w, xs, nb, yp); break
#define QTILES(F, RT, TT, R_) QTILE(F, RT, TT, R_, 1); QTILE(F, RT, TT, R_, 2); QTILE(F, RT, TT, R_, 3); QTILE(F, RT, TT, R_, 4); \
    QTILE(F, RT, TT, R_, 5); QTILE(F, RT, TT, R_, 6); QTILE(F, RT, TT, R_, 7); QTILE(F, RT, TT, R_, 8)

/* The row panels / vector tiles / row tiles of gemm, over activations
 * arranged once per call (per vector `per` bytes). */
#define QGEMM(NAME, XT, ARR, F, PER, RT, TT)                                                                   \
TQ static void NAME(const char *W, size_t rb, int r0, int nr, const char *acts, size_t as, int B, float *y, \
                    size_t ys, int n)                                                                    \
{                                                                                                        \
    int nb = n / QK8_0, per = (PER);                                                                     \
    XT *xa = _mm_malloc(sizeof *xa * (size_t)per * (size_t)B, 64);                                       \
    if (!xa) hc_die("kernels: out of memory");                                                           \
    for (int b = 0; b < B; b++) ARR((const block_q8_0 *)(acts + (size_t)b * as), nb, xa + (size_t)b * per); \
    int panel = nr;                                                                                      \
    if ((size_t)nr * rb > PANEL) panel = rb * RT >= PANEL ? RT : (int)(PANEL / rb) / RT * RT;            \
    for (int p0 = 0; p0 < nr; p0 += panel) {                                                             \
        int p1 = nr - p0 < panel ? nr : p0 + panel;                                                      \
        for (int b0 = 0; b0 < B; b0 += TT) {                                                             \
            int tn = B - b0 < TT ? B - b0 : TT;                                                          \
            const XT *xs[TQN];                                                                           \
            for (int t = 0; t < tn; t++) xs[t] = xa + (size_t)(b0 + t) * per;                            \
            for (int i0 = p0; i0 < p1; i0 += RT) {                                                       \
                int rn = p1 - i0 < RT ? p1 - i0 : RT;                                                    \
                const char *w[RQ];                                                                       \
                float *yp[TQN];                                                                          \
                for (int r = 0; r < rn; r++) w[r] = W + (size_t)(r0 + i0 + r) * rb;                      \
                for (int t = 0; t < tn; t++) yp[t] = y + (size_t)(b0 + t) * ys + i0;                     \
                switch (rn * 16 + tn) {                                                                  \
                QTILES(F, RT, TT, 1); QTILES(F, RT, TT, 2); QTILES(F, RT, TT, 3); QTILES(F, RT, TT, 4);  \
                QTILES(F, RT, TT, 5); QTILES(F, RT, TT, 6); QTILES(F, RT, TT, 7); QTILES(F, RT, TT, 8);  \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }                                                                                                    \
    _mm_free(xa);                                                                                        \
}

#endif

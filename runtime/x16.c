/* Q4_0 and Q8_0 rows in chunks of 16 blocks (x16.h). */
#include "x16.h"

#include <string.h>
#include "kernels.h"
#include "quants.h"

/* lanes[t]: the lanes of a chunk of t blocks (bit L when block 4·(L % 4) + L / 4 < t) */
static const uint16_t lanes[HC_X16_CHUNK + 1] = { 0x0000, 0x0001, 0x0011, 0x0111, 0x1111, 0x1113, 0x1133, 0x1333,
                                                  0x3333, 0x3337, 0x3377, 0x3777, 0x7777, 0x777f, 0x77ff, 0x7fff,
                                                  0xffff };

uint16_t hc_x16_lanes(int t) { return lanes[t]; }

/* Where lane L's scale (at 2·slot) and plane bytes (at 2t + 4t·i + 4·slot)
 * lie in a chunk of t blocks: slot = its rank among the chunk's lanes. */
static int slot_of(int L, int t) { return __builtin_popcount(hc_x16_lanes(t) & ((1u << L) - 1)); }

/* A block's code bytes after its fp16 scale, and what the layout adds to
 * each (as the xor of four bytes at once). */
static int codes_of(uint32_t type) { return type == GGML_TYPE_Q8_0 ? QK8_0 : QK4_0 / 2; }
static uint32_t flip_of(uint32_t type) { return type == GGML_TYPE_Q8_0 ? 0x80808080u : 0; }

/* The scale and `planes` code planes of slot kf of a chunk of tf blocks at
 * `from` to slot kt of one of tt at `to`, the codes xored with flip. A ggml
 * block is slot 0 of a chunk of 1; in a whole chunk slot L is lane L. */
static void move_lane(uint8_t *to, int tt, int kt, const uint8_t *from, int tf, int kf, int planes, uint32_t flip)
{
    memcpy(to + 2 * kt, from + 2 * kf, 2);
    for (int i = 0; i < planes; i++) {
        uint32_t v;
        memcpy(&v, from + 2 * tf + 4 * tf * i + 4 * kf, 4);
        v ^= flip;
        memcpy(to + 2 * tt + 4 * tt * i + 4 * kt, &v, 4);
    }
}

int hc_x16_wanted(uint32_t type)
{
    if (type == GGML_TYPE_Q4_0) return hc_kernel_choice(HC_KT_Q4_0) >= HC_ISA_AVX2;
    return type == GGML_TYPE_Q8_0 && hc_kernel_choice(HC_KT_Q8_0) == HC_ISA_AVX512;
}

void hc_x16_repack(uint32_t type, const void *src, uint8_t *dst, int nb)
{
    const size_t bs = ggml_type_size(type);
    const int planes = codes_of(type) / 4;
    for (int c = 0; c < nb; c += HC_X16_CHUNK) {
        const int t = nb - c < HC_X16_CHUNK ? nb - c : HC_X16_CHUNK;
        for (int L = 0, k = 0; L < HC_X16_CHUNK; L++)
            if (hc_x16_block_of(L) < t)
                move_lane(dst, t, k++, (const uint8_t *)src + (size_t)(c + hc_x16_block_of(L)) * bs, 1, 0, planes,
                          flip_of(type));
        dst += bs * (size_t)t;
    }
}

void hc_x16_block(uint32_t type, const uint8_t *row, int nb, int b, void *out)
{
    const int c = b - b % HC_X16_CHUNK, j = b % HC_X16_CHUNK, t = nb - c < HC_X16_CHUNK ? nb - c : HC_X16_CHUNK;
    /* the lane of block j: the map is its own inverse; the flip too */
    move_lane(out, 1, 0, row + ggml_type_size(type) * (size_t)c, t, slot_of(hc_x16_block_of(j), t), codes_of(type) / 4,
              flip_of(type));
}

void hc_x16_row_f32(uint32_t type, const uint8_t *row, int n, float *out)
{
    for (int b = 0; b < n / 32; b++) {
        union { block_q4_0 q4; block_q8_0 q8; } blk;
        hc_x16_block(type, row, n / 32, b, &blk);
        if (type == GGML_TYPE_Q8_0) dequantize_row_q8_0(&blk.q8, out + (size_t)b * 32, 32);
        else dequantize_row_q4_0(&blk.q4, out + (size_t)b * 32, 32);
    }
}

void hc_x16_pad(uint32_t type, const uint8_t *p, int t, uint8_t *out)
{
    memset(out, 0, ggml_type_size(type) * HC_X16_CHUNK);
    for (int L = 0, k = 0; L < HC_X16_CHUNK; L++)
        if (hc_x16_block_of(L) < t) move_lane(out, HC_X16_CHUNK, L, p, t, k++, codes_of(type) / 4, 0);
}

void hc_x16_arrange(const void *act, int n, int layout, int bias, void *out)
{
    const block_q8_0 *x = act;
    const int nb = n / 32;
    hc_x16_act *o = out;
    for (int c = 0; c * HC_X16_CHUNK < nb; c++, o++) {
        memset(o, 0, sizeof *o);
        for (int g = 0; g < 4; g++)
            for (int m = 0; m < 4; m++) {
                const int b = c * HC_X16_CHUNK + 4 * g + m, L = 4 * m + g;
                if (b >= nb) continue;
                if (layout == HC_X16_PLANES) {
                    for (int i = 0; i < 4; i++) {
                        memcpy(o->lo[i] + 4 * L, x[b].qs + 4 * i, 4);
                        memcpy(o->hi[i] + 4 * L, x[b].qs + 16 + 4 * i, 4);
                    }
                } else {
                    memcpy(o->lo[g] + 16 * m, x[b].qs, 16);
                    memcpy(o->hi[g] + 16 * m, x[b].qs + 16, 16);
                }
                int sum = 0;
                for (int j = 0; j < 32; j++) sum += x[b].qs[j];
                o->corr[L] = -bias * sum;
                o->d[L] = fp16_to_fp32(x[b].d);
            }
    }
}

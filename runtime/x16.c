/* Q4_0 and Q8_0 rows in chunks of 16 blocks (x16.h). */
#include "x16.h"

#include <string.h>
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

/* Four code bytes from `from` to `to`, flipped. */
static void move4(uint8_t *to, const uint8_t *from, uint32_t flip)
{
    uint32_t v;
    memcpy(&v, from, 4);
    v ^= flip;
    memcpy(to, &v, 4);
}

void hc_x16_repack(uint32_t type, const void *src, uint8_t *dst, int nb)
{
    const size_t bs = ggml_type_size(type);
    const int planes = codes_of(type) / 4;
    const uint32_t flip = flip_of(type);
    for (int c = 0; c < nb; c += HC_X16_CHUNK) {
        const int t = nb - c < HC_X16_CHUNK ? nb - c : HC_X16_CHUNK;
        for (int L = 0, k = 0; L < HC_X16_CHUNK; L++) {
            if (hc_x16_block_of(L) >= t) continue;
            const uint8_t *b = (const uint8_t *)src + (size_t)(c + hc_x16_block_of(L)) * bs;
            memcpy(dst + 2 * k, b, 2);
            for (int i = 0; i < planes; i++) move4(dst + 2 * t + 4 * t * i + 4 * k, b + 2 + 4 * i, flip);
            k++;
        }
        dst += bs * (size_t)t;
    }
}

void hc_x16_block(uint32_t type, const uint8_t *row, int nb, int b, void *out)
{
    const int c = b - b % HC_X16_CHUNK, j = b % HC_X16_CHUNK, t = nb - c < HC_X16_CHUNK ? nb - c : HC_X16_CHUNK;
    const int planes = codes_of(type) / 4;
    const uint32_t flip = flip_of(type);
    const uint8_t *chunk = row + ggml_type_size(type) * (size_t)c;
    const int k = slot_of(hc_x16_block_of(j), t);   /* the lane of block j: the map is its own inverse */
    uint8_t *o = out;
    memcpy(o, chunk + 2 * k, 2);
    for (int i = 0; i < planes; i++) move4(o + 2 + 4 * i, chunk + 2 * t + 4 * t * i + 4 * k, flip);
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

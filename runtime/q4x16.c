/* Q4_0 rows in chunks of 16 blocks (q4x16.h). */
#include "q4x16.h"

#include <string.h>
#include "quants.h"

/* lanes[t]: the lanes of a chunk of t blocks (bit L when block 4·(L % 4) + L / 4 < t) */
static const uint16_t lanes[HC_Q4X16_CHUNK + 1] = { 0x0000, 0x0001, 0x0011, 0x0111, 0x1111, 0x1113, 0x1133, 0x1333,
                                                    0x3333, 0x3337, 0x3377, 0x3777, 0x7777, 0x777f, 0x77ff, 0x7fff,
                                                    0xffff };

uint16_t hc_q4x16_lanes(int t) { return lanes[t]; }

/* Where lane L's scale (at 2·slot) and plane bytes (at 2t + 4t·i + 4·slot)
 * lie in a chunk of t blocks: slot = its rank among the chunk's lanes. */
static int slot_of(int L, int t) { return __builtin_popcount(hc_q4x16_lanes(t) & ((1u << L) - 1)); }

void hc_q4x16_repack(const block_q4_0 *src, uint8_t *dst, int nb)
{
    for (int c = 0; c < nb; c += HC_Q4X16_CHUNK) {
        const int t = nb - c < HC_Q4X16_CHUNK ? nb - c : HC_Q4X16_CHUNK;
        for (int L = 0, k = 0; L < HC_Q4X16_CHUNK; L++) {
            if (hc_q4x16_block_of(L) >= t) continue;
            const block_q4_0 *b = &src[c + hc_q4x16_block_of(L)];
            memcpy(dst + 2 * k, &b->d, 2);
            for (int i = 0; i < 4; i++) memcpy(dst + 2 * t + 4 * t * i + 4 * k, b->qs + 4 * i, 4);
            k++;
        }
        dst += sizeof(block_q4_0) * (size_t)t;
    }
}

void hc_q4x16_block(const uint8_t *row, int nb, int b, block_q4_0 *out)
{
    const int c = b - b % HC_Q4X16_CHUNK, j = b % HC_Q4X16_CHUNK, t = nb - c < HC_Q4X16_CHUNK ? nb - c : HC_Q4X16_CHUNK;
    const uint8_t *chunk = row + sizeof(block_q4_0) * (size_t)c;
    const int k = slot_of(hc_q4x16_block_of(j), t);   /* the lane of block j: the map is its own inverse */
    memcpy(&out->d, chunk + 2 * k, 2);
    for (int i = 0; i < 4; i++) memcpy(out->qs + 4 * i, chunk + 2 * t + 4 * t * i + 4 * k, 4);
}

void hc_q4x16_row_f32(const uint8_t *row, int n, float *out)
{
    for (int b = 0; b < n / QK4_0; b++) {
        block_q4_0 blk;
        hc_q4x16_block(row, n / QK4_0, b, &blk);
        dequantize_row_q4_0(&blk, out + (size_t)b * QK4_0, QK4_0);
    }
}

/* ggml type table and fp16/bf16 conversion (docs/formats.md, "ggml type codes"). */
#include "ggml_types.h"

#include <string.h>
#include <strings.h>

typedef struct {
    const char *name;
    uint32_t blck, size;
} type_info;

/* Every code ggml can store in a file. Gaps (removed types, codes newer than
 * this table) stay zero and read as unknown. */
static const type_info types[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32]  = { "F32",  1, 4 },
    [GGML_TYPE_F16]  = { "F16",  1, 2 },
    [GGML_TYPE_Q4_0] = { "Q4_0", 32, 18 },
    [GGML_TYPE_Q4_1] = { "Q4_1", 32, 20 },
    [GGML_TYPE_Q5_0] = { "Q5_0", 32, 22 },
    [GGML_TYPE_Q5_1] = { "Q5_1", 32, 24 },
    [GGML_TYPE_Q8_0] = { "Q8_0", 32, 34 },
    [GGML_TYPE_Q8_1] = { "Q8_1", 32, 36 },
    [GGML_TYPE_Q2_K] = { "Q2_K", 256, 84 },
    [GGML_TYPE_Q3_K] = { "Q3_K", 256, 110 },
    [GGML_TYPE_Q4_K] = { "Q4_K", 256, 144 },
    [GGML_TYPE_Q5_K] = { "Q5_K", 256, 176 },
    [GGML_TYPE_Q6_K] = { "Q6_K", 256, 210 },
    [GGML_TYPE_Q8_K] = { "Q8_K", 256, 292 },
    [16] = { "IQ2_XXS", 256, 66 },
    [17] = { "IQ2_XS", 256, 74 },
    [18] = { "IQ3_XXS", 256, 98 },
    [19] = { "IQ1_S", 256, 50 },
    [20] = { "IQ4_NL", 32, 18 },
    [21] = { "IQ3_S", 256, 110 },
    [22] = { "IQ2_S", 256, 82 },
    [23] = { "IQ4_XS", 256, 136 },
    [GGML_TYPE_I8]   = { "I8",  1, 1 },
    [GGML_TYPE_I16]  = { "I16", 1, 2 },
    [GGML_TYPE_I32]  = { "I32", 1, 4 },
    [GGML_TYPE_I64]  = { "I64", 1, 8 },
    [GGML_TYPE_F64]  = { "F64", 1, 8 },
    [29] = { "IQ1_M", 256, 56 },
    [GGML_TYPE_BF16] = { "BF16", 1, 2 },
    [34] = { "TQ1_0", 256, 54 },
    [35] = { "TQ2_0", 256, 66 },
    [39] = { "MXFP4", 32, 17 },
};

const char *ggml_type_name(uint32_t type) { return type < GGML_TYPE_COUNT ? types[type].name : NULL; }
uint32_t ggml_blck_size(uint32_t type) { return type < GGML_TYPE_COUNT ? types[type].blck : 0; }
uint32_t ggml_type_size(uint32_t type) { return type < GGML_TYPE_COUNT ? types[type].size : 0; }

int ggml_type_from_name(const char *name)
{
    for (int t = 0; t < GGML_TYPE_COUNT; t++)
        if (types[t].name && strcasecmp(types[t].name, name) == 0) return t;
    return -1;
}

size_t ggml_row_size(uint32_t type, int64_t n)
{
    uint32_t blck = ggml_blck_size(type);
    return blck ? (size_t)(n / blck) * ggml_type_size(type) : 0;
}

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Integer rounding gives the same bits as ggml's float-arithmetic version
 * (round to nearest even at every magnitude, subnormals included). */
uint16_t fp32_to_fp16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;
    if (ax > 0x7f800000) return sign | 0x7e00;        /* NaN: canonical quiet NaN */
    if (ax >= 0x477ff000) return sign | 0x7c00;       /* >= 65520 rounds to inf */
    if (ax >= 0x38800000) {                           /* normal half */
        uint32_t h = ((ax >> 23) - 112) << 10 | (ax & 0x7fffff) >> 13;
        uint32_t rem = ax & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;   /* carry may bump the exponent: fine */
        return sign | (uint16_t)h;
    }
    if (ax <= 0x33000000) return sign;                /* <= 2^-25 rounds to zero */
    /* subnormal half: units of 2^-24 */
    uint32_t m = (ax & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - (ax >> 23);
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return sign | (uint16_t)h;
}

float fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) {
        float v = (float)man * 0x1p-24f;              /* zero or subnormal, exact */
        return bits_f32(f32_bits(v) | sign);
    }
    if (exp == 31)   /* inf, or NaN quieted as the x86 conversion ggml relies on does */
        return bits_f32(sign | 0x7f800000 | (man ? 0x400000 : 0) | man << 13);
    return bits_f32(sign | (exp + 112) << 23 | man << 13);
}

uint16_t fp32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 64);   /* quiet the NaN */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float bf16_to_fp32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

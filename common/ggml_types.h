/* ggml tensor types: codes, block sizes, byte sizes, and fp16/bf16 conversion,
 * exactly as ggml defines them (see docs/formats.md, "ggml type codes"). */
#ifndef HC_GGML_TYPES_H
#define HC_GGML_TYPES_H

#include <stdint.h>
#include <stddef.h>

/* Today's ggml numbering. Files with the PowerInfer "PWRI" magic use an older
 * numbering for the integer types (I8=16, I16=17, I32=18); gguf.c translates
 * at the file boundary, so everything else sees these codes only. */
enum ggml_type {
    GGML_TYPE_F32  = 0,
    GGML_TYPE_F16  = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_I8   = 24,
    GGML_TYPE_I16  = 25,
    GGML_TYPE_I32  = 26,
    GGML_TYPE_I64  = 27,
    GGML_TYPE_F64  = 28,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_COUNT = 43,
};

#define QK4_0 32
#define QK4_1 32
#define QK8_0 32

typedef struct { uint16_t d; uint8_t qs[QK4_0 / 2]; } block_q4_0;          /* 18 bytes */
typedef struct { uint16_t d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;       /* 20 bytes */
typedef struct { uint16_t d; int8_t qs[QK8_0]; } block_q8_0;               /* 34 bytes */

/* Name of a type ("F32", "Q4_0", ...) or NULL when ggml has no type with that code. */
const char *ggml_type_name(uint32_t type);
/* Elements per block and bytes per block; 0 for unknown types. */
uint32_t ggml_blck_size(uint32_t type);
uint32_t ggml_type_size(uint32_t type);
/* Type from a case-insensitive name, or -1. */
int ggml_type_from_name(const char *name);
/* Bytes of a row of n elements (n must be a multiple of the block size). */
size_t ggml_row_size(uint32_t type, int64_t n);

/* fp16: round to nearest even, overflow to inf, NaN -> 0x7E00 with its sign (ggml_compute_fp32_to_fp16). */
uint16_t fp32_to_fp16(float f);
float fp16_to_fp32(uint16_t h);
/* bf16: round to nearest even, NaN quieted (ggml_compute_fp32_to_bf16). */
uint16_t fp32_to_bf16(float f);
float bf16_to_fp32(uint16_t h);

#endif

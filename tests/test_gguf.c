/* common/gguf.c: writer/reader round trips, writer layout facts, one hand-made
 * corrupt file per rejection rule, PWRI variant, and the real fixture files. */
#include "harness.h"
#include "gguf.h"

#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char err[1024];

/* ------------------------------------------------------------ byte builder */

typedef struct { uint8_t *p; size_t n; } buf;

static void put(buf *b, const void *d, size_t n)
{
    b->p = realloc(b->p, b->n + n + 1);
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void str(buf *b, const char *s) { u64(b, strlen(s)); put(b, s, strlen(s)); }
static void zeros(buf *b, size_t n) { while (n--) put(b, "", 1); }
static void pad(buf *b, size_t a) { zeros(b, (a - b->n % a) % a); }

static void header(buf *b, const char *magic, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    put(b, magic, 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}
static void kv_u32(buf *b, const char *key, uint32_t v) { str(b, key); u32(b, GGUF_TYPE_UINT32); u32(b, v); }
static void tinfo(buf *b, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type, uint64_t off)
{
    str(b, name);
    u32(b, n_dims);
    put(b, ne, 8 * n_dims);
    u32(b, type);
    u64(b, off);
}

/* Open b from an exactly-sized heap copy, so ASan sees any read past its end.
 * NULL when accepted; the error message otherwise. */
static const char *open_err(const buf *b, gguf_file **keep)
{
    uint8_t *copy = malloc(b->n ? b->n : 1);
    if (b->n) memcpy(copy, b->p, b->n);
    gguf_file *f = gguf_open_mem(copy, b->n, "corrupt.gguf", err, sizeof err);
    if (f && keep) { *keep = f; return NULL; }   /* caller closes, copy leaks on purpose: tiny */
    gguf_close(f);
    free(copy);
    return f ? NULL : err;
}

static int one_line_with_offset(const char *m)
{
    return strncmp(m, "corrupt.gguf: offset ", 21) == 0 && !strchr(m, '\n');
}

#define REJECTS(b, words) do { \
        const char *m_ = open_err(&(b), NULL); \
        CHECKF(m_ && strstr(m_, words) && one_line_with_offset(m_), "want '%s', got '%s'", words, m_ ? m_ : "(accepted)"); \
        free((b).p); (b).p = NULL; (b).n = 0; \
    } while (0)
#define ACCEPTS(b) do { \
        const char *m_ = open_err(&(b), NULL); \
        CHECKF(!m_, "rejected: %s", m_); \
        free((b).p); (b).p = NULL; (b).n = 0; \
    } while (0)

/* --------------------------------------------------------- header and KVs */

static void test_reject_header(void)
{
    buf b = { 0 };
    header(&b, "GGUX", 3, 0, 0);                    REJECTS(b, "bad magic");
    put(&b, "GG", 2);                               REJECTS(b, "too short");
    REJECTS(b, "too short");                        /* empty file */
    header(&b, "GGUF", 0, 0, 0);                    REJECTS(b, "bad GGUF version 0");
    header(&b, "GGUF", 1, 0, 0);                    REJECTS(b, "version 1 is not supported");
    header(&b, "GGUF", 4, 0, 0);                    REJECTS(b, "newer");
    header(&b, "GGUF", 0x03000000, 0, 0);           REJECTS(b, "big-endian");
    put(&b, "GGUF\3\0\0", 7);                       REJECTS(b, "version runs past end of file");
    header(&b, "GGUF", 3, 0, 0); b.n -= 3;          REJECTS(b, "KV count runs past end of file");
    header(&b, "GGUF", 3, 0, 1ull << 40);           REJECTS(b, "KV count 1099511627776 cannot fit");
    header(&b, "GGUF", 3, 1ull << 40, 0);           REJECTS(b, "tensor count 1099511627776");
    header(&b, "GGUF", 3, 0, 2); kv_u32(&b, "a", 1); REJECTS(b, "KV count 2 cannot fit");
    header(&b, "GGUF", 2, 0, 0);                    ACCEPTS(b);   /* v2 has the v3 layout */
    header(&b, "GGUF", 3, 0, 0);                    ACCEPTS(b);
    header(&b, "PWRI", 3, 0, 0);                    ACCEPTS(b);
}

static void test_reject_kv(void)
{
    buf b = { 0 };
    header(&b, "GGUF", 3, 0, 1); u64(&b, 100); put(&b, "abcdefghijklmn", 14);
    REJECTS(b, "key: string of 100 bytes runs past end of file");
    header(&b, "GGUF", 3, 0, 1); u64(&b, (1ull << 30) + 1); zeros(&b, 16);
    REJECTS(b, "exceeds 1 GiB");
    header(&b, "GGUF", 3, 0, 1); str(&b, ""); u32(&b, GGUF_TYPE_UINT32); u32(&b, 5); zeros(&b, 4);
    REJECTS(b, "empty key");
    header(&b, "GGUF", 3, 0, 1); u64(&b, 3); put(&b, "a\0b", 3); u32(&b, GGUF_TYPE_UINT32); u32(&b, 5);
    REJECTS(b, "NUL byte");
    header(&b, "GGUF", 3, 0, 2); kv_u32(&b, "a", 1); kv_u32(&b, "a", 2);
    REJECTS(b, "duplicate key 'a'");
    header(&b, "GGUF", 3, 0, 1); str(&b, "k"); u32(&b, 13); u32(&b, 0); zeros(&b, 4);
    REJECTS(b, "unknown value type 13");
    header(&b, "GGUF", 3, 0, 1); str(&b, "k"); u32(&b, GGUF_TYPE_STRING); u64(&b, 50); put(&b, "abc", 3);
    REJECTS(b, "string of 50 bytes runs past end of file");
    header(&b, "GGUF", 3, 0, 1); str(&b, "k"); u32(&b, GGUF_TYPE_STRING); u64(&b, 1ull << 31); zeros(&b, 8);
    REJECTS(b, "exceeds 1 GiB");
    header(&b, "GGUF", 3, 0, 1); str(&b, "k"); u32(&b, GGUF_TYPE_ARRAY); u32(&b, GGUF_TYPE_ARRAY); u64(&b, 0);
    REJECTS(b, "arrays of arrays");
    header(&b, "GGUF", 3, 0, 1); str(&b, "k"); u32(&b, GGUF_TYPE_ARRAY); u32(&b, 42); u64(&b, 0);
    REJECTS(b, "unknown array element type 42");
    header(&b, "GGUF", 3, 0, 1); str(&b, "k"); u32(&b, GGUF_TYPE_ARRAY); u32(&b, GGUF_TYPE_UINT8); u64(&b, (1ull << 30) + 1);
    REJECTS(b, "exceeds 2^30");
    header(&b, "GGUF", 3, 0, 1); str(&b, "k"); u32(&b, GGUF_TYPE_ARRAY); u32(&b, GGUF_TYPE_UINT32); u64(&b, 1000); zeros(&b, 8);
    REJECTS(b, "1000 values of type u32 run past end of file");
    header(&b, "GGUF", 3, 0, 1); str(&b, "k"); u32(&b, GGUF_TYPE_ARRAY); u32(&b, GGUF_TYPE_STRING); u64(&b, 1000); str(&b, "x");
    REJECTS(b, "array of 1000 strings runs past end of file");
    header(&b, "GGUF", 3, 0, 1); str(&b, "k"); u32(&b, GGUF_TYPE_ARRAY); u32(&b, GGUF_TYPE_STRING); u64(&b, 2); str(&b, "x"); u64(&b, 9); put(&b, "abcdefgh", 8);
    REJECTS(b, "string of 9 bytes runs past end of file");
    header(&b, "GGUF", 3, 0, 1); str(&b, "k"); u32(&b, GGUF_TYPE_BOOL); put(&b, "\2", 1);
    REJECTS(b, "bool value 2 is not 0 or 1");
    header(&b, "GGUF", 3, 0, 1); str(&b, "k"); u32(&b, GGUF_TYPE_ARRAY); u32(&b, GGUF_TYPE_BOOL); u64(&b, 3); put(&b, "\1\0\7", 3);
    REJECTS(b, "bool value 7");
    header(&b, "GGUF", 3, 0, 1); str(&b, "k"); u32(&b, GGUF_TYPE_UINT64); zeros(&b, 7);
    REJECTS(b, "run past end of file");
}

static void test_reject_alignment(void)
{
    buf b = { 0 };
    header(&b, "GGUF", 3, 0, 1); str(&b, "general.alignment"); u32(&b, GGUF_TYPE_UINT64); u64(&b, 32);
    REJECTS(b, "general.alignment has type u64, expected u32");
    header(&b, "GGUF", 3, 0, 1); str(&b, "general.alignment"); u32(&b, GGUF_TYPE_INT32); u32(&b, 32);
    REJECTS(b, "general.alignment has type i32");
    header(&b, "GGUF", 3, 0, 1); kv_u32(&b, "general.alignment", 0);
    REJECTS(b, "general.alignment 0 is not a non-zero power of two");
    header(&b, "GGUF", 3, 0, 1); kv_u32(&b, "general.alignment", 48);
    REJECTS(b, "general.alignment 48 is not a non-zero power of two");
    header(&b, "GGUF", 3, 0, 1); kv_u32(&b, "general.alignment", 64);
    ACCEPTS(b);
}

/* Offsets in messages point at the thing that is wrong. */
static void test_error_offsets(void)
{
    buf b = { 0 };
    header(&b, "GGUF", 3, 0, 2); kv_u32(&b, "a", 1); kv_u32(&b, "a", 2);   /* KV 1 starts at 24 + 17 */
    REJECTS(b, "offset 41: duplicate key 'a'");
    int64_t ne[1] = { 32 };
    header(&b, "GGUF", 3, 2, 0);
    tinfo(&b, "x", 1, ne, GGML_TYPE_F32, 0);                            /* 24 .. 57 */
    tinfo(&b, "y", 1, ne, GGML_TYPE_F32, 64);                           /* starts at 57 */
    pad(&b, 32); zeros(&b, 256);
    REJECTS(b, "offset 57: tensor 'y' has offset 64, expected 128");
}

/* ------------------------------------------------------------ tensor infos */

/* One tensor info followed by its data (nbytes zero bytes), aligned to 32. */
static void one_tensor(buf *b, const char *magic, const char *name, uint32_t n_dims, const int64_t *ne,
                       uint32_t type, size_t nbytes)
{
    header(b, magic, 3, 1, 0);
    tinfo(b, name, n_dims, ne, type, 0);
    pad(b, 32);
    zeros(b, nbytes);
}

static void test_reject_tensor_info(void)
{
    buf b = { 0 };
    int64_t ne32[4] = { 32, 1, 1, 1 };
    char n63[64], n64[65];
    memset(n63, 'a', 63); n63[63] = 0;
    memset(n64, 'a', 64); n64[64] = 0;
    one_tensor(&b, "GGUF", n64, 1, ne32, GGML_TYPE_F32, 128);     REJECTS(b, "is 64 bytes, longer than 63");
    one_tensor(&b, "GGUF", n63, 1, ne32, GGML_TYPE_F32, 128);     ACCEPTS(b);
    one_tensor(&b, "GGUF", "t", 0, ne32, GGML_TYPE_F32, 128);     REJECTS(b, "n_dims 0 is not in 1..4");
    int64_t ne5[5] = { 32, 1, 1, 1, 1 };
    one_tensor(&b, "GGUF", "t", 5, ne5, GGML_TYPE_F32, 128);      REJECTS(b, "n_dims 5 is not in 1..4");
    int64_t neg[2] = { 32, -2 };
    one_tensor(&b, "GGUF", "t", 2, neg, GGML_TYPE_F32, 128);      REJECTS(b, "dimension 1 is negative");
    int64_t big[3] = { 1ll << 40, 1ll << 20, 1ll << 4 };          /* 2^64 elements */
    one_tensor(&b, "GGUF", "t", 3, big, GGML_TYPE_F32, 128);      REJECTS(b, "overflows");
    int64_t bigb[2] = { 1ll << 40, 1ll << 21 };                   /* 2^61 elements fit, 2^64 bytes of F64 do not */
    one_tensor(&b, "GGUF", "t", 2, bigb, GGML_TYPE_F64, 128);     REJECTS(b, "overflows");
    int64_t huge[2] = { 1ll << 30, 1ll << 30 };                   /* fits, but not in this file */
    one_tensor(&b, "GGUF", "t", 2, huge, GGML_TYPE_F32, 128);     REJECTS(b, "runs past end of file");
    one_tensor(&b, "GGUF", "t", 1, ne32, 4, 128);                 REJECTS(b, "unknown tensor type 4");
    one_tensor(&b, "GGUF", "t", 1, ne32, 1000, 128);              REJECTS(b, "unknown tensor type 1000");
    one_tensor(&b, "GGUF", "t", 1, ne32, GGML_TYPE_COUNT, 128);   REJECTS(b, "unknown tensor type 43");
    int64_t ne48[1] = { 48 };
    one_tensor(&b, "GGUF", "t", 1, ne48, GGML_TYPE_Q4_0, 64);     REJECTS(b, "ne[0] = 48 is not a multiple of the Q4_0 block size 32");
    int64_t ne_k[2] = { 128, 2 };
    one_tensor(&b, "GGUF", "t", 2, ne_k, GGML_TYPE_Q4_K, 1024);   REJECTS(b, "block size 256");
    int64_t ne0[2] = { 0, 5 };
    one_tensor(&b, "GGUF", "t", 2, ne0, GGML_TYPE_F32, 0);        ACCEPTS(b);   /* empty tensors are legal */
    one_tensor(&b, "GGUF", "t", 1, ne32, GGML_TYPE_F32, 127);     REJECTS(b, "tensor 't' data (128 bytes at file offset 64) runs past end of file (191 bytes)");
    one_tensor(&b, "GGUF", "t", 1, ne32, GGML_TYPE_F32, 128);     ACCEPTS(b);   /* no trailing padding needed */
    /* long names keep these truncated infos above the minimum size a tensor count needs */
    header(&b, "GGUF", 3, 1, 0); tinfo(&b, "tensor.with.a.long.name", 2, ne32, GGML_TYPE_F32, 0); b.n -= 14;
    REJECTS(b, "tensor dimension runs past end of file");
    header(&b, "GGUF", 3, 1, 0); tinfo(&b, "tensor.with.a.long.name", 1, ne32, GGML_TYPE_F32, 0); b.n -= 4;
    REJECTS(b, "tensor offset runs past end of file");
    header(&b, "GGUF", 3, 1, 0); tinfo(&b, "t", 1, ne32, GGML_TYPE_F32, 0);   /* data section missing */
    REJECTS(b, "runs past end of file");
}

static void test_reject_layout(void)
{
    buf b = { 0 };
    int64_t ne[1] = { 8 };   /* 32 bytes of F32 */
    header(&b, "GGUF", 3, 2, 0);
    tinfo(&b, "a", 1, ne, GGML_TYPE_F32, 0); tinfo(&b, "a", 1, ne, GGML_TYPE_F32, 32);
    pad(&b, 32); zeros(&b, 64);
    REJECTS(b, "duplicate tensor name 'a'");
    header(&b, "GGUF", 3, 1, 0); tinfo(&b, "a", 1, ne, GGML_TYPE_F32, 32); pad(&b, 32); zeros(&b, 64);
    REJECTS(b, "tensor 'a' has offset 32, expected 0");
    header(&b, "GGUF", 3, 2, 0);                         /* swapped order: not consecutive */
    tinfo(&b, "a", 1, ne, GGML_TYPE_F32, 32); tinfo(&b, "b", 1, ne, GGML_TYPE_F32, 0);
    pad(&b, 32); zeros(&b, 64);
    REJECTS(b, "has offset 32, expected 0");
    header(&b, "GGUF", 3, 2, 0);                         /* overlapping */
    tinfo(&b, "a", 1, ne, GGML_TYPE_F32, 0); tinfo(&b, "b", 1, ne, GGML_TYPE_F32, 16);
    pad(&b, 32); zeros(&b, 64);
    REJECTS(b, "tensor 'b' has offset 16, expected 32");
    int64_t ne3[1] = { 3 };                              /* 12 bytes: next tensor at 32, not 12 */
    header(&b, "GGUF", 3, 2, 0);
    tinfo(&b, "a", 1, ne3, GGML_TYPE_F32, 0); tinfo(&b, "b", 1, ne3, GGML_TYPE_F32, 12);
    pad(&b, 32); zeros(&b, 64);
    REJECTS(b, "tensor 'b' has offset 12, expected 32");
    /* offsets packed for alignment 32 while the file says 64 */
    header(&b, "GGUF", 3, 2, 1); kv_u32(&b, "general.alignment", 64);
    tinfo(&b, "a", 1, ne, GGML_TYPE_F32, 0); tinfo(&b, "b", 1, ne, GGML_TYPE_F32, 32);
    pad(&b, 64); zeros(&b, 128);
    REJECTS(b, "tensor 'b' has offset 32, expected 64 (data must be packed in order, aligned to 64)");
    header(&b, "GGUF", 3, 2, 1); kv_u32(&b, "general.alignment", 64);
    tinfo(&b, "a", 1, ne, GGML_TYPE_F32, 0); tinfo(&b, "b", 1, ne, GGML_TYPE_F32, 64);
    pad(&b, 64); zeros(&b, 96);
    ACCEPTS(b);
    /* the data section starts at the aligned end of the infos */
    gguf_file *f = NULL;
    header(&b, "GGUF", 3, 2, 1); kv_u32(&b, "general.alignment", 64);
    tinfo(&b, "a", 1, ne, GGML_TYPE_F32, 0); tinfo(&b, "b", 1, ne, GGML_TYPE_F32, 64);
    pad(&b, 64); zeros(&b, 96);
    CHECK(open_err(&b, &f) == NULL && f);
    CHECK(f->alignment == 64 && f->data_offset == 128);
    CHECK((const uint8_t *)f->tensors[1].data == f->base + 192);
    free((void *)f->base);
    gguf_close(f);
    free(b.p);
}

static void test_pwri_codes(void)
{
    buf b = { 0 };
    int64_t ne[1] = { 8 };
    gguf_file *f = NULL;
    one_tensor(&b, "PWRI", "idx", 1, ne, 18, 32);                  /* old I32 */
    CHECK(open_err(&b, &f) == NULL && f);
    CHECK(f->variant == GGUF_VARIANT_PWRI && f->tensors[0].type == GGML_TYPE_I32 && f->tensors[0].nbytes == 32);
    free((void *)f->base);
    gguf_close(f);
    free(b.p); b.p = NULL; b.n = 0;
    one_tensor(&b, "PWRI", "t", 1, ne, 16, 8);                     /* old I8 */
    CHECK(open_err(&b, &f) == NULL && f && f->tensors[0].type == GGML_TYPE_I8);
    free((void *)f->base);
    gguf_close(f);
    free(b.p); b.p = NULL; b.n = 0;
    one_tensor(&b, "PWRI", "t", 1, ne, 19, 32);   REJECTS(b, "type code 19 is not valid in a PWRI file");
    one_tensor(&b, "PWRI", "t", 1, ne, GGML_TYPE_BF16, 32);   REJECTS(b, "type code 30 is not valid in a PWRI file");
    one_tensor(&b, "GGUF", "t", 1, ne, 18, 32);   REJECTS(b, "block size 256");   /* 18 is IQ3_XXS in GGUF */
    one_tensor(&b, "PWRI", "t", 1, ne, GGML_TYPE_F16, 16);   ACCEPTS(b);          /* low codes unchanged */
}

/* --------------------------------------------------------------- writer */

static const char *tensor_name(uint32_t t)
{
    static char buf[32];
    snprintf(buf, sizeof buf, "t.%s", ggml_type_name(t));
    return buf;
}

/* A writer holding every value type and every tensor type in the table. */
static gguf_writer *full_writer(uint8_t **tensor_data)
{
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_u8(w, "v.u8", 200);
    gguf_set_i8(w, "v.i8", -100);
    gguf_set_u16(w, "v.u16", 60000);
    gguf_set_i16(w, "v.i16", -30000);
    gguf_set_u32(w, "v.u32", 4000000000u);
    gguf_set_i32(w, "v.i32", -2000000000);
    gguf_set_f32(w, "v.f32", 1e-5f);
    gguf_set_u64(w, "v.u64", 0xfedcba9876543210ull);
    gguf_set_i64(w, "v.i64", INT64_MIN);
    gguf_set_f64(w, "v.f64", -0.1);
    gguf_set_bool(w, "v.true", 7);
    gguf_set_bool(w, "v.false", 0);
    gguf_set_str(w, "v.str", "héllo\nworld");
    gguf_set_str(w, "v.empty", "");
    static const uint8_t a_u8[] = { 1, 2, 255 };
    static const int8_t a_i8[] = { -1, 0, 127 };
    static const uint16_t a_u16[] = { 1, 65535 };
    static const int16_t a_i16[] = { -32768, 5 };
    static const uint32_t a_u32[] = { 7, 8, 9, 10 };
    static const int32_t a_i32[] = { -5, 6 };
    static const float a_f32[] = { 0.5f, -0.25f, 3.0f };
    static const uint8_t a_bool[] = { 1, 0, 1 };
    static const uint64_t a_u64[] = { UINT64_MAX, 0 };
    static const int64_t a_i64[] = { INT64_MIN, -1 };
    static const double a_f64[] = { 1.0 / 3, 2.5 };
    static const char *a_str[] = { "", "a", "<0x00>", "▁the" };
    gguf_set_arr(w, "a.u8", GGUF_TYPE_UINT8, a_u8, 3);
    gguf_set_arr(w, "a.i8", GGUF_TYPE_INT8, a_i8, 3);
    gguf_set_arr(w, "a.u16", GGUF_TYPE_UINT16, a_u16, 2);
    gguf_set_arr(w, "a.i16", GGUF_TYPE_INT16, a_i16, 2);
    gguf_set_arr(w, "a.u32", GGUF_TYPE_UINT32, a_u32, 4);
    gguf_set_arr(w, "a.i32", GGUF_TYPE_INT32, a_i32, 2);
    gguf_set_arr(w, "a.f32", GGUF_TYPE_FLOAT32, a_f32, 3);
    gguf_set_arr(w, "a.bool", GGUF_TYPE_BOOL, a_bool, 3);
    gguf_set_arr(w, "a.u64", GGUF_TYPE_UINT64, a_u64, 2);
    gguf_set_arr(w, "a.i64", GGUF_TYPE_INT64, a_i64, 2);
    gguf_set_arr(w, "a.f64", GGUF_TYPE_FLOAT64, a_f64, 2);
    gguf_set_arr_str(w, "a.str", a_str, 4);
    gguf_set_arr(w, "a.empty", GGUF_TYPE_UINT32, NULL, 0);
    gguf_set_arr_str(w, "a.empty_str", NULL, 0);

    /* every type: 2 blocks x 3 rows, bytes 0, 1, 2, ... per tensor */
    size_t total = 0;
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++) total += ggml_type_size(t) * 2 * 3;
    uint8_t *data = *tensor_data = malloc(total);
    for (size_t i = 0; i < total; i++) data[i] = (uint8_t)(i * 7 + 3);
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++) {
        if (!ggml_blck_size(t)) continue;
        int64_t ne[2] = { 2 * (int64_t)ggml_blck_size(t), 3 };
        if (gguf_add_tensor(w, tensor_name(t), t, 2, ne, data) < 0) return w;
        data += ggml_type_size(t) * 2 * 3;
    }
    return w;
}

static void test_round_trip_every_type(void)
{
    uint8_t *data;
    gguf_writer *w = full_writer(&data);
    const char *path = th_tmp("all.gguf");
    CHECKF(gguf_writer_error(w)[0] == 0, "%s", gguf_writer_error(w));
    CHECKF(gguf_writer_write(w, path, err, sizeof err) == 0, "%s", err);
    gguf_writer_free(w);
    gguf_file *f = gguf_open(path, err, sizeof err);
    CHECKF(f, "%s", err);

    uint32_t u32v; int32_t i32v; uint64_t u64v; float f32v; double f64v; int b; char *s; int64_t iv;
    CHECK(f->n_kv == 29 && f->version == 3 && f->variant == GGUF_VARIANT_GGUF && f->alignment == 32);
    CHECK(strcmp(f->kv[0].key, "general.architecture") == 0 && strcmp(f->kv[28].key, "a.empty_str") == 0);
    CHECK(gguf_kv_num(&f->kv[gguf_find_kv(f, "v.u8")], 0) == 200);
    CHECK(gguf_kv_num(&f->kv[gguf_find_kv(f, "v.i8")], 0) == -100);
    CHECK(gguf_kv_num(&f->kv[gguf_find_kv(f, "v.u16")], 0) == 60000);
    CHECK(gguf_kv_num(&f->kv[gguf_find_kv(f, "v.i16")], 0) == -30000);
    CHECK(gguf_get_u32(f, "v.u32", &u32v) == 0 && u32v == 4000000000u);
    CHECK(gguf_get_i32(f, "v.i32", &i32v) == 0 && i32v == -2000000000);
    CHECK(gguf_get_f32(f, "v.f32", &f32v) == 0 && f32v == 1e-5f);
    CHECK(gguf_get_u64(f, "v.u64", &u64v) == 0 && u64v == 0xfedcba9876543210ull);
    CHECK(gguf_get_int(f, "v.i64", &iv) == 0 && iv == INT64_MIN);
    CHECK(gguf_get_f64(f, "v.f64", &f64v) == 0 && f64v == -0.1);
    CHECK(gguf_get_bool(f, "v.true", &b) == 0 && b == 1);
    CHECK(gguf_get_bool(f, "v.false", &b) == 0 && b == 0);
    CHECK(gguf_get_str(f, "v.str", &s) == 0 && strcmp(s, "héllo\nworld") == 0);
    free(s);
    CHECK(gguf_get_str(f, "v.empty", &s) == 0 && s[0] == 0);
    free(s);
    /* typed getters: missing -1, wrong type -2, no conversion */
    CHECK(gguf_get_u32(f, "nope", &u32v) == -1);
    CHECK(gguf_get_u32(f, "v.i32", &u32v) == -2 && gguf_get_str(f, "v.u32", &s) == -2);
    CHECK(gguf_get_int(f, "v.u16", &iv) == 0 && iv == 60000);
    CHECK(gguf_get_int(f, "v.u32", &iv) == 0 && iv == 4000000000ll);
    CHECK(gguf_get_int(f, "v.u64", &iv) == -2);   /* above INT64_MAX */
    CHECK(gguf_get_int(f, "v.f32", &iv) == -2);

    const gguf_kv *kv = &f->kv[gguf_find_kv(f, "a.i16")];
    CHECK(kv->type == GGUF_TYPE_ARRAY && kv->arr_type == GGUF_TYPE_INT16 && kv->n == 2);
    CHECK(gguf_kv_num(kv, 0) == -32768 && gguf_kv_num(kv, 1) == 5);
    kv = &f->kv[gguf_find_kv(f, "a.f32")];
    CHECK(kv->n == 3 && gguf_kv_num(kv, 1) == -0.25);
    kv = &f->kv[gguf_find_kv(f, "a.bool")];
    CHECK(kv->arr_type == GGUF_TYPE_BOOL && gguf_kv_num(kv, 0) == 1 && gguf_kv_num(kv, 1) == 0);
    kv = &f->kv[gguf_find_kv(f, "a.u64")];
    CHECK(memcmp(kv->data, (uint64_t[]){ UINT64_MAX, 0 }, 16) == 0);
    kv = &f->kv[gguf_find_kv(f, "a.i64")];
    CHECK(memcmp(kv->data, (int64_t[]){ INT64_MIN, -1 }, 16) == 0);
    kv = &f->kv[gguf_find_kv(f, "a.f64")];
    CHECK(gguf_kv_num(kv, 0) == 1.0 / 3 && gguf_kv_num(kv, 1) == 2.5);
    kv = &f->kv[gguf_find_kv(f, "a.u8")];
    CHECK(kv->n == 3 && gguf_kv_num(kv, 2) == 255);
    kv = &f->kv[gguf_find_kv(f, "a.i8")];
    CHECK(gguf_kv_num(kv, 0) == -1 && gguf_kv_num(kv, 2) == 127);
    kv = &f->kv[gguf_find_kv(f, "a.u16")];
    CHECK(gguf_kv_num(kv, 1) == 65535);
    kv = &f->kv[gguf_find_kv(f, "a.u32")];
    CHECK(kv->n == 4 && gguf_kv_num(kv, 3) == 10);
    kv = &f->kv[gguf_find_kv(f, "a.i32")];
    CHECK(gguf_kv_num(kv, 0) == -5);
    kv = &f->kv[gguf_find_kv(f, "a.str")];
    CHECK(kv->arr_type == GGUF_TYPE_STRING && kv->n == 4 && kv->strs[0].len == 0);
    CHECK(kv->strs[3].len == strlen("▁the") && memcmp(kv->strs[3].ptr, "▁the", kv->strs[3].len) == 0);
    CHECK(kv->strs[2].len == 6 && memcmp(kv->strs[2].ptr, "<0x00>", 6) == 0);
    kv = &f->kv[gguf_find_kv(f, "a.empty")];
    CHECK(kv->type == GGUF_TYPE_ARRAY && kv->arr_type == GGUF_TYPE_UINT32 && kv->n == 0);
    kv = &f->kv[gguf_find_kv(f, "a.empty_str")];
    CHECK(kv->arr_type == GGUF_TYPE_STRING && kv->n == 0);

    /* tensors: type, shape, bytes and data back, packed at aligned offsets */
    const uint8_t *expect = data;
    uint64_t off = 0, n = 0;
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++) {
        if (!ggml_blck_size(t)) continue;
        const gguf_tensor *ti = gguf_get_tensor(f, tensor_name(t));
        size_t nb = ggml_type_size(t) * 2 * 3;
        CHECKF(ti, "%s missing", tensor_name(t));
        CHECKF(ti->type == t && ti->n_dims == 2 && ti->ne[0] == 2 * (int64_t)ggml_blck_size(t) && ti->ne[1] == 3,
               "%s", tensor_name(t));
        CHECKF(ti->nbytes == nb && ti->offset == off, "%s: %llu bytes at %llu", tensor_name(t),
               (unsigned long long)ti->nbytes, (unsigned long long)ti->offset);
        CHECKF(memcmp(ti->data, expect, nb) == 0, "%s data", tensor_name(t));
        CHECK((uintptr_t)ti->data % 32 == 0);   /* page-aligned mapping + aligned offsets */
        expect += nb;
        off += (nb + 31) / 32 * 32;
        n++;
    }
    CHECK(f->n_tensors == n && n == 32);
    CHECK(f->data_offset % 32 == 0 && f->size == f->data_offset + off);   /* padded after the last one too */
    gguf_close(f);
    free(data);
}

/* KV order: insertion order; set on an existing key replaces in place; remove then set appends. */
static void test_writer_kv_order(void)
{
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_u32(w, "a", 1);
    gguf_set_str(w, "b", "x");
    gguf_set_u32(w, "c", 3);
    gguf_set_str(w, "a", "replaced");   /* new type, same place */
    gguf_remove_key(w, "b");
    gguf_set_u32(w, "b", 2);
    gguf_remove_key(w, "nope");
    const char *path = th_tmp("order.gguf");
    CHECKF(gguf_writer_write(w, path, err, sizeof err) == 0, "%s", err);
    gguf_writer_free(w);
    gguf_file *f = gguf_open(path, err, sizeof err);
    CHECKF(f, "%s", err);
    CHECK(f->n_kv == 3);
    CHECK(strcmp(f->kv[0].key, "a") == 0 && f->kv[0].type == GGUF_TYPE_STRING);
    CHECK(strcmp(f->kv[1].key, "c") == 0 && strcmp(f->kv[2].key, "b") == 0);
    uint32_t v;
    CHECK(gguf_get_u32(f, "b", &v) == 0 && v == 2);
    /* 0 tensors: the file ends right after the last KV, no padding */
    CHECK(f->size == 24 + (8 + 1 + 4 + 8 + 8) + (8 + 1 + 4 + 4) * 2);
    gguf_close(f);
}

static void test_writer_layout(void)
{
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    float a[3] = { 1, 2, 3 }, c[8] = { 0 };
    uint8_t q[2 * 18];
    memset(q, 0x55, sizeof q);
    int64_t ne_a[3] = { 3, 1, 1 }, ne_q[4] = { 64, 1, 1, 1 }, ne_c[3] = { 2, 1, 4 };
    gguf_set_u32(w, "general.alignment", 64);
    CHECK(gguf_add_tensor(w, "a", GGML_TYPE_F32, 3, ne_a, a) == 0);
    CHECK(gguf_add_tensor(w, "q", GGML_TYPE_Q4_0, 4, ne_q, q) == 1);
    CHECK(gguf_add_tensor(w, "c", GGML_TYPE_F32, 3, ne_c, c) == 2);
    const char *path = th_tmp("layout.gguf");
    CHECKF(gguf_writer_write(w, path, err, sizeof err) == 0, "%s", err);
    gguf_writer_free(w);
    size_t len;
    uint8_t *raw = th_read(path, &len);
    gguf_file *f = gguf_open(path, err, sizeof err);
    CHECKF(f && raw, "%s", err);
    CHECK(f->alignment == 64 && f->data_offset % 64 == 0);
    /* n_dims as ggml_n_dims: trailing 1s dropped, inner 1s kept */
    CHECK(f->tensors[0].n_dims == 1 && f->tensors[1].n_dims == 1 && f->tensors[2].n_dims == 3);
    CHECK(f->tensors[2].ne[1] == 1 && f->tensors[2].ne[2] == 4 && f->tensors[2].ne[3] == 1);
    CHECK(f->tensors[0].offset == 0 && f->tensors[1].offset == 64 && f->tensors[2].offset == 128);
    CHECK(len == f->data_offset + 128 + 64);                       /* last tensor padded too */
    for (uint64_t i = f->data_offset + 12; i < f->data_offset + 64; i++) CHECK(raw[i] == 0);
    for (uint64_t i = f->data_offset + 64 + 36; i < f->data_offset + 128; i++) CHECK(raw[i] == 0);
    for (uint64_t i = f->data_offset + 128 + 32; i < len; i++) CHECK(raw[i] == 0);
    gguf_close(f);
    free(raw);
}

static void test_writer_rejects(void)
{
    char n64[65];
    memset(n64, 'x', 64); n64[64] = 0;
    int64_t ne[4] = { 32, 2, 1, 1 }, ne33[1] = { 33 }, neg[2] = { 32, -1 };
    float d[64] = { 0 };
    static const struct { const char *name; uint32_t type, n_dims; const int64_t *ne; const char *words; } cases[] = {
        { NULL, GGML_TYPE_F32, 1, NULL, "longer than 63" },
        { "dup", GGML_TYPE_F32, 1, NULL, "duplicate tensor name 'dup'" },
        { "q", GGML_TYPE_Q4_0, 1, NULL, "not a multiple of the Q4_0 block size 32" },
        { "n5", GGML_TYPE_F32, 5, NULL, "n_dims 5" },
        { "n0", GGML_TYPE_F32, 0, NULL, "n_dims 0" },
        { "neg", GGML_TYPE_F32, 2, NULL, "negative" },
        { "t4", 4, 1, NULL, "unknown tensor type 4" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
        const int64_t *shape = i == 2 ? ne33 : i == 5 ? neg : ne;
        CHECK(gguf_add_tensor(w, "dup", GGML_TYPE_F32, 2, ne, d) == 0);
        CHECK(gguf_writer_error(w)[0] == 0);
        CHECK(gguf_add_tensor(w, cases[i].name ? cases[i].name : n64, cases[i].type, cases[i].n_dims, shape, d) == -1);
        CHECKF(strstr(gguf_writer_error(w), cases[i].words), "%s", gguf_writer_error(w));
        /* the error sticks: no file is written */
        const char *path = th_tmp("rejected.gguf");
        CHECK(gguf_writer_write(w, path, err, sizeof err) == -1);
        CHECKF(strstr(err, path) && strstr(err, cases[i].words), "%s", err);
        CHECK(access(path, F_OK) != 0);
        gguf_writer_free(w);
    }
    /* bad keys and alignment */
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_u32(w, "", 1);
    CHECK(strstr(gguf_writer_error(w), "empty key"));
    gguf_writer_free(w);
    w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_u32(w, "general.alignment", 24);
    CHECK(gguf_writer_write(w, th_tmp("a24.gguf"), err, sizeof err) == -1 && strstr(err, "power of two"));
    gguf_writer_free(w);
    w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_u64(w, "general.alignment", 64);
    CHECK(gguf_writer_write(w, th_tmp("a64.gguf"), err, sizeof err) == -1 && strstr(err, "must be a u32"));
    gguf_writer_free(w);
    /* a tensor without data cannot go through the one-shot write */
    w = gguf_writer_new(GGUF_VARIANT_GGUF);
    CHECK(gguf_add_tensor(w, "nodata", GGML_TYPE_F32, 1, ne, NULL) == 0);
    CHECK(gguf_writer_write(w, th_tmp("nd.gguf"), err, sizeof err) == -1 && strstr(err, "'nodata' has no data"));
    gguf_writer_free(w);
}

/* Streaming in odd chunks that straddle tensors gives the same bytes as one-shot. */
static void test_writer_streaming(void)
{
    uint8_t *data;
    gguf_writer *w = full_writer(&data);
    const char *one = th_tmp("oneshot.gguf"), *str_path = th_tmp("stream.gguf");
    CHECKF(gguf_writer_write(w, one, err, sizeof err) == 0, "%s", err);
    gguf_writer_free(w);

    /* same declarations without data pointers */
    w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_file *f = gguf_open(one, err, sizeof err);
    CHECKF(f, "%s", err);
    size_t total = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_set_kv(w, &f->kv[i]);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        CHECK(gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, NULL) == (int)i);
        total += t->nbytes;
    }
    gguf_close(f);
    CHECKF(gguf_writer_begin(w, str_path, err, sizeof err) == 0, "%s", err);
    for (size_t o = 0; o < total; o += 7)
        CHECKF(gguf_writer_write_data(w, data + o, total - o < 7 ? total - o : 7, err, sizeof err) == 0, "%s", err);
    CHECKF(gguf_writer_finish(w, err, sizeof err) == 0, "%s", err);
    gguf_writer_free(w);
    size_t la, lb;
    uint8_t *a = th_read(one, &la), *b = th_read(str_path, &lb);
    CHECK(a && b && la == lb && memcmp(a, b, la) == 0);
    free(a);
    free(b);
    free(data);
}

static void test_writer_stream_errors(void)
{
    int64_t ne[1] = { 16 };
    uint8_t d[128] = { 0 };
    const char *path = th_tmp("short.gguf");
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    CHECK(gguf_add_tensor(w, "a", GGML_TYPE_F32, 1, ne, NULL) == 0);
    CHECK(gguf_writer_begin(w, path, err, sizeof err) == 0);
    CHECK(gguf_writer_write_data(w, d, 10, err, sizeof err) == 0);
    CHECK(gguf_writer_finish(w, err, sizeof err) == -1);
    CHECKF(strstr(err, path) && strstr(err, "tensor 'a': 10 of 64 bytes written"), "%s", err);
    CHECK(access(path, F_OK) != 0);
    gguf_writer_free(w);

    w = gguf_writer_new(GGUF_VARIANT_GGUF);
    CHECK(gguf_add_tensor(w, "a", GGML_TYPE_F32, 1, ne, NULL) == 0);
    CHECK(gguf_writer_begin(w, path, err, sizeof err) == 0);
    CHECK(gguf_writer_write_data(w, d, 65, err, sizeof err) == -1);
    CHECKF(strstr(err, "1 bytes of tensor data more than declared"), "%s", err);
    CHECK(gguf_writer_finish(w, err, sizeof err) == -1);
    CHECK(access(path, F_OK) != 0);
    gguf_writer_free(w);

    /* freeing an unfinished writer removes its temporary file */
    w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_u32(w, "k", 1);
    CHECK(gguf_writer_begin(w, path, err, sizeof err) == 0);
    gguf_set_u32(w, "late", 1);   /* after begin: refused */
    CHECK(strstr(gguf_writer_error(w), "after gguf_writer_begin"));
    gguf_writer_free(w);
    CHECK(access(path, F_OK) != 0);

    w = gguf_writer_new(GGUF_VARIANT_GGUF);
    CHECK(gguf_writer_write(w, th_tmp("no/such/dir/x.gguf"), err, sizeof err) == -1);
    CHECKF(strstr(err, "no/such/dir/x.gguf: cannot create a temporary file"), "%s", err);
    gguf_writer_free(w);
}

/* A write that fails half way (file size limit, like a full disk) leaves the
 * previous file untouched and no temporary behind. Runs in a child so the limit
 * stays there. */
static void test_writer_write_failure(void)
{
    const char *path = th_tmp("fsize/out.gguf"), *dir = th_tmp("fsize");
    CHECK(mkdir(dir, 0755) == 0);
    CHECK(th_write(path, "old", 3) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = { 4096, 4096 };
        static uint8_t big[100000];
        int64_t ne[1] = { sizeof big / 4 };
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &rl);
        gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
        gguf_add_tensor(w, "big", GGML_TYPE_F32, 1, ne, big);
        int rc = gguf_writer_write(w, path, err, sizeof err);
        gguf_writer_free(w);
        _exit(rc == -1 && strstr(err, path) && strstr(err, "write failed: File too large") && !strchr(err, '\n') ? 0 : 1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    size_t len;
    unsigned char *got = th_read(path, &len);
    CHECK(got && len == 3 && memcmp(got, "old", 3) == 0);
    free(got);
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    CHECK(n == 1);   /* out.gguf only: the temporary is gone */
}

static void test_pwri_round_trip(void)
{
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_PWRI);
    int32_t idx[8] = { 1, 0, 1, 1, 0, 0, 0, 1 };
    uint16_t h[32] = { 0 };
    int64_t ne8[1] = { 8 }, ne32[1] = { 32 };
    gguf_set_str(w, "general.architecture", "generic.gpu_index");
    gguf_set_u64(w, "split.vram_capacity", 1ull << 33);
    CHECK(gguf_add_tensor(w, "blk.0.gpu_idx", GGML_TYPE_I32, 1, ne8, idx) == 0);
    CHECK(gguf_add_tensor(w, "blk.0.w", GGML_TYPE_F16, 1, ne32, h) == 1);
    CHECK(gguf_add_tensor(w, "bad", GGML_TYPE_BF16, 1, ne32, h) == -1);   /* no PWRI code */
    CHECKF(strstr(gguf_writer_error(w), "no code in a PWRI file"), "%s", gguf_writer_error(w));
    gguf_writer_free(w);

    w = gguf_writer_new(GGUF_VARIANT_PWRI);
    gguf_set_str(w, "general.architecture", "generic.gpu_index");
    CHECK(gguf_add_tensor(w, "blk.0.gpu_idx", GGML_TYPE_I32, 1, ne8, idx) == 0);
    CHECK(gguf_add_tensor(w, "blk.0.w", GGML_TYPE_F16, 1, ne32, h) == 1);
    const char *path = th_tmp("x.gpuidx");
    CHECKF(gguf_writer_write(w, path, err, sizeof err) == 0, "%s", err);
    gguf_writer_free(w);
    size_t len;
    uint8_t *raw = th_read(path, &len);
    CHECK(raw && memcmp(raw, "PWRI", 4) == 0 && raw[4] == 3);
    /* on disk: the first tensor info's type field holds PowerInfer's 18 */
    size_t kv_end = 24 + 8 + strlen("general.architecture") + 4 + 8 + strlen("generic.gpu_index");
    size_t type_at = kv_end + 8 + strlen("blk.0.gpu_idx") + 4 + 8;
    uint32_t code;
    memcpy(&code, raw + type_at, 4);
    CHECKF(code == 18, "I32 written as %u", code);
    memcpy(&code, raw + type_at + 4 + 8 + 8 + strlen("blk.0.w") + 4 + 8, 4);
    CHECK(code == GGML_TYPE_F16);
    free(raw);
    gguf_file *f = gguf_open(path, err, sizeof err);
    CHECKF(f, "%s", err);
    CHECK(f->variant == GGUF_VARIANT_PWRI && f->tensors[0].type == GGML_TYPE_I32);
    CHECK(memcmp(f->tensors[0].data, idx, sizeof idx) == 0);
    gguf_close(f);
}

/* ------------------------------------------- truncation and byte flips */

static uint8_t *sample_file(size_t *len)
{
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    static const char *toks[] = { "<unk>", "a", "bc" };
    static const float sc[] = { 0, -1, -2 };
    uint8_t q[3 * 18];
    int32_t ix[5] = { 1, 2, 3, 4, 5 };
    int64_t ne_q[2] = { 32, 3 }, ne_i[1] = { 5 };
    memset(q, 0x11, sizeof q);
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, sc, 3);
    gguf_set_bool(w, "b", 1);
    gguf_add_tensor(w, "q", GGML_TYPE_Q4_0, 2, ne_q, q);
    gguf_add_tensor(w, "i", GGML_TYPE_I32, 1, ne_i, ix);
    const char *path = th_tmp("sample.gguf");
    if (gguf_writer_write(w, path, err, sizeof err) != 0) { gguf_writer_free(w); return NULL; }
    gguf_writer_free(w);
    return th_read(path, len);
}

static void test_truncated_everywhere(void)
{
    size_t len;
    uint8_t *raw = sample_file(&len);
    CHECK(raw);
    buf b = { raw, len };
    gguf_file *f = NULL;
    CHECK(open_err(&b, &f) == NULL && f);
    size_t data_end = f->data_offset + f->tensors[1].offset + f->tensors[1].nbytes;
    free((void *)f->base);
    gguf_close(f);
    for (size_t n = 0; n < len; n++) {
        buf t = { raw, n };
        const char *m = open_err(&t, NULL);
        if (n < data_end) CHECKF(m && one_line_with_offset(m), "prefix %zu: %s", n, m ? m : "accepted");
        else CHECKF(!m, "prefix %zu (only padding missing) rejected: %s", n, m);
    }
    free(raw);
}

static void test_byte_flips_never_crash(void)
{
    size_t len;
    uint8_t *raw = sample_file(&len);
    CHECK(raw);
    static const uint8_t masks[] = { 0x01, 0x80, 0xff, 0x40 };
    int accepted = 0, rejected = 0;
    for (size_t i = 0; i < len; i++)
        for (size_t m = 0; m < sizeof masks; m++) {
            raw[i] ^= masks[m];
            buf b = { raw, len };
            gguf_file *f = NULL;
            const char *msg = open_err(&b, &f);
            if (msg) {
                CHECKF(one_line_with_offset(msg), "byte %zu ^ %02x: %s", i, masks[m], msg);
                rejected++;
            } else {
                unsigned sum = 0;   /* touch every tensor byte: ASan checks the ranges */
                for (uint64_t k = 0; k < f->n_tensors; k++)
                    for (uint64_t j = 0; j < f->tensors[k].nbytes; j++) sum += ((const uint8_t *)f->tensors[k].data)[j];
                (void)sum;
                free((void *)f->base);
                gguf_close(f);
                accepted++;
            }
            raw[i] ^= masks[m];
        }
    CHECK(accepted > 0 && rejected > 0);
    free(raw);
}

/* ---------------------------------------------------------------- fixtures */

/* Copy every KV and tensor of f into a new file; it must equal the original byte for byte. */
static int rewrite_identical(const gguf_file *f, const char *out)
{
    gguf_writer *w = gguf_writer_new(f->variant);
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_set_kv(w, &f->kv[i]);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    int rc = gguf_writer_write(w, out, err, sizeof err);
    gguf_writer_free(w);
    if (rc != 0) return -1;
    size_t len;
    uint8_t *raw = th_read(out, &len);
    rc = raw && len == f->size && memcmp(raw, f->base, len) == 0 ? 0 : -1;
    if (rc) snprintf(err, sizeof err, "%s: %zu bytes differ from the original's %zu", out, len, f->size);
    free(raw);
    return rc;
}

static void test_fixture_stories260k(void)
{
    const char *path = th_fixture("stories260K.gguf");
    if (!path) SKIP("no fixtures");
    gguf_file *f = gguf_open(path, err, sizeof err);
    CHECKF(f, "%s", err);
    uint32_t ff, nl;
    float eps;
    char *arch;
    CHECK(f->variant == GGUF_VARIANT_GGUF && f->version == 3);
    CHECK(f->n_tensors == 48 && f->n_kv == 19 && f->data_offset == 14176 && f->alignment == 32);
    CHECK(gguf_get_u32(f, "llama.feed_forward_length", &ff) == 0 && ff == 172);
    CHECK(gguf_get_u32(f, "llama.block_count", &nl) == 0 && nl == 5);
    CHECK(gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps) == 0 && eps == 1e-5f);
    CHECK(gguf_get_str(f, "general.architecture", &arch) == 0 && strcmp(arch, "llama") == 0);
    free(arch);
    const gguf_kv *tok = &f->kv[gguf_find_kv(f, "tokenizer.ggml.tokens")];
    CHECK(tok->arr_type == GGUF_TYPE_STRING && tok->n == 512);
    CHECK(tok->strs[1].len == 3 && memcmp(tok->strs[1].ptr, "<s>", 3) == 0);
    const gguf_tensor *t = gguf_get_tensor(f, "token_embd.weight");
    CHECK(t && t->type == GGML_TYPE_F32 && t->ne[0] == 64 && t->ne[1] == 512 && t->offset == 0);
    t = gguf_get_tensor(f, "blk.4.ffn_down.weight");
    CHECK(t && t->ne[0] == 172 && t->ne[1] == 64 && t->nbytes == 172 * 64 * 4);
    CHECK(gguf_get_tensor(f, "blk.5.ffn_down.weight") == NULL);
    CHECKF(rewrite_identical(f, th_tmp("stories.gguf")) == 0, "rewrite differs: %s", err);
    gguf_close(f);
}

static void test_fixture_vocab(void)
{
    const char *path = th_fixture("ggml-vocab-llama-spm.gguf");
    if (!path) SKIP("no fixtures");
    gguf_file *f = gguf_open(path, err, sizeof err);
    CHECKF(f, "%s", err);
    CHECK(f->n_tensors == 0 && f->n_kv == 22 && f->size == 723869);
    int64_t nv;
    int bos;
    CHECK(gguf_get_int(f, "llama.vocab_size", &nv) == 0 && nv == 32000);
    CHECK(gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &bos) == 0 && bos == 1);
    const gguf_kv *tok = &f->kv[gguf_find_kv(f, "tokenizer.ggml.tokens")];
    CHECK(tok->n == 32000 && tok->strs[0].len == 5 && memcmp(tok->strs[0].ptr, "<unk>", 5) == 0);
    const gguf_kv *ty = &f->kv[gguf_find_kv(f, "tokenizer.ggml.token_type")];
    CHECK(ty->n == 32000 && gguf_kv_num(ty, 0) == 2 && gguf_kv_num(ty, 1) == 3 && gguf_kv_num(ty, 3) == 6);
    /* 0 tensors: no trailing padding, and the writer reproduces that */
    CHECKF(rewrite_identical(f, th_tmp("vocab.gguf")) == 0, "rewrite differs: %s", err);
    gguf_close(f);
}

static void test_open_errors(void)
{
    CHECK(gguf_open(th_tmp("missing.gguf"), err, sizeof err) == NULL);
    CHECKF(strstr(err, "missing.gguf: No such file"), "%s", err);
    CHECK(gguf_open(th_tmpdir(), err, sizeof err) == NULL);
    CHECKF(strstr(err, "not a regular file"), "%s", err);
    const char *empty = th_tmp("empty.gguf");
    CHECK(th_write(empty, "", 0) == 0);
    CHECK(gguf_open(empty, err, sizeof err) == NULL);
    CHECKF(strstr(err, "empty.gguf: offset 0: file of 0 bytes is too short"), "%s", err);
}

int main(void)
{
    RUN(test_reject_header);
    RUN(test_reject_kv);
    RUN(test_reject_alignment);
    RUN(test_error_offsets);
    RUN(test_reject_tensor_info);
    RUN(test_reject_layout);
    RUN(test_pwri_codes);
    RUN(test_round_trip_every_type);
    RUN(test_writer_kv_order);
    RUN(test_writer_layout);
    RUN(test_writer_rejects);
    RUN(test_writer_streaming);
    RUN(test_writer_stream_errors);
    RUN(test_writer_write_failure);
    RUN(test_pwri_round_trip);
    RUN(test_truncated_everywhere);
    RUN(test_byte_flips_never_crash);
    RUN(test_fixture_stories260k);
    RUN(test_fixture_vocab);
    RUN(test_open_errors);
    return th_done();
}

/* GGUF reader (mmap, validated with ggml's rules) and writer (atomic, ggml's
 * layout). Rules, PowerInfer's "PWRI" variant included: docs/formats.md,
 * "The GGUF container". */
#include "gguf.h"
#include "atomic_file.h"
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GGUF values are little-endian; this code reads them in host order"
#endif

#define MAX_STRING (1ull << 30)   /* GGUF_MAX_STRING_LENGTH in ggml */
#define MAX_ARRAY  (1ull << 30)   /* largest array ggml reads */
/* Smallest encodings, to reject counts the rest of the file cannot hold. */
#define MIN_KV_BYTES     14        /* key len 8 + 1 byte key + type 4 + 1 byte value */
#define MIN_TENSOR_BYTES 33        /* name len 8 + 1 + n_dims 4 + 1 dim 8 + type 4 + offset 8 */

static const char magic_of[2][5] = { "GGUF", "PWRI" };

/* PowerInfer's late-2023 enum numbers I8/I16/I32 as 16/17/18. */
#define PWRI_OLD_I8 16
#define PWRI_OLD_I32 18
#define PWRI_SHIFT (GGML_TYPE_I8 - PWRI_OLD_I8)

static const struct { const char *name; uint32_t size; } vtypes[GGUF_TYPE_COUNT] = {
    { "u8", 1 }, { "i8", 1 }, { "u16", 2 }, { "i16", 2 }, { "u32", 4 }, { "i32", 4 },
    { "f32", 4 }, { "bool", 1 }, { "string", 0 }, { "array", 0 }, { "u64", 8 },
    { "i64", 8 }, { "f64", 8 },
};

const char *gguf_vtype_name(uint32_t type) { return type < GGUF_TYPE_COUNT ? vtypes[type].name : "?"; }
size_t gguf_vtype_size(uint32_t type) { return type < GGUF_TYPE_COUNT ? vtypes[type].size : 0; }

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Names sorted with their index, to find duplicates in O(n log n). */
typedef struct { const char *name; size_t idx; } name_ref;

static int cmp_name_ref(const void *a, const void *b)
{
    const name_ref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Index of the first repeated name (the later occurrence), or -1. */
static int64_t find_duplicate(const char *const *names, size_t stride, size_t n)
{
    if (n < 2) return -1;
    name_ref *refs = malloc(n * sizeof *refs);
    if (!refs) hc_die("out of memory for %zu names", n);
    for (size_t i = 0; i < n; i++) {
        refs[i].name = *(const char *const *)((const char *)names + i * stride);
        refs[i].idx = i;
    }
    qsort(refs, n, sizeof *refs, cmp_name_ref);
    int64_t dup = -1;
    for (size_t i = 1; i < n; i++)
        if (strcmp(refs[i - 1].name, refs[i].name) == 0 && (dup < 0 || refs[i].idx < (size_t)dup))
            dup = (int64_t)refs[i].idx;
    free(refs);
    return dup;
}

/* ================================================================ reader */

typedef struct {
    const uint8_t *p;
    size_t size, pos;
    const char *path;
    char *err;
    size_t errlen;
} reader;

static int fail(reader *r, uint64_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(reader *r, uint64_t off, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errlen, "%s: offset %llu: %s", r->path, (unsigned long long)off, what);
    return -1;
}

static size_t left(const reader *r) { return r->size - r->pos; }

static int rd(reader *r, void *out, size_t n, const char *what)
{
    if (left(r) < n)
        return fail(r, r->pos, "%s runs past end of file (%zu bytes left, %zu needed)", what, left(r), n);
    memcpy(out, r->p + r->pos, n);
    r->pos += n;
    return 0;
}

static int rd_u32(reader *r, uint32_t *v, const char *what) { return rd(r, v, 4, what); }
static int rd_u64(reader *r, uint64_t *v, const char *what) { return rd(r, v, 8, what); }

static int rd_str(reader *r, gguf_str *s, const char *what)
{
    uint64_t off = r->pos;
    if (rd_u64(r, &s->len, what) != 0) return -1;
    if (s->len > MAX_STRING)
        return fail(r, off, "%s: string length %llu exceeds 1 GiB", what, (unsigned long long)s->len);
    if (s->len > left(r))
        return fail(r, off, "%s: string of %llu bytes runs past end of file (%zu bytes left)",
                    what, (unsigned long long)s->len, left(r));
    s->ptr = (const char *)r->p + r->pos;
    r->pos += s->len;
    return 0;
}

static char *dup_name(reader *r, const gguf_str *s, uint64_t off, const char *what)
{
    if (memchr(s->ptr, 0, s->len)) {
        fail(r, off, "%s contains a NUL byte", what);
        return NULL;
    }
    char *c = malloc(s->len + 1);
    if (!c) {
        fail(r, off, "out of memory for a %s of %llu bytes", what, (unsigned long long)s->len);
        return NULL;
    }
    memcpy(c, s->ptr, s->len);
    c[s->len] = 0;
    return c;
}

static int rd_bools(reader *r, const uint8_t *p, uint64_t n, const char *key)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i] > 1)
            return fail(r, (uint64_t)(p + i - r->p), "key '%s': bool value %u is not 0 or 1", key, p[i]);
    return 0;
}

/* Value of kv (type already read): scalars, strings, arrays of non-arrays. */
static int rd_value(reader *r, gguf_kv *kv)
{
    uint64_t off = r->pos;
    uint32_t et = kv->type;
    gguf_str *strs;
    kv->n = 1;
    if (kv->type == GGUF_TYPE_ARRAY) {
        if (rd_u32(r, &kv->arr_type, "array type") != 0) return -1;
        et = kv->arr_type;
        if (et == GGUF_TYPE_ARRAY) return fail(r, off, "key '%s': arrays of arrays are not supported", kv->key);
        if (et >= GGUF_TYPE_COUNT) return fail(r, off, "key '%s': unknown array element type %u", kv->key, et);
        if (rd_u64(r, &kv->n, "array length") != 0) return -1;
        if (kv->n > MAX_ARRAY)
            return fail(r, off, "key '%s': array of %llu elements exceeds 2^30", kv->key, (unsigned long long)kv->n);
    }
    kv->data = r->p + r->pos;
    if (et == GGUF_TYPE_STRING) {
        if (kv->n > left(r) / 8)
            return fail(r, off, "key '%s': array of %llu strings runs past end of file",
                        kv->key, (unsigned long long)kv->n);
        kv->strs = strs = calloc(kv->n ? kv->n : 1, sizeof *strs);
        if (!strs) return fail(r, off, "out of memory");
        for (uint64_t i = 0; i < kv->n; i++)
            if (rd_str(r, &strs[i], kv->key) != 0) return -1;
        return 0;
    }
    uint64_t bytes = kv->n * vtypes[et].size;   /* n <= 2^30, size <= 8 */
    if (bytes > left(r))
        return fail(r, off, "key '%s': %llu values of type %s run past end of file (%zu bytes left)",
                    kv->key, (unsigned long long)kv->n, vtypes[et].name, left(r));
    if (et == GGUF_TYPE_BOOL && rd_bools(r, kv->data, kv->n, kv->key) != 0) return -1;
    r->pos += bytes;
    return 0;
}

static int rd_kvs(reader *r, gguf_file *f)
{
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        gguf_str key;
        kv->file_offset = r->pos;
        if (rd_str(r, &key, "key") != 0) return -1;
        if (key.len == 0) return fail(r, kv->file_offset, "KV %llu has an empty key", (unsigned long long)i);
        if (!(kv->key = dup_name(r, &key, kv->file_offset, "key"))) return -1;
        if (rd_u32(r, &kv->type, "value type") != 0) return -1;
        if (kv->type >= GGUF_TYPE_COUNT)
            return fail(r, r->pos - 4, "key '%s': unknown value type %u", kv->key, kv->type);
        if (rd_value(r, kv) != 0) return -1;
    }
    int64_t d = find_duplicate((const char *const *)&f->kv[0].key, sizeof f->kv[0], f->n_kv);
    if (d >= 0) return fail(r, f->kv[d].file_offset, "duplicate key '%s'", f->kv[d].key);
    return 0;
}

static int rd_alignment(reader *r, gguf_file *f)
{
    int i = gguf_find_kv(f, "general.alignment");
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (i < 0) return 0;
    const gguf_kv *kv = &f->kv[i];
    if (kv->type != GGUF_TYPE_UINT32)
        return fail(r, kv->file_offset, "general.alignment has type %s, expected u32",
                    kv->type == GGUF_TYPE_ARRAY ? "array" : vtypes[kv->type].name);
    uint32_t a;
    memcpy(&a, kv->data, 4);
    if (a == 0 || (a & (a - 1)))
        return fail(r, kv->file_offset, "general.alignment %u is not a non-zero power of two", a);
    f->alignment = a;
    return 0;
}

/* Tensor info i: name, shape, type; offsets are checked once all are read. */
static int rd_tensor_info(reader *r, gguf_file *f, gguf_tensor *t, uint64_t off)
{
    gguf_str name;
    if (rd_str(r, &name, "tensor name") != 0) return -1;
    if (name.len > GGUF_MAX_NAME)
        return fail(r, off, "tensor name '%.*s...' is %llu bytes, longer than %d", 32, name.ptr,
                    (unsigned long long)name.len, GGUF_MAX_NAME);
    if (!(t->name = dup_name(r, &name, off, "tensor name"))) return -1;
    if (rd_u32(r, &t->n_dims, "n_dims") != 0) return -1;
    if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
        return fail(r, off, "tensor '%s': n_dims %u is not in 1..%d", t->name, t->n_dims, GGUF_MAX_DIMS);
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (rd(r, &t->ne[d], 8, "tensor dimension") != 0) return -1;
        if (t->ne[d] < 0)
            return fail(r, off, "tensor '%s': dimension %u is negative (%lld)", t->name, d, (long long)t->ne[d]);
    }
    if (rd_u32(r, &t->type, "tensor type") != 0) return -1;
    if (f->variant == GGUF_VARIANT_PWRI && t->type >= PWRI_OLD_I8) {
        if (t->type > PWRI_OLD_I32)
            return fail(r, off, "tensor '%s': type code %u is not valid in a PWRI file", t->name, t->type);
        t->type += PWRI_SHIFT;
    }
    uint32_t blck = ggml_blck_size(t->type);
    if (!blck) return fail(r, off, "tensor '%s': unknown tensor type %u", t->name, t->type);
    if (t->ne[0] % blck)
        return fail(r, off, "tensor '%s': ne[0] = %lld is not a multiple of the %s block size %u",
                    t->name, (long long)t->ne[0], ggml_type_name(t->type), blck);
    int64_t nel = 1;
    uint64_t nbytes;
    int ovf = __builtin_mul_overflow((uint64_t)(t->ne[0] / blck), (uint64_t)ggml_type_size(t->type), &nbytes);
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        ovf = ovf || __builtin_mul_overflow(nel, t->ne[d], &nel) ||
              (d > 0 && __builtin_mul_overflow(nbytes, (uint64_t)t->ne[d], &nbytes));
    if (ovf) return fail(r, off, "tensor '%s': element count or size overflows", t->name);
    t->nbytes = nbytes;
    return rd_u64(r, &t->offset, "tensor offset");
}

static int rd_tensors(reader *r, gguf_file *f)
{
    uint64_t *info_off = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *info_off);
    if (!info_off) return fail(r, r->pos, "out of memory");
    int rc = -1;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        info_off[i] = r->pos;
        if (rd_tensor_info(r, f, &f->tensors[i], info_off[i]) != 0) goto out;
    }
    int64_t d = find_duplicate((const char *const *)&f->tensors[0].name, sizeof f->tensors[0], f->n_tensors);
    if (d >= 0) {
        fail(r, info_off[d], "duplicate tensor name '%s'", f->tensors[d].name);
        goto out;
    }
    /* ggml seeks to the data section only when there are tensors: a 0-tensor
     * file may end right after its metadata. */
    f->data_offset = f->n_tensors ? pad_to(r->pos, f->alignment) : r->pos;
    uint64_t expect = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        uint64_t end;
        if (t->offset != expect) {
            fail(r, info_off[i], "tensor '%s' has offset %llu, expected %llu (data must be packed in order, aligned to %u)",
                 t->name, (unsigned long long)t->offset, (unsigned long long)expect, f->alignment);
            goto out;
        }
        if (__builtin_add_overflow(f->data_offset, t->offset, &end) ||
            __builtin_add_overflow(end, t->nbytes, &end) || end > f->size) {
            fail(r, info_off[i], "tensor '%s' data (%llu bytes at file offset %llu) runs past end of file (%zu bytes)",
                 t->name, (unsigned long long)t->nbytes,
                 (unsigned long long)(f->data_offset + t->offset), f->size);
            goto out;
        }
        t->data = f->base + f->data_offset + t->offset;
        expect = pad_to(t->offset + t->nbytes, f->alignment);   /* < size + alignment: no overflow */
    }
    rc = 0;
out:
    free(info_off);
    return rc;
}

static int parse(reader *r, gguf_file *f)
{
    char m[4];
    if (r->size < 4) return fail(r, 0, "file of %zu bytes is too short for a GGUF header", r->size);
    memcpy(m, r->p, 4);
    r->pos = 4;
    if (memcmp(m, magic_of[0], 4) == 0) f->variant = GGUF_VARIANT_GGUF;
    else if (memcmp(m, magic_of[1], 4) == 0) f->variant = GGUF_VARIANT_PWRI;
    else
        return fail(r, 0, "bad magic %02x %02x %02x %02x (expected \"GGUF\" or \"PWRI\"): not a GGUF file",
                    (uint8_t)m[0], (uint8_t)m[1], (uint8_t)m[2], (uint8_t)m[3]);
    if (rd_u32(r, &f->version, "version") != 0) return -1;
    if (f->version == 0) return fail(r, 4, "bad GGUF version 0");
    if ((f->version & 0xffff) == 0)
        return fail(r, 4, "bad GGUF version 0x%08x: probably a big-endian file (byte-swapped)", f->version);
    if (f->version == 1) return fail(r, 4, "GGUF version 1 is not supported (only 2 and 3)");
    if (f->version > 3) return fail(r, 4, "GGUF version %u is newer than this reader (3)", f->version);
    if (rd_u64(r, &f->n_tensors, "tensor count") != 0 || rd_u64(r, &f->n_kv, "KV count") != 0) return -1;
    if (f->n_kv > left(r) / MIN_KV_BYTES)
        return fail(r, 16, "KV count %llu cannot fit in the %zu bytes left", (unsigned long long)f->n_kv, left(r));
    if (f->n_tensors > left(r) / MIN_TENSOR_BYTES ||
        f->n_kv * MIN_KV_BYTES + f->n_tensors * MIN_TENSOR_BYTES > left(r))
        return fail(r, 8, "tensor count %llu (with %llu KVs) cannot fit in the %zu bytes left",
                    (unsigned long long)f->n_tensors, (unsigned long long)f->n_kv, left(r));
    f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kv);
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
    if (!f->kv || !f->tensors) return fail(r, 8, "out of memory");
    if (rd_kvs(r, f) != 0 || rd_alignment(r, f) != 0) return -1;
    return rd_tensors(r, f);
}

static gguf_file *open_buf(const void *buf, size_t size, const char *name, int owns_map, char *err, size_t errlen)
{
    gguf_file *f = calloc(1, sizeof *f);
    char *path = strdup(name);
    if (!f || !path) {
        snprintf(err, errlen, "%s: out of memory", name);
        free(f);
        free(path);
        return NULL;
    }
    f->path = path;
    f->base = buf;
    f->size = size;
    f->owns_map = owns_map;
    reader r = { buf, size, 0, name, err, errlen };
    if (parse(&r, f) != 0) {
        gguf_close(f);
        return NULL;
    }
    return f;
}

gguf_file *gguf_open_mem(const void *buf, size_t size, const char *name, char *err, size_t errlen)
{
    return open_buf(buf, size, name, 0, err, errlen);
}

gguf_file *gguf_open(const char *path, char *err, size_t errlen)
{
    hc_map m;
    if (hc_map_open(&m, path, err, errlen)) return NULL;
    if (!m.data) return open_buf("", 0, path, 0, err, errlen);   /* empty: the parser words the error */
    return open_buf(m.data, m.size, path, 1, err, errlen);
}

void gguf_close(gguf_file *f)
{
    if (!f) return;
    for (uint64_t i = 0; f->kv && i < f->n_kv; i++) {
        free(f->kv[i].key);
        free((void *)f->kv[i].strs);
    }
    for (uint64_t i = 0; f->tensors && i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->kv);
    free(f->tensors);
    if (f->owns_map) munmap((void *)f->base, f->size);
    free(f->path);
    free(f);
}

int gguf_find_kv(const gguf_file *f, const char *key)
{
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (f->kv[i].key && strcmp(f->kv[i].key, key) == 0) return (int)i;
    return -1;
}

int gguf_find_tensor(const gguf_file *f, const char *name)
{
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].name && strcmp(f->tensors[i].name, name) == 0) return (int)i;
    return -1;
}

const gguf_tensor *gguf_get_tensor(const gguf_file *f, const char *name)
{
    int i = gguf_find_tensor(f, name);
    return i < 0 ? NULL : &f->tensors[i];
}

/* Scalar of exactly this type: 0, -1 missing, -2 other type. */
static int get_scalar(const gguf_file *f, const char *key, uint32_t type, void *out)
{
    int i = gguf_find_kv(f, key);
    if (i < 0) return -1;
    if (f->kv[i].type != type) return -2;
    memcpy(out, f->kv[i].data, vtypes[type].size);
    return 0;
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) { return get_scalar(f, key, GGUF_TYPE_UINT32, out); }
int gguf_get_i32(const gguf_file *f, const char *key, int32_t *out) { return get_scalar(f, key, GGUF_TYPE_INT32, out); }
int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out) { return get_scalar(f, key, GGUF_TYPE_UINT64, out); }
int gguf_get_f32(const gguf_file *f, const char *key, float *out) { return get_scalar(f, key, GGUF_TYPE_FLOAT32, out); }
int gguf_get_f64(const gguf_file *f, const char *key, double *out) { return get_scalar(f, key, GGUF_TYPE_FLOAT64, out); }

int gguf_get_bool(const gguf_file *f, const char *key, int *out)
{
    uint8_t b;
    int rc = get_scalar(f, key, GGUF_TYPE_BOOL, &b);
    if (rc == 0) *out = b;
    return rc;
}

int gguf_get_str(const gguf_file *f, const char *key, char **out)
{
    int i = gguf_find_kv(f, key);
    if (i < 0) return -1;
    if (f->kv[i].type != GGUF_TYPE_STRING) return -2;
    const gguf_str *s = &f->kv[i].strs[0];
    if (!(*out = malloc(s->len + 1))) hc_die("out of memory for a %llu-byte string", (unsigned long long)s->len);
    memcpy(*out, s->ptr, s->len);
    (*out)[s->len] = 0;
    return 0;
}

int gguf_get_int(const gguf_file *f, const char *key, int64_t *out)
{
    int i = gguf_find_kv(f, key);
    if (i < 0) return -1;
    const gguf_kv *kv = &f->kv[i];
    uint64_t u;
    switch (kv->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16:
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32:
        *out = (int64_t)gguf_kv_num(kv, 0);   /* exact: 32 bits fit a double */
        return 0;
    case GGUF_TYPE_INT64:
        memcpy(out, kv->data, 8);
        return 0;
    case GGUF_TYPE_UINT64:
        memcpy(&u, kv->data, 8);
        if (u > INT64_MAX) return -2;   /* not representable */
        *out = (int64_t)u;
        return 0;
    default:
        return -2;
    }
}

double gguf_kv_num(const gguf_kv *kv, uint64_t i)
{
    uint32_t t = kv->type == GGUF_TYPE_ARRAY ? kv->arr_type : kv->type;
    size_t sz = gguf_vtype_size(t);
    if (!sz || i >= kv->n) return NAN;   /* not a number-valued element */
    const uint8_t *p = kv->data + i * sz;
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } v;
    memcpy(&v, p, sz);
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_BOOL: return v.u8;
    case GGUF_TYPE_INT8: return v.i8;
    case GGUF_TYPE_UINT16: return v.u16;
    case GGUF_TYPE_INT16: return v.i16;
    case GGUF_TYPE_UINT32: return v.u32;
    case GGUF_TYPE_INT32: return v.i32;
    case GGUF_TYPE_FLOAT32: return v.f32;
    case GGUF_TYPE_UINT64: return (double)v.u64;
    case GGUF_TYPE_INT64: return (double)v.i64;
    default: return v.f64;
    }
}

/* ================================================================ writer */

typedef struct {
    char *key;
    uint32_t type;
    uint8_t *val;        /* encoded value as in the file (arrays: elem type, count, elements) */
    size_t len, cap;
} wkv;

typedef struct {
    char *name;
    uint32_t type, n_dims;   /* n_dims as written: ggml_n_dims */
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes, offset;
    const void *data;
} wtensor;

struct gguf_writer {
    gguf_variant variant;
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    char err[512];           /* first declaration error; writing refuses while set */
    /* streaming state */
    atomic_file af;
    int open;
    int io_errno;            /* first failed write */
    uint32_t align;
    size_t cur;              /* tensor being streamed */
    uint64_t cur_done;       /* its bytes written so far */
};

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q && n) hc_die("out of memory for %zu bytes", n);
    return q;
}

static void werr(gguf_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void werr(gguf_writer *w, const char *fmt, ...)
{
    if (w->err[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
}

gguf_writer *gguf_writer_new(gguf_variant variant)
{
    gguf_writer *w = xrealloc(NULL, sizeof *w);
    memset(w, 0, sizeof *w);
    w->variant = variant;
    return w;
}

const char *gguf_writer_error(const gguf_writer *w) { return w->err; }

void gguf_writer_free(gguf_writer *w)
{
    if (!w) return;
    if (w->open) af_abort(&w->af);
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

static int find_wkv(const gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) return (int)i;
    return -1;
}

/* Slot for key, replacing an existing value in place; NULL after an error. */
static wkv *kv_slot(gguf_writer *w, const char *key, uint32_t type)
{
    if (!key || !*key) { werr(w, "empty key"); return NULL; }
    if (w->open) { werr(w, "key '%s': set after gguf_writer_begin", key); return NULL; }
    int i = find_wkv(w, key);
    wkv *kv;
    if (i >= 0) {
        kv = &w->kv[i];
        free(kv->val);
    } else {
        if (w->n_kv == w->cap_kv) {
            w->cap_kv = w->cap_kv ? 2 * w->cap_kv : 16;
            w->kv = xrealloc(w->kv, w->cap_kv * sizeof *w->kv);
        }
        kv = &w->kv[w->n_kv++];
        kv->key = xrealloc(NULL, strlen(key) + 1);
        strcpy(kv->key, key);
    }
    kv->type = type;
    kv->val = NULL;
    kv->len = kv->cap = 0;
    return kv;
}

static void put(wkv *kv, const void *p, size_t n)
{
    if (kv->len + n > kv->cap) {   /* geometric growth: a 32000-token vocabulary is 64000 puts */
        kv->cap = kv->cap * 2 > kv->len + n ? kv->cap * 2 : kv->len + n + 64;
        kv->val = xrealloc(kv->val, kv->cap);
    }
    if (n) memcpy(kv->val + kv->len, p, n);
    kv->len += n;
}

static void put_str(wkv *kv, const char *s, uint64_t len)
{
    put(kv, &len, 8);
    put(kv, s, len);
}

static void set_scalar(gguf_writer *w, const char *key, uint32_t type, const void *v)
{
    wkv *kv = kv_slot(w, key, type);
    if (kv) put(kv, v, vtypes[type].size);
}

void gguf_set_u8(gguf_writer *w, const char *key, uint8_t v) { set_scalar(w, key, GGUF_TYPE_UINT8, &v); }
void gguf_set_i8(gguf_writer *w, const char *key, int8_t v) { set_scalar(w, key, GGUF_TYPE_INT8, &v); }
void gguf_set_u16(gguf_writer *w, const char *key, uint16_t v) { set_scalar(w, key, GGUF_TYPE_UINT16, &v); }
void gguf_set_i16(gguf_writer *w, const char *key, int16_t v) { set_scalar(w, key, GGUF_TYPE_INT16, &v); }
void gguf_set_u32(gguf_writer *w, const char *key, uint32_t v) { set_scalar(w, key, GGUF_TYPE_UINT32, &v); }
void gguf_set_i32(gguf_writer *w, const char *key, int32_t v) { set_scalar(w, key, GGUF_TYPE_INT32, &v); }
void gguf_set_f32(gguf_writer *w, const char *key, float v) { set_scalar(w, key, GGUF_TYPE_FLOAT32, &v); }
void gguf_set_u64(gguf_writer *w, const char *key, uint64_t v) { set_scalar(w, key, GGUF_TYPE_UINT64, &v); }
void gguf_set_i64(gguf_writer *w, const char *key, int64_t v) { set_scalar(w, key, GGUF_TYPE_INT64, &v); }
void gguf_set_f64(gguf_writer *w, const char *key, double v) { set_scalar(w, key, GGUF_TYPE_FLOAT64, &v); }

void gguf_set_bool(gguf_writer *w, const char *key, int v)
{
    uint8_t b = v != 0;
    set_scalar(w, key, GGUF_TYPE_BOOL, &b);
}

void gguf_set_str(gguf_writer *w, const char *key, const char *v)
{
    if (!v) { werr(w, "key '%s': NULL string", key ? key : ""); return; }
    wkv *kv = kv_slot(w, key, GGUF_TYPE_STRING);
    if (kv) put_str(kv, v, strlen(v));
}

/* Array header; NULL after an error. */
static wkv *arr_slot(gguf_writer *w, const char *key, uint32_t elem_type, uint64_t n)
{
    if (elem_type >= GGUF_TYPE_COUNT || elem_type == GGUF_TYPE_ARRAY) {
        werr(w, "key '%s': invalid array element type %u", key ? key : "", elem_type);
        return NULL;
    }
    if (n > MAX_ARRAY) {
        werr(w, "key '%s': array of %llu elements exceeds 2^30", key ? key : "", (unsigned long long)n);
        return NULL;
    }
    wkv *kv = kv_slot(w, key, GGUF_TYPE_ARRAY);
    if (!kv) return NULL;
    put(kv, &elem_type, 4);
    put(kv, &n, 8);
    return kv;
}

void gguf_set_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t n)
{
    if (elem_type == GGUF_TYPE_STRING) { werr(w, "key '%s': use gguf_set_arr_str for strings", key ? key : ""); return; }
    wkv *kv = arr_slot(w, key, elem_type, n);
    if (kv && n) put(kv, data, n * vtypes[elem_type].size);
}

void gguf_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n)
{
    wkv *kv = arr_slot(w, key, GGUF_TYPE_STRING, n);
    for (uint64_t i = 0; kv && i < n; i++) put_str(kv, strs[i], strlen(strs[i]));
}

void gguf_set_kv(gguf_writer *w, const gguf_kv *src)
{
    wkv *kv;
    if (src->type == GGUF_TYPE_STRING) {
        if ((kv = kv_slot(w, src->key, GGUF_TYPE_STRING))) put_str(kv, src->strs[0].ptr, src->strs[0].len);
    } else if (src->type != GGUF_TYPE_ARRAY) {
        set_scalar(w, src->key, src->type, src->data);
    } else if ((kv = arr_slot(w, src->key, src->arr_type, src->n))) {
        if (src->arr_type == GGUF_TYPE_STRING)
            for (uint64_t i = 0; i < src->n; i++) put_str(kv, src->strs[i].ptr, src->strs[i].len);
        else if (src->n)
            put(kv, src->data, src->n * vtypes[src->arr_type].size);
    }
}

void gguf_remove_key(gguf_writer *w, const char *key)
{
    int i = find_wkv(w, key);
    if (i < 0) return;
    if (w->open) { werr(w, "key '%s': removed after gguf_writer_begin", key); return; }
    free(w->kv[i].key);
    free(w->kv[i].val);
    memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - (size_t)i - 1) * sizeof *w->kv);
    w->n_kv--;
}

int gguf_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                    const int64_t *ne, const void *data)
{
    wtensor t = { 0 };
    size_t len = name ? strlen(name) : 0;
    uint32_t blck = ggml_blck_size(type);
    if (w->open) { werr(w, "tensor '%s': added after gguf_writer_begin", name ? name : ""); return -1; }
    if (!name || len > GGUF_MAX_NAME) {
        werr(w, "tensor '%.32s...': name is %zu bytes, longer than %d", name ? name : "", len, GGUF_MAX_NAME);
        return -1;
    }
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) { werr(w, "duplicate tensor name '%s'", name); return -1; }
    if (!blck) { werr(w, "tensor '%s': unknown tensor type %u", name, type); return -1; }
    if (w->variant == GGUF_VARIANT_PWRI && type >= PWRI_OLD_I8 &&
        (type < GGML_TYPE_I8 || type > GGML_TYPE_I32)) {
        werr(w, "tensor '%s': type %s has no code in a PWRI file", name, ggml_type_name(type));
        return -1;
    }
    if (n_dims == 0 || n_dims > GGUF_MAX_DIMS) {
        werr(w, "tensor '%s': n_dims %u is not in 1..%d", name, n_dims, GGUF_MAX_DIMS);
        return -1;
    }
    int64_t nel = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 0 || __builtin_mul_overflow(nel, t.ne[d], &nel)) {
            werr(w, "tensor '%s': dimension %u (%lld) is negative or overflows", name, d, (long long)t.ne[d]);
            return -1;
        }
        if (t.ne[d] != 1) t.n_dims = d + 1;
    }
    if (!t.n_dims) t.n_dims = 1;   /* ggml_n_dims: trailing 1s dropped, at least 1 */
    if (t.ne[0] % blck) {
        werr(w, "tensor '%s': ne[0] = %lld is not a multiple of the %s block size %u",
             name, (long long)t.ne[0], ggml_type_name(type), blck);
        return -1;
    }
    if (__builtin_mul_overflow((uint64_t)(nel / blck), (uint64_t)ggml_type_size(type), &t.nbytes)) {
        werr(w, "tensor '%s': size overflows", name);
        return -1;
    }
    t.name = xrealloc(NULL, len + 1);
    memcpy(t.name, name, len + 1);
    t.type = type;
    t.data = data;
    if (w->n_t == w->cap_t) {
        w->cap_t = w->cap_t ? 2 * w->cap_t : 16;
        w->t = xrealloc(w->t, w->cap_t * sizeof *w->t);
    }
    w->t[w->n_t] = t;
    return (int)w->n_t++;
}

/* --- output */

static void out(gguf_writer *w, const void *p, size_t n)
{
    if (w->io_errno || !n) return;
    if (fwrite(p, 1, n, w->af.fp) != n) w->io_errno = errno ? errno : EIO;
}

static void out_u32(gguf_writer *w, uint32_t v) { out(w, &v, 4); }
static void out_u64(gguf_writer *w, uint64_t v) { out(w, &v, 8); }

static void out_zeros(gguf_writer *w, uint64_t n)
{
    static const uint8_t zeros[4096];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        out(w, zeros, k);
        n -= k;
    }
}

/* Alignment from general.alignment (u32 power of two) or the default; 0 on error. */
static uint32_t writer_alignment(gguf_writer *w)
{
    int i = find_wkv(w, "general.alignment");
    if (i < 0) return GGUF_DEFAULT_ALIGNMENT;
    uint32_t a;
    if (w->kv[i].type != GGUF_TYPE_UINT32) { werr(w, "general.alignment must be a u32"); return 0; }
    memcpy(&a, w->kv[i].val, 4);
    if (a == 0 || (a & (a - 1))) { werr(w, "general.alignment %u is not a non-zero power of two", a); return 0; }
    return a;
}

/* Close the output after an error: remove the temporary, report once. */
static int stream_fail(gguf_writer *w, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int stream_fail(gguf_writer *w, char *err, size_t errlen, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: %s", w->af.path ? w->af.path : "(output)", what);
    if (w->open) af_abort(&w->af);
    w->open = 0;
    return -1;
}

static int check_io(gguf_writer *w, char *err, size_t errlen)
{
    if (!w->io_errno) return 0;
    return stream_fail(w, err, errlen, "write failed: %s", strerror(w->io_errno));
}

/* The file's size: the header (magic, version, counts, KVs, tensor infos,
 * its size into *header), then, with tensors, the data section from the
 * next aligned offset, each tensor padded. ggml pads before the data
 * section; with no tensors there is no data section and no padding (as
 * ggml-vocab-llama-spm.gguf ends). */
static uint64_t writer_size(const gguf_writer *w, uint64_t *header)
{
    uint64_t pos = 24, data = 0;
    for (size_t i = 0; i < w->n_kv; i++) pos += 8 + strlen(w->kv[i].key) + 4 + w->kv[i].len;
    for (size_t i = 0; i < w->n_t; i++) {
        pos += 8 + strlen(w->t[i].name) + 4 + 8 * w->t[i].n_dims + 4 + 8;
        data += pad_to(w->t[i].nbytes, w->align);
    }
    *header = pos;
    return w->n_t ? pad_to(pos, w->align) + data : pos;
}

int gguf_writer_begin(gguf_writer *w, const char *path, char *err, size_t errlen)
{
    if (w->open) { snprintf(err, errlen, "%s: writer already open", path); return -1; }
    w->align = writer_alignment(w);
    if (w->err[0]) { snprintf(err, errlen, "%s: %s", path, w->err); return -1; }
    if (af_open(&w->af, path, err, errlen) != 0) return -1;
    uint64_t header, size = writer_size(w, &header);
    if (af_reserve(&w->af, size, err, errlen) != 0) {
        af_abort(&w->af);
        return -1;
    }
    w->open = 1;
    w->io_errno = 0;
    w->cur = 0;
    w->cur_done = 0;
    out(w, magic_of[w->variant], 4);
    out_u32(w, 3);
    out_u64(w, w->n_t);
    out_u64(w, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        uint64_t klen = strlen(w->kv[i].key);
        out_u64(w, klen);
        out(w, w->kv[i].key, klen);
        out_u32(w, w->kv[i].type);
        out(w, w->kv[i].val, w->kv[i].len);
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        uint64_t nlen = strlen(t->name);
        uint32_t type = t->type;
        if (w->variant == GGUF_VARIANT_PWRI && type >= GGML_TYPE_I8) type -= PWRI_SHIFT;
        out_u64(w, nlen);
        out(w, t->name, nlen);
        out_u32(w, t->n_dims);
        out(w, t->ne, 8 * t->n_dims);
        out_u32(w, type);
        t->offset = offset;
        out_u64(w, offset);
        offset += pad_to(t->nbytes, w->align);
    }
    if (w->n_t) out_zeros(w, pad_to(header, w->align) - header);
    return check_io(w, err, errlen);
}

/* Finish the current tensor once complete: its padding, then any following
 * tensors whose data was given to gguf_add_tensor. */
static void advance(gguf_writer *w)
{
    while (w->cur < w->n_t) {
        wtensor *t = &w->t[w->cur];
        if (w->cur_done == 0 && t->data && t->nbytes) {
            out(w, t->data, t->nbytes);
            w->cur_done = t->nbytes;
        }
        if (w->cur_done < t->nbytes) return;
        out_zeros(w, pad_to(t->nbytes, w->align) - t->nbytes);
        w->cur++;
        w->cur_done = 0;
    }
}

int gguf_writer_write_data(gguf_writer *w, const void *data, size_t n, char *err, size_t errlen)
{
    const uint8_t *p = data;
    if (!w->open) { snprintf(err, errlen, "(output): writer is not open"); return -1; }
    advance(w);
    while (n) {
        if (w->cur >= w->n_t) return stream_fail(w, err, errlen, "%zu bytes of tensor data more than declared", n);
        wtensor *t = &w->t[w->cur];
        uint64_t room = t->nbytes - w->cur_done;
        size_t k = n < room ? n : (size_t)room;
        out(w, p, k);
        w->cur_done += k;
        p += k;
        n -= k;
        advance(w);
    }
    return check_io(w, err, errlen);
}

int gguf_writer_finish(gguf_writer *w, char *err, size_t errlen)
{
    if (!w->open) { snprintf(err, errlen, "(output): writer is not open"); return -1; }
    advance(w);
    if (w->cur < w->n_t) {
        wtensor *t = &w->t[w->cur];
        return stream_fail(w, err, errlen, "tensor '%s': %llu of %llu bytes written", t->name,
                           (unsigned long long)w->cur_done, (unsigned long long)t->nbytes);
    }
    if (check_io(w, err, errlen) != 0) return -1;
    w->open = 0;
    return af_commit(&w->af, err, errlen);
}

int gguf_writer_write(gguf_writer *w, const char *path, char *err, size_t errlen)
{
    for (size_t i = 0; i < w->n_t; i++)
        if (!w->t[i].data && w->t[i].nbytes) {
            snprintf(err, errlen, "%s: tensor '%s' has no data", path, w->t[i].name);
            return -1;
        }
    if (gguf_writer_begin(w, path, err, errlen) != 0) return -1;
    return gguf_writer_finish(w, err, errlen);
}

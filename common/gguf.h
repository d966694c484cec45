/* GGUF v3 reader (mmap, fully validated) and writer (streamed, atomic).
 * Format and validation rules: docs/formats.md, "The GGUF container".
 * Also reads and writes PowerInfer's "PWRI" variant (same layout, other magic,
 * old integer type codes: docs/formats.md, "ggml type codes"). */
#ifndef HC_GGUF_H
#define HC_GGUF_H

#include <stdint.h>
#include <stddef.h>
#include "ggml_types.h"

enum gguf_vtype {
    GGUF_TYPE_UINT8 = 0, GGUF_TYPE_INT8 = 1, GGUF_TYPE_UINT16 = 2, GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4, GGUF_TYPE_INT32 = 5, GGUF_TYPE_FLOAT32 = 6, GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8, GGUF_TYPE_ARRAY = 9, GGUF_TYPE_UINT64 = 10, GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12, GGUF_TYPE_COUNT = 13,
};

typedef enum { GGUF_VARIANT_GGUF = 0, GGUF_VARIANT_PWRI = 1 } gguf_variant;

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME 63          /* longest tensor name ggml accepts */
#define GGUF_MAX_DIMS 4

typedef struct {
    uint64_t len;
    const char *ptr;              /* into the mapping; NOT NUL-terminated */
} gguf_str;

typedef struct {
    char *key;                    /* NUL-terminated copy */
    uint32_t type;                /* enum gguf_vtype */
    uint32_t arr_type;            /* element type when type == ARRAY */
    uint64_t n;                   /* element count for arrays, 1 otherwise */
    const uint8_t *data;          /* value bytes in the mapping (first element for arrays) */
    const gguf_str *strs;         /* STRING or ARRAY of STRING: n decoded strings */
    uint64_t file_offset;         /* where the KV starts, for messages */
} gguf_kv;

typedef struct {
    char *name;                   /* NUL-terminated copy */
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];    /* unused dims are 1 */
    uint32_t type;                /* enum ggml_type, today's numbering */
    uint64_t offset;              /* relative to the data section */
    uint64_t nbytes;
    const void *data;             /* in the mapping */
} gguf_tensor;

typedef struct {
    char *path;
    gguf_variant variant;
    uint32_t version;
    uint32_t alignment;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *tensors;
    uint64_t data_offset;         /* file offset of the data section */
    const uint8_t *base;          /* the whole file */
    size_t size;
    int owns_map;                 /* mapping to unmap on close */
} gguf_file;

/* Open and validate a file (mmap, read-only, MAP_SHARED). NULL on any problem,
 * with a one-line message "PATH: offset N: what is wrong" in err. */
gguf_file *gguf_open(const char *path, char *err, size_t errlen);
/* Same over a caller-owned buffer (tests, fuzzing); name is used in messages. */
gguf_file *gguf_open_mem(const void *buf, size_t size, const char *name, char *err, size_t errlen);
void gguf_close(gguf_file *f);

int gguf_find_kv(const gguf_file *f, const char *key);          /* index or -1 */
int gguf_find_tensor(const gguf_file *f, const char *name);     /* index or -1 */
const gguf_tensor *gguf_get_tensor(const gguf_file *f, const char *name); /* or NULL */

/* Typed scalar getters. Return 0 on success, -1 if the key is missing,
 * -2 if it has another type (no silent conversion, as llama.cpp). */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
int gguf_get_i32(const gguf_file *f, const char *key, int32_t *out);
int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out);
int gguf_get_f32(const gguf_file *f, const char *key, float *out);
int gguf_get_f64(const gguf_file *f, const char *key, double *out);
int gguf_get_bool(const gguf_file *f, const char *key, int *out);
/* String value as a malloc'd NUL-terminated copy (caller frees). */
int gguf_get_str(const gguf_file *f, const char *key, char **out);
/* Any unsigned/signed integer KV widened to int64 (for counts stored as u32 or u64). */
int gguf_get_int(const gguf_file *f, const char *key, int64_t *out);

const char *gguf_vtype_name(uint32_t type);
size_t gguf_vtype_size(uint32_t type);   /* fixed size of a scalar type; 0 for STRING/ARRAY */
/* Read element i of a numeric array KV (or the scalar when i == 0) as double. */
double gguf_kv_num(const gguf_kv *kv, uint64_t i);

/* ---------------------------------------------------------------- writer */

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(gguf_variant variant);
void gguf_writer_free(gguf_writer *w);    /* also aborts an unfinished output */
/* The first declaration error (bad key, name, shape, type), "" if none. Any
 * such error makes gguf_writer_write / _begin fail with this message. */
const char *gguf_writer_error(const gguf_writer *w);

/* Setting a key that exists replaces its value in place. */
void gguf_set_u8(gguf_writer *w, const char *key, uint8_t v);
void gguf_set_i8(gguf_writer *w, const char *key, int8_t v);
void gguf_set_u16(gguf_writer *w, const char *key, uint16_t v);
void gguf_set_i16(gguf_writer *w, const char *key, int16_t v);
void gguf_set_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_set_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_set_f32(gguf_writer *w, const char *key, float v);
void gguf_set_u64(gguf_writer *w, const char *key, uint64_t v);
void gguf_set_i64(gguf_writer *w, const char *key, int64_t v);
void gguf_set_f64(gguf_writer *w, const char *key, double v);
void gguf_set_bool(gguf_writer *w, const char *key, int v);
void gguf_set_str(gguf_writer *w, const char *key, const char *v);
/* Array of a fixed-size element type; data holds n packed little-endian elements. */
void gguf_set_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t n);
void gguf_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* Copy a KV from a reader (any type). */
void gguf_set_kv(gguf_writer *w, const gguf_kv *kv);
/* Remove a key; then setting it again appends it at the end (as llama.cpp does). */
void gguf_remove_key(gguf_writer *w, const char *key);

/* Declare a tensor (data in file order = declaration order). data may be NULL
 * if it will be streamed with gguf_writer_write_data. Returns its index, or -1
 * (message in the writer's error: invalid name, shape or type). */
int gguf_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                    const int64_t *ne, const void *data);

/* One-shot: write everything (every tensor must have data) atomically to path. 0 or -1. */
int gguf_writer_write(gguf_writer *w, const char *path, char *err, size_t errlen);

/* Streaming: begin writes header, KVs and tensor infos to a temporary file;
 * then write each tensor's bytes in declaration order, in as many chunks as
 * you like (padding is inserted automatically when a tensor is complete);
 * finish checks every byte arrived, fsyncs and renames into place. */
int gguf_writer_begin(gguf_writer *w, const char *path, char *err, size_t errlen);
int gguf_writer_write_data(gguf_writer *w, const void *data, size_t n, char *err, size_t errlen);
int gguf_writer_finish(gguf_writer *w, char *err, size_t errlen);

#endif

#include "ptfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ggml_types.h"
#include "pickle.h"
#include "zipread.h"

enum { K_F32, K_F64, K_F16, K_BF16, K_I64, K_I32, K_I16, K_I8, K_U8 };
static const struct { const char *name; int kind, size; } storages[] = {
    { "FloatStorage", K_F32, 4 }, { "DoubleStorage", K_F64, 8 }, { "HalfStorage", K_F16, 2 },
    { "BFloat16Storage", K_BF16, 2 }, { "LongStorage", K_I64, 8 }, { "IntStorage", K_I32, 4 },
    { "ShortStorage", K_I16, 2 }, { "CharStorage", K_I8, 1 }, { "ByteStorage", K_U8, 1 },
    { "BoolStorage", K_U8, 1 },
};

static double element(int kind, const uint8_t *p)
{
    switch (kind) {
    case K_F32: { float f; memcpy(&f, p, 4); return f; }
    case K_F64: { double d; memcpy(&d, p, 8); return d; }
    case K_F16: return fp16_to_fp32((uint16_t)(p[0] | p[1] << 8));
    case K_BF16: return bf16_to_fp32((uint16_t)(p[0] | p[1] << 8));
    case K_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case K_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case K_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case K_I8: return (int8_t)p[0];
    default: return p[0];
    }
}

/* The one "<prefix>/data.pkl" entry; its prefix length in *plen. */
static long find_pickle(const hc_zip *z, size_t *plen)
{
    long found = -1;
    for (size_t i = 0; i < hc_zip_count(z); i++) {
        const char *nm = hc_zip_entry_at(z, i)->name, *slash = strchr(nm, '/');
        if (slash && slash != nm && strcmp(slash, "/data.pkl") == 0) {
            if (found >= 0) return -2;
            found = (long)i;
            *plen = (size_t)(slash - nm);
        }
    }
    return found;
}

static double *read_tensor(const hc_zip *z, const char *name, int64_t max_elements, int64_t *n, char *err,
                           size_t errlen)
{
    size_t plen = 0, len;
    long ip = find_pickle(z, &plen);
    if (ip < 0) {
        snprintf(err, errlen, "%s: %s", name, ip == -1 ? "no <name>/data.pkl entry (not a torch.save file)"
                                                       : "more than one data.pkl (not a single tensor)");
        return NULL;
    }
    const char *prefix = hc_zip_entry_at(z, (size_t)ip)->name;
    char path[256];
    snprintf(path, sizeof path, "%.*s/byteorder", (int)plen, prefix);
    long ib = hc_zip_find(z, path);
    if (ib >= 0) {
        char *bo = hc_zip_read(z, (size_t)ib, 16, &len, err, errlen);
        if (!bo) return NULL;
        int little = len == 6 && memcmp(bo, "little", 6) == 0;
        free(bo);
        if (!little) { snprintf(err, errlen, "%s: byteorder is not 'little' (big-endian files are not supported)", name); return NULL; }
    }

    uint8_t *pkl = hc_zip_read(z, (size_t)ip, HC_PT_MAX_PICKLE, &len, err, errlen);
    if (!pkl) return NULL;
    hc_pickle_tensor t;
    int rc = hc_pickle_tensor_read(pkl, len, hc_zip_entry_at(z, (size_t)ip)->name, &t, err, errlen);
    free(pkl);
    if (rc != 0) {
        /* prefix the archive name to the pickle's message */
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", err);
        snprintf(err, errlen, "%s: %s", name, tmp);
        return NULL;
    }

    int kind = -1, esize = 0;
    for (size_t k = 0; k < sizeof storages / sizeof storages[0]; k++)
        if (strcmp(t.storage_type, storages[k].name) == 0) { kind = storages[k].kind; esize = storages[k].size; }
    if (kind < 0) { snprintf(err, errlen, "%s: storage type torch.%s is not supported", name, t.storage_type); return NULL; }
    if (t.ndim != 1) { snprintf(err, errlen, "%s: expected a 1-D tensor, got %d dimensions", name, t.ndim); return NULL; }
    int64_t cnt = t.shape[0], st = t.stride[0];
    if (cnt > max_elements || t.storage_numel > max_elements) {
        snprintf(err, errlen, "%s: tensor of %lld elements in a storage of %lld: more than the %lld expected", name,
                 (long long)cnt, (long long)t.storage_numel, (long long)max_elements);
        return NULL;
    }
    /* elements offset, offset+st, ... must lie in the storage */
    if (cnt < 0 || t.offset < 0 || (cnt > 0 && (st < 0 || t.offset >= t.storage_numel ||
                                                (cnt > 1 && (st == 0 || (cnt - 1) > (t.storage_numel - 1 - t.offset) / st))))) {
        snprintf(err, errlen, "%s: tensor of %lld elements (offset %lld, stride %lld) does not fit its storage of %lld",
                 name, (long long)cnt, (long long)t.offset, (long long)st, (long long)t.storage_numel);
        return NULL;
    }

    snprintf(path, sizeof path, "%.*s/data/%s", (int)plen, prefix, t.key);
    long id = hc_zip_find(z, path);
    if (id < 0) { snprintf(err, errlen, "%s: storage entry %s is missing", name, path); return NULL; }
    const hc_zip_entry *e = hc_zip_entry_at(z, (size_t)id);
    if (e->usize != (uint64_t)t.storage_numel * (uint64_t)esize) {
        snprintf(err, errlen, "%s: storage %s holds %llu bytes, expected %lld x %d", name, path,
                 (unsigned long long)e->usize, (long long)t.storage_numel, esize);
        return NULL;
    }
    uint8_t *data = hc_zip_read(z, (size_t)id, e->usize, &len, err, errlen);
    if (!data) return NULL;
    double *v = malloc((size_t)(cnt ? cnt : 1) * sizeof *v);
    if (!v) { free(data); snprintf(err, errlen, "%s: out of memory", name); return NULL; }
    for (int64_t i = 0; i < cnt; i++) v[i] = element(kind, data + (size_t)(t.offset + i * st) * (size_t)esize);
    free(data);
    *n = cnt;
    return v;
}

/* torch.save before 1.6 wrote a bare pickle stream (starts with PROTO 0x80) */
static void *legacy(const char *name, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: legacy (pre-1.6, non-zip) torch file; re-save it with a current torch", name);
    return NULL;
}

double *hc_pt_read_vector_mem(const void *buf, size_t size, const char *name, int64_t max_elements, int64_t *n,
                              char *err, size_t errlen)
{
    if (size > 0 && ((const uint8_t *)buf)[0] == 0x80) return legacy(name, err, errlen);
    hc_zip *z = hc_zip_open_mem(buf, size, name, err, errlen);
    if (!z) return NULL;
    double *v = read_tensor(z, name, max_elements, n, err, errlen);
    hc_zip_close(z);
    return v;
}

double *hc_pt_read_vector(const char *path, int64_t max_elements, int64_t *n, char *err, size_t errlen)
{
    hc_map m;
    if (hc_map_open(&m, path, err, errlen)) return NULL;
    double *v = hc_pt_read_vector_mem(m.data, m.size, path, max_elements, n, err, errlen);
    hc_map_close(&m);
    return v;
}

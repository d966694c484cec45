/* safetensors reader: 8-byte little-endian header length, a JSON header
 * {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {}},
 * then the data section. Files are mapped; tensor data is never copied. */
#include "convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "ggml_types.h"

#define ST_MAX_HEADER (100u << 20)     /* the limit of the reference implementation */

static const struct { const char *name; uint32_t size, type; } st_dtypes[] = {
    {"F32", 4, GGML_TYPE_F32}, {"F16", 2, GGML_TYPE_F16}, {"BF16", 2, GGML_TYPE_BF16},
    {"F64", 8, UINT32_MAX}, {"I64", 8, UINT32_MAX}, {"U64", 8, UINT32_MAX},
    {"I32", 4, UINT32_MAX}, {"U32", 4, UINT32_MAX}, {"I16", 2, UINT32_MAX},
    {"U16", 2, UINT32_MAX}, {"I8", 1, UINT32_MAX}, {"U8", 1, UINT32_MAX},
    {"BOOL", 1, UINT32_MAX}, {"F8_E4M3", 1, UINT32_MAX}, {"F8_E5M2", 1, UINT32_MAX},
};

/* Shapes and offsets: whole numbers below 2^53, every one a double holds. */
#define U53 ((uint64_t)1 << 53)

static int cmp_by_offset(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    uintptr_t p = (uintptr_t)x->data, q = (uintptr_t)y->data;
    return p < q ? -1 : p > q;
}

/* The set whose by_name qsort is sorting (qsort passes no context). */
static const st_set *sorting;

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp(sorting->t[*(const size_t *)a].name, sorting->t[*(const size_t *)b].name);
}

/* Sort the set's name index; "appears twice" for a name given twice. */
static int index_names(st_set *s, const char *path, char *err, size_t errlen)
{
    size_t *ix = realloc(s->by_name, (s->n + 1) * sizeof *ix);
    if (!ix) hc_die("out of memory");
    s->by_name = ix;
    for (size_t i = 0; i < s->n; i++) ix[i] = i;
    sorting = s;
    qsort(ix, s->n, sizeof *ix, cmp_by_name);
    for (size_t i = 1; i < s->n; i++)
        if (!strcmp(s->t[ix[i - 1]].name, s->t[ix[i]].name)) {
            snprintf(err, errlen, "%s: tensor '%s': appears twice", path, s->t[ix[i]].name);
            return -1;
        }
    return 0;
}

/* No two tensors of the file whose tensors are t[first..n) share a byte (a
 * tensor of no bytes shares none, wherever it points). */
static int check_overlaps(const st_set *s, size_t first, const char *path, char *err, size_t errlen)
{
    const st_tensor **by = malloc((s->n - first + 1) * sizeof *by);
    if (!by) hc_die("out of memory");
    size_t k = 0;
    for (size_t i = first; i < s->n; i++)
        if (s->t[i].nbytes) by[k++] = &s->t[i];
    qsort(by, k, sizeof *by, cmp_by_offset);
    int rc = 0;
    for (size_t i = 1; i < k && !rc; i++)
        if ((const uint8_t *)by[i - 1]->data + by[i - 1]->nbytes > (const uint8_t *)by[i]->data) {
            snprintf(err, errlen, "%s: tensors '%s' and '%s' overlap", path, by[i - 1]->name, by[i]->name);
            rc = -1;
        }
    free(by);
    return rc;
}

/* Parse one tensor entry into t; NULL on success, else what is wrong. */
static const char *parse_entry(const cJSON *e, const uint8_t *data, uint64_t data_size, st_tensor *t)
{
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off))
        return "needs dtype, shape and data_offsets";
    uint32_t esize = 0;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof *st_dtypes; i++)
        if (!strcmp(dt->valuestring, st_dtypes[i].name)) {
            esize = st_dtypes[i].size;
            t->type = st_dtypes[i].type;
            snprintf(t->dtype, sizeof t->dtype, "%s", st_dtypes[i].name);
        }
    if (!esize) return "unknown dtype";
    int nd = cJSON_GetArraySize(sh);
    if (nd > 8) return "more than 8 dimensions";
    t->n_dims = (uint32_t)nd;
    uint64_t numel = 1;
    for (int i = 0; i < nd; i++) {
        uint64_t d;
        if (!hc_json_index(cJSON_GetArrayItem(sh, i), U53, &d)) return "shape is not a list of non-negative integers";
        if (__builtin_mul_overflow(numel, d, &numel)) return "shape overflows";
        t->shape[i] = (int64_t)d;
    }
    uint64_t b, end, nbytes;
    if (cJSON_GetArraySize(off) != 2 || !hc_json_index(cJSON_GetArrayItem(off, 0), U53, &b) ||
        !hc_json_index(cJSON_GetArrayItem(off, 1), U53, &end) || b > end)
        return "data_offsets is not [begin, end]";
    if (end > data_size) return "data_offsets run past the end of the file";
    if (__builtin_mul_overflow(numel, (uint64_t)esize, &nbytes) || nbytes != end - b)
        return "byte size does not match dtype x shape";
    t->data = data + b;
    t->nbytes = nbytes;
    return NULL;
}

int st_add_file(st_set *s, const char *path, const char *prefix, char *err, size_t errlen)
{
    hc_map m;
    if (hc_map_open(&m, path, err, errlen)) return -1;
    uint64_t hlen = 0;
    if (m.size >= 8) memcpy(&hlen, m.data, 8);
    if (m.size < 8 || hlen > ST_MAX_HEADER || hlen > m.size - 8) {
        snprintf(err, errlen, "%s: not a safetensors file (header length %llu, file %zu bytes)",
                 path, (unsigned long long)hlen, m.size);
        hc_map_close(&m);
        return -1;
    }
    char why[64];
    cJSON *root = hc_json_parse((const char *)m.data + 8, (size_t)hlen, why, sizeof why);
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "%s: safetensors header: %s", path, root ? "not a JSON object" : why);
        cJSON_Delete(root);
        hc_map_close(&m);
        return -1;
    }
    const uint8_t *data = m.data + 8 + hlen;
    const uint64_t data_size = m.size - 8 - hlen;
    const size_t first = s->n, file = s->n_files;
    int n = cJSON_GetArraySize(root);
    s->t = realloc(s->t, (s->n + (size_t)n + 1) * sizeof *s->t);
    s->maps = realloc(s->maps, (s->n_files + 1) * sizeof *s->maps);
    s->paths = realloc(s->paths, (s->n_files + 1) * sizeof *s->paths);
    if (!s->t || !s->maps || !s->paths) hc_die("out of memory");
    s->maps[file] = m;
    s->paths[file] = strdup(path);
    s->n_files++;

    int rc = 0;
    for (const cJSON *e = root->child; e && !rc; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) continue;
        st_tensor *t = &s->t[s->n];
        memset(t, 0, sizeof *t);
        const char *why = parse_entry(e, data, data_size, t);
        if (why) {
            snprintf(err, errlen, "%s: tensor '%s': %s", path, e->string, why);
            rc = -1;
        } else {
            t->name = malloc(strlen(prefix) + strlen(e->string) + 1);
            if (!t->name) hc_die("out of memory");
            strcpy(stpcpy(t->name, prefix), e->string);
            t->file = file;
            s->n++;
        }
    }
    cJSON_Delete(root);
    if (rc) return -1;
    return index_names(s, path, err, errlen) || check_overlaps(s, first, path, err, errlen) ? -1 : 0;
}

long st_find(const st_set *s, const char *name)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->t[s->by_name[mid]].name, name);
        if (c == 0) return (long)s->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

void st_free(st_set *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->t[i].name);
    for (size_t i = 0; i < s->n_files; i++) {
        hc_map_close(&s->maps[i]);
        free(s->paths[i]);
    }
    free(s->t);
    free(s->by_name);
    free(s->maps);
    free(s->paths);
    memset(s, 0, sizeof *s);
}

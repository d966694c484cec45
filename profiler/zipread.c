#include "zipread.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <zip.h>

struct hc_zip {
    zip_t *za;
    const char *name;   /* the caller's, for messages */
    hc_zip_entry *e;
    size_t n;
};

__attribute__((format(printf, 3, 4))) static void *fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return NULL;
}

/* libzip's error codes in the words of our messages (libzip 1.7 gives no details) */
static const char *why(zip_error_t *ze)
{
    switch (zip_error_code_zip(ze)) {
    case ZIP_ER_NOZIP: return "not a zip archive (no end of central directory), or an entry's local header is missing or out of place";
    case ZIP_ER_INCONS: return "inconsistent zip archive (a local header, size, count or offset disagrees)";
    case ZIP_ER_EXISTS: return "an entry name appears twice";
    case ZIP_ER_CRC: return "CRC mismatch (data is corrupt)";
    case ZIP_ER_NOPASSWD: return "encrypted entries are not supported";
    case ZIP_ER_ZLIB: case ZIP_ER_COMPRESSED_DATA: return "deflate data is corrupt";
    default: return zip_error_strerror(ze);
    }
}

hc_zip *hc_zip_open_mem(const void *buf, size_t size, const char *name, char *err, size_t errlen)
{
    hc_zip *z = calloc(1, sizeof *z);
    if (!z) return fail(err, errlen, "%s: out of memory", name);
    z->name = name;
    zip_error_t ze;
    zip_error_init(&ze);
    if (size == 0) zip_error_set(&ze, ZIP_ER_NOZIP, 0);   /* libzip takes an empty file for an empty archive */
    zip_source_t *src = size ? zip_source_buffer_create(buf, size, 0, &ze) : NULL;
    if (src && !(z->za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze))) zip_source_free(src);
    if (!z->za) fail(err, errlen, "%s: %s", name, why(&ze));
    zip_error_fini(&ze);
    zip_int64_t n = z->za ? zip_get_num_entries(z->za, 0) : -1;
    if (n >= 0 && !(z->e = calloc(n ? (size_t)n : 1, sizeof *z->e))) fail(err, errlen, "%s: out of memory", name);
    for (zip_stat_t st; z->e && z->n < (size_t)n; z->n++) {
        if (zip_stat_index(z->za, z->n, 0, &st) != 0) { fail(err, errlen, "%s: %s", name, why(zip_get_error(z->za))); break; }
        z->e[z->n] = (hc_zip_entry){ st.name, st.comp_method, st.comp_size, st.size };
    }
    if (z->e && z->n == (size_t)n) return z;
    hc_zip_close(z);
    return NULL;
}

void hc_zip_close(hc_zip *z)
{
    if (!z) return;
    zip_discard(z->za);
    free(z->e);
    free(z);
}

size_t hc_zip_count(const hc_zip *z) { return z->n; }
const hc_zip_entry *hc_zip_entry_at(const hc_zip *z, size_t i) { return i < z->n ? &z->e[i] : NULL; }
long hc_zip_find(const hc_zip *z, const char *name) { return (long)zip_name_locate(z->za, name, 0); }

void *hc_zip_read(const hc_zip *z, size_t i, uint64_t max, size_t *len, char *err, size_t errlen)
{
    const hc_zip_entry *e = &z->e[i];
    if (e->method != ZIP_CM_STORE && e->method != ZIP_CM_DEFLATE)
        return fail(err, errlen, "%s: entry '%s': compression method %u is not supported (only stored and deflate)", z->name,
                    e->name, e->method);
    if (e->usize > max || e->usize >= SIZE_MAX)
        return fail(err, errlen, "%s: entry '%s' declares %llu bytes, more than the %llu it may hold", z->name, e->name,
                    (unsigned long long)e->usize, (unsigned long long)max);
    uint8_t *out = malloc((size_t)e->usize + 1);
    if (!out) return fail(err, errlen, "%s: entry '%s': out of memory", z->name, e->name);
    zip_file_t *f = zip_fopen_index(z->za, i, 0);
    if (!f) { free(out); return fail(err, errlen, "%s: entry '%s': %s", z->name, e->name, why(zip_get_error(z->za))); }
    /* Ask for a byte more than declared: more is refused without inflating the rest; reaching the end
     * has libzip check the CRC and the size (an error after some data shows on the next call). */
    uint64_t got = 0;
    zip_int64_t r;
    while ((r = zip_fread(f, out + got, e->usize + 1 - got)) > 0 && (got += (uint64_t)r) <= e->usize) {}
    const char *bad = r < 0 ? why(zip_file_get_error(f)) : got > e->usize ? "more data than declared"
                    : got < e->usize ? "less data than declared" : NULL;
    if (bad) fail(err, errlen, "%s: entry '%s' of %llu bytes: %s", z->name, e->name, (unsigned long long)e->usize, bad);
    zip_fclose(f);
    if (bad) { free(out); return NULL; }
    out[got] = 0;
    if (len) *len = (size_t)got;
    return out;
}

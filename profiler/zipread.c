#include "zipread.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cli.h"

#define SIG_LOCAL   0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD    0x06054b50u
#define SIG_EOCD64  0x06064b50u
#define SIG_LOC64   0x07064b50u
#define SAT16 0xffffu
#define SAT32 0xffffffffu
/* deflate never compresses better than about 1032:1, so a larger declared
 * size is a lie (or a bomb) and is refused before allocating */
#define MAX_DEFLATE_RATIO 1032u

struct hc_zip {
    const uint8_t *buf;
    size_t size;
    char *name;
    hc_zip_entry *e;
    size_t n;
    size_t *sorted;     /* entry indices sorted by name, for lookup */
    hc_map map;         /* mapping to unmap (hc_zip_open), else empty */
};

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static void *fail(char *err, size_t errlen, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void *fail(char *err, size_t errlen, const char *name, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(err, errlen, "%s: ", name);
    if (n < 0 || (size_t)n >= errlen) return NULL;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return NULL;
}

/* [off, off+len) lies inside [0, end) */
static int fits(uint64_t off, uint64_t len, uint64_t end) { return off <= end && len <= end - off; }

static int cmp_names(const void *a, const void *b, void *zip)
{
    const hc_zip *z = zip;
    return strcmp(z->e[*(const size_t *)a].name, z->e[*(const size_t *)b].name);
}

/* Replace saturated 32-bit fields by their values in the zip64 extra field (id 1). */
static int zip64_extra(const uint8_t *x, size_t xlen, uint64_t *usize, uint64_t *csize, uint64_t *off)
{
    uint64_t *want[3] = { *usize == SAT32 ? usize : NULL, *csize == SAT32 ? csize : NULL,
                          *off == SAT32 ? off : NULL };
    if (!want[0] && !want[1] && !want[2]) return 0;
    for (size_t p = 0; p + 4 <= xlen;) {
        uint16_t id = rd16(x + p), len = rd16(x + p + 2);
        if (len > xlen - p - 4) return -1;
        if (id == 1) {
            size_t q = p + 4, end = q + len;
            for (int k = 0; k < 3; k++) {
                if (!want[k]) continue;
                if (q + 8 > end) return -1;
                *want[k] = rd64(x + q);
                q += 8;
            }
            return 0;
        }
        p += 4 + (size_t)len;
    }
    return -1;
}

/* Check entry e's local header against the central directory and set its data offset. */
static int check_local(hc_zip *z, hc_zip_entry *e, uint64_t off, uint64_t data_end, char *err, size_t errlen)
{
    const uint8_t *b = z->buf;
    if (!fits(off, 30, data_end) || rd32(b + off) != SIG_LOCAL) {
        fail(err, errlen, z->name, "entry '%s': no local header at offset %llu", e->name, (unsigned long long)off);
        return -1;
    }
    uint16_t flags = rd16(b + off + 6), method = rd16(b + off + 8);
    uint16_t nlen = rd16(b + off + 26), xlen = rd16(b + off + 28);
    if (!fits(off + 30, (uint64_t)nlen + xlen, data_end) || nlen != strlen(e->name) ||
        memcmp(b + off + 30, e->name, nlen) != 0) {
        fail(err, errlen, z->name, "entry '%s': local header at offset %llu names another file",
             e->name, (unsigned long long)off);
        return -1;
    }
    if (method != e->method || (!(flags & 8) && rd32(b + off + 14) != e->crc32)) {
        fail(err, errlen, z->name, "entry '%s': local header disagrees with the central directory", e->name);
        return -1;
    }
    e->data_offset = off + 30 + nlen + xlen;
    if (!fits(e->data_offset, e->csize, data_end)) {
        fail(err, errlen, z->name, "entry '%s': %llu bytes at offset %llu run past the entry area",
             e->name, (unsigned long long)e->csize, (unsigned long long)e->data_offset);
        return -1;
    }
    return 0;
}

static int parse_central(hc_zip *z, uint64_t cd_off, uint64_t cd_size, uint64_t count, char *err, size_t errlen)
{
    const uint8_t *b = z->buf;
    uint64_t p = cd_off, end = cd_off + cd_size;
    if (count > cd_size / 46) {
        fail(err, errlen, z->name, "central directory of %llu bytes cannot hold %llu entries",
             (unsigned long long)cd_size, (unsigned long long)count);
        return -1;
    }
    z->e = calloc(count ? count : 1, sizeof *z->e);
    z->sorted = malloc((count ? count : 1) * sizeof *z->sorted);
    if (!z->e || !z->sorted) { fail(err, errlen, z->name, "out of memory"); return -1; }
    for (uint64_t i = 0; i < count; i++) {
        if (!fits(p, 46, end) || rd32(b + p) != SIG_CENTRAL) {
            fail(err, errlen, z->name, "central directory entry %llu at offset %llu is damaged",
                 (unsigned long long)i, (unsigned long long)p);
            return -1;
        }
        uint16_t flags = rd16(b + p + 8), method = rd16(b + p + 10);
        uint16_t nlen = rd16(b + p + 28), xlen = rd16(b + p + 30), clen = rd16(b + p + 32);
        uint64_t csize = rd32(b + p + 20), usize = rd32(b + p + 24), loc = rd32(b + p + 42);
        if (!fits(p + 46, (uint64_t)nlen + xlen + clen, end)) {
            fail(err, errlen, z->name, "central directory entry %llu runs past the directory", (unsigned long long)i);
            return -1;
        }
        const char *nm = (const char *)b + p + 46;
        if (memchr(nm, 0, nlen)) {
            fail(err, errlen, z->name, "central directory entry %llu has a NUL byte in its name", (unsigned long long)i);
            return -1;
        }
        hc_zip_entry *e = &z->e[i];
        if (!(e->name = malloc((size_t)nlen + 1))) { fail(err, errlen, z->name, "out of memory"); return -1; }
        memcpy(e->name, nm, nlen);
        e->name[nlen] = 0;
        z->n = (size_t)i + 1;
        if (zip64_extra(b + p + 46 + nlen, xlen, &usize, &csize, &loc) != 0) {
            fail(err, errlen, z->name, "entry '%s': missing or short zip64 extra field", e->name);
            return -1;
        }
        if (flags & 0x41) { fail(err, errlen, z->name, "entry '%s' is encrypted", e->name); return -1; }
        if (method != 0 && method != 8) {
            fail(err, errlen, z->name, "entry '%s': compression method %u is not supported (only stored and deflate)",
                 e->name, method);
            return -1;
        }
        if ((method == 0 && csize != usize) ||
            (method == 8 && usize / MAX_DEFLATE_RATIO > csize)) {
            fail(err, errlen, z->name, "entry '%s': sizes %llu -> %llu are impossible", e->name,
                 (unsigned long long)csize, (unsigned long long)usize);
            return -1;
        }
        e->method = method;
        e->crc32 = rd32(b + p + 16);
        e->csize = csize;
        e->usize = usize;
        /* entry data lies before the central directory */
        if (check_local(z, e, loc, cd_off, err, errlen) != 0) return -1;
        p += 46 + (uint64_t)nlen + xlen + clen;
    }
    for (size_t i = 0; i < z->n; i++) z->sorted[i] = i;
    qsort_r(z->sorted, z->n, sizeof *z->sorted, cmp_names, z);
    for (size_t i = 1; i < z->n; i++)
        if (strcmp(z->e[z->sorted[i - 1]].name, z->e[z->sorted[i]].name) == 0) {
            fail(err, errlen, z->name, "entry '%s' appears twice", z->e[z->sorted[i]].name);
            return -1;
        }
    return 0;
}

hc_zip *hc_zip_open_mem(const void *buf, size_t size, const char *name, char *err, size_t errlen)
{
    const uint8_t *b = buf;
    hc_zip *z = calloc(1, sizeof *z);
    if (!z || !(z->name = strdup(name))) { free(z); return fail(err, errlen, name, "out of memory"); }
    z->buf = b;
    z->size = size;

    /* the end-of-central-directory record: last 22 bytes plus a comment of up to 64 KiB */
    size_t eocd = SIZE_MAX;
    if (size >= 22)
        for (size_t p = size - 22;; p--) {
            if (rd32(b + p) == SIG_EOCD && rd16(b + p + 20) == size - p - 22) { eocd = p; break; }
            if (p == 0 || size - p - 22 == 0xffff) break;
        }
    if (eocd == SIZE_MAX) { fail(err, errlen, name, "not a zip archive (no end of central directory)"); goto bad; }

    uint64_t count = rd16(b + eocd + 10), cd_size = rd32(b + eocd + 12), cd_off = rd32(b + eocd + 16);
    uint64_t cd_limit = eocd;   /* the directory ends where the end records start */
    if (rd16(b + eocd + 4) != 0 || rd16(b + eocd + 6) != 0 || rd16(b + eocd + 8) != rd16(b + eocd + 10)) {
        fail(err, errlen, name, "multi-disk archives are not supported");
        goto bad;
    }
    if (eocd >= 20 && rd32(b + eocd - 20) == SIG_LOC64) {
        uint64_t r = rd64(b + eocd - 12);
        if (!fits(r, 56, eocd - 20) || rd32(b + r) != SIG_EOCD64) {
            fail(err, errlen, name, "zip64 end of central directory at offset %llu is damaged", (unsigned long long)r);
            goto bad;
        }
        if (rd32(b + r + 16) != 0 || rd32(b + r + 20) != 0 || rd64(b + r + 24) != rd64(b + r + 32)) {
            fail(err, errlen, name, "multi-disk archives are not supported");
            goto bad;
        }
        count = rd64(b + r + 32);
        cd_size = rd64(b + r + 40);
        cd_off = rd64(b + r + 48);
        cd_limit = r;
    } else if (count == SAT16 || cd_size == SAT32 || cd_off == SAT32) {
        fail(err, errlen, name, "zip64 sizes without a zip64 end of central directory");
        goto bad;
    }
    if (!fits(cd_off, cd_size, cd_limit)) {
        fail(err, errlen, name, "central directory (%llu bytes at offset %llu) lies outside the file",
             (unsigned long long)cd_size, (unsigned long long)cd_off);
        goto bad;
    }
    if (parse_central(z, cd_off, cd_size, count, err, errlen) != 0) goto bad;
    return z;
bad:
    hc_zip_close(z);
    return NULL;
}

hc_zip *hc_zip_open(const char *path, char *err, size_t errlen)
{
    hc_map m;
    if (hc_map_open(&m, path, err, errlen)) return NULL;
    hc_zip *z = hc_zip_open_mem(m.data, m.size, path, err, errlen);
    if (!z) {
        hc_map_close(&m);
        return NULL;
    }
    z->map = m;
    return z;
}

void hc_zip_close(hc_zip *z)
{
    if (!z) return;
    for (size_t i = 0; i < z->n; i++) free(z->e[i].name);
    free(z->e);
    free(z->sorted);
    hc_map_close(&z->map);
    free(z->name);
    free(z);
}

size_t hc_zip_count(const hc_zip *z) { return z->n; }
const hc_zip_entry *hc_zip_entry_at(const hc_zip *z, size_t i) { return i < z->n ? &z->e[i] : NULL; }

long hc_zip_find(const hc_zip *z, const char *name)
{
    size_t lo = 0, hi = z->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(z->e[z->sorted[mid]].name, name);
        if (c == 0) return (long)z->sorted[mid];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

void *hc_zip_read(const hc_zip *z, size_t i, uint64_t max, size_t *len, char *err, size_t errlen)
{
    if (i >= z->n) return fail(err, errlen, z->name, "no entry %zu", i);
    const hc_zip_entry *e = &z->e[i];
    if (e->usize > max)
        return fail(err, errlen, z->name, "entry '%s' declares %llu bytes, more than the %llu it may hold", e->name,
                    (unsigned long long)e->usize, (unsigned long long)max);
    if (e->usize >= SIZE_MAX) return fail(err, errlen, z->name, "entry '%s' is too large", e->name);
    uint8_t *out = malloc((size_t)e->usize + 1);
    if (!out) return fail(err, errlen, z->name, "entry '%s': out of memory for %llu bytes", e->name,
                          (unsigned long long)e->usize);
    const uint8_t *src = z->buf + e->data_offset;
    if (e->method == 0) {
        memcpy(out, src, (size_t)e->usize);
    } else {
        /* raw deflate; the sizes are 64-bit, zlib's counters 32-bit: feed in chunks */
        z_stream s;
        memset(&s, 0, sizeof s);
        if (inflateInit2(&s, -MAX_WBITS) != Z_OK) { free(out); return fail(err, errlen, z->name, "zlib init failed"); }
        uint64_t in_left = e->csize, out_left = e->usize;
        s.next_in = (Bytef *)src;
        s.next_out = out;
        int rc = Z_OK;
        while (rc == Z_OK) {
            if (s.avail_in == 0) { s.avail_in = in_left > SAT32 ? SAT32 : (uInt)in_left; in_left -= s.avail_in; }
            if (s.avail_out == 0) { s.avail_out = out_left > SAT32 ? SAT32 : (uInt)out_left; out_left -= s.avail_out; }
            rc = inflate(&s, Z_NO_FLUSH);   /* Z_BUF_ERROR: input ran out or output is full */
        }
        int ok = rc == Z_STREAM_END && s.avail_out == 0 && out_left == 0;
        inflateEnd(&s);
        if (!ok) {
            free(out);
            return fail(err, errlen, z->name, "entry '%s': deflate data is corrupt or does not hold %llu bytes",
                        e->name, (unsigned long long)e->usize);
        }
    }
    uLong crc = crc32(0L, Z_NULL, 0);
    for (uint64_t p = 0; p < e->usize;) {
        uInt k = e->usize - p > SAT32 ? SAT32 : (uInt)(e->usize - p);
        crc = crc32(crc, out + p, k);
        p += k;
    }
    if ((uint32_t)crc != e->crc32) {
        free(out);
        return fail(err, errlen, z->name, "entry '%s': CRC mismatch (data is corrupt)", e->name);
    }
    out[e->usize] = 0;
    if (len) *len = (size_t)e->usize;
    return out;
}

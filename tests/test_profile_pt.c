/* Zip reader (libzip underneath), torch pickle reader, .pt tensors and hc-profile import-powerinfer.
 * The archives are built here byte by byte as torch.save writes them
 * (stored entries, or deflated with zlib; optional zip64 records). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "harness.h"
#include "pickle.h"
#include "ptfile.h"
#include "stats.h"
#include "zipread.h"

/* ------------------------------------------------------------ byte buffers */

typedef struct { uint8_t *p; size_t n, cap; } buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put8(buf *b, unsigned v) { uint8_t x = (uint8_t)v; put(b, &x, 1); }
static void put16(buf *b, unsigned v) { put8(b, v & 0xff); put8(b, v >> 8 & 0xff); }
static void put32(buf *b, uint32_t v) { put16(b, v & 0xffff); put16(b, v >> 16); }
static void put64(buf *b, uint64_t v) { put32(b, (uint32_t)v); put32(b, (uint32_t)(v >> 32)); }
static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }
static void wr32(uint8_t *p, uint32_t v) { for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> 8 * k); }

/* ------------------------------------------------------------ zip writer */

typedef struct {
    const char *name;
    const void *data;
    size_t len;
    int deflate;      /* 0 stored, 1 deflated, RAW: data is a buf of raw deflate data, len what it declares */
} entry;

enum { Z_PLAIN = 0, Z_ZIP64 = 1 };
enum { RAW = 2 };

/* A zip of the entries; zip64: saturated EOCD + zip64 records, and sizes of
 * the central entries moved into zip64 extra fields. */
static buf zip_build(const entry *e, int n, int zip64)
{
    buf z = { 0 }, cd = { 0 };
    for (int i = 0; i < n; i++) {
        buf data = { 0 };
        if (e[i].deflate == RAW) {
            const buf *raw = e[i].data;
            put(&data, raw->p, raw->n);
        } else if (e[i].deflate) {
            z_stream s = { 0 };
            deflateInit2(&s, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
            uLong bound = deflateBound(&s, (uLong)e[i].len);
            data.p = malloc(bound);
            s.next_in = (Bytef *)e[i].data;
            s.avail_in = (uInt)e[i].len;
            s.next_out = data.p;
            s.avail_out = (uInt)bound;
            deflate(&s, Z_FINISH);
            data.n = s.total_out;
            deflateEnd(&s);
        } else {
            put(&data, e[i].data, e[i].len);
        }
        uint32_t crc = e[i].deflate == RAW ? 0 : (uint32_t)crc32(0, e[i].data, (uInt)e[i].len);
        uint32_t off = (uint32_t)z.n;
        size_t nl = strlen(e[i].name);
        put32(&z, 0x04034b50); put16(&z, 20); put16(&z, 0); put16(&z, e[i].deflate ? 8 : 0);
        put32(&z, 0); put32(&z, crc); put32(&z, (uint32_t)data.n); put32(&z, (uint32_t)e[i].len);
        put16(&z, (unsigned)nl); put16(&z, 4);
        puts_(&z, e[i].name);
        put16(&z, 0x4246); put16(&z, 0);   /* an empty "FB" padding field, as torch adds */
        if (data.n) put(&z, data.p, data.n);
        free(data.p);

        put32(&cd, 0x02014b50); put16(&cd, 45); put16(&cd, 20); put16(&cd, 0);
        put16(&cd, e[i].deflate ? 8 : 0); put32(&cd, 0); put32(&cd, crc);
        put32(&cd, zip64 ? 0xffffffffu : (uint32_t)data.n);
        put32(&cd, zip64 ? 0xffffffffu : (uint32_t)e[i].len);
        put16(&cd, (unsigned)nl); put16(&cd, zip64 ? 28 : 0); put16(&cd, 0);
        put16(&cd, 0); put16(&cd, 0); put32(&cd, 0);
        put32(&cd, zip64 ? 0xffffffffu : off);
        puts_(&cd, e[i].name);
        if (zip64) { put16(&cd, 1); put16(&cd, 24); put64(&cd, e[i].len); put64(&cd, data.n); put64(&cd, off); }
    }
    uint64_t cd_off = z.n;
    put(&z, cd.p, cd.n);
    if (zip64) {
        uint64_t r = z.n;
        put32(&z, 0x06064b50); put64(&z, 44); put16(&z, 45); put16(&z, 45); put32(&z, 0); put32(&z, 0);
        put64(&z, (uint64_t)n); put64(&z, (uint64_t)n); put64(&z, cd.n); put64(&z, cd_off);
        put32(&z, 0x07064b50); put32(&z, 0); put64(&z, r); put32(&z, 1);
    }
    put32(&z, 0x06054b50); put16(&z, 0); put16(&z, 0);
    put16(&z, zip64 ? 0xffff : (unsigned)n); put16(&z, zip64 ? 0xffff : (unsigned)n);
    put32(&z, zip64 ? 0xffffffffu : (uint32_t)cd.n); put32(&z, zip64 ? 0xffffffffu : (uint32_t)cd_off);
    put16(&z, 0);
    free(cd.p);
    return z;
}

/* ------------------------------------------------------------ torch pickle */

static void memo(buf *b, unsigned *k) { put8(b, 'q'); put8(b, (*k)++); }
static void binunicode(buf *b, const char *s) { put8(b, 'X'); put32(b, (uint32_t)strlen(s)); puts_(b, s); }
static void pint(buf *b, int64_t v)
{
    if (v >= 0 && v < 256) { put8(b, 'K'); put8(b, (unsigned)v); }
    else if (v >= 0 && v < 65536) { put8(b, 'M'); put16(b, (unsigned)v); }
    else if (v >= INT32_MIN && v <= INT32_MAX) { put8(b, 'J'); put32(b, (uint32_t)v); }
    else { put8(b, 0x8a); put8(b, 8); put64(b, (uint64_t)v); }
}

/* Exactly what torch.save writes for one tensor (protocol 2, memoized). */
static buf torch_pickle(const char *storage, int64_t numel, int64_t offset, int ndim, const int64_t *shape,
                        const int64_t *stride)
{
    buf b = { 0 };
    unsigned k = 0;
    put8(&b, 0x80); put8(&b, 2);
    put8(&b, 'c'); puts_(&b, "torch._utils\n_rebuild_tensor_v2\n"); memo(&b, &k);
    put8(&b, '('); put8(&b, '(');
    binunicode(&b, "storage"); memo(&b, &k);
    put8(&b, 'c'); puts_(&b, "torch\n"); puts_(&b, storage); put8(&b, '\n'); memo(&b, &k);
    binunicode(&b, "0"); memo(&b, &k);
    binunicode(&b, "cpu"); memo(&b, &k);
    pint(&b, numel);
    put8(&b, 't'); memo(&b, &k);
    put8(&b, 'Q');
    pint(&b, offset);
    for (int pass = 0; pass < 2; pass++) {
        const int64_t *v = pass ? stride : shape;
        if (ndim == 0) put8(&b, ')');
        else if (ndim <= 3) { for (int d = 0; d < ndim; d++) pint(&b, v[d]); put8(&b, 0x84 + (unsigned)ndim); }
        else { put8(&b, '('); for (int d = 0; d < ndim; d++) pint(&b, v[d]); put8(&b, 't'); }
        memo(&b, &k);
    }
    put8(&b, 0x89);
    put8(&b, 'c'); puts_(&b, "collections\nOrderedDict\n"); memo(&b, &k);
    put8(&b, ')'); put8(&b, 'R'); memo(&b, &k);
    put8(&b, 't'); memo(&b, &k);
    put8(&b, 'R'); memo(&b, &k);
    put8(&b, '.');
    return b;
}

/* A .pt archive of a 1-D tensor of n elements from storage bytes (esize each). */
static buf pt_build(const char *prefix, const char *storage, const void *data, int64_t numel, int esize,
                    int64_t n, int64_t offset, int64_t stride, int deflate, int zip64)
{
    int64_t shape[1] = { n }, st[1] = { stride };
    buf pk = torch_pickle(storage, numel, offset, 1, shape, st);
    char names[4][128];
    snprintf(names[0], 128, "%s/data.pkl", prefix);
    snprintf(names[1], 128, "%s/byteorder", prefix);
    snprintf(names[2], 128, "%s/data/0", prefix);
    snprintf(names[3], 128, "%s/version", prefix);
    entry e[4] = { { names[0], pk.p, pk.n, deflate }, { names[1], "little", 6, 0 },
                   { names[2], data, (size_t)numel * (size_t)esize, deflate }, { names[3], "3\n", 2, 0 } };
    buf z = zip_build(e, 4, zip64);
    free(pk.p);
    return z;
}

static buf pt_floats(const float *v, int64_t n, int deflate)
{
    return pt_build("archive", "FloatStorage", v, n, 4, n, 0, 1, deflate, Z_PLAIN);
}

/* ------------------------------------------------------------ zip tests */

static char err[512];

static void test_zip_stored_and_deflated(void)
{
    char big[5000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 7);
    for (int zip64 = 0; zip64 < 2; zip64++) {
        entry e[3] = { { "a/x.txt", "hello", 5, 0 }, { "a/big", big, sizeof big, 1 }, { "a/empty", "", 0, 1 } };
        buf z = zip_build(e, 3, zip64);
        hc_zip *zr = hc_zip_open_mem(z.p, z.n, "t.zip", err, sizeof err);
        CHECKF(zr, "%s", err);
        CHECK(hc_zip_count(zr) == 3);
        CHECK(hc_zip_find(zr, "a/big") == 1 && hc_zip_find(zr, "a/x.txt") == 0 && hc_zip_find(zr, "nope") == -1);
        CHECK(hc_zip_entry_at(zr, 1)->method == 8 && hc_zip_entry_at(zr, 1)->csize < sizeof big);
        size_t len;
        char *d = hc_zip_read(zr, 0, UINT64_MAX, &len, err, sizeof err);
        CHECK(d && len == 5 && memcmp(d, "hello", 5) == 0 && d[5] == 0);
        free(d);
        d = hc_zip_read(zr, 1, UINT64_MAX, &len, err, sizeof err);
        CHECKF(d && len == sizeof big && memcmp(d, big, len) == 0, "%s", err);
        free(d);
        d = hc_zip_read(zr, 2, UINT64_MAX, &len, err, sizeof err);
        CHECKF(d && len == 0, "%s", err);
        free(d);
        hc_zip_close(zr);
        free(z.p);
    }
}

/* Open (and read every entry of, up to 1 MiB each) a damaged archive: must fail mentioning `want`. */
static int zip_fails(const uint8_t *p, size_t n, const char *want)
{
    hc_zip *z = hc_zip_open_mem(p, n, "bad.zip", err, sizeof err);
    for (size_t i = 0; z && i < hc_zip_count(z); i++) {
        size_t len;
        void *d = hc_zip_read(z, i, 1 << 20, &len, err, sizeof err);
        if (!d) { hc_zip_close(z); z = NULL; break; }
        free(d);
    }
    if (z) { hc_zip_close(z); snprintf(err, sizeof err, "(accepted)"); return 0; }
    return strstr(err, want) != NULL && strncmp(err, "bad.zip: ", 9) == 0;
}

static void test_zip_corrupt(void)
{
    char big[3000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)(i * 7 % 13);
    entry e[2] = { { "d/s", "stored!", 7, 0 }, { "d/z", big, sizeof big, 1 } };
    buf z = zip_build(e, 2, Z_PLAIN);
    uint8_t *c = malloc(z.n);
    size_t loc1 = 30 + 3 + 4 + 7;                     /* second local header */
    size_t cd = z.n - 22 - 2 * (46 + 3);              /* central directory */
#define MUT(what, stmt, want) do { memcpy(c, z.p, z.n); stmt; CHECKF(zip_fails(c, z.n, want), "%s: %s", what, err); } while (0)
    /* the same 16-, 32-bit field of entry k in its local header and in the central directory */
#define BOTH16(k, field, v) (c[(k ? loc1 : 0) + 8 + field - 10] = (uint8_t)(v), c[cd + k * 49 + field] = (uint8_t)(v))
#define BOTH32(k, field, v) (wr32(c + (k ? loc1 : 0) + 8 + field - 10, v), wr32(c + cd + k * 49 + field, v))
    CHECK(zip_fails(z.p, z.n - 1, "no end of central directory"));
    CHECK(zip_fails(z.p, 10, "not a zip"));
    CHECK(zip_fails(z.p, 0, "not a zip"));
    MUT("stored byte", c[30 + 3 + 4] ^= 1, "entry 'd/s' of 7 bytes: CRC mismatch");
    MUT("deflate byte", c[loc1 + 30 + 3 + 4 + 5] ^= 0x55, "d/z");
    MUT("deflate crc", BOTH32(1, 16, 0x12345678), "entry 'd/z' of 3000 bytes: CRC mismatch");
    MUT("local sig", c[loc1] = 'X', "local header is missing");
    MUT("method", c[cd + 10] = 12, "inconsistent");
    MUT("method both", BOTH16(0, 10, 12), "entry 'd/s': compression method 12 is not supported");
    MUT("encrypted", c[cd + 8] |= 1, "encrypted");
    MUT("bomb", (c[cd + 46 + 3 + 24 + 3] = 0x7f), "inconsistent");
    MUT("bomb both", BOTH32(1, 24, 0x7f000bb8), "entry 'd/z' declares 2130709432 bytes, more than the 1048576");
    MUT("longer", BOTH32(1, 24, 2000), "entry 'd/z' of 2000 bytes: more data than declared");
    MUT("shorter", BOTH32(1, 24, 3100), "entry 'd/z' of 3100 bytes: less data than declared");
    MUT("no data", BOTH32(0, 20, 0), "entry 'd/s' of 7 bytes: less data than declared");
    MUT("stored sizes", c[cd + 20] = 9, "inconsistent");
    MUT("stored sizes both", (BOTH32(0, 20, 9), BOTH32(0, 24, 9)), "entry 'd/s' of 9 bytes: CRC mismatch");
    MUT("past the directory", BOTH32(1, 20, 4000), "local header is missing or out of place");
    MUT("cd offset", c[z.n - 4] = 0x10, "inconsistent");
    MUT("entry count", (c[z.n - 14] = 3, c[z.n - 12] = 3), "inconsistent");
    MUT("name len", c[cd + 28] = 200, "inconsistent");
    MUT("dup name", (c[cd + 2 * 46 + 3 + 2] = 's', c[loc1 + 30 + 2] = 's'), "an entry name appears twice");
    MUT("local name", c[30 + 2] = 'q', "inconsistent");
    MUT("local offset", c[cd + 46 + 3 + 42] = 1, "local header is missing");
#undef BOTH32
#undef BOTH16
#undef MUT
    free(c);
    free(z.p);
}

/* 1 GiB of zeros as raw deflate data of about 1 MB: 1 MiB deflated after a full
 * flush refers to nothing before it, so it can repeat; then a last, empty block. */
static buf gib_of_zeros(void)
{
    static uint8_t zeros[1 << 20];
    uint8_t chunk[4096];
    z_stream s = { 0 };
    deflateInit2(&s, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    s.next_in = zeros;
    s.avail_in = sizeof zeros;
    s.next_out = chunk;
    s.avail_out = sizeof chunk;
    deflate(&s, Z_FULL_FLUSH);
    size_t n = sizeof chunk - s.avail_out;
    deflateEnd(&s);
    buf b = { 0 };
    for (int i = 0; i < 1024; i++) put(&b, chunk, n);
    put8(&b, 3); put8(&b, 0);
    return b;
}

/* A zip bomb is read no further than the size it declares (and the caller
 * allows): an entry declaring 256 bytes inflates 257 and is refused. */
static void test_zip_bomb(void)
{
    buf bomb = gib_of_zeros();
    CHECKF(bomb.n < 1100000, "%zu bytes", bomb.n);
    entry e[2] = { { "b/small", &bomb, 256, RAW }, { "b/huge", &bomb, (size_t)1 << 30, RAW } };
    buf z = zip_build(e, 2, Z_PLAIN);
    hc_zip *zr = hc_zip_open_mem(z.p, z.n, "bomb.zip", err, sizeof err);
    CHECKF(zr, "%s", err);
    size_t len;
    CHECK(!hc_zip_read(zr, 0, 256, &len, err, sizeof err));
    CHECKF(strcmp(err, "bomb.zip: entry 'b/small' of 256 bytes: more data than declared") == 0, "%s", err);
    CHECK(!hc_zip_read(zr, 1, 1 << 20, &len, err, sizeof err));
    CHECKF(strstr(err, "entry 'b/huge' declares 1073741824 bytes, more than the 1048576 it may hold"), "%s", err);
    hc_zip_close(zr);
    free(z.p);
    /* the same in a .pt: a storage of 64 floats whose data inflates to 1 GiB */
    int64_t sh[1] = { 64 }, st[1] = { 1 };
    buf pk = torch_pickle("FloatStorage", 64, 0, 1, sh, st);
    entry pe[2] = { { "a/data.pkl", pk.p, pk.n, 0 }, { "a/data/0", &bomb, 256, RAW } };
    int64_t n;
    z = zip_build(pe, 2, Z_PLAIN);
    CHECK(!hc_pt_read_vector_mem(z.p, z.n, "bomb.pt", 1 << 24, &n, err, sizeof err));
    CHECKF(strcmp(err, "bomb.pt: entry 'a/data/0' of 256 bytes: more data than declared") == 0, "%s", err);
    free(z.p);
    free(pk.p);
    free(bomb.p);
}

/* ------------------------------------------------------------ pickle / .pt tests */

static void test_pickle_tensor(void)
{
    int64_t shape[2] = { 3, 70000 }, stride[2] = { 70000, 1 };
    buf b = torch_pickle("HalfStorage", 210000, 5, 2, shape, stride);
    hc_pickle_tensor t;
    CHECKF(hc_pickle_tensor_read(b.p, b.n, "x/data.pkl", &t, err, sizeof err) == 0, "%s", err);
    CHECK(strcmp(t.storage_type, "HalfStorage") == 0 && strcmp(t.key, "0") == 0 && strcmp(t.location, "cpu") == 0);
    CHECK(t.storage_numel == 210000 && t.offset == 5 && t.ndim == 2 && t.requires_grad == 0);
    CHECK(t.shape[0] == 3 && t.shape[1] == 70000 && t.stride[0] == 70000 && t.stride[1] == 1);
    free(b.p);
    int64_t s5[5] = { 1, 2, 3, 4, 5 };
    b = torch_pickle("FloatStorage", 5000000000LL, 0, 5, s5, s5);   /* MARK..TUPLE, LONG1 */
    CHECKF(hc_pickle_tensor_read(b.p, b.n, "p", &t, err, sizeof err) == 0, "%s", err);
    CHECK(t.storage_numel == 5000000000LL && t.ndim == 5 && t.shape[4] == 5);
    free(b.p);
}

static int pickle_fails(const uint8_t *p, size_t n, const char *want)
{
    hc_pickle_tensor t;
    return hc_pickle_tensor_read(p, n, "p.pkl", &t, err, sizeof err) != 0 && strstr(err, want) &&
           strncmp(err, "p.pkl: offset ", 14) == 0;
}

static void test_pickle_rejects(void)
{
    int64_t sh[1] = { 4 }, st[1] = { 1 };
    buf b = torch_pickle("FloatStorage", 4, 0, 1, sh, st);
    uint8_t *c = malloc(b.n + 64);
    /* every truncation fails cleanly */
    for (size_t n = 0; n < b.n; n++) CHECKF(pickle_fails(b.p, n, ""), "truncated to %zu accepted", n);
    memcpy(c, b.p, b.n);
    c[b.n - 1] = '}';   /* EMPTY_DICT instead of STOP */
    CHECKF(pickle_fails(c, b.n, "unsupported pickle opcode 0x7d"), "%s", err);
    memcpy(c, b.p, b.n);
    c[b.n] = 0;
    CHECKF(pickle_fails(c, b.n + 1, "bytes after STOP"), "%s", err);
    /* a global that would execute code */
    buf g = { 0 };
    put8(&g, 0x80); put8(&g, 2); put8(&g, 'c'); puts_(&g, "os\nsystem\n"); put8(&g, '.');
    CHECKF(pickle_fails(g.p, g.n, "unsupported global os.system"), "%s", err);
    g.n = 2;
    put8(&g, 'c'); puts_(&g, "torch._utils\n_rebuild_tensor_v2\n"); put8(&g, ')'); put8(&g, 'R'); put8(&g, '.');
    CHECKF(pickle_fails(g.p, g.n, "_rebuild_tensor_v2 arguments"), "%s", err);
    g.n = 2;
    put8(&g, 'h'); put8(&g, 7);
    CHECKF(pickle_fails(g.p, g.n, "GET of unset memo"), "%s", err);
    free(g.p);
    free(c);
    free(b.p);
}

static void test_pt_vectors(void)
{
    float f[6] = { 0, 1, 2, 3, 4.5f, 5 };
    int64_t n;
    for (int deflate = 0; deflate < 2; deflate++) {
        buf z = pt_floats(f, 6, deflate);
        double *v = hc_pt_read_vector_mem(z.p, z.n, "a.pt", 1 << 24, &n, err, sizeof err);
        CHECKF(v && n == 6 && v[4] == 4.5 && v[5] == 5, "%s", err);
        free(v);
        free(z.p);
    }
    /* a strided view with an offset into a Long storage, zip64, old-style prefix */
    int64_t l[10] = { 0, 10, 20, 30, 40, 50, 60, 70, 80, 90 };
    buf z = pt_build("activation_3", "LongStorage", l, 10, 8, 4, 1, 2, 1, Z_ZIP64);
    double *v = hc_pt_read_vector_mem(z.p, z.n, "b.pt", 1 << 24, &n, err, sizeof err);
    CHECKF(v && n == 4 && v[0] == 10 && v[1] == 30 && v[2] == 50 && v[3] == 70, "%s", err);
    free(v);
    free(z.p);
    uint16_t h[3] = { 0x3c00, 0x4000, 0x7bff };   /* 1, 2, 65504 */
    z = pt_build("x", "HalfStorage", h, 3, 2, 3, 0, 1, 0, Z_PLAIN);
    v = hc_pt_read_vector_mem(z.p, z.n, "c.pt", 1 << 24, &n, err, sizeof err);
    CHECKF(v && n == 3 && v[0] == 1 && v[1] == 2 && v[2] == 65504, "%s", err);
    free(v);
    free(z.p);
}

static int pt_fails(buf z, const char *want)
{
    int64_t n;
    double *v = hc_pt_read_vector_mem(z.p, z.n, "bad.pt", 1 << 24, &n, err, sizeof err);
    free(v);
    free(z.p);
    return !v && strstr(err, want) && strncmp(err, "bad.pt: ", 8) == 0;
}

static void test_pt_rejects(void)
{
    float f[4] = { 1, 2, 3, 4 };
    CHECKF(pt_fails(pt_build("a", "FloatStorage", f, 4, 4, 5, 0, 1, 0, 0), "does not fit its storage"), "%s", err);
    CHECKF(pt_fails(pt_build("a", "FloatStorage", f, 4, 4, 2, 0, 4, 0, 0), "does not fit its storage"), "%s", err);
    CHECKF(pt_fails(pt_build("a", "FloatStorage", f, 4, 4, 2, 0, -1, 0, 0), "does not fit its storage"), "%s", err);
    CHECKF(pt_fails(pt_build("a", "DoubleStorage", f, 2, 4, 2, 0, 1, 0, 0), "holds 8 bytes"), "%s", err);
    CHECKF(pt_fails(pt_build("a", "ComplexFloatStorage", f, 2, 8, 2, 0, 1, 0, 0), "not supported"), "%s", err);
    int64_t sh[2] = { 2, 2 }, st[2] = { 2, 1 };
    buf pk = torch_pickle("FloatStorage", 4, 0, 2, sh, st);
    entry e[2] = { { "a/data.pkl", pk.p, pk.n, 0 }, { "a/data/0", f, 16, 0 } };
    CHECKF(pt_fails(zip_build(e, 2, 0), "expected a 1-D tensor"), "%s", err);
    free(pk.p);
    sh[0] = 4;
    st[0] = 1;
    pk = torch_pickle("FloatStorage", 4, 0, 1, sh, st);
    e[0].data = pk.p;
    e[0].len = pk.n;
    CHECK(!pt_fails(zip_build(e, 2, 0), ""));   /* this one is fine; now break it */
    e[1].name = "a/data/1";
    CHECKF(pt_fails(zip_build(e, 2, 0), "storage entry a/data/0 is missing"), "%s", err);
    entry be[3] = { e[0], { "a/data/0", f, 16, 0 }, { "a/byteorder", "big", 3, 0 } };
    CHECKF(pt_fails(zip_build(be, 3, 0), "byteorder"), "%s", err);
    entry none[1] = { { "a/other", f, 16, 0 } };
    CHECKF(pt_fails(zip_build(none, 1, 0), "no <name>/data.pkl"), "%s", err);
    free(pk.p);
    buf legacy = { 0 };
    put8(&legacy, 0x80); put8(&legacy, 2); put8(&legacy, 0x8a);
    CHECKF(pt_fails(legacy, "legacy"), "%s", err);
}

/* ------------------------------------------------------------ import-powerinfer */

static void write_pt(const char *dir, int layer, buf z)
{
    char path[600];
    snprintf(path, sizeof path, "%s/activation_%d.pt", dir, layer);
    th_write(path, z.p, z.n);
    free(z.p);
}

/* A fresh directory tmpdir/name (th_tmp's buffers rotate: keep a copy). */
static const char *mkdir_tmp(const char *name, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s", th_tmp(name));
    th_sh("rm -rf '%s' && mkdir -p '%s'", dir, dir);
    return dir;
}

static void test_import_numeric_order(void)
{
    /* 12 layers of 8 neurons; layer l's neuron j was active l*10+j times. Mixed
     * storage types and compression; PowerInfer sorts names as strings, we must not. */
    char dir[512], out[512];
    mkdir_tmp("act12", dir, sizeof dir);
    for (int l = 0; l < 12; l++) {
        if (l % 3 == 0) {
            float f[8];
            for (int j = 0; j < 8; j++) f[j] = (float)(l * 10 + j);
            write_pt(dir, l, pt_floats(f, 8, l % 2));
        } else if (l % 3 == 1) {
            int64_t v[8];
            for (int j = 0; j < 8; j++) v[j] = l * 10 + j;
            write_pt(dir, l, pt_build("archive", "LongStorage", v, 8, 8, 8, 0, 1, 1, Z_ZIP64));
        } else {
            int32_t v[8];
            for (int j = 0; j < 8; j++) v[j] = l * 10 + j;
            write_pt(dir, l, pt_build("archive", "IntStorage", v, 8, 4, 8, 0, 1, 0, Z_PLAIN));
        }
    }
    th_write(th_tmp("act12/README"), "x", 1);   /* other files are ignored */
    snprintf(out, sizeof out, "%s", th_tmp("imp12.gguf"));
    CHECKF(th_sh("%s import-powerinfer '%s' -o '%s'", th_bin("hc-profile"), dir, out) == 0, "%s", th_last_err());
    hc_stats *s = hc_stats_read(out, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK(s->n_layer == 12 && s->n_ff == 8 && s->ffn_hash == 0 && strcmp(s->activation, "relu") == 0);
    CHECK(s->n_tokens == 117);   /* unknown: the largest count */
    for (int l = 0; l < 12; l++)
        for (int j = 0; j < 8; j++) CHECKF(s->count[l * 8 + j] == l * 10 + j, "layer %d neuron %d", l, j);
    CHECK(strncmp(s->corpus, "powerinfer:act12 fnv=", 21) == 0);
    hc_stats_free(s);
    CHECK(th_sh("%s import-powerinfer '%s' --tokens 1000 -o '%s'", th_bin("hc-profile"), dir, out) == 0);
    s = hc_stats_read(out, err, sizeof err);
    CHECK(s && s->n_tokens == 1000);
    hc_stats_free(s);
    CHECK(th_sh("%s import-powerinfer '%s' --tokens 100 -o '%s.x'", th_bin("hc-profile"), dir, out) == 1);
    CHECK(strstr(th_last_err(), "more than --tokens 100"));
}

static void test_import_rejects(void)
{
    char hp[512], out[512], dir[512];
    snprintf(hp, sizeof hp, "%s", th_bin("hc-profile"));
    snprintf(out, sizeof out, "%s", th_tmp("never.gguf"));
    mkdir_tmp("actbad", dir, sizeof dir);
    float f[4] = { 1, 2, 3, 4 }, half[4] = { 0.5f, 1, 2, 3 };
    write_pt(dir, 0, pt_floats(f, 4, 0));
    write_pt(dir, 2, pt_floats(f, 4, 0));
    CHECK(th_sh("%s import-powerinfer '%s' -o '%s'", hp, dir, out) == 1);
    CHECKF(strstr(th_last_err(), "activation_1.pt is missing"), "%s", th_last_err());
    write_pt(dir, 1, pt_floats(f, 3, 0));
    CHECK(th_sh("%s import-powerinfer '%s' -o '%s'", hp, dir, out) == 1);
    CHECKF(strstr(th_last_err(), "activation_1.pt: 3 neurons"), "%s", th_last_err());
    write_pt(dir, 1, pt_floats(half, 4, 0));
    CHECK(th_sh("%s import-powerinfer '%s' -o '%s'", hp, dir, out) == 1);
    CHECKF(strstr(th_last_err(), "element 0 = 0.5 is not an activation count"), "%s", th_last_err());
    th_write(th_tmp("actbad/activation_1.pt"), "PK\3\4garbage", 11);
    CHECK(th_sh("%s import-powerinfer '%s' -o '%s'", hp, dir, out) == 1);
    const char *e = th_last_err();
    CHECKF(strncmp(e, "hc-profile: ", 12) == 0 && strstr(e, "activation_1.pt: not a zip"), "%s", e);
    CHECK(th_sh("%s import-powerinfer '%s/none' -o '%s'", hp, dir, out) == 1);
    CHECK(th_sh("test -e '%s'", out) != 0);   /* no partial output */
}

static void test_import_with_model(void)
{
    const char *model = th_fixture("stories260K.gguf");
    if (!model) SKIP("no fixtures");
    char dir[512], out[512];
    mkdir_tmp("act260k", dir, sizeof dir);
    float f[172];
    for (int j = 0; j < 172; j++) f[j] = (float)j;
    for (int l = 0; l < 5; l++) write_pt(dir, l, pt_floats(f, 172, 1));
    snprintf(out, sizeof out, "%s", th_tmp("imp260k.gguf"));
    CHECKF(th_sh("%s import-powerinfer '%s' -m '%s' -o '%s'", th_bin("hc-profile"), dir, model, out) == 0, "%s",
           th_last_err());
    hc_stats *s = hc_stats_read(out, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK(s->ffn_hash != 0 && s->n_embd == 64 && strcmp(s->arch, "llama") == 0 && s->count[4 * 172 + 171] == 171);
    hc_stats_free(s);
    write_pt(dir, 5, pt_floats(f, 172, 0));   /* one layer too many for the model */
    CHECK(th_sh("%s import-powerinfer '%s' -m '%s' -o '%s.x'", th_bin("hc-profile"), dir, model, out) == 1);
    CHECKF(strstr(th_last_err(), "activation_5.pt: layer 5, but the model has 5 layers"), "%s", th_last_err());
}

int main(void)
{
    RUN(test_zip_stored_and_deflated);
    RUN(test_zip_corrupt);
    RUN(test_zip_bomb);
    RUN(test_pickle_tensor);
    RUN(test_pickle_rejects);
    RUN(test_pt_vectors);
    RUN(test_pt_rejects);
    RUN(test_import_numeric_order);
    RUN(test_import_rejects);
    RUN(test_import_with_model);
    return th_done();
}

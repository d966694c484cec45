/* common/: fp16/bf16 conversion, hc_parse_size, hc_format_size, atomic_file, hc_read_file, hc_json_text, hc_xml_text. */
#include "harness.h"
#include "atomic_file.h"
#include "cli.h"
#include "ggml_types.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __x86_64__
#include <cpuid.h>
#include <immintrin.h>
#endif

static float f_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t u_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static void test_fp16_known_values(void)
{
    static const struct { uint32_t in; uint16_t out; } cases[] = {
        { 0x3f800000, 0x3c00 },   /* 1 */
        { 0xc0000000, 0xc000 },   /* -2 */
        { 0x00000000, 0x0000 },   /* +0 */
        { 0x80000000, 0x8000 },   /* -0 keeps its sign */
        { 0x477fe000, 0x7bff },   /* 65504, largest half */
        { 0x477fefff, 0x7bff },   /* just below the 65520 tie */
        { 0x477ff000, 0x7c00 },   /* 65520: tie, rounds to even = inf */
        { 0x7f7fffff, 0x7c00 },   /* FLT_MAX overflows to inf */
        { 0x7f800000, 0x7c00 },   /* inf */
        { 0xff800000, 0xfc00 },   /* -inf */
        { 0x7fc00000, 0x7e00 },   /* NaN */
        { 0x7f800001, 0x7e00 },   /* signalling NaN: canonical quiet NaN */
        { 0xffc00001, 0xfe00 },   /* -NaN keeps its sign */
        { 0x3f801000, 0x3c00 },   /* 1 + 2^-11: tie between 0x3c00 and 0x3c01, to even */
        { 0x3f803000, 0x3c02 },   /* 1 + 3*2^-11: tie between 0x3c01 and 0x3c02, to even */
        { 0x3f801001, 0x3c01 },   /* just above the tie */
        { 0x38800000, 0x0400 },   /* 2^-14, smallest normal */
        { 0x387fc000, 0x03ff },   /* 1023 * 2^-24, largest subnormal */
        { 0x387fe000, 0x0400 },   /* 1023.5 * 2^-24: tie, rounds up to even 0x400 */
        { 0x33800000, 0x0001 },   /* 2^-24, smallest subnormal */
        { 0x33000000, 0x0000 },   /* 2^-25: tie between 0 and 1, to even = 0 */
        { 0xb3000000, 0x8000 },   /* -2^-25 -> -0 */
        { 0x33000001, 0x0001 },   /* just above 2^-25 */
        { 0x33c00000, 0x0002 },   /* 1.5 * 2^-24: tie between 1 and 2, to even = 2 */
        { 0x34200000, 0x0002 },   /* 2.5 * 2^-24: tie between 2 and 3, to even = 2 */
        { 0x00000001, 0x0000 },   /* fp32 subnormal */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = fp32_to_fp16(f_of(cases[i].in));
        CHECKF(h == cases[i].out, "fp32 0x%08x -> 0x%04x, want 0x%04x", cases[i].in, h, cases[i].out);
    }
}

static void test_fp16_to_fp32_values(void)
{
    CHECK(fp16_to_fp32(0x3c00) == 1.0f);
    CHECK(fp16_to_fp32(0x7bff) == 65504.0f);
    CHECK(fp16_to_fp32(0x0001) == 0x1p-24f);
    CHECK(fp16_to_fp32(0x03ff) == 1023 * 0x1p-24f);
    CHECK(u_of(fp16_to_fp32(0x8000)) == 0x80000000);
    CHECK(u_of(fp16_to_fp32(0x7c00)) == 0x7f800000);
    CHECK(u_of(fp16_to_fp32(0xfc00)) == 0xff800000);
    CHECK(isnan(fp16_to_fp32(0x7e00)));
    CHECK(u_of(fp16_to_fp32(0x7c01)) == 0x7fc02000);   /* signalling NaN comes back quiet */
    /* every finite half survives the round trip exactly */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00) continue;
        uint16_t back = fp32_to_fp16(fp16_to_fp32((uint16_t)h));
        CHECKF(back == h, "half 0x%04x -> %g -> 0x%04x", h, fp16_to_fp32((uint16_t)h), back);
    }
}

#ifdef __x86_64__
/* The F16C instructions (what ggml uses on x86) as an independent reference:
 * round to nearest even, subnormals kept. They differ only in NaN payloads. */
__attribute__((target("f16c"))) static uint16_t hw_to_fp16(float f) { return (uint16_t)_cvtss_sh(f, 0); }
__attribute__((target("f16c"))) static float hw_to_fp32(uint16_t h) { return _cvtsh_ss(h); }
#endif

static void test_fp16_matches_hardware(void)
{
#ifdef __x86_64__
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_F16C)) SKIP("no F16C on this CPU");
    for (uint32_t h = 0; h < 0x10000; h++) {
        uint32_t a = u_of(fp16_to_fp32((uint16_t)h)), b = u_of(hw_to_fp32((uint16_t)h));
        CHECKF(a == b, "half 0x%04x: 0x%08x, F16C 0x%08x", h, a, b);
    }
    /* a prime stride through all 2^32 patterns covers every exponent and rounding case */
    for (uint64_t u = 0; u < (1ull << 32); u += 251) {
        float f = f_of((uint32_t)u);
        if (isnan(f)) continue;
        uint16_t a = fp32_to_fp16(f), b = hw_to_fp16(f);
        CHECKF(a == b, "fp32 0x%08x: 0x%04x, F16C 0x%04x", (uint32_t)u, a, b);
    }
#else
    SKIP("not x86-64");
#endif
}

static void test_bf16(void)
{
    static const struct { uint32_t in; uint16_t out; } cases[] = {
        { 0x3f800000, 0x3f80 },   /* 1 */
        { 0x3f808000, 0x3f80 },   /* tie, lower neighbour even */
        { 0x3f818000, 0x3f82 },   /* tie, lower neighbour odd: up */
        { 0x3f808001, 0x3f81 },   /* above the tie */
        { 0x3f807fff, 0x3f80 },   /* below the tie */
        { 0x80000000, 0x8000 },   /* -0 */
        { 0x7f800000, 0x7f80 },   /* inf */
        { 0xff800000, 0xff80 },   /* -inf */
        { 0x7f7fffff, 0x7f80 },   /* FLT_MAX rounds to inf */
        { 0x7fc00000, 0x7fc0 },   /* quiet NaN */
        { 0x7f800001, 0x7fc0 },   /* signalling NaN is quieted */
        { 0xff800001, 0xffc0 },   /* -NaN keeps its sign */
        { 0x7fa12345, 0x7fe1 },   /* payload's top bits kept, quiet bit set */
        { 0x00000001, 0x0000 },   /* subnormals round like any other value */
        { 0x00018000, 0x0002 },   /* subnormal tie, odd: up */
        { 0x00008000, 0x0000 },   /* subnormal tie, even: down */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = fp32_to_bf16(f_of(cases[i].in));
        CHECKF(h == cases[i].out, "fp32 0x%08x -> bf16 0x%04x, want 0x%04x", cases[i].in, h, cases[i].out);
    }
    CHECK(u_of(bf16_to_fp32(0x3f80)) == 0x3f800000);
    CHECK(u_of(bf16_to_fp32(0x8001)) == 0x80010000);
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) continue;   /* NaNs get quieted */
        CHECKF(fp32_to_bf16(bf16_to_fp32((uint16_t)h)) == h, "bf16 0x%04x round trip", h);
    }
}

static void test_type_table(void)
{
    CHECK(strcmp(ggml_type_name(GGML_TYPE_Q4_0), "Q4_0") == 0);
    CHECK(ggml_blck_size(GGML_TYPE_Q4_0) == 32 && ggml_type_size(GGML_TYPE_Q4_0) == sizeof(block_q4_0));
    CHECK(ggml_type_size(GGML_TYPE_Q4_1) == sizeof(block_q4_1));
    CHECK(ggml_type_size(GGML_TYPE_Q8_0) == sizeof(block_q8_0));
    CHECK(ggml_type_size(GGML_TYPE_Q8_0) == 34 && ggml_type_size(GGML_TYPE_Q6_K) == 210);
    CHECK(ggml_blck_size(GGML_TYPE_Q4_K) == 256 && ggml_type_size(GGML_TYPE_Q4_K) == 144);
    CHECK(ggml_type_size(GGML_TYPE_BF16) == 2 && ggml_type_size(GGML_TYPE_I64) == 8);
    CHECK(ggml_type_size(GGML_TYPE_F64) == 8 && ggml_type_size(GGML_TYPE_I32) == 4);
    /* removed or unknown codes */
    CHECK(ggml_type_name(4) == NULL && ggml_blck_size(4) == 0 && ggml_type_size(5) == 0);
    CHECK(ggml_type_name(GGML_TYPE_COUNT) == NULL && ggml_blck_size(1000) == 0);
    CHECK(ggml_type_from_name("q8_0") == GGML_TYPE_Q8_0);
    CHECK(ggml_type_from_name("BF16") == GGML_TYPE_BF16);
    CHECK(ggml_type_from_name("Q4_2") == -1 && ggml_type_from_name("") == -1);
    CHECK(ggml_row_size(GGML_TYPE_Q4_0, 4096) == 128 * 18);
    CHECK(ggml_row_size(GGML_TYPE_F16, 7) == 14);
    /* every named type names itself back */
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *n = ggml_type_name(t);
        if (!n) continue;
        CHECKF(ggml_type_from_name(n) == (int)t, "%s", n);
        CHECKF(ggml_blck_size(t) && ggml_type_size(t), "%s has no size", n);
    }
}

static void test_parse_size(void)
{
    static const struct { const char *s; uint64_t v; } good[] = {
        { "0", 0 }, { "123", 123 }, { "123B", 123 }, { "4K", 4096 }, { "4KiB", 4096 }, { "4KB", 4000 },
        { "512M", 512ull << 20 }, { "512MB", 512000000ull }, { "4G", 4ull << 30 }, { "4GiB", 4ull << 30 },
        { "4gib", 4ull << 30 }, { "4GB", 4000000000ull }, { "2T", 2ull << 40 }, { "1TB", 1000000000000ull },
        { "1.5GiB", 1610612736ull }, { "1.5G", 1610612736ull }, { "0.5K", 512 }, { "1.5GB", 1500000000ull },
        { "0.1K", 102 }, { "18446744073709551615", UINT64_MAX }, { "16777215T", 16777215ull << 40 },
    };
    static const char *bad[] = {
        "", "G", "-1", "+4", " 4", "4 G", "4X", "4GiBs", "1.", ".5G", "1.5.2", "4Gi B",
        "18446744073709551616", "16777216T", "17179869184G", "1.0000000001G", "0x10",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 7;
        CHECKF(hc_parse_size(good[i].s, &v) == 0, "'%s' rejected", good[i].s);
        CHECKF(v == good[i].v, "'%s' -> %llu, want %llu", good[i].s, (unsigned long long)v,
               (unsigned long long)good[i].v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 7;
        CHECKF(hc_parse_size(bad[i], &v) != 0, "'%s' accepted", bad[i]);
        CHECKF(v == 7, "'%s' wrote a value on failure", bad[i]);
    }
}

static void test_format_size_and_fnv(void)
{
    char buf[32];
    CHECK(strcmp(hc_format_size(1000, buf, sizeof buf), "1000 B") == 0);
    CHECK(strcmp(hc_format_size(1536, buf, sizeof buf), "1.5 KiB") == 0);
    CHECK(strcmp(hc_format_size(3ull << 30, buf, sizeof buf), "3.0 GiB") == 0);
    /* published FNV-1a 64 test vectors */
    CHECK(hc_fnv1a64("", 0, HC_FNV_INIT) == 0xcbf29ce484222325ULL);
    CHECK(hc_fnv1a64("a", 1, HC_FNV_INIT) == 0xaf63dc4c8601ec8cULL);
    CHECK(hc_fnv1a64("foobar", 6, HC_FNV_INIT) == 0x85944171f73967e8ULL);
    CHECK(hc_fnv1a64("bar", 3, hc_fnv1a64("foo", 3, HC_FNV_INIT)) == 0x85944171f73967e8ULL);
}

/* Entries in dir other than . and .. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void test_atomic_commit_and_abort(void)
{
    char err[512], dir[512];
    atomic_file af;
    snprintf(dir, sizeof dir, "%s", th_tmp("af"));
    CHECK(mkdir(dir, 0755) == 0);
    const char *path = th_tmp("af/out.txt");

    CHECK(af_open(&af, path, err, sizeof err) == 0);
    fputs("hello", af.fp);
    CHECK(access(path, F_OK) != 0);            /* nothing under the final name yet */
    CHECK(count_entries(dir) == 1);            /* just the temporary */
    CHECK(af_commit(&af, err, sizeof err) == 0);
    size_t len;
    unsigned char *got = th_read(path, &len);
    CHECK(got && len == 5 && memcmp(got, "hello", 5) == 0);
    free(got);
    CHECK(count_entries(dir) == 1);            /* temporary renamed, none left */

    /* abort leaves the old file untouched and no temporary */
    CHECK(af_open(&af, path, err, sizeof err) == 0);
    fputs("partial", af.fp);
    af_abort(&af);
    got = th_read(path, &len);
    CHECK(got && len == 5 && memcmp(got, "hello", 5) == 0);
    free(got);
    CHECK(count_entries(dir) == 1);
    af_abort(&af);                             /* twice is harmless */

    /* commit failure (the final name became a directory after af_open, which
     * refuses one): temporary removed, message names the path */
    const char *sub = th_tmp("af/sub");
    CHECK(af_open(&af, sub, err, sizeof err) == 0);
    CHECK(mkdir(sub, 0755) == 0);
    fputs("x", af.fp);
    CHECK(af_commit(&af, err, sizeof err) == -1);
    CHECKF(strstr(err, sub) && !strchr(err, '\n'), "%s", err);
    CHECK(count_entries(dir) == 2);            /* out.txt and sub */
    af_abort(&af);
}

static void test_atomic_unwritable_dirs(void)
{
    char err[512];
    atomic_file af;
    const char *missing = th_tmp("no/such/dir/out.gguf");
    CHECK(af_open(&af, missing, err, sizeof err) == -1);
    CHECKF(strncmp(err, missing, strlen(missing)) == 0 && strstr(err, "No such file"), "%s", err);
    CHECK(af.fp == NULL && af.tmp == NULL);
    /* /proc refuses new files even for root */
    CHECK(af_open(&af, "/proc/hc-test.out", err, sizeof err) == -1);
    CHECKF(strstr(err, "/proc/hc-test.out: cannot create"), "%s", err);
    if (geteuid() != 0) {   /* root ignores directory permissions */
        const char *ro = th_tmp("ro");
        CHECK(mkdir(ro, 0555) == 0);
        CHECK(af_open(&af, th_tmp("ro/out"), err, sizeof err) == -1);
        CHECKF(strstr(err, "Permission denied"), "%s", err);
    }
}

static void test_read_file(void)
{
    char err[512];
    size_t len = 0;
    const char *p = th_tmp("rf.txt");
    CHECK(th_write(p, "abc\0def", 7) == 0);
    char *s = hc_read_file(p, &len, err, sizeof err);
    CHECK(s && len == 7 && memcmp(s, "abc\0def", 7) == 0 && s[7] == 0);
    free(s);
    CHECK(hc_read_file(th_tmp("missing"), &len, err, sizeof err) == NULL);
    CHECKF(strstr(err, "missing: No such file"), "%s", err);
    CHECK(hc_read_file(th_tmpdir(), &len, err, sizeof err) == NULL);
    CHECKF(strstr(err, "is a directory"), "%s", err);
}

static void test_progress_inactive_off_tty(void)
{
    hc_progress p;
    if (isatty(2)) SKIP("stderr is a terminal");
    hc_progress_start(&p, "x", 10, "tok");
    CHECK(!p.active);
    hc_progress_update(&p, 5);
    CHECK(p.done == 5);
    hc_progress_end(&p);
}

/* Entries of dir whose name holds ".tmp" (temporaries of atomic_file). */
static int count_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp") != NULL;
    if (d) closedir(d);
    return n;
}

/* A fresh directory tmpdir/name (dir[512]) and two paths in it (a[600], b[600]). */
static void dir_with(const char *name, char *dir, char *a, const char *an, char *b, const char *bn)
{
    snprintf(dir, 512, "%s", th_tmp(name));
    mkdir(dir, 0777);
    snprintf(a, 600, "%s/%s", dir, an);
    snprintf(b, 600, "%s/%s", dir, bn);
}

/* Issue 19 item 2: a mapped input that shrinks turns the SIGBUS of the next
 * read into one line "PROG: FILE: file changed while being read", exit 1,
 * and the output's temporary is removed. Run in a child, which must die so. */
static void test_sigbus_on_shrunk_map(void)
{
    char dir[512], in[600], out[600], errf[600];
    dir_with("sigbus", dir, in, "in.bin", out, "out.bin");
    snprintf(errf, sizeof errf, "%s/stderr", th_tmpdir());
    static unsigned char big[1 << 20];
    memset(big, 7, sizeof big);
    CHECK(th_write(in, big, sizeof big) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        dup2(fd, 2);
        hc_prog = "hc-test";
        char err[256];
        atomic_file af;
        hc_map m;
        if (af_open(&af, out, err, sizeof err) || fputs("partial", af.fp) < 0 || hc_map_open(&m, in, err, sizeof err))
            _exit(2);
        if (truncate(in, 0) != 0) _exit(3);
        volatile unsigned char c = m.data[600000];   /* past the new end: SIGBUS */
        (void)c;
        _exit(4);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d (signal %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
           WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    size_t len;
    char *msg = (char *)th_read(errf, &len), want[700];
    snprintf(want, sizeof want, "hc-test: %s: file changed while being read\n", in);
    CHECKF(msg && len == strlen(want) && memcmp(msg, want, len) == 0, "stderr: %s", msg ? msg : "(none)");
    free(msg);
    CHECK(count_temporaries(dir) == 0 && access(out, F_OK) != 0);
}

/* Issue 19 item 10: af_open removes the temporaries of its target left by a
 * process that no longer runs, and keeps those of a live one (this process). */
static void test_stale_temporaries_removed(void)
{
    char dir[512], dead[700], live[700], other[700], path[600];
    snprintf(dir, sizeof dir, "%s", th_tmp("stale"));
    mkdir(dir, 0777);
    fflush(NULL);
    pid_t gone = fork();
    if (gone == 0) _exit(0);
    waitpid(gone, NULL, 0);   /* its pid now names no process */
    snprintf(dead, sizeof dead, "%s/.x.gguf.tmp%ld.3", dir, (long)gone);
    snprintf(live, sizeof live, "%s/.x.gguf.tmp%ld.99", dir, (long)getpid());
    snprintf(other, sizeof other, "%s/.y.gguf.tmp%ld.3", dir, (long)gone);   /* another target's */
    CHECK(th_write(dead, "x", 1) == 0 && th_write(live, "x", 1) == 0 && th_write(other, "x", 1) == 0);
    snprintf(path, sizeof path, "%s/x.gguf", dir);
    char err[256];
    atomic_file af;
    CHECKF(af_open(&af, path, err, sizeof err) == 0, "%s", err);
    CHECK(af_commit(&af, err, sizeof err) == 0);
    CHECK(access(dead, F_OK) != 0 && access(live, F_OK) == 0 && access(other, F_OK) == 0);
    unlink(live);
    unlink(other);
}

/* Issue 19 item 8: a commit group renames every output at af_group_commit,
 * none before; af_group_abort, or an exit before the commit, removes them all. */
static void test_commit_group(void)
{
    char dir[512], a[600], b[600], err[256];
    dir_with("group", dir, a, "a", b, "b");
    atomic_file af;
    af_group_begin();
    CHECK(af_open(&af, a, err, sizeof err) == 0 && fputs("A", af.fp) >= 0 && af_commit(&af, err, sizeof err) == 0);
    CHECK(af_open(&af, b, err, sizeof err) == 0 && fputs("B", af.fp) >= 0 && af_commit(&af, err, sizeof err) == 0);
    CHECK(access(a, F_OK) != 0 && access(b, F_OK) != 0 && count_temporaries(dir) == 2);
    CHECKF(af_group_commit(err, sizeof err) == 0, "%s", err);
    CHECK(access(a, F_OK) == 0 && access(b, F_OK) == 0 && count_temporaries(dir) == 0);
    unlink(a);
    unlink(b);
    af_group_begin();
    CHECK(af_open(&af, a, err, sizeof err) == 0 && af_commit(&af, err, sizeof err) == 0);
    af_group_abort();
    CHECK(access(a, F_OK) != 0 && count_temporaries(dir) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {   /* an error exit (hc_die) half-way through the group */
        af_group_begin();
        if (af_open(&af, a, err, sizeof err) == 0 && af_commit(&af, err, sizeof err) == 0 &&
            af_open(&af, b, err, sizeof err) == 0)
            exit(1);
        _exit(2);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    CHECK(access(a, F_OK) != 0 && access(b, F_OK) != 0 && count_temporaries(dir) == 0);
}

static void test_progress_units(void)
{
    hc_progress p = { .label = "converting", .total = 24u << 20, .done = 12u << 20, .unit = "B" };
    char buf[256];
    hc_progress_format(&p, 4.0, buf, sizeof buf);
    CHECKF(strcmp(buf, "converting  50% 12.0/24.0 MiB, 3.0 MiB/s, ETA 0:04") == 0, "%s", buf);
    p = (hc_progress){ .label = "profile", .total = 2048, .done = 512, .unit = "tokens" };
    hc_progress_format(&p, 2.0, buf, sizeof buf);
    CHECKF(strcmp(buf, "profile  25% 512/2048 tokens, 256.0 tokens/s, ETA 0:06") == 0, "%s", buf);
    p.total = 0;
    hc_progress_format(&p, 0, buf, 8);   /* truncated, NUL-terminated */
    CHECKF(strcmp(buf, "profile") == 0, "%s", buf);
}

/* JSON strings from bytes that are not UTF-8 (a model's name, a prompt, a
 * completion cut inside a character) still make JSON that parses. */
static void test_json_text(void)
{
    static const struct { const char *in; size_t n; const char *out; } cases[] = {
        { "plain", 5, "\"plain\"" },
        { "caf\xc3\xa9 \xe2\x96\x81", 9, "\"caf\xc3\xa9 \xe2\x96\x81\"" },        /* valid UTF-8 kept */
        { "a\xff" "b", 3, "\"a\xef\xbf\xbd" "b\"" },                            /* a stray byte */
        { "\xe2\x96", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\"" },               /* a character cut short */
        { "\xc0\xaf\xed\xa0\x80", 5, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"" }, /* overlong, surrogate */
        { "a\0b\n\"", 5, "\"ab\\n\\\"\"" },                                  /* NUL dropped, escapes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *j = hc_json_text(cases[i].in, cases[i].n);
        char *s = cJSON_PrintUnformatted(j);
        int same = s && !strcmp(s, cases[i].out);
        cJSON *back = s ? cJSON_Parse(s) : NULL;
        CHECKF(same && cJSON_IsString(back), "case %zu: %s", i, s ? s : "(null)");
        cJSON_Delete(back);
        free(s);
        cJSON_Delete(j);
    }
    cJSON *o = cJSON_CreateObject();
    hc_json_add_text(o, "model", "n\xf5me");
    char *s = cJSON_PrintUnformatted(o);
    CHECKF(s && !strcmp(s, "{\"model\":\"n\xef\xbf\xbdme\"}"), "%s", s ? s : "(null)");
    free(s);
    cJSON_Delete(o);
}

/* Ids, sizes and offsets from JSON: whole numbers below the bound only,
 * decided on the double before any conversion. */
static void test_json_index(void)
{
    static const struct { const char *json; uint64_t n; int ok; uint64_t want; } cases[] = {
        { "0", 3, 1, 0 }, { "2", 3, 1, 2 }, { "3", 3, 0, 0 }, { "-1", 3, 0, 0 }, { "1.5", 3, 0, 0 },
        { "2.3e59", 4294967296u, 0, 0 }, { "4294967295", 4294967296u, 1, 4294967295u },
        { "4294967296", 4294967296u, 0, 0 }, { "9007199254740991", (uint64_t)1 << 53, 1, 9007199254740991u },
        { "\"1\"", 3, 0, 0 }, { "true", 3, 0, 0 }, { "null", 3, 0, 0 }, { "0", 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *j = cJSON_Parse(cases[i].json);
        uint64_t got = 77;
        int ok = hc_json_index(j, cases[i].n, &got);
        CHECKF(ok == cases[i].ok && (!ok || got == cases[i].want) && (ok || got == 77),
               "%s below %llu: %d, %llu", cases[i].json, (unsigned long long)cases[i].n, ok, (unsigned long long)got);
        cJSON_Delete(j);
    }
}

/* 64-bit integers keep every digit in JSON (a double keeps 15). */
static void test_json_u64(void)
{
    static const uint64_t v[] = { 0, 8502262104303759u, 109950063265972224u, UINT64_MAX };
    static const char *const want[] = { "0", "8502262104303759", "109950063265972224", "18446744073709551615" };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        cJSON *o = cJSON_CreateObject();
        hc_json_add_u64(o, "n", v[i]);
        char *s = cJSON_PrintUnformatted(o), line[64];
        snprintf(line, sizeof line, "{\"n\":%s}", want[i]);
        CHECKF(s && !strcmp(s, line), "%s", s ? s : "(null)");
        free(s);
        cJSON_Delete(o);
    }
}

/* SVG text from names that are not UTF-8 or hold control bytes stays
 * well-formed XML. */
static void test_xml_text(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f);
    hc_xml_text(f, "a<b>&\"c\" caf\xc3\xa9 \xff\x01\tx\xe2\x96");
    fclose(f);
    const char *want = "a&lt;b&gt;&amp;&quot;c&quot; caf\xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd\tx\xef\xbf\xbd\xef\xbf\xbd";
    CHECKF(buf && !strcmp(buf, want), "%s", buf ? buf : "(null)");
    free(buf);
}

int main(void)
{
    RUN(test_fp16_known_values);
    RUN(test_fp16_to_fp32_values);
    RUN(test_fp16_matches_hardware);
    RUN(test_bf16);
    RUN(test_type_table);
    RUN(test_parse_size);
    RUN(test_format_size_and_fnv);
    RUN(test_atomic_commit_and_abort);
    RUN(test_atomic_unwritable_dirs);
    RUN(test_read_file);
    RUN(test_progress_inactive_off_tty);
    RUN(test_sigbus_on_shrunk_map);
    RUN(test_stale_temporaries_removed);
    RUN(test_commit_group);
    RUN(test_progress_units);
    RUN(test_json_text);
    RUN(test_json_index);
    RUN(test_json_u64);
    RUN(test_xml_text);
    return th_done();
}

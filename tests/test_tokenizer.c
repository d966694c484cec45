/* Tokenizer: llama.cpp's vocabulary test vectors (llama-spm, falcon,
 * $HC_LLAMA_VOCAB), llama2.c's vectors, stories260K round trips, byte
 * fallback, BOS, special tokens, malformed input. */
#include "harness.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include "gguf.h"
#include "tokenizer.h"

#define MAXTOK 4096

/* The tokenizer of a GGUF, or NULL with the load error in err. */
static hc_tokenizer *load_err(const char *path, char *err, size_t cap)
{
    gguf_file *f = gguf_open(path, err, cap);
    if (!f) return NULL;
    hc_tokenizer *t = hc_tokenizer_load(f, err, cap);
    gguf_close(f);   /* the tokenizer keeps copies: closing early must be fine */
    return t;
}

static hc_tokenizer *load(const char *path)
{
    char err[512];
    hc_tokenizer *t = load_err(path, err, sizeof err);
    if (!t) fprintf(stderr, "%s\n", err);
    return t;
}

static hc_tokenizer *load_fixture(const char *name)
{
    const char *p = th_fixture(name);
    return p ? load(p) : NULL;
}

#define NEED_FIXTURES() do { if (!th_fixture("")) SKIP("no fixtures"); } while (0)

static int tok(const hc_tokenizer *t, const char *s, size_t len, int bos, int special, int32_t *ids)
{
    return hc_tokenize(t, s, len, bos, special, ids, MAXTOK);
}

static int tok_str(const hc_tokenizer *t, const char *s, int bos, int special, int32_t *ids)
{
    return tok(t, s, strlen(s), bos, special, ids);
}

/* Concatenate pieces as a runtime prints them; returns the byte count. */
static size_t decode(const hc_tokenizer *t, const int32_t *ids, int n, char *buf, size_t cap)
{
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        int k = hc_token_to_piece(t, i ? ids[i - 1] : -1, ids[i], buf + o, (int)(cap - o));
        if (k < 0) return (size_t)-1;
        o += (size_t)k;
    }
    return o;
}

static int same(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0);
}

static void fmt_ids(char *buf, size_t cap, const int32_t *ids, int n)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o + 12 < cap; i++) o += (size_t)snprintf(buf + o, cap - o, " %d", ids[i]);
}

/* llama.cpp's test vectors of a vocabulary (models/ggml-vocab-NAME.gguf;
 * .inp: texts separated by "\n__ggml_vocab_test__\n", the empty text after
 * the last one included; .out: one line of ids per text), run as its
 * test-tokenizer-0 does: no BOS, no special tokens. Returns the number of
 * cases, all the same ids, or -1 with the first difference in msg. */
static int vocab_vectors(const hc_tokenizer *t, const char *gguf, char *msg, size_t cap)
{
    static const char sep[] = "\n__ggml_vocab_test__\n";
    static int32_t got[MAXTOK], want[MAXTOK];
    char path[4096];
    snprintf(path, sizeof path, "%s.inp", gguf);
    char *inp = (char *)th_read(path, NULL);
    snprintf(path, sizeof path, "%s.out", gguf);
    char *out = (char *)th_read(path, NULL);
    int ncase = 0, ok = inp && out;
    if (!ok) snprintf(msg, cap, "cannot read %s.inp or .out", gguf);
    for (char *s = inp, *line = out, *e; ok; s = e + strlen(sep)) {
        e = strstr(s, sep);
        size_t len = e ? (size_t)(e - s) : strlen(s);
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        int nw = 0;
        for (char *p = line, *q; nw < MAXTOK; p = q) {
            long v = strtol(p, &q, 10);
            if (q == p) break;
            want[nw++] = (int32_t)v;
        }
        line = nl ? nl + 1 : line + strlen(line);
        int ng = tok(t, s, len, 0, 0, got);
        if (!same(got, ng, want, nw)) {
            char g[900], w[900];
            fmt_ids(g, sizeof g, got, ng);
            fmt_ids(w, sizeof w, want, nw);
            snprintf(msg, cap, "case %d \"%.*s\": got%s want%s", ncase, (int)(len < 200 ? len : 200), s, g, w);
            ok = 0;
            break;
        }
        ncase++;
        if (!e) {
            if (*line) snprintf(msg, cap, "%s.out has more lines than .inp has texts", gguf), ok = 0;
            break;
        }
    }
    free(inp);
    free(out);
    return ok ? ncase : -1;
}

static void test_llama_spm_vectors(void)
{
    NEED_FIXTURES();
    hc_tokenizer *t = load_fixture("ggml-vocab-llama-spm.gguf");
    CHECK(t);
    char msg[2048];
    int n = vocab_vectors(t, th_fixture("ggml-vocab-llama-spm.gguf"), msg, sizeof msg);
    hc_tokenizer_free(t);
    CHECKF(n == 47, "%s", n < 0 ? msg : "not 47 cases");
}

/* Falcon's byte-level BPE (tokenizer.ggml.pre "falcon"), from llama.cpp. */
static void test_falcon_vectors(void)
{
    NEED_FIXTURES();
    const char *g = th_fixture("llama-vocab/ggml-vocab-falcon.gguf");
    hc_tokenizer *t = load(g);
    CHECK(t);
    char msg[2048];
    int n = vocab_vectors(t, g, msg, sizeof msg);
    hc_tokenizer_free(t);
    CHECKF(n == 47, "%s", n < 0 ? msg : "not 47 cases");
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every ggml-vocab-*.gguf with .inp/.out in $HC_LLAMA_VOCAB (llama.cpp's
 * models/, fetched by scripts/llama-vocab.sh): each gives llama.cpp's ids on
 * every case, or is refused in one line naming the tokenizer model or
 * pre-tokenizer it lacks. One line per vocabulary on stderr. */
static void test_llama_vocab_dir(void)
{
    const char *dir = getenv("HC_LLAMA_VOCAB");
    if (!dir) SKIP("HC_LLAMA_VOCAB not set (the folder of llama.cpp's models/ggml-vocab-*: scripts/llama-vocab.sh)");
    DIR *d = opendir(dir);
    CHECKF(d, "cannot open HC_LLAMA_VOCAB=%s", dir);
    char *names[256];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < 256;) {
        size_t len = strlen(e->d_name);
        if (!strncmp(e->d_name, "ggml-vocab-", 11) && len > 5 && !strcmp(e->d_name + len - 5, ".gguf"))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    int tested = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        char path[4096], err[512], msg[2048];
        snprintf(path, sizeof path, "%s/%s.inp", dir, names[i]);
        if (access(path, R_OK) == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            hc_tokenizer *t = load_err(path, err, sizeof err);
            int k = t ? vocab_vectors(t, path, msg, sizeof msg) : 0;
            int refused = !t && !strchr(err, '\n') &&
                          (strstr(err, "tokenizer.ggml.model is") || strstr(err, "tokenizer.ggml.pre '"));
            if (!t) fprintf(stderr, "%s: refused: %s\n", names[i], err);
            else if (k < 0) fprintf(stderr, "%s: %s\n", names[i], msg);
            else fprintf(stderr, "%s: %d/%d\n", names[i], k, k);
            bad += t ? k < 0 : !refused;
            tested++;
            hc_tokenizer_free(t);
        }
        free(names[i]);
    }
    CHECKF(tested > 0, "no ggml-vocab-*.gguf with .inp in %s", dir);
    CHECKF(bad == 0, "%d of %d vocabularies differ from llama.cpp or are refused without naming why", bad, tested);
}

/* karpathy/llama2.c test.c, with BOS, on the same 32k vocabulary. */
static void test_llama2c_vectors(void)
{
    NEED_FIXTURES();
    hc_tokenizer *t = load_fixture("ggml-vocab-llama-spm.gguf");
    CHECK(t);
    static const int32_t e0[] = { 1 };
    static const int32_t e1[] = { 1, 306, 4658, 278, 6593, 310, 2834, 338 };
    static const int32_t e2[] = { 1, 3439, 17632, 1925, 29892, 278, 6368, 310, 14215, 537, 5922, 393, 29871 };
    int32_t ids[MAXTOK];
    int ok0 = same(ids, tok_str(t, "", 1, 0, ids), e0, 1);
    int ok1 = same(ids, tok_str(t, "I believe the meaning of life is", 1, 0, ids), e1, 8);
    int ok2 = same(ids, tok_str(t, "Simply put, the theory of relativity states that ", 1, 0, ids), e2, 13);
    hc_tokenizer_free(t);
    CHECK(ok0);
    CHECK(ok1);
    CHECK(ok2);
}

static void test_stories_vocab(void)
{
    NEED_FIXTURES();
    hc_tokenizer *t = load_fixture("stories260K.gguf");
    CHECK(t);
    int n = hc_tokenizer_n_vocab(t), bos = hc_tokenizer_bos(t), eos = hc_tokenizer_eos(t);
    int add = hc_tokenizer_add_bos(t);
    hc_tokenizer_free(t);
    CHECK(n == 512);
    CHECK(bos == 1 && eos == 2);
    CHECK(add == 1);   /* key absent: SPM default */
}

/* decode(encode(x)) == x, with BOS (whose following leading space is dropped). */
static int round_trips(const hc_tokenizer *t, const char *s, size_t len, int32_t *ids, int cap,
                       char *buf, size_t bufcap)
{
    int n = hc_tokenize(t, s, len, 1, 0, ids, cap);
    if (n < 1 || n > cap || ids[0] != hc_tokenizer_bos(t)) return 0;
    size_t m = decode(t, ids, n, buf, bufcap);
    return m == len && memcmp(buf, s, len) == 0;
}

static void test_round_trip_ascii(void)
{
    NEED_FIXTURES();
    hc_tokenizer *t = load_fixture("stories260K.gguf");
    CHECK(t);
    static const char *texts[] = {
        "Once upon a time, there was a little girl named Lily.",
        " leading space", "  two leading spaces", "trailing  ", "tabs\tand\nnewlines\n\n",
        "Symbols: ~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./ 0123456789", "<s> is text here", "x",
    };
    int32_t ids[MAXTOK];
    char buf[8192];
    int bad = -1;
    for (int i = 0; i < (int)(sizeof texts / sizeof *texts) && bad < 0; i++)
        if (!round_trips(t, texts[i], strlen(texts[i]), ids, MAXTOK, buf, sizeof buf)) bad = i;
    hc_tokenizer_free(t);
    CHECKF(bad < 0, "\"%s\" does not round-trip", texts[bad]);
}

/* The first 4 KB of real text, then all ~197 KB of it in one call. */
static void test_round_trip_calib(void)
{
    NEED_FIXTURES();
    hc_tokenizer *t = load_fixture("stories260K.gguf");
    size_t len;
    char *s = (char *)th_read(th_fixture("tinystories-calib.txt"), &len);
    CHECK(t && s && len > 100000);
    int cap = (int)len + 2;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    char *buf = malloc(len + 1);
    int ok4k = round_trips(t, s, 4096, ids, cap, buf, len + 1);
    int okall = round_trips(t, s, len, ids, cap, buf, len + 1);
    int n = hc_tokenize(t, s, len, 1, 0, ids, cap);
    free(ids);
    free(buf);
    free(s);
    hc_tokenizer_free(t);
    CHECK(ok4k);
    CHECK(okall);
    CHECKF(n > 0 && (size_t)n < len * 3 / 4, "%d tokens for %zu bytes: merges did not happen", n, len);
}

/* Characters missing from the 512-token vocab become <0xXX> tokens (id = byte + 3). */
static void test_byte_fallback(void)
{
    NEED_FIXTURES();
    hc_tokenizer *t = load_fixture("stories260K.gguf");
    CHECK(t);
    static const char s[] = "\xe6\x97\xa5\xe6\x9c\xac";   /* 日本 */
    int32_t ids[MAXTOK];
    char buf[64];
    int n = tok_str(t, s, 0, 0, ids);
    int bytes_ok = n >= 6;
    for (int i = 0; i < 6 && bytes_ok; i++)
        bytes_ok = ids[n - 6 + i] == (unsigned char)s[i] + 3;
    char one[8];
    int k = hc_token_to_piece(t, -1, 0xe6 + 3, one, sizeof one);
    int rt = round_trips(t, s, 6, ids, MAXTOK, buf, sizeof buf);
    hc_tokenizer_free(t);
    CHECKF(bytes_ok, "%d tokens", n);
    CHECK(k == 1 && (unsigned char)one[0] == 0xe6);
    CHECK(rt);
}

static void test_bos_and_space(void)
{
    NEED_FIXTURES();
    hc_tokenizer *t = load_fixture("ggml-vocab-llama-spm.gguf");
    CHECK(t);
    int32_t a[MAXTOK], b[MAXTOK];
    int na = tok_str(t, "Hello world", 1, 0, a);
    int nb = tok_str(t, "Hello world", 0, 0, b);
    char s1[32], s2[32], s3[32], s4[32];
    int k1 = hc_token_to_piece(t, 1, 15043, s1, sizeof s1);     /* ▁Hello after BOS */
    int k2 = hc_token_to_piece(t, -1, 15043, s2, sizeof s2);
    int k3 = hc_token_to_piece(t, -1, 1, s3, sizeof s3);        /* BOS prints nothing */
    int kc = hc_token_to_piece(t, -1, 15043, s4, 3);             /* truncated to cap */
    int kbad = hc_token_to_piece(t, -1, 32000, s4, sizeof s4);
    hc_tokenizer_free(t);
    CHECK(na == 3 && a[0] == 1 && nb == 2 && same(a + 1, 2, b, 2));
    CHECK(k1 == 5 && memcmp(s1, "Hello", 6) == 0);
    CHECK(k2 == 6 && memcmp(s2, " Hello", 7) == 0);
    CHECK(k3 == 0 && s3[0] == 0);
    CHECK(kc == 3 && memcmp(s4, " He", 3) == 0);
    CHECK(kbad == -1);
}

/* parse_special cuts control texts out first; the raw text after one gets the space prefix. */
static void test_parse_special(void)
{
    NEED_FIXTURES();
    hc_tokenizer *t = load_fixture("ggml-vocab-llama-spm.gguf");
    CHECK(t);
    int32_t a[MAXTOK], b[MAXTOK], c[MAXTOK];
    int na = tok_str(t, "<s>Hello</s>", 0, 1, a);
    int nplain = tok_str(t, "<s>Hello</s>", 0, 0, b);
    int plain_has_special = 0;
    for (int i = 0; i < nplain; i++) plain_has_special |= b[i] == 1 || b[i] == 2;
    /* "Hi <unk> there": [Hi▁] [<unk>] [▁▁there] */
    int nm = tok_str(t, "Hi <unk> there", 0, 1, a + 100);
    int nl = tok_str(t, "Hi ", 0, 0, b);
    int nr = tok_str(t, " there", 0, 0, c);
    int mid_ok = nm == nl + 1 + nr && same(a + 100, nl, b, nl) && a[100 + nl] == 0 &&
                 same(a + 101 + nl, nr, c, nr);
    int nonly = tok_str(t, "<s>", 0, 1, b);
    hc_tokenizer_free(t);
    static const int32_t want[] = { 1, 15043, 2 };
    CHECK(same(a, na, want, 3));
    CHECK(!plain_has_special && nplain > 3);
    CHECK(mid_ok);
    CHECK(nonly == 1 && b[0] == 1);
}

static void test_empty(void)
{
    NEED_FIXTURES();
    hc_tokenizer *t = load_fixture("ggml-vocab-llama-spm.gguf");
    CHECK(t);
    int32_t ids[4] = { -7, -7, -7, -7 };
    int n0 = hc_tokenize(t, "", 0, 0, 0, ids, 4);
    int n1 = hc_tokenize(t, NULL, 0, 1, 1, ids, 4);
    int nnull = hc_tokenize(t, NULL, 3, 0, 0, ids, 4);
    hc_tokenizer_free(t);
    CHECK(n0 == 0);
    CHECK(n1 == 1 && ids[0] == 1 && ids[1] == -7);
    CHECK(nnull == -1);
}

/* The return value is the count needed; only max ids are written. */
static void test_short_buffer(void)
{
    NEED_FIXTURES();
    hc_tokenizer *t = load_fixture("ggml-vocab-llama-spm.gguf");
    CHECK(t);
    int32_t ids[8] = { -7, -7, -7, -7, -7, -7, -7, -7 };
    int n = hc_tokenize(t, "I believe the meaning of life is", 32, 1, 0, ids, 3);
    int n0 = hc_tokenize(t, "I believe", 9, 1, 0, NULL, 0);
    hc_tokenizer_free(t);
    CHECK(n == 8);
    CHECK(ids[0] == 1 && ids[1] == 306 && ids[2] == 4658 && ids[3] == -7);
    CHECK(n0 == 3);
}

/* Broken UTF-8 and NUL bytes: every byte comes back exactly (byte tokens). */
static void test_malformed(void)
{
    NEED_FIXTURES();
    hc_tokenizer *t = load_fixture("stories260K.gguf");
    CHECK(t);
    static const struct { const char *s; size_t len; } cases[] = {
        { "a\0b", 3 }, { "\0", 1 }, { "\xff\xfe", 2 }, { "end\xe2\x96", 5 }, { "\xf0 a", 3 },
        { "\x80\x80 x", 4 }, { "\xc3(", 2 }, { "\xed\xa0\x80", 3 }, { "\xf8\x88\x80\x80\x80", 5 },
    };
    int32_t ids[MAXTOK];
    char buf[256];
    int bad = -1;
    for (int i = 0; i < (int)(sizeof cases / sizeof *cases) && bad < 0; i++)
        if (!round_trips(t, cases[i].s, cases[i].len, ids, MAXTOK, buf, sizeof buf)) bad = i;
    int nnul = tok(t, "a\0b", 3, 0, 0, ids);
    int has_nul = 0;
    for (int i = 0; i < nnul; i++) has_nul |= ids[i] == 3;   /* <0x00> */
    hc_tokenizer_free(t);
    CHECKF(bad < 0, "case %d does not round-trip", bad);
    CHECK(has_nul);
}

/* A vocab written here: user-defined tokens split out even without parse_special,
 * equal scores merge leftmost first, and the load errors. */
static const char *write_vocab(const char *name, const char *model, int n_tokens, int n_scores)
{
    static const char *tokens[] = { "<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "ab", "ba",
                                    "\342\226\201a", "<u>", "b\342\226\201" };
    static const float scores[] = { 0, 0, 0, -1, -2, -2, -5, -5, -3, 0, -1 };
    static const int32_t types[] = { 2, 3, 3, 1, 1, 1, 1, 1, 1, 4, 1 };
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    if (model) gguf_set_str(w, "tokenizer.ggml.model", model);
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n_tokens);
    gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, (uint64_t)n_scores);
    gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n_tokens);
    const char *path = th_tmp(name);
    char err[256];
    int rc = gguf_writer_write(w, path, err, sizeof err);
    gguf_writer_free(w);
    return rc == 0 ? path : NULL;
}

static void test_written_vocab(void)
{
    const char *p = write_vocab("v.gguf", "llama", 10, 10);
    CHECK(p);
    hc_tokenizer *t = load(p);
    CHECK(t);
    int32_t ids[MAXTOK];
    /* "▁abab": ▁a (-3) merges first; then ba and ab tie at -5 and the
     * leftmost (ba) wins, leaving b alone. */
    int n = tok_str(t, "abab", 0, 0, ids);
    static const int32_t w1[] = { 8, 7, 5 };
    int ok1 = same(ids, n, w1, 3);
    /* user-defined "<u>" is split out; raw text after it gets the prefix again */
    n = tok_str(t, "a<u>a", 0, 0, ids);
    static const int32_t w2[] = { 8, 9, 8 };
    int ok2 = same(ids, n, w2, 3);
    /* no byte tokens and "c" unknown: falls back to <unk> per byte */
    n = tok_str(t, "c", 0, 0, ids);
    static const int32_t w3[] = { 3, 0 };
    int ok3 = same(ids, n, w3, 2);
    char buf[16];
    int k = hc_token_to_piece(t, -1, 9, buf, sizeof buf);
    hc_tokenizer_free(t);
    CHECK(ok1);
    CHECK(ok2);
    CHECK(ok3);
    CHECK(k == 3 && memcmp(buf, "<u>", 3) == 0);
}

/* With a piece "b▁" merges cross the start of a word, so words cannot be
 * merged one by one: "▁ab▁a" must give ▁a b▁ a (b▁ scores best), not ▁a b ▁a. */
static void test_cross_word_piece(void)
{
    const char *p = write_vocab("x.gguf", "llama", 11, 11);
    CHECK(p);
    hc_tokenizer *t = load(p);
    CHECK(t);
    int32_t ids[MAXTOK];
    int n = tok_str(t, "ab a", 0, 0, ids);
    hc_tokenizer_free(t);
    static const int32_t want[] = { 8, 10, 4 };
    CHECK(same(ids, n, want, 3));
}

static void test_load_errors(void)
{
    char err[512];
    static const struct { const char *model; int n_scores; const char *msg; } cases[] = {
        { NULL, 10, "no tokenizer.ggml.model" },
        { "gpt2", 10, "\"gpt2\"" },
        { "llama", 9, "tokenizer.ggml.scores: has 9 values, expected 10" },
    };
    for (int i = 0; i < 3; i++) {
        const char *p = write_vocab("bad.gguf", cases[i].model, 10, cases[i].n_scores);
        CHECK(p);
        gguf_file *f = gguf_open(p, err, sizeof err);
        CHECKF(f, "%s", err);
        err[0] = 0;
        hc_tokenizer *t = hc_tokenizer_load(f, err, sizeof err);
        gguf_close(f);
        hc_tokenizer_free(t);
        CHECKF(!t && strstr(err, cases[i].msg), "case %d: \"%s\"", i, err);
    }
}

int main(void)
{
    RUN(test_llama_spm_vectors);
    RUN(test_falcon_vectors);
    RUN(test_llama_vocab_dir);
    RUN(test_llama2c_vectors);
    RUN(test_stories_vocab);
    RUN(test_round_trip_ascii);
    RUN(test_round_trip_calib);
    RUN(test_byte_fallback);
    RUN(test_bos_and_space);
    RUN(test_parse_special);
    RUN(test_empty);
    RUN(test_short_buffer);
    RUN(test_malformed);
    RUN(test_written_vocab);
    RUN(test_cross_word_piece);
    RUN(test_load_errors);
    return th_done();
}

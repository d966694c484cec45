/* Byte-level BPE and SentencePiece-style tokenizer.json, end to end: each
 * tokenizer.json goes through `hc-convert hf` with the fixture's tiny Llama
 * (hf-tokenizers/bpe-llama3: its config.json and weights, the tokenizer.json
 * under test), the GGUF's vocabulary is loaded by the runtime, and the ids are
 * compared with Hugging Face tokenizers': the fixture's cases.json (llama.cpp's
 * 46 test inputs and the empty text) and tests/bpe_cases.h (hostile inputs,
 * other pre-tokenizers, unknown-character runs; written by
 * scripts/tokenizer-cases.py). Also what is refused, by name. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe_cases.h"
#include "cli.h"
#include "gguf.h"
#include "tokenizer.h"

#define FIX "hf-tokenizers/bpe-llama3"

static cJSON *fixture_json(const char *name)
{
    const char *p = th_fixture(name);
    size_t len;
    char *s = p ? (char *)th_read(p, &len) : NULL;
    cJSON *j = s ? cJSON_ParseWithLength(s, len) : NULL;
    free(s);
    return j;
}

/* A model folder NAME with the fixture's weights and this tokenizer.json,
 * converted to NAME.gguf. Returns the GGUF path, or NULL (message in
 * th_last_err()). */
static const char *convert(const char *name, const cJSON *tokenizer)
{
    static char out[4096];
    const char *dir = th_tmp(name);
    char *text = cJSON_PrintUnformatted(tokenizer);
    char path[4096], *fix = realpath(th_fixture(FIX), NULL);    /* symlink targets: absolute */
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    int rc = th_sh("mkdir -p '%s' && ln -sf '%s/config.json' '%s/model.safetensors' '%s'", dir, fix, fix, dir);
    free(fix);
    if (rc == 0 && th_write(path, text, strlen(text)) == 0) {
        snprintf(out, sizeof out, "%s.gguf", dir);
        rc = th_sh("'%s' hf '%s' -o '%s'", th_bin("hc-convert"), dir, out);
    }
    free(text);
    return rc == 0 ? out : NULL;
}

static hc_tokenizer *load(const char *gguf)
{
    char err[512];
    gguf_file *f = gguf_open(gguf, err, sizeof err);
    hc_tokenizer *t = f ? hc_tokenizer_load(f, err, sizeof err) : NULL;
    if (!t) fprintf(stderr, "%s\n", err);
    gguf_close(f);
    return t;
}

/* ids of text as `tokenizers` encodes it (with the model's BOS); malloc'd. */
static int32_t *encode(const hc_tokenizer *t, const char *text, size_t len, int *n)
{
    int bos = hc_tokenizer_add_bos(t);
    *n = hc_tokenize(t, text, len, bos, 1, NULL, 0);
    int32_t *ids = malloc(sizeof *ids * (size_t)(*n > 0 ? *n : 1));
    if (*n < 0 || !ids || hc_tokenize(t, text, len, bos, 1, ids, *n) != *n) *n = -1;
    return ids;
}

static char *decode(const hc_tokenizer *t, const int32_t *ids, int n, size_t *len)
{
    size_t cap = 64 * (size_t)n + 1, o = 0;
    char *s = malloc(cap);
    for (int i = 0; s && i < n; i++) o += (size_t)hc_token_to_piece(t, i ? ids[i - 1] : -1, ids[i], s + o, (int)(cap - o));
    *len = o;
    return s;
}

static uint64_t ids_hash(const int32_t *ids, int n) { return hc_fnv1a64(ids, (size_t)n * sizeof *ids, HC_FNV_INIT); }

static hc_tokenizer *fixture_tokenizer(void)
{
    cJSON *j = fixture_json(FIX "/tokenizer.json");
    const char *g = j ? convert("llama3", j) : NULL;
    cJSON_Delete(j);
    return g ? load(g) : NULL;
}

static void test_fixture_cases(void)
{
    cJSON *cases = fixture_json(FIX "/cases.json");
    if (!cases) SKIP("no fixtures");
    hc_tokenizer *t = fixture_tokenizer();
    CHECKF(t, "%s", th_last_err());
    CHECK(hc_tokenizer_add_bos(t) == 1 && hc_tokenizer_bos(t) == 0);
    int n_cases = 0, bad = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        const cJSON *want = cJSON_GetObjectItem(c, "ids"), *e;
        int n, k = 0, ok;
        int32_t *ids = encode(t, text, strlen(text), &n);
        ok = n == cJSON_GetArraySize(want);
        cJSON_ArrayForEach(e, want) ok &= k < n && ids[k++] == e->valueint;
        /* decoding gives the text back, characters split over tokens included */
        size_t len;
        char *back = ok ? decode(t, ids + 1, n - 1, &len) : NULL;
        if (!ok || len != strlen(text) || memcmp(back, text, len) != 0) {
            fprintf(stderr, "case %d '%s': %s\n", n_cases, text, ok ? "does not decode back" : "other ids");
            bad++;
        }
        free(back);
        free(ids);
        n_cases++;
    }
    cJSON_Delete(cases);
    hc_tokenizer_free(t);
    CHECKF(n_cases >= 46 && bad == 0, "%d of %d cases differ from tokenizers", bad, n_cases);
}

/* The GGUF as llama.cpp writes it. */
static void test_gguf_keys(void)
{
    if (!th_fixture("")) SKIP("no fixtures");
    hc_tokenizer *t = fixture_tokenizer();
    CHECKF(t, "%s", th_last_err());
    hc_tokenizer_free(t);
    char err[512], *s = NULL;
    gguf_file *f = gguf_open(th_tmp("llama3.gguf"), err, sizeof err);
    CHECK(f);
    int ok = gguf_get_str(f, "tokenizer.ggml.model", &s) == 0 && !strcmp(s, "gpt2");
    free(s);
    ok &= gguf_get_str(f, "tokenizer.ggml.pre", &s) == 0 && !strcmp(s, "llama-bpe");
    free(s);
    int m = gguf_find_kv(f, "tokenizer.ggml.merges");
    ok &= m >= 0 && f->kv[m].n == 642 && f->kv[m].strs[0].len == 4 && !memcmp(f->kv[m].strs[0].ptr, "\xc4\xa0 t", 4);
    ok &= gguf_find_kv(f, "tokenizer.ggml.scores") < 0 && gguf_find_kv(f, "hotcold.tokenizer.pre_regex") < 0;
    ok &= gguf_find_kv(f, "tokenizer.ggml.unknown_token_id") < 0;    /* the file has no <unk> */
    int v = 0;
    ok &= gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &v) == 0 && v == 1;
    gguf_close(f);
    CHECK(ok);
}

static void test_hostile(void)
{
    if (!th_fixture("")) SKIP("no fixtures");
    hc_tokenizer *t = fixture_tokenizer();
    CHECKF(t, "%s", th_last_err());
    for (size_t i = 0; i < sizeof HOSTILE / sizeof *HOSTILE; i++) {
        const bpe_case *c = &HOSTILE[i];
        size_t ns = strlen(c->suffix), len = c->unit_len * (size_t)c->repeat + ns;
        char *text = malloc(len);
        for (int r = 0; r < c->repeat; r++) memcpy(text + c->unit_len * (size_t)r, c->unit, c->unit_len);
        memcpy(text + len - ns, c->suffix, ns);
        int n;
        int32_t *ids = encode(t, text, len, &n);
        int ok = n == c->n && ids_hash(ids, n) == c->hash;
        /* valid text without special tokens decodes back to itself */
        if (ok && strncmp(c->name, "invalid", 7) != 0 && strcmp(c->name, "specials") != 0) {
            size_t blen;
            char *back = decode(t, ids + 1, n - 1, &blen);
            ok = blen == len && memcmp(back, text, len) == 0;
            free(back);
        }
        free(ids);
        free(text);
        CHECKF(ok, "%s: %d ids (tokenizers: %d), or not the same ids, or no round trip", c->name, n, c->n);
    }
    hc_tokenizer_free(t);
}

static cJSON *variant_json(const bpe_variant *v)
{
    cJSON *j = fixture_json(FIX "/tokenizer.json");
    cJSON_ReplaceItemInObject(j, "pre_tokenizer", cJSON_Parse(v->pre_tokenizer));
    if (v->post_processor) cJSON_ReplaceItemInObject(j, "post_processor", cJSON_Parse(v->post_processor));
    if (v->normalizer) cJSON_ReplaceItemInObject(j, "normalizer", cJSON_Parse(v->normalizer));
    cJSON *eot = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "added_tokens"), 1);
    cJSON_ReplaceItemInObject(eot, "lstrip", cJSON_CreateBool(v->strip & 1));
    cJSON_ReplaceItemInObject(eot, "rstrip", cJSON_CreateBool(v->strip & 2));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "model"), "ignore_merges", cJSON_CreateBool(v->ignore_merges));
    return j;
}

/* Other pre-tokenizers (llama.cpp's name where it has one, else the regexes),
 * normalizers, and an added token with lstrip/rstrip. */
static void test_variants(void)
{
    if (!th_fixture("")) SKIP("no fixtures");
    for (size_t i = 0; i < sizeof VARIANTS / sizeof *VARIANTS; i++) {
        const bpe_variant *v = &VARIANTS[i];
        cJSON *j = variant_json(v);
        const char *g = convert(v->name, j);
        cJSON_Delete(j);
        CHECKF(g, "%s: %s", v->name, th_last_err());
        char err[512], *pre = NULL;
        gguf_file *f = gguf_open(g, err, sizeof err);
        int has_pre = f && gguf_get_str(f, "tokenizer.ggml.pre", &pre) == 0;
        int has_rx = f && gguf_find_kv(f, "hotcold.tokenizer.pre_regex") >= 0;
        gguf_close(f);
        int named = v->pre ? has_pre && !strcmp(pre, v->pre) && !has_rx : !has_pre && has_rx;
        free(pre);
        CHECKF(named, "%s: tokenizer.ggml.pre is not %s", v->name, v->pre ? v->pre : "absent");
        hc_tokenizer *t = load(g);
        CHECK(t);
        int n;
        int32_t *ids = encode(t, VARIANT_TEXT, strlen(VARIANT_TEXT), &n);
        int ok = n == v->n && ids_hash(ids, n) == v->hash;
        free(ids);
        hc_tokenizer_free(t);
        CHECKF(ok, "%s: %d ids (tokenizers: %d) or not the same ids", v->name, n, v->n);
    }
}

/* SentencePiece-style files without byte fallback: a run of characters
 * outside the vocabulary is one <unk> with fuse_unk (and for Unigram), one per
 * character without; Metaspace's prepend_scheme "first" and "always" around
 * special tokens; Unigram's best path. */
static void test_spm_unknown_runs(void)
{
    if (!th_fixture("")) SKIP("no fixtures");
    for (size_t i = 0; i < sizeof SPM_FILES / sizeof *SPM_FILES; i++) {
        cJSON *j = cJSON_Parse(SPM_FILES[i].json);
        const char *g = convert(SPM_FILES[i].name, j);
        cJSON_Delete(j);
        CHECKF(g, "%s: %s", SPM_FILES[i].name, th_last_err());
        hc_tokenizer *t = load(g);
        CHECK(t);
        for (int k = 0; k < (int)(sizeof SPM_TEXTS / sizeof *SPM_TEXTS); k++) {
            int n, want = 0;
            while (SPM_FILES[i].ids[k][want] >= 0) want++;
            int32_t *ids = encode(t, SPM_TEXTS[k], strlen(SPM_TEXTS[k]), &n);
            int ok = n == want;
            for (int m = 0; ok && m < n; m++) ok = ids[m] == SPM_FILES[i].ids[k][m];
            free(ids);
            CHECKF(ok, "%s: text %d: %d ids, tokenizers gives %d (or others)", SPM_FILES[i].name, k, n, want);
        }
        hc_tokenizer_free(t);
    }
}

/* One change to the fixture's tokenizer.json: key (a top-level key, or
 * "model.KEY" / "added.KEY" for the model and the first added token) set to
 * the JSON value; conversion must fail naming `want`, and write nothing. */
static int refused(const char *key, const char *value, const char *want)
{
    cJSON *j = fixture_json(FIX "/tokenizer.json"), *obj = j;
    if (!strncmp(key, "model.", 6)) obj = cJSON_GetObjectItem(j, "model"), key += 6;
    if (!strncmp(key, "added.", 6)) obj = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "added_tokens"), 0), key += 6;
    cJSON_ReplaceItemInObject(obj, key, cJSON_Parse(value));
    const char *g = convert("refused", j);
    cJSON_Delete(j);
    const char *err = th_last_err();
    int ok = !g && strstr(err, want) && !strchr(err, '\n')[1] && access(th_tmp("refused.gguf"), F_OK) != 0;
    if (!ok) fprintf(stderr, "%s = %s: expected a refusal naming '%s', got: %s", key, value, want, err);
    return ok;
}

static void test_refusals(void)
{
    if (!th_fixture("")) SKIP("no fixtures");
    CHECK(refused("pre_tokenizer", "{\"type\":\"Whitespace\"}", "pre_tokenizer type 'Whitespace' is not supported"));
    CHECK(refused("pre_tokenizer", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"UnicodeScripts\"},"
                  "{\"type\":\"ByteLevel\",\"use_regex\":false}]}", "pre_tokenizer type 'UnicodeScripts'"));
    CHECK(refused("pre_tokenizer", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Punctuation\",\"behavior\":"
                  "\"Removed\"},{\"type\":\"ByteLevel\"}]}",
                  "Punctuation with behavior 'Removed' is not supported"));
    /* Falcon's steps after ByteLevel, but not all of them */
    CHECK(refused("pre_tokenizer", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Punctuation\",\"behavior\":"
                  "\"Contiguous\"},{\"type\":\"ByteLevel\"},{\"type\":\"Digits\"}]}",
                  "pre_tokenizer: Digits after ByteLevel is not supported"));
    CHECK(refused("normalizer", "{\"type\":\"BertNormalizer\"}", "normalizer type 'BertNormalizer' is not supported"));
    CHECK(refused("normalizer", "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"(a\"},\"content\":\"\"}",
                  "normalizer Replace regex '(a': PCRE2: missing closing parenthesis"));
    CHECK(refused("pre_tokenizer", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                  "{\"Regex\":\"(?<=a+)b\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
                  "PCRE2: lookbehind assertion is not fixed length"));
    /* a match that depends on where the search starts (regex.h) */
    CHECK(refused("pre_tokenizer", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                  "{\"Regex\":\"\\\\G\\\\s\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
                  "regex '\\G\\s': \\G, (*COMMIT), (*SKIP) and (*NOTEMPTY_ATSTART) are not supported"));
    CHECK(refused("pre_tokenizer", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                  "{\"Regex\":\"\\\\s\"},\"behavior\":\"Removed\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
                  "Split with behavior 'Removed' is not supported"));
    CHECK(refused("pre_tokenizer", "{\"type\":\"ByteLevel\",\"add_prefix_space\":true}", "add_prefix_space"));
    CHECK(refused("post_processor", "{\"type\":\"Other\"}", "post_processor type 'Other' is not supported"));
    CHECK(refused("model.dropout", "0.1", "dropout"));
    CHECK(refused("added.single_word", "true", "added token '<|begin_of_text|>': single_word is not supported"));
    CHECK(refused("model.merges", "[\"zq qz\"]", "model.merges[0] 'zq qz'"));
    /* an added token on an id the vocabulary holds with another piece */
    CHECK(refused("added.id", "2", "added token '<|begin_of_text|>' (id 2) would replace the vocabulary's '!'"));
    /* an id that is not one (it was truncated, or refused only against the vocabulary) */
    CHECK(refused("added.id", "1.5", "token '<|begin_of_text|>' has id 1.5, not one below config.json's vocab_size"));
    CHECK(refused("added.id", "-1", "token '<|begin_of_text|>' has id -1, not one below config.json's vocab_size"));
}

/* A Unigram model's unk_id must be a token id: 1.5, -1 or one past the
 * vocabulary is refused by name (they were ignored, or 1.5 taken as 1). */
static void test_unigram_unk_id(void)
{
    if (!th_fixture("")) SKIP("no fixtures");
    const spm_file *uni = NULL;
    for (size_t i = 0; i < sizeof SPM_FILES / sizeof *SPM_FILES; i++)
        if (!strcmp(SPM_FILES[i].name, "unigram")) uni = &SPM_FILES[i];
    CHECK(uni);
    static const char *bad[] = { "1.5", "-1", "1000000", "\"0\"" };
    for (size_t i = 0; uni && i < sizeof bad / sizeof *bad; i++) {
        cJSON *j = cJSON_Parse(uni->json);
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "model"), "unk_id", cJSON_Parse(bad[i]));
        const char *g = convert("unk_id", j);
        cJSON_Delete(j);
        CHECKF(!g && strstr(th_last_err(), "model.unk_id is not a token id"), "unk_id %s: %s", bad[i],
               g ? "converted" : th_last_err());
    }
}

/* A normalizer Sequence of n Replace steps of pattern by content: JSON, static. */
static const char *replace_steps(int n, const char *pattern, const char *content)
{
    static char json[8192];
    int k = snprintf(json, sizeof json, "{\"type\":\"Sequence\",\"normalizers\":[");
    for (int i = 0; i < n; i++)
        k += snprintf(json + k, sizeof json - (size_t)k, "%s{\"type\":\"Replace\",\"pattern\":%s,\"content\":\"%s\"}",
                      i ? "," : "", pattern, content);
    snprintf(json + k, sizeof json - (size_t)k, "]}");
    return json;
}

/* Normalizers that could lengthen text beyond HC_NORM_GROWTH x N + HC_NORM_EXTRA
 * are refused at conversion (and at load: test_runtime_refusals); the usual
 * ones fit. */
static void test_normalizer_bounds(void)
{
    if (!th_fixture("")) SKIP("no fixtures");
    CHECK(refused("normalizer", replace_steps(40, "{\"String\":\"a\"}", "aa"), "more than the 64 x N + 4096 allowed"));
    CHECK(refused("normalizer", replace_steps(7, "{\"String\":\"a\"}", "aa"), "128 x N"));
    CHECK(refused("normalizer", replace_steps(10, "{\"Regex\":\"\"}", "x"), "more than the 64 x N"));
    CHECK(refused("normalizer", replace_steps(1, "{\"Regex\":\"b*\"}", "0123456789012345678901234567890123456789"
                  "0123456789012345678901234567890123456789"), "more than the 64 x N"));
    CHECK(refused("normalizer", replace_steps(2, "{\"String\":\"a\"}", "0123456789"), "100 x N"));
    char json[5100];
    snprintf(json, sizeof json, "{\"type\":\"Prepend\",\"prepend\":\"%05000d\"}", 0);
    CHECK(refused("normalizer", json, "1 x N + 5e+03:"));
    /* NFKC, ' ' -> U+2581, a Prepend: 33 x N + 3 */
    cJSON *j = fixture_json(FIX "/tokenizer.json");
    cJSON_ReplaceItemInObject(j, "normalizer", cJSON_Parse("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"},"
        "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\u2581\"},"
        "{\"type\":\"Prepend\",\"prepend\":\"\u2581\"}]}"));
    CHECKF(convert("usual-normalizer", j), "%s", th_last_err());
    cJSON_Delete(j);
}

/* A GGUF "gpt2" vocabulary the runtime refuses: 4 tokens a b ab Ġ, and keys. */
static const char *normalizer;   /* hotcold.tokenizer.normalizer of runtime_refusal's file, or NULL */

/* The tokenizer of that vocabulary, or NULL with the loader's message in err. */
static hc_tokenizer *vocab_tokenizer(const char *merge, const char *pre, const char *regex, char *err, size_t errlen)
{
    const char *tok[] = { "a", "b", "ab", "\xc4\xa0" };
    int32_t type[] = { 1, 1, 1, 1 };
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", tok, 4);
    gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, 4);
    if (merge) gguf_set_arr_str(w, "tokenizer.ggml.merges", &merge, 1);
    if (pre) gguf_set_str(w, "tokenizer.ggml.pre", pre);
    if (regex) gguf_set_arr_str(w, "hotcold.tokenizer.pre_regex", &regex, 1);
    if (normalizer) gguf_set_str(w, "hotcold.tokenizer.normalizer", normalizer);
    const char *path = th_tmp("bad-vocab.gguf");
    int rc = gguf_writer_write(w, path, err, errlen);
    gguf_writer_free(w);
    if (rc != 0) return NULL;
    gguf_file *f = gguf_open(path, err, errlen);
    hc_tokenizer *t = f ? hc_tokenizer_load(f, err, errlen) : NULL;
    gguf_close(f);
    return t;
}

static const char *runtime_refusal(const char *merge, const char *pre, const char *regex)
{
    static char err[512];
    hc_tokenizer *t = vocab_tokenizer(merge, pre, regex, err, sizeof err);
    if (t) snprintf(err, sizeof err, "accepted");
    hc_tokenizer_free(t);
    return err;
}

/* A pre-tokenizer regex that backtracks without end: hc_tokenize fails at
 * PCRE2's match limit, and hc_tokenize_error names the model, the regex and
 * the reason (hc-run used to say only "prompt: cannot tokenize"). */
static void test_match_limit(void)
{
    char err[512];
    hc_tokenizer *t = vocab_tokenizer("a b", NULL, "(a+)+$", err, sizeof err);
    CHECKF(t, "%s", err);
    if (!t) return;
    const char *text = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab";
    int32_t ids[64];
    CHECK(hc_tokenize(t, text, strlen(text), 0, 0, ids, 64) == -1);
    const char *why = hc_tokenize_error();
    CHECKF(strstr(why, "bad-vocab.gguf: pre-tokenizer regex 1: PCRE2: match limit exceeded"), "%s", why);
    CHECK(hc_tokenize(t, "ab", 2, 0, 0, ids, 64) > 0);
    hc_tokenizer_free(t);
}

/* A pre-tokenizer regex, then a normalizer Replace regex, that read to the
 * end of the text from every position: hc_tokenize fails once the reading
 * passes the budget (regex.h), and hc_tokenize_error names the model and the
 * regex; it took minutes. The same tokenizer takes a short text. */
static void test_work_budget(void)
{
    char err[512], *text = malloc(300001);
    for (int i = 0; text && i < 300000; i++) text[i] = "ab ab"[i % 5];
    CHECK(text);
    text[300000] = 0;
    int32_t ids[64];
    for (int k = 0; k < 2; k++) {
        normalizer = k ? "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"a(?=[\\\\s\\\\S]*X)\"},\"content\":\"a\"}" : NULL;
        hc_tokenizer *t = vocab_tokenizer("a b", NULL, k ? "\\p{L}+|\\s+" : "a(?=[\\s\\S]*X)|[\\s\\S]", err, sizeof err);
        normalizer = NULL;
        CHECKF(t, "%s", err);
        int n = hc_tokenize(t, text, 300000, 0, 0, NULL, 0);
        const char *why = hc_tokenize_error();
        CHECKF(n == -1 && strstr(why, k ? "bad-vocab.gguf: normalizer Replace regex reads the text over and over"
                                        : "bad-vocab.gguf: pre-tokenizer regex 1 reads the text over and over"),
               "%d: %s", n, why);
        CHECK(hc_tokenize(t, "ab ab", 5, 0, 0, ids, 64) > 0);
        hc_tokenizer_free(t);
    }
    free(text);
}

static void test_runtime_refusals(void)
{
    CHECK(!strcmp(runtime_refusal("a b", "llama-bpe", NULL), "accepted"));
    CHECK(!strcmp(runtime_refusal("a b", NULL, "\\p{L}+"), "accepted"));
    CHECK(strstr(runtime_refusal(NULL, "llama-bpe", NULL), "no tokenizer.ggml.merges"));
    CHECK(strstr(runtime_refusal("a c", "llama-bpe", NULL), "tokenizer.ggml.merges[0] 'a c'"));
    CHECK(strstr(runtime_refusal("ab", "llama-bpe", NULL), "not two pieces"));
    CHECK(!strcmp(runtime_refusal("a b", "falcon", NULL), "accepted"));
    CHECK(strstr(runtime_refusal("a b", "tekken", NULL), "tokenizer.ggml.pre 'tekken' is not"));
    CHECK(strstr(runtime_refusal("a b", NULL, NULL), "no tokenizer.ggml.pre"));
    CHECK(strstr(runtime_refusal("a b", NULL, "(a"), "PCRE2: missing closing parenthesis"));
    CHECK(strstr(runtime_refusal("a b", NULL, "a(*COMMIT)b"), "(*COMMIT), (*SKIP) and (*NOTEMPTY_ATSTART) are not"));
    normalizer = replace_steps(40, "{\"String\":\"a\"}", "aa");
    CHECK(strstr(runtime_refusal("a b", "llama-bpe", NULL), "more than the 64 x N + 4096 allowed"));
    normalizer = replace_steps(1, "{\"String\":\"a\"}", "aa");
    CHECK(!strcmp(runtime_refusal("a b", "llama-bpe", NULL), "accepted"));
    normalizer = NULL;
}

/* hc-run --tokenize: ids on one line, BOS included, nothing else on stdout. */
static void test_hc_run_tokenize(void)
{
    if (!th_fixture("")) SKIP("no fixtures");
    hc_tokenizer *t = fixture_tokenizer();
    CHECKF(t, "%s", th_last_err());
    hc_tokenizer_free(t);
    CHECK(th_sh("'%s' -m '%s' --tokenize -p 'Hello world'", th_bin("hc-run"), th_tmp("llama3.gguf")) == 0);
    CHECK(!strcmp(th_last_out(), "0 41 805 80 517 318\n"));
    th_write(th_tmp("prompt.txt"), " Hello, world!", 14);
    CHECK(th_sh("'%s' -m '%s' --tokenize -f '%s'", th_bin("hc-run"), th_tmp("llama3.gguf"), th_tmp("prompt.txt")) == 0);
    CHECK(!strcmp(th_last_out(), "0 328 292 80 13 517 318 2\n"));
}

int main(void)
{
    RUN(test_fixture_cases);
    RUN(test_gguf_keys);
    RUN(test_hostile);
    RUN(test_variants);
    RUN(test_spm_unknown_runs);
    RUN(test_refusals);
    RUN(test_unigram_unk_id);
    RUN(test_normalizer_bounds);
    RUN(test_runtime_refusals);
    RUN(test_match_limit);
    RUN(test_work_budget);
    RUN(test_hc_run_tokenize);
    return th_done();
}

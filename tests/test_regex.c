/* common/regex.c: hc_regex_find finds what one pcre2_match over the whole
 * text finds, from every offset, while its windows cut the text, and the
 * normalizer's Replace through it makes pcre2_substitute's text; what it
 * refuses; and its budget: a regex that reads to the end of the text at each
 * position is stopped, the real pre-tokenizers on long runs of one kind of
 * character are not. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "normalize.h"
#include "pretok.h"
#include "regex.h"

/* Patterns with what the search must honour: the real pre-tokenizers'
 * (greedy runs, (?!\S), $), lookbehind and \K before the window, empty
 * matches, anchors, a multiline ^, and PCRE2's bump-along over the LF of a
 * CR LF ((*CRLF), no \r or \n in the pattern) after a start that read far. */
static const char *const PATTERNS[] = {
    ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    "\\s+$", "[\\r\\n]", "\\p{N}", "[一-龥ࠀ-一가-퟿]+",
    "(?<=\\s)\\p{L}+", "(?<![a-z])\\d+", "\\s+\\K\\p{L}+", "x*", "\\b", "(?=\\p{L})",
    "^\\s*\\p{L}+", "\\A.{3}", "(?s).*z", ".*z", "(?m)^\\p{L}+$",
    "(*CRLF)\\s(?=[^z]*y)|(?<=\\v)\\s", "(*ANYCRLF)(?!\\r)\\s+",
    "a(?=[^z]*z)|[^z]", "\\w+(?=\\s*z)",
};

/* Texts that put runs of each kind across the 16-byte windows, multibyte
 * characters on window ends, CR LF at every alignment. */
static const char *const TEXTS[] = {
    "Hello world, it's   a test\n\n  42 1234567 \xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97 done.   ",
    "                                        x                                   ",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaz  b",
    ("\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97"
     "\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80 \xe4\xb8\xad\xe6\x96\x87  12\r\n\r\n \xc3\xa9t\xc3\xa9"),
    "a b\r\nc\r\n\r\n  \r\n d\r\r\n\n\r e                        \r\n                   z",
    "line one\nline two   \n   \nthird line that is rather long indeed and has no end",
    "",
};

/* Every offset of text: hc_regex_find and pcre2_match agree. */
static int agrees(const char *pattern, const char *text, char *why, size_t whylen)
{
    char err[512];
    pcre2_code *re = hc_regex_compile("regex", pattern, err, sizeof err);
    if (!re) return snprintf(why, whylen, "%s", err), 0;
    pcre2_match_data *ref = pcre2_match_data_create_from_pattern(re, NULL);
    hc_regex_budget b;
    size_t len = strlen(text);
    hc_regex_search s = { re, pcre2_match_data_create_from_pattern(re, NULL), &b, text, len, 0 };
    int ok = hc_regex_budget_init(&b, len, 1) == 0;
    for (size_t at = 0; ok && at <= len; at++) {
        if (at < len && ((unsigned char)text[at] & 0xC0) == 0x80) continue;
        int rc = hc_regex_find(&s, at);
        int want = pcre2_match(re, (PCRE2_SPTR)text, len, at, 0, ref, NULL);
        const PCRE2_SIZE *m = pcre2_get_ovector_pointer(s.md), *r = pcre2_get_ovector_pointer(ref);
        ok = rc == (want >= 0) && (rc != 1 || (m[0] == r[0] && m[1] == r[1]));
        if (!ok)
            snprintf(why, whylen, "'%s' from %zu: %d [%zu, %zu), pcre2_match %d [%zu, %zu)", pattern, at, rc,
                     rc == 1 ? (size_t)m[0] : 0, rc == 1 ? (size_t)m[1] : 0, want, want >= 0 ? (size_t)r[0] : 0,
                     want >= 0 ? (size_t)r[1] : 0);
    }
    hc_regex_budget_free(&b);
    pcre2_match_data_free(s.md);
    pcre2_match_data_free(ref);
    pcre2_code_free(re);
    return ok;
}

static void test_same_as_pcre2(void)
{
    char why[512];
    for (size_t p = 0; p < sizeof PATTERNS / sizeof *PATTERNS; p++)
        for (size_t t = 0; t < sizeof TEXTS / sizeof *TEXTS; t++)
            CHECKF(agrees(PATTERNS[p], TEXTS[t], why, sizeof why), "text %zu: %s", t, why);
}

/* A normalizer that replaces pattern by content, or NULL (message in err). */
static hc_normalizer *replacer(const char *pattern, const char *content, char *err, size_t errlen)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "type", "Replace");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(j, "pattern"), "Regex", pattern);
    cJSON_AddStringToObject(j, "content", content);
    char *json = cJSON_PrintUnformatted(j);
    hc_normalizer *n = hc_normalizer_new(json, strlen(json), err, errlen);
    free(json);
    cJSON_Delete(j);
    return n;
}

/* The normalizer's Replace makes what pcre2_substitute (global, literal)
 * makes: the same matches, the same steps after an empty one. */
static int same_replace(const char *pattern, const char *text, char *why, size_t whylen)
{
    hc_normalizer *n = replacer(pattern, "<>", why, whylen);
    pcre2_code *re = n ? hc_regex_compile("regex", pattern, why, whylen) : NULL;
    size_t len = strlen(text), mine_len = 0, want_len = 8 * len + 64;
    char *mine = re ? hc_normalize(n, text, len, &mine_len) : NULL, *want = malloc(want_len + 1);
    int rc = !mine ? -1 : pcre2_substitute(re, (PCRE2_SPTR)text, len, 0, PCRE2_SUBSTITUTE_GLOBAL |
                                           PCRE2_SUBSTITUTE_LITERAL, NULL, NULL, (PCRE2_SPTR)"<>", 2,
                                           (PCRE2_UCHAR *)want, &want_len);
    int ok = rc >= 0 && mine_len == want_len && !memcmp(mine, want, want_len);
    if (!ok && n && re)
        snprintf(why, whylen, "'%s': %.*s, pcre2_substitute %.*s", pattern, mine ? (int)mine_len : 0,
                 mine ? mine : "", rc >= 0 ? (int)want_len : 0, want);
    free(mine);
    free(want);
    pcre2_code_free(re);
    hc_normalizer_free(n);
    return ok;
}

static void test_replace_same_as_pcre2(void)
{
    char why[1024];
    static const char *const more[] = { "(*ANYCRLF)x*", "(*LF)x*", "a\\Kb" };
    for (size_t t = 0; t < sizeof TEXTS / sizeof *TEXTS; t++) {
        for (size_t p = 0; p < sizeof PATTERNS / sizeof *PATTERNS; p++)
            CHECKF(same_replace(PATTERNS[p], TEXTS[t], why, sizeof why), "text %zu: %s", t, why);
        for (size_t p = 0; p < sizeof more / sizeof *more; p++)
            CHECKF(same_replace(more[p], TEXTS[t], why, sizeof why), "text %zu: %s", t, why);
    }
}

/* U+0000 in a normalizer's JSON (a model file's string) is refused, raw or
 * escaped: cJSON would end the pattern there; an escaped backslash before
 * u0000 is text. */
static void test_normalizer_nul(void)
{
    char err[256];
    static const char replace[] = "{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\\u0000b\"},\"content\":\"x\"}",
                      prepend[] = "{\"type\":\"Prepend\",\"prepend\":\"a\0b\"}";
    const char *bad[] = { replace, prepend };
    size_t len[] = { sizeof replace - 1, sizeof prepend - 1 };
    for (int i = 0; i < 2; i++) {
        hc_normalizer *n = hc_normalizer_new(bad[i], len[i], err, sizeof err);
        CHECKF(!n && strstr(err, "normalizer: U+0000 in JSON is not supported"), "case %d: %s", i, n ? "taken" : err);
        hc_normalizer_free(n);
    }
    hc_normalizer *n = replacer("a\\\\u0000", "x", err, sizeof err);
    CHECKF(n, "%s", err);
    size_t out_len = 0;
    char *out = n ? hc_normalize(n, "ba\\u0000c", 9, &out_len) : NULL;
    CHECKF(out && out_len == 3 && !memcmp(out, "bxc", 3), "%.*s", out ? (int)out_len : 0, out ? out : "");
    free(out);
    hc_normalizer_free(n);
}

static int refused(const char *pattern)
{
    char err[512];
    pcre2_code *re = hc_regex_compile("regex", pattern, err, sizeof err);
    pcre2_code_free(re);
    return !re && strstr(err, "are not supported (their matches depend on where a search starts)");
}

/* Constructs a search that moves its start would change are refused; an
 * escaped backslash before G, or \c\ (a control character) then G, is not
 * \G. */
static void test_start_dependent(void)
{
    CHECK(refused("\\Ga"));
    CHECK(refused("a|\\G\\s"));
    CHECK(refused("a(*COMMIT)b"));
    CHECK(refused("a(*SKIP)b|c"));
    CHECK(refused("(*NOTEMPTY_ATSTART)a*"));
    CHECK(refused("\\\\\\G"));
    CHECK(!refused("\\\\G"));
    CHECK(!refused("\\c\\G"));
    CHECK(!refused("(*PRUNE)a|\\s"));
}

/* n bytes of unit repeated (cut at a character), malloc'd. */
static char *repeat(const char *unit, size_t n)
{
    size_t u = strlen(unit);
    char *s = malloc(n + 1);
    for (size_t i = 0; s && i < n; i++) s[i] = unit[i % u];
    while (n > 0 && ((unsigned char)unit[n % u] & 0xC0) == 0x80) n--;
    if (s) s[n] = 0;
    return s;
}

/* What finding every match of pattern in text costs, per byte of text, or
 * -1 when a search fails. */
static double cost_per_byte(const char *pattern, const char *text)
{
    char err[512];
    pcre2_code *re = hc_regex_compile("regex", pattern, err, sizeof err);
    hc_regex_budget b;
    size_t len = strlen(text), at = 0;
    hc_regex_search s = { re, re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL, &b, text, len, 0 };
    if (!s.md || hc_regex_budget_init(&b, len, 1)) return -1;
    uint64_t budget = b.left;
    int rc = 1;
    while (at < len && (rc = hc_regex_find(&s, at)) == 1) {
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s.md);
        for (at = ov[1] > ov[0] ? ov[1] : ov[0] + 1; at < len && ((unsigned char)text[at] & 0xC0) == 0x80;) at++;
    }
    double cost = rc < 0 ? -1 : (double)(budget - b.left) / (double)len;
    hc_regex_budget_free(&b);
    pcre2_match_data_free(s.md);
    pcre2_code_free(re);
    return cost;
}

static int count_piece(void *ctx, const char *piece, size_t len)
{
    (void)piece, (void)len;
    ++*(size_t *)ctx;
    return 0;
}

/* Split text with the n regexes: hc_pretok_split's result. */
static int split(const char *const *regex, int n, const char *text)
{
    char err[512];
    hc_pretok *p = hc_pretok_new(regex, n, err, sizeof err);
    size_t pieces = 0;
    int rc = p ? hc_pretok_split(p, text, strlen(text), count_piece, &pieces) : -2;
    hc_pretok_free(p);
    return rc;
}

/* A regex that reads to the end of the text from every position (600 KB:
 * about 10^11 bytes of reading) is stopped by the budget; an anchored one
 * that reads to the end is tried once, as PCRE2 tries it. Every regex of the
 * real pre-tokenizers costs at most half the budget on runs of one kind of
 * character. */
static void test_budget(void)
{
    const char *crafted = "\\w(?=[\\s\\S]*X)|[\\s\\S]", *anchored = "(?s).*z";
    char *text = repeat("It was a sunny day. ", 600000);
    CHECK(split(&crafted, 1, text) == -1);
    CHECKF(strstr(hc_text_error(), "pre-tokenizer regex 1 reads the text over and over: splitting 600000 bytes "
                  "took more than the 64 x 600000 + 67108864 bytes of reading allowed"), "%s", hc_text_error());
    CHECKF(split(&anchored, 1, text) == 0, "%s", hc_text_error());
    char err[512];
    hc_normalizer *n = replacer("\\w(?=[\\s\\S]*X)", "b", err, sizeof err);
    CHECKF(n, "%s", err);
    size_t len;
    char *out = hc_normalize(n, text, strlen(text), &len);
    hc_normalizer_free(n);
    CHECK(!out);
    CHECKF(strstr(hc_text_error(), "normalizer Replace regex reads the text over and over: replacing in 600000 "
                  "bytes took more than the 64 x 600000 + 67108864 bytes of reading allowed"), "%s", hc_text_error());
    free(text);

    static const char *const names[] = { "llama-bpe", "qwen2", "gpt-2", "starcoder", "falcon", "qwen35",
                                         "deepseek-llm", "deepseek-coder" };
    static const char *const units[] = { " ", "a", "7", "!", "\n", " \n", "\r\n", "\xe4\xb8\xad",
                                         "\xf0\x9f\x98\x80", "  x", "It was a sunny day.  " };
    for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
        text = repeat(units[u], 1 << 16);
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            const hc_pretok_def *d = hc_pretok_by_name(names[i]);
            CHECK(d);
            for (int k = 0; k < d->n_regex; k++) {
                double cost = cost_per_byte(d->regex[k], text);
                CHECKF(cost >= 0 && cost <= HC_RE_WORK / 2, "%s regex %d on '%s': %g per byte", names[i], k + 1,
                       units[u], cost);
            }
        }
        free(text);
    }
}

int main(void)
{
    RUN(test_same_as_pcre2);
    RUN(test_replace_same_as_pcre2);
    RUN(test_normalizer_nul);
    RUN(test_start_dependent);
    RUN(test_budget);
    return th_done();
}

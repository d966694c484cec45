/* tokenizer.json normalizers over UTF-8 text (see normalize.h). */
#include "normalize.h"
#include "pretok.h"

#include <cjson/cJSON.h>
#include <pcre2.h>
#include <unicase.h>
#include <uninorm.h>
#include <unistr.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { N_FORM, N_LOWER, N_REPLACE_STR, N_REPLACE_RX, N_PREPEND } step_kind;

typedef struct {
    step_kind kind;
    uninorm_t form;          /* N_FORM */
    char *pattern, *content; /* N_REPLACE_STR (pattern), N_REPLACE_*, N_PREPEND (content) */
    pcre2_code *rx;          /* N_REPLACE_RX */
} step;

struct hc_normalizer {
    step *s;
    int n, cap;
    double growth, extra;   /* the steps so far make at most growth * len + extra bytes of len */
};

/* A step that makes at most a * len + b bytes of len. */
static void grows(hc_normalizer *n, double a, double b)
{
    n->growth *= a;
    n->extra = n->extra * a + b;
}

void hc_normalizer_free(hc_normalizer *n)
{
    if (!n) return;
    for (int i = 0; i < n->n; i++) {
        free(n->s[i].pattern);
        free(n->s[i].content);
        pcre2_code_free(n->s[i].rx);
    }
    free(n->s);
    free(n);
}

static char *dup_str(const cJSON *j)
{
    return cJSON_IsString(j) ? strdup(j->valuestring) : NULL;
}

static int add_step(hc_normalizer *n, const cJSON *o, char *err, size_t errlen);

static int add_replace(hc_normalizer *n, step *s, const cJSON *o, char *err, size_t errlen)
{
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String"), *rx = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    s->content = dup_str(cJSON_GetObjectItemCaseSensitive(o, "content"));
    if (!s->content) return snprintf(err, errlen, "normalizer Replace without a content string"), -1;
    double cl = (double)strlen(s->content);
    if (cJSON_IsString(str) && *str->valuestring) {
        s->kind = N_REPLACE_STR;
        s->pattern = strdup(str->valuestring);
        grows(n, fmax(1, cl / (double)strlen(str->valuestring)), 0);
        return s->pattern ? 0 : (snprintf(err, errlen, "out of memory"), -1);
    }
    if (!cJSON_IsString(rx)) return snprintf(err, errlen, "normalizer Replace without a String or Regex pattern"), -1;
    s->kind = N_REPLACE_RX;
    s->rx = hc_regex_compile("normalizer Replace regex", rx->valuestring, err, errlen);
    if (!s->rx) return -1;
    /* every match is at least minlen characters (each one byte or more); an
     * empty match may come before each byte and at the end */
    uint32_t minlen = 0;
    pcre2_pattern_info(s->rx, PCRE2_INFO_MINLENGTH, &minlen);
    if (minlen) grows(n, fmax(1, cl / minlen), 0);
    else grows(n, 1 + cl, cl);
    return 0;
}

static int add_step(hc_normalizer *n, const cJSON *o, char *err, size_t errlen)
{
    const cJSON *jt = cJSON_GetObjectItemCaseSensitive(o, "type"), *e;
    const char *type = cJSON_IsString(jt) ? jt->valuestring : "(no type)";
    if (!strcmp(type, "Sequence")) {
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(o, "normalizers"))
            if (add_step(n, e, err, errlen)) return -1;
        return 0;
    }
    if (n->n == n->cap) {
        step *p = realloc(n->s, (size_t)(n->cap = n->cap ? 2 * n->cap : 4) * sizeof *p);
        if (!p) return snprintf(err, errlen, "out of memory"), -1;
        n->s = p;
    }
    step *s = &n->s[n->n++];
    memset(s, 0, sizeof *s);
    if (!strcmp(type, "NFC") || !strcmp(type, "NFD") || !strcmp(type, "NFKC") || !strcmp(type, "NFKD")) {
        s->kind = N_FORM;
        s->form = !strcmp(type, "NFC") ? UNINORM_NFC : !strcmp(type, "NFD") ? UNINORM_NFD
                : !strcmp(type, "NFKC") ? UNINORM_NFKC : UNINORM_NFKD;
        /* UAX #15, "Stabilization policies": at most 3 times the UTF-8
         * bytes for NFC and NFD, 11 for NFKC and NFKD */
        grows(n, type[2] == 'K' ? 11 : 3, 0);
        return 0;
    }
    if (!strcmp(type, "Lowercase")) {
        s->kind = N_LOWER;
        grows(n, 1.5, 0);   /* U+0130 (2 bytes) -> "i" U+0307 (3 bytes); others keep or gain one byte in two */
        return 0;
    }
    if (!strcmp(type, "Replace")) return add_replace(n, s, o, err, errlen);
    if (!strcmp(type, "Prepend")) {
        s->kind = N_PREPEND;
        s->content = dup_str(cJSON_GetObjectItemCaseSensitive(o, "prepend"));
        if (s->content) grows(n, 1, (double)strlen(s->content));
        return s->content ? 0 : (snprintf(err, errlen, "normalizer Prepend without a prepend string"), -1);
    }
    n->n--;
    snprintf(err, errlen, "normalizer type '%s' is not supported (NFC, NFD, NFKC, NFKD, Lowercase, Replace, "
             "Prepend, Sequence)", type);
    return -1;
}

hc_normalizer *hc_normalizer_new(const char *json, size_t len, char *err, size_t errlen)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    hc_normalizer *n = calloc(1, sizeof *n);
    if (n) n->growth = 1;
    int rc = !root ? (snprintf(err, errlen, "normalizer: JSON does not parse"), -1)
           : !n ? (snprintf(err, errlen, "out of memory"), -1) : add_step(n, root, err, errlen);
    if (rc == 0 && (n->growth > HC_NORM_GROWTH || n->extra > HC_NORM_EXTRA)) {
        snprintf(err, errlen, "normalizer can lengthen N bytes of text to %.3g x N + %.3g: more than the %d x N + %d allowed",
                 n->growth, n->extra, HC_NORM_GROWTH, HC_NORM_EXTRA);
        rc = -1;
    }
    cJSON_Delete(root);
    if (rc == 0) return n;
    hc_normalizer_free(n);
    return NULL;
}

/* Rust's char::to_lowercase: the simple mapping, except U+0130's full one. */
static char *lowercase(const char *text, size_t len, size_t *out_len)
{
    char *out = malloc(3 * len + 1), *o = out;
    for (size_t i = 0; out && i < len;) {
        ucs4_t c;
        int k = u8_mbtouc(&c, (const uint8_t *)text + i, len - i);
        i += (size_t)(k > 0 ? k : 1);
        if (c == 0x130) {
            memcpy(o, "i\xcc\x87", 3);
            o += 3;
        } else {
            o += u8_uctomb((uint8_t *)o, uc_tolower(c), 4);
        }
    }
    *out_len = out ? (size_t)(o - out) : 0;
    return out;
}

static char *replace_str(const step *s, const char *text, size_t len, size_t limit, size_t *out_len)
{
    size_t pl = strlen(s->pattern), cl = strlen(s->content), hits = 0;
    for (const char *p = text; (p = memmem(p, len - (size_t)(p - text), s->pattern, pl)); p += pl) hits++;
    if (hits * cl > limit) return NULL;
    char *out = malloc(len + hits * cl + 1), *o = out;
    const char *p = text, *m;
    while (out && (m = memmem(p, len - (size_t)(p - text), s->pattern, pl))) {
        memcpy(o, p, (size_t)(m - p));
        o += m - p;
        memcpy(o, s->content, cl);
        o += cl;
        p = m + pl;
    }
    if (out) memcpy(o, p, len - (size_t)(p - text)), o += len - (size_t)(p - text);
    *out_len = out ? (size_t)(o - out) : 0;
    return out;
}

static char *replace_rx(const step *s, const char *text, size_t len, size_t limit, size_t *out_len)
{
    PCRE2_SIZE cap = 2 * len + 64;
    for (int tries = 0; tries < 8 && cap <= limit; tries++) {
        char *out = malloc(cap + 1);
        if (!out) return NULL;
        PCRE2_SIZE n = cap;
        int rc = pcre2_substitute(s->rx, (PCRE2_SPTR)text, len, 0,
                                  PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_LITERAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH |
                                  PCRE2_NO_UTF_CHECK, NULL, NULL, (PCRE2_SPTR)s->content, PCRE2_ZERO_TERMINATED,
                                  (PCRE2_UCHAR *)out, &n);
        if (rc >= 0) {
            *out_len = n;
            return out;
        }
        free(out);
        if (rc != PCRE2_ERROR_NOMEMORY) return NULL;
        cap = n;       /* the length needed */
    }
    return NULL;
}

/* Step s over text; NULL when out of memory or (where a step could
 * allocate more) past limit bytes. */
static char *apply(const step *s, const char *text, size_t len, size_t limit, size_t *out_len)
{
    switch (s->kind) {
    case N_FORM: {
        size_t n = 0;
        uint8_t *r = u8_normalize(s->form, (const uint8_t *)text, len, NULL, &n);
        *out_len = n;
        return (char *)r;
    }
    case N_LOWER: return lowercase(text, len, out_len);
    case N_REPLACE_STR: return replace_str(s, text, len, limit, out_len);
    case N_REPLACE_RX: return replace_rx(s, text, len, limit, out_len);
    case N_PREPEND: {
        size_t cl = len ? strlen(s->content) : 0;
        char *out = malloc(cl + len + 1);
        if (out) memcpy(out, s->content, cl), memcpy(out + cl, text, len);
        *out_len = cl + len;
        return out;
    }
    }
    return NULL;
}

char *hc_normalize(const hc_normalizer *n, const char *text, size_t len, size_t *out_len)
{
    char *cur = malloc(len + 1);
    if (!cur) return NULL;
    memcpy(cur, text, len);
    *out_len = len;
    size_t limit = len > (SIZE_MAX - HC_NORM_EXTRA) / HC_NORM_GROWTH ? SIZE_MAX : HC_NORM_GROWTH * len + HC_NORM_EXTRA;
    for (int i = 0; i < n->n && cur; i++) {
        size_t nl = 0;
        char *next = apply(&n->s[i], cur, *out_len, limit, &nl);
        free(cur);
        cur = next && nl <= limit ? next : (free(next), NULL);
        *out_len = nl;
    }
    if (!cur) hc_text_error_set("normalizer: out of memory, or more than %d x %zu + %d bytes", HC_NORM_GROWTH, len,
                                HC_NORM_EXTRA);
    return cur;
}

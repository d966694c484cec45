/* tokenizer.json normalizers over UTF-8 text (see normalize.h). */
#include "normalize.h"
#include "cli.h"
#include "pretok.h"
#include "regex.h"

#include <cjson/cJSON.h>
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
    char why[64];
    cJSON *root = hc_json_parse(json, len, why, sizeof why);
    hc_normalizer *n = calloc(1, sizeof *n);
    if (n) n->growth = 1;
    int rc = !root ? (snprintf(err, errlen, "normalizer: %s", why), -1)
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

/* Appends n bytes of p to *out (*o of *cap bytes used), growing it; -1 out
 * of memory or past limit bytes. */
static int append(char **out, size_t *o, size_t *cap, const char *p, size_t n, size_t limit)
{
    if (n > limit - *o) return -1;
    if (n > *cap - *o) {
        size_t c = *cap > n ? 2 * *cap : *cap + n;
        char *q = realloc(*out, c + 1);
        if (!q) return -1;
        *out = q;
        *cap = c;
    }
    memcpy(*out + *o, p, n);
    *o += n;
    return 0;
}

/* pcre2_substitute's global literal replace, its searches bounded
 * (hc_regex_find): after an empty match, a non-empty one at the same place,
 * else the next character is kept (a CR LF whole unless the newline is CR or
 * LF alone). NULL out of memory, past limit bytes, or when a search fails
 * (then hc_text_error says why). */
static char *replace_rx(const step *s, const char *text, size_t len, size_t limit, size_t *out_len)
{
    size_t cl = strlen(s->content), o = 0, cap = len, at = 0;
    uint32_t nl;
    pcre2_pattern_info(s->rx, PCRE2_INFO_NEWLINE, &nl);
    char *out = malloc(cap + 1);
    hc_regex_budget b = { 0 };
    hc_regex_search rs = { s->rx, pcre2_match_data_create_from_pattern(s->rx, NULL), &b, text, len, 0 };
    int rc = out && rs.md && hc_regex_budget_init(&b, len, 1) == 0 ? 1 : -1, empty = 0;
    while (rc == 1) {
        size_t from = at;
        rc = empty ? hc_regex_nonempty_at(&rs, at) : hc_regex_find(&rs, at);
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(rs.md);
        if (rc == 0 && empty && at < len) {
            at += text[at] == '\r' && nl != PCRE2_NEWLINE_CR && nl != PCRE2_NEWLINE_LF && at + 1 < len &&
                  text[at + 1] == '\n' ? 2 : 1;
            while (at < len && ((unsigned char)text[at] & 0xC0) == 0x80) at++;
            rc = append(&out, &o, &cap, text + from, at - from, limit) ? -1 : 1;
            empty = 0;
        } else if (rc == 1 && (ov[0] < at || ov[1] < ov[0])) {
            rc = PCRE2_ERROR_BADSUBSPATTERN;   /* \K tricks */
        } else if (rc == 1) {
            if (append(&out, &o, &cap, text + at, ov[0] - at, limit) || append(&out, &o, &cap, s->content, cl, limit))
                rc = -1;
            empty = ov[0] == ov[1];
            at = ov[1];
        }
    }
    if (rc == 0 && append(&out, &o, &cap, text + at, len - at, limit)) rc = -1;
    if (rc == HC_REGEX_OVER_BUDGET) {
        hc_text_error_set("normalizer Replace regex reads the text over and over: replacing in %zu bytes took more "
                          "than the %d x %zu + %u bytes of reading allowed", len, HC_RE_WORK, len, HC_RE_WORK_EXTRA);
    } else if (rc < -1) {
        PCRE2_UCHAR msg[128];
        pcre2_get_error_message(rc, msg, sizeof msg);
        hc_text_error_set("normalizer Replace regex: PCRE2: %s", (const char *)msg);
    }
    hc_regex_budget_free(&b);
    pcre2_match_data_free(rs.md);
    if (rc == 0) {
        *out_len = o;
        return out;
    }
    free(out);
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
    hc_text_error_set("%s", "");
    for (int i = 0; i < n->n && cur; i++) {
        size_t nl = 0;
        char *next = apply(&n->s[i], cur, *out_len, limit, &nl);
        free(cur);
        cur = next && nl <= limit ? next : (free(next), NULL);
        *out_len = nl;
    }
    if (!cur && !*hc_text_error())
        hc_text_error_set("normalizer: out of memory, or more than %d x %zu + %d bytes", HC_NORM_GROWTH, len,
                          HC_NORM_EXTRA);
    return cur;
}

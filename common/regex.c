/* Regex search with a work budget (see regex.h).
 *
 * pcre2_match tries one start after another, and one attempt may read up to
 * the end of the text. Here the text is cut at a window end e and matched
 * with PCRE2_PARTIAL_HARD, which stops at the first attempt that reads up to
 * e. Any other answer is the whole text's answer: every attempt before it ran
 * as it would have on the whole text. The attempt that read to e is run alone
 * (offset limit = its start) in windows twice as long until one is enough,
 * and the search goes on after it. Each attempt is charged the bytes it may
 * have read: up to the window end. */
#include "regex.h"

#include <stdio.h>
#include <string.h>

enum { WINDOW = 16 };   /* bytes: most tokenizer matches end within one window */

/* Whether pattern holds a construct whose matches depend on where the search
 * starts. Escapes are read in pairs, as PCRE2 reads them (\cX takes X,
 * whatever it is); one inside \Q...\E or a class counts too, which refuses a
 * pattern no tokenizer has. */
static int start_dependent(const char *p)
{
    static const char *const verbs[] = { "(*COMMIT", "(*SKIP", "(*NOTEMPTY_ATSTART" };
    for (; *p; p++) {
        if (*p == '\\') {
            if (p[1] == 'G') return 1;
            p += p[1] == 'c' && p[2] ? 2 : p[1] ? 1 : 0;
            continue;
        }
        for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
            if (!strncmp(p, verbs[i], strlen(verbs[i]))) return 1;
    }
    return 0;
}

pcre2_code *hc_regex_compile(const char *what, const char *pattern, char *err, size_t errlen)
{
    if (start_dependent(pattern)) {
        snprintf(err, errlen, "%s '%s': \\G, (*COMMIT), (*SKIP) and (*NOTEMPTY_ATSTART) are not supported "
                 "(their matches depend on where a search starts)", what, pattern);
        return NULL;
    }
    int code;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_USE_OFFSET_LIMIT, &code, &at, NULL);
    if (re) {
        /* the interpreter when JIT is unavailable */
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
        return re;
    }
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(code, msg, sizeof msg);
    snprintf(err, errlen, "%s '%s': PCRE2: %s at offset %zu", what, pattern, (const char *)msg, (size_t)at);
    return NULL;
}

int hc_regex_budget_init(hc_regex_budget *b, size_t len, int n)
{
    b->left = (uint64_t)HC_RE_WORK * len * (uint64_t)n + HC_RE_WORK_EXTRA;
    b->mc = pcre2_match_context_create(NULL);
    if (!b->mc) return -1;
    pcre2_set_depth_limit(b->mc, HC_RE_DEPTH_LIMIT);
    return 0;
}

void hc_regex_budget_free(hc_regex_budget *b)
{
    pcre2_match_context_free(b->mc);
}

/* The end of w bytes from x: at a character boundary, at most len. */
static size_t window_end(const char *text, size_t len, size_t x, size_t w)
{
    if (w >= len - x) return len;
    size_t e = x + w;
    while (e < len && ((unsigned char)text[e] & 0xC0) == 0x80) e++;
    return e;
}

/* pcre2_match from x on the text cut at e (a partial match unless e is the
 * end) with options opts, trying starts up to limit, each charged the bytes
 * from it to e. */
static int run(hc_regex_search *s, size_t x, size_t e, size_t limit, uint32_t opts)
{
    uint64_t w = e - x + 1;
    hc_regex_budget *b = s->budget;
    pcre2_set_offset_limit(b->mc, limit);
    pcre2_set_match_limit(b->mc, w < (UINT32_MAX - HC_RE_STEPS_EXTRA) / HC_RE_STEPS
                          ? (uint32_t)(HC_RE_STEPS_EXTRA + HC_RE_STEPS * w) : UINT32_MAX);
    int rc = pcre2_match(s->re, (PCRE2_SPTR)s->text, e, x,
                         opts | PCRE2_NO_UTF_CHECK | (e < s->len ? PCRE2_PARTIAL_HARD : 0), s->md, b->mc);
    /* the starts tried: up to the one that matched or read to e, else all */
    size_t last = rc >= 0 || rc == PCRE2_ERROR_PARTIAL ? pcre2_get_startchar(s->md) : e < limit ? e : limit;
    uint64_t n = last - x + 1, cost = n * w - n * (n - 1) / 2;
    if (cost > b->left) return HC_REGEX_OVER_BUDGET;
    b->left -= cost;
    return rc;
}

/* Where pcre2_match would try next after the start before *x failed, as its
 * bump-along does: past the LF of a CR LF when a newline may be two
 * characters and the pattern names neither. 0 when it tries no other start
 * (an anchored pattern). */
static int resume(const hc_regex_search *s, size_t *x)
{
    uint32_t opts, nl, crlf;
    pcre2_pattern_info(s->re, PCRE2_INFO_ALLOPTIONS, &opts);
    pcre2_pattern_info(s->re, PCRE2_INFO_NEWLINE, &nl);
    pcre2_pattern_info(s->re, PCRE2_INFO_HASCRORLF, &crlf);
    if (opts & PCRE2_ANCHORED) return 0;
    if ((nl == PCRE2_NEWLINE_CRLF || nl == PCRE2_NEWLINE_ANY || nl == PCRE2_NEWLINE_ANYCRLF) && !crlf &&
        *x < s->len && s->text[*x - 1] == '\r' && s->text[*x] == '\n')
        ++*x;
    return 1;
}

/* The attempt at x alone (offset limit x), in windows twice as long each
 * time until one is enough, from the one the last attempt alone needed: a
 * neighbour often reads as far. */
static int alone(hc_regex_search *s, size_t x, uint32_t opts)
{
    int rc = PCRE2_ERROR_PARTIAL;
    for (size_t w = s->reach > x + 2 * WINDOW ? s->reach - x : 2 * WINDOW; rc == PCRE2_ERROR_PARTIAL; w *= 2) {
        s->reach = window_end(s->text, s->len, x, w);
        rc = run(s, x, s->reach, x, opts);
    }
    return rc;
}

int hc_regex_find(hc_regex_search *s, size_t at)
{
    for (size_t x = at;;) {
        size_t e = window_end(s->text, s->len, x, WINDOW);
        int rc = run(s, x, e, PCRE2_UNSET, 0);
        if (rc == PCRE2_ERROR_PARTIAL) {   /* the attempt at x read to e */
            x = pcre2_get_startchar(s->md);
            rc = alone(s, x, 0);
            e = x + 1;   /* it failed: the next character */
            while (e < s->len && ((unsigned char)s->text[e] & 0xC0) == 0x80) e++;
        } else if (rc == PCRE2_ERROR_NOMATCH && e == s->len) {
            return 0;
        }
        if (rc != PCRE2_ERROR_NOMATCH) return rc >= 0 ? 1 : rc;
        if (!resume(s, &e)) return 0;
        x = e;
    }
}

int hc_regex_nonempty_at(hc_regex_search *s, size_t at)
{
    int rc = alone(s, at, PCRE2_NOTEMPTY_ATSTART);
    return rc >= 0 ? 1 : rc == PCRE2_ERROR_NOMATCH ? 0 : rc;
}

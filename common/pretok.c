/* Regex pre-tokenization with PCRE2 (UTF + UCP), as tokenizers' Split
 * "Isolated": matches and the gaps between them become pieces; an empty match
 * only cuts the gap it falls in. */
#include "pretok.h"
#include "regex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The regexes as the models' tokenizer.json state them (llama.cpp's names;
 * it spells some patterns its own way, with the same splits). */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_LLAMA3(num) "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" num \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Qwen3.5: Qwen2's with marks (\p{M}) kept in words */
#define RE_QWEN35 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}" \
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* DeepSeek: CJK runs (the U+0800..U+4E00 range is theirs) */
#define RE_DEEPSEEK_CJK "[一-龥ࠀ-一가-퟿]+"
#define RE_FALCON_3DIGITS "[0-9][0-9][0-9]"

static const hc_pretok_def defs[] = {
    { "llama-bpe", 1, { RE_LLAMA3("\\p{N}{1,3}") }, 1, 1, 0, 0, { 0 } },
    { "smaug-bpe", 1, { RE_LLAMA3("\\p{N}{1,3}") }, 0, 0, 0, 0, { 0 } },
    { "qwen2", 1, { RE_LLAMA3("\\p{N}") }, 0, 0, 0, 0, { 0 } },
    { "gpt-2", 1, { RE_GPT2 }, 0, 0, 0, 0, { 0 } },
    { "starcoder", 2, { "\\p{N}", RE_GPT2 }, 0, 0, 0, 0, { 0 } },
    /* Falcon's tokenizer.json is Punctuation (Contiguous), ByteLevel with
     * GPT-2's regex, then Digits and the 3-digit Split on GPT-2 characters;
     * llama.cpp runs the 3-digit split on the text and no Digits. */
    { "falcon", 3, { HC_RE_PUNCT "+", RE_GPT2, RE_FALCON_3DIGITS }, 0, 0,
      4, 2, { HC_RE_PUNCT "+", RE_GPT2, "\\p{N}+", RE_FALCON_3DIGITS } },
    /* the same splits as gpt-2 and starcoder under other names */
    { "mpt", 1, { RE_GPT2 }, 0, 0, 0, 0, { 0 } },
    { "refact", 2, { "\\p{N}", RE_GPT2 }, 0, 0, 0, 0, { 0 } },
    { "command-r", 2, { "\\p{N}", RE_GPT2 }, 0, 0, 0, 0, { 0 } },
    { "qwen35", 1, { RE_QWEN35 }, 0, 0, 0, 0, { 0 } },
    { "deepseek-llm", 6, { "[\r\n]",
      "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", RE_DEEPSEEK_CJK, "\\p{N}+" }, 0, 0, 0, 0, { 0 } },
    { "deepseek-coder", 5, { "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_DEEPSEEK_CJK, "\\p{N}" }, 0, 0, 0, 0, { 0 } },
};
enum { N_DEFS = sizeof defs / sizeof *defs };

const hc_pretok_def *hc_pretok_by_name(const char *name)
{
    for (int i = 0; i < N_DEFS; i++)
        if (!strcmp(defs[i].name, name)) return &defs[i];
    return NULL;
}

static int same_list(const char *const *a, int na, const char *const *b, int nb)
{
    int same = na == nb;
    for (int k = 0; same && k < na; k++) same = !strcmp(a[k], b[k]);
    return same;
}

const hc_pretok_def *hc_pretok_by_regex(const char *const *regex, int n, int n_after_byte_level, int ignore_merges)
{
    const hc_pretok_def *found = NULL;
    for (int i = 0; i < N_DEFS; i++) {
        const hc_pretok_def *d = &defs[i];
        int same = n_after_byte_level ? d->n_after_byte_level == n_after_byte_level && same_list(d->json, d->n_json, regex, n)
                                      : same_list(d->regex, d->n_regex, regex, n);
        if (same && (!found || d->ignore_merges == ignore_merges)) found = d;
        if (found && found->ignore_merges == ignore_merges) break;
    }
    return found;
}

void hc_pretok_names(char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < N_DEFS && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", defs[i].name);
}

struct hc_pretok {
    int n;
    pcre2_code **re;
};

static _Thread_local char text_error[256];

const char *hc_text_error(void) { return text_error; }

void hc_text_error_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text_error, sizeof text_error, fmt, ap);
    va_end(ap);
}

hc_pretok *hc_pretok_new(const char *const *regex, int n, char *err, size_t errlen)
{
    hc_pretok *p = calloc(1, sizeof *p);
    if (p) p->re = calloc((size_t)(n > 0 ? n : 1), sizeof *p->re);
    if (!p || !p->re) {
        snprintf(err, errlen, "out of memory");
        hc_pretok_free(p);
        return NULL;
    }
    for (p->n = 0; p->n < n; p->n++) {
        p->re[p->n] = hc_regex_compile("regex", regex[p->n], err, errlen);
        if (!p->re[p->n]) {
            hc_pretok_free(p);
            return NULL;
        }
    }
    return p;
}

void hc_pretok_free(hc_pretok *p)
{
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->re[i]);
    free(p->re);
    free(p);
}

int hc_utf8_valid_len(const unsigned char *s, size_t avail)
{
    unsigned c = s[0];
    int n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (n == 0 || (size_t)n > avail) return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    /* second-byte ranges that rule out overlong forms, surrogates and > U+10FFFF */
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) || (c == 0xF0 && s[1] < 0x90) ||
        (c == 0xF4 && s[1] > 0x8F))
        return 0;
    return n;
}

typedef struct {
    const hc_pretok *p;
    pcre2_match_data **md;
    size_t len;               /* of the whole text */
    hc_regex_budget budget;   /* for the whole text, over every level */
    hc_pretok_fn fn;
    void *ctx;
} split_state;

static int split_level(split_state *s, int level, const char *text, size_t len);

static int emit_piece(split_state *s, int level, const char *text, size_t len)
{
    if (len == 0) return 0;
    return level + 1 < s->p->n ? split_level(s, level + 1, text, len) : s->fn(s->ctx, text, len);
}

static int split_level(split_state *s, int level, const char *text, size_t len)
{
    PCRE2_SIZE prev = 0, at = 0;
    hc_regex_search rs = { s->p->re[level], s->md[level], &s->budget, text, len, 0 };
    while (at < len) {
        int rc = hc_regex_find(&rs, at);
        if (rc == 0) break;
        if (rc == HC_REGEX_OVER_BUDGET) {
            hc_text_error_set("pre-tokenizer regex %d reads the text over and over: splitting %zu bytes took more "
                              "than the %d x %zu + %u bytes of reading allowed", level + 1, s->len, HC_RE_WORK * s->p->n,
                              s->len, HC_RE_WORK_EXTRA);
            return -1;
        }
        if (rc < 0) {   /* e.g. the match limit */
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(rc, msg, sizeof msg);
            hc_text_error_set("pre-tokenizer regex %d: PCRE2: %s", level + 1, (const char *)msg);
            return -1;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md[level]);
        if (ov[0] > ov[1] || ov[1] > len) {   /* \K tricks: not a split */
            hc_text_error_set("pre-tokenizer regex %d: a match that ends before it starts", level + 1);
            return -1;
        }
        if (emit_piece(s, level, text + prev, ov[0] - prev)) return -1;
        prev = ov[0];
        if (ov[1] > ov[0]) {
            if (emit_piece(s, level, text + ov[0], ov[1] - ov[0])) return -1;
            prev = at = ov[1];
        } else {
            /* empty match: search again one character further */
            at = ov[0] + (size_t)hc_utf8_valid_len((const unsigned char *)text + ov[0], len - ov[0]);
            if (at == ov[0]) return -1;
        }
    }
    return emit_piece(s, level, text + prev, len - prev);
}

int hc_pretok_split(const hc_pretok *p, const char *text, size_t len, hc_pretok_fn fn, void *ctx)
{
    if (p->n == 0) return len ? fn(ctx, text, len) : 0;
    split_state s = { .p = p, .md = calloc((size_t)p->n, sizeof *s.md), .len = len, .fn = fn, .ctx = ctx };
    int rc = s.md && hc_regex_budget_init(&s.budget, len, p->n) == 0 ? 0 : -1;
    for (int i = 0; i < p->n && !rc; i++) {
        s.md[i] = pcre2_match_data_create_from_pattern(p->re[i], NULL);
        if (!s.md[i]) rc = -1;
    }
    if (rc) hc_text_error_set("out of memory");
    if (!rc) rc = split_level(&s, 0, text, len);
    for (int i = 0; s.md && i < p->n; i++) pcre2_match_data_free(s.md[i]);
    free(s.md);
    hc_regex_budget_free(&s.budget);
    return rc ? -1 : 0;
}

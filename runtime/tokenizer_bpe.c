/* Byte-level BPE over a GGUF vocabulary as llama.cpp writes it: tokens in
 * their GPT-2 byte-to-unicode form, tokenizer.ggml.merges as "left right"
 * strings in rank order, tokenizer.ggml.pre naming the pre-tokenizer (or
 * hotcold.tokenizer.pre_regex stating it). */
#include "tokenizer_bpe.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "heap.h"
#include "normalize.h"
#include "pretok.h"

typedef struct { int32_t left, right, rank, id; } merge;   /* left < 0: empty slot */

struct hc_bpe {
    hc_normalizer *norm;        /* hotcold.tokenizer.normalizer, or NULL */
    hc_pretok *pre;
    int ignore_merges, unk;
    const void *vocab;
    hc_bpe_find find;
    char map[256][2];           /* GPT-2 unicode character of each byte (2 UTF-8 bytes at most) */
    uint8_t map_len[256];
    int32_t byte_tok[256];      /* the token of that character, or -1 */
    merge *slot;                /* (left, right) -> rank and merged token */
    uint64_t mask;
};

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
 * the other 68 become U+0100.. in byte order. */
static int printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

static int byte_cp(int b)
{
    return printable(b) ? b : b <= 32 ? 256 + b : b <= 160 ? b + 162 : 323;
}

/* The byte a GPT-2 unicode code point stands for, or -1. */
static int cp_byte(int cp)
{
    if (cp < 256) return printable(cp) ? cp : -1;
    return cp <= 288 ? cp - 256 : cp <= 322 ? cp - 162 : cp == 323 ? 173 : -1;
}

static uint64_t pair_hash(int32_t l, int32_t r)
{
    uint64_t k = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    return hc_fnv1a64(&k, sizeof k, HC_FNV_INIT);
}

static const merge *find_merge(const hc_bpe *b, int32_t l, int32_t r)
{
    for (uint64_t i = pair_hash(l, r) & b->mask;; i = (i + 1) & b->mask) {
        const merge *m = &b->slot[i];
        if (m->left < 0) return NULL;
        if (m->left == l && m->right == r) return m;
    }
}

/* The first merge of a pair wins, as in llama.cpp's bpe_ranks. */
static void add_merge(hc_bpe *b, merge m)
{
    for (uint64_t i = pair_hash(m.left, m.right) & b->mask;; i = (i + 1) & b->mask) {
        merge *s = &b->slot[i];
        if (s->left == m.left && s->right == m.right) return;
        if (s->left < 0) { *s = m; return; }
    }
}

static int load_merges(hc_bpe *b, const gguf_kv *kv, char *err, size_t errlen)
{
    uint64_t cap = 16;
    while (cap < 2 * kv->n) cap *= 2;
    b->slot = malloc(cap * sizeof *b->slot);
    if (!b->slot) return snprintf(err, errlen, "out of memory for %llu merges", (unsigned long long)kv->n), -1;
    b->mask = cap - 1;
    memset(b->slot, 0xff, cap * sizeof *b->slot);
    char *both = NULL;
    size_t both_cap = 0;
    for (uint64_t i = 0; i < kv->n; i++) {
        const char *s = kv->strs[i].ptr;
        size_t n = kv->strs[i].len;
        const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;   /* llama.cpp: the first space after byte 0 */
        if (n + 1 > both_cap) {
            char *p = realloc(both, both_cap = 2 * n + 16);
            if (!p) { free(both); return snprintf(err, errlen, "out of memory"), -1; }
            both = p;
        }
        int l = -1, r = -1, id = -1;
        if (sp) {
            size_t nl = (size_t)(sp - s), nr = n - nl - 1;
            l = b->find(b->vocab, s, nl);
            r = b->find(b->vocab, sp + 1, nr);
            memcpy(both, s, nl);
            memcpy(both + nl, sp + 1, nr);
            id = b->find(b->vocab, both, nl + nr);
        }
        if (l < 0 || r < 0 || id < 0) {
            snprintf(err, errlen, "tokenizer.ggml.merges[%llu] '%.*s': %s", (unsigned long long)i,
                     (int)(n < 64 ? n : 64), s, !sp ? "not two pieces separated by a space"
                                                     : "a piece or their concatenation is not a token");
            free(both);
            return -1;
        }
        add_merge(b, (merge){ l, r, (int32_t)i, id });
    }
    free(both);
    return 0;
}

/* The pre-tokenizer: hotcold.tokenizer.pre_regex when present, else llama.cpp's name. */
static int load_pretok(hc_bpe *b, const gguf_file *f, int *add_bos, char *err, size_t errlen)
{
    int i = gguf_find_kv(f, "hotcold.tokenizer.pre_regex");
    const hc_pretok_def *def = NULL;
    const char *rx[16];
    int n = 0;
    char *name = NULL;
    if (i >= 0) {
        const gguf_kv *kv = &f->kv[i];
        if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING || kv->n > 16)
            return snprintf(err, errlen, "hotcold.tokenizer.pre_regex: expected at most 16 strings"), -1;
        for (n = 0; n < (int)kv->n; n++) {
            /* PCRE2 takes the pattern NUL-terminated: a NUL inside cannot be meant */
            if (memchr(kv->strs[n].ptr, 0, kv->strs[n].len)) break;
            rx[n] = kv->strs[n].ptr;
        }
        if (n < (int)kv->n) return snprintf(err, errlen, "hotcold.tokenizer.pre_regex[%d] holds a NUL byte", n), -1;
    } else {
        int rc = gguf_get_str(f, "tokenizer.ggml.pre", &name);
        if (rc == 0) def = hc_pretok_by_name(name);
        if (!def) {
            char known[256];
            hc_pretok_names(known, sizeof known);
            if (rc == 0) snprintf(err, errlen, "tokenizer.ggml.pre '%s' is not a pre-tokenizer this build knows (%s)",
                                  name, known);
            else snprintf(err, errlen, "no tokenizer.ggml.pre: the pre-tokenizer of this BPE vocabulary is unknown");
            free(name);
            return -1;
        }
        free(name);
        for (n = 0; n < def->n_regex; n++) rx[n] = def->regex[n];
    }
    /* GGUF strings are not NUL-terminated: compile copies */
    char *copy[16];
    int k = 0;
    for (; k < n; k++) {
        size_t len = i >= 0 ? f->kv[i].strs[k].len : strlen(rx[k]);
        if (!(copy[k] = malloc(len + 1))) break;
        memcpy(copy[k], rx[k], len);
        copy[k][len] = 0;
    }
    b->pre = k == n ? hc_pretok_new((const char *const *)copy, n, err, errlen) : NULL;
    if (k < n) snprintf(err, errlen, "out of memory");
    while (k > 0) free(copy[--k]);
    if (!b->pre) return -1;
    b->ignore_merges = def ? def->ignore_merges : 0;
    *add_bos = def ? def->add_bos : 0;
    int v, rc = gguf_get_bool(f, "hotcold.tokenizer.ignore_merges", &v);
    if (rc == -2) return snprintf(err, errlen, "hotcold.tokenizer.ignore_merges: expected type bool"), -1;
    if (rc == 0) b->ignore_merges = v != 0;
    return 0;
}

static int load_normalizer(hc_bpe *b, const gguf_file *f, char *err, size_t errlen)
{
    int i = gguf_find_kv(f, "hotcold.tokenizer.normalizer");
    if (i < 0) return 0;
    if (f->kv[i].type != GGUF_TYPE_STRING)
        return snprintf(err, errlen, "hotcold.tokenizer.normalizer: expected type string"), -1;
    b->norm = hc_normalizer_new(f->kv[i].strs[0].ptr, f->kv[i].strs[0].len, err, errlen);
    return b->norm ? 0 : -1;
}

hc_bpe *hc_bpe_load(const gguf_file *f, const void *vocab, hc_bpe_find find, int unk, int *add_bos,
                    char *err, size_t errlen)
{
    int i = gguf_find_kv(f, "tokenizer.ggml.merges");
    if (i < 0) return snprintf(err, errlen, "no tokenizer.ggml.merges (a \"gpt2\" BPE vocabulary needs them)"), NULL;
    const gguf_kv *kv = &f->kv[i];
    if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING || kv->n > INT_MAX / 4) {
        snprintf(err, errlen, "tokenizer.ggml.merges: expected an array of strings");
        return NULL;
    }
    hc_bpe *b = calloc(1, sizeof *b);
    if (!b) return snprintf(err, errlen, "out of memory"), NULL;
    b->vocab = vocab;
    b->find = find;
    b->unk = unk;
    for (int c = 0; c < 256; c++) {
        int cp = byte_cp(c);
        if (cp < 0x80) {
            b->map[c][0] = (char)cp;
            b->map_len[c] = 1;
        } else {
            b->map[c][0] = (char)(0xC0 | cp >> 6);
            b->map[c][1] = (char)(0x80 | (cp & 0x3F));
            b->map_len[c] = 2;
        }
        b->byte_tok[c] = find(vocab, b->map[c], b->map_len[c]);
    }
    if (!load_merges(b, kv, err, errlen) && !load_pretok(b, f, add_bos, err, errlen) &&
        !load_normalizer(b, f, err, errlen))
        return b;
    hc_bpe_free(b);
    return NULL;
}

void hc_bpe_free(hc_bpe *b)
{
    if (b) {
        hc_pretok_free(b->pre);
        hc_normalizer_free(b->norm);
        free(b->slot);
    }
    free(b);
}

/* ------------------------------------------------------------- encoding */

typedef struct { int32_t id, prev, next; } sym;            /* id < 0 after merged away */
typedef struct { int32_t rank, left, id; } cand;            /* merge sym[left] with its next into id */

typedef struct {
    const hc_bpe *b;
    hc_bpe_emit emit;
    void *ctx;
    sym *s; size_t s_cap;
    hc_heap heap;              /* of cand */
    char *buf; size_t buf_cap;
} session;

/* Lowest rank first; on a tie the leftmost pair (tokenizers' Word::merge_all). */
static int before(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static int push(session *w, int left)
{
    int right = w->s[left].next;
    if (right < 0) return 0;
    const merge *m = find_merge(w->b, w->s[left].id, w->s[right].id);
    cand c = { m ? m->rank : 0, left, m ? m->id : 0 };
    return m ? hc_heap_push(&w->heap, &c) : 0;
}

/* One pre-tokenized piece (a "word"). */
static int encode_word(void *ctx, const char *word, size_t len)
{
    session *w = ctx;
    const hc_bpe *b = w->b;
    const unsigned char *u = (const unsigned char *)word;
    if (b->ignore_merges) {
        if (hc_grow(&w->buf, &w->buf_cap, 2 * len, 1)) return -1;
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
            memcpy(w->buf + o, b->map[u[i]], b->map_len[u[i]]);
            o += b->map_len[u[i]];
        }
        int id = b->find(b->vocab, w->buf, o);
        if (id >= 0) { w->emit(w->ctx, id); return 0; }
    }
    if (hc_grow(&w->s, &w->s_cap, len, sizeof *w->s)) return -1;
    for (size_t i = 0; i < len; i++) w->s[i] = (sym){ b->byte_tok[u[i]], (int32_t)i - 1, i + 1 < len ? (int32_t)i + 1 : -1 };
    w->heap.n = 0;
    for (size_t i = 0; i + 1 < len; i++)
        if (push(w, (int)i)) return -1;
    while (w->heap.n > 0) {
        cand c;
        hc_heap_pop(&w->heap, &c);
        sym *l = &w->s[c.left];
        if (l->id < 0 || l->next < 0) continue;
        const merge *m = find_merge(b, l->id, w->s[l->next].id);
        if (!m || m->id != c.id) continue;     /* stale: a side was merged since */
        sym *r = &w->s[l->next];
        l->id = c.id;
        l->next = r->next;
        if (r->next >= 0) w->s[r->next].prev = c.left;
        r->id = -1;
        r->next = -1;
        if ((l->prev >= 0 && push(w, l->prev)) || push(w, c.left)) return -1;
    }
    /* a byte whose character is not a token: <unk> when the vocabulary has one
     * (tokenizers drops it otherwise) */
    for (int i = 0; i >= 0; i = w->s[i].next) {
        int id = w->s[i].id >= 0 ? w->s[i].id : b->unk;
        if (id >= 0) w->emit(w->ctx, id);
    }
    return 0;
}

/* text with every byte that does not start a valid UTF-8 character replaced
 * by U+FFFD, or NULL when it is all valid (or out of memory: *oom). */
static char *replace_invalid(const char *text, size_t len, size_t *out_len, int *oom)
{
    size_t bad = 0;
    for (size_t i = 0; i < len;) {
        int n = hc_utf8_valid_len((const unsigned char *)text + i, len - i);
        bad += n == 0;
        i += n ? (size_t)n : 1;
    }
    *oom = 0;
    if (!bad) return NULL;
    char *s = malloc(len + 2 * bad), *o = s;
    if (!s) { *oom = 1; return NULL; }
    for (size_t i = 0; i < len;) {
        int n = hc_utf8_valid_len((const unsigned char *)text + i, len - i);
        if (n) { memcpy(o, text + i, (size_t)n); o += n; i += (size_t)n; }
        else { memcpy(o, "\xef\xbf\xbd", 3); o += 3; i++; }
    }
    *out_len = (size_t)(o - s);
    return s;
}

int hc_bpe_encode(const hc_bpe *b, const char *text, size_t len, hc_bpe_emit emit, void *ctx)
{
    int oom;
    size_t n = len;
    char *fixed = replace_invalid(text, len, &n, &oom), *norm = NULL;
    if (oom) return -1;
    if (b->norm && !(norm = hc_normalize(b->norm, fixed ? fixed : text, n, &n))) {
        free(fixed);
        return -1;
    }
    session w = { .b = b, .emit = emit, .ctx = ctx, .heap = { .esz = sizeof(cand), .first = before } };
    int rc = hc_pretok_split(b->pre, norm ? norm : fixed ? fixed : text, n, encode_word, &w);
    free(fixed);
    free(norm);
    free(w.s);
    free(w.heap.v);
    free(w.buf);
    return rc;
}

int hc_bpe_unmap(const char *piece, size_t n, char *buf, int cap)
{
    int w = 0;
    for (size_t i = 0; i < n && w < cap;) {
        const unsigned char *u = (const unsigned char *)piece + i;
        int cl = hc_utf8_valid_len(u, n - i);
        int byte = cl == 1 ? cp_byte(u[0]) : cl == 2 ? cp_byte((u[0] & 0x1F) << 6 | (u[1] & 0x3F)) : -1;
        if (byte >= 0) {
            buf[w++] = (char)byte;
            i += (size_t)cl;
            continue;
        }
        /* not a mapped character (an added token's text): copied as it is */
        for (int k = 0; k < (cl ? cl : 1) && w < cap; k++) buf[w++] = piece[i + (size_t)k];
        i += cl ? (size_t)cl : 1;
    }
    return w;
}

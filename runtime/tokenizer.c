/* SentencePiece-style tokenizer over a GGUF vocab, following llama.cpp's
 * llm_tokenizer_spm: split on special-token texts, prefix a space, escape
 * spaces as U+2581, then merge adjacent symbols by vocab score with a heap. */
#include "tokenizer.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* llama_token_type */
enum { TT_UNDEFINED = 0, TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3,
       TT_USER_DEFINED = 4, TT_UNUSED = 5, TT_BYTE = 6 };

struct hc_tokenizer {
    int n_vocab;
    char *text;            /* every piece back to back */
    size_t *off;           /* piece i is text[off[i], off[i+1]) */
    float *score;
    uint8_t *type;
    int32_t *slot;         /* open-addressing piece -> id table, -1 = empty */
    uint64_t mask;
    size_t max_piece;      /* longest piece: longer candidates cannot match */
    int32_t *special;      /* ids split out before merging, longest text first */
    int n_special;
    int32_t byte_id[256];  /* byte-fallback token of each byte, or -1 */
    int bos, eos, unk;     /* -1 when the vocab has none */
    int add_bos, add_space_prefix;
    int word_chunks;       /* no piece holds a U+2581 right after another character */
};

static const char *piece(const hc_tokenizer *t, int id) { return t->text + t->off[id]; }
static size_t piece_len(const hc_tokenizer *t, int id) { return t->off[id + 1] - t->off[id]; }

static int find_piece(const hc_tokenizer *t, const char *s, size_t n)
{
    if (n > t->max_piece) return -1;
    for (uint64_t i = hc_fnv1a64(s, n, HC_FNV_INIT) & t->mask;; i = (i + 1) & t->mask) {
        int32_t id = t->slot[i];
        if (id < 0) return -1;
        if (piece_len(t, id) == n && memcmp(piece(t, id), s, n) == 0) return id;
    }
}

/* A later duplicate replaces an earlier one, as llama.cpp's token_to_id map does. */
static void insert_piece(hc_tokenizer *t, int32_t id)
{
    size_t n = piece_len(t, id);
    for (uint64_t i = hc_fnv1a64(piece(t, id), n, HC_FNV_INIT) & t->mask;; i = (i + 1) & t->mask) {
        int32_t old = t->slot[i];
        if (old < 0 || (piece_len(t, old) == n && memcmp(piece(t, old), piece(t, id), n) == 0)) {
            t->slot[i] = id;
            return;
        }
    }
}

static void fail(char *err, size_t errlen, const gguf_file *f, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(char *err, size_t errlen, const gguf_file *f, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (!err || !errlen) return;
    n = snprintf(err, errlen, "%s: ", f->path ? f->path : "gguf");
    if (n < 0 || (size_t)n >= errlen) n = 0;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* The array KV `key` of element type et with exactly n elements (any n if 0);
 * NULL when absent. Sets *bad (and err) when it has another type or length. */
static const gguf_kv *get_array(const gguf_file *f, const char *key, uint32_t et, uint64_t n,
                                int *bad, char *err, size_t errlen)
{
    int i = gguf_find_kv(f, key);
    if (i < 0) return NULL;
    const gguf_kv *kv = &f->kv[i];
    if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != et) {
        fail(err, errlen, f, "%s: expected an array of %s", key, gguf_vtype_name(et));
    } else if (n && kv->n != n) {
        fail(err, errlen, f, "%s: has %llu values, expected %llu", key,
             (unsigned long long)kv->n, (unsigned long long)n);
    } else {
        return kv;
    }
    *bad = 1;
    return NULL;
}

/* Optional u32 token id: def if absent, -1 for 0xFFFFFFFF (llama.cpp's "no
 * such token"); any other id outside the vocabulary is an error naming the
 * key, not a token silently dropped. */
static int get_id(const gguf_file *f, const char *key, int def, int n_vocab, int *bad,
                  char *err, size_t errlen)
{
    uint32_t v;
    int rc = gguf_get_u32(f, key, &v);
    if (rc == -2 || (rc == 0 && v != UINT32_MAX && v >= (uint32_t)n_vocab)) {
        if (!*bad && rc == -2) fail(err, errlen, f, "%s: expected type u32", key);
        else if (!*bad) fail(err, errlen, f, "%s = %u is not a token id (the vocabulary has %d tokens)", key, v, n_vocab);
        *bad = 1;
        return -1;
    }
    if (rc == 0) return v == UINT32_MAX ? -1 : (int)v;
    return def < n_vocab ? def : -1;
}

static int get_flag(const gguf_file *f, const char *key, int def, int *bad, char *err, size_t errlen)
{
    int v;
    int rc = gguf_get_bool(f, key, &v);
    if (rc == -2) {
        fail(err, errlen, f, "%s: expected type bool", key);
        *bad = 1;
    }
    return rc == 0 ? (v != 0) : def;
}

static const char SPACE[3] = { '\xe2', '\x96', '\x81' };   /* U+2581 */

/* Whether a piece holds U+2581 after some other character: then merges can
 * cross the start of a word and words cannot be tokenized separately. */
static int spans_word_start(const char *p, size_t n)
{
    for (size_t k = 1; k + 3 <= n; k++)
        if (memcmp(p + k, SPACE, 3) == 0 && (k < 3 || memcmp(p + k - 3, SPACE, 3) != 0)) return 1;
    return 0;
}

typedef struct { size_t len; int32_t id; } special_key;

static int cmp_special(const void *a, const void *b)
{
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int build_specials(hc_tokenizer *t)
{
    special_key *keys = malloc((size_t)t->n_vocab * sizeof *keys);
    if (!keys) return -1;
    int n = 0;
    for (int id = 0; id < t->n_vocab; id++) {
        int ty = t->type[id];
        if ((ty == TT_CONTROL || ty == TT_USER_DEFINED || ty == TT_UNKNOWN) && piece_len(t, id) > 0)
            keys[n++] = (special_key){ piece_len(t, id), id };
    }
    qsort(keys, (size_t)n, sizeof *keys, cmp_special);
    t->special = malloc((size_t)(n ? n : 1) * sizeof *t->special);
    if (t->special)
        for (int i = 0; i < n; i++) t->special[i] = keys[i].id;
    t->n_special = n;
    free(keys);
    return t->special ? 0 : -1;
}

hc_tokenizer *hc_tokenizer_load(const gguf_file *f, char *err, size_t errlen)
{
    char *model = NULL;
    int bad = 0;
    int rc = gguf_get_str(f, "tokenizer.ggml.model", &model);
    if (rc != 0 || strcmp(model, "llama") != 0) {
        if (rc == -1) fail(err, errlen, f, "no tokenizer.ggml.model: the file has no vocabulary");
        else if (rc == -2) fail(err, errlen, f, "tokenizer.ggml.model: expected type string");
        else fail(err, errlen, f, "tokenizer.ggml.model is \"%s\": only \"llama\" (SentencePiece) is supported", model);
        free(model);
        return NULL;
    }
    free(model);

    const gguf_kv *tokens = get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, 0, &bad, err, errlen);
    if (!tokens) {
        if (!bad) fail(err, errlen, f, "no tokenizer.ggml.tokens");
        return NULL;
    }
    if (tokens->n == 0 || tokens->n > INT_MAX / 8) {
        fail(err, errlen, f, "tokenizer.ggml.tokens: %llu tokens", (unsigned long long)tokens->n);
        return NULL;
    }
    int n = (int)tokens->n;
    /* Both optional, as in llama.cpp: scores default to 0, types to NORMAL. */
    const gguf_kv *scores = get_array(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, tokens->n, &bad, err, errlen);
    const gguf_kv *types = get_array(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, tokens->n, &bad, err, errlen);
    if (bad) return NULL;

    hc_tokenizer *t = calloc(1, sizeof *t);
    if (!t) goto oom;
    t->n_vocab = n;
    t->bos = get_id(f, "tokenizer.ggml.bos_token_id", 1, n, &bad, err, errlen);
    t->eos = get_id(f, "tokenizer.ggml.eos_token_id", 2, n, &bad, err, errlen);
    t->unk = get_id(f, "tokenizer.ggml.unknown_token_id", 0, n, &bad, err, errlen);
    static const char *const unused[] = { "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id",
                                          "tokenizer.ggml.cls_token_id", "tokenizer.ggml.mask_token_id" };
    for (size_t k = 0; k < sizeof unused / sizeof *unused; k++)   /* checked, not used */
        get_id(f, unused[k], -1, n, &bad, err, errlen);
    t->add_bos = get_flag(f, "tokenizer.ggml.add_bos_token", 1, &bad, err, errlen);
    t->add_space_prefix = get_flag(f, "tokenizer.ggml.add_space_prefix", 1, &bad, err, errlen);
    if (bad) {
        hc_tokenizer_free(t);
        return NULL;
    }

    size_t total = 0;
    for (int i = 0; i < n; i++) total += tokens->strs[i].len;
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n) cap *= 2;
    t->text = malloc(total ? total : 1);
    t->off = malloc(((size_t)n + 1) * sizeof *t->off);
    t->score = malloc((size_t)n * sizeof *t->score);
    t->type = malloc((size_t)n);
    t->slot = malloc(cap * sizeof *t->slot);
    if (!t->text || !t->off || !t->score || !t->type || !t->slot) goto oom;
    t->mask = cap - 1;
    memset(t->slot, 0xff, cap * sizeof *t->slot);

    size_t o = 0;
    for (int i = 0; i < n; i++) {
        size_t len = tokens->strs[i].len;
        memcpy(t->text + o, tokens->strs[i].ptr, len);
        t->off[i] = o;
        o += len;
        if (len > t->max_piece) t->max_piece = len;
        t->score[i] = scores ? (float)gguf_kv_num(scores, (uint64_t)i) : 0.0f;
        double ty = types ? gguf_kv_num(types, (uint64_t)i) : TT_NORMAL;
        t->type[i] = ty >= 0 && ty <= TT_BYTE ? (uint8_t)ty : TT_UNDEFINED;
    }
    t->off[n] = o;
    t->word_chunks = 1;
    for (int i = 0; i < n; i++) {
        insert_piece(t, i);
        if (spans_word_start(piece(t, i), piece_len(t, i))) t->word_chunks = 0;
    }

    /* llama.cpp's byte_to_token: "<0xXX>", else the byte itself as a piece. */
    for (int b = 0; b < 256; b++) {
        char hex[7], raw = (char)b;
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int id = find_piece(t, hex, 6);
        t->byte_id[b] = id >= 0 ? id : find_piece(t, &raw, 1);
    }
    if (build_specials(t) != 0) goto oom;
    return t;

oom:
    fail(err, errlen, f, "out of memory loading the vocabulary");
    hc_tokenizer_free(t);
    return NULL;
}

void hc_tokenizer_free(hc_tokenizer *t)
{
    if (!t) return;
    free(t->text);
    free(t->off);
    free(t->score);
    free(t->type);
    free(t->slot);
    free(t->special);
    free(t);
}

int hc_tokenizer_n_vocab(const hc_tokenizer *t) { return t->n_vocab; }
int hc_tokenizer_bos(const hc_tokenizer *t) { return t->bos; }
int hc_tokenizer_eos(const hc_tokenizer *t) { return t->eos; }
int hc_tokenizer_add_bos(const hc_tokenizer *t) { return t->add_bos; }

/* ------------------------------------------------------------- encoding */

typedef struct { int32_t prev, next, off, n; } symbol;        /* n == 0: merged away */
typedef struct { float score; int32_t left, right, size; } bigram;
typedef struct { size_t off, len; int32_t id; } frag;          /* id < 0: raw text */

/* Scratch of one hc_tokenize call, grown as needed and reused across fragments. */
typedef struct {
    const hc_tokenizer *t;
    int32_t *out;
    int max, n;            /* tokens needed so far (may exceed max) */
    int failed;            /* out of memory, or a byte with neither byte token nor unk */
    char *esc; size_t esc_cap;
    symbol *sym; size_t sym_cap;
    bigram *heap; size_t heap_n, heap_cap;
    frag *fr[2]; size_t fr_cap[2];
} work;

static int grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *p = realloc(*(void **)pp, c * elem);
    if (!p) return -1;
    *(void **)pp = p;
    *cap = c;
    return 0;
}

static void emit(work *w, int id)
{
    if (id < 0) { w->failed = 1; return; }
    if (w->n < w->max) w->out[w->n] = id;
    w->n++;
}

/* Highest score first; on a tie the leftmost pair (llm_bigram_spm::comparator). */
static int better(const bigram *a, const bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(work *w, bigram b)
{
    if (grow(&w->heap, &w->heap_cap, w->heap_n + 1, sizeof b) != 0) { w->failed = 1; return; }
    size_t i = w->heap_n++;
    while (i > 0 && better(&b, &w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = b;
}

static bigram heap_pop(work *w)
{
    bigram top = w->heap[0], last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && better(&w->heap[c + 1], &w->heap[c])) c++;
        if (!better(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

static void try_bigram(work *w, int left, int right)
{
    if (left < 0 || right < 0) return;
    const symbol *l = &w->sym[left];
    int size = l->n + w->sym[right].n;
    int id = find_piece(w->t, w->esc + l->off, (size_t)size);
    if (id >= 0) heap_push(w, (bigram){ w->t->score[id], left, right, size });
}

/* Length of the UTF-8 character at s as llama.cpp's unicode_len_utf8 reads its
 * lead byte, but 1 when the continuation bytes are missing or wrong: a broken
 * sequence then becomes byte tokens and never swallows the next character. */
static int utf8_len(const unsigned char *s, size_t avail)
{
    static const uint8_t lead[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    size_t n = lead[s[0] >> 4];
    if (n > avail) return 1;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 1;
    return (int)n;
}

static int is_space(const work *w, const symbol *s)
{
    return s->n == 3 && memcmp(w->esc + s->off, SPACE, 3) == 0;
}

/* Merge symbols [a, b) by score, then emit them. */
static void merge_chunk(work *w, int a, int b)
{
    w->sym[a].prev = -1;
    w->sym[b - 1].next = -1;
    w->heap_n = 0;
    for (int i = a + 1; i < b; i++) try_bigram(w, i - 1, i);
    while (w->heap_n > 0 && !w->failed) {
        bigram g = heap_pop(w);
        symbol *l = &w->sym[g.left], *r = &w->sym[g.right];
        /* stale: one side was merged since this pair was queued */
        if (l->n == 0 || r->n == 0 || l->n + r->n != g.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = g.left;
        try_bigram(w, l->prev, g.left);
        try_bigram(w, g.left, l->next);
    }
    /* a is never merged away: merges fold the right symbol into the left */
    for (int i = a; i >= 0; i = w->sym[i].next) {
        const symbol *s = &w->sym[i];
        int id = find_piece(w->t, w->esc + s->off, (size_t)s->n);
        if (id >= 0) { emit(w, id); continue; }
        for (int j = 0; j < s->n; j++) {
            int byte = w->t->byte_id[(unsigned char)w->esc[s->off + j]];
            emit(w, byte >= 0 ? byte : w->t->unk);
        }
    }
}

/* One raw-text fragment: llm_tokenizer_spm_session::tokenize. When no piece
 * spans a word start (see word_chunks), each word is merged on its own: the
 * same result as one queue over the whole text, but a small, cache-resident heap. */
static void spm_encode(work *w, const char *text, size_t len, int prefix)
{
    size_t n_esc = 0;
    for (size_t i = 0; i < len; i++) n_esc += text[i] == ' ' ? 3 : 1;
    n_esc += prefix ? 3 : 0;
    if (grow(&w->esc, &w->esc_cap, n_esc, 1) != 0 ||
        grow(&w->sym, &w->sym_cap, n_esc, sizeof *w->sym) != 0) {
        w->failed = 1;
        return;
    }
    char *e = w->esc;
    if (prefix) { memcpy(e, SPACE, 3); e += 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(e, SPACE, 3); e += 3; }
        else *e++ = text[i];
    }

    int ns = 0;
    for (size_t o = 0; o < n_esc; ns++) {
        int cl = utf8_len((const unsigned char *)w->esc + o, n_esc - o);
        w->sym[ns] = (symbol){ ns - 1, ns + 1, (int32_t)o, cl };
        o += (size_t)cl;
    }
    int a = 0;
    for (int i = 1; i < ns && w->t->word_chunks; i++)
        if (is_space(w, &w->sym[i]) && !is_space(w, &w->sym[i - 1])) {
            merge_chunk(w, a, i);
            a = i;
        }
    if (ns > a) merge_chunk(w, a, ns);
}

/* tokenizer_st_partition: for each special token, longest text first, cut every
 * occurrence out of the raw fragments. Returns the fragment list in fr[cur]. */
static int partition(work *w, const char *text, size_t len, int parse_special, size_t *nfr)
{
    const hc_tokenizer *t = w->t;
    int cur = 0;
    if (grow(&w->fr[0], &w->fr_cap[0], 1, sizeof(frag)) != 0) return -1;
    w->fr[0][0] = (frag){ 0, len, -1 };
    *nfr = 1;
    for (int k = 0; k < t->n_special; k++) {
        int id = t->special[k];
        if (!parse_special && t->type[id] != TT_USER_DEFINED) continue;
        const char *p = piece(t, id);
        size_t pl = piece_len(t, id), n = 0;
        frag *src = w->fr[cur];
        for (size_t i = 0; i < *nfr; i++) {
            frag f = src[i];
            /* each fragment splits into at most 2 * matches + 1 */
            while (f.id < 0 && f.len >= pl) {
                const char *m = memmem(text + f.off, f.len, p, pl);
                if (!m) break;
                size_t at = (size_t)(m - text);
                if (grow(&w->fr[!cur], &w->fr_cap[!cur], n + 2, sizeof(frag)) != 0) return -1;
                if (at > f.off) w->fr[!cur][n++] = (frag){ f.off, at - f.off, -1 };
                w->fr[!cur][n++] = (frag){ at, pl, id };
                f.len -= at + pl - f.off;
                f.off = at + pl;
            }
            if (f.len == 0 && f.id < 0) continue;
            if (grow(&w->fr[!cur], &w->fr_cap[!cur], n + 1, sizeof(frag)) != 0) return -1;
            w->fr[!cur][n++] = f;
        }
        cur = !cur;
        *nfr = n;
    }
    return cur;
}

int hc_tokenize(const hc_tokenizer *t, const char *text, size_t len, int add_bos,
                int parse_special, int32_t *out, int max)
{
    /* every input byte costs at most 3 tokens (a space with no U+2581 token),
     * plus BOS and a prefix per fragment: this bound keeps counts in int */
    if ((!text && len) || len > INT_MAX / 8 || (add_bos && t->bos < 0)) return -1;
    work w = { .t = t, .out = out, .max = out ? (max > 0 ? max : 0) : 0 };
    if (add_bos) emit(&w, t->bos);
    if (len > 0) {
        size_t nfr = 0;
        int cur = partition(&w, text, len, parse_special, &nfr);
        if (cur < 0) w.failed = 1;
        /* llama.cpp prefixes a space to raw text at the start and after a special token */
        int prev_special = 1;
        for (size_t i = 0; i < nfr && !w.failed; i++) {
            const frag *f = &w.fr[cur][i];
            if (f->id >= 0) {
                emit(&w, f->id);
                prev_special = 1;
            } else {
                spm_encode(&w, text + f->off, f->len, t->add_space_prefix && prev_special);
                prev_special = 0;
            }
        }
    }
    free(w.esc);
    free(w.sym);
    free(w.heap);
    free(w.fr[0]);
    free(w.fr[1]);
    return w.failed ? -1 : w.n;
}

/* ------------------------------------------------------------- decoding */

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int hc_token_to_piece(const hc_tokenizer *t, int prev, int id, char *buf, int cap)
{
    if (id < 0 || id >= t->n_vocab || cap < 0 || (!buf && cap > 0)) return -1;
    const char *p = piece(t, id);
    size_t n = piece_len(t, id), i = 0;
    int w = 0;
    switch (t->type[id]) {
    case TT_CONTROL: case TT_UNKNOWN: case TT_UNUSED:
        n = 0;
        break;
    case TT_BYTE:
        if (n == 6 && memcmp(p, "<0x", 3) == 0 && p[5] == '>' && hexval(p[3]) >= 0 && hexval(p[4]) >= 0) {
            if (cap > 0) buf[w++] = (char)(hexval(p[3]) * 16 + hexval(p[4]));
            n = 0;
        }
        break;
    case TT_USER_DEFINED:
        break;
    default:
        /* NORMAL (and UNDEFINED): U+2581 -> ' '; after BOS the leading one is dropped */
        if (prev >= 0 && prev == t->bos && n >= 3 && memcmp(p, SPACE, 3) == 0) i = 3;
        for (; i < n && w < cap; i++) {
            if (i + 3 <= n && memcmp(p + i, SPACE, 3) == 0) {
                buf[w++] = ' ';
                i += 2;
            } else {
                buf[w++] = p[i];
            }
        }
        n = 0;
    }
    for (; i < n && w < cap; i++) buf[w++] = p[i];
    if (w < cap) buf[w] = 0;
    return w;
}

int32_t *hc_tokenize_file(const hc_tokenizer *tok, const char *path, int64_t *n, char *err, size_t errlen)
{
    size_t len;
    char *text = hc_read_file(path, &len, err, errlen);
    if (!text) return NULL;
    if (len > INT32_MAX / 2) {
        snprintf(err, errlen, "%s: corpus larger than 1 GiB; split it", path);
        free(text);
        return NULL;
    }
    int cap = (int)len + 16;
    int32_t *t = malloc((size_t)cap * sizeof *t);
    int k = t ? hc_tokenize(tok, text, len, 0, 0, t, cap) : -1;
    if (k > cap) {
        int32_t *t2 = realloc(t, (size_t)k * sizeof *t);
        k = t2 ? hc_tokenize(tok, text, len, 0, 0, (t = t2), k) : -1;
    }
    free(text);
    if (k <= 0) {
        snprintf(err, errlen, "%s: %s", path, k == 0 ? "empty corpus (no tokens)" : "cannot tokenize");
        free(t);
        return NULL;
    }
    *n = k;
    return t;
}

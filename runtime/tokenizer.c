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
#include "heap.h"
#include "pretok.h"
#include "tokenizer_bpe.h"

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
    uint8_t *strip;        /* per id: 1 lstrip, 2 rstrip (tokenizers' added-token flags), or NULL */
    int n_special;
    int32_t byte_id[256];  /* byte-fallback token of each byte, or -1 */
    int bos, eos, unk;     /* -1 when the vocab has none */
    int eot, eom;          /* end of turn, of message: -1 when not given */
    int add_bos, add_eos, add_space_prefix;
    int metaspace;         /* the space prefix as tokenizers' Metaspace: 0 no (llama.cpp), 1 "always", 2 "first" */
    int word_chunks;       /* no piece holds a U+2581 right after another character */
    int fuse_unk;          /* SPM: a run of unknown characters is one <unk> (tokenizers' fuse_unk) */
    int unigram;           /* SPM: Viterbi over the piece scores (tokenizers' Unigram), not bigram merges */
    double unk_score;      /* Unigram: the score of an unknown character */
    hc_bpe *bpe;           /* "gpt2": byte-level BPE (tokenizer_bpe.c); NULL for SentencePiece */
    char *path;            /* the model file, for hc_tokenize_error */
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

/* hotcold.tokenizer.prepend_scheme: absent 0, "always" 1, "first" 2. */
static int get_scheme(const gguf_file *f, int *bad, char *err, size_t errlen)
{
    char *s = NULL;
    int rc = gguf_get_str(f, "hotcold.tokenizer.prepend_scheme", &s), v = -1;
    if (rc == 0) v = !strcmp(s, "always") ? 1 : !strcmp(s, "first") ? 2 : -1;
    if (rc == -1) v = 0;
    if (v < 0) {
        fail(err, errlen, f, "hotcold.tokenizer.prepend_scheme: expected \"always\" or \"first\"");
        *bad = 1;
    }
    free(s);
    return v;
}

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

static int find_cb(const void *t, const char *s, size_t n) { return find_piece(t, s, n); }

/* The BPE half of a "gpt2" vocabulary; add_bos defaults to what llama.cpp
 * assumes for the pre-tokenizer. Frees t on failure. */
static hc_tokenizer *load_bpe(hc_tokenizer *t, const gguf_file *f, char *err, size_t errlen)
{
    char msg[400];
    int add_bos = 0, bad = 0;
    int unk = t->unk >= 0 && t->type[t->unk] == TT_UNKNOWN ? t->unk : -1;
    t->bpe = hc_bpe_load(f, t, find_cb, unk, &add_bos, msg, sizeof msg);
    if (!t->bpe) fail(err, errlen, f, "%s", msg);
    else t->add_bos = get_flag(f, "tokenizer.ggml.add_bos_token", add_bos, &bad, err, errlen);
    if (t->bpe && !bad) return t;
    hc_tokenizer_free(t);
    return NULL;
}

/* tokenizer.ggml.model: 0 "llama", 1 "gpt2", -1 (and err) otherwise. */
static int model_kind(const gguf_file *f, char *err, size_t errlen)
{
    char *model = NULL;
    int rc = gguf_get_str(f, "tokenizer.ggml.model", &model), kind = -1;
    if (rc == -1) fail(err, errlen, f, "no tokenizer.ggml.model: the file has no vocabulary");
    else if (rc == -2) fail(err, errlen, f, "tokenizer.ggml.model: expected type string");
    else if (!strcmp(model, "llama") || !strcmp(model, "gpt2")) kind = !strcmp(model, "gpt2");
    else fail(err, errlen, f, "tokenizer.ggml.model is \"%s\": only \"llama\" (SentencePiece) and \"gpt2\" "
              "(byte-level BPE) are supported", model);
    free(model);
    return kind;
}

/* BOS, EOS, UNK (llama.cpp's defaults 1, 2, 0), EOT and EOM (none), and the
 * special ids the runtime does not use, each checked against the vocabulary of n tokens. */
static void read_special_ids(hc_tokenizer *t, const gguf_file *f, int n, int *bad, char *err, size_t errlen)
{
    t->bos = get_id(f, "tokenizer.ggml.bos_token_id", 1, n, bad, err, errlen);
    t->eos = get_id(f, "tokenizer.ggml.eos_token_id", 2, n, bad, err, errlen);
    t->unk = get_id(f, "tokenizer.ggml.unknown_token_id", 0, n, bad, err, errlen);
    t->eot = get_id(f, "tokenizer.ggml.eot_token_id", -1, n, bad, err, errlen);
    t->eom = get_id(f, "tokenizer.ggml.eom_token_id", -1, n, bad, err, errlen);
    static const char *const unused[] = { "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id",
                                          "tokenizer.ggml.cls_token_id", "tokenizer.ggml.mask_token_id" };
    for (size_t k = 0; k < sizeof unused / sizeof *unused; k++)
        get_id(f, unused[k], -1, n, bad, err, errlen);
}

/* The flags beyond llama.cpp's that runtime/tokenizer.c follows (docs/design/tokenizer.md). */
static void read_hotcold_flags(hc_tokenizer *t, const gguf_file *f, int is_bpe, int *bad, char *err, size_t errlen)
{
    t->fuse_unk = get_flag(f, "hotcold.tokenizer.fuse_unk", 1, bad, err, errlen);
    t->metaspace = get_scheme(f, bad, err, errlen);
    t->unigram = !is_bpe && get_flag(f, "hotcold.tokenizer.unigram", 0, bad, err, errlen);
}

/* tokenizers' Unigram: an unknown character scores 10 below the lowest piece. */
static void set_unk_score(hc_tokenizer *t)
{
    int have = 0;
    float lo = 0.0f;
    for (int i = 0; i < t->n_vocab; i++)
        if (t->type[i] != TT_UNUSED && (!have++ || t->score[i] < lo)) lo = t->score[i];
    t->unk_score = (double)lo - 10.0;
}

/* hotcold.tokenizer.lstrip / rstrip: ids of added tokens that take the
 * whitespace before / after them. */
static int read_strip(hc_tokenizer *t, const gguf_file *f, char *err, size_t errlen)
{
    static const char *const keys[2] = { "hotcold.tokenizer.lstrip", "hotcold.tokenizer.rstrip" };
    int bad = 0;
    for (int k = 0; k < 2; k++) {
        const gguf_kv *kv = get_array(f, keys[k], GGUF_TYPE_UINT32, 0, &bad, err, errlen);
        if (bad) return -1;
        if (!kv) continue;
        if (!t->strip && !(t->strip = calloc((size_t)t->n_vocab, 1))) return -1;
        for (uint64_t i = 0; i < kv->n; i++) {
            double id = gguf_kv_num(kv, i);
            if (id >= t->n_vocab) {
                fail(err, errlen, f, "%s: id %.0f outside the vocabulary", keys[k], id);
                return -1;
            }
            t->strip[(int)id] |= (uint8_t)(1 << k);
        }
    }
    return 0;
}

/* llama.cpp's byte_to_token: "<0xXX>", else the byte itself as a piece. */
static void find_byte_tokens(hc_tokenizer *t)
{
    for (int b = 0; b < 256; b++) {
        char hex[7], raw = (char)b;
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int id = find_piece(t, hex, 6);
        t->byte_id[b] = id >= 0 ? id : find_piece(t, &raw, 1);
    }
}

hc_tokenizer *hc_tokenizer_load(const gguf_file *f, char *err, size_t errlen)
{
    int bad = 0, is_bpe = model_kind(f, err, errlen);
    if (is_bpe < 0) return NULL;

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
    if (!t || !(t->path = strdup(f->path ? f->path : "(model)"))) {
        free(t);
        goto oom;
    }
    t->n_vocab = n;
    read_special_ids(t, f, n, &bad, err, errlen);
    t->add_bos = get_flag(f, "tokenizer.ggml.add_bos_token", 1, &bad, err, errlen);
    t->add_space_prefix = get_flag(f, "tokenizer.ggml.add_space_prefix", !is_bpe, &bad, err, errlen);
    t->add_eos = get_flag(f, "tokenizer.ggml.add_eos_token", 0, &bad, err, errlen);
    read_hotcold_flags(t, f, is_bpe, &bad, err, errlen);
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
    set_unk_score(t);
    t->word_chunks = 1;
    for (int i = 0; i < n; i++) {
        insert_piece(t, i);
        if (spans_word_start(piece(t, i), piece_len(t, i))) t->word_chunks = 0;
    }

    find_byte_tokens(t);
    if (build_specials(t) != 0) goto oom;
    if (read_strip(t, f, err, errlen) != 0) {
        if (!t->strip) fail(err, errlen, f, "out of memory loading the vocabulary");
        hc_tokenizer_free(t);
        return NULL;
    }
    return is_bpe ? load_bpe(t, f, err, errlen) : t;

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
    free(t->strip);
    hc_bpe_free(t->bpe);
    free(t->path);
    free(t);
}

int hc_tokenizer_n_vocab(const hc_tokenizer *t) { return t->n_vocab; }
int hc_tokenizer_bos(const hc_tokenizer *t) { return t->bos; }
int hc_tokenizer_eos(const hc_tokenizer *t) { return t->eos; }
int hc_tokenizer_is_end(const hc_tokenizer *t, int id)
{
    return id >= 0 && (id == t->eos || id == t->eot || id == t->eom || id == t->bos);
}
int hc_tokenizer_add_bos(const hc_tokenizer *t) { return t->add_bos; }
int hc_tokenizer_add_eos(const hc_tokenizer *t) { return t->add_eos; }

/* ------------------------------------------------------------- encoding */

typedef struct { int32_t prev, next, off, n; } symbol;        /* n == 0: merged away */
typedef struct { float score; int32_t left, right, size; } bigram;
typedef struct { size_t off, len; int32_t id; } frag;          /* id < 0: raw text */
typedef struct { double score; int32_t start, id; } node;      /* Unigram: best path to here, last piece [start, here) */

/* Scratch of one hc_tokenize call, grown as needed and reused across fragments. */
typedef struct {
    const hc_tokenizer *t;
    int32_t *out;
    int max, n;            /* tokens needed so far (may exceed max) */
    int failed;            /* out of memory, or a byte with neither byte token nor unk */
    int in_unk;            /* the last token was an <unk> that a next unknown character extends */
    char *esc; size_t esc_cap;
    symbol *sym; size_t sym_cap;
    hc_heap heap;          /* of bigram */
    frag *fr[2]; size_t fr_cap[2];
    node *lat; size_t lat_cap;
} work;

static void emit(work *w, int id)
{
    /* a normalizer may lengthen the text past the bound hc_tokenize checks */
    if (id < 0 || w->n == INT_MAX) { w->failed = 1; return; }
    if (w->n < w->max) w->out[w->n] = id;
    w->n++;
    w->in_unk = 0;
}

static void emit_cb(void *w, int id) { emit(w, id); }

/* A character no piece holds: its byte tokens (byte fallback) when the
 * vocabulary has them all, else <unk>, one per run of such characters when
 * fuse_unk (as tokenizers does), else one per character. */
static void emit_unknown(work *w, const char *s, int n)
{
    int all = 1;
    for (int j = 0; j < n; j++) all &= w->t->byte_id[(unsigned char)s[j]] >= 0;
    if (all) {
        for (int j = 0; j < n; j++) emit(w, w->t->byte_id[(unsigned char)s[j]]);
    } else if (!(w->in_unk && w->t->fuse_unk)) {
        emit(w, w->t->unk);
        w->in_unk = 1;
    }
}

/* Highest score first; on a tie the leftmost pair (llm_bigram_spm::comparator). */
static int better(const void *pa, const void *pb)
{
    const bigram *a = pa, *b = pb;
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void try_bigram(work *w, int left, int right)
{
    if (left < 0 || right < 0) return;
    const symbol *l = &w->sym[left];
    int size = l->n + w->sym[right].n;
    int id = find_piece(w->t, w->esc + l->off, (size_t)size);
    bigram b = { w->t->score[id >= 0 ? id : 0], left, right, size };
    if (id >= 0 && hc_heap_push(&w->heap, &b) != 0) w->failed = 1;
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
    w->heap.n = 0;
    for (int i = a + 1; i < b; i++) try_bigram(w, i - 1, i);
    while (w->heap.n > 0 && !w->failed) {
        bigram g;
        hc_heap_pop(&w->heap, &g);
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
        if (id >= 0) emit(w, id);
        else emit_unknown(w, w->esc + s->off, s->n);
    }
}

/* Unigram: tokenizers' Unigram::encode_optimized over the escaped text of n
 * bytes. Left to right, each piece starting at a character boundary offers a
 * path to its end (score of the path so far + its score; the first offer
 * stays on a tie: shorter pieces, then later starts lose), and a character
 * no one-character piece covers offers an unknown of unk_score. The best path
 * is read back from the end, a run of unknowns fused into one when fuse_unk. */
static void unigram_encode(work *w, size_t n)
{
    const hc_tokenizer *t = w->t;
    const char *e = w->esc;
    if (hc_grow(&w->lat, &w->lat_cap, n + 1, sizeof *w->lat) != 0) { w->failed = 1; return; }
    node *lat = w->lat;
    for (size_t i = 0; i <= n; i++) lat[i] = (node){ 0.0, -1, -1 };
    for (size_t s = 0; s < n;) {
        size_t cl = (size_t)utf8_len((const unsigned char *)e + s, n - s);
        int single = 0;
        for (size_t len = 1; len <= t->max_piece && s + len <= n; len++) {
            int id = find_piece(t, e + s, len);
            if (id < 0 || t->type[id] == TT_UNUSED) continue;
            double c = lat[s].score + t->score[id];
            if (lat[s + len].start < 0 || c > lat[s + len].score) lat[s + len] = (node){ c, (int32_t)s, id };
            single |= len == cl;
        }
        double c = lat[s].score + t->unk_score;
        if (!single && (lat[s + cl].start < 0 || c > lat[s + cl].score)) lat[s + cl] = (node){ c, (int32_t)s, -1 };
        s += cl;
    }
    /* the path, right to left, into sym (off, n; prev = the piece or -1) */
    int k = 0;
    for (size_t end = n; end > 0; end = (size_t)lat[end].start) {
        const node *nd = &lat[end];
        if (nd->id < 0 && k > 0 && w->sym[k - 1].prev < 0 && t->fuse_unk) {
            w->sym[k - 1].n += (int32_t)end - nd->start;
            w->sym[k - 1].off = nd->start;
        } else {
            w->sym[k++] = (symbol){ nd->id, 0, nd->start, (int32_t)end - nd->start };
        }
    }
    while (k-- > 0) {
        const symbol *sy = &w->sym[k];
        int id = sy->prev >= 0 ? sy->prev : find_piece(t, e + sy->off, (size_t)sy->n);
        if (id >= 0) emit(w, id);
        else emit_unknown(w, e + sy->off, sy->n);
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
    if (hc_grow(&w->esc, &w->esc_cap, n_esc, 1) != 0 ||
        hc_grow(&w->sym, &w->sym_cap, n_esc, sizeof *w->sym) != 0) {
        w->failed = 1;
        return;
    }
    char *e = w->esc;
    if (prefix) { memcpy(e, SPACE, 3); e += 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(e, SPACE, 3); e += 3; }
        else *e++ = text[i];
    }
    if (w->t->unigram) {
        unigram_encode(w, n_esc);
        return;
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

/* Unicode White_Space (Rust's char::is_whitespace, which tokenizers' lstrip
 * and rstrip use): the length of such a character at s, else 0. */
static int white_space_at(const unsigned char *s, size_t avail)
{
    static const uint32_t ws[] = { 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000 };
    int n = utf8_len(s, avail);
    uint32_t c = n == 1 ? (s[0] < 0x80 ? s[0] : 0) : n == 2 ? (s[0] & 0x1Fu) << 6 | (s[1] & 0x3Fu)
               : n == 3 ? (s[0] & 0x0Fu) << 12 | (s[1] & 0x3Fu) << 6 | (s[2] & 0x3Fu) : 0;
    if ((c >= 0x09 && c <= 0x0D) || c == 0x20 || (c >= 0x2000 && c <= 0x200A)) return n;
    for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
        if (c == ws[i]) return n;
    return 0;
}

/* [at, end) widened over the whitespace the token's lstrip/rstrip take, inside [lo, hi). */
static void strip_around(const hc_tokenizer *t, int id, const char *text, size_t lo, size_t hi, size_t *at, size_t *end)
{
    int k, flags = t->strip ? t->strip[id] : 0;
    for (int moved = flags & 1; moved;) {
        moved = 0;
        for (int back = 1; back <= 3 && *at - lo >= (size_t)back; back++) {
            k = white_space_at((const unsigned char *)text + *at - back, (size_t)back);
            if (k == back) { *at -= (size_t)back; moved = 1; break; }
        }
    }
    while ((flags & 2) && *end < hi && (k = white_space_at((const unsigned char *)text + *end, hi - *end)) > 0)
        *end += (size_t)k;
}

/* tokenizer_st_partition: for each special token, longest text first, cut every
 * occurrence out of the raw fragments. Returns the fragment list in fr[cur]. */
static int partition(work *w, const char *text, size_t len, int parse_special, size_t *nfr)
{
    const hc_tokenizer *t = w->t;
    int cur = 0;
    if (hc_grow(&w->fr[0], &w->fr_cap[0], 1, sizeof(frag)) != 0) return -1;
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
                size_t at = (size_t)(m - text), end = at + pl;
                strip_around(t, id, text, f.off, f.off + f.len, &at, &end);
                if (hc_grow(&w->fr[!cur], &w->fr_cap[!cur], n + 2, sizeof(frag)) != 0) return -1;
                if (at > f.off) w->fr[!cur][n++] = (frag){ f.off, at - f.off, -1 };
                w->fr[!cur][n++] = (frag){ at, end - at, id };
                f.len -= end - f.off;
                f.off = end;
            }
            if (f.len == 0 && f.id < 0) continue;
            if (hc_grow(&w->fr[!cur], &w->fr_cap[!cur], n + 1, sizeof(frag)) != 0) return -1;
            w->fr[!cur][n++] = f;
        }
        cur = !cur;
        *nfr = n;
    }
    return cur;
}

static _Thread_local char tokenize_error[512];

const char *hc_tokenize_error(void) { return tokenize_error; }

/* -1, with "MODEL: why" for hc_tokenize_error. */
static int tokenize_failed(const hc_tokenizer *t, const char *why)
{
    snprintf(tokenize_error, sizeof tokenize_error, "%s: %s", t->path, why);
    return -1;
}

int hc_tokenize(const hc_tokenizer *t, const char *text, size_t len, int add_bos,
                int parse_special, int32_t *out, int max)
{
    /* every input byte costs at most 3 tokens (a space with no U+2581 token),
     * plus BOS and a prefix per fragment: this bound keeps counts in int */
    if (len > INT_MAX / 8) return tokenize_failed(t, "text longer than INT_MAX / 8 bytes");
    if ((!text && len) || (add_bos && t->bos < 0)) return tokenize_failed(t, "no text, or BOS asked for and none");
    hc_text_error_set("%s", "");
    work w = { .t = t, .out = out, .max = out ? (max > 0 ? max : 0) : 0,
               .heap = { .esz = sizeof(bigram), .first = better } };
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
            } else if (t->bpe) {
                if (hc_bpe_encode(t->bpe, text + f->off, f->len, emit_cb, &w)) w.failed = 1;
            } else {
                /* Metaspace: not when the text already starts with a space; "first": at offset 0 only */
                int prefix = t->metaspace == 2 ? f->off == 0 : prev_special;
                if (t->metaspace && (text[f->off] == ' ' || (f->len >= 3 && !memcmp(text + f->off, SPACE, 3))))
                    prefix = 0;
                spm_encode(&w, text + f->off, f->len, t->add_space_prefix && prefix);
                prev_special = 0;
            }
        }
    }
    free(w.esc);
    free(w.sym);
    free(w.heap.v);
    free(w.fr[0]);
    free(w.fr[1]);
    free(w.lat);
    if (w.failed) return tokenize_failed(t, *hc_text_error() ? hc_text_error() : "out of memory, or more tokens than an int counts");
    return w.n;
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
        if (t->bpe) {
            w = hc_bpe_unmap(p, n, buf, cap);
            n = 0;
            break;
        }
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
        snprintf(err, errlen, "%s: %s%s", path, k == 0 ? "empty corpus (no tokens)" : "cannot tokenize: ",
                 k == 0 ? "" : hc_tokenize_error());
        free(t);
        return NULL;
    }
    *n = k;
    return t;
}

/* tokenizer.json's byte-level BPE (Llama 3, Qwen2, GPT-2, ...) as llama.cpp's
 * converter writes it: tokenizer.ggml.model "gpt2", the tokens as the file
 * spells them (GPT-2 byte-to-unicode characters), merges as "left right" in
 * rank order, and the pre-tokenizer by llama.cpp's name when its regexes are
 * one llama.cpp knows, else stated in hotcold.tokenizer.pre_regex. Also the
 * checks of SentencePiece-style files and the post-processor's BOS/EOS.
 * What tokenizers would do differently from the runtime is refused by name. */
#include "convert.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "normalize.h"
#include "pretok.h"

static const cJSON *item(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

static const char *type_of(const cJSON *o)
{
    const cJSON *t = item(o, "type");
    return cJSON_IsString(t) ? t->valuestring : "(no type)";
}

static int refuse(char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(err, errlen, "%s: ", path);
    if (n < 0 || (size_t)n >= errlen) n = 0;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static int has_byte_level(const cJSON *pre)
{
    if (!cJSON_IsObject(pre)) return 0;
    if (!strcmp(type_of(pre), "ByteLevel")) return 1;
    const cJSON *seq = item(pre, "pretokenizers"), *e;
    cJSON_ArrayForEach(e, seq) if (has_byte_level(e)) return 1;
    return 0;
}

int cv_json_byte_level(const cJSON *root)
{
    return has_byte_level(item(root, "pre_tokenizer"));
}

int cv_json_merge(const cJSON *e, const char **a, size_t *na, const char **b, size_t *nb)
{
    if (cJSON_IsString(e)) {
        const char *s = e->valuestring, *sp = *s ? strchr(s + 1, ' ') : NULL;
        if (!sp) return -1;
        *a = s;
        *na = (size_t)(sp - s);
        *b = sp + 1;
        *nb = strlen(sp + 1);
        return 0;
    }
    if (cJSON_GetArraySize(e) != 2 || !cJSON_IsString(e->child) || !cJSON_IsString(e->child->next)) return -1;
    *a = e->child->valuestring;
    *na = strlen(*a);
    *b = e->child->next->valuestring;
    *nb = strlen(*b);
    return 0;
}

/* ------------------------------------------------------ pre-tokenizer */

typedef struct {
    const char *path;
    char *err;
    size_t errlen;
    char *rx[16];
    int n;
    int byte_level;        /* a ByteLevel seen */
    int n_at_byte_level;   /* regexes up to ByteLevel's own */
    const char *after;     /* the first step after ByteLevel (it sees GPT-2 characters) */
} pre_walk;

static int add_regex(pre_walk *p, const char *rx, size_t len)
{
    if (p->n == 16) return refuse(p->err, p->errlen, p->path, "pre_tokenizer: more than 16 splits");
    p->rx[p->n] = malloc(len + 1);
    if (!p->rx[p->n]) hc_die("out of memory");
    memcpy(p->rx[p->n], rx, len);
    p->rx[p->n++][len] = 0;
    return 0;
}

/* A Split's literal String pattern as a regex: every non-alphanumeric byte escaped. */
static int add_literal(pre_walk *p, const char *s)
{
    size_t n = strlen(s), o = 0;
    char *q = malloc(2 * n + 1);
    if (!q) hc_die("out of memory");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80 && !(c >= '0' && c <= '9') && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) q[o++] = '\\';
        q[o++] = (char)c;
    }
    int rc = o ? add_regex(p, q, o) : refuse(p->err, p->errlen, p->path, "pre_tokenizer: Split with an empty pattern");
    free(q);
    return rc;
}

static int walk_split(pre_walk *p, const cJSON *pre)
{
    const cJSON *pat = item(pre, "pattern"), *beh = item(pre, "behavior"), *rx = item(pat, "Regex");
    const cJSON *str = item(pat, "String");
    if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated") != 0)
        return refuse(p->err, p->errlen, p->path, "pre_tokenizer: Split with behavior '%s' is not supported "
                      "(only Isolated)", cJSON_IsString(beh) ? beh->valuestring : "?");
    if (cJSON_IsTrue(item(pre, "invert")))
        return refuse(p->err, p->errlen, p->path, "pre_tokenizer: Split with invert is not supported");
    if (cJSON_IsString(rx)) return add_regex(p, rx->valuestring, strlen(rx->valuestring));
    if (cJSON_IsString(str)) return add_literal(p, str->valuestring);
    return refuse(p->err, p->errlen, p->path, "pre_tokenizer: Split without a Regex or String pattern");
}

static int walk_pre(pre_walk *p, const cJSON *pre)
{
    const char *type = type_of(pre);
    if (p->byte_level && !p->after) p->after = type;
    if (!strcmp(type, "Sequence")) {
        const cJSON *e, *seq = item(pre, "pretokenizers");
        if (!cJSON_IsArray(seq)) return refuse(p->err, p->errlen, p->path, "pre_tokenizer: Sequence without pretokenizers");
        cJSON_ArrayForEach(e, seq) if (walk_pre(p, e)) return -1;
        return 0;
    }
    if (!strcmp(type, "Split")) return walk_split(p, pre);
    if (!strcmp(type, "Digits")) {
        const char *rx = cJSON_IsTrue(item(pre, "individual_digits")) ? "\\p{N}" : "\\p{N}+";
        return add_regex(p, rx, strlen(rx));
    }
    if (!strcmp(type, "Punctuation")) {
        const cJSON *beh = item(pre, "behavior");
        const char *b = cJSON_IsString(beh) ? beh->valuestring : "Isolated";   /* tokenizers' default */
        if (!strcmp(b, "Isolated")) return add_regex(p, HC_RE_PUNCT, strlen(HC_RE_PUNCT));
        if (!strcmp(b, "Contiguous")) return add_regex(p, HC_RE_PUNCT "+", strlen(HC_RE_PUNCT "+"));
        return refuse(p->err, p->errlen, p->path, "pre_tokenizer: Punctuation with behavior '%s' is not supported "
                      "(Isolated, Contiguous)", b);
    }
    if (!strcmp(type, "ByteLevel")) {
        if (p->byte_level)
            return refuse(p->err, p->errlen, p->path, "pre_tokenizer: ByteLevel after ByteLevel is not supported");
        if (cJSON_IsTrue(item(pre, "add_prefix_space")))
            return refuse(p->err, p->errlen, p->path, "pre_tokenizer: ByteLevel with add_prefix_space is not supported");
        p->byte_level = 1;
        /* use_regex defaults to true: GPT-2's own regex */
        const cJSON *use = item(pre, "use_regex");
        const hc_pretok_def *gpt2 = hc_pretok_by_name("gpt-2");
        int rc = cJSON_IsFalse(use) ? 0 : add_regex(p, gpt2->regex[0], strlen(gpt2->regex[0]));
        p->n_at_byte_level = p->n;
        return rc;
    }
    return refuse(p->err, p->errlen, p->path, "pre_tokenizer type '%s' is not supported "
                  "(Split, ByteLevel, Digits, Punctuation, Sequence)", type);
}

/* llama.cpp's name for the regexes, else the regexes themselves (checked
 * with PCRE2 now, so a pattern it refuses is refused here with its message).
 * Splits after ByteLevel see GPT-2 characters, which the runtime's regexes
 * never do: only a file llama.cpp knows by name may have them (Falcon's). */
static int set_pretok(const char *path, pre_walk *p, int ignore_merges, cv_vocab *v, char *err, size_t errlen)
{
    char msg[400];
    hc_pretok *re = hc_pretok_new((const char *const *)p->rx, p->n, msg, sizeof msg);
    if (!re) return refuse(err, errlen, path, "pre_tokenizer: %s", msg);
    hc_pretok_free(re);
    int n_after = p->byte_level ? p->n - p->n_at_byte_level : 0;
    const hc_pretok_def *def = hc_pretok_by_regex((const char *const *)p->rx, p->n, n_after, ignore_merges);
    if (!def && n_after)
        return refuse(err, errlen, path, "pre_tokenizer: %s after ByteLevel is not supported", p->after);
    if (def) {
        v->pre = def->name;
        if (def->ignore_merges != ignore_merges) v->ignore_merges = ignore_merges;
        while (p->n > 0) free(p->rx[--p->n]);
        return 0;
    }
    v->pre_regex = malloc((size_t)(p->n ? p->n : 1) * sizeof *v->pre_regex);
    if (!v->pre_regex) hc_die("out of memory");
    memcpy(v->pre_regex, p->rx, (size_t)p->n * sizeof *p->rx);
    v->n_pre_regex = (uint32_t)p->n;
    v->ignore_merges = ignore_merges;
    return 0;
}

/* -------------------------------------------------------------- model */

/* BPE options neither encoding of the runtime follows. */
static int check_bpe_options(const char *path, const cJSON *model, char *err, size_t errlen)
{
    const cJSON *prefix = item(model, "continuing_subword_prefix"), *suffix = item(model, "end_of_word_suffix");
    const cJSON *dropout = item(model, "dropout");
    if ((cJSON_IsString(prefix) && *prefix->valuestring) || (cJSON_IsString(suffix) && *suffix->valuestring))
        return refuse(err, errlen, path, "model: continuing_subword_prefix/end_of_word_suffix are not supported");
    if (cJSON_IsNumber(dropout) && dropout->valuedouble != 0)
        return refuse(err, errlen, path, "model: BPE dropout is not supported (it makes encoding random)");
    return 0;
}

static int check_model(const char *path, const cJSON *model, char *err, size_t errlen)
{
    if (strcmp(type_of(model), "BPE") != 0)
        return refuse(err, errlen, path, "model type '%s' with a ByteLevel pre-tokenizer is not supported (BPE)",
                      type_of(model));
    if (!cJSON_IsObject(item(model, "vocab")) || !cJSON_IsArray(item(model, "merges")))
        return refuse(err, errlen, path, "model: BPE without a vocab object and a merges list");
    if (cJSON_IsTrue(item(model, "byte_fallback")))
        return refuse(err, errlen, path, "model: byte_fallback with a ByteLevel pre-tokenizer is not supported");
    return check_bpe_options(path, model, err, errlen);
}

static int load_vocab(const char *path, const cJSON *model, cv_vocab *v, char *err, size_t errlen)
{
    const cJSON *e, *unk = item(model, "unk_token");
    cJSON_ArrayForEach(e, item(model, "vocab")) {
        uint64_t id;
        if (!hc_json_index(e, v->n, &id))
            return refuse(err, errlen, path, "model.vocab['%s']: id outside config.json's vocab_size %u",
                          e->string, v->n);
        int is_unk = cJSON_IsString(unk) && !strcmp(unk->valuestring, e->string);
        cv_vocab_set(v, (uint32_t)id, e->string, strlen(e->string), 0.0f, is_unk ? TOK_UNKNOWN : TOK_NORMAL);
    }
    return 0;
}

static int load_merges(const char *path, const cJSON *model, cv_vocab *v, char *err, size_t errlen)
{
    const cJSON *merges = item(model, "merges"), *e;
    int n = cJSON_GetArraySize(merges), i = 0, rc = 0;
    v->merges = malloc((size_t)(n ? n : 1) * sizeof *v->merges);
    if (!v->merges) hc_die("out of memory");
    cv_piece_index ix;
    cv_index_build(&ix, v);
    cJSON_ArrayForEach(e, merges) {
        const char *a, *b;
        size_t na, nb;
        if (cv_json_merge(e, &a, &na, &b, &nb)) {
            rc = refuse(err, errlen, path, "model.merges[%d]: not \"a b\" or [\"a\", \"b\"]", i);
            break;
        }
        char *s = malloc(na + nb + 2);
        if (!s) hc_die("out of memory");
        memcpy(s, a, na);
        s[na] = 0;
        int known = cv_index_find(&ix, v, s) >= 0;
        memcpy(s, b, nb + 1);
        known &= cv_index_find(&ix, v, s) >= 0;
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
        known &= cv_index_find(&ix, v, s) >= 0;
        s[na] = ' ';
        memcpy(s + na + 1, b, nb + 1);
        v->merges[v->n_merges++] = s;
        /* llama.cpp cuts "left right" at the first space after byte 0 */
        int cut_ok = na > 0 && (na == 1 || !memchr(a + 1, ' ', na - 1));
        if (!known || !cut_ok) {
            rc = refuse(err, errlen, path, "model.merges[%d] '%s': %s", i, s,
                        !cut_ok ? "the left piece holds a space (GGUF merges are \"left right\")"
                                : "a piece or their concatenation is not in model.vocab");
            break;
        }
        i++;
    }
    free(ix.slot);
    return rc;
}

int cv_json_added(const char *path, const cJSON *root, cv_vocab *v, char *err, size_t errlen)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, item(root, "added_tokens")) {
        const cJSON *content = item(e, "content"), *id = item(e, "id");
        if (cJSON_IsTrue(item(e, "single_word")))
            return refuse(err, errlen, path, "added token '%s': single_word is not supported",
                          cJSON_IsString(content) ? content->valuestring : "?");
        for (int k = 0; k < 2; k++) {
            if (!cJSON_IsTrue(item(e, k ? "rstrip" : "lstrip"))) continue;
            if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= v->n)
                return refuse(err, errlen, path, "added token with lstrip/rstrip: id outside config.json's vocab_size");
            uint32_t *p = realloc(v->strip[k], (v->n_strip[k] + 1) * sizeof *p);
            if (!p) hc_die("out of memory");
            v->strip[k] = p;
            p[v->n_strip[k]++] = (uint32_t)id->valuedouble;
        }
    }
    return 0;
}

/* Kept as JSON for the runtime's normalizer, which checks it now. */
static int set_normalizer(const char *path, const cJSON *norm, cv_vocab *v, char *err, size_t errlen)
{
    char msg[400], *json = cJSON_PrintUnformatted(norm);
    if (!json) hc_die("out of memory");
    hc_normalizer *n = hc_normalizer_new(json, strlen(json), msg, sizeof msg);
    if (!n) {
        free(json);
        return refuse(err, errlen, path, "%s", msg);
    }
    hc_normalizer_free(n);
    v->normalizer = json;
    return 0;
}

int cv_json_bpe(const char *path, const cJSON *root, cv_vocab *v, char *err, size_t errlen)
{
    const cJSON *model = item(root, "model"), *norm = item(root, "normalizer");
    v->model = "gpt2";
    if (norm && !cJSON_IsNull(norm) && set_normalizer(path, norm, v, err, errlen)) return -1;
    if (check_model(path, model, err, errlen)) return -1;
    pre_walk p = { .path = path, .err = err, .errlen = errlen };
    int rc = walk_pre(&p, item(root, "pre_tokenizer"));
    if (!rc) rc = load_vocab(path, model, v, err, errlen);
    if (!rc) rc = load_merges(path, model, v, err, errlen);
    if (!rc) rc = set_pretok(path, &p, cJSON_IsTrue(item(model, "ignore_merges")), v, err, errlen);
    if (rc) while (p.n > 0) free(p.rx[--p.n]);
    return rc;
}

/* ------------------------------------------------------ SentencePiece */

static int is_str(const cJSON *o, const char *key, const char *want)
{
    const cJSON *s = item(o, key);
    return cJSON_IsString(s) && !strcmp(s->valuestring, want);
}

#define SPACE "\xe2\x96\x81"

/* Prepend("▁") and Replace(" " -> "▁"): the escaping llama.cpp's SPM does. */
/* The SentencePiece-style normalizers: Prepend "▁" (the space prefix) and
 * Replace " " -> "▁" (the escaping), counted; any other is refused. */
static int spm_normalizer(const char *path, const cJSON *n, int *prepends, int *replaces, char *err, size_t errlen)
{
    const char *type = type_of(n);
    const cJSON *e;
    if (!strcmp(type, "Sequence")) {
        cJSON_ArrayForEach(e, item(n, "normalizers"))
            if (spm_normalizer(path, e, prepends, replaces, err, errlen)) return -1;
        return 0;
    }
    if (!strcmp(type, "Prepend") && is_str(n, "prepend", SPACE)) return ++*prepends, 0;
    if (!strcmp(type, "Replace") && is_str(item(n, "pattern"), "String", " ") && is_str(n, "content", SPACE))
        return ++*replaces, 0;
    return refuse(err, errlen, path, "normalizer type '%s' is not supported (for SentencePiece-style files: "
                  "Prepend \"" SPACE "\" and Replace \" \" -> \"" SPACE "\")", type);
}

/* The pieces of a BPE (object) or Unigram ([piece, score] array) vocabulary, one at a time. */
static const char *vocab_piece(const cJSON *e)
{
    const cJSON *p = cJSON_IsArray(e) ? cJSON_GetArrayItem(e, 0) : NULL;
    return cJSON_IsString(p) ? p->valuestring : e->string;
}

/* Whether a piece is a byte "<0xHH>" (any == 0), or holds "▁" after its first character (any == 1). */
static int vocab_has(const cJSON *model, int any)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, item(model, "vocab")) {
        const char *p = vocab_piece(e);
        if (!p) continue;
        if (any == 0 ? cv_is_byte_token(p, strlen(p)) : *p && strstr(p + 1, SPACE) != NULL) return 1;
    }
    return 0;
}

/* The model options the runtime's SentencePiece-style encoding does not follow. */
static int check_spm_model(const char *path, const cJSON *model, char *err, size_t errlen)
{
    if (!strcmp(type_of(model), "BPE")) {
        if (check_bpe_options(path, model, err, errlen)) return -1;
        if (cJSON_IsTrue(item(model, "ignore_merges")))
            return refuse(err, errlen, path, "model: ignore_merges is not supported for SentencePiece-style files");
    }
    if (!cJSON_IsTrue(item(model, "byte_fallback")) && vocab_has(model, 0))
        return refuse(err, errlen, path, "model: byte pieces <0xHH> without byte_fallback are not supported (the "
                      "runtime falls back to them)");
    return 0;
}

int cv_json_spm(const char *path, const cJSON *root, cv_vocab *v, char *err, size_t errlen)
{
    const cJSON *norm = item(root, "normalizer"), *pre = item(root, "pre_tokenizer"), *model = item(root, "model");
    int prepends = 0, replaces = 0, metaspace = pre && !cJSON_IsNull(pre), meta_prefix = 0;
    if (norm && !cJSON_IsNull(norm) && spm_normalizer(path, norm, &prepends, &replaces, err, errlen)) return -1;
    if (metaspace && (strcmp(type_of(pre), "Metaspace") != 0 || !is_str(pre, "replacement", SPACE)))
        return refuse(err, errlen, path, "pre_tokenizer type '%s' is not supported (for SentencePiece-style "
                      "files: Metaspace with replacement \"" SPACE "\")", type_of(pre));
    if (check_spm_model(path, model, err, errlen)) return -1;
    if (metaspace) {
        const cJSON *scheme = item(pre, "prepend_scheme");
        if (is_str(pre, "prepend_scheme", "never") || cJSON_IsFalse(item(pre, "add_prefix_space")))
            v->add_space_prefix = 0;
        else if (is_str(pre, "prepend_scheme", "first"))
            v->prepend_scheme = "first";
        else if (!cJSON_IsString(scheme) || !strcmp(scheme->valuestring, "always"))
            v->prepend_scheme = "always";
        else
            return refuse(err, errlen, path, "pre_tokenizer: Metaspace prepend_scheme '%s' is not supported",
                          scheme->valuestring);
        meta_prefix = v->add_space_prefix != 0;
        /* splitting at each "▁" (the default) changes nothing only when no piece spans one */
        if (!cJSON_IsFalse(item(pre, "split")) && vocab_has(model, 1))
            return refuse(err, errlen, path, "pre_tokenizer: Metaspace split with pieces that hold \"" SPACE "\" "
                          "after their start is not supported");
    }
    if (prepends > 1 || (prepends && meta_prefix))
        return refuse(err, errlen, path, "the space prefix \"" SPACE "\" added twice (normalizer Prepend%s) is not "
                      "supported", prepends > 1 ? " twice" : " and pre_tokenizer Metaspace");
    if (!metaspace && !replaces)
        return refuse(err, errlen, path, "spaces are not replaced by \"" SPACE "\" (no Replace normalizer, no "
                      "Metaspace pre-tokenizer): not supported");
    if (!metaspace && !prepends) v->add_space_prefix = 0;
    /* tokenizers' BPE fuses unknown characters only when asked; Unigram always does */
    if (!strcmp(type_of(model), "BPE") && !cJSON_IsTrue(item(model, "fuse_unk"))) v->fuse_unk = 0;
    return 0;
}

/* ----------------------------------------------------- post-processor */

/* A token id in JSON: a whole number 0..2^32-1 into *id (1), else 0. Larger
 * ones are refused against the vocabulary later. */
static int json_id(const cJSON *j, int64_t *id)
{
    uint64_t u;
    if (!hc_json_index(j, (uint64_t)UINT32_MAX + 1, &u)) return 0;
    *id = (int64_t)u;
    return 1;
}

static int special_id(const char *path, const cJSON *post, const char *name, int64_t *id, char *err, size_t errlen)
{
    const cJSON *ids = item(item(item(post, "special_tokens"), name), "ids");
    if (cJSON_GetArraySize(ids) != 1 || !json_id(ids->child, id))
        return refuse(err, errlen, path, "post_processor: special token '%s' is not one id", name);
    return 0;
}

/* TemplateProcessing's "single": [SpecialToken]? Sequence A [SpecialToken]?. */
static int post_template(const char *path, const cJSON *post, cv_vocab *v, char *err, size_t errlen)
{
    const cJSON *e;
    int seen_a = 0, before = 0, after = 0;
    cJSON_ArrayForEach(e, item(post, "single")) {
        const cJSON *sp = item(item(e, "SpecialToken"), "id");
        if (item(e, "Sequence")) {
            seen_a++;
        } else if (cJSON_IsString(sp)) {
            int64_t id = -1;
            if (special_id(path, post, sp->valuestring, &id, err, errlen)) return -1;
            if (seen_a) { v->eos_id = id; after++; }
            else { v->bos_id = id; before++; }
        } else {
            seen_a = 99;
        }
    }
    if (seen_a != 1 || before > 1 || after > 1)
        return refuse(err, errlen, path, "post_processor: a TemplateProcessing other than "
                      "[BOS] $A [EOS] is not supported");
    v->add_bos = before;
    v->add_eos = after;
    return 0;
}

static int walk_post(const char *path, const cJSON *post, cv_vocab *v, char *err, size_t errlen)
{
    const char *type = type_of(post);
    const cJSON *e;
    if (!strcmp(type, "Sequence")) {
        cJSON_ArrayForEach(e, item(post, "processors")) if (walk_post(path, e, v, err, errlen)) return -1;
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) {      /* offsets only */
        if (v->add_bos < 0) v->add_bos = v->add_eos = 0;
        return 0;
    }
    if (!strcmp(type, "TemplateProcessing")) return post_template(path, post, v, err, errlen);
    if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing")) {
        const cJSON *cls = cJSON_GetArrayItem(item(post, "cls"), 1), *sep = cJSON_GetArrayItem(item(post, "sep"), 1);
        if (!json_id(cls, &v->bos_id) || !json_id(sep, &v->eos_id))
            return refuse(err, errlen, path, "post_processor %s without cls and sep ids", type);
        v->add_bos = v->add_eos = 1;
        return 0;
    }
    return refuse(err, errlen, path, "post_processor type '%s' is not supported "
                  "(TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence)", type);
}

int cv_json_post(const char *path, const cJSON *root, cv_vocab *v, char *err, size_t errlen)
{
    const cJSON *post = item(root, "post_processor");
    if (!post) return 0;
    if (cJSON_IsNull(post)) {   /* tokenizers adds nothing */
        v->add_bos = v->add_eos = 0;
        return 0;
    }
    if (walk_post(path, post, v, err, errlen)) return -1;
    if ((v->bos_id >= v->n) || (v->eos_id >= v->n))
        return refuse(err, errlen, path, "post_processor: a special token id is outside config.json's vocab_size %u", v->n);
    return 0;
}

/* The vocabulary of a Hugging Face LLaMA directory, in llama.cpp's SPM form.
 *
 * tokenizer.model (preferred, as llama.cpp's converter does): a SentencePiece
 * ModelProto. Only what the vocabulary needs is decoded by a minimal protobuf
 * reader: field 1 (repeated SentencePiece) and, inside it, piece (1, string),
 * score (2, float) and type (3, enum; its values are llama_token_type's).
 *
 * tokenizer.json: model.type "Unigram" gives pieces with scores; "BPE" (with
 * byte_fallback, i.e. a SentencePiece BPE exported by HF) gives pieces and
 * merges, and a piece's score is minus the rank of the merge that forms it
 * (0 for pieces no merge forms), so SPM's best-score-first bigram merging
 * replays BPE's merge order. added_tokens become CONTROL (special) or
 * USER_DEFINED. */
#include "convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli.h"

/* ---------------------------------------------------------- protobuf */

typedef struct {
    const uint8_t *p, *end;
} pb;

static int pb_varint(pb *b, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end) return -1;
        uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return 0;
    }
    return -1;
}

/* Read the next field's key; a length-delimited value is returned in sub, a
 * fixed32 in f32, a varint in v; other fields are skipped. 0, 1 at end, -1 bad. */
static int pb_next(pb *b, uint32_t *field, uint32_t *wire, uint64_t *v, pb *sub)
{
    if (b->p == b->end) return 1;
    uint64_t key;
    if (pb_varint(b, &key)) return -1;
    *field = (uint32_t)(key >> 3);
    *wire = (uint32_t)(key & 7);
    switch (*wire) {
    case 0: return pb_varint(b, v);
    case 1: if (b->end - b->p < 8) return -1; b->p += 8; return 0;
    case 2:
        if (pb_varint(b, v) || *v > (uint64_t)(b->end - b->p)) return -1;
        sub->p = b->p;
        sub->end = b->p + *v;
        b->p += *v;
        return 0;
    case 5:
        if (b->end - b->p < 4) return -1;
        memcpy(v, b->p, 4);           /* little-endian host: the low 4 bytes */
        b->p += 4;
        return 0;
    default: return -1;
    }
}

static int load_spm_model(const char *path, uint32_t n_vocab, cv_vocab *v, char *err, size_t errlen)
{
    hc_map m;
    if (hc_map_open(&m, path, err, errlen)) return -1;
    pb b = {m.data, m.size ? m.data + m.size : m.data}, sub, f;   /* no NULL + 0 for an empty file */
    uint32_t field, wire, id = 0;
    uint64_t val;
    int r, bad = 0;
    while (!bad && (r = pb_next(&b, &field, &wire, &val, &sub)) == 0) {
        if (field != 1 || wire != 2) continue;
        if (id >= n_vocab) {
            snprintf(err, errlen, "%s: more pieces than config.json's vocab_size %u", path, n_vocab);
            hc_map_close(&m);
            return -1;
        }
        const uint8_t *text = NULL;
        size_t len = 0;
        float score = 0.0f;
        uint32_t fld, w, bits;
        uint64_t type = TOK_NORMAL;
        int rr;
        while ((rr = pb_next(&sub, &fld, &w, &val, &f)) == 0) {
            if (fld == 1 && w == 2) { text = f.p; len = (size_t)(f.end - f.p); }
            else if (fld == 2 && w == 5) { bits = (uint32_t)val; memcpy(&score, &bits, 4); }
            else if (fld == 3 && w == 0) type = val;
        }
        if (text && memchr(text, 0, len)) {   /* a GGUF string holds none (ggml refuses it; hc-gguf too) */
            snprintf(err, errlen, "%s: piece %u holds a NUL byte", path, id);
            hc_map_close(&m);
            return -1;
        }
        if (rr < 0 || !text || type < TOK_NORMAL || type > TOK_BYTE) bad = 1;
        else cv_vocab_set(v, id++, (const char *)text, len, score, (int32_t)type);
    }
    hc_map_close(&m);
    if (bad || r < 0 || id == 0) {
        snprintf(err, errlen, "%s: not a SentencePiece model (bad piece %u)", path, id);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------- tokenizer.json */

void cv_index_build(cv_piece_index *ix, const cv_vocab *v)
{
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)v->n) cap *= 2;
    ix->mask = cap - 1;
    ix->slot = malloc(cap * sizeof *ix->slot);
    if (!ix->slot) hc_die("out of memory");
    for (uint64_t i = 0; i < cap; i++) ix->slot[i] = -1;
    for (uint32_t id = 0; id < v->n; id++) {
        if (!v->tokens[id]) continue;
        uint64_t h = hc_fnv1a64(v->tokens[id], strlen(v->tokens[id]), HC_FNV_INIT) & ix->mask;
        while (ix->slot[h] >= 0) h = (h + 1) & ix->mask;
        ix->slot[h] = id;
    }
}

long cv_index_find(const cv_piece_index *ix, const cv_vocab *v, const char *piece)
{
    uint64_t h = hc_fnv1a64(piece, strlen(piece), HC_FNV_INIT) & ix->mask;
    for (; ix->slot[h] >= 0; h = (h + 1) & ix->mask)
        if (!strcmp(v->tokens[ix->slot[h]], piece)) return (long)ix->slot[h];
    return -1;
}

/* Linear lookup, for the odd single piece. */
static long vocab_id(const cv_vocab *v, const char *piece)
{
    for (uint32_t i = 0; i < v->n; i++)
        if (v->tokens[i] && !strcmp(v->tokens[i], piece)) return (long)i;
    return -1;
}

/* The id of token text from JSON: a whole number below config.json's
 * vocab_size into *id (0), else -1 with the message in err. */
static int json_token_id(const cv_vocab *v, const char *path, const cJSON *j, const char *text, uint32_t *id,
                         char *err, size_t errlen)
{
    uint64_t u;
    if (!hc_json_index(j, v->n, &u)) {
        snprintf(err, errlen, "%s: token '%s' has id %.17g, not one below config.json's vocab_size %u", path, text,
                 cJSON_IsNumber(j) ? j->valuedouble : -1.0, v->n);
        return -1;
    }
    *id = (uint32_t)u;
    return 0;
}

static void set_json_token(cv_vocab *v, uint32_t id, const char *text, float score, int32_t type)
{
    size_t len = strlen(text);
    if (type == TOK_NORMAL && cv_is_byte_token(text, len)) type = TOK_BYTE;
    cv_vocab_set(v, id, text, len, score, type);
}

/* BPE scores: score = -(rank of the first merge forming the piece). */
static int score_merges(cv_vocab *v, const char *path, const cJSON *merges, char *err, size_t errlen)
{
    int rc = 0;
    cv_piece_index ix;
    cv_index_build(&ix, v);
    uint8_t *scored = calloc(v->n, 1);
    if (!scored) hc_die("out of memory");
    int rank = 0;
    for (const cJSON *e = cJSON_IsArray(merges) ? merges->child : NULL; e && !rc; e = e->next, rank++) {
        char buf[1024];
        const char *a, *b;
        size_t na, nb;
        int n = cv_json_merge(e, &a, &na, &b, &nb) ? -1 : snprintf(buf, sizeof buf, "%.*s%.*s", (int)na, a, (int)nb, b);
        long id = n > 0 && (size_t)n < sizeof buf ? cv_index_find(&ix, v, buf) : -1;
        if (id < 0) {
            snprintf(err, errlen, "%s: merge %d does not form a vocabulary piece", path, rank);
            rc = -1;
        } else if (!scored[id]) {
            scored[id] = 1;
            v->scores[id] = (float)-rank;
        }
    }
    free(scored);
    free(ix.slot);
    return rc;
}

/* 1 if added token text at id would replace a different piece of the
 * vocabulary (transformers then decodes the id as the added text, llama.cpp
 * as the piece: two models). Checked for text of printable ASCII only, which
 * every vocabulary form (SentencePiece's, GPT-2's bytes) spells as itself;
 * other added text may spell the same piece another way. */
static int replaces_piece(const cv_vocab *v, uint32_t id, const char *text)
{
    if (!v->tokens[id]) return 0;
    for (const char *c = text; *c; c++)
        if (*c < 33 || *c > 126) return 0;
    return strcmp(v->tokens[id], text) != 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A BPE model.vocab (piece -> id) as tokenizers writes it is one-to-one:
 * an id given to two pieces (one would be lost) or a piece given twice (two
 * ids; JSON readers differ on which counts) is refused. Ids out of range
 * are left to the loaders, which refuse them. */
static int vocab_one_to_one(const char *path, const cJSON *vocab, uint32_t n, char *err, size_t errlen)
{
    int count = cJSON_GetArraySize(vocab), k = 0, rc = 0;
    const char **by_id = calloc(n ? n : 1, sizeof *by_id), **keys = malloc(sizeof *keys * (size_t)(count ? count : 1));
    if (!by_id || !keys) hc_die("out of memory");
    for (const cJSON *e = vocab->child; e && !rc; e = e->next) {
        uint64_t id;
        keys[k++] = e->string;
        if (!hc_json_index(e, n, &id)) continue;
        if (by_id[id]) {
            snprintf(err, errlen, "%s: model.vocab: id %u is given to '%s' and to '%s'", path, (unsigned)id, by_id[id],
                     e->string);
            rc = -1;
        }
        by_id[id] = e->string;
    }
    if (!rc) qsort(keys, (size_t)k, sizeof *keys, cmp_str);
    for (int i = 1; i < k && !rc; i++)
        if (!strcmp(keys[i - 1], keys[i])) {
            snprintf(err, errlen, "%s: model.vocab['%s'] is given twice", path, keys[i]);
            rc = -1;
        }
    free(by_id);
    free(keys);
    return rc;
}

static int load_tokenizer_json(const char *path, cv_vocab *v, char *err, size_t errlen)
{
    cJSON *root = hc_read_json(path, HF_MAX_TOKENIZER_JSON, err, errlen);
    if (!root) return -1;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    int rc = 0;
    if (!cJSON_IsObject(model) || !cJSON_IsString(type)) {
        snprintf(err, errlen, "%s: no model.type", path);
        rc = -1;
    } else if ((cJSON_IsObject(vocab) && vocab_one_to_one(path, vocab, v->n, err, errlen)) ||
               cv_json_post(path, root, v, err, errlen) || cv_json_added(path, root, v, err, errlen)) {
        rc = -1;
    } else if (cv_json_byte_level(root)) {
        rc = cv_json_bpe(path, root, v, err, errlen);
    } else if (cv_json_spm(path, root, v, err, errlen)) {
        rc = -1;
    } else if (!strcmp(type->valuestring, "Unigram") && cJSON_IsArray(vocab)) {
        int id = 0;
        for (const cJSON *e = vocab->child; e && !rc; e = e->next, id++) {
            const cJSON *piece = cJSON_GetArrayItem(e, 0), *score = cJSON_GetArrayItem(e, 1);
            if (!cJSON_IsString(piece) || !cJSON_IsNumber(score)) {
                snprintf(err, errlen, "%s: model.vocab[%d] is not [piece, score]", path, id);
                rc = -1;
            } else if ((uint32_t)id >= v->n) {
                snprintf(err, errlen, "%s: model.vocab has more than config.json's vocab_size %u pieces", path, v->n);
                rc = -1;
            } else {
                set_json_token(v, (uint32_t)id, piece->valuestring, (float)score->valuedouble, TOK_NORMAL);
            }
        }
        v->unigram = 1;
        const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_id");
        uint64_t uid;
        if (!rc && unk && !cJSON_IsNull(unk)) {
            if (hc_json_index(unk, v->n, &uid)) {
                v->types[uid] = TOK_UNKNOWN;
            } else {
                snprintf(err, errlen, "%s: model.unk_id is not a token id below config.json's vocab_size %u",
                         path, v->n);
                rc = -1;
            }
        }
    } else if (!strcmp(type->valuestring, "BPE") && cJSON_IsObject(vocab)) {
        for (const cJSON *e = vocab->child; e && !rc; e = e->next) {
            uint32_t id;
            if (!cJSON_IsNumber(e)) {
                snprintf(err, errlen, "%s: model.vocab['%s'] is not an id", path, e->string);
                rc = -1;
            } else if (!(rc = json_token_id(v, path, e, e->string, &id, err, errlen))) {
                set_json_token(v, id, e->string, 0.0f, TOK_NORMAL);
            }
        }
        if (!rc) rc = score_merges(v, path, cJSON_GetObjectItemCaseSensitive(model, "merges"), err, errlen);
        const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
        long uid = !rc && cJSON_IsString(unk) ? vocab_id(v, unk->valuestring) : -1;
        if (uid >= 0) v->types[uid] = TOK_UNKNOWN;
    } else {
        snprintf(err, errlen, "%s: unsupported tokenizer model type '%s' (Unigram or BPE)", path,
                 type->valuestring);
        rc = -1;
    }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e && !rc; e = e->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(content)) {
            snprintf(err, errlen, "%s: added_tokens entry without id and content", path);
            rc = -1;
            break;
        }
        int special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"));
        uint32_t i;
        if ((rc = json_token_id(v, path, id, content->valuestring, &i, err, errlen))) break;
        if (replaces_piece(v, i, content->valuestring)) {
            snprintf(err, errlen, "%s: added token '%s' (id %u) would replace the vocabulary's '%s'", path,
                     content->valuestring, i, v->tokens[i]);
            rc = -1;
            break;
        }
        int32_t t = special ? TOK_CONTROL : TOK_USER_DEFINED;
        if (v->tokens[i] && v->types[i] == TOK_UNKNOWN) t = TOK_UNKNOWN;   /* <unk> stays UNKNOWN */
        set_json_token(v, i, content->valuestring, v->tokens[i] ? v->scores[i] : 0.0f, t);
    }
    cJSON_Delete(root);
    return rc;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int cv_hf_vocab(const char *dir, uint32_t n_vocab, cv_vocab *v, uint32_t *unk_id, char *err, size_t errlen)
{
    char path[4096];
    cv_vocab_init(v, n_vocab);
    if (hc_path(path, sizeof path, err, errlen, "%s/tokenizer.model", dir)) return -1;
    int rc;
    if (file_exists(path)) {
        rc = load_spm_model(path, n_vocab, v, err, errlen);
    } else {
        if (hc_path(path, sizeof path, err, errlen, "%s/tokenizer.json", dir)) return -1;
        if (!file_exists(path)) {
            snprintf(err, errlen, "%s: no tokenizer.model or tokenizer.json", dir);
            return -1;
        }
        rc = load_tokenizer_json(path, v, err, errlen);
    }
    if (rc) return -1;
    /* ids the tokenizer does not define: padding, as llama.cpp's converter writes it */
    *unk_id = 0;
    int found_unk = 0;
    for (uint32_t i = 0; i < n_vocab; i++) {
        if (!v->tokens[i]) {
            char pad[32];
            int n = snprintf(pad, sizeof pad, "[PAD%u]", i);
            cv_vocab_set(v, i, pad, (size_t)n, 0.0f, TOK_UNUSED);
        }
        if (v->types[i] == TOK_UNKNOWN && !found_unk) { *unk_id = i; found_unk = 1; }
    }
    return 0;
}

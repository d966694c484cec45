/* The vocabulary of a Hugging Face LLaMA directory, in llama.cpp's SPM form.
 *
 * tokenizer.model (preferred, as llama.cpp's converter does): a SentencePiece
 * ModelProto. Only what the vocabulary needs is decoded by a minimal protobuf
 * reader: field 1 (repeated SentencePiece) and, inside it, piece (1, string),
 * score (2, float) and type (3, enum; its values are llama_token_type's);
 * the trainer spec's model type (Unigram or BPE) and the normalizer spec's
 * options, each either followed or refused.
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

/* TrainerSpec (ModelProto field 2): the model type, and the one encoding
 * option the runtime does not follow. Its defaults are the proto's. */
static int spm_trainer(const char *path, pb b, cv_vocab *v, char *err, size_t errlen)
{
    static const char *const types[] = { "?", "UNIGRAM", "BPE", "WORD", "CHAR" };
    uint64_t model_type = 1, suffix = 0, val;
    uint32_t field, wire;
    pb sub;
    int r;
    while ((r = pb_next(&b, &field, &wire, &val, &sub)) == 0) {
        if (field == 3 && wire == 0) model_type = val;
        else if (field == 24 && wire == 0) suffix = val;
    }
    if (r < 0) return snprintf(err, errlen, "%s: trainer_spec does not parse", path), -1;
    if (model_type != 1 && model_type != 2)
        return snprintf(err, errlen, "%s: trainer_spec.model_type %s is not supported (UNIGRAM, BPE)", path,
                        model_type < 5 ? types[model_type] : "unknown"), -1;
    if (suffix)
        return snprintf(err, errlen, "%s: trainer_spec.treat_whitespace_as_suffix is not supported", path), -1;
    v->unigram = model_type == 1;   /* Viterbi over the scores; BPE: merges best score first */
    return 0;
}

/* NormalizerSpec (ModelProto field 3): add_dummy_prefix becomes
 * tokenizer.ggml.add_space_prefix; what the runtime does not do (a
 * precompiled character map or rules, whitespace removal, no escaping) is
 * refused by name. Its defaults are the proto's. */
static int spm_normalizer(const char *path, pb b, cv_vocab *v, char *err, size_t errlen)
{
    uint64_t dummy_prefix = 1, remove_spaces = 1, escape = 1, val;
    size_t charsmap = 0, rules = 0;
    uint32_t field, wire;
    pb sub;
    int r;
    while ((r = pb_next(&b, &field, &wire, &val, &sub)) == 0) {
        if (field == 2 && wire == 2) charsmap = (size_t)(sub.end - sub.p);
        else if (field == 3 && wire == 0) dummy_prefix = val;
        else if (field == 4 && wire == 0) remove_spaces = val;
        else if (field == 5 && wire == 0) escape = val;
        else if (field == 6 && wire == 2) rules = (size_t)(sub.end - sub.p);
    }
    const char *why = r < 0 ? "does not parse"
                    : charsmap ? "precompiled_charsmap (a Unicode normalization) is not supported"
                    : rules ? "normalization_rule_tsv is not supported"
                    : remove_spaces ? "remove_extra_whitespaces (true by default) is not supported"
                    : !escape ? "escape_whitespaces false is not supported" : NULL;
    if (why) return snprintf(err, errlen, "%s: normalizer_spec: %s", path, why), -1;
    v->add_space_prefix = dummy_prefix != 0;
    return 0;
}

static int load_spm_model(const char *path, uint32_t n_vocab, cv_vocab *v, char *err, size_t errlen)
{
    hc_map m;
    if (hc_map_open(&m, path, err, errlen)) return -1;
    pb b = {m.data, m.size ? m.data + m.size : m.data}, sub, f;   /* no NULL + 0 for an empty file */
    uint32_t field, wire, id = 0;
    uint64_t val;
    int r, bad = 0, trainer = 0, normalizer = 0;
    while (!bad && (r = pb_next(&b, &field, &wire, &val, &sub)) == 0) {
        if (field == 2 && wire == 2) {
            trainer = 1;
            if (spm_trainer(path, sub, v, err, errlen)) bad = 2;
        } else if (field == 3 && wire == 2) {
            normalizer = 1;
            if (spm_normalizer(path, sub, v, err, errlen)) bad = 2;
        }
        if (field != 1 || wire != 2 || bad) continue;
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
    /* an absent spec holds its defaults: a Unigram model that removes extra whitespace */
    pb none = { m.data, m.data };
    if (!bad && !trainer && spm_trainer(path, none, v, err, errlen)) bad = 2;
    if (!bad && !normalizer && spm_normalizer(path, none, v, err, errlen)) bad = 2;
    hc_map_close(&m);
    if (bad == 2) return -1;
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

/* tokenizer.json's added_tokens: CONTROL (special) or USER_DEFINED, on their ids. */
static int add_json_tokens(const char *path, const cJSON *root, cv_vocab *v, char *err, size_t errlen)
{
    const cJSON *e, *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsArray(added)) return snprintf(err, errlen, "%s: added_tokens is not a list", path), -1;
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(content))
            return snprintf(err, errlen, "%s: added_tokens entry without id and content", path), -1;
        uint32_t i;
        if (json_token_id(v, path, id, content->valuestring, &i, err, errlen)) return -1;
        if (replaces_piece(v, i, content->valuestring))
            return snprintf(err, errlen, "%s: added token '%s' (id %u) would replace the vocabulary's '%s'", path,
                            content->valuestring, i, v->tokens[i]), -1;
        int32_t t = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) ? TOK_CONTROL : TOK_USER_DEFINED;
        if (v->tokens[i] && v->types[i] == TOK_UNKNOWN) t = TOK_UNKNOWN;   /* <unk> stays UNKNOWN */
        set_json_token(v, i, content->valuestring, v->tokens[i] ? v->scores[i] : 0.0f, t);
    }
    return 0;
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
    if (!rc) rc = add_json_tokens(path, root, v, err, errlen);
    cJSON_Delete(root);
    return rc;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Beside a tokenizer.model, tokenizer.json's post-processor and added tokens
 * (the same file's, as transformers' fast tokenizer reads them); the pieces
 * stay the SentencePiece model's. */
static int spm_beside_json(const char *path, cv_vocab *v, char *err, size_t errlen)
{
    cJSON *root = hc_read_json(path, HF_MAX_TOKENIZER_JSON, err, errlen);
    if (!root) return -1;
    int rc = cv_json_post(path, root, v, err, errlen) || cv_json_added(path, root, v, err, errlen) ||
             add_json_tokens(path, root, v, err, errlen) ? -1 : 0;
    cJSON_Delete(root);
    return rc;
}

/* tokenizer_config.json's add_bos_token / add_eos_token, where it gives them,
 * win over the post-processor's: transformers rebuilds the post-processor
 * from them, and llama.cpp's converter reads them too. */
static int tokenizer_config(const char *dir, cv_vocab *v, char *err, size_t errlen)
{
    char path[4096];
    if (hc_path(path, sizeof path, err, errlen, "%s/tokenizer_config.json", dir)) return -1;
    if (!file_exists(path)) return 0;
    cJSON *c = hc_read_json(path, HF_MAX_TOKENIZER_JSON, err, errlen);
    if (!c) return -1;
    int rc = 0, *flag[2] = { &v->add_bos, &v->add_eos };
    for (int k = 0; k < 2 && !rc; k++) {
        const char *key = k ? "add_eos_token" : "add_bos_token";
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(c, key);
        if (cJSON_IsBool(j)) *flag[k] = cJSON_IsTrue(j);
        else if (j && !cJSON_IsNull(j)) rc = (snprintf(err, errlen, "%s: %s is not true or false", path, key), -1);
    }
    cJSON_Delete(c);
    return rc;
}

int cv_hf_vocab(const char *dir, uint32_t n_vocab, cv_vocab *v, uint32_t *unk_id, char *err, size_t errlen)
{
    char path[4096], json[4096];
    cv_vocab_init(v, n_vocab);
    if (hc_path(path, sizeof path, err, errlen, "%s/tokenizer.model", dir) ||
        hc_path(json, sizeof json, err, errlen, "%s/tokenizer.json", dir))
        return -1;
    int rc;
    if (file_exists(path)) {
        rc = load_spm_model(path, n_vocab, v, err, errlen);
        if (!rc && file_exists(json)) rc = spm_beside_json(json, v, err, errlen);
    } else if (file_exists(json)) {
        rc = load_tokenizer_json(json, v, err, errlen);
    } else {
        snprintf(err, errlen, "%s: no tokenizer.model or tokenizer.json", dir);
        return -1;
    }
    if (rc || tokenizer_config(dir, v, err, errlen)) return -1;
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

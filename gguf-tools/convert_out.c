/* What every converter shares: the vocabulary and LLaMA KVs, the tensor list,
 * and the streaming writer that turns source rows into GGUF tensor data. */
#include "convert.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "ggml_types.h"

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) hc_die("out of memory");
    return q;
}

/* ------------------------------------------------------------------ vocab */

void cv_vocab_init(cv_vocab *v, uint32_t n)
{
    v->n = n;
    v->tokens = xrealloc(NULL, n * sizeof *v->tokens);
    v->scores = xrealloc(NULL, n * sizeof *v->scores);
    v->types = xrealloc(NULL, n * sizeof *v->types);
    for (uint32_t i = 0; i < n; i++) {
        v->tokens[i] = NULL;
        v->scores[i] = 0.0f;
        v->types[i] = TOK_NORMAL;
    }
    v->model = "llama";
    v->merges = v->pre_regex = NULL;
    v->n_merges = v->n_pre_regex = 0;
    v->pre = v->normalizer = NULL;
    v->ignore_merges = v->add_bos = v->add_eos = -1;
    v->bos_id = v->eos_id = -1;
    v->fuse_unk = 1;
    v->add_space_prefix = -1;
    v->prepend_scheme = NULL;
    v->strip[0] = v->strip[1] = NULL;
    v->n_strip[0] = v->n_strip[1] = 0;
    v->unigram = 0;
}

void cv_vocab_set(cv_vocab *v, uint32_t id, const char *text, size_t len, float score, int32_t type)
{
    size_t spaces = 0;
    int escape = !strcmp(v->model, "llama");
    for (size_t i = 0; i < len && escape; i++) spaces += text[i] == ' ';
    char *s = xrealloc(NULL, len + 2 * spaces + 1), *o = s;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ' && escape) { memcpy(o, "\xe2\x96\x81", 3); o += 3; }
        else *o++ = text[i];
    }
    *o = 0;
    free(v->tokens[id]);
    v->tokens[id] = s;
    v->scores[id] = score;
    v->types[id] = type;
}

void cv_vocab_free(cv_vocab *v)
{
    for (uint32_t i = 0; i < v->n; i++) free(v->tokens[i]);
    for (uint32_t i = 0; i < v->n_merges; i++) free(v->merges[i]);
    for (uint32_t i = 0; i < v->n_pre_regex; i++) free(v->pre_regex[i]);
    free(v->merges);
    free(v->pre_regex);
    free(v->normalizer);
    free(v->strip[0]);
    free(v->strip[1]);
    free(v->tokens);
    free(v->scores);
    free(v->types);
    memset(v, 0, sizeof *v);
}

int cv_is_byte_token(const char *t, size_t len)
{
    static const char hex[] = "0123456789ABCDEFabcdef";
    return len == 6 && !memcmp(t, "<0x", 3) && t[5] == '>' &&
           t[3] && strchr(hex, t[3]) && t[4] && strchr(hex, t[4]);
}

/* ------------------------------------------------------------- llama KVs */

void cv_set_llama_kvs(gguf_writer *w, const cv_hparams *hp, const cv_vocab *v)
{
    int bpe = !strcmp(v->model, "gpt2");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens, v->n);
    if (!bpe) gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, v->scores, v->n);
    gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v->types, v->n);
    gguf_set_str(w, "tokenizer.ggml.model", v->model);
    if (bpe) {
        gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges, v->n_merges);
        if (v->pre) gguf_set_str(w, "tokenizer.ggml.pre", v->pre);
    }
    const char *arch = hp->arch ? hp->arch : "llama";
    uint32_t hd = hp->head_dim ? hp->head_dim : hp->n_embd / hp->n_head;
    char k[96];
#define AKEY(suffix) (snprintf(k, sizeof k, "%s.%s", arch, suffix), k)
    gguf_set_str(w, "general.architecture", arch);
    gguf_set_str(w, "general.name", hp->name);
    if (!bpe || (hp->unk_id < v->n && v->types[hp->unk_id] == TOK_UNKNOWN))   /* a BPE may have none */
        gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", hp->unk_id);
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", hp->bos_id);
    gguf_set_u32(w, "tokenizer.ggml.eos_token_id", hp->eos_id);
    gguf_set_u32(w, "tokenizer.ggml.seperator_token_id", UINT32_MAX);  /* llama.cpp's spelling */
    gguf_set_u32(w, "tokenizer.ggml.padding_token_id", hp->pad_id);
    if (v->add_bos >= 0) gguf_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos);
    if (v->add_eos >= 0) gguf_set_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos);
    if (v->n_pre_regex)
        gguf_set_arr_str(w, "hotcold.tokenizer.pre_regex", (const char *const *)v->pre_regex, v->n_pre_regex);
    if (v->normalizer) gguf_set_str(w, "hotcold.tokenizer.normalizer", v->normalizer);
    if (v->n_strip[0]) gguf_set_arr(w, "hotcold.tokenizer.lstrip", GGUF_TYPE_UINT32, v->strip[0], v->n_strip[0]);
    if (v->n_strip[1]) gguf_set_arr(w, "hotcold.tokenizer.rstrip", GGUF_TYPE_UINT32, v->strip[1], v->n_strip[1]);
    if (v->ignore_merges >= 0) gguf_set_bool(w, "hotcold.tokenizer.ignore_merges", v->ignore_merges);
    if (v->add_space_prefix >= 0) gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);
    if (!v->fuse_unk) gguf_set_bool(w, "hotcold.tokenizer.fuse_unk", 0);
    if (v->prepend_scheme) gguf_set_str(w, "hotcold.tokenizer.prepend_scheme", v->prepend_scheme);
    if (v->unigram) gguf_set_bool(w, "hotcold.tokenizer.unigram", 1);
    /* llama.cpp's order; key/value_length only when the head dimension is not n_embd / n_head */
    const int split = hd * hp->n_head != hp->n_embd;
    const struct { const char *suffix; uint32_t v; int on; } dims[] = {
        { "context_length", hp->n_ctx, 1 }, { "embedding_length", hp->n_embd, 1 },
        { "feed_forward_length", hp->n_ff, 1 }, { "attention.head_count", hp->n_head, 1 },
        { "attention.head_count_kv", hp->n_head_kv, 1 }, { "block_count", hp->n_layer, 1 },
        { "attention.key_length", hd, split }, { "attention.value_length", hd, split },
        { "rope.dimension_count", hd, !hp->no_rope },
    };
    for (size_t i = 0; i < sizeof dims / sizeof *dims; i++)
        if (dims[i].on) gguf_set_u32(w, AKEY(dims[i].suffix), dims[i].v);
    gguf_set_f32(w, AKEY(hp->layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"), hp->eps);
#undef AKEY
}

int cv_check_hparams(const cv_hparams *hp, char *err, size_t errlen)
{
    const char *why = NULL;
    const uint32_t max = 1u << 24;   /* the loader's bound on every dimension */
    if (!hp->n_embd || !hp->n_ff || !hp->n_layer || !hp->n_head || !hp->n_head_kv || !hp->n_vocab)
        why = "a dimension is zero";
    else if (hp->n_embd > max || hp->n_ff > max || hp->n_layer > max || hp->n_head > max || hp->n_vocab > max)
        why = "a dimension is over 2^24";
    else if (!hp->n_ctx || hp->n_ctx > max)
        why = "the context length (max_position_embeddings) is not in 1..2^24";
    else if (!hp->head_dim && hp->n_embd % hp->n_head)
        why = "embedding length is not a multiple of the head count";
    else if ((hp->head_dim ? hp->head_dim : hp->n_embd / hp->n_head) % 2)
        why = "head dimension is odd (RoPE rotates pairs)";
    else if (hp->n_head % hp->n_head_kv)
        why = "head count is not a multiple of the KV head count";
    else if (hp->n_vocab < 3)
        why = "vocabulary of fewer than 3 tokens";
    else if (!(hp->eps > 0.0f && hp->eps < 1.0f))
        why = "the norm epsilon (rms_norm_eps) is not in (0, 1)";
    if (!why) {
        /* the padding id may be "none"; the runtime refuses a file with any other one out of range */
        const struct { const char *name; uint32_t id; } special[] = {
            { "unknown token id", hp->unk_id }, { "bos_token_id", hp->bos_id }, { "eos_token_id", hp->eos_id },
            { "pad_token_id", hp->pad_id == UINT32_MAX ? 0 : hp->pad_id },
        };
        for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
            if (special[i].id >= hp->n_vocab) {
                snprintf(err, errlen, "%s %u is not a token id (the vocabulary has %u tokens)", special[i].name,
                         special[i].id, hp->n_vocab);
                return -1;
            }
        return 0;
    }
    snprintf(err, errlen, "%s (dim %u, n_ff %u, layers %u, heads %u/%u, vocab %u)", why,
             hp->n_embd, hp->n_ff, hp->n_layer, hp->n_head, hp->n_head_kv, hp->n_vocab);
    return -1;
}

/* ---------------------------------------------------------------- tensors */

cv_tensor *cv_add(cv_tensors *ts, uint32_t type, uint32_t n_dims, int64_t ne0, int64_t ne1,
                  const char *fmt, ...)
{
    if (ts->n == ts->cap) {
        ts->cap = ts->cap ? 2 * ts->cap : 64;
        ts->t = xrealloc(ts->t, ts->cap * sizeof *ts->t);
    }
    cv_tensor *t = &ts->t[ts->n++];
    memset(t, 0, sizeof *t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->type = type;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = n_dims > 1 ? ne1 : 1;
    return t;
}

void cv_tensors_free(cv_tensors *ts)
{
    free(ts->t);
    memset(ts, 0, sizeof *ts);
}

/* n elements of an F32/F16/BF16 source as F32, and F32 into the output type. */
static void cv_to_f32(uint32_t type, const void *src, float *dst, size_t n)
{
    const uint16_t *h = src;
    switch (type) {
    case GGML_TYPE_F32: memcpy(dst, src, n * sizeof *dst); break;   /* bit-exact copy */
    case GGML_TYPE_F16: for (size_t i = 0; i < n; i++) dst[i] = fp16_to_fp32(h[i]); break;
    case GGML_TYPE_BF16: for (size_t i = 0; i < n; i++) dst[i] = bf16_to_fp32(h[i]); break;
    default: hc_die("internal: source type %u", type);
    }
}

/* src[0..n) in type; returns the index of the first finite value the type
 * cannot hold (it would be written as inf), or n. */
static size_t cv_from_f32(uint32_t type, const float *src, void *dst, size_t n)
{
    uint16_t *h = dst;
    switch (type) {
    case GGML_TYPE_F32: memcpy(dst, src, n * sizeof *src); return n;
    case GGML_TYPE_F16:
        for (size_t i = 0; i < n; i++) h[i] = fp32_to_fp16(src[i]);
        for (size_t i = 0; i < n; i++)
            if ((h[i] & 0x7fff) == 0x7c00 && isfinite(src[i])) return i;
        return n;
    case GGML_TYPE_BF16:
        for (size_t i = 0; i < n; i++) h[i] = fp32_to_bf16(src[i]);
        for (size_t i = 0; i < n; i++)
            if ((h[i] & 0x7fff) == 0x7f80 && isfinite(src[i])) return i;
        return n;
    default: hc_die("internal: output type %u", type);
    }
}

/* The source row of output row r of a layout that reorders rows. */
static int64_t source_row(const cv_tensor *t, int64_t r)
{
    if (t->layout == CV_PERMUTE) {
        /* HF rows of a head are [first halves of the pairs | second halves];
         * GGUF wants each pair adjacent: row 2i+j of a head = HF row j*half+i. */
        int64_t hd = t->ne[1] / t->heads, half = hd / 2, h = r / hd, k = r % hd;
        return h * hd + (k % 2) * half + k / 2;
    }
    if (t->layout == CV_FALCON_QKV) {
        /* source: per KV group g, its qpg query heads, then its K head, then its V head */
        int64_t qpg = t->heads / t->heads_kv, hd = t->ne[1] / (t->heads + 2 * (int64_t)t->heads_kv);
        int64_t Q = (int64_t)t->heads * hd, KV = (int64_t)t->heads_kv * hd, group = (qpg + 2) * hd;
        if (r < Q) return (r / hd / qpg) * group + (r / hd % qpg) * hd + r % hd;
        if (r < Q + KV) return ((r - Q) / hd) * group + qpg * hd + (r - Q) % hd;
        return ((r - Q - KV) / hd) * group + (qpg + 1) * hd + (r - Q - KV) % hd;
    }
    return r;
}

/* Output rows [r0, r0+nr) of t as F32 into out (nr * ne[0] floats). */
static void fetch_rows(const cv_tensor *t, int64_t r0, int64_t nr, float *out)
{
    const int64_t n = t->ne[0];
    const size_t es = ggml_type_size(t->src_type);
    const uint8_t *src = t->src;
    if (t->gen) {
        t->gen(t, r0, nr, out);
    } else if (t->layout == CV_TRANSPOSE) {
        /* source: n rows of ne[1] elements; walk each source row once per chunk */
        float *tmp = xrealloc(NULL, (size_t)nr * sizeof *tmp);
        for (int64_t c = 0; c < n; c++) {
            cv_to_f32(t->src_type, src + ((size_t)c * (size_t)t->ne[1] + (size_t)r0) * es, tmp, (size_t)nr);
            for (int64_t r = 0; r < nr; r++) out[r * n + c] = tmp[r];
        }
        free(tmp);
    } else {
        for (int64_t r = r0; r < r0 + nr; r++) {
            int64_t s = source_row(t, r);
            cv_to_f32(t->src_type, src + (size_t)s * (size_t)n * es, out + (r - r0) * n, (size_t)n);
        }
    }
}

int cv_write(gguf_writer *w, const cv_tensors *ts, const char *path, char *err, size_t errlen)
{
    double t0 = hc_now();
    uint64_t total = 0;
    int64_t max_row = 1;
    for (size_t i = 0; i < ts->n; i++) {
        const cv_tensor *t = &ts->t[i];
        if (gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, NULL) < 0) {
            snprintf(err, errlen, "%s: cannot declare tensor %s", path, t->name);
            return -1;
        }
        total += (uint64_t)ggml_row_size(t->type, t->ne[0]) * (uint64_t)t->ne[1];
        if (t->ne[0] > max_row) max_row = t->ne[0];
    }
    if (gguf_writer_begin(w, path, err, errlen)) return -1;

    /* rows per chunk: about 1 Mi floats, at least 64 rows so transposes read runs */
    const int64_t chunk_elems = (int64_t)1 << 20;
    size_t buf_elems = (size_t)(64 * max_row > chunk_elems ? 64 * max_row : chunk_elems);
    float *f = xrealloc(NULL, buf_elems * sizeof *f);
    uint8_t *o = xrealloc(NULL, buf_elems * sizeof *f);
    hc_progress p;
    hc_progress_start(&p, "converting", total, "B");
    uint64_t done = 0;
    int rc = 0;
    for (size_t i = 0; i < ts->n && !rc; i++) {
        const cv_tensor *t = &ts->t[i];
        int64_t nr = chunk_elems / t->ne[0] < 64 ? 64 : chunk_elems / t->ne[0];
        size_t row_bytes = ggml_row_size(t->type, t->ne[0]);
        for (int64_t r = 0; r < t->ne[1] && !rc; r += nr) {
            int64_t k = t->ne[1] - r < nr ? t->ne[1] - r : nr;
            fetch_rows(t, r, k, f);
            size_t bad = cv_from_f32(t->type, f, o, (size_t)(k * t->ne[0]));
            if (bad < (size_t)(k * t->ne[0])) {
                snprintf(err, errlen, "%s: tensor %s: value %g at [%lld, %lld] is beyond %s's range (--outtype f32 "
                         "holds it)", path, t->name, (double)f[bad], (long long)(r + (int64_t)bad / t->ne[0]),
                         (long long)((int64_t)bad % t->ne[0]), ggml_type_name(t->type));
                rc = -1;
                break;
            }
            rc = gguf_writer_write_data(w, o, (size_t)k * row_bytes, err, errlen);
            done += (uint64_t)k * row_bytes;
            hc_progress_update(&p, done);
        }
    }
    hc_progress_end(&p);
    free(f);
    free(o);
    if (rc || gguf_writer_finish(w, err, errlen)) return -1;
    char sz[32];
    struct stat st;
    hc_warn("wrote %s: %s, %zu tensors, in %.2f s", path,
            hc_format_size(stat(path, &st) == 0 ? (uint64_t)st.st_size : total, sz, sizeof sz), ts->n, hc_now() - t0);
    return 0;
}

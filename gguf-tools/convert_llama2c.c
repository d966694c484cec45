/* hc-convert llama2c: a llama2.c checkpoint (legacy or version 1) and its
 * tokenizer.bin -> a llama GGUF written as llama.cpp's convert-llama2c-to-ggml
 * writes it: same KVs in the same order, same tensor names, order and bytes
 * (docs/formats.md, "Inputs: llama2.c checkpoints"). llama2.c weights are already in
 * the interleaved RoPE layout, so Q/K are copied unpermuted. */
#include "convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define L2C_V1_MAGIC 0x616b3432u     /* bytes "24ka" */
#define L2C_V1_HEADER 256

typedef struct {
    int32_t dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len;
} l2c_config;

/* Where each llama2.c array lives in the mapped checkpoint. */
typedef struct {
    const float *emb, *att_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w1, *w2, *w3, *final_norm, *wcls;
} l2c_weights;

static int32_t rd_i32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Parse the header, check the file holds exactly the arrays it announces, and
 * locate them. Dies with a one-line message on any problem. */
static void l2c_layout(const char *path, const hc_map *m, l2c_config *c, int *shared, l2c_weights *w)
{
    size_t off;
    int v1 = m->size >= 8 && (uint32_t)rd_i32(m->data) == L2C_V1_MAGIC;
    if (v1) {
        if (m->size < L2C_V1_HEADER) hc_die("%s: truncated version-1 header (%zu bytes)", path, m->size);
        int32_t version = rd_i32(m->data + 4);
        if (version != 1)
            hc_die("%s: unsupported llama2.c version %d (only legacy and version 1, float32)", path, version);
        memcpy(c, m->data + 8, sizeof *c);
        *shared = m->data[8 + sizeof *c] != 0;
        off = L2C_V1_HEADER;
    } else {
        if (m->size < sizeof *c) hc_die("%s: too small for a llama2.c header (%zu bytes)", path, m->size);
        memcpy(c, m->data, sizeof *c);
        *shared = c->vocab > 0;         /* negative vocab: separate classifier at the end */
        if (c->vocab < 0 && c->vocab > INT32_MIN) c->vocab = -c->vocab;
        off = sizeof *c;
    }
    /* Bounds keep every size product below 2^63 before the exact size check. */
    if (c->dim <= 0 || c->dim > (1 << 20) || c->hidden <= 0 || c->hidden > (1 << 22) ||
        c->n_layers <= 0 || c->n_layers > 4096 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->vocab <= 0 || c->vocab > (1 << 24) || c->seq_len <= 0 || c->seq_len > (1 << 24) ||
        c->dim % c->n_heads || c->n_kv_heads > c->n_heads)
        hc_die("%s: implausible %s header (dim %d, hidden %d, layers %d, heads %d/%d, vocab %d, seq %d)",
               path, v1 ? "version-1" : "legacy", c->dim, c->hidden, c->n_layers, c->n_heads,
               c->n_kv_heads, c->vocab, c->seq_len);

    const uint64_t L = (uint64_t)c->n_layers, dim = (uint64_t)c->dim, hid = (uint64_t)c->hidden;
    const uint64_t kv_dim = dim * (uint64_t)c->n_kv_heads / (uint64_t)c->n_heads;
    const uint64_t hs = dim / (uint64_t)c->n_heads, vocab = (uint64_t)c->vocab;
    const float *base = (const float *)(const void *)(m->data + off);
    uint64_t at = 0;
#define TAKE(field, count) (w->field = base + at, at += (count))
    if (v1) {
        TAKE(att_norm, L * dim);
        TAKE(ffn_norm, L * dim);
        TAKE(final_norm, dim);
        TAKE(emb, vocab * dim);
    } else {
        TAKE(emb, vocab * dim);
        TAKE(att_norm, L * dim);
    }
    TAKE(wq, L * dim * dim);
    TAKE(wk, L * kv_dim * dim);
    TAKE(wv, L * kv_dim * dim);
    TAKE(wo, L * dim * dim);
    if (!v1) TAKE(ffn_norm, L * dim);
    TAKE(w1, L * hid * dim);
    TAKE(w2, L * dim * hid);
    TAKE(w3, L * hid * dim);
    if (!v1) {
        TAKE(final_norm, dim);
        at += (uint64_t)c->seq_len * hs;   /* freq_cis_real + freq_cis_imag: unused */
    }
    if (*shared) w->wcls = w->emb;
    else TAKE(wcls, vocab * dim);
#undef TAKE
    uint64_t want = off + 4 * at;
    if ((uint64_t)m->size != want)
        hc_die("%s: file is %zu bytes but its %s header describes %llu", path, m->size,
               v1 ? "version-1" : "legacy", (unsigned long long)want);
}

/* tokenizer.bin: int32 max_token_length, then per token f32 score, int32 len,
 * len bytes. The token count is not stored: it is the checkpoint's vocab. */
static void l2c_vocab(const char *path, uint32_t n, cv_vocab *v)
{
    char err[512];
    size_t len;
    uint8_t *buf = (uint8_t *)hc_read_file(path, &len, err, sizeof err);
    if (!buf) hc_die("%s", err);
    size_t at = 4;
    /* free buf before dying: the exit must not report it as leaked under ASan */
#define BAD(...) do { free(buf); hc_die(__VA_ARGS__); } while (0)
    if (len < at) BAD("%s: too small for a llama2.c tokenizer", path);
    cv_vocab_init(v, n);
    for (uint32_t id = 0; id < n; id++) {
        float score;
        if (len - at < 8) BAD("%s: ends at token %u but the checkpoint has %u tokens", path, id, n);
        memcpy(&score, buf + at, 4);
        int32_t tl = rd_i32(buf + at + 4);
        at += 8;
        if (tl < 0 || (size_t)tl > len - at)
            BAD("%s: token %u: length %d runs past the end of the file", path, id, tl);
        const char *text = (const char *)buf + at;
        at += (size_t)tl;
        /* a GGUF string holds none (ggml refuses it; hc-gguf too) */
        if (memchr(text, 0, (size_t)tl)) BAD("%s: token %u holds a NUL byte", path, id);
        /* the mapping llama.cpp's llama2.c converter applies (load_vocab) */
        if (id == 0) cv_vocab_set(v, id, "<unk>", 5, score, TOK_UNKNOWN);
        else if (id == 1) cv_vocab_set(v, id, "<s>", 3, score, TOK_CONTROL);
        else if (id == 2) cv_vocab_set(v, id, "</s>", 4, score, TOK_CONTROL);
        else if (tl == 0) cv_vocab_set(v, id, "", 0, score, TOK_CONTROL);
        else cv_vocab_set(v, id, text, (size_t)tl, score,
                          cv_is_byte_token(text, (size_t)tl) ? TOK_BYTE : TOK_NORMAL);
    }
    if (at != len)
        BAD("%s: %zu bytes left after %u tokens: not the tokenizer of this checkpoint", path, len - at, n);
#undef BAD
    free(buf);
}

int cv_convert_llama2c(const cv_llama2c_opts *o, char *err, size_t errlen)
{
    const char *ckpt = o->checkpoint;
    hc_map m;
    if (hc_map_open(&m, ckpt, err, errlen)) return -1;
    l2c_config cfg;
    l2c_weights wt;
    int shared;
    l2c_layout(ckpt, &m, &cfg, &shared, &wt);
    cv_vocab v;
    l2c_vocab(o->tokenizer, (uint32_t)cfg.vocab, &v);

    cv_hparams hp = {
        .n_vocab = (uint32_t)cfg.vocab, .n_embd = (uint32_t)cfg.dim, .n_ff = (uint32_t)cfg.hidden,
        .n_layer = (uint32_t)cfg.n_layers, .n_head = (uint32_t)cfg.n_heads,
        .n_head_kv = (uint32_t)cfg.n_kv_heads, .n_ctx = (uint32_t)(o->ctx ? o->ctx : cfg.seq_len),
        .eps = 1e-5f,                    /* llama2.c hard-codes it */
        .name = "llama", .unk_id = 0, .bos_id = 1, .eos_id = 2, .pad_id = UINT32_MAX,
    };
    char why[512];
    if (cv_check_hparams(&hp, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", ckpt, why);
        cv_vocab_free(&v);
        hc_map_close(&m);
        return -1;
    }

    /* tensors in llama.cpp's converter order; "output" is written even when shared */
    const int64_t dim = cfg.dim, hid = cfg.hidden, kv_dim = dim * cfg.n_kv_heads / cfg.n_heads;
    const uint32_t F32 = GGML_TYPE_F32;
    cv_tensors ts = {0};
    cv_add(&ts, F32, 2, dim, cfg.vocab, "token_embd.weight")->src = wt.emb;
    cv_add(&ts, F32, 1, dim, 1, "output_norm.weight")->src = wt.final_norm;
    cv_add(&ts, F32, 2, dim, cfg.vocab, "output.weight")->src = wt.wcls;
    for (int64_t l = 0; l < cfg.n_layers; l++) {
        cv_add(&ts, F32, 2, dim, dim, "blk.%d.attn_q.weight", (int)l)->src = wt.wq + l * dim * dim;
        cv_add(&ts, F32, 2, dim, kv_dim, "blk.%d.attn_k.weight", (int)l)->src = wt.wk + l * kv_dim * dim;
        cv_add(&ts, F32, 2, dim, kv_dim, "blk.%d.attn_v.weight", (int)l)->src = wt.wv + l * kv_dim * dim;
        cv_add(&ts, F32, 2, dim, dim, "blk.%d.attn_output.weight", (int)l)->src = wt.wo + l * dim * dim;
        cv_add(&ts, F32, 1, dim, 1, "blk.%d.attn_norm.weight", (int)l)->src = wt.att_norm + l * dim;
        cv_add(&ts, F32, 2, dim, hid, "blk.%d.ffn_gate.weight", (int)l)->src = wt.w1 + l * hid * dim;
        cv_add(&ts, F32, 2, hid, dim, "blk.%d.ffn_down.weight", (int)l)->src = wt.w2 + l * dim * hid;
        cv_add(&ts, F32, 2, dim, hid, "blk.%d.ffn_up.weight", (int)l)->src = wt.w3 + l * hid * dim;
        cv_add(&ts, F32, 1, dim, 1, "blk.%d.ffn_norm.weight", (int)l)->src = wt.ffn_norm + l * dim;
    }

    /* SwiGLU is the runtime's default, so no hotcold.ffn_activation here: the
     * KV set stays exactly llama.cpp's. */
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    cv_set_llama_kvs(w, &hp, &v);
    int rc = cv_write(w, &ts, o->out, err, errlen);
    gguf_writer_free(w);
    cv_tensors_free(&ts);
    cv_vocab_free(&v);
    hc_map_close(&m);
    return rc;
}

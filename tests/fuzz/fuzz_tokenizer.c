/* The tokenizers (runtime/tokenizer.c, tokenizer_bpe.c) on arbitrary bytes;
 * `make fuzz` runs it.
 *
 * Input: byte 0 holds flags (bit 0 add_bos, bit 1 parse_special, bit 2 the
 * built-in SPM vocab with a piece that crosses word starts, bit 3 the built-in
 * byte-level BPE vocab), the rest is the text.
 * Vocab: $HC_FUZZ_VOCAB (a GGUF path), else three small vocabs written here.
 * Checks: no crash or out-of-bounds access, ids in range, a short buffer gets
 * the same prefix and count, and decode(encode(x)) == x where that must hold
 * (for the BPE: x with each byte outside valid UTF-8 read as U+FFFD). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "gguf.h"
#include "pretok.h"
#include "tokenizer.h"

static hc_tokenizer *vocab[3];
static int builtin;

static hc_tokenizer *open_vocab(const char *path)
{
    char err[512];
    gguf_file *f = gguf_open(path, err, sizeof err);
    hc_tokenizer *t = f ? hc_tokenizer_load(f, err, sizeof err) : NULL;
    gguf_close(f);
    if (!t) { fprintf(stderr, "fuzz_tokenizer: %s\n", err); abort(); }
    return t;
}

/* <unk> <s> </s>, 256 byte tokens, ▁, a-z, some merges with tied scores, a
 * duplicate, an empty control piece, a user-defined and a control token. */
static hc_tokenizer *write_vocab(gguf_writer *w)
{
    char path[] = "/tmp/fuzz_tokenizer.XXXXXX", err[512];
    int fd = mkstemp(path);
    if (fd < 0) abort();
    close(fd);
    if (gguf_writer_write(w, path, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); abort(); }
    gguf_writer_free(w);
    hc_tokenizer *t = open_vocab(path);
    unlink(path);
    return t;
}

static hc_tokenizer *build_vocab(int cross_word)
{
    static const char *extra[] = {
        "\xe2\x96\x81", "\xe2\x96\x81\xe2\x96\x81", "\xe2\x96\x81t", "he", "\xe2\x96\x81the", "in",
        "ing", "\342\226\201a", "an", "er", "on", "he", "\xc3\xa9", "\xe6\x97\xa5", "", "<|u|>", "<|c|>",
        "e\xe2\x96\x81t",
    };
    enum { N_EXTRA = sizeof extra / sizeof *extra, N_MAX = 3 + 256 + 26 + N_EXTRA };
    static char bytes[256][7], letters[26][2];
    const char *tok[N_MAX];
    float score[N_MAX];
    int32_t type[N_MAX];
    int n = 0;
    tok[n] = "<unk>"; type[n++] = 2;
    tok[n] = "<s>"; type[n++] = 3;
    tok[n] = "</s>"; type[n++] = 3;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        tok[n] = bytes[b]; type[n++] = 6;
    }
    for (int c = 0; c < 26; c++) {
        letters[c][0] = (char)('a' + c);
        tok[n] = letters[c]; type[n++] = 1;
    }
    for (int i = 0; i < N_EXTRA - !cross_word; i++) {
        tok[n] = extra[i];
        type[n++] = !*extra[i] ? 3 : !strcmp(extra[i], "<|u|>") ? 4 : !strcmp(extra[i], "<|c|>") ? 3 : 1;
    }
    for (int i = 0; i < n; i++) score[i] = type[i] == 1 ? -(float)(i / 2) : 0.0f;   /* pairs tie */

    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", tok, (uint64_t)n);
    gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, score, (uint64_t)n);
    gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, (uint64_t)n);
    return write_vocab(w);
}

/* Byte-level BPE: GPT-2's 256 byte characters, merges that chain (and one
 * word that only ignore_merges reaches), a control and a user-defined token,
 * Llama 3's pre-tokenizer. */
static hc_tokenizer *build_bpe_vocab(void)
{
    static char chars[256][3];
    static const char *extra[] = { "\xc4\xa0t", "he", "\xc4\xa0the", "in", "ing", "\xc4\xa0\xc4\xa0", "12",
                                   "qz", "<|c|>", "<|u|>" };
    static const char *merges[] = { "\xc4\xa0 t", "h e", "\xc4\xa0t he", "i n", "in g", "\xc4\xa0 \xc4\xa0", "1 2" };
    enum { N_EXTRA = sizeof extra / sizeof *extra, N = 256 + N_EXTRA };
    const char *tok[N];
    int32_t type[N];
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        int cp = printable ? b : b <= 32 ? 256 + b : b <= 160 ? b + 162 : 323;
        if (cp < 0x80) chars[b][0] = (char)cp;
        else { chars[b][0] = (char)(0xC0 | cp >> 6); chars[b][1] = (char)(0x80 | (cp & 0x3F)); }
        tok[b] = chars[b];
        type[b] = 1;
    }
    for (int i = 0; i < N_EXTRA; i++) {
        tok[256 + i] = extra[i];
        type[256 + i] = !strcmp(extra[i], "<|c|>") ? 3 : !strcmp(extra[i], "<|u|>") ? 4 : 1;
    }
    uint32_t bos = 256 + N_EXTRA - 2;
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", tok, N);
    gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, N);
    gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, sizeof merges / sizeof *merges);
    gguf_set_str(w, "tokenizer.ggml.pre", "llama-bpe");
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", bos);
    return write_vocab(w);
}

static void init(void)
{
    const char *p = getenv("HC_FUZZ_VOCAB");
    builtin = !(p && *p);
    vocab[0] = builtin ? build_vocab(0) : open_vocab(p);
    vocab[1] = builtin ? build_vocab(1) : vocab[0];
    vocab[2] = builtin ? build_bpe_vocab() : vocab[0];
}

/* text with every byte that does not start a valid UTF-8 character as U+FFFD */
static char *as_valid_utf8(const char *text, size_t len, size_t *n)
{
    char *s = malloc(3 * len + 1);
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        int k = hc_utf8_valid_len((const unsigned char *)text + i, len - i);
        if (k) { memcpy(s + o, text + i, (size_t)k); o += (size_t)k; i += (size_t)k; }
        else { memcpy(s + o, "\xef\xbf\xbd", 3); o += 3; i++; }
    }
    *n = o;
    return s;
}

FUZZ_TARGET(fuzz_tokenizer)
{
    if (!vocab[0]) init();
    if (size < 1) return 0;
    int bos = data[0] & 1, special = (data[0] >> 1) & 1;
    int bpe = (data[0] >> 3) & 1;
    const hc_tokenizer *t = vocab[bpe ? 2 : (data[0] >> 2) & 1];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    int n = hc_tokenize(t, text, len, bos, special, NULL, 0);
    if (n < 0) {
        if (builtin) abort();   /* the built-in vocab can encode any byte */
        return 0;
    }
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (hc_tokenize(t, text, len, bos, special, ids, n) != n) abort();
    /* a short buffer: same count, same prefix, nothing written past max */
    int half = n / 2;
    int32_t *part = malloc(((size_t)half + 1) * sizeof *part);
    if (hc_tokenize(t, text, len, bos, special, part, half) != n) abort();
    if (half && memcmp(part, ids, (size_t)half * sizeof *ids) != 0) abort();
    free(part);

    int nv = hc_tokenizer_n_vocab(t);
    size_t cap = 64 * (size_t)n + 1, o = 0;
    char *out = malloc(cap);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= nv) abort();
        int k = hc_token_to_piece(t, i ? ids[i - 1] : -1, ids[i], out + o, (int)(cap - o));
        if (k < 0) abort();
        o += (size_t)k;
    }
    /* Exact round trip with BOS, as long as no piece changes the text: a literal
     * U+2581 decodes as a space and a user-defined token re-adds the prefix space. */
    if (builtin && !bpe && bos && !special && !memmem(text, len, "\xe2\x96\x81", 3) &&
        !memmem(text, len, "<|u|>", 5) && (o != len || memcmp(out, text, len) != 0))
        abort();
    /* the BPE gives back every byte: only a control token's text is lost */
    if (builtin && bpe && !(special && memmem(text, len, "<|c|>", 5))) {
        size_t vn;
        char *valid = as_valid_utf8(text, len, &vn);
        if (o != vn || memcmp(out, valid, vn) != 0) abort();
        free(valid);
    }
    free(out);
    free(ids);
    return 0;
}

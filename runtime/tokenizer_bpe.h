/* Byte-level BPE (tokenizer.ggml.model = "gpt2"), the tokenizer of Llama 3,
 * Qwen2, GPT-2 and most models since: runtime/tokenizer.c cuts special tokens
 * out of the text, then each remaining fragment is pre-tokenized with regexes
 * (pretok.h), every byte of a piece is mapped to its GPT-2 unicode character,
 * and the piece is merged pair by pair by merge rank (lowest first, leftmost
 * on a tie) as Hugging Face tokenizers and llama.cpp do. Internal to the
 * runtime: use tokenizer.h. */
#ifndef HC_TOKENIZER_BPE_H
#define HC_TOKENIZER_BPE_H

#include <stddef.h>
#include <stdint.h>
#include "gguf.h"

typedef struct hc_bpe hc_bpe;

/* The vocabulary's piece -> id lookup (-1 when absent). */
typedef int (*hc_bpe_find)(const void *vocab, const char *s, size_t n);

/* Merges, pre-tokenizer and flags of f. unk: the unknown token, or -1.
 * NULL + one line (without the file name) in err. */
hc_bpe *hc_bpe_load(const gguf_file *f, const void *vocab, hc_bpe_find find, int unk, int *add_bos,
                    char *err, size_t errlen);
void hc_bpe_free(hc_bpe *b);

/* Encode raw text (no special tokens in it), calling emit for each id. Bytes
 * that are not valid UTF-8 are read as U+FFFD each, as llama.cpp does; then
 * the normalizer (hotcold.tokenizer.normalizer) applies.
 * 0, or -1 when out of memory. */
typedef void (*hc_bpe_emit)(void *ctx, int id);
int hc_bpe_encode(const hc_bpe *b, const char *text, size_t len, hc_bpe_emit emit, void *ctx);

/* The bytes a byte-level piece stands for (each GPT-2 unicode character back
 * to its byte; other characters copied). Returns the bytes written (<= cap). */
int hc_bpe_unmap(const char *piece, size_t n, char *buf, int cap);

#endif

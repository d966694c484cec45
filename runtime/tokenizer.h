/* The tokenizer of a GGUF vocab. SentencePiece-style (tokenizer.ggml.model =
 * "llama") as llama.cpp's SPM tokenizer: score-based bigram merges, byte
 * fallback <0xXX>, the leading space (add_space_prefix), BOS/EOS,
 * control/special tokens. Byte-level BPE ("gpt2") as Hugging Face tokenizers
 * and llama.cpp: see tokenizer_bpe.h. */
#ifndef HC_TOKENIZER_H
#define HC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "gguf.h"

typedef struct hc_tokenizer hc_tokenizer;

/* NULL + one-line message if the vocab KVs are missing or inconsistent. */
hc_tokenizer *hc_tokenizer_load(const gguf_file *f, char *err, size_t errlen);
void hc_tokenizer_free(hc_tokenizer *t);

int hc_tokenizer_n_vocab(const hc_tokenizer *t);
int hc_tokenizer_bos(const hc_tokenizer *t);
int hc_tokenizer_eos(const hc_tokenizer *t);
/* Whether id ends a generated text, as llama.cpp's end-of-generation set:
 * EOS, tokenizer.ggml.eot_token_id and eom_token_id where the file gives
 * them, and BOS (llama2.c's run.c stops there). */
int hc_tokenizer_is_end(const hc_tokenizer *t, int id);
/* tokenizer.ggml.add_bos_token (default 1): whether prompts should start with BOS. */
int hc_tokenizer_add_bos(const hc_tokenizer *t);
/* tokenizer.ggml.add_eos_token (default 0): whether the model's tokenizer appends EOS. */
int hc_tokenizer_add_eos(const hc_tokenizer *t);

/* Tokenize UTF-8 text of len bytes. add_bos: prepend BOS. parse_special: match
 * control-token texts like "<s>" in the input (llama.cpp's parse_special).
 * Writes up to max tokens; returns the number of tokens the text needs
 * (may exceed max: call again with a bigger buffer), or -1 on error:
 * hc_tokenize_error says why. */
int hc_tokenize(const hc_tokenizer *t, const char *text, size_t len, int add_bos,
                int parse_special, int32_t *out, int max);
/* Why the last hc_tokenize of this thread that failed failed: "MODEL: why"
 * (a PCRE2 match limit and the regex, the normalizer's bound, ...). */
const char *hc_tokenize_error(void);

/* The whole text file at path as tokens, no BOS (a corpus: hc-profile and its
 * predictors). *n = the count (> 0). NULL + one line in err: unreadable, over
 * 1 GiB, empty or not tokenizable. */
int32_t *hc_tokenize_file(const hc_tokenizer *tok, const char *path, int64_t *n, char *err, size_t errlen);

/* The text of token id as it should be printed (▁ → space, <0xXX> → that byte,
 * control tokens → ""). prev is the previous token (llama2.c strips the leading
 * space after BOS) or -1. Returns bytes written into buf (not NUL-terminated if len == cap). */
int hc_token_to_piece(const hc_tokenizer *t, int prev, int id, char *buf, int cap);

#endif

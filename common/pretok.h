/* Pre-tokenization of byte-level BPE tokenizers: a list of regexes, each one
 * splitting every piece the previous one produced into its matches and the
 * text between them (Hugging Face tokenizers' Split with behaviour "Isolated",
 * and llama.cpp's unicode_regex_split). The regexes are PCRE2 patterns in the
 * spelling of tokenizer.json, compiled with UTF and UCP (\p{L}, \s, ... are
 * Unicode properties). See docs/design/tokenizer.md. */
#ifndef HC_PRETOK_H
#define HC_PRETOK_H

#include <stddef.h>

/* tokenizers' Punctuation pre-tokenizer: one character that Rust's
 * is_ascii_punctuation or a Unicode P category takes (so the ASCII symbols
 * $+<=>^`|~ too); with behaviour Contiguous, runs of them. */
#define HC_RE_PUNCT "[\\p{P}\\$\\+<=>\\^~\\|`]"

/* A pre-tokenizer llama.cpp knows by name (GGUF tokenizer.ggml.pre): the
 * regexes it runs, in the spelling of tokenizer.json, and whether its BPE
 * skips the merges of a word that is itself a token (tokenizers'
 * ignore_merges). When the model's tokenizer.json has steps llama.cpp does
 * not run (Falcon's digits split again after ByteLevel, on GPT-2
 * characters), `json` holds the converter's regexes for that file: the last
 * n_after_byte_level of them come after ByteLevel. */
typedef struct {
    const char *name;
    int n_regex;
    const char *regex[6];
    int ignore_merges;
    int add_bos;            /* llama.cpp's default when the GGUF does not say */
    int n_json, n_after_byte_level;
    const char *json[4];
} hc_pretok_def;

/* The definition of a llama.cpp name, or NULL when this toolchain has none. */
const hc_pretok_def *hc_pretok_by_name(const char *name);
/* llama.cpp's name for these regexes, the last n_after_byte_level of which
 * come after ByteLevel (the first that fits, preferring one with the same
 * ignore_merges), or NULL. */
const hc_pretok_def *hc_pretok_by_regex(const char *const *regex, int n, int n_after_byte_level, int ignore_merges);
/* The names this build knows, comma-separated, into buf. */
void hc_pretok_names(char *buf, size_t cap);

typedef struct hc_pretok hc_pretok;

/* Compile the regexes (hc_regex_compile): NULL + one line in err. */
hc_pretok *hc_pretok_new(const char *const *regex, int n, char *err, size_t errlen);
void hc_pretok_free(hc_pretok *p);

/* Split text (len bytes of valid UTF-8) and call fn on each non-empty piece in
 * order; fn returns 0 to go on. Returns 0, or -1 (out of memory, a PCRE2
 * match error, the work budget of the text spent, or fn's non-zero value;
 * hc_text_error says which but for fn). The regexes' matches are found by
 * hc_regex_find, under one budget for the whole text (regex.h). */
typedef int (*hc_pretok_fn)(void *ctx, const char *piece, size_t len);
int hc_pretok_split(const hc_pretok *p, const char *text, size_t len, hc_pretok_fn fn, void *ctx);

/* Why the last hc_pretok_split or hc_normalize that failed on this thread
 * failed, one phrase without a file name ("" when unknown); set with
 * hc_text_error_set, cleared with hc_text_error_set("%s", ""). */
const char *hc_text_error(void);
void hc_text_error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Length of the valid UTF-8 character at s (strict: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or 0 when the bytes there are not one. */
int hc_utf8_valid_len(const unsigned char *s, size_t avail);

#endif

/* Normalizers of Hugging Face tokenizer.json, applied to text before a
 * byte-level BPE pre-tokenizes it: NFC, NFD, NFKC, NFKD (libunistring),
 * Lowercase (each character's full lowercase mapping, as Rust's
 * char::to_lowercase), Replace (a String or a PCRE2 Regex pattern, every
 * match replaced by the content), Prepend (when the text is not empty), and
 * Sequence of these. The GGUF keeps tokenizer.json's normalizer object as a
 * JSON string (hotcold.tokenizer.normalizer). See docs/design/tokenizer.md. */
#ifndef HC_NORMALIZE_H
#define HC_NORMALIZE_H

#include <stddef.h>

typedef struct hc_normalizer hc_normalizer;

/* Parse the normalizer's JSON: NULL + one line in err for a type this build
 * does not apply (named), a bad regex (PCRE2's message) or bad JSON. */
hc_normalizer *hc_normalizer_new(const char *json, size_t len, char *err, size_t errlen);
void hc_normalizer_free(hc_normalizer *n);

/* The normalized copy of text (len bytes of valid UTF-8): malloc'd, its length
 * in *out_len; NULL when out of memory. */
char *hc_normalize(const hc_normalizer *n, const char *text, size_t len, size_t *out_len);

#endif

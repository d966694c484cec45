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

/* What a normalizer may make of len bytes: at most HC_NORM_GROWTH * len +
 * HC_NORM_EXTRA bytes. hc_normalizer_new refuses one whose steps could make
 * more (forty Replace "a" -> "aa" would make 2^40 bytes of one; a Replace
 * whose regex matches the empty string inserts its content between any two
 * bytes), and hc_normalize stops at the bound whatever the steps do. NFKC
 * with a Replace of ' ' by U+2581 and a Prepend (11 x 3 times, 3 bytes) fits. */
#define HC_NORM_GROWTH 64
#define HC_NORM_EXTRA 4096

/* Parse the normalizer's JSON: NULL + one line in err for a type this build
 * does not apply (named), a bad regex (PCRE2's message), bad JSON or steps
 * that could lengthen text past the bound above. */
hc_normalizer *hc_normalizer_new(const char *json, size_t len, char *err, size_t errlen);
void hc_normalizer_free(hc_normalizer *n);

/* The normalized copy of text (len bytes of valid UTF-8): malloc'd, its length
 * in *out_len; NULL when out of memory or past the bound above. */
char *hc_normalize(const hc_normalizer *n, const char *text, size_t len, size_t *out_len);

#endif

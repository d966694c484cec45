/* Hugging Face vocabularies (gguf-tools/convert_tokenizer.c, cv_hf_vocab):
 * byte 0 bit 0 picks tokenizer.model (SentencePiece protobuf) or
 * tokenizer.json, bytes 1-2 the model's vocab size; the rest is the file. */
#include "fuzz.h"

#include <string.h>

#include "convert.h"

FUZZ_TARGET(fuzz_hftok)
{
    if (size < 3) return 0;
    const char *name = data[0] & 1 ? "tokenizer.model" : "tokenizer.json";
    uint32_t n_vocab = 1 + (uint32_t)(data[1] | data[2] << 8);
    fuzz_unlink("tokenizer.model");
    fuzz_file(name, data + 3, size - 3);
    char err[512];
    cv_vocab v;
    uint32_t unk = 0;
    if (cv_hf_vocab(fuzz_dir(), n_vocab, &v, &unk, err, sizeof err) != 0) {
        fuzz_refused(err, fuzz_dir());
    } else {
        FUZZ_ASSERT(v.n == n_vocab && unk < n_vocab);
        for (uint32_t i = 0; i < v.n; i++)
            FUZZ_ASSERT(v.tokens[i] && v.types[i] >= TOK_NORMAL && v.types[i] <= TOK_BYTE);
    }
    cv_vocab_free(&v);
    return 0;
}

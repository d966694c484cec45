/* The loader's checks as one call (common/model_check.h), and the model's
 * tokenizer checked against its embedding. */
#include "model_check.h"

#include <stdio.h>

#include "model.h"
#include "tokenizer.h"

hc_tokenizer *hc_model_tokenizer(const hc_model *m, char *err, size_t errlen)
{
    hc_tokenizer *tok = hc_tokenizer_load(m->file, err, errlen);
    if (tok && hc_tokenizer_n_vocab(tok) != m->hp.n_vocab) {
        snprintf(err, errlen, "%s: the vocabulary has %d tokens but token_embd.weight has %d rows", m->path,
                 hc_tokenizer_n_vocab(tok), m->hp.n_vocab);
        hc_tokenizer_free(tok);
        tok = NULL;
    }
    return tok;
}

int hc_model_check(const char *path, char *err, size_t errlen)
{
    hc_model *m = hc_model_open(path, err, errlen);
    if (!m) return -1;
    hc_tokenizer *tok = hc_model_tokenizer(m, err, errlen);
    hc_tokenizer_free(tok);
    hc_model_free(m);
    return tok ? 0 : -1;
}

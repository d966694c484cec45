/* Whether hc-run would accept a model, for the programs that read a model
 * without running it (hc-solve, hc-quantize, hc-profile import-powerinfer):
 * hyperparameters, every tensor's presence, shape and type, GPTQ companions,
 * tokenizer data and special token ids, vocabulary size against
 * token_embd.weight. Implemented by the runtime's loader (runtime/model_check.c)
 * so there is one set of rules: a program accepts a model exactly when
 * hc-run does. Declared here so that a program whose folder may include
 * only common/ (the solver) can call it; such a program links libhc_runtime. */
#ifndef HC_MODEL_CHECK_H
#define HC_MODEL_CHECK_H

#include <stddef.h>

/* 0, or -1 with one line "PATH: what is wrong" in err. Reads the header and
 * what the loader reads (norms, GPTQ companions), not every weight. */
int hc_model_check(const char *path, char *err, size_t errlen);

#endif

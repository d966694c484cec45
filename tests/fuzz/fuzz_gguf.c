/* GGUF and PWRI files (common/gguf.c) over memory, then what every program
 * reads from an accepted file: typed getters and the tokenizer's vocab. */
#include "fuzz.h"

#include <stdlib.h>

#include "gguf.h"
#include "tokenizer.h"

static int inside(const gguf_file *f, const void *p, uint64_t n)
{
    const uint8_t *q = p;
    return q >= f->base && q <= f->base + f->size && n <= (uint64_t)(f->base + f->size - q);
}

FUZZ_TARGET(fuzz_gguf)
{
    char err[512];
    gguf_file *f = gguf_open_mem(data, size, "fuzz.gguf", err, sizeof err);
    if (!f) {
        fuzz_refused(err, "fuzz.gguf");
        return 0;
    }
    FUZZ_ASSERT(f->base == data && f->size == size);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        FUZZ_ASSERT(kv->type < GGUF_TYPE_COUNT && (kv->type == GGUF_TYPE_ARRAY || kv->n == 1));
        uint32_t et = kv->type == GGUF_TYPE_ARRAY ? kv->arr_type : kv->type;
        if (et == GGUF_TYPE_STRING) {
            for (uint64_t j = 0; j < kv->n; j++) FUZZ_ASSERT(inside(f, kv->strs[j].ptr, kv->strs[j].len));
        } else {
            FUZZ_ASSERT(gguf_vtype_size(et) > 0);
            FUZZ_ASSERT(inside(f, kv->data, kv->n * gguf_vtype_size(et)));
            for (uint64_t j = 0; j < kv->n; j++) (void)gguf_kv_num(kv, j);
        }
        FUZZ_ASSERT(gguf_find_kv(f, kv->key) >= 0);
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        FUZZ_ASSERT(t->n_dims <= GGUF_MAX_DIMS && ggml_type_name(t->type));
        uint64_t rows = (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
        FUZZ_ASSERT(t->nbytes == rows * ggml_row_size(t->type, t->ne[0]));
        FUZZ_ASSERT(inside(f, t->data, t->nbytes));
        FUZZ_ASSERT(gguf_get_tensor(f, t->name) == &f->tensors[gguf_find_tensor(f, t->name)]);
    }
    char *s = NULL;
    if (gguf_get_str(f, "general.architecture", &s) == 0) free(s);
    int64_t v;
    (void)gguf_get_int(f, "llama.block_count", &v);
    hc_tokenizer *tok = hc_tokenizer_load(f, err, sizeof err);
    if (tok) hc_tokenizer_free(tok);
    else fuzz_refused(err, NULL);
    gguf_close(f);
    return 0;
}

/* Model loading (runtime/model.c, runtime/model_check.c): GGUF bytes through
 * everything hc_model_load validates (hyperparameters, tensor shapes and
 * types, PWRI predictors, GPTQ companions) and the tokenizer checked against
 * the embedding; an accepted model's weights must lie inside the file. */
#include "fuzz.h"

#include "model.h"

static int inside(const gguf_file *f, const hc_weight *w)
{
    if (w->kind != HC_WEIGHT_GGML) return 1;
    const uint8_t *p = w->data;
    uint64_t n = hc_weight_bytes(w);
    return p >= f->base && p <= f->base + f->size && n <= (uint64_t)(f->base + f->size - p);
}

FUZZ_TARGET(fuzz_model)
{
    char err[512];
    const char *path = fuzz_file("fuzz.gguf", data, size);
    hc_model *m = hc_model_open(path, err, sizeof err);
    if (!m) {
        fuzz_refused(err, path);
        return 0;
    }
    const hc_hparams *hp = &m->hp;
    FUZZ_ASSERT(hp->n_layer > 0 && hp->n_embd > 0 && hp->n_ff > 0 && hp->n_vocab > 0);
    FUZZ_ASSERT(hp->head_dim * hp->n_head == hp->n_embd && hp->n_head % hp->n_head_kv == 0);
    FUZZ_ASSERT(inside(m->file, &m->token_embd) && inside(m->file, &m->output));
    FUZZ_ASSERT(m->token_embd.rows == hp->n_vocab && m->token_embd.n == hp->n_embd);
    for (int l = 0; l < hp->n_layer; l++) {
        const hc_layer *ly = &m->layers[l];
        const hc_weight *ws[] = { &ly->attn_q, &ly->attn_k, &ly->attn_v, &ly->attn_output, &ly->ffn_gate,
                                  &ly->ffn_up, &ly->ffn_down, &ly->ffn_down_t, &ly->fc1, &ly->fc2 };
        for (size_t k = 0; k < sizeof ws / sizeof *ws; k++) FUZZ_ASSERT(inside(m->file, ws[k]));
        FUZZ_ASSERT(ly->ffn_gate.rows == hp->n_ff && ly->ffn_up.rows == hp->n_ff);
        FUZZ_ASSERT(ly->ffn_down.kind != HC_WEIGHT_NONE || ly->ffn_down_t.kind != HC_WEIGHT_NONE);
        FUZZ_ASSERT((ly->fc1.kind == HC_WEIGHT_NONE) == (ly->fc2.kind == HC_WEIGHT_NONE));
    }
    hc_tokenizer *tok = hc_model_tokenizer(m, err, sizeof err);
    if (tok) {
        FUZZ_ASSERT(hc_tokenizer_n_vocab(tok) == hp->n_vocab);
        FUZZ_ASSERT(hc_tokenizer_bos(tok) < hp->n_vocab && hc_tokenizer_eos(tok) < hp->n_vocab);
        hc_tokenizer_free(tok);
    } else {
        fuzz_refused(err, path);
    }
    hc_model_free(m);
    return 0;
}

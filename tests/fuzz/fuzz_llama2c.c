/* llama2.c checkpoints and tokenizer.bin (gguf-tools/convert_llama2c.c; its
 * readers are static, so the converter is compiled into this target).
 * Byte 0 bit 0: 0 = checkpoint (legacy or version 1), 1 = tokenizer.bin for
 * a vocab of 1 + bytes 1-2 tokens. */
#include "fuzz.h"

#include "../../gguf-tools/convert_llama2c.c"

static void layout(const char *path)
{
    char err[512];
    hc_map m;
    if (hc_map_open(&m, path, err, sizeof err) != 0) {
        fuzz_refused(err, path);
        return;
    }
    l2c_config c;
    l2c_weights w;
    int shared, died;
    FUZZ_TRY(died, l2c_layout(path, &m, &c, &shared, &w));
    if (!died) {
        /* every array the converter will read lies inside the file */
        const uint64_t L = (uint64_t)c.n_layers, d = (uint64_t)c.dim, h = (uint64_t)c.hidden;
        const struct { const float *p; uint64_t n; } a[] = {
            {w.emb, (uint64_t)c.vocab * d}, {w.wcls, (uint64_t)c.vocab * d}, {w.final_norm, d},
            {w.att_norm, L * d}, {w.ffn_norm, L * d}, {w.wq, L * d * d}, {w.wo, L * d * d},
            {w.w1, L * h * d}, {w.w2, L * h * d}, {w.w3, L * h * d},
        };
        for (size_t i = 0; i < sizeof a / sizeof *a; i++)
            FUZZ_ASSERT((const uint8_t *)a[i].p >= m.data && (const uint8_t *)(a[i].p + a[i].n) <= m.data + m.size);
    }
    hc_map_close(&m);
}

FUZZ_TARGET(fuzz_llama2c)
{
    if (size < 3) return 0;
    const char *path = fuzz_file("x.bin", data + 3, size - 3);
    if (!(data[0] & 1)) {
        layout(path);
        return 0;
    }
    static cv_vocab v;     /* static: survives an hc_die longjmp unclobbered */
    int died;
    memset(&v, 0, sizeof v);
    FUZZ_TRY(died, l2c_vocab(path, 1 + (uint32_t)(data[1] | data[2] << 8), &v));
    if (!died)
        for (uint32_t i = 0; i < v.n; i++) FUZZ_ASSERT(v.tokens[i] != NULL);
    cv_vocab_free(&v);
    return 0;
}

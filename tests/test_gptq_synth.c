/* The perplexity bar on a synthetic model (hc-convert synth): GPTQ 4-bit
 * below round-to-nearest at the same group size on held-out text. A random
 * model predicts nothing about English, so the texts are its own samples
 * (hc-run, temperature 1, seeds 1..30 to calibrate, 101..130 to evaluate),
 * with a byte-level vocabulary (259 tokens) so they tokenize back to the
 * sampled tokens, and output_norm scaled ×8 so its predictions are sharp
 * enough for 4-bit errors to move the perplexity beyond sampling noise. */
#include <stdlib.h>
#include <string.h>
#include "gguf.h"
#include "harness.h"

/* Copy of in with output_norm.weight (F32) multiplied by s. */
static int sharpen(const char *in, const char *out, float s)
{
    char err[256];
    gguf_file *f = gguf_open(in, err, sizeof err);
    if (!f) return -1;
    gguf_writer *w = gguf_writer_new(f->variant);
    float *norm = NULL;
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_set_kv(w, &f->kv[i]);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const void *data = t->data;
        if (!strcmp(t->name, "output_norm.weight") && t->type == GGML_TYPE_F32) {
            norm = malloc(t->nbytes);
            memcpy(norm, t->data, t->nbytes);
            for (size_t k = 0; k < t->nbytes / sizeof *norm; k++) norm[k] *= s;
            data = norm;
        }
        gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, data);
    }
    int rc = norm ? gguf_writer_write(w, out, err, sizeof err) : -1;
    gguf_writer_free(w);
    free(norm);
    gguf_close(f);
    return rc;
}

static int samples(const char *model, int seed0, const char *out)
{
    return th_sh("for s in $(seq %d %d); do '%s' -m '%s' -p '' -n 1000 --temp 1 --seed $s -t 2; done > '%s'",
                 seed0, seed0 + 29, th_bin("hc-run"), model, out);
}

static double ppl(const char *model, const char *text)
{
    if (th_sh("'%s' -m '%s' --perplexity '%s' -c 128 -t 2", th_bin("hc-run"), model, text) != 0) return -1;
    const char *p = strstr(th_last_out(), "perplexity: ");
    return p ? atof(p + 12) : -1;
}

static void test_synth_gptq_beats_rtn(void)
{
    const char *raw = th_tmp("raw.gguf"), *m = th_tmp("m.gguf"), *calib = th_tmp("calib.txt"), *eval = th_tmp("eval.txt");
    CHECK(th_sh("'%s' synth -o '%s' --dim 128 --n-ff 320 --layers 2 --heads 4 --kv-heads 2 --vocab 259 --ctx 512 --seed 7",
                th_bin("hc-convert"), raw) == 0);
    CHECK(sharpen(raw, m, 8.0f) == 0);
    CHECK(samples(m, 1, calib) == 0 && samples(m, 101, eval) == 0);
    const char *g = th_tmp("g.gguf"), *r = th_tmp("r.gguf");
    CHECK(th_sh("'%s' -q '%s' '%s' GPTQ --calib '%s' --ctx 128 -t 2", th_bin("hc-quantize"), m, g, calib) == 0);
    CHECK(th_sh("'%s' -q '%s' '%s' GPTQ --calib '%s' --ctx 128 -t 2 --rtn", th_bin("hc-quantize"), m, r, calib) == 0);
    double p_f = ppl(m, eval), p_g = ppl(g, eval), p_r = ppl(r, eval);
    CHECKF(p_f > 0 && p_g > 0 && p_r > 0, "perplexity runs failed: %s", th_last_err());
    CHECKF(p_g < p_r, "GPTQ %.4f vs RTN %.4f (float %.4f)", p_g, p_r, p_f);
}

int main(void)
{
    RUN(test_synth_gptq_beats_rtn);
    return th_done();
}

/* A Hugging Face config.json (gguf-tools/convert_hf_config.c: hf_read_config,
 * compiled into this target; then cv_check_hparams, as hc-convert hf does). */
#include "fuzz.h"

#include "../../gguf-tools/convert_hf_config.c"

FUZZ_TARGET(fuzz_hfconfig)
{
    fuzz_file("config.json", data, size);
    hf_config c = {0};
    int died;
    FUZZ_TRY(died, hf_read_config(fuzz_dir(), &c));
    char err[512];
    if (died) return 0;
    if (cv_check_hparams(&c.hp, err, sizeof err) != 0) fuzz_refused(err, NULL);
    else
        FUZZ_ASSERT(c.hp.n_embd > 0 && c.hp.n_ff > 0 && c.hp.n_layer > 0 && c.hp.n_head > 0 && c.hp.n_vocab > 0 &&
                    c.hp.n_embd <= (1u << 20) && c.hp.n_layer <= 4096);
    return 0;
}

/* hc-convert: training-world checkpoints (llama2.c, Hugging Face, PowerInfer
 * predictors) and synthetic models -> GGUF. Each subcommand lives in its own
 * convert_*.c file; this only dispatches. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "convert.h"

static const char usage[] =
    "usage: hc-convert COMMAND [options]   (hc-convert COMMAND --help for details)\n"
    "\n"
    "  llama2c CHECKPOINT.bin TOKENIZER.bin -o OUT.gguf [--ctx N]\n"
    "        llama2.c checkpoint (legacy or version 1) -> llama GGUF\n"
    "  hf DIR -o OUT.gguf [--outtype f32|f16|bf16] [--predictors DIR]\n"
    "        Hugging Face LLaMA directory (safetensors) -> llama GGUF; with\n"
    "        --predictors, PowerInfer's sparse GGUF (PWRI) with predictor tensors\n"
    "  synth -o OUT.gguf [--dim N --n-ff N --layers N --heads N --kv-heads N --vocab N\n"
    "        --ctx N --act relu|silu --type f32|f16 --seed N --hot-fraction F --hot-skew S]\n"
    "        random well-formed llama GGUF, optionally with a planted hot-neuron set\n"
    "\n"
    "  -h, --help   this help\n"
    "  --version    print the version\n";

int main(int argc, char **argv)
{
    hc_prog = "hc-convert";
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2;
    }
    if (!strcmp(argv[1], "--version")) hc_version();
    if (!strcmp(argv[1], "llama2c")) return convert_llama2c_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "hf")) return convert_hf_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "synth")) return convert_synth_main(argc - 1, argv + 1);
    hc_die("unknown command '%s' (llama2c, hf or synth; see --help)", argv[1]);
}

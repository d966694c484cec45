/* Which type each tensor gets and in what order they are written: the rules
 * of llama-quantize (docs/hc-quantize.md, "Which tensors, which type"), except that
 * rows no block type fits are kept 16-bit instead of aborting, and the
 * Q6_K that llama.cpp gives output.weight is Q8_0 here (no Q6_K). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quantize.h"

int hc_ftype_of(uint32_t type)
{
    switch (type) {
    case GGML_TYPE_F32:  return 0;
    case GGML_TYPE_F16:  return 1;
    case GGML_TYPE_Q4_0: return 2;
    case GGML_TYPE_Q4_1: return 3;
    case GGML_TYPE_Q8_0: return 7;
    case GGML_TYPE_BF16: return 32;
    default:             return -1;
    }
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int hc_quant_eligible(const char *name, uint32_t n_dims)
{
    /* llama_model_quantize_impl: tensors it never quantizes */
    static const char *const never_in[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ssm_conv1d.weight", "time_mix_first.weight",
        "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
    };
    if (n_dims < 2 || !ends_with(name, "weight"))
        return 0;
    if (strcmp(name, "position_embd.weight") == 0 || strcmp(name, "token_types.weight") == 0)
        return 0;
    for (size_t i = 0; i < sizeof never_in / sizeof never_in[0]; i++)
        if (strstr(name, never_in[i]))
            return 0;
    return 1;
}

/* Layer of "blk.N.*" as sscanf("blk.%d.") reads it, -1 for other names. */
static long layer_of(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0)
        return -1;
    char *end;
    long n = strtol(name + 4, &end, 10);
    return end == name + 4 ? -1 : n;
}

int hc_tensor_order(const char *a, const char *b)
{
    long la = layer_of(a), lb = layer_of(b);
    if (la != lb)
        return la < lb ? -1 : 1;
    return strcmp(a, b);
}

static int cmp_items(const void *pa, const void *pb)
{
    const hc_quant_item *a = pa, *b = pb;
    return hc_tensor_order(a->t->name, b->t->name);
}

/* Output type of an eligible tensor before shape checks. */
static uint32_t wanted_type(const gguf_file *f, const gguf_tensor *t, const hc_quant_opts *o)
{
    const int is_output = strcmp(t->name, "output.weight") == 0;
    const int is_embd = strcmp(t->name, "token_embd.weight") == 0;
    uint32_t type = o->type;
    /* llama.cpp: the classifier (or the tied embedding) gets Q6_K, or Q8_0
     * where Q6_K does not fit; we have no Q6_K and always take Q8_0. */
    if (!o->pure && ggml_blck_size(o->type) > 1 &&
        (is_output || (is_embd && gguf_find_tensor(f, "output.weight") < 0)))
        type = GGML_TYPE_Q8_0;
    if (is_embd && o->token_embd_type != HC_TYPE_DEFAULT)
        type = o->token_embd_type;
    if (is_output && o->output_type != HC_TYPE_DEFAULT)
        type = o->output_type;
    /* PowerInfer's CPU down kernel reads every type but Q4_0 as F16 */
    if (o->powerinfer && ends_with(t->name, ".ffn_down_t.weight") && type != GGML_TYPE_Q4_0)
        type = GGML_TYPE_F16;
    return type;
}

hc_quant_item *hc_quant_plan(const gguf_file *f, const hc_quant_opts *o, const hc_tensor_hook *hook,
                             char *err, size_t errlen)
{
    hc_quant_item *items = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *items);
    if (!items) {
        snprintf(err, errlen, "%s: out of memory", o->in);
        return NULL;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        hc_quant_item *it = &items[i];
        const gguf_tensor *t = &f->tensors[i];
        it->t = t;
        it->type = t->type;
        if (!hc_quant_eligible(t->name, t->n_dims))
            continue;
        uint32_t type = wanted_type(f, t, o);
        if (t->ne[0] % ggml_blck_size(type)) {
            /* rows no block fits: the closest 16-bit type instead of failing */
            type = t->type == GGML_TYPE_BF16 ? GGML_TYPE_BF16 : GGML_TYPE_F16;
            it->fallback = 1;
        }
        if (type != t->type && ggml_blck_size(t->type) > 1 && !o->allow_requantize) {
            snprintf(err, errlen, "%s: tensor '%s' is %s already: requantizing needs --allow-requantize",
                     o->in, t->name, ggml_type_name(t->type));
            free(items);
            return NULL;
        }
        const int hooked = hook && ggml_blck_size(type) > 1;
        if (type != t->type && !hooked && !hc_can_convert(t->type, type)) {
            snprintf(err, errlen, "%s: tensor '%s': cannot convert %s to %s", o->in, t->name,
                     ggml_type_name(t->type), ggml_type_name(type));
            free(items);
            return NULL;
        }
        it->type = type;
    }
    qsort(items, f->n_tensors, sizeof *items, cmp_items);
    return items;
}

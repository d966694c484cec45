/* hc-quantize's model pipeline: which type each tensor gets (quantize_plan.c),
 * row conversion over threads (quantize_rows.c), and the whole-file pass
 * (quantize_model.c). Rules: docs/hc-quantize.md, "Which tensors, which type". */
#ifndef HC_QUANTIZE_H
#define HC_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>
#include "gguf.h"

#define HC_TYPE_DEFAULT UINT32_MAX   /* "no override" for the per-tensor options */

typedef struct {
    const char *in, *out;
    uint32_t type;            /* target: F32, F16, BF16, Q8_0 or Q4_0 (Q4_1 through a hook) */
    int nthreads;
    int allow_requantize;
    int pure;                 /* no mixture rules */
    uint32_t output_type;     /* --output-tensor-type, or HC_TYPE_DEFAULT */
    uint32_t token_embd_type; /* --token-embedding-type, or HC_TYPE_DEFAULT */
    int powerinfer;           /* --powerinfer: ffn_down_t only F16 or Q4_0 (what PowerInfer runs) */
    int quiet;
} hc_quant_opts;

/* Options of TYPE GPTQ, parsed by hc-quantize's main and handed to
 * hc_gptq_quantize() (declared in gptq.h by the GPTQ code, which then calls
 * hc_quantize_model with its hook). */
typedef struct {
    const char *calib;        /* --calib FILE: calibration text */
    int group_size;           /* --group-size; 0: 128 native, 32 with --export */
    int act_order;            /* --act-order */
    int sym;                  /* --sym (1) or --asym (0); -1: unset (asym, or what --export implies) */
    float damp;               /* --damp, fraction of the mean Hessian diagonal, default 0.01 */
    int calib_tokens;         /* --calib-tokens, default 4096 */
    int ctx;                  /* --ctx, tokens per calibration sequence, default 256 */
    uint32_t export_type;     /* --export q4_0 | q4_1; HC_TYPE_DEFAULT: the native GPTQ layout */
    int rtn;                  /* --rtn: round to nearest on the same grid (the baseline) */
} hc_gptq_opts;

/* ------------------------------------------------------------ planning */

typedef struct {
    const gguf_tensor *t;     /* in the input */
    uint32_t type;            /* output type */
    int fallback;             /* wanted a block type its rows do not fit: kept 16-bit */
} hc_quant_item;

/* llama.cpp's general.file_type (LLAMA_FTYPE) of a target type, or -1. */
int hc_ftype_of(uint32_t type);
/* Would llama-quantize quantize a tensor of this name and rank at all? */
int hc_quant_eligible(const char *name, uint32_t n_dims);
/* Output order (llama.cpp's weight_name_comparer): tensors outside "blk.N."
 * first, then by layer number, then by name (bytewise). */
int hc_tensor_order(const char *a, const char *b);
/* One item per input tensor, in output order, with its output type.
 * NULL with a message when a tensor cannot be converted (requantization
 * refused, unsupported source type). With a hook (below), block targets are
 * the hook's business and not checked here. */
typedef struct hc_tensor_hook hc_tensor_hook;
hc_quant_item *hc_quant_plan(const gguf_file *f, const hc_quant_opts *o, const hc_tensor_hook *hook,
                             char *err, size_t errlen);

/* ---------------------------------------------------------- conversion */

/* Can rows of src_type be turned into dst_type (F32/F16/BF16, Q8_0/Q4_0/Q4_1
 * sources; F32/F16/BF16/Q8_0/Q4_0 targets)? */
int hc_can_convert(uint32_t src_type, uint32_t dst_type);
/* Convert nrows rows of n elements using nthreads threads; the bytes do not
 * depend on nthreads. */
void hc_convert_rows(uint32_t src_type, const void *src, uint32_t dst_type, void *dst,
                     int64_t nrows, int64_t n, int nthreads);
/* Index of the first element (or block) whose value (or scale) is not finite
 * in nbytes of data of type, or -1. ggml_validate_row_data refuses those. */
int64_t hc_first_nonfinite(uint32_t type, const void *data, size_t nbytes);

/* -------------------------------------------------------- whole model */

/* A tensor converter that replaces row conversion for every tensor whose
 * output type is a block type (GPTQ plugs in here; for types it does not
 * handle, such as output.weight's Q8_0, it calls hc_convert_rows): write the
 * tensor's output bytes (ggml_row_size(type, ne[0]) * rows) to dst.
 * 0, or -1 with a one-line message "FILE: what is wrong". */
struct hc_tensor_hook {
    void *ctx;
    int (*quantize)(void *ctx, const gguf_tensor *t, uint32_t type, void *dst,
                    char *err, size_t errlen);
    /* Optional: add KVs after general.file_type (GPTQ's provenance). */
    void (*add_kvs)(void *ctx, gguf_writer *w);
};

/* Read o->in, write o->out atomically. hook may be NULL. Returns 0, or -1
 * with a one-line message "FILE: what is wrong" in err and no output file. */
int hc_quantize_model(const hc_quant_opts *o, const hc_tensor_hook *hook, char *err, size_t errlen);

#endif

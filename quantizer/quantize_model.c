/* One pass over a model: plan the types, copy the KVs (then set
 * general.quantization_version and general.file_type as llama-quantize),
 * and stream every tensor through the atomic writer in llama.cpp's order,
 * converting in chunks of rows so memory stays small whatever the model. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "cli.h"
#include "quantize.h"

#define CHUNK_BYTES (8u << 20)   /* output bytes converted per step */

static const char *lower_name(uint32_t type, char buf[16])
{
    const char *n = ggml_type_name(type);
    size_t i = 0;
    for (; n && n[i] && i < 15; i++)
        buf[i] = (char)tolower((unsigned char)n[i]);
    buf[i] = 0;
    return buf;
}

static double mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* Row of the first non-finite result, for the message; -1 if all finite. */
static int64_t bad_row(uint32_t type, const void *data, size_t nbytes, int64_t ne0)
{
    int64_t i = hc_first_nonfinite(type, data, nbytes);
    return i < 0 ? -1 : i / (ne0 / ggml_blck_size(type));
}

typedef struct {
    const hc_quant_opts *o;
    const hc_tensor_hook *hook;
    gguf_writer *w;
    uint8_t *buf;            /* CHUNK_BYTES, or a whole tensor for the hook */
    size_t buf_size;
    char *err;
    size_t errlen;
} run;

static int grow(run *r, size_t n)
{
    if (n <= r->buf_size) return 0;
    uint8_t *p = realloc(r->buf, n);
    if (!p) {
        snprintf(r->err, r->errlen, "%s: out of memory (%zu bytes)", r->o->out, n);
        return -1;
    }
    r->buf = p;
    r->buf_size = n;
    return 0;
}

static int nonfinite_error(run *r, const hc_quant_item *it, int64_t row)
{
    snprintf(r->err, r->errlen, "%s: tensor '%s': row %lld has values that are not finite after conversion to %s",
             r->o->in, it->t->name, (long long)row, ggml_type_name(it->type));
    return -1;
}

/* Convert one tensor and stream its bytes. */
static int convert_tensor(run *r, const hc_quant_item *it)
{
    const gguf_tensor *t = it->t;
    const int64_t ne0 = t->ne[0], nrows = t->ne[1] * t->ne[2] * t->ne[3];
    const size_t src_row = ggml_row_size(t->type, ne0), dst_row = ggml_row_size(it->type, ne0);
    if (nrows == 0 || ne0 == 0)
        return 0;   /* an empty tensor has no bytes */
    if (r->hook && ggml_blck_size(it->type) > 1) {
        const size_t n = dst_row * (size_t)nrows;
        if (grow(r, n) != 0) return -1;
        if (r->hook->quantize(r->hook->ctx, t, it->type, r->buf, r->err, r->errlen) != 0) return -1;
        int64_t row = bad_row(it->type, r->buf, n, ne0);
        if (row >= 0) return nonfinite_error(r, it, row);
        return gguf_writer_write_data(r->w, r->buf, n, r->err, r->errlen);
    }
    const int64_t step = dst_row >= CHUNK_BYTES ? 1 : (int64_t)(CHUNK_BYTES / dst_row);
    if (grow(r, dst_row * (size_t)(step < nrows ? step : nrows)) != 0) return -1;
    for (int64_t r0 = 0; r0 < nrows; r0 += step) {
        const int64_t n = nrows - r0 < step ? nrows - r0 : step;
        hc_convert_rows(t->type, (const uint8_t *)t->data + (size_t)r0 * src_row, it->type, r->buf,
                        n, ne0, r->o->nthreads);
        int64_t row = bad_row(it->type, r->buf, dst_row * (size_t)n, ne0);
        if (row >= 0) return nonfinite_error(r, it, r0 + row);
        if (gguf_writer_write_data(r->w, r->buf, dst_row * (size_t)n, r->err, r->errlen) != 0) return -1;
    }
    return 0;
}

/* The writer with every KV and tensor declared, in output order. */
static gguf_writer *declare(const gguf_file *f, const hc_quant_opts *o, const hc_tensor_hook *hook,
                            const hc_quant_item *items, char *err, size_t errlen)
{
    gguf_writer *w = gguf_writer_new(f->variant);   /* a PWRI input stays PWRI */
    for (uint64_t i = 0; i < f->n_kv; i++)
        gguf_set_kv(w, &f->kv[i]);
    /* llama.cpp sets these after the copy, which moves them to the end */
    gguf_remove_key(w, "general.quantization_version");
    gguf_remove_key(w, "general.file_type");
    gguf_set_u32(w, "general.quantization_version", 2);
    gguf_set_u32(w, "general.file_type", (uint32_t)hc_ftype_of(o->type));
    if (hook && hook->add_kvs)
        hook->add_kvs(hook->ctx, w);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        gguf_add_tensor(w, items[i].t->name, items[i].type, items[i].t->n_dims, items[i].t->ne, NULL);
    if (gguf_writer_error(w)[0]) {
        snprintf(err, errlen, "%s: %s", o->out, gguf_writer_error(w));
        gguf_writer_free(w);
        return NULL;
    }
    return w;
}

/* A PWRI file PowerInfer would misrun (docs/formats.md, "Which files run
 * where"): one line, with the compatible choice. */
static void warn_powerinfer(const hc_quant_opts *o, const gguf_file *f, const hc_quant_item *items)
{
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        size_t n = strlen(items[i].t->name), k = strlen(".ffn_down_t.weight");
        if (n < k || strcmp(items[i].t->name + n - k, ".ffn_down_t.weight")) continue;
        uint32_t t = items[i].type;
        if (t == GGML_TYPE_Q4_0)
            hc_warn("%s: PowerInfer's Q4_0 down kernel rounds the activations to 8 bits: its text diverges from "
                    "hc-run's", o->out);
        else if (t != GGML_TYPE_F16)
            hc_warn("%s: PowerInfer reads every ffn_down_t type but Q4_0 as F16 without a check, so it would print "
                    "garbage with %s ffn_down_t; --powerinfer keeps them F16", o->out, ggml_type_name(t));
        return;
    }
}

int hc_quantize_model(const hc_quant_opts *o, const hc_tensor_hook *hook, char *err, size_t errlen)
{
    const double t0 = hc_now();
    gguf_file *f = gguf_open(o->in, err, errlen);
    if (!f) return -1;
    /* one sequential pass over the input */
    posix_madvise((void *)f->base, f->size, POSIX_MADV_SEQUENTIAL);
    hc_quant_item *items = hc_quant_plan(f, o, hook, err, errlen);
    gguf_writer *w = items ? declare(f, o, hook, items, err, errlen) : NULL;
    if (w && f->variant == GGUF_VARIANT_PWRI) warn_powerinfer(o, f, items);
    run r = { o, hook, w, NULL, 0, err, errlen };
    int rc = w ? gguf_writer_begin(w, o->out, err, errlen) : -1;
    if (rc == 0 && !o->quiet)
        printf("hc-quantize: quantizing '%s' to '%s' as %s using %d threads\n", o->in, o->out,
               ggml_type_name(o->type), o->nthreads);
    uint64_t in_bytes = 0, out_bytes = 0, n_fallback = 0;
    int mid_line = 0;   /* a progress line is half printed */
    for (uint64_t i = 0; rc == 0 && i < f->n_tensors; i++) {
        const hc_quant_item *it = &items[i];
        const gguf_tensor *t = it->t;
        const uint64_t out_n = ggml_row_size(it->type, t->ne[0]) * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        char a[16], b[16];
        if (!o->quiet)
            printf("[%4llu/%4llu] %36s - [%5lld, %5lld, %5lld, %5lld], type = %6s, ",
                   (unsigned long long)i + 1, (unsigned long long)f->n_tensors, t->name, (long long)t->ne[0],
                   (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], lower_name(t->type, a));
        mid_line = !o->quiet;
        if (it->type == t->type)
            rc = gguf_writer_write_data(w, t->data, t->nbytes, err, errlen);
        else
            rc = convert_tensor(&r, it);
        in_bytes += t->nbytes;
        out_bytes += out_n;
        n_fallback += it->fallback;
        if (o->quiet || rc != 0)
            continue;
        if (it->fallback)
            printf("rows of %lld are not a multiple of 32: %s %s .. ", (long long)t->ne[0],
                   it->type == t->type ? "kept" : "converting to", lower_name(it->type, b));
        else if (it->type != t->type)
            printf("converting to %s .. ", lower_name(it->type, b));
        if (it->type == t->type)
            printf("size = %8.3f MiB\n", mib(t->nbytes));
        else
            printf("size = %8.2f MiB -> %8.2f MiB\n", mib(t->nbytes), mib(out_n));
        mid_line = 0;
        fflush(stdout);
    }
    if (rc == 0)
        rc = gguf_writer_finish(w, err, errlen);
    if (rc == 0 && !o->quiet) {
        const double dt = hc_now() - t0;
        printf("hc-quantize: model size = %8.2f MiB\n", mib(in_bytes));
        printf("hc-quantize: quant size = %8.2f MiB\n", mib(out_bytes));
        if (n_fallback)
            printf("hc-quantize: %llu tensors kept 16-bit: their rows are not a multiple of 32\n",
                   (unsigned long long)n_fallback);
        printf("hc-quantize: total time = %8.2f ms (%.1f MB/s of input)\n", dt * 1e3,
               dt > 0 ? (double)in_bytes / dt / 1e6 : 0.0);
    }
    if (mid_line)
        printf("\n");   /* end a half-printed progress line before the error */
    free(r.buf);
    gguf_writer_free(w);
    free(items);
    gguf_close(f);
    return rc;
}

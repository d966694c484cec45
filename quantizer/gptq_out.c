/* hc-quantize's TYPE GPTQ: check the options, calibrate and quantize
 * (gptq_calib.c), then write either
 *  - the native layout: each block linear `<name>` replaced by companion
 *    tensors `<name>.qweight/.scales/.qzeros[/.g_idx]` in standard GGUF types
 *    (docs/formats.md, "INT4-GPTQ tensors"), every other tensor copied as
 *    is, and the `hotcold.gptq.*` KVs; or
 *  - with --export q4_0|q4_1, standard ggml blocks under the normal names
 *    through hc_quantize_model (llama-quantize's tensor rules), the GPTQ
 *    codes written as they are (docs/design/gptq.md, "Export grids"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "atomic_file.h"
#include "cli.h"
#include "gptq.h"

/* GPTQ-side defaults for the options hc-quantize leaves unset. */
#define EXPORT_GROUP 32

static const gptq_result *find_result(const gptq_run *run, const char *name)
{
    for (int i = 0; i < run->n_res; i++)
        if (strcmp(run->res[i].name, name) == 0) return &run->res[i];
    return NULL;
}

static void set_kvs(gguf_writer *w, const gptq_calib_opts *co, const gptq_run *run, uint32_t export_type)
{
    char hash[32];
    snprintf(hash, sizeof hash, "fnv1a64:%016llx", (unsigned long long)run->corpus_hash);
    gguf_set_str(w, "hotcold.gptq.method", co->rtn ? "rtn" : "gptq");
    gguf_set_u32(w, "hotcold.gptq.bits", 4);
    gguf_set_u32(w, "hotcold.gptq.group_size", (uint32_t)co->p.group_size);
    gguf_set_bool(w, "hotcold.gptq.sym", co->p.sym);
    gguf_set_bool(w, "hotcold.gptq.act_order", co->p.act_order);
    gguf_set_bool(w, "hotcold.gptq.static_groups", co->p.act_order);
    gguf_set_bool(w, "hotcold.gptq.true_sequential", 1);
    gguf_set_f32(w, "hotcold.gptq.damp", co->p.damp);
    if (export_type == HC_TYPE_DEFAULT)
        gguf_set_str(w, "hotcold.gptq.zero_format", "v2");
    else
        gguf_set_str(w, "hotcold.gptq.export", export_type == GGML_TYPE_Q4_0 ? "q4_0" : "q4_1");
    gguf_set_u32(w, "hotcold.gptq.calib_tokens", (uint32_t)run->tokens);
    gguf_set_u32(w, "hotcold.gptq.calib_ctx", (uint32_t)co->ctx);
    gguf_set_str(w, "hotcold.gptq.calib_hash", hash);
}

/* ------------------------------------------------------------ native */

/* Declare the companions of r (buffers appended to bufs, freed by the caller). */
static int add_companions(gguf_writer *w, const gptq_result *r, const gptq_calib_opts *co, void **bufs, int *nb)
{
    const int N = r->N, K = r->K, gs = co->p.group_size, G = gptq_groups(K, gs);
    int32_t *qw = malloc(sizeof *qw * (size_t)gptq_words(K) * N);
    int32_t *qz = malloc(sizeof *qz * (size_t)gptq_words(N) * G);
    uint16_t *sc = malloc(sizeof *sc * (size_t)G * N);
    uint8_t *z = malloc((size_t)G * N);
    int32_t *gi = co->p.act_order ? malloc(sizeof *gi * (size_t)K) : NULL;
    bufs[(*nb)++] = qw;
    bufs[(*nb)++] = qz;
    bufs[(*nb)++] = sc;
    bufs[(*nb)++] = gi;
    if (!qw || !qz || !sc || !z || (co->p.act_order && !gi)) {
        free(z);
        return -1;
    }
    for (size_t i = 0; i < (size_t)G * N; i++) {
        sc[i] = fp32_to_fp16(r->grids[i].d);   /* exact: d is an fp16 value */
        z[i] = (uint8_t)r->grids[i].zero;
    }
    gptq_pack_qweight(r->codes, N, K, qw);
    gptq_pack_qzeros(z, N, G, qz);
    free(z);
    char nm[GGUF_MAX_NAME + 16];
    const int64_t ne_qw[2] = { N, gptq_words(K) }, ne_sc[2] = { N, G }, ne_qz[2] = { gptq_words(N), G }, ne_gi[1] = { K };
#define ADD(sfx, type, nd, ne, data) (snprintf(nm, sizeof nm, "%s." sfx, r->name), gguf_add_tensor(w, nm, type, nd, ne, data))
    ADD("qweight", GGML_TYPE_I32, 2, ne_qw, qw);
    ADD("scales", GGML_TYPE_F16, 2, ne_sc, sc);
    ADD("qzeros", GGML_TYPE_I32, 2, ne_qz, qz);
    if (gi) {
        for (int k = 0; k < K; k++) gi[k] = k / gs;   /* static groups */
        ADD("g_idx", GGML_TYPE_I32, 1, ne_gi, gi);
    }
#undef ADD
    return 0;
}

static int write_native(const hc_quant_opts *o, const gptq_calib_opts *co, const gptq_run *run,
                        char *err, size_t errlen)
{
    gguf_file *f = gguf_open(o->in, err, errlen);
    if (!f) return -1;
    gguf_writer *w = gguf_writer_new(f->variant);
    void **bufs = calloc((size_t)run->n_res * 4 + 1, sizeof *bufs);
    int nb = 0, rc = -1;
    uint64_t out_bytes = 0;
    if (!bufs) {
        snprintf(err, errlen, "%s: out of memory", o->out);
        goto done;
    }
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_set_kv(w, &f->kv[i]);
    set_kvs(w, co, run, HC_TYPE_DEFAULT);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const gptq_result *r = find_result(run, t->name);
        if (!r) {
            gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
            out_bytes += t->nbytes;
        } else if (add_companions(w, r, co, bufs, &nb) != 0) {
            snprintf(err, errlen, "%s: out of memory", o->out);
            goto done;
        } else {
            const int G = gptq_groups(r->K, co->p.group_size);
            out_bytes += 4 * ((uint64_t)gptq_words(r->K) * r->N + (uint64_t)gptq_words(r->N) * G) +
                         2 * (uint64_t)G * r->N + (co->p.act_order ? 4 * (uint64_t)r->K : 0);
        }
    }
    if (gguf_writer_error(w)[0]) {
        snprintf(err, errlen, "%s: %s", o->out, gguf_writer_error(w));
        goto done;
    }
    rc = gguf_writer_write(w, o->out, err, errlen);
    if (rc == 0 && !o->quiet)
        printf("hc-quantize: wrote '%s': %d weights as INT4-GPTQ (group %d), %.2f MiB\n", o->out, run->n_res,
               co->p.group_size, (double)out_bytes / (1024.0 * 1024.0));
done:
    for (int i = 0; i < nb; i++) free(bufs[i]);
    free(bufs);
    gguf_writer_free(w);
    gguf_close(f);
    return rc;
}

/* ------------------------------------------------------------ export */

typedef struct {
    const gptq_calib_opts *co;
    const gptq_run *run;
    int nthreads;
    uint32_t export_type;
} export_ctx;

/* 32 codes and their grid -> one Q4_0 / Q4_1 block (ggml nibble order). */
static void put_block(uint32_t type, const uint8_t *q, const gptq_grid *g, void *dst)
{
    uint8_t *qs;
    if (type == GGML_TYPE_Q4_0) {
        block_q4_0 *b = dst;
        b->d = fp32_to_fp16(g->d);
        qs = b->qs;
    } else {
        block_q4_1 *b = dst;
        b->d = fp32_to_fp16(g->d);
        b->m = fp32_to_fp16(g->m);
        qs = b->qs;
    }
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
}

static int export_tensor(void *vctx, const gguf_tensor *t, uint32_t type, void *dst, char *err, size_t errlen)
{
    const export_ctx *x = vctx;
    const int64_t K = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    const size_t bsz = ggml_type_size(type);
    const gptq_result *r = find_result(x->run, t->name);
    if (r && type == x->export_type) {
        for (int64_t n = 0; n < rows; n++)
            for (int64_t b = 0; b < K / 32; b++)
                put_block(type, r->codes + (size_t)n * K + (size_t)b * 32, &r->grids[(size_t)b * rows + (size_t)n],
                          (char *)dst + ((size_t)n * (size_t)(K / 32) + (size_t)b) * bsz);
        return 0;
    }
    if (type != GGML_TYPE_Q4_1) {   /* Q8_0 / Q4_0 of the non-block tensors: ggml's quantizers */
        hc_convert_rows(t->type, t->data, type, dst, rows, K, x->nthreads);
        return 0;
    }
    /* Q4_1 for a tensor GPTQ did not see (token_embd): ggml's Q4_1 grid, round to nearest */
    float *row = malloc(sizeof(float) * (size_t)K);
    if (!row) {
        snprintf(err, errlen, "%s: out of memory", t->name);
        return -1;
    }
    const size_t src_row = ggml_row_size(t->type, K);
    for (int64_t n = 0; n < rows; n++) {
        hc_convert_rows(t->type, (const char *)t->data + (size_t)n * src_row, GGML_TYPE_F32, row, 1, K, 1);
        for (int64_t b = 0; b < K / 32; b++) {
            gptq_grid g;
            uint8_t q[32];
            gptq_find_params(row + b * 32, 32, 1, 1, 0, GPTQ_Q4_1, &g);
            for (int j = 0; j < 32; j++) q[j] = (uint8_t)gptq_code(&g, GPTQ_Q4_1, row[b * 32 + j]);
            put_block(type, q, &g, (char *)dst + ((size_t)n * (size_t)(K / 32) + (size_t)b) * bsz);
        }
    }
    free(row);
    return 0;
}

static void export_kvs(void *vctx, gguf_writer *w)
{
    const export_ctx *x = vctx;
    set_kvs(w, x->co, x->run, x->export_type);
}

/* ------------------------------------------------------------ entry */

/* The least the output can take: each tensor that may be quantized at its
 * size or at 4 bits an element, whichever is smaller (INT4-GPTQ's codes and
 * Q4_0 / Q4_1 blocks store more than 4 bits an element), the rest as they
 * are (the native layout quantizes only the blocks' matrices). Checked
 * before calibration, so a disk that cannot hold even that refuses in
 * milliseconds, not after the work; the exact size is reserved when the file
 * is written. */
static int check_room(const hc_quant_opts *o, int export, char *err, size_t errlen)
{
    gguf_file *f = gguf_open(o->in, err, errlen);
    if (!f) return -1;
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        uint64_t half = (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3] / 2;
        int may_shrink = t->n_dims == 2 && (export || strncmp(t->name, "blk.", 4) == 0);
        bytes += may_shrink && half < t->nbytes ? half : t->nbytes;
    }
    gguf_close(f);
    return af_check(o->out, bytes, err, errlen);
}

int hc_gptq_quantize(const hc_quant_opts *o, const hc_gptq_opts *g, char *err, size_t errlen)
{
    const int export = g->export_type != HC_TYPE_DEFAULT;
    gptq_calib_opts co = {
        .p = { .group_size = g->group_size ? g->group_size : export ? EXPORT_GROUP : GPTQ_NATIVE_GROUP,
               .sym = g->sym, .act_order = g->act_order, .damp = g->damp },
        .rtn = g->rtn, .calib_tokens = g->calib_tokens, .ctx = g->ctx, .nthreads = o->nthreads,
        .min_cols_multiple = export ? 32 : 1, .calib = g->calib, .quiet = o->quiet,
    };
    if (!g->calib) {
        snprintf(err, errlen, "GPTQ: --calib FILE is required");
        return -1;
    }
    if (g->rtn && g->act_order) {
        snprintf(err, errlen, "GPTQ: --rtn has no Hessian to order columns by (drop --act-order)");
        return -1;
    }
    if (export) {
        const int want_sym = g->export_type == GGML_TYPE_Q4_0;
        if (co.p.group_size != EXPORT_GROUP) {
            snprintf(err, errlen, "GPTQ: --export needs --group-size 32 (one ggml block), not %d", co.p.group_size);
            return -1;
        }
        if (g->sym >= 0 && g->sym != want_sym) {
            snprintf(err, errlen, "GPTQ: --export %s stores a %s grid: drop --%s", want_sym ? "q4_0" : "q4_1",
                     want_sym ? "symmetric" : "asymmetric", g->sym ? "sym" : "asym");
            return -1;
        }
        co.p.sym = want_sym;
        co.p.param = want_sym ? GPTQ_Q4_0 : GPTQ_Q4_1;
    } else if (g->sym < 0) {
        co.p.sym = GPTQ_NATIVE_SYM;   /* asym: GPTQ lower or equal to sym on both models measured */
    }
    gptq_run run;
    if (check_room(o, export, err, errlen) != 0 || gptq_calibrate(o->in, &co, &run, err, errlen) != 0) return -1;
    if (!o->quiet)
        printf("gptq: %d weights, %d calibration tokens (%d windows of %d)\n", run.n_res, run.tokens,
               run.windows, co.ctx);
    int rc;
    if (!export) {
        rc = write_native(o, &co, &run, err, errlen);
    } else {
        export_ctx x = { &co, &run, o->nthreads, g->export_type };
        hc_tensor_hook hook = { &x, export_tensor, export_kvs };
        hc_quant_opts eo = *o;
        eo.type = g->export_type;
        rc = hc_quantize_model(&eo, &hook, err, errlen);
    }
    gptq_run_free(&run);
    return rc;
}

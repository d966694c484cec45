/* runtime/backend.h on one OpenCL device (runtime/opencl.h,
 * hc_cl_backend_new): buffers are cl_mem, views byte offsets passed to the
 * kernels as float offsets; weights are uploaded once in the layouts of
 * kernels/backend.cl; every step is enqueued on the device's in-order queue
 * and returns at once. The first failure is kept (err) and every later step
 * does nothing; read and sync report it. docs/design/runtime.md, "The
 * OpenCL backend". */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"
#include "cli.h"
#include "ggml_types.h"
#include "kernels_gptq.h"

/* kernels/backend.cl as a C string (runtime/module.mk); built after kernels/common.cl. */
extern const char hc_cl_backend_source[];

/* The kernels' weight formats (kernels/backend.cl, "weights"), their name suffixes. */
enum { FMT_F32, FMT_F16, FMT_BF16, FMT_Q8, FMT_Q4, FMT_G4, N_FMT };
static const char *const fmt_names[N_FMT] = { "f32", "f16", "bf16", "q8", "q4", "g4" };
/* The input's form a format's products take (the CPU's hc_weight_prepare):
 * f32 as it is, bf16-rounded, Q8_0 blocks (fp16 d), GPTQ's int8 blocks (f32 d, perm order). */
enum { FORM_F32, FORM_BF16, FORM_Q8, FORM_G8 };
static const int fmt_form[N_FMT] = { FORM_F32, FORM_F32, FORM_BF16, FORM_Q8, FORM_Q8, FORM_G8 };
enum { N_ACT = 3 };

enum { DEV_MAT = 0x6d617431, DEV_VEC = 0x76656331 };
typedef struct {
    int tag, fmt;
    int n, rows;        /* as the weight: inputs, outputs */
    int kn;             /* inputs the kernels read per row: n, or a GPTQ row's kp */
    cl_uint dofs;       /* bytes from the codes to the scales */
    cl_mem m, perm;     /* perm: a GPTQ weight's input order (NULL: none) */
} cl_mat;
typedef struct {
    int tag, n;
    cl_mem m;
} cl_vec;

struct hc_kv {
    int n_layer, n_blocks, n_ctx, kv_dim, shift;   /* a block: 1 << shift positions */
    cl_int k16, v16;   /* 1: k (v) held as halves (-ctk/-ctv f16), 0: as floats */
    cl_mem *k, *v;   /* [n_layer]: n_blocks blocks of 1 << shift rows of kv_dim elements (NULL: a layer off) */
};

/* A step not yet launched, a norm or attention's combine: the next step's
 * products may take its output (B rows of n floats at o) in act_q8's form,
 * made by the same launch (prepare: norm_q8, attn_combine_q8); or rope,
 * whose k kv_store may take into the cache in the same launch (rope_store).
 * Anything else queued launches it as it is first (settle). */
enum { PEND_NONE, PEND_NORM, PEND_COMBINE, PEND_ROPE };
typedef struct {
    int kind;
    cl_mem o;
    cl_uint oo;
    cl_int B, n;
    cl_int norm, has_b;   /* PEND_NORM: norm's arguments */
    cl_float eps;
    cl_mem w, bias, x;
    cl_uint xo;
    size_t l;
    cl_mem part, ml;      /* PEND_COMBINE: attn_combine's */
    cl_int hd, n_head, row0, ch, n_chunks;
    cl_int mode, d[2], rn[2], r0[2];   /* PEND_ROPE: rope's (hd above), its sets at vm + vo */
    cl_mem freq, vm[2];
    cl_uint vo[2];
} pending;

/* One input row's act_q8 form that a launch made beside its output
 * (ffn_neurons: h for the down product), until the next launch, write or
 * read (settle). */
typedef struct {
    int on;
    cl_mem x, mem;         /* the row's floats at x + xo; the form at mem */
    cl_uint xo, doff, soff;
    cl_int il;             /* interleaved (hc_clb_q8_interleaved) */
    const void *w;         /* the device copy of the weight it was made for */
} made_form;

typedef struct {
    hc_backend be;
    hc_cl *cl;
    cl_command_queue q;
    cl_program prog;
    cl_kernel mv[N_FMT], mm16[N_FMT], mm64[N_FMT], mt[N_FMT], ffn_act[N_ACT], glu[N_FMT][N_ACT];
    cl_kernel sum_slices, act_bf16, act_q8, norm, norm_q8, rope, rope_store, add_bias, add, kv_store, attn_part,
        attn_combine, attn_combine_q8;
    pending pend;
    made_form made;
    hc_clb_device geo;
    size_t kwg;             /* the largest group every kernel takes */
    int failed;
    uint64_t xfers, xfer_bytes;   /* reads and writes, timed on the device with HC_CL_PROFILE */
    uint64_t launches;            /* kernels enqueued */
    double xfer_s;
    cl_event *sent;               /* the sends' events not yet timed (profiling) */
    int n_sent, cap_sent;
    cl_event *kev;                /* profiling: the launches' events not yet timed, and their kernels */
    cl_kernel *kk;
    int n_kev, cap_kev;
    hc_kernel_time kt[48];        /* profiling: each kernel's launches and device time so far */
    cl_kernel kt_k[48];
    int n_kt;
    double idle_s;                /* profiling: the device's time between kernels */
    char err[256];
    char dots[320];         /* how the quantized products multiply, and whether a build with */
    int dots_fell_back;     /* dp4a failed (hc_cl_backend_dots) */
    const hc_seq_rows *rows;  /* the step's rows (batch), their positions, sequences and block tables in SCR_POS.. */
    cl_mem scratch[8];      /* two prepared inputs, the slices' sums, attention's partial sums and their m, l,
                             * the step's positions, sequences and block tables */
    size_t scratch_cap[8];
} clb;

enum { SCR_ACT0, SCR_ACT1, SCR_SLICES, SCR_ATTN, SCR_ML, SCR_POS, SCR_SEQ, SCR_TABLE, N_SCR };

static void fail(clb *b, const char *what, cl_int rc)
{
    if (b->failed) return;
    b->failed = 1;
    snprintf(b->err, sizeof b->err, "OpenCL: %s failed: %d %s", what, rc, hc_cl_error_name(rc));
}

static void fail_msg(clb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_msg(clb *b, const char *fmt, ...)
{
    if (b->failed) return;
    b->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, sizeof b->err, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------ launching */

/* Kernel arguments from the first: a list of (size, pointer) pairs ended
 * by 0. A local memory argument is (bytes, NULL). The index after the
 * last. */
static cl_uint vargs(clb *b, cl_kernel k, cl_uint first, va_list ap)
{
    cl_uint i = first;
    for (;; i++) {
        size_t sz = va_arg(ap, size_t);
        if (!sz) break;
        const void *v = va_arg(ap, const void *);
        cl_int rc = clSetKernelArg(k, i, sz, v);
        if (rc != CL_SUCCESS) { fail(b, "clSetKernelArg", rc); break; }
    }
    return i;
}

static cl_uint args(clb *b, cl_kernel k, ...)
{
    va_list ap;
    va_start(ap, k);
    cl_uint n = vargs(b, k, 0, ap);
    va_end(ap);
    return n;
}

static void args_from(clb *b, cl_kernel k, cl_uint first, ...)
{
    va_list ap;
    va_start(ap, first);
    vargs(b, k, first, ap);
    va_end(ap);
}
#define A(v) sizeof(v), (const void *)&(v)
#define LOCAL(bytes) (size_t)(bytes), (const void *)NULL
#define END (size_t)0

static void settle(clb *b);

/* A profiled launch's event, kept for kernels_timed (an untimed launch
 * when out of memory, not an error). */
static void keep_event(clb *b, cl_kernel k, cl_event ev)
{
    if (b->n_kev == b->cap_kev) {
        int cap = b->cap_kev ? 2 * b->cap_kev : 256;
        cl_event *e = realloc(b->kev, sizeof *e * (size_t)cap);
        if (e) b->kev = e;
        cl_kernel *kk = e ? realloc(b->kk, sizeof *kk * (size_t)cap) : NULL;
        if (kk) b->kk = kk;
        if (!e || !kk) { clReleaseEvent(ev); return; }
        b->cap_kev = cap;
    }
    b->kev[b->n_kev] = ev;
    b->kk[b->n_kev++] = k;
}

static void launch(clb *b, cl_kernel k, cl_uint dims, const size_t *global, const size_t *local)
{
    settle(b);
    if (b->failed) return;
    cl_event ev = NULL;
    cl_int rc = clEnqueueNDRangeKernel(b->q, k, dims, NULL, global, local, 0, NULL, b->cl->profile ? &ev : NULL);
    if (rc != CL_SUCCESS) fail(b, "clEnqueueNDRangeKernel", rc);
    else if (ev) keep_event(b, k, ev);
    b->launches++;
}

/* After a wait (every launch before it done): the kept launches' device
 * times into their kernels' totals, the gaps between them into idle_s. */
static void kernels_timed(clb *b)
{
    cl_ulong first = 0, last = 0;
    double busy = 0;
    for (int i = 0; i < b->n_kev; i++) {
        cl_ulong t0, t1;
        if (clGetEventProfilingInfo(b->kev[i], CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) == CL_SUCCESS &&
            clGetEventProfilingInfo(b->kev[i], CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS &&
            t1 >= t0) {
            int j = 0;
            while (j < b->n_kt && b->kt_k[j] != b->kk[i]) j++;
            if (j == b->n_kt && j < (int)(sizeof b->kt / sizeof *b->kt)) {
                b->kt_k[j] = b->kk[i];
                b->kt[j] = (hc_kernel_time){ "", 0, 0 };
                clGetKernelInfo(b->kk[i], CL_KERNEL_FUNCTION_NAME, sizeof b->kt[j].name - 1, b->kt[j].name, NULL);
                b->n_kt++;
            }
            if (j < b->n_kt) {
                b->kt[j].launches++;
                b->kt[j].seconds += (double)(t1 - t0) * 1e-9;
            }
            busy += (double)(t1 - t0) * 1e-9;
            if (!first || t0 < first) first = t0;
            if (t1 > last) last = t1;
        }
        clReleaseEvent(b->kev[i]);
    }
    if (last > first && (double)(last - first) * 1e-9 > busy) b->idle_s += (double)(last - first) * 1e-9 - busy;
    b->n_kev = 0;
}

static size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

/* One element-wise launch over n items. */
static void launch_ew(clb *b, cl_kernel k, size_t n)
{
    size_t l = hc_clb_ew_local(&b->geo, n), g = round_up(n ? n : 1, l);
    launch(b, k, 1, &g, &l);
}

/* the pairs a pending rope turns */
static size_t rope_pairs(const pending *p)
{
    return (size_t)p->rn[0] * (size_t)(p->d[0] / 2) + (size_t)p->rn[1] * (size_t)(p->d[1] / 2);
}

/* The pending step's arguments to its kernel or its fused twin (which takes
 * more after them, from the count returned). */
static cl_uint pending_args(clb *b, cl_kernel k, const pending *p)
{
    cl_int total = p->B * p->n;
    if (p->kind == PEND_NORM)
        return args(b, k, A(p->norm), A(p->n), A(p->eps), A(p->w), A(p->bias), A(p->has_b), A(p->x), A(p->xo),
                    A(p->o), A(p->oo), LOCAL(sizeof(float) * p->l), END);
    if (p->kind == PEND_ROPE)
        return args(b, k, A(p->mode), A(p->hd), A(b->scratch[SCR_POS]), A(p->freq), A(p->d[0]), A(p->rn[0]),
                    A(p->r0[0]), A(p->vm[0]), A(p->vo[0]), A(p->d[1]), A(p->rn[1]), A(p->r0[1]), A(p->vm[1]),
                    A(p->vo[1]), END);
    return args(b, k, A(p->part), A(p->ml), A(p->hd), A(p->n_head), A(b->scratch[SCR_POS]), A(p->row0), A(p->ch),
                A(p->n_chunks), A(p->o), A(p->oo), A(total), END);
}

/* The pending step launched as it is, before anything else is queued. */
static void settle(clb *b)
{
    b->made.on = 0;
    const pending p = b->pend;
    if (p.kind == PEND_NONE) return;
    b->pend.kind = PEND_NONE;
    cl_kernel k = p.kind == PEND_NORM ? b->norm : p.kind == PEND_ROPE ? b->rope : b->attn_combine;
    pending_args(b, k, &p);
    if (p.kind == PEND_NORM) {
        size_t g = p.l * (size_t)p.B;
        launch(b, k, 1, &g, &p.l);
    } else if (p.kind == PEND_ROPE) {
        launch_ew(b, k, rope_pairs(&p));
    } else {
        launch_ew(b, k, (size_t)p.B * (size_t)p.n);
    }
}

static cl_mem mem_of(hc_view v) { return v.buf ? v.buf->m : NULL; }
static cl_uint flo(hc_view v) { return (cl_uint)(v.off / sizeof(float)); }

static cl_mem scratch(clb *b, int which, size_t bytes)
{
    if (b->failed) return NULL;
    if (bytes > b->scratch_cap[which]) {
        settle(b);   /* a pending step may read it: queued, it keeps it alive */
        if (b->scratch[which]) clReleaseMemObject(b->scratch[which]);   /* queued users keep it alive */
        cl_int rc;
        b->scratch[which] = clCreateBuffer(b->cl->ctx, CL_MEM_READ_WRITE, bytes, NULL, &rc);
        b->scratch_cap[which] = b->scratch[which] ? bytes : 0;
        if (rc != CL_SUCCESS) { fail(b, "clCreateBuffer", rc); return NULL; }
    }
    return b->scratch[which];
}

/* ------------------------------------------------------------ memory */

static hc_buf *buf_new(hc_backend *be, size_t bytes, char *err, size_t errlen)
{
    clb *b = (clb *)be;
    hc_buf *h = calloc(1, sizeof *h);
    if (!h) { snprintf(err, errlen, "OpenCL: out of host memory"); return NULL; }
    h->bytes = bytes;
    if (!(h->m = hc_cl_buffer(b->cl, CL_MEM_READ_WRITE, bytes, NULL, err, errlen))) { free(h); return NULL; }
    return h;
}

/* Pinned host memory (hc_cl_pinned), mapped once for the context's life. */
static hc_buf *pinned_new(hc_backend *be, size_t bytes, char *err, size_t errlen)
{
    clb *b = (clb *)be;
    hc_buf *h = calloc(1, sizeof *h);
    if (!h) { snprintf(err, errlen, "OpenCL: out of host memory"); return NULL; }
    h->bytes = bytes;
    if ((h->host = hc_cl_pinned(b->cl, bytes, &h->m, err, errlen))) return h;
    free(h);
    return NULL;
}

static float *pinned_host(hc_buf *h) { return h->host; }

static void buf_free(hc_backend *be, hc_buf *h)
{
    clb *b = (clb *)be;
    if (!h) return;
    settle(b);
    if (h->host) {
        clEnqueueUnmapMemObject(b->q, h->m, h->host, 0, NULL, NULL);
        clFinish(b->q);
    }
    clReleaseMemObject(h->m);
    free(h);
}

/* The device time of a finished transfer (ev: its event when profiling,
 * released here). */
static void timed(clb *b, cl_event ev)
{
    if (!ev) return;
    cl_ulong t0, t1;
    if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) == CL_SUCCESS &&
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS && t1 > t0)
        b->xfer_s += (double)(t1 - t0) * 1e-9;
    clReleaseEvent(ev);
}

/* Count a transfer of `bytes`, timed now (ev: finished) or, for a send, once
 * the queue has passed it (*later set: times_sent). */
static void counted(clb *b, cl_event ev, size_t bytes, int later)
{
    b->xfers++;
    b->xfer_bytes += bytes;
    if (!later) {
        timed(b, ev);
    } else if (ev) {
        if (b->n_sent == b->cap_sent) {
            int cap = b->cap_sent ? 2 * b->cap_sent : 64;
            cl_event *p = realloc(b->sent, sizeof *p * (size_t)cap);
            if (!p) { clReleaseEvent(ev); return; }   /* an untimed transfer, not an error */
            b->sent = p;
            b->cap_sent = cap;
        }
        b->sent[b->n_sent++] = ev;
    }
}

/* After a blocking read or a finish: every send and launch before it is
 * done, their times taken. */
static void kernels_timed(clb *b);

static void times_sent(clb *b)
{
    kernels_timed(b);
    for (int i = 0; i < b->n_sent; i++) timed(b, b->sent[i]);
    b->n_sent = 0;
}

/* A write of src into dst, waited for (blocking) or only queued. */
static void enqueue_write(clb *b, hc_view dst, const void *src, size_t bytes, int blocking)
{
    settle(b);
    if (b->failed || !bytes) return;
    cl_event ev = NULL;
    cl_int rc = clEnqueueWriteBuffer(b->q, dst.buf->m, blocking ? CL_TRUE : CL_FALSE, dst.off, bytes, src, 0, NULL,
                                     b->cl->profile ? &ev : NULL);
    if (rc != CL_SUCCESS) fail(b, "clEnqueueWriteBuffer", rc);
    else counted(b, ev, bytes, !blocking);
}

/* blocking: the caller may reuse src at once */
static void write_(hc_backend *be, hc_view dst, const void *src, size_t bytes) { enqueue_write((clb *)be, dst, src, bytes, 1); }

/* Queued, not waited for: the in-order queue has done it by the next read
 * or sync, until which the caller leaves src alone. */
static void send(hc_backend *be, hc_view dst, const void *src, size_t bytes) { enqueue_write((clb *)be, dst, src, bytes, 0); }

static int report(clb *b, char *err, size_t errlen)
{
    if (!b->failed) return 0;
    snprintf(err, errlen, "%s", b->err);
    return -1;
}

static int read_(hc_backend *be, hc_view src, void *dst, size_t bytes, char *err, size_t errlen)
{
    clb *b = (clb *)be;
    settle(b);
    if (!b->failed && bytes) {
        cl_event ev = NULL;
        cl_int rc = clEnqueueReadBuffer(b->q, src.buf->m, CL_TRUE, src.off, bytes, dst, 0, NULL, b->cl->profile ? &ev : NULL);
        if (rc != CL_SUCCESS) fail(b, "clEnqueueReadBuffer", rc);
        else counted(b, ev, bytes, 0);
        times_sent(b);
    }
    return report(b, err, errlen);
}

static float *host(hc_view v)
{
    (void)v;
    return NULL;
}

static int sync_(hc_backend *be, char *err, size_t errlen)
{
    clb *b = (clb *)be;
    settle(b);
    if (!b->failed) {
        cl_int rc = clFinish(b->q);
        if (rc != CL_SUCCESS) fail(b, "clFinish", rc);
        times_sent(b);
    }
    return report(b, err, errlen);
}

static void flush(hc_backend *be)
{
    clb *b = (clb *)be;
    settle(b);
    if (b->failed) return;
    cl_int rc = clFlush(b->q);
    if (rc != CL_SUCCESS) fail(b, "clFlush", rc);
}

static int transfers(hc_backend *be, uint64_t *count, uint64_t *bytes, double *seconds, uint64_t *launches)
{
    clb *b = (clb *)be;
    *launches = b->launches;
    *count = b->xfers;
    *bytes = b->xfer_bytes;
    *seconds = b->xfer_s;
    return b->cl->profile ? 0 : -1;
}

static int by_time(const void *a, const void *b)
{
    double x = ((const hc_kernel_time *)a)->seconds, y = ((const hc_kernel_time *)b)->seconds;
    return (x < y) - (x > y);
}

static int kernel_times(hc_backend *be, hc_kernel_time *t, int max, int *count, double *idle)
{
    clb *b = (clb *)be;
    if (!b->cl->profile) return -1;
    hc_kernel_time all[sizeof b->kt / sizeof *b->kt];
    memcpy(all, b->kt, sizeof *all * (size_t)b->n_kt);
    qsort(all, (size_t)b->n_kt, sizeof *all, by_time);
    *count = b->n_kt < max ? b->n_kt : max;
    memcpy(t, all, sizeof *t * (size_t)*count);
    *idle = b->idle_s;
    return 0;
}

/* ------------------------------------------------------------ weights */

static int fmt_of(const hc_weight *w)
{
    if (w->kind == HC_WEIGHT_GPTQ) return FMT_G4;
    if (w->kind != HC_WEIGHT_GGML) return -1;
    switch (w->type) {
    case GGML_TYPE_F32: return FMT_F32;
    case GGML_TYPE_F16: return FMT_F16;
    case GGML_TYPE_BF16: return FMT_BF16;
    case GGML_TYPE_Q8_0: return FMT_Q8;
    case GGML_TYPE_Q4_0: return FMT_Q4;
    default: return -1;
    }
}

/* The bytes of w in its device format (kernels/backend.cl, "weights"):
 * codes, then at *dofs the scales. NULL when out of memory. */
static void *repack(const hc_weight *w, int fmt, int kn, size_t *bytes, cl_uint *dofs)
{
    const size_t R = (size_t)w->rows, nb = (size_t)kn / 32;
    if (fmt != FMT_Q8 && fmt != FMT_Q4 && fmt != FMT_G4) {
        *bytes = R * ggml_row_size(w->type, w->n);
        *dofs = 0;
        void *p = malloc(*bytes ? *bytes : 1);
        if (p) memcpy(p, w->data, *bytes);
        return p;
    }
    const size_t cb = fmt == FMT_Q8 ? R * (size_t)kn : R * (size_t)kn / 2, sb = R * nb * (fmt == FMT_G4 ? 8 : 4);
    const size_t off = round_up(cb, 64);
    *bytes = off + sb;
    *dofs = (cl_uint)off;
    uint8_t *p = calloc(1, *bytes), *codes = p;
    if (!p) return NULL;
    float *sc = (float *)(p + off);
    for (size_t r = 0; r < R; r++) {
        if (w->kind == HC_WEIGHT_GPTQ) {
            const hc_gptq *g = w->ext;
            const float *sm = hc_gptq_sm(g, (int)r);
            memcpy(codes + r * (size_t)kn / 2, hc_gptq_codes(g, (int)r), (size_t)kn / 2);
            for (size_t k = 0; k < nb; k++) {
                size_t j = k * 32 / (size_t)g->gs;
                if (j >= (size_t)g->n_groups) j = (size_t)g->n_groups - 1;
                sc[2 * (r * nb + k)] = sm[2 * j];
                sc[2 * (r * nb + k) + 1] = sm[2 * j + 1];
            }
        } else if (fmt == FMT_Q8) {
            const block_q8_0 *blk = (const block_q8_0 *)w->data + r * nb;
            for (size_t k = 0; k < nb; k++) {
                memcpy(codes + r * (size_t)kn + 32 * k, blk[k].qs, 32);
                sc[r * nb + k] = fp16_to_fp32(blk[k].d);
            }
        } else {
            const block_q4_0 *blk = (const block_q4_0 *)w->data + r * nb;
            for (size_t k = 0; k < nb; k++) {
                memcpy(codes + r * (size_t)kn / 2 + 16 * k, blk[k].qs, 16);
                sc[r * nb + k] = fp16_to_fp32(blk[k].d);
            }
        }
    }
    return p;
}

static void mat_free(cl_mat *m)
{
    if (m->m) clReleaseMemObject(m->m);
    if (m->perm) clReleaseMemObject(m->perm);
    free(m);
}

static void *mat_new(hc_backend *be, const hc_weight *w, char *err, size_t errlen)
{
    clb *b = (clb *)be;
    const int fmt = fmt_of(w);
    if (fmt < 0 || (w->kind == HC_WEIGHT_GPTQ && !hc_gptq_int8(w->ext))) {
        if (w->kind == HC_WEIGHT_GPTQ)
            snprintf(err, errlen, "OpenCL backend: no kernel for INT4-GPTQ of group size %d (multiples of 32 only)",
                     ((const hc_gptq *)w->ext)->gs);
        else
            snprintf(err, errlen, "OpenCL backend: no kernel for weights of type %s", hc_weight_type_name(w));
        return NULL;
    }
    cl_mat *m = calloc(1, sizeof *m);
    if (!m) { snprintf(err, errlen, "OpenCL: out of host memory"); return NULL; }
    m->tag = DEV_MAT;
    m->fmt = fmt;
    m->n = w->n;
    m->rows = w->rows;
    m->kn = w->n;
    if (w->kind == HC_WEIGHT_GPTQ) {
        const hc_gptq *g = w->ext;
        m->kn = g->kp;
        if (g->perm &&
            !(m->perm = hc_cl_buffer(b->cl, CL_MEM_READ_ONLY, sizeof(int32_t) * (size_t)g->n, g->perm, err, errlen)))
            goto bad;
    } else if ((fmt == FMT_Q8 || fmt == FMT_Q4) && w->n % 32) {
        snprintf(err, errlen, "OpenCL backend: %s rows of %d (not whole blocks)", hc_weight_type_name(w), w->n);
        goto bad;
    }
    size_t bytes;
    void *host_data = repack(w, fmt, m->kn, &bytes, &m->dofs);
    if (!host_data) { snprintf(err, errlen, "OpenCL: out of host memory"); goto bad; }
    m->m = hc_cl_buffer(b->cl, CL_MEM_READ_ONLY, bytes, host_data, err, errlen);
    free(host_data);
    if (!m->m) goto bad;
    return m;
bad:
    mat_free(m);
    return NULL;
}

static void *vec_new(hc_backend *be, const float *v, int n, char *err, size_t errlen)
{
    clb *b = (clb *)be;
    cl_vec *c = calloc(1, sizeof *c);
    if (!c) { snprintf(err, errlen, "OpenCL: out of host memory"); return NULL; }
    c->tag = DEV_VEC;
    c->n = n;
    if (!(c->m = hc_cl_buffer(b->cl, CL_MEM_READ_ONLY, sizeof(float) * (size_t)n, v, err, errlen))) {
        free(c);
        return NULL;
    }
    return c;
}

static void dev_free(hc_backend *be, void *dev)
{
    (void)be;
    if (!dev) return;
    if (*(int *)dev == DEV_MAT) {
        mat_free(dev);
    } else {
        cl_vec *v = dev;
        clReleaseMemObject(v->m);
        free(v);
    }
}

/* The device copy of a vector, NULL when absent (host NULL); a present one
 * without a device copy is the caller's error. */
static cl_mem vec_mem(clb *b, const hc_bvec *v, const char *what)
{
    if (!v || !v->host) return NULL;
    if (!v->dev) {
        fail_msg(b, "OpenCL backend: %s without a device copy (vec_new)", what);
        return NULL;
    }
    return ((const cl_vec *)v->dev)->m;
}

/* ------------------------------------------------------------ steps */

/* An input in the form a format's products take (FORM_*): B rows at mem
 * (FORM_F32: the input itself at float offset xo; FORM_BF16: rows of n
 * floats from 0; the Q8 forms: act_q8's layout, doff and soff). it:
 * the item it was made for. */
typedef struct {
    int form;
    const hc_mm *it;
    cl_mem mem;
    cl_uint xo, doff, soff;
    cl_int il;   /* a Q8 form's words interleaved (hc_clb_q8_interleaved) */
} prepared;

/* 1 when p serves the item it (the CPU's hc_weight_same_act, but any
 * Q8_0 or Q4_0 weight of the same width shares Q8_0 blocks). */
static int serves(const prepared *p, const hc_mm *it)
{
    const cl_mat *a = p->it->w->dev, *m = it->w->dev;
    if (p->form != fmt_form[m->fmt] || a->n != m->n) return 0;
    return p->form != FORM_G8 || hc_weight_same_act(p->it->w->host, it->w->host);
}

/* Whether o's product of one input row can share it's launch (input p):
 * the same input rows, form and add, weights of the same format and length. */
static int joins(const prepared *p, const hc_mm *it, const hc_mm *o)
{
    const cl_mat *a = it->w->dev, *m = o->w->dev;
    return m && !o->transposed && o->b0 == it->b0 && o->add == it->add && m->fmt == a->fmt && m->kn == a->kn &&
           serves(p, o);
}

/* act_q8's form of B rows of kn inputs in scratch slot `slot` (where in p);
 * its blocks */
static size_t q8_form(clb *b, int B, int kn, int slot, prepared *p)
{
    const size_t nb = (size_t)B * (size_t)(kn / 32);
    p->il = hc_clb_q8_interleaved(&b->geo, B);   /* then one row, padded to whole runs of 32-byte blocks */
    const size_t codes = round_up((size_t)B * (size_t)kn, p->il ? 32 * HC_CLB_Q8_RUN : 64);
    p->doff = (cl_uint)codes;
    p->soff = (cl_uint)(codes + sizeof(float) * nb);
    p->mem = scratch(b, slot, codes + 2 * sizeof(float) * nb);
    return nb;
}

/* Make it's form of the B input rows at x into scratch slot `slot`, or take
 * the one a launch made beside x (made_form). */
static void prepare(clb *b, hc_view x, int B, const hc_mm *it, int slot, prepared *p)
{
    const cl_mat *m = it->w->dev;
    p->form = fmt_form[m->fmt];
    p->it = it;
    p->xo = p->doff = p->soff = 0;
    p->il = 0;
    const made_form *f = &b->made;
    if (B == 1 && f->on && f->w == m && f->x == mem_of(x) && f->xo == flo(x)) {
        *p = (prepared){ FORM_Q8, it, f->mem, 0, f->doff, f->soff, f->il };
        return;
    }
    if (p->form == FORM_F32) {
        p->mem = mem_of(x);
        p->xo = flo(x);
        return;
    }
    cl_mem xm = mem_of(x);
    cl_uint xo = flo(x);
    if (p->form == FORM_BF16) {
        cl_int total = B * m->n;
        p->mem = scratch(b, slot, sizeof(float) * (size_t)total);
        args(b, b->act_bf16, A(xm), A(xo), A(total), A(p->mem), END);
        launch_ew(b, b->act_bf16, (size_t)total);
        return;
    }
    const size_t nb = q8_form(b, B, m->kn, slot, p);
    cl_int n = m->n, has = m->perm != NULL, kp = m->kn, Bc = B, half_d = p->form == FORM_Q8;
    const pending pn = b->pend;
    if (pn.kind != PEND_NONE && pn.o == xm && pn.oo == xo && pn.B == B && pn.n == n && !has && kp == n) {
        b->pend.kind = PEND_NONE;   /* the pending step and this form in one launch */
        const int norm = pn.kind == PEND_NORM;
        cl_kernel k = norm ? b->norm_q8 : b->attn_combine_q8;
        args_from(b, k, pending_args(b, k, &pn), A(half_d), A(p->mem), A(p->doff), A(p->soff), A(p->il),
                  END);
        size_t g = norm ? pn.l * (size_t)B : (size_t)B * (size_t)n, l = norm ? pn.l : 32;   /* a block a group */
        launch(b, k, 1, &g, &l);
        return;
    }
    args(b, b->act_q8, A(xm), A(xo), A(n), A(m->perm), A(has), A(kp), A(Bc), A(half_d), A(p->mem), A(p->doff),
         A(p->soff), A(p->il), END);
    launch_ew(b, b->act_q8, nb);
}

/* Where a product cut into S slices writes (nb rows of cols outputs): y
 * itself with one slice and no add (hc_mm's), else the slices' scratch
 * [S][nb][cols], which slices_add then sums in slice order into y (or
 * onto it: add). */
typedef struct {
    cl_mem m;
    cl_uint o, s, ss;   /* offset, row stride, slice stride (floats) */
} slices;

static slices slices_out(clb *b, int S, int nb, int cols, hc_view y, size_t y_stride, int add)
{
    if (S == 1 && !add) return (slices){ mem_of(y), flo(y), (cl_uint)y_stride, 0 };
    size_t n = (size_t)nb * (size_t)cols;
    return (slices){ scratch(b, SCR_SLICES, sizeof(float) * (size_t)S * n), 0, (cl_uint)cols, (cl_uint)n };
}

static void slices_add(clb *b, const slices *o, int S, int nb, int cols, hc_view y, size_t y_stride, int add)
{
    if (S == 1 && !add) return;
    cl_mem ym = mem_of(y);
    cl_uint yo = flo(y), ys = (cl_uint)y_stride;
    cl_int Sc = S, Bc = nb, n = cols, acc = add;
    args(b, b->sum_slices, A(o->m), A(Sc), A(Bc), A(n), A(ym), A(yo), A(ys), A(acc), END);
    launch_ew(b, b->sum_slices, (size_t)nb * (size_t)cols);
}

/* The transposed product of item it on input rows it->b0 .. B - 1 (mt_T):
 * its slices as the geometry gives them for those rows, or (batch-invariant)
 * as for one row, in launches of as many rows as their sums' scratch holds. */
static void transposed(clb *b, hc_view x, int B, const hc_mm *it)
{
    const cl_mat *m = it->w->dev;
    if (m->perm || m->kn != m->n) { fail_msg(b, "OpenCL backend: transposed INT4-GPTQ rows are not supported"); return; }
    const int units = (m->n + 7) / 8, inv = b->cl->invariant;
    const int S = inv ? hc_clb_t_slices_fixed(&b->geo, units, m->rows) : hc_clb_t_slices(&b->geo, units, m->rows, B - it->b0);
    const int most = inv ? hc_clb_t_rows(units, S) : B;
    cl_mem xm = mem_of(x);
    cl_int n = m->kn, rps = (m->rows + S - 1) / S, k = m->rows;
    size_t l[3] = { hc_clb_t_local(&b->geo, units), 1, 1 };
    for (int b0 = it->b0; b0 < B && !b->failed; b0 += most) {
        const int nb = B - b0 < most ? B - b0 : most;
        const hc_view y = hc_view_at(it->y, sizeof(float) * (size_t)(b0 - it->b0) * it->y_stride);
        cl_uint xo = flo(x) + (cl_uint)((size_t)b0 * (size_t)m->rows);
        cl_int Bc = nb;
        size_t g[3] = { round_up((size_t)units, l[0]), (size_t)S, ((size_t)nb + HC_CLB_TOKENS - 1) / HC_CLB_TOKENS };
        const slices o = slices_out(b, S, nb, m->n, y, it->y_stride, it->add);
        args(b, b->mt[m->fmt], A(m->m), A(m->dofs), A(n), A(k), A(rps), A(xm), A(xo), A(Bc), A(o.m), A(o.o), A(o.s),
             END);
        launch(b, b->mt[m->fmt], 3, g, l);
        slices_add(b, &o, S, nb, m->n, y, it->y_stride, it->add);
    }
}

/* The products of input rows it->b0 .. B - 1, one row at a time, by the c
 * items at it (1 to 3, of one format and row length, sharing their input
 * p): one launch of mv_T. */
static void row_products(clb *b, const prepared *p, int B, const hc_mm *it, int c)
{
    const cl_mat *m = it->w->dev;
    const int q = p->form == FORM_Q8 || p->form == FORM_G8;
    const size_t lanes = hc_clb_mv_lanes(&b->geo, m->kn / (q ? HC_CLB_UNIT_Q : HC_CLB_UNIT_F));
    const size_t R = hc_clb_mv_rows(&b->geo, lanes);
    cl_mem w[3], y[3];
    cl_uint d[3], yo[3], ys[3];
    cl_int rows[3], bound[3];
    size_t groups = 0;
    for (int i = 0; i < 3; i++) {   /* missing matrices repeat the last one, past every group */
        const hc_mm *t = &it[i < c ? i : c - 1];
        const cl_mat *mt = t->w->dev;
        w[i] = mt->m, d[i] = mt->dofs, rows[i] = mt->rows, y[i] = mem_of(t->y), yo[i] = flo(t->y);
        ys[i] = (cl_uint)t->y_stride;
        if (i < c) groups += ((size_t)mt->rows + R - 1) / R;
        bound[i] = (cl_int)groups;
    }
    cl_int n = m->kn, xb = it->b0, acc = it->add, nt = B - it->b0;
    cl_uint xo = p->xo + (cl_uint)((size_t)it->b0 * (size_t)m->n);
    cl_kernel k = b->mv[m->fmt];
    const size_t l[2] = { lanes, R }, g[2] = { lanes, groups * (size_t)nt * R };
#define MV_ARGS A(w[0]), A(d[0]), A(rows[0]), A(y[0]), A(yo[0]), A(ys[0]), A(w[1]), A(d[1]), A(rows[1]), A(y[1]), \
                A(yo[1]), A(ys[1]), A(w[2]), A(d[2]), A(rows[2]), A(y[2]), A(yo[2]), A(ys[2]), A(bound[0]), \
                A(bound[1]), A(n), A(acc), A(nt), A(p->mem)
    if (q)
        args(b, k, MV_ARGS, A(p->doff), A(p->soff), A(p->il), A(xb), LOCAL(sizeof(float) * lanes * R), END);
    else
        args(b, k, MV_ARGS, A(xo), LOCAL(sizeof(float) * lanes * R), END);
#undef MV_ARGS
    launch(b, k, 2, g, l);
}

/* it's product on its input p, rows it->b0.. of B > it->b0 + 1: the tiled
 * mm16_T or mm64_T, in slices of the inputs where the tiles alone do not
 * fill the device (then added by sum_slices). */
static void tiled_product(clb *b, const prepared *p, int B, const hc_mm *it)
{
    const cl_mat *m = it->w->dev;
    const int nb = B - it->b0;
    const int q = p->form == FORM_Q8 || p->form == FORM_G8;
    cl_int n = m->kn, rows = m->rows, Bc = nb;
    /* the input: floats from row b0 on, or act_q8's form (its rows kn codes apart) from row b0 on */
    cl_uint xo = q ? (cl_uint)it->b0 : p->xo + (cl_uint)((size_t)it->b0 * (size_t)m->n), xs = (cl_uint)m->kn;
    const int tile = hc_clb_mm_tile(nb), blocks = (m->kn + 31) / 32;
    int S = hc_clb_mm_slices(&b->geo, m->rows, m->kn, nb);
    cl_int kps = (blocks + S - 1) / S;
    S = (blocks + kps - 1) / kps;
    const slices o = slices_out(b, S, nb, m->rows, it->y, it->y_stride, it->add);
    cl_kernel k = (tile == 16 ? b->mm16 : b->mm64)[m->fmt];
    const size_t g[3] = { ((size_t)m->rows + HC_CLB_MM_ROWS - 1) / HC_CLB_MM_ROWS * HC_CLB_MM_ITEMS,
                          ((size_t)nb + (size_t)tile - 1) / (size_t)tile, (size_t)S };
    const size_t l[3] = { HC_CLB_MM_ITEMS, 1, 1 };
    args(b, k, A(m->m), A(m->dofs), A(n), A(rows), A(p->mem), A(xo), A(xs), A(p->doff), A(p->soff), A(Bc), A(o.m),
         A(o.o), A(o.s), A(o.ss), A(kps), END);
    launch(b, k, 3, g, l);
    slices_add(b, &o, S, nb, m->rows, it->y, it->y_stride, it->add);
}

/* As the CPU's cpu_matmul: each form of the input made once (all B rows)
 * and shared by the items that take it, in two scratch slots (a third form
 * replaces the older: the queue is in order, so the items before have
 * read it); a transposed item reads the f32 input. */
static void matmul(hc_backend *be, hc_view x, int B, const hc_mm *items, int n_items)
{
    clb *b = (clb *)be;
    prepared held[2];
    int n_held = 0, next = 0;
    for (int i = 0; i < n_items && !b->failed; i++) {
        const hc_mm *it = &items[i];
        if (!it->w->dev) { fail_msg(b, "OpenCL backend: matmul of a weight without a device copy (mat_new)"); return; }
        if (B - it->b0 <= 0) continue;
        if (it->transposed) { transposed(b, x, B, it); continue; }
        int h = -1;
        for (int j = 0; j < n_held; j++)
            if (serves(&held[j], it)) h = j;
        if (h < 0) {
            h = n_held < 2 ? n_held++ : next;
            next = !h;
            prepare(b, x, B, it, SCR_ACT0 + h, &held[h]);
        }
        if (B - it->b0 > 1 && !b->cl->invariant) {
            tiled_product(b, &held[h], B, it);
            continue;
        }
        int c = 1;   /* one launch for the row products that follow on the same input (q, k, v; gate, up) */
        while (c < 3 && i + c < n_items && joins(&held[h], it, &items[i + c])) c++;
        row_products(b, &held[h], B, it, c);
        i += c - 1;
    }
}

static void norm(hc_backend *be, const hc_hparams *hp, const hc_bvec *w, const hc_bvec *bias, hc_view x, hc_view o,
                 int B)
{
    clb *b = (clb *)be;
    if (B <= 0) return;
    cl_mem wm = vec_mem(b, w, "norm weights"), bm = vec_mem(b, bias, "a norm bias");
    if (!wm) fail_msg(b, "OpenCL backend: norm without weights");
    settle(b);
    b->pend = (pending){ .kind = PEND_NORM, .o = mem_of(o), .oo = flo(o), .B = B, .n = hp->n_embd, .norm = hp->norm,
                         .has_b = bm != NULL, .eps = hp->rms_eps, .w = wm, .bias = bm, .x = mem_of(x), .xo = flo(x),
                         .l = hc_clb_norm_local(&b->geo, hp->n_embd) };
}

static void rope(hc_backend *be, const hc_hparams *hp, const hc_bvec *freq, const hc_rope_rows *r, int count)
{
    clb *b = (clb *)be;
    if (hp->pos == HC_POS_LEARNED || count < 1) return;
    cl_mem fm = vec_mem(b, freq, "the RoPE frequencies");
    if (!fm) fail_msg(b, "OpenCL backend: rope without frequencies");
    settle(b);
    pending p = { .kind = PEND_ROPE, .mode = hp->pos, .hd = hp->head_dim, .freq = fm };
    for (int i = 0; i < 2; i++) {   /* one set of rows: the second empty */
        const hc_rope_rows *t = &r[i < count ? i : 0];
        p.d[i] = t->dim, p.rn[i] = i < count ? t->n : 0, p.r0[i] = t->row0, p.vm[i] = mem_of(t->v), p.vo[i] = flo(t->v);
    }
    if (rope_pairs(&p)) b->pend = p;   /* launched by kv_store with the cache's rows, or by settle */
}

static void add_bias(hc_backend *be, hc_view y, const hc_bvec *bias, int B, int n)
{
    clb *b = (clb *)be;
    cl_mem bm = vec_mem(b, bias, "a bias");
    if (!bm || B <= 0) return;
    cl_mem ym = mem_of(y);
    cl_uint yo = flo(y);
    cl_int nn = n, total = B * n;
    args(b, b->add_bias, A(ym), A(yo), A(bm), A(nn), A(total), END);
    launch_ew(b, b->add_bias, (size_t)total);
}

static void add(hc_backend *be, hc_view x, hc_view a, hc_view bv, size_t n)
{
    clb *b = (clb *)be;
    if (!n) return;
    cl_mem xm = mem_of(x), am = mem_of(a), bm = mem_of(bv);
    cl_uint xo = flo(x), ao = flo(a), bo = bm ? flo(bv) : 0;
    cl_int has_b = bm != NULL, total = (cl_int)n;
    args(b, b->add, A(xm), A(xo), A(am), A(ao), A(bm), A(bo), A(has_b), A(total), END);
    launch_ew(b, b->add, n);
}

static void ffn_act(hc_backend *be, const hc_hparams *hp, const hc_bvec *gate_b, const hc_bvec *up_b, hc_view g,
                    hc_view u, int B)
{
    clb *b = (clb *)be;
    if (B <= 0) return;
    int a = hp->act;
    if (a < 0 || a >= N_ACT) { fail_msg(b, "OpenCL backend: activation %d", a); return; }
    cl_kernel k = b->ffn_act[a];
    cl_mem gb = vec_mem(b, gate_b, "the gate bias"), ub = vec_mem(b, up_b, "the up bias");
    cl_int kind = hp->ffn_kind, has_gb = gb != NULL, has_ub = ub != NULL, n = hp->n_ff, total = B * hp->n_ff;
    cl_float thr = hp->act_threshold;
    cl_mem gm = mem_of(g), um = mem_of(u);
    cl_uint go = flo(g), uo = um ? flo(u) : 0;
    args(b, k, A(kind), A(thr), A(gb), A(has_gb), A(ub), A(has_ub), A(gm), A(go), A(um), A(uo), A(n), A(total), END);
    launch_ew(b, k, (size_t)total);
}

/* One input row's FFN neurons by glu_T_A: the gate's and up's products and
 * ffn_act in one launch, where both weights have one format, width and
 * input form (the sequential kind: up alone). */
static int ffn_neurons(hc_backend *be, const hc_hparams *hp, const hc_blayer *ly, hc_view xn, hc_view H)
{
    clb *b = (clb *)be;
    const int seq = hp->ffn_kind == HC_FFN_SEQUENTIAL, a = hp->act;
    const hc_mm first = { seq ? &ly->up : &ly->gate, 0, 0, H, (size_t)hp->n_ff, 0 };
    const hc_mm up = { &ly->up, 0, 0, H, (size_t)hp->n_ff, 0 };
    const cl_mat *g = first.w->dev, *u = up.w->dev;
    if (b->cl->invariant || !g || !u || a < 0 || a >= N_ACT || g->rows != hp->n_ff || u->rows != g->rows) return -1;
    prepared p = { fmt_form[g->fmt], &first, NULL, 0, 0, 0, 0 };
    if (!seq && !joins(&p, &first, &up)) return -1;
    prepare(b, xn, 1, &first, SCR_ACT0, &p);
    const int q = p.form == FORM_Q8 || p.form == FORM_G8;
    /* h in the down product's Q8_0 form too, by groups of 32 rows */
    const cl_mat *dm = ly->down.dev;
    const cl_int q8 = q && !ly->down_t && dm && fmt_form[dm->fmt] == FORM_Q8 && dm->kn == g->rows && dm->n == dm->kn;
    const int units = g->kn / (q ? HC_CLB_UNIT_Q : HC_CLB_UNIT_F);
    const size_t lanes = q8 ? hc_clb_glu_lanes(&b->geo, units) : hc_clb_mv_lanes(&b->geo, units);
    const size_t R = q8 ? 32 : hc_clb_mv_rows(&b->geo, lanes);
    prepared hq = { FORM_Q8, NULL, NULL, 0, 0, 0, 0 };
    if (q8) q8_form(b, 1, g->rows, SCR_ACT1, &hq);
    cl_mem gb = vec_mem(b, &ly->gate_b, "the gate bias"), ub = vec_mem(b, &ly->up_b, "the up bias");
    cl_int rows = g->rows, n = g->kn, kind = hp->ffn_kind, has_gb = gb != NULL, has_ub = ub != NULL;
    cl_float thr = hp->act_threshold;
    cl_mem hm = mem_of(H);
    cl_uint ho = flo(H);
    cl_kernel k = b->glu[g->fmt][a];
    cl_int half_d = 1;
    if (q)
        args(b, k, A(g->m), A(g->dofs), A(u->m), A(u->dofs), A(rows), A(n), A(kind), A(thr), A(gb), A(has_gb), A(ub),
             A(has_ub), A(hm), A(ho), A(p.mem), A(p.doff), A(p.soff), A(p.il), LOCAL(2 * sizeof(float) * lanes * R),
             A(q8), A(half_d), A(hq.mem), A(hq.doff), A(hq.soff), A(hq.il), END);
    else
        args(b, k, A(g->m), A(g->dofs), A(u->m), A(u->dofs), A(rows), A(n), A(kind), A(thr), A(gb), A(has_gb), A(ub),
             A(has_ub), A(hm), A(ho), A(p.mem), A(p.xo), LOCAL(2 * sizeof(float) * lanes * R), END);
    const size_t l[2] = { lanes, R }, gs[2] = { lanes, ((size_t)rows + R - 1) / R * R };
    launch(b, k, 2, gs, l);
    if (q8 && !b->failed)
        b->made = (made_form){ 1, hm, hq.mem, ho, hq.doff, hq.soff, hq.il, dm };
    return 0;
}

/* ------------------------------------------------------------ the KV cache */

/* The step's rows to the device: waits for the queue (the last step ended
 * with sync), so the caller's arrays are free again on return. */
static void batch(hc_backend *be, const hc_seq_rows *r)
{
    clb *b = (clb *)be;
    b->rows = r;
    settle(b);
    struct { int which; const int32_t *src; size_t n; } up[] = {
        { SCR_POS, r->pos, (size_t)r->B }, { SCR_SEQ, r->seq, (size_t)r->B },
        { SCR_TABLE, r->table, (size_t)r->n_seq * (size_t)r->max_blocks },
    };
    for (size_t i = 0; i < sizeof up / sizeof *up; i++) {
        size_t bytes = sizeof(int32_t) * (up[i].n ? up[i].n : 1);
        cl_mem m = scratch(b, up[i].which, bytes);
        if (!m || !up[i].n) continue;
        cl_int rc = clEnqueueWriteBuffer(b->q, m, CL_TRUE, 0, bytes, up[i].src, 0, NULL, NULL);
        if (rc != CL_SUCCESS) fail(b, "clEnqueueWriteBuffer", rc);
    }
}

static void kv_free(hc_backend *be, hc_kv *kv)
{
    (void)be;
    if (!kv) return;
    for (int l = 0; l < kv->n_layer; l++) {
        if (kv->k && kv->k[l]) clReleaseMemObject(kv->k[l]);
        if (kv->v && kv->v[l]) clReleaseMemObject(kv->v[l]);
    }
    free(kv->k);
    free(kv->v);
    free(kv);
}

static hc_kv *kv_new(hc_backend *be, const hc_hparams *hp, int n_blocks, int n_warm, int block, int n_ctx,
                     const uint8_t *on, uint32_t type_k, uint32_t type_v, char *err, size_t errlen)
{
    (void)n_warm;   /* a device buffer's memory is made with it */
    clb *b = (clb *)be;
    const uint32_t types[2] = { type_k, type_v };
    for (int i = 0; i < 2; i++)
        if (types[i] != GGML_TYPE_F32 && types[i] != GGML_TYPE_F16) {
            snprintf(err, errlen, "OpenCL: a KV cache of %s is not implemented on the device (f32 or f16)",
                     ggml_type_name(types[i]));
            return NULL;
        }
    hc_kv *kv = calloc(1, sizeof *kv);
    if (!kv || !(kv->k = calloc((size_t)hp->n_layer, sizeof *kv->k)) ||
        !(kv->v = calloc((size_t)hp->n_layer, sizeof *kv->v))) {
        snprintf(err, errlen, "OpenCL: out of host memory");
        if (kv) { free(kv->k); free(kv); }
        return NULL;
    }
    kv->n_layer = hp->n_layer;
    kv->n_blocks = n_blocks;
    kv->n_ctx = n_ctx;
    kv->kv_dim = hp->n_head_kv * hp->head_dim;
    kv->shift = __builtin_ctz((unsigned)block);
    kv->k16 = type_k == GGML_TYPE_F16;
    kv->v16 = type_v == GGML_TYPE_F16;
    const int64_t elems = (int64_t)n_blocks * block * kv->kv_dim;
    for (int l = 0; l < hp->n_layer; l++) {
        if (on && !on[l]) continue;
        if (!(kv->k[l] = hc_cl_buffer(b->cl, CL_MEM_READ_WRITE, ggml_row_size(type_k, elems), NULL, err, errlen)) ||
            !(kv->v[l] = hc_cl_buffer(b->cl, CL_MEM_READ_WRITE, ggml_row_size(type_v, elems), NULL, err, errlen))) {
            kv_free(be, kv);
            return NULL;
        }
    }
    return kv;
}

/* 1 when layer has a cache here, else a failure */
static int kv_has(clb *b, const hc_kv *kv, int layer)
{
    if (layer >= 0 && layer < kv->n_layer && kv->k[layer]) return 1;
    fail_msg(b, "OpenCL backend: layer %d has no KV cache on the device", layer);
    return 0;
}

/* 1 when layer has a cache here and the step's rows row0..row0+n-1 lie
 * within a sequence's n_ctx positions (*n_pos: the most positions a row
 * reads), else a failure */
static int kv_layer(clb *b, hc_kv *kv, int layer, int row0, int n, int *n_pos)
{
    if (!kv_has(b, kv, layer)) return 0;
    int most = 0;
    for (int i = row0; i < row0 + n; i++)
        if (b->rows->pos[i] + 1 > most) most = b->rows->pos[i] + 1;
    if (most > kv->n_ctx) {
        fail_msg(b, "OpenCL backend: position %d outside the KV cache of %d", most - 1, kv->n_ctx);
        return 0;
    }
    *n_pos = most;
    return 1;
}

static void kv_store(hc_backend *be, hc_kv *kv, int layer, int B, hc_view k, hc_view v)
{
    clb *b = (clb *)be;
    int n_pos;
    if (b->failed || B <= 0 || !kv_layer(b, kv, layer, 0, B, &n_pos)) return;
    cl_mem km = mem_of(k), vm = mem_of(v);
    cl_uint ko = flo(k), vo = flo(v);
    cl_int mb = b->rows->max_blocks, sh = kv->shift, kvd = kv->kv_dim, total = B * kv->kv_dim;
    const pending p = b->pend;
    if (p.kind == PEND_ROPE && p.vm[0] == km && p.vo[0] == ko && p.rn[0] == B && p.r0[0] == 0 && p.d[0] == kvd) {
        b->pend.kind = PEND_NONE;   /* k rotated into the cache, v beside it: one launch */
        args_from(b, b->rope_store, pending_args(b, b->rope_store, &p), A(vm), A(vo), A(kv->k[layer]),
                  A(kv->v[layer]), A(kv->k16), A(kv->v16), A(b->scratch[SCR_SEQ]), A(b->scratch[SCR_TABLE]), A(mb),
                  A(sh), END);
        launch_ew(b, b->rope_store, rope_pairs(&p) + (size_t)total);
        return;
    }
    args(b, b->kv_store, A(km), A(ko), A(vm), A(vo), A(kv->k[layer]), A(kv->v[layer]), A(kv->k16), A(kv->v16),
         A(b->scratch[SCR_POS]),
         A(b->scratch[SCR_SEQ]), A(b->scratch[SCR_TABLE]), A(mb), A(sh), A(kvd), A(total), END);
    launch_ew(b, b->kv_store, (size_t)total);
}

/* Each block's k and v rows one read or write, queued, then one wait
 * (also after a failure: no copy may touch host once this returns). */
static int kv_copy(hc_backend *be, hc_kv *kv, int layer, const int32_t *ids, int n, void *host, int out, char *err,
                   size_t errlen)
{
    clb *b = (clb *)be;
    settle(b);
    const size_t block = ((size_t)1 << kv->shift) * (size_t)kv->kv_dim;   /* a block's elements of k, of v */
    const size_t bytes[2] = { (kv->k16 ? 2 : 4) * block, (kv->v16 ? 2 : 4) * block };
    const int here = !b->failed && kv_has(b, kv, layer);
    for (int i = 0; here && i < n && !b->failed; i++) {
        const cl_mem m[2] = { kv->k[layer], kv->v[layer] };
        char *h = (char *)host + (size_t)i * (bytes[0] + bytes[1]);   /* the block's k, then its v */
        for (int j = 0; j < 2; h += bytes[j], j++) {
            size_t at = (size_t)ids[i] * bytes[j];
            cl_int rc = out ? clEnqueueReadBuffer(b->q, m[j], CL_FALSE, at, bytes[j], h, 0, NULL, NULL)
                            : clEnqueueWriteBuffer(b->q, m[j], CL_FALSE, at, bytes[j], h, 0, NULL, NULL);
            if (rc != CL_SUCCESS) fail(b, out ? "clEnqueueReadBuffer" : "clEnqueueWriteBuffer", rc);
        }
    }
    cl_int rc = clFinish(b->q);
    if (rc != CL_SUCCESS) fail(b, "clFinish", rc);
    return report(b, err, errlen);
}

static void attention(hc_backend *be, hc_kv *kv, int layer, const hc_hparams *hp, hc_view q, int row0, int B,
                      hc_view out)
{
    clb *b = (clb *)be;
    int n_pos;
    if (b->failed || B <= 0 || !kv_layer(b, kv, layer, row0, B, &n_pos)) return;
    const int ch = b->cl->invariant ? HC_CLB_CHUNK_FIXED : hc_clb_attn_chunk(&b->geo, hp->n_head, B, n_pos);
    const int n_chunks = (n_pos + ch - 1) / ch;
    const size_t slots = (size_t)B * (size_t)hp->n_head * (size_t)n_chunks;
    const size_t part_bytes = sizeof(float) * slots * (size_t)hp->head_dim;
    cl_mem part = scratch(b, SCR_ATTN, part_bytes);
    if (!part) return;
    cl_mem qm = mem_of(q), om = mem_of(out);
    cl_uint qo = flo(q), oo = flo(out);
    cl_int hd = hp->head_dim, nh = hp->n_head, group = hp->n_head / hp->n_head_kv, kvd = kv->kv_dim,
           mb = b->rows->max_blocks, sh = kv->shift, r0 = row0, chc = ch, nc = n_chunks;
    cl_mem ml = scratch(b, SCR_ML, sizeof(float) * 2 * slots);
    size_t L = hc_clb_attn_local(&b->geo, hp->head_dim), W = (size_t)hc_clb_attn_lanes(hp->head_dim);
    cl_int tp = hc_clb_attn_tile(hp->head_dim);
    size_t g[3] = { (size_t)n_chunks * L, (size_t)hp->n_head, (size_t)B }, l[3] = { L, 1, 1 };
    args(b, b->attn_part, A(qm), A(qo), A(kv->k[layer]), A(kv->v[layer]), A(kv->k16), A(kv->v16), A(hd), A(nh),
         A(group), A(kvd),
         A(b->scratch[SCR_POS]), A(b->scratch[SCR_SEQ]), A(b->scratch[SCR_TABLE]), A(mb), A(sh), A(r0), A(chc), A(nc), A(tp),
         A(part), A(ml), LOCAL(sizeof(float) * (size_t)ch), LOCAL(sizeof(float) * L),
         LOCAL(sizeof(float) * hc_clb_attn_sums(L, hp->head_dim)), LOCAL(sizeof(float) * (size_t)tp * (W + 1)), END);
    launch(b, b->attn_part, 3, g, l);
    b->pend = (pending){ .kind = PEND_COMBINE, .o = om, .oo = oo, .B = B, .n = nh * hd, .part = part, .ml = ml,
                         .hd = hd, .n_head = nh, .row0 = r0, .ch = chc, .n_chunks = nc };
}

/* ------------------------------------------------------------ the backend */

static void be_free(hc_backend *be)
{
    clb *b = (clb *)be;
    if (!b) return;
    if (b->q) clFinish(b->q);
    times_sent(b);
    free(b->sent);
    free(b->kev);
    free(b->kk);
    cl_kernel *ks[] = { b->mv, b->mm16, b->mm64, b->mt };
    for (int f = 0; f < N_FMT; f++)
        for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
            if (ks[i][f]) clReleaseKernel(ks[i][f]);
    for (int a = 0; a < N_ACT; a++) {
        if (b->ffn_act[a]) clReleaseKernel(b->ffn_act[a]);
        for (int f = 0; f < N_FMT; f++)
            if (b->glu[f][a]) clReleaseKernel(b->glu[f][a]);
    }
    cl_kernel one[] = { b->sum_slices, b->act_bf16, b->act_q8, b->norm, b->norm_q8, b->rope, b->rope_store,
                        b->add_bias, b->add, b->kv_store, b->attn_part, b->attn_combine, b->attn_combine_q8 };
    for (size_t i = 0; i < sizeof one / sizeof *one; i++)
        if (one[i]) clReleaseKernel(one[i]);
    hc_cl_release(b->scratch, N_SCR);
    if (b->prog) clReleaseProgram(b->prog);
    free(b);
}

static const hc_backend_ops ops = {
    .name = "opencl",
    .free = be_free,
    .buf_new = buf_new,
    .buf_free = buf_free,
    .write = write_,
    .send = send,
    .read = read_,
    .host = host,
    .pinned_new = pinned_new,
    .pinned_host = pinned_host,
    .mat_new = mat_new,
    .vec_new = vec_new,
    .dev_free = dev_free,
    .matmul = matmul,
    .norm = norm,
    .rope = rope,
    .add_bias = add_bias,
    .add = add,
    .ffn_act = ffn_act,
    .ffn_neurons = ffn_neurons,
    .batch = batch,
    .kv_new = kv_new,
    .kv_free = kv_free,
    .kv_store = kv_store,
    .kv_copy = kv_copy,
    .attention = attention,
    .sync = sync_,
    .flush = flush,
    .transfers = transfers,
    .kernel_times = kernel_times,
};

void hc_cl_backend_geometry(hc_backend *be, const hc_clb_device *d)
{
    clb *b = (clb *)be;
    b->geo = *d;
    if (b->geo.wg_max > b->kwg) b->geo.wg_max = b->kwg;
}

/* The model.h enums and the tile sizes as -D options: the kernels never see a bare number.
 * exact_div: the device divides as IEEE does when asked (the Q8_0 scale amax/127 and its
 * inverse then have the CPU's bits; without it an ulp can differ). */
static void build_options(char *o, size_t len, int exact_div)
{
    snprintf(o, len,
             "-cl-std=CL1.2 %s-DTOKENS=%d -DMM_ROWS=%d -DMM_ITEMS=%d -DQ8_RUN=%d "
             "-DHC_ACT_SILU=%d -DHC_ACT_RELU=%d -DHC_ACT_GELU=%d -DHC_NORM_RMS=%d -DHC_NORM_LAYER=%d "
             "-DHC_POS_ROPE=%d -DHC_POS_ROPE_NEOX=%d -DHC_FFN_GATED=%d -DHC_FFN_SYMMETRIC=%d -DHC_FFN_SEQUENTIAL=%d",
             exact_div ? "-cl-fp32-correctly-rounded-divide-sqrt " : "", HC_CLB_TOKENS,
             HC_CLB_MM_ROWS, HC_CLB_MM_ITEMS, HC_CLB_Q8_RUN, HC_ACT_SILU, HC_ACT_RELU, HC_ACT_GELU, HC_NORM_RMS, HC_NORM_LAYER,
             HC_POS_ROPE, HC_POS_ROPE_NEOX, HC_FFN_GATED, HC_FFN_SYMMETRIC, HC_FFN_SEQUENTIAL);
}

/* Build the kernels as hc_cl_build does (dp4a where the device has it, the
 * integer dots checked), the outcome in b->dots. */
static int build(clb *b, int exact_div, char *err, size_t errlen)
{
    char opts[640];
    build_options(opts, sizeof opts, exact_div);
    return hc_cl_build(b->cl, b->prog, "the backend's kernels", opts, b->dots, sizeof b->dots, &b->dots_fell_back, err,
                       errlen);
}

const char *hc_cl_backend_dots(const hc_backend *be, int *fell_back)
{
    const clb *b = (const clb *)be;
    if (fell_back) *fell_back = b->dots_fell_back;
    return b->dots;
}

static cl_kernel kernel(cl_program p, const char *name, char *err, size_t errlen)
{
    cl_int rc;
    cl_kernel k = clCreateKernel(p, name, &rc);
    if (rc != CL_SUCCESS) {
        snprintf(err, errlen, "OpenCL: clCreateKernel %s failed: %d %s", name, rc, hc_cl_error_name(rc));
        return NULL;
    }
    return k;
}

int hc_cl_backend_report(hc_backend *be, FILE *out, const char *dir, char *err, size_t errlen)
{
    clb *b = (clb *)be;
    cl_device_id dev;
    CHECK_CL(clGetCommandQueueInfo(b->q, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL), "clGetCommandQueueInfo");
    fprintf(out, "%-9s %-24s %9s %9s %6s\n", "program", "kernel", "private B", "local B", "group");
    if (hc_cl_program_report(b->prog, dev, "backend", out, dir, err, errlen) ||
        hc_cl_program_report(b->cl->prog, dev, "hot_rows", out, dir, err, errlen))
        return -1;
    return 0;
bad:
    return -1;
}

hc_backend *hc_cl_backend_new(hc_cl *cl, char *err, size_t errlen)
{
    return hc_cl_backend_new_with(cl, hc_cl_backend_source, err, errlen);
}

hc_backend *hc_cl_backend_new_with(hc_cl *cl, const char *source, char *err, size_t errlen)
{
    clb *b = calloc(1, sizeof *b);
    cl_int rc;
    cl_device_id dev;
    if (!b) { snprintf(err, errlen, "OpenCL: out of host memory"); return NULL; }
    b->be.ops = &ops;
    b->cl = cl;
    b->q = cl->q;
    CHECK_CL(clGetCommandQueueInfo(cl->q, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL), "clGetCommandQueueInfo");
    size_t wg_max;
    CHECK_CL(clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg_max, &wg_max, NULL), "work group size");
    b->geo = (hc_clb_device){ cl->info.compute_units, wg_max, cl->info.is_gpu };

    const char *src[] = { hc_cl_common_source, source };
    b->prog = clCreateProgramWithSource(cl->ctx, 2, src, NULL, &rc);
    CHECK_CL(rc, "clCreateProgramWithSource");
    cl_device_fp_config fp = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL) != CL_SUCCESS) fp = 0;
    if (build(b, (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0, err, errlen) != 0) goto bad;
    size_t kwg = wg_max;
    for (int f = 0; f < N_FMT; f++) {
        char name[32];
        snprintf(name, sizeof name, "mv_%s", fmt_names[f]);
        if (!(b->mv[f] = kernel(b->prog, name, err, errlen))) goto bad;
        snprintf(name, sizeof name, "mt_%s", fmt_names[f]);
        if (!(b->mt[f] = kernel(b->prog, name, err, errlen))) goto bad;
        cl_kernel ks[] = { b->mv[f], b->mt[f] };
        for (int i = 0; i < 2; i++) {
            size_t w;
            CHECK_CL(clGetKernelWorkGroupInfo(ks[i], dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof w, &w, NULL),
                     "kernel work group size");
            if (w < kwg) kwg = w;
        }
        /* the tiled products take exactly HC_CLB_MM_ITEMS items */
        cl_kernel *mm[] = { &b->mm16[f], &b->mm64[f] };
        for (int i = 0; i < 2; i++) {
            size_t w;
            snprintf(name, sizeof name, "mm%d_%s", i ? 64 : 16, fmt_names[f]);
            if (!(*mm[i] = kernel(b->prog, name, err, errlen))) goto bad;
            CHECK_CL(clGetKernelWorkGroupInfo(*mm[i], dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof w, &w, NULL),
                     "kernel work group size");
            if (w < HC_CLB_MM_ITEMS) {
                snprintf(err, errlen, "OpenCL: kernel %s takes %zu work items, the tiled products need %d", name, w,
                         (int)HC_CLB_MM_ITEMS);
                goto bad;
            }
        }
    }
    static const char *const acts[N_ACT] = { [HC_ACT_SILU] = "ffn_act_silu", [HC_ACT_RELU] = "ffn_act_relu",
                                             [HC_ACT_GELU] = "ffn_act_gelu" };
    for (int a = 0; a < N_ACT; a++) {
        if (!(b->ffn_act[a] = kernel(b->prog, acts[a], err, errlen))) goto bad;
        for (int f = 0; f < N_FMT; f++) {
            char name[32];
            size_t w;
            snprintf(name, sizeof name, "glu_%s_%s", fmt_names[f], acts[a] + strlen("ffn_act_"));
            if (!(b->glu[f][a] = kernel(b->prog, name, err, errlen))) goto bad;
            CHECK_CL(clGetKernelWorkGroupInfo(b->glu[f][a], dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof w, &w, NULL),
                     "kernel work group size");
            if (w < kwg) kwg = w;
        }
    }
    struct { cl_kernel *k; const char *name; } one[] = {
        { &b->sum_slices, "sum_slices" }, { &b->act_bf16, "act_bf16" }, { &b->act_q8, "act_q8" }, { &b->norm, "norm" },
        { &b->norm_q8, "norm_q8" }, { &b->rope, "rope" }, { &b->rope_store, "rope_store" },
        { &b->add_bias, "add_bias" }, { &b->add, "add" }, { &b->kv_store, "kv_store" }, { &b->attn_part, "attn_part" },
        { &b->attn_combine, "attn_combine" }, { &b->attn_combine_q8, "attn_combine_q8" },
    };
    for (size_t i = 0; i < sizeof one / sizeof *one; i++) {
        if (!(*one[i].k = kernel(b->prog, one[i].name, err, errlen))) goto bad;
        size_t w;
        CHECK_CL(clGetKernelWorkGroupInfo(*one[i].k, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof w, &w, NULL),
                 "kernel work group size");
        if (w < kwg) kwg = w;
    }
    /* every launch's local size stays within what every kernel takes */
    b->geo.wg_max = b->kwg = kwg;
    return &b->be;
bad:
    be_free(&b->be);
    return NULL;
}

/* OpenCL device, buffers and kernel launches of the hybrid FFN (see opencl.h).
 * Every OpenCL call is checked; a failure becomes one line in err. */
#include "opencl.h"

#include <CL/cl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "forward.h"
#include "ggml_types.h"
#include "kernels.h"
#include "kernels_gptq.h"
#include "opencl_kernels.h"

/* The GPTQ int8 activation as the device kernel reads it (opencl_kernels.c, x_gptq). */
_Static_assert(sizeof(hc_gptq_xchunk) == 768 && offsetof(hc_gptq_xchunk, d) == 64 &&
               offsetof(hc_gptq_xchunk, lo) == 128 && offsetof(hc_gptq_xchunk, hi) == 384,
               "hc_gptq_xchunk's layout is written into the OpenCL source");

/* The kernels' types: the ggml ones, then INT4-GPTQ (T_GPTQ). */
enum { N_GGML = 4, T_GPTQ = N_GGML, N_TYPES, WG_MAX = 64 };
static const uint32_t cl_types[N_GGML] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
static const char *const cl_type_names[N_TYPES] = { "f32", "f16", "q8_0", "q4_0", "gptq" };

struct hc_cl {
    cl_context ctx;
    cl_command_queue q;
    cl_program prog;
    cl_kernel gate_up[N_TYPES], down[N_TYPES];
    char platform[128], device[160];
    int is_gpu;
    size_t wg;
    cl_ulong mem_size;
    /* scratch shared by all layers (one token-layer in flight at a time) */
    cl_mem x, mask, h, y, zeros;
    size_t x_cap, mask_cap, h_cap, y_cap, zeros_cap;
    void *host_x, *host_mask;   /* staging: the caller may reuse its inputs at once */
};

struct hc_cl_layer {
    hc_cl *cl;
    int ti_gu, ti_down, k, n, B;   /* B: rows of the batch in flight */
    int kind;                      /* hc_cl_rows.kind */
    int rb_gu, rb_down, gs;        /* bytes of a row on the device; GPTQ group size of gate/up (else 1) */
    size_t xb;                     /* bytes of one prepared x */
    cl_mem gate, up, down;         /* gate: the first rows; up NULL for a sequential FFN */
    cl_mem first_b, up_b;          /* NULL: none (cl->zeros) */
    cl_mem down_norm;              /* NULL: the gate criterion (cl->zeros unused) */
    cl_mem pairs, pair_row;        /* GPTQ down columns: the pairs table and each row's entry; else NULL */
    cl_event first, last;
};

static int type_index(const hc_weight *w)
{
    if (w->kind == HC_WEIGHT_GPTQ) return T_GPTQ;
    for (int i = 0; i < N_GGML; i++)
        if (w->kind == HC_WEIGHT_GGML && cl_types[i] == w->type) return i;
    return -1;
}

int hc_cl_supports(const hc_weight *w, int down)
{
    const hc_gptq *g = w->ext;
    if (w->kind == HC_WEIGHT_GPTQ) return down ? g->sm_row && g->gs == 1 && !g->perm : !g->sm_row;
    return type_index(w) >= 0;
}

static const char *cl_error_name(cl_int e)
{
    switch (e) {
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL platform installed)";
    default: return "OpenCL error";
    }
}

/* Check one call: on failure say which and return -1. */
#define CHECK_CL(call, what) do { \
        cl_int rc_ = (call); \
        if (rc_ != CL_SUCCESS) { snprintf(err, errlen, "OpenCL: %s failed: %d %s", what, rc_, cl_error_name(rc_)); goto bad; } \
    } while (0)

static cl_mem new_buffer(hc_cl *cl, cl_mem_flags flags, size_t bytes, const void *host, char *err, size_t errlen)
{
    cl_int rc;
    cl_mem m = clCreateBuffer(cl->ctx, flags | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes ? bytes : 1, (void *)host, &rc);
    if (rc != CL_SUCCESS) {
        snprintf(err, errlen, "OpenCL: a device buffer of %zu bytes: %d %s", bytes, rc, cl_error_name(rc));
        return NULL;
    }
    return m;
}

/* First GPU of any platform, else the first device of the first platform that has one. */
static int pick_device(cl_platform_id *plat, cl_device_id *dev, char *err, size_t errlen)
{
    cl_uint np = 0;
    cl_platform_id ps[16];
    CHECK_CL(clGetPlatformIDs(16, ps, &np), "clGetPlatformIDs");
    if (np > 16) np = 16;
    for (int want_gpu = 1; want_gpu >= 0; want_gpu--)
        for (cl_uint i = 0; i < np; i++) {
            cl_uint nd = 0;
            if (clGetDeviceIDs(ps[i], want_gpu ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_ALL, 1, dev, &nd) == CL_SUCCESS && nd) {
                *plat = ps[i];
                return 0;
            }
        }
    snprintf(err, errlen, "OpenCL: %u platform(s) but no device", np);
    return -1;
bad:
    return -1;
}

hc_cl *hc_cl_open(char *err, size_t errlen)
{
    hc_cl *cl = calloc(1, sizeof *cl);
    cl_platform_id plat;
    cl_device_id dev;
    cl_int rc;
    if (!cl) { snprintf(err, errlen, "OpenCL: out of memory"); return NULL; }
    if (pick_device(&plat, &dev, err, errlen)) goto bad;
    cl_device_type type;
    size_t wg_max;
    CHECK_CL(clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof cl->platform - 1, cl->platform, NULL), "platform name");
    CHECK_CL(clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof cl->device - 1, cl->device, NULL), "device name");
    CHECK_CL(clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL), "device type");
    CHECK_CL(clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof cl->mem_size, &cl->mem_size, NULL), "memory size");
    CHECK_CL(clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg_max, &wg_max, NULL), "work group size");
    cl->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
    for (cl->wg = WG_MAX; cl->wg > wg_max; cl->wg /= 2) {}

    cl->ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &rc);
    CHECK_CL(rc, "clCreateContext");
    cl->q = clCreateCommandQueue(cl->ctx, dev, CL_QUEUE_PROFILING_ENABLE, &rc);
    CHECK_CL(rc, "clCreateCommandQueue");
    const char *src = hc_cl_source;
    cl->prog = clCreateProgramWithSource(cl->ctx, 1, &src, NULL, &rc);
    CHECK_CL(rc, "clCreateProgramWithSource");
    char opts[64];
    snprintf(opts, sizeof opts, "-DWG=%zu", cl->wg);
    rc = clBuildProgram(cl->prog, 1, &dev, opts, NULL, NULL);
    if (rc != CL_SUCCESS) {
        char log[512] = "";
        clGetProgramBuildInfo(cl->prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        for (char *p = log; *p; p++) if (*p == '\n') *p = ' ';
        snprintf(err, errlen, "OpenCL: building the kernels failed: %d %s: %.300s", rc, cl_error_name(rc), log);
        goto bad;
    }
    for (int i = 0; i < N_TYPES; i++) {
        char name[32];
        snprintf(name, sizeof name, "gate_up_%s", cl_type_names[i]);
        cl->gate_up[i] = clCreateKernel(cl->prog, name, &rc);
        CHECK_CL(rc, "clCreateKernel");
        snprintf(name, sizeof name, "down_%s", cl_type_names[i]);
        cl->down[i] = clCreateKernel(cl->prog, name, &rc);
        CHECK_CL(rc, "clCreateKernel");
        size_t kwg, kwg2;
        CHECK_CL(clGetKernelWorkGroupInfo(cl->gate_up[i], dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL),
                 "kernel work group size");
        CHECK_CL(clGetKernelWorkGroupInfo(cl->down[i], dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg2, &kwg2, NULL),
                 "kernel work group size");
        if (kwg2 < kwg) kwg = kwg2;
        if (kwg < cl->wg) {
            snprintf(err, errlen, "OpenCL: the device runs work groups of %zu, the kernels need %zu", kwg, cl->wg);
            goto bad;
        }
    }
    return cl;
bad:
    hc_cl_free(cl);
    return NULL;
}

void hc_cl_free(hc_cl *cl)
{
    if (!cl) return;
    cl_mem ms[] = { cl->x, cl->mask, cl->h, cl->y, cl->zeros };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) if (ms[i]) clReleaseMemObject(ms[i]);
    for (int i = 0; i < N_TYPES; i++) {
        if (cl->gate_up[i]) clReleaseKernel(cl->gate_up[i]);
        if (cl->down[i]) clReleaseKernel(cl->down[i]);
    }
    if (cl->prog) clReleaseProgram(cl->prog);
    if (cl->q) clReleaseCommandQueue(cl->q);
    if (cl->ctx) clReleaseContext(cl->ctx);
    free(cl->host_x);
    free(cl->host_mask);
    free(cl);
}

const char *hc_cl_platform(const hc_cl *cl) { return cl->platform; }
const char *hc_cl_device(const hc_cl *cl) { return cl->device; }
int hc_cl_is_gpu(const hc_cl *cl) { return cl->is_gpu; }
uint64_t hc_cl_mem_size(const hc_cl *cl) { return cl->mem_size; }

uint64_t hc_cl_rows_bytes(const hc_weight *w, int k)
{
    if (w->kind == HC_WEIGHT_GPTQ) return hc_gptq_rows_bytes(w->ext, k);
    return (uint64_t)k * ggml_row_size(w->type, w->n);
}

/* Grow a scratch buffer (device and host staging) to `need` bytes. */
static int grow(hc_cl *cl, cl_mem *m, size_t *cap, size_t need, void **host, char *err, size_t errlen)
{
    if (need <= *cap) return 0;
    if (*m) clReleaseMemObject(*m);
    *m = new_buffer(cl, CL_MEM_READ_WRITE, need, NULL, err, errlen);
    *cap = *m ? need : 0;
    if (!*m) return -1;
    if (host) {
        free(*host);
        if (!(*host = malloc(need))) { snprintf(err, errlen, "OpenCL: out of host memory"); return -1; }
    }
    return 0;
}

/* A device buffer of w's rows (*rb bytes each): ggml rows as they are, a GPTQ
 * row as its codes then (gate/up) its pairs; a GPTQ down column's pairs
 * table and entries go to *pairs and *pair_row. */
static cl_mem rows_buffer(hc_cl *cl, const hc_weight *w, int *rb, cl_mem *pairs, cl_mem *pair_row, char *err,
                          size_t errlen)
{
    if (w->kind != HC_WEIGHT_GPTQ) {
        *rb = (int)ggml_row_size(w->type, w->n);
        return new_buffer(cl, CL_MEM_READ_ONLY, (size_t)*rb * (size_t)w->rows, w->data, err, errlen);
    }
    const hc_gptq *g = w->ext;
    size_t cb = (size_t)g->kp / 2, pb = sizeof(float) * 2 * (size_t)g->n_groups, own = g->sm_row ? 0 : pb;
    *rb = (int)(cb + own);
    if (g->sm_row &&
        (!(*pairs = new_buffer(cl, CL_MEM_READ_ONLY, pb * (size_t)g->n_sm, g->sm, err, errlen)) ||
         !(*pair_row = new_buffer(cl, CL_MEM_READ_ONLY, sizeof(int32_t) * (size_t)g->rows, g->sm_row, err, errlen))))
        return NULL;
    char *host = malloc((size_t)*rb * (size_t)g->rows);
    if (!host) {
        snprintf(err, errlen, "OpenCL: out of memory");
        return NULL;
    }
    for (int r = 0; r < g->rows; r++) {
        memcpy(host + (size_t)r * (size_t)*rb, hc_gptq_codes(g, r), cb);
        memcpy(host + (size_t)r * (size_t)*rb + cb, hc_gptq_sm(g, r), own);
    }
    cl_mem m = new_buffer(cl, CL_MEM_READ_ONLY, (size_t)*rb * (size_t)g->rows, host, err, errlen);
    free(host);
    return m;
}

hc_cl_layer *hc_cl_layer_new(hc_cl *cl, const hc_cl_rows *rows, int k, int n_embd, char *err, size_t errlen)
{
    hc_cl_layer *L = calloc(1, sizeof *L);
    if (!L) { snprintf(err, errlen, "OpenCL: out of memory"); return NULL; }
    const hc_weight *gu = &rows->first, *dn = &rows->down;
    *L = (hc_cl_layer){ .cl = cl, .ti_gu = type_index(gu), .ti_down = type_index(dn), .k = k, .n = n_embd,
                        .kind = rows->kind, .gs = gu->kind == HC_WEIGHT_GPTQ ? ((const hc_gptq *)gu->ext)->gs : 1 };
    if (!hc_cl_supports(gu, 0) || !hc_cl_supports(dn, 1) || k < 1 || gu->rows != k || dn->rows != k ||
        gu->n != n_embd || dn->n != n_embd) {
        snprintf(err, errlen, "OpenCL: no kernel for %s/%s rows", hc_weight_type_name(gu), hc_weight_type_name(dn));
        goto bad;
    }
    L->xb = hc_weight_act_bytes(gu);
    size_t bb = sizeof(float) * (size_t)k;
    cl_mem_flags ro = CL_MEM_READ_ONLY;
    if (!(L->gate = rows_buffer(cl, gu, &L->rb_gu, NULL, NULL, err, errlen)) ||
        (rows->up.kind != HC_WEIGHT_NONE && !(L->up = rows_buffer(cl, &rows->up, &L->rb_gu, NULL, NULL, err, errlen))) ||
        !(L->down = rows_buffer(cl, dn, &L->rb_down, &L->pairs, &L->pair_row, err, errlen)) ||
        (rows->first_b && !(L->first_b = new_buffer(cl, ro, bb, rows->first_b, err, errlen))) ||
        (rows->up_b && !(L->up_b = new_buffer(cl, ro, bb, rows->up_b, err, errlen))) ||
        (rows->down_norm && !(L->down_norm = new_buffer(cl, ro, bb, rows->down_norm, err, errlen))))
        goto bad;
    if (cl->zeros_cap < bb) {   /* the bias of rows without one */
        float *z = calloc((size_t)k, sizeof *z);
        if (cl->zeros) clReleaseMemObject(cl->zeros);
        cl->zeros = z ? new_buffer(cl, ro, bb, z, err, errlen) : NULL;
        cl->zeros_cap = cl->zeros ? bb : 0;
        free(z);
        if (!cl->zeros) goto bad;
    }
    if (grow(cl, &cl->x, &cl->x_cap, L->xb, &cl->host_x, err, errlen) ||
        grow(cl, &cl->mask, &cl->mask_cap, (size_t)k, &cl->host_mask, err, errlen) ||
        grow(cl, &cl->h, &cl->h_cap, sizeof(float) * (size_t)k, NULL, err, errlen) ||
        grow(cl, &cl->y, &cl->y_cap, sizeof(float) * (size_t)n_embd, NULL, err, errlen))
        goto bad;
    return L;
bad:
    hc_cl_layer_free(L);
    return NULL;
}

void hc_cl_layer_free(hc_cl_layer *L)
{
    if (!L) return;
    if (L->gate) clReleaseMemObject(L->gate);
    if (L->up) clReleaseMemObject(L->up);
    if (L->down) clReleaseMemObject(L->down);
    if (L->first_b) clReleaseMemObject(L->first_b);
    if (L->up_b) clReleaseMemObject(L->up_b);
    if (L->down_norm) clReleaseMemObject(L->down_norm);
    if (L->pairs) clReleaseMemObject(L->pairs);
    if (L->pair_row) clReleaseMemObject(L->pair_row);
    free(L);
}

int hc_cl_layer_start(hc_cl_layer *L, const void *x, size_t x_stride, int B, const uint8_t *mask, int act, float t_act,
                      char *err, size_t errlen)
{
    hc_cl *cl = L->cl;
    cl_int n = L->n, k = L->k, a = act;
    cl_kernel gu = cl->gate_up[L->ti_gu], dn = cl->down[L->ti_down];
    size_t xb = L->xb;
    cl_int xbi = (cl_int)xb, rbg = L->rb_gu, rbd = L->rb_down, gs = L->gs;
    if (grow(cl, &cl->x, &cl->x_cap, xb * (size_t)B, &cl->host_x, err, errlen) ||
        grow(cl, &cl->mask, &cl->mask_cap, (size_t)k * (size_t)B, &cl->host_mask, err, errlen) ||
        grow(cl, &cl->h, &cl->h_cap, sizeof(float) * (size_t)k * (size_t)B, NULL, err, errlen) ||
        grow(cl, &cl->y, &cl->y_cap, sizeof(float) * (size_t)n * (size_t)B, NULL, err, errlen))
        return -1;
    L->B = B;
    for (int b = 0; b < B; b++) memcpy((char *)cl->host_x + (size_t)b * xb, (const char *)x + (size_t)b * x_stride, xb);
    memcpy(cl->host_mask, mask, (size_t)k * (size_t)B);
    CHECK_CL(clEnqueueWriteBuffer(cl->q, cl->x, CL_FALSE, 0, xb * (size_t)B, cl->host_x, 0, NULL, &L->first), "write x");
    CHECK_CL(clEnqueueWriteBuffer(cl->q, cl->mask, CL_FALSE, 0, (size_t)k * (size_t)B, cl->host_mask, 0, NULL, NULL),
             "write mask");
    cl_mem up = L->up ? L->up : L->gate, fb = L->first_b ? L->first_b : cl->zeros;
    cl_mem ub = L->up_b ? L->up_b : cl->zeros, dnorm = L->down_norm ? L->down_norm : cl->zeros;
    cl_int kind = L->kind, contrib = L->down_norm != NULL;
    CHECK_CL(clSetKernelArg(gu, 0, sizeof(cl_mem), &L->gate), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 1, sizeof(cl_mem), &up), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 2, sizeof(cl_mem), &cl->x), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 3, sizeof(cl_mem), &cl->mask), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 4, sizeof n, &n), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 5, sizeof a, &a), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 6, sizeof t_act, &t_act), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 7, sizeof(cl_mem), &cl->h), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 8, sizeof k, &k), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 9, sizeof xbi, &xbi), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 10, sizeof kind, &kind), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 11, sizeof(cl_mem), &fb), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 12, sizeof(cl_mem), &ub), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 13, sizeof(cl_mem), &dnorm), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 14, sizeof contrib, &contrib), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 15, sizeof rbg, &rbg), "gate_up arg");
    CHECK_CL(clSetKernelArg(gu, 16, sizeof gs, &gs), "gate_up arg");
    size_t g1[2] = { (size_t)k * cl->wg, (size_t)B }, l1[2] = { cl->wg, 1 };
    CHECK_CL(clEnqueueNDRangeKernel(cl->q, gu, 2, NULL, g1, l1, 0, NULL, NULL), "gate_up kernel");
    CHECK_CL(clSetKernelArg(dn, 0, sizeof(cl_mem), &L->down), "down arg");
    CHECK_CL(clSetKernelArg(dn, 1, sizeof(cl_mem), &cl->h), "down arg");
    CHECK_CL(clSetKernelArg(dn, 2, sizeof k, &k), "down arg");
    CHECK_CL(clSetKernelArg(dn, 3, sizeof n, &n), "down arg");
    CHECK_CL(clSetKernelArg(dn, 4, sizeof(cl_mem), &cl->y), "down arg");
    cl_mem pairs = L->pairs ? L->pairs : cl->zeros, pair_row = L->pair_row ? L->pair_row : cl->zeros;
    CHECK_CL(clSetKernelArg(dn, 5, sizeof rbd, &rbd), "down arg");
    CHECK_CL(clSetKernelArg(dn, 6, sizeof(cl_mem), &pairs), "down arg");
    CHECK_CL(clSetKernelArg(dn, 7, sizeof(cl_mem), &pair_row), "down arg");
    /* a group covers 4 * min(wg, 8) columns (opencl_kernels.c: DCOLS) */
    size_t dcols = 4 * (cl->wg < 8 ? cl->wg : 8);
    size_t g2[2] = { ((size_t)n + dcols - 1) / dcols * cl->wg, (size_t)B }, l2[2] = { cl->wg, 1 };
    CHECK_CL(clEnqueueNDRangeKernel(cl->q, dn, 2, NULL, g2, l2, 0, NULL, NULL), "down kernel");
    CHECK_CL(clFlush(cl->q), "clFlush");
    return 0;
bad:
    if (L->first) clReleaseEvent(L->first);
    L->first = NULL;
    return -1;
}

int hc_cl_layer_finish(hc_cl_layer *L, float *y, float *h, double *dev_s, char *err, size_t errlen)
{
    hc_cl *cl = L->cl;
    cl_ulong t0, t1;
    size_t B = (size_t)L->B;
    CHECK_CL(clEnqueueReadBuffer(cl->q, cl->h, CL_FALSE, 0, sizeof(float) * (size_t)L->k * B, h, 0, NULL, NULL), "read h");
    CHECK_CL(clEnqueueReadBuffer(cl->q, cl->y, CL_TRUE, 0, sizeof(float) * (size_t)L->n * B, y, 0, NULL, &L->last), "read y");
    CHECK_CL(clGetEventProfilingInfo(L->first, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL), "profiling");
    CHECK_CL(clGetEventProfilingInfo(L->last, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL), "profiling");
    if (t1 > t0) *dev_s += (double)(t1 - t0) * 1e-9;
    clReleaseEvent(L->first);
    clReleaseEvent(L->last);
    L->first = L->last = NULL;
    return 0;
bad:
    if (L->first) clReleaseEvent(L->first);
    if (L->last) clReleaseEvent(L->last);
    L->first = L->last = NULL;
    return -1;
}

void hc_cl_layer_ref(const hc_cl_rows *rows, int k, int n_embd, const void *x, const uint8_t *mask, int act,
                     float t_act, float *y, float *h)
{
    memset(y, 0, sizeof(float) * (size_t)n_embd);
    for (int r = 0; r < k; r++) {
        h[r] = 0.0f;
        if (!mask[r]) continue;
        float g, u;
        hc_weight_matvec(&rows->first, HC_ISA_SCALAR, r, r + 1, x, 0, 1, &g, 1);
        float a = hc_act1(act, g + (rows->first_b ? rows->first_b[r] : 0.0f));
        if (!hc_keep_act(a, rows->down_norm ? 0.0f : t_act)) continue;
        if (rows->kind == 2) {
            h[r] = a;
        } else {
            hc_weight_matvec(&rows->up, HC_ISA_SCALAR, r, r + 1, x, 0, 1, &u, 1);
            u += rows->up_b ? rows->up_b[r] : 0.0f;
            h[r] = a * (rows->kind == 1 ? hc_act1(act, u) : u);
        }
        if (rows->down_norm && !hc_keep_act(fabsf(h[r]) * rows->down_norm[r], t_act)) h[r] = 0.0f;
        hc_weight_axpy(&rows->down, HC_ISA_SCALAR, r, 0, n_embd, h[r], y);
    }
}

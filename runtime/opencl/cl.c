/* The OpenCL device: listing, opening (context, queue, the kernels built)
 * and closing (runtime/opencl.h). Every OpenCL call is checked; a failure
 * becomes one line in err. */
#include <stdlib.h>
#include <string.h>

#include <CL/cl_ext.h>

#include "atomic_file.h"
#include "cl_internal.h"
#include "cli.h"
#include "kernels_gptq.h"

/* The GPTQ int8 activation as the device kernel reads it (kernels/hot_rows.cl, x_gptq). */
_Static_assert(sizeof(hc_gptq_xchunk) == 768 && offsetof(hc_gptq_xchunk, d) == 64 &&
               offsetof(hc_gptq_xchunk, lo) == 128 && offsetof(hc_gptq_xchunk, hi) == 384,
               "hc_gptq_xchunk's layout is written into the OpenCL source");

const char *hc_cl_error_name(cl_int e)
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

void hc_cl_release(cl_mem *ms, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ms[i]) clReleaseMemObject(ms[i]);
}

/* The data goes in by a blocking write on the queue, not CL_MEM_COPY_HOST_PTR:
 * NVIDIA's driver keeps such a buffer's copy on the host until a kernel first
 * uses it, so a model's weights crossed the bus inside its first prompt. */
cl_mem hc_cl_buffer(hc_cl *cl, cl_mem_flags flags, size_t bytes, const void *host, char *err, size_t errlen)
{
    cl_int rc;
    cl_mem m = clCreateBuffer(cl->ctx, flags, bytes ? bytes : 1, NULL, &rc);
    if (rc == CL_SUCCESS && host && bytes)
        rc = clEnqueueWriteBuffer(cl->q, m, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
    if (rc != CL_SUCCESS) {
        snprintf(err, errlen, "OpenCL: a device buffer of %zu bytes: %d %s", bytes, rc, hc_cl_error_name(rc));
        if (m) clReleaseMemObject(m);
        return NULL;
    }
    return m;
}

void *hc_cl_pinned(hc_cl *cl, size_t bytes, cl_mem *m, char *err, size_t errlen)
{
    cl_int rc = CL_SUCCESS;
    void *host = NULL;
    if ((*m = hc_cl_buffer(cl, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, NULL, err, errlen)))
        host = clEnqueueMapBuffer(cl->q, *m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes ? bytes : 1, 0, NULL, NULL,
                                  &rc);
    if (host || !*m) return host;
    snprintf(err, errlen, "OpenCL: mapping %zu bytes of pinned memory failed: %d %s", bytes, rc, hc_cl_error_name(rc));
    clReleaseMemObject(*m);
    *m = NULL;
    return NULL;
}

/* Whether the device runs PTX's dp4a: an NVIDIA GPU (cl_nv_device_attribute_query) of
 * compute capability 6.1 or later. HC_CL_DP4A=0 says no, 1 yes whatever the device (its
 * builds then fail on any other device, and hc_cl_build says so and goes without); any
 * other value is refused, as HC_KERNELS'. The capability into *major, *minor. */
static int wants_dp4a(cl_device_id dev, cl_uint *major, cl_uint *minor)
{
    const char *env = getenv("HC_CL_DP4A");
    size_t n = 0;
    char *ext = NULL;
    *major = *minor = 0;
    if (env && *env) {
        if (strcmp(env, "0") && strcmp(env, "1")) hc_die("HC_CL_DP4A: '%s' is not 0 or 1", env);
        return env[0] == '1';
    }
    int nv = clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &n) == CL_SUCCESS && (ext = calloc(n + 1, 1)) &&
             clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, n, ext, NULL) == CL_SUCCESS &&
             strstr(ext, "cl_nv_device_attribute_query");
    free(ext);
    if (!nv || clGetDeviceInfo(dev, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, sizeof *major, major, NULL) != CL_SUCCESS ||
        clGetDeviceInfo(dev, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV, sizeof *minor, minor, NULL) != CL_SUCCESS)
        return 0;
    return *major > 6 || (*major == 6 && *minor >= 1);
}

/* The build log's start, on one line (the call takes only a buffer the whole log fits) */
static void build_log(cl_program p, cl_device_id dev, char *log, size_t len)
{
    size_t n = 0;
    char *all = NULL;
    log[0] = 0;
    if (clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS && n && (all = malloc(n + 1)) &&
        clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, n, all, NULL) == CL_SUCCESS) {
        all[n] = 0;
        snprintf(log, len, "%s", all);
    }
    free(all);
    for (char *c = log; *c; c++) if (*c == '\n' || *c == '\r') *c = ' ';
}

/* The host's idot4 (b's bytes signed) or udot4 (unsigned) of b and c onto a. */
static int host_dot4(cl_uint b, cl_uint c, int a, int b_signed)
{
    for (int k = 0; k < 4; k++) {
        const int x = (int)(b >> 8 * k & 0xff), y = (int8_t)(c >> 8 * k & 0xff);
        a += (b_signed ? (int8_t)x : x) * y;
    }
    return a;
}

/* Program p's four-byte dots (kernels/common.cl's dots_check) against the
 * host's, on words that hold every byte's extremes and on a splitmix64
 * stream: 0 when all agree, 1 with the first that does not in why, -1 when
 * the check could not run (err). The check's kernel is released, so the
 * program can be built again. */
#define DOTS_CHECKED 64
static int dots_differ(hc_cl *cl, cl_program p, char *why, size_t whylen, char *err, size_t errlen)
{
    static const cl_uint edge[] = { 0x00000000u, 0x7f7f7f7fu, 0x80808080u, 0xffffffffu, 0x807f01ffu, 0x01ff807fu };
    cl_uint bw[DOTS_CHECKED], cw[DOTS_CHECKED];
    cl_int got[2 * DOTS_CHECKED];
    uint64_t s = 1;
    for (int i = 0; i < DOTS_CHECKED; i++) {
        const int e = (int)(sizeof edge / sizeof *edge);
        bw[i] = i < e * e ? edge[i / e] : (cl_uint)hc_splitmix64(&s);
        cw[i] = i < e * e ? edge[i % e] : (cl_uint)hc_splitmix64(&s);
    }
    cl_int rc;
    cl_mem m[3] = { NULL, NULL, NULL };
    cl_kernel k = clCreateKernel(p, "dots_check", &rc);
    const size_t n = DOTS_CHECKED;
    if (rc == CL_SUCCESS) m[0] = clCreateBuffer(cl->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof bw, bw, &rc);
    if (rc == CL_SUCCESS) m[1] = clCreateBuffer(cl->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof cw, cw, &rc);
    if (rc == CL_SUCCESS) m[2] = clCreateBuffer(cl->ctx, CL_MEM_WRITE_ONLY, sizeof got, NULL, &rc);
    for (cl_uint a = 0; a < 3 && rc == CL_SUCCESS; a++) rc = clSetKernelArg(k, a, sizeof m[a], &m[a]);
    if (rc == CL_SUCCESS) rc = clEnqueueNDRangeKernel(cl->q, k, 1, NULL, &n, NULL, 0, NULL, NULL);
    if (rc == CL_SUCCESS) rc = clEnqueueReadBuffer(cl->q, m[2], CL_TRUE, 0, sizeof got, got, 0, NULL, NULL);
    for (int i = 0; i < 3; i++) if (m[i]) clReleaseMemObject(m[i]);
    if (k) clReleaseKernel(k);
    if (rc != CL_SUCCESS) {
        snprintf(err, errlen, "OpenCL: checking the integer dots failed: %d %s", rc, hc_cl_error_name(rc));
        return -1;
    }
    for (int i = 0; i < 2 * DOTS_CHECKED; i++) {
        const int want = host_dot4(bw[i / 2], cw[i / 2], i / 2 - 32, i % 2 == 0);
        if (got[i] != want) {
            snprintf(why, whylen, "%s(0x%08x, 0x%08x, %d) gave %d, not %d", i % 2 ? "udot4" : "idot4", bw[i / 2],
                     cw[i / 2], i / 2 - 32, got[i], want);
            return 1;
        }
    }
    return 0;
}

int hc_cl_build(hc_cl *cl, cl_program p, const char *what, const char *opts, char *dots, size_t dotslen, int *fell_back,
                char *err, size_t errlen)
{
    char all[1024], log[1024], why[256];
    cl_uint major, minor;
    int dp4a = wants_dp4a(cl->dev, &major, &minor);
    *fell_back = 0;
    for (;;) {
        snprintf(all, sizeof all, "%s%s", opts, dp4a ? " -DHC_DP4A=1" : "");
        cl_int rc = clBuildProgram(p, 1, &cl->dev, all, NULL, NULL);
        if (rc != CL_SUCCESS) build_log(p, cl->dev, log, sizeof log);
        if (rc != CL_SUCCESS && !dp4a) {
            snprintf(err, errlen, "OpenCL: building %s failed: %d %s: %.400s", what, rc, hc_cl_error_name(rc), log);
            return -1;
        }
        const int differ = rc == CL_SUCCESS ? dots_differ(cl, p, why, sizeof why, err, errlen) : 0;
        if (differ < 0) return -1;
        if (rc == CL_SUCCESS && !differ) break;
        if (!dp4a) {
            snprintf(err, errlen, "OpenCL: the device's integer dots differ from the host's: %s", why);
            return -1;
        }
        if (rc != CL_SUCCESS) snprintf(dots, dotslen, "bytes widened: the build with dp4a failed (%.200s)", log);
        else snprintf(dots, dotslen, "bytes widened: dp4a's sums differed from the host's (%s)", why);
        *fell_back = 1;
        dp4a = 0;
    }
    if (*fell_back) return 0;
    if (dp4a && major) snprintf(dots, dotslen, "dp4a (PTX, compute capability %u.%u)", major, minor);
    else snprintf(dots, dotslen, dp4a ? "dp4a (PTX)" : "bytes widened");
    return 0;
}

/* Up to max devices of every platform, platform by platform: what each is
 * (out) and its id (ids). The count, or -1 + err. */
static int list_devices(hc_cl_info *out, cl_device_id *ids, int max, char *err, size_t errlen)
{
    cl_uint np = 0;
    cl_platform_id ps[16];
    int n = 0;
    CHECK_CL(clGetPlatformIDs(16, ps, &np), "clGetPlatformIDs");
    if (np > 16) np = 16;
    for (cl_uint p = 0; p < np && n < max; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, (cl_uint)(max - n), ids + n, &nd) != CL_SUCCESS) continue;
        if (nd > (cl_uint)(max - n)) nd = (cl_uint)(max - n);
        for (cl_uint d = 0; d < nd; d++, n++) {
            hc_cl_info *i = &out[n];
            cl_device_type type;
            cl_uint cu;
            cl_ulong mem;
            memset(i, 0, sizeof *i);
            CHECK_CL(clGetPlatformInfo(ps[p], CL_PLATFORM_NAME, sizeof i->platform - 1, i->platform, NULL),
                     "platform name");
            CHECK_CL(clGetDeviceInfo(ids[n], CL_DEVICE_NAME, sizeof i->name - 1, i->name, NULL), "device name");
            CHECK_CL(clGetDeviceInfo(ids[n], CL_DEVICE_VERSION, sizeof i->version - 1, i->version, NULL),
                     "device version");
            CHECK_CL(clGetDeviceInfo(ids[n], CL_DEVICE_TYPE, sizeof type, &type, NULL), "device type");
            CHECK_CL(clGetDeviceInfo(ids[n], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL), "compute units");
            CHECK_CL(clGetDeviceInfo(ids[n], CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL), "memory size");
            i->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
            i->compute_units = cu;
            i->mem_size = mem;
        }
    }
    return n;
bad:
    return -1;
}

int hc_cl_list(hc_cl_info *out, int max, char *err, size_t errlen)
{
    cl_device_id ids[HC_CL_MAX_DEVICES];
    return list_devices(out, ids, max < HC_CL_MAX_DEVICES ? max : HC_CL_MAX_DEVICES, err, errlen);
}

hc_cl *hc_cl_open(const char *device, int flags, char *err, size_t errlen)
{
    hc_cl *cl = calloc(1, sizeof *cl);
    hc_cl_info list[HC_CL_MAX_DEVICES];
    cl_device_id ids[HC_CL_MAX_DEVICES];
    cl_int rc;
    if (!cl) { snprintf(err, errlen, "OpenCL: out of memory"); return NULL; }
    int n = list_devices(list, ids, HC_CL_MAX_DEVICES, err, errlen);
    if (n < 0 || (cl->index = hc_cl_pick(list, n, device, err, errlen)) < 0) goto bad;
    cl->info = list[cl->index];
    cl_device_id dev = cl->dev = ids[cl->index];
    size_t wg_max;
    CHECK_CL(clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg_max, &wg_max, NULL), "work group size");
    for (cl->wg = HC_CL_WG_MAX; cl->wg > wg_max; cl->wg /= 2) {}

    cl->ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &rc);
    CHECK_CL(rc, "clCreateContext");
    cl->profile = (flags & HC_CL_PROFILE) != 0;
    cl->invariant = (flags & HC_CL_BATCH_INVARIANT) != 0;
    cl->q = clCreateCommandQueue(cl->ctx, dev, cl->profile ? CL_QUEUE_PROFILING_ENABLE : 0, &rc);
    CHECK_CL(rc, "clCreateCommandQueue");
    const char *src[] = { hc_cl_common_source, hc_cl_hot_rows_source };
    cl->prog = clCreateProgramWithSource(cl->ctx, 2, src, NULL, &rc);
    CHECK_CL(rc, "clCreateProgramWithSource");
    char opts[64];
    snprintf(opts, sizeof opts, "-DWG=%zu -DTILE=%d", cl->wg, HC_CL_TILE);
    if (hc_cl_build(cl, cl->prog, "the hot rows' kernels", opts, cl->dots, sizeof cl->dots, &cl->dots_fell_back, err,
                    errlen))
        goto bad;
    cl->down_sum = clCreateKernel(cl->prog, "down_sum", &rc);
    CHECK_CL(rc, "clCreateKernel");
    cl->count_hot = clCreateKernel(cl->prog, "count_hot", &rc);
    CHECK_CL(rc, "clCreateKernel");
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < HC_CL_N_TYPES; i++) {
            char name[32];
            snprintf(name, sizeof name, "gate_up%d_%s", t ? HC_CL_TILE : 1, hc_cl_type_names[i]);
            cl->gate_up[t][i] = clCreateKernel(cl->prog, name, &rc);
            CHECK_CL(rc, "clCreateKernel");
            snprintf(name, sizeof name, "down%d_%s", t ? HC_CL_TILE : 1, hc_cl_type_names[i]);
            cl->down[t][i] = clCreateKernel(cl->prog, name, &rc);
            CHECK_CL(rc, "clCreateKernel");
            size_t kwg, kwg2;
            CHECK_CL(clGetKernelWorkGroupInfo(cl->gate_up[t][i], dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL),
                     "kernel work group size");
            CHECK_CL(clGetKernelWorkGroupInfo(cl->down[t][i], dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg2, &kwg2, NULL),
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
    hc_cl_stage *st[] = { &cl->up_x, &cl->up_mask, &cl->up_truth, &cl->down_h, &cl->down_y };
    for (size_t i = 0; i < sizeof st / sizeof *st; i++) hc_cl_stage_free(cl, st[i]);
    cl_mem ms[] = { cl->x, cl->mask, cl->h, cl->y, cl->part, cl->zeros, cl->truth };
    hc_cl_release(ms, sizeof ms / sizeof *ms);
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < HC_CL_N_TYPES; i++) {
            if (cl->gate_up[t][i]) clReleaseKernel(cl->gate_up[t][i]);
            if (cl->down[t][i]) clReleaseKernel(cl->down[t][i]);
        }
    if (cl->down_sum) clReleaseKernel(cl->down_sum);
    if (cl->count_hot) clReleaseKernel(cl->count_hot);
    if (cl->prog) clReleaseProgram(cl->prog);
    if (cl->q) clReleaseCommandQueue(cl->q);
    if (cl->ctx) clReleaseContext(cl->ctx);
    free(cl);
}

double hc_cl_copy_bandwidth(hc_cl *cl, size_t bytes, int reps, char *err, size_t errlen)
{
    cl_mem a = hc_cl_buffer(cl, CL_MEM_READ_WRITE, bytes, NULL, err, errlen), b = NULL;
    double t0 = 0, gbps = -1;
    if (!a || !(b = hc_cl_buffer(cl, CL_MEM_READ_WRITE, bytes, NULL, err, errlen))) goto bad;
    for (int r = 0; r <= reps; r++) {
        if (r == 1) {
            CHECK_CL(clFinish(cl->q), "clFinish");
            t0 = hc_now();
        }
        CHECK_CL(clEnqueueCopyBuffer(cl->q, a, b, 0, 0, bytes, 0, NULL, NULL), "copy");
    }
    CHECK_CL(clFinish(cl->q), "clFinish");
    gbps = 2.0 * (double)bytes * reps / (hc_now() - t0);
bad:
    hc_cl_release((cl_mem[]){ a, b }, 2);
    return gbps;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* p's binary for dev (PTX on NVIDIA, an object on PoCL) into path, atomically */
static int write_binary(cl_program p, const char *path, char *err, size_t errlen)
{
    size_t n = 0;
    unsigned char *bin = NULL;
    atomic_file af;
    int rc = -1;
    CHECK_CL(clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL), "the program's binary size");
    if (!(bin = malloc(n ? n : 1))) { snprintf(err, errlen, "OpenCL: out of host memory"); goto bad; }
    CHECK_CL(clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL), "the program's binary");
    if (af_open(&af, path, err, errlen)) goto bad;
    if (fwrite(bin, 1, n, af.fp) != n) {
        snprintf(err, errlen, "%s: write failed", path);
        af_abort(&af);
        goto bad;
    }
    rc = af_commit(&af, err, errlen);
bad:
    free(bin);
    return rc;
}

int hc_cl_program_report(cl_program p, cl_device_id dev, const char *what, FILE *out, const char *dir, char *err,
                         size_t errlen)
{
    cl_uint n = 0;
    cl_kernel *ks = NULL;
    char **line = NULL;
    int rc = -1;
    CHECK_CL(clCreateKernelsInProgram(p, 0, NULL, &n), "clCreateKernelsInProgram");
    if (!(ks = calloc(n ? n : 1, sizeof *ks)) || !(line = calloc(n ? n : 1, sizeof *line))) {
        snprintf(err, errlen, "OpenCL: out of host memory");
        goto bad;
    }
    CHECK_CL(clCreateKernelsInProgram(p, n, ks, NULL), "clCreateKernelsInProgram");
    for (cl_uint i = 0; i < n; i++) {
        char name[64];
        cl_ulong priv, local;
        size_t wg;
        CHECK_CL(clGetKernelInfo(ks[i], CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL), "a kernel's name");
        CHECK_CL(clGetKernelWorkGroupInfo(ks[i], dev, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof priv, &priv, NULL),
                 "a kernel's private memory");
        CHECK_CL(clGetKernelWorkGroupInfo(ks[i], dev, CL_KERNEL_LOCAL_MEM_SIZE, sizeof local, &local, NULL),
                 "a kernel's local memory");
        CHECK_CL(clGetKernelWorkGroupInfo(ks[i], dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL),
                 "a kernel's work group size");
        char buf[160];
        snprintf(buf, sizeof buf, "%-9s %-24s %9llu %9llu %6zu", what, name, (unsigned long long)priv,
                 (unsigned long long)local, wg);
        if (!(line[i] = strdup(buf))) { snprintf(err, errlen, "OpenCL: out of host memory"); goto bad; }
    }
    qsort(line, n, sizeof *line, by_name);
    for (cl_uint i = 0; i < n; i++) fprintf(out, "%s\n", line[i]);
    rc = 0;
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.bin", dir, what);
        rc = write_binary(p, path, err, errlen);
    }
bad:
    for (cl_uint i = 0; ks && i < n; i++) if (ks[i]) clReleaseKernel(ks[i]);
    for (cl_uint i = 0; line && i < n; i++) free(line[i]);
    free(ks);
    free(line);
    return rc;
}

int hc_cl_index(const hc_cl *cl) { return cl->index; }
const hc_cl_info *hc_cl_about(const hc_cl *cl) { return &cl->info; }

const char *hc_cl_dots(const hc_cl *cl, int *fell_back)
{
    if (fell_back) *fell_back = cl->dots_fell_back;
    return cl->dots;
}

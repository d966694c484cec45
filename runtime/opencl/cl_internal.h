/* What the OpenCL files share: the opened device and checked calls. Only
 * runtime/opencl/ includes CL/cl.h. */
#ifndef HC_CL_INTERNAL_H
#define HC_CL_INTERNAL_H

#include <CL/cl.h>
#include <stdio.h>

#include "opencl.h"
#include "types.h"

enum { HC_CL_WG_MAX = 64 };

/* Pinned host memory staging one transfer of the hot rows' exchange
 * (hot_rows.c): memory the driver allocates for the host
 * (CL_MEM_ALLOC_HOST_PTR), mapped once, which the device's transfers read
 * and write directly; done: the last transfer queued from it, waited for
 * before the host writes it again. */
typedef struct {
    cl_mem m;
    void *host;
    size_t cap;
    cl_event done;
} hc_cl_stage;

struct hc_cl {
    hc_cl_info info;
    int index;                  /* in hc_cl_list */
    int profile;                /* HC_CL_PROFILE: the queue times its commands */
    int invariant;              /* HC_CL_BATCH_INVARIANT: the backend's rows keep their bits whatever the batch */
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q;
    cl_program prog;
    char dots[320];             /* how the hot rows' quantized dots multiply (hc_cl_build) */
    int dots_fell_back;
    /* [0]: one token (decode), [1]: tiles of HC_CL_TILE tokens (kernels/hot_rows.cl) */
    cl_kernel gate_up[2][HC_CL_N_TYPES], down[2][HC_CL_N_TYPES], down_sum, count_hot;
    size_t wg;
    /* scratch shared by all layers (one token-layer in flight at a time) */
    cl_mem x, mask, h, y, part, zeros, truth;   /* part: the down slices' sums; truth: hc_cl_layer_keep's */
    size_t x_cap, mask_cap, h_cap, y_cap, part_cap, zeros_cap, truth_cap;
    /* the uploads' staging (the caller may reuse its inputs at once) and the downloads' */
    hc_cl_stage up_x, up_mask, up_truth, down_h, down_y;
};

/* A buffer of the OpenCL backend (backend.h's hc_buf): the hot rows leave
 * their sums in one (hc_cl_layer_keep). */
struct hc_buf {
    cl_mem m;
    size_t bytes;
    void *host;   /* pinned memory: m mapped for the host, else NULL */
};

/* kernels/hot_rows.cl as a C string (made by the build, runtime/module.mk). */
extern const char hc_cl_hot_rows_source[];
/* kernels/common.cl: built before each program's own file */
extern const char hc_cl_common_source[];

const char *hc_cl_error_name(cl_int e);

/* Check one call: on failure say which in err and goto bad. */
#define CHECK_CL(call, what) do { \
        cl_int rc_ = (call); \
        if (rc_ != CL_SUCCESS) { \
            snprintf(err, errlen, "OpenCL: %s failed: %d %s", what, rc_, hc_cl_error_name(rc_)); \
            goto bad; \
        } \
    } while (0)

/* Pinned host memory of `bytes`: a buffer the driver allocates for the host
 * (CL_MEM_ALLOC_HOST_PTR) into *m, mapped once for reading and writing; its
 * pages are what the device's transfers read and write directly. The host
 * address, or NULL with err (*m NULL). */
void *hc_cl_pinned(hc_cl *cl, size_t bytes, cl_mem *m, char *err, size_t errlen);

/* Release a stage's memory, once its last transfer is done. */
void hc_cl_stage_free(hc_cl *cl, hc_cl_stage *s);

/* Release the buffers of ms that are not NULL. */
void hc_cl_release(cl_mem *ms, size_t n);

/* A buffer of bytes (at least 1), written from host when not NULL (on the
 * device when this returns). */
cl_mem hc_cl_buffer(hc_cl *cl, cl_mem_flags flags, size_t bytes, const void *host, char *err, size_t errlen);

/* Build program p (WHAT in errors) with opts, and with PTX's dp4a
 * (-DHC_DP4A=1: kernels/common.cl's idot4, udot4) where the device runs it:
 * an NVIDIA GPU of compute capability 6.1 or later, or as HC_CL_DP4A says.
 * The built integer dots are checked against the host's (dots_check); when
 * the build with dp4a fails or its dots differ, p is built again without
 * and *fell_back is set. How the dots multiply goes to dots (hc-run -v, and
 * a warning when it fell back). 0, or -1 with err. */
int hc_cl_build(hc_cl *cl, cl_program p, const char *what, const char *opts, char *dots, size_t dotslen, int *fell_back,
                char *err, size_t errlen);

/* One line a kernel of program p, by name, on out: WHAT (the program), the
 * kernel, the device's private bytes an item (on a GPU: registers spilled and
 * arrays the compiler could not keep in registers), local bytes a group, and
 * the largest group it runs (NVIDIA lowers it when the kernel's registers do
 * not fit its most items). With dir, p's binary (PTX on NVIDIA, to read with
 * ptxas: scripts/sass-loops.sh) is written to dir/WHAT.bin. 0, or -1 with err. */
int hc_cl_program_report(cl_program p, cl_device_id dev, const char *what, FILE *out, const char *dir, char *err,
                         size_t errlen);

#endif

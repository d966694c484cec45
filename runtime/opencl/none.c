/* A build without OpenCL (make OPENCL=0): there is no device, and asking for
 * one says so. hc_cl_layer_* are never reached without an opened device. */
#include <stdio.h>

#include "opencl.h"

static const char *const none = "OpenCL: this build has none (made with OPENCL=0)";

int hc_cl_list(hc_cl_info *out, int max, char *err, size_t errlen)
{
    (void)out;
    (void)max;
    snprintf(err, errlen, "%s", none);
    return -1;
}

hc_cl *hc_cl_open(const char *device, int flags, char *err, size_t errlen)
{
    (void)device; (void)flags;
    snprintf(err, errlen, "%s", none);
    return NULL;
}

void hc_cl_free(hc_cl *cl) { (void)cl; }

double hc_cl_copy_bandwidth(hc_cl *cl, size_t bytes, int reps, char *err, size_t errlen)
{
    (void)cl; (void)bytes; (void)reps;
    snprintf(err, errlen, "%s", none);
    return -1;
}
int hc_cl_index(const hc_cl *cl) { (void)cl; return -1; }
const hc_cl_info *hc_cl_about(const hc_cl *cl) { (void)cl; return NULL; }

const char *hc_cl_dots(const hc_cl *cl, int *fell_back)
{
    (void)cl;
    if (fell_back) *fell_back = 0;
    return none;
}

hc_cl_layer *hc_cl_layer_new(hc_cl *cl, const hc_cl_rows *rows, int k, int n_embd, char *err, size_t errlen)
{
    (void)cl; (void)rows; (void)k; (void)n_embd;
    snprintf(err, errlen, "%s", none);
    return NULL;
}

void hc_cl_layer_free(hc_cl_layer *L) { (void)L; }

int hc_cl_layer_start(hc_cl_layer *L, const void *x, size_t x_stride, int B, const uint8_t *mask, int act,
                      float t_act, char *err, size_t errlen)
{
    (void)L; (void)x; (void)x_stride; (void)B; (void)mask; (void)act; (void)t_act;
    snprintf(err, errlen, "%s", none);
    return -1;
}

int hc_cl_layer_finish(hc_cl_layer *L, float *y, float *h, double *dev_s, char *err, size_t errlen)
{
    (void)L; (void)y; (void)h; (void)dev_s;
    snprintf(err, errlen, "%s", none);
    return -1;
}

int hc_cl_layer_keep(hc_cl_layer *L, hc_view y, const uint8_t *truth, char *err, size_t errlen)
{
    (void)L; (void)y; (void)truth;
    snprintf(err, errlen, "%s", none);
    return -1;
}

int hc_cl_layer_counts(hc_cl_layer *L, uint64_t counts[3], char *err, size_t errlen)
{
    (void)L; (void)counts;
    snprintf(err, errlen, "%s", none);
    return -1;
}

hc_backend *hc_cl_backend_new(hc_cl *cl, char *err, size_t errlen)
{
    (void)cl;
    snprintf(err, errlen, "%s", none);
    return NULL;
}

int hc_cl_backend_report(hc_backend *be, FILE *out, const char *dir, char *err, size_t errlen)
{
    (void)be;
    (void)out;
    (void)dir;
    snprintf(err, errlen, "%s", none);
    return -1;
}

hc_backend *hc_cl_backend_new_with(hc_cl *cl, const char *source, char *err, size_t errlen)
{
    (void)source;
    return hc_cl_backend_new(cl, err, errlen);
}

const char *hc_cl_backend_dots(const hc_backend *be, int *fell_back)
{
    (void)be;
    if (fell_back) *fell_back = 0;
    return none;
}

void hc_cl_backend_geometry(hc_backend *b, const hc_clb_device *d)
{
    (void)b;
    (void)d;
}

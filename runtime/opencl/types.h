/* The weight types the device kernels take (kernels/hot_rows.cl): ggml's
 * F32, F16, BF16, Q8_0 and Q4_0, then INT4-GPTQ. No OpenCL header: the row
 * accounting and the references use it in a build without OpenCL too. */
#ifndef HC_OPENCL_TYPES_H
#define HC_OPENCL_TYPES_H

#include "weight.h"

enum { HC_CL_N_GGML = 5, HC_CL_GPTQ = HC_CL_N_GGML, HC_CL_N_TYPES };

/* Kernel name suffixes, in the order above (gate_up1_f32, down8_gptq, ...). */
extern const char *const hc_cl_type_names[HC_CL_N_TYPES];
/* w's place in the order above, or -1. */
int hc_cl_type_index(const hc_weight *w);

#endif

/* OpenCL C source of the hybrid FFN kernels (opencl_kernels.c). */
#ifndef HC_OPENCL_KERNELS_H
#define HC_OPENCL_KERNELS_H

extern const char hc_cl_source[];

#endif

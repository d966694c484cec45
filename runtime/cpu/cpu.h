/* The CPU backend (backend.h): the context's thread pool and the kernels of
 * kernels.h on host memory. Every context has one; it is the reference the
 * other backends are tested against (at HC_KERNELS=scalar) and where a
 * context goes when a device fails. */
#ifndef HC_CPU_H
#define HC_CPU_H

#include "backend.h"

/* The CPU backend of ctx: its pool, its prepared-activation buffers. NULL
 * when out of memory. */
hc_backend *hc_cpu_backend_new(hc_ctx *ctx);
/* A view of host memory that no backend allocated (a caller's rows), for
 * the CPU backend's steps. */
hc_view hc_cpu_view(const void *p);
/* bytes aligned to 64, zeroed (pages made now, not in the first product); NULL: no memory */
void *hc_cpu_alloc(size_t bytes);
/* The floats of a view of the CPU backend. */
float *hc_cpu_ptr(hc_view v);
/* e^x as the attention's softmax computes it (x <= 0), the same bits in
 * every instruction set's attention (vmath.h). */
float hc_cpu_exp(float x);
/* SiLU(x) and GELU(x) as the CPU's FFN computes them (vmath.h). */
float hc_cpu_silu(float x);
float hc_cpu_gelu(float x);

#endif

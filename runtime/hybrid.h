/* Hybrid setup: put the hot neurons of a .gpuidx on an OpenCL device.
 *
 * As PowerInfer's loader (docs/formats.md, ".gpuidx"): the rows gpu_bucket of
 * ffn_gate, ffn_up and the down rows (ffn_down_t) of each layer are gathered
 * into compact device buffers in their stored type. Attention and the other
 * dense tensors are the placement's (place.h, ffn_setup.c), which leaves
 * the rest of the budget to FFN neurons.
 * Anything that prevents it (no OpenCL platform or device, a type without
 * device kernels, a split larger than the budget or the device, a failed
 * allocation) leaves the model on the CPU with the reason in msg. */
#ifndef HC_HYBRID_H
#define HC_HYBRID_H

#include <stddef.h>
#include <stdint.h>
#include "gpuidx.h"
#include "opencl.h"
#include "sparse.h"

/* Device bytes the split of g needs for model m with s's down rows. */
uint64_t hc_hybrid_bytes(const hc_model *m, const hc_sparse *s, const hc_gpuidx *g);
/* Hand g's hot neurons to the opened device cl. budget: device bytes left
 * for the split (0: none). 0, or -1 with a one-line reason in msg: then s
 * is unchanged and every neuron runs on the CPU. */
int hc_hybrid_place(hc_sparse *s, const hc_model *m, const hc_gpuidx *g, hc_cl *cl, uint64_t budget, char *msg,
                    size_t msglen);
/* The same on a device it opens (hc_cl_open(device)), budget 0 meaning
 * the device's global memory: the device (the caller frees it after s), or
 * NULL with the reason in msg. */
hc_cl *hc_hybrid_setup(hc_sparse *s, const hc_model *m, const hc_gpuidx *g, const char *device, uint64_t budget,
                       char *msg, size_t msglen);

#endif

/* The pickle of one tensor as torch.save writes it (data.pkl in the zip,
 * protocol 2):
 *   torch._utils._rebuild_tensor_v2(
 *       persistent_id(('storage', torch.<T>Storage, key, location, numel)),
 *       storage_offset, shape, stride, requires_grad, collections.OrderedDict())
 * Only the opcodes and globals that appear there are understood; anything
 * else (other globals, other opcodes, a dict of tensors) is rejected with a
 * message naming the opcode or global and its offset. No code is ever run. */
#ifndef HC_PICKLE_H
#define HC_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#define HC_PICKLE_MAX_DIMS 8

typedef struct {
    char storage_type[32];   /* "FloatStorage", "LongStorage", ... (module torch) */
    char key[64];            /* storage key: the archive entry is <prefix>/data/<key> */
    char location[32];       /* "cpu", "cuda:0", ... */
    int64_t storage_numel;   /* elements in the storage */
    int64_t offset;          /* storage offset of element 0, in elements */
    int ndim;
    int64_t shape[HC_PICKLE_MAX_DIMS], stride[HC_PICKLE_MAX_DIMS];
    int requires_grad;
} hc_pickle_tensor;

/* Parse the pickle in buf. 0, or -1 with "NAME: offset N: what is wrong" in err. */
int hc_pickle_tensor_read(const void *buf, size_t len, const char *name, hc_pickle_tensor *t,
                          char *err, size_t errlen);

#endif

/* A 1-D tensor saved with torch.save (zip archive: <prefix>/data.pkl,
 * <prefix>/data/<key>, optional <prefix>/byteorder), e.g. PowerInfer's
 * activation_N.pt. */
#ifndef HC_PTFILE_H
#define HC_PTFILE_H

#include <stddef.h>
#include <stdint.h>

/* The tensor's elements widened to double (malloc'd, *n of them). Storage
 * types Float, Double, Half, BFloat16, Long, Int, Short, Char, Byte, Bool;
 * little-endian only. NULL + one-line "PATH: what is wrong" in err.
 * Memory stays near what the tensor needs: a tensor or storage of more than
 * max_elements elements, a pickle over HC_PT_MAX_PICKLE bytes, and a zip
 * entry declaring more bytes than its storage are refused before anything is
 * inflated. */
#define HC_PT_MAX_PICKLE (1 << 20)
double *hc_pt_read_vector(const char *path, int64_t max_elements, int64_t *n, char *err, size_t errlen);
/* Same over an archive in memory (tests, fuzzing); name is used in messages. */
double *hc_pt_read_vector_mem(const void *buf, size_t size, const char *name, int64_t max_elements, int64_t *n,
                              char *err, size_t errlen);

#endif

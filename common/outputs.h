/* A program's outputs, checked once its options are parsed and before it does
 * any work, so no run can overwrite one of its own inputs or work for minutes
 * before finding it cannot write. */
#ifndef HC_OUTPUTS_H
#define HC_OUTPUTS_H

#include <stddef.h>

/* Every output out[0..n_out) (NULL entries, for options not given, are
 * skipped) must
 *  - not be the same file as an input in[0..n_in): compared by device and
 *    inode, so a symbolic link or a hard link to an input counts; a directory
 *    input counts as every file directly in it;
 *  - not be the same file as another output, nor an existing directory;
 *  - be creatable: its directory accepts a new file (af_check creates and
 *    removes a temporary there, which also removes stale temporaries), or it
 *    is a FIFO or character device we may write (written in place).
 * Otherwise one line "prog: OUT: why (naming the input)" and exit 1. */
void hc_check_outputs(const char *const *in, size_t n_in, const char *const *out, size_t n_out);

#endif

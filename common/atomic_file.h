/* Atomic output: write to a temporary file beside the target, fsync, rename
 * into place. A crash, a full disk or an error never leaves a partial file
 * under the final name. */
#ifndef HC_ATOMIC_FILE_H
#define HC_ATOMIC_FILE_H

#include <stdio.h>

typedef struct {
    FILE *fp;      /* write here */
    char *path;    /* final name */
    char *tmp;     /* temporary name in the same directory */
} atomic_file;

/* 0 on success; on failure -1 with a one-line message in err. */
int af_open(atomic_file *af, const char *path, char *err, size_t errlen);
/* Flush, fsync, close and rename into place. On failure the temporary file is
 * removed and -1 returned with a message naming the final path. */
int af_commit(atomic_file *af, char *err, size_t errlen);
/* Close and remove the temporary file (safe to call after a failed commit). */
void af_abort(atomic_file *af);

#endif

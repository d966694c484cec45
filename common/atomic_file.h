/* Atomic output: write to a temporary file beside the target, fsync, rename
 * into place. A crash, a full disk or an error never leaves a partial file
 * under the final name. An output that already exists and is not a regular
 * file is never replaced: a FIFO or a character device (/dev/stdout on a pipe
 * or a terminal, /dev/null) is written in place, without a temporary; a
 * symbolic link to a regular file has that file replaced (the link stays);
 * anything else (a dangling link, a socket, a block device) is refused.
 *
 * Every temporary this process has open is registered: an exit before its
 * commit (hc_die included) and a SIGBUS on a mapped input (cli.h, hc_map_open)
 * remove it, and so do SIGINT, SIGTERM and SIGHUP (then the process dies of
 * the signal); SIGXFSZ is ignored from the first af_open on, so a write past
 * `ulimit -f` fails with "File too large". A temporary `.NAME.tmpPID.N` whose
 * process PID is gone (killed with SIGKILL) is removed by the next af_open of
 * NAME. */
#ifndef HC_ATOMIC_FILE_H
#define HC_ATOMIC_FILE_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *fp;      /* write here */
    char *path;    /* final name */
    char *tmp;     /* temporary name in the same directory; NULL: written in place */
} atomic_file;

/* 0 on success; on failure -1 with a one-line message in err. */
int af_open(atomic_file *af, const char *path, char *err, size_t errlen);
/* Reserve bytes on disk for the temporary (fallocate, the file's size left
 * as it is): an output that cannot fit fails here, in milliseconds, rather
 * than after the work that fills the disk. 0, or -1 with "PATH: the output
 * needs SIZE: REASON (SIZE free on its file system)" in err (the caller
 * aborts). An output written in place, or a file system without fallocate,
 * reserves nothing. */
int af_reserve(atomic_file *af, uint64_t bytes, char *err, size_t errlen);
/* 0 if af_open(path) can succeed, else -1 with its message: a temporary is
 * created and removed, but an output written in place is not opened (a FIFO
 * would wait for a reader, then give it an early end of file). With
 * at_least > 0, also -1 when the temporary cannot have that many bytes
 * reserved now (af_reserve's test, "the output needs at least SIZE"): a
 * writer whose exact size comes only after long work (GPTQ's calibration)
 * fails at once where even its smallest output cannot fit. */
int af_check(const char *path, uint64_t at_least, char *err, size_t errlen);
/* Flush, fsync, close and rename into place. On failure the temporary file is
 * removed and -1 returned with a message naming the final path. Inside a
 * commit group the rename waits for af_group_commit. An output written in
 * place is flushed and closed (its bytes are already out, group or not). */
int af_commit(atomic_file *af, char *err, size_t errlen);
/* Close and remove the temporary file (safe to call after a failed commit). */
void af_abort(atomic_file *af);

/* A program's outputs, committed together or not at all: after
 * af_group_begin, af_commit writes, syncs and closes each file but renames
 * none; af_group_commit then renames them all (every byte is already on disk,
 * so only a rename can still fail, and each rename is atomic), and
 * af_group_abort, or an exit before af_group_commit, removes them all. */
void af_group_begin(void);
int af_group_commit(char *err, size_t errlen);
void af_group_abort(void);

/* Remove every registered temporary of this process. Async-signal-safe
 * (unlink only): signal handlers call it before _exit. */
void af_remove_temporaries(void);

/* Directory part of path ("." when there is none, "/" for the root), malloc'd. */
char *af_dir_of(const char *path);

#endif

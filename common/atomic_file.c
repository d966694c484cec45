/* Atomic output: temporary file beside the target, fsync, rename. */
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void clear(atomic_file *af)
{
    free(af->path);
    free(af->tmp);
    af->fp = NULL;
    af->path = af->tmp = NULL;
}

/* Directory part of path ("." when there is none), malloc'd. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

int af_open(atomic_file *af, const char *path, char *err, size_t errlen)
{
    static unsigned counter;
    memset(af, 0, sizeof *af);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) {
        snprintf(err, errlen, "%s: not a file name", path);
        return -1;
    }
    size_t len = strlen(path) + 64;
    af->path = strdup(path);
    af->tmp = malloc(len);
    if (!af->path || !af->tmp) {
        snprintf(err, errlen, "%s: out of memory", path);
        clear(af);
        return -1;
    }
    /* A hidden name in the same directory, so rename() stays on one file
     * system; O_EXCL so two writers never share a temporary. Mode 0666 lets
     * the umask decide the final permissions, as for any new file. */
    int fd = -1;
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
        snprintf(af->tmp, len, "%.*s.%s.tmp%ld.%u", (int)(base - path), path, base,
                 (long)getpid(), counter++);
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int e = errno;
        char *dir = dir_of(path);
        snprintf(err, errlen, "%s: cannot create a temporary file in %s: %s", path,
                 dir ? dir : "its directory", strerror(e));
        free(dir);
        clear(af);
        return -1;
    }
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        unlink(af->tmp);
        clear(af);
        return -1;
    }
    return 0;
}

/* fsync the directory so the rename itself survives a crash. */
static void sync_dir(const char *path)
{
    char *dir = dir_of(path);
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);   /* best effort: some file systems refuse directory fsync */
        close(fd);
    }
    free(dir);
}

int af_commit(atomic_file *af, char *err, size_t errlen)
{
    int e = 0;
    if (!af->fp) {
        snprintf(err, errlen, "%s: output is not open", af->path ? af->path : "(null)");
        return -1;
    }
    errno = 0;   /* ferror() from an earlier fwrite leaves no errno of its own */
    if (fflush(af->fp) != 0 || ferror(af->fp)) e = errno ? errno : EIO;
    if (!e && fsync(fileno(af->fp)) != 0) e = errno;
    if (fclose(af->fp) != 0 && !e) e = errno;
    af->fp = NULL;
    if (!e && rename(af->tmp, af->path) != 0) e = errno;
    if (e) {
        snprintf(err, errlen, "%s: write failed: %s", af->path, strerror(e));
        af_abort(af);
        return -1;
    }
    sync_dir(af->path);
    clear(af);
    return 0;
}

void af_abort(atomic_file *af)
{
    if (af->fp) fclose(af->fp);
    if (af->tmp) unlink(af->tmp);
    clear(af);
}

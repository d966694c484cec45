/* Atomic output: temporary file beside the target, fsync, rename; a registry
 * of live temporaries, stale-temporary removal and commit groups. */
#include "atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cli.h"

/* Temporaries of this process not yet renamed or removed. Slots are claimed
 * with an atomic compare-and-swap and read by af_remove_temporaries, which a
 * signal handler may run at any moment. */
#define AF_MAX 32
static char *volatile live[AF_MAX];
static volatile pid_t live_pid;   /* a forked child must not remove its parent's files */

/* Outputs of the open commit group: written and closed, waiting for a rename. */
static struct { char *path, *tmp; } pending[AF_MAX];
static int n_pending, grouping;

void af_remove_temporaries(void)
{
    if (getpid() != live_pid) return;
    for (int i = 0; i < AF_MAX; i++) {
        char *t = live[i];
        if (t) unlink(t);
    }
}

/* SIGINT, SIGTERM, SIGHUP: remove the temporaries, then die of the signal
 * as if there were no handler (the shell sees the usual status). */
static void on_signal(int sig)
{
    af_remove_temporaries();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Handlers for the signals that end a process, except where the signal is
 * ignored (nohup); SIGXFSZ ignored, so a write past `ulimit -f` fails with
 * EFBIG and the writer reports "File too large" and removes its temporary. */
static void catch_signals(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa = { .sa_handler = on_signal };
        sigemptyset(&sa.sa_mask);
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) sigaction(sigs[i], &sa, NULL);
    }
    signal(SIGXFSZ, SIG_IGN);
}

static int track(char *tmp)
{
    static int exit_hook;
    if (!exit_hook) {
        exit_hook = atexit(af_remove_temporaries) == 0;
        catch_signals();
    }
    live_pid = getpid();
    for (int i = 0; i < AF_MAX; i++)
        if (__sync_bool_compare_and_swap(&live[i], NULL, tmp)) return 0;
    return -1;
}

static void untrack(const char *tmp)
{
    for (int i = 0; tmp && i < AF_MAX; i++)
        if (live[i] == tmp) live[i] = NULL;
}

static void clear(atomic_file *af)
{
    untrack(af->tmp);
    free(af->path);
    free(af->tmp);
    af->fp = NULL;
    af->path = af->tmp = NULL;
}

char *af_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* The writer's process id if name is ".BASE.tmpPID.N", else 0. */
static long temporary_pid(const char *name, const char *base)
{
    size_t blen = strlen(base);
    if (name[0] != '.' || strncmp(name + 1, base, blen) != 0 || strncmp(name + 1 + blen, ".tmp", 4) != 0) return 0;
    char *end;
    errno = 0;
    long pid = strtol(name + blen + 5, &end, 10);
    if (errno || pid <= 0 || *end != '.' || !end[1]) return 0;
    for (const char *c = end + 1; *c; c++)
        if (*c < '0' || *c > '9') return 0;
    return pid;
}

/* Remove the temporaries of base in dir whose writer no longer runs (a
 * SIGKILL leaves them). Best effort: a directory we cannot read is skipped. */
static void remove_stale(const char *dir, const char *base)
{
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        long pid = temporary_pid(e->d_name, base);
        if (pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

/* Where output path goes: 0 through a temporary beside *target (path, or the
 * regular file a symbolic link leads to, so the link stays; malloc'd), 1
 * written in place (a FIFO or a character device: what the user means by
 * /dev/stdout or /dev/null, and not a file to replace), -1 refused (err). */
static int resolve(const char *path, char **target, char *err, size_t errlen)
{
    struct stat st, lst;
    *target = NULL;
    int exists = stat(path, &st) == 0, is_link = lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode);
    if (exists && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) return 1;
    if (exists && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: output is not a regular file, a FIFO or a character device", path);
        return -1;
    }
    if (is_link && !exists) {
        snprintf(err, errlen, "%s: output is a symbolic link to a missing file", path);
        return -1;
    }
    *target = is_link ? realpath(path, NULL) : strdup(path);
    if (!*target) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int open_in_place(atomic_file *af, const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    af->path = strdup(path);
    if (fd < 0 || !af->path || !(af->fp = fdopen(fd, "wb"))) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : ENOMEM));
        if (fd >= 0) close(fd);
        clear(af);
        return -1;
    }
    return 0;
}

/* fallocate bytes for the temporary, the file's size kept: 0, or -1 with
 * "PATH: the output needs [at least ]SIZE: REASON (SIZE free ...)" in err. */
static int reserve(atomic_file *af, uint64_t bytes, const char *at_least, char *err, size_t errlen)
{
    if (!af->tmp || bytes == 0) return 0;
    int fd = fileno(af->fp);
    if (bytes <= INT64_MAX && fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes) == 0) return 0;
    int e = bytes > INT64_MAX ? EFBIG : errno;
    if (e == EOPNOTSUPP || e == ENOSYS || e == EINVAL) return 0;   /* EINVAL: a mode this file system lacks */
    struct statvfs fs;
    char need[32], have[32] = "?";
    if (fstatvfs(fd, &fs) == 0) hc_format_size((uint64_t)fs.f_bavail * fs.f_frsize, have, sizeof have);
    snprintf(err, errlen, "%s: the output needs %s%s: %s (%s free on its file system)", af->path, at_least,
             hc_format_size(bytes, need, sizeof need), strerror(e), have);
    return -1;
}

int af_reserve(atomic_file *af, uint64_t bytes, char *err, size_t errlen)
{
    return reserve(af, bytes, "", err, errlen);
}

int af_check(const char *path, uint64_t at_least, char *err, size_t errlen)
{
    char *target;
    int where = resolve(path, &target, err, errlen);
    free(target);
    if (where == 1 && access(path, W_OK) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (where != 0) return where < 0 ? -1 : 0;
    atomic_file af;
    if (af_open(&af, path, err, errlen) != 0) return -1;
    int rc = reserve(&af, at_least, "at least ", err, errlen);
    af_abort(&af);
    return rc;
}

int af_open(atomic_file *af, const char *path_given, char *err, size_t errlen)
{
    static unsigned counter;
    memset(af, 0, sizeof *af);
    char *path;
    int where = resolve(path_given, &path, err, errlen);
    if (where != 0) return where < 0 ? -1 : open_in_place(af, path_given, err, errlen);
    af->path = path;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) {
        snprintf(err, errlen, "%s: not a file name", path);
        clear(af);
        return -1;
    }
    size_t len = strlen(path) + 64;
    af->tmp = malloc(len);
    char *dir = af_dir_of(path);
    if (!af->tmp || !dir) {
        snprintf(err, errlen, "%s: out of memory", path);
        free(dir);
        clear(af);
        return -1;
    }
    remove_stale(dir, base);
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
        snprintf(err, errlen, "%s: cannot create a temporary file in %s: %s", path, dir, strerror(errno));
        free(dir);
        clear(af);
        return -1;
    }
    free(dir);
    if (track(af->tmp) != 0) {
        snprintf(err, errlen, "%s: more than %d outputs open at once", path, AF_MAX);
        close(fd);
        unlink(af->tmp);
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
    char *dir = af_dir_of(path);
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
    if (!af->tmp) {   /* written in place: nothing to sync or rename */
        if (fclose(af->fp) != 0 && !e) e = errno;
        af->fp = NULL;
        if (e) snprintf(err, errlen, "%s: write failed: %s", af->path, strerror(e));
        clear(af);
        return e ? -1 : 0;
    }
    if (!e && fsync(fileno(af->fp)) != 0) e = errno;
    if (fclose(af->fp) != 0 && !e) e = errno;
    af->fp = NULL;
    if (!e && grouping) {   /* the rename waits for af_group_commit */
        pending[n_pending].path = af->path;
        pending[n_pending++].tmp = af->tmp;
        af->path = af->tmp = NULL;
        return 0;
    }
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

void af_group_begin(void)
{
    grouping = 1;
}

/* Forget pending output i (its temporary already renamed or removed). */
static void drop_pending(int i)
{
    untrack(pending[i].tmp);
    free(pending[i].path);
    free(pending[i].tmp);
}

int af_group_commit(char *err, size_t errlen)
{
    int rc = 0;
    for (int i = 0; i < n_pending; i++) {
        if (rc == 0 && rename(pending[i].tmp, pending[i].path) != 0) {
            snprintf(err, errlen, "%s: write failed: %s", pending[i].path, strerror(errno));
            rc = -1;
        }
        if (rc == 0) sync_dir(pending[i].path);
        else unlink(pending[i].tmp);
        drop_pending(i);
    }
    n_pending = grouping = 0;
    return rc;
}

void af_group_abort(void)
{
    for (int i = 0; i < n_pending; i++) {
        unlink(pending[i].tmp);
        drop_pending(i);
    }
    n_pending = grouping = 0;
}

#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int th_failed_case;
const char *th_skip_why;
static int n_failed;
static char fail_msg[1024];
static char tmpdir[256];

void th_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(fail_msg, sizeof fail_msg, "%s:%d: ", file, line);
    va_start(ap, fmt);
    vsnprintf(fail_msg + n, sizeof fail_msg - (size_t)n, fmt, ap);
    va_end(ap);
    th_failed_case = 1;
}

void th_run(const char *name, void (*fn)(void))
{
    th_failed_case = 0;
    th_skip_why = NULL;
    fn();
    if (th_failed_case) {
        printf("FAIL %s: %s\n", name, fail_msg);
        n_failed++;
    } else if (th_skip_why) {
        printf("skip %s: %s\n", name, th_skip_why);
    } else {
        printf("ok %s\n", name);
    }
    fflush(stdout);
}

static pid_t tmpdir_owner;   /* a forked child that exits leaves the directory alone */

static void remove_tmpdir(void)
{
    char cmd[300];
    if (!tmpdir[0] || getpid() != tmpdir_owner) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

int th_done(void) { return n_failed ? 1 : 0; }

const char *th_fixture(const char *name)
{
    static char buf[8][1024];
    static int k;
    const char *dir = getenv("HC_FIXTURES");
    struct stat st;
    if (!dir || !*dir) dir = "../shared/fixtures";
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return NULL;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

const char *th_tmpdir(void)
{
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/hctest.XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) { perror("mkdtemp"); exit(2); }
        tmpdir_owner = getpid();
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

const char *th_tmp(const char *name)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", th_tmpdir(), name);
    return buf[k];
}

const char *th_bin(const char *name)
{
    static char buf[8][512];
    static int k;
    const char *dir = getenv("HC_BIN");
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir && *dir ? dir : "bin", name);
    return buf[k];
}

int th_sh(const char *fmt, ...)
{
    char cmd[8192], full[9000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "( %s ) >'%s/last.out' 2>'%s/last.err'", cmd, th_tmpdir(), th_tmpdir());
    int rc = system(full);
    if (rc == -1) return -1;
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

static const char *slurp_last(const char *which)
{
    static char *buf;
    size_t len;
    free(buf);
    buf = (char *)th_read(th_tmp(which), &len);
    return buf ? buf : "";
}

const char *th_last_out(void) { return slurp_last("last.out"); }
const char *th_last_err(void) { return slurp_last("last.err"); }

unsigned char *th_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[n] = 0; if (len) *len = (size_t)n; }
    return buf;
}

int th_write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

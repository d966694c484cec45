/* Shared support of the fuzz targets (see fuzz.h). */
#include "fuzz.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HC_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HC_LSAN 1
#endif
#endif
#ifdef HC_LSAN
#include <sanitizer/lsan_interface.h>
#endif

char fuzz_err[512];
jmp_buf *fuzz_die_jmp;
static char scratch[256];

static void remove_scratch(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: cannot remove %s\n", scratch);
}

const char *fuzz_dir(void)
{
    if (!scratch[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(scratch, sizeof scratch, "%s/hcfuzz.XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(scratch)) { perror("fuzz: mkdtemp"); abort(); }
        atexit(remove_scratch);
    }
    return scratch;
}

static const char *scratch_path(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", fuzz_dir(), name);
    return buf[k];
}

const char *fuzz_file(const char *name, const void *data, size_t size)
{
    const char *path = scratch_path(name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) || close(fd) != 0) {
        perror(path);
        abort();
    }
    return path;
}

void fuzz_unlink(const char *name)
{
    unlink(scratch_path(name));
}

void fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: fuzz check failed: %s\n", file, line, what);
    abort();
}

void fuzz_refused(const char *err, const char *name)
{
    snprintf(fuzz_err, sizeof fuzz_err, "%s", err);
    if (!err[0] || (name && strncmp(err, name, strlen(name)) != 0)) {
        fprintf(stderr, "fuzz: the message does not start with \"%s\": \"%s\"\n", name ? name : "", err);
        abort();
    }
}

void fuzz_leaks_visible(int on)
{
#ifdef HC_LSAN
    if (on) __lsan_enable();
    else __lsan_disable();
#else
    (void)on;
#endif
}

/* Replaces hc_die() in every fuzz target and in test_regress (--wrap). */
void __wrap_hc_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void __wrap_hc_die(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!fuzz_die_jmp) {
        fprintf(stderr, "fuzz: hc_die outside FUZZ_TRY: %s\n", msg);
        abort();
    }
    fuzz_refused(msg, NULL);
    longjmp(*fuzz_die_jmp, 1);
}

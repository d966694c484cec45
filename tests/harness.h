/* Minimal test harness. Each test binary runs its cases and prints one line
 * per case: "ok NAME", "FAIL NAME: why" or "skip NAME: why". tests/run.sh
 * counts those lines over every binary and script. */
#ifndef HC_HARNESS_H
#define HC_HARNESS_H

#include <stdio.h>
#include <stddef.h>

extern int th_failed_case;      /* set by CHECK in the running case */
extern const char *th_skip_why; /* set by SKIP */

void th_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define CHECK(cond) do { if (!(cond)) { th_fail(__FILE__, __LINE__, "%s", #cond); return; } } while (0)
#define CHECKF(cond, ...) do { if (!(cond)) { th_fail(__FILE__, __LINE__, __VA_ARGS__); return; } } while (0)
#define SKIP(why) do { th_skip_why = (why); return; } while (0)

/* Run one case: prints its line. */
void th_run(const char *name, void (*fn)(void));
#define RUN(fn) th_run(#fn, fn)
/* Exit status for main(): non-zero if any case failed. */
int th_done(void);

/* Path of a file in the shared fixtures folder ($HC_FIXTURES, default
 * ../shared/fixtures), or NULL when the folder does not exist (then SKIP). */
const char *th_fixture(const char *name);
/* A fresh temporary directory for this test binary (removed at exit). */
const char *th_tmpdir(void);
/* Path "tmpdir/name" (static buffer rotation: up to 8 live results). */
const char *th_tmp(const char *name);
/* Path of a program: "$HC_BIN/name" (default bin/name). */
const char *th_bin(const char *name);
/* Run a shell command, return its exit status (stdout/stderr captured to files
 * tmpdir/last.out and tmpdir/last.err). */
int th_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Contents of tmpdir/last.out or last.err from the latest th_sh (static buffer). */
const char *th_last_out(void);
const char *th_last_err(void);
/* Whole file into malloc'd buffer (NULL if unreadable). */
unsigned char *th_read(const char *path, size_t *len);
int th_write(const char *path, const void *data, size_t len);

#endif

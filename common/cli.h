/* Command-line helpers shared by every program: errors, sizes, progress, time. */
#ifndef HC_CLI_H
#define HC_CLI_H

#include <stdint.h>
#include <stdio.h>

/* Program name used as the prefix of every error line; set once in main(). */
extern const char *hc_prog;

/* Print "prog: message" to stderr and exit(1). */
void hc_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* Print "prog: message" to stderr. */
void hc_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse a byte count: "1234", "4K", "4KiB", "1.5G", "4GiB" (K/M/G/T are 1024-based,
 * as llama.cpp and PowerInfer use them; "KB/MB/GB" are 1000-based). 0 on success. */
int hc_parse_size(const char *s, uint64_t *out);
/* Format a byte count as "12.3 MiB" into buf. */
const char *hc_format_size(uint64_t bytes, char *buf, size_t len);

/* Monotonic seconds. */
double hc_now(void);

/* Progress bar on stderr, drawn only when stderr is a terminal. */
typedef struct {
    const char *label;
    uint64_t total, done;
    double t0, last_draw;
    int active;      /* stderr is a tty */
    const char *unit; /* e.g. "tok": shows a rate as unit/s; NULL for none */
} hc_progress;

void hc_progress_start(hc_progress *p, const char *label, uint64_t total, const char *unit);
void hc_progress_update(hc_progress *p, uint64_t done);
void hc_progress_end(hc_progress *p);

/* Read a whole (small) file into a NUL-terminated malloc'd buffer. NULL + err on failure. */
char *hc_read_file(const char *path, size_t *len, char *err, size_t errlen);

/* 64-bit FNV-1a, chainable through h (start with HC_FNV_INIT). */
#define HC_FNV_INIT 0xcbf29ce484222325ULL
uint64_t hc_fnv1a64(const void *data, size_t len, uint64_t h);

#endif

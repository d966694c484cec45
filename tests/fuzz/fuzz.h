/* Fuzz targets: one function per parser, fuzz_NAME(data, size) in
 * tests/fuzz/fuzz_NAME.c. Built with -DHC_LIBFUZZER (make fuzz) a target is
 * also libFuzzer's entry point; built plainly it is linked into
 * tests/test_regress, which feeds it the inputs kept in tests/regress/NAME/.
 * A target returns 0, or abort()s when a parser breaks one of its promises
 * (a message that is not one line, data outside the input, ...). */
#ifndef HC_FUZZ_H
#define HC_FUZZ_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#ifdef HC_LIBFUZZER
#define FUZZ_TARGET(fn)                                                              \
    int fn(const uint8_t *data, size_t size);                                        \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);                    \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fn(data, size); } \
    int fn(const uint8_t *data, size_t size)
#else
#define FUZZ_TARGET(fn) int fn(const uint8_t *data, size_t size)
#endif

/* Write data to NAME in this process's scratch directory; returns the path
 * (valid until the next call with the same name). */
const char *fuzz_file(const char *name, const void *data, size_t size);
/* Remove NAME from the scratch directory (no error if absent). */
void fuzz_unlink(const char *name);
/* The scratch directory itself. */
const char *fuzz_dir(void);

/* A parser refused the input: its message must not be empty and, unless name
 * is NULL, must start with the name of the input ("NAME: what is wrong";
 * hc_die turns control bytes quoted from a file into '?', so it stays one
 * line). The message is kept in fuzz_err (test_regress compares it with
 * NAME.expect). */
extern char fuzz_err[512];
void fuzz_refused(const char *err, const char *name);
/* abort() with a message unless cond holds. */
#define FUZZ_ASSERT(cond) ((cond) ? (void)0 : fuzz_fail(__FILE__, __LINE__, #cond))
void fuzz_fail(const char *file, int line, const char *what) __attribute__((noreturn));

/* Parsers written for a CLI die with hc_die() (exit 1). Targets link with
 * -Wl,--wrap=hc_die: inside FUZZ_TRY an hc_die() records its message and
 * jumps back (died = 1) instead of exiting; anywhere else it aborts. What the
 * dying code had allocated is left to exit() in the tools, so allocations
 * inside FUZZ_TRY are hidden from LeakSanitizer. */
extern jmp_buf *fuzz_die_jmp;
void fuzz_leaks_visible(int on);
#define FUZZ_TRY(died, stmt)                  \
    do {                                      \
        jmp_buf jb_;                          \
        fuzz_leaks_visible(0);                \
        if (setjmp(jb_) == 0) {               \
            fuzz_die_jmp = &jb_;              \
            stmt;                             \
            (died) = 0;                       \
        } else {                              \
            (died) = 1;                       \
        }                                     \
        fuzz_die_jmp = NULL;                  \
        fuzz_leaks_visible(1);                \
    } while (0)

#endif

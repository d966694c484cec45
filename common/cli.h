/* Helpers shared by every program: errors, option values and bad options,
 * subcommand tables, sizes, time, progress, whole-file reads and maps, JSON
 * output, hashes, PRNG. */
#ifndef HC_CLI_H
#define HC_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

/* Program name used as the prefix of every error line; set once in main(). */
extern const char *hc_prog;

/* Print "prog: message" to stderr and exit(1). */
void hc_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* Flush stdout; output lost there (a full disk, /dev/full) exits through
 * hc_die with "standard output: write failed: REASON". Every program also
 * checks stdout at exit (flush and close, common/cli.c): lost output makes
 * the exit status 1 with that line, so a program calls this only to stop
 * early (hc-run stops generating). A reader that has gone (EPIPE: `| head`)
 * ends the program quietly with status 0; SIGPIPE is ignored in every one. */
void hc_stdout_flush(void);
/* Print "prog: message" to stderr. */
void hc_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse a byte count: "1234", "4K", "4KiB", "1.5G", "4GiB" (K/M/G/T are 1024-based,
 * as llama.cpp and PowerInfer use them; "KB/MB/GB" are 1000-based). 0 on success. */
int hc_parse_size(const char *s, uint64_t *out);
/* Format a byte count as "12.3 MiB" into buf. */
const char *hc_format_size(uint64_t bytes, char *buf, size_t len);

/* Option values: a decimal integer in [lo, hi], a number in [lo, hi] (hi =
 * DBL_MAX: any finite number >= lo); anything else exits through hc_die with
 * "bad value for OPT: 'S' (expected ...)". */
long long hc_opt_int(const char *opt, const char *s, long long lo, long long hi);
/* A seed: a decimal integer 0..2^64-1 (no sign, no other base). */
uint64_t hc_opt_seed(const char *opt, const char *s);
double hc_opt_num(const char *opt, const char *s, double lo, double hi);
/* A KV cache type (llama.cpp's -ctk/-ctv): GGML_TYPE_F32 for "f32", GGML_TYPE_F16
 * for "f16"; llama.cpp's other cache types are refused by name through hc_die. */
uint32_t hc_opt_cache_type(const char *opt, const char *v);
/* Default -t: the online CPUs, clamped to [1, max]. */
int hc_default_threads(int max);
/* The default case of a getopt_long loop whose optstring starts with ':'
 * (c = what it returned): one line "prog: [cmd: ]unknown option 'X' (see
 * --help)" (or "option 'X' needs a value" / "takes no value"), exit(1).
 * cmd names a subcommand, or NULL; longs is the table given to getopt_long. */
void hc_bad_option(int c, const char *cmd, char *const argv[], const struct option *longs)
    __attribute__((noreturn));

/* A subcommand of a program: argv[1] names it; run gets the arguments from
 * that name on (argv[0] is the name) and returns the exit status; help is the
 * text the program's usage shows for it. A table ends with an entry whose
 * name is NULL. */
typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} hc_command;

/* The entry of cmds named name, or NULL. */
const hc_command *hc_command_find(const hc_command *cmds, const char *name);
/* The program's usage: head, every command's help in table order, then tail
 * (NULL: none). */
void hc_command_usage(FILE *out, const char *head, const hc_command *cmds, const char *tail);

/* --version: every getopt_long table holds HC_LONG_VERSION, and its loop has
 * `case HC_OPT_VERSION: hc_version();`, which prints "prog VERSION" to stdout
 * and exits 0 (common/version.c). */
#define HC_OPT_VERSION 0x7601
#define HC_LONG_VERSION { "version", no_argument, 0, HC_OPT_VERSION }
void hc_version(void) __attribute__((noreturn));

/* Monotonic seconds. */
double hc_now(void);

/* Progress bar on stderr, drawn only when stderr is a terminal. */
typedef struct {
    const char *label;
    uint64_t total, done;
    double t0, last_draw;
    int active;      /* stderr is a tty */
    const char *unit; /* what is counted, e.g. "tokens" (shown with a rate in unit/s);
                       * "B": bytes, shown in MiB; NULL for none */
} hc_progress;

void hc_progress_start(hc_progress *p, const char *label, uint64_t total, const char *unit);
void hc_progress_update(hc_progress *p, uint64_t done);
void hc_progress_end(hc_progress *p);
/* The bar's text: "label  50% 12.0/24.0 MiB, 3.0 MiB/s, ETA 0:04". */
void hc_progress_format(const hc_progress *p, double elapsed, char *buf, size_t len);

/* A path made with printf into buf (cap bytes): 0, or -1 with "PATH...: path
 * longer than N bytes" in err when it does not fit, so that a long directory
 * never opens a shortened name (".../config.js"). */
int hc_path(char *buf, size_t cap, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Read a whole (small) file into a NUL-terminated malloc'd buffer: a regular
 * file, or a pipe or character device read to its end (<(cmd), /dev/stdin);
 * a directory or block device refused. NULL + err on failure. */
char *hc_read_file(const char *path, size_t *len, char *err, size_t errlen);
/* All that fd gives until its end (standard input, a pipe), the same way
 * (name for messages); fd stays open. */
char *hc_read_stream(int fd, const char *name, size_t *len, char *err, size_t errlen);

/* A JSON file of at most max bytes, parsed: its root object (cJSON_Delete
 * it), or NULL with "path: why" in err (unreadable, larger than max, does
 * not parse, not an object). cJSON takes about 40 times the text in memory,
 * so every JSON input is read through this with a limit of its own. */
struct cJSON *hc_read_json(const char *path, size_t max, char *err, size_t errlen);
/* The JSON value text[0..len) holds, parsed as hc_read_json's (a root of
 * any kind), or NULL with why in err: it does not parse, text other than
 * JSON whitespace follows the value (a second object appended to a config
 * would be ignored), or it holds U+0000, raw or as "\u0000" (cJSON ends its
 * strings at the first, so a value or a key would be cut short without a
 * word). */
struct cJSON *hc_json_parse(const char *text, size_t len, char *err, size_t errlen);

/* A whole regular file mapped read-only (data NULL when the file is empty). */
typedef struct {
    const uint8_t *data;
    size_t size;
} hc_map;
/* 0, or -1 with "path: why" in err (m then holds no mapping). If the file
 * shrinks while mapped, a read past its new end prints "PROG: path: file
 * changed while being read", removes the output temporaries and exits 1
 * (instead of dying of SIGBUS). */
int hc_map_open(hc_map *m, const char *path, char *err, size_t errlen);
void hc_map_close(hc_map *m);

/* Write s to f as XML character data (SVG text): < > & " escaped, and
 * what XML 1.0 does not allow in a document (bytes that do not begin a valid
 * UTF-8 character, control characters but tab, newline and carriage return)
 * as U+FFFD, so that a name from a file cannot stop the plot from parsing. */
void hc_xml_text(FILE *f, const char *s);

/* Print a cJSON tree to stdout (cJSON_Print's layout, then a newline) and
 * delete it; out of memory exits through hc_die. */
struct cJSON;
void hc_json_print(struct cJSON *root);

/* The n bytes at s as a JSON string that always parses (JSON text is UTF-8,
 * RFC 8259; names, prompts and texts from files and models need not be):
 * each byte that does not begin a valid UTF-8 character becomes U+FFFD, NUL
 * bytes are dropped (cJSON keeps C strings). Out of memory exits through
 * hc_die. */
struct cJSON *hc_json_text(const char *s, size_t n);
/* hc_json_text of the string s added to object o as key. */
void hc_json_add_text(struct cJSON *o, const char *key, const char *s);

/* v as a JSON number of its own digits (cJSON prints a double, which keeps
 * only 15 of them: 8502262104303759 would become 8.50226210430376e+15), and
 * that number added to object o as key. Out of memory exits through hc_die. */
struct cJSON *hc_json_u64(uint64_t v);
void hc_json_add_u64(struct cJSON *o, const char *key, uint64_t v);

/* A JSON number that is a whole number below n (n at most 2^53, where a
 * double still holds every integer) into *out: 1, else 0. Checked before any
 * conversion: a double past an integer type's range (2e59 from a hostile
 * file) converts to undefined behaviour, and 1.5 must not pass as 1. */
int hc_json_index(const struct cJSON *j, uint64_t n, uint64_t *out);

/* splitmix64 (Steele, Lea, Flood 2014): the next value of the stream whose
 * state is *s. Seeded streams that every machine repeats bit for bit. */
static inline uint64_t hc_splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* 64-bit FNV-1a, chainable through h (start with HC_FNV_INIT). */
#define HC_FNV_INIT 0xcbf29ce484222325ULL
uint64_t hc_fnv1a64(const void *data, size_t len, uint64_t h);

#endif

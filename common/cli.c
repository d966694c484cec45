/* Command-line helpers: errors, option values, sizes, time, progress bar,
 * whole-file reads and maps, JSON output, FNV, splitmix64. */
#include "cli.h"

#include <ctype.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "atomic_file.h"
#include "ggml_types.h"
#include "pretok.h"

const char *hc_prog = "hc";

/* hc_die has printed its line: the exit handlers need not add another. */
static int dying;

/* A failed write inside printf leaves only the stream's error flag; a pipe
 * whose reader has gone still says so to poll (POLLERR on the write end). */
static int stdout_reader_gone(void)
{
    struct pollfd p = { .fd = STDOUT_FILENO, .events = POLLOUT };
    return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

/* 0, or why stdout lost output: the errno of the first failure seen, EPIPE
 * for a pipe without its reader, or -1 when nothing tells the reason. */
static int stdout_error(void)
{
    static int lost;
    errno = 0;
    if ((fflush(stdout) != 0 || ferror(stdout)) && !lost)
        lost = errno ? errno : stdout_reader_gone() ? EPIPE : -1;
    return lost;
}

/* "standard output: write failed[: REASON]" into line. */
static const char *stdout_message(int e, char *line, size_t len)
{
    snprintf(line, len, "standard output: write failed%s%s", e > 0 ? ": " : "", e > 0 ? strerror(e) : "");
    return line;
}

/* A reader that has gone (`| head`) took what it wanted: stop quietly with
 * status 0, as ripgrep does. Any other loss is one line and status 1. */
void hc_stdout_flush(void)
{
    char line[256];
    int e = stdout_error();
    if (e == EPIPE) exit(0);
    if (e) hc_die("%s", stdout_message(e, line, sizeof line));
}

/* Output lost on stdout (a full disk, /dev/full) must not pass for success:
 * at exit stdout is flushed and closed, and a failure becomes one line and
 * status 1. A stdout closed before we started (EBADF on close, nothing
 * written) is not an error, nor is a reader that has gone (EPIPE): the
 * status stays what the program chose. */
static void check_stdout(void)
{
    if (dying) return;
    int e = stdout_error();
    if (fclose(stdout) != 0 && !e && errno != EBADF) e = errno;
    if (!e || e == EPIPE) return;
    char line[256];
    fprintf(stderr, "%s: %s\n", hc_prog, stdout_message(e, line, sizeof line));
    _exit(1);
}

/* Registered before main runs, so the check runs after every exit handler
 * the program registers (those may still print). SIGPIPE is ignored so that
 * no program dies of a closed pipe: a write to one fails with EPIPE, which
 * the stdout checks above take as the reader's choice and a file output's
 * writer as a failed write naming the file (the artefact is incomplete). */
__attribute__((constructor)) static void watch_stdout(void)
{
    signal(SIGPIPE, SIG_IGN);
    atexit(check_stdout);
}

static void vmsg(const char *fmt, va_list ap)
{
    char line[4096];
    vsnprintf(line, sizeof line, fmt, ap);
    /* names quoted from a file may hold any byte: keep the message one line
     * and free of terminal escapes: C0 controls and DEL, C1 controls
     * (U+0080..U+009F: U+009B is a CSI), and bytes that are not UTF-8 (a
     * lone 0x9B is a CSI to a terminal that is not UTF-8) become '?' */
    size_t o = 0, n = strlen(line);
    for (size_t i = 0; i < n;) {
        const unsigned char *c = (const unsigned char *)line + i;
        size_t k = (size_t)hc_utf8_valid_len(c, n - i);
        if (k == 0 || c[0] < 0x20 || c[0] == 0x7f || (c[0] == 0xc2 && c[1] < 0xa0)) {
            line[o++] = '?';
            i += k ? k : 1;
        } else {
            memmove(line + o, c, k);
            o += k;
            i += k;
        }
    }
    line[o] = 0;
    fprintf(stderr, "%s: %s\n", hc_prog, line);   /* one write per line */
}

void hc_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    dying = 1;
    exit(1);
}

void hc_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}

int hc_parse_size(const char *s, uint64_t *out)
{
    static const struct { const char *sfx; uint64_t mult; } units[] = {
        { "", 1 }, { "B", 1 },
        { "K", 1ull << 10 }, { "KiB", 1ull << 10 }, { "KB", 1000ull },
        { "M", 1ull << 20 }, { "MiB", 1ull << 20 }, { "MB", 1000000ull },
        { "G", 1ull << 30 }, { "GiB", 1ull << 30 }, { "GB", 1000000000ull },
        { "T", 1ull << 40 }, { "TiB", 1ull << 40 }, { "TB", 1000000000000ull },
    };
    uint64_t ip = 0, fp = 0, fscale = 1;
    const char *p = s;
    if (!isdigit((unsigned char)*p)) return -1;
    for (; isdigit((unsigned char)*p); p++)
        if (__builtin_mul_overflow(ip, 10, &ip) || __builtin_add_overflow(ip, (uint64_t)(*p - '0'), &ip))
            return -1;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p)) return -1;
        for (int nd = 0; isdigit((unsigned char)*p); p++, nd++) {
            if (nd >= 9) return -1;   /* more precision than any size needs */
            fp = fp * 10 + (uint64_t)(*p - '0');
            fscale *= 10;
        }
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(p, units[i].sfx) != 0) continue;
        uint64_t m = units[i].mult, v, frac;
        if (__builtin_mul_overflow(ip, m, &v)) return -1;
        /* fractional part rounded to the nearest byte; fp < 10^9, m <= 2^40: no overflow in 128 bits */
        frac = (uint64_t)(((unsigned __int128)fp * m + fscale / 2) / fscale);
        if (__builtin_add_overflow(v, frac, &v)) return -1;
        *out = v;
        return 0;
    }
    return -1;
}

uint32_t hc_opt_cache_type(const char *opt, const char *v)
{
    if (!strcmp(v, "f32")) return GGML_TYPE_F32;
    if (!strcmp(v, "f16")) return GGML_TYPE_F16;
    static const char *const llama[] = { "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1" };
    for (size_t i = 0; i < sizeof llama / sizeof *llama; i++)
        if (!strcmp(v, llama[i])) hc_die("%s %s: a KV cache of %s is not implemented (f32 or f16)", opt, v, v);
    hc_die("bad value for %s: '%s' (f32 or f16)", opt, v);
}

long long hc_opt_int(const char *opt, const char *s, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        hc_die("bad value for %s: '%s' (expected %lld..%lld)", opt, s, lo, hi);
    return v;
}

uint64_t hc_opt_seed(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);   /* which takes a sign and wraps it: refused below */
    if (!(*s >= '0' && *s <= '9') || *end || errno)
        hc_die("bad value for %s: '%s' (expected 0..18446744073709551615)", opt, s);
    return v;
}

double hc_opt_num(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi)) {
        if (hi == DBL_MAX) hc_die("bad value for %s: '%s' (expected a number >= %g)", opt, s, lo);
        hc_die("bad value for %s: '%s' (expected %g..%g)", opt, s, lo, hi);
    }
    return v;
}

int hc_default_threads(int max)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > max ? max : (int)n;
}

void hc_bad_option(int c, const char *cmd, char *const argv[], const struct option *longs)
{
    /* getopt_long has stepped past a long option: it is argv[optind - 1], and
     * optopt is 0 when its name is unknown, else its val (a value it does not
     * take, or lacks). A short option is optopt, the failing character of its
     * cluster; argv[optind - 1] may then be an earlier argument, so a "--"
     * argument is taken as the culprit only when its option has that val. */
    const char *arg = argv[optind - 1];
    const char *what = c == ':' ? "needs a value" : NULL;   /* NULL: unknown */
    char name[64];
    int is_long = arg[0] == '-' && arg[1] == '-' && arg[2] && !optopt;
    if (optopt && arg[0] == '-' && arg[1] == '-' && arg[2]) {
        size_t n = strcspn(arg + 2, "=");
        for (const struct option *o = longs; o && o->name; o++)
            if (!o->flag && o->val == optopt && strncmp(o->name, arg + 2, n) == 0) is_long = 1;
        if (is_long && c != ':') what = "takes no value";
    }
    if (is_long || !optopt) snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, "="), arg);
    else snprintf(name, sizeof name, "-%c", optopt);
    char msg[128];
    if (what) snprintf(msg, sizeof msg, "option '%s' %s", name, what);
    else snprintf(msg, sizeof msg, "unknown option '%s'", name);
    if (cmd) hc_die("%s: %s (see %s %s --help)", cmd, msg, hc_prog, cmd);
    hc_die("%s (see --help)", msg);
}

const hc_command *hc_command_find(const hc_command *cmds, const char *name)
{
    for (; cmds->name; cmds++)
        if (strcmp(cmds->name, name) == 0) return cmds;
    return NULL;
}

void hc_command_usage(FILE *out, const char *head, const hc_command *cmds, const char *tail)
{
    fputs(head, out);
    for (; cmds->name; cmds++) fputs(cmds->help, out);
    if (tail) fputs(tail, out);
}

const char *hc_format_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    if (bytes < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes;
    int i = 0;
    while (v >= 1024 && i < 6) { v /= 1024; i++; }
    snprintf(buf, len, "%.1f %s", v, u[i]);
    return buf;
}

double hc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void hc_progress_start(hc_progress *p, const char *label, uint64_t total, const char *unit)
{
    p->label = label;
    p->total = total;
    p->done = 0;
    p->unit = unit;
    p->t0 = hc_now();
    p->last_draw = 0;
    p->active = isatty(STDERR_FILENO);
}

void hc_progress_format(const hc_progress *p, double elapsed, char *buf, size_t len)
{
    size_t n = 0;
    int bytes = p->unit && strcmp(p->unit, "B") == 0;
    double scale = bytes ? 1.0 / (1 << 20) : 1.0, rate = elapsed > 0 ? (double)p->done / elapsed : 0;
    const char *unit = bytes ? "MiB" : p->unit;
    /* past the end, snprintf rewrites only the final NUL */
#define ADD(...) (n += (size_t)snprintf(buf + (n < len ? n : len - 1), n < len ? len - n : 1, __VA_ARGS__))
    ADD("%s", p->label ? p->label : "");
    if (p->total) ADD(" %3.0f%%", 100 * ((double)p->done >= (double)p->total ? 1 : (double)p->done / (double)p->total));
    ADD(bytes ? " %.1f" : " %.0f", (double)p->done * scale);
    if (p->total) ADD(bytes ? "/%.1f" : "/%.0f", (double)p->total * scale);
    if (unit) ADD(" %s, %.1f %s/s", unit, rate * scale, unit);
    if (p->total && rate > 0 && p->done < p->total) {
        long eta = (long)((double)(p->total - p->done) / rate + 0.5);
        ADD(", ETA %ld:%02ld", eta / 60, eta % 60);
    }
#undef ADD
}

static void draw(hc_progress *p, double now)
{
    char line[256];
    hc_progress_format(p, now - p->t0, line, sizeof line);
    fprintf(stderr, "\r%s\033[K", line);   /* clear what a longer earlier line left */
    fflush(stderr);
    p->last_draw = now;
}

void hc_progress_update(hc_progress *p, uint64_t done)
{
    p->done = done;
    if (!p->active) return;
    double now = hc_now();
    if (now - p->last_draw < 0.1) return;   /* ~10 redraws a second at most */
    draw(p, now);
}

void hc_progress_end(hc_progress *p)
{
    if (!p->active) return;
    draw(p, hc_now());
    fputc('\n', stderr);
    p->active = 0;
}

int hc_path(char *buf, size_t cap, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < cap) return 0;
    snprintf(err, errlen, "%.200s...: path longer than %zu bytes", buf, cap - 1);
    return -1;
}

char *hc_read_stream(int fd, const char *path, size_t *len, char *err, size_t errlen)
{
    /* an endless stream (/dev/zero) ends in a message, not in the kernel's
       out-of-memory killer: at most half of the machine's memory */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t most = pages > 0 && page > 0 ? (size_t)pages / 2 * (size_t)page : (size_t)1 << 32;
    size_t cap = 1 << 16, got = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (got + 1 == cap) {
            if (cap > most / 2) {
                char sz[32];
                snprintf(err, errlen, "%s: more than %s (half of this machine's memory)", path,
                         hc_format_size(cap, sz, sizeof sz));
                free(buf);
                return NULL;
            }
            char *more = realloc(buf, cap *= 2);
            if (!more) break;
            buf = more;
        }
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            free(buf);
            return NULL;
        }
        if (r == 0) {
            buf[got] = 0;
            if (len) *len = got;
            return buf;
        }
        got += (size_t)r;
    }
    snprintf(err, errlen, "%s: out of memory after %zu bytes", path, got);
    free(buf);
    return NULL;
}

char *hc_read_file(const char *path, size_t *len, char *err, size_t errlen)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode)) {
        snprintf(err, errlen, "%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {   /* a pipe: <(cmd), /dev/stdin */
        char *text = hc_read_stream(fd, path, len, err, errlen);
        close(fd);
        return text;
    }
    size_t size = (size_t)st.st_size, got = 0;
    char *buf = malloc(size + 1);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory for %zu bytes", path, size);
        close(fd);
        return NULL;
    }
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(err, errlen, "%s: %s", path, r < 0 ? strerror(errno) : "file shrank while reading");
            free(buf);
            close(fd);
            return NULL;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[size] = 0;
    if (len) *len = size;
    return buf;
}

/* A file that shrinks while mapped turns a read past its new end into
 * SIGBUS. Every mapping is registered with its file name; the handler prints
 * "PROG: FILE changed while being read", removes the output temporaries
 * (atomic_file.h) and exits with status 1. It uses only async-signal-safe
 * calls (write, unlink, _exit). A SIGBUS outside every mapping goes
 * to the handler that was there before. */
typedef struct watched {
    const uint8_t *volatile base;   /* NULL: a free node, reused by the next mapping */
    size_t size;
    char path[4096];
    struct watched *next;
} watched;
static watched *volatile watched_head;   /* nodes are never freed: the handler may walk them */
static struct sigaction sigbus_before;
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;   /* watch/unwatch, not the handler */

static void put(char *line, size_t *n, size_t cap, const char *s)
{
    for (; *s && *n < cap; s++)
        line[(*n)++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
}

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    const uint8_t *a = si->si_addr;
    for (watched *w = watched_head; w; w = w->next) {
        const uint8_t *b = w->base;
        if (!b || a < b || a >= b + w->size) continue;
        char line[1024];
        size_t n = 0;
        put(line, &n, sizeof line - 1, hc_prog);
        put(line, &n, sizeof line - 1, ": ");
        put(line, &n, sizeof line - 1, w->path);
        put(line, &n, sizeof line - 1, ": file changed while being read");
        line[n++] = '\n';
        ssize_t wr = write(STDERR_FILENO, line, n);
        (void)wr;
        af_remove_temporaries();
        _exit(1);
    }
    sigaction(sig, &sigbus_before, NULL);   /* not ours: fault again under the old handler */
}

static int watch(const uint8_t *base, size_t size, const char *path)
{
    pthread_mutex_lock(&watch_lock);
    static int installed;
    if (!installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        installed = sigaction(SIGBUS, &sa, &sigbus_before) == 0;
    }
    watched *w = watched_head;
    while (w && w->base) w = w->next;
    int fresh = !w;
    if (fresh && !(w = calloc(1, sizeof *w))) {
        pthread_mutex_unlock(&watch_lock);
        return -1;
    }
    w->size = size;
    snprintf(w->path, sizeof w->path, "%s", path);
    w->base = base;   /* after size and path: the handler reads a complete node */
    if (fresh) {
        w->next = watched_head;
        watched_head = w;
    }
    pthread_mutex_unlock(&watch_lock);
    return 0;
}

static void unwatch(const uint8_t *base)
{
    pthread_mutex_lock(&watch_lock);
    for (watched *w = watched_head; w; w = w->next)
        if (w->base == base) w->base = NULL;
    pthread_mutex_unlock(&watch_lock);
}

int hc_map_open(hc_map *m, const char *path, char *err, size_t errlen)
{
    struct stat st;
    *m = (hc_map){ NULL, 0 };
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    int bad = fstat(fd, &st) != 0 ? errno : S_ISREG(st.st_mode) ? 0 : -1;
    if (bad) {
        snprintf(err, errlen, "%s: %s", path, bad > 0 ? strerror(bad) : "not a regular file");
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    if (size == 0) {   /* mmap cannot map an empty file */
        close(fd);
        return 0;
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "%s: mmap: %s", path, strerror(e));
        return -1;
    }
    if (watch(p, size, path) != 0) {
        snprintf(err, errlen, "%s: out of memory", path);
        munmap(p, size);
        return -1;
    }
    *m = (hc_map){ p, size };
    return 0;
}

void hc_map_close(hc_map *m)
{
    if (m->data) {
        unwatch(m->data);
        munmap((void *)m->data, m->size);
    }
    *m = (hc_map){ NULL, 0 };
}

void hc_xml_text(FILE *f, const char *s)
{
    for (size_t n = strlen(s), i = 0; i < n;) {
        const unsigned char *c = (const unsigned char *)s + i;
        size_t k = (size_t)hc_utf8_valid_len(c, n - i);
        if (c[0] == '<') fputs("&lt;", f);
        else if (c[0] == '>') fputs("&gt;", f);
        else if (c[0] == '&') fputs("&amp;", f);
        else if (c[0] == '"') fputs("&quot;", f);
        else if (!k || (c[0] < 0x20 && c[0] != '\t' && c[0] != '\n' && c[0] != '\r')) fputs("\xef\xbf\xbd", f);
        else fwrite(c, 1, k, f);
        i += k ? k : 1;
    }
}

/* Whether s[0..len) holds U+0000, raw or as "\u0000". A backslash and the
 * character it escapes are stepped over together, so "\\u0000" (a
 * backslash, then the text u0000) is not one. */
static int has_nul(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (!s[i]) return 1;
        if (s[i] != '\\' || i + 1 == len) continue;
        if (s[i + 1] == 'u' && len - i >= 6 && !memcmp(s + i + 2, "0000", 4)) return 1;
        i++;
    }
    return 0;
}

cJSON *hc_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    const char *stop = text;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &stop, 0);
    const char *rest = j ? stop : text + len;
    while (rest < text + len && (*rest == ' ' || *rest == '\t' || *rest == '\n' || *rest == '\r')) rest++;
    if (!j) snprintf(err, errlen, "JSON does not parse");
    else if (rest != text + len) snprintf(err, errlen, "text after the JSON value, at byte %zu", (size_t)(rest - text));
    else if (has_nul(text, (size_t)(stop - text))) snprintf(err, errlen, "U+0000 in JSON is not supported");
    else return j;
    cJSON_Delete(j);
    return NULL;
}

cJSON *hc_read_json(const char *path, size_t max, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > max) {
        snprintf(err, errlen, "%s: %llu bytes, more than the %zu this JSON file may have", path,
                 (unsigned long long)st.st_size, max);
        return NULL;
    }
    size_t len;
    char *txt = hc_read_file(path, &len, err, errlen);
    if (!txt) return NULL;
    char why[64] = "file grew past its limit while being read";
    cJSON *j = len <= max ? hc_json_parse(txt, len, why, sizeof why) : NULL;
    free(txt);
    if (!cJSON_IsObject(j)) {
        snprintf(err, errlen, "%s: %s", path, j ? "JSON is not an object" : why);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

void hc_json_print(cJSON *root)
{
    char *s = cJSON_Print(root);
    if (!s) hc_die("out of memory");
    puts(s);
    free(s);
    cJSON_Delete(root);
}

cJSON *hc_json_text(const char *s, size_t n)
{
    char *buf = malloc(3 * n + 1);   /* a byte becomes at most U+FFFD's 3 */
    if (!buf) hc_die("out of memory");
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        const unsigned char *p = (const unsigned char *)s + i;
        size_t len = (size_t)hc_utf8_valid_len(p, n - i);
        if (len) {
            if (p[0]) memcpy(buf + o, p, len), o += len;
            i += len;
        } else {
            memcpy(buf + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    buf[o] = 0;
    cJSON *j = cJSON_CreateString(buf);
    free(buf);
    if (!j) hc_die("out of memory");
    return j;
}

void hc_json_add_text(cJSON *o, const char *key, const char *s)
{
    if (!cJSON_AddItemToObject(o, key, hc_json_text(s, strlen(s)))) hc_die("out of memory");
}

cJSON *hc_json_u64(uint64_t v)
{
    char digits[24];
    snprintf(digits, sizeof digits, "%" PRIu64, v);
    cJSON *j = cJSON_CreateRaw(digits);
    if (!j) hc_die("out of memory");
    return j;
}

void hc_json_add_u64(cJSON *o, const char *key, uint64_t v)
{
    if (!cJSON_AddItemToObject(o, key, hc_json_u64(v))) hc_die("out of memory");
}

int hc_json_index(const cJSON *j, uint64_t n, uint64_t *out)
{
    if (!cJSON_IsNumber(j)) return 0;
    double d = j->valuedouble;
    if (!(d >= 0 && d < (double)n) || d != (double)(uint64_t)d) return 0;
    *out = (uint64_t)d;
    return 1;
}

uint64_t hc_fnv1a64(const void *data, size_t len, uint64_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* Every input kept in tests/regress/NAME/ (each once crashed a parser or got
 * past one of its checks; see tests/regress/README.md) runs through the fuzz
 * target fuzz_NAME, the same entry point `make fuzz` drives. A crash or a
 * failed fuzz check aborts this binary; where NAME/FILE.expect exists, the
 * parser's one-line refusal must contain its text. */
#include "harness.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"

int fuzz_gguf(const uint8_t *, size_t);
int fuzz_gpuidx(const uint8_t *, size_t);
int fuzz_stats(const uint8_t *, size_t);
int fuzz_safetensors(const uint8_t *, size_t);
int fuzz_hfconfig(const uint8_t *, size_t);
int fuzz_hftok(const uint8_t *, size_t);
int fuzz_llama2c(const uint8_t *, size_t);
int fuzz_zip(const uint8_t *, size_t);
int fuzz_pickle(const uint8_t *, size_t);
int fuzz_ptfile(const uint8_t *, size_t);
int fuzz_tokenizer(const uint8_t *, size_t);
int fuzz_model(const uint8_t *, size_t);
int fuzz_prompts(const uint8_t *, size_t);

static const struct {
    const char *name;
    int (*fn)(const uint8_t *, size_t);
} targets[] = {
    {"gguf", fuzz_gguf}, {"gpuidx", fuzz_gpuidx}, {"stats", fuzz_stats},
    {"safetensors", fuzz_safetensors}, {"hfconfig", fuzz_hfconfig}, {"hftok", fuzz_hftok},
    {"llama2c", fuzz_llama2c}, {"zip", fuzz_zip}, {"pickle", fuzz_pickle},
    {"ptfile", fuzz_ptfile}, {"tokenizer", fuzz_tokenizer}, {"model", fuzz_model},
    {"prompts", fuzz_prompts},
};
enum { N_TARGETS = sizeof targets / sizeof *targets };

static const char *root;
static size_t cur;
static int n_inputs;

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }
static int is_input(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    return e->d_name[0] != '.' && !(n > 7 && !strcmp(e->d_name + n - 7, ".expect"));
}

/* Runs input dir/name; "" if it passes, else why not (static buffer). */
static const char *run_input(const char *dir, const char *name)
{
    static char why[2048];
    char path[1024];
    size_t len, elen;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unsigned char *data = th_read(path, &len);
    if (!data) return snprintf(why, sizeof why, "%s: unreadable", path), why;
    fuzz_err[0] = 0;
    targets[cur].fn(data, len);
    free(data);
    snprintf(path, sizeof path, "%s/%s.expect", dir, name);
    char *want = (char *)th_read(path, &elen);
    why[0] = 0;
    if (want) {
        want[strcspn(want, "\n")] = 0;
        if (!strstr(fuzz_err, want)) snprintf(why, sizeof why, "%s: refusal \"%s\" lacks \"%s\"", name, fuzz_err, want);
        free(want);
    }
    return why;
}

static void test_target(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", root, targets[cur].name);
    struct dirent **e;
    int n = scandir(dir, &e, is_input, by_name);
    if (n < 0) SKIP("no regression inputs");
    const char *why = "";
    for (int i = 0; i < n; i++) {
        if (!*why) why = run_input(dir, e[i]->d_name);
        free(e[i]);
    }
    free(e);
    n_inputs += n;
    CHECKF(!*why, "%s", why);
}

/* The regression folder is where this test expects it: an empty run would pass silently. */
static void test_found_inputs(void)
{
    CHECKF(n_inputs > 0, "no inputs under %s", root);
}

int main(void)
{
    root = getenv("HC_REGRESS");
    if (!root || !*root) root = "tests/regress";
    for (cur = 0; cur < N_TARGETS; cur++) th_run(targets[cur].name, test_target);
    RUN(test_found_inputs);
    return th_done();
}

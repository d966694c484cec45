/* Outputs checked before work: distinct from the inputs and each other, and
 * creatable. */
#include "outputs.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "atomic_file.h"
#include "cli.h"

/* A file's identity: its inode if it exists, else its directory's inode and
 * its name there (so two spellings of one new file still compare equal). */
typedef struct {
    dev_t dev;
    ino_t ino;
    const char *base;   /* NULL: an existing file */
} file_id;

static int identify(const char *path, file_id *id)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        *id = (file_id){ st.st_dev, st.st_ino, NULL };
        return 0;
    }
    const char *slash = strrchr(path, '/');
    char *dir = af_dir_of(path);
    int rc = dir && stat(dir, &st) == 0 ? 0 : -1;
    free(dir);
    *id = (file_id){ st.st_dev, st.st_ino, slash ? slash + 1 : path };
    return rc;
}

static int same(const file_id *a, const file_id *b)
{
    if (a->dev != b->dev || a->ino != b->ino || !a->base != !b->base) return 0;
    return !a->base || strcmp(a->base, b->base) == 0;
}

/* 1 if the existing file id is one of the files directly in directory dir. */
static int in_directory(const char *dir, const file_id *id)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct stat st;
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;)
        found = fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISREG(st.st_mode) && st.st_dev == id->dev &&
                st.st_ino == id->ino;
    closedir(d);
    return found;
}

/* Dies if the existing output (identity id) is input in. */
static void check_input(const char *out, const file_id *id, const char *in)
{
    struct stat st;
    if (!in || stat(in, &st) != 0) return;   /* a missing input fails where it is read */
    int hit = S_ISDIR(st.st_mode) ? in_directory(in, id) : st.st_dev == id->dev && st.st_ino == id->ino;
    if (hit) hc_die("%s: output is the same file as the input %s: refusing to overwrite an input", out, in);
}

void hc_check_outputs(const char *const *in, size_t n_in, const char *const *out, size_t n_out)
{
    for (size_t o = 0; o < n_out; o++) {
        if (!out[o]) continue;
        file_id id, other;
        struct stat st;
        int exists = stat(out[o], &st) == 0;
        if (exists && S_ISDIR(st.st_mode)) hc_die("%s: output is a directory", out[o]);
        if (identify(out[o], &id) == 0) {
            for (size_t i = 0; !id.base && i < n_in; i++) check_input(out[o], &id, in[i]);
            /* a character device (/dev/null) may take several outputs */
            for (size_t p = 0; p < o && !(exists && S_ISCHR(st.st_mode)); p++)
                if (out[p] && identify(out[p], &other) == 0 && same(&id, &other))
                    hc_die("%s: output given twice (also as %s)", out[o], out[p]);
        }
        char err[1024];
        if (af_check(out[o], 0, err, sizeof err) != 0) hc_die("%s", err);
    }
}

/* The prompts of hc-run -f FILE --parallel N: one a line, or a JSON object
 * on a line that starts with '{' (JSON Lines) with "prompt" and, for that
 * prompt alone, "n_predict", "temp" and "seed" (-1 as --seed -1;
 * docs/hc-run.md). */
#ifndef HC_PROMPTS_H
#define HC_PROMPTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int line;              /* in the file, from 1 */
    char *text;            /* NUL-terminated, len bytes */
    size_t len;
    int n_predict;         /* -1: the command line's */
    int has_temp, has_seed;
    int seed_drawn;        /* "seed": -1, as --seed -1: the run draws one */
    float temp;
    uint64_t seed;
} hc_prompt;

/* The prompts of text (len bytes, the file name for messages); empty lines
 * hold none, a line's final CR (CRLF endings) is dropped, and a UTF-8 byte
 * order mark at the start is skipped. An array of *n (free with
 * hc_prompts_free), or NULL with "NAME:LINE: what is wrong" in err (not
 * JSON, an unknown key named, a value of the wrong type or range). */
hc_prompt *hc_prompts_parse(const char *name, const char *text, size_t len, int *n, char *err, size_t errlen);
void hc_prompts_free(hc_prompt *p, int n);

#endif

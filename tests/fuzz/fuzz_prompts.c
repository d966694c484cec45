/* hc-run's prompts file for --parallel (runtime/prompts.c, hc_prompts_parse):
 * plain lines and JSON Lines. */
#include "fuzz.h"

#include <math.h>
#include <string.h>

#include "../../runtime/prompts.h"

FUZZ_TARGET(fuzz_prompts)
{
    char err[512];
    int n = 0;
    hc_prompt *p = hc_prompts_parse("p.txt", (const char *)data, size, &n, err, sizeof err);
    if (!p) {
        fuzz_refused(err, "p.txt");
        return 0;
    }
    FUZZ_ASSERT(n > 0);
    for (int i = 0; i < n; i++) {
        FUZZ_ASSERT(p[i].text && p[i].text[p[i].len] == 0 && p[i].len <= size);
        FUZZ_ASSERT(p[i].line >= 1 && (i == 0 || p[i].line > p[i - 1].line));
        FUZZ_ASSERT(p[i].n_predict >= -1 && p[i].n_predict <= 1 << 24);
        FUZZ_ASSERT(!p[i].has_temp || (isfinite(p[i].temp) && p[i].temp >= 0));
    }
    hc_prompts_free(p, n);
    return 0;
}

/* hc-run's prompts file (prompts.h): lines, or JSON Lines read by cJSON. */
#include "prompts.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* One JSON line into p; 0, or -1 with what is wrong in err. */
static int json_prompt(const char *line, size_t len, hc_prompt *p, char *err, size_t errlen)
{
    char why[64];
    cJSON *o = hc_json_parse(line, len, why, sizeof why);
    int rc = -1;
    if (!o) {
        snprintf(err, errlen, "a line starting with '{' must be a JSON object: %s", why);
        goto end;
    }
    if (!cJSON_IsObject(o)) {
        snprintf(err, errlen, "a line starting with '{' must be a JSON object");
        goto end;
    }
    for (const cJSON *v = o->child; v; v = v->next) {
        uint64_t u;
        if (!strcmp(v->string, "prompt")) {
            if (!cJSON_IsString(v)) { snprintf(err, errlen, "\"prompt\" must be a string"); goto end; }
            free(p->text);
            p->len = strlen(v->valuestring);
            if (!(p->text = strdup(v->valuestring))) { snprintf(err, errlen, "out of memory"); goto end; }
        } else if (!strcmp(v->string, "n_predict")) {
            if (!hc_json_index(v, (1 << 24) + 1, &u)) {
                snprintf(err, errlen, "\"n_predict\" must be a whole number 0..16777216");
                goto end;
            }
            p->n_predict = (int)u;
        } else if (!strcmp(v->string, "temp")) {
            if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1e6)) {
                snprintf(err, errlen, "\"temp\" must be a number 0..1e6");
                goto end;
            }
            p->temp = (float)v->valuedouble;
            p->has_temp = 1;
        } else if (!strcmp(v->string, "seed")) {
            if (cJSON_IsNumber(v) && v->valuedouble == -1) {
                p->seed_drawn = 1, p->has_seed = 0;
            } else if (hc_json_index(v, (uint64_t)1 << 53, &u)) {
                p->seed = u, p->has_seed = 1, p->seed_drawn = 0;
            } else {
                snprintf(err, errlen, "\"seed\" must be a whole number 0..2^53-1, or -1 to draw one");
                goto end;
            }
        } else {
            snprintf(err, errlen, "unknown key '%s' (known: prompt, n_predict, temp, seed)", v->string);
            goto end;
        }
    }
    if (!p->text) snprintf(err, errlen, "no \"prompt\"");
    else rc = 0;
end:
    cJSON_Delete(o);
    return rc;
}

hc_prompt *hc_prompts_parse(const char *name, const char *text, size_t len, int *n, char *err, size_t errlen)
{
    hc_prompt *ps = NULL;
    int count = 0, line = 0;
    char why[256];
    /* a UTF-8 byte order mark, which some editors write, would hide the first line's '{' */
    size_t start = len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3) ? 3 : 0;
    for (size_t at = start; at < len; ) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - text) : len, ll = end - at;
        const char *s = text + at;
        at = end + 1;
        line++;
        if (ll && s[ll - 1] == '\r') ll--;   /* a CRLF line's CR is its ending's, not the prompt's */
        if (!ll) continue;
        hc_prompt *more = realloc(ps, sizeof *ps * (size_t)(count + 1));
        if (!more) goto oom;
        ps = more;
        hc_prompt *p = &ps[count++];
        *p = (hc_prompt){ .line = line, .n_predict = -1 };
        if (*s == '{') {
            if (json_prompt(s, ll, p, why, sizeof why)) {
                snprintf(err, errlen, "%s:%d: %s", name, line, why);
                hc_prompts_free(ps, count);
                return NULL;
            }
        } else {
            if (!(p->text = malloc(ll + 1))) goto oom;
            memcpy(p->text, s, ll);
            p->text[ll] = 0;
            p->len = ll;
        }
    }
    *n = count;
    if (!count) snprintf(err, errlen, "%s: no prompts (one a line)", name);
    return count ? ps : NULL;
oom:
    snprintf(err, errlen, "%s:%d: out of memory", name, line);
    hc_prompts_free(ps, count);
    return NULL;
}

void hc_prompts_free(hc_prompt *p, int n)
{
    for (int i = 0; p && i < n; i++) free(p[i].text);
    free(p);
}

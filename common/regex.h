/* The tokenizer's regexes (PCRE2 with UTF and UCP, JIT where PCRE2 has it),
 * and a search for their matches whose work, summed over a whole text, grows
 * linearly with the text: PCRE2's own limits bound one match attempt, not
 * the sum over the attempts of a text, and a regex that reads to the end of
 * the text at every position made tokenizing quadratic. How the search
 * bounds it: docs/design/tokenizer.md, "Work". */
#ifndef HC_REGEX_H
#define HC_REGEX_H

#include <stddef.h>
#include <stdint.h>

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

/* One tokenizer.json regex compiled with UTF and UCP (and JIT where PCRE2 has
 * it), or NULL + "WHAT 'PATTERN': why" in err: PCRE2's message and offset, or
 * a construct whose matches depend on where a search starts (\G, (*COMMIT),
 * (*SKIP), (*NOTEMPTY_ATSTART)), which hc_regex_find cannot honour. */
pcre2_code *hc_regex_compile(const char *what, const char *pattern, char *err, size_t errlen);

/* The work a text may cost: HC_RE_WORK units per byte and regex, plus
 * HC_RE_WORK_EXTRA, a unit being one byte that one match attempt may read.
 * Each attempt may take HC_RE_STEPS_EXTRA + HC_RE_STEPS x W of PCRE2's
 * backtracking steps (its match limit), W being the bytes it may read. */
#define HC_RE_WORK 64
#define HC_RE_WORK_EXTRA (1u << 26)
#define HC_RE_STEPS 4
#define HC_RE_STEPS_EXTRA 200
#define HC_RE_DEPTH_LIMIT 1000000u   /* PCRE2's depth limit: the memory of one attempt */

/* What one text may still cost; its own match context (the limits change
 * with each attempt), so one per thread. */
typedef struct {
    uint64_t left;
    pcre2_match_context *mc;
} hc_regex_budget;

/* The budget of a text of len bytes split by n regexes; -1 when out of memory. */
int hc_regex_budget_init(hc_regex_budget *b, size_t len, int n);
void hc_regex_budget_free(hc_regex_budget *b);

/* The searches of one regex through one text (len bytes of valid UTF-8):
 * fill the first five fields, reach 0. reach keeps the end of the window the
 * last long attempt needed: the next one likely needs as much. */
typedef struct {
    const pcre2_code *re;
    pcre2_match_data *md;   /* the match found: its ovector */
    hc_regex_budget *budget;
    const char *text;
    size_t len, reach;
} hc_regex_search;

/* The match pcre2_match would find searching from offset at: 1, or 0 when
 * there is none; else PCRE2's error code, or HC_REGEX_OVER_BUDGET when the
 * budget is spent. */
#define HC_REGEX_OVER_BUDGET (-10000)
int hc_regex_find(hc_regex_search *s, size_t at);
/* The same for a non-empty match that starts at `at` (pcre2_match with
 * PCRE2_ANCHORED | PCRE2_NOTEMPTY_ATSTART: what pcre2_substitute tries after
 * an empty match). */
int hc_regex_nonempty_at(hc_regex_search *s, size_t at);

#endif

#include "heap.h"

#include <stdlib.h>
#include <string.h>

int hc_grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *p = realloc(*(void **)pp, c * elem);
    if (!p) return -1;
    *(void **)pp = p;
    *cap = c;
    return 0;
}

#define AT(h, i) ((h)->v + (i) * (h)->esz)

int hc_heap_push(hc_heap *h, const void *e)
{
    if (hc_grow(&h->v, &h->cap, h->n + 1, h->esz) != 0) return -1;
    size_t i = h->n++;
    while (i > 0 && h->first(e, AT(h, (i - 1) / 2))) {
        memcpy(AT(h, i), AT(h, (i - 1) / 2), h->esz);
        i = (i - 1) / 2;
    }
    memcpy(AT(h, i), e, h->esz);
    return 0;
}

void hc_heap_pop(hc_heap *h, void *out)
{
    memcpy(out, AT(h, 0), h->esz);
    size_t i = 0, n = --h->n, c;
    const char *last = AT(h, n);
    while ((c = 2 * i + 1) < n) {
        if (c + 1 < n && h->first(AT(h, c + 1), AT(h, c))) c++;
        if (!h->first(AT(h, c), last)) break;
        memcpy(AT(h, i), AT(h, c), h->esz);
        i = c;
    }
    if (n) memmove(AT(h, i), last, h->esz);
}

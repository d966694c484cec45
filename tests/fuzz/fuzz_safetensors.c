/* safetensors headers (gguf-tools/convert_safetensors.c, st_add_file). */
#include "fuzz.h"

#include "convert.h"

FUZZ_TARGET(fuzz_safetensors)
{
    char err[512];
    const char *path = fuzz_file("x.safetensors", data, size);
    st_set s = {0};
    if (st_add_file(&s, path, "", err, sizeof err) != 0) {
        fuzz_refused(err, path);
    } else {
        const hc_map *m = &s.maps[0];
        for (size_t i = 0; i < s.n; i++) {
            const uint8_t *p = s.t[i].data;
            FUZZ_ASSERT(p >= m->data + 8 && p <= m->data + m->size && s.t[i].nbytes <= (size_t)(m->data + m->size - p));
            FUZZ_ASSERT(st_find(&s, s.t[i].name) == (long)i);
        }
    }
    st_free(&s);
    return 0;
}

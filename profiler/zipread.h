/* Read-only ZIP archive reader (what torch.save and numpy's .npz write):
 * stored (method 0) and deflated (method 8, via zlib) entries, zip64 records,
 * no encryption, no multi-disk archives. Every offset and size in the central
 * directory, the local headers and the zip64 records is checked against the
 * buffer before use; extracted data is checked against its CRC-32. */
#ifndef HC_ZIPREAD_H
#define HC_ZIPREAD_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *name;            /* NUL-terminated copy of the entry name */
    uint16_t method;       /* 0 stored, 8 deflated */
    uint32_t crc32;
    uint64_t csize, usize; /* compressed / uncompressed bytes */
    uint64_t data_offset;  /* where the (compressed) bytes start in the archive */
} hc_zip_entry;

typedef struct hc_zip hc_zip;

/* Parse the archive in buf (caller keeps it alive until hc_zip_close).
 * NULL + one-line "NAME: what is wrong" in err on any inconsistency. */
hc_zip *hc_zip_open_mem(const void *buf, size_t size, const char *name, char *err, size_t errlen);
/* Map the file at path and parse it. */
hc_zip *hc_zip_open(const char *path, char *err, size_t errlen);
void hc_zip_close(hc_zip *z);

size_t hc_zip_count(const hc_zip *z);
const hc_zip_entry *hc_zip_entry_at(const hc_zip *z, size_t i);
/* Index of the entry with exactly this name, or -1. */
long hc_zip_find(const hc_zip *z, const char *name);
/* Uncompressed bytes of entry i in a malloc'd buffer (one extra NUL byte
 * after the data); NULL + message on a bad entry, bad data or CRC mismatch.
 * An entry declaring more than max bytes is refused before anything is
 * allocated or inflated (a zip bomb costs nothing); inflation writes only
 * into the declared size and fails if the data would go past it. */
void *hc_zip_read(const hc_zip *z, size_t i, uint64_t max, size_t *len, char *err, size_t errlen);

#endif

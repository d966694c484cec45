/* ZIP archives (what torch.save writes) read through libzip: libzip parses
 * the directories (zip64 included), checks every local header against the
 * central directory (ZIP_CHECKCONS), inflates and checks CRC-32s. This layer
 * adds what the importer needs on top: one-line "NAME: what is wrong"
 * messages, stored and deflated entries only (what torch.save and zipfile
 * write, so no other decoder of libzip sees the input), and reads bounded
 * by what the caller needs (docs/hardening.md). */
#ifndef HC_ZIPREAD_H
#define HC_ZIPREAD_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;      /* the entry name (libzip's copy, valid until hc_zip_close) */
    uint16_t method;       /* 0 stored, 8 deflated (hc_zip_read refuses others) */
    uint64_t csize, usize; /* compressed / uncompressed bytes the directory declares */
} hc_zip_entry;

typedef struct hc_zip hc_zip;

/* Open the archive in buf (caller keeps buf and name alive until hc_zip_close).
 * NULL + one-line "NAME: what is wrong" in err on any inconsistency. */
hc_zip *hc_zip_open_mem(const void *buf, size_t size, const char *name, char *err, size_t errlen);
void hc_zip_close(hc_zip *z);

size_t hc_zip_count(const hc_zip *z);
const hc_zip_entry *hc_zip_entry_at(const hc_zip *z, size_t i);
/* Index of the entry with exactly this name, or -1. */
long hc_zip_find(const hc_zip *z, const char *name);
/* Uncompressed bytes of entry i (< hc_zip_count) in a malloc'd buffer (one extra NUL byte
 * after the data); NULL + message on bad data or a CRC mismatch. An entry
 * declaring more than max bytes is refused before anything is allocated or
 * inflated; otherwise at most one byte more than declared is inflated, and
 * data that is longer or shorter than declared is refused (a zip bomb costs
 * at most max + 1 bytes). */
void *hc_zip_read(const hc_zip *z, size_t i, uint64_t max, size_t *len, char *err, size_t errlen);

#endif

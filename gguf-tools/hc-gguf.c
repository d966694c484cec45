/* hc-gguf: inspect (dump) and validate (check) GGUF and PowerInfer PWRI files. */
#include "cli.h"
#include "gguf.h"
#include "pretok.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_ARRAY_HEAD 8   /* array elements shown in text mode without --full */

static const char *variant_name(gguf_variant v) { return v == GGUF_VARIANT_PWRI ? "PWRI" : "GGUF"; }

static uint64_t tensor_bytes(const gguf_file *f)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) n += f->tensors[i].nbytes;
    return n;
}

static void usage(FILE *out)
{
    fprintf(out,
        "usage: hc-gguf dump [--json] [--full] FILE\n"
        "       hc-gguf check FILE\n"
        "\n"
        "  dump    print the header, every key/value and every tensor (name, type,\n"
        "          shape, offset, bytes); arrays show their first %d elements\n"
        "  check   validate the whole file (header, metadata, tensor infos, packed\n"
        "          aligned offsets, data inside the file); exit 0 with a one-line\n"
        "          summary, or print the first problem and exit 1\n"
        "\n"
        "  -j, --json   dump as JSON (always complete, every array element)\n"
        "  -f, --full   text dump: print every array element\n"
        "      --version print the version\n"
        "  -h, --help   this help\n"
        "\n"
        "Reads GGUF v2/v3 and PowerInfer's \"PWRI\" variant (reported as such).\n",
        TEXT_ARRAY_HEAD);
}

/* Shortest %g form that reads back as the same value. */
static void fmt_real(char *buf, size_t len, double v, int is_f32)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (is_f32 ? (float)back == (float)v : back == v) return;
    }
}

/* ------------------------------------------------------------------ text */

/* s[0..n) with '"', '\\' and control bytes escaped (\n, \t, \r, \xHH; C1
 * controls U+0080..U+009F as \uHHHH, bytes that are not UTF-8 as \xHH), in a
 * malloc'd string: names and values from a file never reach the terminal raw. */
static char *escaped(const char *s, uint64_t n)
{
    char *out = malloc(4 * n + 1), *o = out;
    if (!out) hc_die("out of memory");
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (size_t)hc_utf8_valid_len((const unsigned char *)s + i, (size_t)(n - i));
        if (c == '"' || c == '\\') o += sprintf(o, "\\%c", c);
        else if (c == '\n') o += sprintf(o, "\\n");
        else if (c == '\t') o += sprintf(o, "\\t");
        else if (c == '\r') o += sprintf(o, "\\r");
        else if (c < 0x20 || c == 0x7f || k == 0) o += sprintf(o, "\\x%02x", c);
        else if (c == 0xc2 && (unsigned char)s[i + 1] < 0xa0) o += sprintf(o, "\\u%04x", (unsigned char)s[++i]);
        else {
            memcpy(o, s + i, k);
            o += k;
            i += k - 1;
        }
    }
    *o = 0;
    return out;
}

static void print_escaped(const char *s, uint64_t n)
{
    char *e = escaped(s, n);
    printf("\"%s\"", e);
    free(e);
}

static void print_elem(const gguf_kv *kv, uint64_t i)
{
    uint32_t t = kv->type == GGUF_TYPE_ARRAY ? kv->arr_type : kv->type;
    char buf[64];
    int64_t i64;
    uint64_t u64;
    switch (t) {
    case GGUF_TYPE_STRING:
        print_escaped(kv->strs[i].ptr, kv->strs[i].len);
        break;
    case GGUF_TYPE_BOOL:
        fputs(gguf_kv_num(kv, i) != 0 ? "true" : "false", stdout);
        break;
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64:
        fmt_real(buf, sizeof buf, gguf_kv_num(kv, i), t == GGUF_TYPE_FLOAT32);
        fputs(buf, stdout);
        break;
    case GGUF_TYPE_UINT64:   /* 64-bit values are not exact in a double */
        memcpy(&u64, kv->data + 8 * i, 8);
        printf("%" PRIu64, u64);
        break;
    case GGUF_TYPE_INT64:
        memcpy(&i64, kv->data + 8 * i, 8);
        printf("%" PRId64, i64);
        break;
    default:
        printf("%.0f", gguf_kv_num(kv, i));
    }
}

static void dump_text(const gguf_file *f, int full)
{
    printf("file:        %s\n", f->path);
    printf("format:      %s%s, version %u\n", variant_name(f->variant),
           f->variant == GGUF_VARIANT_PWRI ? " (PowerInfer sparse model)" : "", f->version);
    printf("size:        %zu bytes\n", f->size);
    printf("alignment:   %u\n", f->alignment);
    printf("kv count:    %" PRIu64 "\n", f->n_kv);
    printf("tensors:     %" PRIu64 " (%" PRIu64 " bytes of data)\n", f->n_tensors, tensor_bytes(f));
    printf("data offset: %" PRIu64 "\n", f->data_offset);

    printf("\nkey/value pairs:\n");
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        char type[48];
        if (kv->type == GGUF_TYPE_ARRAY)
            snprintf(type, sizeof type, "%s[%" PRIu64 "]", gguf_vtype_name(kv->arr_type), kv->n);
        else
            snprintf(type, sizeof type, "%s", gguf_vtype_name(kv->type));
        char *key = escaped(kv->key, strlen(kv->key));
        printf("  %4" PRIu64 "  %-40s %-14s = ", i, key, type);
        free(key);
        if (kv->type != GGUF_TYPE_ARRAY) {
            print_elem(kv, 0);
        } else {
            uint64_t shown = full || kv->n <= TEXT_ARRAY_HEAD ? kv->n : TEXT_ARRAY_HEAD;
            putchar('[');
            for (uint64_t k = 0; k < shown; k++) {
                if (k) fputs(", ", stdout);
                print_elem(kv, k);
            }
            if (shown < kv->n) printf(", ... %" PRIu64 " more", kv->n - shown);
            putchar(']');
        }
        putchar('\n');
    }

    printf("\ntensors:\n");
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        char shape[128];
        int n = snprintf(shape, sizeof shape, "[");
        for (uint32_t d = 0; d < t->n_dims; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRId64, d ? ", " : "", t->ne[d]);
        snprintf(shape + n, sizeof shape - (size_t)n, "]");
        char *name = escaped(t->name, strlen(t->name));
        printf("  %4" PRIu64 "  %-32s %-6s %-22s offset %-12" PRIu64 " %" PRIu64 " bytes\n",
               i, name, ggml_type_name(t->type), shape, t->offset, t->nbytes);
        free(name);
    }
}

/* ------------------------------------------------------------------ json */

static void *xcheck(void *p)
{
    if (!p) hc_die("out of memory");
    return p;
}

static cJSON *json_elem(const gguf_kv *kv, uint64_t i)
{
    uint32_t t = kv->type == GGUF_TYPE_ARRAY ? kv->arr_type : kv->type;
    double v;
    int64_t i64;
    uint64_t u64;
    char buf[64];
    switch (t) {
    case GGUF_TYPE_STRING:
        return hc_json_text(kv->strs[i].ptr, kv->strs[i].len);
    case GGUF_TYPE_BOOL:
        return xcheck(cJSON_CreateBool(gguf_kv_num(kv, i) != 0));
    case GGUF_TYPE_UINT64:
        memcpy(&u64, kv->data + 8 * i, 8);
        return hc_json_u64(u64);
    case GGUF_TYPE_INT64:
        memcpy(&i64, kv->data + 8 * i, 8);
        snprintf(buf, sizeof buf, "%" PRId64, i64);
        return xcheck(cJSON_CreateRaw(buf));
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64:
        v = gguf_kv_num(kv, i);
        if (!isfinite(v)) return xcheck(cJSON_CreateNull());   /* JSON has no NaN/inf */
        fmt_real(buf, sizeof buf, v, t == GGUF_TYPE_FLOAT32);
        return xcheck(cJSON_CreateRaw(buf));
    default:
        return xcheck(cJSON_CreateNumber(gguf_kv_num(kv, i)));   /* <= 32 bits: exact */
    }
}

static void dump_json(const gguf_file *f)
{
    cJSON *root = xcheck(cJSON_CreateObject());
    hc_json_add_text(root, "file", f->path);
    cJSON_AddItemToObject(root, "variant", xcheck(cJSON_CreateString(variant_name(f->variant))));
    hc_json_add_u64(root, "version", f->version);
    hc_json_add_u64(root, "size", f->size);
    hc_json_add_u64(root, "alignment", f->alignment);
    hc_json_add_u64(root, "n_kv", f->n_kv);
    hc_json_add_u64(root, "n_tensors", f->n_tensors);
    hc_json_add_u64(root, "data_offset", f->data_offset);

    cJSON *kvs = xcheck(cJSON_AddArrayToObject(root, "kv"));
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        cJSON *o = xcheck(cJSON_CreateObject());
        hc_json_add_text(o, "key", kv->key);
        cJSON_AddItemToObject(o, "type", xcheck(cJSON_CreateString(gguf_vtype_name(kv->type))));
        if (kv->type == GGUF_TYPE_ARRAY) {
            cJSON *arr = xcheck(cJSON_CreateArray());
            cJSON_AddItemToObject(o, "elem_type", xcheck(cJSON_CreateString(gguf_vtype_name(kv->arr_type))));
            hc_json_add_u64(o, "n", kv->n);
            for (uint64_t k = 0; k < kv->n; k++) cJSON_AddItemToArray(arr, json_elem(kv, k));
            cJSON_AddItemToObject(o, "value", arr);
        } else {
            cJSON_AddItemToObject(o, "value", json_elem(kv, 0));
        }
        cJSON_AddItemToArray(kvs, o);
    }

    cJSON *ts = xcheck(cJSON_AddArrayToObject(root, "tensors"));
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        cJSON *o = xcheck(cJSON_CreateObject());
        cJSON *shape = xcheck(cJSON_CreateArray());
        for (uint32_t d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(shape, hc_json_u64((uint64_t)t->ne[d]));
        hc_json_add_text(o, "name", t->name);
        cJSON_AddItemToObject(o, "type", xcheck(cJSON_CreateString(ggml_type_name(t->type))));
        cJSON_AddItemToObject(o, "shape", shape);
        hc_json_add_u64(o, "offset", t->offset);
        hc_json_add_u64(o, "bytes", t->nbytes);
        cJSON_AddItemToArray(ts, o);
    }

    hc_json_print(root);
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "json", no_argument, NULL, 'j' },
        { "full", no_argument, NULL, 'f' },
        HC_LONG_VERSION, { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int json = 0, full = 0, c;
    hc_prog = "hc-gguf";
    while ((c = getopt_long(argc, argv, ":jfh", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'f': full = 1; break;
        case HC_OPT_VERSION: hc_version();
        case 'h': usage(stdout); return 0;
        default: hc_bad_option(c, NULL, argv, opts);
        }
    }
    if (argc - optind != 2) {
        usage(stderr);
        return 1;
    }
    const char *cmd = argv[optind], *path = argv[optind + 1];
    int dump = strcmp(cmd, "dump") == 0;
    if (!dump && strcmp(cmd, "check") != 0) hc_die("unknown command '%s' (dump or check)", cmd);
    if (!dump && (json || full)) hc_die("--json and --full apply to dump only");

    char err[1024];
    gguf_file *f = gguf_open(path, err, sizeof err);
    if (!f) hc_die("%s", err);
    if (!dump) {
        printf("%s: ok: %s v%u, %" PRIu64 " KVs, %" PRIu64 " tensors, %" PRIu64 " bytes of tensor data, %zu bytes\n",
               path, variant_name(f->variant), f->version, f->n_kv, f->n_tensors, tensor_bytes(f), f->size);
    } else if (json) {
        dump_json(f);
    } else {
        dump_text(f, full);
    }
    gguf_close(f);
    return 0;
}

/* A tiny pickle machine: a stack of values, a memo and a mark stack, enough
 * for the opcodes torch.save emits for one tensor; REDUCE is evaluated only
 * for the two callables that legitimately appear (OrderedDict and
 * _rebuild_tensor_v2), so nothing from the file is ever executed. */
#include "pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { V_INT, V_BOOL, V_STR, V_TUPLE, V_GLOBAL, V_STORAGE, V_ODICT, V_TENSOR };
/* callables and classes that may appear */
enum { G_REBUILD, G_ODICT, G_STORAGE };

#define MAX_VALUES 128   /* one tensor needs about 20 */
#define MAX_STACK 32
#define MAX_MEMO 64
#define MAX_TUPLE HC_PICKLE_MAX_DIMS

typedef struct {
    int kind;
    int64_t i;                 /* V_INT, V_BOOL; V_GLOBAL: G_* */
    const char *s; size_t n;   /* V_STR; V_GLOBAL (storage): the class name */
    int items[MAX_TUPLE];      /* V_TUPLE: value indices */
    int n_items;
} value;

typedef struct {
    const uint8_t *p;
    size_t len, pos, op_pos;
    const char *name;
    char *err; size_t errlen;
    value v[MAX_VALUES];
    int n_v;
    int stack[MAX_STACK], sp;
    int marks[MAX_STACK], n_marks;
    int memo[MAX_MEMO];
    hc_pickle_tensor *t;
} vm;

static int fail(vm *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(vm *m, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(m->err, m->errlen, "%s: offset %zu: ", m->name, m->op_pos);
    if (n < 0 || (size_t)n >= m->errlen) return -1;
    va_start(ap, fmt);
    vsnprintf(m->err + n, m->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static int need(vm *m, size_t n)
{
    return n <= m->len - m->pos ? 0 : fail(m, "pickle ends inside an opcode argument");
}

static uint64_t rd_le(const uint8_t *p, int n)
{
    uint64_t x = 0;
    for (int k = n - 1; k >= 0; k--) x = x << 8 | p[k];
    return x;
}

static int new_value(vm *m, int kind)
{
    if (m->n_v == MAX_VALUES) return fail(m, "pickle too large for one tensor");
    memset(&m->v[m->n_v], 0, sizeof m->v[0]);
    m->v[m->n_v].kind = kind;
    return m->n_v++;
}

static int push(vm *m, int idx)
{
    if (idx < 0) return -1;
    if (m->sp == MAX_STACK) return fail(m, "pickle stack too deep");
    m->stack[m->sp++] = idx;
    return 0;
}

static int push_int(vm *m, int64_t x)
{
    int idx = new_value(m, V_INT);
    if (idx >= 0) m->v[idx].i = x;
    return push(m, idx);
}

/* Values above the innermost mark (or the top k) become one tuple. */
static int make_tuple(vm *m, int from)
{
    int k = m->sp - from;
    /* An opcode that popped below the innermost mark leaves it above the top. */
    if (k < 0) return fail(m, "TUPLE: the stack was popped below its MARK");
    if (k > MAX_TUPLE) return fail(m, "tuple of %d items is too long", k);
    int idx = new_value(m, V_TUPLE);
    if (idx < 0) return -1;
    memcpy(m->v[idx].items, m->stack + from, (size_t)k * sizeof(int));
    m->v[idx].n_items = k;
    m->sp = from;
    return push(m, idx);
}

static int eq(const char *a, size_t n, const char *s) { return n == strlen(s) && memcmp(a, s, n) == 0; }

static int op_global(vm *m)
{
    const char *mod = (const char *)m->p + m->pos;
    const char *nl1 = memchr(mod, '\n', m->len - m->pos);
    const char *nm = nl1 ? nl1 + 1 : NULL;
    const char *nl2 = nm ? memchr(nm, '\n', (size_t)((const char *)m->p + m->len - nm)) : NULL;
    if (!nl2) return fail(m, "GLOBAL without two newline-terminated names");
    size_t ml = (size_t)(nl1 - mod), nl = (size_t)(nl2 - nm);
    m->pos = (size_t)(nl2 + 1 - (const char *)m->p);
    int idx = new_value(m, V_GLOBAL);
    if (idx < 0) return -1;
    value *g = &m->v[idx];
    if (eq(mod, ml, "torch._utils") && eq(nm, nl, "_rebuild_tensor_v2")) g->i = G_REBUILD;
    else if (eq(mod, ml, "collections") && eq(nm, nl, "OrderedDict")) g->i = G_ODICT;
    else if (eq(mod, ml, "torch") && nl > 7 && nl < sizeof m->t->storage_type &&
             memcmp(nm + nl - 7, "Storage", 7) == 0) { g->i = G_STORAGE; g->s = nm; g->n = nl; }
    else return fail(m, "unsupported global %.*s.%.*s (not a plain torch tensor)", (int)ml, mod, (int)nl, nm);
    return push(m, idx);
}

static const value *item(const vm *m, const value *tup, int k) { return &m->v[tup->items[k]]; }

static int copy_str(vm *m, const value *s, char *dst, size_t cap, const char *what)
{
    if (s->kind != V_STR || s->n >= cap) return fail(m, "storage %s is not a short string", what);
    memcpy(dst, s->s, s->n);
    dst[s->n] = 0;
    return 0;
}

/* BINPERSID: ('storage', torch.XStorage, key, location, numel) */
static int op_persid(vm *m)
{
    const value *pid = &m->v[m->stack[m->sp - 1]];
    hc_pickle_tensor *t = m->t;
    if (pid->kind != V_TUPLE || pid->n_items != 5 || item(m, pid, 0)->kind != V_STR ||
        item(m, pid, 0)->n != 7 || memcmp(item(m, pid, 0)->s, "storage", 7) != 0 ||
        item(m, pid, 1)->kind != V_GLOBAL || item(m, pid, 1)->i != G_STORAGE || item(m, pid, 4)->kind != V_INT)
        return fail(m, "persistent id is not ('storage', torch.<T>Storage, key, location, numel)");
    if (t->storage_type[0]) return fail(m, "more than one storage (only one tensor is supported)");
    const value *cls = item(m, pid, 1);
    memcpy(t->storage_type, cls->s, cls->n);
    t->storage_type[cls->n] = 0;
    if (copy_str(m, item(m, pid, 2), t->key, sizeof t->key, "key") ||
        copy_str(m, item(m, pid, 3), t->location, sizeof t->location, "location"))
        return -1;
    t->storage_numel = item(m, pid, 4)->i;
    if (t->storage_numel < 0) return fail(m, "negative storage size");
    m->sp--;
    return push(m, new_value(m, V_STORAGE));
}

static int int_tuple(vm *m, const value *v, int64_t *out, const char *what)
{
    if (v->kind != V_TUPLE) return fail(m, "tensor %s is not a tuple", what);
    for (int k = 0; k < v->n_items; k++) {
        if (item(m, v, k)->kind != V_INT) return fail(m, "tensor %s holds a non-integer", what);
        out[k] = item(m, v, k)->i;
    }
    return 0;
}

/* REDUCE: callable(*args) for the two callables we know */
static int op_reduce(vm *m)
{
    const value *fn = &m->v[m->stack[m->sp - 2]], *args = &m->v[m->stack[m->sp - 1]];
    if (fn->kind != V_GLOBAL || args->kind != V_TUPLE) return fail(m, "REDUCE of something that is not a known callable");
    m->sp -= 2;
    if (fn->i == G_ODICT) {
        if (args->n_items != 0) return fail(m, "non-empty OrderedDict (backward hooks are not supported)");
        return push(m, new_value(m, V_ODICT));
    }
    if (fn->i != G_REBUILD) return fail(m, "REDUCE of a storage class");
    hc_pickle_tensor *t = m->t;
    if (args->n_items != 6 || item(m, args, 0)->kind != V_STORAGE || item(m, args, 1)->kind != V_INT ||
        item(m, args, 2)->kind != V_TUPLE || item(m, args, 3)->kind != V_TUPLE ||
        item(m, args, 4)->kind != V_BOOL || item(m, args, 5)->kind != V_ODICT)
        return fail(m, "_rebuild_tensor_v2 arguments are not (storage, offset, shape, stride, requires_grad, hooks)");
    if (item(m, args, 2)->n_items != item(m, args, 3)->n_items)
        return fail(m, "tensor shape and stride have different lengths");
    t->offset = item(m, args, 1)->i;
    t->ndim = item(m, args, 2)->n_items;
    t->requires_grad = (int)item(m, args, 4)->i;
    if (int_tuple(m, item(m, args, 2), t->shape, "shape") || int_tuple(m, item(m, args, 3), t->stride, "stride"))
        return -1;
    return push(m, new_value(m, V_TENSOR));
}

static int step(vm *m, uint8_t op)
{
    switch (op) {
    case 0x80: /* PROTO */
        if (need(m, 1)) return -1;
        if (m->p[m->pos] < 2 || m->p[m->pos] > 5) return fail(m, "pickle protocol %u", m->p[m->pos]);
        m->pos++;
        return 0;
    case 'c': return op_global(m);
    case '(': /* MARK */
        if (m->n_marks == MAX_STACK) return fail(m, "too many marks");
        m->marks[m->n_marks++] = m->sp;
        return 0;
    case 't': /* TUPLE */
        if (!m->n_marks) return fail(m, "TUPLE without MARK");
        return make_tuple(m, m->marks[--m->n_marks]);
    case ')': return make_tuple(m, m->sp);
    case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
        int k = op - 0x84;
        if (m->sp < k) return fail(m, "TUPLE%d on a short stack", k);
        return make_tuple(m, m->sp - k);
    }
    case 'K': if (need(m, 1)) return -1; m->pos += 1; return push_int(m, m->p[m->pos - 1]);
    case 'M': if (need(m, 2)) return -1; m->pos += 2; return push_int(m, (int64_t)rd_le(m->p + m->pos - 2, 2));
    case 'J': if (need(m, 4)) return -1; m->pos += 4; return push_int(m, (int32_t)rd_le(m->p + m->pos - 4, 4));
    case 0x8a: { /* LONG1: n-byte little-endian two's complement */
        if (need(m, 1)) return -1;
        int n = m->p[m->pos++];
        if (n > 8) return fail(m, "integer of %d bytes is too large", n);
        if (need(m, (size_t)n)) return -1;
        uint64_t x = n ? rd_le(m->p + m->pos, n) : 0;
        if (n && n < 8 && (m->p[m->pos + (size_t)n - 1] & 0x80)) x |= ~0ULL << (8 * n);
        m->pos += (size_t)n;
        return push_int(m, (int64_t)x);
    }
    case 'X': { /* BINUNICODE */
        if (need(m, 4)) return -1;
        uint64_t n = rd_le(m->p + m->pos, 4);
        m->pos += 4;
        if (need(m, n)) return -1;
        int idx = new_value(m, V_STR);
        if (idx < 0) return -1;
        m->v[idx].s = (const char *)m->p + m->pos;
        m->v[idx].n = (size_t)n;
        m->pos += (size_t)n;
        return push(m, idx);
    }
    case 0x88: case 0x89: { /* NEWTRUE, NEWFALSE */
        int idx = new_value(m, V_BOOL);
        if (idx >= 0) m->v[idx].i = op == 0x88;
        return push(m, idx);
    }
    case 'q': case 'r': { /* BINPUT, LONG_BINPUT */
        int n = op == 'q' ? 1 : 4;
        if (need(m, (size_t)n)) return -1;
        uint64_t k = rd_le(m->p + m->pos, n);
        m->pos += (size_t)n;
        if (k >= MAX_MEMO) return fail(m, "memo index %llu too large", (unsigned long long)k);
        if (!m->sp) return fail(m, "PUT on an empty stack");
        m->memo[k] = m->stack[m->sp - 1];
        return 0;
    }
    case 'h': case 'j': { /* BINGET, LONG_BINGET */
        int n = op == 'h' ? 1 : 4;
        if (need(m, (size_t)n)) return -1;
        uint64_t k = rd_le(m->p + m->pos, n);
        m->pos += (size_t)n;
        if (k >= MAX_MEMO || m->memo[k] < 0) return fail(m, "GET of unset memo %llu", (unsigned long long)k);
        return push(m, m->memo[k]);
    }
    case 'Q': /* BINPERSID */
        if (!m->sp) return fail(m, "BINPERSID on an empty stack");
        return op_persid(m);
    case 'R':
        if (m->sp < 2) return fail(m, "REDUCE on a short stack");
        return op_reduce(m);
    default:
        return fail(m, "unsupported pickle opcode 0x%02x", op);
    }
}

int hc_pickle_tensor_read(const void *buf, size_t len, const char *name, hc_pickle_tensor *t,
                          char *err, size_t errlen)
{
    vm mach = { 0 }, *m = &mach;
    m->p = buf; m->len = len; m->name = name; m->err = err; m->errlen = errlen; m->t = t;
    memset(t, 0, sizeof *t);
    for (int k = 0; k < MAX_MEMO; k++) m->memo[k] = -1;
    while (m->pos < m->len) {
        m->op_pos = m->pos;
        uint8_t op = m->p[m->pos++];
        if (op == '.') { /* STOP */
            if (m->pos != m->len) return fail(m, "bytes after STOP");
            if (m->sp != 1 || m->n_marks || m->v[m->stack[0]].kind != V_TENSOR)
                return fail(m, "the pickle does not hold exactly one tensor");
            return 0;
        }
        if (step(m, op) != 0) return -1;
    }
    m->op_pos = m->pos;
    return fail(m, "pickle ends without STOP");
}

/* Merkle fingerprints of model states, compiled: the same function as
 * pulsar_verify/merkle.py (which says what is hashed; a test checks the two
 * agree), several tens of times faster. MurmurHash3_x64_128 is written out here
 * so that no library is needed at build time (a test checks it against mmh3). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#define DIGEST 16

/* ---- MurmurHash3_x64_128 (Austin Appleby, public domain), seed 0, over one contiguous input ---- */

static inline uint64_t rotl(uint64_t x, int n) { return (x << n) | (x >> (64 - n)); }

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint64_t fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

#define C1 0x87c37b91114253d5ULL
#define C2 0x4cf5ad432745937fULL

static void hash128(const uint8_t *in, size_t len, uint8_t out[DIGEST]) {
    uint64_t h1 = 0, h2 = 0, k1, k2;
    size_t blocks = len / 16;
    for (size_t i = 0; i < blocks; i++, in += 16) {
        k1 = load64(in) * C1;
        k2 = load64(in + 8) * C2;
        h1 ^= rotl(k1, 31) * C2;
        h1 = (rotl(h1, 27) + h2) * 5 + 0x52dce729;
        h2 ^= rotl(k2, 33) * C1;
        h2 = (rotl(h2, 31) + h1) * 5 + 0x38495ab5;
    }
    uint8_t tail[16] = {0};
    size_t rest = len & 15;
    memcpy(tail, in, rest);
    if (rest > 8) h2 ^= rotl(load64(tail + 8) * C2, 33) * C1;
    if (rest > 0) h1 ^= rotl(load64(tail) * C1, 31) * C2;
    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 += h2;
    h2 += h1;
    for (int i = 0; i < 8; i++) {
        out[i] = (uint8_t)(h1 >> (8 * i));
        out[8 + i] = (uint8_t)(h2 >> (8 * i));
    }
}

/* ---- a growable byte buffer, on the stack until it outgrows it ---- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
    uint8_t local[512];
} Buf;

static void buf_init(Buf *b) { b->p = b->local; b->n = 0; b->cap = sizeof b->local; }
static void buf_free(Buf *b) { if (b->p != b->local) PyMem_Free(b->p); }

static int buf_reserve(Buf *b, size_t more) {
    if (b->n + more <= b->cap) return 0;
    size_t cap = b->cap * 2;
    while (cap < b->n + more) cap *= 2;
    uint8_t *p = PyMem_Malloc(cap);
    if (!p) { PyErr_NoMemory(); return -1; }
    memcpy(p, b->p, b->n);
    buf_free(b);
    b->p = p;
    b->cap = cap;
    return 0;
}

static int put(Buf *b, const void *data, size_t len) {
    if (buf_reserve(b, len) < 0) return -1;
    memcpy(b->p + b->n, data, len);
    b->n += len;
    return 0;
}

static int put_u32(Buf *b, uint32_t v) {
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return put(b, le, 4);
}

static int put_i64(Buf *b, uint8_t tag, int64_t v) {
    uint8_t le[9];
    le[0] = tag;
    for (int i = 0; i < 8; i++) le[1 + i] = (uint8_t)((uint64_t)v >> (8 * i));
    return put(b, le, 9);
}

static int put_bytes(Buf *b, uint8_t tag, const char *data, Py_ssize_t len) {
    if (len > (Py_ssize_t)UINT32_MAX) { PyErr_SetString(PyExc_OverflowError, "value too long to fingerprint"); return -1; }
    if (put(b, &tag, 1) < 0 || put_u32(b, (uint32_t)len) < 0) return -1;
    return put(b, data, (size_t)len);
}

/* ---- digests of containers, cached by identity (each entry holds its object) ---- */

typedef struct {
    PyObject *obj;
    uint8_t d[DIGEST];
} Entry;

#define CACHE_BITS 19
#define CACHE_SLOTS (1u << CACHE_BITS)
#define CACHE_MAX (CACHE_SLOTS / 2)
static Entry *cache;
static size_t cached;

static void cache_clear(void) {
    for (size_t i = 0; i < CACHE_SLOTS; i++) {
        if (cache[i].obj) { Py_DECREF(cache[i].obj); cache[i].obj = NULL; }
    }
    cached = 0;
}

static inline size_t slot_of(PyObject *o) {
    return (size_t)((((uintptr_t)o >> 4) * 0x9E3779B97F4A7C15ULL) >> (64 - CACHE_BITS));
}

static Entry *cache_find(PyObject *o) {
    size_t i = slot_of(o);
    while (cache[i].obj) {
        if (cache[i].obj == o) return &cache[i];
        i = (i + 1) & (CACHE_SLOTS - 1);
    }
    return NULL;
}

static void cache_put(PyObject *o, const uint8_t d[DIGEST]) {
    if (cached >= CACHE_MAX) cache_clear();
    size_t i = slot_of(o);
    while (cache[i].obj) i = (i + 1) & (CACHE_SLOTS - 1);
    Py_INCREF(o);
    cache[i].obj = o;
    memcpy(cache[i].d, d, DIGEST);
    cached++;
}

/* ---- kinds of containers: tuple, map, set, attrs class (with its tag and how its fields are read) ---- */

enum { K_MAP = 2, K_ATTRS = 4 };  /* as in merkle.py */

/* A container type as the walk uses it, compiled from describe()'s answer. An attrs class whose
 * fields are all slots is read in place, at their offsets; another through its getter. */
typedef struct {
    long kind;
    int single;        /* the getter returns the one field's value, not a tuple */
    Py_ssize_t nslots; /* -1: read through the getter */
    uint8_t tag[DIGEST];
    Py_ssize_t offset[];
} Kind;

static PyObject *kinds;     /* type -> (Kind as bytes, getter or None) */
static PyObject *describe;  /* Python callable: type -> (kind, tag digest bytes, getter or None, single field,
                               the fields' member descriptors or None), or raises TypeError */

static int digest_of(PyObject *v, uint8_t out[DIGEST], int memo);

static int put_value(Buf *b, PyObject *v) {
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyLong_Type) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) return -1;
        if (!overflow) return put_i64(b, 'i', x);
        PyObject *s = PyObject_Str(v);
        if (!s) return -1;
        Py_ssize_t len;
        const char *u = PyUnicode_AsUTF8AndSize(s, &len);
        int rc = u ? put_bytes(b, 'I', u, len) : -1;
        Py_DECREF(s);
        return rc;
    }
    if (t == &PyUnicode_Type) {
        Py_ssize_t len;
        const char *u = PyUnicode_AsUTF8AndSize(v, &len);
        return u ? put_bytes(b, 's', u, len) : -1;
    }
    if (t == &PyBool_Type) { uint8_t c = v == Py_True ? 't' : 'f'; return put(b, &c, 1); }
    if (v == Py_None) { uint8_t c = 'n'; return put(b, &c, 1); }
    if (t == &PyBytes_Type) return put_bytes(b, 'b', PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
    if (t == &PyFloat_Type) {
        double x = PyFloat_AS_DOUBLE(v);
        int64_t bits;
        memcpy(&bits, &x, 8);
        return put_i64(b, 'd', bits);
    }
    uint8_t rec[1 + DIGEST];
    rec[0] = 'h';
    if (digest_of(v, rec + 1, 1) < 0) return -1;
    return put(b, rec, sizeof rec);
}

static int cmp_records(const void *a, const void *b) {
    const Buf *x = *(Buf *const *)a, *y = *(Buf *const *)b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static int put_set(Buf *b, PyObject *v) {
    Py_ssize_t n = PySet_GET_SIZE(v), i = 0, pos = 0;
    Py_hash_t hash;
    PyObject *item;
    Buf *items = PyMem_Calloc(n ? n : 1, sizeof(Buf));
    Buf **order = PyMem_Calloc(n ? n : 1, sizeof(Buf *));
    int rc = (items && order) ? 0 : (PyErr_NoMemory(), -1);
    while (rc == 0 && _PySet_NextEntry(v, &pos, &item, &hash)) {
        buf_init(&items[i]);
        order[i] = &items[i];
        i++;
        rc = put_value(&items[i - 1], item);
    }
    if (rc == 0) {
        qsort(order, (size_t)n, sizeof(Buf *), cmp_records);
        rc = put_u32(b, (uint32_t)n);
        for (Py_ssize_t k = 0; rc == 0 && k < n; k++) rc = put(b, order[k]->p, order[k]->n);
    }
    for (Py_ssize_t k = 0; k < i; k++) buf_free(&items[k]);
    PyMem_Free(items);
    PyMem_Free(order);
    return rc;
}

static PyObject *compile_kind(PyObject *d) {
    if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) != 5) {
        PyErr_SetString(PyExc_SystemError, "describe() must return a 5-tuple");
        return NULL;
    }
    PyObject *tag = PyTuple_GET_ITEM(d, 1), *slots = PyTuple_GET_ITEM(d, 4);
    Py_ssize_t n = slots == Py_None ? -1 : PyTuple_Size(slots);
    if (slots != Py_None && n < 0) return NULL;
    PyObject *raw = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(Kind) + (n > 0 ? n : 0) * (Py_ssize_t)sizeof(Py_ssize_t));
    if (!raw) return NULL;
    Kind *k = (Kind *)PyBytes_AS_STRING(raw);
    k->kind = PyLong_AsLong(PyTuple_GET_ITEM(d, 0));
    k->single = PyObject_IsTrue(PyTuple_GET_ITEM(d, 3));
    k->nslots = n;
    memset(k->tag, 0, DIGEST);
    if (PyBytes_Check(tag) && PyBytes_GET_SIZE(tag) == DIGEST) memcpy(k->tag, PyBytes_AS_STRING(tag), DIGEST);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyTuple_GET_ITEM(slots, i);
        PyMemberDef *def = Py_IS_TYPE(m, &PyMemberDescr_Type) ? ((PyMemberDescrObject *)m)->d_member : NULL;
        if (!def || def->type != T_OBJECT_EX) {
            PyErr_SetString(PyExc_SystemError, "describe() named a field that is not a slot");
            break;
        }
        k->offset[i] = def->offset;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(raw);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, raw, PyTuple_GET_ITEM(d, 2));
    Py_DECREF(raw);
    return out;
}

static PyObject *kind_of(PyTypeObject *t) {
    PyObject *k = PyDict_GetItemWithError(kinds, (PyObject *)t);
    if (k || PyErr_Occurred()) return k;
    PyObject *d = PyObject_CallOneArg(describe, (PyObject *)t);
    if (!d) return NULL;
    k = compile_kind(d);
    Py_DECREF(d);
    if (!k) return NULL;
    int rc = PyDict_SetItem(kinds, (PyObject *)t, k);
    Py_DECREF(k);  /* the dict holds it */
    return rc < 0 ? NULL : k;
}

static int put_node(Buf *b, PyObject *v) {
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyTuple_Type) {
        Py_ssize_t n = PyTuple_GET_SIZE(v);
        uint8_t c = 'T';
        if (put(b, &c, 1) < 0 || put_u32(b, (uint32_t)n) < 0) return -1;
        for (Py_ssize_t i = 0; i < n; i++)
            if (put_value(b, PyTuple_GET_ITEM(v, i)) < 0) return -1;
        return 0;
    }
    if (t == &PyFrozenSet_Type) {
        uint8_t c = 'S';
        return put(b, &c, 1) < 0 ? -1 : put_set(b, v);
    }
    PyObject *entry = kind_of(t);
    if (!entry) return -1;
    const Kind *k = (const Kind *)PyBytes_AS_STRING(PyTuple_GET_ITEM(entry, 0));
    if (k->kind == K_MAP) {  /* a tuple subclass of (key, value) pairs */
        Py_ssize_t n = PyTuple_GET_SIZE(v);
        uint8_t c = 'M';
        if (put(b, &c, 1) < 0 || put_u32(b, (uint32_t)n) < 0) return -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *pair = PyTuple_GET_ITEM(v, i);
            if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
                PyErr_SetString(PyExc_TypeError, "a map's items must be (key, value) tuples");
                return -1;
            }
            if (put_value(b, PyTuple_GET_ITEM(pair, 0)) < 0 || put_value(b, PyTuple_GET_ITEM(pair, 1)) < 0)
                return -1;
        }
        return 0;
    }
    if (k->kind != K_ATTRS) {
        PyErr_SetString(PyExc_SystemError, "unknown container kind");
        return -1;
    }
    uint8_t c = 'A';
    if (put(b, &c, 1) < 0 || put(b, k->tag, DIGEST) < 0) return -1;
    if (k->nslots >= 0) {  /* the fields in place */
        if (put_u32(b, (uint32_t)k->nslots) < 0) return -1;
        for (Py_ssize_t i = 0; i < k->nslots; i++) {
            PyObject *f = *(PyObject **)((char *)v + k->offset[i]);
            if (!f) {
                PyErr_Format(PyExc_AttributeError, "a %s value without its field %zd", t->tp_name, i);
                return -1;
            }
            if (put_value(b, f) < 0) return -1;
        }
        return 0;
    }
    PyObject *values = PyObject_CallOneArg(PyTuple_GET_ITEM(entry, 1), v);
    if (!values) return -1;
    int rc = 0;
    if (k->single) {
        rc = put_u32(b, 1);
        if (rc == 0) rc = put_value(b, values);
    } else {
        Py_ssize_t n = PyTuple_GET_SIZE(values);
        rc = put_u32(b, (uint32_t)n);
        for (Py_ssize_t i = 0; rc == 0 && i < n; i++) rc = put_value(b, PyTuple_GET_ITEM(values, i));
    }
    Py_DECREF(values);
    return rc;
}

static int digest_of(PyObject *v, uint8_t out[DIGEST], int memo) {
    if (memo) {
        Entry *e = cache_find(v);
        if (e) { memcpy(out, e->d, DIGEST); return 0; }
    }
    if (Py_EnterRecursiveCall(" while fingerprinting a state")) return -1;
    Buf b;
    buf_init(&b);
    int rc = put_node(&b, v);
    Py_LeaveRecursiveCall();
    if (rc == 0) {
        hash128(b.p, b.n, out);
        if (memo) cache_put(v, out);
    }
    buf_free(&b);
    return rc;
}

/* ---- the module ---- */

static int is_container(PyObject *v) {
    PyTypeObject *t = Py_TYPE(v);
    return !(t == &PyLong_Type || t == &PyUnicode_Type || t == &PyBool_Type || v == Py_None ||
             t == &PyBytes_Type || t == &PyFloat_Type);
}

/* digest(value) -> 16 bytes: a container's node digest (the value itself is not cached: a state is
 * fingerprinted once, and its entry would only evict the shared parts that make the cache pay), or the
 * hash of a lone primitive's record. */
static PyObject *py_digest(PyObject *self, PyObject *v) {
    uint8_t d[DIGEST];
    if (is_container(v)) {
        if (digest_of(v, d, 0) < 0) return NULL;
    } else {
        Buf b;
        buf_init(&b);
        int rc = put_value(&b, v);
        if (rc == 0) hash128(b.p, b.n, d);
        buf_free(&b);
        if (rc < 0) return NULL;
    }
    return PyBytes_FromStringAndSize((const char *)d, DIGEST);
}

/* fingerprint(value) -> the first 8 bytes of digest(value), as a signed little-endian int */
static PyObject *py_fingerprint(PyObject *self, PyObject *v) {
    PyObject *d = py_digest(self, v);
    if (!d) return NULL;
    int64_t x = (int64_t)load64((const uint8_t *)PyBytes_AS_STRING(d));
    Py_DECREF(d);
    return PyLong_FromLongLong(x);
}

static PyObject *py_hash128(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint8_t d[DIGEST];
    hash128(view.buf, (size_t)view.len, d);
    PyBuffer_Release(&view);
    return PyBytes_FromStringAndSize((const char *)d, DIGEST);
}

static PyObject *py_setup(PyObject *self, PyObject *args) {
    PyObject *fn;
    if (!PyArg_ParseTuple(args, "O", &fn)) return NULL;
    Py_XSETREF(describe, Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"digest", py_digest, METH_O, "The 16-byte Merkle digest of a value."},
    {"fingerprint", py_fingerprint, METH_O, "The 64-bit signed fingerprint of a value."},
    {"hash128", py_hash128, METH_O, "MurmurHash3_x64_128 of bytes, seed 0, as 16 bytes (h1 then h2, little-endian)."},
    {"setup", py_setup, METH_VARARGS, "Set the function that describes a container type."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_merkle", NULL, -1, methods};

PyMODINIT_FUNC PyInit__merkle(void) {
    cache = PyMem_Calloc(CACHE_SLOTS, sizeof(Entry));
    kinds = PyDict_New();
    if (!cache || !kinds) return PyErr_NoMemory();
    return PyModule_Create(&module);
}

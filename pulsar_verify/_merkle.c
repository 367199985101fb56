/* Merkle fingerprints of model states, compiled: the same function as
 * pulsar_verify/merkle.py (which says what is hashed; a test checks the two
 * agree), several tens of times faster. BLAKE2b (RFC 7693) is written out here
 * so that no library is needed at build time. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define DIGEST 16

/* ---- BLAKE2b, unkeyed, 16-byte digests, over one contiguous input ---- */

static const uint64_t IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};

static const uint8_t SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};

static inline uint64_t rotr(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

#define G(a, b, c, d, x, y)          \
    do {                             \
        a = a + b + (x);             \
        d = rotr(d ^ a, 32);         \
        c = c + d;                   \
        b = rotr(b ^ c, 24);         \
        a = a + b + (y);             \
        d = rotr(d ^ a, 16);         \
        c = c + d;                   \
        b = rotr(b ^ c, 63);         \
    } while (0)

static void compress(uint64_t h[8], const uint8_t *block, uint64_t t, int last) {
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) m[i] = load64(block + 8 * i);
    for (int i = 0; i < 8; i++) { v[i] = h[i]; v[i + 8] = IV[i]; }
    v[12] ^= t;
    if (last) v[14] = ~v[14];
    for (int r = 0; r < 12; r++) {
        const uint8_t *s = SIGMA[r];
        G(v[0], v[4], v[8], v[12], m[s[0]], m[s[1]]);
        G(v[1], v[5], v[9], v[13], m[s[2]], m[s[3]]);
        G(v[2], v[6], v[10], v[14], m[s[4]], m[s[5]]);
        G(v[3], v[7], v[11], v[15], m[s[6]], m[s[7]]);
        G(v[0], v[5], v[10], v[15], m[s[8]], m[s[9]]);
        G(v[1], v[6], v[11], v[12], m[s[10]], m[s[11]]);
        G(v[2], v[7], v[8], v[13], m[s[12]], m[s[13]]);
        G(v[3], v[4], v[9], v[14], m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

static void blake2b16(const uint8_t *in, size_t len, uint8_t out[DIGEST]) {
    uint64_t h[8];
    uint8_t block[128];
    memcpy(h, IV, sizeof h);
    h[0] ^= 0x01010000ULL ^ DIGEST;
    uint64_t t = 0;
    while (len > 128) {
        t += 128;
        compress(h, in, t, 0);
        in += 128;
        len -= 128;
    }
    memset(block, 0, sizeof block);
    memcpy(block, in, len);
    compress(h, block, t + len, 1);
    for (int i = 0; i < DIGEST; i++) out[i] = (uint8_t)(h[i / 8] >> (8 * (i % 8)));
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

/* ---- kinds of containers: tuple, map, set, attrs class (with its tag and field getter) ---- */

enum { K_MAP = 2, K_ATTRS = 4 };  /* as in merkle.py */
static PyObject *kinds;     /* type -> (kind, tag digest bytes, getter or None, single field) */
static PyObject *describe;  /* Python callable: type -> that tuple, or raises TypeError */

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

static PyObject *kind_of(PyTypeObject *t) {
    PyObject *k = PyDict_GetItemWithError(kinds, (PyObject *)t);
    if (k || PyErr_Occurred()) return k;
    k = PyObject_CallOneArg(describe, (PyObject *)t);
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
    PyObject *k = kind_of(t);
    if (!k) return -1;
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(k, 0));
    if (kind == K_MAP) {  /* a tuple subclass of (key, value) pairs */
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
    if (kind != K_ATTRS) {
        PyErr_SetString(PyExc_SystemError, "unknown container kind");
        return -1;
    }
    PyObject *tag = PyTuple_GET_ITEM(k, 1), *getter = PyTuple_GET_ITEM(k, 2);
    int single = PyObject_IsTrue(PyTuple_GET_ITEM(k, 3));
    uint8_t c = 'A';
    if (put(b, &c, 1) < 0 || put(b, PyBytes_AS_STRING(tag), DIGEST) < 0) return -1;
    PyObject *values = PyObject_CallOneArg(getter, v);
    if (!values) return -1;
    int rc = 0;
    if (single) {
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
        blake2b16(b.p, b.n, out);
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
 * BLAKE2b of a lone primitive's record. */
static PyObject *py_digest(PyObject *self, PyObject *v) {
    uint8_t d[DIGEST];
    if (is_container(v)) {
        if (digest_of(v, d, 0) < 0) return NULL;
    } else {
        Buf b;
        buf_init(&b);
        int rc = put_value(&b, v);
        if (rc == 0) blake2b16(b.p, b.n, d);
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

static PyObject *py_blake2b16(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint8_t d[DIGEST];
    blake2b16(view.buf, (size_t)view.len, d);
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
    {"blake2b16", py_blake2b16, METH_O, "BLAKE2b with a 16-byte digest (to test against hashlib)."},
    {"setup", py_setup, METH_VARARGS, "Set the function that describes a container type."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_merkle", NULL, -1, methods};

PyMODINIT_FUNC PyInit__merkle(void) {
    cache = PyMem_Calloc(CACHE_SLOTS, sizeof(Entry));
    kinds = PyDict_New();
    if (!cache || !kinds) return PyErr_NoMemory();
    return PyModule_Create(&module);
}

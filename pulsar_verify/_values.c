/* values.replace and FrozenMap's methods, compiled. replace: a copy of a slotted attrs value with some
 * fields changed, built by copying its slots (an attrs __init__ sets each slot through
 * object.__setattr__, which is most of what a model step costs). Only for classes whose __init__ does
 * nothing but store its arguments: values.py decides which (describe), and replaces the others through
 * their constructor. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

/* type -> (name -> offset dict, the offsets as a bytes of Py_ssize_t), or None for a class replaced
 * through its constructor */
static PyObject *layouts;
static PyObject *describe;  /* type -> tuple of the fields' member descriptors, or None */
static PyObject *fallback;  /* (obj, changes dict) -> the replaced value, for the others */

/* (name -> offset dict, offsets bytes) from the fields' member descriptors: a new reference */
static PyObject *layout_from(PyObject *descrs) {
    Py_ssize_t n = PyTuple_Size(descrs);
    if (n < 0) return NULL;
    PyObject *names = PyDict_New();
    PyObject *offsets = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(Py_ssize_t));
    PyObject *lay = NULL;
    if (!names || !offsets) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyTuple_GET_ITEM(descrs, i);
        PyMemberDef *m = Py_IS_TYPE(d, &PyMemberDescr_Type) ? ((PyMemberDescrObject *)d)->d_member : NULL;
        if (!m || m->type != T_OBJECT_EX) {
            PyErr_SetString(PyExc_TypeError, "every field must be a slot");
            goto done;
        }
        PyObject *off = PyLong_FromSsize_t(m->offset);
        int rc = off ? PyDict_SetItemString(names, m->name, off) : -1;
        Py_XDECREF(off);
        if (rc < 0) goto done;
        ((Py_ssize_t *)PyBytes_AS_STRING(offsets))[i] = m->offset;
    }
    lay = PyTuple_Pack(2, names, offsets);
done:
    Py_XDECREF(names);
    Py_XDECREF(offsets);
    return lay;
}

/* the type's layout, or None (borrowed from the cache) */
static PyObject *layout_of(PyTypeObject *t) {
    PyObject *lay = PyDict_GetItemWithError(layouts, (PyObject *)t);
    if (lay || PyErr_Occurred()) return lay;
    PyObject *descrs = PyObject_CallOneArg(describe, (PyObject *)t);
    if (!descrs) return NULL;
    lay = descrs == Py_None ? Py_NewRef(Py_None) : layout_from(descrs);
    Py_DECREF(descrs);
    if (!lay) return NULL;
    int rc = PyDict_SetItem(layouts, (PyObject *)t, lay);
    Py_DECREF(lay);  /* the dict holds it */
    return rc < 0 ? NULL : lay;
}

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* replace(obj, **changes) */
static PyObject *py_replace(PyObject *self, PyObject *args, PyObject *kw) {
    PyObject *obj;
    if (!PyArg_ParseTuple(args, "O", &obj)) return NULL;
    PyTypeObject *t = Py_TYPE(obj);
    PyObject *lay = layout_of(t);
    if (!lay) return NULL;
    if (lay == Py_None) {
        PyObject *changes = kw ? PyDict_Copy(kw) : PyDict_New();
        if (!changes) return NULL;
        PyObject *out = PyObject_CallFunctionObjArgs(fallback, obj, changes, NULL);
        Py_DECREF(changes);
        return out;
    }
    PyObject *names = PyTuple_GET_ITEM(lay, 0), *offsets = PyTuple_GET_ITEM(lay, 1);
    PyObject *out = t->tp_alloc(t, 0);
    if (!out) return NULL;
    const Py_ssize_t *offs = (const Py_ssize_t *)PyBytes_AS_STRING(offsets);
    for (Py_ssize_t i = 0, n = PyBytes_GET_SIZE(offsets) / (Py_ssize_t)sizeof(Py_ssize_t); i < n; i++)
        SLOT(out, offs[i]) = Py_XNewRef(SLOT(obj, offs[i]));
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (kw && PyDict_Next(kw, &pos, &key, &value)) {
        PyObject *off = PyDict_GetItemWithError(names, key);
        if (!off) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s has no field %R", t->tp_name, key);
            Py_DECREF(out);
            return NULL;
        }
        Py_ssize_t o = PyLong_AsSsize_t(off);
        Py_XSETREF(SLOT(out, o), Py_NewRef(value));
    }
    return out;
}

static PyObject *py_setup(PyObject *self, PyObject *args) {
    PyObject *d, *f;
    if (!PyArg_ParseTuple(args, "OO", &d, &f)) return NULL;
    Py_XSETREF(describe, Py_NewRef(d));
    Py_XSETREF(fallback, Py_NewRef(f));
    PyDict_Clear(layouts);
    Py_RETURN_NONE;
}

/* FrozenMap lookups, compiled: a scan of the (key, value) pairs comparing keys with ==, as the
 * Python methods in values.py do (which stay as they are where nothing was compiled). Installed on
 * the class as method descriptors, so a lookup costs no Python frame. */
/* The i-th item of a map, or NULL (TypeError) when it is not a (key, value) pair */
static PyObject *pair_at(PyObject *map, Py_ssize_t i) {
    PyObject *pair = PyTuple_GET_ITEM(map, i);
    if (PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2) return pair;
    PyErr_SetString(PyExc_TypeError, "a FrozenMap item is not a (key, value) tuple");
    return NULL;
}

static int map_find(PyObject *map, PyObject *key, PyObject **value) {
    Py_ssize_t n = PyTuple_GET_SIZE(map);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = pair_at(map, i);
        if (!pair) return -1;
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(pair, 0), key, Py_EQ);
        if (eq < 0) return -1;
        if (eq) {
            *value = PyTuple_GET_ITEM(pair, 1);
            return 1;
        }
    }
    return 0;
}

static PyObject *map_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get(key, default=None)");
        return NULL;
    }
    PyObject *value;
    int found = map_find(self, args[0], &value);
    if (found < 0) return NULL;
    return Py_NewRef(found ? value : (nargs == 2 ? args[1] : Py_None));
}

static PyObject *map_getitem(PyObject *self, PyObject *key) {
    PyObject *value;
    int found = map_find(self, key, &value);
    if (found < 0) return NULL;
    if (!found) {  /* KeyError(key), whose args are (key,) even when key is a tuple */
        PyObject *exc = PyObject_CallOneArg(PyExc_KeyError, key);
        if (exc) {
            PyErr_SetObject(PyExc_KeyError, exc);
            Py_DECREF(exc);
        }
        return NULL;
    }
    return Py_NewRef(value);
}

static PyObject *map_contains(PyObject *self, PyObject *key) {
    PyObject *value;
    int found = map_find(self, key, &value);
    if (found < 0) return NULL;
    return PyBool_FromLong(found);
}

static PyTypeObject *map_type;  /* FrozenMap, as install_map was given it */

/* A new map of the n pairs in items (new references are taken): what FrozenMap._sorted builds */
static PyObject *map_of(PyObject **items, Py_ssize_t n) {
    PyObject *out = map_type->tp_alloc(map_type, n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(out, i, Py_NewRef(items[i]));
    return out;
}

/* The pairs of map whose key is not key (borrowed, into out, which has room for all): their number, or -1 */
static Py_ssize_t map_others(PyObject *map, PyObject *key, PyObject **out) {
    Py_ssize_t n = PyTuple_GET_SIZE(map), kept = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = pair_at(map, i);
        if (!pair) return -1;
        int ne = PyObject_RichCompareBool(PyTuple_GET_ITEM(pair, 0), key, Py_NE);
        if (ne < 0) return -1;
        if (ne) out[kept++] = pair;
    }
    return kept;
}

/* set(key, value): the pairs of the other keys, and (key, value) where the sort puts it: before the
 * first pair whose key is greater (the others are sorted and their keys differ from key) */
static PyObject *map_set(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set(key, value)");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(self);
    PyObject **items = PyMem_Malloc((n + 1) * sizeof(PyObject *));
    if (!items) return PyErr_NoMemory();
    PyObject *out = NULL, *pair = NULL;
    Py_ssize_t kept = map_others(self, args[0], items), at = 0;
    if (kept < 0) goto done;
    for (; at < kept; at++) {
        int lt = PyObject_RichCompareBool(args[0], PyTuple_GET_ITEM(items[at], 0), Py_LT);
        if (lt < 0) goto done;
        if (lt) break;
    }
    pair = PyTuple_Pack(2, args[0], args[1]);
    if (!pair) goto done;
    memmove(items + at + 1, items + at, (kept - at) * sizeof(PyObject *));
    items[at] = pair;
    out = map_of(items, kept + 1);
done:
    Py_XDECREF(pair);
    PyMem_Free(items);
    return out;
}

static PyObject *map_remove(PyObject *self, PyObject *key) {
    Py_ssize_t n = PyTuple_GET_SIZE(self);
    PyObject **items = PyMem_Malloc((n + 1) * sizeof(PyObject *));
    if (!items) return PyErr_NoMemory();
    Py_ssize_t kept = map_others(self, key, items);
    PyObject *out = kept < 0 ? NULL : map_of(items, kept);
    PyMem_Free(items);
    return out;
}

static PyMethodDef map_methods[] = {
    {"set", (PyCFunction)(void (*)(void))map_set, METH_FASTCALL, "The map with key set to value."},
    {"remove", map_remove, METH_O, "The map without key."},
    {"get", (PyCFunction)(void (*)(void))map_get, METH_FASTCALL, "The value of key, or default."},
    {"__getitem__", map_getitem, METH_O, "The value of key; KeyError if absent."},
    {"__contains__", map_contains, METH_O, "Whether key is a key of the map."},
    {NULL, NULL, 0, NULL}};

static PyObject *py_install_map(PyObject *self, PyObject *cls) {
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "install_map(cls): cls must be a subclass of tuple");
        return NULL;
    }
    Py_XSETREF(map_type, (PyTypeObject *)Py_NewRef(cls));
    for (PyMethodDef *d = map_methods; d->ml_name; d++) {
        PyObject *descr = PyDescr_NewMethod((PyTypeObject *)cls, d);
        if (!descr) return NULL;
        int rc = PyObject_SetAttrString(cls, d->ml_name, descr);
        Py_DECREF(descr);
        if (rc < 0) return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"install_map", py_install_map, METH_O, "Replace a FrozenMap class's lookups, set and remove."},
    {"replace", (PyCFunction)(void (*)(void))py_replace, METH_VARARGS | METH_KEYWORDS,
     "replace(obj, **changes): obj with the named fields changed."},
    {"setup", py_setup, METH_VARARGS, "Set the functions that describe a class and replace the others."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_values", NULL, -1, methods};

PyMODINIT_FUNC PyInit__values(void) {
    layouts = PyDict_New();
    if (!layouts) return NULL;
    return PyModule_Create(&module);
}

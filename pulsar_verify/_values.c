/* values.replace compiled: a copy of a slotted attrs value with some fields changed, built by
 * copying its slots (an attrs __init__ sets each slot through object.__setattr__, which is most of
 * what a model step costs). Only for classes whose __init__ does nothing but store its arguments:
 * values.py decides which (describe), and replaces the others through their constructor. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

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

static PyMethodDef methods[] = {
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

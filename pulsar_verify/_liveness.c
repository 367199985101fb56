/* The liveness search of liveness.py compiled: the explored graph as arrays of integers, and per
 * property the reach from its trigger states, the states that can never reach its goal, the strongly
 * connected components, the fair ones, the shortest prefix to each, and the choice of the lasso's
 * cycle, with every tie broken as liveness.py's reference (_Search) breaks it: by fingerprint.
 *
 * prepare(graph, labels, fairs) -> capsule: graph {fp: [(action, fp)]}, labels {fp: (depth, ((trigger,
 * goal), ...))}, fairs [set of weakly fair action names] per liveness property.
 * search(capsule, index) -> (unreachable, None | (nodes, entry, root, tail, must, first)), as _Search.search. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Py_ssize_t n, A;
    int P;
    int64_t *fps;      /* node -> fingerprint, ascending: nodes are numbered in fingerprint order */
    Py_ssize_t *off;   /* node -> its first edge; off[n]: the number of edges */
    int32_t *tgt;      /* edge -> successor node, or -1 for a state that is not expanded */
    int32_t *act;      /* edge -> action number */
    Py_ssize_t *roff;  /* node -> its first predecessor in rsrc */
    int32_t *rsrc;
    int64_t *depth;    /* BFS depth */
    uint8_t *trig, *goal;  /* P rows of n */
    uint8_t *fair;         /* P rows of A */
    PyObject *actions;     /* action number -> Action */
} Graph;

static void graph_free(Graph *g) {
    if (!g) return;
    free(g->fps); free(g->off); free(g->tgt); free(g->act); free(g->roff); free(g->rsrc);
    free(g->depth); free(g->trig); free(g->goal); free(g->fair);
    Py_XDECREF(g->actions);
    free(g);
}

static void capsule_free(PyObject *cap) { graph_free(PyCapsule_GetPointer(cap, "liveness.graph")); }

typedef struct { int64_t fp; Py_ssize_t pos; } Keyed;

static int by_fp(const void *a, const void *b) {
    int64_t x = ((const Keyed *)a)->fp, y = ((const Keyed *)b)->fp;
    return (x > y) - (x < y);
}

/* fingerprint -> node: open addressing over a power-of-two table of node + 1 (0: empty) */
typedef struct { int32_t *slot; uint64_t mask; int shift; } Index;

static inline uint64_t spread(int64_t fp, int shift) { return ((uint64_t)fp * 0x9E3779B97F4A7C15ULL) >> shift; }

static int index_build(Index *ix, const int64_t *fps, Py_ssize_t n) {
    int bits = 4;
    while (((Py_ssize_t)1 << bits) < 2 * n) bits++;
    ix->mask = ((uint64_t)1 << bits) - 1;
    ix->shift = 64 - bits;
    ix->slot = calloc((size_t)1 << bits, sizeof(int32_t));
    if (!ix->slot) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t h = spread(fps[i], ix->shift);
        while (ix->slot[h]) h = (h + 1) & ix->mask;
        ix->slot[h] = (int32_t)(i + 1);
    }
    return 0;
}

static inline int32_t index_find(const Index *ix, const int64_t *fps, int64_t fp) {
    uint64_t h = spread(fp, ix->shift);
    while (ix->slot[h]) {
        int32_t i = ix->slot[h] - 1;
        if (fps[i] == fp) return i;
        h = (h + 1) & ix->mask;
    }
    return -1;
}

static PyObject *py_prepare(PyObject *self, PyObject *args) {
    PyObject *graph, *labels, *fairs;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyDict_Type, &graph, &PyDict_Type, &labels, &fairs)) return NULL;
    Graph *g = calloc(1, sizeof(Graph));
    Keyed *keyed = NULL;
    PyObject **keys = NULL, **lists = NULL, *numbers = NULL;
    Py_ssize_t *rank = NULL, *fill = NULL;
    Index ix = {0};
    if (!g) return PyErr_NoMemory();
    Py_ssize_t n = g->n = PyDict_Size(graph);
    if (n >= INT32_MAX) { PyErr_SetString(PyExc_OverflowError, "too many states"); goto fail; }
    g->P = (int)PyList_Size(fairs);
    if (g->P < 0) goto fail;
    keyed = malloc((n + 1) * sizeof(Keyed));
    keys = malloc((n + 1) * sizeof(PyObject *));
    lists = malloc((n + 1) * sizeof(PyObject *));
    g->fps = malloc((n + 1) * sizeof(int64_t));
    g->off = malloc((n + 1) * sizeof(Py_ssize_t));
    g->depth = malloc((n + 1) * sizeof(int64_t));
    g->trig = malloc((size_t)g->P * n + 1);
    g->goal = malloc((size_t)g->P * n + 1);
    numbers = PyDict_New();
    g->actions = PyList_New(0);
    if (!keyed || !keys || !lists || !g->fps || !g->off || !g->depth || !g->trig || !g->goal) { PyErr_NoMemory(); goto fail; }
    if (!numbers || !g->actions) goto fail;

    Py_ssize_t pos = 0, i = 0, m = 0;
    PyObject *key, *value;
    while (PyDict_Next(graph, &pos, &key, &value)) {  /* borrowed: graph is not changed meanwhile */
        if (!PyList_Check(value)) { PyErr_SetString(PyExc_TypeError, "graph: expected lists of edges"); goto fail; }
        keyed[i].fp = PyLong_AsLongLong(key);
        if (keyed[i].fp == -1 && PyErr_Occurred()) goto fail;
        keyed[i].pos = i;
        keys[i] = key;
        lists[i] = value;
        m += PyList_GET_SIZE(value);
        i++;
    }
    qsort(keyed, n, sizeof(Keyed), by_fp);
    for (i = 0; i < n; i++) g->fps[i] = keyed[i].fp;
    if (index_build(&ix, g->fps, n) < 0) { PyErr_NoMemory(); goto fail; }
    g->tgt = malloc((m + 1) * sizeof(int32_t));
    g->act = malloc((m + 1) * sizeof(int32_t));
    if (!g->tgt || !g->act) { PyErr_NoMemory(); goto fail; }

    /* the edges and labels, read in the graph's own order (that of the states' expansion, and so of
     * their objects in memory), each stored at its state's place in fingerprint order */
    Py_ssize_t e = 0;
    rank = malloc((n + 1) * sizeof(Py_ssize_t));
    if (!rank) { PyErr_NoMemory(); goto fail; }
    for (i = 0; i < n; i++) {
        rank[keyed[i].pos] = i;
        g->off[i] = e;
        e += PyList_GET_SIZE(lists[keyed[i].pos]);
    }
    g->off[n] = e;
    for (Py_ssize_t at = 0; at < n; at++) {
        PyObject *edges = lists[at];
        i = rank[at];
        e = g->off[i];
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(edges); k++, e++) {
            PyObject *edge = PyList_GET_ITEM(edges, k);
            if (!PyTuple_Check(edge) || PyTuple_GET_SIZE(edge) != 2) {
                PyErr_SetString(PyExc_TypeError, "graph: expected (action, fingerprint) edges");
                goto fail;
            }
            PyObject *a = PyTuple_GET_ITEM(edge, 0);
            PyObject *number = PyDict_GetItemWithError(numbers, a);
            if (!number) {
                if (PyErr_Occurred()) goto fail;
                number = PyLong_FromSsize_t(PyList_GET_SIZE(g->actions));
                int rc = number ? PyDict_SetItem(numbers, a, number) : -1;
                Py_XDECREF(number);  /* the dict holds it */
                if (rc < 0 || PyList_Append(g->actions, a) < 0) goto fail;
            }
            g->act[e] = (int32_t)PyLong_AsLong(number);
            int64_t to = PyLong_AsLongLong(PyTuple_GET_ITEM(edge, 1));
            if (to == -1 && PyErr_Occurred()) goto fail;
            g->tgt[e] = index_find(&ix, g->fps, to);
        }
        PyObject *label = PyDict_GetItemWithError(labels, keys[at]);
        if (!label) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "labels: a state of the graph has no label");
            goto fail;
        }
        PyObject *flags;
        if (!PyTuple_Check(label) || PyTuple_GET_SIZE(label) != 2 || !PyTuple_Check(flags = PyTuple_GET_ITEM(label, 1))
                || PyTuple_GET_SIZE(flags) != g->P) {
            PyErr_SetString(PyExc_TypeError, "labels: expected (depth, ((trigger, goal), ...)) per property");
            goto fail;
        }
        g->depth[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(label, 0));
        if (g->depth[i] == -1 && PyErr_Occurred()) goto fail;
        for (int p = 0; p < g->P; p++) {
            PyObject *tg = PyTuple_GET_ITEM(flags, p);
            if (!PyTuple_Check(tg) || PyTuple_GET_SIZE(tg) != 2) { PyErr_SetString(PyExc_TypeError, "labels: expected pairs"); goto fail; }
            int t = PyObject_IsTrue(PyTuple_GET_ITEM(tg, 0)), gl = PyObject_IsTrue(PyTuple_GET_ITEM(tg, 1));
            if (t < 0 || gl < 0) goto fail;
            g->trig[(size_t)p * n + i] = (uint8_t)t;
            g->goal[(size_t)p * n + i] = (uint8_t)gl;
        }
    }

    g->A = PyList_GET_SIZE(g->actions);
    g->fair = malloc((size_t)g->P * g->A + 1);
    if (!g->fair) { PyErr_NoMemory(); goto fail; }
    for (int p = 0; p < g->P; p++) {
        PyObject *names = PyList_GET_ITEM(fairs, p);
        for (Py_ssize_t a = 0; a < g->A; a++) {
            PyObject *action = PyList_GET_ITEM(g->actions, a);
            if (!PyTuple_Check(action) || PyTuple_GET_SIZE(action) < 1) { PyErr_SetString(PyExc_TypeError, "expected Actions"); goto fail; }
            int in = PySequence_Contains(names, PyTuple_GET_ITEM(action, 0));
            if (in < 0) goto fail;
            g->fair[(size_t)p * g->A + a] = (uint8_t)in;
        }
    }

    /* predecessors, for the states that can still reach the goal */
    g->roff = calloc(n + 1, sizeof(Py_ssize_t));
    g->rsrc = malloc((m + 1) * sizeof(int32_t));
    if (!g->roff || !g->rsrc) { PyErr_NoMemory(); goto fail; }
    for (e = 0; e < m; e++) if (g->tgt[e] >= 0) g->roff[g->tgt[e] + 1]++;
    for (i = 0; i < n; i++) g->roff[i + 1] += g->roff[i];
    fill = malloc((n + 1) * sizeof(Py_ssize_t));
    if (!fill) { PyErr_NoMemory(); goto fail; }
    memcpy(fill, g->roff, n * sizeof(Py_ssize_t));
    for (i = 0; i < n; i++)
        for (e = g->off[i]; e < g->off[i + 1]; e++)
            if (g->tgt[e] >= 0) g->rsrc[fill[g->tgt[e]]++] = (int32_t)i;

    free(keyed); free(keys); free(lists); free(ix.slot); free(rank); free(fill);
    Py_DECREF(numbers);
    PyObject *cap = PyCapsule_New(g, "liveness.graph", capsule_free);
    if (!cap) graph_free(g);
    return cap;
fail:
    free(keyed); free(keys); free(lists); free(ix.slot); free(rank); free(fill);
    Py_XDECREF(numbers);
    graph_free(g);
    return NULL;
}

/* a binary min-heap of (distance << 32 | node): ties pop in node order, that is fingerprint order */
typedef struct { uint64_t *a; Py_ssize_t len, cap; } Heap;

static int heap_push(Heap *h, uint64_t x) {
    if (h->len == h->cap) {
        Py_ssize_t cap = h->cap ? 2 * h->cap : 1024;
        uint64_t *a = realloc(h->a, cap * sizeof(uint64_t));
        if (!a) return -1;
        h->a = a, h->cap = cap;
    }
    Py_ssize_t i = h->len++;
    while (i > 0 && h->a[(i - 1) / 2] > x) { h->a[i] = h->a[(i - 1) / 2]; i = (i - 1) / 2; }
    h->a[i] = x;
    return 0;
}

static uint64_t heap_pop(Heap *h) {
    uint64_t top = h->a[0], x = h->a[--h->len];
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= h->len) break;
        if (c + 1 < h->len && h->a[c + 1] < h->a[c]) c++;
        if (h->a[c] >= x) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->len) h->a[i] = x;
    return top;
}

static PyObject *edge_tuple(Graph *g, Py_ssize_t u, Py_ssize_t e) {
    return Py_BuildValue("(OLL)", PyList_GET_ITEM(g->actions, g->act[e]), (long long)g->fps[u], (long long)g->fps[g->tgt[e]]);
}

static int by_node(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Per weakly fair action, in how many of the ``len`` members an instance of it is enabled: cnt[a] for
 * each action a in touched[0, returned), which cnt_at[a] == stamp marks; seen_at (all -1 on entry and
 * on return) counts a member once per action. */
static Py_ssize_t count_enabled(const Graph *g, const uint8_t *fair, const int32_t *members, Py_ssize_t len,
                                int32_t stamp, int32_t *cnt, int32_t *cnt_at, int32_t *seen_at, int32_t *touched) {
    Py_ssize_t listed = 0;
    for (Py_ssize_t k = 0; k < len; k++) {
        int32_t x = members[k];
        for (Py_ssize_t e = g->off[x]; e < g->off[x + 1]; e++) {
            int32_t a = g->act[e];
            if (!fair[a] || seen_at[a] == x) continue;
            seen_at[a] = x;
            if (cnt_at[a] != stamp) { cnt_at[a] = stamp; cnt[a] = 0; touched[listed++] = a; }
            cnt[a]++;
        }
    }
    for (Py_ssize_t k = 0; k < listed; k++) seen_at[touched[k]] = -1;
    return listed;
}

#define NEW(p, k, T) ((p) = malloc(((size_t)(k) + 1) * sizeof(T)))

static PyObject *py_search(PyObject *self, PyObject *args) {
    PyObject *cap;
    int p;
    if (!PyArg_ParseTuple(args, "Oi", &cap, &p)) return NULL;
    Graph *g = PyCapsule_GetPointer(cap, "liveness.graph");
    if (!g) return NULL;
    if (p < 0 || p >= g->P) { PyErr_SetString(PyExc_IndexError, "no such liveness property"); return NULL; }
    const Py_ssize_t n = g->n, A = g->A;
    const uint8_t *goal = g->goal + (size_t)p * n, *trig = g->trig + (size_t)p * n, *fair = g->fair + (size_t)p * A;
    uint8_t *reach = calloc(n + 1, 1), *can = calloc(n + 1, 1), *onstack = calloc(n + 1, 1);
    int32_t *queue, *prev, *order, *low, *stack, *calls, *comp_of, *nodes, *cnt, *cnt_at, *taken_at, *seen_at, *touched;
    Py_ssize_t *pos, *prev_edge;
    int64_t *best;
    Heap heap = {0};
    PyObject *out = NULL;
    NEW(queue, n, int32_t); NEW(prev, n, int32_t); NEW(order, n, int32_t); NEW(low, n, int32_t);
    NEW(stack, n, int32_t); NEW(calls, n, int32_t); NEW(comp_of, n, int32_t); NEW(nodes, n, int32_t);
    NEW(cnt, A, int32_t); NEW(cnt_at, A, int32_t); NEW(taken_at, A, int32_t); NEW(seen_at, A, int32_t); NEW(touched, A, int32_t);
    NEW(pos, n, Py_ssize_t); NEW(prev_edge, n, Py_ssize_t); NEW(best, n, int64_t);
    if (!reach || !can || !onstack || !queue || !prev || !order || !low || !stack || !calls || !comp_of || !nodes
            || !cnt || !cnt_at || !taken_at || !seen_at || !touched || !pos || !prev_edge || !best) { PyErr_NoMemory(); goto done; }

    /* states reachable from a trigger state through states where the goal does not hold */
    Py_ssize_t head = 0, tail = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!goal[i] && trig[i]) { reach[i] = 1; queue[tail++] = (int32_t)i; }
    while (head < tail) {
        int32_t u = queue[head++];
        for (Py_ssize_t e = g->off[u]; e < g->off[u + 1]; e++) {
            int32_t v = g->tgt[e];
            if (v >= 0 && !goal[v] && !reach[v]) { reach[v] = 1; queue[tail++] = v; }
        }
    }
    /* states that can still reach the goal, backwards over the whole graph */
    head = tail = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (goal[i]) { can[i] = 1; queue[tail++] = (int32_t)i; }
    while (head < tail) {
        int32_t v = queue[head++];
        for (Py_ssize_t k = g->roff[v]; k < g->roff[v + 1]; k++) {
            int32_t u = g->rsrc[k];
            if (!can[u]) { can[u] = 1; queue[tail++] = u; }
        }
    }
    Py_ssize_t unreachable = 0;
    for (Py_ssize_t i = 0; i < n; i++) unreachable += reach[i] && !can[i];

    /* shortest prefixes: from each trigger state at its BFS depth, through the reach */
    for (Py_ssize_t i = 0; i < n; i++) { best[i] = INT64_MAX; prev[i] = -1; }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!goal[i] && trig[i]) {
            best[i] = g->depth[i];
            if (best[i] < 0 || best[i] >= (1LL << 31) || heap_push(&heap, ((uint64_t)best[i] << 32) | (uint64_t)i) < 0) {
                PyErr_SetString(PyExc_OverflowError, "depth out of range");
                goto done;
            }
        }
    while (heap.len) {
        uint64_t x = heap_pop(&heap);
        int64_t d = (int64_t)(x >> 32);
        int32_t u = (int32_t)(x & 0xffffffffu);
        if (d > best[u]) continue;
        for (Py_ssize_t e = g->off[u]; e < g->off[u + 1]; e++) {
            int32_t v = g->tgt[e];
            if (v >= 0 && reach[v] && d + 1 < best[v]) {
                best[v] = d + 1, prev[v] = u, prev_edge[v] = e;
                if (heap_push(&heap, ((uint64_t)(d + 1) << 32) | (uint64_t)v) < 0) { PyErr_NoMemory(); goto done; }
            }
        }
    }

    /* the candidates: a state with no fair action enabled (it may stutter), and each fair cycle
     * (a strongly connected set of the reach in which every fair action enabled throughout is taken);
     * the least by (shortest prefix, stutter first, least fingerprint) */
    int found = 0, kind = 0;
    int64_t key_best = 0;
    Py_ssize_t key_node = 0, chosen_lo = 0, chosen_len = 0;
#define CONSIDER(b, k, node, lo, len) \
    if (!found || (b) < key_best || ((b) == key_best && ((k) < kind || ((k) == kind && (node) < key_node)))) \
        { found = 1; key_best = (b); kind = (k); key_node = (node); chosen_lo = (lo); chosen_len = (len); }
    for (Py_ssize_t u = 0; u < n; u++) {
        if (!reach[u]) continue;
        int enabled = 0;
        for (Py_ssize_t e = g->off[u]; e < g->off[u + 1] && !enabled; e++) enabled = fair[g->act[e]];
        if (!enabled) CONSIDER(best[u], 0, u, 0, 0)
    }
    for (Py_ssize_t a = 0; a < A; a++) cnt_at[a] = taken_at[a] = seen_at[a] = -1;
    for (Py_ssize_t i = 0; i < n; i++) { order[i] = -1; comp_of[i] = -1; }
    /* Tarjan's algorithm, iterative, over the reach */
    int32_t counter = 0, comps = 0;
    Py_ssize_t sp = 0, filled = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        if (!reach[r] || order[r] >= 0) continue;
        Py_ssize_t cp = 0;
        calls[cp++] = (int32_t)r;
        order[r] = low[r] = counter++, pos[r] = g->off[r], stack[sp++] = (int32_t)r, onstack[r] = 1;
        while (cp) {
            int32_t u = calls[cp - 1];
            int descended = 0;
            while (pos[u] < g->off[u + 1]) {
                int32_t v = g->tgt[pos[u]++];
                if (v < 0 || !reach[v]) continue;
                if (order[v] < 0) {
                    order[v] = low[v] = counter++, pos[v] = g->off[v], stack[sp++] = v, onstack[v] = 1;
                    calls[cp++] = v;
                    descended = 1;
                    break;
                }
                if (onstack[v] && order[v] < low[u]) low[u] = order[v];
            }
            if (descended) continue;
            cp--;
            if (cp && low[u] < low[calls[cp - 1]]) low[calls[cp - 1]] = low[u];
            if (low[u] != order[u]) continue;
            /* u roots a component: nodes[lo, lo + len) */
            Py_ssize_t lo = filled;
            int32_t cid = comps++, w;
            do { w = stack[--sp]; onstack[w] = 0; comp_of[w] = cid; nodes[filled++] = w; } while (w != u);
            Py_ssize_t len = filled - lo;
            int cyclic = len > 1;
            for (Py_ssize_t e = g->off[u]; e < g->off[u + 1] && !cyclic; e++) cyclic = g->tgt[e] == u;
            if (!cyclic) continue;
            /* fair when every weakly fair action enabled in all its members is taken inside it */
            Py_ssize_t listed = count_enabled(g, fair, nodes + lo, len, cid, cnt, cnt_at, seen_at, touched);
            int64_t least = INT64_MAX;
            int32_t first_node = INT32_MAX;
            for (Py_ssize_t k = lo; k < filled; k++) {
                int32_t x = nodes[k];
                if (best[x] < least) least = best[x];
                if (x < first_node) first_node = x;
                for (Py_ssize_t e = g->off[x]; e < g->off[x + 1]; e++)
                    if (g->tgt[e] >= 0 && comp_of[g->tgt[e]] == cid) taken_at[g->act[e]] = cid;
            }
            int is_fair = 1;
            for (Py_ssize_t k = 0; k < listed && is_fair; k++)
                if (cnt[touched[k]] == len && taken_at[touched[k]] != cid) is_fair = 0;
            if (is_fair) CONSIDER(least, 1, first_node, lo, len)
        }
    }
    if (!found) { out = Py_BuildValue("(nO)", unreachable, Py_None); goto done; }

    /* the chosen candidate's states in fingerprint order, and its entry: least (prefix, fingerprint) */
    int32_t *members = kind ? nodes + chosen_lo : queue;
    Py_ssize_t count = kind ? chosen_len : 1;
    if (!kind) queue[0] = (int32_t)key_node;
    qsort(members, count, sizeof(int32_t), by_node);
    int32_t entry = members[0];
    for (Py_ssize_t k = 1; k < count; k++)
        if (best[members[k]] < best[entry]) entry = members[k];
    PyObject *fps = PyList_New(count), *path = PyList_New(0), *must = PyList_New(0), *first = NULL;
    if (!fps || !path || !must) goto built;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *fp = PyLong_FromLongLong(g->fps[members[k]]);
        if (!fp) goto built;
        PyList_SET_ITEM(fps, k, fp);
    }
    int32_t root = entry;
    while (prev[root] >= 0) {
        if (PyList_Append(path, PyList_GET_ITEM(g->actions, g->act[prev_edge[root]])) < 0) goto built;
        root = prev[root];
    }
    if (PyList_Reverse(path) < 0) goto built;
    if (kind) {
        /* the first edge inside (members in fingerprint order, each one's edges in order), and the first
         * inside edge of each fair action enabled in every member (counted again: later components
         * reused the counters) */
        int32_t cid = comp_of[members[0]], stamp = comps;
        count_enabled(g, fair, members, count, stamp, cnt, cnt_at, seen_at, touched);
        for (Py_ssize_t k = 0; k < count; k++) {
            int32_t x = members[k];
            for (Py_ssize_t e = g->off[x]; e < g->off[x + 1]; e++) {
                int32_t a = g->act[e], v = g->tgt[e];
                if (v < 0 || comp_of[v] != cid) continue;
                if (!first && !(first = edge_tuple(g, x, e))) goto built;
                if (fair[a] && cnt_at[a] == stamp && cnt[a] == count) {
                    cnt[a] = -1;  /* listed */
                    PyObject *t = edge_tuple(g, x, e);
                    int rc = t ? PyList_Append(must, t) : -1;
                    Py_XDECREF(t);
                    if (rc < 0) goto built;
                }
            }
        }
    }
    /* "N" hands the references over, or releases them if building fails */
    out = Py_BuildValue("(n(NLLNNN))", unreachable, fps, (long long)g->fps[entry], (long long)g->fps[root], path,
                        must, first ? first : Py_NewRef(Py_None));
    goto done;
built:
    Py_XDECREF(fps); Py_XDECREF(path); Py_XDECREF(must); Py_XDECREF(first);
done:
    free(reach); free(can); free(onstack); free(queue); free(prev); free(order); free(low); free(stack);
    free(calls); free(comp_of); free(nodes); free(cnt); free(cnt_at); free(taken_at); free(seen_at);
    free(touched); free(pos); free(prev_edge); free(best); free(heap.a);
    return out;
}

static PyMethodDef methods[] = {
    {"prepare", py_prepare, METH_VARARGS, "prepare(graph, labels, fairs) -> the graph as arrays (a capsule)"},
    {"search", py_search, METH_VARARGS, "search(prepared, index) -> (unreachable, None | the lasso's parts)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_liveness", NULL, -1, methods};

PyMODINIT_FUNC PyInit__liveness(void) { return PyModule_Create(&module); }

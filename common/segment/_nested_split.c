/* The field split of a nested (COMPLEX<json>) column, compiled: one pass over each document's
 * text, no Python object per value. It gives exactly what common/segment/nested_fields.py's
 * split_documents gives (fields in order of first appearance, types in order seen, rows, values,
 * boolean counts, the rebuildable decision). A document it cannot be sure to read the same way
 * (NaN, integers beyond 64 bits, doubles Python prints in exponent form, lone surrogates, nesting
 * beyond 100 levels, duplicate keys, malformed text, ...) is handed to a Python callback that runs
 * the pure Python code for that one row, in row order, so the results stay identical.
 * Built by setup.py; the pure Python split is used when this module is missing. */
#include "_nested_split.h"

static const char *LABELS[NLABELS] = {"STRING", "LONG", "DOUBLE", "ARRAY<STRING>", "ARRAY<LONG>", "ARRAY<DOUBLE>"};
static const uint8_t LABEL_TAG[NLABELS] = {0, 1, 2, 3, 3, 3};

/* ---- nodes: (parent, key or index) -> node ------------------------------------------------- */
static inline uint64_t mix(uint64_t h) {
    h ^= h >> 33; h *= 0xff51afd7ed558ccdULL; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL; h ^= h >> 33;
    return h;
}
static inline uint64_t key_hash(int32_t parent, const char *k, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) { h ^= (uint8_t)k[i]; h *= 1099511628211ULL; }
    return mix(h ^ ((uint64_t)(uint32_t)parent << 32));
}
static inline uint64_t index_hash(int32_t parent, int64_t index) {
    return mix(((uint64_t)(uint32_t)parent << 32) ^ (uint64_t)index ^ 0x9E3779B97F4A7C15ULL);
}

static int grow_slots(Ctx *c) {
    size_t n = c->nslots ? c->nslots * 2 : 1024;
    int32_t *s = PyMem_Malloc(n * sizeof(int32_t));
    if (!s) { PyErr_NoMemory(); return -1; }
    for (size_t i = 0; i < n; i++) s[i] = -1;
    for (size_t i = 0; i < c->nnodes; i++) {
        size_t j = c->nodes[i].hash & (n - 1);
        while (s[j] >= 0) j = (j + 1) & (n - 1);
        s[j] = (int32_t)i;
    }
    PyMem_Free(c->slots);
    c->slots = s; c->nslots = n;
    return 0;
}

static int32_t new_node(Ctx *c, int32_t parent, int64_t index, uint64_t h, const char *k, size_t n) {
    if ((c->nnodes + 1) * 2 > c->nslots && grow_slots(c)) return -1;
    if (c->nnodes == c->cap_nodes) {
        size_t cap = c->cap_nodes ? c->cap_nodes * 2 : 256;
        Node *q = PyMem_Realloc(c->nodes, cap * sizeof(Node));
        if (!q) { PyErr_NoMemory(); return -1; }
        c->nodes = q; c->cap_nodes = cap;
    }
    Node *nd = &c->nodes[c->nnodes];
    nd->parent = parent; nd->field = -1; nd->index = index; nd->hash = h; nd->stamp = 0; nd->path = NULL;
    nd->key_off = c->keys.n; nd->key_len = (uint32_t)n;
    if (n && buf_put(&c->keys, k, n)) return -1;
    size_t j = h & (c->nslots - 1);
    while (c->slots[j] >= 0) j = (j + 1) & (c->nslots - 1);
    c->slots[j] = (int32_t)c->nnodes;
    return (int32_t)c->nnodes++;
}

static int32_t key_node(Ctx *c, int32_t parent, const char *k, size_t n) {
    uint64_t h = key_hash(parent, k, n);
    if (c->nslots) {
        size_t j = h & (c->nslots - 1);
        int32_t id;
        while ((id = c->slots[j]) >= 0) {
            Node *nd = &c->nodes[id];
            if (nd->hash == h && nd->parent == parent && nd->index < 0 && nd->key_len == n
                && memcmp(c->keys.p + nd->key_off, k, n) == 0)
                return id;
            j = (j + 1) & (c->nslots - 1);
        }
    }
    return new_node(c, parent, -1, h, k, n);
}

static int32_t index_node(Ctx *c, int32_t parent, int64_t index) {
    uint64_t h = index_hash(parent, index);
    if (c->nslots) {
        size_t j = h & (c->nslots - 1);
        int32_t id;
        while ((id = c->slots[j]) >= 0) {
            Node *nd = &c->nodes[id];
            if (nd->hash == h && nd->parent == parent && nd->index == index) return id;
            j = (j + 1) & (c->nslots - 1);
        }
    }
    return new_node(c, parent, index, h, NULL, 0);
}

static PyObject *node_path(Ctx *c, int32_t id) {
    Node *nd = &c->nodes[id];
    if (nd->path) return nd->path;
    PyObject *out;
    if (nd->parent < 0) {
        out = PyUnicode_FromString("$");
    } else {
        PyObject *parent = node_path(c, nd->parent);
        if (!parent) return NULL;
        nd = &c->nodes[id];
        PyObject *step;
        if (nd->index >= 0) {
            step = PyUnicode_FromFormat("[%lld]", (long long)nd->index);
        } else {
            PyObject *key = PyUnicode_DecodeUTF8(c->keys.p + nd->key_off, nd->key_len, "strict");
            if (!key) return NULL;
            step = PyObject_CallOneArg(c->key_text, key);
            Py_DECREF(key);
        }
        if (!step) return NULL;
        out = PyUnicode_Concat(parent, step);
        Py_DECREF(step);
    }
    if (!out) return NULL;
    c->nodes[id].path = out;
    return out;
}

/* ---- fields ------------------------------------------------------------------------------- */
static int64_t field_for_path(Ctx *c, PyObject *path) {
    PyObject *got = PyDict_GetItemWithError(c->by_path, path);
    if (got) return PyLong_AsLongLong(got);
    if (PyErr_Occurred()) return -1;
    if (c->nfields == c->cap_fields) {
        size_t cap = c->cap_fields ? c->cap_fields * 2 : 64;
        Field *q = PyMem_Realloc(c->fields, cap * sizeof(Field));
        if (!q) { PyErr_NoMemory(); return -1; }
        c->fields = q; c->cap_fields = cap;
    }
    Field *f = &c->fields[c->nfields];
    memset(f, 0, sizeof(Field));
    Py_INCREF(path);
    f->path = path;
    PyObject *num = PyLong_FromSize_t(c->nfields);
    c->nfields++;
    if (!num || PyDict_SetItem(c->by_path, path, num)) { Py_XDECREF(num); return -1; }
    Py_DECREF(num);
    return (int64_t)(c->nfields - 1);
}

static int64_t node_field(Ctx *c, int32_t id) {
    if (c->nodes[id].field >= 0) return c->nodes[id].field;
    PyObject *path = node_path(c, id);
    if (!path) return -1;
    int64_t f = field_for_path(c, path);
    if (f >= 0) c->nodes[id].field = (int32_t)f;
    return f;
}

static inline uint64_t load64(const char *s) { uint64_t w; memcpy(&w, s, 8); return w; }
static inline uint64_t load32(const char *s) { uint32_t w; memcpy(&w, s, 4); return w; }

/* A hash of n bytes. Tails are read as whole (overlapping) words, not copied byte by byte into a
 * word, which stalls the load on the stores before it. */
static inline uint64_t bytes_hash(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    if (n >= 8) {
        const char *end = s + n;
        for (; s + 8 <= end; s += 8) { h = (h ^ load64(s)) * 0xff51afd7ed558ccdULL; h ^= h >> 29; }
        if (s < end) h = (h ^ load64(end - 8)) * 0xc4ceb9fe1a85ec53ULL;
    } else if (n >= 4) {
        h = (h ^ (load32(s) | (load32(s + n - 4) << 32))) * 0xc4ceb9fe1a85ec53ULL;
    } else if (n) {
        h = (h ^ ((uint64_t)(uint8_t)s[0] | (uint64_t)(uint8_t)s[n / 2] << 8 | (uint64_t)(uint8_t)s[n - 1] << 16))
            * 0xc4ceb9fe1a85ec53ULL;
    }
    return mix(h);
}

static int intern_grow(Intern *t) {
    size_t n = t->nslots ? t->nslots * 2 : 1024;
    uint64_t *slots = PyMem_Calloc(n, sizeof(uint64_t));
    if (!slots) { PyErr_NoMemory(); return -1; }
    for (size_t j = 0; j < t->nslots; j++) {
        uint64_t e = t->slots[j];
        if (!e) continue;
        size_t i = (size_t)(e >> 32) & (n - 1);  /* (slot index from the hash's high bits, kept) */
        while (slots[i]) i = (i + 1) & (n - 1);
        slots[i] = e;
    }
    PyMem_Free(t->slots);
    t->slots = slots; t->nslots = n;
    return 0;
}

/* The id of the value (s, n) in t, added when new; -1 on error. A slot holds the hash's high bits
 * beside the id, so a probe reads one cache line and compares bytes only on a likely match. */
static int32_t intern_id(Intern *t, const char *s, size_t n, uint64_t hash) {
    if (t->n * 2 >= t->nslots) {
        if (!t->nslots) { int64_t zero = 0; if (buf_put(&t->off, &zero, 8)) return -1; }
        if (t->n >= INT32_MAX / 2) { PyErr_NoMemory(); return -1; }
        if (intern_grow(t)) return -1;
    }
    uint64_t h = hash & 0xffffffff00000000ULL;
    size_t mask = t->nslots - 1, i = (size_t)(h >> 32) & mask;
    const int64_t *off = (const int64_t *)t->off.p;
    for (uint64_t e; (e = t->slots[i]) != 0; i = (i + 1) & mask) {
        if ((e & 0xffffffff00000000ULL) != h) continue;
        size_t id = (size_t)(uint32_t)e - 1;
        if ((size_t)(off[id + 1] - off[id]) == n && memcmp(t->data.p + off[id], s, n) == 0) return (int32_t)id;
    }
    int64_t end = (int64_t)(t->data.n + n);
    if (buf_put(&t->data, s, n) || buf_put(&t->off, &end, 8)) return -1;
    t->slots[i] = h | (uint64_t)(t->n + 1);
    return (int32_t)t->n++;
}

static void intern_free(Intern *t) {
    buf_free(&t->off); buf_free(&t->data); PyMem_Free(t->slots);
    memset(t, 0, sizeof *t);
}

static int field_add(Ctx *c, Field *f, int64_t row, uint8_t label, int64_t l, double d, const char *s, size_t n,
                     uint64_t hash) {
    int seen = 0;
    for (int i = 0; i < f->ntypes; i++) if (f->types[i] == label) { seen = 1; break; }
    if (!seen) f->types[f->ntypes++] = label;
    uint8_t tag = LABEL_TAG[label];
    if (buf_put(&f->rows, &row, 8) || buf_byte(&f->tags, (char)tag)) return -1;
    f->count++;
    switch (tag) {
    case 1: return buf_put(&f->longs, &l, 8);
    case 2: return buf_put(&f->doubles, &d, 8);
    default: {
        int32_t id = intern_id(tag == 0 ? &c->strs : &c->arrs, s, n, hash);
        return id < 0 ? -1 : buf_put(tag == 0 ? &f->sids : &f->aids, &id, 4);
    }
    }
}


/* ---- walking a document ------------------------------------------------------------------------ */
static int push_emit(Ctx *c, int32_t node, uint8_t label, uint8_t is_bool, int64_t l, double d, size_t off, size_t len) {
    if (c->nem == c->cap_em) {
        size_t cap = c->cap_em ? c->cap_em * 2 : 64;
        Emit *q = PyMem_Realloc(c->em, cap * sizeof(Emit));
        if (!q) { PyErr_NoMemory(); return ERR; }
        c->em = q; c->cap_em = cap;
    }
    Emit *e = &c->em[c->nem++];
    e->node = node; e->label = label; e->is_bool = is_bool; e->l = l; e->d = d; e->off = off; e->len = len;
    return OK;
}


static int walk_value(Ctx *c, int32_t node, int depth);

static int walk_object(Ctx *c, int32_t node, int depth) {
    c->s++;  /* '{' */
    skip_ws(c);
    if (c->s < c->end && *c->s == '}') { c->s++; c->exact = 0; return OK; }  /* {} is no field */
    if (depth > MAX_DEPTH) return FALLBACK;
    int64_t stamp = ++c->stamps;
    int rc;
    for (;;) {
        skip_ws(c);
        if (c->s >= c->end || *c->s != '"') return FALLBACK;
        size_t mark = c->arena.n, off, len;
        if ((rc = parse_string(c, &off, &len))) return rc;
        int32_t child = key_node(c, node, c->arena.p + off, len);
        if (child < 0) return ERR;
        c->arena.n = mark;
        if (c->nodes[child].stamp == stamp) return FALLBACK;  /* a duplicate key */
        c->nodes[child].stamp = stamp;
        skip_ws(c);
        if (c->s >= c->end || *c->s != ':') return FALLBACK;
        c->s++;
        skip_ws(c);
        if (c->s < c->end && *c->s == '{') rc = walk_object(c, child, depth + 1);
        else rc = walk_value(c, child, depth + 1);
        if (rc) return rc;
        skip_ws(c);
        if (c->s >= c->end) return FALLBACK;
        if (*c->s == ',') { c->s++; continue; }
        if (*c->s == '}') { c->s++; return OK; }
        return FALLBACK;
    }
}

static int push_elem(Ctx *c, uint8_t type, int64_t l, double d, size_t off, size_t len, const char *src,
                     int plain) {
    if (c->nel == c->cap_el) {
        size_t cap = c->cap_el ? c->cap_el * 2 : 32;
        Elem *q = PyMem_Realloc(c->el, cap * sizeof(Elem));
        if (!q) { PyErr_NoMemory(); return ERR; }
        c->el = q; c->cap_el = cap;
    }
    Elem *e = &c->el[c->nel++];
    e->type = type; e->l = l; e->d = d; e->off = off; e->len = len; e->src = src; e->plain = (uint8_t)plain;
    return OK;
}

/* An array of literals: its type, the text of its stored value (as json.dumps prints the stored
 * list, see document_paths._literal_array), and whether it is stored as written. */
static int emit_literal_array(Ctx *c, int32_t node) {
    int has_str = 0, has_float = 0, has_int = 0, has_bool = 0, has_null = 0;
    for (size_t i = 0; i < c->nel; i++) {
        switch (c->el[i].type) {
        case 0: has_str = 1; break;
        case 1: has_int = 1; break;
        case 2: has_float = 1; break;
        case 3: has_bool = 1; break;
        default: has_null = 1;
        }
    }
    uint8_t label;
    int special = 0;  /* stored as written by the fast branches of _walk_list */
    if (has_str && !has_float && !has_int && !has_bool && !has_null) { label = L_ASTRING; special = 1; }
    else if (!has_str && !has_float && !has_bool && !has_null && c->nel) { label = L_ALONG; special = 1; }
    else label = has_str ? L_ASTRING : has_float ? L_ADOUBLE : L_ALONG;
    if (!special && c->exact && (has_str + has_float + has_int + has_bool >= 2 || has_bool)) c->exact = 0;
    Buf *t = &c->tmp;
    t->n = 0;
    if (buf_byte(t, '[')) return ERR;
    for (size_t i = 0; i < c->nel; i++) {
        Elem *e = &c->el[i];
        if (i && buf_byte(t, ',')) return ERR;
        int rc = OK;
        if (e->type == 4) { rc = buf_put(t, "null", 4) ? ERR : OK; }
        else if (label == L_ASTRING) {
            if (e->type == 0) rc = put_escaped(t, c->arena.p + e->off, e->len);
            else {
                if (buf_byte(t, '"')) return ERR;
                if (e->type == 1) rc = put_long(t, e->l);
                else if (e->type == 3) rc = (e->l ? buf_put(t, "true", 4) : buf_put(t, "false", 5)) ? ERR : OK;
                else rc = e->plain ? (buf_put(t, e->src, e->len) ? ERR : OK) : put_double(t, e->d);
                if (!rc && buf_byte(t, '"')) return ERR;
            }
        } else if (label == L_ADOUBLE) {
            if (e->type == 2) rc = e->plain ? (buf_put(t, e->src, e->len) ? ERR : OK) : put_double(t, e->d);
            else if (e->l >= -(INT64_C(1) << 53) && e->l <= (INT64_C(1) << 53))
                rc = put_long(t, e->l) || buf_put(t, ".0", 2) ? ERR : OK;  /* exact as a double: repr is "<n>.0" */
            else rc = put_double(t, (double)e->l);
        } else {
            rc = e->type == 3 ? (buf_byte(t, e->l ? '1' : '0') ? ERR : OK) : put_long(t, e->l);
        }
        if (rc) return rc;
    }
    if (buf_byte(t, ']')) return ERR;
    size_t off = c->arena.n;
    if (buf_put(&c->arena, t->p, t->n)) return ERR;
    return push_emit(c, node, label, 0, 0, 0, off, t->n);
}

static int walk_array(Ctx *c, int32_t node, int depth) {
    if (depth > MAX_DEPTH) return FALLBACK;
    c->s++;  /* '[' */
    const char *first = c->s;
    size_t mark = c->arena.n;
    int rc;
    c->nel = 0;
    skip_ws(c);
    if (c->s < c->end && *c->s == ']') { c->s++; return emit_literal_array(c, node); }
    int containers = 0;
    for (;;) {
        skip_ws(c);
        if (c->s >= c->end) return FALLBACK;
        char ch = *c->s;
        if (ch == '{' || ch == '[') { containers = 1; break; }
        if (ch == '"') {
            size_t off, len;
            if ((rc = parse_string(c, &off, &len))) return rc;
            if ((rc = push_elem(c, 0, 0, 0, off, len, NULL, 0))) return rc;
        } else if (match_lit(c, "true", 4)) { if ((rc = push_elem(c, 3, 1, 0, 0, 0, NULL, 0))) return rc; }
        else if (match_lit(c, "false", 5)) { if ((rc = push_elem(c, 3, 0, 0, 0, 0, NULL, 0))) return rc; }
        else if (match_lit(c, "null", 4)) { if ((rc = push_elem(c, 4, 0, 0, 0, 0, NULL, 0))) return rc; }
        else {
            uint8_t label; int64_t l; double d;
            const char *start = c->s;
            if ((rc = parse_number(c, &label, &l, &d))) return rc;
            if ((rc = push_elem(c, label == L_LONG ? 1 : 2, l, d, 0, (size_t)(c->s - start), start, c->num_plain)))
                return rc;
        }
        skip_ws(c);
        if (c->s >= c->end) return FALLBACK;
        if (*c->s == ',') { c->s++; continue; }
        if (*c->s == ']') { c->s++; break; }
        return FALLBACK;
    }
    if (!containers) return emit_literal_array(c, node);
    /* Arrays holding objects or arrays: each element is walked ($.a[0].b). */
    c->s = first;
    c->arena.n = mark;
    for (int64_t i = 0;; i++) {
        skip_ws(c);
        int32_t child = index_node(c, node, i);
        if (child < 0) return ERR;
        if ((rc = walk_value(c, child, depth + 1))) return rc;
        skip_ws(c);
        if (c->s >= c->end) return FALLBACK;
        if (*c->s == ',') { c->s++; continue; }
        if (*c->s == ']') { c->s++; return OK; }
        return FALLBACK;
    }
}

static int walk_value(Ctx *c, int32_t node, int depth) {
    if (c->s >= c->end) return FALLBACK;
    char ch = *c->s;
    int rc;
    if (ch == '{') return walk_object(c, node, depth);
    if (ch == '[') return walk_array(c, node, depth);
    if (ch == '"') {
        size_t off, len;
        if ((rc = parse_string(c, &off, &len))) return rc;
        return push_emit(c, node, L_STRING, 0, 0, 0, off, len);
    }
    if (match_lit(c, "true", 4)) return push_emit(c, node, L_LONG, 1, 1, 0, 0, 0);
    if (match_lit(c, "false", 5)) return push_emit(c, node, L_LONG, 1, 0, 0, 0, 0);
    if (match_lit(c, "null", 4)) { c->exact = 0; return OK; }
    uint8_t label; int64_t l = 0; double d = 0;
    if ((rc = parse_number(c, &label, &l, &d))) return rc;
    return push_emit(c, node, label, 0, l, d, 0, 0);
}

/* One document: OK (emissions ready), NULLDOC, FALLBACK or ERR. */
static int walk_document(Ctx *c, const char *s, size_t n) {
    c->s = s; c->end = s + n;
    c->arena.n = 0; c->nem = 0; c->exact = 1;
    if (n >= BRACKET_TEXT) {
        size_t count = 0;
        for (size_t i = 0; i < n; i++) count += (s[i] == '[' || s[i] == '{');
        if (count > BRACKET_COUNT) return FALLBACK;
    }
    skip_ws(c);
    if (c->s >= c->end) return FALLBACK;
    int rc;
    if (match_lit(c, "null", 4)) rc = NULLDOC;
    else if ((rc = walk_value(c, 0, 0))) return rc;
    skip_ws(c);
    return c->s == c->end ? rc : FALLBACK;
}

/* ---- sources: a list of str/None, or an Arrow string array's buffers --------------------------- */
typedef struct {
    PyObject *list;
    Py_ssize_t n, offset;
    Py_buffer validity, offsets, data;
    int has_validity, width;
} Source;

static int source_open(Source *src, PyObject *obj) {
    memset(src, 0, sizeof *src);
    if (PyList_Check(obj)) { src->list = obj; src->n = PyList_GET_SIZE(obj); return 0; }
    PyObject *validity, *offsets, *data;
    if (!PyArg_ParseTuple(obj, "nnOOOi", &src->n, &src->offset, &validity, &offsets, &data, &src->width)) return -1;
    if (validity != Py_None) {
        if (PyObject_GetBuffer(validity, &src->validity, PyBUF_SIMPLE)) return -1;
        src->has_validity = 1;
    }
    if (PyObject_GetBuffer(offsets, &src->offsets, PyBUF_SIMPLE)) { src->offsets.obj = NULL; return -1; }
    if (PyObject_GetBuffer(data, &src->data, PyBUF_SIMPLE)) { src->data.obj = NULL; return -1; }
    return 0;
}
static void source_close(Source *src) {
    if (src->list) return;
    if (src->has_validity) PyBuffer_Release(&src->validity);
    if (src->offsets.obj) PyBuffer_Release(&src->offsets);
    if (src->data.obj) PyBuffer_Release(&src->data);
}
/* 0: text in (*s, *n); 1: null row; 2: take the Python path for this row (*obj: its str); -1: error;
 * 3: not a str at all (the whole column goes the Python way). */
static int source_row(Source *src, Py_ssize_t i, const char **s, Py_ssize_t *n, PyObject **obj) {
    *obj = NULL;
    if (src->list) {
        PyObject *item = PyList_GET_ITEM(src->list, i);
        if (item == Py_None) return 1;
        if (!PyUnicode_CheckExact(item)) return 3;
        *obj = item;
        *s = PyUnicode_AsUTF8AndSize(item, n);
        if (!*s) { PyErr_Clear(); return 2; }  /* lone surrogates */
        return 0;
    }
    Py_ssize_t at = src->offset + i;
    if (src->has_validity && !((((const uint8_t *)src->validity.buf)[at >> 3] >> (at & 7)) & 1)) return 1;
    int64_t a, b;
    if (src->width == 4) { a = ((const int32_t *)src->offsets.buf)[at]; b = ((const int32_t *)src->offsets.buf)[at + 1]; }
    else { a = ((const int64_t *)src->offsets.buf)[at]; b = ((const int64_t *)src->offsets.buf)[at + 1]; }
    *s = (const char *)src->data.buf + a;
    *n = (Py_ssize_t)(b - a);
    return 0;
}

static void ctx_free(Ctx *c) {
    buf_free(&c->arena); buf_free(&c->tmp); buf_free(&c->keys);
    PyMem_Free(c->em); PyMem_Free(c->el); PyMem_Free(c->slots);
    for (size_t i = 0; i < c->nnodes; i++) Py_XDECREF(c->nodes[i].path);
    PyMem_Free(c->nodes);
    for (size_t i = 0; i < c->nfields; i++) {
        Field *f = &c->fields[i];
        Py_XDECREF(f->path);
        buf_free(&f->rows); buf_free(&f->tags); buf_free(&f->longs); buf_free(&f->doubles);
        buf_free(&f->sids); buf_free(&f->aids);
    }
    intern_free(&c->strs); intern_free(&c->arrs);
    PyMem_Free(c->fields);
    Py_XDECREF(c->by_path);
}

static int label_of(PyObject *kind) {
    for (int i = 0; i < NLABELS; i++)
        if (PyUnicode_CompareWithASCIIString(kind, LABELS[i]) == 0) return i;
    return -1;
}

/* A row the Python code split: (emissions, canonical text, exact or None when slow, boolean paths).
 * Returns OK, FALLBACK (the whole column must take the Python path) or ERR. */
static int take_python_row(Ctx *c, Py_ssize_t row, PyObject *res, PyObject *array_text, PyObject *canon,
                           int *rebuildable) {
    PyObject *out, *text, *exact, *bools;
    if (!PyTuple_Check(res) || !PyArg_ParseTuple(res, "OOOO", &out, &text, &exact, &bools)) return ERR;
    PyObject *key = PyLong_FromSsize_t(row);
    if (!key) return ERR;
    int bad = PyDict_SetItem(canon, key, text);
    Py_DECREF(key);
    if (bad) return ERR;
    if (exact == Py_None) *rebuildable = 0;
    else if (!PyObject_IsTrue(exact)) *rebuildable = 0;
    int64_t last = -1;
    Py_ssize_t m = PyList_GET_SIZE(out);
    for (Py_ssize_t j = 0; j < m; j++) {
        PyObject *item = PyList_GET_ITEM(out, j);
        PyObject *path = PyTuple_GET_ITEM(item, 0), *kind = PyTuple_GET_ITEM(item, 1), *stored = PyTuple_GET_ITEM(item, 2);
        int label = label_of(kind);
        if (label < 0) return FALLBACK;
        Py_ssize_t n = 0;
        if (!PyUnicode_AsUTF8AndSize(path, &n)) { PyErr_Clear(); return FALLBACK; }
        int64_t f = field_for_path(c, path);
        if (f < 0) return ERR;
        if (f < last) *rebuildable = 0;
        last = f;
        int64_t l = 0; double d = 0; const char *s = NULL;
        PyObject *owned = NULL;
        if (label == L_STRING) {
            if (!PyUnicode_CheckExact(stored) || !(s = PyUnicode_AsUTF8AndSize(stored, &n))) { PyErr_Clear(); return FALLBACK; }
        } else if (label == L_LONG) {
            if (!PyLong_CheckExact(stored)) return FALLBACK;
            l = PyLong_AsLongLong(stored);
            if (l == -1 && PyErr_Occurred()) { PyErr_Clear(); return FALLBACK; }
        } else if (label == L_DOUBLE) {
            if (!PyFloat_CheckExact(stored)) return FALLBACK;
            d = PyFloat_AS_DOUBLE(stored);
        } else {
            owned = PyObject_CallOneArg(array_text, stored);
            if (!owned) { PyErr_Clear(); return FALLBACK; }  /* e.g. NaN in an array: Python raises later */
            if (!(s = PyUnicode_AsUTF8AndSize(owned, &n))) { PyErr_Clear(); Py_DECREF(owned); return FALLBACK; }
        }
        int rc = field_add(c, &c->fields[f], row, (uint8_t)label, l, d, s, (size_t)n,
                           LABEL_TAG[label] == 0 || LABEL_TAG[label] == 3 ? bytes_hash(s, (size_t)n) : 0);
        Py_XDECREF(owned);
        if (rc) return ERR;
    }
    Py_ssize_t nb = PySequence_Length(bools);
    for (Py_ssize_t j = 0; j < nb; j++) {
        PyObject *p = PySequence_GetItem(bools, j);
        if (!p) return ERR;
        int64_t f = field_for_path(c, p);
        Py_DECREF(p);
        if (f < 0) return ERR;
        c->fields[f].booleans++;
    }
    return OK;
}

static PyObject *bytes_of(Buf *b) { return PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)b->n); }

/* split(source, row_paths, array_text, key_text) -> (fields, rebuildable, nulls, canonical of the
 * rows the Python code split, (offsets, data, count) of the distinct strings, the same of the distinct
 * array texts) or None when the whole column must take the Python path. */
static PyObject *split(PyObject *self, PyObject *args) {
    PyObject *source, *row_paths, *array_text, *key_text;
    if (!PyArg_ParseTuple(args, "OOOO", &source, &row_paths, &array_text, &key_text)) return NULL;
    Source src;
    if (source_open(&src, source)) { source_close(&src); return NULL; }
    Ctx c;
    memset(&c, 0, sizeof c);
    c.key_text = key_text;
    PyObject *result = NULL, *canon = PyDict_New(), *nulls = PyBytes_FromStringAndSize(NULL, src.n);
    c.by_path = PyDict_New();
    int rebuildable = 1, abort_native = 0;
    if (!canon || !nulls || !c.by_path) goto done;
    char *null_mask = PyBytes_AS_STRING(nulls);
    memset(null_mask, 0, (size_t)src.n);
    if (grow_slots(&c) || new_node(&c, -1, -1, 0x5eed, NULL, 0) != 0) goto done;
    for (Py_ssize_t row = 0; row < src.n; row++) {
        const char *s = NULL; Py_ssize_t n = 0; PyObject *obj = NULL;
        int kind = source_row(&src, row, &s, &n, &obj);
        if (kind == 3) { abort_native = 1; break; }
        if (kind == 1) { null_mask[row] = 1; continue; }
        int rc = kind == 0 ? walk_document(&c, s, (size_t)n) : FALLBACK;
        if (rc == ERR) goto done;
        if (rc == NULLDOC) { null_mask[row] = 1; continue; }
        if (rc == OK) {
            if (!c.exact) rebuildable = 0;
            /* The document's strings are hashed first and their slots fetched ahead, so the
             * cache misses of the probes below overlap instead of following one another. */
            for (size_t j = 0; j < c.nem; j++) {
                Emit *e = &c.em[j];
                uint8_t tag = LABEL_TAG[e->label];
                if (tag == 1 || tag == 2) continue;
                Intern *t = tag == 0 ? &c.strs : &c.arrs;
                e->hash = bytes_hash(c.arena.p + e->off, e->len);
                if (t->nslots) __builtin_prefetch(&t->slots[(size_t)(e->hash >> 32) & (t->nslots - 1)]);
            }
            int64_t last = -1;
            for (size_t j = 0; j < c.nem; j++) {
                Emit *e = &c.em[j];
                int64_t f = node_field(&c, e->node);
                if (f < 0) goto done;
                if (f < last) rebuildable = 0;  /* its keys come in another order than the fields' */
                last = f;
                Field *fd = &c.fields[f];
                if (field_add(&c, fd, row, e->label, e->l, e->d, c.arena.p + e->off, e->len, e->hash)) goto done;
                if (e->is_bool) fd->booleans++;
            }
            continue;
        }
        /* FALLBACK: the Python code splits this row. */
        PyObject *text = obj;
        if (text) Py_INCREF(text);
        else if (!(text = PyUnicode_DecodeUTF8(s, n, "strict"))) { PyErr_Clear(); abort_native = 1; break; }
        PyObject *res = PyObject_CallFunction(row_paths, "On", text, row);
        Py_DECREF(text);
        if (!res) goto done;
        if (res == Py_None) { Py_DECREF(res); null_mask[row] = 1; continue; }
        rc = take_python_row(&c, row, res, array_text, canon, &rebuildable);
        Py_DECREF(res);
        if (rc == ERR) goto done;
        if (rc == FALLBACK) { abort_native = 1; break; }
    }
    if (abort_native) { result = Py_None; Py_INCREF(result); goto done; }
    PyObject *fields = PyList_New((Py_ssize_t)c.nfields);
    if (!fields) goto done;
    for (size_t i = 0; i < c.nfields; i++) {
        Field *f = &c.fields[i];
        PyObject *types = PyList_New(f->ntypes);
        if (!types) { Py_DECREF(fields); goto done; }
        for (int t = 0; t < f->ntypes; t++) PyList_SET_ITEM(types, t, PyUnicode_FromString(LABELS[f->types[t]]));
        PyObject *item = Py_BuildValue("(ONLNNNNNN)", f->path, types, (long long)f->booleans,
                                       bytes_of(&f->rows), bytes_of(&f->tags), bytes_of(&f->longs),
                                       bytes_of(&f->doubles), bytes_of(&f->sids), bytes_of(&f->aids));
        if (!item) { Py_DECREF(fields); goto done; }
        PyList_SET_ITEM(fields, (Py_ssize_t)i, item);
    }
    int64_t zero = 0;  /* (an empty table has no offsets yet) */
    if ((!c.strs.off.n && buf_put(&c.strs.off, &zero, 8)) || (!c.arrs.off.n && buf_put(&c.arrs.off, &zero, 8))) {
        Py_DECREF(fields); goto done;
    }
    result = Py_BuildValue("(NOOO(NNn)(NNn))", fields, rebuildable ? Py_True : Py_False, nulls, canon,
                           bytes_of(&c.strs.off), bytes_of(&c.strs.data), (Py_ssize_t)c.strs.n,
                           bytes_of(&c.arrs.off), bytes_of(&c.arrs.data), (Py_ssize_t)c.arrs.n);
done:
    Py_XDECREF(canon);
    Py_XDECREF(nulls);
    ctx_free(&c);
    source_close(&src);
    return result;
}

/* canonical(source, python_rows, nulls) -> (offsets int64, data): each row's compact JSON text, as
 * json.dumps(separators=(",", ":"), ensure_ascii=False) prints it; rows in python_rows (row -> text)
 * take that text, null rows are empty (the caller marks them null). */
static PyObject *canonical(PyObject *self, PyObject *args) {
    PyObject *source, *python_rows;
    Py_buffer nulls;
    if (!PyArg_ParseTuple(args, "OOy*", &source, &python_rows, &nulls)) return NULL;
    Source src;
    PyObject *result = NULL;
    Ctx c;
    memset(&c, 0, sizeof c);
    Buf out = {0}, offs = {0};
    if (source_open(&src, source)) goto done;
    c.out = &out;
    int64_t zero = 0;
    if (buf_put(&offs, &zero, 8)) goto done;
    for (Py_ssize_t row = 0; row < src.n; row++) {
        if (!(row < nulls.len && ((const char *)nulls.buf)[row])) {
            PyObject *key = PyLong_FromSsize_t(row);
            if (!key) goto done;
            PyObject *text = PyDict_GetItemWithError(python_rows, key);
            Py_DECREF(key);
            if (text) {
                Py_ssize_t n;
                const char *s = PyUnicode_AsUTF8AndSize(text, &n);
                if (!s || buf_put(&out, s, (size_t)n)) goto done;
            } else {
                if (PyErr_Occurred()) goto done;
                const char *s = NULL; Py_ssize_t n = 0; PyObject *obj = NULL;
                if (source_row(&src, row, &s, &n, &obj) != 0) {
                    PyErr_SetString(PyExc_RuntimeError, "nested split: a row changed between the split and its text");
                    goto done;
                }
                c.s = s; c.end = s + n;
                int rc = canon_value(&c);
                if (rc == ERR) goto done;
                if (rc != OK) {
                    PyErr_Format(PyExc_RuntimeError, "nested split: row %zd did not print back", row);
                    goto done;
                }
            }
        }
        int64_t end = (int64_t)out.n;
        if (buf_put(&offs, &end, 8)) goto done;
    }
    result = Py_BuildValue("(NN)", bytes_of(&offs), bytes_of(&out));
done:
    PyBuffer_Release(&nulls);
    source_close(&src);
    buf_free(&out); buf_free(&offs);
    ctx_free(&c);
    return result;
}

static PyMethodDef METHODS[] = {
    {"split", split, METH_VARARGS, "Split JSON documents into per-field columns (see nested_native_split)."},
    {"canonical", canonical, METH_VARARGS, "Each document's compact JSON text."},
    {"sort_strings", sort_strings, METH_VARARGS, "The byte order of an Arrow string array's values."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_nested_split", NULL, -1, METHODS};

PyMODINIT_FUNC PyInit__nested_split(void) { return PyModule_Create(&MODULE); }

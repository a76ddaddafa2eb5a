/* Shared by _nested_split.c (the field split, the module) and _nested_split_text.c (reading and
 * printing JSON strings and numbers as Python's json/orjson do). */
#ifndef STRATA_NESTED_SPLIT_H
#define STRATA_NESTED_SPLIT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 100          /* nested_fields._MAX_RECURSION */
#define BRACKET_TEXT 1800      /* nested_fields: 2 * MAX_DOCUMENT_DEPTH (common/json/document_text.py) */
#define BRACKET_COUNT 900

enum { L_STRING, L_LONG, L_DOUBLE, L_ASTRING, L_ALONG, L_ADOUBLE, NLABELS };

enum { OK = 0, FALLBACK = 1, NULLDOC = 2, ERR = -1 };

typedef struct { char *p; size_t n, cap; } Buf;

static inline int buf_reserve(Buf *b, size_t extra) {
    if (b->n + extra <= b->cap) return 0;
    size_t c = b->cap ? b->cap * 2 : 256;
    while (c < b->n + extra) c *= 2;
    char *q = PyMem_Realloc(b->p, c);
    if (!q) { PyErr_NoMemory(); return -1; }
    b->p = q; b->cap = c;
    return 0;
}
static inline int buf_put(Buf *b, const void *d, size_t n) {
    if (buf_reserve(b, n)) return -1;
    memcpy(b->p + b->n, d, n); b->n += n;
    return 0;
}
static inline int buf_byte(Buf *b, char c) {
    if (b->n == b->cap && buf_reserve(b, 1)) return -1;
    b->p[b->n++] = c;
    return 0;
}
static inline void buf_free(Buf *b) { PyMem_Free(b->p); b->p = NULL; b->n = b->cap = 0; }

typedef struct {
    int32_t parent, field;
    int64_t index;        /* array index, or -1 for an object key */
    uint64_t hash;
    size_t key_off;
    uint32_t key_len;
    int64_t stamp;        /* the last object instance that held this key (duplicate keys) */
    PyObject *path;       /* canonical path text, built on first use */
} Node;

typedef struct {
    PyObject *path;
    int ntypes;
    uint8_t types[NLABELS];
    int64_t booleans, count;
    Buf rows, tags, longs, doubles, sids, aids;  /* sids/aids: int32 ids in the column's Intern tables */
} Field;

/* The distinct values of one kind (strings, or arrays as text) of the whole column, in first-seen
 * order: each value a field appends gets its id here, so the column build sorts the distinct values
 * once instead of hashing every value again. */
typedef struct {
    Buf off, data;        /* int64 offsets (n + 1) and the values' bytes */
    uint64_t *slots;      /* open addressing: high 32 bits of the hash, low 32 bits id + 1; 0 empty */
    size_t nslots, n;
} Intern;

typedef struct {
    int32_t node;
    uint8_t label, is_bool;
    int64_t l;
    double d;
    size_t off, len;
    uint64_t hash;        /* a string's or array text's hash, computed a document at a time */
} Emit;

/* An element of an array of literals. type: 0 str 1 int 2 double 3 bool 4 null; a double whose
 * text is already Python's repr of it (plain) keeps that text (src, len) instead of printing it. */
typedef struct { uint8_t type, plain; int64_t l; double d; size_t off, len; const char *src; } Elem;

typedef struct {
    const char *s, *end;
    Buf arena;            /* this document's unescaped strings and array texts */
    Buf tmp;              /* an array's text while it is rendered */
    Emit *em; size_t nem, cap_em;
    Elem *el; size_t nel, cap_el;
    int exact;
    int num_plain;        /* the last number's text is how Python prints it (repr, str) */
    int64_t stamps;
    Node *nodes; size_t nnodes, cap_nodes;
    int32_t *slots; size_t nslots;
    Buf keys;
    Field *fields; size_t nfields, cap_fields;
    Intern strs, arrs;
    PyObject *by_path;    /* path text -> field number */
    PyObject *key_text;   /* common.json.path_steps.key_text */
    Buf *out;             /* canonical mode: the compact text goes here */
} Ctx;

static inline void skip_ws(Ctx *c) {
    while (c->s < c->end && (*c->s == ' ' || *c->s == '\n' || *c->s == '\r' || *c->s == '\t')) c->s++;
}

static inline int match_lit(Ctx *c, const char *w, size_t n) {
    if ((size_t)(c->end - c->s) < n || memcmp(c->s, w, n) != 0) return 0;
    c->s += n;
    return 1;
}

/* _nested_split_text.c */
int parse_string(Ctx *c, size_t *off, size_t *len);
int parse_number(Ctx *c, uint8_t *label, int64_t *l, double *d);
int put_escaped(Buf *b, const char *s, size_t n);
int put_double(Buf *b, double d);
int put_long(Buf *b, int64_t v);
int canon_value(Ctx *c);

/* _nested_split_sort.c */
PyObject *sort_strings(PyObject *self, PyObject *args);

#endif

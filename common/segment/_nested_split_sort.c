/* The byte order of a column's distinct strings (or array texts), for its sorted dictionaries.
 * Arrow's sort_indices compares whole strings at every step; here an LSD radix sort orders the
 * strings by their first 8 bytes (big-endian, zero-padded), and only runs sharing those bytes are
 * compared in full (memcmp, then length; then position, so equal strings keep their order as in
 * a stable sort). The result is the order Arrow gives: UTF-8 byte order, shorter prefix first. */
#include "_nested_split.h"

typedef struct { uint64_t key; int64_t id; } Item;

/* The strings qsort's comparator reads (qsort has no context argument; the caller holds the GIL,
 * so one sort runs at a time). */
static const char *g_data;
static const int64_t *g_off64;
static const int32_t *g_off32;

static inline void span(int64_t id, const char **s, size_t *n) {
    int64_t a = g_off64 ? g_off64[id] : g_off32[id], b = g_off64 ? g_off64[id + 1] : g_off32[id + 1];
    *s = g_data + a; *n = (size_t)(b - a);
}

static int full_compare(const void *x, const void *y) {
    const Item *a = x, *b = y;
    const char *sa, *sb; size_t na, nb;
    span(a->id, &sa, &na); span(b->id, &sb, &nb);
    size_t m = na < nb ? na : nb;
    int c = m > 8 ? memcmp(sa + 8, sb + 8, m - 8) : 0;  /* (the first 8 bytes are the equal key) */
    if (c) return c;
    if (na != nb) return na < nb ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* sort_strings(offsets, data, offset_width, first, n) -> int64 positions (relative to first) of the
 * n strings from index first of an Arrow string array's buffers, in byte order. */
PyObject *sort_strings(PyObject *self, PyObject *args) {
    Py_buffer offs, data;
    int width;
    Py_ssize_t first, n;
    if (!PyArg_ParseTuple(args, "y*y*inn", &offs, &data, &width, &first, &n)) return NULL;
    PyObject *result = NULL;
    Item *items = NULL, *tmp = NULL;
    if (n < 0 || (width != 4 && width != 8) || (size_t)offs.len < (size_t)(first + n + 1) * (size_t)width) {
        PyErr_SetString(PyExc_ValueError, "sort_strings: offsets buffer too short");
        goto done;
    }
    g_data = data.buf;
    g_off64 = width == 8 ? (const int64_t *)offs.buf + first : NULL;
    g_off32 = width == 4 ? (const int32_t *)offs.buf + first : NULL;
    items = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Item));
    tmp = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Item));
    if (!items || !tmp) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *s; size_t len;
        span(i, &s, &len);
        uint64_t k = 0;
        for (size_t j = 0; j < 8; j++) k = (k << 8) | (j < len ? (uint8_t)s[j] : 0);
        items[i].key = k; items[i].id = i;
    }
    for (int shift = 0; shift < 64; shift += 8) {  /* LSD radix, stable; a pass whose byte is one value is skipped */
        size_t count[256] = {0};
        for (Py_ssize_t i = 0; i < n; i++) count[(items[i].key >> shift) & 0xff]++;
        if (n && count[(items[0].key >> shift) & 0xff] == (size_t)n) continue;
        size_t at = 0;
        for (int b = 0; b < 256; b++) { size_t c = count[b]; count[b] = at; at += c; }
        for (Py_ssize_t i = 0; i < n; i++) tmp[count[(items[i].key >> shift) & 0xff]++] = items[i];
        Item *t = items; items = tmp; tmp = t;
    }
    for (Py_ssize_t i = 0; i < n;) {
        Py_ssize_t j = i + 1;
        while (j < n && items[j].key == items[i].key) j++;
        if (j - i > 1) qsort(items + i, (size_t)(j - i), sizeof(Item), full_compare);
        i = j;
    }
    result = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (result) {
        int64_t *out = (int64_t *)PyBytes_AS_STRING(result);
        for (Py_ssize_t i = 0; i < n; i++) out[i] = items[i].id;
    }
done:
    PyMem_Free(items); PyMem_Free(tmp);
    PyBuffer_Release(&offs); PyBuffer_Release(&data);
    return result;
}

/* The compiled reader of newline-delimited JSON for the text scan: it reads the lines of a byte
 * range and hands back Arrow buffers per signature column (string offsets and data, int64 and
 * double values, validity bitmaps), so Python never builds an object per line. It gives exactly what
 * row_parser.parse_file gives: a line it cannot be sure to read the same way (malformed, not an
 * object, NaN, integers beyond 64 bits, doubles Python or orjson print in exponent form, lone
 * surrogates, duplicate keys, nesting beyond 100 levels, a value that does not fit its column,
 * non-ASCII whitespace around the line, ...) is listed for row_parser to read in its place; so the
 * hostile ones (a lone surrogate in a column, nesting past the document limit, numbers beyond a
 * double) become row_parser's parse exception or its Jackson text in both readers alike.
 * Strings and numbers are read and printed by the nested split's shared code
 * (common/json/_nested_split_text.c), so a COMPLEX<json> value's compact text is the one the
 * field split prints: json.dumps(separators=(",", ":"), ensure_ascii=False), which is orjson's
 * text for every number this reader accepts. Built by setup.py; row_parser is used when missing. */
#include "_nested_split.h"

enum { K_STRING, K_LONG, K_DOUBLE, K_FLOAT, K_TIME, K_JSON, K_OTHER };

#define MAX_KEYS 256                           /* more keys in one object: row_parser reads the line */
#define MIN_MILLIS (-62135596800000LL)         /* row_parser._MIN_MILLIS, _MAX_MILLIS */
#define MAX_MILLIS 253402300799999LL

typedef struct {
    int kind;
    const char *name;
    Py_ssize_t name_len;
    int seen;
    int64_t nulls;
    Buf valid;   /* one byte per row, packed into a bitmap at the end */
    Buf vals;    /* fixed-width values */
    Buf offs;    /* int32 offsets, rows + 1 */
    Buf data;
} Col;

typedef struct { const char *text; size_t off; uint32_t len, hash; } KeyRef;  /* text, or arena offset if NULL */

typedef struct {
    Ctx c;
    Col *cols;
    Py_ssize_t ncols;
    KeyRef *keys; size_t nkeys, cap_keys;
    Buf *out;            /* where the value being printed goes (NULL: only checked) */
    const char *mark;    /* its source text not yet copied starts here */
} Reader;

static inline int is_pyspace(unsigned char b) { return b == ' ' || (b >= 9 && b <= 13) || (b >= 0x1c && b <= 0x1f); }

static inline uint32_t key_hash(const char *k, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) { h ^= (uint8_t)k[i]; h *= 16777619u; }
    return h;
}

/* The length of a plain string at p (its opening quote): printable ASCII only, no escapes, so its
 * text is its value and json.dumps prints it as it is; 0 for any other string (the general path). */
static inline size_t plain_string(const char *p, const char *end) {
    const char *q = p + 1;
    while (q < end) {
        unsigned char ch = (unsigned char)*q;
        if (ch == '"') return (size_t)(q + 1 - p);
        if (ch < 0x20 || ch == '\\' || ch >= 0x80) return 0;
        q++;
    }
    return 0;
}

/* The length of a number at p whose text is already how Python (and orjson) print it, and which
 * parse_number reads without falling back: an integer of at most 18 digits (not -0), or a fraction
 * without exponent, at most 15 significant digits, no trailing zero but in "x.0", and 0 or at least
 * 1e-4 (a nonzero digit within the first four decimals when the integer part is 0). 0 otherwise:
 * parse_number decides. */
static inline size_t plain_number(const char *p, const char *end) {
    const char *q = p;
    if (q < end && *q == '-') q++;
    const char *digits = q;
    if (q >= end) return 0;
    int sig = 0;
    if (*q == '0') q++;
    else if (*q >= '1' && *q <= '9') { while (q < end && *q >= '0' && *q <= '9') { q++; sig++; } }
    else return 0;
    if (q < end && (*q == 'e' || *q == 'E')) return 0;
    if (q >= end || *q != '.') {
        if (sig > 18 || (sig == 0 && digits != p)) return 0;  /* long, or -0 */
        return (size_t)(q - p);
    }
    const char *frac = ++q;
    int lead = sig == 0, first_nonzero = 0;
    while (q < end && *q >= '0' && *q <= '9') {
        if (*q != '0' && !first_nonzero) first_nonzero = (int)(q - frac) + 1;
        if (!lead || *q != '0') { lead = 0; sig++; }
        q++;
    }
    size_t nfrac = (size_t)(q - frac);
    if (nfrac == 0 || (q < end && (*q == 'e' || *q == 'E'))) return 0;
    if (nfrac > 1 && q[-1] == '0') return 0;
    if (sig > 15) return 0;
    if (digits[0] == '0' && first_nonzero > 4) return 0;  /* below 1e-4: exponent form */
    return (size_t)(q - p);
}

static int canon_number(Ctx *c, Buf *o) {
    uint8_t label; int64_t l; double d;
    const char *start = c->s;
    size_t n = plain_number(start, c->end);
    if (n) { c->s += n; return buf_put(o, start, n) ? ERR : OK; }
    int rc = parse_number(c, &label, &l, &d);
    if (rc) return rc;
    if (c->num_plain) return buf_put(o, start, (size_t)(c->s - start)) ? ERR : OK;
    return label == L_LONG ? put_long(o, l) : put_double(o, d);
}

/* The compact text of a value is its source text with the whitespace between tokens dropped and
 * the few tokens that print otherwise (escaped strings, numbers not in Python's form) printed
 * again; so the printer copies runs of the source, and r->mark is where the run not yet copied
 * starts. With r->out NULL the value is only checked (a value no column wants). */
static inline int flush_to(Reader *r, const char *p) {
    if (r->out && p > r->mark && buf_put(r->out, r->mark, (size_t)(p - r->mark))) return ERR;
    return OK;
}
static inline int ws(Reader *r) {
    Ctx *c = &r->c;
    const char *p = c->s;
    skip_ws(c);
    if (c->s != p) {
        if (flush_to(r, p)) return ERR;
        r->mark = c->s;
    }
    return OK;
}

/* A string [start, c->s) whose value (arena off, len) json.dumps prints otherwise than its text. */
static int reprint_string(Reader *r, const char *start, size_t off, size_t len) {
    Ctx *c = &r->c;
    if ((size_t)(c->s - start) == len + 2) return OK;  /* no escapes: the text is the print */
    if (r->out && (flush_to(r, start) || put_escaped(r->out, c->arena.p + off, len))) return ERR;
    r->mark = c->s;
    return OK;
}

/* The value at c->s, checked and printed compact; FALLBACK on anything row_parser may read
 * otherwise (duplicate keys: orjson keeps the last value in the first key's place). */
static int canon(Reader *r, int depth) {
    Ctx *c = &r->c;
    int rc;
    if ((rc = ws(r))) return rc;
    if (c->s >= c->end) return FALLBACK;
    char ch = *c->s;
    if (ch == '{' || ch == '[') {
        if (depth >= MAX_DEPTH) return FALLBACK;
        char close = ch == '{' ? '}' : ']';
        c->s++;
        if ((rc = ws(r))) return rc;
        if (c->s < c->end && *c->s == close) { c->s++; return OK; }
        size_t base = r->nkeys;
        for (;;) {
            if ((rc = ws(r))) return rc;
            if (ch == '{') {
                if (c->s >= c->end || *c->s != '"') return FALLBACK;
                const char *kstart = c->s, *key;
                size_t off = 0, len, plain = plain_string(kstart, c->end);
                if (plain) {
                    len = plain - 2;
                    key = kstart + 1;
                    c->s += plain;
                } else {
                    if ((rc = parse_string(c, &off, &len))) return rc;
                    key = c->arena.p + off;
                }
                uint32_t h = key_hash(key, len);
                for (size_t k = base; k < r->nkeys; k++) {
                    KeyRef *kr = &r->keys[k];
                    if (kr->hash == h && kr->len == len &&
                        memcmp(kr->text ? kr->text : c->arena.p + kr->off, key, len) == 0) return FALLBACK;
                }
                if (r->nkeys - base >= MAX_KEYS) return FALLBACK;
                if (r->nkeys == r->cap_keys) {
                    size_t cap = r->cap_keys ? r->cap_keys * 2 : 64;
                    KeyRef *q = PyMem_Realloc(r->keys, cap * sizeof(KeyRef));
                    if (!q) { PyErr_NoMemory(); return ERR; }
                    r->keys = q; r->cap_keys = cap;
                }
                r->keys[r->nkeys++] = (KeyRef){plain ? key : NULL, off, (uint32_t)len, h};
                if (!plain && (rc = reprint_string(r, kstart, off, len))) return rc;
                if ((rc = ws(r))) return rc;
                if (c->s >= c->end || *c->s != ':') return FALLBACK;
                c->s++;
            }
            if ((rc = canon(r, depth + 1))) return rc;
            if ((rc = ws(r))) return rc;
            if (c->s >= c->end) return FALLBACK;
            if (*c->s == ',') { c->s++; continue; }
            if (*c->s == close) { c->s++; r->nkeys = base; return OK; }
            return FALLBACK;
        }
    }
    const char *start = c->s;
    if (ch == '"') {
        size_t n = plain_string(start, c->end);
        if (n) { c->s += n; return OK; }
        size_t off, len;
        if ((rc = parse_string(c, &off, &len))) return rc;
        return reprint_string(r, start, off, len);
    }
    if (match_lit(c, "true", 4) || match_lit(c, "false", 5) || match_lit(c, "null", 4)) return OK;
    size_t n = plain_number(start, c->end);
    if (n) { c->s += n; return OK; }
    uint8_t label; int64_t l; double d;
    if ((rc = parse_number(c, &label, &l, &d))) return rc;
    if (c->num_plain) return OK;
    if (r->out && (flush_to(r, start) || (label == L_LONG ? put_long(r->out, l) : put_double(r->out, d)))) return ERR;
    r->mark = c->s;
    return OK;
}

/* ---- one value into its column ------------------------------------------------------------- */

static inline int put_valid(Col *col, int ok) {
    if (!ok) col->nulls++;
    return buf_byte(&col->valid, ok ? 1 : 0) ? ERR : OK;
}
static int put_null(Col *col) {
    switch (col->kind) {
    case K_STRING: case K_JSON: {
        int32_t end = (int32_t)col->data.n;
        if (buf_put(&col->offs, &end, 4)) return ERR;
        break;
    }
    case K_LONG: case K_TIME: case K_DOUBLE: { int64_t z = 0; if (buf_put(&col->vals, &z, 8)) return ERR; break; }
    case K_FLOAT: { float z = 0; if (buf_put(&col->vals, &z, 4)) return ERR; break; }
    default: break;
    }
    return put_valid(col, 0);
}
static int put_i64(Col *col, int64_t v) { return buf_put(&col->vals, &v, 8) ? ERR : put_valid(col, 1); }
static int put_f64(Col *col, double v) {
    if (col->kind == K_FLOAT) { float f = (float)v; return buf_put(&col->vals, &f, 4) ? ERR : put_valid(col, 1); }
    return buf_put(&col->vals, &v, 8) ? ERR : put_valid(col, 1);
}
static int end_text(Col *col) {
    if (col->data.n > (size_t)INT32_MAX) return FALLBACK;
    int32_t end = (int32_t)col->data.n;
    return buf_put(&col->offs, &end, 4) ? ERR : put_valid(col, 1);
}

/* A string holding only whitespace is null in numeric and time columns (after str.strip()); any
 * other string is left to row_parser. */
static int blank_string(Ctx *c) {
    size_t off, len;
    int rc = parse_string(c, &off, &len);
    if (rc) return rc;
    for (size_t i = 0; i < len; i++) if (!is_pyspace((unsigned char)c->arena.p[off + i])) return FALLBACK;
    return OK;
}

/* An ISO-8601 time in the forms most inputs write, read as common.types.interval.parse_instant
 * reads it: YYYY-MM-DD, optionally THH:MM:SS (or a space for the T), a fraction of 1 to 9 digits
 * (milliseconds; finer digits truncate), and Z or an offset +HH:MM / -HH:MM; epoch milliseconds in
 * *ms. 0 for any other text (parse_instant decides). */
static inline int digits_at(const char *p, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}
static int iso_millis(const char *p, size_t n, int64_t *ms) {
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h = 0, mi = 0, sec = 0, frac = 0, oh, om;
    int64_t offset = 0;
    if (n < 10 || p[4] != '-' || p[7] != '-') return 0;
    if (!digits_at(p, 4, &y) || !digits_at(p + 5, 2, &mo) || !digits_at(p + 8, 2, &d)) return 0;
    if (y < 1 || mo < 1 || mo > 12 || d < 1) return 0;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > mdays[mo - 1] + (mo == 2 && leap)) return 0;
    size_t i = 10;
    if (i < n) {
        if (n < 19 || (p[10] != 'T' && p[10] != ' ') || p[13] != ':' || p[16] != ':') return 0;
        if (!digits_at(p + 11, 2, &h) || !digits_at(p + 14, 2, &mi) || !digits_at(p + 17, 2, &sec)) return 0;
        if (h > 23 || mi > 59 || sec > 59) return 0;
        i = 19;
        if (i < n && p[i] == '.') {
            size_t k = ++i;
            while (i < n && p[i] >= '0' && p[i] <= '9') i++;
            size_t nd = i - k;
            if (nd < 1 || nd > 9) return 0;
            for (size_t j = 0; j < 3; j++) frac = frac * 10 + (j < nd ? p[k + j] - '0' : 0);
        }
        if (i < n && (p[i] == 'Z' || p[i] == 'z')) i++;
        else if (i < n && (p[i] == '+' || p[i] == '-') && n - i == 6 && p[i + 3] == ':' &&
                 digits_at(p + i + 1, 2, &oh) && digits_at(p + i + 4, 2, &om) && oh <= 23 && om <= 59) {
            offset = (p[i] == '-' ? -1 : 1) * (oh * 3600000LL + om * 60000LL);
            i = n;
        }
        if (i != n) return 0;
    }
    *ms = days_from_civil(y, mo, d) * 86400000LL + h * 3600000LL + mi * 60000LL + sec * 1000LL + frac - offset;
    return *ms >= MIN_MILLIS && *ms <= MAX_MILLIS;  /* beyond: row_parser words the error */
}

static int value_into(Reader *r, Col *col) {
    Ctx *c = &r->c;
    if (c->s >= c->end) return FALLBACK;
    char ch = *c->s;
    if (match_lit(c, "null", 4)) return put_null(col);
    int rc;
    switch (col->kind) {
    case K_JSON:
        r->out = &col->data;
        r->mark = c->s;
        if ((rc = canon(r, 1)) || (rc = flush_to(r, c->s))) return rc;
        return end_text(col);
    case K_STRING:
        if (ch == '"') {
            Buf saved = c->arena;  /* unescape straight into the column's data */
            c->arena = col->data;
            size_t off, len;
            rc = parse_string(c, &off, &len);
            col->data = c->arena;
            c->arena = saved;
            return rc ? rc : end_text(col);
        }
        if (ch == '{' || ch == '[') return FALLBACK;
        if (match_lit(c, "true", 4)) { if (buf_put(&col->data, "true", 4)) return ERR; return end_text(col); }
        if (match_lit(c, "false", 5)) { if (buf_put(&col->data, "false", 5)) return ERR; return end_text(col); }
        if ((rc = canon_number(c, &col->data))) return rc;
        return end_text(col);
    case K_OTHER:
        return FALLBACK;
    default: break;
    }
    /* numbers and times */
    if (ch == '"') {
        size_t plain = plain_string(c->s, c->end);
        int64_t ms;
        if (col->kind == K_TIME && plain && iso_millis(c->s + 1, plain - 2, &ms)) {
            c->s += plain;
            return put_i64(col, ms * 1000);
        }
        if ((rc = blank_string(c))) return rc;
        return put_null(col);
    }
    int is_true = 0;
    if ((is_true = match_lit(c, "true", 4)) || match_lit(c, "false", 5)) {
        if (col->kind == K_TIME) return FALLBACK;  /* a boolean is not a time: row_parser words it */
        if (col->kind == K_LONG) return put_i64(col, is_true);
        return put_f64(col, is_true ? 1.0 : 0.0);
    }
    uint8_t label; int64_t l; double d;
    if ((rc = parse_number(c, &label, &l, &d))) return rc;
    /* parse_number keeps doubles to 0 and 1e-4 <= |d| < 1e16, so truncation stays in 64 bits */
    switch (col->kind) {
    case K_LONG: return put_i64(col, label == L_LONG ? l : (int64_t)d);
    case K_TIME: {
        int64_t ms = label == L_LONG ? l : (int64_t)d;
        if (ms < MIN_MILLIS || ms > MAX_MILLIS) return FALLBACK;
        return put_i64(col, ms * 1000);
    }
    default: return put_f64(col, label == L_LONG ? (double)l : d);
    }
}

/* ---- a line ---------------------------------------------------------------------------------- */

static int match_column(Reader *r, const char *k, size_t n) {
    for (Py_ssize_t i = 0; i < r->ncols; i++) {
        Col *col = &r->cols[i];
        if ((size_t)col->name_len == n && memcmp(col->name, k, n) == 0) return (int)i;
    }
    return -1;
}

/* The object between s (its '{') and e (just past its '}') into one row of every column. */
static int read_object(Reader *r, const char *s, const char *e) {
    Ctx *c = &r->c;
    c->s = s + 1;
    c->end = e;
    c->arena.n = 0;
    r->nkeys = 0;
    for (Py_ssize_t i = 0; i < r->ncols; i++) r->cols[i].seen = 0;
    int rc;
    skip_ws(c);
    if (c->s < c->end && *c->s == '}') c->s++;
    else for (;;) {
        skip_ws(c);
        if (c->s >= c->end || *c->s != '"') return FALLBACK;
        size_t off, len, plain = plain_string(c->s, c->end);
        int col;
        if (plain) {
            col = match_column(r, c->s + 1, plain - 2);
            c->s += plain;
        } else {
            if ((rc = parse_string(c, &off, &len))) return rc;
            col = match_column(r, c->arena.p + off, len);
        }
        skip_ws(c);
        if (c->s >= c->end || *c->s != ':') return FALLBACK;
        c->s++;
        skip_ws(c);
        if (col >= 0) {
            Col *cc = &r->cols[col];
            if (cc->seen) return FALLBACK;  /* a duplicate key: orjson keeps the last value */
            cc->seen = 1;
            if ((rc = value_into(r, cc))) return rc;
        } else {
            r->out = NULL;
            if ((rc = canon(r, 1))) return rc;
        }
        skip_ws(c);
        if (c->s >= c->end) return FALLBACK;
        if (*c->s == ',') { c->s++; continue; }
        if (*c->s == '}') { c->s++; break; }
        return FALLBACK;
    }
    if (c->s != c->end) return FALLBACK;
    for (Py_ssize_t i = 0; i < r->ncols; i++)
        if (!r->cols[i].seen && (rc = put_null(&r->cols[i]))) return rc;
    return OK;
}

/* Undo a line's partial values: every column back to ``rows`` rows. */
static void rollback(Reader *r, int64_t rows) {
    for (Py_ssize_t i = 0; i < r->ncols; i++) {
        Col *col = &r->cols[i];
        int64_t nulls = 0;
        if (col->valid.n > (size_t)rows)
            for (size_t k = (size_t)rows; k < col->valid.n; k++) nulls += !col->valid.p[k];
        col->nulls -= nulls;
        col->valid.n = (size_t)rows;
        switch (col->kind) {
        case K_STRING: case K_JSON:
            col->offs.n = (size_t)(rows + 1) * 4;
            col->data.n = (size_t)((int32_t *)col->offs.p)[rows];
            break;
        case K_FLOAT: col->vals.n = (size_t)rows * 4; break;
        case K_OTHER: break;
        default: col->vals.n = (size_t)rows * 8;
        }
    }
}

static PyObject *bytes_of(Buf *b) { return PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)b->n); }

static PyObject *bitmap_of(Col *col, int64_t rows) {
    if (col->nulls == 0) Py_RETURN_NONE;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((rows + 7) / 8));
    if (!out) return NULL;
    unsigned char *bits = (unsigned char *)PyBytes_AS_STRING(out);
    memset(bits, 0, (size_t)((rows + 7) / 8));
    for (int64_t i = 0; i < rows; i++) if (col->valid.p[i]) bits[i >> 3] |= (unsigned char)(1u << (i & 7));
    return out;
}

static PyObject *column_of(Col *col, int64_t rows) {
    PyObject *bitmap = bitmap_of(col, rows);
    if (!bitmap) return NULL;
    switch (col->kind) {
    case K_STRING: case K_JSON:
        return Py_BuildValue("(LNNN)", (long long)col->nulls, bitmap, bytes_of(&col->offs), bytes_of(&col->data));
    case K_OTHER:
        Py_DECREF(bitmap);
        return Py_BuildValue("(LOO)", (long long)rows, Py_None, Py_None);
    default:
        return Py_BuildValue("(LNN)", (long long)col->nulls, bitmap, bytes_of(&col->vals));
    }
}

/* read(data, pos, limit, line, need, columns) -> (pos, line, rows, line numbers, columns, fallbacks)
 *
 * Reads the lines of data[pos:limit] (limit: just past a '\n', or the end of the input) until the
 * rows read plus the lines left to row_parser reach ``need``. Lines end at "\n", "\r\n" or "\r" (as
 * io.TextIOWrapper(newline="") splits them); ``line`` is the number of the first. ``columns``: the
 * signature as (name bytes, kind) pairs. Each column: (null count, validity bitmap or None, offsets
 * int32 + data) for strings and JSON text, (null count, validity, values) for int64, float64,
 * float32 and time columns (microseconds); K_OTHER columns are all null. Fallbacks: (row position,
 * line number, start, end, next) of each line row_parser must read, start and end without the line
 * end, ``next`` where the following line starts. */
static PyObject *read_lines(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, limit, need;
    long long line;
    PyObject *columns;
    if (!PyArg_ParseTuple(args, "y*nnLnO!", &view, &pos, &limit, &line, &need, &PyTuple_Type, &columns)) return NULL;
    PyObject *result = NULL, *fallbacks = NULL, *cols_out = NULL;
    Reader r;
    memset(&r, 0, sizeof r);
    Buf lines = {0};
    r.ncols = PyTuple_GET_SIZE(columns);
    r.cols = PyMem_Calloc((size_t)r.ncols + 1, sizeof(Col));
    if (!r.cols) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < r.ncols; i++) {
        PyObject *item = PyTuple_GET_ITEM(columns, i);
        char *name; Py_ssize_t n; int kind;
        if (!PyArg_ParseTuple(item, "y#i", &name, &n, &kind)) goto done;
        r.cols[i].name = name; r.cols[i].name_len = n; r.cols[i].kind = kind;
        if (kind == K_STRING || kind == K_JSON) { int32_t z = 0; if (buf_put(&r.cols[i].offs, &z, 4)) goto done; }
    }
    if (limit > view.len || pos < 0 || pos > limit) { PyErr_SetString(PyExc_ValueError, "read: bad range"); goto done; }
    fallbacks = PyList_New(0);
    if (!fallbacks) goto done;
    const char *base = (const char *)view.buf;
    int64_t rows = 0, nfb = 0;
    while (pos < limit && rows + nfb < need) {
        const char *ls = base + pos, *lim = base + limit;
        const char *nl = memchr(ls, '\n', (size_t)(lim - ls));
        const char *le = nl ? nl : lim;
        const char *cr = memchr(ls, '\r', (size_t)(le - ls));
        Py_ssize_t next;
        if (cr) { le = cr; next = (cr + 1 < lim && cr[1] == '\n') ? cr + 2 - base : cr + 1 - base; }
        else next = nl ? nl + 1 - base : limit;
        const char *s = ls, *e = le;
        while (s < e && is_pyspace((unsigned char)*s)) s++;
        while (e > s && is_pyspace((unsigned char)e[-1])) e--;
        if (s < e) {
            int rc = (*s == '{' && e[-1] == '}') ? read_object(&r, s, e) : FALLBACK;
            if (rc == ERR) goto done;
            if (rc == OK) {
                if (buf_put(&lines, &line, 8)) goto done;
                rows++;
            } else {
                rollback(&r, rows);
                PyObject *fb = Py_BuildValue("(LLnnn)", (long long)rows, line, (Py_ssize_t)(ls - base),
                                             (Py_ssize_t)(le - base), next);
                if (!fb) goto done;
                int bad = PyList_Append(fallbacks, fb);
                Py_DECREF(fb);
                if (bad) goto done;
                nfb++;
            }
        }
        line++;
        pos = next;
    }
    cols_out = PyTuple_New(r.ncols);
    if (!cols_out) goto done;
    for (Py_ssize_t i = 0; i < r.ncols; i++) {
        PyObject *col = column_of(&r.cols[i], rows);
        if (!col) goto done;
        PyTuple_SET_ITEM(cols_out, i, col);
    }
    result = Py_BuildValue("(nLLNON)", pos, line, (long long)rows, bytes_of(&lines), cols_out, fallbacks);
    cols_out = NULL;
    fallbacks = NULL;
done:
    Py_XDECREF(cols_out);
    Py_XDECREF(fallbacks);
    if (r.cols) {
        for (Py_ssize_t i = 0; i < r.ncols; i++) {
            buf_free(&r.cols[i].valid); buf_free(&r.cols[i].vals); buf_free(&r.cols[i].offs); buf_free(&r.cols[i].data);
        }
        PyMem_Free(r.cols);
    }
    PyMem_Free(r.keys);
    buf_free(&r.c.arena);
    buf_free(&lines);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef METHODS[] = {
    {"read", read_lines, METH_VARARGS, "Read JSON lines into Arrow buffers per column (see json_lines_reader)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_json_lines", NULL, -1, METHODS};

PyMODINIT_FUNC PyInit__json_lines(void) { return PyModule_Create(&MODULE); }

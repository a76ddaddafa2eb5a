/* Reading and printing JSON strings and numbers for the compiled nested split: strings unescaped
 * as json.loads does (surrogate pairs joined; a lone surrogate, a raw control character or invalid
 * UTF-8 sends the document to the Python path), numbers typed LONG or DOUBLE by strata's rule,
 * and the compact text json.dumps(separators=(",", ":"), ensure_ascii=False) prints. */
#include "_nested_split.h"

static inline int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}
static int read_hex4(Ctx *c, uint32_t *out) {
    if (c->end - c->s < 4) return FALLBACK;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(c->s[i]);
        if (h < 0) return FALLBACK;
        v = v << 4 | (uint32_t)h;
    }
    c->s += 4;
    *out = v;
    return OK;
}
static int put_utf8(Buf *b, uint32_t cp) {
    char t[4]; size_t n;
    if (cp < 0x80) { t[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { t[0] = (char)(0xC0 | cp >> 6); t[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) { t[0] = (char)(0xE0 | cp >> 12); t[1] = (char)(0x80 | (cp >> 6 & 0x3F)); t[2] = (char)(0x80 | (cp & 0x3F)); n = 3; }
    else { t[0] = (char)(0xF0 | cp >> 18); t[1] = (char)(0x80 | (cp >> 12 & 0x3F)); t[2] = (char)(0x80 | (cp >> 6 & 0x3F)); t[3] = (char)(0x80 | (cp & 0x3F)); n = 4; }
    return buf_put(b, t, n) ? ERR : OK;
}

/* Length of a valid UTF-8 sequence at p (no overlongs, no surrogates), 0 if invalid. */
static inline int utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned char b = p[0];
    if (b >= 0xC2 && b <= 0xDF) return (end - p >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    if (b >= 0xE0 && b <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (b == 0xE0 && p[1] < 0xA0) return 0;
        if (b == 0xED && p[1] >= 0xA0) return 0;
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        if (b == 0xF0 && p[1] < 0x90) return 0;
        if (b == 0xF4 && p[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

/* A string (at the opening quote), unescaped into the arena: its offset and length there. */
int parse_string(Ctx *c, size_t *off, size_t *len) {
    c->s++;
    *off = c->arena.n;
    for (;;) {
        const char *start = c->s;
        while (c->s < c->end) {
            unsigned char ch = (unsigned char)*c->s;
            if (ch == '"' || ch == '\\' || ch < 0x20) break;
            if (ch >= 0x80) {
                int n = utf8_len((const unsigned char *)c->s, (const unsigned char *)c->end);
                if (!n) return FALLBACK;
                c->s += n;
            } else {
                c->s++;
            }
        }
        if (c->s > start && buf_put(&c->arena, start, (size_t)(c->s - start))) return ERR;
        if (c->s >= c->end) return FALLBACK;
        char ch = *c->s;
        if (ch == '"') { c->s++; break; }
        if (ch != '\\') return FALLBACK;  /* a raw control character */
        c->s++;
        if (c->s >= c->end) return FALLBACK;
        char e = *c->s++;
        char lit;
        switch (e) {
        case '"': lit = '"'; break;
        case '\\': lit = '\\'; break;
        case '/': lit = '/'; break;
        case 'b': lit = '\b'; break;
        case 'f': lit = '\f'; break;
        case 'n': lit = '\n'; break;
        case 'r': lit = '\r'; break;
        case 't': lit = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (read_hex4(c, &cp)) return FALLBACK;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return FALLBACK;  /* a lone low surrogate */
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (c->end - c->s < 6 || c->s[0] != '\\' || c->s[1] != 'u') return FALLBACK;
                c->s += 2;
                if (read_hex4(c, &lo) || lo < 0xDC00 || lo > 0xDFFF) return FALLBACK;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (put_utf8(&c->arena, cp)) return ERR;
            continue;
        }
        default: return FALLBACK;
        }
        if (buf_byte(&c->arena, lit)) return ERR;
    }
    *len = c->arena.n - *off;
    return OK;
}

/* Whether a double's text (digits from ``q``, the point at ``point``, ending at ``end``; no exponent)
 * is what repr() prints for it: at most 15 significant digits (so no shorter text reads back as the
 * same double) and no trailing zeros in the fraction but a single one (``1.0``). The value is
 * known to be 0 or within [1e-4, 1e16), where repr uses this fixed-point form. */
static int double_text_is_repr(const char *q, const char *point, const char *end) {
    if (point >= end || *point != '.') return 0;  /* an exponent */
    const char *frac = point + 1;
    if (end - frac > 1 && end[-1] == '0') return 0;
    for (const char *x = frac; x < end; x++) if (*x < '0' || *x > '9') return 0;
    int sig = 0, started = 0;
    for (const char *x = q; x < end; x++) {
        if (*x == '.') continue;
        if (*x != '0') started = 1;
        if (started) sig++;
    }
    return sig <= 15;
}

/* A number: LONG (no fraction, no exponent, within 64 bits) or DOUBLE (0, or 1e-4 <= |v| < 1e16,
 * the doubles Python and orjson print alike). Anything else goes to the Python path. */
int parse_number(Ctx *c, uint8_t *label, int64_t *l, double *d) {
    const char *start = c->s, *p = c->s;
    int neg = 0, is_double = 0, nonzero = 0;
    if (p < c->end && *p == '-') { neg = 1; p++; }
    if (p >= c->end) return FALLBACK;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') { while (p < c->end && *p >= '0' && *p <= '9') { nonzero = 1; p++; } }
    else return FALLBACK;
    const char *int_end = p;
    if (p < c->end && *p == '.') {
        is_double = 1; p++;
        if (p >= c->end || *p < '0' || *p > '9') return FALLBACK;
        while (p < c->end && *p >= '0' && *p <= '9') { if (*p != '0') nonzero = 1; p++; }
    }
    if (p < c->end && (*p == 'e' || *p == 'E')) {
        is_double = 1; p++;
        if (p < c->end && (*p == '+' || *p == '-')) p++;
        if (p >= c->end || *p < '0' || *p > '9') return FALLBACK;
        while (p < c->end && *p >= '0' && *p <= '9') p++;
    }
    size_t n = (size_t)(p - start);
    if (n > 64) return FALLBACK;
    c->s = p;
    c->num_plain = 0;
    if (!is_double) {
        c->num_plain = !(neg && int_end - start == 2 && start[1] == '0');  /* "-0" prints as 0 */
        const char *q = start + neg;
        size_t digits = (size_t)(int_end - q);
        if (digits > 19) return FALLBACK;
        uint64_t v = 0;
        for (; q < int_end; q++) v = v * 10 + (uint64_t)(*q - '0');
        if (digits == 19 && (int_end - start - neg) == 19) {
            /* 19 digits fit in uint64; compare with the bounds */
            if (!neg && v > (uint64_t)INT64_MAX) return FALLBACK;
            if (neg && v > (uint64_t)INT64_MAX + 1) return FALLBACK;
        }
        *l = neg ? (int64_t)(0 - v) : (int64_t)v;
        *label = L_LONG;
        return OK;
    }
    char tmp[80];
    memcpy(tmp, start, n);
    tmp[n] = 0;
    char *endp = NULL;
    double v = PyOS_string_to_double(tmp, &endp, NULL);
    if (v == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return FALLBACK; }
    if (endp != tmp + n) return FALLBACK;
    double a = v < 0 ? -v : v;
    if (v == 0) { if (nonzero) return FALLBACK; }  /* an underflow to zero */
    else if (!(a >= 1e-4 && a < 1e16)) return FALLBACK;
    *d = v;
    *label = L_DOUBLE;
    c->num_plain = double_text_is_repr(start + neg, int_end, p);
    return OK;
}


/* json.dumps(ensure_ascii=False) string escapes (orjson prints the same). */
int put_escaped(Buf *b, const char *s, size_t n) {
    if (buf_byte(b, '"')) return ERR;
    size_t i = 0, run = 0;
    for (; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        if (i > run && buf_put(b, s + run, i - run)) return ERR;
        run = i + 1;
        char esc[7];
        size_t en = 2;
        esc[0] = '\\';
        switch (ch) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            en = 6;
        }
        if (buf_put(b, esc, en)) return ERR;
    }
    if (n > run && buf_put(b, s + run, n - run)) return ERR;
    return buf_byte(b, '"') ? ERR : OK;
}

int put_double(Buf *b, double d) {
    char *r = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (!r) return ERR;
    int rc = buf_put(b, r, strlen(r)) ? ERR : OK;
    PyMem_Free(r);
    return rc;
}
int put_long(Buf *b, int64_t v) {
    char t[24];
    int n = snprintf(t, sizeof t, "%lld", (long long)v);
    return buf_put(b, t, (size_t)n) ? ERR : OK;
}

/* Canonical mode: the compact text of the value at c->s (the document already passed the split). */
int canon_value(Ctx *c) {
    Buf *o = c->out;
    skip_ws(c);
    if (c->s >= c->end) return FALLBACK;
    char ch = *c->s;
    int rc;
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        c->s++;
        if (buf_byte(o, ch)) return ERR;
        skip_ws(c);
        if (c->s < c->end && *c->s == close) { c->s++; return buf_byte(o, close) ? ERR : OK; }
        for (;;) {
            skip_ws(c);
            if (ch == '{') {
                size_t off, len;
                if (c->s >= c->end || *c->s != '"') return FALLBACK;
                c->arena.n = 0;
                if ((rc = parse_string(c, &off, &len))) return rc;
                if (put_escaped(o, c->arena.p + off, len) || buf_byte(o, ':')) return ERR;
                skip_ws(c);
                if (c->s >= c->end || *c->s != ':') return FALLBACK;
                c->s++;
            }
            if ((rc = canon_value(c))) return rc;
            skip_ws(c);
            if (c->s >= c->end) return FALLBACK;
            if (*c->s == ',') { c->s++; if (buf_byte(o, ',')) return ERR; continue; }
            if (*c->s == close) { c->s++; return buf_byte(o, close) ? ERR : OK; }
            return FALLBACK;
        }
    }
    if (ch == '"') {
        size_t off, len;
        c->arena.n = 0;
        if ((rc = parse_string(c, &off, &len))) return rc;
        return put_escaped(o, c->arena.p + off, len);
    }
    if (match_lit(c, "true", 4)) return buf_put(o, "true", 4) ? ERR : OK;
    if (match_lit(c, "false", 5)) return buf_put(o, "false", 5) ? ERR : OK;
    if (match_lit(c, "null", 4)) return buf_put(o, "null", 4) ? ERR : OK;
    uint8_t label; int64_t l; double d;
    const char *start = c->s;
    if ((rc = parse_number(c, &label, &l, &d))) return rc;
    if (c->num_plain) return buf_put(o, start, (size_t)(c->s - start)) ? ERR : OK;
    return label == L_LONG ? put_long(o, l) : put_double(o, d);
}

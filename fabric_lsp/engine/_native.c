/* fabric_lsp.engine._native: an optional C accelerator for the lexical tokenizer's
 * hottest step (fabric_lsp/engine/memory/tokenize.py, `unique_terms_utf8`).
 *
 * pieces(data: bytes) -> (set[str], set[bytes])
 *
 * `data` is UTF-8 text (surrogates passed). A piece is a maximal run of bytes that are
 * ASCII letters, digits or `_`, or non-ASCII (>= 0x80); every other ASCII byte separates
 * pieces. Returns the distinct pure-ASCII pieces lowercased, as str (they are whole
 * tokens), and the distinct pieces holding a non-ASCII byte, unchanged, as bytes (the
 * caller tokenizes those with NFKC and the Unicode word scan). This is exactly what
 * `data.translate(_MIXED_TABLE).split()` splits into, deduplicated, with the ASCII pieces
 * lowercased (tests/engine/memory/test_native_tokens.py checks it against the Python code).
 *
 * The point is to make no Python object for a repeated piece: each piece is hashed and
 * looked up in a private open-addressing table over the input bytes, and only distinct
 * pieces become objects. The scan runs without the GIL.
 *
 * index_text(data, postings, base, pack) -> int: one hot record's ASCII text counted the
 * same way and added to a hot index's postings (`HotIndex.add`, search.py); -1 for text
 * with a non-ASCII piece, which the Python path indexes.
 *
 * intern_terms(...): a cold session's vocabulary into the cold term table
 * (`ColdTermTable.add`, memory/cold_index.py), the same ids, names and postings.
 *
 * hot_record(...): one plain-shaped record into a `HotRecords`' columns
 * (`HotRecords.append`, memory/records.py); False (nothing changed) for another shape.
 *
 * gather_u32(values, at): values[at[i]] of two uint32 arrays (a team push's posting
 * columns, team/copy_rows.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 0: separator (ASCII, not a word byte); 1: ASCII word byte; 2: non-ASCII byte */
static unsigned char byte_kind[256];
static unsigned char ascii_lower[256];
static PyObject *append_name; /* "append", interned at import */
static PyObject *copy_name;   /* "__copy__", interned at import */

typedef struct {
    uint64_t hash;
    uint64_t head; /* the first (up to) 8 bytes: most pieces compare without reading ptr */
    const unsigned char *ptr; /* NULL: empty slot */
    Py_ssize_t len;
} Slot;

typedef struct {
    Slot *slots;
    size_t mask;
    size_t used;
} Table;

static int table_init(Table *t, size_t capacity) {
    t->slots = (Slot *)calloc(capacity, sizeof(Slot));
    if (t->slots == NULL) return -1;
    t->mask = capacity - 1;
    t->used = 0;
    return 0;
}

static int table_grow(Table *t) {
    size_t old_capacity = t->mask + 1, capacity = old_capacity * 2;
    Slot *old = t->slots;
    Slot *slots = (Slot *)calloc(capacity, sizeof(Slot));
    if (slots == NULL) return -1;
    for (size_t i = 0; i < old_capacity; i++) {
        if (old[i].ptr == NULL) continue;
        size_t j = (size_t)old[i].hash & (capacity - 1);
        while (slots[j].ptr != NULL) j = (j + 1) & (capacity - 1);
        slots[j] = old[i];
    }
    free(old);
    t->slots = slots;
    t->mask = capacity - 1;
    return 0;
}

/* Adds the piece unless present; -1 when out of memory. */
static int table_add(Table *t, const unsigned char *ptr, Py_ssize_t len, uint64_t hash, uint64_t head) {
    size_t j = (size_t)hash & t->mask;
    for (;;) {
        Slot *s = &t->slots[j];
        if (s->ptr == NULL) break;
        if (s->hash == hash && s->len == len && s->head == head
            && (len <= 8 || memcmp(s->ptr + 8, ptr + 8, (size_t)(len - 8)) == 0))
            return 0;
        j = (j + 1) & t->mask;
    }
    t->slots[j].hash = hash;
    t->slots[j].head = head;
    t->slots[j].ptr = ptr;
    t->slots[j].len = len;
    t->used++;
    if (t->used * 2 > t->mask + 1) return table_grow(t);
    return 0;
}

/* The final mix of a piece's hash, so the low bits (the table index) depend on every byte. */
static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* FNV-1a, 64-bit, mixed: the hash of a piece with a non-ASCII byte (they are few). */
static inline uint64_t piece_hash(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return mix64(h);
}

/* The first (up to) 8 bytes of a piece, little-endian, zero-padded. */
static inline uint64_t piece_head(const unsigned char *p, Py_ssize_t n) {
    uint64_t w = 0;
    for (Py_ssize_t i = 0; i < n && i < 8; i++) w |= (uint64_t)p[i] << (8 * i);
    return w;
}


/* One piece of the text: lowercased ASCII ones are written to `lower` (same offsets as
 * `data`) and hashed as they are read, eight bytes per step; a piece with a non-ASCII byte
 * is referenced in `data` itself and hashed again from it (they are few). */
typedef struct {
    const unsigned char *ptr;
    Py_ssize_t len;
    uint64_t hash;
    uint64_t head;
    int mixed;
} Piece;

/* The next piece of `data` from `*at` into `p` (0 when none is left); `*at` moves past it. */
static inline int next_piece(const unsigned char *data, Py_ssize_t n, Py_ssize_t *at, unsigned char *lower, Piece *p) {
    Py_ssize_t i = *at;
    while (i < n && byte_kind[data[i]] == 0) i++;
    if (i >= n) {
        *at = i;
        return 0;
    }
    Py_ssize_t start = i;
    unsigned char seen = 0;
    uint64_t h = 0x9e3779b97f4a7c15ULL, word = 0, head = 0;
    unsigned shift = 0, full = 0;
    while (i < n) {
        unsigned char b = data[i], k = byte_kind[b];
        if (k == 0) break;
        seen |= k;
        b = ascii_lower[b];
        lower[i] = b;
        word |= (uint64_t)b << shift;
        shift += 8;
        if (shift == 64) {
            if (!full) {
                head = word;
                full = 1;
            }
            h = (h ^ word) * 0x9fb21c651e98df25ULL;
            h ^= h >> 29;
            word = 0;
            shift = 0;
        }
        i++;
    }
    *at = i;
    p->len = i - start;
    p->mixed = (seen & 2) != 0;
    if (p->mixed) {
        p->ptr = data + start;
        p->hash = piece_hash(p->ptr, p->len);
        p->head = piece_head(p->ptr, p->len);
    } else {
        p->ptr = lower + start;
        p->hash = mix64((h ^ word) * 0x9fb21c651e98df25ULL ^ (uint64_t)p->len);
        p->head = full ? head : word;
    }
    return 1;
}

/* The scan of `pieces`: each distinct piece once, by kind. */
static int scan(const unsigned char *data, Py_ssize_t n, unsigned char *lower, Table *words, Table *mixed) {
    Py_ssize_t at = 0;
    Piece p;
    while (next_piece(data, n, &at, lower, &p)) {
        if (table_add(p.mixed ? mixed : words, p.ptr, p.len, p.hash, p.head) < 0) return -1;
    }
    return 0;
}

static PyObject *native_pieces(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *data = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    unsigned char *lower = (unsigned char *)malloc(n > 0 ? (size_t)n : 1);
    Table words = {0}, mixed = {0};
    PyObject *word_set = NULL, *mixed_set = NULL, *result = NULL;
    int failed = 0;
    if (lower == NULL || table_init(&words, 1024) < 0 || table_init(&mixed, 64) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    failed = scan(data, n, lower, &words, &mixed);
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    word_set = PySet_New(NULL);
    mixed_set = PySet_New(NULL);
    if (word_set == NULL || mixed_set == NULL) goto done;
    for (size_t j = 0; j <= words.mask; j++) {
        Slot *s = &words.slots[j];
        if (s->ptr == NULL) continue;
        PyObject *word = PyUnicode_New(s->len, 127);
        if (word == NULL) goto done;
        memcpy(PyUnicode_1BYTE_DATA(word), s->ptr, (size_t)s->len);
        int rc = PySet_Add(word_set, word);
        Py_DECREF(word);
        if (rc < 0) goto done;
    }
    for (size_t j = 0; j <= mixed.mask; j++) {
        Slot *s = &mixed.slots[j];
        if (s->ptr == NULL) continue;
        PyObject *piece = PyBytes_FromStringAndSize((const char *)s->ptr, s->len);
        if (piece == NULL) goto done;
        int rc = PySet_Add(mixed_set, piece);
        Py_DECREF(piece);
        if (rc < 0) goto done;
    }
    result = PyTuple_Pack(2, word_set, mixed_set);
done:
    Py_XDECREF(word_set);
    Py_XDECREF(mixed_set);
    free(words.slots);
    free(mixed.slots);
    free(lower);
    PyBuffer_Release(&view);
    return result;
}

/* ---- index_text, add_counts: one record's terms straight into a hot index's postings ----
 *
 * index_text(data: bytes, postings: dict, base: int, pack) -> int | dict
 *
 * Counts the pieces of `data` (as `pieces` splits them) in first-seen order. When every
 * piece is ASCII (each one a whole lowercased token), adds each term t with count tf to
 * `postings` as `HotIndex.add` does (`add_posting` below) and returns the number of
 * tokens. Otherwise it changes nothing and returns the piece counts as a dict in
 * first-seen order: a lowercased ASCII piece as str, a piece with a non-ASCII byte as
 * bytes (the caller tokenizes those with NFKC, then calls add_counts).
 *
 * add_counts(postings: dict, counts: dict, base: int, pack) -> None: every (term, tf) of
 * `counts`, in its order, added to `postings` the same way.
 *
 * A term's postings: absent -> the int `base | tf`; an int -> [old, new]; a list -> the
 * new value appended, and the list replaced by `pack(list)` once it holds 64; anything
 * else (the packed array) -> `.append(new)`. */

typedef struct {
    const unsigned char *ptr;
    Py_ssize_t len;
    uint64_t hash;
    uint64_t head;
    Py_ssize_t count;
    int mixed;
} Term;

typedef struct {
    int32_t *cells; /* -1: empty; else an index into terms */
    size_t mask;
    Term *terms;
    size_t used, cap;
} Counts;

static int counts_init(Counts *c, size_t capacity) {
    c->cells = (int32_t *)malloc(capacity * sizeof(int32_t));
    c->terms = (Term *)malloc((capacity / 2) * sizeof(Term));
    if (c->cells == NULL || c->terms == NULL) return -1;
    memset(c->cells, 0xff, capacity * sizeof(int32_t));
    c->mask = capacity - 1;
    c->used = 0;
    c->cap = capacity / 2;
    return 0;
}

static int counts_grow(Counts *c) {
    size_t capacity = (c->mask + 1) * 2;
    int32_t *cells = (int32_t *)malloc(capacity * sizeof(int32_t));
    Term *terms = (Term *)realloc(c->terms, (capacity / 2) * sizeof(Term));
    if (terms != NULL) c->terms = terms;
    if (cells == NULL || terms == NULL) {
        free(cells);
        return -1;
    }
    memset(cells, 0xff, capacity * sizeof(int32_t));
    for (size_t t = 0; t < c->used; t++) {
        size_t j = (size_t)terms[t].hash & (capacity - 1);
        while (cells[j] >= 0) j = (j + 1) & (capacity - 1);
        cells[j] = (int32_t)t;
    }
    free(c->cells);
    c->cells = cells;
    c->mask = capacity - 1;
    c->cap = capacity / 2;
    return 0;
}

/* An ASCII piece and a piece with a non-ASCII byte never hold the same bytes, so both
 * kinds share the table (each kind always hashed its own way). */
static int counts_add(Counts *c, const unsigned char *ptr, Py_ssize_t len, uint64_t hash, uint64_t head, int mixed) {
    size_t j = (size_t)hash & c->mask;
    for (;;) {
        int32_t t = c->cells[j];
        if (t < 0) break;
        Term *e = &c->terms[t];
        if (e->hash == hash && e->len == len && e->head == head
            && (len <= 8 || memcmp(e->ptr + 8, ptr + 8, (size_t)(len - 8)) == 0)) {
            e->count++;
            return 0;
        }
        j = (j + 1) & c->mask;
    }
    if (c->used >= (size_t)INT32_MAX) return -1;
    c->cells[j] = (int32_t)c->used;
    Term *e = &c->terms[c->used++];
    e->ptr = ptr;
    e->len = len;
    e->hash = hash;
    e->head = head;
    e->count = 1;
    e->mixed = mixed;
    if (c->used >= c->cap) return counts_grow(c);
    return 0;
}

/* `scan`'s pieces and hashes, counted in first-seen order; -1 when out of memory. */
static int count_pieces(const unsigned char *data, Py_ssize_t n, unsigned char *lower, Counts *c, Py_ssize_t *tokens,
                        int *any_mixed) {
    Py_ssize_t at = 0, total = 0;
    Piece p;
    while (next_piece(data, n, &at, lower, &p)) {
        *any_mixed |= p.mixed;
        if (counts_add(c, p.ptr, p.len, p.hash, p.head, p.mixed) < 0) return -1;
        total++;
    }
    *tokens = total;
    return 0;
}

/* `column.append(value)` (a list, an array); -1 on error, also when `value` is NULL (a
 * failed allocation before the call). */
static int append_to(PyObject *column, PyObject *value) {
    if (value == NULL) return -1;
    PyObject *r = PyObject_CallMethodOneArg(column, append_name, value);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* One term's posting `value` added to `postings` (the rule above); -1 on error. */
static int add_posting(PyObject *postings, PyObject *term, PyObject *value, PyObject *pack) {
    PyObject *plist = PyDict_GetItemWithError(postings, term); /* borrowed */
    if (plist == NULL) {
        if (PyErr_Occurred()) return -1;
        return PyDict_SetItem(postings, term, value);
    }
    if (PyLong_CheckExact(plist)) {
        PyObject *pair = PyList_New(2);
        if (pair == NULL) return -1;
        Py_INCREF(plist);
        PyList_SET_ITEM(pair, 0, plist);
        Py_INCREF(value);
        PyList_SET_ITEM(pair, 1, value);
        int rc = PyDict_SetItem(postings, term, pair);
        Py_DECREF(pair);
        return rc;
    }
    if (PyList_CheckExact(plist)) {
        if (PyList_Append(plist, value) < 0) return -1;
        if (PyList_GET_SIZE(plist) != 64) return 0;
        PyObject *packed = PyObject_CallOneArg(pack, plist);
        if (packed == NULL) return -1;
        int rc = PyDict_SetItem(postings, term, packed);
        Py_DECREF(packed);
        return rc;
    }
    return append_to(plist, value);
}

/* Four arguments, args[dict_at] a dict, args[2] the base; -1 with TypeError else. */
static int parse_index_args(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t dict_at, const char *usage,
                            unsigned long long *base) {
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "%s takes 4 arguments", usage);
        return -1;
    }
    if (!PyDict_CheckExact(args[dict_at])) {
        PyErr_Format(PyExc_TypeError, "%s: postings must be a dict", usage);
        return -1;
    }
    *base = PyLong_AsUnsignedLongLong(args[2]);
    if (*base == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    return 0;
}

static PyObject *native_index_text(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    unsigned long long base;
    if (parse_index_args(args, nargs, 1, "index_text(data, postings, base, pack)", &base) < 0) return NULL;
    PyObject *postings = args[1], *pack = args[3];
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *data = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, tokens = 0;
    unsigned char *lower = (unsigned char *)malloc(n > 0 ? (size_t)n : 1);
    Counts c = {0};
    PyObject *result = NULL, *pieces = NULL;
    int any_mixed = 0;
    if (lower == NULL || counts_init(&c, 256) < 0 || count_pieces(data, n, lower, &c, &tokens, &any_mixed) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (any_mixed) {
        pieces = PyDict_New();
        if (pieces == NULL) goto done;
    }
    for (size_t t = 0; t < c.used; t++) {
        Term *e = &c.terms[t];
        PyObject *term;
        if (e->mixed) {
            term = PyBytes_FromStringAndSize((const char *)e->ptr, e->len);
        } else {
            term = PyUnicode_New(e->len, 127);
            if (term != NULL) memcpy(PyUnicode_1BYTE_DATA(term), e->ptr, (size_t)e->len);
        }
        if (term == NULL) goto done;
        PyObject *value = pieces != NULL ? PyLong_FromSsize_t(e->count)
                                         : PyLong_FromUnsignedLongLong(base | (unsigned long long)e->count);
        int bad = value == NULL
                  || (pieces != NULL ? PyDict_SetItem(pieces, term, value) : add_posting(postings, term, value, pack)) < 0;
        Py_DECREF(term);
        Py_XDECREF(value);
        if (bad) goto done;
    }
    if (pieces != NULL) {
        result = pieces;
        pieces = NULL;
    } else {
        result = PyLong_FromSsize_t(tokens);
    }
done:
    Py_XDECREF(pieces);
    free(c.cells);
    free(c.terms);
    free(lower);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *native_add_counts(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    unsigned long long base;
    if (parse_index_args(args, nargs, 0, "add_counts(postings, counts, base, pack)", &base) < 0) return NULL;
    PyObject *postings = args[0], *counts = args[1], *pack = args[3];
    if (!PyDict_CheckExact(counts)) {
        PyErr_SetString(PyExc_TypeError, "add_counts: counts must be a dict");
        return NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *term, *tf;
    while (PyDict_Next(counts, &pos, &term, &tf)) {
        unsigned long long n = PyLong_AsUnsignedLongLong(tf);
        if (n == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
        PyObject *value = PyLong_FromUnsignedLongLong(base | n);
        if (value == NULL) return NULL;
        int rc = add_posting(postings, term, value, pack);
        Py_DECREF(value);
        if (rc < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* ---- intern_terms: a cold session's vocabulary into the cold term table ----
 *
 * intern_terms(terms: list[str], ids: dict, names: list, postings: list, slot: int,
 *              proto: array) -> bytes
 *
 * `ColdTermTable.add`'s loop (memory/cold_index.py): for each term in order, a term absent
 * from `ids` gets the next id (len(names)): ids[term] = id, names.append(term),
 * postings.append(proto.__copy__()) (`proto` is array('I', [slot])); a present one gets
 * postings[id].append(slot). Returns the terms' ids as native uint32 bytes (the slot's
 * array('I')). A term repeated in `terms` is new only once, as in the Python loop. */
static PyObject *native_intern_terms(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "intern_terms(terms, ids, names, postings, slot, proto) takes 6 arguments");
        return NULL;
    }
    PyObject *terms = args[0], *ids = args[1], *names = args[2], *postings = args[3], *slot = args[4],
             *proto = args[5];
    if (!PyList_CheckExact(terms) || !PyDict_CheckExact(ids) || !PyList_CheckExact(names)
        || !PyList_CheckExact(postings)) {
        PyErr_SetString(PyExc_TypeError, "intern_terms: terms, names and postings must be lists, ids a dict");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(terms);
    uint32_t *out = (uint32_t *)malloc(n > 0 ? (size_t)n * sizeof(uint32_t) : 1);
    if (out == NULL) return PyErr_NoMemory();
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *term = PyList_GET_ITEM(terms, i);
        PyObject *tid = PyDict_GetItemWithError(ids, term); /* borrowed */
        if (tid == NULL) {
            if (PyErr_Occurred()) goto done;
            Py_ssize_t fresh = PyList_GET_SIZE(names);
            if (fresh > (Py_ssize_t)UINT32_MAX) {
                PyErr_SetString(PyExc_OverflowError, "intern_terms: more than 2**32 terms");
                goto done;
            }
            PyObject *id_obj = PyLong_FromSsize_t(fresh);
            if (id_obj == NULL) goto done;
            int bad = PyDict_SetItem(ids, term, id_obj) < 0 || PyList_Append(names, term) < 0;
            Py_DECREF(id_obj);
            if (bad) goto done;
            PyObject *arr = PyObject_CallMethodNoArgs(proto, copy_name);
            if (arr == NULL) goto done;
            bad = PyList_Append(postings, arr) < 0;
            Py_DECREF(arr);
            if (bad) goto done;
            out[i] = (uint32_t)fresh;
        } else {
            Py_ssize_t at = PyLong_AsSsize_t(tid);
            if (at < 0 && PyErr_Occurred()) goto done;
            PyObject *arr = PyList_GetItem(postings, at); /* borrowed; IndexError when out of range */
            if (arr == NULL) goto done;
            if (append_to(arr, slot) < 0) goto done;
            out[i] = (uint32_t)at;
        }
    }
    result = PyBytes_FromStringAndSize((const char *)out, n * (Py_ssize_t)sizeof(uint32_t));
done:
    free(out);
    return result;
}


/* ---- hot_record: one record into a HotRecords' columns (memory/records.py) ----
 *
 * hot_record(rec, base_keys, kind_of, kinds, tbuf, tend, index, line, ts, eid, pid, kind)
 *     -> bool
 *
 * `HotRecords.append` for the plain shape only: `rec` an exact dict of exactly the 13
 * `base_keys` in that order (exact str keys), index and line exact ints in int64, text
 * an exact str, entryId and parentId None or 8 lowercase hex digits, timestamp an exact
 * int in (INT64_MIN, INT64_MAX], and a hashable kind. Then the record's kind code is
 * found in `kind_of` (or added: kind_of[kind] = len(kinds), kinds.append(kind)), its
 * text appended to `tbuf` as UTF-8 with surrogates passed, and tend, index, line, ts,
 * eid, pid, kind each get their value; True. For anything else nothing is touched and
 * False comes back: the Python code handles that record (every other shape, and the id
 * table of other ids). tests/engine/memory/test_hot_records.py checks both agree. */

static int hex_id(PyObject *v, long long *out) {
    if (v == Py_None) {
        *out = -1; /* records.py _NONE_ID */
        return 1;
    }
    if (!PyUnicode_CheckExact(v) || PyUnicode_GET_LENGTH(v) != 8 || PyUnicode_KIND(v) != PyUnicode_1BYTE_KIND)
        return 0;
    const Py_UCS1 *c = PyUnicode_1BYTE_DATA(v);
    long long n = 0;
    for (int i = 0; i < 8; i++) {
        int d;
        if (c[i] >= '0' && c[i] <= '9')
            d = c[i] - '0';
        else if (c[i] >= 'a' && c[i] <= 'f')
            d = c[i] - 'a' + 10;
        else
            return 0;
        n = (n << 4) | d;
    }
    *out = n;
    return 1;
}

static int exact_int64(PyObject *v, long long *out) {
    if (!PyLong_CheckExact(v)) return 0;
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow != 0 || (n == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = n;
    return 1;
}

static int append_owned(PyObject *column, PyObject *value) {
    int rc = append_to(column, value);
    Py_XDECREF(value);
    return rc;
}

static PyObject *native_hot_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError,
                        "hot_record(rec, base_keys, kind_of, kinds, tbuf, tend, index, line, ts, eid, pid, kind) "
                        "takes 12 arguments");
        return NULL;
    }
    PyObject *rec = args[0], *base_keys = args[1], *kind_of = args[2], *kinds = args[3], *tbuf = args[4];
    if (!PyTuple_CheckExact(base_keys) || PyTuple_GET_SIZE(base_keys) != 13 || !PyDict_CheckExact(kind_of)
        || !PyList_CheckExact(kinds) || !PyByteArray_CheckExact(tbuf)) {
        PyErr_SetString(PyExc_TypeError, "hot_record: base_keys a 13-tuple, kind_of a dict, kinds a list, tbuf a bytearray");
        return NULL;
    }
    if (!PyDict_CheckExact(rec) || PyDict_GET_SIZE(rec) != 13) Py_RETURN_FALSE;
    /* the values in key order: sessionFile, sessionId, index, entryId, parentId, type,
     * role, toolName, text, timestamp, isError, truncated, line */
    PyObject *v[13];
    Py_ssize_t at = 0, k = 0;
    PyObject *key, *value;
    while (PyDict_Next(rec, &at, &key, &value)) {
        PyObject *want = PyTuple_GET_ITEM(base_keys, k);
        if (key != want) {
            if (!PyUnicode_CheckExact(key) || !PyUnicode_CheckExact(want) || PyUnicode_Compare(key, want) != 0) {
                if (PyErr_Occurred()) return NULL;
                Py_RETURN_FALSE;
            }
        }
        v[k++] = value;
    }
    long long index_n, line_n, ts_n, eid_n, pid_n;
    if (!exact_int64(v[2], &index_n) || !exact_int64(v[12], &line_n) || !PyUnicode_CheckExact(v[8])
        || !hex_id(v[3], &eid_n) || !hex_id(v[4], &pid_n) || !exact_int64(v[9], &ts_n) || ts_n == LLONG_MIN)
        Py_RETURN_FALSE;
    PyObject *kind_t = PyTuple_Pack(7, v[0], v[1], v[5], v[6], v[7], v[10], v[11]);
    if (kind_t == NULL) return NULL;
    PyObject *code = PyDict_GetItemWithError(kind_of, kind_t); /* borrowed */
    if (code == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(kind_t);
            if (PyErr_ExceptionMatches(PyExc_TypeError)) { /* unhashable: the Python path keeps it whole */
                PyErr_Clear();
                Py_RETURN_FALSE;
            }
            return NULL;
        }
        code = PyLong_FromSsize_t(PyList_GET_SIZE(kinds));
        if (code == NULL || PyDict_SetItem(kind_of, kind_t, code) < 0 || PyList_Append(kinds, kind_t) < 0) {
            Py_XDECREF(code);
            Py_DECREF(kind_t);
            return NULL;
        }
        Py_DECREF(code); /* kind_of holds it */
    }
    Py_INCREF(code);
    Py_DECREF(kind_t);
    /* the text, UTF-8 with lone surrogates passed */
    PyObject *encoded = NULL;
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(v[8], &n);
    if (utf8 == NULL) {
        PyErr_Clear();
        encoded = PyUnicode_AsEncodedString(v[8], "utf-8", "surrogatepass");
        if (encoded == NULL) {
            Py_DECREF(code);
            return NULL;
        }
        utf8 = PyBytes_AS_STRING(encoded);
        n = PyBytes_GET_SIZE(encoded);
    }
    Py_ssize_t old = PyByteArray_GET_SIZE(tbuf);
    if (PyByteArray_Resize(tbuf, old + n) < 0) {
        Py_XDECREF(encoded);
        Py_DECREF(code);
        return NULL;
    }
    memcpy(PyByteArray_AS_STRING(tbuf) + old, utf8, (size_t)n);
    Py_XDECREF(encoded);
    int bad = append_owned(args[5], PyLong_FromSsize_t(old + n)) < 0 || append_to(args[6], v[2]) < 0
              || append_to(args[7], v[12]) < 0 || append_to(args[8], v[9]) < 0
              || append_owned(args[9], PyLong_FromLongLong(eid_n)) < 0
              || append_owned(args[10], PyLong_FromLongLong(pid_n)) < 0 || append_to(args[11], code) < 0;
    Py_DECREF(code);
    if (bad) return NULL;
    Py_RETURN_TRUE;
}

/* ---- gather_u32: values[at[i]] for each i (team/copy_rows.py) ----
 *
 * gather_u32(values, at) -> bytes: `values` and `at` buffers of native uint32 (array('I'));
 * the result holds values[at[0]], values[at[1]], ... as native uint32. IndexError when an
 * `at` is out of range. */
static PyObject *native_gather_u32(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "gather_u32(values, at) takes 2 arguments");
        return NULL;
    }
    Py_buffer values, at;
    if (PyObject_GetBuffer(args[0], &values, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &at, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&values);
        return NULL;
    }
    PyObject *result = NULL;
    if (values.len % 4 != 0 || at.len % 4 != 0) {
        PyErr_SetString(PyExc_ValueError, "gather_u32: buffers of 4-byte items expected");
        goto done;
    }
    Py_ssize_t nvalues = values.len / 4, n = at.len / 4;
    result = PyBytes_FromStringAndSize(NULL, at.len);
    if (result == NULL) goto done;
    uint32_t *out = (uint32_t *)PyBytes_AS_STRING(result);
    const uint32_t *v = (const uint32_t *)values.buf, *a = (const uint32_t *)at.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((Py_ssize_t)a[i] >= nvalues) {
            PyErr_Format(PyExc_IndexError, "gather_u32: position %lu out of %zd values", (unsigned long)a[i], nvalues);
            Py_CLEAR(result);
            goto done;
        }
        out[i] = v[a[i]];
    }
done:
    PyBuffer_Release(&at);
    PyBuffer_Release(&values);
    return result;
}

static PyMethodDef native_methods[] = {
    {"pieces", native_pieces, METH_O,
     "pieces(data) -> (set of lowercased ASCII pieces as str, set of pieces with a non-ASCII byte as bytes)"},
    {"index_text", (PyCFunction)(void (*)(void))native_index_text, METH_FASTCALL,
     "index_text(data, postings, base, pack) -> tokens added, or (nothing changed) the piece counts when a piece is not ASCII"},
    {"add_counts", (PyCFunction)(void (*)(void))native_add_counts, METH_FASTCALL,
     "add_counts(postings, counts, base, pack) -> None"},
    {"intern_terms", (PyCFunction)(void (*)(void))native_intern_terms, METH_FASTCALL,
     "intern_terms(terms, ids, names, postings, slot, proto) -> the terms' ids as uint32 bytes"},
    {"hot_record", (PyCFunction)(void (*)(void))native_hot_record, METH_FASTCALL,
     "hot_record(rec, base_keys, kind_of, kinds, tbuf, tend, index, line, ts, eid, pid, kind) -> appended (True) "
     "or not the plain shape (False, nothing changed)"},
    {"gather_u32", (PyCFunction)(void (*)(void))native_gather_u32, METH_FASTCALL,
     "gather_u32(values, at) -> bytes of values[at[i]] (native uint32 each)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "_native", "Optional C accelerator of the lexical tokenizer.", -1, native_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    for (int b = 0; b < 256; b++) {
        int word = (b >= '0' && b <= '9') || (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || b == '_';
        byte_kind[b] = (unsigned char)(b >= 0x80 ? 2 : (word ? 1 : 0));
        ascii_lower[b] = (unsigned char)((b >= 'A' && b <= 'Z') ? b + 32 : b);
    }
    append_name = PyUnicode_InternFromString("append");
    copy_name = PyUnicode_InternFromString("__copy__");
    if (append_name == NULL || copy_name == NULL) return NULL;
    return PyModule_Create(&native_module);
}

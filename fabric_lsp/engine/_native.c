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
 * postings_builder(), finish_postings(builder): a hot build's postings gathered in C
 * (`HotIndex.building`), and the dict they make.
 *
 * intern_terms(...): a cold session's vocabulary into the cold term table
 * (`ColdTermTable.add`, memory/cold_index.py), the same ids, names and postings.
 *
 * hot_record(...): one plain-shaped record into a `HotRecords`' columns
 * (`HotRecords.append`, memory/records.py); False (nothing changed) for another shape.
 * encode_records(...): a `HotRecords`' records as msgspec encodes their dicts, from the
 * columns (`HotRecords.encoded`, the hot shard's entries).
 *
 * gather_u32(values, at): values[at[i]] of two uint32 arrays (a team push's posting
 * columns, team/copy_rows.py).
 *
 * scan_lines(...): the line scan of a session's common lines (`scan_source`,
 * memory/source.py); js_float(text): msgspec's float hook (memory/json_line.py);
 * count_newlines(data): a buffer's newlines (memory/state_build.py, the one-pass rule);
 * deeper_than(value, limit): the session reader's depth rule (session/reader.py);
 * utf16_len(s): JavaScript's `s.length` (jsstr.py); read_lines(...): a preview's pass-1
 * line loop (compaction/loader.py); iso_ms(value): `parse_date_ms`'s common form (jsstr.py);
 * tool_output(content, max_units): a successful tool result's stub (compaction/loader.py);
 * feed_message(...): normalization of the common messages (compaction/normalize.py);
 * message_facts(...): the facts of the common messages (compaction/facts.py);
 * message_node(...): the three above for one pass-1 node (compaction/scan.py);
 * plain_fields(...), collect_paths(...), args_summary(...): a memory record's fields of a
 * plain message (memory/entry_text.py, memory/entry_fields.py).
 *
 * bm25_add(...), segment_keys(...): a hot query's BM25 scores and its segments' sort keys
 * (memory/search.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* `PyUnicode_CompareWithASCIIString(v, ascii) == 0` for a str `v`: a compact ASCII str (all
   msgspec makes) is compared in place, its length and then its bytes (with `ascii` a
   literal, strlen is folded); any other str the way CPython compares it. */
static inline int ascii_eq(PyObject *v, const char *ascii) {
    if (PyUnicode_IS_COMPACT_ASCII(v)) {
        size_t n = strlen(ascii);
        return (size_t)PyUnicode_GET_LENGTH(v) == n && memcmp(PyUnicode_DATA(v), ascii, n) == 0;
    }
    return PyUnicode_CompareWithASCIIString(v, ascii) == 0;
}

/* 0: separator (ASCII, not a word byte); 1: ASCII word byte; 2: non-ASCII byte */
static unsigned char byte_kind[256];
static unsigned char ascii_lower[256];
static PyObject *append_name; /* "append", interned at import */
static PyObject *copy_name;   /* "__copy__", interned at import */
static PyObject *frombytes_name, *type_key, *id_key, *parent_key; /* "frombytes", "type", "id", "parentId" */
static PyObject *first_name; /* "first" */
static PyObject *k_text;     /* "text" */

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

/* Eight ASCII bytes at a time (SWAR) where a byte's lane is its place in a little-endian
 * word: `next_piece` reads the common run of eight word characters in one step, the same
 * bytes, lowered bytes and hash steps as one at a time. */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define PIECE_SWAR 1
#define LANES(b) (0x0101010101010101ULL * (uint64_t)(b))
/* 0x80 in each lane of `x` (every byte below 0x80) that lies in [lo, hi] (hi below 0x80) */
static inline uint64_t lanes_in(uint64_t x, unsigned lo, unsigned hi) {
    return (x + LANES(0x80 - lo)) & ~(x + LANES(0x7f - hi)) & LANES(0x80);
}
#endif

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
#ifdef PIECE_SWAR
        if (shift == 0 && i + 8 <= n) {
            uint64_t x;
            memcpy(&x, data + i, 8);
            if ((x & LANES(0x80)) == 0) { /* eight ASCII bytes: the word characters among them */
                uint64_t upper = lanes_in(x, 'A', 'Z');
                uint64_t words = lanes_in(x | LANES(0x20), 'a', 'z') | lanes_in(x, '0', '9') | lanes_in(x, '_', '_');
                uint64_t lowered = x | (upper >> 2);
                memcpy(lower + i, &lowered, 8); /* (past the piece: never read as its bytes) */
                seen |= 1;
                if (words == LANES(0x80)) {
                    if (!full) {
                        head = lowered;
                        full = 1;
                    }
                    h = (h ^ lowered) * 0x9fb21c651e98df25ULL;
                    h ^= h >> 29;
                    i += 8;
                    continue;
                }
                /* the piece ends at the first separator among them (the first byte itself:
                   left to the step below) */
                unsigned k = (unsigned)__builtin_ctzll(~words & LANES(0x80)) / 8;
                if (k > 0) {
                    word = lowered & ((1ULL << (8 * k)) - 1);
                    shift = 8 * k;
                    i += k;
                    break;
                }
            }
        }
#endif
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

/* The int32 cells (-1: empty) of an open-addressing table of `capacity` (a power of two)
 * over `used` rows of `row_size` bytes, a row's uint64 hash `hash_at` bytes into it (the
 * term counts here, the postings builder's rows below); NULL when out of memory. */
static int32_t *index_rows(const char *rows, size_t used, size_t row_size, size_t hash_at, size_t capacity) {
    int32_t *cells = (int32_t *)malloc(capacity * sizeof(int32_t));
    if (cells == NULL) return NULL;
    memset(cells, 0xff, capacity * sizeof(int32_t));
    for (size_t r = 0; r < used; r++) {
        uint64_t hash;
        memcpy(&hash, rows + r * row_size + hash_at, sizeof hash);
        size_t j = (size_t)hash & (capacity - 1);
        while (cells[j] >= 0) j = (j + 1) & (capacity - 1);
        cells[j] = (int32_t)r;
    }
    return cells;
}

static int counts_grow(Counts *c) {
    size_t capacity = (c->mask + 1) * 2;
    Term *terms = (Term *)realloc(c->terms, (capacity / 2) * sizeof(Term));
    if (terms == NULL) return -1;
    c->terms = terms;
    int32_t *cells = index_rows((const char *)terms, c->used, sizeof(Term), offsetof(Term, hash), capacity);
    if (cells == NULL) return -1;
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

/* ---- utf8_surrogatepass: a str's UTF-8, lone surrogates passed ----
 *
 * `str.encode("utf-8", "surrogatepass")`: every code point on its own (a surrogate, paired
 * or not, as three bytes). CPython's encoder takes each character of a 2- or 4-byte str
 * one at a time; the texts folded and indexed here are mostly ASCII with a few wider
 * characters (an emoji makes a whole tool output a 4-byte str), so runs of four ASCII
 * characters are copied at once. utf8_surrogatepass(s) -> bytes exposes it to the tests. */

/* bytes enough for any str of `s`'s kind and length */
static Py_ssize_t utf8_room(PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_IS_ASCII(s)) return n;
    int kind = PyUnicode_KIND(s);
    return n * (kind == PyUnicode_1BYTE_KIND ? 2 : kind == PyUnicode_2BYTE_KIND ? 3 : 4);
}

static inline unsigned char *put_code_point(unsigned char *o, Py_UCS4 ch) {
    if (ch < 0x80) {
        *o++ = (unsigned char)ch;
    } else if (ch < 0x800) {
        *o++ = (unsigned char)(0xc0 | (ch >> 6));
        *o++ = (unsigned char)(0x80 | (ch & 0x3f));
    } else if (ch < 0x10000) {
        *o++ = (unsigned char)(0xe0 | (ch >> 12));
        *o++ = (unsigned char)(0x80 | ((ch >> 6) & 0x3f));
        *o++ = (unsigned char)(0x80 | (ch & 0x3f));
    } else {
        *o++ = (unsigned char)(0xf0 | (ch >> 18));
        *o++ = (unsigned char)(0x80 | ((ch >> 12) & 0x3f));
        *o++ = (unsigned char)(0x80 | ((ch >> 6) & 0x3f));
        *o++ = (unsigned char)(0x80 | (ch & 0x3f));
    }
    return o;
}

#define UTF8_WIDE_LOOP(T)                                                                        \
    do {                                                                                         \
        const T *c = (const T *)PyUnicode_DATA(s);                                               \
        while (i < n) {                                                                          \
            if (i + 4 <= n && (c[i] | c[i + 1] | c[i + 2] | c[i + 3]) < 0x80) {                  \
                o[0] = (unsigned char)c[i];                                                      \
                o[1] = (unsigned char)c[i + 1];                                                  \
                o[2] = (unsigned char)c[i + 2];                                                  \
                o[3] = (unsigned char)c[i + 3];                                                  \
                o += 4;                                                                          \
                i += 4;                                                                          \
                continue;                                                                        \
            }                                                                                    \
            o = put_code_point(o, c[i++]);                                                       \
        }                                                                                        \
    } while (0)

/* `s`'s UTF-8 written to `out` (utf8_room(s) bytes of room); returns the bytes written */
static Py_ssize_t utf8_write(PyObject *s, unsigned char *out) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), i = 0;
    unsigned char *o = out;
    if (PyUnicode_IS_ASCII(s)) {
        memcpy(out, PyUnicode_1BYTE_DATA(s), (size_t)n);
        return n;
    }
    switch (PyUnicode_KIND(s)) {
    case PyUnicode_1BYTE_KIND:
        UTF8_WIDE_LOOP(Py_UCS1);
        break;
    case PyUnicode_2BYTE_KIND:
        UTF8_WIDE_LOOP(Py_UCS2);
        break;
    default:
        UTF8_WIDE_LOOP(Py_UCS4);
        break;
    }
    return o - out;
}

/* a new bytes of `s`'s UTF-8 (NULL with an error) */
static PyObject *utf8_bytes(PyObject *s) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, utf8_room(s));
    if (out == NULL) return NULL;
    Py_ssize_t n = utf8_write(s, (unsigned char *)PyBytes_AS_STRING(out));
    if (n != PyBytes_GET_SIZE(out) && _PyBytes_Resize(&out, n) < 0) return NULL;
    return out;
}

static PyObject *native_utf8_surrogatepass(PyObject *self, PyObject *s) {
    (void)self;
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "utf8_surrogatepass(s): s must be a str");
        return NULL;
    }
    return utf8_bytes(s);
}

/* array.array and its `append` descriptor (taken at import): an array column's append is
 * called straight, without a method lookup per value */
static PyObject *array_type, *array_append;

/* `column.append(value)` (a list, an array); -1 on error, also when `value` is NULL (a
 * failed allocation before the call). */
static int append_to(PyObject *column, PyObject *value) {
    if (value == NULL) return -1;
    if ((PyObject *)Py_TYPE(column) == array_type) {
        PyObject *call[2] = {column, value};
        PyObject *r = PyObject_Vectorcall(array_append, call, 2, NULL);
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 0;
    }
    if (PyList_CheckExact(column)) return PyList_Append(column, value);
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

/* ---- postings_builder: a hot build's postings gathered in C (search.py, `HotIndex`) ----
 *
 * postings_builder() -> PostingsBuilder: stands in for a new HotIndex's postings dict
 * while the index is built; `index_text`, `add_counts` and `hot_plain` add to it as they
 * add to the dict (the `add_posting` rule) but make no term str or posting int per
 * occurrence, only one str per distinct term (the first occurrence's).
 * finish_postings(builder) -> dict: the dict those adds and then `compact_postings` make:
 * the terms in first-seen order, a term's postings one int (one posting), a list (2 to 8)
 * or an array('Q') (more); the builder is empty afterwards. (tests: test_hot_plain.py) */

typedef struct {
    uint64_t hash;
    PyObject *term;      /* the first occurrence's str (a reference) */
    Py_ssize_t off, len; /* its UTF-8 bytes (surrogates passed) in the key arena */
    uint64_t first;      /* the first posting */
    uint64_t *more;      /* the others (n - 1 of them) */
    Py_ssize_t n, cap;
} PostingRow;

typedef struct {
    PyObject_HEAD
    int32_t *cells; /* -1: empty; else an index into rows */
    size_t mask;
    PostingRow *rows;
    size_t used, cap;
    char *keys;
    size_t keys_used, keys_cap;
} PostingsBuilder;

static PyTypeObject PostingsBuilderType;

/* The hash of a key's bytes: eight bytes per step (the byte order fixed, so it never
 * depends on the machine). Only ever compared with hashes made by this function. */
static uint64_t key_hash(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL, word = 0;
    unsigned shift = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        word |= (uint64_t)p[i] << shift;
        shift += 8;
        if (shift == 64) {
            h = (h ^ word) * 0x9fb21c651e98df25ULL;
            h ^= h >> 29;
            word = 0;
            shift = 0;
        }
    }
    return mix64((h ^ word) * 0x9fb21c651e98df25ULL ^ (uint64_t)n);
}

static void builder_clear(PostingsBuilder *b) {
    for (size_t r = 0; r < b->used; r++) {
        Py_XDECREF(b->rows[r].term);
        free(b->rows[r].more);
    }
    free(b->cells);
    free(b->rows);
    free(b->keys);
    b->cells = NULL;
    b->rows = NULL;
    b->keys = NULL;
    b->mask = 0;
    b->used = b->cap = b->keys_used = b->keys_cap = 0;
}

static void builder_dealloc(PyObject *self) {
    builder_clear((PostingsBuilder *)self);
    Py_TYPE(self)->tp_free(self);
}

static int builder_grow(PostingsBuilder *b) {
    size_t capacity = b->cells == NULL ? 1024 : (b->mask + 1) * 2;
    PostingRow *rows = (PostingRow *)realloc(b->rows, (capacity / 2) * sizeof(PostingRow));
    if (rows == NULL) return -1;
    b->rows = rows;
    int32_t *cells = index_rows((const char *)rows, b->used, sizeof(PostingRow), offsetof(PostingRow, hash), capacity);
    if (cells == NULL) return -1;
    free(b->cells);
    b->cells = cells;
    b->mask = capacity - 1;
    b->cap = capacity / 2;
    return 0;
}

/* One posting of the term whose UTF-8 bytes are `key`: `term` is its str when the caller
 * has one (borrowed), else one is made from `key` (ASCII) for a new term; -1 on error. */
static int builder_add(PostingsBuilder *b, const unsigned char *key, Py_ssize_t len, PyObject *term,
                       uint64_t posting) {
    if (b->used >= b->cap && (b->used >= (size_t)INT32_MAX || builder_grow(b) < 0)) {
        PyErr_NoMemory();
        return -1;
    }
    uint64_t hash = key_hash(key, len);
    size_t j = (size_t)hash & b->mask;
    for (;;) {
        int32_t r = b->cells[j];
        if (r < 0) break;
        PostingRow *row = &b->rows[r];
        if (row->hash == hash && row->len == len && memcmp(b->keys + row->off, key, (size_t)len) == 0) {
            if (row->n - 1 == row->cap) {
                Py_ssize_t cap = row->cap ? row->cap * 2 : 3;
                uint64_t *more = (uint64_t *)realloc(row->more, (size_t)cap * sizeof(uint64_t));
                if (more == NULL) {
                    PyErr_NoMemory();
                    return -1;
                }
                row->more = more;
                row->cap = cap;
            }
            row->more[row->n - 1] = posting;
            row->n++;
            return 0;
        }
        j = (j + 1) & b->mask;
    }
    if (b->keys_used + (size_t)len > b->keys_cap) {
        size_t cap = b->keys_cap ? b->keys_cap : 16384;
        while (cap < b->keys_used + (size_t)len) cap *= 2;
        char *keys = (char *)realloc(b->keys, cap);
        if (keys == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->keys = keys;
        b->keys_cap = cap;
    }
    if (term != NULL) {
        Py_INCREF(term);
    } else {
        term = PyUnicode_New(len, 127);
        if (term == NULL) return -1;
        memcpy(PyUnicode_1BYTE_DATA(term), key, (size_t)len);
    }
    PostingRow *row = &b->rows[b->used];
    row->hash = hash;
    row->term = term;
    row->off = (Py_ssize_t)b->keys_used;
    row->len = len;
    row->first = posting;
    row->more = NULL;
    row->n = 1;
    row->cap = 0;
    memcpy(b->keys + b->keys_used, key, (size_t)len);
    b->keys_used += (size_t)len;
    b->cells[j] = (int32_t)b->used++;
    return 0;
}

/* A str term's posting (`add_counts`): its UTF-8 bytes are the key; -1 on error. */
static int builder_add_term(PostingsBuilder *b, PyObject *term, uint64_t posting) {
    if (!PyUnicode_Check(term)) {
        PyErr_SetString(PyExc_TypeError, "add_counts: a term is not a str");
        return -1;
    }
    if (PyUnicode_IS_ASCII(term))
        return builder_add(b, PyUnicode_1BYTE_DATA(term), PyUnicode_GET_LENGTH(term), term, posting);
    PyObject *data = utf8_bytes(term);
    if (data == NULL) return -1;
    int rc = builder_add(b, (const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), term, posting);
    Py_DECREF(data);
    return rc;
}

static PyObject *native_postings_builder(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyType_GenericAlloc(&PostingsBuilderType, 0);
}

static PyObject *native_finish_postings(PyObject *self, PyObject *arg) {
    (void)self;
    if (Py_TYPE(arg) != &PostingsBuilderType) {
        PyErr_SetString(PyExc_TypeError, "finish_postings(builder): not a postings_builder()");
        return NULL;
    }
    PostingsBuilder *b = (PostingsBuilder *)arg;
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    for (size_t r = 0; r < b->used; r++) {
        PostingRow *row = &b->rows[r];
        PyObject *value;
        if (row->n == 1) {
            value = PyLong_FromUnsignedLongLong(row->first);
        } else if (row->n <= 8) {
            value = PyList_New(row->n);
            for (Py_ssize_t k = 0; value != NULL && k < row->n; k++) {
                PyObject *v = PyLong_FromUnsignedLongLong(k ? row->more[k - 1] : row->first);
                if (v == NULL) Py_CLEAR(value);
                else PyList_SET_ITEM(value, k, v);
            }
        } else {
            PyObject *raw = PyBytes_FromStringAndSize(NULL, row->n * 8);
            if (raw != NULL) {
                char *to = PyBytes_AS_STRING(raw);
                memcpy(to, &row->first, 8);
                memcpy(to + 8, row->more, (size_t)(row->n - 1) * 8);
            }
            value = raw == NULL ? NULL : PyObject_CallFunction(array_type, "sO", "Q", raw);
            Py_XDECREF(raw);
        }
        if (value == NULL || PyDict_SetItem(out, row->term, value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(value);
    }
    builder_clear(b);
    return out;
}

static PyTypeObject PostingsBuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fabric_lsp.engine._native.PostingsBuilder",
    .tp_basicsize = sizeof(PostingsBuilder),
    .tp_dealloc = builder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A hot build's postings, gathered in C until finish_postings.",
};

/* Four arguments, args[dict_at] a dict, args[2] the base; -1 with TypeError else. */
static int parse_index_args(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t dict_at, const char *usage,
                            unsigned long long *base) {
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "%s takes 4 arguments", usage);
        return -1;
    }
    if (!PyDict_CheckExact(args[dict_at]) && Py_TYPE(args[dict_at]) != &PostingsBuilderType) {
        PyErr_Format(PyExc_TypeError, "%s: postings must be a dict or a postings_builder()", usage);
        return -1;
    }
    *base = PyLong_AsUnsignedLongLong(args[2]);
    if (*base == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    return 0;
}

/* index_text's work on `n` bytes at `data`: 1 with *tokens (the postings added), 0 with
 * *pieces a new dict of the piece counts (a piece is not ASCII: nothing changed), -1 with an
 * error. */
static int index_bytes(const unsigned char *data, Py_ssize_t n, PyObject *postings, unsigned long long base,
                       PyObject *pack, Py_ssize_t *tokens_out, PyObject **pieces_out) {
    Py_ssize_t tokens = 0;
    unsigned char *lower = (unsigned char *)malloc(n > 0 ? (size_t)n : 1);
    Counts c = {0};
    PyObject *pieces = NULL;
    int any_mixed = 0, rc = -1;
    *pieces_out = NULL;
    if (lower == NULL || counts_init(&c, 256) < 0 || count_pieces(data, n, lower, &c, &tokens, &any_mixed) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (any_mixed) {
        pieces = PyDict_New();
        if (pieces == NULL) goto done;
    }
    if (pieces == NULL && Py_TYPE(postings) == &PostingsBuilderType) {
        for (size_t t = 0; t < c.used; t++) {
            Term *e = &c.terms[t];
            if (builder_add((PostingsBuilder *)postings, e->ptr, e->len, NULL, base | (unsigned long long)e->count) < 0)
                goto done;
        }
        *tokens_out = tokens;
        rc = 1;
        goto done;
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
        *pieces_out = pieces;
        pieces = NULL;
        rc = 0;
    } else {
        *tokens_out = tokens;
        rc = 1;
    }
done:
    Py_XDECREF(pieces);
    free(c.cells);
    free(c.terms);
    free(lower);
    return rc;
}

static PyObject *native_index_text(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    unsigned long long base;
    if (parse_index_args(args, nargs, 1, "index_text(data, postings, base, pack)", &base) < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    Py_ssize_t tokens = 0;
    PyObject *pieces = NULL;
    int r = index_bytes((const unsigned char *)view.buf, view.len, args[1], base, args[3], &tokens, &pieces);
    PyBuffer_Release(&view);
    if (r < 0) return NULL;
    return r ? PyLong_FromSsize_t(tokens) : pieces;
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
    int built = Py_TYPE(postings) == &PostingsBuilderType;
    while (PyDict_Next(counts, &pos, &term, &tf)) {
        unsigned long long n = PyLong_AsUnsignedLongLong(tf);
        if (n == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
        if (built) {
            if (builder_add_term((PostingsBuilder *)postings, term, base | n) < 0) return NULL;
            continue;
        }
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
    /* the prototype's own __copy__, called straight (no method lookup per new term); the
       postings' appends go through append_to (an array's append descriptor) */
    PyObject *copy = PyObject_GetAttr((PyObject *)Py_TYPE(proto), copy_name);
    if (copy == NULL) goto done;
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
            PyObject *arr = PyObject_Vectorcall(copy, &proto, 1, NULL);
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
    Py_XDECREF(copy);
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
 * found in `kind_of` under the kind and its values' types (1, 1.0 and True are one dict
 * key), or added (kind_of[(*kind, *types)] = len(kinds), kinds.append(kind)), its
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

/* hot_record's work on the 13 values `v` (in key order; cols: tend, index, line, ts, eid,
 * pid, kind): 1 appended, with the text at *text_at of tbuf (*text_len bytes); 0 not the
 * plain shape (nothing changed); -1 with an error. */
static int hot_append(PyObject *const *v, PyObject *kind_of, PyObject *kinds, PyObject *tbuf, PyObject *const *cols,
                      Py_ssize_t *text_at, Py_ssize_t *text_len) {
    long long index_n, line_n, ts_n, eid_n, pid_n;
    if (!exact_int64(v[2], &index_n) || !exact_int64(v[12], &line_n) || !PyUnicode_CheckExact(v[8])
        || !hex_id(v[3], &eid_n) || !hex_id(v[4], &pid_n) || !exact_int64(v[9], &ts_n) || ts_n == LLONG_MIN)
        return 0;
    PyObject *kind_t = PyTuple_Pack(7, v[0], v[1], v[5], v[6], v[7], v[10], v[11]);
    if (kind_t == NULL) return -1;
    /* looked up with the values' types (1, 1.0 and True are one dict key) */
    PyObject *tagged = PyTuple_New(14);
    if (tagged == NULL) {
        Py_DECREF(kind_t);
        return -1;
    }
    for (Py_ssize_t i = 0; i < 7; i++) {
        PyObject *value = PyTuple_GET_ITEM(kind_t, i);
        Py_INCREF(value);
        PyTuple_SET_ITEM(tagged, i, value);
        Py_INCREF((PyObject *)Py_TYPE(value));
        PyTuple_SET_ITEM(tagged, 7 + i, (PyObject *)Py_TYPE(value));
    }
    PyObject *code = PyDict_GetItemWithError(kind_of, tagged); /* borrowed */
    if (code == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(tagged);
            Py_DECREF(kind_t);
            if (PyErr_ExceptionMatches(PyExc_TypeError)) { /* unhashable: the Python path keeps it whole */
                PyErr_Clear();
                return 0;
            }
            return -1;
        }
        code = PyLong_FromSsize_t(PyList_GET_SIZE(kinds));
        if (code == NULL || PyDict_SetItem(kind_of, tagged, code) < 0 || PyList_Append(kinds, kind_t) < 0) {
            Py_XDECREF(code);
            Py_DECREF(tagged);
            Py_DECREF(kind_t);
            return -1;
        }
        Py_DECREF(code); /* kind_of holds it */
    }
    Py_INCREF(code);
    Py_DECREF(tagged);
    Py_DECREF(kind_t);
    /* the text (a str: checked above), UTF-8 with lone surrogates passed */
    Py_ssize_t old = PyByteArray_GET_SIZE(tbuf), n;
    if (PyByteArray_Resize(tbuf, old + utf8_room(v[8])) < 0) {
        Py_DECREF(code);
        return -1;
    }
    n = utf8_write(v[8], (unsigned char *)PyByteArray_AS_STRING(tbuf) + old);
    if (PyByteArray_Resize(tbuf, old + n) < 0) {
        Py_DECREF(code);
        return -1;
    }
    int bad = append_owned(cols[0], PyLong_FromSsize_t(old + n)) < 0 || append_to(cols[1], v[2]) < 0
              || append_to(cols[2], v[12]) < 0 || append_to(cols[3], v[9]) < 0
              || append_owned(cols[4], PyLong_FromLongLong(eid_n)) < 0
              || append_owned(cols[5], PyLong_FromLongLong(pid_n)) < 0 || append_to(cols[6], code) < 0;
    Py_DECREF(code);
    if (bad) return -1;
    *text_at = old;
    *text_len = n;
    return 1;
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
    Py_ssize_t text_at, text_len;
    int r = hot_append(v, kind_of, kinds, tbuf, args + 5, &text_at, &text_len);
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
}

/* ---- lineage_walk: a session's active branch from its scanned lines (memory/source.py) ----
 *
 * lineage_walk(ids, parents, node, ordinals, leaf_override) -> (leaf, ids, ordinals, cycle, bits,
 *                                                               count)
 *
 * `lineage_from_lines`' loops for the active branch, over the scan's columns (`ids` and
 * `parents` lists, `node` a bytearray of flags, `ordinals` int64s): the leaf is the id of
 * the last node line (or `leaf_override` when it is a node's id); each str parent id that
 * names a node is replaced in `parents` by that node's own id object (one string per id);
 * the walk goes up from the leaf through the parents until an id names no node, or a node
 * comes again (cycle: True). Returns the branch root first: its ids (a list) and its
 * lines' ordinals (native int64 bytes), and those ordinals as `OrdinalSet`'s bitmap (a
 * bytearray) with how many distinct ones it holds. A later node line with the same id wins, as a dict
 * would have it; an unhashable parent value raises TypeError, as the dict lookup does. */
static PyObject *native_lineage_walk(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1]) || !PyByteArray_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "lineage_walk(ids, parents, node, ordinals, leaf_override): two lists, a bytearray, int64s, a str or None");
        return NULL;
    }
    PyObject *ids = args[0], *parents = args[1], *node = args[2], *leaf_override = args[4];
    Py_ssize_t n = PyByteArray_GET_SIZE(node);
    if (PyList_GET_SIZE(ids) < n || PyList_GET_SIZE(parents) < n) {
        PyErr_SetString(PyExc_ValueError, "lineage_walk: the columns are shorter than the node flags");
        return NULL;
    }
    Py_buffer ord;
    if (PyObject_GetBuffer(args[3], &ord, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *by_id = NULL, *path_ids = NULL, *ords = NULL, *result = NULL, *leaf = Py_None;
    Py_ssize_t *path = NULL, depth = 0;
    unsigned char *seen = NULL;
    int cycle = 0;
    if (ord.len < n * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "lineage_walk: fewer ordinals than lines");
        goto done;
    }
    const unsigned char *flags = (const unsigned char *)PyByteArray_AS_STRING(node);
    by_id = PyDict_New();
    if (by_id == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!flags[i]) continue;
        leaf = PyList_GET_ITEM(ids, i);
        PyObject *at = PyLong_FromSsize_t(i);
        int bad = at == NULL || PyDict_SetItem(by_id, leaf, at) < 0;
        Py_XDECREF(at);
        if (bad) goto done;
    }
    /* a parent id becomes its parent's own id object */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parents); i++) {
        PyObject *parent = PyList_GET_ITEM(parents, i);
        if (!PyUnicode_CheckExact(parent)) continue;
        PyObject *j = PyDict_GetItemWithError(by_id, parent);
        if (j == NULL) {
            if (PyErr_Occurred()) goto done;
            continue;
        }
        Py_ssize_t at = PyLong_AsSsize_t(j);
        PyObject *own = PyList_GET_ITEM(ids, at);
        if (own != parent) {
            Py_INCREF(own);
            PyList_SetItem(parents, i, own); /* (steals own, drops the old parent) */
        }
    }
    if (leaf_override != Py_None) {
        int in = PyDict_Contains(by_id, leaf_override);
        if (in < 0) goto done;
        if (in) leaf = leaf_override;
    }
    Py_INCREF(leaf); /* (held: `leaf` is returned, and `parents` may drop a borrowed one) */
    seen = (unsigned char *)calloc(n > 0 ? (size_t)n : 1, 1);
    path = (Py_ssize_t *)malloc((n > 0 ? (size_t)n : 1) * sizeof(Py_ssize_t));
    if (seen == NULL || path == NULL) {
        PyErr_NoMemory();
        goto held;
    }
    PyObject *cur = NULL;
    if (leaf != Py_None) {
        cur = PyDict_GetItemWithError(by_id, leaf);
        if (cur == NULL && PyErr_Occurred()) goto held;
    }
    while (cur != NULL) {
        Py_ssize_t at = PyLong_AsSsize_t(cur);
        if (seen[at]) {
            cycle = 1;
            break;
        }
        seen[at] = 1;
        path[depth++] = at;
        PyObject *parent = PyList_GET_ITEM(parents, at);
        cur = NULL;
        if (parent != Py_None) {
            cur = PyDict_GetItemWithError(by_id, parent);
            if (cur == NULL && PyErr_Occurred()) goto held;
        }
    }
    path_ids = PyList_New(depth);
    ords = PyBytes_FromStringAndSize(NULL, depth * (Py_ssize_t)sizeof(int64_t));
    if (path_ids == NULL || ords == NULL) goto held;
    {
        const int64_t *ordinal = (const int64_t *)ord.buf;
        int64_t *out = (int64_t *)PyBytes_AS_STRING(ords);
        for (Py_ssize_t k = 0; k < depth; k++) { /* root first */
            Py_ssize_t at = path[depth - 1 - k];
            PyObject *id = PyList_GET_ITEM(ids, at);
            Py_INCREF(id);
            PyList_SET_ITEM(path_ids, k, id);
            out[k] = ordinal[at];
        }
    }
    {
        /* the branch's ordinals as `OrdinalSet`'s bitmap (one bit per ordinal up to the
           largest) and how many distinct ones it holds */
        const int64_t *o = (const int64_t *)PyBytes_AS_STRING(ords);
        int64_t top = -1;
        for (Py_ssize_t k = 0; k < depth; k++) {
            if (o[k] < 0) {
                PyErr_SetString(PyExc_ValueError, "lineage_walk: a negative ordinal");
                goto held;
            }
            if (o[k] > top) top = o[k];
        }
        PyObject *bits = PyByteArray_FromStringAndSize(NULL, top >= 0 ? (Py_ssize_t)(top >> 3) + 1 : 0);
        if (bits == NULL) goto held;
        unsigned char *b = (unsigned char *)PyByteArray_AS_STRING(bits);
        memset(b, 0, (size_t)PyByteArray_GET_SIZE(bits));
        Py_ssize_t count = 0;
        for (Py_ssize_t k = 0; k < depth; k++) {
            unsigned char bit = (unsigned char)(1u << (o[k] & 7));
            if (!(b[o[k] >> 3] & bit)) {
                b[o[k] >> 3] |= bit;
                count++;
            }
        }
        result = Py_BuildValue("(OOOONn)", leaf, path_ids, ords, cycle ? Py_True : Py_False, bits, count);
    }
held:
    Py_DECREF(leaf);
done:
    Py_XDECREF(by_id);
    Py_XDECREF(path_ids);
    Py_XDECREF(ords);
    free(seen);
    free(path);
    PyBuffer_Release(&ord);
    return result;
}

/* ---- postings_columns: a hot index's postings as columns (memory/hot_cache.py) ----
 *
 * postings_columns(postings) -> (terms, counts, flat): `hot_cache.encode_record`'s loop
 * over a `HotIndex`'s postings dict in its order: the terms (a list), each term's posting
 * count (native uint32 bytes) and every posting in order (native uint64 bytes). A term's
 * postings are one int, or a list, tuple or 8-byte-item buffer of ints (`postings_of`). */
static PyObject *native_postings_columns(PyObject *self, PyObject *postings) {
    (void)self;
    if (!PyDict_CheckExact(postings)) {
        PyErr_SetString(PyExc_TypeError, "postings_columns: postings must be a dict");
        return NULL;
    }
    Py_ssize_t nterms = PyDict_GET_SIZE(postings), pos = 0, total = 0;
    PyObject *term, *plist;
    /* first pass: how many postings */
    while (PyDict_Next(postings, &pos, &term, &plist)) {
        if (PyLong_CheckExact(plist)) {
            total += 1;
        } else if (PyList_CheckExact(plist) || PyTuple_CheckExact(plist)) {
            total += PySequence_Fast_GET_SIZE(plist);
        } else {
            Py_buffer view;
            if (PyObject_GetBuffer(plist, &view, PyBUF_SIMPLE) < 0) return NULL;
            Py_ssize_t len = view.len;
            PyBuffer_Release(&view);
            if (len % 8 != 0) {
                PyErr_SetString(PyExc_ValueError, "postings_columns: a postings buffer of other than 8-byte items");
                return NULL;
            }
            total += len / 8;
        }
    }
    PyObject *terms = PyList_New(nterms);
    PyObject *counts = PyBytes_FromStringAndSize(NULL, nterms * (Py_ssize_t)sizeof(uint32_t));
    PyObject *flat = PyBytes_FromStringAndSize(NULL, total * (Py_ssize_t)sizeof(uint64_t));
    if (terms == NULL || counts == NULL || flat == NULL) goto fail;
    uint32_t *cnt = (uint32_t *)PyBytes_AS_STRING(counts);
    uint64_t *out = (uint64_t *)PyBytes_AS_STRING(flat);
    Py_ssize_t k = 0, at = 0;
    pos = 0;
    while (PyDict_Next(postings, &pos, &term, &plist)) {
        if (k >= nterms) {
            PyErr_SetString(PyExc_RuntimeError, "postings_columns: the postings changed meanwhile");
            goto fail;
        }
        Py_INCREF(term);
        PyList_SET_ITEM(terms, k, term);
        Py_ssize_t n;
        if (PyLong_CheckExact(plist)) {
            n = 1;
            if (at + 1 > total) goto changed;
            out[at] = (uint64_t)PyLong_AsUnsignedLongLong(plist);
            if (out[at] == (uint64_t)-1 && PyErr_Occurred()) goto fail;
            at += 1;
        } else if (PyList_CheckExact(plist) || PyTuple_CheckExact(plist)) {
            n = PySequence_Fast_GET_SIZE(plist);
            if (at + n > total) goto changed;
            PyObject **items = PySequence_Fast_ITEMS(plist);
            for (Py_ssize_t i = 0; i < n; i++) {
                out[at] = (uint64_t)PyLong_AsUnsignedLongLong(items[i]);
                if (out[at] == (uint64_t)-1 && PyErr_Occurred()) goto fail;
                at++;
            }
        } else {
            Py_buffer view;
            if (PyObject_GetBuffer(plist, &view, PyBUF_SIMPLE) < 0) goto fail;
            n = view.len / 8;
            if (at + n > total) {
                PyBuffer_Release(&view);
                goto changed;
            }
            memcpy(out + at, view.buf, (size_t)n * 8);
            PyBuffer_Release(&view);
            at += n;
        }
        if (n > (Py_ssize_t)UINT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "postings_columns: more than 2**32 postings of a term");
            goto fail;
        }
        cnt[k++] = (uint32_t)n;
    }
    if (k != nterms || at != total) goto changed;
    PyObject *result = PyTuple_Pack(3, terms, counts, flat);
    Py_DECREF(terms);
    Py_DECREF(counts);
    Py_DECREF(flat);
    return result;
changed:
    PyErr_SetString(PyExc_RuntimeError, "postings_columns: the postings changed meanwhile");
fail:
    Py_XDECREF(terms);
    Py_XDECREF(counts);
    Py_XDECREF(flat);
    return NULL;
}

/* compact_postings(postings, pack) -> None: `HotIndex.compact`'s loop: each term's
 * postings that are a list of more than 8 ints become `pack(list)` (an array('Q')), in
 * place (the dict keeps its keys and order). */
static PyObject *native_compact_postings(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyDict_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "compact_postings(postings, pack): postings must be a dict");
        return NULL;
    }
    PyObject *postings = args[0], *pack = args[1], *term, *plist;
    Py_ssize_t pos = 0;
    while (PyDict_Next(postings, &pos, &term, &plist)) {
        if (!PyList_CheckExact(plist) || PyList_GET_SIZE(plist) <= 8) continue;
        PyObject *packed = PyObject_CallOneArg(pack, plist);
        if (packed == NULL) return NULL;
        /* (a new value for a present key: the dict neither grows nor reorders) */
        int rc = PyDict_SetItem(postings, term, packed);
        Py_DECREF(packed);
        if (rc < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* ---- the (entry, line) pairs of the entry loops (memory/entry_rows.py) ----
 *
 * One decoded entry (a reference this takes over) appended to `out` as (entry, line); with
 * `share`, a dict's "id" and "parentId" that equal the scan's id strings (`own_id`,
 * `own_parent`; None: none) become those very objects (`_entries_from`'s share_ids).
 * -1 with an error. */
static int add_entry(PyObject *out, PyObject *raw, int share, PyObject *own_id, PyObject *own_parent, int64_t line) {
    if (share && PyDict_CheckExact(raw)) {
        PyObject *pairs[2][2] = {{own_id, id_key}, {own_parent, parent_key}};
        for (int k = 0; k < 2; k++) {
            PyObject *own = pairs[k][0], *name = pairs[k][1];
            if (own == Py_None) continue;
            PyObject *had = PyDict_GetItemWithError(raw, name); /* borrowed */
            if (had == NULL && PyErr_Occurred()) goto fail;
            if (had == NULL) had = Py_None; /* (raw.get(name) is None) */
            Py_INCREF(had);
            int same = PyObject_RichCompareBool(had, own, Py_EQ);
            Py_DECREF(had);
            if (same < 0 || (same && PyDict_SetItem(raw, name, own) < 0)) goto fail;
        }
    }
    PyObject *at = PyLong_FromLongLong(line);
    PyObject *pair = at == NULL ? NULL : PyTuple_Pack(2, raw, at);
    Py_XDECREF(at);
    Py_DECREF(raw);
    int rc = pair == NULL || PyList_Append(out, pair) < 0 ? -1 : 0;
    Py_XDECREF(pair);
    return rc;
fail:
    Py_DECREF(raw);
    return -1;
}

/* ---- kept_entries: a small session's selected entries (memory/state_build.py) ----
 *
 * kept_entries(types, ordinals, lines, ids, parents, bits, kept, content, share_ids, cancel)
 *     -> list of (entry, line)
 *
 * `_entries_from`'s loop for a file read whole, whose content lines `scan_source` decoded
 * and kept by ordinal (`kept`), every row in order: a row whose type is in `content` and
 * whose ordinal is in the lineage (`bits`, an `OrdinalSet` bitmap; None: every ordinal)
 * takes its value out of `kept` (none kept: skipped); with `share_ids`, a dict's "id" and
 * "parentId" equal to the scan's id strings become those very objects. `cancel()` (unless
 * None) is called for a selected row whose number is a multiple of 256. Columns: `types`,
 * `ids` and `parents` lists; `ordinals` and `lines` int64 buffers. */
static PyObject *native_kept_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[3]) || !PyList_CheckExact(args[4])
        || (args[5] != Py_None && !PyByteArray_Check(args[5])) || !PyDict_CheckExact(args[6])
        || !PyAnySet_Check(args[7])) {
        PyErr_SetString(PyExc_TypeError,
                        "kept_entries(types, ordinals, lines, ids, parents, bits, kept, content, share_ids, cancel): "
                        "lists, int64 buffers, a bytearray or None, a dict, a set, a bool, a callable or None");
        return NULL;
    }
    PyObject *types = args[0], *ids = args[3], *parents = args[4], *bits_obj = args[5], *kept = args[6],
             *content = args[7], *cancel = args[9];
    int share = PyObject_IsTrue(args[8]);
    if (share < 0) return NULL;
    Py_buffer ord, lin;
    if (PyObject_GetBuffer(args[1], &ord, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[2], &lin, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&ord);
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(types);
    PyObject *out = NULL;
    if (ord.len < n * 8 || lin.len < n * 8 || PyList_GET_SIZE(ids) < n || PyList_GET_SIZE(parents) < n) {
        PyErr_SetString(PyExc_ValueError, "kept_entries: columns of different lengths");
        goto done;
    }
    const int64_t *ordinal = (const int64_t *)ord.buf, *line = (const int64_t *)lin.buf;
    const unsigned char *bits = bits_obj == Py_None ? NULL : (const unsigned char *)PyByteArray_AS_STRING(bits_obj);
    Py_ssize_t nbits = bits_obj == Py_None ? 0 : PyByteArray_GET_SIZE(bits_obj);
    out = PyList_New(0);
    if (out == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        int in = PySet_Contains(content, PyList_GET_ITEM(types, i));
        if (in < 0) goto fail;
        if (!in) continue;
        int64_t o = ordinal[i];
        if (bits_obj != Py_None && (o < 0 || (o >> 3) >= nbits || !((bits[o >> 3] >> (o & 7)) & 1))) continue;
        if (cancel != Py_None && (i & 255) == 0) {
            PyObject *r = PyObject_CallNoArgs(cancel);
            if (r == NULL) goto fail;
            Py_DECREF(r);
        }
        PyObject *key = PyLong_FromLongLong(o);
        if (key == NULL) goto fail;
        PyObject *raw = PyDict_GetItemWithError(kept, key); /* borrowed */
        if (raw == NULL) {
            Py_DECREF(key);
            if (PyErr_Occurred()) goto fail;
            continue;
        }
        Py_INCREF(raw);
        int gone = PyDict_DelItem(kept, key);
        Py_DECREF(key);
        if (gone < 0) {
            Py_DECREF(raw);
            goto fail;
        }
        if (raw == Py_None) { /* (kept.pop(o, None) is None: not parsed) */
            Py_DECREF(raw);
            continue;
        }
        if (add_entry(out, raw, share, PyList_GET_ITEM(ids, i), PyList_GET_ITEM(parents, i), line[i]) < 0) goto fail;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&lin);
    PyBuffer_Release(&ord);
    return out;
}

/* ---- stream_entries: a streamed session's selected entries, one chunk (memory/state_build.py) ----
 *
 * stream_entries(data, base, rows, offsets, lengths, lines, ids, parents, share_ids, decode,
 *                fallback, max_line_bytes, cancel) -> list of (entry, line)
 *
 * `_entries_from`'s loop over `rows` (int64 row numbers, content lines of the lineage) of a
 * chunk `data` read from file offset `base`: each row's bytes (offsets and lengths int64
 * columns) decoded by `decode` (the memory decoder); a line `decode` refuses (an Exception),
 * or one longer than `max_line_bytes`, goes to `fallback(bytes)` -> (parsed, value) (`decode_json_line`
 * of a scanned line). Parsed values come back with their line numbers; with `share_ids`, a
 * dict's "id" and "parentId" equal to the scan's id strings become those very objects.
 * `cancel()` (unless None) is called before the rows numbered 0, 256, 512, ... */
/* ---- the typed decode of kept lines (json_line.KEPT_DECODE), for scan_lines and
 * stream_entries: `decode` is the whole decoder or (typed, whole, roles) ---- */

/* feed_init's interned "message" and "role" (defined with the feed's keys below) */
static PyObject *k_message_field, *k_role;

/* Splits a (typed, whole, roles) `*decode` into `*typed`, `*roles` and the whole decoder
 * (NULL, NULL and `*decode` unchanged for a decoder); -1 with a TypeError for another tuple. */
static int split_decode(PyObject **decode, PyObject **typed, PyObject **roles, const char *who) {
    *typed = *roles = NULL;
    if (!PyTuple_CheckExact(*decode)) return 0;
    if (PyTuple_GET_SIZE(*decode) != 3 || !PyAnySet_Check(PyTuple_GET_ITEM(*decode, 2))) {
        PyErr_Format(PyExc_TypeError, "%s: a decode tuple is (typed, whole, roles)", who);
        return -1;
    }
    *typed = PyTuple_GET_ITEM(*decode, 0);
    *roles = PyTuple_GET_ITEM(*decode, 2);
    *decode = PyTuple_GET_ITEM(*decode, 1);
    return 0;
}

/* Whether a line's typed decode (json_line.kept_decoder), `value`, is taken as the line's
 * value: a message entry whose message is an exact dict with a role in `roles` (the members
 * memory reads are all there), or (unless `content` is NULL) an exact dict whose type is
 * not one of the `content` types (only its lineage members are read). 0 means: decode
 * the line whole. */
static int kept_shape(PyObject *value, PyObject *content, PyObject *roles) {
    if (!PyDict_CheckExact(value)) return 0;
    PyObject *etype = PyDict_GetItemWithError(value, type_key);
    if (etype == NULL) return PyErr_Occurred() ? -1 : content != NULL; /* (no type: not a content line) */
    if (!PyUnicode_CheckExact(etype)) return content != NULL;
    if (content != NULL) {
        int in = PySet_Contains(content, etype);
        if (in <= 0) return in < 0 ? -1 : 1;
    }
    if (!ascii_eq(etype, "message")) return 0;
    PyObject *message = PyDict_GetItemWithError(value, k_message_field);
    if (message == NULL || !PyDict_CheckExact(message)) return PyErr_Occurred() ? -1 : 0;
    PyObject *role = PyDict_GetItemWithError(message, k_role);
    if (role == NULL || !PyUnicode_CheckExact(role)) return PyErr_Occurred() ? -1 : 0;
    return PySet_Contains(roles, role);
}

/* `typed(arg)` when kept_shape takes it (a new reference); NULL without an error when the
 * typed decode refuses the line or it has another shape (decode it whole), NULL with an
 * error to pass on (not an Exception, e.g. KeyboardInterrupt, or kept_shape's own). */
static PyObject *typed_value(PyObject *typed, PyObject *arg, PyObject *content, PyObject *roles) {
    PyObject *value = PyObject_CallOneArg(typed, arg);
    int ok = value == NULL ? 0 : kept_shape(value, content, roles);
    if (ok > 0) return value;
    Py_XDECREF(value);
    if (ok == 0 && PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
    return NULL;
}

static PyObject *native_stream_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 13 || !PyList_CheckExact(args[6]) || !PyList_CheckExact(args[7])) {
        PyErr_SetString(PyExc_TypeError,
                        "stream_entries(data, base, rows, offsets, lengths, lines, ids, parents, share_ids, decode, "
                        "fallback, max_line_bytes, cancel) takes 13 arguments (ids and parents lists)");
        return NULL;
    }
    PyObject *ids = args[6], *parents = args[7], *decode = args[9], *fallback = args[10], *cancel = args[12];
    /* (a message entry of the typed decode's roles is taken as it reads it, any other whole) */
    PyObject *typed, *roles;
    if (split_decode(&decode, &typed, &roles, "stream_entries") < 0) return NULL;
    long long base = PyLong_AsLongLong(args[1]);
    Py_ssize_t max_line = PyLong_AsSsize_t(args[11]);
    int share = PyObject_IsTrue(args[8]);
    if ((base == -1 || max_line == -1) && PyErr_Occurred()) return NULL;
    if (share < 0) return NULL;
    Py_buffer data, rows, off, len, lin;
    int got = 0;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0) return NULL;
    got = 1;
    PyObject *out = NULL;
    if (PyObject_GetBuffer(args[2], &rows, PyBUF_SIMPLE) < 0) goto release;
    got = 2;
    if (PyObject_GetBuffer(args[3], &off, PyBUF_SIMPLE) < 0) goto release;
    got = 3;
    if (PyObject_GetBuffer(args[4], &len, PyBUF_SIMPLE) < 0) goto release;
    got = 4;
    if (PyObject_GetBuffer(args[5], &lin, PyBUF_SIMPLE) < 0) goto release;
    got = 5;
    Py_ssize_t nrows = rows.len / 8, ncols = off.len / 8;
    if (len.len / 8 < ncols || lin.len / 8 < ncols || PyList_GET_SIZE(ids) < ncols || PyList_GET_SIZE(parents) < ncols) {
        PyErr_SetString(PyExc_ValueError, "stream_entries: columns of different lengths");
        goto release;
    }
    const int64_t *row = (const int64_t *)rows.buf, *offset = (const int64_t *)off.buf;
    const int64_t *length = (const int64_t *)len.buf, *line = (const int64_t *)lin.buf;
    out = PyList_New(0);
    if (out == NULL) goto release;
    for (Py_ssize_t k = 0; k < nrows; k++) {
        int64_t i = row[k];
        if (i < 0 || i >= ncols) {
            PyErr_SetString(PyExc_IndexError, "stream_entries: a row out of the columns");
            goto fail;
        }
        if (cancel != Py_None && (k & 255) == 0) {
            PyObject *r = PyObject_CallNoArgs(cancel);
            if (r == NULL) goto fail;
            Py_DECREF(r);
        }
        int64_t start = offset[i] - base, n = length[i];
        if (start < 0 || n < 0 || start + n > data.len) {
            PyErr_SetString(PyExc_ValueError, "stream_entries: a line outside the chunk");
            goto fail;
        }
        PyObject *piece = PyBytes_FromStringAndSize((const char *)data.buf + start, (Py_ssize_t)n);
        if (piece == NULL) goto fail;
        PyObject *raw = NULL;
        if (typed != NULL && n <= max_line) { /* (a scanned line: its depth was checked) */
            raw = typed_value(typed, piece, NULL, roles);
            if (raw == NULL && PyErr_Occurred()) {
                Py_DECREF(piece);
                goto fail;
            }
        }
        if (raw == NULL && n <= max_line) {
            raw = PyObject_CallOneArg(decode, piece);
            if (raw == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                    Py_DECREF(piece);
                    goto fail;
                }
                PyErr_Clear();
            }
        }
        if (raw == NULL) { /* refused or too long: the Python rules decide */
            PyObject *pair = PyObject_CallOneArg(fallback, piece);
            if (pair == NULL) {
                Py_DECREF(piece);
                goto fail;
            }
            int ok = PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2 ? PyObject_IsTrue(PyTuple_GET_ITEM(pair, 0)) : -1;
            if (ok > 0) raw = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
            Py_DECREF(pair);
            if (ok < 0) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "stream_entries: fallback gave no (parsed, value)");
                Py_DECREF(piece);
                goto fail;
            }
        }
        Py_DECREF(piece);
        if (raw == NULL) continue; /* not parsed */
        if (add_entry(out, raw, share, PyList_GET_ITEM(ids, i), PyList_GET_ITEM(parents, i), line[i]) < 0) goto fail;
    }
    goto release;
fail:
    Py_CLEAR(out);
release:
    if (got >= 5) PyBuffer_Release(&lin);
    if (got >= 4) PyBuffer_Release(&len);
    if (got >= 3) PyBuffer_Release(&off);
    if (got >= 2) PyBuffer_Release(&rows);
    PyBuffer_Release(&data);
    return out;
}

/* finish_counts(pieces, slow) -> dict: `finish_piece_counts`' loop: term counts in
 * first-seen order from piece counts in first-seen order, a str piece counted as it is, a
 * bytes piece (one with a non-ASCII byte) decoded (UTF-8, surrogates passed) and split by
 * `slow(text) -> list of tokens`, each token counted with the piece's count. */
static int count_into(PyObject *counts, PyObject *term, PyObject *n) {
    PyObject *had = PyDict_GetItemWithError(counts, term); /* borrowed */
    if (had == NULL && PyErr_Occurred()) return -1;
    PyObject *sum = had == NULL ? Py_NewRef(n) : PyNumber_Add(had, n);
    if (sum == NULL) return -1;
    int rc = PyDict_SetItem(counts, term, sum);
    Py_DECREF(sum);
    return rc;
}

static PyObject *native_finish_counts(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyDict_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "finish_counts(pieces, slow): pieces must be a dict");
        return NULL;
    }
    PyObject *pieces = args[0], *slow = args[1], *piece, *n;
    PyObject *counts = PyDict_New();
    if (counts == NULL) return NULL;
    Py_ssize_t pos = 0;
    while (PyDict_Next(pieces, &pos, &piece, &n)) {
        if (PyUnicode_CheckExact(piece)) {
            if (count_into(counts, piece, n) < 0) goto fail;
            continue;
        }
        if (!PyBytes_Check(piece)) {
            PyErr_SetString(PyExc_TypeError, "finish_counts: a piece is neither str nor bytes");
            goto fail;
        }
        PyObject *text = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(piece), PyBytes_GET_SIZE(piece), "surrogatepass");
        PyObject *tokens = text == NULL ? NULL : PyObject_CallOneArg(slow, text);
        Py_XDECREF(text);
        if (tokens == NULL) goto fail;
        PyObject *seq = PySequence_Fast(tokens, "finish_counts: slow gave no sequence");
        Py_DECREF(tokens);
        if (seq == NULL) goto fail;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            if (count_into(counts, PySequence_Fast_GET_ITEM(seq, i), n) < 0) {
                Py_DECREF(seq);
                goto fail;
            }
        }
        Py_DECREF(seq);
    }
    return counts;
fail:
    Py_DECREF(counts);
    return NULL;
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

/* ---- bm25_add, segment_keys: a hot query's scoring and grouping (memory/search.py) ----
 *
 * bm25_add(scores, postings, doc_len, idf, k1p1, norm_a, norm_b) -> True, or False (not
 * handled here: nothing changed). `postings` is one term's postings in a hot index (an
 * int, a list or tuple of ints, or an 8-byte-item buffer such as array('Q')), each
 * `idx << 32 | tf`; `doc_len` a 4-byte-item buffer (array('I')). For each posting in order,
 * exactly as `bm25_located`'s loop:
 *     scores[idx] = scores.get(idx, 0.0) + idf * (tf * k1p1) / (tf + (norm_a + norm_b * doc_len[idx]))
 * The product `norm_b * doc_len[idx]` is rounded before it is added (no fused multiply-add),
 * as Python rounds it, so every score is the same double. */
static int bm25_one(PyObject *scores, uint64_t p, const uint32_t *dl, Py_ssize_t ndl, double idf, double k1p1,
                    double norm_a, double norm_b) {
    uint64_t idx = p >> 32;
    double tf = (double)(p & 0xFFFFFFFFu);
    if (idx >= (uint64_t)ndl) {
        PyErr_SetString(PyExc_IndexError, "array index out of range");
        return -1;
    }
    volatile double by_len = norm_b * (double)dl[idx];
    double s = idf * (tf * k1p1) / (tf + (norm_a + by_len));
    PyObject *key = PyLong_FromUnsignedLongLong(idx);
    if (key == NULL) return -1;
    PyObject *cur = PyDict_GetItemWithError(scores, key); /* borrowed */
    PyObject *val;
    if (cur == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
        val = PyFloat_FromDouble(0.0 + s);
    } else if (PyFloat_CheckExact(cur)) {
        val = PyFloat_FromDouble(PyFloat_AS_DOUBLE(cur) + s);
    } else {
        PyObject *sf = PyFloat_FromDouble(s);
        val = sf == NULL ? NULL : PyNumber_Add(cur, sf);
        Py_XDECREF(sf);
    }
    if (val == NULL) {
        Py_DECREF(key);
        return -1;
    }
    int rc = PyDict_SetItem(scores, key, val);
    Py_DECREF(key);
    Py_DECREF(val);
    return rc;
}

static PyObject *native_bm25_add(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "bm25_add(scores, postings, doc_len, idf, k1p1, norm_a, norm_b) takes 7 arguments");
        return NULL;
    }
    PyObject *scores = args[0], *postings = args[1];
    if (!PyDict_CheckExact(scores)) Py_RETURN_FALSE;
    if (!PyFloat_CheckExact(args[3]) || !PyFloat_CheckExact(args[4]) || !PyFloat_CheckExact(args[5])
        || !PyFloat_CheckExact(args[6]))
        Py_RETURN_FALSE;
    double idf = PyFloat_AS_DOUBLE(args[3]), k1p1 = PyFloat_AS_DOUBLE(args[4]);
    double norm_a = PyFloat_AS_DOUBLE(args[5]), norm_b = PyFloat_AS_DOUBLE(args[6]);
    int list_like = PyList_CheckExact(postings) || PyTuple_CheckExact(postings);
    Py_buffer plist = {0};
    int have_plist = 0;
    if (!PyLong_CheckExact(postings) && !list_like) {
        if (!PyObject_CheckBuffer(postings)) Py_RETURN_FALSE;
        if (PyObject_GetBuffer(postings, &plist, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return NULL;
        have_plist = 1;
        if (plist.itemsize != 8 || plist.format == NULL || (strcmp(plist.format, "Q") != 0 && strcmp(plist.format, "L") != 0)) {
            PyBuffer_Release(&plist);
            Py_RETURN_FALSE;
        }
    }
    Py_buffer dlb;
    if (!PyObject_CheckBuffer(args[2]) || PyObject_GetBuffer(args[2], &dlb, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        if (have_plist) PyBuffer_Release(&plist);
        Py_RETURN_FALSE;
    }
    if (dlb.itemsize != 4 || dlb.format == NULL || strcmp(dlb.format, "I") != 0) {
        PyBuffer_Release(&dlb);
        if (have_plist) PyBuffer_Release(&plist);
        Py_RETURN_FALSE;
    }
    const uint32_t *dl = (const uint32_t *)dlb.buf;
    Py_ssize_t ndl = dlb.len / 4;
    int rc = 0;
    if (have_plist) {
        const uint64_t *ps = (const uint64_t *)plist.buf;
        Py_ssize_t n = plist.len / 8;
        for (Py_ssize_t i = 0; i < n && rc == 0; i++) rc = bm25_one(scores, ps[i], dl, ndl, idf, k1p1, norm_a, norm_b);
        PyBuffer_Release(&plist);
    } else if (list_like) {
        /* size and item read again at each step: adding to a score that is not a float
         * runs Python code (its __add__), which could change the list */
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(postings) && rc == 0; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(postings, i);
            unsigned long long p = PyLong_CheckExact(item) ? PyLong_AsUnsignedLongLong(item) : (unsigned long long)-1;
            if (p == (unsigned long long)-1) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "bm25_add: a posting is not a packed int");
                rc = -1;
                break;
            }
            rc = bm25_one(scores, (uint64_t)p, dl, ndl, idf, k1p1, norm_a, norm_b);
        }
    } else {
        unsigned long long p = PyLong_AsUnsignedLongLong(postings);
        if (p == (unsigned long long)-1 && PyErr_Occurred())
            rc = -1;
        else
            rc = bm25_one(scores, (uint64_t)p, dl, ndl, idf, k1p1, norm_a, norm_b);
    }
    PyBuffer_Release(&dlb);
    if (rc < 0) return NULL;
    Py_RETURN_TRUE;
}

/* segment_keys(matched, seg_of, starts, neg_mtime, base_index, file_key, vn, seq) -> list, or None
 * (not decided here: nothing made). One hot view's matched positions (`matched`: a dict of
 * int position -> float score, in the order the scores were first set) grouped by segment
 * (`seg_of`: array('I') of each position's segment number; `starts`: the segments' first
 * positions, a list of ints), as `group_and_rank`'s sort keys: for each segment with a
 * match, in the order of its first matched position in `matched`,
 *     (-best score, neg_mtime, 0, base_index + starts[si], file_key, seq + k, vn, si, count)
 * where k counts the keys made. */
static PyObject *native_segment_keys(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "segment_keys(matched, seg_of, starts, neg_mtime, base_index, file_key, vn, seq) takes 8 arguments");
        return NULL;
    }
    PyObject *matched = args[0], *starts = args[2], *neg_mtime = args[3], *file_key = args[5], *vn = args[6];
    if (!PyDict_CheckExact(matched) || !PyList_CheckExact(starts) || !PyLong_CheckExact(args[4])
        || !PyLong_CheckExact(args[7]))
        Py_RETURN_NONE;
    int overflow = 0;
    long long base = PyLong_AsLongLongAndOverflow(args[4], &overflow);
    if (overflow || (base == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    long long seq = PyLong_AsLongLongAndOverflow(args[7], &overflow);
    if (overflow || (seq == -1 && PyErr_Occurred()) || seq < 0 || seq > ((long long)1 << 60)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_buffer sb;
    if (!PyObject_CheckBuffer(args[1]) || PyObject_GetBuffer(args[1], &sb, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *out = NULL;
    double *best = NULL;
    Py_ssize_t *count = NULL, *order = NULL;
    long long *first = NULL;
    Py_ssize_t nseg = PyList_GET_SIZE(starts), norder = 0;
    if (sb.itemsize != 4 || sb.format == NULL || strcmp(sb.format, "I") != 0) goto fallback;
    const uint32_t *seg_of = (const uint32_t *)sb.buf;
    Py_ssize_t npos = sb.len / 4;
    size_t cap = (size_t)(nseg > 0 ? nseg : 1);
    best = (double *)malloc(cap * sizeof(double));
    count = (Py_ssize_t *)calloc(cap, sizeof(Py_ssize_t));
    order = (Py_ssize_t *)malloc(cap * sizeof(Py_ssize_t));
    first = (long long *)malloc(cap * sizeof(long long));
    if (best == NULL || count == NULL || order == NULL || first == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t si = 0; si < nseg; si++) {
        PyObject *s = PyList_GET_ITEM(starts, si);
        long long v = PyLong_CheckExact(s) ? PyLong_AsLongLongAndOverflow(s, &overflow) : 0;
        if (!PyLong_CheckExact(s) || overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            goto fallback;
        }
        first[si] = v;
    }
    Py_ssize_t it = 0;
    PyObject *key, *value;
    while (PyDict_Next(matched, &it, &key, &value)) {
        if (!PyLong_CheckExact(key) || !PyFloat_CheckExact(value)) goto fallback;
        Py_ssize_t pos = PyLong_AsSsize_t(key);
        if (pos == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto fallback;
        }
        if (pos < 0 || pos >= npos) goto fallback;
        Py_ssize_t si = (Py_ssize_t)seg_of[pos];
        if (si >= nseg) goto fallback;
        double score = PyFloat_AS_DOUBLE(value);
        if (count[si] == 0) {
            order[norder++] = si;
            best[si] = score;
            count[si] = 1;
        } else {
            count[si] += 1;
            if (score > best[si]) best[si] = score;
        }
    }
    for (Py_ssize_t k = 0; k < norder; k++) {
        long long at = first[order[k]];
        if ((base > 0 && at > LLONG_MAX - base) || (base < 0 && at < LLONG_MIN - base)) goto fallback;
    }
    out = PyList_New(norder);
    if (out == NULL) goto done;
    for (Py_ssize_t k = 0; k < norder; k++) {
        Py_ssize_t si = order[k];
        PyObject *t = PyTuple_New(9);
        if (t == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, k, t);
        PyObject *neg = PyFloat_FromDouble(-best[si]);
        PyObject *zero = PyLong_FromLong(0);
        PyObject *pos = PyLong_FromLongLong(base + first[si]);
        PyObject *sq = PyLong_FromLongLong(seq + k);
        PyObject *sio = PyLong_FromSsize_t(si);
        PyObject *cnt = PyLong_FromSsize_t(count[si]);
        Py_INCREF(neg_mtime);
        Py_INCREF(file_key);
        Py_INCREF(vn);
        PyTuple_SET_ITEM(t, 0, neg);
        PyTuple_SET_ITEM(t, 1, neg_mtime);
        PyTuple_SET_ITEM(t, 2, zero);
        PyTuple_SET_ITEM(t, 3, pos);
        PyTuple_SET_ITEM(t, 4, file_key);
        PyTuple_SET_ITEM(t, 5, sq);
        PyTuple_SET_ITEM(t, 6, vn);
        PyTuple_SET_ITEM(t, 7, sio);
        PyTuple_SET_ITEM(t, 8, cnt);
        if (neg == NULL || zero == NULL || pos == NULL || sq == NULL || sio == NULL || cnt == NULL) {
            Py_CLEAR(out);
            goto done;
        }
    }
    goto done;
fallback:
    Py_CLEAR(out);
    out = Py_None;
    Py_INCREF(out);
done:
    free(best);
    free(count);
    free(order);
    free(first);
    PyBuffer_Release(&sb);
    return out;
}

/* a growing buffer of fixed-size items for an array.array column (`item` its itemsize) */
typedef struct {
    char *v;
    Py_ssize_t n, cap, item;
} Col;

static int col_push(Col *c, const void *x) {
    if (c->n == c->cap) {
        Py_ssize_t cap = c->cap ? c->cap * 2 : 1024;
        char *v = (char *)realloc(c->v, (size_t)(cap * c->item));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->v = v;
        c->cap = cap;
    }
    memcpy(c->v + c->n * c->item, x, (size_t)c->item);
    c->n++;
    return 0;
}

/* column.frombytes(what is buffered); the buffer is kept (emptied) for more */
static int col_flush(Col *c, PyObject *column) {
    if (c->n == 0) return 0;
    PyObject *raw = PyBytes_FromStringAndSize(c->v, c->n * c->item);
    c->n = 0;
    if (raw == NULL) return -1;
    PyObject *r = PyObject_CallMethodOneArg(column, frombytes_name, raw);
    Py_DECREF(raw);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* an int64 column's next value */
static int col_push_i64(Col *c, int64_t x) { return col_push(c, &x); }

/* the rest of the buffer written to `column`, and the buffer freed */
static int col_finish(Col *c, PyObject *column) {
    int rc = col_flush(c, column);
    free(c->v);
    c->v = NULL;
    c->n = c->cap = 0;
    return rc;
}

/* the error being raised, put aside while the columns are written out, and put back */
typedef struct {
    PyObject *type, *value, *tb; /* (3.12+: the exception in `type`) */
} SavedError;

static void error_save(SavedError *e) {
#if PY_VERSION_HEX >= 0x030C0000
    e->type = PyErr_GetRaisedException();
    e->value = e->tb = NULL;
#else
    PyErr_Fetch(&e->type, &e->value, &e->tb);
#endif
}

static void error_restore(SavedError *e) {
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(e->type);
#else
    PyErr_Restore(e->type, e->value, e->tb);
#endif
}

/* ---- scan_lines: the line scan's common lines (memory/source.py, `scan_source`) ----
 *
 * scan_lines(data, pos, n, at, line_no, ordinal, cols, keep, decode, max_line_bytes,
 *            max_depth, type_names, content) -> (status, pos, at, line_no, ordinal)
 *
 * Scans the complete lines of data[pos:n] (`at`: the file offset of data[pos]) exactly as
 * `scan_source`'s loop does, for the lines whose outcome needs no Python: a blank line
 * (empty or ASCII whitespace only) takes no ordinal; any other line of at most
 * `max_line_bytes` bytes is decoded with `decode` (a callable given a memoryview of the
 * line) and, when that succeeds and the value nests no deeper than `max_depth`, is added
 * to `cols` (ordinal, line, offset, length: array('q'); type, id, parentId: lists; node
 * flags: bytearray). With `keep` (a dict) `decode` is the full decoder: an object's
 * `type`, `id` and `parentId` are its members, and an object whose type is in `content`
 * is kept there by ordinal; without it `decode` gives the narrow envelope (a Struct with
 * those three attributes) and a line of more than `max_depth` brackets is left to Python.
 * A string type is stored as `type_names`' object for it when it has one.
 *
 * status 1: the complete line at `pos` is left to the Python code (a decoder refused it,
 * it is too long or too deep, it is a session header, or the envelope found no object);
 * status 0: every complete line before `n` is scanned and `pos` is where the partial
 * piece after the last newline starts (possibly at `n`). Either way the columns hold
 * exactly the lines before `pos`, and at / line_no / ordinal are the counters there.
 * tests/engine/memory/test_native_scan.py checks it against the Python loop. */



/* The preview scan's pending-call map (compaction/scan.py `_Calls`, a dict subclass) as
   the C sink of read_lines sees it: setting a call also notes its owner node in `owners`,
   and a result paired by `get` notes (this node, the call's owner) in `users` /
   `suppliers`, as `_Calls.__setitem__` and `_Calls.get` do. NULL: `calls` is used through
   its own methods. */
typedef struct {
    PyObject *owners;
    Col *users, *suppliers;
    long node;
} CallsCtx;

/* whether `v` nests lists/dicts deeper than `limit` (`depth`: v's own depth if it is one) */
static int nests_deeper(PyObject *v, int depth, int limit) {
    if (PyDict_Check(v)) {
        if (depth > limit) return 1;
        Py_ssize_t i = 0;
        PyObject *k, *child;
        while (PyDict_Next(v, &i, &k, &child))
            if ((PyDict_Check(child) || PyList_Check(child)) && nests_deeper(child, depth + 1, limit)) return 1;
    } else if (PyList_Check(v)) {
        if (depth > limit) return 1;
        Py_ssize_t n = PyList_GET_SIZE(v);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *child = PyList_GET_ITEM(v, i);
            if ((PyDict_Check(child) || PyList_Check(child)) && nests_deeper(child, depth + 1, limit)) return 1;
        }
    }
    return 0;
}

static int is_blank(const unsigned char *p, Py_ssize_t len) {
    for (Py_ssize_t i = 0; i < len; i++) {
        unsigned char c = p[i];
        if (!(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c')) return 0;
    }
    return 1;
}

static Py_ssize_t bracket_count(const unsigned char *p, Py_ssize_t len) {
    /* '[' (0x5b) and '{' (0x7b) differ only in bit 0x20; a 32-bit count per 4 KiB block
       lets the compiler count 16 bytes a step */
    Py_ssize_t n = 0;
    while (len > 0) {
        Py_ssize_t k = len < 4096 ? len : 4096;
        uint32_t m = 0;
        for (Py_ssize_t i = 0; i < k; i++) m += (p[i] | 0x20) == '{';
        n += m;
        p += k;
        len -= k;
    }
    return n;
}

/* a member of an exact dict, or None (borrowed); NULL on error */
static PyObject *member(PyObject *d, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL && !PyErr_Occurred()) v = Py_None;
    return v;
}

static PyObject *native_scan_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError,
                        "scan_lines(data, pos, n, at, line_no, ordinal, cols, keep, decode, max_line_bytes, max_depth, "
                        "type_names, content) takes 13 arguments");
        return NULL;
    }
    PyObject *cols = args[6], *keep = args[7], *decode = args[8], *type_names = args[11], *content = args[12];
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]), n = PyLong_AsSsize_t(args[2]);
    long long at = PyLong_AsLongLong(args[3]), line_no = PyLong_AsLongLong(args[4]), ordinal = PyLong_AsLongLong(args[5]);
    Py_ssize_t max_line = PyLong_AsSsize_t(args[9]);
    long max_depth = PyLong_AsLong(args[10]);
    if (PyErr_Occurred()) return NULL;
    PyObject *typed, *roles; /* (keeping only: see kept_shape) */
    if (split_decode(&decode, &typed, &roles, "scan_lines") < 0) return NULL;
    if (typed != NULL && keep == Py_None) {
        PyErr_SetString(PyExc_TypeError, "scan_lines: a typed decode only when keeping");
        return NULL;
    }
    if (!PyTuple_CheckExact(cols) || PyTuple_GET_SIZE(cols) != 8 || !PyDict_CheckExact(type_names)
        || !PyAnySet_Check(content) || !(keep == Py_None || PyDict_CheckExact(keep))) {
        PyErr_SetString(PyExc_TypeError, "scan_lines: cols an 8-tuple, keep a dict or None, type_names a dict, content a set");
        return NULL;
    }
    PyObject *types = PyTuple_GET_ITEM(cols, 4), *ids = PyTuple_GET_ITEM(cols, 5), *parents = PyTuple_GET_ITEM(cols, 6),
             *node = PyTuple_GET_ITEM(cols, 7);
    if (!PyList_CheckExact(types) || !PyList_CheckExact(ids) || !PyList_CheckExact(parents) || !PyByteArray_CheckExact(node)) {
        PyErr_SetString(PyExc_TypeError, "scan_lines: the type, id and parent columns lists, the node column a bytearray");
        return NULL;
    }
    Py_buffer buf;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0) return NULL;
    if (pos < 0 || n > buf.len || pos > n) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "scan_lines: pos and n out of range");
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)buf.buf;
    Col c_ordinal = {NULL, 0, 0, sizeof(int64_t)}, c_line = c_ordinal, c_offset = c_ordinal, c_length = c_ordinal;
    PyObject *nodes = PyByteArray_FromStringAndSize(NULL, 0);
    int status = 0, failed = nodes == NULL;
    while (!failed) {
        const unsigned char *nl = (const unsigned char *)memchr(data + pos, '\n', (size_t)(n - pos));
        if (nl == NULL) break; /* status 0: the partial piece is the caller's */
        Py_ssize_t length = (Py_ssize_t)(nl - (data + pos));
        const unsigned char *raw = data + pos;
        if (length == 0 || is_blank(raw, length)) goto next; /* blank: no ordinal */
        if (length > max_line) {
            status = 1;
            break;
        }
        PyObject *etype = Py_None, *eid = Py_None, *pid = Py_None, *value = NULL, *held = NULL;
        if (keep == Py_None && bracket_count(raw, length) > max_depth) {
            status = 1;
            break;
        }
        PyObject *view = PyMemoryView_FromMemory((char *)raw, length, PyBUF_READ);
        if (view == NULL) {
            failed = 1;
            break;
        }
        /* (a line of at most max_depth brackets nests no deeper) */
        int shallow = typed != NULL && bracket_count(raw, length) <= max_depth;
        if (shallow) {
            value = typed_value(typed, view, content, roles);
            if (value == NULL && PyErr_Occurred()) {
                Py_DECREF(view);
                failed = 1;
                break;
            }
            shallow = value != NULL;
        }
        if (value == NULL) value = PyObject_CallOneArg(decode, view);
        Py_DECREF(view);
        if (value == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_Exception)) { /* e.g. KeyboardInterrupt */
                failed = 1;
                break;
            }
            PyErr_Clear(); /* refused: the Python code reads it (its fallback decoder, its verdict) */
            status = 1;
            break;
        }
        int is_object;
        if (keep != Py_None) {
            if (!shallow && length > max_depth && nests_deeper(value, 1, (int)max_depth)) {
                Py_DECREF(value);
                status = 1;
                break;
            }
            is_object = PyDict_CheckExact(value);
            if (is_object) {
                etype = member(value, type_key);
                eid = etype == NULL ? NULL : member(value, id_key);
                pid = eid == NULL ? NULL : member(value, parent_key);
                if (pid == NULL) {
                    Py_DECREF(value);
                    failed = 1;
                    break;
                }
            }
        } else {
            is_object = 1;
            held = PyTuple_New(3);
            if (held == NULL) {
                Py_DECREF(value);
                failed = 1;
                break;
            }
            PyObject *names[3] = {type_key, id_key, parent_key};
            for (int k = 0; k < 3; k++) {
                PyObject *a = PyObject_GetAttr(value, names[k]);
                if (a == NULL) {
                    failed = 1;
                    break;
                }
                PyTuple_SET_ITEM(held, k, a);
            }
            if (failed) {
                Py_DECREF(held);
                Py_DECREF(value);
                break;
            }
            etype = PyTuple_GET_ITEM(held, 0);
            eid = PyTuple_GET_ITEM(held, 1);
            pid = PyTuple_GET_ITEM(held, 2);
        }
        if (is_object && PyUnicode_CheckExact(etype) && ascii_eq(etype, "session")) {
            Py_XDECREF(held);
            Py_DECREF(value);
            status = 1; /* a header: the Python code reads it */
            break;
        }
        PyObject *stored_type = Py_None;
        int is_node = 0;
        if (is_object) {
            if (PyUnicode_CheckExact(etype)) {
                PyObject *named = PyDict_GetItemWithError(type_names, etype);
                if (named == NULL && PyErr_Occurred()) failed = 1;
                stored_type = named != NULL ? named : etype;
            }
            is_node = PyUnicode_CheckExact(eid) && (pid == Py_None || PyUnicode_CheckExact(pid));
        } else {
            etype = eid = pid = Py_None;
        }
        if (!failed && (col_push_i64(&c_ordinal, ordinal) < 0 || col_push_i64(&c_line, line_no) < 0
                        || col_push_i64(&c_offset, at) < 0 || col_push_i64(&c_length, length) < 0 || PyList_Append(types, stored_type) < 0
                        || PyList_Append(ids, eid) < 0 || PyList_Append(parents, pid) < 0))
            failed = 1;
        if (!failed) {
            Py_ssize_t old = PyByteArray_GET_SIZE(nodes);
            if (PyByteArray_Resize(nodes, old + 1) < 0)
                failed = 1;
            else
                PyByteArray_AS_STRING(nodes)[old] = (char)is_node;
        }
        if (!failed && keep != Py_None && is_object && PyUnicode_CheckExact(etype)) {
            int in = PySet_Contains(content, etype);
            if (in < 0) failed = 1;
            if (in > 0) {
                PyObject *o = PyLong_FromLongLong(ordinal);
                if (o == NULL || PyDict_SetItem(keep, o, value) < 0) failed = 1;
                Py_XDECREF(o);
            }
        }
        Py_XDECREF(held);
        Py_DECREF(value);
        if (failed) break;
        ordinal++;
    next:
        line_no++;
        at += length + 1;
        pos += length + 1;
    }
    PyBuffer_Release(&buf);
    /* the columns get the lines scanned before an error too (an error abandons the scan) */
    SavedError raised;
    error_save(&raised);
    int bad = col_finish(&c_ordinal, PyTuple_GET_ITEM(cols, 0)) < 0;
    bad |= col_finish(&c_line, PyTuple_GET_ITEM(cols, 1)) < 0;
    bad |= col_finish(&c_offset, PyTuple_GET_ITEM(cols, 2)) < 0;
    bad |= col_finish(&c_length, PyTuple_GET_ITEM(cols, 3)) < 0;
    if (nodes != NULL) {
        Py_ssize_t old = PyByteArray_GET_SIZE(node), add = PyByteArray_GET_SIZE(nodes);
        if (add && PyByteArray_Resize(node, old + add) == 0)
            memcpy(PyByteArray_AS_STRING(node) + old, PyByteArray_AS_STRING(nodes), (size_t)add);
        else if (add)
            bad = 1;
        Py_DECREF(nodes);
    }
    if (raised.type != NULL) {
        error_restore(&raised);
        return NULL;
    }
    if (failed || bad) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_MemoryError, "scan_lines");
        return NULL;
    }
    return Py_BuildValue("(inLLL)", status, pos, at, line_no, ordinal);
}

/* read_lines' C sink (compaction/scan.py `Scanned._sink`, `sink` there): the columns and
   maps a pass-1 node goes to, so a node that is a common message never goes through the
   Python `node`. Defined after message_node. */
typedef struct {
    PyObject *kinds, *tokens, *usage, *spans, *deferred, *blob, *ids_append, *offsets, *lengths, *parents, *last;
    PyObject *calls, *events, *starts, *thinking, *nz, *kind_table, *stub_type, *truncate;
    PyObject *owners, *users_col, *suppliers_col;
    Col c_tokens, c_offsets, c_lengths, c_starts, c_users, c_suppliers;
} NodeSink;

static int sink_open(NodeSink *k, PyObject *spec);
static int sink_flush(NodeSink *k);
static void sink_close(NodeSink *k);
static int sink_node(NodeSink *k, PyObject *value, PyObject *eid, PyObject *pid, long long offset, Py_ssize_t length);

/* ---- read_lines: a preview's pass-1 line loop (compaction/loader.py, `_stream_fp`) ----
 *
 * read_lines(data, view, pos, consumed, count, max_line_bytes, max_depth, decode, node,
 *            line, check, owner, sink) -> (pos, consumed, count)
 *
 * Every complete line of data[pos:] (`view` a memoryview of `data`; `consumed` the file
 * offset of data[pos]) goes where the loop's `line(view, pos, end, max_line_bytes,
 * offset)` would take it, `check()` (unless None) being called before every 4096th line
 * (`count` counts them): once `owner.first` is false (the sink has read its first value),
 * a line of at most `max_line_bytes` that `decode` (given a memoryview of the line) reads
 * as an exact dict nesting no deeper than `max_depth`, with a str `id` and a `parentId`
 * that is null or a str, is a tree node: `node(value, id, parentId, offset, length)`,
 * which is what `line` does after `read_node` for it. Every other line (the first value,
 * blank, malformed, oversize, too deep, not an object, no id) goes to `line` itself.
 * Returns where the partial piece after the last newline starts, its file offset, and the
 * count. `sink` (None, or the tuple `Scanned._sink` describes): a node that is a `message`
 * whose message `message_node` takes is added to the sink's columns here, as `node` would,
 * without calling it; the buffered columns are written out before any call of `node` or
 * `line` and before returning. tests/engine/compaction/test_native_preview_lines.py checks
 * both ways agree. */
static PyObject *native_read_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError,
                        "read_lines(data, view, pos, consumed, count, max_line_bytes, max_depth, decode, node, line, "
                        "check, owner, sink) takes 13 arguments");
        return NULL;
    }
    PyObject *view = args[1], *decode = args[7], *node = args[8], *line = args[9], *check = args[10], *owner = args[11];
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]);
    long long consumed = PyLong_AsLongLong(args[3]), count = PyLong_AsLongLong(args[4]);
    PyObject *max_line_obj = args[5];
    Py_ssize_t max_line = PyLong_AsSsize_t(max_line_obj);
    long max_depth = PyLong_AsLong(args[6]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0) return NULL;
    if (pos < 0 || pos > buf.len) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "read_lines: pos out of range");
        return NULL;
    }
    NodeSink sink_store, *sink = NULL;
    if (args[12] != Py_None) {
        if (sink_open(&sink_store, args[12]) < 0) {
            PyBuffer_Release(&buf);
            return NULL;
        }
        sink = &sink_store;
    }
    const unsigned char *data = (const unsigned char *)buf.buf;
    Py_ssize_t n = buf.len;
    int first_over = 0, failed = 0;
    while (!failed) {
        const unsigned char *nl = (const unsigned char *)memchr(data + pos, '\n', (size_t)(n - pos));
        if (nl == NULL) break;
        Py_ssize_t end = (Py_ssize_t)(nl - data), length = end - pos;
        count++;
        if (check != Py_None && (count & 4095) == 0) {
            PyObject *r = PyObject_CallNoArgs(check);
            if (r == NULL) {
                failed = 1;
                break;
            }
            Py_DECREF(r);
        }
        int handled = 0;
        if (!first_over) {
            PyObject *first = PyObject_GetAttr(owner, first_name);
            if (first == NULL) {
                failed = 1;
                break;
            }
            int truth = PyObject_IsTrue(first);
            Py_DECREF(first);
            if (truth < 0) {
                failed = 1;
                break;
            }
            first_over = !truth;
        }
        if (first_over && length <= max_line) {
            PyObject *mem = PyMemoryView_FromMemory((char *)(data + pos), length, PyBUF_READ);
            if (mem == NULL) {
                failed = 1;
                break;
            }
            PyObject *value = PyObject_CallOneArg(decode, mem);
            Py_DECREF(mem);
            if (value == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                    failed = 1;
                    break;
                }
                PyErr_Clear(); /* `line` reads it: the fallback decoder, blank or malformed */
            } else {
                if (PyDict_CheckExact(value) && !(length > max_depth && nests_deeper(value, 1, (int)max_depth))) {
                    PyObject *eid = PyDict_GetItemWithError(value, id_key);
                    PyObject *pid = eid == NULL ? NULL : PyDict_GetItemWithError(value, parent_key);
                    if (PyErr_Occurred()) {
                        Py_DECREF(value);
                        failed = 1;
                        break;
                    }
                    if (eid != NULL && PyUnicode_CheckExact(eid) && pid != NULL
                        && (pid == Py_None || PyUnicode_CheckExact(pid))) {
                        Py_INCREF(eid);
                        Py_INCREF(pid);
                        int taken = sink == NULL ? 0 : sink_node(sink, value, eid, pid, consumed, length);
                        if (taken == 0 && sink != NULL) taken = sink_flush(sink); /* (0 or -1) */
                        if (taken != 0) {
                            Py_DECREF(eid);
                            Py_DECREF(pid);
                            Py_DECREF(value);
                            if (taken < 0) {
                                failed = 1;
                                break;
                            }
                            consumed += length + 1;
                            pos = end + 1;
                            continue;
                        }
                        PyObject *off = PyLong_FromLongLong(consumed), *len = PyLong_FromSsize_t(length);
                        PyObject *r = NULL;
                        if (off != NULL && len != NULL) {
                            PyObject *call[5] = {value, eid, pid, off, len};
                            r = PyObject_Vectorcall(node, call, 5, NULL);
                        }
                        Py_XDECREF(off);
                        Py_XDECREF(len);
                        Py_DECREF(eid);
                        Py_DECREF(pid);
                        if (r == NULL) {
                            Py_DECREF(value);
                            failed = 1;
                            break;
                        }
                        Py_DECREF(r);
                        handled = 1;
                    }
                }
                Py_DECREF(value);
            }
        }
        if (!handled) {
            if (sink != NULL && sink_flush(sink) < 0) {
                failed = 1;
                break;
            }
            PyObject *p = PyLong_FromSsize_t(pos), *e = PyLong_FromSsize_t(end), *off = PyLong_FromLongLong(consumed);
            PyObject *r = NULL;
            if (p != NULL && e != NULL && off != NULL) {
                PyObject *call[5] = {view, p, e, max_line_obj, off};
                r = PyObject_Vectorcall(line, call, 5, NULL);
            }
            Py_XDECREF(p);
            Py_XDECREF(e);
            Py_XDECREF(off);
            if (r == NULL) {
                failed = 1;
                break;
            }
            Py_DECREF(r);
        }
        consumed += length + 1;
        pos = end + 1;
    }
    PyBuffer_Release(&buf);
    if (sink != NULL) {
        /* (the columns get the nodes read before an error too) */
        SavedError raised;
        error_save(&raised);
        if (sink_flush(sink) < 0) {
            if (raised.type != NULL) PyErr_Clear();
            else failed = 1;
        }
        if (raised.type != NULL) error_restore(&raised);
        sink_close(sink);
    }
    if (failed) return NULL;
    return Py_BuildValue("(nLL)", pos, consumed, count);
}

/* ---- deeper_than: the session reader's depth rule (session/reader.py) ----
 *
 * deeper_than(value, limit) -> bool: whether `value` (a decoded JSON value) nests
 * lists/dicts deeper than `limit`, the top container being at depth 1: exactly what
 * `exceeds_json_depth`'s walk decides, without its budget (the walk stops at limit + 1). */
static PyObject *native_deeper_than(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "deeper_than(value, limit) takes 2 arguments");
        return NULL;
    }
    long limit = PyLong_AsLong(args[1]);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    if (limit < 0 || limit > 100000) {
        PyErr_SetString(PyExc_ValueError, "deeper_than: limit out of range");
        return NULL;
    }
    return PyBool_FromLong(nests_deeper(args[0], 1, (int)limit));
}

/* ---- utf16_len: JavaScript's `s.length` (jsstr.py) ----
 *
 * utf16_len(s) -> int: the UTF-16 code units of `s` (a str): its length plus one for
 * each character above U+FFFF (lone surrogates count one, as `surrogatepass` encodes them). */
static PyObject *native_utf16_len(PyObject *self, PyObject *s) {
    (void)self;
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "utf16_len: a str expected");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_KIND(s) == PyUnicode_4BYTE_KIND) {
        const Py_UCS4 *c = PyUnicode_4BYTE_DATA(s);
        Py_ssize_t extra = 0;
        for (Py_ssize_t i = 0; i < n; i++) extra += c[i] > 0xFFFF;
        n += extra;
    }
    return PyLong_FromSsize_t(n);
}

/* ---- iso_ms: `Date.parse` of the ISO form Pi writes (jsstr.py, `parse_date_ms`) ----
 *
 * iso_ms(value) -> int | None: for a str of exactly the form `YYYY-MM-DDTHH:MM:SS.mmmZ`
 * (what JavaScript's toISOString writes) naming a real instant of years 1-9999, its
 * milliseconds since 1970-01-01T00:00:00Z (proleptic Gregorian), which is what
 * `datetime.fromisoformat` and the epoch arithmetic of `parse_date_ms` give; None for
 * anything else, which the Python code then reads (None here is not "not a date"). */
static int digits(const Py_UCS1 *c, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (c[i] < '0' || c[i] > '9') return 0;
        v = v * 10 + (c[i] - '0');
    }
    *out = v;
    return 1;
}

static long long days_from_civil(long long y, int m, int d) {
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    long long yoe = y - era * 400;
    long long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static PyObject *native_iso_ms(PyObject *self, PyObject *value) {
    (void)self;
    if (!PyUnicode_CheckExact(value) || PyUnicode_GET_LENGTH(value) != 24 || PyUnicode_KIND(value) != PyUnicode_1BYTE_KIND)
        Py_RETURN_NONE;
    const Py_UCS1 *c = PyUnicode_1BYTE_DATA(value);
    if (c[4] != '-' || c[7] != '-' || c[10] != 'T' || c[13] != ':' || c[16] != ':' || c[19] != '.' || c[23] != 'Z')
        Py_RETURN_NONE;
    int y, mo, d, h, mi, s, ms;
    if (!digits(c, 4, &y) || !digits(c + 5, 2, &mo) || !digits(c + 8, 2, &d) || !digits(c + 11, 2, &h)
        || !digits(c + 14, 2, &mi) || !digits(c + 17, 2, &s) || !digits(c + 20, 3, &ms))
        Py_RETURN_NONE;
    static const int month_days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > month_days[mo - 1] + (mo == 2 && leap) || h > 23 || mi > 59 || s > 59)
        Py_RETURN_NONE;
    long long t = days_from_civil(y, mo, d) * 86400000LL + ((h * 60LL + mi) * 60LL + s) * 1000LL + ms;
    return PyLong_FromLongLong(t);
}

/* ---- js_float: a JSON number with a fraction or exponent as JavaScript reads it ----
 *
 * js_float(text) -> int | float: `float(text)`, given as an int when it is integral and
 * below 1e21 in magnitude (memory/json_line.py's `js_float`, msgspec's float hook). */
/* A JSON number's text read exactly when its digits make an integer m <= 2^53 and its
 * decimal exponent e is within [-22, 22]: m and 10^|e| are exact doubles, so the one
 * multiplication or division is correctly rounded, as strtod is (Clinger's fast path).
 * 0 (nothing read) for any other text, which PyFloat_FromString reads. */
static int simple_decimal(PyObject *text, double *out) {
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
    (void)text;
    (void)out;
    return 0; /* (x87 extended precision would round twice) */
#else
    static const double tens[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (!PyUnicode_CheckExact(text) || !PyUnicode_IS_ASCII(text)) return 0;
    const unsigned char *c = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0;
    int negative = 0, digits = 0;
    uint64_t m = 0;
    long e = 0;
    if (i < n && c[i] == '-') {
        negative = 1;
        i++;
    }
    for (; i < n && c[i] >= '0' && c[i] <= '9'; i++, digits++) {
        m = m * 10 + (uint64_t)(c[i] - '0');
        if (m > (1ULL << 53)) return 0;
    }
    if (i < n && c[i] == '.') {
        for (i++; i < n && c[i] >= '0' && c[i] <= '9'; i++, digits++, e--) {
            m = m * 10 + (uint64_t)(c[i] - '0');
            if (m > (1ULL << 53)) return 0;
        }
    }
    if (digits == 0) return 0;
    if (i < n && (c[i] == 'e' || c[i] == 'E')) {
        int minus = 0, exp_digits = 0;
        long x = 0;
        i++;
        if (i < n && (c[i] == '+' || c[i] == '-')) minus = c[i++] == '-';
        for (; i < n && c[i] >= '0' && c[i] <= '9'; i++, exp_digits++) {
            if (exp_digits >= 4) return 0;
            x = x * 10 + (c[i] - '0');
        }
        if (exp_digits == 0) return 0;
        e += minus ? -x : x;
    }
    if (i != n || e < -22 || e > 22) return 0;
    double v = (double)m;
    v = e < 0 ? v / tens[-e] : v * tens[e];
    *out = negative ? -v : v;
    return 1;
#endif
}

static PyObject *native_js_float(PyObject *self, PyObject *text) {
    (void)self;
    double x;
    if (simple_decimal(text, &x)) {
        if (floor(x) == x && fabs(x) < 1e21) return PyLong_FromDouble(x);
        return PyFloat_FromDouble(x);
    }
    PyObject *value = PyFloat_FromString(text);
    if (value == NULL) return NULL;
    x = PyFloat_AS_DOUBLE(value);
    if (isfinite(x) && floor(x) == x && fabs(x) < 1e21) {
        Py_DECREF(value);
        return PyLong_FromDouble(x);
    }
    return value;
}


/* ---- count_newlines: data.count(b"\n"), line by line with memchr ----
 *
 * count_newlines(data) -> int. The one-pass rule's line count (memory/state_build.py,
 * `single_pass`): bytes.count tests every byte, memchr skips a line's bytes a vector at a
 * time (a session's lines average over a kilobyte). */
static PyObject *native_count_newlines(PyObject *self, PyObject *data) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *p = (const char *)view.buf, *end = p + view.len;
    Py_ssize_t n = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL) break;
        n++;
        p = nl + 1;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(n);
}

/* ---- tool_output: a successful tool result's stub (compaction/loader.py, `stub_output`) ----
 *
 * tool_output(content) -> (chars, line) | None: for a non-empty list of exact dicts each of
 * type "text" with an exact str `text` or of type "image", Pi's estimate characters of the
 * output (UTF-16 units of every text, 4800 per image) and the one transcript line
 * `truncate(firstLine(text), 100)` of the "\n"-joined text (firstLine: the first text that
 * is not blank, from its first non-whitespace character up to its first "\n"; JavaScript's
 * whitespace); None (nothing decided) for any other content, which the Python code keeps.
 * The truncation is done here for ASCII lines; for any other line `line` is the untruncated
 * first line and the third item is False (the caller truncates it). */
static int js_space(Py_UCS4 c) {
    if (c < 0x80) return c == ' ' || (c >= 9 && c <= 13);
    return c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F
        || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

/* `truncate(line, max_units)` of an ASCII `line` (jsstr.truncate: JavaScript's whitespace
 * runs collapsed to one space, trimmed; over `max_units` units, `max_units - 1` of them
 * and an ellipsis). */
static PyObject *ascii_truncate(const Py_UCS1 *c, Py_ssize_t n, Py_ssize_t max_units) {
    char buf[256];
    if (max_units < 1 || max_units > 200) return NULL;
    Py_ssize_t out = 0, i = 0;
    int pending = 0, over = 0;
    while (i < n && js_space(c[i])) i++;
    for (; i < n; i++) {
        if (js_space(c[i])) {
            pending = 1;
            continue;
        }
        if (pending) {
            if (out == max_units) {
                over = 1;
                break;
            }
            buf[out++] = ' ';
            pending = 0;
        }
        if (out == max_units) {
            over = 1;
            break;
        }
        buf[out++] = (char)c[i];
    }
    if (!over) return PyUnicode_FromStringAndSize(buf, out);
    /* max_units - 1 units, then U+2026 (a prefix ends on no space: collapse already trimmed
       nothing there, as in JavaScript's slice of the collapsed text) */
    PyObject *head = PyUnicode_FromStringAndSize(buf, max_units - 1);
    if (head == NULL) return NULL;
    PyObject *ell = PyUnicode_FromOrdinal(0x2026);
    if (ell == NULL) {
        Py_DECREF(head);
        return NULL;
    }
    PyObject *r = PyUnicode_Concat(head, ell);
    Py_DECREF(head);
    Py_DECREF(ell);
    return r;
}

static PyObject *stub_core(PyObject *content, Py_ssize_t max_units) {
    if (!PyList_CheckExact(content) || PyList_GET_SIZE(content) == 0) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(content);
    long long chars = 0;
    PyObject *first = NULL; /* borrowed: the first text that is not blank */
    Py_ssize_t start = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *part = PyList_GET_ITEM(content, k);
        if (!PyDict_CheckExact(part)) Py_RETURN_NONE;
        PyObject *t = PyDict_GetItemWithError(part, type_key);
        if (t == NULL) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
        if (!PyUnicode_CheckExact(t)) Py_RETURN_NONE;
        if (ascii_eq(t, "text")) {
            PyObject *s = PyDict_GetItemWithError(part, k_text);
            if (s == NULL) {
                if (PyErr_Occurred()) return NULL;
                Py_RETURN_NONE;
            }
            if (!PyUnicode_CheckExact(s)) Py_RETURN_NONE;
            Py_ssize_t len = PyUnicode_GET_LENGTH(s);
            int kind = PyUnicode_KIND(s);
            const void *data = PyUnicode_DATA(s);
            chars += len;
            if (kind == PyUnicode_4BYTE_KIND) {
                const Py_UCS4 *c4 = (const Py_UCS4 *)data;
                for (Py_ssize_t i = 0; i < len; i++) chars += c4[i] > 0xFFFF;
            }
            if (first == NULL) {
                Py_ssize_t i = 0;
                while (i < len && js_space(PyUnicode_READ(kind, data, i))) i++;
                if (i < len) {
                    first = s;
                    start = i;
                }
            }
        } else if (ascii_eq(t, "image")) {
            chars += 4800;
        } else {
            Py_RETURN_NONE;
        }
    }
    PyObject *line;
    int done = 1;
    if (first == NULL) {
        line = PyUnicode_New(0, 0);
    } else {
        Py_ssize_t len = PyUnicode_GET_LENGTH(first);
        Py_ssize_t end = PyUnicode_FindChar(first, '\n', start, len, 1);
        if (end == -2) return NULL;
        if (end < 0) end = len;
        if (PyUnicode_IS_ASCII(first)) {
            line = ascii_truncate(PyUnicode_1BYTE_DATA(first) + start, end - start, max_units);
            if (line == NULL && !PyErr_Occurred()) {
                done = 0;
                line = PyUnicode_Substring(first, start, end);
            }
        } else {
            done = 0;
            line = PyUnicode_Substring(first, start, end);
        }
    }
    if (line == NULL) return NULL;
    PyObject *count = PyLong_FromLongLong(chars);
    if (count == NULL) {
        Py_DECREF(line);
        return NULL;
    }
    PyObject *r = PyTuple_Pack(3, count, line, done ? Py_True : Py_False);
    Py_DECREF(count);
    Py_DECREF(line);
    return r;
}

static PyObject *native_tool_output(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "tool_output(content, max_units)");
        return NULL;
    }
    Py_ssize_t max_units = PyLong_AsSsize_t(args[1]);
    if (max_units == -1 && PyErr_Occurred()) return NULL;
    return stub_core(args[0], max_units);
}


/* ---- feed_message: normalization of the common messages (compaction/normalize.py) ----
 *
 * feed_message(msg, eid, calls, events, tool_output) -> int | None: `Normalizer.feed` of a
 * `message` entry whose message is the exact dict `msg`, for the roles `assistant` (its
 * text and tool-call events; returns the thinking blocks seen), `user` (its event) and a
 * `toolResult` that is not `fabric_exec`'s (its toolResult or bash event, pairing with
 * `calls.get`; an error's event carries its text); `events` receives the events,
 * `calls[id]` each tool call.
 * None, with nothing changed, for anything else (another role, a dict or list that is a
 * subclass): the Python code normalizes it. Dicts are built with the keys in the Python
 * code's order. */
/* (type_key, id_key, parent_key and k_text are the module's, made at import) */
static PyObject *k_entry, *k_source, *k_tcid, *k_name, *k_args, *k_tool_name, *k_is_error, *k_command, *k_exit_code,
    *k_line, *k_content, *k_role, *k_arguments, *k_thinking, *k_content_field, *k_message_get, *k_newline;
static PyObject *v_assistant_text, *v_tool_call, *v_user, *v_tool_result, *v_bash, *v_empty;
static PyObject *k_usage, *k_total_tokens, *k_stop_reason, *k_chars;
static PyObject *k_error_message, *k_timestamp, *v_undefined, *k_message_field, *k_error;

static int calls_set(PyObject *calls, CallsCtx *ctx, PyObject *cid, PyObject *ev) {
    if (ctx == NULL) return PyObject_SetItem(calls, cid, ev);
    PyObject *node = PyLong_FromLong(ctx->node);
    if (node == NULL) return -1;
    int r = PyDict_SetItem(calls, cid, ev) < 0 || PyDict_SetItem(ctx->owners, cid, node) < 0 ? -1 : 0;
    Py_DECREF(node);
    return r;
}

/* calls.get(key): a new reference, None when missing */
static PyObject *calls_get(PyObject *calls, CallsCtx *ctx, PyObject *key) {
    if (ctx == NULL) return PyObject_CallMethodOneArg(calls, k_message_get, key);
    PyObject *v = PyDict_GetItemWithError(calls, key);
    if (v == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    if (v != Py_None) {
        PyObject *owner = PyDict_GetItemWithError(ctx->owners, key);
        if (owner == NULL) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
            return NULL;
        }
        long o = PyLong_AsLong(owner);
        if (o == -1 && PyErr_Occurred()) return NULL;
        if (col_push(ctx->users, &ctx->node) < 0 || col_push(ctx->suppliers, &o) < 0) return NULL;
    }
    return Py_NewRef(v);
}

static inline int str_is(PyObject *v, const char *ascii) {
    return v != NULL && PyUnicode_Check(v) && ascii_eq(v, ascii);
}

/* a borrowed member of an exact dict, NULL when missing (error set on failure) */
static PyObject *dget(PyObject *d, PyObject *key) { return PyDict_GetItemWithError(d, key); }

static PyObject *event3(PyObject *type, PyObject *eid) {
    PyObject *ev = PyDict_New();
    if (ev == NULL) return NULL;
    if (PyDict_SetItem(ev, type_key, type) < 0 || PyDict_SetItem(ev, k_entry, eid) < 0
        || PyDict_SetItem(ev, k_source, eid) < 0) {
        Py_DECREF(ev);
        return NULL;
    }
    return ev;
}

static int emit(PyObject *events, PyObject *ev) {
    if (ev == NULL) return -1;
    int r = PyList_Append(events, ev);
    Py_DECREF(ev);
    return r;
}

/* every dict among the items is an exact dict (so `get` is dict's own) */
static int exact_parts(PyObject *content) {
    Py_ssize_t n = PyList_GET_SIZE(content);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(content, i);
        if (PyDict_Check(p) && !PyDict_CheckExact(p)) return 0;
    }
    return 1;
}

static PyObject *feed_assistant(PyObject *msg, PyObject *eid, PyObject *calls, CallsCtx *ctx, PyObject *events) {
    PyObject *content = dget(msg, k_content_field);
    if (content == NULL) {
        if (PyErr_Occurred()) return NULL;
        return PyLong_FromLong(0);
    }
    if (!PyList_Check(content)) return PyLong_FromLong(0);
    if (!PyList_CheckExact(content) || !exact_parts(content)) Py_RETURN_NONE;
    long thinking = 0;
    Py_INCREF(content);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(content); i++) {
        PyObject *part = PyList_GET_ITEM(content, i);
        if (!PyDict_Check(part)) continue;
        Py_INCREF(part);
        int bad = 0;
        PyObject *pt = dget(part, type_key);
        if (pt == NULL && PyErr_Occurred()) bad = 1;
        else if (str_is(pt, "text")) {
            PyObject *t = dget(part, k_text);
            if (t == NULL && PyErr_Occurred()) bad = 1;
            else if (t != NULL && PyUnicode_Check(t)) {
                PyObject *ev = event3(v_assistant_text, eid);
                if (ev == NULL || PyDict_SetItem(ev, k_text, t) < 0) {
                    Py_XDECREF(ev);
                    bad = 1;
                } else if (emit(events, ev) < 0) bad = 1;
            }
        } else if (str_is(pt, "toolCall")) {
            PyObject *cid = dget(part, id_key);
            PyObject *name = cid == NULL && PyErr_Occurred() ? NULL : dget(part, k_name);
            if (PyErr_Occurred()) bad = 1;
            else if (cid != NULL && name != NULL && PyUnicode_Check(cid) && PyUnicode_Check(name)) {
                PyObject *args = dget(part, k_arguments);
                if (args == NULL && PyErr_Occurred()) bad = 1;
                else {
                    PyObject *owned = (args == NULL || args == Py_None) ? PyDict_New() : (Py_INCREF(args), args);
                    PyObject *ev = owned == NULL ? NULL : event3(v_tool_call, eid);
                    if (ev == NULL || PyDict_SetItem(ev, k_tcid, cid) < 0 || PyDict_SetItem(ev, k_name, name) < 0
                        || PyDict_SetItem(ev, k_args, owned) < 0 || calls_set(calls, ctx, cid, ev) < 0) {
                        Py_XDECREF(ev);
                        bad = 1;
                    } else if (emit(events, ev) < 0) bad = 1;
                    Py_XDECREF(owned);
                }
            }
        } else if (str_is(pt, "thinking")) {
            PyObject *t = dget(part, k_thinking);
            if (t == NULL && PyErr_Occurred()) bad = 1;
            else if (t != NULL && PyUnicode_Check(t)) thinking++;
        }
        Py_DECREF(part);
        if (bad) {
            Py_DECREF(content);
            return NULL;
        }
    }
    Py_DECREF(content);
    return PyLong_FromLong(thinking);
}

/* content_text(content) (session/content.py) of a str or an exact list of exact dicts;
   NULL without an error: not decided here */
static PyObject *text_of(PyObject *content) {
    if (content == NULL) return Py_NewRef(v_empty);
    if (PyUnicode_Check(content)) return Py_NewRef(content);
    if (!PyList_Check(content)) return Py_NewRef(v_empty);
    if (!PyList_CheckExact(content) || !exact_parts(content)) return NULL;
    PyObject *texts = PyList_New(0);
    if (texts == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(content); i++) {
        PyObject *p = PyList_GET_ITEM(content, i);
        if (!PyDict_Check(p)) continue;
        PyObject *pt = dget(p, type_key);
        if (pt == NULL && PyErr_Occurred()) goto fail;
        if (!str_is(pt, "text")) continue;
        PyObject *t = dget(p, k_text);
        if (t == NULL && PyErr_Occurred()) goto fail;
        if (t != NULL && PyUnicode_Check(t) && PyList_Append(texts, t) < 0) goto fail;
    }
    PyObject *r = PyUnicode_Join(k_newline, texts);
    Py_DECREF(texts);
    return r;
fail:
    Py_DECREF(texts);
    return NULL;
}

static PyObject *feed_tool_result(PyObject *msg, PyObject *eid, PyObject *calls, CallsCtx *ctx, PyObject *events,
                                  PyObject *stub_type) {
    PyObject *err = dget(msg, k_is_error);
    if (err == NULL && PyErr_Occurred()) return NULL;
    int is_error = err == Py_True;
    PyObject *tname = dget(msg, k_tool_name);
    if (tname == NULL && PyErr_Occurred()) return NULL;
    if (tname == NULL || !PyUnicode_Check(tname)) tname = v_empty;
    if (str_is(tname, "fabric_exec")) Py_RETURN_NONE; /* its trace: the Python code */
    PyObject *tcid = dget(msg, k_tcid);
    if (tcid == NULL && PyErr_Occurred()) return NULL;
    if (tcid == NULL || !PyUnicode_Check(tcid)) tcid = v_empty;
    PyObject *content = dget(msg, k_content_field);
    if (content == NULL && PyErr_Occurred()) return NULL;
    int stub = content != NULL && Py_TYPE(content) == (PyTypeObject *)stub_type;
    int listed = content != NULL && PyList_Check(content);
    /* an error's text (`content_text` of its content list), read before anything changes */
    PyObject *error_text = NULL;
    if (is_error && listed) {
        error_text = text_of(content);
        if (error_text == NULL) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE; /* not an exact list of exact dicts: the Python code */
        }
    }
    Py_INCREF(tname);
    Py_INCREF(tcid);
    Py_XINCREF(content);
    PyObject *ev = NULL, *result = NULL;
    PyObject *is_error_obj = is_error ? Py_True : Py_False;
    PyObject *pending = calls_get(calls, ctx, tcid);
    if (pending == NULL) goto done;
    if (str_is(tname, "bash")) {
        PyObject *cmd = Py_NewRef(v_empty);
        if (pending != Py_None) {
            PyObject *args = PyObject_GetItem(pending, k_args);
            if (args == NULL) {
                Py_DECREF(cmd);
                goto done;
            }
            if (PyDict_Check(args)) {
                PyObject *c = PyDict_CheckExact(args) ? Py_XNewRef(dget(args, k_command))
                                                      : PyObject_CallMethodOneArg(args, k_message_get, k_command);
                if (c == NULL && PyErr_Occurred()) {
                    Py_DECREF(args);
                    Py_DECREF(cmd);
                    goto done;
                }
                if (c != NULL && PyUnicode_Check(c)) Py_SETREF(cmd, c);
                else Py_XDECREF(c);
            }
            Py_DECREF(args);
        }
        ev = event3(v_bash, eid);
        if (ev == NULL || PyDict_SetItem(ev, k_tcid, tcid) < 0 || PyDict_SetItem(ev, k_command, cmd) < 0
            || PyDict_SetItem(ev, k_is_error, is_error_obj) < 0 || PyDict_SetItem(ev, k_exit_code, Py_None) < 0) {
            Py_DECREF(cmd);
            goto done;
        }
        Py_DECREF(cmd);
        if (error_text != NULL && PyUnicode_GET_LENGTH(error_text) > 0 && PyDict_SetItem(ev, k_error, error_text) < 0)
            goto done;
    } else if (error_text != NULL) {
        ev = event3(v_tool_result, eid);
        if (ev == NULL || PyDict_SetItem(ev, k_tcid, tcid) < 0 || PyDict_SetItem(ev, k_tool_name, tname) < 0
            || PyDict_SetItem(ev, k_is_error, Py_True) < 0 || PyDict_SetItem(ev, k_text, error_text) < 0)
            goto done;
    } else {
        /* (an error without a content list reads as a success without one, but for isError) */
        ev = event3(v_tool_result, eid);
        if (ev == NULL || PyDict_SetItem(ev, k_tcid, tcid) < 0 || PyDict_SetItem(ev, k_tool_name, tname) < 0
            || PyDict_SetItem(ev, k_is_error, is_error_obj) < 0
            || PyDict_SetItem(ev, k_text, (stub || listed) ? Py_None : v_empty) < 0)
            goto done;
        if (stub) {
            PyObject *line = PyObject_GetAttr(content, k_line);
            if (line == NULL || PyDict_SetItemString(ev, "_line", line) < 0) {
                Py_XDECREF(line);
                goto done;
            }
            Py_DECREF(line);
        } else if (listed && PyDict_SetItem(ev, k_content, content) < 0)
            goto done;
    }
    if (PyList_Append(events, ev) < 0) goto done;
    result = PyLong_FromLong(0);
done:
    Py_XDECREF(ev);
    Py_XDECREF(pending);
    Py_XDECREF(error_text);
    Py_DECREF(tname);
    Py_DECREF(tcid);
    Py_XDECREF(content);
    return result;
}

static PyObject *feed_core(PyObject *msg, PyObject *eid, PyObject *calls, CallsCtx *ctx, PyObject *events,
                           PyObject *stub_type) {
    if (!PyDict_CheckExact(msg) || !PyList_CheckExact(events)) Py_RETURN_NONE;
    PyObject *role = dget(msg, k_role);
    if (role == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    if (!PyUnicode_CheckExact(role)) Py_RETURN_NONE;
    if (ascii_eq(role, "assistant")) return feed_assistant(msg, eid, calls, ctx, events);
    if (ascii_eq(role, "toolResult"))
        return feed_tool_result(msg, eid, calls, ctx, events, stub_type);
    if (ascii_eq(role, "user")) {
        PyObject *content = dget(msg, k_content_field);
        if (content == NULL && PyErr_Occurred()) return NULL;
        PyObject *text = text_of(content);
        if (text == NULL) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
        PyObject *ev = event3(v_user, eid);
        if (ev == NULL || PyDict_SetItem(ev, k_text, text) < 0) {
            Py_XDECREF(ev);
            Py_DECREF(text);
            return NULL;
        }
        Py_DECREF(text);
        if (emit(events, ev) < 0) return NULL;
        return PyLong_FromLong(0);
    }
    Py_RETURN_NONE;
}

static PyObject *native_feed_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "feed_message(msg, eid, calls, events, tool_output)");
        return NULL;
    }
    return feed_core(args[0], args[1], args[2], NULL, args[3], args[4]);
}

/* the literal pieces of plain_fields' texts */
static PyObject *t_tool_result_open, *t_close, *t_error_mark, *t_colon, *t_tool, *t_open, *t_no_args, *t_error;

/* The concatenation of `n` str objects as one new str of the kind its widest part needs:
 * what PyUnicode_FromFormat("%U%U...") of them gives, without reading a format. */
static PyObject *concat_strs(PyObject *const *parts, int n) {
    Py_ssize_t len = 0;
    Py_UCS4 widest = 0;
    for (int i = 0; i < n; i++) {
        Py_ssize_t k = PyUnicode_GET_LENGTH(parts[i]);
        if (k > PY_SSIZE_T_MAX - len) return PyErr_NoMemory();
        len += k;
        Py_UCS4 m = PyUnicode_MAX_CHAR_VALUE(parts[i]);
        if (m > widest) widest = m;
    }
    PyObject *out = PyUnicode_New(len, widest);
    if (out == NULL) return NULL;
    Py_ssize_t at = 0;
    for (int i = 0; i < n; i++) {
        Py_ssize_t k = PyUnicode_GET_LENGTH(parts[i]);
        if (k > 0 && PyUnicode_CopyCharacters(out, at, parts[i], 0, k) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        at += k;
    }
    return out;
}

static int feed_init(void) {
#define S(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    S(k_entry, "entryId"); S(k_source, "sourceEntryId");
    S(k_tcid, "toolCallId"); S(k_name, "name"); S(k_args, "args"); S(k_tool_name, "toolName");
    S(k_is_error, "isError"); S(k_command, "command"); S(k_exit_code, "exitCode"); S(k_line, "line");
    S(k_content, "_content"); S(k_role, "role"); S(k_arguments, "arguments");
    S(k_thinking, "thinking");
    S(k_content_field, "content"); S(k_message_get, "get"); S(k_newline, "\n");
    S(v_assistant_text, "assistantText"); S(v_tool_call, "toolCall"); S(v_user, "user");
    S(v_tool_result, "toolResult"); S(v_bash, "bash"); S(v_empty, "");
    S(k_error_message, "errorMessage"); S(k_timestamp, "timestamp"); S(v_undefined, "undefined");
    S(k_message_field, "message"); S(k_error, "error");
    S(k_usage, "usage"); S(k_total_tokens, "totalTokens"); S(k_stop_reason, "stopReason"); S(k_chars, "chars");
    S(t_tool_result_open, "toolResult("); S(t_close, ")"); S(t_error_mark, " [error]"); S(t_colon, ": ");
    S(t_tool, "Tool: "); S(t_open, "("); S(t_no_args, "()"); S(t_error, "Error: ");
#undef S
    return 0;
}


/* ---- message_facts: the facts of the common messages (compaction/facts.py) ----
 *
 * message_facts(msg, kinds, tool_output) -> (kind, tokens, usage, spans, None, deferred) |
 * None: `facts.message_facts(entry, True)` of an entry whose message is the exact dict
 * `msg` with the role `user`, `toolResult` or `assistant` (an assistant's only when its
 * usage is an exact dict with a truthy exact int or float `totalTokens`), `kind` being
 * `kinds[role]` (the shared kind tuples); None for anything else, which the Python code
 * reads (every dict and list read here must be exact, or None). */

static Py_ssize_t u16_len(PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_KIND(s) == PyUnicode_4BYTE_KIND) {
        const Py_UCS4 *c = PyUnicode_4BYTE_DATA(s);
        Py_ssize_t len = n;
        for (Py_ssize_t i = 0; i < len; i++) n += c[i] > 0xFFFF;
    }
    return n;
}

/* 0: read; 1: not decided here; -1: error */
static int content_chars(PyObject *content, long long *chars) {
    if (content == NULL) return 0;
    if (PyUnicode_Check(content)) {
        *chars += u16_len(content);
        return 0;
    }
    if (!PyList_Check(content)) return 0;
    if (!PyList_CheckExact(content) || !exact_parts(content)) return 1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(content); i++) {
        PyObject *p = PyList_GET_ITEM(content, i);
        if (!PyDict_Check(p)) continue;
        PyObject *pt = dget(p, type_key);
        if (pt == NULL && PyErr_Occurred()) return -1;
        if (str_is(pt, "text")) {
            PyObject *t = dget(p, k_text);
            if (t == NULL && PyErr_Occurred()) return -1;
            if (t != NULL && PyUnicode_Check(t)) *chars += u16_len(t);
        } else if (str_is(pt, "image"))
            *chars += 4800;
    }
    return 0;
}

static PyObject *facts_core(PyObject *msg, PyObject *kinds, PyObject *stub_type) {
    if (!PyDict_CheckExact(msg) || !PyDict_CheckExact(kinds)) Py_RETURN_NONE;
    PyObject *role = dget(msg, k_role);
    if (role == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    if (!PyUnicode_CheckExact(role)) Py_RETURN_NONE;
    int assistant = ascii_eq(role, "assistant");
    int result = !assistant && ascii_eq(role, "toolResult");
    if (!assistant && !result && !ascii_eq(role, "user")) Py_RETURN_NONE;
    PyObject *kind = dget(kinds, role);
    if (kind == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *content = dget(msg, k_content_field);
    if (content == NULL && PyErr_Occurred()) return NULL;
    long long chars = 0;
    PyObject *usage = NULL, *deferred = NULL, *tokens = NULL, *spans = NULL, *out = NULL;
    PyObject *arguments = NULL, *calls = NULL;
    if (assistant) {
        PyObject *u = dget(msg, k_usage);
        if (u == NULL && PyErr_Occurred()) return NULL;
        if (u == NULL || !PyDict_CheckExact(u)) Py_RETURN_NONE;
        PyObject *total = dget(u, k_total_tokens);
        if (total == NULL && PyErr_Occurred()) return NULL;
        if (total == NULL || !(PyLong_CheckExact(total) || PyFloat_CheckExact(total))) Py_RETURN_NONE;
        int truthy = PyObject_IsTrue(total);
        if (truthy < 0) return NULL;
        if (!truthy) Py_RETURN_NONE;
        if (content != NULL && PyList_Check(content) && (!PyList_CheckExact(content) || !exact_parts(content)))
            Py_RETURN_NONE;
        PyObject *stop = dget(msg, k_stop_reason);
        if (stop == NULL && PyErr_Occurred()) return NULL;
        int ok = !(str_is(stop, "error") || str_is(stop, "aborted"));
        usage = PyTuple_Pack(2, ok ? total : Py_None, total);
        if (usage == NULL) return NULL;
        arguments = PyList_New(0);
        if (arguments == NULL) goto done;
        if (content != NULL && PyList_Check(content)) {
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(content); i++) {
                PyObject *p = PyList_GET_ITEM(content, i);
                if (!PyDict_Check(p)) continue;
                PyObject *pt = dget(p, type_key);
                if (pt == NULL && PyErr_Occurred()) goto done;
                PyObject *key = NULL;
                if (str_is(pt, "text")) key = k_text;
                else if (str_is(pt, "thinking")) key = k_thinking;
                else if (str_is(pt, "toolCall")) key = k_name;
                if (key == NULL) continue;
                PyObject *t = dget(p, key);
                if (t == NULL && PyErr_Occurred()) goto done;
                if (t != NULL && PyUnicode_Check(t)) chars += u16_len(t);
                if (key == k_name) {
                    PyObject *a = dget(p, k_arguments);
                    if (a == NULL && PyErr_Occurred()) goto done;
                    if (a != NULL && PyList_Append(arguments, a) < 0) goto done;
                }
            }
        }
        if (PyList_GET_SIZE(arguments) > 0) {
            PyObject *c = PyLong_FromLongLong(chars);
            PyObject *tup = c == NULL ? NULL : PyList_AsTuple(arguments);
            deferred = tup == NULL ? NULL : PyTuple_Pack(2, c, tup);
            Py_XDECREF(c);
            Py_XDECREF(tup);
            if (deferred == NULL) goto done;
            tokens = PyLong_FromLong(-1);
        } else
            tokens = PyLong_FromLongLong((chars + 3) / 4);
    } else {
        if (result && content != NULL && Py_TYPE(content) == (PyTypeObject *)stub_type) {
            PyObject *c = PyObject_GetAttr(content, k_chars);
            if (c == NULL) return NULL;
            PyObject *four = PyLong_FromLong(4);
            PyObject *neg = four == NULL ? NULL : PyNumber_Negative(c);
            PyObject *q = neg == NULL ? NULL : PyNumber_FloorDivide(neg, four);
            tokens = q == NULL ? NULL : PyNumber_Negative(q);
            Py_DECREF(c);
            Py_XDECREF(four);
            Py_XDECREF(neg);
            Py_XDECREF(q);
            if (tokens == NULL) return NULL;
        } else {
            int r = content_chars(content, &chars);
            if (r < 0) return NULL;
            if (r > 0) Py_RETURN_NONE;
            tokens = PyLong_FromLongLong((chars + 3) / 4);
        }
    }
    if (tokens == NULL) goto done;
    /* the call/result spans (exact dicts only) */
    calls = PyList_New(0);
    if (calls == NULL) goto done;
    if (content != NULL && PyList_CheckExact(content)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(content); i++) {
            PyObject *p = PyList_GET_ITEM(content, i);
            if (!PyDict_CheckExact(p)) continue;
            PyObject *pt = dget(p, type_key);
            if (pt == NULL && PyErr_Occurred()) goto done;
            if (!str_is(pt, "toolCall")) continue;
            PyObject *cid = dget(p, id_key);
            if (cid == NULL && PyErr_Occurred()) goto done;
            if (cid != NULL && PyUnicode_CheckExact(cid) && PyUnicode_GET_LENGTH(cid) > 0
                && PyList_Append(calls, cid) < 0)
                goto done;
        }
    }
    PyObject *rid = NULL;
    if (result) {
        rid = dget(msg, k_tcid);
        if (rid == NULL && PyErr_Occurred()) goto done;
        if (rid != NULL && !(PyUnicode_CheckExact(rid) && PyUnicode_GET_LENGTH(rid) > 0)) rid = NULL;
    }
    if (PyList_GET_SIZE(calls) > 0 || rid != NULL) {
        PyObject *tup = PyList_AsTuple(calls);
        if (tup == NULL) goto done;
        spans = PyTuple_Pack(2, tup, rid != NULL ? rid : Py_None);
        Py_DECREF(tup);
        if (spans == NULL) goto done;
    }
    out = PyTuple_Pack(6, kind, tokens, usage != NULL ? usage : Py_None, spans != NULL ? spans : Py_None, Py_None,
                       deferred != NULL ? deferred : Py_None);
done:
    Py_XDECREF(usage);
    Py_XDECREF(deferred);
    Py_XDECREF(tokens);
    Py_XDECREF(spans);
    Py_XDECREF(arguments);
    Py_XDECREF(calls);
    return out;
}

static PyObject *native_message_facts(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "message_facts(msg, kinds, tool_output)");
        return NULL;
    }
    return facts_core(args[0], args[1], args[2]);
}


/* ---- message_node: a preview pass-1 node that is a common message (compaction/scan.py) ----
 *
 * message_node(msg, eid, calls, events, kinds, tool_output, truncate) ->
 * (kind, tokens, usage, spans, deferred, thinking) | None: what the pass-1 sink does with
 * a `message` node whose message is the exact dict `msg`, in one call: a successful tool
 * result's stub (`stub_output`; `truncate(line)` truncates a line that is not ASCII), its
 * facts (`message_facts`) and its events (`Normalizer.feed`; `thinking` = the erased
 * thinking blocks seen). None, with nothing changed, wherever one of the three would
 * leave the message to the Python code. */
static int message_node_ok(PyObject *msg, PyObject *role, PyObject *kinds, PyObject **content_out) {
    int assistant = ascii_eq(role, "assistant");
    int result = !assistant && ascii_eq(role, "toolResult");
    if (!assistant && !result && !ascii_eq(role, "user")) return 0;
    PyObject *kind = dget(kinds, role);
    if (kind == NULL) return PyErr_Occurred() ? -1 : 0;
    PyObject *content = dget(msg, k_content_field);
    if (content == NULL && PyErr_Occurred()) return -1;
    if (content != NULL && PyList_Check(content) && (!PyList_CheckExact(content) || !exact_parts(content))) return 0;
    *content_out = content;
    if (assistant) {
        PyObject *u = dget(msg, k_usage);
        if (u == NULL) return PyErr_Occurred() ? -1 : 0;
        if (!PyDict_CheckExact(u)) return 0;
        PyObject *total = dget(u, k_total_tokens);
        if (total == NULL) return PyErr_Occurred() ? -1 : 0;
        if (!(PyLong_CheckExact(total) || PyFloat_CheckExact(total))) return 0;
        return PyObject_IsTrue(total);
    }
    if (result) {
        PyObject *err = dget(msg, k_is_error);
        if (err == NULL && PyErr_Occurred()) return -1;
        PyObject *tname = dget(msg, k_tool_name);
        if (tname == NULL && PyErr_Occurred()) return -1;
        if (str_is(tname, "fabric_exec")) return 0;
        return err == Py_True ? 1 : 2; /* a success's output is stubbed, an error's text kept */
    }
    return 1;
}

/* ToolOutput(chars, line) (compaction/loader.py): its __init__ only sets its two slots,
   so they are set here on a fresh instance without running it */
static PyObject *new_stub(PyObject *stub_type, PyObject *chars, PyObject *line) {
    PyTypeObject *t = (PyTypeObject *)stub_type;
    if (!PyType_Check(stub_type) || t->tp_alloc == NULL)
        return PyObject_CallFunctionObjArgs(stub_type, chars, line, NULL);
    PyObject *o = t->tp_alloc(t, 0);
    if (o == NULL) return NULL;
    if (PyObject_SetAttr(o, k_chars, chars) < 0 || PyObject_SetAttr(o, k_line, line) < 0) {
        Py_DECREF(o);
        return NULL;
    }
    return o;
}

static PyObject *message_node_core(PyObject *msg, PyObject *eid, PyObject *calls, CallsCtx *ctx, PyObject *events,
                                   PyObject *kinds, PyObject *stub_type, PyObject *truncate) {
    if (!PyDict_CheckExact(msg) || !PyList_CheckExact(events) || !PyDict_CheckExact(kinds)) Py_RETURN_NONE;
    PyObject *role = dget(msg, k_role);
    if (role == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    if (!PyUnicode_CheckExact(role)) Py_RETURN_NONE;
    PyObject *content = NULL;
    int ok = message_node_ok(msg, role, kinds, &content);
    if (ok < 0) return NULL;
    if (ok == 0) Py_RETURN_NONE;
    if (ok == 2 && content != NULL && PyList_CheckExact(content)) {
        PyObject *out = stub_core(content, 100);
        if (out == NULL) return NULL;
        if (out != Py_None) {
            PyObject *line = PyTuple_GET_ITEM(out, 1);
            PyObject *shown = PyTuple_GET_ITEM(out, 2) == Py_True ? Py_NewRef(line) : PyObject_CallOneArg(truncate, line);
            PyObject *stub = shown == NULL ? NULL : new_stub(stub_type, PyTuple_GET_ITEM(out, 0), shown);
            Py_XDECREF(shown);
            Py_DECREF(out);
            if (stub == NULL) return NULL;
            int r = PyDict_SetItem(msg, k_content_field, stub);
            Py_DECREF(stub);
            if (r < 0) return NULL;
        } else
            Py_DECREF(out);
    }
    PyObject *facts = facts_core(msg, kinds, stub_type);
    if (facts == NULL) return NULL;
    if (facts == Py_None) {
        Py_DECREF(facts);
        PyErr_SetString(PyExc_SystemError, "message_node: facts left to Python after the checks");
        return NULL;
    }
    PyObject *seen = feed_core(msg, eid, calls, ctx, events, stub_type);
    if (seen == NULL || seen == Py_None) {
        if (seen != NULL) {
            Py_DECREF(seen);
            PyErr_SetString(PyExc_SystemError, "message_node: events left to Python after the checks");
        }
        Py_DECREF(facts);
        return NULL;
    }
    PyObject *r = PyTuple_Pack(6, PyTuple_GET_ITEM(facts, 0), PyTuple_GET_ITEM(facts, 1), PyTuple_GET_ITEM(facts, 2),
                               PyTuple_GET_ITEM(facts, 3), PyTuple_GET_ITEM(facts, 5), seen);
    Py_DECREF(facts);
    Py_DECREF(seen);
    return r;
}

static PyObject *native_message_node(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "message_node(msg, eid, calls, events, kinds, tool_output, truncate)");
        return NULL;
    }
    return message_node_core(args[0], args[1], args[2], NULL, args[3], args[4], args[5], args[6]);
}

/* ---- read_lines' sink (declared before read_lines) ---- */

static int sink_column(PyObject *spec, Py_ssize_t at, const char *typecode, Col *col, PyObject **out) {
    PyObject *a = PyTuple_GET_ITEM(spec, at);
    PyObject *code = PyObject_GetAttrString(a, "typecode");
    PyObject *size = code == NULL ? NULL : PyObject_GetAttrString(a, "itemsize");
    int ok = code != NULL && size != NULL && PyUnicode_Check(code)
             && ascii_eq(code, typecode);
    Py_ssize_t item = ok ? PyLong_AsSsize_t(size) : -1;
    Py_XDECREF(code);
    Py_XDECREF(size);
    if (PyErr_Occurred()) return -1;
    if (!ok || item <= 0) {
        PyErr_Format(PyExc_TypeError, "read_lines: sink item %zd is not an array of type '%s'", at, typecode);
        return -1;
    }
    col->v = NULL;
    col->n = col->cap = 0;
    col->item = item;
    *out = a;
    return 0;
}

/* the sink tuple: (kinds, tokens, usage, spans, deferred, id blob, ids.append, offsets,
   lengths, parents, [previous id], calls, calls.owners, calls.users, calls.suppliers,
   events, starts, thinking, normalizer, MESSAGE_KINDS, ToolOutput, truncate) */
static int sink_open(NodeSink *k, PyObject *spec) {
    memset(k, 0, sizeof(*k));
    if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != 22) {
        PyErr_SetString(PyExc_TypeError, "read_lines: the sink is a tuple of 22 items");
        return -1;
    }
#define G(i) PyTuple_GET_ITEM(spec, i)
    k->kinds = G(0);
    k->usage = G(2);
    k->spans = G(3);
    k->deferred = G(4);
    k->blob = G(5);
    k->ids_append = G(6);
    k->parents = G(9);
    k->last = G(10);
    k->calls = G(11);
    k->owners = G(12);
    k->events = G(15);
    k->thinking = G(17);
    k->nz = G(18);
    k->kind_table = G(19);
    k->stub_type = G(20);
    k->truncate = G(21);
#undef G
    if (!PyList_CheckExact(k->kinds) || !PyDict_CheckExact(k->usage) || !PyDict_CheckExact(k->spans)
        || !PyDict_CheckExact(k->deferred) || !PyByteArray_CheckExact(k->blob) || !PyDict_CheckExact(k->parents)
        || !PyList_CheckExact(k->last) || PyList_GET_SIZE(k->last) != 1 || !PyDict_Check(k->calls)
        || !PyDict_CheckExact(k->owners) || !PyList_CheckExact(k->events) || !PyDict_CheckExact(k->thinking)
        || !PyDict_CheckExact(k->kind_table)) {
        PyErr_SetString(PyExc_TypeError, "read_lines: a sink item has the wrong type");
        return -1;
    }
    if (sink_column(spec, 1, "q", &k->c_tokens, &k->tokens) < 0 || sink_column(spec, 7, "q", &k->c_offsets, &k->offsets) < 0
        || sink_column(spec, 8, "i", &k->c_lengths, &k->lengths) < 0
        || sink_column(spec, 13, "l", &k->c_users, &k->users_col) < 0
        || sink_column(spec, 14, "l", &k->c_suppliers, &k->suppliers_col) < 0
        || sink_column(spec, 16, "i", &k->c_starts, &k->starts) < 0)
        return -1;
    if (k->c_tokens.item != sizeof(long long) || k->c_offsets.item != sizeof(long long) || k->c_lengths.item != sizeof(int)
        || k->c_starts.item != sizeof(int) || k->c_users.item != sizeof(long) || k->c_suppliers.item != sizeof(long)) {
        PyErr_SetString(PyExc_TypeError, "read_lines: a sink column's item size is not its C type's");
        return -1;
    }
    return 0;
}

static int sink_flush(NodeSink *k) {
    int rc = 0;
    rc |= col_flush(&k->c_tokens, k->tokens);
    rc |= col_flush(&k->c_offsets, k->offsets);
    rc |= col_flush(&k->c_lengths, k->lengths);
    rc |= col_flush(&k->c_starts, k->starts);
    rc |= col_flush(&k->c_users, k->users_col);
    rc |= col_flush(&k->c_suppliers, k->suppliers_col);
    return rc ? -1 : 0;
}

static void sink_close(NodeSink *k) {
    Col *cols[6] = {&k->c_tokens, &k->c_offsets, &k->c_lengths, &k->c_starts, &k->c_users, &k->c_suppliers};
    for (int j = 0; j < 6; j++) {
        free(cols[j]->v);
        cols[j]->v = NULL;
        cols[j]->n = cols[j]->cap = 0;
    }
}

/* a value set in a dict keyed by the node's number unless it is None */
static int sink_note(PyObject *map, PyObject *i, PyObject *v) {
    return v == Py_None ? 0 : PyDict_SetItem(map, i, v);
}

/* `node(value, eid, pid, offset, length)` of scan.py for a node that is a `message`
   whose message `message_node` takes: 1 done, 0 left to `node` (nothing changed), -1 an
   error */
static int sink_node(NodeSink *k, PyObject *value, PyObject *eid, PyObject *pid, long long offset, Py_ssize_t length) {
    PyObject *t = dget(value, type_key);
    if (t == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!str_is(t, "message")) return 0;
    PyObject *m = dget(value, k_message_field);
    if (m == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!PyDict_CheckExact(m)) return 0;
    Py_ssize_t i = PyList_GET_SIZE(k->kinds);
    int at = (int)PyList_GET_SIZE(k->events);
    Col *users = &k->c_users, *suppliers = &k->c_suppliers;
    CallsCtx ctx = {k->owners, users, suppliers, (long)i};
    Py_INCREF(m);
    PyObject *done = message_node_core(m, eid, k->calls, &ctx, k->events, k->kind_table, k->stub_type, k->truncate);
    Py_DECREF(m);
    if (done == NULL) return -1;
    if (done == Py_None) {
        Py_DECREF(done);
        return 0;
    }
    int rc = -1;
    PyObject *num = PyLong_FromSsize_t(i);
    if (num == NULL) goto out;
    /* the parent of a node that does not follow its parent in the file */
    PyObject *prev = PyList_GET_ITEM(k->last, 0);
    int differs = i == 0 ? 1 : PyObject_RichCompareBool(pid, prev, Py_NE);
    if (differs < 0 || (differs && PyDict_SetItem(k->parents, num, pid) < 0)) goto out;
    Py_INCREF(eid);
    if (PyList_SetItem(k->last, 0, eid) < 0) goto out;
    /* the id column (IdTable.append) */
    if (PyUnicode_GET_LENGTH(eid) == 8 && PyUnicode_IS_ASCII(eid)) {
        Py_ssize_t old = PyByteArray_GET_SIZE(k->blob);
        if (PyByteArray_Resize(k->blob, old + 8) < 0) goto out;
        memcpy(PyByteArray_AS_STRING(k->blob) + old, PyUnicode_1BYTE_DATA(eid), 8);
    } else {
        PyObject *r = PyObject_CallOneArg(k->ids_append, eid);
        if (r == NULL) goto out;
        Py_DECREF(r);
    }
    int len32 = (int)length;
    long long tokens = PyLong_AsLongLong(PyTuple_GET_ITEM(done, 1));
    if (tokens == -1 && PyErr_Occurred()) goto out;
    if (col_push(&k->c_offsets, &offset) < 0 || col_push(&k->c_lengths, &len32) < 0) goto out;
    if (PyList_Append(k->kinds, PyTuple_GET_ITEM(done, 0)) < 0 || col_push(&k->c_tokens, &tokens) < 0) goto out;
    if (sink_note(k->usage, num, PyTuple_GET_ITEM(done, 2)) < 0 || sink_note(k->spans, num, PyTuple_GET_ITEM(done, 3)) < 0
        || sink_note(k->deferred, num, PyTuple_GET_ITEM(done, 4)) < 0)
        goto out;
    if (col_push(&k->c_starts, &at) < 0) goto out;
    PyObject *seen = PyTuple_GET_ITEM(done, 5);
    int any = PyObject_IsTrue(seen);
    if (any < 0) goto out;
    if (any) {
        PyObject *before = PyObject_GetAttr(k->nz, k_thinking);
        PyObject *sum = before == NULL ? NULL : PyNumber_Add(before, seen);
        Py_XDECREF(before);
        if (sum == NULL) goto out;
        int r = PyObject_SetAttr(k->nz, k_thinking, sum);
        Py_DECREF(sum);
        if (r < 0 || PyDict_SetItem(k->thinking, num, seen) < 0) goto out;
    }
    rc = 1;
out:
    Py_XDECREF(num);
    Py_DECREF(done);
    return rc;
}


/* ---- plain_fields: a memory record's fields of a plain message (memory/entry_text.py) ----
 *
 * plain_fields(raw, message, role, index_tool_output, index_thinking, limit, args_summary,
 * path_key, entry_timestamp) -> (entryId, parentId, toolName, text, timestamp, isError,
 * truncated, filesTouched) | None: `Normalizer._plain_fields` of an entry `plain_role`
 * admits (`role` its role), for content of exact lists and dicts, an `isError` that is
 * absent, null or a bool, and tool-call names that are strings; None (not decided here)
 * for anything else. `args_summary(arguments, True)` and `entry_timestamp(raw, message)`
 * are the Python functions (the timestamp is read here when it is JavaScript's ISO form);
 * the paths are collected here (`collect_paths`), `path_key(key)` deciding a key that is
 * not ASCII. `limit`: None or the record text's limit in scalars. */

static PyObject *native_iso_ms(PyObject *self, PyObject *value);

/* a key ending in file, files, path or paths, any case (`_PATH_KEY`: `$` also matches
   before a final newline); -1 with an error */
static int path_key_ascii(PyObject *key, PyObject *path_key) {
    if (!PyUnicode_IS_ASCII(key)) {
        PyObject *m = PyObject_CallOneArg(path_key, key);
        if (m == NULL) return -1;
        int r = m != Py_None;
        Py_DECREF(m);
        return r;
    }
    const Py_UCS1 *c = PyUnicode_1BYTE_DATA(key);
    Py_ssize_t n = PyUnicode_GET_LENGTH(key);
    if (n > 0 && c[n - 1] == '\n') n--;
    if (n > 0 && (c[n - 1] | 0x20) == 's') n--;
    if (n < 4) return 0;
    char tail[4];
    for (int i = 0; i < 4; i++) tail[i] = (char)(c[n - 4 + i] | 0x20);
    /* (| 0x20 maps only letters onto lowercase letters; the tails compared are letters) */
    return memcmp(tail, "file", 4) == 0 || memcmp(tail, "path", 4) == 0;
}

static int collect_paths_c(PyObject *value, PyObject *key, PyObject *out, PyObject *path_key, int depth) {
    if (depth > 10000) {
        PyErr_SetString(PyExc_RecursionError, "collect_paths: nested too deep");
        return -1;
    }
    if (PyUnicode_Check(value)) {
        if (key == NULL) return 0;
        int m = path_key_ascii(key, path_key);
        if (m <= 0) return m;
        Py_ssize_t n = PyUnicode_GET_LENGTH(value), a = 0, b = n;
        int kind = PyUnicode_KIND(value);
        const void *data = PyUnicode_DATA(value);
        while (a < b && js_space(PyUnicode_READ(kind, data, a))) a++;
        while (b > a && js_space(PyUnicode_READ(kind, data, b - 1))) b--;
        if (a == b) return 0;
        PyObject *t = (a == 0 && b == n && PyUnicode_CheckExact(value)) ? Py_NewRef(value) : PyUnicode_Substring(value, a, b);
        if (t == NULL) return -1;
        PyObject *had = PyDict_SetDefault(out, t, Py_None);
        Py_DECREF(t);
        return had == NULL ? -1 : 0;
    }
    if (PyDict_Check(value)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(value, &pos, &k, &v)) {
            if (!PyUnicode_Check(k)) {
                PyErr_SetString(PyExc_TypeError, "collect_paths: a key that is not a str");
                return -1;
            }
            Py_INCREF(k);
            Py_INCREF(v);
            int r = collect_paths_c(v, k, out, path_key, depth + 1);
            Py_DECREF(k);
            Py_DECREF(v);
            if (r < 0) return -1;
        }
        return 0;
    }
    if (PyList_Check(value)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++) {
            PyObject *v = PyList_GET_ITEM(value, i);
            Py_INCREF(v);
            int r = collect_paths_c(v, key, out, path_key, depth + 1);
            Py_DECREF(v);
            if (r < 0) return -1;
        }
    }
    return 0;
}

/* every dict and list inside `value` is exact (so the walk reads what Python's reads) */
static int all_exact(PyObject *value, int depth) {
    if (depth > 10000) return 0;
    if (PyDict_Check(value)) {
        if (!PyDict_CheckExact(value)) return 0;
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(value, &pos, &k, &v))
            if (!PyUnicode_CheckExact(k) || !all_exact(v, depth + 1)) return 0;
        return 1;
    }
    if (PyList_Check(value)) {
        if (!PyList_CheckExact(value)) return 0;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++)
            if (!all_exact(PyList_GET_ITEM(value, i), depth + 1)) return 0;
        return 1;
    }
    return 1;
}

static PyObject *native_collect_paths(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "collect_paths(value, out, path_key)");
        return NULL;
    }
    if (!all_exact(args[0], 0)) Py_RETURN_FALSE;
    if (collect_paths_c(args[0], NULL, args[1], args[2], 0) < 0) return NULL;
    Py_RETURN_TRUE;
}

/* args_summary(arguments, limit) -> str | None: a tool call's argument summary
 * (`entry_fields.args_summary`, memory/entry_fields.py): `JSON.stringify(arguments)` cut
 * to `limit` Unicode scalars plus "…" when longer, written only as far as the cut (a
 * `write` call's arguments hold a whole file; the summary keeps its first 400 scalars).
 * None, for the Python code, when what is written up to the cut holds a float, an integer
 * beyond JavaScript's safe range, a surrogate code point, an object key that starts with a
 * digit (JavaScript lists integer-like keys first), a container nested deeper than
 * SUMMARY_DEPTH or any value that is not an exact str, int, bool, None, dict or list.
 * tests/engine/memory/test_native_args_summary.py compares it with the Python code. */
#define SUMMARY_DEPTH 100

typedef struct {
    Py_UCS4 *buf;
    Py_ssize_t n, cap;
    int state; /* 0 writing; 1 the cut was passed (truncated); 2 left to Python */
} Summary;

static void sum_put(Summary *s, Py_UCS4 ch) {
    if (s->state) return;
    if (ch >= 0xD800 && ch <= 0xDFFF) { /* (Python joins raw pairs first: its length may differ) */
        s->state = 2;
        return;
    }
    if (s->n == s->cap) {
        s->state = 1;
        return;
    }
    s->buf[s->n++] = ch;
}

static void sum_ascii(Summary *s, const char *text) {
    for (; *text && !s->state; text++) sum_put(s, (Py_UCS4)(unsigned char)*text);
}

static void sum_quote(Summary *s, PyObject *str) {
    int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    Py_ssize_t len = PyUnicode_GET_LENGTH(str);
    static const char hex[] = "0123456789abcdef";
    sum_put(s, '"');
    for (Py_ssize_t i = 0; i < len && !s->state; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == '"' || c == '\\') {
            sum_put(s, '\\');
            sum_put(s, c);
        } else if (c < 0x20) {
            sum_put(s, '\\');
            switch (c) {
            case '\b': sum_put(s, 'b'); break;
            case '\f': sum_put(s, 'f'); break;
            case '\n': sum_put(s, 'n'); break;
            case '\r': sum_put(s, 'r'); break;
            case '\t': sum_put(s, 't'); break;
            default:
                sum_ascii(s, "u00");
                sum_put(s, (Py_UCS4)hex[c >> 4]);
                sum_put(s, (Py_UCS4)hex[c & 15]);
            }
        } else
            sum_put(s, c);
    }
    sum_put(s, '"');
}

static void sum_value(Summary *s, PyObject *v, int depth) {
    if (s->state) return;
    if (PyUnicode_CheckExact(v)) {
        sum_quote(s, v);
    } else if (v == Py_None) {
        sum_ascii(s, "null");
    } else if (v == Py_True) {
        sum_ascii(s, "true");
    } else if (v == Py_False) {
        sum_ascii(s, "false");
    } else if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            s->state = 2;
            return;
        }
        if (overflow || x > 9007199254740991LL || x < -9007199254740991LL) { /* (JS: a double) */
            s->state = 2;
            return;
        }
        char digits[32];
        snprintf(digits, sizeof digits, "%lld", x);
        sum_ascii(s, digits);
    } else if (depth >= SUMMARY_DEPTH) {
        s->state = 2;
    } else if (PyDict_CheckExact(v)) {
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        while (PyDict_Next(v, &pos, &key, &item)) { /* every key, before the first is written */
            if (!PyUnicode_CheckExact(key)
                || (PyUnicode_GET_LENGTH(key) > 0 && Py_UNICODE_ISDIGIT(PyUnicode_READ_CHAR(key, 0)))) {
                s->state = 2;
                return;
            }
        }
        sum_put(s, '{');
        pos = 0;
        int first = 1;
        while (!s->state && PyDict_Next(v, &pos, &key, &item)) {
            if (!first) sum_put(s, ',');
            first = 0;
            sum_quote(s, key);
            sum_put(s, ':');
            Py_INCREF(item);
            sum_value(s, item, depth + 1);
            Py_DECREF(item);
        }
        sum_put(s, '}');
    } else if (PyList_CheckExact(v)) {
        sum_put(s, '[');
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v) && !s->state; i++) {
            if (i) sum_put(s, ',');
            PyObject *item = PyList_GET_ITEM(v, i);
            Py_INCREF(item);
            sum_value(s, item, depth + 1);
            Py_DECREF(item);
        }
        sum_put(s, ']');
    } else
        s->state = 2;
}

/* new reference: the summary, Py_None (left to Python) or NULL with an error set */
static PyObject *summary_core(PyObject *arguments, Py_ssize_t limit) {
    if (limit < 0) Py_RETURN_NONE;
    Summary s = {NULL, 0, limit, 0};
    s.buf = (Py_UCS4 *)PyMem_Malloc(sizeof(Py_UCS4) * (size_t)(limit + 2));
    if (s.buf == NULL) return PyErr_NoMemory();
    sum_value(&s, arguments, 0);
    PyObject *out;
    if (s.state == 2)
        out = Py_NewRef(Py_None);
    else {
        if (s.state == 1) s.buf[s.n++] = 0x2026; /* "…" */
        out = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, s.buf, s.n);
    }
    PyMem_Free(s.buf);
    return out;
}

static PyObject *native_args_summary(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "args_summary(arguments, limit)");
        return NULL;
    }
    Py_ssize_t limit = PyLong_AsSsize_t(args[1]);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    return summary_core(args[0], limit);
}

static PyObject *format_tool(PyObject *shown, PyObject *summary) {
    /* "Tool: {shown}({summary})", summary NULL: "Tool: {shown}()" */
    PyObject *parts[5] = {t_tool, shown, t_open, summary, t_close}, *bare[3] = {t_tool, shown, t_no_args};
    return summary == NULL ? concat_strs(bare, 3) : concat_strs(parts, 5);
}

static PyObject *native_plain_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "plain_fields(raw, message, role, index_tool_output, index_thinking, limit, args_summary, "
                        "path_key, entry_timestamp, summary_limit)");
        return NULL;
    }
    Py_ssize_t summary_limit = PyLong_AsSsize_t(args[9]);
    if (summary_limit == -1 && PyErr_Occurred()) return NULL;
    PyObject *raw = args[0], *message = args[1], *role = args[2], *limit_obj = args[5];
    int index_tool_output = PyObject_IsTrue(args[3]), index_thinking = PyObject_IsTrue(args[4]);
    if (index_tool_output < 0 || index_thinking < 0) return NULL;
    if (!PyDict_CheckExact(raw) || !PyDict_CheckExact(message) || !PyUnicode_CheckExact(role)) Py_RETURN_NONE;
    Py_ssize_t limit = 0;
    int limited = limit_obj != Py_None;
    if (limited) {
        limit = PyLong_AsSsize_t(limit_obj);
        if (limit == -1 && PyErr_Occurred()) return NULL;
    }
    PyObject *flag = dget(message, k_is_error);
    if (flag == NULL && PyErr_Occurred()) return NULL;
    if (flag != NULL && flag != Py_None && flag != Py_True && flag != Py_False) Py_RETURN_NONE;
    int is_error = flag == Py_True;
    PyObject *content = dget(message, k_content_field);
    if (content == NULL && PyErr_Occurred()) return NULL;
    if (content != NULL && PyList_Check(content) && (!PyList_CheckExact(content) || !exact_parts(content))) Py_RETURN_NONE;
    PyObject *tool_name = Py_None, *text = NULL, *files = NULL, *found = NULL, *pieces = NULL, *result = NULL;
    Py_INCREF(tool_name);
    if (ascii_eq(role, "user")) {
        text = text_of(content);
        if (text == NULL) goto done;
    } else if (ascii_eq(role, "toolResult")) {
        PyObject *tn = dget(message, k_tool_name);
        if (tn == NULL && PyErr_Occurred()) goto done;
        if (tn == NULL || !PyUnicode_CheckExact(tn)) { /* (plain_role admits only a str) */
            Py_DECREF(tool_name);
            Py_RETURN_NONE;
        }
        /* "toolResult(<name>)[ [error]][: <body>]", "toolResult" without a name */
        PyObject *parts[7];
        int n = 0;
        if (PyUnicode_GET_LENGTH(tn) > 0) {
            Py_SETREF(tool_name, Py_NewRef(tn));
            parts[n++] = t_tool_result_open;
            parts[n++] = tn;
            parts[n++] = t_close;
        } else
            parts[n++] = v_tool_result;
        if (is_error) parts[n++] = t_error_mark;
        PyObject *body = index_tool_output ? text_of(content) : NULL;
        if (index_tool_output && body == NULL) goto done;
        if (body != NULL && PyUnicode_GET_LENGTH(body) > 0) {
            parts[n++] = t_colon;
            parts[n++] = body;
        }
        text = concat_strs(parts, n);
        Py_XDECREF(body);
        if (text == NULL) goto done;
    } else if (ascii_eq(role, "assistant")) {
        pieces = PyList_New(0);
        if (pieces == NULL) goto done;
        if (content != NULL && PyList_Check(content)) {
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(content); i++) {
                PyObject *part = PyList_GET_ITEM(content, i);
                if (!PyDict_Check(part)) continue;
                PyObject *pt = dget(part, type_key);
                if (pt == NULL && PyErr_Occurred()) goto done;
                PyObject *piece = NULL;
                if (str_is(pt, "text")) {
                    PyObject *t = dget(part, k_text);
                    if (t == NULL && PyErr_Occurred()) goto done;
                    if (t != NULL && PyUnicode_Check(t)) piece = Py_NewRef(t);
                } else if (str_is(pt, "toolCall")) {
                    PyObject *name = dget(part, k_name);
                    if (name == NULL && PyErr_Occurred()) goto done;
                    if (name != NULL && !PyUnicode_Check(name)) { /* js_string of a non-str: Python */
                        Py_CLEAR(tool_name);
                        result = Py_NewRef(Py_None);
                        goto done;
                    }
                    if (name != NULL && tool_name == Py_None) Py_SETREF(tool_name, Py_NewRef(name));
                    PyObject *shown = name != NULL ? name : v_undefined;
                    PyObject *arguments = dget(part, k_arguments);
                    if (arguments == NULL && PyErr_Occurred()) goto done;
                    if (arguments != NULL) {
                        Py_INCREF(arguments);
                        PyObject *summary = summary_core(arguments, summary_limit);
                        if (summary == Py_None) { /* (a shape the C summary leaves to Python) */
                            Py_DECREF(summary);
                            summary = PyObject_CallFunctionObjArgs(args[6], arguments, Py_True, NULL);
                        }
                        if (summary != NULL && !PyUnicode_Check(summary)) {
                            Py_DECREF(summary);
                            summary = NULL;
                            PyErr_SetString(PyExc_TypeError, "args_summary did not return a str");
                        }
                        piece = summary == NULL ? NULL : format_tool(shown, summary);
                        Py_XDECREF(summary);
                        if (piece == NULL) {
                            Py_DECREF(arguments);
                            goto done;
                        }
                        if (found == NULL && (found = PyDict_New()) == NULL) {
                            Py_DECREF(arguments);
                            Py_DECREF(piece);
                            goto done;
                        }
                        int r = all_exact(arguments, 0) ? collect_paths_c(arguments, NULL, found, args[7], 0) : 1;
                        Py_DECREF(arguments);
                        if (r != 0) {
                            Py_DECREF(piece);
                            if (r > 0) { /* a subclass inside: Python's walk */
                                Py_CLEAR(tool_name);
                                result = Py_NewRef(Py_None);
                            }
                            goto done;
                        }
                    } else {
                        piece = format_tool(shown, NULL);
                        if (piece == NULL) goto done;
                    }
                } else if (str_is(pt, "thinking") && index_thinking) {
                    PyObject *t = dget(part, k_thinking);
                    if (t == NULL && PyErr_Occurred()) goto done;
                    if (t != NULL && PyUnicode_Check(t)) piece = Py_NewRef(t);
                }
                if (piece != NULL) {
                    int r = PyList_Append(pieces, piece);
                    Py_DECREF(piece);
                    if (r < 0) goto done;
                }
            }
        }
        PyObject *err = dget(message, k_error_message);
        if (err == NULL && PyErr_Occurred()) goto done;
        if (err != NULL && PyUnicode_Check(err) && PyUnicode_GET_LENGTH(err) > 0) {
            PyObject *parts[2] = {t_error, err};
            PyObject *piece = concat_strs(parts, 2);
            if (piece == NULL) goto done;
            int r = PyList_Append(pieces, piece);
            Py_DECREF(piece);
            if (r < 0) goto done;
        }
        text = PyUnicode_Join(k_newline, pieces);
        if (text == NULL) goto done;
    } else {
        Py_DECREF(tool_name);
        Py_RETURN_NONE;
    }
    files = found != NULL && PyDict_GET_SIZE(found) > 0 ? PySequence_List(found) : PyList_New(0);
    if (files == NULL) goto done;
    int truncated = limited && PyUnicode_GET_LENGTH(text) > limit;
    if (truncated) {
        PyObject *cut = PyUnicode_Substring(text, 0, limit > 0 ? limit : 0);
        if (cut == NULL) goto done;
        Py_SETREF(text, cut);
    }
    PyObject *eid = dget(raw, id_key);
    if (eid == NULL && PyErr_Occurred()) goto done;
    if (eid == NULL || !PyUnicode_CheckExact(eid)) eid = Py_None;
    PyObject *pid = dget(raw, parent_key);
    if (pid == NULL && PyErr_Occurred()) goto done;
    if (pid == NULL || !PyUnicode_CheckExact(pid)) pid = Py_None;
    PyObject *ts = NULL;
    PyObject *when = dget(raw, k_timestamp);
    if (when == NULL && PyErr_Occurred()) goto done;
    if (when != NULL) {
        ts = native_iso_ms(NULL, when);
        if (ts == NULL) goto done;
        if (ts == Py_None) Py_CLEAR(ts);
    }
    if (ts == NULL) {
        ts = PyObject_CallFunctionObjArgs(args[8], raw, message, NULL);
        if (ts == NULL) goto done;
    }
    result = PyTuple_Pack(8, eid, pid, tool_name, text, ts, is_error ? Py_True : Py_False, truncated ? Py_True : Py_False,
                          files);
    Py_DECREF(ts);
done:
    Py_XDECREF(tool_name);
    Py_XDECREF(text);
    Py_XDECREF(files);
    Py_XDECREF(found);
    Py_XDECREF(pieces);
    if (result == NULL && !PyErr_Occurred()) Py_RETURN_NONE; /* (left to Python) */
    return result;
}


/* ---- fold_plain: a cold build's entry folded into its digest (memory/entry_text.py) ----
 *
 * fold_plain(raw, line, spec) -> bool: `Normalizer.fold` of an entry `plain_role` admits
 * whose fields `plain_fields` reads here (True: folded, with the same effects as the
 * Python steps `_plain_fields`, `_claim`, `DigestFolder.add_fields` and, when it has
 * anything to do, `FileOpsCollector.observe_entry`); False, with nothing changed, for
 * any other entry (the Python code folds it). `spec` (`cold_fold.fold_spec`): (normalizer,
 * folder, observe_entry or None, the collector's pending calls or None, PI_FILE_TOOLS,
 * index_tool_output, index_thinking, max_entry_chars, args_summary,
 * PATH_KEY_SEARCH, entry_timestamp, ARGS_SUMMARY_SCALARS, FILES_TOUCHED_CAP). */
static PyObject *n_next_index, *n_reasons, *n_entry_ids, *n_entry_count, *n_first_ts, *n_last_ts, *n_error_count,
    *n_tools, *n_files, *n_addresses, *n_vocab_stopped, *n_batch_chars, *n_seen_texts, *n_seen_room, *n_pending, *n_pending_chars,
    *n_flush, *n_fold_text, *n_digest, *n_strip, *v_max_entry_chars, *v_duplicate_entry_id, *v_surrogatepass,
    *n_total_len, *v_message, *v_files_touched, *n_outcome, *n_version, *v_failed, *v_succeeded;

static int fold_init(void) {
#define S(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    S(n_next_index, "next_index"); S(n_reasons, "reasons"); S(n_entry_ids, "entry_ids");
    S(n_entry_count, "entry_count"); S(n_first_ts, "first_ts"); S(n_last_ts, "last_ts");
    S(n_error_count, "error_count"); S(n_tools, "tools"); S(n_files, "files"); S(n_addresses, "addresses");
    S(n_vocab_stopped, "vocab_stopped"); S(n_batch_chars, "batch_chars"); S(n_seen_texts, "seen_texts"); S(n_seen_room, "seen_room");
    S(n_pending, "pending"); S(n_pending_chars, "pending_chars"); S(n_flush, "flush"); S(n_fold_text, "_fold_text");
    S(n_digest, "digest"); S(n_strip, "strip"); S(v_max_entry_chars, "max_entry_chars");
    S(v_duplicate_entry_id, "duplicate_entry_id"); S(v_surrogatepass, "surrogatepass");
    S(n_total_len, "total_len"); S(v_message, "message"); S(v_files_touched, "filesTouched");
    S(n_outcome, "outcome"); S(n_version, "_version"); S(v_failed, "failed"); S(v_succeeded, "succeeded");
#undef S
    return 0;
}

/* obj.name += by (an int attribute); -1 with an error */
static int attr_add(PyObject *obj, PyObject *name, Py_ssize_t by) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    PyObject *d = PyLong_FromSsize_t(by);
    PyObject *sum = d == NULL ? NULL : PyNumber_Add(v, d);
    Py_DECREF(v);
    Py_XDECREF(d);
    if (sum == NULL) return -1;
    int r = PyObject_SetAttr(obj, name, sum);
    Py_DECREF(sum);
    return r;
}

/* first_ts / last_ts of the folder widened to `ts` (`DigestFolder.add_fields`) */
static int widen_ts(PyObject *folder, PyObject *name, PyObject *ts, int op) {
    PyObject *cur = PyObject_GetAttr(folder, name);
    if (cur == NULL) return -1;
    int take = cur == Py_None ? 1 : PyObject_RichCompareBool(ts, cur, op);
    Py_DECREF(cur);
    if (take < 0) return -1;
    return take ? PyObject_SetAttr(folder, name, ts) : 0;
}

/* the text's part of `DigestFolder.add_fields` (the folder's vocabulary not stopped) */
static int fold_text(PyObject *folder, PyObject *text) {
    PyObject *batch = PyObject_GetAttr(folder, n_batch_chars);
    if (batch == NULL) return -1;
    int batched = PyObject_IsTrue(batch);
    if (batched < 0) {
        Py_DECREF(batch);
        return -1;
    }
    Py_ssize_t chars = PyUnicode_GET_LENGTH(text);
    PyObject *data = utf8_bytes(text);
    if (data == NULL) {
        Py_DECREF(batch);
        return -1;
    }
    int rc = -1;
    if (chars > 256) {
        /* a long text already folded is skipped (`DigestFolder._repeat`: remembered whole
           while the folder has room) */
        PyObject *texts = PyObject_GetAttr(folder, n_seen_texts);
        int known = texts == NULL ? -1 : PySet_Contains(texts, data);
        if (known == 0) {
            PyObject *room = PyObject_GetAttr(folder, n_seen_room);
            Py_ssize_t left = room == NULL ? -1 : PyLong_AsSsize_t(room);
            Py_XDECREF(room);
            if (left == -1 && PyErr_Occurred()) {
                known = -1;
            } else if (PyBytes_GET_SIZE(data) <= left) {
                PyObject *now = PyLong_FromSsize_t(left - PyBytes_GET_SIZE(data));
                if (now == NULL || PySet_Add(texts, data) < 0 || PyObject_SetAttr(folder, n_seen_room, now) < 0)
                    known = -1;
                Py_XDECREF(now);
            }
        }
        Py_XDECREF(texts);
        if (known != 0) {
            if (known > 0) rc = 0;
            goto out;
        }
    }
    if (!batched) {
        PyObject *r = PyObject_CallMethodOneArg(folder, n_fold_text, text);
        if (r == NULL) goto out;
        Py_DECREF(r);
        rc = 0;
        goto out;
    }
    PyObject *pending = PyObject_GetAttr(folder, n_pending);
    int r = pending == NULL ? -1 : PyList_Append(pending, data);
    Py_XDECREF(pending);
    if (r < 0 || attr_add(folder, n_pending_chars, chars) < 0) goto out;
    PyObject *now = PyObject_GetAttr(folder, n_pending_chars);
    int full = now == NULL ? -1 : PyObject_RichCompareBool(now, batch, Py_GE);
    Py_XDECREF(now);
    if (full < 0) goto out;
    if (full) {
        PyObject *f = PyObject_CallMethodNoArgs(folder, n_flush);
        if (f == NULL) goto out;
        Py_DECREF(f);
    }
    rc = 0;
out:
    Py_DECREF(batch);
    Py_DECREF(data);
    return rc;
}

/* whether `FileOpsCollector.observe_entry` has anything to do for this entry: an
   assistant's call of a file tool, or a result of a call it is waiting for */
static int needs_observing(PyObject *message, PyObject *role, PyObject *ops_pending, PyObject *file_tools) {
    if (ascii_eq(role, "assistant")) {
        PyObject *content = dget(message, k_content_field);
        if (content == NULL) return PyErr_Occurred() ? -1 : 0;
        if (!PyList_Check(content)) return 0;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(content); i++) {
            PyObject *part = PyList_GET_ITEM(content, i);
            if (!PyDict_Check(part)) continue;
            if (!PyDict_CheckExact(part)) return 1; /* (its own `get`: the Python code decides) */
            PyObject *pt = dget(part, type_key);
            if (pt == NULL && PyErr_Occurred()) return -1;
            if (!str_is(pt, "toolCall")) continue;
            PyObject *name = dget(part, k_name);
            if (name == NULL && PyErr_Occurred()) return -1;
            if (name == NULL || !PyUnicode_Check(name)) continue;
            int in = PySet_Contains(file_tools, name);
            if (in != 0) return in;
        }
        return 0;
    }
    if (ascii_eq(role, "toolResult")) {
        PyObject *cid = dget(message, k_tcid);
        if (cid == NULL) return PyErr_Occurred() ? -1 : 0;
        if (!PyUnicode_Check(cid)) return 0;
        return PyDict_Contains(ops_pending, cid);
    }
    return 0;
}

/* `plain_role`: 1 with *message and *role (borrowed) of an entry it admits (a message of
 * a user, an assistant, or a tool result other than fabric_exec's), 0 for any other
 * entry, -1 with an error */
static int plain_entry(PyObject *raw, PyObject **message, PyObject **role) {
    if (!PyDict_CheckExact(raw)) return 0;
    PyObject *etype = dget(raw, type_key);
    if (etype == NULL && PyErr_Occurred()) return -1;
    if (!str_is(etype, "message")) return 0;
    PyObject *m = dget(raw, k_message_field);
    if (m == NULL && PyErr_Occurred()) return -1;
    if (m == NULL || !PyDict_CheckExact(m)) return 0;
    PyObject *r = dget(m, k_role);
    if (r == NULL && PyErr_Occurred()) return -1;
    if (r == NULL || !PyUnicode_CheckExact(r)) return 0;
    int result = ascii_eq(r, "toolResult");
    if (!result && !ascii_eq(r, "user") && !ascii_eq(r, "assistant"))
        return 0;
    if (result) {
        PyObject *tool = dget(m, k_tool_name);
        if (tool == NULL && PyErr_Occurred()) return -1;
        if (tool == NULL || !PyUnicode_CheckExact(tool) || ascii_eq(tool, "fabric_exec"))
            return 0;
    }
    *message = m;
    *role = r;
    return 1;
}

/* `Normalizer._claim`: the next record's index (a new reference), noting a truncated text
 * and the entry id (a duplicate); NULL with an error */
static PyObject *claim_index(PyObject *norm, PyObject *entry_id, PyObject *truncated) {
    int cut = PyObject_IsTrue(truncated);
    if (cut < 0) return NULL;
    PyObject *reasons = PyObject_GetAttr(norm, n_reasons);
    if (reasons == NULL) return NULL;
    PyObject *index = NULL;
    int bad = cut && PySet_Add(reasons, v_max_entry_chars) < 0;
    if (!bad) index = PyObject_GetAttr(norm, n_next_index);
    if (index == NULL || attr_add(norm, n_next_index, 1) < 0) goto fail;
    if (entry_id != Py_None) {
        PyObject *ids = PyObject_GetAttr(norm, n_entry_ids);
        int dup = ids == NULL ? -1 : PySet_Contains(ids, entry_id);
        if (dup > 0 && PySet_Add(reasons, v_duplicate_entry_id) < 0) dup = -1;
        if (dup >= 0 && PySet_Add(ids, entry_id) < 0) dup = -1;
        Py_XDECREF(ids);
        if (dup < 0) goto fail;
    }
    Py_DECREF(reasons);
    return index;
fail:
    Py_XDECREF(index);
    Py_DECREF(reasons);
    return NULL;
}

/* file_history (its FileOp type, and MAX_FILE_OPERATIONS read at each use), taken at first use */
static PyObject *fh_module, *fh_file_op, *n_resolved, *n_ops, *n_unresolved, *n_capped, *n_resolve, *k_path,
    *n_max_ops;

static int file_history_init(void) {
    if (fh_file_op != NULL) return 0;
#define S(var, text) if (var == NULL && (var = PyUnicode_InternFromString(text)) == NULL) return -1;
    S(n_resolved, "_resolved"); S(n_ops, "ops"); S(n_unresolved, "unresolved"); S(n_capped, "capped");
    S(n_resolve, "_resolve"); S(k_path, "path"); S(n_max_ops, "MAX_FILE_OPERATIONS");
#undef S
    PyObject *m = PyImport_ImportModule("fabric_lsp.engine.memory.file_history");
    if (m == NULL) return -1;
    PyObject *op = PyObject_GetAttrString(m, "FileOp");
    if (op == NULL) {
        Py_DECREF(m);
        return -1;
    }
    fh_module = m;
    fh_file_op = op;
    return 0;
}

/* observe_entry's assistant branch for an entry whose content is a list of exact dicts
 * (tool calls with exact dict arguments): each call of a file tool with a string id and a
 * path that resolves becomes a FileOp, added (up to MAX_FILE_OPERATIONS) and pending. 1
 * done, 0 not decided here (nothing changed), -1 with an error. */
static int observe_calls(PyObject *collector, PyObject *ops_pending, PyObject *file_tools, PyObject *message,
                         PyObject *index, PyObject *entry_id, PyObject *ts, PyObject *line) {
    PyObject *content = dget(message, k_content_field);
    if (content == NULL) return PyErr_Occurred() ? -1 : 1; /* (not a list: nothing to observe) */
    if (!PyList_CheckExact(content)) return PyList_Check(content) ? 0 : 1;
    Py_ssize_t n = PyList_GET_SIZE(content);
    for (Py_ssize_t i = 0; i < n; i++) { /* shapes this code reads exactly as Python does */
        PyObject *part = PyList_GET_ITEM(content, i);
        if (!PyDict_Check(part)) continue;
        if (!PyDict_CheckExact(part)) return 0;
        PyObject *args = dget(part, k_arguments);
        if (args == NULL && PyErr_Occurred()) return -1;
        if (args != NULL && PyDict_Check(args) && !PyDict_CheckExact(args)) return 0;
    }
    if (file_history_init() < 0) return -1;
    PyObject *resolved = PyObject_GetAttr(collector, n_resolved);
    PyObject *ops = resolved == NULL ? NULL : PyObject_GetAttr(collector, n_ops);
    if (ops == NULL || !PyDict_CheckExact(resolved) || !PyList_CheckExact(ops)) {
        if (ops != NULL) PyErr_SetString(PyExc_TypeError, "observe_calls: a collector of another shape");
        Py_XDECREF(resolved);
        Py_XDECREF(ops);
        return -1;
    }
    /* `_line(line)`: an int (not a bool) from 0 up, else None */
    PyObject *line_or_none = Py_None;
    if (PyLong_Check(line) && !PyBool_Check(line)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(line, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(resolved);
            Py_DECREF(ops);
            return -1;
        }
        if (overflow > 0 || (overflow == 0 && v >= 0)) line_or_none = line;
    }
    int rc = -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(content); i++) {
        PyObject *part = PyList_GET_ITEM(content, i);
        if (!PyDict_Check(part)) continue;
        PyObject *ptype = dget(part, type_key);
        if (ptype == NULL && PyErr_Occurred()) goto done;
        if (!str_is(ptype, "toolCall")) continue;
        PyObject *name = dget(part, k_name), *call_id = name == NULL && PyErr_Occurred() ? NULL : dget(part, id_key);
        if (PyErr_Occurred()) goto done;
        PyObject *args = dget(part, k_arguments);
        if (args == NULL && PyErr_Occurred()) goto done;
        if (name == NULL || !PyUnicode_Check(name) || call_id == NULL || !PyUnicode_Check(call_id) || args == NULL
            || !PyDict_Check(args))
            continue;
        int tool = PySet_Contains(file_tools, name);
        if (tool < 0) goto done;
        if (!tool) continue;
        PyObject *value = dget(args, k_path);
        if (value == NULL && PyErr_Occurred()) goto done;
        if (value == NULL || !PyUnicode_Check(value)) continue; /* (`_resolve`: None, not counted) */
        PyObject *path = PyDict_GetItemWithError(resolved, value); /* borrowed */
        if (path != NULL) {
            Py_INCREF(path);
            if (path == Py_None && attr_add(collector, n_unresolved, 1) < 0) {
                Py_DECREF(path);
                goto done;
            }
        } else {
            if (PyErr_Occurred()) goto done;
            path = PyObject_CallMethodOneArg(collector, n_resolve, value);
            if (path == NULL) goto done;
        }
        if (path == Py_None) {
            Py_DECREF(path);
            continue;
        }
        PyObject *fields[11] = {path, name, name, Py_None, index, entry_id, Py_None, ts, call_id, Py_None, line_or_none};
        PyObject *op = PyObject_Vectorcall(fh_file_op, fields, 11, NULL);
        Py_DECREF(path);
        if (op == NULL) goto done;
        /* `_add`: up to MAX_FILE_OPERATIONS, then the table is capped */
        PyObject *cap = PyObject_GetAttr(fh_module, n_max_ops);
        Py_ssize_t max_ops = cap == NULL ? -1 : PyLong_AsSsize_t(cap);
        Py_XDECREF(cap);
        if (max_ops == -1 && PyErr_Occurred()) {
            Py_DECREF(op);
            goto done;
        }
        int bad;
        if (PyList_GET_SIZE(ops) >= max_ops) {
            bad = PyObject_SetAttr(collector, n_capped, Py_True) < 0;
        } else {
            bad = PyList_Append(ops, op) < 0 || attr_add(collector, n_version, 1) < 0
                  || PyDict_SetItem(ops_pending, call_id, op) < 0;
        }
        Py_DECREF(op);
        if (bad) goto done;
    }
    rc = 1;
done:
    Py_DECREF(resolved);
    Py_DECREF(ops);
    return rc;
}

/* `FileOpsCollector.observe_entry` of a plain entry's record fields, when it has anything
 * to do (`observe` None: no collector); -1 with an error */
static int observe_plain(PyObject *observe, PyObject *ops_pending, PyObject *file_tools, PyObject *message,
                         PyObject *role, PyObject *index, PyObject *entry_id, PyObject *ts, PyObject *line) {
    if (observe == Py_None) return 0;
    int need = needs_observing(message, role, ops_pending, file_tools);
    if (need <= 0) return need;
    if (PyMethod_Check(observe) && PyDict_CheckExact(ops_pending)
        && ascii_eq(role, "toolResult")) {
        /* observe_entry's result branch, here: the call it answers (pending: needs_observing)
           leaves `pending` with its outcome, and the collector's version moves on */
        PyObject *cid = dget(message, k_tcid); /* (a str: needs_observing) */
        PyObject *flag = cid == NULL ? NULL : dget(message, k_is_error);
        if (cid == NULL || (flag == NULL && PyErr_Occurred())) return -1;
        PyObject *op = PyDict_GetItemWithError(ops_pending, cid);
        if (op == NULL) return PyErr_Occurred() ? -1 : 0;
        Py_INCREF(op);
        int rc = PyDict_DelItem(ops_pending, cid) < 0
                         || PyObject_SetAttr(op, n_outcome, flag == Py_True ? v_failed : v_succeeded) < 0
                         || attr_add(PyMethod_GET_SELF(observe), n_version, 1) < 0
                     ? -1
                     : 0;
        Py_DECREF(op);
        return rc;
    }
    if (PyMethod_Check(observe) && PyDict_CheckExact(ops_pending) && PyAnySet_Check(file_tools)
        && ascii_eq(role, "assistant")) {
        int done = observe_calls(PyMethod_GET_SELF(observe), ops_pending, file_tools, message, index, entry_id, ts, line);
        if (done != 0) return done < 0 ? -1 : 0;
    }
    PyObject *kw = Py_BuildValue("{sO}", "line", line);
    PyObject *pos = kw == NULL ? NULL : PyTuple_Pack(5, message, role, index, entry_id, ts);
    PyObject *r = pos == NULL ? NULL : PyObject_Call(observe, pos, kw);
    Py_XDECREF(kw);
    Py_XDECREF(pos);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* plain_fields' 8-tuple for a plain entry (a new reference), Py_None (not decided here)
 * or NULL; `opts` its 7 trailing arguments */
static PyObject *plain_fields_of(PyObject *raw, PyObject *message, PyObject *role, PyObject *const *opts,
                                 const char *who) {
    PyObject *fargs[10] = {raw, message, role, opts[0], opts[1], opts[2], opts[3], opts[4], opts[5], opts[6]};
    PyObject *got = native_plain_fields(NULL, fargs, 10);
    if (got == NULL || got == Py_None) return got;
    if (!PyTuple_CheckExact(got) || PyTuple_GET_SIZE(got) != 8 || !PyUnicode_Check(PyTuple_GET_ITEM(got, 3))
        || !PyList_Check(PyTuple_GET_ITEM(got, 7))) {
        PyErr_Format(PyExc_SystemError, "%s: plain_fields gave no (.., text, .., files) 8-tuple", who);
        Py_DECREF(got);
        return NULL;
    }
    return got;
}

static PyObject *native_fold_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyTuple_CheckExact(args[2]) || PyTuple_GET_SIZE(args[2]) != 13) {
        PyErr_SetString(PyExc_TypeError, "fold_plain(raw, line, spec) takes an entry, a line and a 13-item spec");
        return NULL;
    }
    PyObject *raw = args[0], *line = args[1], *spec = args[2];
#define G(i) PyTuple_GET_ITEM(spec, i)
    PyObject *norm = G(0), *folder = G(1), *observe = G(2), *ops_pending = G(3), *file_tools = G(4);
    Py_ssize_t files_cap = PyLong_AsSsize_t(G(12));
    if (files_cap == -1 && PyErr_Occurred()) return NULL;
    PyObject *message, *role;
    int plain = plain_entry(raw, &message, &role);
    if (plain <= 0) return plain < 0 ? NULL : Py_NewRef(Py_False);
    Py_INCREF(message);
    Py_INCREF(role);
    PyObject *got = plain_fields_of(raw, message, role, &((PyTupleObject *)spec)->ob_item[5], "fold_plain");
#undef G
    PyObject *index = NULL, *row = NULL, *out = NULL;
    if (got == NULL) goto done;
    if (got == Py_None) {
        out = Py_NewRef(Py_False);
        goto done;
    }
    PyObject *entry_id = PyTuple_GET_ITEM(got, 0), *tool_name = PyTuple_GET_ITEM(got, 2);
    PyObject *text = PyTuple_GET_ITEM(got, 3), *ts = PyTuple_GET_ITEM(got, 4), *is_error = PyTuple_GET_ITEM(got, 5);
    PyObject *truncated = PyTuple_GET_ITEM(got, 6), *files = PyTuple_GET_ITEM(got, 7);
    index = claim_index(norm, entry_id, truncated);
    if (index == NULL) goto done;
    /* DigestFolder.add_fields */
    if (attr_add(folder, n_entry_count, 1) < 0) goto done;
    if (ts != Py_None && (widen_ts(folder, n_first_ts, ts, Py_LT) < 0 || widen_ts(folder, n_last_ts, ts, Py_GT) < 0))
        goto done;
    {
        int err = PyObject_IsTrue(is_error);
        if (err < 0 || (err && attr_add(folder, n_error_count, 1) < 0)) goto done;
        int named = PyObject_IsTrue(tool_name);
        if (named < 0) goto done;
        if (named) {
            PyObject *tools = PyObject_GetAttr(folder, n_tools);
            if (tools == NULL) goto done;
            /* (a Counter: a missing tool counts 0) */
            PyObject *count = PyDict_Check(tools) ? PyDict_GetItemWithError(tools, tool_name) : NULL;
            PyObject *next = NULL;
            if (!PyDict_Check(tools)) PyErr_SetString(PyExc_TypeError, "fold_plain: the folder's tools is not a dict");
            if (!PyErr_Occurred()) {
                PyObject *one = PyLong_FromLong(1);
                next = one == NULL ? NULL : count == NULL ? Py_NewRef(one) : PyNumber_Add(count, one);
                Py_XDECREF(one);
            }
            int r = next == NULL ? -1 : PyObject_SetItem(tools, tool_name, next);
            Py_XDECREF(next);
            Py_DECREF(tools);
            if (r < 0) goto done;
        }
        PyObject *seen_files = PyObject_GetAttr(folder, n_files);
        if (seen_files == NULL) goto done;
        int bad = !PyDict_CheckExact(seen_files);
        for (Py_ssize_t i = 0; !bad && i < PyList_GET_SIZE(files); i++) {
            if (PyDict_GET_SIZE(seen_files) >= files_cap) break;
            PyObject *key = PyObject_CallMethodNoArgs(PyList_GET_ITEM(files, i), n_strip);
            if (key == NULL || PyDict_SetDefault(seen_files, key, Py_None) == NULL) bad = 1;
            Py_XDECREF(key);
        }
        if (bad && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "fold_plain: the folder's files is not a dict");
        Py_DECREF(seen_files);
        if (bad) goto done;
        row = PyList_New(6);
        if (row == NULL) goto done;
        PyObject *cells[6] = {index, entry_id, Py_None, role, tool_name, ts};
        for (int j = 0; j < 6; j++) PyList_SET_ITEM(row, j, Py_NewRef(cells[j]));
        PyObject *addresses = PyObject_GetAttr(folder, n_addresses);
        int r = addresses == NULL ? -1 : PyList_Append(addresses, row);
        Py_XDECREF(addresses);
        if (r < 0) goto done;
        PyObject *stopped = PyObject_GetAttr(folder, n_vocab_stopped);
        int stop = stopped == NULL ? -1 : PyObject_IsTrue(stopped);
        Py_XDECREF(stopped);
        if (stop < 0 || (!stop && fold_text(folder, text) < 0)) goto done;
    }
    if (observe_plain(observe, ops_pending, file_tools, message, role, index, entry_id, ts, line) < 0) goto done;
    out = Py_NewRef(Py_True);
done:
    Py_XDECREF(got);
    Py_XDECREF(index);
    Py_XDECREF(row);
    Py_DECREF(message);
    Py_DECREF(role);
    return out;
}

/* ---- hot_plain: a hot build's entry into its records and index (memory/hot_feed.py) ----
 *
 * hot_plain(raw, line, spec) -> bool: `Normalizer.feed` of an entry `plain_role` admits,
 * its one record appended to a `HotRecords` and added to a `HotIndex` (True: done, with
 * the same effects as the Python steps `_plain_fields`, `_claim`, `HotRecords.append`,
 * `HotIndex.add` and, when it has anything to do, `FileOpsCollector.observe_entry`);
 * False, with nothing changed, for any other entry, and for a record HotRecords keeps
 * in Python (an id that is not 8 hex digits, a timestamp that is not an int64). A text
 * with a piece that is not ASCII is finished by `finish(pieces, base) -> tokens` (the
 * tokenizer's Python step). `spec` (`hot_feed.hot_spec`), 32 items: (normalizer,
 * observe_entry or None, the collector's pending calls or None, PI_FILE_TOOLS, session
 * file, session id, the records' kind_of, kinds, tbuf, tend, index, line, ts, eid, pid,
 * kind, extra; the index's postings, doc_len, seg_starts, seg_of, pack, SEGMENT_ROLES,
 * finish, the index itself; index_tool_output, index_thinking, max_entry_chars,
 * args_summary, PATH_KEY_SEARCH, entry_timestamp, ARGS_SUMMARY_SCALARS). */
static PyObject *native_hot_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyTuple_CheckExact(args[2]) || PyTuple_GET_SIZE(args[2]) != 32) {
        PyErr_SetString(PyExc_TypeError, "hot_plain(raw, line, spec) takes an entry, a line and a 32-item spec");
        return NULL;
    }
    PyObject *raw = args[0], *line = args[1], *spec = args[2];
#define G(i) PyTuple_GET_ITEM(spec, i)
    PyObject *norm = G(0), *observe = G(1), *ops_pending = G(2), *file_tools = G(3), *session_file = G(4),
             *session_id = G(5), *kind_of = G(6), *kinds = G(7), *tbuf = G(8), *extra = G(16), *postings = G(17),
             *doc_len = G(18), *seg_starts = G(19), *seg_of = G(20), *pack = G(21), *segment_roles = G(22),
             *finish = G(23), *hot_index = G(24);
    PyObject *const *cols = &((PyTupleObject *)spec)->ob_item[9]; /* tend, index, line, ts, eid, pid, kind */
    if (!PyDict_CheckExact(kind_of) || !PyList_CheckExact(kinds) || !PyByteArray_CheckExact(tbuf)
        || !PyDict_CheckExact(extra) || (!PyDict_CheckExact(postings) && Py_TYPE(postings) != &PostingsBuilderType)
        || !PyList_CheckExact(seg_starts)) {
        PyErr_SetString(PyExc_TypeError, "hot_plain: a spec of other types than hot_feed.hot_spec makes");
        return NULL;
    }
    PyObject *message, *role;
    int plain = plain_entry(raw, &message, &role);
    if (plain <= 0) return plain < 0 ? NULL : Py_NewRef(Py_False);
    Py_INCREF(message);
    Py_INCREF(role);
    PyObject *got = plain_fields_of(raw, message, role, &((PyTupleObject *)spec)->ob_item[25], "hot_plain");
#undef G
    PyObject *index = NULL, *out = NULL, *pieces = NULL;
    if (got == NULL) goto done;
    if (got == Py_None) {
        out = Py_NewRef(Py_False);
        goto done;
    }
    PyObject *entry_id = PyTuple_GET_ITEM(got, 0), *parent_id = PyTuple_GET_ITEM(got, 1);
    PyObject *tool_name = PyTuple_GET_ITEM(got, 2), *text = PyTuple_GET_ITEM(got, 3), *ts = PyTuple_GET_ITEM(got, 4);
    PyObject *is_error = PyTuple_GET_ITEM(got, 5), *truncated = PyTuple_GET_ITEM(got, 6), *files = PyTuple_GET_ITEM(got, 7);
    {
        /* HotRecords' plain shape, decided before anything changes */
        long long n;
        if (!hex_id(entry_id, &n) || !hex_id(parent_id, &n) || !exact_int64(line, &n) || !exact_int64(ts, &n)
            || n == LLONG_MIN || !PyUnicode_CheckExact(text)) {
            out = Py_NewRef(Py_False);
            goto done;
        }
    }
    Py_ssize_t pos = PyObject_Size(cols[0]);
    Py_ssize_t idx = PyObject_Size(doc_len);
    if (pos < 0 || idx < 0) goto done;
    index = claim_index(norm, entry_id, truncated);
    if (index == NULL) goto done;
    /* HotRecords.append */
    {
        PyObject *v[13] = {session_file, session_id, index, entry_id, parent_id, v_message, role,
                           tool_name, text, ts, is_error, truncated, line};
        Py_ssize_t text_at, text_len;
        int r = hot_append(v, kind_of, kinds, tbuf, cols, &text_at, &text_len);
        if (r <= 0) {
            if (r == 0) PyErr_SetString(PyExc_SystemError, "hot_plain: HotRecords refused a record of the plain shape");
            goto done;
        }
        if (PyList_GET_SIZE(files) > 0) {
            PyObject *key = PyLong_FromSsize_t(pos);
            PyObject *pair = PyTuple_Pack(2, v_files_touched, files);
            PyObject *keys = pair == NULL ? NULL : PyTuple_Pack(1, pair);
            int bad = key == NULL || keys == NULL || PyDict_SetItem(extra, key, keys) < 0;
            Py_XDECREF(key);
            Py_XDECREF(pair);
            Py_XDECREF(keys);
            if (bad) goto done;
        }
        /* HotIndex.add (the text's bytes as HotRecords holds them; tbuf is not resized meanwhile) */
        unsigned long long base = (unsigned long long)idx << 32;
        Py_ssize_t tokens = 0;
        r = index_bytes((const unsigned char *)PyByteArray_AS_STRING(tbuf) + text_at, text_len, postings, base, pack,
                        &tokens, &pieces);
        if (r < 0) goto done;
        if (r == 0) {
            PyObject *b = PyLong_FromUnsignedLongLong(base);
            PyObject *t = b == NULL ? NULL : PyObject_CallFunctionObjArgs(finish, pieces, b, NULL);
            Py_XDECREF(b);
            if (t == NULL) goto done;
            tokens = PyLong_AsSsize_t(t);
            Py_DECREF(t);
            if (tokens == -1 && PyErr_Occurred()) goto done;
        }
        if (tokens < 1) tokens = 1;
        if (append_owned(doc_len, PyLong_FromSsize_t(tokens)) < 0 || attr_add(hot_index, n_total_len, tokens) < 0)
            goto done;
        int seg = idx == 0;
        if (!seg) {
            seg = PySequence_Contains(segment_roles, role);
            if (seg < 0) goto done;
        }
        if (seg && append_owned(seg_starts, PyLong_FromSsize_t(idx)) < 0) goto done;
        if (append_owned(seg_of, PyLong_FromSsize_t(PyList_GET_SIZE(seg_starts) - 1)) < 0) goto done;
    }
    if (observe_plain(observe, ops_pending, file_tools, message, role, index, entry_id, ts, line) < 0) goto done;
    out = Py_NewRef(Py_True);
done:
    Py_XDECREF(got);
    Py_XDECREF(index);
    Py_XDECREF(pieces);
    Py_DECREF(message);
    Py_DECREF(role);
    return out;
}

/* ---- encode_records: a HotRecords' records as JSON (memory/records.py, `encoded`) ----
 *
 * encode_records(tbuf, tend, index, line, ts, eid, pid, kind, parts, strs, whole, extra, odd, start,
 *                stop) -> bytes | None
 *
 * The records start..stop-1, each encoded exactly as msgspec.json encodes the dict
 * `HotRecords._record` builds, joined by ",". The columns are the HotRecords' buffers
 * (tend array('Q'); index, line, ts, eid, pid array('q'); kind array('I')). Everything
 * that is not a column value comes pre-encoded by msgspec: `parts[code]` is the kind's
 * (before index, between parentId and text, between timestamp and line) bytes, `strs[i]`
 * the id string of id code -2-i, `whole[pos]` a whole record (another shape), `extra[pos]`
 * the keys after the base ones (",k":v...), `odd[pos]` a timestamp kept aside. Only texts and integers are encoded here: a
 * text with a lone surrogate (which msgspec refuses) gives None, and the caller encodes
 * with msgspec. */
static const char hex_digits[] = "0123456789abcdef";
/* 0: copied as it is; 1: a short escape (its letter in esc_letter); 2: \u00XX */
static unsigned char esc_kind[256];
static char esc_letter[256];

typedef struct {
    PyObject *bytes;
    char *p;
    Py_ssize_t len, cap;
} outbuf;

static int out_reserve(outbuf *o, Py_ssize_t more) {
    if (o->len + more <= o->cap) return 0;
    Py_ssize_t cap = o->cap * 2;
    if (cap < o->len + more) cap = o->len + more;
    if (_PyBytes_Resize(&o->bytes, cap) < 0) return -1;
    o->p = PyBytes_AS_STRING(o->bytes);
    o->cap = cap;
    return 0;
}

static int out_put(outbuf *o, const char *data, Py_ssize_t n) {
    if (out_reserve(o, n) < 0) return -1;
    memcpy(o->p + o->len, data, (size_t)n);
    o->len += n;
    return 0;
}

static int out_bytes(outbuf *o, PyObject *b) {
    if (!PyBytes_Check(b)) {
        PyErr_SetString(PyExc_TypeError, "encode_records: a pre-encoded part is not bytes");
        return -1;
    }
    return out_put(o, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b));
}

static int out_int(outbuf *o, long long v) {
    char tmp[24];
    int i = 24;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[--i] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (v < 0) tmp[--i] = '-';
    return out_put(o, tmp + i, 24 - i);
}

/* 1: written; 0: a lone surrogate (nothing usable); -1: error */
static int out_text(outbuf *o, const unsigned char *s, Py_ssize_t n) {
    if (out_reserve(o, n + 2) < 0) return -1;
    o->p[o->len++] = '"';
    Py_ssize_t i = 0;
    while (i < n) {
        Py_ssize_t j = i;
        while (j < n && esc_kind[s[j]] == 0) {
            if (s[j] == 0xED && j + 1 < n && s[j + 1] >= 0xA0) return 0; /* U+D800..U+DFFF */
            j++;
        }
        if (j > i && out_put(o, (const char *)s + i, j - i) < 0) return -1;
        if (j == n) break;
        unsigned char c = s[j];
        if (esc_kind[c] == 1) {
            char e[2] = {'\\', esc_letter[c]};
            if (out_put(o, e, 2) < 0) return -1;
        } else {
            char e[6] = {'\\', 'u', '0', '0', hex_digits[c >> 4], hex_digits[c & 15]};
            if (out_put(o, e, 6) < 0) return -1;
        }
        i = j + 1;
    }
    return out_put(o, "\"", 1) < 0 ? -1 : 1;
}

static int out_id(outbuf *o, long long code, PyObject *strs) {
    if (code == -1) return out_put(o, "null", 4);
    if (code >= 0) {
        char e[10];
        e[0] = e[9] = '"';
        for (int k = 0; k < 8; k++) e[8 - k] = hex_digits[(code >> (4 * k)) & 15];
        return out_put(o, e, 10);
    }
    Py_ssize_t at = (Py_ssize_t)(-2 - code);
    if (at >= PyList_GET_SIZE(strs)) {
        PyErr_SetString(PyExc_IndexError, "encode_records: an id code out of range");
        return -1;
    }
    return out_bytes(o, PyList_GET_ITEM(strs, at));
}

static PyObject *native_encode_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError,
                        "encode_records(tbuf, tend, index, line, ts, eid, pid, kind, parts, strs, whole, extra, odd, "
                        "start, stop) takes 15 arguments");
        return NULL;
    }
    PyObject *parts = args[8], *strs = args[9], *whole = args[10], *extra = args[11], *odd = args[12];
    if (!PyList_CheckExact(parts) || !PyList_CheckExact(strs) || !PyDict_CheckExact(whole) || !PyDict_CheckExact(extra)
        || !PyDict_CheckExact(odd)) {
        PyErr_SetString(PyExc_TypeError, "encode_records: parts and strs lists, whole, extra and odd dicts");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[13]), stop = PyLong_AsSsize_t(args[14]);
    if ((start == -1 || stop == -1) && PyErr_Occurred()) return NULL;
    Py_buffer view[8];
    int got = 0;
    PyObject *result = NULL;
    outbuf o = {NULL, NULL, 0, 0};
    for (; got < 8; got++)
        if (PyObject_GetBuffer(args[got], &view[got], PyBUF_SIMPLE) < 0) goto done;
    {
        const unsigned char *tbuf = (const unsigned char *)view[0].buf;
        const unsigned long long *tend = (const unsigned long long *)view[1].buf;
        const long long *col[5];
        for (int c = 0; c < 5; c++) col[c] = (const long long *)view[2 + c].buf;
        const unsigned int *kind = (const unsigned int *)view[7].buf;
        Py_ssize_t n = view[1].len / 8;
        if (start < 0 || stop > n || start > stop || view[7].len / 4 < n) {
            PyErr_SetString(PyExc_IndexError, "encode_records: records out of range");
            goto done;
        }
        for (int c = 0; c < 5; c++)
            if (view[2 + c].len / 8 < n) {
                PyErr_SetString(PyExc_ValueError, "encode_records: a column is shorter than the texts");
                goto done;
            }
        Py_ssize_t text_bytes = stop > start ? (Py_ssize_t)(tend[stop - 1] - (start ? tend[start - 1] : 0)) : 0;
        o.cap = text_bytes + 256 * (stop - start) + 16;
        o.bytes = PyBytes_FromStringAndSize(NULL, o.cap);
        if (o.bytes == NULL) goto done;
        o.p = PyBytes_AS_STRING(o.bytes);
        for (Py_ssize_t pos = start; pos < stop; pos++) {
            if (pos > start && out_put(&o, ",", 1) < 0) goto done;
            unsigned long long a = pos ? tend[pos - 1] : 0, b = tend[pos];
            if (b < a || b > (unsigned long long)view[0].len) {
                PyErr_SetString(PyExc_ValueError, "encode_records: a text end out of range");
                goto done;
            }
            if (PyDict_GET_SIZE(whole)) {
                PyObject *key = PyLong_FromSsize_t(pos);
                if (key == NULL) goto done;
                PyObject *w = PyDict_GetItemWithError(whole, key);
                Py_DECREF(key);
                if (w != NULL) {
                    if (out_bytes(&o, w) < 0) goto done;
                    continue;
                }
                if (PyErr_Occurred()) goto done;
            }
            unsigned int k = kind[pos];
            if ((Py_ssize_t)k >= PyList_GET_SIZE(parts)) {
                PyErr_SetString(PyExc_IndexError, "encode_records: a kind code out of range");
                goto done;
            }
            PyObject *part = PyList_GET_ITEM(parts, k);
            if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 3) {
                PyErr_SetString(PyExc_TypeError, "encode_records: a kind's parts are not a 3-tuple");
                goto done;
            }
            if (out_bytes(&o, PyTuple_GET_ITEM(part, 0)) < 0 || out_int(&o, col[0][pos]) < 0
                || out_put(&o, ",\"entryId\":", 11) < 0 || out_id(&o, col[3][pos], strs) < 0
                || out_put(&o, ",\"parentId\":", 12) < 0 || out_id(&o, col[4][pos], strs) < 0
                || out_bytes(&o, PyTuple_GET_ITEM(part, 1)) < 0)
                goto done;
            int t = out_text(&o, tbuf + a, (Py_ssize_t)(b - a));
            if (t < 0) goto done;
            if (t == 0) {
                result = Py_None;
                Py_INCREF(result);
                goto done;
            }
            if (out_put(&o, ",\"timestamp\":", 13) < 0) goto done;
            long long ts = col[2][pos];
            if (ts == LLONG_MIN) {
                PyObject *key = PyLong_FromSsize_t(pos);
                if (key == NULL) goto done;
                PyObject *v = PyDict_GetItemWithError(odd, key);
                Py_DECREF(key);
                if (v == NULL) {
                    if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "encode_records: an odd timestamp is missing");
                    goto done;
                }
                if (out_bytes(&o, v) < 0) goto done;
            } else if (out_int(&o, ts) < 0)
                goto done;
            if (out_bytes(&o, PyTuple_GET_ITEM(part, 2)) < 0 || out_int(&o, col[1][pos]) < 0) goto done;
            if (PyDict_GET_SIZE(extra)) {
                PyObject *key = PyLong_FromSsize_t(pos);
                if (key == NULL) goto done;
                PyObject *tail = PyDict_GetItemWithError(extra, key);
                Py_DECREF(key);
                if (tail != NULL) {
                    if (out_bytes(&o, tail) < 0) goto done;
                } else if (PyErr_Occurred())
                    goto done;
            }
            if (out_put(&o, "}", 1) < 0) goto done;
        }
        if (_PyBytes_Resize(&o.bytes, o.len) < 0) goto done;
        result = o.bytes;
        o.bytes = NULL;
    }
done:
    Py_XDECREF(o.bytes);
    for (int i = 0; i < got; i++) PyBuffer_Release(&view[i]);
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
    {"encode_records", (PyCFunction)(void (*)(void))native_encode_records, METH_FASTCALL,
     "encode_records(tbuf, tend, index, line, ts, eid, pid, kind, parts, strs, whole, extra, odd, start, stop) -> the "
     "records' JSON joined by ',', or None (a text msgspec refuses)"},
    {"lineage_walk", (PyCFunction)(void (*)(void))native_lineage_walk, METH_FASTCALL,
     "lineage_walk(ids, parents, node, ordinals, leaf_override) -> (leaf, ids, ordinals as int64 bytes, cycle, "
     "bitmap, count)"},
    {"postings_columns", native_postings_columns, METH_O,
     "postings_columns(postings) -> (terms, counts as uint32 bytes, every posting as uint64 bytes)"},
    {"compact_postings", (PyCFunction)(void (*)(void))native_compact_postings, METH_FASTCALL,
     "compact_postings(postings, pack) -> None: lists of more than 8 postings packed, in place"},
    {"kept_entries", (PyCFunction)(void (*)(void))native_kept_entries, METH_FASTCALL,
     "kept_entries(types, ordinals, lines, ids, parents, bits, kept, content, share_ids, cancel) -> [(entry, line)]"},
    {"stream_entries", (PyCFunction)(void (*)(void))native_stream_entries, METH_FASTCALL,
     "stream_entries(data, base, rows, offsets, lengths, lines, ids, parents, share_ids, decode, fallback, "
     "max_line_bytes, cancel) -> [(entry, line)]"},
    {"finish_counts", (PyCFunction)(void (*)(void))native_finish_counts, METH_FASTCALL,
     "finish_counts(pieces, slow) -> term counts in first-seen order from piece counts"},
    {"gather_u32", (PyCFunction)(void (*)(void))native_gather_u32, METH_FASTCALL,
     "gather_u32(values, at) -> bytes of values[at[i]] (native uint32 each)"},
    {"scan_lines", (PyCFunction)(void (*)(void))native_scan_lines, METH_FASTCALL,
     "scan_lines(data, pos, n, at, line_no, ordinal, cols, keep, decode, max_line_bytes, max_depth, type_names, "
     "content) -> (status, pos, at, line_no, ordinal)"},
    {"read_lines", (PyCFunction)(void (*)(void))native_read_lines, METH_FASTCALL,
     "read_lines(data, view, pos, consumed, count, max_line_bytes, max_depth, decode, node, line, check, owner, sink) -> "
     "(pos, consumed, count)"},
    {"deeper_than", (PyCFunction)(void (*)(void))native_deeper_than, METH_FASTCALL,
     "deeper_than(value, limit) -> whether value nests lists/dicts deeper than limit"},
    {"utf16_len", native_utf16_len, METH_O, "utf16_len(s) -> the UTF-16 code units of s"},
    {"count_newlines", native_count_newlines, METH_O, "count_newlines(data) -> data.count(b'\\n')"},
    {"utf8_surrogatepass", native_utf8_surrogatepass, METH_O, "utf8_surrogatepass(s) -> s.encode('utf-8', 'surrogatepass')"},
    {"iso_ms", native_iso_ms, METH_O,
     "iso_ms(value) -> ms since the epoch of a YYYY-MM-DDTHH:MM:SS.mmmZ date, else None (not decided)"},
    {"postings_builder", native_postings_builder, METH_NOARGS,
     "postings_builder() -> a hot build's postings gathered in C (HotIndex, search.py)"},
    {"finish_postings", native_finish_postings, METH_O,
     "finish_postings(builder) -> the compacted postings dict the builder's adds make"},
    {"js_float", native_js_float, METH_O, "js_float(text) -> float(text), as an int when integral and below 1e21"},
    {"feed_message", (PyCFunction)(void (*)(void))native_feed_message, METH_FASTCALL,
     "feed_message(msg, eid, calls, events, tool_output) -> thinking blocks seen, or None (not normalized here)"},
    {"message_facts", (PyCFunction)(void (*)(void))native_message_facts, METH_FASTCALL,
     "message_facts(msg, kinds, tool_output) -> the facts of a common message, or None (not read here)"},
    {"message_node", (PyCFunction)(void (*)(void))native_message_node, METH_FASTCALL,
     "message_node(msg, eid, calls, events, kinds, tool_output, truncate) -> (kind, tokens, usage, spans, deferred, "
     "thinking) of a common message node, or None (nothing changed)"},
    {"fold_plain", (PyCFunction)(void (*)(void))native_fold_plain, METH_FASTCALL,
     "fold_plain(raw, line, spec) -> bool: Normalizer.fold of a plain entry (False: left to Python)"},
    {"hot_plain", (PyCFunction)(void (*)(void))native_hot_plain, METH_FASTCALL,
     "hot_plain(raw, line, spec) -> bool: Normalizer.feed of a plain entry into hot records and their index "
     "(False: left to Python)"},
    {"plain_fields", (PyCFunction)(void (*)(void))native_plain_fields, METH_FASTCALL,
     "plain_fields(raw, message, role, index_tool_output, index_thinking, limit, args_summary, path_key, "
     "entry_timestamp) -> a plain message's record fields, or None (not decided here)"},
    {"args_summary", (PyCFunction)(void (*)(void))native_args_summary, METH_FASTCALL,
     "args_summary(arguments, limit) -> JSON.stringify(arguments) cut to limit scalars (+ '…'), or None"},
    {"collect_paths", (PyCFunction)(void (*)(void))native_collect_paths, METH_FASTCALL,
     "collect_paths(value, out, path_key) -> True (the paths added to out), or False (not decided here)"},
    {"bm25_add", (PyCFunction)(void (*)(void))native_bm25_add, METH_FASTCALL,
     "bm25_add(scores, postings, doc_len, idf, k1p1, norm_a, norm_b) -> True (one term's scores added), or False "
     "(not handled here: nothing changed)"},
    {"segment_keys", (PyCFunction)(void (*)(void))native_segment_keys, METH_FASTCALL,
     "segment_keys(matched, seg_of, starts, neg_mtime, base_index, file_key, vn, seq) -> one view's segment sort "
     "keys, or None (not decided here)"},
    {"tool_output", (PyCFunction)(void (*)(void))native_tool_output, METH_FASTCALL,
     "tool_output(content, max_units) -> (chars, line, truncated) of a plain text/image tool output, else None"},
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
    for (int b = 0; b < 256; b++) {
        esc_kind[b] = (unsigned char)(b < 0x20 ? 2 : 0);
        esc_letter[b] = 0;
    }
    esc_kind['"'] = esc_kind['\\'] = 1;
    esc_letter['"'] = '"';
    esc_letter['\\'] = '\\';
    const char *shorts = "\bb\tt\nn\ff\rr";
    for (int i = 0; shorts[i]; i += 2) {
        esc_kind[(unsigned char)shorts[i]] = 1;
        esc_letter[(unsigned char)shorts[i]] = shorts[i + 1];
    }
    append_name = PyUnicode_InternFromString("append");
    copy_name = PyUnicode_InternFromString("__copy__");
    frombytes_name = PyUnicode_InternFromString("frombytes");
    type_key = PyUnicode_InternFromString("type");
    id_key = PyUnicode_InternFromString("id");
    parent_key = PyUnicode_InternFromString("parentId");
    first_name = PyUnicode_InternFromString("first");
    k_text = PyUnicode_InternFromString("text");
    if (append_name == NULL || copy_name == NULL || frombytes_name == NULL || type_key == NULL || id_key == NULL
        || parent_key == NULL || first_name == NULL || k_text == NULL)
        return NULL;
    if (feed_init() < 0 || fold_init() < 0) return NULL;
    PyObject *arrays = PyImport_ImportModule("array");
    array_type = arrays == NULL ? NULL : PyObject_GetAttrString(arrays, "array");
    Py_XDECREF(arrays);
    array_append = array_type == NULL ? NULL : PyObject_GetAttr(array_type, append_name);
    if (array_append == NULL) return NULL;
    if (PyType_Ready(&PostingsBuilderType) < 0) return NULL;
    PyObject *module = PyModule_Create(&native_module);
    /* scan_lines and stream_entries take a (typed, whole, roles) decode tuple
       (json_line.kept_decoder); an extension built from an older source has no such mark */
    if (module != NULL && PyModule_AddIntConstant(module, "KEPT_DECODE", 1) < 0) Py_CLEAR(module);
    return module;
}

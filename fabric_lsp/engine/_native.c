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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 0: separator (ASCII, not a word byte); 1: ASCII word byte; 2: non-ASCII byte */
static unsigned char byte_kind[256];
static unsigned char ascii_lower[256];

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


/* The scan: lowercased ASCII pieces are written to `lower` (same offsets as `data`) and
 * hashed as they are read, eight bytes per step; pieces with a non-ASCII byte are
 * referenced in `data` itself and hashed again from it (they are few). */
static int scan(const unsigned char *data, Py_ssize_t n, unsigned char *lower, Table *words, Table *mixed) {
    Py_ssize_t i = 0;
    while (i < n) {
        while (i < n && byte_kind[data[i]] == 0) i++;
        if (i >= n) break;
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
        Py_ssize_t len = i - start;
        if (seen & 2) {
            if (table_add(mixed, data + start, len, piece_hash(data + start, len), piece_head(data + start, len)) < 0)
                return -1;
        } else {
            h = mix64((h ^ word) * 0x9fb21c651e98df25ULL ^ (uint64_t)len);
            if (table_add(words, lower + start, len, h, full ? head : word) < 0) return -1;
        }
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

static PyMethodDef native_methods[] = {
    {"pieces", native_pieces, METH_O,
     "pieces(data) -> (set of lowercased ASCII pieces as str, set of pieces with a non-ASCII byte as bytes)"},
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
    return PyModule_Create(&native_module);
}

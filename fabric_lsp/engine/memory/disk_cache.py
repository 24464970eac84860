"""The on-disk derived cache: V5 record contents, names, validation, atomic writes,
bounded cleanup (digest §5).

The index dir is ours alone and always disposable. Records are JSON (msgspec), written
to a temp file in the same directory and renamed into place, with directories 0700 and
files 0600 (best effort). A record that is malformed, of another version, orphaned, or
filed under the wrong name is removed; the caller rebuilds it from source.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat as _stat
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

import msgspec

from ..index_dir import SNAPSHOT_FILE as SNAPSHOT_FILE  # the index dir's rules, for the cache's users
from ..index_dir import check_reserved_index_dir as check_reserved_index_dir
from ..index_dir import claim_index_dir as claim_index_dir
from ..index_dir import index_dir_refusal as index_dir_refusal
from ..index_dir import is_record_name as is_record_name
from ..index_dir import owned
from .seal import encoder as encoder  # (the cache's one JSON encoder; store.encoder for its users)
from .seal import sealed
from .tokenize import UNICODE_VERSION, sort_lexical, utf16_key

if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue

CACHE_VERSION: int = 5  # int, not Literal[5]: a decoded version is compared with it (and checked not to be a bool)
# Bumped when our own encoding (not the V5 contents) changes.
ENGINE_FORMAT = f"fabric-lsp-memory/3;unicode:{UNICODE_VERSION}"  # 3: lines over the line limit are read (cut)

# shard and digest (V5), the file-operations table of file_history.py and a shard's
# persisted BM25 index (hot_cache.py)
RECORD_KINDS = ("shard", "digest", "fileOperations", "hotIndex")

_SAFE = re.compile(r"[^a-zA-Z0-9._-]")


def cache_base(session_file: str) -> str:
    digest = hashlib.sha1(session_file.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return _SAFE.sub("_", f"{digest}-{os.path.basename(session_file)}")


def cache_name(session_file: str, branches: str, kind: str) -> str:
    base = cache_base(session_file)
    mode = ".all" if branches == "all" else ""
    if kind == "fileOperations":  # file_history's table, beside the V5 record
        return f"{base}{mode}.files.json"
    if kind == "hotIndex":  # hot_cache's index of a shard, beside it
        return f"{base}{mode}.terms.json"
    return f"{base}{mode}.digest.json" if kind == "digest" else f"{base}{mode}.json"


def shard_policy(cfg: Any, branches: str, fingerprint: str) -> str:
    return (
        f"entry:{cfg.max_entry_chars};branches:{branches};lineage:{fingerprint};"
        f"thinking:{'true' if cfg.index_thinking else 'false'};tool-output:{'true' if cfg.index_tool_output else 'false'}"
    )


def digest_policy(cfg: Any, branches: str, fingerprint: str) -> str:
    return (
        f"vocab:{cfg.max_cold_vocabulary_bytes};cache:{cfg.max_cold_cache_bytes};branches:{branches};"
        f"lineage:{fingerprint};thinking:{'true' if cfg.index_thinking else 'false'};"
        f"tool-output:{'true' if cfg.index_tool_output else 'false'}"
    )


# ---- validation -------------------------------------------------------------------------


class _EntryCheck(msgspec.Struct):
    index: int | float
    sessionFile: str
    text: str


class _Coverage(msgspec.Struct):
    complete: bool
    reasons: list[str]


class _DigestCoverage(msgspec.Struct):
    complete: bool
    vocabularyBytes: int | float
    reasons: list[str]


class _ShardCheck(msgspec.Struct):
    cacheVersion: Any
    kind: Any
    sessionFile: str
    sessionId: str
    sourceHash: str
    lineageFingerprint: str
    branches: str
    policy: str
    cacheBytes: int | float
    cacheSourceRatio: int | float
    totalEntryCount: int | float
    indexCoverage: _Coverage
    entries: list[_EntryCheck]
    engine: str


class _DigestCheck(msgspec.Struct):
    cacheVersion: Any
    kind: Any
    file: str
    sourceHash: str
    lineageFingerprint: str
    branches: str
    policy: str
    cacheBytes: int | float
    cacheSourceRatio: int | float
    filesTouched: list[Any]
    vocabulary: list[str]
    addresses: list[list[Any]]
    indexCoverage: _DigestCoverage
    mtime: int | float
    size: int | float
    engine: str


class _Head(msgspec.Struct):
    cacheVersion: Any = None
    kind: Any = None
    sessionFile: Any = None
    file: Any = None
    branches: Any = None


_head_decoder = msgspec.json.Decoder(_Head)
_shard_check = msgspec.json.Decoder(_ShardCheck)
_digest_check = msgspec.json.Decoder(_DigestCheck)
_any = msgspec.json.Decoder()


def valid_record(data: bytes, kind: str, file_size: int) -> bool:
    """Structural V5 validation (digest §5.1/§5.2) plus our engine format tag and seal."""
    if not sealed(data):
        return False
    try:
        rec = (_shard_check if kind == "shard" else _digest_check).decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return False
    if rec.cacheVersion != CACHE_VERSION or isinstance(rec.cacheVersion, bool) or rec.kind != kind:
        return False
    if rec.engine != ENGINE_FORMAT:
        return False
    if len(rec.sourceHash) != 64 or len(rec.lineageFingerprint) != 64:
        return False
    if rec.branches not in ("active", "all"):
        return False
    if rec.cacheBytes != file_size:
        return False
    if isinstance(rec, _DigestCheck):  # kind == "digest"
        vocab = rec.vocabulary
        for a, b in zip(vocab, vocab[1:]):
            if not utf16_key(a) < utf16_key(b):
                return False
        for t in rec.addresses:
            if len(t) != 6 or not isinstance(t[0], (int, float)) or isinstance(t[0], bool):
                return False
    return True


_STR: frozenset[type] = frozenset((str,))
_LIST: frozenset[type] = frozenset((list,))
_SIX = frozenset((6,))


def load_record(
    data: bytes,
    kind: str,
    file_size: int,
    *,
    addresses: bool = True,
    vocabulary_known: Callable[[bytes], bool] | None = None,
) -> JsonObject | None:
    """Decode a record for use, or None when it is not a valid V5 record of ours.

    One parse: the seal proves the bytes are exactly what this engine wrote, so the
    structural checks here are the top-level ones plus the cheap per-list invariants.
    With `addresses=False` a digest's `addresses` (nothing in the server reads them: they
    are kept for V5 readers of the file) are checked to be a list and left out, never
    decoded: on a 1 GB history they are a third of all the decoded values.

    With `vocabulary_known` (the engine's term table: is a slot with this vocabulary key
    restored?) a digest's `vocabulary` comes back as a `StoredVocabulary`: undecoded when
    the table knows its key (that slot was made from these very bytes, checked then),
    else decoded and checked as usual."""
    if not sealed(data):
        return None
    stored: StoredVocabulary | None = None
    if kind == "shard":
        rec = _decode_shard(data)
    elif vocabulary_known is not None:
        rec = _decode_without(data, None if addresses else "addresses", keep_raw="vocabulary")
        raw = rec.pop("vocabulary", None) if rec is not None else None
        if rec is None or not isinstance(raw, msgspec.Raw):
            return None
        key = vocabulary_key(raw)
        if vocabulary_known(key):
            stored = StoredVocabulary(key, raw, None)
        else:
            try:
                rec["vocabulary"] = _any.decode(raw)  # checked below, like any record's
            except (msgspec.DecodeError, RecursionError):
                return None
            stored = StoredVocabulary(key, None, None)
    elif addresses:
        rec = decode_record(data)
    else:
        rec = _decode_without(data, "addresses")
    if rec is None:
        return None
    version = rec.get("cacheVersion")
    if version != CACHE_VERSION or isinstance(version, bool) or rec.get("kind") != kind:
        return None
    if rec.get("engine") != ENGINE_FORMAT or rec.get("branches") not in ("active", "all"):
        return None
    for key in ("sourceHash", "lineageFingerprint"):
        if not isinstance(rec.get(key), str) or len(rec[key]) != 64:
            return None
    if rec.get("cacheBytes") != file_size or not isinstance(rec.get("policy"), str):
        return None
    cov: JsonValue = rec.get("indexCoverage")
    if (
        not isinstance(cov, dict)
        or not isinstance(cov.get("complete"), bool)
        or not isinstance(cov.get("reasons"), list)
    ):
        return None
    if kind == "shard":
        entries: JsonValue = rec.get("entries")
        if (
            not isinstance(entries, list)
            or not isinstance(rec.get("sessionFile"), str)
            or not isinstance(rec.get("sessionId"), str)
        ):
            return None
        # the records are checked as they are decoded (`shard_entry`)
    else:
        if stored is not None and "vocabulary" not in rec:
            rec["vocabulary"] = stored  # known to the term table: neither decoded nor checked again
        else:
            # (the per-item checks run as C loops: `map` over a decoded list, whose items
            # are exactly str, list, int, float, bool, dict or None, so `type` is the check)
            vocab: JsonValue = rec.get("vocabulary")
            if not isinstance(vocab, list) or not set(map(type, vocab)) <= _STR:
                return None
            if len(set(vocab)) != len(vocab) or vocab != sort_lexical(
                cast("list[str]", vocab)
            ):  # all str: checked above
                return None
            if stored is not None:
                stored.values = cast("list[str]", vocab)
                rec["vocabulary"] = stored
        if addresses:
            addrs: JsonValue = rec.get("addresses")
            if not isinstance(addrs, list) or not set(map(type, addrs)) <= _LIST:
                return None
            if not set(map(len, cast("list[list[Any]]", addrs))) <= _SIX:
                return None
        if not isinstance(rec.get("file"), str) or not isinstance(rec.get("filesTouched"), list):
            return None
    return rec


VOCABULARY_KEY_BYTES = 16


def vocabulary_key(vocabulary_json: Any) -> bytes:
    """The key of a digest's vocabulary: a hash of its JSON bytes, exactly as the V5 record
    holds them (`store.encoder`'s encoding of the list)."""
    return hashlib.sha256(vocabulary_json).digest()[:VOCABULARY_KEY_BYTES]


class StoredVocabulary:
    """A digest's vocabulary as `store.load_record` leaves it for the engine: its key, its
    undecoded JSON bytes and, unless a restored slot of the term table holds exactly
    these bytes, its decoded and checked terms (`values`)."""

    __slots__ = ("key", "raw", "values")

    def __init__(self, key: bytes, raw: Any, values: list[str] | None) -> None:
        self.key: bytes = key
        self.raw: Any = raw
        self.values: list[str] | None = values

    def terms(self) -> list[str]:
        """The terms (decoded now if they were not: only when the restored slot was
        taken by another session with the very same vocabulary bytes, which were checked
        when that slot was made)."""
        values = self.values
        if values is None:
            value: JsonValue = _any.decode(self.raw) if self.raw is not None else []
            values = [t for t in value if isinstance(t, str)] if isinstance(value, list) else []
            self.values, self.raw = values, None
        return values


_top_raw = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _decode_without(data: bytes, left_out: str | None, keep_raw: str | None = None) -> JsonObject | None:
    """A record's top-level values decoded, but for `left_out` (None: none), which must be
    a list, and `keep_raw`, which is left undecoded (a `msgspec.Raw`)."""
    try:
        top = _top_raw.decode(data)
        raw = top.pop(left_out, None) if left_out is not None else msgspec.Raw(b"[]")
        if raw is None or bytes(memoryview(raw)[:1]) != b"[":
            return None
        return {k: (v if k == keep_raw else _any.decode(v)) for k, v in top.items()}
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


_RawField = msgspec.Raw | msgspec.UnsetType


class _ShardTop(msgspec.Struct):
    """The top level of a shard record (`persist.shard_record`, sealed) in one pass over its
    bytes: `entries` as undecoded records, every other value undecoded until it is read."""

    cacheVersion: _RawField = msgspec.UNSET
    kind: _RawField = msgspec.UNSET
    sessionFile: _RawField = msgspec.UNSET
    sessionId: _RawField = msgspec.UNSET
    mtime: _RawField = msgspec.UNSET
    size: _RawField = msgspec.UNSET
    sourceHash: _RawField = msgspec.UNSET
    branches: _RawField = msgspec.UNSET
    lineageFingerprint: _RawField = msgspec.UNSET
    policy: _RawField = msgspec.UNSET
    cacheBytes: _RawField = msgspec.UNSET
    cacheSourceRatio: _RawField = msgspec.UNSET
    entries: list[msgspec.Raw] | msgspec.UnsetType = msgspec.UNSET
    totalEntryCount: _RawField = msgspec.UNSET
    indexCoverage: _RawField = msgspec.UNSET
    tier: _RawField = msgspec.UNSET
    engine: _RawField = msgspec.UNSET
    statKey: _RawField = msgspec.UNSET
    leafId: _RawField = msgspec.UNSET
    cwd: _RawField = msgspec.UNSET
    recordHash: _RawField = msgspec.UNSET


_shard_top = msgspec.json.Decoder(_ShardTop)
_SHARD_FIELDS = _ShardTop.__struct_fields__


def _decode_shard(data: bytes) -> JsonObject | None:
    """A shard record with `entries` left as a list of undecoded records (`msgspec.Raw`
    views of `data`): the caller decodes them one at a time (`shard_entry`), so a large
    shard's records are never all held as dicts at once. (A key no shard record has is
    left out: the record's version and engine checks decide whether it is ours.)"""
    try:
        top = _shard_top.decode(data)
        rec: JsonObject = {}
        for k in _SHARD_FIELDS:
            v = getattr(top, k)
            if v is not msgspec.UNSET:
                rec[k] = v if k == "entries" else _any.decode(v)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    return rec


def shard_entry(raw: Any) -> JsonObject | None:
    """One record of a shard loaded by `load_record` (a `msgspec.Raw`), decoded and
    checked, or None when it is not a record."""
    try:
        e: JsonValue = _any.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    if not isinstance(e, dict) or not isinstance(e.get("text"), str) or not isinstance(e.get("sessionFile"), str):
        return None
    return e


def decode_record(data: bytes) -> JsonObject | None:
    try:
        value: JsonValue = _any.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# ---- files ----------------------------------------------------------------------------
# Every write, read and removal in the index dir goes through engine/owned_dir.py: only in a
# directory that carries our marker, only on the names below, never through a symlink.


def write_atomic(index_dir: str | None, name: str, data: bytes | Iterable[Any]) -> bool:
    """Temp file + rename in `index_dir`, mode 0600. `data` is the bytes or an iterable
    of byte pieces (written as they come). Failures, and a directory we do not own, are
    ignored (False)."""
    return owned(index_dir).write(name, data)


def remove(index_dir: str | None, name: str) -> None:
    owned(index_dir).remove(name)


def read_cache_file(index_dir: str | None, name: str, max_bytes: int) -> bytes | None:
    return owned(index_dir).read(name, max_bytes)


def nothing_to_clean(
    index_dir: str | None, files: list[str], max_files: int, max_bytes: int
) -> tuple[bool | None, frozenset[str] | None]:
    """What `cleanup` would return, found without reading a record, when every name in the
    index dir is a record name of one of `files` (the session files just listed) and no
    temporary file is left; None otherwise (then the cleanup runs). Also the names the
    listing holds (None: no listing), which a one-shot engine's loads consult before
    removing a record of the other tier (index.remove_listed).

    The cleanup reads and checks every record (0.1–0.3 s at 200 MB), which a process
    answering one query pays on every run. Beside records of such names it only removes
    what a load removes anyway when it meets it (a record of another version, unsealed or
    unparseable: `index.from_disk`), so skipping it changes no answer, and the directory
    stays bounded: a name of a session that is gone, or a temporary file, runs the cleanup.
    Its result depends on the listing only (the count of records and their summed size
    against the budgets), so it is computed from the listing."""
    folder = owned(index_dir)
    listing = folder.listing()
    if listing is None:
        return True, None  # (cleanup: nothing of ours to inspect)
    names = frozenset(name for name, _st in listing)
    if not files:
        return None, names  # nothing listed yet: nothing to tell records of live sessions by
    # every record name is the file's `cache_base` and a suffix of its branch mode and kind
    base = cache_base(files[0])
    suffixes = [
        cache_name(files[0], branches, kind)[len(base) :] for branches in ("active", "all") for kind in RECORD_KINDS
    ]
    expected = {b + suffix for b in map(cache_base, files) for suffix in suffixes}
    inspected = read_bytes = 0
    for name, st in listing:
        if folder.is_temp(name):
            return None, names
        if not name.endswith(".json") or not _stat.S_ISREG(st.st_mode):
            continue  # (the snapshot, or not a file: the cleanup leaves these alone too)
        if name not in expected:
            return None, names
        inspected += 1
        read_bytes += st.st_size
    return inspected <= max_files and read_bytes <= max_bytes, names


def cleanup(index_dir: str | None, max_files: int, max_bytes: int) -> bool:
    """Remove unusable records; True when the whole directory was inspected.

    Only names this module writes are looked at (`is_record_name`, temp files), only in a
    directory we own, only regular files, never through a symlink; anything else there is
    left alone. Removed: leftover temp files, unparseable records, other versions, records
    with no source path, records filed under a name other than their (source, branches,
    kind) name, and records whose source is gone. Bounded by `max_files` inspected files
    and `max_bytes` read bytes (`cache_cleanup_budget` when either is reached)."""
    folder = owned(index_dir)
    listing = folder.listing()
    if listing is None:  # none, missing or refused: nothing of ours to inspect
        return True
    inspected = 0
    read_bytes = 0
    for name, st in listing:
        if folder.is_temp(name):
            folder.remove(name)
            continue
        if not name.endswith(".json") or not _stat.S_ISREG(st.st_mode):
            continue  # the snapshot is checked by its reader; a non-file is not ours to touch
        inspected += 1
        if inspected > max_files:
            return False
        if read_bytes + st.st_size > max_bytes:
            return False
        read_bytes += st.st_size
        data = folder.read(name, max_bytes)
        if data is None:
            continue
        try:
            head = _head_decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            folder.remove(name)
            continue
        if head.cacheVersion != CACHE_VERSION or isinstance(head.cacheVersion, bool) or head.kind not in RECORD_KINDS:
            folder.remove(name)
            continue
        source = head.file if head.kind == "digest" else head.sessionFile
        branches = head.branches if head.branches in ("active", "all") else None
        if not isinstance(source, str) or branches is None or cache_name(source, branches, head.kind) != name:
            folder.remove(name)
            continue
        if not os.path.isfile(source) or not sealed(data):
            folder.remove(name)
    return True

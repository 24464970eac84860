"""Folding a session's full (untruncated) records into the V5 cold digest fields
(digest §5.2): vocabulary (bounded by `maxColdVocabularyBytes`), time range, error count,
tool histogram, files touched and stable addresses."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import disk_cache
from .tokenize import sort_lexical, tokenize_lexical, unique_terms, unique_terms_utf8, utf16_key

if TYPE_CHECKING:
    from ..json_types import JsonObject

FILES_TOUCHED_CAP = 50
FOLD_BATCH_CHARS = 1 << 20  # texts folded per vocabulary step
# Long texts already folded are remembered whole (UTF-8) up to this many bytes per session,
# so a repeat (a re-read file, a re-run command) is not tokenized again. Skipping a repeat
# changes nothing (its terms are all known): past the room, repeats are simply folded again.
SEEN_TEXT_BYTES = 16 << 20


class DigestFolder:
    """Folds full (untruncated) records into the V5 digest fields (digest §5.2)."""

    def __init__(self, max_vocab_bytes: int, batch_chars: int = FOLD_BATCH_CHARS) -> None:
        self.max_vocab_bytes = max(2, max_vocab_bytes)
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.error_count = 0
        self.tools: Counter[str] = Counter()
        self.files: dict[str, None] = {}
        self.vocab: set[str] = set()
        self.seen_texts: set[bytes] = set()  # long texts already folded (UTF-8), while room is left
        self.seen_room = SEEN_TEXT_BYTES
        self.vocab_bytes = 2
        self.vocab_stopped = False
        self.addresses: list[list[Any]] = []
        self.entry_count = 0
        self.batch_chars = batch_chars  # 0: fold text by text (the oracle for tests)
        self.pending: list[bytes] = []  # texts encoded (UTF-8, surrogates passed)
        self.pending_chars = 0

    def add(self, rec: JsonObject) -> None:
        self.add_fields(
            rec["index"],
            rec["entryId"],
            rec.get("operationAddress"),
            rec["role"],
            rec["toolName"],
            ts=rec["timestamp"],
            is_error=rec["isError"],
            files=rec.get("filesTouched", ()),
            text=rec["text"],
        )

    def add_fields(
        self,
        index: int,
        entry_id: str | None,
        address: str | None,
        role: Any,
        tool_name: Any,
        *,
        ts: Any,
        is_error: Any,
        files: Iterable[str],
        text: str,
    ) -> None:
        """`add` of a record given as its fields (`Normalizer.fold` builds no record)."""
        self.entry_count += 1
        if ts is not None:
            if self.first_ts is None or ts < self.first_ts:
                self.first_ts = ts
            if self.last_ts is None or ts > self.last_ts:
                self.last_ts = ts
        if is_error:
            self.error_count += 1
        if tool_name:
            self.tools[tool_name] += 1
        for f in files:
            if len(self.files) >= FILES_TOUCHED_CAP:
                break
            self.files.setdefault(f.strip(), None)
        self.addresses.append([index, entry_id, address, role, tool_name, ts])
        if self.vocab_stopped:
            return
        if not self.batch_chars:
            if len(text) > 256 and self._repeat(text.encode("utf-8", "surrogatepass")):
                return
            self._fold_text(text)
            return
        # (encoded once: for the repeat check and for the batch's tokens)
        data = text.encode("utf-8", "surrogatepass")
        if len(text) > 256 and self._repeat(data):
            return  # sessions repeat whole outputs (re-reads, re-runs): their terms are known
        self.pending.append(data)
        self.pending_chars += len(text)
        if self.pending_chars >= self.batch_chars:
            self.flush()

    def _repeat(self, data: bytes) -> bool:
        """Whether this long text was folded before (remembered while room is left)."""
        if data in self.seen_texts:
            return True
        if len(data) <= self.seen_room:
            self.seen_texts.add(data)
            self.seen_room -= len(data)
        return False

    def flush(self) -> None:
        """Fold the pending texts at once. The vocabulary only depends on the order of
        first appearance when the budget runs out: if all new terms of the batch fit,
        every per-text step would have fitted too (costs only add up) and the result is
        their union; otherwise the batch is replayed text by text."""
        pending = self.pending
        if not pending:
            return
        self.pending = []
        self.pending_chars = 0
        if self.vocab_stopped:
            return
        # A newline separates tokens (and NFKC pieces): the joined text's terms are the
        # union of the texts' terms.
        fresh = unique_terms_utf8(b"\n".join(pending))
        vocab = self.vocab
        fresh.difference_update(vocab)
        if not fresh:
            return
        cost = len("".join(fresh).encode("utf-8", "surrogatepass")) + 3 * len(fresh)
        if not vocab:
            cost -= 1
        if self.vocab_bytes + cost <= self.max_vocab_bytes:
            self.vocab_bytes += cost
            vocab.update(fresh)
            return
        for data in pending:
            self._fold_text(data.decode("utf-8", "surrogatepass"))
            if self.vocab_stopped:
                return

    def _fold_text(self, text: str) -> None:
        """One text's new terms, in first-seen order once the budget runs out."""
        vocab = self.vocab
        fresh = unique_terms(text)
        fresh.difference_update(vocab)
        if not fresh:
            return
        # Cost of the new terms: JSON string bytes plus one comma each (tokens never need
        # escaping). When they all fit, their order cannot matter; otherwise take the
        # first-seen prefix exactly.
        cost = len("".join(fresh).encode("utf-8", "surrogatepass")) + 3 * len(fresh)
        if not vocab:
            cost -= 1
        if self.vocab_bytes + cost <= self.max_vocab_bytes:
            self.vocab_bytes += cost
            vocab.update(fresh)
            return
        for term in dict.fromkeys(tokenize_lexical(text)):
            if term in vocab:
                continue
            cost = len(term.encode("utf-8")) + 2 + (1 if vocab else 0)
            if self.vocab_bytes + cost > self.max_vocab_bytes:
                self.vocab_stopped = True
                return
            self.vocab_bytes += cost
            vocab.add(term)

    def record(self, reasons: list[str]) -> JsonObject:
        self.flush()
        vocabulary = sort_lexical(self.vocab)
        all_reasons = set(reasons)
        if self.vocab_stopped:
            all_reasons.add("max_cold_vocabulary_bytes")
        hist_keys = sorted(self.tools, key=lambda k: (not (k.isdigit() and (k == "0" or k[0] != "0")), utf16_key(k)))
        return {
            "filesTouched": list(self.files),
            "toolHistogram": {k: self.tools[k] for k in hist_keys},
            "errorCount": self.error_count,
            "vocabulary": vocabulary,
            "addresses": self.addresses,
            "indexCoverage": {
                "complete": not all_reasons,
                "vocabularyBytes": len(disk_cache.encoder.encode(vocabulary)),
                "reasons": sort_lexical(all_reasons),
            },
        }

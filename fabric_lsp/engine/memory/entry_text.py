"""Session lines -> memory records (digest §2).

A `Normalizer` is fed the raw entries of the selected lineage in file order and emits
records with dense indices: the entry's own record, then its Fabric trace children,
then its branch-summary fact children. It keeps the session-wide state (duplicate ids,
emitted fact addresses, coverage reasons), so an appended file can be fed on.

Invariant: truncation counts Unicode scalars and never splits a surrogate pair; any cut
adds the coverage reason `max_entry_chars`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from ..fabric_payloads import MISSING, read_branch_details, read_execution_trace
from ..jsstr import js_string_of as js_string
from ..jsstr import js_stringify, js_trim, js_truthy
from ..native import NATIVE
from ..session.content import content_text
from .entry_fields import (
    ARGS_SUMMARY_SCALARS,
    PATH_KEY_SEARCH,
    args_summary,
    collect_paths,
    entry_timestamp,
    plain_role,
    role_of,
    truncate_scalars,
)

if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue

_FILE_REFS = frozenset({"pi.read", "pi.grep", "pi.find", "pi.ls", "pi.edit", "pi.write"})
_OPERATION_JSON_BOUND = 98304
# `Normalizer._plain_fields` in C (None: not built, or FABRIC_LSP_NATIVE=0)
_plain_fields_c: Any = getattr(NATIVE, "plain_fields", None)


class Normalizer:
    """Stateful record builder for one session and one lineage (see module doc)."""

    def __init__(
        self,
        session_file: str,
        session_id: str,
        *,
        max_entry_chars: int | None,
        index_thinking: bool,
        index_tool_output: bool,
    ) -> None:
        self.session_file = session_file
        self.session_id = session_id
        self.max_entry_chars = max_entry_chars
        self.index_thinking = index_thinking
        self.index_tool_output = index_tool_output
        self.next_index = 0
        self.reasons: set[str] = set()
        # the session-wide id sets (sessions._restore_bookkeeping refills them from the records)
        self.entry_ids: set[str] = set()
        self.op_addresses: set[str] = set()
        self.fact_addresses: set[str] = set()
        # file_history.FileOpsCollector fed every entry with its records (None: not kept)
        self.file_ops: Any = None

    # -- public --------------------------------------------------------------------------

    def feed(self, raw: JsonValue, line: int) -> list[JsonObject]:
        """Records for one raw entry (already lineage-filtered), in emission order."""
        role = plain_role(raw)
        if role is not None:
            entry = cast("JsonObject", raw)  # (a message entry: plain_role)
            return self._feed_plain(entry, entry["message"], role, line)
        if not isinstance(raw, dict):
            return []
        etype = raw.get("type")
        if etype not in ("message", "compaction", "branch_summary", "custom_message"):
            return []
        message: JsonObject | None = None
        if etype == "message":
            value: JsonValue = raw.get("message")
            message = value if isinstance(value, dict) else {}
        return self._feed_general(raw, etype, message, line)

    def fold(self, raw: JsonValue, line: int, folder: Any) -> None:
        """`feed` for a cold build: each record goes to `folder` (a `digest_fold.DigestFolder`).
        The entry of almost every line (`plain_role`) is handed over as its fields
        (`DigestFolder.add_fields`) without a record being built; it must fold exactly as
        `feed`'s records do (tests/engine/memory/test_normalize_fast_path.py)."""
        role = plain_role(raw)
        if role is None:
            for rec in self.feed(raw, line):
                folder.add(rec)
            return
        entry = cast("JsonObject", raw)  # (a message entry: plain_role)
        message: JsonObject = entry["message"]
        entry_id, _, tool_name, text, ts, is_error, truncated, files = self._plain_fields(entry, message, role)
        index = self._claim(entry_id, truncated)
        folder.add_fields(index, entry_id, None, role, tool_name, ts=ts, is_error=is_error, files=files, text=text)
        if self.file_ops is not None:
            self.file_ops.observe_entry(message, role, index, entry_id, ts, line=line)

    def _feed_general(self, raw: JsonObject, etype: str, message: JsonObject | None, line: int) -> list[JsonObject]:
        """`feed` of any entry (`etype` a content type; `message` the message object of a
        message entry), step by step."""
        role = role_of(raw, message)
        tool_name, is_error, text, files = self._fields(raw, etype, message, role)
        text, truncated = truncate_scalars(text, self.max_entry_chars)
        if role is None and not js_trim(text):  # (trimming copies: only when it matters)
            return []
        entry_id: str | None = raw.get("id") if isinstance(raw.get("id"), str) else None
        parent_id: str | None = raw.get("parentId") if isinstance(raw.get("parentId"), str) else None
        ts = entry_timestamp(raw, message)
        record = self._record(
            entry_id,
            parent_id,
            etype,
            role,
            tool_name,
            text=text,
            ts=ts,
            is_error=is_error,
            truncated=truncated,
            line=line,
        )
        if files:
            record["filesTouched"] = files
        out = [record]
        if role == "toolResult" and tool_name == "fabric_exec" and entry_id is not None and message is not None:
            out.extend(self._trace_children(message, entry_id, parent_id, ts, line))
        if (etype == "branch_summary" or role == "branchSummary") and entry_id is not None:
            out.extend(self._fact_children(raw, message, entry_id, parent_id, ts=ts, line=line))
        if self.file_ops is not None:
            self.file_ops.observe(raw, message, out)
        return out

    def plain_options(self) -> tuple[Any, ...]:
        """The arguments after (raw, message, role) of `_native.plain_fields` (and of the C
        feed and fold calls that read a plain entry's fields: hot_feed.py, cold_fold.py)."""
        return (self.index_tool_output, self.index_thinking, self.max_entry_chars, args_summary, PATH_KEY_SEARCH,
                entry_timestamp, ARGS_SUMMARY_SCALARS)  # fmt: skip

    def _plain_fields(
        self, raw: JsonObject, message: JsonObject, role: str
    ) -> tuple[str | None, str | None, str | None, str, int | float | None, bool, bool, list[str]]:
        """The record fields of a message entry whose role is user, assistant or a
        toolResult other than fabric_exec's (`plain_role`: almost every entry), read in
        one pass over the content instead of through the general steps (`_fields`,
        `_message_text`), which they must equal (tests/engine/memory/test_normalize_fast_path.py):
        (entryId, parentId, toolName, text, timestamp, isError, truncated, filesTouched)."""
        if _plain_fields_c is not None:  # this method in C for the common shapes (test_normalize_fast_path.py)
            got = _plain_fields_c(raw, message, role, *self.plain_options())
            if got is not None:
                return got
        tool_name: str | None = None
        files: list[str] = []
        flag = message.get("isError")
        is_error = False if flag is None or flag is False else (True if flag is True else js_truthy(flag))
        content: JsonValue = message.get("content")
        part: JsonValue
        if role == "user":
            text = content_text(content)
        elif role == "toolResult":
            tool_name = (js_string(message["toolName"]) if "toolName" in message else "undefined") or None
            prefix = f"toolResult({tool_name})" if tool_name else "toolResult"
            if flag is True:
                prefix += " [error]"
            body = content_text(content)
            text = f"{prefix}: {body}" if self.index_tool_output and body else prefix
        else:  # assistant: text and thinking parts, tool calls (first name, summaries, paths)
            pieces: list[str] = []
            found: dict[str, None] | None = None
            if isinstance(content, list):
                for part in content:
                    if not isinstance(part, dict):
                        continue
                    ptype = part.get("type")
                    if ptype == "text":
                        ptext = part.get("text")
                        if isinstance(ptext, str):
                            pieces.append(ptext)
                    elif ptype == "toolCall":
                        name = part["name"] if "name" in part else None
                        if tool_name is None and isinstance(name, str):
                            tool_name = name
                        shown = (name if isinstance(name, str) else js_string(name)) if "name" in part else "undefined"
                        if "arguments" in part:
                            arguments = part["arguments"]
                            pieces.append(f"Tool: {shown}({args_summary(arguments, True)})")
                            if found is None:
                                found = {}
                            collect_paths(arguments, None, found)
                        else:
                            pieces.append(f"Tool: {shown}()")
                    elif ptype == "thinking" and self.index_thinking and isinstance(part.get("thinking"), str):
                        pieces.append(part["thinking"])
            err = message.get("errorMessage")
            if isinstance(err, str) and err:
                pieces.append(f"Error: {err}")
            text = "\n".join(pieces)
            if found:
                files = list(found)
        limit = self.max_entry_chars
        truncated = limit is not None and len(text) > limit
        if truncated:
            text = text[: max(0, limit)]  # type: ignore[operator]  # (limit is an int here)
        entry_id = raw.get("id")
        if type(entry_id) is not str:
            entry_id = None
        parent_id = raw.get("parentId")
        if type(parent_id) is not str:
            parent_id = None
        return entry_id, parent_id, tool_name, text, entry_timestamp(raw, message), is_error, truncated, files

    def _feed_plain(self, raw: JsonObject, message: JsonObject, role: str, line: int) -> list[JsonObject]:
        """`feed` of an entry `plain_role` admits."""
        entry_id, parent_id, tool_name, text, ts, is_error, truncated, files = self._plain_fields(raw, message, role)
        record = self._record(
            entry_id,
            parent_id,
            "message",
            role,
            tool_name,
            text=text,
            ts=ts,
            is_error=is_error,
            truncated=truncated,
            line=line,
        )
        if files:
            record["filesTouched"] = files
        out = [record]
        if self.file_ops is not None:
            self.file_ops.observe(raw, message, out)
        return out

    def coverage_reasons(self, extra: Iterable[str] = ()) -> list[str]:
        return sorted(set(extra) | self.reasons)

    # -- internals -----------------------------------------------------------------------

    def _claim(self, entry_id: str | None, truncated: bool) -> int:
        """The next record's index, noting its id (duplicates) and a truncated text."""
        if truncated:
            self.reasons.add("max_entry_chars")
        index = self.next_index
        self.next_index += 1
        if entry_id is not None:
            if entry_id in self.entry_ids:
                self.reasons.add("duplicate_entry_id")
            self.entry_ids.add(entry_id)
        return index

    def _record(
        self,
        entry_id: str | None,
        parent_id: str | None,
        etype: str,
        role: str | None,
        tool_name: str | None,
        *,
        text: str,
        ts: int | float | None,
        is_error: bool,
        truncated: bool,
        line: int,
    ) -> JsonObject:
        index = self._claim(entry_id, truncated)
        return {
            "sessionFile": self.session_file,
            "sessionId": self.session_id,
            "index": index,
            "entryId": entry_id,
            "parentId": parent_id,
            "type": etype,
            "role": role,
            "toolName": tool_name,
            "text": text,
            "timestamp": ts,
            "isError": is_error,
            "truncated": truncated,
            "line": line,
        }

    def _note_op_address(self, address: str) -> None:
        if address in self.op_addresses:
            self.reasons.add("duplicate_operation_address")
        self.op_addresses.add(address)

    def _fields(
        self, raw: JsonObject, etype: str, message: JsonObject | None, role: str | None
    ) -> tuple[str | None, bool, str, list[str]]:
        tool_name: str | None = None
        is_error = False
        files: list[str] = []
        text = ""
        content: JsonValue
        part: JsonValue
        if etype == "message":
            assert message is not None
            is_error = js_truthy(message.get("isError"))
            if role == "toolResult":
                tool_name = (js_string(message["toolName"]) if "toolName" in message else "undefined") or None
            elif role == "bashExecution":
                tool_name = "bash"
            elif role == "assistant":
                content = message.get("content")
                if isinstance(content, list):
                    for part in content:
                        if (
                            isinstance(part, dict)
                            and part.get("type") == "toolCall"
                            and isinstance(part.get("name"), str)
                        ):
                            tool_name = part["name"]
                            break
            text = self._message_text(message, role, tool_name)
            if role == "assistant":
                found: dict[str, None] = {}
                content = message.get("content")
                if isinstance(content, list):
                    for part in content:
                        if isinstance(part, dict) and part.get("type") == "toolCall" and "arguments" in part:
                            collect_paths(part["arguments"], None, found)
                files = list(found)
        elif etype == "compaction":
            text = "compaction: " + (js_string(raw["summary"]) if "summary" in raw else "undefined")
        elif etype == "custom_message":
            text = self._custom_text(raw)
        return tool_name, is_error, text, files

    def _custom_text(self, holder: JsonObject) -> str:
        body = content_text(holder.get("content"))
        ctype = holder.get("customType")
        ctype = js_string(ctype) if ctype is not None else ""
        return f"[{ctype}] {body}" if ctype else body

    def _message_text(self, message: JsonObject, role: str | None, tool_name: str | None) -> str:
        if role == "user":
            return content_text(message.get("content"))
        if role == "assistant":
            pieces: list[str] = []
            content: JsonValue = message.get("content")
            if isinstance(content, list):
                part: JsonValue
                for part in content:
                    if not isinstance(part, dict):
                        continue
                    ptype = part.get("type")
                    if ptype == "text" and isinstance(part.get("text"), str):
                        pieces.append(part["text"])
                    elif ptype == "thinking" and self.index_thinking and isinstance(part.get("thinking"), str):
                        pieces.append(part["thinking"])
                    elif ptype == "toolCall":
                        name = js_string(part["name"]) if "name" in part else "undefined"
                        pieces.append(f"Tool: {name}({args_summary(part.get('arguments'), 'arguments' in part)})")
            err = message.get("errorMessage")
            if isinstance(err, str) and err:
                pieces.append(f"Error: {err}")
            return "\n".join(pieces)
        if role == "toolResult":
            prefix = f"toolResult({tool_name})" if tool_name else "toolResult"
            if message.get("isError") is True:
                prefix += " [error]"
            body = content_text(message.get("content"))
            return f"{prefix}: {body}" if self.index_tool_output and body else prefix
        if role == "bashExecution":
            command = js_string(message["command"]) if "command" in message else "undefined"
            text = f"bash$ {command}"
            code = message.get("exitCode")
            if isinstance(code, (int, float)) and not isinstance(code, bool):
                text += f" [exit {js_string(code)}]"
            output = message.get("output")
            if self.index_tool_output and isinstance(output, str) and output:
                text += "\n" + output
            return text
        if role == "custom":
            return self._custom_text(message)
        if role == "compactionSummary":
            return "compaction: " + (js_string(message["summary"]) if "summary" in message else "undefined")
        return ""

    def _bounded_operation(self, op: JsonObject, result_present: bool, result: Any) -> str:
        """`op` with its result (or `resultOmitted`), the result dropped when the op's JSON
        would pass _OPERATION_JSON_BOUND UTF-8 bytes; returns that JSON (stringified once)."""
        if result_present:
            if self.index_tool_output:
                op["result"] = result
            else:
                op["resultOmitted"] = True
        json = js_stringify(op)
        # (JSON.stringify escapes lone surrogates: the str encodes; at most 4 bytes a character)
        if "result" in op and len(json) * 4 > _OPERATION_JSON_BOUND and len(json.encode()) > _OPERATION_JSON_BOUND:
            del op["result"]
            op["resultOmitted"] = True
            json = js_stringify(op)
        return json

    def _trace_children(
        self, message: JsonObject, entry_id: str, parent_id: str | None, ts: int | float | None, line: int
    ) -> list[JsonObject]:
        nested = read_execution_trace(message.get("details"), legacy_audits=False)
        if nested is None:
            return []
        out: list[JsonObject] = []
        for raw_op in nested["operations"]:
            seq = raw_op["sequence"]
            seq = int(seq) if isinstance(seq, float) else seq
            ref = raw_op["ref"]
            provider, action, tool = raw_op["provider"], raw_op["action"], raw_op["tool"]
            address = f"{entry_id}/{seq}"
            op: dict[str, Any] = {
                "address": address,
                "parentEntryId": entry_id,
                "sequence": seq,
                "tool": tool,
                "ref": ref,
            }
            if provider is not None:
                op["provider"] = provider
            if action is not None:
                op["action"] = action
            op["args"] = raw_op["args"]
            op["outcome"] = raw_op["outcome"]
            if raw_op["error"] is not None:
                op["error"] = raw_op["error"]
            op_json = self._bounded_operation(op, raw_op["result"] is not MISSING, raw_op["result"])
            text, truncated = truncate_scalars(f"Fabric operation {ref}\n" + op_json, self.max_entry_chars)
            rec = self._record(
                address,
                parent_id,
                "fabric_operation",
                "fabricOperation",
                tool,
                text=text,
                ts=ts,
                is_error=raw_op["outcome"] != "succeeded",
                truncated=truncated,
                line=line,
            )
            if ref in _FILE_REFS and ref == f"pi.{tool}":
                args = raw_op["args"]
                value = next((args[k] for k in ("path", "file", "dir") if args.get(k) is not None), None)
                if isinstance(value, str) and js_trim(value):
                    rec["filesTouched"] = [js_trim(value)]
            rec["parentEntryId"] = entry_id
            rec["operationAddress"] = address
            rec["ref"] = ref
            if provider is not None:
                rec["provider"] = provider
            if action is not None:
                rec["action"] = action
            rec["outcome"] = raw_op["outcome"]
            rec["operation"] = op
            self._note_op_address(address)
            out.append(rec)
        return out

    def _fact_children(
        self,
        raw: JsonObject,
        message: JsonObject | None,
        entry_id: str,
        parent_id: str | None,
        *,
        ts: int | float | None,
        line: int,
    ) -> list[JsonObject]:
        envelope = read_branch_details(raw.get("details")) if "details" in raw else None
        if envelope is None and message is not None:
            envelope = read_branch_details(message.get("details"))
        if envelope is None:
            return []
        facts = envelope["facts"]
        seen: set[str] = set()
        for fact in facts:
            if fact["address"] in seen:
                self.reasons.add("duplicate_branch_fact_address")
                if fact["kind"] == "operation":
                    self.reasons.add("duplicate_operation_address")
                return []
            seen.add(fact["address"])
        from_id = raw.get("fromId")
        if from_id is None and message is not None:
            from_id = message.get("fromId")
        out: list[JsonObject] = []
        for fact in facts:
            address = fact["address"]
            if address in self.fact_addresses:
                continue
            self.fact_addresses.add(address)
            kind = fact["kind"]
            bf: dict[str, Any] = {
                "kind": kind,
                "address": address,
                "entryId": fact["entryId"],
                "subordinal": fact["subordinal"],
                "carrierEntryId": entry_id,
                "carrierParentId": parent_id,
                "carrierFromId": from_id,
            }
            tool_name = None
            is_error = False
            files: list[str] = []
            extra: dict[str, Any] = {}
            if kind == "user":
                bf["text"] = fact["text"]
                role, text = "branchUser", fact["text"]
            elif kind == "customMessage":
                bf.update(text=fact["text"], customType=fact["customType"], display=fact["display"])
                role = "branchCustomMessage"
                text = f"[{fact['customType']}] {fact['text']}" if fact["customType"] else fact["text"]
            elif kind == "phase":
                bf["phase"] = fact["phase"]
                role, text = "fabricPhase", f"Fabric phase {fact['phase']}"
            elif kind == "fabricRun":
                bf["name"] = fact["name"]
                if "description" in fact:
                    bf["description"] = fact["description"]
                bf["outcome"] = fact["outcome"]
                role, tool_name = "fabricRun", "fabric_exec"
                desc = f" — {fact['description']}" if fact.get("description") else ""
                text = f"Fabric run {fact['name']}{desc} → {fact['outcome']}"
                is_error = fact["outcome"] != "succeeded"
                extra = {"operationAddress": address, "outcome": fact["outcome"]}
            else:  # operation
                provider, action = fact.get("provider"), fact.get("action")
                bf.update(ref=fact["ref"])
                if provider is not None:
                    bf["provider"] = provider
                if action is not None:
                    bf["action"] = action
                bf.update(tool=fact["tool"], args=fact["args"], outcome=fact["outcome"])
                if "error" in fact:
                    bf["error"] = fact["error"]
                if "result" in fact and self.index_tool_output:
                    bf["result"] = fact["result"]
                op: dict[str, Any] = {
                    "address": address,
                    "parentEntryId": fact["entryId"],
                    "subordinal": fact["subordinal"],
                    "tool": fact["tool"],
                    "ref": fact["ref"],
                }
                if provider is not None:
                    op["provider"] = provider
                if action is not None:
                    op["action"] = action
                op["args"] = fact["args"]
                op["outcome"] = fact["outcome"]
                if "error" in fact:
                    op["error"] = fact["error"]
                op_json = self._bounded_operation(op, "result" in fact, fact.get("result"))
                role, tool_name = "fabricOperation", fact["tool"]
                text = f"Fabric branch operation {fact['ref']}\n" + op_json
                is_error = fact["outcome"] != "succeeded"
                found: dict[str, None] = {}
                collect_paths(fact["args"], None, found)
                files = list(found)
                extra = {"operationAddress": address, "ref": fact["ref"]}
                if provider is not None:
                    extra["provider"] = provider
                if action is not None:
                    extra["action"] = action
                extra.update(outcome=fact["outcome"], operation=op)
            text, truncated = truncate_scalars(text, self.max_entry_chars)
            rec = self._record(
                address,
                parent_id,
                "fabric_branch_fact",
                role,
                tool_name,
                text=text,
                ts=ts,
                is_error=is_error,
                truncated=truncated,
                line=line,
            )
            if files:
                rec["filesTouched"] = files
            rec["parentEntryId"] = entry_id
            rec.update(extra)
            rec["branchFact"] = bf
            rec["factAddress"] = address
            rec["carrierEntryId"] = entry_id
            rec["carrierParentId"] = parent_id
            rec["carrierFromId"] = from_id
            if "operationAddress" in extra:
                self._note_op_address(address)
            out.append(rec)
        return out

"""Intents committed by the live Pi (editors/pi): claim a pending intent, record its end.

Seed 001's host commits at `agent_settled`. A Pi that holds a session (a live lease,
engine/session/lease.py) is that host: our extension claims the pending intent here,
runs Pi's own `compact()` with the intent's instructions (the Fabric engine answers
Pi's `session_before_compact`), and records the outcome here, exactly as seed 001 says.

Invariants: a claim is taken under the state lock, so exactly one process commits an
intent; a claim whose process is gone is void (the intent is pending again); finishing
clears only the claimed intent (by identity), so a newer request waits for the next
boundary; a claim given back (`release_claim`: Pi backed off because a prompt came in)
leaves the intent pending for the next boundary.
"""

from __future__ import annotations

from typing import Any

from fabric_lsp.engine.intents.controller import QUIET_MESSAGES, custom_instructions, finish_state, now_ms
from fabric_lsp.engine.intents.store import IntentStore
from fabric_lsp.engine.session.lease import process_alive, process_start_time

# Pi's own messages for a compaction that ends without an entry and without an error
# worth recording (seed 001: these clear quietly), plus a user abort.
QUIET_PI_ERRORS = QUIET_MESSAGES | {"Compaction aborted", "Request was aborted", "This operation was aborted"}


def claim_is_live(claim: dict[str, Any] | None) -> bool:
    if not isinstance(claim, dict) or not isinstance(claim.get("pid"), int):
        return False
    start = claim.get("startTime")
    return process_alive(claim["pid"], start if isinstance(start, int) else None)


def claim_intent(store: IntentStore, session_path: str, *, pid: int) -> dict[str, Any] | None:
    """Take the pending intent for process `pid`.

    Returns `{intentId, intent, customInstructions}` (the instructions Pi's compact()
    gets: the typed preserve encoding, or the plain text) or None when nothing is
    pending or another live process holds the claim. Claiming again from the same
    process returns the same claim."""
    with store.locked(session_path):
        state = store.load(session_path)
        if state.pending is None or state.pending_id is None:
            if state.claim is not None:  # a claim of an intent that is gone
                state.claim = None
                store.save(state)
            return None
        claim = state.claim
        if claim is not None and claim.get("intentId") == state.pending_id and claim_is_live(claim):
            if claim.get("pid") != pid:
                return None
        else:
            state.claim = {
                "intentId": state.pending_id,
                "pid": pid,
                "startTime": process_start_time(pid),
                "at": now_ms(),
            }
            store.save(state)
        return {
            "intentId": state.pending_id,
            "intent": state.pending,
            "customInstructions": custom_instructions(state.pending),
        }


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def committed_record(
    intent: dict[str, Any],
    *,
    entry_id: str,
    summary: str,
    tokens_before: int,
    estimated_tokens_after: int | None = None,
    projected_tokens_after: int | None = None,
    at: int | None = None,
) -> dict[str, Any]:
    """The CommitRecord of a compaction Pi committed (protocol key order)."""
    record: dict[str, Any] = {
        "at": now_ms() if at is None else at,
        "requestedBy": intent.get("requestedBy", "model"),
        "status": "committed",
        "summary": summary,
        "tokensBefore": tokens_before,
    }
    if estimated_tokens_after is not None:
        record["estimatedTokensAfter"] = estimated_tokens_after
    if projected_tokens_after is not None:
        record["projectedTokensAfter"] = projected_tokens_after
    record["entryId"] = entry_id
    record["committedBy"] = "pi"
    return record


def finish_claim(
    store: IntentStore,
    session_path: str,
    *,
    intent_id: str,
    committed: dict[str, Any] | None = None,
    error: str | None = None,
) -> dict[str, Any] | None:
    """Record the end of a claimed intent: `committed` (the CommitRecord fields
    entryId/summary/tokensBefore/estimatedTokensAfter) or `error` (Pi's message).
    Quiet messages clear the intent without a record. Returns the record written, or
    None (quiet clear, or the intent was not ours any more)."""
    with store.locked(session_path):
        state = store.load(session_path)
        intent = state.pending if state.pending_id == intent_id else None
        claimed = state.claim is not None and state.claim.get("intentId") == intent_id
        if intent is None and not claimed:
            return None
        base = intent if intent is not None else {}
        record: dict[str, Any] | None
        cleared: str | None = None
        if committed is not None:
            record = committed_record(
                base,
                entry_id=str(committed["entryId"]),
                summary=str(committed["summary"]),
                tokens_before=int(committed["tokensBefore"]),
                estimated_tokens_after=_int_or_none(committed.get("estimatedTokensAfter")),
                projected_tokens_after=_int_or_none(committed.get("projectedTokensAfter")),
            )
        else:
            message = (error or "Compaction error").strip() or "Compaction error"
            if message in QUIET_PI_ERRORS or message.startswith("Nothing to compact"):
                record = None
                cleared = message
            else:
                record = {
                    "at": now_ms(),
                    "requestedBy": base.get("requestedBy", "model"),
                    "status": "failed",
                    "error": message,
                    "committedBy": "pi",
                }
        finish_state(state, intent_id, record, cleared=cleared)
        state.claim = None
        store.save(state)
        return record


def release_claim(store: IntentStore, session_path: str, *, intent_id: str, pid: int) -> bool:
    """Give back process `pid`'s claim on `intent_id` without an outcome: the intent stays
    pending for the next boundary. True when that claim was there."""
    with store.locked(session_path):
        state = store.load(session_path)
        claim = state.claim
        if claim is None or claim.get("intentId") != intent_id or claim.get("pid") != pid:
            return False
        state.claim = None
        store.save(state)
        return True

"""The one reference grammar: the shared table of cases (tests/fixtures/references.json),
which the VS Code and Neovim parsers check too, against fabric_lsp.engine.references."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric_lsp.engine.references import (
    ParsedReference,
    ReferenceSyntaxError,
    find_references,
    format_reference,
    parse_reference,
)

CASES = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "references.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES["parse"], ids=[repr(c["text"]) for c in CASES["parse"]])
def test_parse_reference_table(case: dict) -> None:
    if case.get("error"):
        with pytest.raises(ReferenceSyntaxError) as err:
            parse_reference(case["text"])
        assert "pi-entry:" in str(err.value)  # the message names the accepted forms
    else:
        assert parse_reference(case["text"]) == ParsedReference(case["session"], case["entry"], case["operation"])


@pytest.mark.parametrize("case", CASES["find"], ids=[repr(c["text"]) for c in CASES["find"]])
def test_find_references_table(case: dict) -> None:
    assert [[r.session_id, r.entry_id, r.start, r.end] for r in find_references(case["text"])] == case["refs"]


def test_every_formatted_reference_parses_back() -> None:
    for sid, eid in [("01a182b4-1092-7a6b-8cc6-b138f37cc8ab", "97e8c51f"), ("s", "e:1"), ("a.b", "c_d")]:
        assert parse_reference(format_reference(sid, eid)) == ParsedReference(sid, eid, None)
        assert parse_reference(f"{sid}/{eid}") == ParsedReference(sid, eid, None)


def test_the_table_covers_every_form() -> None:
    ok = [c for c in CASES["parse"] if not c.get("error")]
    assert any(c["text"].strip().startswith("pi-entry:") for c in ok)
    assert any(c["session"] and "/" in c["session"] for c in ok)  # a path
    assert any(c["session"] and not c["text"].startswith("pi-entry:") and "/" not in c["session"] for c in ok)
    assert any(c["session"] is None and c["operation"] is None for c in ok)
    assert any(c["operation"] is not None for c in ok)
    assert sum(1 for c in CASES["parse"] if c.get("error")) >= 10

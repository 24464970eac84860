"""A real server on sessions real Pi 1.6.0 wrote: hovers and expand mark the entries Pi
hid or replaced with a context edit, and the compaction preview gives Pi 1.6.0's own
"Nothing to compact" (issue 31)."""

from __future__ import annotations

import json
import shutil

import pytest
import pytest_asyncio
from fabric_e2e_harness import PROJECT_FOLDER, SPEC_WARNINGS_AS_ERRORS, rpc, start, stop
from lsprotocol import types

from fabric_lsp import protocol
from tests.conftest import FIXTURES

pytestmark = [SPEC_WARNINGS_AS_ERRORS, pytest.mark.asyncio(loop_scope="module")]

PI160 = FIXTURES / "pi160"
RETRY = "retries-and-overflow.jsonl"


@pytest.fixture(scope="module")
def pi1x_agent(agent_dir):
    for name in (RETRY, "replacement.jsonl", "lab-one.jsonl"):
        shutil.copyfile(PI160 / name, agent_dir / "sessions" / PROJECT_FOLDER / name)
    return agent_dir


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(pi1x_agent, editor):
    c = await start(pi1x_agent, editor)
    yield c
    await stop(c)


async def _hover(client, uri, line, character):
    return await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=character)
        )
    )


def _open(client, path, text, language="jsonl"):
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=path.as_uri(), language_id=language, version=1, text=text)
        )
    )
    return path.as_uri()


async def test_hover_marks_the_attempt_pi_hid(client, pi1x_agent):
    path = pi1x_agent / "sessions" / PROJECT_FOLDER / RETRY
    text = path.read_text(encoding="utf-8")
    uri = _open(client, path, text)
    lines = text.splitlines()
    hidden = next(i for i, ln in enumerate(lines) if '"id":"95a4ef17"' in ln)
    value = (await _hover(client, uri, hidden, 3)).contents.value
    assert "**hidden from the model context** by context edit `7457331b`" in value, value
    edit = next(i for i, ln in enumerate(lines) if '"id":"7457331b"' in ln)
    assert "context edit: hides `95a4ef17`" in (await _hover(client, uri, edit, 3)).contents.value
    plain = next(i for i, ln in enumerate(lines) if '"id":"d1c542c3"' in ln)
    assert "model context" not in (await _hover(client, uri, plain, 3)).contents.value


async def test_hover_on_a_reference_marks_a_replaced_entry(client, tmp_path_factory):
    note = tmp_path_factory.mktemp("notes") / "notes.md"
    sid = json.loads((PI160 / "replacement.jsonl").read_text().splitlines()[0])["id"]
    uri = _open(client, note, f"see pi-entry:{sid}/5f16e3af here\n", "markdown")
    value = (await _hover(client, uri, 0, 8)).contents.value
    assert "**replaced in the model context** by context edit `8925f98c`" in value, value
    assert "note line 1" in value  # the entry as written


async def test_expand_marks_and_the_preview_gives_pis_nothing_to_compact(client, pi1x_agent):
    folder = pi1x_agent / "sessions" / PROJECT_FOLDER
    res = await rpc(client, protocol.EXPAND, {"session": str(folder / RETRY), "entryIds": ["95a4ef17", "d1c542c3"]})
    marks = {e["entryId"]: e.get("contextEdit") for e in res["expanded"]}
    assert marks == {"95a4ef17": {"editId": "7457331b", "state": "hidden"}, "d1c542c3": None}
    preview = await rpc(client, protocol.COMPACTION_PREVIEW, {"session": str(folder / "lab-one.jsonl")})
    assert preview["outcome"] == "skipped" and preview["piRules"] == "1.x"
    assert preview["reason"] == "Pi would keep everything: Nothing to compact (session too small)"

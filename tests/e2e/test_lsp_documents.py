"""Hover on Pi session JSONL lines and on entry references, go-to-definition from a
reference to its JSONL line."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio
from fabric_e2e_harness import PROJECT_FOLDER, SPEC_WARNINGS_AS_ERRORS, start, stop
from lsprotocol import types

pytestmark = [SPEC_WARNINGS_AS_ERRORS, pytest.mark.asyncio(loop_scope="module")]

S01 = "01-print-default-tools.jsonl"
S01_ID = "01a22a55-edc4-7a7c-a326-7243dd1f6cb8"
S03_ID = "01a22a5b-23e4-707c-bd37-182443495f96"  # shared by 03 and its resumed copy 04


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(agent_dir, editor):
    c = await start(agent_dir, editor)
    yield c
    await stop(c)


def _open(client, path, text=None, language="jsonl"):
    text = path.read_text(encoding="utf-8") if text is None else text
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=path.as_uri(), language_id=language, version=1, text=text)
        )
    )
    return path.as_uri()


async def _hover(client, uri, line, character):
    return await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
        )
    )


async def test_hover_on_session_lines(client, agent_dir):
    path = agent_dir / "sessions" / PROJECT_FOLDER / S01
    uri = _open(client, path)
    lines = path.read_text(encoding="utf-8").splitlines()

    header = await _hover(client, uri, 0, 3)
    assert header.contents.kind == types.MarkupKind.Markdown
    assert S01_ID in header.contents.value and "/home/user/proj" in header.contents.value

    user = await _hover(client, uri, 3, 10)
    text = user.contents.value
    assert "· user" in text and "`d47ccd08`" in text and "(parent `a85cc056`)" in text
    assert "Please fix the failing tests in the calc project" in text
    assert f"pi-entry:{S01_ID}/d47ccd08" in text
    assert "2026-11-30T02:43:24.299Z" in text and "line 4" in text

    tool_line = next(i for i, ln in enumerate(lines) if '"role":"toolResult"' in ln)
    tool = await _hover(client, uri, tool_line, 5)
    raw = json.loads(lines[tool_line])
    assert f"tool: `{raw['message']['toolName']}`" in tool.contents.value


async def test_hover_outside_a_session_file_is_none(client, tmp_path):
    path = tmp_path / "other.jsonl"
    uri = _open(client, path, '{"a":1}\n{"b":2}\n')
    assert await _hover(client, uri, 1, 2) is None


async def test_hover_on_a_malformed_line(client, tmp_path):
    path = tmp_path / "broken.jsonl"
    header = json.dumps({"type": "session", "id": "abc", "cwd": "/x"})
    uri = _open(client, path, header + '\n{"type":"message", oops\n')
    result = await _hover(client, uri, 1, 3)
    assert "Malformed line 2" in result.contents.value


async def test_hover_and_definition_on_a_reference(client, tmp_path, agent_dir):
    note = tmp_path / "notes.md"
    ref = f"pi-entry:{S01_ID}/d47ccd08"
    uri = _open(client, note, f"# Notes\n\nSee {ref}, it started there.\n", "markdown")
    col = len("See ") + 5
    hover = await _hover(client, uri, 2, col)
    assert "Please fix the failing tests" in hover.contents.value
    assert str(agent_dir / "sessions" / PROJECT_FOLDER / S01) in hover.contents.value

    locations = await client.text_document_definition_async(
        types.DefinitionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=2, character=col)
        )
    )
    assert len(locations) == 1
    assert locations[0].uri == (agent_dir / "sessions" / PROJECT_FOLDER / S01).as_uri()
    assert locations[0].range.start.line == 3

    # outside the reference: nothing
    assert await _hover(client, uri, 0, 2) is None


async def test_reference_domain_errors_render_in_the_hover(client, tmp_path):
    note = tmp_path / "bad-refs.md"
    text = f"pi-entry:{S03_ID}/abc\npi-entry:{S01_ID}/ffffffff\npi-entry:nosuchsession/abc\n"
    uri = _open(client, note, text, "markdown")
    ambiguous = await _hover(client, uri, 0, 12)
    assert "ambiguous" in ambiguous.contents.value
    missing_entry = await _hover(client, uri, 1, 12)
    assert "was not found" in missing_entry.contents.value
    missing_session = await _hover(client, uri, 2, 12)
    assert "not found" in missing_session.contents.value.lower()
    none = await client.text_document_definition_async(
        types.DefinitionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=2, character=12)
        )
    )
    assert not none


async def test_hover_follows_document_changes(client, tmp_path):
    path = tmp_path / "live.jsonl"
    header = json.dumps({"type": "session", "id": "live-session", "cwd": "/x"})
    first = json.dumps(
        {"type": "message", "id": "aa000001", "parentId": None, "message": {"role": "user", "content": "first words"}}
    )
    uri = _open(client, path, header + "\n" + first + "\n")
    assert "first words" in (await _hover(client, uri, 1, 5)).contents.value
    second = first.replace("first words", "second words")
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=header + "\n" + second + "\n")],
        )
    )
    hover = await _hover(client, uri, 1, 5)
    assert "second words" in hover.contents.value and "first words" not in hover.contents.value


async def test_definition_from_a_parent_id_in_a_session_file(client, agent_dir):
    path = agent_dir / "sessions" / PROJECT_FOLDER / S01
    uri = _open(client, path)
    lines = path.read_text(encoding="utf-8").splitlines()
    col = lines[3].index('"parentId":"a85cc056"') + len('"parentId":"') + 2

    async def definition(line, character):
        return await client.text_document_definition_async(
            types.DefinitionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=line, character=character),
            )
        )

    (loc,) = await definition(3, col)
    assert loc.uri == uri and loc.range.start.line == 2  # the thinking_level_change entry
    assert not await definition(3, 1)  # on "type": not an entry id
    own = lines[3].index('"id":"d47ccd08"') + len('"id":"') + 1
    assert not await definition(3, own)  # an entry's own id goes nowhere


async def test_plaintext_only_client_gets_plaintext_hovers(agent_dir):
    from fabric_e2e_harness import start as start_client

    caps = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.PlainText])
        )
    )
    c = await start_client(agent_dir, "plain", capabilities=caps)
    try:
        path = agent_dir / "sessions" / PROJECT_FOLDER / S01
        uri = _open(c, path)
        hover = await _hover(c, uri, 3, 10)
        assert hover.contents.kind == types.MarkupKind.PlainText
        assert "Please fix the failing tests" in hover.contents.value
    finally:
        await stop(c)

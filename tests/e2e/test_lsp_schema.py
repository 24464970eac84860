"""docs/protocol.schema.json is generated from fabric_lsp/protocol.py and kept in sync;
the schema and the decoder agree on what they accept."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp import protocol
from tests.support.examples import profile_examples

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "protocol.schema.json"


def test_schema_file_is_in_sync():
    assert SCHEMA.read_text(encoding="utf-8") == protocol.json_schema_text(), (
        "regenerate: python -m fabric_lsp.protocol > docs/protocol.schema.json"
    )


def test_schema_covers_every_method_and_notification():
    schema = msgspec.json.decode(SCHEMA.read_bytes())
    assert sorted(schema["methods"]) == sorted(protocol.PARAMS_TYPES)
    assert sorted(schema["notifications"]) == [protocol.ACTIVITY, protocol.COMPACTION_COMMITTED]
    assert schema["commands"] == sorted(protocol.COMMANDS)
    for name, definition in schema["$defs"].items():
        if name.endswith("Params") and name not in ("CompactionCommittedParams",):
            assert definition.get("additionalProperties") is False, name


def test_params_json_leaves_out_defaults_and_the_token():
    p = protocol.decode_params(protocol.RECALL, {"query": "x", "scope": "global", "page": 1, "workDoneToken": "t"})
    assert protocol.params_json(p) == {"query": "x", "scope": "global"}
    assert protocol.decode_params(protocol.RECALL, protocol.params_json(p)) == msgspec.structs.replace(
        p, work_done_token=None
    )


@pytest.mark.parametrize("method", sorted(protocol.PARAMS_TYPES))
def test_missing_params_are_an_empty_object(method):
    typ = protocol.PARAMS_TYPES[method]
    required = [
        f
        for f, d in zip(
            typ.__struct_fields__,
            (msgspec.NODEFAULT,) * (len(typ.__struct_fields__) - len(typ.__struct_defaults__))
            + typ.__struct_defaults__,
        )
        if d is msgspec.NODEFAULT
    ]
    if required:
        with pytest.raises(protocol.InvalidParams, match="missing required field"):
            protocol.decode_params(method, None)
    elif method == protocol.FILE_HISTORY:  # one of two optional fields is required
        with pytest.raises(protocol.InvalidParams, match="exactly one of `path` and `uri`"):
            protocol.decode_params(method, None)
    else:
        protocol.decode_params(method, None)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 300) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
keys = st.sampled_from(
    [
        "query",
        "scope",
        "page",
        "pageSize",
        "session",
        "indices",
        "entryIds",
        "entryRange",
        "bogus",
        "targetId",
        "preserve",
    ]
)


@settings(max_examples=profile_examples(200), deadline=None)
@given(method=st.sampled_from(sorted(protocol.PARAMS_TYPES)), params=st.dictionaries(keys, json_values, max_size=4))
def test_decoder_either_accepts_or_names_the_problem(method, params):
    """Any JSON object either decodes, or fails with InvalidParams naming the method."""
    try:
        decoded = protocol.decode_params(method, params)
    except protocol.InvalidParams as err:
        assert str(err).startswith(method + ": ")
        return
    # accepted params round-trip through the wire shape
    again = protocol.decode_params(method, protocol.params_json(decoded))
    assert again == msgspec.structs.replace(decoded, work_done_token=None)

"""One settings schema: the bounds the engines enforce are the bounds every face states
(the server's validation, the CLI's warnings, docs/configuration.md, the VS Code manifest)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_lsp.config import COMPACTION_DEFAULTS, MEMORY_DEFAULTS, MEMORY_INT_BOUNDS, load_config
from fabric_lsp.engine.memory.api import MemoryConfig

ROOT = Path(__file__).resolve().parents[1]


def test_out_of_bounds_memory_value_is_rejected_with_a_warning_naming_the_bound(tmp_path):
    (tmp_path / "fabric.json").write_text(json.dumps({"memory": {"maxEntryChars": 50}}))
    cfg = load_config(init_options={"agentDir": str(tmp_path)})
    assert cfg.memory["maxEntryChars"] == 2000
    assert any("memory.maxEntryChars must be >= 100" in w for w in cfg.warnings), cfg.warnings
    # what the settings report is what the engine uses
    assert MemoryConfig.from_settings(cfg.memory).max_entry_chars == cfg.memory["maxEntryChars"]


def test_the_cli_prints_the_same_warning(tmp_path):
    (tmp_path / "fabric.json").write_text(json.dumps({"memory": {"maxEntryChars": 50}}))
    out = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "sessions", "--agent-dir", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "memory.maxEntryChars must be >= 100" in out.stderr, out.stderr


def test_every_in_bounds_value_reaches_the_engine_unchanged():
    for key, (lo, hi) in MEMORY_INT_BOUNDS.items():
        for value in (lo, hi):
            cfg = load_config(init_options={"memory": {key: value}}, env={})
            assert cfg.memory[key] == value and not cfg.warnings, (key, value, cfg.warnings)
            engine = MemoryConfig.from_settings(cfg.memory)
            snake = "".join("_" + c.lower() if c.isupper() else c for c in key)
            assert getattr(engine, snake) == value, key


def test_vscode_manifest_and_docs_state_the_same_bounds_and_defaults():
    manifest = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())
    props = manifest["contributes"]["configuration"]["properties"]
    docs = (ROOT / "docs" / "configuration.md").read_text()
    for key, (lo, hi) in MEMORY_INT_BOUNDS.items():
        prop = props[f"fabric.memory.{key}"]
        assert (prop["minimum"], prop["maximum"], prop["default"]) == (lo, hi, MEMORY_DEFAULTS[key]), key
        assert f"| `memory.{key}` | `{MEMORY_DEFAULTS[key]}` | integer {lo}–{hi} |" in docs, key
    for key, default in COMPACTION_DEFAULTS.items():
        assert props[f"fabric.compaction.{key}"]["default"] == default, key


def test_the_wire_schema_states_the_intents_engines_limits():
    import msgspec

    from fabric_lsp import protocol
    from fabric_lsp.engine.intents import limits

    schema = msgspec.json.schema(protocol.CompactRequestParams)
    props = schema["$defs"]["CompactRequestParams"]["properties"]

    def max_len(prop):
        return next(a["maxLength"] for a in prop.get("anyOf", [prop]) if "maxLength" in a)

    assert max_len(props["reason"]) == limits.MAX_REASON
    assert max_len(props["requestedBy"]) == limits.MAX_REQUESTED_BY
    assert max_len(props["instructions"]) == limits.MAX_INSTRUCTIONS
    preserve = next(a for a in props["preserve"]["anyOf"] if a.get("type") == "array")
    assert (
        preserve["maxItems"] == limits.MAX_PRESERVE_ITEMS and preserve["items"]["maxLength"] == limits.MAX_PRESERVE_ITEM
    )


def test_the_docs_settings_table_is_generated_from_the_one_schema():
    from fabric_lsp.settings_schema import DOCS, docs_table

    assert docs_table() in DOCS.read_text(encoding="utf-8"), "run: python -m fabric_lsp.settings_schema --write"


def test_config_takes_defaults_and_rules_from_the_schema():
    """Change a bound in the schema and the server's validation follows (no second copy)."""
    from fabric_lsp import config
    from fabric_lsp.settings_schema import BY_KEY

    s = BY_KEY["compaction.commitQuietMs"]
    assert config.COMPACTION_DEFAULTS["commitQuietMs"] == s.default
    rule = config.COMPACTION_RULES["commitQuietMs"]
    assert rule(s.maximum) == s.maximum
    with pytest.raises(ValueError, match=f"<= {int(s.maximum)}"):
        rule(s.maximum + 1)
    assert list(config.MEMORY_DEFAULTS) == [k.split(".", 1)[1] for k in BY_KEY if k.startswith("memory.")]


def test_the_neovim_settings_table_is_generated_from_the_one_schema():
    from fabric_lsp.settings_schema import NEOVIM, neovim_table

    assert NEOVIM.read_text(encoding="utf-8") == neovim_table(), "run: python -m fabric_lsp.settings_schema --write"


def test_every_generated_settings_artefact_is_current():
    """docs/configuration.md's table, the VS Code manifest's server settings and the Neovim
    table are made from fabric_lsp/settings_schema.py (`--write`); `--check` says when not."""
    out = subprocess.run(
        [sys.executable, "-m", "fabric_lsp.settings_schema", "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr


def test_user_level_settings_are_user_level_in_vs_code():
    """A setting that names a directory or decides what leaves the machine is never taken
    from a workspace: application/machine scope, and restricted in untrusted workspaces."""
    from fabric_lsp.settings_schema import SETTINGS

    manifest = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())
    props = manifest["contributes"]["configuration"]["properties"]
    restricted = manifest["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"]
    for s in SETTINGS:
        if s.user_only and s.editor:
            key = f"fabric.{s.key}"
            assert props[key]["scope"] in ("application", "machine-overridable"), key
            assert key in restricted, key

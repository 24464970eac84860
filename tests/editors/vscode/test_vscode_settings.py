"""The extension's `fabric.*` settings mirror the server's configuration (protocol.md)."""

from __future__ import annotations

import json

from vscode_support import EXTENSION

from fabric_lsp import config

CLIENT_ONLY = ("server.", "trace.", "recall.", "preview.", "compact.")


def _properties() -> dict[str, dict]:
    manifest = json.loads((EXTENSION / "package.json").read_text())
    return manifest["contributes"]["configuration"]["properties"]


def _server_keys() -> dict[str, dict]:
    return {
        key.removeprefix("fabric."): spec
        for key, spec in _properties().items()
        if not key.removeprefix("fabric.").startswith(CLIENT_ONLY)
    }


def test_every_server_setting_is_contributed_with_its_default():
    keys = _server_keys()
    expected = {f"memory.{k}": v for k, v in config.MEMORY_DEFAULTS.items()}
    expected |= {f"compaction.{k}": v for k, v in config.COMPACTION_DEFAULTS.items()}
    for key, default in expected.items():
        assert key in keys, f"fabric.{key} is not contributed"
        assert keys[key]["default"] == default, f"fabric.{key}: {keys[key]['default']!r} != server {default!r}"
    # Paths default to "unset" so the server's own resolution (env, agent dir) applies.
    for key in ("agentDir", "sessionDir", "indexDir"):
        assert keys[key]["default"] is None
    # `trusted` is never a setting: it comes from VS Code's workspace trust.
    assert "trusted" not in keys
    assert keys["codeLens"]["default"] is config.ServerConfig.code_lens is True
    from fabric_lsp.settings_schema import BY_KEY

    unknown = set(keys) - set(BY_KEY)
    assert not unknown, f"contributed settings the server does not know: {sorted(unknown)}"


def test_every_setting_has_a_description_and_scope():
    for key, spec in _properties().items():
        assert spec.get("description") or spec.get("markdownDescription"), key
        assert spec.get("scope") in {"application", "machine", "machine-overridable", "window", "resource"}, key


def test_preview_overrides_are_compaction_preview_params_the_server_accepts():
    """fabric.preview.* are sent as `fabric/compactionPreview` params, never as settings;
    the window and target ratio are the existing server settings, not duplicated."""
    import msgspec

    from fabric_lsp import protocol

    props = _properties()
    preview = {k.removeprefix("fabric.preview.") for k in props if k.startswith("fabric.preview.")}
    assert preview == {"keepRecentTokens", "reserveTokens"}
    for key in preview:
        assert props[f"fabric.preview.{key}"]["default"] is None
        assert "settings.json" in props[f"fabric.preview.{key}"]["markdownDescription"]
    params = msgspec.convert(
        {"session": "x", "keepRecentTokens": 1000, "reserveTokens": 2000},
        protocol.CompactionPreviewParams,
        str_keys=True,
    )
    assert (params.keep_recent_tokens, params.reserve_tokens) == (1000, 2000)
    assert "fabric.compaction.contextWindow" in props and "fabric.compaction.targetContextRatio" in props
    assert not {"fabric.preview.contextWindow", "fabric.preview.targetContextRatio"} & set(props)

"""Typed server settings from layered sources (docs/configuration.md).

Later wins: built-in defaults → `<agentDir>/fabric.json` → the project's `.pi/fabric.json`
(only when trusted) → `initializationOptions` → `workspace/configuration` section
`fabric`. Pi's own `settings.json` (global, and the project's when trusted) supplies
`compaction.keepRecentTokens` / `reserveTokens` (and `sessionDir`) exactly as Pi reads
them. Invariant: loading never raises for bad input; every invalid value becomes a
warning (later shown with `window/showMessage`) and the default for that key.

No pygls import: the CLI may use this module too.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from fabric_lsp.engine.index_dir import index_dir_refusal
from fabric_lsp.settings_schema import SETTINGS, Setting, section_defaults

if TYPE_CHECKING:
    from fabric_lsp.engine.compaction.options import CompactionSettings

# Pi's DEFAULT_COMPACTION_SETTINGS
PI_KEEP_RECENT_TOKENS = 20000
PI_RESERVE_TOKENS = 16384

# Defaults and rules come from the one settings schema (fabric_lsp/settings_schema.py).
MEMORY_DEFAULTS: dict[str, Any] = section_defaults("memory")
COMPACTION_DEFAULTS: dict[str, Any] = section_defaults("compaction")

TOP_LEVEL_KEYS = ("agentDir", "sessionDir", "indexDir", "trusted", "memory", "compaction", "codeLens", "team")
# Settings that name a directory: taken from user-level layers only, never from a project file.
PATH_KEYS = ("agentDir", "sessionDir", "indexDir")
# Settings that say where derived records go and which ones leave the machine (docs/team.md):
# user-level layers only, never a project file, as PATH_KEYS.
USER_ONLY_KEYS = ("team",)


@dataclass(frozen=True)
class ServerConfig:
    agent_dir: Path
    session_dir: Path
    index_dir: Path
    trusted: bool
    memory: dict[str, Any]
    compaction: dict[str, Any]
    keep_recent_tokens: int = PI_KEEP_RECENT_TOKENS
    reserve_tokens: int = PI_RESERVE_TOKENS
    warnings: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()  # files that contributed, in layering order
    workspace_root: Path | None = None
    code_lens: bool = True  # `codeLens`: file-history lenses on source files
    team: Any = None  # `team`: {url, member, projects, autoPush} (engine/team/settings.py), user-level only
    # Pi 1.x `compaction.modelOverrides`: (("provider/modelId", (("keepRecentTokens", n), ...)), ...)
    model_overrides: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()

    def compaction_settings(self) -> CompactionSettings:
        """The settings layers' part of the compaction options (see
        engine/compaction/options.py, the one resolver every face uses)."""
        from fabric_lsp.engine.compaction.options import CompactionSettings  # lazy: start-up cost

        return CompactionSettings(
            compaction=dict(self.compaction),
            keep_recent_tokens=self.keep_recent_tokens,
            reserve_tokens=self.reserve_tokens,
            model_overrides={key: dict(fields) for key, fields in self.model_overrides},
        )

    def describe(self) -> dict[str, Any]:
        """The effective settings as a camelCase dict (for logs and `fabric.reload`)."""
        return {
            "agentDir": str(self.agent_dir),
            "sessionDir": str(self.session_dir),
            "indexDir": str(self.index_dir),
            "trusted": self.trusted,
            "memory": dict(self.memory),
            "compaction": dict(self.compaction),
            "codeLens": self.code_lens,
            "keepRecentTokens": self.keep_recent_tokens,
            "reserveTokens": self.reserve_tokens,
            **({"modelOverrides": {k: dict(f) for k, f in self.model_overrides}} if self.model_overrides else {}),
            "sources": list(self.sources),
            "warnings": list(self.warnings),
        }


# ---------------------------------------------------------------------------------------
# validators: return the clean value or raise ValueError naming the rule
# ---------------------------------------------------------------------------------------


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError("must be true or false")
    return v


def _int(lo: int | None = None, hi: int | None = None) -> Callable[[Any], int]:
    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError("must be an integer")
        if isinstance(v, float):
            if not v.is_integer():
                raise ValueError("must be an integer")
            v = int(v)
        if lo is not None and v < lo:
            raise ValueError(f"must be >= {lo}")
        if hi is not None and v > hi:
            raise ValueError(f"must be <= {hi}")
        return v

    return check


def _ratio(lo: float, hi: float) -> Callable[[Any], float]:
    def check(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError("must be a number")
        if not lo <= v <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return float(v)

    return check


def _choice(*options: str) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if v not in options:
            raise ValueError("must be one of " + ", ".join(f'"{o}"' for o in options))
        return v

    return check


def _path(v: Any) -> Path:
    if not isinstance(v, str) or not v.strip():
        raise ValueError("must be a non-empty path string")
    p = Path(os.path.expanduser(v.strip()))
    if not p.is_absolute():
        raise ValueError("must be an absolute path (or start with ~)")
    return p


def _model_map(lo: float, hi: float, *, integer: bool) -> Callable[[Any], dict[str, Any]]:
    # Seed 002: percent thresholds are bounded to 0.25–0.95, token thresholds rounded and
    # bounded to 1,000–100,000,000 ("bounded" = clamped, as the reference does).
    def check(v: Any) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise ValueError('must be an object of "provider/model": number')
        out: dict[str, Any] = {}
        for key in sorted(v):
            value = v[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f'entry "{key}" must be a number')
            clamped = min(hi, max(lo, value))
            out[key] = int(round(clamped)) if integer else float(clamped)
        return out

    return check


def _rule(s: Setting) -> Callable[[Any], Any]:
    """The validation of one schema setting (a bad value: ValueError naming the rule)."""
    if s.kind == "bool":
        return _bool
    if s.kind == "int":
        return _int(None if s.minimum is None else int(s.minimum), None if s.maximum is None else int(s.maximum))
    if s.kind == "number":
        assert s.minimum is not None and s.maximum is not None
        return _ratio(s.minimum, s.maximum)
    if s.kind == "enum":
        return _choice(*s.choices)
    if s.kind in ("number-map", "int-map"):
        assert s.minimum is not None and s.maximum is not None
        return _model_map(s.minimum, s.maximum, integer=s.kind == "int-map")
    raise ValueError(f"{s.key}: no rule for a {s.kind} setting")


def _section_rules(section: str) -> dict[str, Callable[[Any], Any]]:
    return {s.key.split(".", 1)[1]: _rule(s) for s in SETTINGS if s.key.startswith(section + ".")}


# The integer bounds are the memory engine's own (engine/settings_bounds.py MEMORY_BOUNDS,
# through the schema): a value outside them is rejected here with a warning naming the
# bound, never clamped silently by the engine.
MEMORY_INT_BOUNDS: dict[str, tuple[int, int]] = {
    s.key.split(".", 1)[1]: (int(s.minimum), int(s.maximum))
    for s in SETTINGS
    if s.key.startswith("memory.") and s.kind == "int" and s.minimum is not None and s.maximum is not None
}
MEMORY_RULES: dict[str, Callable[[Any], Any]] = _section_rules("memory")
COMPACTION_RULES: dict[str, Callable[[Any], Any]] = _section_rules("compaction")


# ---------------------------------------------------------------------------------------
# sources
# ---------------------------------------------------------------------------------------


def read_json_object(path: Path, warnings: list[str]) -> dict[str, Any] | None:
    """The JSON object in `path`; None when absent. A broken file is a warning."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        warnings.append(f"{path}: cannot be read ({err.strerror or err}); ignored")
        return None
    try:
        value = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        warnings.append(f"{path}: not valid JSON ({err}); ignored")
        return None
    if not isinstance(value, dict):
        warnings.append(f"{path}: must contain a JSON object; ignored")
        return None
    return value


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def default_agent_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    value = env.get("PI_CODING_AGENT_DIR")
    if value:
        return Path(os.path.expanduser(value))
    return Path(os.path.expanduser("~")) / ".pi" / "agent"


def _is_within(inner: Path, outer: Path) -> bool:
    a, b = os.path.realpath(inner), os.path.realpath(outer)
    return a == b or a.startswith(b.rstrip(os.sep) + os.sep)


def _without_path_keys(name: str, layer: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """A project file's layer less the settings that name a directory (where our derived
    state lives and which sessions are read are the user's choice, not a repository's)."""
    out = {k: v for k, v in layer.items() if k not in PATH_KEYS}
    dropped = [k for k in PATH_KEYS if k in layer and k != "agentDir"]  # agentDir: warned about already
    memory = layer.get("memory")
    if isinstance(memory, dict) and "indexDir" in memory:
        out["memory"] = {k: v for k, v in cast("dict[str, Any]", memory).items() if k != "indexDir"}
        dropped.append("memory.indexDir")
    for key in dropped:
        warnings.append(
            f"{name}: `{key}` names a directory and is read only from user-level settings "
            "(<agentDir>/fabric.json, the editor's user settings); ignored"
        )
    for key in USER_ONLY_KEYS:
        if key in out:
            del out[key]
            warnings.append(
                f"{name}: `{key}` (the team database and what is pushed to it) is read only from user-level "
                "settings (<agentDir>/fabric.json, the editor's user settings); ignored"
            )
    return out


def _layer(name: str, value: Any, warnings: list[str]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        warnings.append(f"{name}: must be an object; ignored")
        return {}
    return value


def load_config(
    *,
    workspace_root: Path | None = None,
    init_options: Any = None,
    client_settings: Any = None,
    env: Mapping[str, str] | None = None,
) -> ServerConfig:
    """Resolve the effective settings; never raises for bad input."""
    r = _Resolution(workspace_root)
    init_layer = _layer("initializationOptions", init_options, r.warnings)
    client_layer = _layer('workspace/configuration "fabric"', client_settings, r.warnings)
    client_layers = [("initializationOptions", init_layer), ("workspace configuration", client_layer)]
    r.choose_agent_dir(default_agent_dir(env), client_layers)
    r.merge(r.file_layers() + client_layers)
    pi_settings = r.pi_settings()
    session_dir, index_dir = r.dirs(pi_settings)
    memory = r.section("memory", MEMORY_DEFAULTS, MEMORY_RULES)
    code_lens = True
    if "codeLens" in r.merged:
        code_lens = r.pick(r.merged["codeLens"], _bool, True, f"{r.origin['codeLens']}: codeLens")
    compaction = r.section("compaction", COMPACTION_DEFAULTS, COMPACTION_RULES)
    team = None
    if "team" in r.merged:
        team = r.pick(r.merged["team"], _team, None, f"{r.origin['team']}:")
    keep_recent, reserve, model_overrides = r.pi_budgets(pi_settings)
    agent_dir, trusted, warnings, sources = r.agent_dir, r.trusted, r.warnings, r.sources

    return ServerConfig(
        agent_dir=agent_dir,
        session_dir=session_dir,
        index_dir=index_dir,
        trusted=trusted,
        memory=memory,
        compaction=compaction,
        keep_recent_tokens=keep_recent,
        reserve_tokens=reserve,
        model_overrides=model_overrides,
        warnings=tuple(warnings),
        sources=tuple(sources),
        workspace_root=workspace_root,
        code_lens=code_lens,
        team=team,
    )


class _Resolution:
    """The steps of `load_config`, in order, sharing the warnings and what they found."""

    def __init__(self, workspace_root: Path | None) -> None:
        self.workspace_root = workspace_root
        self.warnings: list[str] = []
        self.sources: list[str] = []
        self.agent_dir = Path()
        self.trusted = False
        self.agent_in_project = False
        self.merged: dict[str, Any] = {}
        self.origin: dict[str, str] = {}

    @property
    def project_pi_dir(self) -> Path | None:
        return self.workspace_root / ".pi" if self.workspace_root is not None else None

    def pick(self, value: Any, rule: Callable[[Any], Any], default: Any, label: str) -> Any:
        try:
            return rule(value)
        except ValueError as err:
            self.warnings.append(f"{label} {err}; using the default {json.dumps(_jsonable(default))}")
            return default

    def choose_agent_dir(self, default: Path, client_layers: list[tuple[str, dict[str, Any]]]) -> None:
        """agentDir and trusted decide which files are read, so only clients set them."""
        self.agent_dir = default
        redirected = False  # set by a client's layer (not $PI_CODING_AGENT_DIR, not the default)
        names = ("initializationOptions", "workspace configuration")
        for name, (_, layer) in zip(names, client_layers):
            if "agentDir" in layer:
                try:
                    self.agent_dir = _path(layer["agentDir"])
                    redirected = True
                except ValueError as err:
                    self.warnings.append(f"{name}: agentDir {err}; using {self.agent_dir}")
            if "trusted" in layer:
                try:
                    self.trusted = _bool(layer["trusted"])
                except ValueError as err:
                    self.warnings.append(f"{name}: trusted {err}; using {self.trusted}")
        # An agent dir a client redirected into an untrusted workspace holds the project's
        # files, not the user's: its fabric.json and settings.json count as project files
        # (read only when trusted). A workspace that holds the home directory (a CLI run in
        # ~ or /) does not make the user's own ~/.pi/agent a project's.
        home = Path(os.path.expanduser("~"))
        root = self.workspace_root
        self.agent_in_project = (
            redirected and root is not None and _is_within(self.agent_dir, root) and not _is_within(home, root)
        )

    def file_layers(self) -> list[tuple[str, dict[str, Any]]]:
        """The fabric.json layers (global, then the trusted project's), path keys taken
        out of project files."""
        warnings = self.warnings
        layers: list[tuple[str, dict[str, Any]]] = []
        global_file = self.agent_dir / "fabric.json"
        if self.agent_in_project and not self.trusted:
            if global_file.exists() or (self.agent_dir / "settings.json").exists():
                warnings.append(
                    f"agentDir {self.agent_dir} is inside the untrusted workspace {self.workspace_root}: its "
                    "fabric.json and settings.json are project files and are not read until the workspace is trusted"
                )
        elif (g := read_json_object(global_file, warnings)) is not None:
            layers.append((str(global_file), g))
        project_layers: set[str] = set()
        if self.project_pi_dir is not None and self.trusted:
            project_file = self.project_pi_dir / "fabric.json"
            if (p := read_json_object(project_file, warnings)) is not None:
                layers.append((str(project_file), p))
                project_layers.add(str(project_file))
        if self.agent_in_project and self.trusted and layers and layers[0][0] == str(global_file):
            project_layers.add(str(global_file))
        for i, (name, layer) in enumerate(layers):
            self.sources.append(name)
            for key in ("agentDir", "trusted"):
                if key in layer:
                    warnings.append(
                        f"{name}: `{key}` cannot be set in fabric.json (it decides which files are read); ignored"
                    )
            if name in project_layers:
                layers[i] = (name, _without_path_keys(name, layer, warnings))
        return layers

    def merge(self, layers: list[tuple[str, dict[str, Any]]]) -> None:
        """Later layers win, key by key (`origin` says which layer set each key)."""
        for name, layer in layers:
            clean = {k: v for k, v in layer.items() if k not in ("agentDir", "trusted")}
            for key in clean:
                if key not in TOP_LEVEL_KEYS:
                    self.warnings.append(f"{name}: unknown setting `{key}`; ignored")
            clean = {k: v for k, v in clean.items() if k in TOP_LEVEL_KEYS}
            # seed 000 spells the cache dir memory.indexDir; accept it as an alias
            mem = clean.get("memory")
            if isinstance(mem, dict) and "indexDir" in mem:
                mem = dict(mem)
                clean["indexDir"] = mem.pop("indexDir")
                clean["memory"] = mem
            for key in clean:
                self.origin[key] = name
            self.merged = _merge(self.merged, clean)

    def pi_settings(self) -> dict[str, Any]:
        """Pi's settings.json: global, then the project's when trusted (Pi's deep merge)."""
        pi_settings: dict[str, Any] = {}
        pi_files = [] if self.agent_in_project and not self.trusted else [self.agent_dir / "settings.json"]
        if self.project_pi_dir is not None and self.trusted:
            pi_files.append(self.project_pi_dir / "settings.json")
        for path in pi_files:
            if (s := read_json_object(path, self.warnings)) is not None:
                self.sources.append(str(path))
                pi_settings = _merge(pi_settings, s)
        return pi_settings

    def dirs(self, pi_settings: dict[str, Any]) -> tuple[Path, Path]:
        """(sessionDir, indexDir): Pi's sessionDir is the default; an index dir that is not
        ours to write falls back to the default, or to memory only (engine/owned_dir.py)."""
        merged, origin, agent_dir = self.merged, self.origin, self.agent_dir
        session_default = agent_dir / "sessions"
        if "sessionDir" in pi_settings:
            session_default = self.pick(pi_settings["sessionDir"], _path, session_default, "settings.json: sessionDir")
        session_dir = session_default
        if "sessionDir" in merged:
            session_dir = self.pick(merged["sessionDir"], _path, session_default, f"{origin['sessionDir']}: sessionDir")
        index_default = agent_dir / "fabric-lsp" / "memory-index"
        index_dir = index_default
        if "indexDir" in merged:
            index_dir = self.pick(merged["indexDir"], _path, index_default, f"{origin['indexDir']}: indexDir")
        # Our derived state only in a directory of our own: a refused one is never touched.
        refused = index_dir_refusal(str(index_dir), agent_dir=str(agent_dir), session_dir=str(session_dir))
        if refused is not None and index_dir != index_default:
            index_dir = index_default
            refused = f"{refused}; using {index_default}"
            if again := index_dir_refusal(str(index_default), agent_dir=str(agent_dir), session_dir=str(session_dir)):
                refused = f"{refused}, which is refused too ({again}): the index is kept in memory only"
        if refused is not None:
            self.warnings.append(f"{origin['indexDir']}: {refused}" if "indexDir" in origin else refused)
        return session_dir, index_dir

    def section(self, key: str, defaults: dict[str, Any], rules: dict[str, Callable[[Any], Any]]) -> dict[str, Any]:
        out = dict(defaults)
        raw = self.merged.get(key)
        if raw is None:
            return out
        where = self.origin.get(key, "settings")
        if not isinstance(raw, dict):
            self.warnings.append(f"{where}: `{key}` must be an object; using defaults")
            return out
        for name in sorted(raw):
            if name not in rules:
                self.warnings.append(f"{where}: unknown setting `{key}.{name}`; ignored")
                continue
            out[name] = self.pick(raw[name], rules[name], defaults[name], f"{where}: {key}.{name}")
        return out

    def pi_budgets(
        self, pi_settings: dict[str, Any]
    ) -> tuple[int, int, tuple[tuple[str, tuple[tuple[str, int], ...]], ...]]:
        """Pi's keepRecentTokens / reserveTokens and its 1.x per-model overrides."""
        pi_compaction = pi_settings.get("compaction")
        keep_recent, reserve = PI_KEEP_RECENT_TOKENS, PI_RESERVE_TOKENS
        if isinstance(pi_compaction, dict):
            if "keepRecentTokens" in pi_compaction:
                keep_recent = self.pick(
                    pi_compaction["keepRecentTokens"],
                    _int(0),
                    keep_recent,
                    "settings.json: compaction.keepRecentTokens",
                )
            if "reserveTokens" in pi_compaction:
                reserve = self.pick(
                    pi_compaction["reserveTokens"], _int(0), reserve, "settings.json: compaction.reserveTokens"
                )
        elif pi_compaction is not None:
            self.warnings.append("settings.json: `compaction` must be an object; using Pi's defaults")
        return keep_recent, reserve, _model_overrides(pi_compaction, self.warnings)


def _model_overrides(pi_compaction: Any, warnings: list[str]) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """Pi 1.x's `compaction.modelOverrides` (0.86+): `{"provider/modelId": {reserveTokens?,
    keepRecentTokens?}}`, each field falling back on its own to the ordinary setting. Pi
    throws when it reads an invalid entry; we warn, name it, and leave it out (Pi 1.x would
    refuse to compact with that model until it is fixed). Sorted by key: deterministic."""
    if not isinstance(pi_compaction, dict) or "modelOverrides" not in pi_compaction:
        return ()
    raw = pi_compaction["modelOverrides"]
    label = "settings.json: compaction.modelOverrides"
    if not isinstance(raw, dict):
        warnings.append(f'{label} must be an object keyed by "provider/modelId"; ignored')
        return ()
    out: list[tuple[str, tuple[tuple[str, int], ...]]] = []
    for key in sorted(raw):
        entry = raw[key]
        if not isinstance(entry, dict):
            warnings.append(f'{label}["{key}"] must be an object (Pi 1.x refuses to compact with it); ignored')
            continue
        fields: list[tuple[str, int]] = []
        for name in ("keepRecentTokens", "reserveTokens"):
            if name not in entry or entry[name] is None:
                continue
            v = entry[name]
            if isinstance(v, float) and v.is_integer():
                v = int(v)  # JSON's 4096.0 is JavaScript's 4096
            if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > 2**53 - 1:
                warnings.append(
                    f'{label}["{key}"].{name} must be a non-negative integer, not {json.dumps(_jsonable(v))} '
                    "(Pi 1.x refuses to compact with it); ignored"
                )
                continue
            fields.append((name, v))
        if fields:
            out.append((key, tuple(fields)))
    return tuple(out)


def _team(v: Any) -> Any:
    from fabric_lsp.engine.team.settings import TeamSettings, TeamSettingsError

    try:
        TeamSettings.from_settings(v)
    except TeamSettingsError as err:
        raise ValueError(str(err)) from None
    return v


def _jsonable(v: Any) -> Any:
    return str(v) if isinstance(v, Path) else v

"""The VSIX carries its server for every platform and Python: the manifest fields vsce and
the Extensions view need; the universal (py3-none-any) server wheel and a wheelhouse that
resolves offline for every (platform, Python) pair server/manifest.json lists (checked with
`pip install --dry-run --platform … --python-version … --no-index`); and, for each Python
3.11-3.14 on this machine, an offline install from the VSIX's own wheelhouse into a fresh
venv (pip --no-index --find-links, no pip configuration), as the extension does
(editors/vscode/src/bundled.ts), whose server then answers `initialize` and a recall over
stdio. The VSIX is built once per session (conftest.py, `npm run package`)."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest
from vscode_support import EXTENSION, ROOT

from fabric_lsp.commands.demo import StdioLspClient

PYTHONS = ["3.11", "3.12", "3.13", "3.14"]
# The pairs the issue requires (pip platform tags of a machine of each kind); the manifest may
# list more (musllinux, Windows arm64), and every pair it lists is checked as well.
REQUIRED_PLATFORMS = {
    "darwin-arm64": ["macosx_11_0_arm64"],
    "darwin-x64": ["macosx_11_0_x86_64"],
    "win32-x64": ["win_amd64"],
    "linux-x64": ["manylinux_2_17_x86_64", "manylinux2014_x86_64"],
    "linux-arm64": ["manylinux_2_17_aarch64", "manylinux2014_aarch64"],
}


def _manifest() -> dict:
    return json.loads((EXTENSION / "package.json").read_text())


def test_manifest_has_what_the_vsix_needs():
    m = _manifest()
    assert m["license"] == "MIT" and (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert m["repository"]["url"].startswith("https://") and m["repository"]["directory"] == "editors/vscode"
    icon = EXTENSION / m["icon"]
    assert icon.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Bundled by esbuild: nothing for vsce to collect from node_modules.
    assert not m.get("dependencies"), m.get("dependencies")
    assert "vscode-languageclient" in m["devDependencies"]
    assert m["scripts"]["vscode:prepublish"] == "node scripts/prepublish.mjs"
    assert "--no-rewrite-relative-links" in m["scripts"]["package"]
    # Activation: never "*"; the Fabric views and commands, Pi projects and session files.
    events = m["activationEvents"]
    assert "*" not in events
    assert {
        "onView:fabric.sessions",
        "onView:fabric.recall",
        "onView:fabric.plan",
        "onCommand:fabricLsp.selectServer",
    } <= set(events)
    commands = {c["command"] for c in m["contributes"]["commands"]}
    assert {e.removeprefix("onCommand:") for e in events if e.startswith("onCommand:")} <= commands
    props = m["contributes"]["configuration"]["properties"]
    assert props["fabric.server.python"]["default"] is None
    assert props["fabric.server.command"]["default"] == []
    assert "fabric.server.python" in m["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"]


def test_readme_images_ship_inside_the_extension():
    readme = (EXTENSION / "README.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme)
    assert links
    for link in links:
        assert not link.startswith(("../", "/", "http")), link
        assert (EXTENSION / link).is_file(), link
    ignore = (EXTENSION / ".vscodeignore").read_text().split()
    assert "!images/**" in ignore and "!LICENSE" in ignore


def _clean_pip_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON"))}
    env["PIP_CONFIG_FILE"] = os.devnull  # no pip.conf: no extra index, find-links or constraints
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["HOME"] = str(tmp_path / "home")
    return env


@pytest.fixture(scope="module")
def server(vsix: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The VSIX's server/ directory, extracted once."""
    out = tmp_path_factory.mktemp("vsix") / "server"
    with zipfile.ZipFile(vsix) as z:
        for name in z.namelist():
            if name.startswith("extension/server/"):
                target = out / name.removeprefix("extension/server/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(name))
    return out


def test_vsix_contains_license_icon_images_and_the_universal_server(vsix: Path):
    with zipfile.ZipFile(vsix) as z:
        names = set(z.namelist())
        readme = z.read("extension/readme.md").decode()
        manifest = json.loads(z.read("extension/server/manifest.json"))
        vsixmanifest = z.read("extension.vsixmanifest").decode()
    assert "extension/LICENSE.txt" in names and "<License>extension/LICENSE.txt</License>" in vsixmanifest
    assert "extension/images/icon.png" in names
    for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme):
        assert f"extension/{link}" in names, f"README image {link} is not in the VSIX"
    # one universal server wheel, no platform-specific one
    assert re.fullmatch(r"fabric_lsp-[0-9.]+-py3-none-any\.whl", manifest["wheel"]), manifest["wheel"]
    assert [n for n in names if re.match(r"extension/server/fabric_lsp-", n)] == [
        f"extension/server/{manifest['wheel']}"
    ]
    with (
        zipfile.ZipFile(vsix) as z,
        zipfile.ZipFile(__import__("io").BytesIO(z.read(f"extension/server/{manifest['wheel']}"))) as w,
    ):
        inside = w.namelist()
    assert not [n for n in inside if n.endswith((".so", ".pyd", ".pyc"))], "the universal wheel carries compiled files"
    assert len([n for n in inside if n.startswith("fabric_lsp/examples/agent/sessions/")]) == 7
    assert manifest["accelerator"] is False
    house = {
        n.removeprefix("extension/server/wheelhouse/") for n in names if n.startswith("extension/server/wheelhouse/")
    }
    assert set(manifest["wheelhouse"]) == house
    assert manifest["builtOn"] == sysconfig.get_platform()
    assert manifest["pip"] in house
    # every required pair is listed, and msgspec's wheel for it is in the wheelhouse
    for target in REQUIRED_PLATFORMS:
        assert manifest["targets"][target]["pythons"] == PYTHONS, (target, manifest["targets"].get(target))
    assert manifest["pythons"] == PYTHONS
    msgspec = [n for n in house if n.startswith("msgspec-")]
    for v in PYTHONS:
        tag = f"cp{v.replace('.', '')}-cp{v.replace('.', '')}-"
        for platform in (
            "macosx_11_0_arm64",
            "_x86_64.whl",
            "win_amd64",
            "manylinux_2_17_x86_64",
            "manylinux_2_17_aarch64",
            "musllinux_1_2_x86_64",
        ):
            assert any(tag in n and platform in n for n in msgspec), (v, platform, msgspec)
    # node_modules are bundled into dist/extension.js, not shipped.
    assert not any("/node_modules/" in n for n in names)


def _resolves(server: Path, house: Path, tags: list[str], python: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """`pip install --dry-run` of fabric-lsp for another platform and Python, from the wheelhouse alone."""
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--no-index",
        "--only-binary=:all:",
        "--find-links",
        str(server),
        "--find-links",
        str(house),
        *[a for t in tags for a in ("--platform", t)],
        "--python-version",
        python,
        "--implementation",
        "cp",
        "--target",
        str(tmp / f"target-{tags[0]}-{python}"),
        "fabric-lsp",
    ]
    return subprocess.run(argv, env=_clean_pip_env(tmp), capture_output=True, text=True, timeout=300)


def test_the_wheelhouse_resolves_for_every_listed_platform_and_python(server: Path, tmp_path: Path):
    """The issue's pairs (macOS arm64/x86_64, Windows amd64, manylinux x86_64/aarch64 ×
    3.11-3.14) and every pair the manifest lists resolve offline from the wheelhouse."""
    manifest = json.loads((server / "manifest.json").read_text())
    pairs = {(target, tuple(tags), v) for target, tags in REQUIRED_PLATFORMS.items() for v in PYTHONS}
    pairs |= {(target, tuple(t["pipPlatforms"]), v) for target, t in manifest["targets"].items() for v in t["pythons"]}
    failures = []
    t0 = time.monotonic()
    for target, tags, v in sorted(pairs):
        res = _resolves(server, server / "wheelhouse", list(tags), v, tmp_path)
        if res.returncode != 0:
            failures.append(f"{target} ({', '.join(tags)}) Python {v}: {res.stderr.strip().splitlines()[-1:]}")
        elif "Would install" not in res.stdout or "msgspec-" not in res.stdout:
            failures.append(f"{target} Python {v}: unexpected pip output {res.stdout[-500:]}")
    assert not failures, "\n".join(failures)
    assert len(pairs) >= 20, f"{len(pairs)} pairs checked in {time.monotonic() - t0:.0f} s"


def test_the_resolution_check_fails_when_a_wheel_is_missing(server: Path, tmp_path: Path):
    """Control: the same check without Windows' Python 3.12 msgspec wheel fails for that pair."""
    house = tmp_path / "house"
    shutil.copytree(server / "wheelhouse", house)
    missing = [p for p in house.glob("msgspec-*-cp312-cp312-win_amd64.whl")]
    assert len(missing) == 1
    missing[0].unlink()
    assert _resolves(server, house, ["win_amd64"], "3.12", tmp_path).returncode != 0
    assert _resolves(server, house, ["win_amd64"], "3.13", tmp_path).returncode == 0


def _python(version: str) -> str | None:
    """An interpreter of this version on the machine: pyenv's, else the system's."""
    found = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")))
    found += [p for p in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}") if os.path.exists(p)]
    for candidate in found:
        out = subprocess.run(
            [candidate, "-c", "import sys, venv, ensurepip; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if out.returncode == 0 and out.stdout.strip() == version:
            return candidate
    return None


@pytest.mark.parametrize("version", PYTHONS)
def test_offline_install_from_the_vsix_answers_initialize_and_recall(server: Path, tmp_path: Path, version: str):
    """Each Python here: a fresh venv, `pip install --no-index --find-links <the VSIX's
    wheelhouse> <the VSIX's wheel>`, then the installed server over stdio."""
    python = _python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine (pyenv or /usr/bin); the resolution test covers it")
    manifest = json.loads((server / "manifest.json").read_text())
    env = _clean_pip_env(tmp_path)
    venv = tmp_path / "venv"
    t0 = time.monotonic()
    subprocess.run([python, "-m", "venv", str(venv)], check=True, env=env, timeout=180)
    py = venv / "bin" / "python"
    proc = subprocess.run(
        [
            str(py),
            "-I",
            "-m",
            "pip",
            "install",
            "--no-index",
            "--find-links",
            str(server / "wheelhouse"),
            str(server / manifest["wheel"]),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"Processing .*wheelhouse.*msgspec-", proc.stdout), proc.stdout
    installed = time.monotonic() - t0
    probe = subprocess.run(
        [
            str(py),
            "-I",
            "-c",
            "import sys, importlib.util as u; print('%d.%d' % sys.version_info[:2]);"
            " print(u.find_spec('fabric_lsp.engine._native') is None)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.split() == [version, "True"], probe.stdout + probe.stderr  # pure Python, this interpreter
    agent = tmp_path / "agent"
    examples = subprocess.run(
        [str(venv / "bin" / "fabric-lsp"), "examples", str(agent)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert examples.returncode == 0, examples.stderr
    project = agent / "projects" / "orbit"
    client = StdioLspClient(
        [str(venv / "bin" / "fabric-lsp")], env={**env, "PI_CODING_AGENT_DIR": str(agent)}, stderr=subprocess.DEVNULL
    )
    try:
        init = client.request(
            "initialize",
            {
                "processId": None,
                "rootUri": project.as_uri(),
                "capabilities": {},
                "workspaceFolders": [{"uri": project.as_uri(), "name": "orbit"}],
            },
        )
        assert init["serverInfo"]["name"] == "fabric-lsp" and init["serverInfo"]["version"] == manifest["version"]
        client.notify("initialized", {})
        recall = client.request("fabric/recall", {"query": "convert_anomaly", "scope": "project", "pageSize": 5})
        assert recall["items"], recall
        files = {i["segment"]["sessionFile"] for i in recall["items"] if i.get("kind") == "segment"}
        assert files and all(f.startswith(str(agent / "sessions" / "--")) and "orbit" in f for f in files), recall[
            "items"
        ][0]
    finally:
        assert client.close() == 0
    print(f"Python {version}: offline install {installed:.1f} s, total {time.monotonic() - t0:.1f} s")


@pytest.mark.skipif(not Path(sys.executable).with_name("python").exists(), reason="needs a venv python")
def test_install_without_ensurepip_runs_pip_from_the_bundled_wheel(server: Path, tmp_path: Path):
    """A venv made --without-pip (Debian without python3-venv) gets pip from the wheelhouse."""
    manifest = json.loads((server / "manifest.json").read_text())
    env = _clean_pip_env(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=env, timeout=120)
    house = server / "wheelhouse"
    proc = subprocess.run(
        [
            str(venv / "bin" / "python"),
            str(house / manifest["pip"] / "pip"),
            "install",
            "--no-index",
            "--find-links",
            str(house),
            str(server / manifest["wheel"]),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (venv / "bin" / "fabric-lsp").exists()

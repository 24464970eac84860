#!/usr/bin/env bash
# Install PostgreSQL (>= 15) from the distribution's packages for the team-recall tests
# (tests/team). The tests never use a system-wide cluster: each run starts its own private
# cluster (initdb in a temporary dir, a free port, a private socket dir, run as a non-root
# OS user) and stops it. So this script only puts initdb/pg_ctl/postgres under
# /usr/lib/postgresql/<version>/bin, and makes sure installing the package does not create
# (or start) Debian's default "main" cluster. Idempotent: a fast no-op when a server
# binary of version >= 15 is already there.
set -euo pipefail
have_server() {
  local bin
  for bin in /usr/lib/postgresql/*/bin/postgres; do
    [ -x "$bin" ] || continue
    local v
    v=$(basename "$(dirname "$(dirname "$bin")")")
    if [ "${v%%.*}" -ge 15 ] 2>/dev/null && [ -x "$(dirname "$bin")/initdb" ] && [ -x "$(dirname "$bin")/pg_ctl" ]; then
      return 0
    fi
  done
  return 1
}
if have_server; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "postgres.sh: PostgreSQL >= 15 is not installed; as root on Debian run: apt-get install -y postgresql" >&2
  exit 1
fi
# No default cluster: postgresql-common reads this before it would create "main".
mkdir -p /etc/postgresql-common
if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
  echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
fi
# Do not start any service while installing (a container has no init to ask anyway).
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod +x "$policy"
  made_policy=1
fi
cleanup() { if [ "$made_policy" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Options::=--force-confold postgresql >&2
}
echo "postgres.sh: installing PostgreSQL from the distribution's packages (apt)" >&2
install || { apt-get update -q >&2 && install; }
have_server || { echo "postgres.sh: no PostgreSQL >= 15 server under /usr/lib/postgresql after the install" >&2; exit 1; }
echo "postgres.sh: installed $(ls -d /usr/lib/postgresql/*/bin | tail -1)" >&2

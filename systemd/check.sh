#!/usr/bin/env bash
# Check systemd/openbell.service offline: `systemd-analyze verify` must pass and
# `systemd-analyze security` must rate its exposure below 3.0. CI runs this before `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
unit=systemd/openbell.service
max_exposure=3.0

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "systemd/check.sh: systemd-analyze is missing (apt-get install systemd)" >&2
  exit 1
fi

# verify needs ExecStart's binary to exist: check a copy in a temporary root with a stub there.
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
exec_start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
install -d "$root$(dirname "$exec_start")" "$root/etc/systemd/system" "$root/usr/lib/systemd"
# The unit's dependencies (sysinit.target, ...) come from the host's systemd package.
cp -a /usr/lib/systemd/system "$root/usr/lib/systemd/"
printf '#!/bin/sh\nexit 0\n' >"$root$exec_start"
chmod 0755 "$root$exec_start"
cp "$unit" "$root/etc/systemd/system/openbell.service"
verify_out=$(systemd-analyze verify --man=no --recursive-errors=no --root="$root" \
  openbell.service 2>&1) || {
  echo "$verify_out" >&2
  echo "systemd/check.sh: systemd-analyze verify failed" >&2
  exit 1
}
if [ -n "$verify_out" ]; then
  # verify exits 0 on warnings about the unit itself: treat any line naming the unit as a failure.
  if grep -q "openbell.service" <<<"$verify_out"; then
    echo "$verify_out" >&2
    echo "systemd/check.sh: systemd-analyze verify reported problems" >&2
    exit 1
  fi
fi

security=$(systemd-analyze security --offline=true --no-pager "$unit" 2>&1)
exposure=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$security")
if [ -z "$exposure" ]; then
  echo "$security" >&2
  echo "systemd/check.sh: could not read the exposure level" >&2
  exit 1
fi
echo "systemd/openbell.service: verify ok, security exposure $exposure (must be < $max_exposure)"
awk -v e="$exposure" -v m="$max_exposure" 'BEGIN { exit !(e < m) }' || {
  echo "$security" >&2
  exit 1
}

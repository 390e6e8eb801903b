#!/usr/bin/env bash
# `make test` on a fresh clone of this checkout's HEAD, as CI runs it (`.ci/run`: Postgres, Chromium
# and bubblewrap required), and its time: the last lines `make test` prints ("make test: N s
# (install N s, lint N s, typecheck N s, layers N s, docs N s, pytest N s)") and pytest's count.
#
#   bash benchmarks/test_suite.sh                    # as CI runs it
#   bash benchmarks/test_suite.sh --fresh-processes  # every `openbell` of the acceptance tests a
#                                                    # fresh process (no zygote), for comparison
#
# It prints the failed tests' lines; OPENBELL_SUITE_LOG=FILE keeps the whole log there. The clone
# (and its .venv) is removed at the end. Run it on a quiet machine: the suite is
# CPU-bound, so another run on the same cores lengthens it.
set -euo pipefail
if [ "${1:-}" = "--fresh-processes" ]; then
  export OPENBELL_TEST_FRESH_PROCESSES=1
elif [ -n "${1:-}" ]; then
  echo "usage: bash benchmarks/test_suite.sh [--fresh-processes]" >&2
  exit 2
fi
source_tree="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone -q "$source_tree" "$work/openbell"
cd "$work/openbell"
echo "commit $(git rev-parse --short HEAD), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
export OPENBELL_REQUIRE_PG=1 OPENBELL_REQUIRE_BROWSER=1 OPENBELL_REQUIRE_BWRAP=1
set +e
make test >"$work/make-test.log" 2>&1
status=$?
set -e
grep -E "^(FAILED|ERROR) " "$work/make-test.log" || true
grep -E "passed|failed" "$work/make-test.log" | tail -n 1
grep "^make test: " "$work/make-test.log"
if [ -n "${OPENBELL_SUITE_LOG:-}" ]; then cp "$work/make-test.log" "$OPENBELL_SUITE_LOG"; fi
exit "$status"

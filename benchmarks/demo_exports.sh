#!/usr/bin/env bash
# The refactor guard of issue 11: run `openbell demo` into a fresh ledger and print the SHA-256 of
# its four exports (nav, orders, fills, cycles, CSV). A refactor that keeps behaviour prints the
# same four lines before and after. A fill's `price_source` names the replay source (`replay:cn`
# for the bundled bars; before issue 11 the demo's temporary folder, a new one each run): it is
# written as `replay:<bars>` before hashing. Usage: benchmarks/demo_exports.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
bin=.venv/bin/openbell
"$bin" demo --db "$out/demo.db" >"$out/demo.txt" 2>"$out/demo.err"
for table in nav orders fills cycles; do
  "$bin" export "$table" --db "$out/demo.db" --out "$out/$table.raw.csv" >/dev/null 2>&1
  sed -E 's#,replay:[^,]*$#,replay:<bars>#' "$out/$table.raw.csv" >"$out/$table.csv"
  printf '%s  %s (%s rows)\n' "$(sha256sum <"$out/$table.csv" | cut -d' ' -f1)" "$table" \
    "$(($(wc -l <"$out/$table.csv") - 1))"
done

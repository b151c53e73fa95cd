#!/usr/bin/env bash
# Refusals at moderate load for an app whose requests take much of their SLO even unqueued: a copy of photo-crops
# (one glue task, about 42 ms a request on the 2-core machine) with a latency SLO of SLO ms (100 by default), warmed
# up for 5 s at 2 req/s, then RATE req/s (12 by default) of Poisson load for 20 s. Prints the answers by HTTP status
# (503: refused by admission, 504: late) and the app's admission limit at the end.
#
# Usage: [SLO=100] [RATE=12] scripts/tight_slo.sh [JIG]    (needs `make release examples` first)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gateway.sh
jig=${1:-target/release/jig}
out=out/tight-slo
rm -rf "$out" && mkdir -p "$out"
cp -r examples/photo-crops "$out/bundle"
sed -i "s/^latency_ms = .*/latency_ms = ${SLO:-100}/" "$out/bundle/jig.toml"
start_gateway "$jig" "$out"
"$jig" deploy "$out/bundle" >/dev/null
meta='{"boxes": [{"x0": 40, "y0": 30, "x1": 240, "y1": 180}, {"x0": 250, "y0": 120, "x1": 420, "y1": 260}]}'
bench() { "$jig" bench photo-crops tests/data/f3-board.jpg --meta "$meta" "$@"; }
bench --rate 2 --duration 5 >/dev/null 2>&1
bench --rate "${RATE:-12}" --duration 20 --csv "$out/requests.csv" >/dev/null 2>&1 || true
python3 - "$out/requests.csv" <<'PY'
import collections, csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("answers by status:", dict(sorted(collections.Counter(r["status"] for r in rows).items())))
PY
curl -s "$JIG_GATEWAY/metrics" | grep '^jig_admission_limit{app="photo-crops"}'

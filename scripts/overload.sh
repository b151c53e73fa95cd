#!/usr/bin/env bash
# Goodput under overload: the sign reader on this machine at 1×, 2× and 4× its plan's capacity, with `jig bench`
# (open-loop Poisson load on loopback, DURATION seconds each, 30 by default). For each run it prints the requests
# answered within the SLO per second (goodput: every 2xx answer, since a request past its deadline gets 504),
# the violations, p50 latency, and the gateway's resident memory after the run.
#
# Usage: [FACTORS="1 2 4"] [DURATION=30] [BUNDLE=dir] scripts/overload.sh [JIG] [CAPACITY_RPS]
# (defaults: target/release/jig, and the capacity the deployment's status reports; give it for a jig that
# reports none). BUNDLE deploys that copy of the sign reader (e.g. one profiled on this machine). Needs
# `make release examples` first.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gateway.sh

jig=${1:-target/release/jig}
out=out/overload
duration=${DURATION:-30}
rm -rf "$out" && mkdir -p "$out"
start_gateway "$jig" "$out"
"$jig" deploy "${BUNDLE:-examples/sign-reader}" >/dev/null
capacity=${2:-$(planned_capacity "$jig" sign-reader)}
echo "jig: $jig; plan capacity ${capacity} req/s; ${duration} s a run"
rss() { echo "$(gateway_rss_mb) MB"; }
echo "memory after deploy: $(rss)"
for factor in ${FACTORS:-1 2 4}; do
    rate=$(python3 -c "print(round($capacity * $factor, 2))")
    "$jig" bench sign-reader .jig/samples/*.png --rate "$rate" --duration "$duration" --json > "$out/bench-$factor.json" 2>/dev/null
    python3 - "$out/bench-$factor.json" "$factor" "$rate" "$duration" "$(rss)" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
factor, rate, duration, rss = sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
print(f"{factor}x ({rate:.1f} req/s): {s['sent']} sent, goodput {s['ok'] / duration:.2f} req/s, "
      f"violations {s['violation_rate'] * 100:.1f}%, p50 {s['p50_ms']:.0f} ms; gateway {rss}")
PY
    sleep 6  # let queued work drain before the next rate
done

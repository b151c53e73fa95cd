#!/usr/bin/env bash
# Soak under overload: the sign reader on this machine at FACTOR× (2 by default) its plan's capacity for
# DURATION seconds (600 by default) with `jig bench` (open-loop Poisson load on loopback), the gateway's resident
# memory sampled every 15 s into out/soak/rss.csv; then, 5 s after the load stops, 10 s at half the capacity to
# show that the gateway serves normally again; then REDEPLOYS (8) redeploys of the app, each serving 5 s at half
# capacity, with the memory after each in out/soak/redeploys.csv (re-plans and redeploys load the app anew: the
# old deployment's memory must go back). Bounded in time and to loopback.
#
# Usage: [FACTOR=2] [DURATION=600] [REDEPLOYS=8] [BUNDLE=examples/sign-reader] scripts/soak.sh [JIG]
# (after `make release examples`; BUNDLE: a copy of the sign reader, e.g. with another profiles.csv)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gateway.sh

jig=${1:-target/release/jig}
out=out/soak
factor=${FACTOR:-2}
bundle=${BUNDLE:-examples/sign-reader}
duration=${DURATION:-600}
rm -rf "$out" && mkdir -p "$out"
start_gateway "$jig" "$out"
"$jig" deploy "$bundle" >/dev/null
capacity=$(planned_capacity "$jig" sign-reader)
rate=$(python3 -c "print(round($capacity * $factor, 2))")
echo "jig: $jig; plan capacity $capacity req/s; ${factor}x = $rate req/s for $duration s"
echo "elapsed_s,rss_mb" > "$out/rss.csv"
echo "0,$(gateway_rss_mb)" >> "$out/rss.csv"
"$jig" bench sign-reader .jig/samples/*.png --rate "$rate" --duration "$duration" --json > "$out/soak.json" 2>/dev/null &
bench=$!
started=$(date +%s)
while kill -0 $bench 2>/dev/null; do
    sleep 15
    echo "$(( $(date +%s) - started )),$(gateway_rss_mb)" >> "$out/rss.csv"
done
wait $bench
sleep 5
after=$(python3 -c "print(round($capacity / 2, 2))")
"$jig" bench sign-reader .jig/samples/*.png --rate "$after" --duration 10 --json > "$out/after.json" 2>/dev/null
echo "$(( $(date +%s) - started )),$(gateway_rss_mb)" >> "$out/rss.csv"
echo "deploy,rss_mb" > "$out/redeploys.csv"
for i in $(seq "${REDEPLOYS:-8}"); do
    "$jig" deploy "$bundle" >/dev/null
    "$jig" bench sign-reader .jig/samples/*.png --rate "$after" --duration 5 --json >/dev/null 2>&1
    echo "$i,$(gateway_rss_mb)" >> "$out/redeploys.csv"
done
python3 - "$out" "$duration" <<'PY'
import csv, json, sys
out, duration = sys.argv[1], float(sys.argv[2])
soak, after = json.load(open(f"{out}/soak.json")), json.load(open(f"{out}/after.json"))
rss = [int(r["rss_mb"]) for r in csv.DictReader(open(f"{out}/rss.csv"))]
print(f"soak: {soak['sent']} sent, goodput {soak['ok'] / duration:.2f} req/s, violations "
      f"{soak['violation_rate'] * 100:.1f}%, p50 {soak['p50_ms']:.0f} ms")
print(f"gateway RSS: {rss[0]} MB after deploy; during the soak {min(rss[1:-1])}-{max(rss[1:-1])} MB; "
      f"last minute {rss[-6:-1]}; after {rss[-1]} MB")
print(f"after the load stopped, 10 s at half capacity: {after['sent']} sent, violations "
      f"{after['violation_rate'] * 100:.1f}%, p50 {after['p50_ms']:.0f} ms, p99 {after['p99_ms']:.0f} ms")
redeploys = [int(r["rss_mb"]) for r in csv.DictReader(open(f"{out}/redeploys.csv"))]
print(f"gateway RSS after each of {len(redeploys)} redeploys: {redeploys} MB")
PY

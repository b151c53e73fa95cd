#!/usr/bin/env bash
# Soak under overload (`make soak`): the sign reader on this machine at FACTOR× (2 by default) its plan's capacity
# for DURATION seconds (600 by default) with `jig bench` (open-loop Poisson load on loopback), and what must hold:
#   - the gateway's resident memory stays under MAX_RSS_MB (1500) throughout (sampled every 5 s, out/soak/rss.csv);
#   - within 60 s after the load stops it is back to ≤ 1.5× its idle footprint (measured after a warm-up);
#   - its open file descriptors are back to what they were idle (± 8);
#   - goodput (answers within the SLO a second) ≥ 0.9× the plan's capacity;
#   - the next request is served.
# Then REDEPLOYS (0 by default) redeploys of the app, each serving 5 s at half capacity, with the memory after each in
# out/soak/redeploys.csv. Exits 1 naming what did not hold. Bounded in time and to loopback.
#
# Usage: [FACTOR=2] [DURATION=600] [MAX_RSS_MB=1500] [REDEPLOYS=0] [BUNDLE=examples/sign-reader] scripts/soak.sh [JIG]
# (after `make release examples`; BUNDLE: a copy of the sign reader, e.g. with another profiles.csv)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gateway.sh

jig=${1:-target/release/jig}
out=out/soak
factor=${FACTOR:-2}
bundle=${BUNDLE:-examples/sign-reader}
duration=${DURATION:-600}
max_rss=${MAX_RSS_MB:-1500}
rm -rf "$out" && mkdir -p "$out"
start_gateway "$jig" "$out"
"$jig" deploy "$bundle" >/dev/null
capacity=$(planned_capacity "$jig" sign-reader)
half=$(python3 -c "print(round($capacity / 2, 2))")
rate=$(python3 -c "print(round($capacity * $factor, 2))")
fds() { ls "/proc/$gateway_pid/fd" | wc -l; }

# Idle, once every task and instance has run: the footprint memory must come back to.
"$jig" bench sign-reader .jig/samples/*.png --rate "$half" --duration 10 --json >/dev/null 2>&1
sleep 10
idle_rss=$(gateway_rss_mb) idle_fds=$(fds)
echo "jig: $jig; plan capacity $capacity req/s; idle: $idle_rss MB, $idle_fds fds; ${factor}x = $rate req/s for $duration s"

echo "elapsed_s,rss_mb" > "$out/rss.csv"
"$jig" bench sign-reader .jig/samples/*.png --rate "$rate" --duration "$duration" --json > "$out/soak.json" 2>/dev/null &
bench=$!
started=$(date +%s)
while kill -0 $bench 2>/dev/null; do
    echo "$(( $(date +%s) - started )),$(gateway_rss_mb)" >> "$out/rss.csv"
    sleep 5
done
wait $bench
# Memory returned: the first sample within 60 s of the load's end at ≤ 1.5× idle.
ended=$(date +%s) returned=
while [ $(( $(date +%s) - ended )) -le 60 ]; do
    now=$(gateway_rss_mb)
    echo "$(( $(date +%s) - started )),$now" >> "$out/rss.csv"
    if python3 -c "import sys; sys.exit(0 if $now <= 1.5 * $idle_rss else 1)"; then
        returned=$(( $(date +%s) - ended ))
        break
    fi
    sleep 5
done
after_rss=$(gateway_rss_mb) after_fds=$(fds)
"$jig" invoke sign-reader .jig/samples/stop.png >/dev/null && next=served || next=failed

echo "deploy,rss_mb" > "$out/redeploys.csv"
for i in $(seq "${REDEPLOYS:-0}"); do
    "$jig" deploy "$bundle" >/dev/null
    "$jig" bench sign-reader .jig/samples/*.png --rate "$half" --duration 5 --json >/dev/null 2>&1
    echo "$i,$(gateway_rss_mb)" >> "$out/redeploys.csv"
done

python3 - "$out" "$duration" "$capacity" "$idle_rss" "$max_rss" "${returned:-}" "$after_rss" "$idle_fds" "$after_fds" "$next" <<'PY'
import csv, json, sys
out, duration, capacity, idle, max_rss, returned, after, idle_fds, after_fds, next_ = sys.argv[1:]
duration, capacity, idle, max_rss, after = float(duration), float(capacity), int(idle), int(max_rss), int(after)
soak = json.load(open(f"{out}/soak.json"))
rss = [int(r["rss_mb"]) for r in csv.DictReader(open(f"{out}/rss.csv"))]
goodput = soak["ok"] / duration
print(f"soak: {soak['sent']} sent, goodput {goodput:.2f} req/s ({goodput / capacity:.2f} of the plan's "
      f"{capacity:.2f}), violations {soak['violation_rate'] * 100:.1f}%, p50 {soak['p50_ms']:.0f} ms")
print(f"gateway RSS: idle {idle} MB, at most {max(rss)} MB; "
      + (f"back to {after} MB ({after / idle:.2f}x idle) {returned} s after the load" if returned
         else f"{after} MB ({after / idle:.2f}x idle) 60 s after the load"))
print(f"fds: {idle_fds} idle, {after_fds} after; the next request: {next_}")
redeploys = [int(r["rss_mb"]) for r in csv.DictReader(open(f"{out}/redeploys.csv"))]
if redeploys:
    print(f"gateway RSS after each of {len(redeploys)} redeploys: {redeploys} MB")
failed = [what for what, held in [
    (f"RSS stayed under {max_rss} MB", max(rss) <= max_rss),
    ("memory back to 1.5x idle within 60 s", bool(returned)),
    ("fds back", int(after_fds) <= int(idle_fds) + 8),
    ("goodput >= 0.9x capacity", goodput >= 0.9 * capacity),
    ("the next request served", next_ == "served"),
] if not held]
if failed:
    print("soak: FAILED: " + "; ".join(failed))
    sys.exit(1)
print("soak: every check held")
PY

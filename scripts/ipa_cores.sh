#!/usr/bin/env bash
# IPA against JigsawServe on this machine's cores (issue 18): the sign reader deployed with `planner = "ipa"` and
# with `planner = "jigsaw"`, each loaded by `jig bench` (open-loop Poisson on loopback, DURATION seconds, 30 by
# default) at 1x and 2x the capacity the IPA deployment reports; prints each deployment (variants, batch,
# instances) and the goodput, violations and p50 of each run.
#
# Usage: [DURATION=30] scripts/ipa_cores.sh   (after `make build examples`); results in out/ipa-cores/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gateway.sh

jig=target/release/jig
out=out/ipa-cores
duration=${DURATION:-30}
rm -rf "$out" && mkdir -p "$out"
capacity=
for planner in ipa jigsaw; do
    bundle="$out/sign-reader-$planner"
    cp -r examples/sign-reader "$bundle"
    { echo "planner = \"$planner\""; cat examples/sign-reader/jig.toml; } > "$bundle/jig.toml"
    mkdir -p "$out/$planner"
    start_gateway "$jig" "$out/$planner"
    "$jig" deploy "$bundle" >/dev/null 2>&1
    "$jig" status sign-reader --json > "$out/status-$planner.json"
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["deployment"]
print(sys.argv[2] + ": " + d["source"])
for i in d["instances"]:
    print("  %s: %d x %s on %s, batch %d" % (i["slot"], i["count"], i["variant"], i["segment"], i["max_batch"]))' \
        "$out/status-$planner.json" "$planner"
    capacity=${capacity:-$(planned_capacity "$jig" sign-reader)}
    for factor in 1 2; do
        rate=$(python3 -c "print(round($capacity * $factor, 2))")
        "$jig" bench sign-reader .jig/samples/*.png --rate "$rate" --duration "$duration" --json \
            > "$out/bench-$planner-$factor.json" 2>/dev/null
        python3 - "$out/bench-$planner-$factor.json" "$factor" "$rate" "$duration" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
factor, rate, duration = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
print(f"  {factor}x ({rate:.1f} req/s): {s['sent']} sent, goodput {s['ok'] / duration:.2f} req/s, "
      f"violations {s['violation_rate'] * 100:.1f}%, p50 {s['p50_ms']:.0f} ms")
PY
        sleep 6
    done
    stop_gateway
done

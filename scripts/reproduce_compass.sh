#!/usr/bin/env bash
# Compass's query classes planned together against each planned alone, with `jig plan` on the sign reader's
# measured profiles and three query classes (docs/evaluation/compass/sign-reader.toml): the classes planned
# together (`planner = "compass"`) against each planned alone in the spec's order, each on what the ones before
# it left (`[compass] alone = true`), on 4 to 16 cores, and the cores each needs to serve everything.
#
# This is NOT Compass's headline. The paper's 2.4-5.1x goodput and 3.8-4.5x lower cost (§5) are against
# Vulcan and VideoStorm augmented with Compass's own multi-query planner, under 5 s and 15 s planning deadlines
# (§6.1): a gain of search quality and speed. Together against alone is a comparison the paper does not report.
#
# Usage: scripts/reproduce_compass.sh   (after `make release`); results in out/compass/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
jig=target/release/jig
spec=docs/evaluation/compass/sign-reader.toml
profiles=examples/sign-reader/profiles.csv
out=out/compass
[ -x "$jig" ] || { echo "missing $jig: run \`make release\` first" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out"
cp "$spec" "$out/together.toml"
{ cat "$spec"; printf '\n[compass]\nalone = true\n'; } > "$out/alone.toml"

# `goodput slices seconds` of one plan.
plan() {
    "$jig" plan "$out/$1.toml" --profiles "$profiles" --slices "$2" --json > "$out/$1-$2.json"
    python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))[0]  # one plan: its space
served = sum(c["served_rps"] for c in p["classes"])
print("%.1f %d %.3f" % (served, p["slices_used"], p["solve"]["seconds"]))' "$out/$1-$2.json"
}

{
    echo "| cores | goodput together, req/s | alone | ratio | cores used together / alone | plan time together / alone, s |"
    echo "|---|---|---|---|---|---|"
    for cores in 4 6 8 12 16 64; do
        read -r g1 s1 t1 < <(plan together "$cores")
        read -r g2 s2 t2 < <(plan alone "$cores")
        ratio=$(python3 -c "print(f'{$g1 / $g2:.2f}' if $g2 > 0 else 'inf')")
        echo "| $cores | $g1 | $g2 | $ratio | $s1 / $s2 | $t1 / $t2 |"
    done
} | tee "$out/summary.md"

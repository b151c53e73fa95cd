#!/usr/bin/env bash
# IPA against its baselines and JigsawServe on this machine's cores (issue 18): the sign reader deployed with
# `planner = "ipa"`, with IPA's baselines FA2-low and FA2-high (`[ipa] variants = "lightest"` / `"heaviest"`) and
# with `planner = "jigsaw"`, each loaded by `jig bench` (open-loop Poisson on loopback, DURATION seconds, 30 by
# default) at 1x and 2x the capacity the IPA deployment reports; prints each deployment (variants, batch,
# instances, cores, PAS: the slots' accuracy product in percent of the best) and the goodput,
# violations and p50 of each run.
#
# Usage: [DURATION=30] scripts/ipa_cores.sh   (after `make release examples`); results in out/ipa-cores/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gateway.sh

jig=target/release/jig
out=out/ipa-cores
duration=${DURATION:-30}
rm -rf "$out" && mkdir -p "$out"
capacity=
for run in ipa fa2-low fa2-high jigsaw; do
    case $run in
        fa2-low) planner=ipa table='[ipa]\nvariants = "lightest"' ;;
        fa2-high) planner=ipa table='[ipa]\nvariants = "heaviest"' ;;
        *) planner=$run table= ;;
    esac
    bundle="$out/sign-reader-$run"
    cp -r examples/sign-reader "$bundle"
    { echo "planner = \"$planner\""; cat examples/sign-reader/jig.toml; printf "\n$table\n"; } > "$bundle/jig.toml"
    # IPA has no accuracy objective (its α weighs accuracy against cores), and FA2-low's lightest variants fall
    # below the bundle's 0.9: IPA's runs plan with a nominal 0.1.
    [ "$planner" = ipa ] && sed -i '0,/^accuracy = 0.9$/s//accuracy = 0.1/' "$bundle/jig.toml"
    mkdir -p "$out/$run"
    start_gateway "$jig" "$out/$run"
    "$jig" deploy "$bundle" >/dev/null 2>&1
    "$jig" status sign-reader --json > "$out/status-$run.json"
    python3 -c '
import json, sys, tomllib
d = json.load(open(sys.argv[1]))["deployment"]
variants = tomllib.load(open(sys.argv[3], "rb"))["variants"]
accuracy = {v["name"]: v["accuracy"] for v in variants}
best = {}
for v in variants:
    best[v["slot"]] = max(best.get(v["slot"], 0), v["accuracy"])
planned = {i["slot"]: accuracy[i["variant"]] / best[i["slot"]] for i in d["instances"]}
pas, cores = 100.0, 0
for i in d["instances"]:
    if i["segment"].startswith("cpu:"):
        cores += i["count"] * int(i["segment"].split(":")[-1])
for slot, a in planned.items():
    pas *= a
print(sys.argv[2] + ": " + d["source"])
for i in d["instances"]:
    print("  %s: %d x %s on %s, batch %d" % (i["slot"], i["count"], i["variant"], i["segment"], i["max_batch"]))
print("  cores %d, PAS %.1f%% (slots %s)" % (cores, pas, ", ".join(sorted(planned))))' \
        "$out/status-$run.json" "$run" "$bundle/jig.toml"
    capacity=${capacity:-$(planned_capacity "$jig" sign-reader)}
    for factor in 1 2; do
        rate=$(python3 -c "print(round($capacity * $factor, 2))")
        "$jig" bench sign-reader .jig/samples/*.png --rate "$rate" --duration "$duration" --json \
            > "$out/bench-$run-$factor.json" 2>/dev/null
        python3 - "$out/bench-$run-$factor.json" "$factor" "$rate" "$duration" <<'PY'
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

#!/usr/bin/env bash
# Reproduce IPA's headline (issue 18; IPA §5.2: up to 21% higher pipeline accuracy than its baselines at a
# negligible cost increase) in `jig simulate`, on the sign reader's measured profiles: IPA against FA2-low (each
# stage's least accurate variant, scaled and batched), FA2-high (the most accurate) and RIM (model switching and
# batching, replicas fixed), on the same traces; then IPA's α/β trade-off. Every planner is IPA's program with
# the baseline's restriction ([ipa] variants / replicas in the spec, `planner/src/ipa.rs`).
#
# Traces, as the paper's four excerpts (its Twitter trace is not available here): a generated diurnal day
# (`jig trace`, fluctuating), steady low and steady high, bursty (steady with 3× bursts). Each is 96 bins.
#
# Usage: scripts/reproduce_ipa.sh   (after `make release`); results in out/ipa/ (summary.md, one CSV per run).
set -euo pipefail
cd "$(dirname "$0")/.."
jig=target/release/jig
spec=docs/evaluation/ipa/sign-reader.toml
profiles=examples/sign-reader/profiles.csv
out=out/ipa
[ -x "$jig" ] || { echo "missing $jig: run \`make release\` first" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out"

peak=${PEAK:-60}
"$jig" trace --peak "$peak" --bins 96 -o "$out/trace-diurnal.csv"
constant() { echo "start_s,rps"; for i in $(seq 0 95); do echo "$((i * 900)),$1"; done; }
constant $((peak / 4)) > "$out/trace-steady-low.csv"
constant "$peak" > "$out/trace-steady-high.csv"
{ echo "start_s,rps"; for i in $(seq 0 95); do
    if [ $((i % 12)) -lt 2 ]; then r=$((peak * 3 / 4)); else r=$((peak / 4)); fi; echo "$((i * 900)),$r"; done; } \
    > "$out/trace-bursty.csv"

# A spec with `[ipa]` set as given (`key = value` lines replace the spec's table).
with_ipa() {
    sed '/^\[ipa\]/,$d' "$spec"
    printf '[ipa]\nthreshold_rps = 4\n'
    printf '%s\n' "$@"
}

# One simulation; prints `cores PAS violations fallbacks` from its summary line.
simulate() {
    local name=$1 trace=$2; shift 2
    with_ipa "$@" > "$out/$name.toml"
    "$jig" simulate "$out/$name.toml" --profiles "$profiles" --trace "$trace" --sample 2000 \
        --csv "$out/$name.csv" 2>/dev/null > "$out/$name.txt"
    # space slices% acc-drop% violations% p50 p99 busy… quiet… fallbacks solve
    awk -v cores=32 '$1 == "ipa" { gsub("%", ""); printf "%.1f %.1f %.1f %s\n", $2 * cores / 100, 100 - $3, $4, $11 }' \
        "$out/$name.txt"
}

{
    echo "| trace | planner | mean cores | mean PAS, % of best | violations, % | bins without a plan |"
    echo "|---|---|---|---|---|---|"
    for trace in diurnal steady-low steady-high bursty; do
        for run in "ipa|alpha = 2|beta = 1" "fa2-low|alpha = 2|beta = 1|variants = \"lightest\"" \
            "fa2-high|alpha = 2|beta = 1|variants = \"heaviest\"" "rim|alpha = 2|beta = 1|replicas = ${RIM_REPLICAS:-4}"; do
            IFS='|' read -r name a b c <<< "$run"
            read -r cores pas violations none < <(simulate "$trace-$name" "$out/trace-$trace.csv" "$a" "$b" ${c:+"$c"})
            echo "| $trace | $name | $cores | $pas | $violations | $none |"
        done
    done
    echo
    echo "IPA's trade-off on the diurnal day (β = 1 per core; α per PAS point):"
    echo
    echo "| α | mean cores | mean PAS, % of best | violations, % |"
    echo "|---|---|---|---|"
    for alpha in 0.05 0.1 0.2 0.5 1 2 10; do
        read -r cores pas violations _ < <(simulate "sweep-$alpha" "$out/trace-diurnal.csv" "alpha = $alpha" "beta = 1")
        echo "| $alpha | $cores | $pas | $violations |"
    done
} | tee "$out/summary.md"

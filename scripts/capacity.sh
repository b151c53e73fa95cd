#!/usr/bin/env bash
# Planned against served: for each app, the capacity its deployment promises (`jig deploy`'s "serves up to", the
# plan's `capacity_rps`) and the capacity this machine measures — the highest Poisson rate at which at least 99%
# of requests are answered within the latency SLO — in one run, and their ratio (planned ÷ measured; the plan is
# right within ±10% when it lies in 0.9–1.1). The search starts at the planned rate, steps up or down by a
# quarter until the verdict turns (at most 12 times; where every rate passed it says so, the capacity then at least
# the last), then halves the bracket STEPS times (3 by default); each rate runs DURATION seconds (30) of `jig bench`
# on loopback, with a pause for the queues to drain. The app first serves WARMUP seconds (20) at a third of its
# plan, so that a deployment planned from declared costs can be measured as the gateway then re-plans it. Writes
# out/capacity/APP-RATE.json for each run and out/capacity/summary.csv.
#
# Usage: [DURATION=30] [STEPS=3] [WARMUP=20] [UP_ARGS="--cores 8 --gpus 0"] [BUNDLE=dir] scripts/capacity.sh [JIG] [APP...]
# APP: sign-reader, photo-crops (both by default). Needs `make release examples` first. UP_ARGS are `jig up`'s
# (default: all this machine's cores, every GPU); BUNDLE deploys that copy of the one APP (e.g. one profiled on
# GPU shares: scripts/gpu_capacity.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gateway.sh

jig=${1:-target/release/jig}
shift || true
apps=("$@")
[ ${#apps[@]} -gt 0 ] || apps=(sign-reader photo-crops)
[ -z "${BUNDLE:-}" ] || [ ${#apps[@]} -eq 1 ] || { echo "capacity.sh: BUNDLE is a copy of one APP; name it" >&2; exit 2; }
duration=${DURATION:-30}
steps=${STEPS:-3}
warmup=${WARMUP:-20}
out=out/capacity
rm -rf "$out" && mkdir -p "$out"
echo "app,planned_rps,measured_rps,ratio" > "$out/summary.csv"

# What one app is sent: its inputs and `jig bench` flags.
load() {
    case $1 in
        sign-reader) echo .jig/samples/*.png ;;
        photo-crops) echo --meta '{"boxes":[{"x0":40,"y0":30,"x1":240,"y1":180},{"x0":250,"y0":120,"x1":420,"y1":260}]}' tests/data/f3-board.jpg ;;
        *) echo "capacity.sh: no load for app $1 (sign-reader, photo-crops)" >&2; exit 2 ;;
    esac
}

# `in_slo APP RATE`: run the load, print the fraction answered within the SLO, keep the report.
in_slo() {
    local app=$1 rate=$2 args
    read -r -a args <<<"$(load "$app")"
    "$jig" bench "$app" "${args[@]}" --rate "$rate" --duration "$duration" --json >"$out/$app-$rate.json" 2>/dev/null
    sleep 5
    python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(1 - s["violation_rate"])' "$out/$app-$rate.json"
}

for app in "${apps[@]}"; do
    mkdir -p "$out/$app"
    # shellcheck disable=SC2086 # UP_ARGS is a list of arguments
    start_gateway "$jig" "$out/$app" ${UP_ARGS:-}
    "$jig" deploy "${BUNDLE:-examples/$app}" | tail -1
    planned=$(planned_capacity "$jig" "$app")
    [ "$planned" != None ] || { echo "$app: its deployment states no capacity"; stop_gateway; continue; }
    if [ "$warmup" -gt 0 ]; then
        DURATION=$warmup in_slo "$app" "$(python3 -c "print(round($planned / 3, 2))")" >/dev/null
        planned=$(planned_capacity "$jig" "$app")
    fi
    ok() { python3 -c "import sys; sys.exit(0 if $1 >= 0.99 else 1)"; }
    rate=$(python3 -c "print(round($planned, 2))")
    lo=0 hi=
    for _ in $(seq 12); do  # a quarter a step: 1.25^12 is 14.6x either way
        fraction=$(in_slo "$app" "$rate")
        echo "  $app at $rate req/s: $(python3 -c "print(f'{100 * $fraction:.1f}')")% in SLO"
        if ok "$fraction"; then
            lo=$rate
            rate=$(python3 -c "print(round($rate * 1.25, 2))")
        else
            hi=$rate
            rate=$(python3 -c "print(round($rate / 1.25, 2))")
        fi
        [ -n "$hi" ] && python3 -c "import sys; sys.exit(0 if $lo > 0 else 1)" && break
    done
    for _ in $(seq "$steps"); do
        [ -n "$hi" ] || break
        rate=$(python3 -c "print(round(($lo + $hi) / 2, 2))")
        fraction=$(in_slo "$app" "$rate")
        echo "  $app at $rate req/s: $(python3 -c "print(f'{100 * $fraction:.1f}')")% in SLO"
        if ok "$fraction"; then lo=$rate; else hi=$rate; fi
    done
    "$jig" status "$app" >"$out/$app/status.txt" 2>&1 || true
    grep -E "deployment|serves up to|cpu|glue" "$out/$app/status.txt" || true
    ratio=$(python3 -c "print(f'{$planned / $lo:.2f}' if $lo > 0 else 'inf')")
    [ -n "$hi" ] || echo "  $app: every rate tried passed: the capacity is at least $lo req/s"
    echo "$app: planned $planned req/s, measured $lo req/s (>= 99% in SLO), planned/measured $ratio"
    echo "$app,$planned,$lo,$ratio" >> "$out/summary.csv"
    stop_gateway
done
cat "$out/summary.csv"

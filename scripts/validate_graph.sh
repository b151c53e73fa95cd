#!/usr/bin/env bash
# Validate `jig simulate` against the real runtime on a graph with fan-out and re-planning (issue 17): the same
# app and changing trace run by `jig up` (its controller re-planning as demand moves) and simulated from the
# bundle's profile table and what the deployed app observed, re-planning when the controller would
# (`--replan-threshold`), from the demand windows and plan it had when the trace began.
#
# The app: the sign reader's two models in a three-task graph, `detect` (PP-OCRv4 detection, four variants)
# → `recognize` (PP-OCRv4 recognition, once per line found: a sign of two lines fans out to two) → `collect`
# (glue only, the `echo` function), SLO 1 s, accuracy 0.85. Every request is the same photo: a two-line sign
# of the evaluation set in a 960×640 frame. This machine's two cores hold one model task each, so re-plans
# choose variants and batch sizes: the one that first scales the photo to 640 px serves two to three times as
# many requests as the full-size detector, less accurately. The models are profiled (once; kept in
# .jig/validate-graph.csv) at the shapes this photo gives them: the detector's input [3, 640, 960]; the
# recognizer's lines are 320 and 800 wide, and its time grows with the width, so it is profiled at their
# mean, [3, 48, 560].
#
# Each run ends with the whole run's p99 and violations, then the trace's bins point by point, measured beside
# simulated (offered rate, requests answered in time, violations: of requests measured, of the sink's invocations
# simulated, and p99), in run-N/bins.csv.
#
# Usage: scripts/validate_graph.sh [RUNS]   (after `make release examples`); results in out/validate-graph/.
# On a GPU (issue 54's figure end to end), the same with the models on MPS shares of GPU 0:
#   JIG=path/to/jig SEGMENTS="mps:0:50 mps:0:25 mps:0:50x2" UP_ARGS="--cores 8 --gpus 0" BIN_S=10 \
#   [PLANNER=gpulet] scripts/validate_graph.sh
# ARRIVALS: `replay` (default) simulates the requests each run sent, when it sent them (`jig simulate --arrivals`);
# `poisson`, the simulation's own draw at the trace's rates.
# SEGMENTS: what `jig profile` measures (default `cpu:1`; the trace's peak is scaled to the first);
# UP_ARGS: what `jig up` is given; PLANNER: the bundle's strategy (default jigsaw), which the simulation plans
# with too; BIN_S: the trace's bins and the controller's demand windows, in seconds (default 20); PHOTO: the
# photo, made already (the script makes it with Pillow otherwise). A GPU machine stages what
# scripts/test_gpu.sh's header lists (the binary, the sign reader's glue and models, ONNX Runtime's CUDA build),
# and target/wasm32-wasip2/release/echo.wasm.
set -euo pipefail
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
[ -z "${JIG:-}" ] || JIG=$(absolute "$JIG")
[ -z "${PHOTO:-}" ] || PHOTO=$(absolute "$PHOTO")
cd "$(dirname "$0")/.."
. scripts/gateway.sh

runs=${1:-1}
jig=${JIG:-target/release/jig}
segments=${SEGMENTS:-cpu:1}
planner=${PLANNER:-jigsaw}
bin_s=${BIN_S:-20}
bundle=.jig/validate-graph
out=out/validate-graph
sign=$out/photo.png
models=examples/sign-reader/models
# Profiles are kept per machine and segments: the CPU's in .jig/validate-graph.csv.
profiles=.jig/validate-graph.csv
[ "$segments" = cpu:1 ] || profiles=.jig/validate-graph-$(echo "$segments" | tr ' :' '_-').csv
rm -rf "$out" "$bundle" && mkdir -p "$out" "$bundle/glue" "$bundle/models"
for need in "$jig" "${PHOTO:-.jig/samples/eval/eval-03.png}" "$models/ppocr-det.onnx" \
    target/wasm32-wasip2/release/echo.wasm; do
    [ -e "$need" ] || { echo "missing $need: run \`make release examples\` first" >&2; exit 2; }
done
if [ -n "${PHOTO:-}" ]; then
    cp "$PHOTO" "$sign"
else
    PYTHONPATH=.jig/python python3 scripts/graph_photo.py .jig/samples/eval/eval-03.png "$sign"
fi
cp examples/sign-reader/glue/ocr_detect.wasm examples/sign-reader/glue/ocr_recognize.wasm \
    target/wasm32-wasip2/release/echo.wasm "$bundle/glue/"
ln -f "$models"/ppocr-det*.onnx "$models"/ppocr-rec.onnx "$models"/ppocr-rec-int8.onnx \
    "$models"/ppocr-rec.charset.txt "$bundle/models/"
# Variants and accuracies as the sign reader declares them; the factor is this sign's two lines.
{
    cat <<'EOF'
name = "validate-graph"

[slo]
latency_ms = 1000
accuracy = 0.85

[[tasks]]
name = "detect"
glue = "glue/ocr_detect.wasm"
slot = "det"
config = { max_side = "960" }

[[tasks]]
name = "recognize"
glue = "glue/ocr_recognize.wasm"
slot = "rec"
config = { speech_port = "text" }
config_files = { charset = "models/ppocr-rec.charset.txt" }

[[tasks]]
name = "collect"
glue = "glue/echo.wasm"

[[edges]]
from = "detect.lines"
to = "recognize"

[[edges]]
from = "recognize.text"
to = "collect"
EOF
    sed -n '/^\[\[variants\]\]/,$p' examples/sign-reader/jig.toml | grep -v '^#' |
        sed -e 's/factors = { recognize = 1.2 }/factors = { recognize = 2.0 }/' \
            -e 's/x = \[3, 640, 640\]/x = [3, 640, 960]/' -e 's/x = \[3, 48, 320\]/x = [3, 48, 560]/' |
        awk '/^\[\[variants\]\]/ { keep = 1 } /^slot = "voice"/ { keep = 0 } { block = block $0 "\n" }
             /^$/ { if (keep) printf "%s", block; block = "" } END { if (keep) printf "%s", block }'
} >"$bundle/jig.toml"
[ "$planner" = jigsaw ] || sed -i "1i planner = \"$planner\"" "$bundle/jig.toml"
[ -f "$profiles" ] || "$jig" profile "$bundle" $(printf -- '--segment %s ' $segments) --max-batch 8 --runs 20 \
    --output "$profiles"
cp "$profiles" "$bundle/profiles.csv"

# A trace of BIN_S-second bins that climbs past what the most accurate detector serves and back: its peak is
# 1.35× the profiled batch-1 rate of the full-size detector on the first segment (on `cpu:1` of one 2 vCPU VM
# 11 req/s, of another 2.8: peaks of 15 and 3.8 req/s), so that the controller must re-plan to a faster detector
# on any machine, whatever its speed.
first=${segments%% *}
peak=$(awk -F, -v seg="$first" '$1 == "det" && $2 == "ppocr-v4-det" && $3 == seg && $4 == 1 { print $7 * 1.35; exit }' \
    "$profiles")
[ -n "$peak" ] || { echo "no batch-1 row of ppocr-v4-det on $first in $profiles" >&2; exit 1; }
{
    echo "start_s,rps"
    i=0
    for share in 0.3 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1.0 1.0 0.9 0.8 0.6 0.4; do
        awk -v at=$((i * bin_s)) -v share="$share" -v peak="$peak" 'BEGIN { printf "%d,%.1f\n", at, share * peak }'
        i=$((i + 1))
    done
} >"$out/trace.csv"

# The controller closes a demand window every BIN_S seconds, as the trace's bins, and re-plans when its
# prediction moves by 20%.
printf 'demand_window_s = %s\nreplan_threshold = 0.2\n' "$bin_s" >"$out/gateway.toml"

for run in $(seq "$runs"); do
    dir=$out/run-$run
    mkdir -p "$dir"
    # shellcheck disable=SC2086 # UP_ARGS is a list of arguments
    start_gateway "$jig" "$dir" --config "$out/gateway.toml" ${UP_ARGS:-}
    started=$(date +%s.%N) # the controller's windows close every BIN_S seconds from here
    "$jig" deploy "$bundle" >/dev/null
    # Low load first: enough invocations that the app has observed its factor and glue times (20 each) and
    # its batch latencies well (about 120 batches: near the detector's capacity, a few percent of service rate
    # move the violations by points), and the time outside models and glue (HTTP, the `collect` task) shows as
    # measured p50 less simulated p50.
    "$jig" bench validate-graph "$sign" --rate 3 --duration 40 --json >"$dir/low-measured.json"
    # Start the trace a second after a window closes, so that the controller's windows are the trace's bins,
    # as the simulation re-plans at bin boundaries.
    sleep "$(python3 -c 'import sys, time; b = float(sys.argv[2]); print(b - (time.time() - float(sys.argv[1])) % b + 1)' \
        "$started" "$bin_s")"
    "$jig" status validate-graph --json >"$dir/observed.json"
    # Each run's arrivals are its own draw, as each simulation's are (`--seed`).
    "$jig" bench validate-graph "$sign" --trace "$out/trace.csv" --seed "$run" --csv "$dir/requests.csv" \
        --json >"$dir/measured.json"
    "$jig" status validate-graph --json >"$dir/status.json"
    stop_gateway
    printf 'start_s,rps\n0,3\n' >"$dir/low.csv"
    "$jig" simulate "$bundle" --observed "$dir/observed.json" --trace "$dir/low.csv" --demand 3 --seed "$run" \
        --json >"$dir/low-simulated.json" 2>/dev/null
    # Spread over the path's two model tasks: the simulator adds it at each.
    overhead=$(python3 -c '
import json, sys
measured = json.load(open(sys.argv[1]))["p50_ms"]
simulated = json.load(open(sys.argv[2]))[0]["p50_ms"]
print(f"{max(0.0, measured - simulated) / 2:.2f}")' "$dir/low-measured.json" "$dir/low-simulated.json")
    # Re-planned as the controller re-plans, from where it stood when the trace began, and sent the very requests
    # the run sent, when it sent them (ARRIVALS=poisson: the simulation's own draw at the trace's rates).
    replay=(--arrivals "$dir/requests.csv")
    [ "${ARRIVALS:-replay}" = replay ] || replay=()
    "$jig" simulate "$bundle" --observed "$dir/observed.json" --trace "$out/trace.csv" --overhead-ms "$overhead" \
        --replan-threshold 0.2 --seed "$run" --sample 100000 "${replay[@]}" --json >"$dir/simulated.json" 2>/dev/null
    python3 - "$dir" "$overhead" "$run" "$bin_s" <<'PY'
import csv, json, sys
d, overhead, run, bin_s = sys.argv[1], float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
slo_ms = 1000.0
m = json.load(open(f"{d}/measured.json"))
s = json.load(open(f"{d}/simulated.json"))[0]
status = json.load(open(f"{d}/status.json"))
bins = s["bins"]
sim_p99 = s["p99_ms"]
sim_viol = sum(b["violation_rate"] * b["rate_rps"] for b in bins) / sum(b["rate_rps"] for b in bins)
print(f"run {run}: overhead {overhead:.1f} ms/task; re-plans {status['replans']}; "
      f"measured p99 {m['p99_ms']:.0f} ms, violations {m['violation_rate'] * 100:.2f}%; "
      f"simulated p99 {sim_p99:.0f} ms, violations {sim_viol * 100:.2f}%")

# Point by point: each bin's requests, by when they were sent, against the simulated bin.
sent = [[] for _ in bins]
for r in csv.DictReader(open(f"{d}/requests.csv")):
    k = int(float(r["sent_s"]) // bin_s)
    if k < len(sent):
        sent[k].append((float(r["latency_ms"]), r["status"] == "200"))
def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))] if xs else float("nan")
rows = []
for b, reqs in zip(bins, sent):
    in_time = [lat for lat, ok in reqs if ok and lat <= slo_ms]
    rows.append({
        "start_s": b["start_s"], "offered_rps": b["rate_rps"],
        "measured_in_time_rps": len(in_time) / bin_s,
        "measured_violations": 1 - len(in_time) / len(reqs) if reqs else float("nan"),
        "simulated_violations": b["violation_rate"],
        "measured_p99_ms": p99([lat for lat, ok in reqs if ok]), "simulated_p99_ms": b["p99_ms"],
    })
with open(f"{d}/bins.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
print(f"{'start s':>7} {'offered':>8} {'in time':>8} {'violations':>11} {'simulated':>10} {'p99 ms':>7} {'simulated':>10}")
for r in rows:
    print(f"{r['start_s']:>7.0f} {r['offered_rps']:>8.1f} {r['measured_in_time_rps']:>8.1f} "
          f"{r['measured_violations'] * 100:>10.1f}% {r['simulated_violations'] * 100:>9.1f}% "
          f"{r['measured_p99_ms']:>7.0f} {r['simulated_p99_ms']:>10.0f}")
PY
done

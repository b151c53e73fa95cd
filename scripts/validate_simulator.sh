#!/usr/bin/env bash
# Validate `jig simulate` against the real runtime on this machine (issue 7): the same app, plan and short trace
# on CPU segments, measured with `jig bench` against `jig up` and simulated from the bundle's profile table.
# The app: one task, the `classify` glue on the synthetic ResNet-18/34 of `make paper-apps`, SLO 250 ms.
# Usage: scripts/validate_simulator.sh [DEMAND_RPS]   (after `make release paper-apps`); results in out/validate/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gateway.sh

demand=${1:-20}
jig=target/release/jig
bundle=.jig/validate
out=out/validate
rm -rf "$out" && mkdir -p "$out" "$bundle/glue" "$bundle/models"
for need in "$jig" target/wasm32-wasip2/release/classify.wasm .jig/synth/resnet18.onnx .jig/synth/resnet34.onnx; do
    [ -e "$need" ] || { echo "missing $need: run \`make release paper-apps\` first" >&2; exit 2; }
done
cp target/wasm32-wasip2/release/classify.wasm "$bundle/glue/"
ln -f .jig/synth/resnet18.onnx .jig/synth/resnet34.onnx "$bundle/models/"
cat >"$bundle/jig.toml" <<EOF
name = "validate"

[slo]
latency_ms = 250
accuracy = 0.9

[demand]
rps = $demand

[[tasks]]
name = "classify"
glue = "glue/classify.wasm"
slot = "classifier"

[[variants]]
slot = "classifier"
name = "resnet18"
model = "models/resnet18.onnx"
accuracy = 70.0

[[variants]]
slot = "classifier"
name = "resnet34"
model = "models/resnet34.onnx"
accuracy = 73.0
EOF
# A 224×224 photo-like input: the glue decodes and normalises it, as it would a real one.
python3 - "$out/input.ppm" <<'EOF'
import sys
w = h = 224
pixels = bytes((x * 7 + y * 3) % 256 for y in range(h) for x in range(w) for _ in range(3))
open(sys.argv[1], "wb").write(b"P6 %d %d 255\n" % (w, h) + pixels)
EOF
# The glue reads PNG or JPEG: convert with the set-up's Pillow.
PYTHONPATH=.jig/python python3 -c "from PIL import Image; import sys; Image.open(sys.argv[1]).save(sys.argv[2])" \
    "$out/input.ppm" "$out/input.png"

[ -f "$bundle/profiles.csv" ] ||
    "$jig" profile "$bundle" --segment cpu:1 --segment cpu:2 --max-batch 8 --runs 20

# A short trace: 20-second bins stepping around the demand the app is deployed for.
{
    echo "start_s,rps"
    i=0
    for f in 0.5 0.8 1.0 0.8 1.0 0.6; do
        python3 -c "print(f'{$i * 20},{$demand * $f:.2f}')"
        i=$((i + 1))
    done
} >"$out/trace.csv"

start_gateway "$jig" "$out"
"$jig" deploy "$bundle"
"$jig" status validate | tee "$out/plan.txt"

# The profile table times the model alone; the glue (PNG decode, resize, normalise) and HTTP add a constant
# per request, which low load shows: the measured p50 less the simulated p50 at 2 req/s.
printf 'start_s,rps\n0,2\n' >"$out/low.csv"
"$jig" bench validate "$out/input.png" --rate 2 --duration 20 --json >"$out/low-measured.json"
"$jig" simulate "$bundle" --demand "$demand" --trace "$out/low.csv" --json >"$out/low-simulated.json"
overhead=$(python3 -c '
import json, sys
measured = json.load(open(sys.argv[1]))["p50_ms"]
simulated = json.load(open(sys.argv[2]))[0]["p50_ms"]
print(f"{max(0.0, measured - simulated):.2f}")' "$out/low-measured.json" "$out/low-simulated.json")
echo "== glue and HTTP per request, from low load: $overhead ms"

echo "== measured: jig bench validate --trace $out/trace.csv"
"$jig" bench validate "$out/input.png" --trace "$out/trace.csv" --csv "$out/measured.csv" | tee "$out/measured.txt"
# The requests the run sent, simulated when it sent them (`--arrivals`).
echo "== simulated, the same requests: jig simulate $bundle --overhead-ms $overhead --arrivals $out/measured.csv"
"$jig" simulate "$bundle" --demand "$demand" --overhead-ms "$overhead" --trace "$out/trace.csv" \
    --arrivals "$out/measured.csv" --csv "$out/simulated.csv" | tee "$out/simulated.txt"

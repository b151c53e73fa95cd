#!/usr/bin/env bash
# `make test-gpu`: the sign reader served from MPS shares of this machine's GPU 0, end to end. It profiles the
# bundle's variants on `mps:0:50` and `mps:0:25` (in bound `jig worker` processes, as they serve), deploys the
# profiled bundle on a gateway offered no CPU cores but one (so the plan must use the GPU), checks that every
# planned instance runs on an `mps:` share, invokes it with the sample stop sign and checks the text read.
#
# Needs an NVIDIA GPU with its driver, MPS (`nvidia-cuda-mps-control`) and ONNX Runtime's CUDA build:
# JIG_ORT_LIB=/path/to/libonnxruntime.so.1.31.1 with libonnxruntime_providers_cuda.so beside it and the CUDA 13
# and cuDNN 9 libraries on LD_LIBRARY_PATH (`pip install onnxruntime-gpu==1.31.1` has them; for a machine that
# reaches no registry, ../shared/tools/gpu-carry prepares them). JIG=path/to/jig uses a prebuilt binary.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gateway.sh

jig=${JIG:-target/release/jig}
out=out/test-gpu
fail() { echo "test-gpu: $*" >&2; exit 1; }

if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU 0'; then
    echo "test-gpu: no NVIDIA GPU here (nvidia-smi lists none); run it on a machine with one" >&2
    exit 2
fi
[ -n "${JIG_ORT_LIB:-}" ] || fail "set JIG_ORT_LIB to ONNX Runtime's CUDA build (see this script's header)"
[ -x "$jig" ] || fail "no $jig; run \`make build\` or set JIG"
[ -f examples/sign-reader/glue/ocr_detect.wasm ] || fail "examples/sign-reader has no glue; run \`make examples\`"

rm -rf "$out" && mkdir -p "$out"
cp -r examples/sign-reader "$out/bundle"
rm -f "$out/bundle/profiles.csv"

echo "== jig profile: every variant on mps:0:50 and mps:0:25"
"$jig" profile "$out/bundle" --segment mps:0:50 --segment mps:0:25 --max-batch 8 --runs 10

echo "== jig up with one CPU core and GPU 0"
"$jig" up --listen 127.0.0.1:0 --state-dir "$out/state" --cores 1 --gpus 0 >"$out/gateway.log" 2>&1 &
gateway_pid=$!
trap 'kill $gateway_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    url=$(grep -o 'http://[0-9.:]*' "$out/gateway.log" | head -1 || true)
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "${url:-}" ] || { cat "$out/gateway.log"; fail "the gateway did not start"; }
export JIG_GATEWAY=$url

echo "== jig deploy"
"$jig" deploy "$out/bundle" --json > "$out/deploy.json"
"$jig" status sign-reader
python3 - "$out/deploy.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["deployment"]
assert d["source"].startswith("planned"), d["source"]
for i in d["instances"]:
    assert i["segment"].startswith("mps:"), f"{i['slot']} runs on {i['segment']}, not an MPS share"
    assert all(p.get("gpu") == 0 for p in i["places"]), i
print("every instance runs on an MPS share of GPU 0")
PY
"$jig" status

echo "== jig invoke sign-reader .jig/samples/stop.png"
"$jig" invoke sign-reader .jig/samples/stop.png -o "$out/stop" | tee "$out/stop.txt"
grep -qi "stop" "$out/stop.txt" || fail "the sign reader did not read STOP"
echo "test-gpu: passed"

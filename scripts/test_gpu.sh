#!/usr/bin/env bash
# `make test-gpu`: the sign reader served from MPS shares of this machine's GPU 0, end to end. It profiles the
# bundle's variants on `mps:0:50` and `mps:0:25` (in bound `jig worker` processes, as they serve), deploys the
# profiled bundle on a gateway offered one CPU core and GPU 0, checks that every instance of the planned model
# slots (the slots of the manifest's tasks: `det` and `rec`) runs on an `mps:` share of GPU 0 (the voice is not
# a task of the planner's graph: it gets its default instance on the core), invokes the app with the sample stop
# sign and checks the text recognised (each output's `json.text`) and that the speech is a WAV. Exit status: 0
# passed, 1 failed, 2 no NVIDIA GPU here.
#
# It needs no Rust toolchain and no registry: with cargo, `make test-gpu` builds what it needs first; on a
# machine without (a lent GPU machine), stage these in a checkout of this repository (only scripts/ and the
# bundle's jig.toml are read from it) and run `JIG=path/to/jig scripts/test_gpu.sh` (or
# `make test-gpu JIG=path/to/jig`, which builds nothing):
#   - the `jig` binary, built elsewhere with `cargo build --release -p jig` (on a glibc no newer than the GPU
#     machine's); JIG=its path. Its `jig worker` processes are the same binary.
#   - the sign reader's glue, built by `make functions`: examples/sign-reader/glue/ocr_detect.wasm,
#     ocr_recognize.wasm and tts_frame.wasm (from target/wasm32-wasip2/release/).
#   - its models, made by `make setup` (.jig/models/): examples/sign-reader/models/ppocr-det.onnx,
#     ppocr-det-640.onnx, ppocr-det-480.onnx, ppocr-det-int8.onnx, ppocr-rec.onnx, ppocr-rec-int8.onnx,
#     ppocr-rec.charset.txt, piper-joe.onnx, piper-joe-int8.onnx, piper-joe.phonemes.json and cmudict.txt
#     (`make examples` copies glue and models there). BUNDLE=dir uses another copy of the bundle.
#   - the sample image .jig/samples/stop.png, with .jig/samples/samples.json beside it for the expected text
#     (`make setup` writes them; without samples.json, STOP is expected). SAMPLE=file uses another image of it.
#   - ONNX Runtime 1.31's CUDA build: JIG_ORT_LIB=/path/to/libonnxruntime.so.1.31.1, with
#     libonnxruntime_providers_cuda.so and libonnxruntime_providers_shared.so beside it, and the CUDA 13 and
#     cuDNN 9 libraries on LD_LIBRARY_PATH (`pip install onnxruntime-gpu==1.31.1` has the first; for a machine
#     that reaches no registry, ../shared/tools/gpu-carry prepares it and prints these exports).
#   - on the machine itself: the NVIDIA driver (`nvidia-smi`) with GPU 0 not in MIG mode, MPS
#     (`nvidia-cuda-mps-control` on PATH), and python3 (for the JSON checks; no packages).
# Its files go to out/test-gpu/ (the gateway's log in gateway.log).
set -euo pipefail
# Paths given relative to where it was started from.
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
[ -z "${JIG:-}" ] || JIG=$(absolute "$JIG")
[ -z "${BUNDLE:-}" ] || BUNDLE=$(absolute "$BUNDLE")
[ -z "${SAMPLE:-}" ] || SAMPLE=$(absolute "$SAMPLE")
cd "$(dirname "$0")/.."
. scripts/gateway.sh

jig=${JIG:-target/release/jig}
bundle=${BUNDLE:-examples/sign-reader}
sample=${SAMPLE:-.jig/samples/stop.png}
out=out/test-gpu
fail() { echo "test-gpu: $*" >&2; exit 1; }

if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU 0'; then
    echo "test-gpu: no NVIDIA GPU here (nvidia-smi lists none); run it on a machine with one" >&2
    exit 2
fi
# What must be staged (see the header), checked before anything runs.
[ -x "$jig" ] || fail "no $jig; run \`make release\` or set JIG to a prebuilt jig binary"
command -v python3 >/dev/null || fail "python3 is needed for the checks"
command -v nvidia-cuda-mps-control >/dev/null || fail "no nvidia-cuda-mps-control on PATH: MPS shares need the driver's MPS tools"
case $(nvidia-smi -i 0 --query-gpu=mig.mode.current --format=csv,noheader 2>/dev/null || true) in
    *Enabled*) fail "GPU 0 is in MIG mode; this test serves from MPS shares of a whole GPU" ;;
esac
[ -n "${JIG_ORT_LIB:-}" ] || fail "set JIG_ORT_LIB to ONNX Runtime's CUDA build (see this script's header)"
[ -f "$JIG_ORT_LIB" ] || fail "JIG_ORT_LIB=$JIG_ORT_LIB does not exist"
[ -f "$(dirname "$JIG_ORT_LIB")/libonnxruntime_providers_cuda.so" ] ||
    fail "no libonnxruntime_providers_cuda.so beside $JIG_ORT_LIB: that is not ONNX Runtime's CUDA build"
[ -f "$bundle/jig.toml" ] || fail "no $bundle/jig.toml"
for glue in ocr_detect ocr_recognize tts_frame; do
    [ -f "$bundle/glue/$glue.wasm" ] ||
        fail "no $bundle/glue/$glue.wasm; run \`make examples\` or copy it from a build (see this script's header)"
done
for file in $(grep -o '"models/[^"]*"' "$bundle/jig.toml" | tr -d '"' | sort -u); do
    [ -f "$bundle/$file" ] || fail "no $bundle/$file; run \`make examples\` or copy it from .jig/models"
done
[ -f "$sample" ] || fail "no sample image $sample; run \`make setup\` or set SAMPLE"

rm -rf "$out" && mkdir -p "$out"
cp -r "$bundle" "$out/bundle"
rm -f "$out/bundle/profiles.csv"

echo "== jig profile: every variant on mps:0:50 and mps:0:25"
"$jig" profile "$out/bundle" --segment mps:0:50 --segment mps:0:25 --max-batch 8 --runs 10

echo "== jig up with one CPU core and GPU 0"
start_gateway "$jig" "$out" --cores 1 --gpus 0

echo "== jig deploy"
"$jig" deploy "$out/bundle" --json > "$out/deploy.json" || { cat "$out/deploy.json"; fail "the deploy failed"; }
"$jig" status sign-reader
python3 - "$out/deploy.json" "$out/bundle/jig.toml" <<'PY' || fail "the deployment is not on MPS shares of GPU 0"
import json, re, sys
d = json.load(open(sys.argv[1]))["deployment"]
assert d["source"].startswith("planned"), d["source"]
# The planned model slots: those the manifest's tasks name (the planner's graph). Others get their default.
planned, section = set(), None
for line in open(sys.argv[2]):
    line = line.strip()
    if line.startswith("["):
        section = line
    m = re.match(r'slot\s*=\s*"([^"]+)"', line)
    if m and section == "[[tasks]]":
        planned.add(m.group(1))
assert planned, "no task of the manifest names a slot"
seen = {i["slot"] for i in d["instances"]}
assert planned <= seen, f"planned slots {sorted(planned - seen)} have no instance: {d['instances']}"
for i in d["instances"]:
    if i["slot"] in planned:
        assert i["segment"].startswith("mps:"), f"{i['slot']} runs on {i['segment']}, not an MPS share"
        assert i["places"] and all(p.get("gpu") == 0 for p in i["places"]), i
    else:
        assert i["segment"].startswith("cpu:"), f"{i['slot']} is not planned, yet runs on {i['segment']}"
print(f"every instance of {', '.join(sorted(planned))} runs on an MPS share of GPU 0; "
      f"{', '.join(sorted(seen - planned)) or 'no other slot'} on its default")
PY
"$jig" status
# A share is only a share under an MPS server: a worker that finds no daemon behind its pipe directory runs
# on the whole GPU, silently. The server starts when its first client connects.
nvidia-smi --query-compute-apps=process_name --format=csv,noheader | grep -q nvidia-cuda-mps-server ||
    fail "no MPS server runs on GPU 0: the instances on mps: shares are not MPS clients, their shares not applied"
echo "an MPS server runs on GPU 0: the instances' shares apply"

echo "== jig invoke sign-reader $sample"
"$jig" invoke sign-reader "$sample" --json > "$out/stop.json" || { cat "$out/stop.json"; fail "the invocation failed"; }
python3 - "$out/stop.json" "$sample" "$out" <<'PY' || fail "the sign reader did not read the sign"
import base64, json, os, sys
reply, sample, out = sys.argv[1:]
outputs = json.load(open(reply))["outputs"]
# The recognised text of each line, as the sign reader answers it (spaces aside: the recogniser is not
# reliable about their width), against the sample's labels.
labels = os.path.join(os.path.dirname(sample), "samples.json")
want = json.load(open(labels)).get(os.path.basename(sample)) if os.path.exists(labels) else None
want = ["STOP"] if want is None else want
read = [(o.get("json") or {}).get("text") for o in outputs]
squeeze = lambda t: "".join((t or "").split())
assert [squeeze(t) for t in read] == [squeeze(t) for t in want], f"read {read}, expected {want}"
for n, o in enumerate(outputs):
    audio = base64.b64decode(o.get("base64") or "")
    assert audio[:4] == b"RIFF", f"line {read[n]!r} has no WAV speech"
    open(os.path.join(out, f"{n}-speak.wav"), "wb").write(audio)
print(f"read {read}, spoken in {len(outputs)} WAV file(s) in {out}")
PY
echo "test-gpu: passed"

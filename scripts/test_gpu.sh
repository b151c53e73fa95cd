#!/usr/bin/env bash
# `make test-gpu`: the sign reader, and a model cut in two, served from MPS shares of this machine's GPU 0, end
# to end. It profiles the
# bundle's variants on `mps:0:50`, `mps:0:25` and `mps:0:50x2` (half the GPU served by two processes of 25%
# each) in bound `jig worker` processes, as they serve, deploys the
# profiled bundle on a gateway offered one CPU core and GPU 0, checks that every instance of the planned model
# slots (the slots of the manifest's tasks: `det` and `rec`) runs on an `mps:` share of GPU 0 (the voice is not
# a task of the planner's graph: it gets its default instance on the core), invokes the app with the sample stop
# sign and checks the text recognised (each output's `json.text`) and that the speech is a WAV. Then, in place of
# the sign reader, the recognizer cut in two by PPipe's pre-partitioning (`make setup`), each half a slot of its
# own planned onto a share of its own (`mps:0:50`, `mps:0:25`), beside the whole recognizer on a third
# (`mps:0:25`): the two apps answer the same tensor alike (within 1e-3). With Nsight Compute's `ncu` on PATH it
# also writes gpu-lets' utilisation table of the bundle's slots (`jig profile --counters`) and checks its rows.
# PLANNER=gpulet deploys the sign reader with gpu-lets' strategy instead (`planner = "gpulet"` in the bundle's
# copy; it also profiles `mps:0:75`, as gpu-lets splits the GPU into a share and its complement).
# Exit status: 0 passed, 1 failed, 2 no NVIDIA GPU here.
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
#   - for the split model: the recognizer's partitions ppocr-rec.part0.onnx, ppocr-rec.part1.onnx and
#     ppocr-rec.blocks.json (`make setup` writes them into .jig/models/partitions; SPLIT=dir elsewhere) and the
#     `forward` glue (target/wasm32-wasip2/release/forward.wasm from `make functions`; FORWARD=file elsewhere).
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
[ -z "${SPLIT:-}" ] || SPLIT=$(absolute "$SPLIT")
[ -z "${FORWARD:-}" ] || FORWARD=$(absolute "$FORWARD")
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
split=${SPLIT:-.jig/models/partitions}
forward=${FORWARD:-target/wasm32-wasip2/release/forward.wasm}
for file in ppocr-rec.blocks.json ppocr-rec.part0.onnx ppocr-rec.part1.onnx; do
    [ -f "$split/$file" ] || fail "no $split/$file; run \`make setup\` or set SPLIT (see this script's header)"
done
[ -f "$forward" ] || fail "no $forward; run \`make functions\` or set FORWARD"

rm -rf "$out" && mkdir -p "$out"
cp -r "$bundle" "$out/bundle"
rm -f "$out/bundle/profiles.csv"
shares=(mps:0:50 mps:0:25 mps:0:50x2)
if [ -n "${PLANNER:-}" ]; then
    sed -i "1i planner = \"$PLANNER\"" "$out/bundle/jig.toml"
    [ "$PLANNER" != gpulet ] || shares+=(mps:0:75)
fi

echo "== jig profile: every variant on ${shares[*]}"
"$jig" profile "$out/bundle" $(printf -- '--segment %s ' "${shares[@]}") --max-batch 8 --runs 10
grep -q ',mps:0:50x2,' "$out/bundle/profiles.csv" ||
    fail "the profile table has no row of mps:0:50x2 (a share served by two processes together)"

# gpu-lets' solo utilisations (`jig profile --counters`): each slot's model alone on GPU 0 under Nsight Compute,
# before any MPS daemon of the gateway's runs (ncu does not see MPS clients). Skipped without ncu on PATH.
if command -v ncu >/dev/null; then
    echo "== jig profile --counters: each slot's model under ncu on GPU 0"
    "$jig" profile "$out/bundle" --counters --batch 4 -o "$out/util.csv" || fail "jig profile --counters failed"
    python3 - "$out/util.csv" <<'PY' || fail "the utilisation table is not one row per slot with fractions in (0, 1)"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert sorted(r["model"] for r in rows) == ["det", "rec", "voice"], rows
assert all(0 < float(r["l2"]) < 1 and 0 < float(r["dram"]) < 1 for r in rows), rows
print("utilisation table:", ", ".join(f'{r["model"]} L2 {float(r["l2"]):.1%} DRAM {float(r["dram"]):.1%}' for r in rows))
PY
else
    echo "== jig profile --counters: skipped (no ncu on PATH)"
fi

echo "== jig up with one CPU core and GPU 0"
start_gateway "$jig" "$out" --cores 1 --gpus 0

echo "== jig deploy"
"$jig" deploy "$out/bundle" --json > "$out/deploy.json" || { cat "$out/deploy.json"; fail "the deploy failed"; }
"$jig" status sign-reader
python3 - "$out/deploy.json" "$out/bundle/jig.toml" <<'PY' || fail "the deployment is not on MPS shares of GPU 0"
import json, re, sys
d = json.load(open(sys.argv[1]))["deployment"]
assert d["source"].startswith("planned"), d["source"]
print(d["source"])
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
echo "== the recognizer cut in two, on mps:0:50 and mps:0:25, beside the whole recognizer on mps:0:14"
"$jig" delete sign-reader
python3 - "$split" "$forward" "$bundle/models/ppocr-rec.onnx" "$out" <<'PY'
import json, os, random, shutil, struct, sys
split, forward, whole, out = sys.argv[1:]
blocks = json.load(open(os.path.join(split, "ppocr-rec.blocks.json")))["blocks"]
middle = blocks[5]["inputs"][0]
tensors = '[tensors]\ninput = { name = "x", datatype = "FP32", shape = [-1, 3, 48, 320] }\n' \
          'output = { name = "y", datatype = "FP32", shape = [-1, 40, 6625] }\n'
header = "[slo]\nlatency_ms = 10000\naccuracy = 0.5\n" + tensors
task = '[[tasks]]\nname = "{0}"\nglue = "glue/forward.wasm"\nslot = "{1}"\nconfig = {{ slot = "{1}"{2} }}\n'
variant = '[[variants]]\nslot = "{0}"\nname = "{0}"\nmodel = "models/{0}.onnx"\naccuracy = 1.0\nshapes = {{ {1} = {2} }}\n'
row = "{0},{0},{1},1,10,15,90,test\n"
apps = {
    "split-rec": ([task.format("head", "rec0", ', port = "next"'), task.format("tail", "rec1", ""),
                   '[[edges]]\nfrom = "head.next"\nto = "tail"\n',
                   variant.format("rec0", "x", [3, 48, 320]),
                   variant.format("rec1", json.dumps(middle["name"]), middle["shape"][1:])],
                  {"rec0": os.path.join(split, "ppocr-rec.part0.onnx"), "rec1": os.path.join(split, "ppocr-rec.part1.onnx")},
                  row.format("rec0", "mps:0:50") + row.format("rec1", "mps:0:25")),
    "whole-rec": ([task.format("read", "rec", ""), variant.format("rec", "x", [3, 48, 320])],
                  {"rec": whole}, row.format("rec", "mps:0:14")),
}
for name, (parts, models, rows) in apps.items():
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "glue"), exist_ok=True)
    os.makedirs(os.path.join(d, "models"), exist_ok=True)
    shutil.copy(forward, os.path.join(d, "glue", "forward.wasm"))
    for slot, path in models.items():
        shutil.copy(path, os.path.join(d, "models", slot + ".onnx"))
    open(os.path.join(d, "jig.toml"), "w").write(f'name = "{name}"\n' + header + "\n".join(parts))
    open(os.path.join(d, "profiles.csv"), "w").write("slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n" + rows)
rng = random.Random(5)
open(os.path.join(out, "x.f32"), "wb").write(struct.pack("<%df" % (3 * 48 * 320), *(rng.uniform(-1, 1) for _ in range(3 * 48 * 320))))
PY
for app in split-rec whole-rec; do
    "$jig" deploy "$out/$app" --json > "$out/$app.deploy.json" || { cat "$out/$app.deploy.json"; fail "the deploy of $app failed"; }
done
python3 - "$out/split-rec.deploy.json" "$out/whole-rec.deploy.json" <<'PY' || fail "the split recognizer is not on two MPS shares"
import json, sys
split, whole = (json.load(open(p))["deployment"] for p in sys.argv[1:])
where = {i["slot"]: i["segment"] for i in split["instances"]}
assert where == {"rec0": "mps:50", "rec1": "mps:25"}, f"the halves run on {where}"
assert [i["segment"] for i in whole["instances"]] == ["mps:14"], whole["instances"]
for i in split["instances"] + whole["instances"]:
    assert i["places"] and all(p.get("gpu") == 0 for p in i["places"]), i
print(f"split-rec: {where} of GPU 0; whole-rec on mps:14 of GPU 0")
PY
for app in split-rec whole-rec; do
    "$jig" invoke "$app" "$out/x.f32" --meta '{"datatype": "FP32", "shape": [1, 3, 48, 320]}' --json \
        > "$out/$app.json" || { cat "$out/$app.json"; fail "the invocation of $app failed"; }
done
python3 - "$out/split-rec.json" "$out/whole-rec.json" <<'PY' || fail "the split recognizer's answer is not the whole one's"
import base64, json, struct, sys
def floats(path):
    outputs = json.load(open(path))["outputs"]
    assert len(outputs) == 1, outputs
    raw = base64.b64decode(outputs[0]["base64"])
    return struct.unpack("<%df" % (len(raw) // 4), raw)
got, want = (floats(p) for p in sys.argv[1:])
assert len(got) == len(want) == 40 * 6625, (len(got), len(want))
excess = max(abs(g - w) - 1e-3 * (1 + abs(w)) for g, w in zip(got, want))
assert excess <= 0, f"the halves' answer differs from the whole's by {excess:e} beyond 1e-3"
print(f"split-rec answers as whole-rec: {len(got)} values within 1e-3")
PY
echo "test-gpu: passed"

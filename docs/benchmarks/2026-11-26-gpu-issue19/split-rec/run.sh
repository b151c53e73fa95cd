#!/bin/bash
# The split-recognizer section of scripts/test_gpu.sh alone (extracted from it unchanged but for the sign reader's
# deletion), on a gateway with one core and GPU 0, for a lent GPU machine without the sign reader's files.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
cd "$here/../.."
xz -dc "$here/jig.xz" > /root/g/jig && chmod +x /root/g/jig
. scripts/gateway.sh
jig=/root/g/jig; out=/tmp/split; rm -rf $out; mkdir -p $out
bundle=$here/sr; split=$here/partitions; forward=$here/forward.wasm
fail() { echo "test-gpu: $*" >&2; nvidia-smi; exit 1; }
start_gateway "$jig" "$out" --cores 1 --gpus 0
echo "== the recognizer cut in two, on mps:0:50 and mps:0:25, beside the whole recognizer on mps:0:14"
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

cp $out/*.json $out/gateway.log "$OUT"/ 2>/dev/null || true

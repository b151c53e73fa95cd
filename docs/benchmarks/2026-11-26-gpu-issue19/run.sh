#!/bin/bash
# Issue 19's measurements on a lent GPU machine (2026-11-26): what gpu-lets and PPipe plan over, measured.
# Run from the project root after ../shared/tools/gpu-carry's unpack.sh exports, with in $G (default /root/g)
# jig, jig-synth, forward.wasm and, where the machine's Python lacks them, the onnx, protobuf, ml_dtypes,
# typing_extensions and numpy wheels. Logs and tables into $OUT. LOCAL=1 runs the same on CPU segments (a check).
#  1. gpu-lets' five models (jig-synth: resnet18, efficientnet-b0, resnet50, yolov5s, vgg16) profiled by `jig
#     profile` on MPS shares of 20-100%, batches 1-32;
#  2. PPipe: resnet50 and efficientnet-b0 cut into 10 blocks (scripts/partition_model.py --bundle), the blocks
#     profiled on MPS shares of 100, 50 and 25% (PPipe's virtual GPUs 1, 1/2, 1/4) and on 4 CPU cores;
#  3. gpu-lets' interference inputs (scripts/gpulet_interference.py): co-run slowdowns of every pair on 50/50 MPS
#     shares at batch 8, and each model's solo L2 and DRAM utilisation from ncu.
set -u
G=${G:-/root/g}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PY=/opt/torch/.venv/bin/python3; [ -x "$PY" ] || PY=python3
export PATH="$PATH:/usr/local/cuda/bin:$(dirname "$(ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)" 2>/dev/null)"
if [ -n "${LOCAL:-}" ]; then
  shares=(cpu:1 cpu:2); ppipe_gpu=(cpu:2); cpu=(--cpu); maxb=4
else
  shares=(mps:0:20 mps:0:40 mps:0:50 mps:0:60 mps:0:80 mps:0:100); ppipe_gpu=(mps:0:100 mps:0:50 mps:0:25); cpu=(); maxb=32
fi
{ nvidia-smi; nproc; date; command -v ncu; $PY --version; } > "$OUT/machine.txt" 2>&1
mkdir -p "$G/py"
$PY -c 'import numpy' 2>/dev/null || for w in "$G"/numpy-*.whl; do $PY -m zipfile -e "$w" "$G/py"; done
$PY -c 'import onnx' 2>/dev/null || for w in "$G"/onnx-*.whl "$G"/protobuf-*.whl "$G"/ml_dtypes-*.whl "$G"/typing_extensions-*.whl; do
  $PY -m zipfile -e "$w" "$G/py"; done
export PYTHONPATH="${PYTHONPATH:-}:$G/py"
mkdir -p target/wasm32-wasip2/release && cp "$G/forward.wasm" target/wasm32-wasip2/release/
M=$G/models; mkdir -p "$M"; "$G/jig-synth" "$M" resnet18 efficientnet-b0 resnet50 yolov5s vgg16 2>&1 | tail -5
section() { echo "== $1 $(date +%T)"; }

section "1 gpulet profiles"
for m in resnet18 efficientnet-b0 resnet50 yolov5s vgg16; do
  side=224; [ $m = yolov5s ] && side=640
  b=$G/gpulet/$m; mkdir -p "$b/models" "$b/glue"; ln -f "$M/$m.onnx" "$b/models/"; cp "$G/forward.wasm" "$b/glue/"
  cat > "$b/jig.toml" <<TOML
name = "gpulet-$m"
[slo]
latency_ms = 60000
accuracy = 0.5
[[tasks]]
name = "run"
glue = "glue/forward.wasm"
slot = "$m"
config = { slot = "$m" }
[[variants]]
slot = "$m"
name = "$m"
model = "models/$m.onnx"
accuracy = 1.0
shapes = { x = [3, $side, $side] }
TOML
  timeout 45 "$G/jig" profile "$b" $(printf -- '--segment %s ' "${shares[@]}") --max-batch $maxb --runs 10 \
    -o "$OUT/gpulet-$m.csv" > "$OUT/gpulet-$m.log" 2>&1; echo "$m exit $?"; tail -1 "$OUT/gpulet-$m.log"
done

section "2 ppipe blocks"
for m in resnet50 efficientnet-b0; do
  timeout 40 $PY scripts/partition_model.py "$M/$m.onnx" "$G/parts/$m" --blocks 10 --bundle "$G/ppipe/$m" 2>&1 | tail -2
  cp "$G/ppipe/$m/$m.blocks.json" "$OUT/"
  timeout 90 "$G/jig" profile "$G/ppipe/$m" $(printf -- '--segment %s ' "${ppipe_gpu[@]}") --max-batch 16 --runs 10 \
    -o "$OUT/ppipe-$m-gpu.csv" > "$OUT/ppipe-$m-gpu.log" 2>&1; echo "$m gpu exit $?"; tail -1 "$OUT/ppipe-$m-gpu.log"
done

section "3 pairs"
models=("$M/resnet18.onnx" "$M/efficientnet-b0.onnx" "$M/resnet50.onnx" "$M/yolov5s.onnx" "$M/vgg16.onnx")
timeout 150 $PY scripts/gpulet_interference.py pairs "${models[@]}" --batch 8 --share 50 --seconds 2 ${cpu[@]+"${cpu[@]}"} \
  -o "$OUT/pairs.csv" 2> "$OUT/pairs.log"; echo "pairs exit $?"; cat "$OUT/pairs.log" | tail -25

section "4 utilisation"
timeout 90 $PY scripts/gpulet_interference.py util "${models[@]}" --batch 8 ${cpu[@]+"${cpu[@]}"} -o "$OUT/util.csv" \
  2> "$OUT/util.log"; echo "util exit $?"; tail -8 "$OUT/util.log"

section "5 ppipe blocks on cores"
for m in resnet50 efficientnet-b0; do
  timeout 30 "$G/jig" profile "$G/ppipe/$m" --segment cpu:4 --max-batch 8 --runs 5 -o "$OUT/ppipe-$m-cpu.csv" \
    > "$OUT/ppipe-$m-cpu.log" 2>&1; echo "$m cpu exit $?"; tail -1 "$OUT/ppipe-$m-cpu.log"
done
section done

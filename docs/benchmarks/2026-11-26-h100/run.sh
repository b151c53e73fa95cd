#!/bin/bash
# Session 15 (2026-11-26) on a lent H100, first run: `make test-gpu` with Nsight Compute on PATH (so it runs `jig profile
# --counters` on the sign reader's slots), then `jig profile --counters` on three of gpu-lets' models (jig-synth)
# beside the utilisation table scripts/gpulet_interference.py measured on an H200. Run from the repository root
# after unpack.sh's exports; files in /root/g; results into $OUT.
set -u
G=${G:-/root/g}; OUT=${OUT:-/root/out}; mkdir -p "$OUT"; repo=$PWD
cd "$G"
xz -dc -T0 jig.xz > jig && xz -dc -T0 jig-synth.xz > jig-synth && chmod +x jig jig-synth
xz -dc -T0 piper-joe.onnx.xz > piper-joe.onnx
mkdir -p models && for t in det rec voice-int8; do tar xJf $t.tar.xz -C models; done
tar xJf misc.tar.xz   # sign-reader/ (jig.toml, glue/), samples/, partitions/, forward.wasm
mkdir -p sign-reader/models && mv models/* piper-joe.onnx sign-reader/models/
ls -la sign-reader/models > "$OUT/staged.txt"
export PATH="$PATH:/usr/local/cuda/bin:$(dirname "$(ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)" 2>/dev/null)"
{ nvidia-smi; nproc; date; command -v ncu; ncu --version; } > "$OUT/machine.txt" 2>&1
cd "$repo"
echo "== test-gpu $(date +%T)"
JIG=$G/jig BUNDLE=$G/sign-reader SAMPLE=$G/samples/stop.png SPLIT=$G/partitions FORWARD=$G/forward.wasm \
  timeout 300 scripts/test_gpu.sh > "$OUT/test-gpu.txt" 2>&1; echo "test-gpu exit $?" | tee -a "$OUT/test-gpu.txt"
tail -5 "$OUT/test-gpu.txt"
cp out/test-gpu/util.csv "$OUT/sign-reader-util.csv" 2>/dev/null; cp out/test-gpu/gateway.log "$OUT/" 2>/dev/null
echo "== counters of gpu-lets' models $(date +%T)"
M=$G/synth; mkdir -p "$M"; timeout 60 "$G/jig-synth" "$M" resnet18 efficientnet-b0 resnet50 2>&1 | tail -3
for m in resnet18 efficientnet-b0 resnet50; do
  b=$G/gpulet/$m; mkdir -p "$b/models" "$b/glue"; ln -f "$M/$m.onnx" "$b/models/"; cp "$G/forward.wasm" "$b/glue/"
  printf 'name = "gpulet-%s"\n[slo]\nlatency_ms = 60000\naccuracy = 0.5\n[[tasks]]\nname = "run"\nglue = "glue/forward.wasm"\nslot = "%s"\nconfig = { slot = "%s" }\n[[variants]]\nslot = "%s"\nname = "%s"\nmodel = "models/%s.onnx"\naccuracy = 1.0\nshapes = { x = [3, 224, 224] }\n' $m $m $m $m $m $m > "$b/jig.toml"
  timeout 60 "$G/jig" profile "$b" --counters --batch 8 -o "$OUT/util-$m.csv" > "$OUT/util-$m.log" 2>&1; echo "$m exit $?"; cat "$OUT/util-$m.csv"
done
echo "== done $(date +%T)"
cd "$OUT" && tar czf /root/results.tgz . && rm -rf "$OUT"/* && mv /root/results.tgz "$OUT/"

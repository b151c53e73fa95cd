#!/bin/bash
# Session 15 (2026-11-26), second run: `make test-gpu` with PLANNER=gpulet (the sign reader deployed by gpu-lets).
set -u
G=${G:-/root/g}; OUT=${OUT:-/root/out}; mkdir -p "$OUT"; repo=$PWD
cd "$G"
xz -dc -T0 jig.xz > jig && xz -dc -T0 jig-synth.xz > jig-synth && chmod +x jig jig-synth
xz -dc -T0 piper-joe.onnx.xz > piper-joe.onnx
mkdir -p models && for t in det rec voice-int8; do tar xJf $t.tar.xz -C models; done
tar xJf misc.tar.xz   # sign-reader/ (jig.toml, glue/), samples/, partitions/, forward.wasm
mkdir -p sign-reader/models && mv models/* piper-joe.onnx sign-reader/models/
ls -la sign-reader/models > "$OUT/staged.txt"
{ nvidia-smi; nproc; date; command -v ncu; ncu --version; } > "$OUT/machine.txt" 2>&1
cd "$repo"
echo "== test-gpu $(date +%T)"
PLANNER=gpulet JIG=$G/jig BUNDLE=$G/sign-reader SAMPLE=$G/samples/stop.png SPLIT=$G/partitions FORWARD=$G/forward.wasm \
  timeout 300 scripts/test_gpu.sh > "$OUT/test-gpu.txt" 2>&1; echo "test-gpu exit $?" | tee -a "$OUT/test-gpu.txt"
tail -5 "$OUT/test-gpu.txt"
cp out/test-gpu/deploy.json out/test-gpu/bundle/profiles.csv "$OUT/" 2>/dev/null; cp out/test-gpu/gateway.log "$OUT/" 2>/dev/null
echo "== done $(date +%T)"
cd "$OUT" && tar czf /root/results.tgz . && rm -rf "$OUT"/* && mv /root/results.tgz "$OUT/"

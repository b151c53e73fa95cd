#!/bin/bash
# Session 23 (2026-11-27) on a lent H100, after the glue boundary's one-copy infer (56b3b6e) and the worker's
# bound runs: `make test-gpu` (the sign reader on mps: shares, the recognizer cut in two), then the GPU tensor
# path on mps:0:100 (Add b = 1, 8, 64; PP-OCRv4 det b = 1, 8 and rec b = 1, 16).
# Staged with ../shared/tools/gpu-carry's parts 1-4 (the 4th with det.tar.xz and voice-int8.tar.xz beside it),
# then piper-joe.onnx.xz alone, each copied into /root/g by a call of its own; this script, unpack.sh,
# onnxruntime.tar.xz, jig.xz, bench.xz (the tensor_path bench), rec.tar.xz and misc.tar.xz (the sign reader's
# glue and forward.wasm built at 56b3b6e, stop.png, add.onnx) travel with the last.
set -u
G=/root/g; OUT=${OUT:-/root/out}; repo=$PWD; here=$(dirname "$(readlink -f "$0")")
echo "== unpack $(date +%T)"
eval "$(bash "$here/unpack.sh")"
cd "$G"
xz -dc -T0 "$here/jig.xz" > jig && xz -dc -T0 "$here/bench.xz" > bench && chmod +x jig bench
xz -dc -T0 piper-joe.onnx.xz > piper-joe.onnx
mkdir -p models misc && for t in det voice-int8; do tar xJf $t.tar.xz -C models; done
tar xJf "$here/rec.tar.xz" -C models && tar xJf "$here/misc.tar.xz" -C misc
b=$G/sign-reader; cp -r "$repo/examples/sign-reader" "$b"; mkdir -p "$b/glue" "$b/models"
cp misc/glue/*.wasm "$b/glue/"; cp models/*.onnx models/*.txt models/*.json piper-joe.onnx "$b/models/"
{ nvidia-smi; nproc; uname -r; date; ls -la "$b/models"; } > "$OUT/machine.txt" 2>&1
cd "$repo"
echo "== test-gpu $(date +%T)"
JIG=$G/jig BUNDLE=$b SAMPLE=$G/misc/samples/stop.png SPLIT=$G/models/partitions FORWARD=$G/misc/forward.wasm \
  timeout 200 scripts/test_gpu.sh > "$OUT/test-gpu.txt" 2>&1; echo "test-gpu exit $?" | tee -a "$OUT/test-gpu.txt"
tail -8 "$OUT/test-gpu.txt"
cp out/test-gpu/gateway.log "$OUT/" 2>/dev/null
# The bench reads its models and `jig` at the paths it was built with (/work/main).
[ -e /work/main ] || { mkdir -p /work && ln -s "$repo" /work/main; }
mkdir -p /work/main/target/release /work/main/.jig/models
cp "$G/jig" /work/main/target/release/jig
cp "$G/misc/add.onnx" "$G/models/ppocr-det.onnx" "$G/models/ppocr-rec.onnx" /work/main/.jig/models/
gpu() { # name, timeout, env...
  local name=$1 limit=$2; shift 2
  echo "== gpu $name $(date +%T)"
  env BENCH_SEGMENT=mps:0:100 "$@" timeout "$limit" "$G/bench" --bench > "$OUT/gpu-$name.txt" 2>&1
  echo "exit $?" >> "$OUT/gpu-$name.txt"; cat "$OUT/gpu-$name.txt"
}
gpu add 110 BENCH_MODELS=add BENCH_BATCHES=1,8,64
gpu det 75 BENCH_MODELS=ppocr-det BENCH_BATCHES=1,8
gpu rec 55 BENCH_MODELS=ppocr-rec BENCH_BATCHES=1,16
echo "== done $(date +%T)"

#!/bin/bash
# Session 19 (2026-11-26) on a lent GPU, after the worker's mailbox (Run/Place through shared memory):
# `make test-gpu` (the sign reader on mps: shares), then the tensor path bench on mps:0:100.
# Staged with ../shared/tools/gpu-carry (its parts 1-4, the 4th with det.tar.xz and voice-int8.tar.xz beside it, then
# piper-joe.onnx.xz alone, each copied into /root/g by a call of its own); this script, jig.xz, bench.xz (the
# tensor_path bench binary), rec.tar.xz and misc.tar.xz (glue, forward.wasm, stop.png, add.onnx) travel with
# the last (.gpu/5). The OCR bench ran out of its time after rec b = 1; two more calls on the same warm machine,
# with the exports of unpack.sh: `BENCH_SEGMENT=mps:0:100 BENCH_MODELS=ppocr-rec BENCH_BATCHES=16,32 bench --bench`
# (tensor-path-rec.txt) and, twice, the CPU path on the host's cores: `BENCH_THREADS=2 BENCH_MODELS=add
# BENCH_BATCHES=1,2,4 bench --bench` (tensor-path-cpu.txt).
set -u
G=/root/g; OUT=${OUT:-/root/out}; repo=$PWD; here=$(dirname "$(readlink -f "$0")")
T_TEST=${T_TEST:-240}; T_ADD=${T_ADD:-120}; T_OCR=${T_OCR:-150}
echo "== unpack $(date +%T)"
eval "$(bash "$here/unpack.sh")"
cd "$G"
xz -dc -T0 "$here/jig.xz" > jig && xz -dc -T0 "$here/bench.xz" > bench && chmod +x jig bench
xz -dc -T0 piper-joe.onnx.xz > piper-joe.onnx
mkdir -p models misc && for t in det voice-int8; do tar xJf $t.tar.xz -C models; done
tar xJf "$here/rec.tar.xz" -C models && tar xJf "$here/misc.tar.xz" -C misc
b=$G/sign-reader; cp -r "$repo/examples/sign-reader" "$b"; mkdir -p "$b/glue" "$b/models"
cp misc/glue/*.wasm "$b/glue/"; cp models/*.onnx models/*.txt models/*.json piper-joe.onnx "$b/models/"
{ nvidia-smi; nproc; date; ls -la "$b/models"; } > "$OUT/machine.txt" 2>&1
cd "$repo"
echo "== test-gpu $(date +%T)"
JIG=$G/jig BUNDLE=$b SAMPLE=$G/misc/samples/stop.png SPLIT=$G/models/partitions FORWARD=$G/misc/forward.wasm \
  timeout "$T_TEST" scripts/test_gpu.sh > "$OUT/test-gpu.txt" 2>&1; echo "test-gpu exit $?" | tee -a "$OUT/test-gpu.txt"
tail -6 "$OUT/test-gpu.txt"
cp out/test-gpu/gateway.log "$OUT/" 2>/dev/null
# The bench reads its models and `jig` at the paths it was built with (/work/main).
[ -e /work/main ] || { mkdir -p /work && ln -s "$repo" /work/main; }
mkdir -p /work/main/target/release /work/main/.jig/models
cp "$G/jig" /work/main/target/release/jig
cp "$G/misc/add.onnx" "$G/models/ppocr-det.onnx" "$G/models/ppocr-rec.onnx" /work/main/.jig/models/
echo "== bench add $(date +%T)"
BENCH_SEGMENT=mps:0:100 BENCH_MODELS=add BENCH_BATCHES=1,8,64 timeout "$T_ADD" "$G/bench" --bench \
  > "$OUT/tensor-path-add.txt" 2>&1; echo "exit $?" >> "$OUT/tensor-path-add.txt"; cat "$OUT/tensor-path-add.txt"
echo "== bench ocr $(date +%T)"
BENCH_SEGMENT=mps:0:100 BENCH_MODELS=ppocr-det,ppocr-rec timeout "$T_OCR" "$G/bench" --bench \
  > "$OUT/tensor-path-ocr.txt" 2>&1; echo "exit $?" >> "$OUT/tensor-path-ocr.txt"; cat "$OUT/tensor-path-ocr.txt"
echo "== done $(date +%T)"

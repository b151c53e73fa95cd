#!/bin/bash
# Session 20 (2026-11-27) on a lent H100, after the mailbox's starved receivers sleep (c18d782): the GPU tensor
# path on mps:0:100 (Add b = 1, 8, 64; PP-OCRv4 det b = 1, 8 and rec b = 1, 16), then the CPU path on two of the
# host's cores once. Staged as docs/benchmarks/2026-11-27-h100-cores/run.sh says; ocr.tar.xz (ppocr-det.onnx,
# ppocr-rec.onnx) travels with .gpu/5 too.
set -u
G=/root/g; OUT=${OUT:-/root/out}; repo=$PWD; here=$(dirname "$(readlink -f "$0")")
echo "== unpack $(date +%T)"
eval "$(bash "$here/unpack.sh")"
cd "$G"
xz -dc -T0 "$here/jig.xz" > jig && xz -dc -T0 "$here/bench.xz" > bench && chmod +x jig bench
{ nvidia-smi; nproc; uname -r; date; } > "$OUT/machine.txt" 2>&1
[ -e /work/main ] || { mkdir -p /work && ln -s "$repo" /work/main; }
mkdir -p /work/main/target/release /work/main/.jig/models
cp "$G/jig" /work/main/target/release/jig
cp "$here/add.onnx" /work/main/.jig/models/ && tar xJf "$here/ocr.tar.xz" -C /work/main/.jig/models/
gpu() { # name, timeout, env...
  local name=$1 limit=$2; shift 2
  echo "== gpu $name $(date +%T)"
  env BENCH_SEGMENT=mps:0:100 "$@" timeout "$limit" "$G/bench" --bench > "$OUT/gpu-$name.txt" 2>&1
  echo "exit $?" >> "$OUT/gpu-$name.txt"; cat "$OUT/gpu-$name.txt"
}
gpu add 120 BENCH_MODELS=add BENCH_BATCHES=1,8,64
gpu det 80 BENCH_MODELS=ppocr-det BENCH_BATCHES=1,8
gpu rec 60 BENCH_MODELS=ppocr-rec BENCH_BATCHES=1,16
echo "== cpu two cores $(date +%T)"
BENCH_THREADS=2 BENCH_MODELS=add BENCH_BATCHES=1,2,4 timeout 60 taskset -c 0,1 "$G/bench" --bench \
  > "$OUT/cpu-two-cores.txt" 2>&1; echo "exit $?" >> "$OUT/cpu-two-cores.txt"; tail -4 "$OUT/cpu-two-cores.txt"
echo "== done $(date +%T)"

#!/bin/bash
# Session 20 (2026-11-27) on a lent H100 host: does the worker path's shortfall at Add b = 1 on the 2-vCPU machine
# come from having no core to spare for the waiting parent? The CPU tensor path bench (2 intra-op threads) on
# two of this host's cores and on three, alternating, twice; then one intra-op thread on two cores. Then the
# GPU path at the Add batches the last H100 run after the mailbox left out (2, 4, 16, 32).
# Staged with ../shared/tools/gpu-carry's parts 1-4 (each copied into /root/g by a call of its own); this
# script, jig.xz, bench.xz (the tensor_path bench binary) and add.onnx travel with the last (.gpu/5):
#   bash .gpu/5/run.sh
set -u
G=/root/g; OUT=${OUT:-/root/out}; repo=$PWD; here=$(dirname "$(readlink -f "$0")")
echo "== unpack $(date +%T)"
eval "$(bash "$here/unpack.sh")"
cd "$G"
xz -dc -T0 "$here/jig.xz" > jig && xz -dc -T0 "$here/bench.xz" > bench && chmod +x jig bench
{ nvidia-smi; nproc; lscpu; systemd-detect-virt; uname -r; date
  cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/shmem_enabled; } \
  > "$OUT/machine.txt" 2>&1
# The bench reads its models and `jig` at the paths it was built with (/work/main).
[ -e /work/main ] || { mkdir -p /work && ln -s "$repo" /work/main; }
mkdir -p /work/main/target/release /work/main/.jig/models
cp "$G/jig" /work/main/target/release/jig
cp "$here/add.onnx" /work/main/.jig/models/
cpu() { # name, cores, threads
  echo "== cpu $1 $(date +%T)"
  BENCH_THREADS=$3 BENCH_MODELS=add BENCH_BATCHES=1,2,4 timeout 80 taskset -c "$2" "$G/bench" --bench \
    > "$OUT/cpu-$1.txt" 2>&1; echo "exit $?" >> "$OUT/cpu-$1.txt"; tail -4 "$OUT/cpu-$1.txt"
}
cpu two-cores-1 0,1 2; cpu three-cores-1 0-2 2; cpu two-cores-2 0,1 2; cpu three-cores-2 0-2 2
cpu one-thread-two-cores 0,1 1
echo "== gpu add $(date +%T)"
BENCH_SEGMENT=mps:0:100 BENCH_MODELS=add BENCH_BATCHES=2,4,16,32 timeout 170 "$G/bench" --bench \
  > "$OUT/gpu-add.txt" 2>&1; echo "exit $?" >> "$OUT/gpu-add.txt"; cat "$OUT/gpu-add.txt"
echo "== done $(date +%T)"

#!/bin/bash
# 2026-11-29 (night), one lent H200: issue 51's GPU measurement, then the tensor path at large batches.
# 1. scripts/gpu_capacity.sh: the sign reader with its voice planned, profiled on MPS shares of GPU 0 in sevenths
#    (one process, and two or four together), deployed for 150 req/s on `jig up --cores 12 --gpus 0`, its planned
#    and served capacity (scripts/capacity.sh), then the bare pipeline (det, rec, voice on ONNX Runtime's CUDA
#    provider, 8 processes of 4 request threads) in the same run.
# 2. The tensor path of the PP-OCRv4 detector at b = 16, 32, 64 on mps:0:100 (cli/benches/tensor_path.rs), with
#    what time is left.
# Staged in six transfers, each `mkdir -p /root/g && cp .gpu/N/* /root/g/`: ../shared/tools/gpu-carry's four parts
# of the CUDA provider, and in the room beside them the pieces (blob.0-5) of a tar of the rest: the fp32 voice,
# the other models, the rest of the onnxruntime-gpu wheel with gpu-carry's unpack.sh, the release `jig`, the
# tensor_path bench, the glue and the samples. Then, from the repository root:
#   BUDGET_S=… bash docs/benchmarks/2026-11-29-h200/run.sh     (results into $OUT)
set -u
here=$(dirname "$(readlink -f "$0")")
BUDGET_S=${BUDGET_S:-500}
. "$here/prelude.sh"
xz -dc -T0 "$G/bench.xz" >"$G/bench" && chmod +x "$G/bench" || exit 1
mkdir -p .jig/models examples/sign-reader/models examples/sign-reader/glue target/release
tar xJf "$G/models.tar.xz" -C .jig/models && xz -dc -T0 "$G/piper-joe.onnx.xz" >.jig/models/piper-joe.onnx &&
    tar xJf "$G/samples.tar.xz" -C .jig && tar xJf "$G/glue.tar.xz" -C examples/sign-reader/glue || exit 1
for f in ppocr-det-480.onnx ppocr-rec.onnx ppocr-rec.charset.txt piper-joe.onnx piper-joe.phonemes.json cmudict.txt; do
    ln -f ".jig/models/$f" examples/sign-reader/models/
done
cp "$G/jig" target/release/jig
# The bench reads its models, and finds `jig worker`, where it was built.
[ -e /work/main ] || { mkdir -p /work && ln -s "$repo" /work/main; }
{ nvidia-smi; nproc; uname -r; date; } >"$OUT/machine.txt" 2>&1
head -12 "$OUT/machine.txt"

say gpu_capacity
pack() { tar czf "$OUT/gpu-capacity.tgz" --exclude=bundle --exclude=state -C out gpu-capacity capacity 2>/dev/null; }
(while sleep 15; do pack; done) &
saver=$!
JIG=$G/jig CORES=12 DEMAND=150 DURATION=10 PROCESSES=8 WORKERS=4 timeout $(($(left) - 75)) \
    scripts/gpu_capacity.sh 2>&1 | tee "$OUT/gpu-capacity.txt"
echo "gpu_capacity.sh exit ${PIPESTATUS[0]}"
kill $saver; pack
cat out/capacity/sign-reader/status.txt 2>/dev/null | head -40
grep -h "plan\|WARN\|ERROR" out/capacity/sign-reader/gateway.log 2>/dev/null | cut -c1-400 | tail -25

if [ "$(left)" -gt 50 ]; then
    say tensor path, det
    BENCH_SEGMENT=mps:0:100 BENCH_MODELS=ppocr-det BENCH_BATCHES=16,32,64 timeout $(($(left) - 8)) "$G/bench" --bench \
        >"$OUT/tensor-path-det.txt" 2>&1
    echo "exit $?" >>"$OUT/tensor-path-det.txt"
    grep -v "^\s*$" "$OUT/tensor-path-det.txt" | tail -12
fi
say done

#!/bin/bash
# 2026-11-29 (night), the same lent H200's last minutes, after run.sh found the voice at 120-140 ms a line on every
# share: Piper's voice on ONNX Runtime's CUDA provider under each cuDNN algorithm search and on CPU threads
# (voice.py), then `jig profile` of the sign reader's three slots on mps:0:14 and mps:0:57x4 with jig's CUDA
# sessions now on cuDNN's heuristics (scripts/gpu_capacity.sh with PROFILE_ONLY=1).
# Staged as run.sh says, without the bench and the samples. From the repository root:
#   BUDGET_S=… bash docs/benchmarks/2026-11-29-h200/run2.sh     (results into $OUT)
set -u
here=$(dirname "$(readlink -f "$0")")
BUDGET_S=${BUDGET_S:-120}
. "$here/prelude.sh"
mkdir -p .jig/models examples/sign-reader/models examples/sign-reader/glue
tar xJf "$G/models.tar.xz" -C .jig/models && xz -dc -T0 "$G/piper-joe.onnx.xz" >.jig/models/piper-joe.onnx &&
    tar xJf "$G/glue.tar.xz" -C examples/sign-reader/glue || exit 1
for f in ppocr-det-480.onnx ppocr-rec.onnx ppocr-rec.charset.txt piper-joe.onnx piper-joe.phonemes.json cmudict.txt; do
    ln -f ".jig/models/$f" examples/sign-reader/models/
done
say voice.py
timeout $(($(left) - 50)) python3 "$here/voice.py" .jig/models/piper-joe.onnx 20 2>/dev/null | tee "$OUT/voice.txt"
say jig profile
JIG=$G/jig PROFILE_ONLY=1 SHARES="mps:0:14 mps:0:57x4" timeout $(($(left) - 5)) scripts/gpu_capacity.sh 2>&1 |
    grep -v "onnxruntime:" | tee "$OUT/profile.txt"
cp out/gpu-capacity/profiles.csv "$OUT/" 2>/dev/null
say done

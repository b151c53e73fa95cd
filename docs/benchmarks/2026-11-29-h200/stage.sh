#!/bin/bash
# How run.sh's files were staged for a lent GPU machine (and run2.sh's are), from the repository root after `make
# release examples` and `cargo bench -p jig --bench tensor_path --no-run` (its binary:
# BENCH=target/release/deps/tensor_path-…):
# ../shared/tools/gpu-carry writes the CUDA provider's four 48 MiB parts into .gpu/1-4; this packs the rest
# (the fp32 voice and its two parts, the other models, the rest of the onnxruntime-gpu wheel with its unpack.sh,
# jig, the bench, the glue and the samples) into one tar and splits it into the room beside them, then into
# .gpu/5 and .gpu/6, so that each transfer (the checkout's ~8.8 MiB and one folder) stays under 64 MiB. Send each
# folder with `mkdir -p /root/g && cp .gpu/N/* /root/g/`, the last with run.sh. Staging again needs gpu-carry
# again first (this moves its .gpu/5).
set -euo pipefail
[ -d .gpu/1 ] && [ -f .gpu/5/unpack.sh ] || { echo "run ../shared/tools/gpu-carry first" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mv .gpu/5/onnxruntime.tar.xz .gpu/5/unpack.sh "$work/"
# The voice and its two parts (scripts/models.py cuts it where its decoder starts): one stream with a window that
# holds the whole model, so the front's weights, the whole's again, cost nothing (58.13 MB against 58.07 alone).
(cd .jig/models && tar cf - piper-joe.onnx piper-joe.front.onnx piper-joe.back.onnx |
    xz -T2 --lzma2=preset=6,dict=192MiB >"$work/voice.tar.xz")
xz -T2 -6 -c target/release/jig >"$work/jig.xz"
xz -T2 -6 -c "${BENCH:?set BENCH to the tensor_path bench binary}" >"$work/bench.xz"
# The detector's and recognizer's other variants are what run2.sh's `figure` step (scripts/validate_graph.sh) plans
# between; det-640 has det-480's weights, which xz's window finds beside them.
(cd .jig/models && tar cf - ppocr-det-480.onnx ppocr-det-640.onnx ppocr-det.onnx ppocr-det-int8.onnx \
    ppocr-rec.onnx ppocr-rec-int8.onnx ppocr-rec.charset.txt piper-joe.phonemes.json cmudict.txt add.onnx |
    xz -T2 -6 >"$work/models.tar.xz")
# validate_graph.sh's photo, made here: the GPU machine's Python may lack Pillow.
mkdir -p "$work/samples/figure"
PYTHONPATH=.jig/python python3 scripts/graph_photo.py .jig/samples/eval/eval-03.png "$work/samples/figure/photo.png"
cp .jig/samples/*.png .jig/samples/samples.json "$work/samples/"
(cd "$work" && tar cJf samples.tar.xz samples && rm -r samples)
(cd examples/sign-reader/glue && tar cJf "$work/glue.tar.xz" ./*.wasm)
xz -T2 -6 -c target/wasm32-wasip2/release/echo.wasm >"$work/echo.wasm.xz"
xz -T2 -6 -c target/wasm32-wasip2/release/jig_probe.wasm >"$work/jig_probe.wasm.xz"  # the tensor path's glue table
(cd "$work" && tar cf blob.tar voice.tar.xz models.tar.xz onnxruntime.tar.xz unpack.sh jig.xz bench.xz \
    glue.tar.xz samples.tar.xz echo.wasm.xz jig_probe.wasm.xz)
rm -rf .gpu/5 .gpu/6 .gpu/[1-4]/blob.* && mkdir -p .gpu/5 .gpu/6  # a blob staged before is stale
python3 - "$work/blob.tar" <<'PY'
import os, sys
blob, room, offset = open(sys.argv[1], "rb").read(), int(54.5 * 2**20), 0
for n, folder in enumerate([".gpu/1", ".gpu/2", ".gpu/3", ".gpu/4", ".gpu/5", ".gpu/6"]):
    used = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    size = len(blob) - offset if folder == ".gpu/6" else room - used
    if size > 0:
        open(f"{folder}/blob.{n}", "wb").write(blob[offset:offset + size])
    offset += max(size, 0)
PY
du -sh .gpu/*

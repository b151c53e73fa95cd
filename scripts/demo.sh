#!/usr/bin/env bash
# The demo: run the `crop` glue function, sandboxed WebAssembly, on a photo through the jig runtime.
set -euo pipefail
cd "$(dirname "$0")/.."

jig=target/release/jig
out=out/demo
rm -rf "$out" && mkdir -p "$out"

echo "== crop: cut three boxes out of tests/data/f3-board.jpg, one of them outside the image"
"$jig" run target/wasm32-wasip2/release/crop.wasm tests/data/f3-board.jpg \
    --meta '{"boxes": [{"x0": 40, "y0": 30, "x1": 240, "y1": 180},
                       {"x0": 250, "y0": 120, "x1": 420, "y1": 260},
                       {"x0": 9000, "y0": 9000, "x1": 9100, "y1": 9100}]}' \
    --config encoding=png --emit-dir "$out"
echo
echo "== select: keep the best two detections of cat or dog, routed by label"
echo '{"detections": [{"label": "cat", "score": 0.91}, {"label": "car", "score": 0.97},
                      {"label": "dog", "score": 0.55}, {"label": "cat", "score": 0.31}]}' |
    "$jig" run target/wasm32-wasip2/release/select.wasm --config labels=cat,dog --config top-k=2 --config route=label
echo
echo "Emitted payloads are in $out/."

#!/usr/bin/env bash
# The demo: start the embedded gateway (`jig up`), deploy the sign reader (real PP-OCRv4 and Piper weights,
# planned from its profile table) and the photo-crops app, invoke them over HTTP with the sample signs and a
# photo, and show the text read, where the speech went, and the gateway's metrics.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gateway.sh

jig=target/debug/jig
out=out/demo
rm -rf "$out" && mkdir -p "$out"

echo "== jig up: the gateway, with its state in $out/state"
start_gateway "$jig" "$out"
echo "listening on $JIG_GATEWAY"

echo
echo "== jig deploy examples/sign-reader"
"$jig" deploy examples/sign-reader

for sign in .jig/samples/*.png; do
    name=$(basename "$sign" .png)
    echo
    echo "== jig invoke sign-reader $sign"
    "$jig" invoke sign-reader "$sign" --output-dir "$out/$name"
done

echo
echo "== jig deploy examples/photo-crops"
"$jig" deploy examples/photo-crops

echo
echo "== jig invoke photo-crops: three boxes of tests/data/f3-board.jpg, one of them outside the image"
"$jig" invoke photo-crops tests/data/f3-board.jpg --output-dir "$out" \
    --meta '{"boxes": [{"x0": 40, "y0": 30, "x1": 240, "y1": 180},
                       {"x0": 250, "y0": 120, "x1": 420, "y1": 260},
                       {"x0": 9000, "y0": 9000, "x1": 9100, "y1": 9100}]}'

echo
echo "== metrics (from $JIG_GATEWAY/metrics)"
python3 -c "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1] + '/metrics').read().decode())" "$JIG_GATEWAY" |
    grep -E '^jig_(requests_total|task_invocations_total|instance_batches_total)'

echo
echo "Each sign's speech is in $out/<sign>/<n>-speak.wav, the crops in $out/."
echo "The gateway keeps the apps in $out/state: restart it with"
echo "  $jig up --state-dir $out/state"
echo "and invoke again without redeploying. To call it \`jig\` as the README does:"
echo "  export PATH=\"$PWD/target/debug:\$PATH\""
echo "(the build \`make test\` uses too; \`make release\` builds the optimised one into target/release)"

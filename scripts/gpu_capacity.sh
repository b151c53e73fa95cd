#!/usr/bin/env bash
# Issue 51's GPU measurement, for a lent GPU machine: the sign reader with its voice planned, on MPS shares of GPU
# 0 and CPU cores, its planned and served capacity in one run, then the bare pipeline on the same machine.
#
# 1. A copy of the sign reader whose `speak` task names the voice's slot (`slot = "voice"`), so that the planner
#    plans the voice like det and rec, with one variant a slot (VARIANTS). With SPLIT=1 the voice is cut in two
#    (scripts/models.py): `speak` runs its front (`slot = "voice"`, `stage = "front"`) and a `vocode` task its
#    decoder (`slot = "vocoder"`), so that the plan may put the front's thousands of small nodes on cores and the
#    decoder's few large ones on a share.
# 2. `jig profile` of the copy on SHARES: MPS shares of GPU 0 served by one process and by several
#    (`mps:0:57x4`: four processes of 14% each, measured at once); then the voice on VOICE_SHARES (`mps:0:57x8`:
#    a voice bound by its launches, as it was at 120-140 ms a line on every share, serves more by more processes)
#    and on CPU_SEGMENTS (`cpu:1 cpu:2`), so that the plan can put it on cores where that serves more (with
#    SPLIT=1, the front and the decoder each).
# 3. scripts/capacity.sh with `jig up --cores CORES --gpus 0`: the plan's capacity and the highest Poisson rate
#    with >= 99% in SLO, and their ratio.
# 4. scripts/bare_pipeline.py --find-capacity with det, rec and the voice on ONNX Runtime's CUDA provider and
#    BARE_VOICE_CPU voice sessions a process on CPU threads beside them (PROCESSES processes of WORKERS request
#    threads), and jig's served capacity over the bare one; with SPLIT=1 the same cut voice, its front on two CPU
#    sessions a process and its decoder on CUDA.
#
# Usage: JIG=path/to/jig [CORES=8] [GPUS=0] [SHARES="..."] [VOICE_SHARES="mps:0:57x8"] [CPU_SEGMENTS="cpu:1 cpu:2"]
#        [DEMAND=req/s] [DURATION=15] [PROCESSES=8] [WORKERS=4] [BARE_PROVIDER=cuda] [BARE_VOICE_CPU=1]
#        [SPLIT=1] scripts/gpu_capacity.sh
# DEMAND declares the load the copy is deployed for (`[demand] rps`); without it, the manifest's. PROFILE_ONLY=1
# stops after step 2.
# Stage what scripts/test_gpu.sh's header lists (the jig binary, the bundle's glue and models, JIG_ORT_LIB and the
# CUDA libraries, the samples), and for step 4 Python with numpy, Pillow and onnxruntime-gpu on PYTHONPATH.
# On an H200 with DURATION=10 it took about 1.5 minutes to profile, 2 to search jig's capacity, 3 the bare one.
# Everything goes to out/gpu-capacity/; copy it to docs/benchmarks/DATE-…/ with the figures in BENCHMARKS.md.
set -euo pipefail
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
[ -n "${JIG:-}" ] || { echo "gpu_capacity.sh: set JIG to the jig binary" >&2; exit 2; }
JIG=$(absolute "$JIG")
cd "$(dirname "$0")/.."
cores=${CORES:-8}
gpus=${GPUS:-0}  # `none` tries the script out on CPU shares (SHARES="cpu:1 cpu:2", BARE_PROVIDER=cpu)
[ "$gpus" = none ] || nvidia-smi -L 2>/dev/null | grep -q '^GPU 0' ||
    { echo "gpu_capacity.sh: no NVIDIA GPU here" >&2; exit 2; }
# Shares in sevenths of the GPU: the planner charges a share its part of a GPU's seven slices, rounded up, so
# that 14%, 28%, 42% and 57% cost 1 to 4 slices and fill a GPU together, where 25% costs 2 and four do not fit.
shares=${SHARES:-mps:0:14 mps:0:28 mps:0:42 mps:0:57 mps:0:28x2 mps:0:42x3 mps:0:57x4}
cpu_segments=${CPU_SEGMENTS-cpu:1 cpu:2}
if [ "$gpus" = none ]; then voice_shares=${VOICE_SHARES-}; else voice_shares=${VOICE_SHARES-mps:0:57x8}; fi
variants=${VARIANTS:-ppocr-v4-det-480 ppocr-v4-rec piper-joe-medium}
duration=${DURATION:-15}
out=out/gpu-capacity
rm -rf "$out" && mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/machine.txt" 2>&1 || true
nproc >>"$out/machine.txt"

echo "== the sign reader with its voice planned: $out/bundle (variants: $variants)"
cp -r examples/sign-reader "$out/bundle"
rm -f "$out/bundle/profiles.csv"
split=${SPLIT:-}
[ -z "$split" ] || cp .jig/models/piper-joe.front.onnx .jig/models/piper-joe.back.onnx "$out/bundle/models/"
DEMAND=${DEMAND:-} SPLIT=$split python3 - "$out/bundle/jig.toml" $variants <<'PY'
import os, re, sys
path, keep = sys.argv[1], set(sys.argv[2:])
head, *blocks = open(path).read().split("\n[[variants]]")
# The `speak` task calls the voice: naming its slot makes it a task of the planner's graph, and its glue's own
# CPU (phonemes) is then all the task costs outside the instances.
head = re.sub(r'(name = "speak"\n)', r'\1slot = "voice"\n', head, count=1)
head = re.sub(r'cpu_ms = 80 .*', 'cpu_ms = 2       # phonemes; the voice is planned', head, count=1)
kept = [b for b in blocks if re.search(r'name = "([^"]+)"', b).group(1) in keep]
assert {re.search(r'slot = "([^"]+)"', b).group(1) for b in kept} == {"det", "rec", "voice"}, "one variant a slot"
if os.environ.get("SPLIT"):  # the voice's front in `speak`, each sentence's `z` to its decoder in `vocode`
    head = head.replace('slot = "voice"\n', 'slot = "voice"\nconfig = { stage = "front" }\n', 1)
    head = head.rstrip("\n") + (
        '\n\n[[tasks]]\nname = "vocode"\nglue = "glue/tts_frame.wasm"\nslot = "vocoder"\n'
        'config = { stage = "vocoder" }\ncpu_ms = 1       # a WAV\n\n'
        '[[edges]]\nfrom = "speak.voiced"\nto = "vocode"\n')
    voice = next(i for i, b in enumerate(kept) if 'slot = "voice"' in b)
    name = re.search(r'name = "([^"]+)"', kept[voice]).group(1)
    kept[voice] = kept[voice].replace(f'name = "{name}"', f'name = "{name}-front"')
    kept[voice] = kept[voice].replace('models/piper-joe.onnx"', 'models/piper-joe.front.onnx"')
    kept[voice] = kept[voice].rstrip("\n") + "\nfactors = { vocode = 1.0 }\n"
    # A line of 40 phoneme ids at Piper's default rates comes out of the front as 99 frames.
    kept.append(f'\nslot = "vocoder"\nname = "{name}-decoder"\nmodel = "models/piper-joe.back.onnx"\n'
                'accuracy = 1.0\nshapes = { z = [192, 99] }\n')
if os.environ.get("DEMAND"):  # the load it is deployed for, as a user who knows it declares it
    head = head.rstrip("\n") + f"\n\n[demand]\nrps = {float(os.environ['DEMAND'])}\n"
open(path, "w").write(head + "".join("\n[[variants]]" + b for b in kept))
PY

echo "== jig profile on $shares"
# shellcheck disable=SC2046,SC2086 # one --segment a share
"$JIG" profile "$out/bundle" $(printf -- '--segment %s ' $shares) --max-batch 16 --runs 10 2>&1 |
    tee "$out/profile.txt" | grep -E "^profile: [a-z]+/[^ ]+ on [^ ]+: batch" || true
# shellcheck disable=SC2086 # the two lists joined
voice_segments=$(echo $voice_shares $cpu_segments)
if [ -n "$voice_segments" ]; then
    for slot in voice ${split:+vocoder}; do
        echo "== the $slot on $voice_segments"
        # shellcheck disable=SC2046,SC2086 # one --segment each
        "$JIG" profile "$out/bundle" --slot $slot $(printf -- '--segment %s ' $voice_segments) --max-batch 1 \
            --runs 10 2>&1 | tee -a "$out/profile.txt" | grep -E "^profile: [a-z]+/[^ ]+ on [^ ]+: batch" || true
    done
fi
cp "$out/bundle/profiles.csv" "$out/profiles.csv"
[ -z "${PROFILE_ONLY:-}" ] || exit 0

echo "== planned against served: jig up --cores $cores --gpus $gpus"
DURATION=$duration STEPS=2 UP_ARGS="--cores $cores --gpus $gpus" BUNDLE="$out/bundle" \
    scripts/capacity.sh "$JIG" sign-reader 2>&1 | tee "$out/capacity.txt"
cp -r out/capacity "$out/capacity"
served=$(awk -F, 'NR == 2 { print $3 }' "$out/capacity/summary.csv")

provider=${BARE_PROVIDER:-cuda}
echo "== the bare pipeline, its models on $provider"
models=$out/bundle/models
if [ -n "$split" ]; then
    voice=(--voice "$models/piper-joe.front.onnx" --voice-provider cpu --sessions-voice 2
        --voice-decoder "$models/piper-joe.back.onnx" --voice-decoder-provider "$provider")
else
    voice=(--voice "$models/piper-joe.onnx" --voice-provider "$provider"
        --voice-cpu-sessions "$([ "$provider" = cuda ] && echo "${BARE_VOICE_CPU:-1}" || echo 0)")
fi
python3 scripts/bare_pipeline.py --det "$models/ppocr-det-480.onnx" --rec "$models/ppocr-rec.onnx" \
    --charset "$models/ppocr-rec.charset.txt" \
    --phonemes "$models/piper-joe.phonemes.json" --lexicon "$models/cmudict.txt" \
    --det-provider "$provider" --rec-provider "$provider" "${voice[@]}" \
    --processes "${PROCESSES:-8}" --workers "${WORKERS:-4}" \
    --rate "${served:-50}" --duration "$duration" --find-capacity 2>&1 | tee "$out/bare.txt"
# Where every rate the bare pipeline tried passed, its capacity is at least the last (and the ratio at most).
read -r bare bounded < <(python3 -c 'import json, sys
found = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(found["capacity_rps"], found.get("bounded", True))' "$out/bare.txt")
least=; most=
[ "$bounded" = True ] || { least="at least "; most="at most "; }
if [ -n "$served" ]; then
    echo "served by jig $served req/s, by the bare pipeline $least$bare req/s:" \
        "$most$(python3 -c "print(f'{$served / $bare:.2f}')")×"
else
    echo "jig's deployment states no capacity (its plan failed: $out/capacity/sign-reader/gateway.log says why);" \
        "the bare pipeline serves $least$bare req/s"
fi | tee "$out/summary.txt"

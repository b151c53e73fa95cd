#!/bin/bash
# The check of the change run.sh led to, then issue 51's measurement again: run on 2026-11-30 (its results and what
# they showed: ../2026-11-30-h200/README.md), and ready for the next lent GPU as it is. STEPS picks what a call runs (default all four; the device's ten minutes a call fit them only just, so
# two calls back to back, `STEPS="asleep voice"` then `STEPS="capacity tensor"`, are safer: the second finds what
# the first unpacked):
# - asleep: one point of the recognizer on mps:0:14 through a jig worker, whose host thread now sleeps while it
#   waits for the device (new, not run on a GPU before); should it fail, the later steps (and calls) set
#   JIG_CUDA_SPIN=1 (~20 s).
# - voice: voice.py, Piper's voice on ONNX Runtime's CUDA provider under each cuDNN algorithm search (run.sh found
#   it at 120-140 ms a line under the default exhaustive one), its host thread spinning and asleep, and on CPU
#   threads (~1 minute); then the voice cut in two (scripts/models.py), its front on a CPU thread and its decoder
#   on CUDA, each line's host CPU split between them (new; ~15 s more).
# - capacity: scripts/gpu_capacity.sh as run.sh ran it (on CORES=14 since 2026-11-30), now with jig's CUDA
#   sessions on cuDNN's heuristics, the voice's rows on eight processes of 7% (mps:0:57x8) and on cpu:1 and cpu:2
#   beside the shares (the plan may put voices on cores), shares planned as measured together (the planner's
#   as_packed), a GPU row's host CPU profiled (`cpu_ms`) and planned on the cores, and the bare pipeline's voice
#   on CUDA and one CPU session a process (~7 minutes). With SPLIT=1 (new, 2026-12-01) the voice cut in two, both
#   in jig's plan (its front a task, its decoder another) and in the bare pipeline: best after the voice step has
#   shown the decoder on CUDA cheap in host CPU.
# - tensor: the tensor path on mps:0:100 of Add at b = 16 and 32 (not yet measured there), then of the detector at
#   b = 64 (its stacked one-row requests ran at 0.12-0.15x bare on 2026-11-30), as far as time is left.
# - figure (not in the default; a call of its own, best on a later lease): issue 54's figure end to end,
#   scripts/validate_graph.sh on MPS shares (mps:0:50, mps:0:25, mps:0:50x2) with the trace's bins and the
#   controller's windows FIGURE_BIN_S long (8): planned by JigsawServe, then by gpu-lets as time is left (~3.5
#   minutes each after a profile of ~1.5), each bin measured beside `jig simulate` of the same profiles.
#   FIGURE_SEGMENTS="cpu:1" FIGURE_UP_ARGS= FIGURE_PLANNERS=jigsaw try it out on a machine without a GPU.
# Staged as stage.sh says (six transfers). Then, from the repository root:
#   BUDGET_S=590 [STEPS="..."] bash docs/benchmarks/2026-11-29-h200/run2.sh     (results into $OUT)
set -u
here=$(dirname "$(readlink -f "$0")")
BUDGET_S=${BUDGET_S:-590}
steps=" ${STEPS:-asleep voice capacity tensor} "
. "$here/prelude.sh"
[ -x "$G/bench" ] || { xz -dc -T0 "$G/bench.xz" >"$G/bench" && chmod +x "$G/bench"; } || exit 1
mkdir -p .jig/models examples/sign-reader/models examples/sign-reader/glue target/release
tar xJf "$G/models.tar.xz" -C .jig/models && tar xJf "$G/voice.tar.xz" -C .jig/models &&
    tar xJf "$G/samples.tar.xz" -C .jig && tar xJf "$G/glue.tar.xz" -C examples/sign-reader/glue || exit 1
for f in ppocr-det-480.onnx ppocr-rec.onnx ppocr-rec.charset.txt piper-joe.onnx piper-joe.phonemes.json cmudict.txt; do
    ln -f ".jig/models/$f" examples/sign-reader/models/
done
cp "$G/jig" target/release/jig
mkdir -p target/wasm32-wasip2/release  # the tensor path's Add table starts in this guest
[ ! -e "$G/jig_probe.wasm.xz" ] || xz -dc "$G/jig_probe.wasm.xz" >target/wasm32-wasip2/release/jig_probe.wasm
[ -e /work/main ] || { mkdir -p /work && ln -s "$repo" /work/main; }
{ nvidia-smi; nproc; uname -r; date; } >"$OUT/machine.txt" 2>&1
[ ! -e "$G/spin" ] || { echo "== JIG_CUDA_SPIN=1, as the asleep step found"; export JIG_CUDA_SPIN=1; }

if [[ $steps == *" asleep "* ]]; then
    say "a worker asleep on mps:0:14"
    mkdir -p out/asleep/models && ln -f .jig/models/ppocr-rec.onnx out/asleep/models/
    printf 'name = "asleep"\n[[variants]]\nslot = "rec"\nname = "rec"\nmodel = "models/ppocr-rec.onnx"\n%s\n' \
        'shapes = { x = [3, 48, 320] }' >out/asleep/jig.toml
    if ! timeout 60 "$G/jig" profile out/asleep --segment mps:0:14 --max-batch 1 --runs 5 2>&1 |
        grep -v "onnxruntime:" | tee "$OUT/asleep.txt" | grep -q "rec/rec on mps:0:14: batch   1"; then
        tail -5 "$OUT/asleep.txt"
        echo "== a worker asleep failed: JIG_CUDA_SPIN=1 from here"
        touch "$G/spin"
        export JIG_CUDA_SPIN=1
    fi
fi

if [[ $steps == *" voice "* ]]; then
    say voice.py
    timeout 120 python3 "$here/voice.py" .jig/models/piper-joe.onnx 12 2>/dev/null | tee "$OUT/voice.txt"
fi

if [[ $steps == *" capacity "* ]]; then
    say gpu_capacity
    pack() { tar czf "$OUT/gpu-capacity.tgz" --exclude=bundle --exclude=state -C out gpu-capacity capacity 2>/dev/null; }
    (while sleep 15; do pack; done) &
    saver=$!
    # 14 of the 16 cores for instances and glue (2026-11-30 ran with 12): the plan now puts voices on cores, and
    # the bare pipeline it is held against has all 16; the gateway and the load client keep two.
    JIG=$G/jig CORES=${CORES:-14} DEMAND=150 DURATION=10 PROCESSES=8 WORKERS=4 timeout $(($(left) - 40)) \
        scripts/gpu_capacity.sh 2>&1 | grep -v "onnxruntime:" | tee "$OUT/gpu-capacity.txt"
    echo "gpu_capacity.sh exit ${PIPESTATUS[0]}"
    kill $saver; pack
    head -40 out/capacity/sign-reader/status.txt 2>/dev/null
    grep -h "plan\|WARN\|ERROR" out/capacity/sign-reader/gateway.log 2>/dev/null | cut -c1-400 | tail -25
fi

if [[ $steps == *" tensor "* ]]; then
    # Issue 51 item 6 on the GPU: the batches not measured there yet, then det's b = 64 again.
    for what in add:16,32 ppocr-det:64; do
        [ "$(left)" -gt 45 ] || break
        say "tensor path, $what"
        file=$OUT/tensor-path-${what%%:*}.txt
        BENCH_SEGMENT=mps:0:100 BENCH_MODELS=${what%%:*} BENCH_BATCHES=${what#*:} timeout $(($(left) - 8)) \
            "$G/bench" --bench >"$file" 2>&1
        echo "exit $?" >>"$file"
        grep -v "^\s*$" "$file" | tail -12
    done
fi
if [[ $steps == *" figure "* ]]; then
    xz -dc "$G/echo.wasm.xz" >target/wasm32-wasip2/release/echo.wasm || exit 1
    for f in ppocr-det.onnx ppocr-det-640.onnx ppocr-det-int8.onnx ppocr-rec-int8.onnx; do
        ln -f ".jig/models/$f" examples/sign-reader/models/
    done
    for planner in ${FIGURE_PLANNERS:-jigsaw gpulet}; do
        [ "$(left)" -gt 200 ] || { say "no time left for the figure by $planner"; break; }
        say "figure, planned by $planner"
        JIG=$G/jig PHOTO=.jig/samples/figure/photo.png PLANNER=$planner BIN_S=${FIGURE_BIN_S:-8} \
            SEGMENTS=${FIGURE_SEGMENTS:-mps:0:50 mps:0:25 mps:0:50x2} UP_ARGS=${FIGURE_UP_ARGS---cores 8 --gpus 0} \
            timeout $(($(left) - 15)) scripts/validate_graph.sh 2>&1 | grep -v "onnxruntime:" |
            tee "$OUT/figure-$planner.txt"
        mkdir -p "$OUT/figure-$planner"
        cp -r out/validate-graph/trace.csv out/validate-graph/gateway.toml out/validate-graph/run-1 \
            "$OUT/figure-$planner/" 2>/dev/null
        rm -rf "$OUT/figure-$planner/run-1/state"  # the gateway's, with the bundle (31 MiB)
    done
    cp .jig/validate-graph*.csv "$OUT/" 2>/dev/null  # the profile both planners' runs used
fi
say done

"""Piper's voice (piper-joe.onnx, fp32) on ONNX Runtime's CUDA provider under each cuDNN algorithm search, and on
CPU threads: ms a line and CPU ms a line (p50 over RUNS lines of 40 phoneme ids at Piper's default rates, each
line new ids, after 3 warm-up lines), one JSON line a configuration.
Usage: python3 voice.py piper-joe.onnx [RUNS]"""
import json, sys, time

import numpy as np
import onnxruntime as ort

path, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
rng = np.random.default_rng(1)


def line():
    return {"input": rng.integers(1, 60, size=(1, 40), dtype=np.int64), "input_lengths": np.array([40], np.int64),
            "scales": np.array([0.667, 1.0, 0.8], np.float32)}


def measure(name, providers, threads=1):
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(path, options, providers=providers)
    for _ in range(3):
        session.run(None, line())
    wall, cpu, samples = [], [], []
    for _ in range(runs):
        feeds = line()
        w, c = time.perf_counter(), time.process_time()
        audio = session.run(None, feeds)[0]
        wall.append((time.perf_counter() - w) * 1e3)
        cpu.append((time.process_time() - c) * 1e3)
        samples.append(audio.size)
    print(json.dumps({"config": name, "ms_p50": round(float(np.median(wall)), 1),
                      "ms_p95": round(float(np.percentile(wall, 95)), 1), "cpu_ms_p50": round(float(np.median(cpu)), 1),
                      "samples_p50": int(np.median(samples)), "distinct_lengths": len(set(samples))}), flush=True)


for search in ("HEURISTIC", "DEFAULT", "EXHAUSTIVE"):
    measure(f"cuda {search}", [("CUDAExecutionProvider", {"cudnn_conv_algo_search": search})])
for threads in (1, 4):
    measure(f"cpu, {threads} threads", ["CPUExecutionProvider"], threads)

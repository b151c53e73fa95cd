"""Piper's voice (piper-joe.onnx, fp32) on ONNX Runtime's CUDA provider under each cuDNN algorithm search, with the
host thread spinning (CUDA's default) and asleep (`CU_CTX_SCHED_BLOCKING_SYNC`, as jig's workers wait), and on CPU
threads: ms a line and CPU ms a line (p50 over RUNS lines of 40 phoneme ids at Piper's default rates, each line new
ids, after 3 warm-up lines), one JSON line a configuration, each in a process of its own (the flag is the process's).
A last configuration runs ONNX Runtime's profiler on CUDA and says where a line's time goes: the nodes each provider
ran and their time, and the operator types the CPU ran longest (2026-11-30 on an H200: a line took as much host CPU
as wall time on CUDA, asleep or not; the graph has 2,755 nodes).
Usage: python3 voice.py piper-joe.onnx [RUNS]"""
import ctypes, json, multiprocessing, sys, time


def asleep_while_waiting():
    """What jig_model_host::device::sleep_while_waiting does, before the session makes the context."""
    cuda = ctypes.CDLL("libcuda.so.1")
    device = ctypes.c_int()
    for status in (cuda.cuInit(0), cuda.cuDeviceGet(ctypes.byref(device), 0),
                   cuda.cuDevicePrimaryCtxSetFlags_v2(device, 4)):
        if status != 0:
            raise SystemExit(f"the CUDA driver refused: status {status}")


def where_the_time_goes(profile_path, runs):
    """Per provider: nodes run a line and their ms a line; the CPU's five longest operator types (ms a line)."""
    import collections
    import os
    events = json.load(open(profile_path))
    os.remove(profile_path)
    nodes = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")]
    count, ms, cpu_ops = collections.Counter(), collections.Counter(), collections.Counter()
    for e in nodes:
        provider = e.get("args", {}).get("provider", "?")
        count[provider] += 1
        ms[provider] += e["dur"] / 1e3
        if provider == "CPUExecutionProvider":
            cpu_ops[e.get("args", {}).get("op_name", "?")] += e["dur"] / 1e3
    lines = runs + 3
    return {"nodes_a_line": {p: round(n / lines) for p, n in count.items()},
            "node_ms_a_line": {p: round(t / lines, 1) for p, t in ms.items()},
            "cpu_ops_ms_a_line": {op: round(t / lines, 2) for op, t in cpu_ops.most_common(5)}}


def measure(path, runs, name, providers, threads=1, asleep=False, profiled=False):
    import numpy as np
    import onnxruntime as ort
    if asleep:
        asleep_while_waiting()
    rng = np.random.default_rng(1)

    def line():
        return {"input": rng.integers(1, 60, size=(1, 40), dtype=np.int64), "input_lengths": np.array([40], np.int64),
                "scales": np.array([0.667, 1.0, 0.8], np.float32)}

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.enable_profiling = profiled
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
    result = {"config": name, "ms_p50": round(float(np.median(wall)), 1),
              "ms_p95": round(float(np.percentile(wall, 95)), 1), "cpu_ms_p50": round(float(np.median(cpu)), 1),
              "samples_p50": int(np.median(samples)), "distinct_lengths": len(set(samples))}
    if profiled:
        result.update(where_the_time_goes(session.end_profiling(), runs))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    path, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
    cuda = lambda search: [("CUDAExecutionProvider", {"cudnn_conv_algo_search": search})]
    configs = [(f"cuda {search}", cuda(search), 1, False) for search in ("HEURISTIC", "DEFAULT", "EXHAUSTIVE")]
    configs.append(("cuda HEURISTIC, asleep while waiting", cuda("HEURISTIC"), 1, True))
    configs += [(f"cpu, {threads} threads", ["CPUExecutionProvider"], threads, False) for threads in (1, 4)]
    configs.append(("cuda HEURISTIC, asleep, profiled", cuda("HEURISTIC"), 1, True))
    spawn = multiprocessing.get_context("spawn")
    for name, providers, threads, asleep in configs:
        profiled = name.endswith("profiled")
        child = spawn.Process(target=measure, args=(path, runs, name, providers, threads, asleep, profiled))
        child.start()
        child.join()

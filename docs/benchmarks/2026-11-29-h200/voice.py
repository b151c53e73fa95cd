"""Piper's voice (piper-joe.onnx, fp32) on ONNX Runtime's CUDA provider under each cuDNN algorithm search, with the
host thread spinning (CUDA's default) and asleep (`CU_CTX_SCHED_BLOCKING_SYNC`, as jig's workers wait), and on CPU
threads: ms a line and CPU ms a line (p50 over RUNS lines of 40 phoneme ids at Piper's default rates, each line new
ids, after 3 warm-up lines), one JSON line a configuration, each in a process of its own (the flag is the process's).
A last configuration runs ONNX Runtime's profiler on CUDA and says where a line's time goes: the nodes each provider
ran and their time, and the operator types the CPU ran longest (2026-11-30 on an H200: a line took as much host CPU
as wall time on CUDA, asleep or not; the graph has 2,755 nodes).
Where the voice's two parts lie beside the model (STEM.front.onnx, STEM.back.onnx: scripts/models.py cuts it where
its decoder starts, and stage.sh carries them), two more: the front on one CPU thread and the decoder on CUDA
(asleep while waiting), in turn each line, and the same with the decoder profiled; each says the front's and the
back's ms and CPU ms a line besides the line's. CPU=1 runs the CPU's configurations alone, the cut voice's
both parts on one CPU thread too: on a machine without a GPU.
Usage: [CPU=1] python3 voice.py piper-joe.onnx [RUNS]"""
import ctypes, json, multiprocessing, os, sys, time


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


def lines():
    """Lines of 40 phoneme ids at Piper's default rates, each new."""
    import numpy as np
    rng = np.random.default_rng(1)
    while True:
        yield {"input": rng.integers(1, 60, size=(1, 40), dtype=np.int64), "input_lengths": np.array([40], np.int64),
               "scales": np.array([0.667, 1.0, 0.8], np.float32)}


def session(path, providers, threads=1, profiled=False):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.enable_profiling = profiled
    return ort.InferenceSession(path, options, providers=providers)


def measure(path, runs, name, providers, threads=1, asleep=False, profiled=False):
    import numpy as np
    if asleep:
        asleep_while_waiting()
    line = lines().__next__
    voice = session(path, providers, threads, profiled)
    for _ in range(3):
        voice.run(None, line())
    wall, cpu, samples = [], [], []
    for _ in range(runs):
        feeds = line()
        w, c = time.perf_counter(), time.process_time()
        audio = voice.run(None, feeds)[0]
        wall.append((time.perf_counter() - w) * 1e3)
        cpu.append((time.process_time() - c) * 1e3)
        samples.append(audio.size)
    result = {"config": name, "ms_p50": round(float(np.median(wall)), 1),
              "ms_p95": round(float(np.percentile(wall, 95)), 1), "cpu_ms_p50": round(float(np.median(cpu)), 1),
              "samples_p50": int(np.median(samples)), "distinct_lengths": len(set(samples))}
    if profiled:
        result.update(where_the_time_goes(voice.end_profiling(), runs))
    print(json.dumps(result), flush=True)


def measure_split(front_path, back_path, runs, name, providers, profiled=False, asleep=True):
    """Each line through the front on one CPU thread, then its decoder on `providers` (with `asleep`, the host
    asleep while it waits for CUDA); p50s of the line's, the front's and the back's wall and CPU ms."""
    import numpy as np
    if asleep:
        asleep_while_waiting()
    line = lines().__next__
    front = session(front_path, ["CPUExecutionProvider"])
    back = session(back_path, providers, profiled=profiled)
    cut = back.get_inputs()[0].name
    for _ in range(3):
        back.run(None, {cut: front.run(None, line())[0]})
    times = {k: [] for k in ("ms", "cpu_ms", "front_ms", "front_cpu_ms", "back_ms", "back_cpu_ms")}
    for _ in range(runs):
        feeds = line()
        w, c = time.perf_counter(), time.process_time()
        z = front.run(None, feeds)[0]
        w2, c2 = time.perf_counter(), time.process_time()
        back.run(None, {cut: z})
        w3, c3 = time.perf_counter(), time.process_time()
        for key, value in (("ms", w3 - w), ("cpu_ms", c3 - c), ("front_ms", w2 - w), ("front_cpu_ms", c2 - c),
                           ("back_ms", w3 - w2), ("back_cpu_ms", c3 - c2)):
            times[key].append(value * 1e3)
    result = {"config": name, **{f"{k}_p50": round(float(np.median(v)), 1) for k, v in times.items()},
              "ms_p95": round(float(np.percentile(times["ms"], 95)), 1)}
    if profiled:
        result.update(where_the_time_goes(back.end_profiling(), runs))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    path, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
    cpu_only = os.environ.get("CPU") == "1"
    cuda = lambda search: [("CUDAExecutionProvider", {"cudnn_conv_algo_search": search})]
    configs = [] if cpu_only else [(f"cuda {search}", cuda(search), 1, False)
                                   for search in ("HEURISTIC", "DEFAULT", "EXHAUSTIVE")]
    configs += [] if cpu_only else [("cuda HEURISTIC, asleep while waiting", cuda("HEURISTIC"), 1, True)]
    configs += [(f"cpu, {threads} threads", ["CPUExecutionProvider"], threads, False) for threads in (1, 4)]
    configs += [] if cpu_only else [("cuda HEURISTIC, asleep, profiled", cuda("HEURISTIC"), 1, True)]
    spawn = multiprocessing.get_context("spawn")
    children = [(measure, (path, runs, name, providers, threads, asleep, name.endswith("profiled")))
                for name, providers, threads, asleep in configs]
    front, back = path.removesuffix(".onnx") + ".front.onnx", path.removesuffix(".onnx") + ".back.onnx"
    if os.path.exists(front) and os.path.exists(back) and cpu_only:
        name = "split: front and back on cpu, 1 thread"
        children.append((measure_split, (front, back, runs, name, ["CPUExecutionProvider"], False, False)))
    elif os.path.exists(front) and os.path.exists(back):
        for profiled in (False, True):
            name = "split: front on cpu, 1 thread; back on cuda HEURISTIC, asleep"
            name += ", profiled" if profiled else ""
            children.append((measure_split, (front, back, runs, name, cuda("HEURISTIC"), profiled)))
    for target, args in children:
        child = spawn.Process(target=target, args=args)
        child.start()
        child.join()

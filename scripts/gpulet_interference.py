#!/usr/bin/env python3
"""gpu-lets' interference inputs (gpu-lets §4.4), measured with ONNX Runtime's CUDA build on an NVIDIA GPU:

  util MODEL.onnx... --batch B -o utilisation.csv
      each model's solo L2 and DRAM-bandwidth utilisation on the whole GPU at batch B, from Nsight Compute
      (`ncu`, on PATH): the mean over one inference's kernels of `lts__t_sectors` and `dram__throughput`
      (percent of peak sustained, elapsed), weighted by each kernel's duration. Columns: model,batch,l2,dram
      (fractions). ncu does not profile MPS clients, so no MPS daemon may run on the GPU meanwhile.

  pairs MODEL.onnx... --batch B --share P --seconds S -o pairs.csv
      each model alone on an MPS share of P%, then every pair of the models (a model with itself included) on two
      such shares at once, each process running batch B back to back for S seconds; a model's latency is the
      median of its runs inside the window both ran in. Columns: model,neighbour,share,batch,solo_ms,corun_ms,
      slowdown (co-run over solo, less 1: what `jig_planner::gpulet::Sample` reads). Starts its own MPS control
      daemon (`nvidia-cuda-mps-control`, in a private pipe directory) and quits it at the end.

A model's name is its file's stem. Inputs and outputs are bound on the GPU (IO binding), as a served model's
would be after its first copy, so the figures are the kernels' and not the host's. The environment must load
ONNX Runtime's CUDA provider (`PYTHONPATH` to the onnxruntime-gpu package, CUDA 13 and cuDNN 9 on
`LD_LIBRARY_PATH`). `--cpu` runs the same on ONNX Runtime's CPU provider without ncu or MPS (the script's own
check on a machine without a GPU; its figures mean nothing there).
"""

import argparse
import csv
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

METRICS = {
    "gpu__time_duration.sum": "ns",
    "lts__t_sectors.avg.pct_of_peak_sustained_elapsed": "l2",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram",
}


def stem(path):
    return os.path.splitext(os.path.basename(path))[0]


def worker(args):
    """One process: a session with its input bound on the device; `--ncu-range` runs one inference inside a
    profiler range, otherwise it says `ready`, waits for a line, runs for --seconds and prints its runs."""
    import numpy as np
    import onnxruntime as ort

    if args.cpu:
        providers, device = ["CPUExecutionProvider"], "cpu"
    else:
        providers, device = [("CUDAExecutionProvider", {"cudnn_conv_algo_search": "HEURISTIC"})], "cuda"
    session = ort.InferenceSession(args.models[0], providers=providers)
    if not args.cpu and "CUDAExecutionProvider" not in session.get_providers():
        sys.exit(f"{args.models[0]}: ONNX Runtime did not load its CUDA provider (providers: {session.get_providers()})")
    binding = session.io_binding()
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) else args.batch for d in i.shape]
        x = np.random.default_rng(0).random(shape, dtype=np.float32)
        binding.bind_ortvalue_input(i.name, ort.OrtValue.ortvalue_from_numpy(x, device, 0))
    for o in session.get_outputs():
        binding.bind_output(o.name, device)
    for _ in range(5):
        session.run_with_iobinding(binding)
    if args.ncu_range and args.cpu:
        session.run_with_iobinding(binding)
        return
    if args.ncu_range:
        import ctypes

        cudart = ctypes.CDLL("libcudart.so.13")
        cudart.cudaProfilerStart()
        session.run_with_iobinding(binding)
        cudart.cudaProfilerStop()
        return
    print("ready", flush=True)
    sys.stdin.readline()
    runs, end = [], time.monotonic() + args.seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        session.run_with_iobinding(binding)
        runs.append((t0, time.monotonic()))
    print(json.dumps(runs), flush=True)


def worker_cmd(args, model, extra=()):
    return [sys.executable, os.path.abspath(__file__), "worker", model, "--batch", str(args.batch),
            "--seconds", str(args.seconds), *(["--cpu"] if args.cpu else []), *extra]


def spawn(args, model, env):
    return subprocess.Popen(worker_cmd(args, model), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def together(args, models, env):
    """Run `models` (one process each) at once; each one's median latency (ms) in the window all ran in."""
    procs = [spawn(args, m, env) for m in models]
    for m, p in zip(models, procs):
        if p.stdout.readline().strip() != "ready":
            sys.exit(f"{stem(m)}: its worker did not start (exit {p.wait()}); its error is above")
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    runs = []
    for m, p in zip(models, procs):
        out, _ = p.communicate(timeout=args.seconds + 120)
        if p.returncode != 0:
            sys.exit(f"{stem(m)}: its worker failed (exit {p.returncode})")
        runs.append(json.loads(out))
    start = max(r[0][0] for r in runs)
    end = min(r[-1][1] for r in runs)
    medians = []
    for m, r in zip(models, runs):
        inside = [(t1 - t0) * 1e3 for t0, t1 in r if t0 >= start and t1 <= end]
        if len(inside) < 3:
            print(f"{stem(m)}: only {len(inside)} runs inside the window all ran in; give more --seconds",
                  file=sys.stderr)
        medians.append(statistics.median(inside) if len(inside) >= 3 else None)
    return medians


def pairs(args):
    env = dict(os.environ)
    daemon = None
    if not args.cpu:
        if shutil.which("nvidia-cuda-mps-control") is None:
            sys.exit("pairs: no nvidia-cuda-mps-control on PATH (the driver's MPS tools)")
        daemon = tempfile.mkdtemp(prefix="jig-gpulet-mps-")
        env.update(CUDA_MPS_PIPE_DIRECTORY=f"{daemon}/pipe", CUDA_MPS_LOG_DIRECTORY=f"{daemon}/log",
                   CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=str(args.share))
        os.makedirs(f"{daemon}/pipe")
        os.makedirs(f"{daemon}/log")
        subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env, check=True)
    out = Table(args.output, ["model", "neighbour", "segment", "batch", "solo_ms", "corun_ms", "slowdown"])
    try:
        solo = {m: together(args, [m], env)[0] for m in args.models}
        for a, b in itertools.combinations_with_replacement(args.models, 2):
            la, lb = together(args, [a, b], env)
            for m, n, ms in ((a, b, la), (b, a, lb))[: 1 if a == b else 2]:
                if ms is None or solo[m] is None:
                    continue
                out.row([stem(m), stem(n), f"mps:0:{args.share}", args.batch, round(solo[m], 4), round(ms, 4),
                         round(ms / solo[m] - 1, 4)])
                print(f"pairs: {stem(m)} beside {stem(n)} on {args.share}%: {solo[m]:.2f} -> {ms:.2f} ms "
                      f"({ms / solo[m] - 1:+.1%})", file=sys.stderr, flush=True)
    finally:
        if daemon:
            subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True, env=env)
        out.close()


def util(args):
    out = Table(args.output, ["model", "batch", "l2", "dram"])
    for m in args.models:
        if args.cpu:
            subprocess.run(worker_cmd(args, m, ["--ncu-range"]), check=True)
            out.row([stem(m), args.batch, 0.0, 0.0])
            continue
        ncu = ["ncu", "--profile-from-start", "off", "--csv", "--print-units", "base",
               "--metrics", ",".join(METRICS), *worker_cmd(args, m, ["--ncu-range"])]
        run = subprocess.run(ncu, capture_output=True, text=True)
        kernels = {}
        for row in csv.DictReader(line for line in run.stdout.splitlines() if line.startswith('"')):
            name = METRICS.get(row.get("Metric Name", ""))
            if name:
                kernels.setdefault(row["ID"], {})[name] = float(row["Metric Value"].replace(",", ""))
        kernels = [k for k in kernels.values() if len(k) == 3]
        if run.returncode != 0 or not kernels:
            sys.exit(f"util: ncu measured no kernel of {stem(m)} (exit {run.returncode}):\n{run.stdout[-2000:]}\n"
                     f"{run.stderr[-2000:]}")
        total = sum(k["ns"] for k in kernels)
        l2 = sum(k["ns"] * k["l2"] for k in kernels) / total / 100
        dram = sum(k["ns"] * k["dram"] for k in kernels) / total / 100
        out.row([stem(m), args.batch, round(l2, 4), round(dram, 4)])
        print(f"util: {stem(m)} at batch {args.batch}: {len(kernels)} kernels, {total / 1e6:.2f} ms, "
              f"L2 {l2:.1%}, DRAM {dram:.1%}", file=sys.stderr, flush=True)
    out.close()


class Table:
    """A CSV written row by row, so that a run cut short keeps what it measured."""

    def __init__(self, path, header):
        self.path, self.rows = path, 0
        self.file = open(path, "w", newline="")
        self.csv = csv.writer(self.file)
        self.csv.writerow(header)

    def row(self, values):
        self.csv.writerow(values)
        self.file.flush()
        self.rows += 1

    def close(self):
        self.file.close()
        print(f"gpulet_interference: wrote {self.rows} rows to {self.path}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description="gpu-lets' interference inputs: solo utilisations and co-run slowdowns.")
    ap.add_argument("mode", choices=["util", "pairs", "worker"])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--share", type=int, default=50, help="MPS share of each process in `pairs`, percent")
    ap.add_argument("--seconds", type=float, default=3.0, help="how long each process of a pair runs")
    ap.add_argument("-o", "--output", default="-")
    ap.add_argument("--cpu", action="store_true", help="ONNX Runtime's CPU provider, no ncu or MPS (a check)")
    ap.add_argument("--ncu-range", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    for m in args.models:
        if not os.path.isfile(m):
            sys.exit(f"{m}: no such model file")
    if args.output == "-":
        args.output = "/dev/stdout"
    {"util": util, "pairs": pairs, "worker": worker}[args.mode](args)


if __name__ == "__main__":
    main()

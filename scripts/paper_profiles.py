#!/usr/bin/env python3
"""A jig profile table for one of the paper's applications from measured latencies of its models.

Usage: scripts/paper_profiles.py MEASUREMENTS.csv traffic > profiles.csv

MEASUREMENTS.csv has `model,segment,batch,p50_ms,p95_ms,shape` rows (docs/evaluation/measured/: bare ONNX
Runtime on MPS shares of an H100, one process alone). Each row becomes the row of the app's task that runs
that model family, on the same segment (`mps:PERCENT`, which the planner prices at its share of 7 slices), with
the throughput of one process, batch / p50. Only traffic analysis has every one of its models measured (YOLOv5,
EfficientNet, VGG); social media and the AR assistant also need GIT and a TTS model, and are refused.
"""
import csv
import sys

# Which task of each app runs which model family (simulator/src/apps.rs).
TASKS = {
    "traffic": {"yolov5": "detect", "efficientnet": "car", "vgg": "person"},
    "social": {"resnet": "classify", "git": "caption"},
    "ar": {"yolov5": "detect", "git": "caption", "glow-tts": "tts", "vits": "tts"},
}
DEVICE = "H100 80GB MPS share; bare ONNX Runtime measured 2026-11-22"


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in TASKS:
        sys.exit(f"usage: {sys.argv[0]} MEASUREMENTS.csv {{{','.join(TASKS)}}}")
    path, app = sys.argv[1], sys.argv[2]
    families = TASKS[app]
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    measured = {r["model"] for r in rows}
    missing = sorted(fam for fam in families if not any(m.startswith(fam) for m in measured))
    if missing:
        sys.exit(f"{path}: no measurements of {', '.join(missing)}, which app `{app}` runs; only traffic is complete")
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["slot", "variant", "segment", "batch", "p50_ms", "p95_ms", "throughput_rps", "device"])
    for r in rows:
        task = next((t for fam, t in families.items() if r["model"].startswith(fam)), None)
        if task is None:
            continue
        batch, p50 = int(r["batch"]), float(r["p50_ms"])
        segment = r["segment"].replace("mps:", "mps:0:")
        out.writerow([task, r["model"], segment, batch, r["p50_ms"], r["p95_ms"], f"{batch / p50 * 1000:.3f}", DEVICE])


if __name__ == "__main__":
    main()

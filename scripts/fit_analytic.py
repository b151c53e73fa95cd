#!/usr/bin/env python3
"""Fit the analytic profile model's constants (simulator/src/analytic.rs) to measured batch latencies.

Usage: scripts/fit_analytic.py [docs/evaluation/measured/h100-mps-paper-models.csv]

One process alone on c compute slices (an MPS share of c/7 of an H100) takes, in the model,

    latency(b, c) = t_fixed + t_item·b + w·(b/c + u)

which is linear in A = t_fixed + w·u, t_item and w: a least-squares fit of the relative error over every
(share, batch) measured gives those three (t_item ≥ 0). One process alone cannot tell the CPU's fixed time
from the GPU's floor: the floor keeps the family's assumed u unless that exceeds A (then u = A / w and
t_fixed = 0). Prints each model's constants and the fit's median and largest relative error.
"""
import csv
import sys
from collections import defaultdict

SLICES = {"mps:100": 7, "mps:57": 4, "mps:42": 3, "mps:28": 2, "mps:14": 1}
FLOOR = {"yolov5": 1.0}  # the family's assumed u (simulator/src/apps.rs); 2.0 otherwise


def solve(a, y):
    """Least squares of a·x ≈ y by the normal equations (a few columns, well conditioned)."""
    n = len(a[0])
    m = [[sum(r[i] * r[j] for r in a) for j in range(n)] + [sum(r[i] * v for r, v in zip(a, y))] for i in range(n)]
    for i in range(n):
        p = max(range(i, n), key=lambda k: abs(m[k][i]))
        m[i], m[p] = m[p], m[i]
        for k in range(n):
            if k != i:
                f = m[k][i] / m[i][i]
                m[k] = [x - f * z for x, z in zip(m[k], m[i])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(points):
    """(A, t_item, w) minimising the relative error over (batch, slices, p50) points."""
    rows = [[1.0 / y, b / y, b / c / y] for b, c, y in points]
    a, t_item, w = solve(rows, [1.0] * len(points))
    if t_item < 0:  # time per item is not negative: fit without it
        a, w = solve([[r[0], r[2]] for r in rows], [1.0] * len(points))
        t_item = 0.0
    return a, t_item, w


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "docs/evaluation/measured/h100-mps-paper-models.csv"
    points = defaultdict(list)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            points[r["model"]].append((int(r["batch"]), SLICES[r["segment"]], float(r["p50_ms"])))
    print(f"{'model':<16} {'t_fixed':>8} {'t_item':>8} {'w':>8} {'u':>6}   median / max error")
    for model, pts in points.items():
        a, t_item, w = fit(pts)
        u = min(next((u for fam, u in FLOOR.items() if model.startswith(fam)), 2.0), a / w)
        t_fixed = max(a - w * u, 0.0)
        errors = sorted(abs((t_fixed + t_item * b + w * (b / c + u)) / y - 1) for b, c, y in pts)
        print(
            f"{model:<16} {t_fixed:>8.3f} {t_item:>8.4f} {w:>8.4f} {u:>6.3f}   "
            f"{100 * errors[len(errors) // 2]:.0f}% / {100 * errors[-1]:.0f}%"
        )


if __name__ == "__main__":
    main()

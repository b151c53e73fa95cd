#!/usr/bin/env python3
"""How well the analytic profile model's share scaling fits a measured profile table of MPS shares.

The model (simulator/src/analytic.rs) gives one process on `c` slices a batch latency of
A + w·b/c: a part the share does not change (CPU time, launches, the small batch's floor) and GPU work that
the share divides. For each variant and batch measured on mps:G:100 and mps:G:10 this fits A and w to those
two shares and predicts the ones between; it prints the predictions beside the measured p50s, and the largest
relative error. Usage: scripts/check_share_scaling.py TABLE.csv (a `jig profile` table with mps: rows).
"""
import csv
import sys
from collections import defaultdict

rows = defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    if r["segment"].startswith("mps:"):
        share = int(r["segment"].rsplit(":", 1)[1])
        rows[(r["slot"], r["variant"], int(r["batch"]))][share] = float(r["p50_ms"])

worst = 0.0
print(f"{'variant':<16} {'batch':>5}  {'share':>5} {'measured':>9} {'model':>9} {'error':>7}")
for (slot, variant, batch), by_share in sorted(rows.items()):
    if 100 not in by_share or 10 not in by_share or len(by_share) < 3:
        continue
    # latency(s) = A + W / s, s the share in percent (c = 7·s/100 slices): two shares fix A and W.
    W = (by_share[10] - by_share[100]) / (1 / 10 - 1 / 100)
    A = by_share[100] - W / 100
    for share in sorted(by_share, reverse=True):
        if share in (100, 10):
            continue
        model = A + W / share
        error = model / by_share[share] - 1
        worst = max(worst, abs(error))
        print(f"{variant:<16} {batch:>5}  {share:>4}% {by_share[share]:>9.2f} {model:>9.2f} {error:>+7.1%}")
print(f"largest error: {worst:.1%}")

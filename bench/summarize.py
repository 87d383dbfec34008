#!/usr/bin/env python3
"""Summaries of an `nconv bench --csv` table (standard library only).

    summarize.py TABLE.csv [--exclude PATTERN[,PATTERN...]] [--markdown]

Per direction and layout: the geometric mean of the ratios (oneDNN time /
nconv time, > 1: nconv is faster), the ratio of total times, and the lowest
ratio; rows whose name contains an excluded pattern are left out of the
summary (but listed in the markdown table). With --markdown the table itself
is printed first.
"""
import csv
import math
import sys


def main():
    path = sys.argv[1]
    exclude = []
    if "--exclude" in sys.argv:
        exclude = [p for p in sys.argv[sys.argv.index("--exclude") + 1].split(",") if p]
    rows = list(csv.DictReader(open(path)))
    if "--markdown" in sys.argv:
        cols = ["name", "dir", "layout", "threads", "algo", "ms", "gflops", "peak_pct", "onednn_ms", "onednn_impl",
                "ratio"]
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for r in rows:
            print("| " + " | ".join(r[c] for c in cols) + " |")
        print()
    groups = {}
    for r in rows:
        if any(p in r["name"] for p in exclude) or not r["ratio"]:
            continue
        groups.setdefault((r["dir"], r["layout"]), []).append(r)
    print("| dir | layout | problems | geomean ratio | total-time ratio | lowest ratio (problem) |")
    print("|---|---|---|---|---|---|")
    for d in ("fwd", "bwd_d", "bwd_w"):
        for layout in ("nchw", "nhwc"):
            g = groups.get((d, layout))
            if not g:
                continue
            ratios = [float(r["ratio"]) for r in g]
            geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            total = sum(float(r["onednn_ms"]) for r in g) / sum(float(r["ms"]) for r in g)
            low = min(g, key=lambda r: float(r["ratio"]))
            print("| %s | %s | %d | %.3f | %.3f | %s (%s) |" % (d, layout, len(g), geo, total, low["ratio"], low["name"]))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Summaries of an `nconv bench --csv` table (standard library only).

    summarize.py TABLE.csv [--exclude PATTERN[,PATTERN...]] [--markdown]

Per direction and layout: the geometric mean of the ratios (oneDNN time /
nconv time, > 1: nconv is faster), the ratio of total times, and the lowest
ratio, for the one-shot calls (ms) and for the plans (plan_ms); then the
plans against the one-shot calls: per direction and layout the largest
plan_ms / ms, and for forward rows whose weights are 1 MiB or more each
plan_ms / ms. Rows whose name contains an excluded pattern are left out of
the summaries (but listed in the markdown table). With --markdown the table
itself is printed first.
"""
import csv
import math
import re
import sys


def weight_bytes(desc):
    """Bytes of f32 weights of a benchdnn descriptor (g, ic, oc, kd/kh/kw; missing kernel dims 1)."""
    f = dict((k, int(v)) for k, v in re.findall(r"(g|ic|oc|kd|kh|kw)(\d+)", desc))
    g = f.get("g", 1)
    return 4 * f["oc"] * (f["ic"] // g) * f.get("kd", 1) * f.get("kh", 1) * f.get("kw", f.get("kh", 1))


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main():
    path = sys.argv[1]
    exclude = []
    if "--exclude" in sys.argv:
        exclude = [p for p in sys.argv[sys.argv.index("--exclude") + 1].split(",") if p]
    rows = list(csv.DictReader(open(path)))
    if "--markdown" in sys.argv:
        cols = ["name", "dir", "layout", "threads", "algo", "ms", "gflops", "peak_pct", "onednn_ms", "onednn_impl",
                "ratio", "plan_ms", "plan_ratio"]
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
    print("| dir | layout | problems | geomean ratio | total-time ratio | lowest ratio (problem) "
          "| planned: geomean | total-time | lowest (problem) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in ("fwd", "bwd_d", "bwd_w"):
        for layout in ("nchw", "nhwc"):
            g = groups.get((d, layout))
            if not g:
                continue
            line = "| %s | %s | %d" % (d, layout, len(g))
            for ms, ratio in (("ms", "ratio"), ("plan_ms", "plan_ratio")):
                geo = geomean([float(r[ratio]) for r in g])
                total = sum(float(r["onednn_ms"]) for r in g) / sum(float(r[ms]) for r in g)
                low = min(g, key=lambda r: float(r[ratio]))
                line += " | %.3f | %.3f | %s (%s)" % (geo, total, low[ratio], low["name"])
            print(line + " |")
    print()
    print("| dir | layout | largest plan_ms / ms (problem) |")
    print("|---|---|---|")
    for d in ("fwd", "bwd_d", "bwd_w"):
        for layout in ("nchw", "nhwc"):
            g = [r for r in rows if r["dir"] == d and r["layout"] == layout and not any(p in r["name"] for p in exclude)]
            if g:
                worst = max(g, key=lambda r: float(r["plan_ms"]) / float(r["ms"]))
                print("| %s | %s | %.3f (%s) |" % (d, layout, float(worst["plan_ms"]) / float(worst["ms"]), worst["name"]))
    print()
    print("| forward, weights >= 1 MiB | layout | weights MiB | plan_ms / ms |")
    print("|---|---|---|---|")
    for r in rows:
        if r["dir"] == "fwd" and weight_bytes(r["desc"]) >= 1 << 20:
            print("| %s | %s | %.1f | %.3f |" % (r["name"], r["layout"], weight_bytes(r["desc"]) / 2.0 ** 20,
                                                float(r["plan_ms"]) / float(r["ms"])))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""`nconv bench --csv` keeps its contract: the header, one row per problem,
direction and layout, numeric fields that parse, the plan's time, and the
oneDNN columns filled when the peer is built in (f16 / bf16 where oneDNN has
more than its reference implementation; no timing is asserted).

Usage: cli_bench.py NCONV_BINARY
"""
import csv
import io
import os
import subprocess
import sys

HEADER = ("name,desc,dir,layout,threads,algo,ms,gflops,peak_pct,onednn_ms,onednn_impl,ratio,plan_ms,plan_ratio,"
          "gbs,mem_gbs")


def main():
    # NCONV_TEST_WRAPPER (e.g. valgrind and its options) runs the CLI under a checker.
    nconv = os.environ.get("NCONV_TEST_WRAPPER", "").split() + [sys.argv[1]]
    passed = failed = 0

    def check(cond, what):
        nonlocal passed, failed
        print("%s %s" % ("ok  " if cond else "FAIL", what))
        passed += bool(cond)
        failed += not cond

    r = subprocess.run(nconv + ["bench", "--csv", "--threads", "1", 'mb1ic8ih8oc16oh8kh3ph1n"small"',
                        '--transposed', 'mb1ic8ih4oc8oh8kh4sh2ph1n"deconv"'], capture_output=True, text=True)
    check(r.returncode == 0, "bench exits 0 (%s)" % r.stderr.strip()[-200:])
    lines = r.stdout.splitlines()
    check(lines and lines[0] == HEADER, "CSV header is the contract's")
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    check(len(rows) == 12, "2 problems x 3 directions x 2 layouts = 12 rows (got %d)" % len(rows))
    peer = subprocess.run(nconv + ["bench", "--threads", "1", "--dir", "fwd", "mb1ic8ih8oc8oh8kh3ph1"],
                          capture_output=True, text=True).stdout
    has_peer = "oneDNN peer: yes" in peer
    for row in rows:
        ok = row["dir"] in ("fwd", "bwd_d", "bwd_w") and row["layout"] in ("nchw", "nhwc")
        ok = ok and float(row["ms"]) > 0 and float(row["gflops"]) > 0 and row["threads"] == "1"
        ok = ok and float(row["plan_ms"]) > 0 and float(row["gbs"]) > 0 and float(row["mem_gbs"]) > 0
        if has_peer:
            ok = ok and float(row["onednn_ms"]) > 0 and row["onednn_impl"] and float(row["ratio"]) > 0
            ok = ok and float(row["plan_ratio"]) > 0
        else:
            ok = ok and row["onednn_ms"] == "" and row["ratio"] == "" and row["plan_ratio"] == ""
        check(ok, "row %s %s %s: %s" % (row["name"], row["dir"], row["layout"], ",".join(row.values())))
    # Other dtypes: oneDNN in f16 / bf16 where it has an implementation other than its reference
    # one for this CPU, never in f64; its fields all filled or all empty.
    # (under a checker one dtype: each bench row runs for 0.4 s of its slowed-down time)
    for dt in ("bf16",) if os.environ.get("NCONV_TEST_WRAPPER") else ("bf16", "f16", "f64"):
        r = subprocess.run(nconv + ["bench", "--csv", "--threads", "1", "--dtype", dt, "--dir", "fwd,bwd_w",
                                    'mb1ic16ih8oc16oh8kh3ph1n"t"'], capture_output=True, text=True)
        rows = list(csv.DictReader(io.StringIO(r.stdout)))
        check(r.returncode == 0 and len(rows) == 4, "bench --dtype %s: 4 rows (%s)" % (dt, r.stderr.strip()[-200:]))
        for row in rows:
            filled = row["onednn_ms"] != ""
            ok = float(row["ms"]) > 0 and (row["onednn_impl"] != "") == filled and (row["ratio"] != "") == filled
            ok = ok and not row["onednn_impl"].startswith("ref") and (not filled or (has_peer and dt != "f64"))
            check(ok, "--dtype %s row %s %s: %s" % (dt, row["dir"], row["layout"], ",".join(row.values())))
    r = subprocess.run(nconv + ["bench", "--per-sample", "--csv", "--threads", "1", 'mb3ic4ih6oc8oh6kh3ph1n"ps"',
                        'mb3ic4iw9oc8ow9kw3pw1n"ps1d"', 'mb2ic2id4ih4iw4oc4od4oh4ow4kd3kh3kw3pd1ph1pw1n"3d"'],
                       capture_output=True, text=True)
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    check(r.returncode == 0 and r.stdout.startswith(
        "name,desc,samples,threads,per_sample_ms,whole_batch_bwd_w_ms,ratio_to_whole"), "per-sample CSV header")
    check([x["name"] for x in rows] == ["ps", "ps1d"] and all(float(x["per_sample_ms"]) > 0 for x in rows),
          "per-sample rows for the 1D and 2D problems only")
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

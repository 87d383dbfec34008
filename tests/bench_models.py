#!/usr/bin/python3
"""bench/models.py keeps its contract: `summary` weights each layer by its
count (a hand-made table with known sums), lists the lowest-ratio layers
and refuses tables without model rows; `suite` on a small torchvision model
prints one descriptor per distinct layer, named MODEL:L<i>x<count>, whose
counts add up to the model's convolutions, that `nconv check` accepts; bad
arguments exit non-zero with a message.

Usage: bench_models.py NCONV_BINARY
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "bench", "models.py")
HEADER = ("name,desc,dir,layout,threads,algo,ms,gflops,peak_pct,onednn_ms,onednn_impl,ratio,plan_ms,plan_ratio,"
          "gbs,mem_gbs")


def run(*args):
    return subprocess.run([sys.executable, MODELS] + list(args), capture_output=True, text=True)


def main():
    nconv = os.environ.get("NCONV_TEST_WRAPPER", "").split() + [sys.argv[1]]
    passed = failed = 0

    def check(cond, what):
        nonlocal passed, failed
        print("%s %s" % ("ok  " if cond else "FAIL", what))
        passed += bool(cond)
        failed += not cond

    with tempfile.TemporaryDirectory() as tmp:
        table = os.path.join(tmp, "t.csv")
        with open(table, "w") as f:
            f.write(HEADER + "\n")
            # net: layer 0 twice at 1 ms (oneDNN 3 ms), layer 1 once at 4 ms (oneDNN 2 ms):
            # nconv 2 + 4 = 6 ms, oneDNN 6 + 2 = 8 ms, ratio 1.33; plans 0.5 / 2 ms: 3 ms, 2.67
            f.write("net:L0x2,dA,fwd,nhwc,1,igemm,1.0,1,1,3.0,jit,3.0,0.5,6.0,1.00,30.0\n")
            f.write("net:L1x1,dB,fwd,nhwc,1,depthwise,4.0,1,1,2.0,jit,0.5,2.0,1.0,1.00,30.0\n")
            f.write("other,dC,fwd,nhwc,1,igemm,9.0,1,1,1.0,jit,0.1,9.0,0.1,1.00,30.0\n")  # not a model row
        r = run("summary", "--worst", "1", table)
        check(r.returncode == 0, "summary exits 0 (%s)" % r.stderr.strip()[-200:])
        line = [l for l in r.stdout.splitlines() if l.startswith("| net | fwd | nhwc | 1 |")]
        check(len(line) == 2, "summary: one model line and one worst-layer line for net")
        if len(line) == 2:
            cells = [c.strip() for c in line[0].strip("|").split("|")]
            check(cells[4:] == ["2", "6.000", "3.000", "8.000", "1.33", "2.67"],
                  "summary: count-weighted times and ratios (%s)" % cells)
            check("| dB | 1 | depthwise | 0.50 | 1.00 (30.0) | 67% |" in line[1], "summary: the worst layer and its share (%s)" % line[1])
        check("other" not in r.stdout, "summary: rows not named MODEL:L<i>x<count> are left out")
        empty = os.path.join(tmp, "e.csv")
        with open(empty, "w") as f:
            f.write(HEADER + "\nother,dC,fwd,nhwc,1,igemm,9.0,1,1,1.0,jit,0.1,9.0,0.1,1.00,30.0\n")
        r = run("summary", empty)
        check(r.returncode != 0 and "no rows named" in r.stderr, "summary: a table without model rows is refused")

    for args, what in ((["suite", "--batch", "x", "resnet18"], "--batch = 'x': not a number"),
                       (["suite"], "name at least one model"),
                       (["bogus"], "unknown command 'bogus'")):
        r = run(*args)
        check(r.returncode != 0 and what in r.stderr, "%s: refused (%s)" % (" ".join(args), r.stderr.strip()[:80]))

    try:
        import torchvision  # noqa: F401
    except ImportError:
        print("skip suite on a model: torchvision is not installed (Debian: python3-torchvision)")
    else:
        r = run("suite", "--batch", "2", "--size", "32", "resnet18")
        check(r.returncode == 0, "suite resnet18 exits 0 (%s)" % r.stderr.strip()[-200:])
        lines = r.stdout.splitlines()
        names = [re.search(r'n"(resnet18:L(\d+)x(\d+))"$', l) for l in lines]
        check(lines and all(names), "suite: every line is a descriptor named resnet18:L<i>x<count>")
        if lines and all(names):
            check([int(m.group(2)) for m in names] == list(range(len(lines))), "suite: layers numbered in order")
            # resnet18 runs 20 convolutions (stem, 16 in the blocks, 3 downsampling 1x1)
            check(sum(int(m.group(3)) for m in names) == 20, "suite: counts add up to resnet18's 20 convolutions")
            check(lines[0].startswith("g1mb2ic3ih32iw32oc64oh16ow16kh7kw7sh2sw2ph3pw3dh0dw0"),
                  "suite: the stem's descriptor (%s)" % lines[0])
            r = subprocess.run(nconv + ["check", "--dir", "fwd", "--mb", "1"] + lines[:3], capture_output=True, text=True)
            check(r.returncode == 0, "nconv check accepts the suite's descriptors (%s)" % r.stdout.strip()[-200:])
        r = run("suite", "nosuchnet")
        check(r.returncode != 0 and "model 'nosuchnet'" in r.stderr, "suite: an unknown model is refused")

    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

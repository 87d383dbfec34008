#!/usr/bin/python3
"""`nconv compute` on invalid input: each case must exit non-zero (not by a
signal), print one line on stderr naming the parameter, and write no file.

Usage: cli_invalid.py NCONV_BINARY
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

from report import Report


def main():
    # NCONV_TEST_WRAPPER (e.g. valgrind and its options) runs the CLI under a checker.
    nconv = os.environ.get("NCONV_TEST_WRAPPER", "").split() + [sys.argv[1]]
    report = Report()
    with tempfile.TemporaryDirectory() as d:
        def arr(name, shape, dtype=np.float32):
            path = os.path.join(d, name)
            np.save(path, np.ones(shape, dtype=dtype))
            return path

        x = arr("x.npy", (2, 4, 8, 8))
        w = arr("w.npy", (6, 4, 3, 3))
        wg = arr("wg.npy", (6, 2, 3, 3))
        b = arr("b.npy", (6,))
        bad_b = arr("bb.npy", (5,))
        z_bad = arr("zb.npy", (2, 6, 5, 5))
        xi = arr("xi.npy", (2, 4, 8, 8), np.int32)
        w1 = arr("w1.npy", (6, 4))
        big = arr("xbig.npy", (2, 4, 8, 8), ">f4")
        trunc = os.path.join(d, "trunc.npy")
        with open(x, "rb") as f:
            data = f.read()
        with open(trunc, "wb") as f:
            f.write(data[:-10])
        garbage = os.path.join(d, "garbage.npy")
        with open(garbage, "wb") as f:
            f.write(b"this is not an npy file at all")
        badhdr = os.path.join(d, "badhdr.npy")
        with open(badhdr, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}\n")
        base = ["--x", x, "--w", w]
        cases = [
            ("missing --x", ["--w", w], "--x"),
            ("missing --w", ["--x", x], "--w"),
            ("missing --out", base, "--out", False),
            ("unknown flag", base + ["--bogus", "1"], "--bogus"),
            ("stride 0", base + ["--stride", "0"], "--stride"),
            ("stride trailing junk", base + ["--stride", "1x"], "--stride"),
            ("stride fractional", base + ["--stride", "1.5"], "--stride"),
            ("stride beyond int64", base + ["--stride", "99999999999999999999"], "--stride"),
            ("stride wrong count", base + ["--stride", "1,1,1"], "--stride"),
            ("dilation 0", base + ["--dilation", "0"], "--dilation"),
            ("negative padding", base + ["--padding", "-1"], "--padding"),
            ("padding word", base + ["--padding", "full"], "--padding"),
            ("same with stride 2", base + ["--padding", "same", "--stride", "2"], "same"),
            ("same with pad-end", base + ["--padding", "same", "--pad-end", "1"], "--pad-end"),
            ("groups 0", base + ["--groups", "0"], "--groups"),
            ("channels vs groups", ["--x", x, "--w", wg, "--groups", "3"], "groups"),
            ("channels mismatch", ["--x", x, "--w", wg], "channels"),
            ("output size < 1", base + ["--dilation", "5"], "output size"),
            ("bias length", base + ["--b", bad_b], "--b"),
            ("z shape", base + ["--z", z_bad], "--z"),
            ("dy shape", base + ["--dy", z_bad], "--dy"),
            ("unsupported dtype file", ["--x", xi, "--w", w], "dtype"),
            ("big-endian file", ["--x", big, "--w", w], "dtype"),
            ("truncated npy", ["--x", trunc, "--w", w], "--x"),
            ("not an npy", ["--x", garbage, "--w", w], "--x"),
            ("malformed header", ["--x", badhdr, "--w", w], "--x"),
            ("missing file", ["--x", os.path.join(d, "nope.npy"), "--w", w], "--x"),
            ("weight rank", ["--x", x, "--w", w1], "--w"),
            ("padding mode with transposed", ["--x", x, "--w", arr("wt.npy", (4, 6, 3, 3)), "--transposed",
                                              "--padding-mode", "reflect"], "--padding-mode"),
            ("bad padding mode", base + ["--padding-mode", "mirror"], "--padding-mode"),
            ("reflect padding too large", base + ["--padding-mode", "reflect", "--padding", "8"], "reflect"),
            ("output padding without transposed", base + ["--output-padding", "1"], "--output-padding"),
            ("output padding too large", ["--x", x, "--w", arr("wt2.npy", (4, 6, 3, 3)), "--transposed",
                                          "--stride", "2", "--output-padding", "2"], "output_padding"),
            ("bad dtype", base + ["--dtype", "f8"], "--dtype"),
            ("bad layout", base + ["--layout", "nhwc"], "--layout"),
            ("unknown algo", base + ["--algo", "fft"], "fft"),
            ("threads 0", base + ["--threads", "0"], "--threads"),
            ("alpha not a number", base + ["--alpha", "abc"], "--alpha"),
            ("flag twice", base + ["--stride", "1", "--stride", "2"], "twice"),
            ("flag without value", base + ["--stride"], "--stride"),
            ("bdim beyond the array", base + ["--x-bdim", "7"], "--x-bdim"),
            ("bdim without its operand", base + ["--z-bdim", "0"], "--z-bdim"),
            ("batch sizes differ", ["--x", arr("xb.npy", (3, 2, 4, 8, 8)), "--x-bdim", "0", "--w",
                                    arr("wb.npy", (2, 6, 4, 3, 3)), "--w-bdim", "0"], "batch size"),
            ("double backward without --dy", base + ["--ggx", x], "--ggx"),
            ("double backward with --relu", base + ["--ggx", x, "--dy", arr("dy.npy", (2, 6, 6, 6)), "--relu"], "--relu"),
            ("ggw shape", base + ["--ggw", x, "--dy", arr("dy2.npy", (2, 6, 6, 6))], "--ggw"),
            ("tangent of an absent bias", base + ["--tb", b], "--tb"),
            ("tangent of an absent z", base + ["--tz", arr("tz.npy", (2, 6, 6, 6))], "--tz"),
            ("tx shape", base + ["--tx", w], "--tx"),
            ("tw shape", base + ["--tw", wg], "--tw"),
            ("tb shape", base + ["--b", b, "--tb", bad_b], "--tb"),
            ("tz shape", base + ["--z", arr("z6.npy", (2, 6, 6, 6)), "--tz", z_bad], "--tz"),
            ("complex array, real dtype", base + ["--b", arr("bc.npy", (6,), np.complex64), "--dtype", "f32"], "--b"),
            ("complex with --relu", ["--x", arr("xc.npy", (2, 4, 8, 8), np.complex128), "--w", w, "--relu"], "--relu"),
        ]
        for n, case in enumerate(cases):
            label, args, needle = case[0], case[1], case[2]
            with_out = case[3] if len(case) > 3 else True
            out = os.path.join(d, "out_" + str(n))
            cmd = nconv + ["compute"] + args + (["--out", out] if with_out else [])
            r = subprocess.run(cmd, capture_output=True, text=True)
            lines = r.stderr.strip().splitlines()
            problems = []
            if r.returncode not in (1, 2):  # not a signal, nor a checker's own exit code
                problems.append("exit %d" % r.returncode)
            if len(lines) != 1:
                problems.append("%d stderr lines" % len(lines))
            if needle not in r.stderr:
                problems.append("message lacks '%s'" % needle)
            if os.path.exists(out) and os.listdir(out):
                problems.append("wrote " + ",".join(os.listdir(out)))
            report.case(not problems, "%-36s %s%s" % (label, r.stderr.strip(),
                                                      "  <- " + "; ".join(problems) if problems else ""))
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""`nconv compute` against hostile input and failing file systems. Each case
asserts the exit code (never a signal), one stderr line naming the flag or
file at fault, and that the files already in --out (a marker among them) are
left byte-identical: a failed run changes nothing there, a good one only its
own outputs, which replace symbolic links instead of writing through them.

Usage: cli_reliability.py NCONV_BINARY
"""
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np

from report import Report


def snapshot(d):
    """Every entry of directory d: kind and bytes (a link: its target)."""
    if not os.path.isdir(d):
        return None
    out = {}
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if os.path.islink(p):
            out[name] = ("link", os.readlink(p))
        elif os.path.isdir(p):
            out[name] = ("dir", tuple(sorted(os.listdir(p))))
        else:
            with open(p, "rb") as f:
                out[name] = ("file", f.read())
    return out


def npy_bytes(header, data=b"", version=1, minor=0):
    """A .npy file with the given header text (padded like NumPy's) and data."""
    h = header.encode("latin1") if isinstance(header, str) else header
    size = 10 if version == 1 else 12
    pad = (64 - (size + len(h) + 1) % 64) % 64
    h = h + b" " * pad + b"\n"
    n = len(h).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([version, minor]) + n + h + data


def main():
    # NCONV_TEST_WRAPPER (e.g. valgrind and its options) runs the CLI under a checker.
    nconv = os.environ.get("NCONV_TEST_WRAPPER", "").split() + [sys.argv[1]]
    report = Report()
    with tempfile.TemporaryDirectory() as d:
        def path(name):
            return os.path.join(d, name)

        def arr(name, shape, dtype=np.float32, seed=0):
            np.save(path(name), np.random.default_rng(seed).standard_normal(shape).astype(dtype))
            return path(name)

        def raw(name, data):
            with open(path(name), "wb") as f:
                f.write(data)
            return path(name)

        x = arr("x.npy", (2, 4, 8, 8))
        w = arr("w.npy", (6, 4, 3, 3), seed=1)
        dy = arr("dy.npy", (2, 6, 6, 6), seed=2)
        xbig = arr("xbig.npy", (2, 4, 64, 64), seed=3)
        base = ["--x", x, "--w", w]
        f4 = np.ones(6, np.float32).tobytes()
        good_hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }"

        def fsize_limit():
            # Python ignores SIGXFSZ and its children inherit that: restore the default, so a
            # CLI that does not handle the limit itself is killed by the signal.
            signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
            resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

        # (label, args, expected exit, needle in stderr, options)
        # options: setup(out) prepares --out; check(out, before) returns a problem or None;
        # stdin: bytes piped in; env: extra environment; preexec: a function run in the child.
        cases = []

        def case(label, args, code, needle, **opt):
            cases.append((label, args, code, needle, opt))

        # 1. Sizes: checked arithmetic.
        case("groups overflows int64", base + ["--groups", "9223372036854775807"], 2, "--groups")
        case("groups overflows, transposed", ["--x", x, "--w", arr("wt.npy", (4, 6, 3, 3)), "--transposed",
                                              "--groups", "4611686018427387904"], 2, "--groups")

        # 2. All or nothing.
        def dx_is_dir(out):
            os.mkdir(os.path.join(out, "dx.npy"))
            with open(os.path.join(out, "y.npy"), "wb") as f:
                f.write(b"an older y")

        case("an output name is a directory", base + ["--dy", dy], 2, "dx.npy", setup=dx_is_dir)
        case("the file-size limit stops a write", ["--x", xbig, "--w", w], 1, "y.npy: write failed: File too large",
             setup=lambda out: open(os.path.join(out, "y.npy"), "wb").write(b"an older y"), preexec=fsize_limit)

        def no_out_dir(out):
            shutil.rmtree(out)

        case("a failed run leaves no --out it made", ["--x", xbig, "--w", w], 1, "File too large",
             setup=no_out_dir, preexec=fsize_limit)

        # 3. Symbolic links are replaced, not followed.
        xl = arr("xl.npy", (2, 4, 8, 8))

        def link_to_x(out):
            os.symlink(xl, os.path.join(out, "y.npy"))

        def x_intact_y_written(out, before):
            with open(xl, "rb") as f:
                if f.read() != x_bytes:
                    return "the input behind the link was overwritten"
            p = os.path.join(out, "y.npy")
            if os.path.islink(p) or np.load(p).shape != (2, 6, 6, 6):
                return "y.npy is not the new output"
            return None

        with open(xl, "rb") as f:
            x_bytes = f.read()
        case("y.npy is a link to the input", ["--x", xl, "--w", w], 0, None, setup=link_to_x,
             check=x_intact_y_written)

        def good_outputs(out, before):
            names = set(os.listdir(out)) - {"keep.txt"}
            return None if names == {"y.npy", "dx.npy", "dw.npy"} else "outputs " + ",".join(sorted(names))

        case("a good run writes only its outputs", base + ["--dy", dy], 0, None, check=good_outputs)

        # 4. The .npy reader accepts what NumPy writes, nothing looser.
        bad_npy = [
            ("non-ASCII after the dict", npy_bytes(good_hdr.encode() + b" \xc3\xa9", f4), "byte 0xc3"),
            ("duplicate shape key", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), "
                                              "'shape': (6,), }", f4), "'shape' given twice"),
            ("fortran_order Truex", npy_bytes("{'descr': '<f4', 'fortran_order': Truex, 'shape': (6,), }", f4),
             "must be True or False"),
            ("an extra key", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", f4),
             "the key 'x'"),
            ("a missing key", npy_bytes("{'descr': '<f4', 'shape': (6,), }", f4), "'fortran_order' is missing"),
            ("a shape without its comma", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", f4),
             "without its comma"),
            ("a negative dimension", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }", f4),
             "expected a dimension"),
            ("a NUL in the header", npy_bytes(good_hdr.encode() + b"\x00", f4), "byte 0x00"),
            ("text after the dict", npy_bytes(good_hdr + " 1", f4), "only blanks may follow"),
            ("format version 1.1", npy_bytes(good_hdr, f4, minor=1), "version 1.1"),
        ]
        for label, data, needle in bad_npy:
            case("npy: " + label, ["--x", x, "--w", w, "--b", raw(label.replace(" ", "_") + ".npy", data)], 2,
                 needle)
        for version in ((1, 0), (2, 0), (3, 0)):
            for dt in ("<f2", "<f4", "<f8"):
                for order in ("C", "F"):
                    name = path("np_%d_%s_%s.npy" % (version[0], dt[1:], order))
                    a = np.asarray(np.random.default_rng(4).standard_normal((2, 4, 8, 8)), dtype=dt, order=order)
                    with open(name, "wb") as f:
                        np.lib.format.write_array(f, a, version=version)
                    case("npy: NumPy's writer, %d.0 %s %s order" % (version[0], dt, order), ["--x", name, "--w", w],
                         0, None)
        for version in (2, 3):
            case("npy: format version %d.0 reads" % version,
                 base + ["--b", raw("v%d.npy" % version, npy_bytes(good_hdr, f4, version=version))], 0, None)

        # 5. Messages name the flag.
        case("padding 2^40", base + ["--padding", "1099511627776"], 2, "--padding")
        wt = path("wt.npy")
        for flag, value in (("--stride", "4611686018427387904"), ("--padding", "4611686018427387904"),
                            ("--pad-end", "-4611686018427387904"), ("--stride", "9223372036854775807"),
                            ("--padding", "9223372036854775807"), ("--pad-end", "9223372036854775807"),
                            ("--pad-end", "-9223372036854775807")):
            case("transposed, %s %s" % (flag, value), ["--x", x, "--w", wt, "--transposed", flag, value], 2,
                 flag + " = ")
        case("an unwritable --out", base, 2, "--out", out="/proc/self")
        case("--out names a file", base, 2, "xl.npy': not a directory", out=xl)

        # 6. A stream's header cannot make the reader allocate what the stream does not hold.
        huge = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576), }", b"\0" * 64)
        case("piped header claiming 2^40 elements", ["--x", "/dev/stdin", "--w", w], 2, "truncated data",
             stdin=huge)

        # 9. An ISA cap that names no ISA.
        case("NCONV_MAX_ISA=bogus", base, 2, "NCONV_MAX_ISA", env={"NCONV_MAX_ISA": "bogus"})

        for n, (label, args, code, needle, opt) in enumerate(cases):
            out = opt.get("out") or path("out_%d" % n)
            own = "out" not in opt
            if own:
                os.mkdir(out)
                with open(os.path.join(out, "keep.txt"), "wb") as f:
                    f.write(os.urandom(64))
                if "setup" in opt:
                    opt["setup"](out)
            before = snapshot(out) if own else None
            env = dict(os.environ, **opt.get("env", {}))
            r = subprocess.run(nconv + ["compute"] + args + ["--out", out], input=opt.get("stdin"),
                               capture_output=True, env=env, preexec_fn=opt.get("preexec"))
            err = r.stderr.decode(errors="replace").strip()
            lines = err.splitlines()
            problems = []
            if r.returncode != code:
                problems.append("exit %d, want %d" % (r.returncode, code))
            if code and (len(lines) != 1 or not err.startswith("nconv: ") or err.count("nconv:") != 1):
                problems.append("not one line 'nconv: ...'")
            if needle and needle not in err:
                problems.append("message lacks '%s'" % needle)
            after = snapshot(out) if own else None
            if own and code:
                if after != before:
                    problems.append("--out changed: %s -> %s" % (sorted(before or {}), sorted(after or {})))
            elif own:
                kept = {k: v for k, v in (before or {}).items() if k == "keep.txt"}
                if {k: v for k, v in (after or {}).items() if k == "keep.txt"} != kept:
                    problems.append("the marker changed")
                stray = [k for k in after or {} if k.startswith(".")]
                if stray:
                    problems.append("left " + ",".join(stray))
                if "check" in opt:
                    why = opt["check"](out, before)
                    if why:
                        problems.append(why)
            report.case(not problems, "%-40s %s%s" % (label, err.replace("\n", " | ")[:160],
                                                      "  <- " + "; ".join(problems) if problems else ""))
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())

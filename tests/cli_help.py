#!/usr/bin/python3
"""`nconv CMD --help`, `nconv CMD -h` and `nconv help CMD` print that command's usage on stdout and
exit 0, whatever else is on the line; `nconv help` prints every command's; an unknown command is an
error of one line.

Usage: cli_help.py NCONV_BINARY
"""
import os
import subprocess
import sys

from report import Report

# A command and an option its usage must name.
COMMANDS = {"compute": "--ggx", "check": "--transposed", "bench": "--no-onednn", "algos": None}


def main():
    nconv = os.environ.get("NCONV_TEST_WRAPPER", "").split() + [sys.argv[1]]
    report = Report()

    def run(args, code, out_has=(), out_lacks=(), err_lines=0):
        r = subprocess.run(nconv + args, capture_output=True, text=True)
        problems = []
        if r.returncode != code:
            problems.append("exit %d, expected %d" % (r.returncode, code))
        problems += ["stdout lacks %r" % s for s in out_has if s not in r.stdout]
        problems += ["stdout has %r" % s for s in out_lacks if s in r.stdout]
        if len(r.stderr.strip().splitlines()) != err_lines:
            problems.append("stderr: %r" % r.stderr)
        report.case(not problems, "%-32s %s" % (" ".join(args), "; ".join(problems)))

    for cmd, option in COMMANDS.items():
        own = ["usage: nconv " + cmd] + ([option] if option else [])
        others = ["usage: nconv " + c for c in COMMANDS if c != cmd]
        for args in ([cmd, "--help"], [cmd, "-h"], ["help", cmd], [cmd, "--csv", "--help"]):
            run(args, 0, own, others)
    run(["help"], 0, ["usage: nconv <command>"] + ["  " + c for c in COMMANDS] + [o for o in COMMANDS.values() if o])
    run(["--help"], 0, ["usage: nconv <command>"])
    run(["help", "bogus"], 2, err_lines=1)
    run(["help", "bench", "extra"], 2, err_lines=1)
    run(["algos", "--bogus"], 2, err_lines=1)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())

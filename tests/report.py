"""What the test scripts print: one line per case, "ok  " or "FAIL" first, then
"N passed, N failed", which is also their exit status (0: none failed)."""


class Report:
    def __init__(self):
        self.passed = self.failed = 0

    def case(self, ok, text):
        print("%s %s" % ("ok  " if ok else "FAIL", text))
        self.passed += bool(ok)
        self.failed += not ok

    def finish(self):
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0

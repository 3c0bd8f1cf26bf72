# SPDX-License-Identifier: GPL-2.0
"""Runs tests of rdma-core's suite (its tests/ directory, on pyverbs) and
prints one line per test as it starts and as it ends, so that the outcome
of every test is known even when the process dies under one of them:

    START <id>
    RESULT <id> <ok|fail|error|skip> <reason>

Usage: python3 pyverbs_run.py TESTS_DIR --dev DEV NAME...
where each NAME is a module of the suite (test_qp) or a test in it
(test_qp.QPTest.test_create_rc_qp_no_attr)."""

import importlib.util
import os
import sys
import unittest


def load_suite(tests_dir):
    """The suite's package, imported the way its run_tests.py does it."""
    sys.path.insert(0, tests_dir)
    from args_parser import parser  # the suite's own --dev option

    parser.parse_args()
    spec = importlib.util.spec_from_file_location(
        "tests", os.path.join(tests_dir, "__init__.py"),
        submodule_search_locations=[tests_dir])
    tests = importlib.util.module_from_spec(spec)
    sys.modules["tests"] = tests
    spec.loader.exec_module(tests)
    return tests


class LineResult(unittest.TestResult):
    """A result that prints each outcome on one line, at once."""

    def _say(self, *words):
        print(" ".join(str(w).replace("\n", " ") for w in words), flush=True)

    def startTest(self, test):
        super().startTest(test)
        self._say("START", test.id())

    def addSuccess(self, test):
        super().addSuccess(test)
        self._say("RESULT", test.id(), "ok", "-")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._say("RESULT", test.id(), "skip", reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._say("RESULT", test.id(), "fail", err[1])
        print(self._exc_info_to_string(err, test), file=sys.stderr, flush=True)

    def addError(self, test, err):
        super().addError(test, err)
        self._say("RESULT", test.id(), "error", err[1])
        print(self._exc_info_to_string(err, test), file=sys.stderr, flush=True)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._say("RESULT", test.id(), "ok", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._say("RESULT", test.id(), "fail", "unexpected success")


def main():
    tests_dir = sys.argv.pop(1)
    tests = load_suite(tests_dir)
    names = sys.argv[1:]
    loader = unittest.TestLoader()
    suite = unittest.TestSuite(loader.loadTestsFromName(n, tests) for n in names)
    result = LineResult()
    suite.run(result)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())

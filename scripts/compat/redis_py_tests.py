#!/usr/bin/env python3
"""Helper of scripts/compat/redis-py.sh (standard library only).

  redis_py_tests.py select TESTS_DIR
      Prints the pytest node ids redis-py.sh runs, one a line: every test of
      test_connection.py, test_pipeline.py (pipelines and MULTI/EXEC
      transactions) and test_lock.py, and the tests of test_commands.py's
      TestRedisCommands between its "# BASIC KEY COMMANDS" comment and the
      next section comment ("# LIST COMMANDS"): the string and key commands.

  redis_py_tests.py count JUNIT_XML
      Prints "FILE passed failed skipped" per test file of a pytest
      --junit-xml report (failed: failures and errors).

  redis_py_tests.py count-log PYTEST_LOG
      The same from the lines "NODE_ID PASSED|FAILED|ERROR|SKIPPED" of a
      pytest -v log: for a run killed before it wrote its report.
"""
import ast
import collections
import os
import re
import sys
import xml.etree.ElementTree as ET

WHOLE_FILES = ["test_connection.py", "test_pipeline.py", "test_lock.py"]
COMMANDS_FILE = "test_commands.py"
COMMANDS_CLASS = "TestRedisCommands"
SECTION_START = "# BASIC KEY COMMANDS"


def section_lines(source):
    """The line range [start, end) of the string and key section."""
    lines = source.splitlines()
    start = end = None
    for i, line in enumerate(lines, 1):
        text = line.strip()
        if start is None and text == SECTION_START:
            start = i
        elif start is not None and re.fullmatch(r"# [A-Z][A-Z ]+ COMMANDS", text):
            end = i
            break
    if start is None:
        sys.exit(f"{COMMANDS_FILE}: no '{SECTION_START}' comment (has redis-py's layout changed?)")
    return start, end or len(lines) + 1


def select(tests_dir):
    for name in WHOLE_FILES:
        if not os.path.isfile(os.path.join(tests_dir, name)):
            sys.exit(f"no {name} in {tests_dir}")
        print(f"tests/{name}")
    path = os.path.join(tests_dir, COMMANDS_FILE)
    with open(path) as f:
        source = f.read()
    start, end = section_lines(source)
    tree = ast.parse(source)
    found = 0
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == COMMANDS_CLASS:
            for item in node.body:
                is_test = isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    item.name.startswith("test_")
                # A decorated test starts at its first decorator.
                line = min([item.lineno] + [d.lineno for d in getattr(item, "decorator_list", [])])
                if is_test and start <= line < end:
                    print(f"tests/{COMMANDS_FILE}::{COMMANDS_CLASS}::{item.name}")
                    found += 1
    if found == 0:
        sys.exit(f"{COMMANDS_FILE}: no test of {COMMANDS_CLASS} in its key command section")


def count(junit_xml):
    counts = collections.OrderedDict()
    root = ET.parse(junit_xml).getroot()
    for case in root.iter("testcase"):
        # classname is "tests.test_commands.TestRedisCommands" or
        # "tests.test_lock" for a module-level test.
        parts = case.get("classname", "").split(".")
        module = next((p for p in parts if p.startswith("test_")), parts[-1])
        c = counts.setdefault(module + ".py", [0, 0, 0])
        if case.find("skipped") is not None:
            c[2] += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            c[1] += 1
        else:
            c[0] += 1
    for name, (passed, failed, skipped) in counts.items():
        print(name, passed, failed, skipped)


def count_log(log):
    counts = collections.OrderedDict()
    line_re = re.compile(r"^tests/(test_\w+\.py)::\S+ .*?\b(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
    with open(log, errors="replace") as f:
        for line in f:
            m = line_re.match(line)
            if not m:
                continue
            c = counts.setdefault(m.group(1), [0, 0, 0])
            outcome = m.group(2)
            c[0 if outcome in ("PASSED", "XFAIL", "XPASS") else 2 if outcome == "SKIPPED" else 1] += 1
    for name, (passed, failed, skipped) in counts.items():
        print(name, passed, failed, skipped)


def main():
    commands = {"select": select, "count": count, "count-log": count_log}
    if len(sys.argv) != 3 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]](sys.argv[2])


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""No function of sim/ or of the Python bindings is longer than LIMIT lines (docs/CONVENTIONS.md).

A function is a brace block opened at namespace or class scope (not a struct, class, enum or
namespace body); its length counts from the line that opens it to the line that closes it. Strings,
character literals and comments are blanked first so that braces inside them do not count.

  function_length_test.py ROOT              lists every function over LIMIT (exit 1 if any)
  function_length_test.py --self-test ROOT  plants a function of LIMIT + 1 lines and one of LIMIT
                                            lines in a copy, and checks that only the first is caught
"""
import os
import re
import shutil
import sys
import tempfile

LIMIT = 80
DIRS = ["sim/src", "sim/include/precsim/sim", "sim/cli", "sim/python/src"]
SCOPE = re.compile(r"^\s*(namespace|extern|struct|class|enum|union)\b")


def blank(line):
    code = re.sub(r"//.*", "", line)
    code = re.sub(r'R"\(.*', "", code)
    code = re.sub(r'"([^"\\]|\\.)*"', '""', code)
    return re.sub(r"'(\\.|[^'])'", "''", code)


def long_functions(path):
    """(length, first line number, signature) of every function of the file over LIMIT lines."""
    lines = open(path, encoding="utf-8").read().split("\n")
    stack, out = [], []
    for i, line in enumerate(lines):
        code = blank(line)
        for ch in code:
            if ch == "{":
                scope = SCOPE.match(code)
                at_scope = all(kind == "scope" for kind, _ in stack)
                stack.append(("scope", i) if scope else ("function" if at_scope else "block", i))
            elif ch == "}" and stack:
                kind, start = stack.pop()
                if kind == "function" and i - start + 1 > LIMIT:
                    out.append((i - start + 1, start + 1, lines[start].strip()[:90]))
    return out


def violations(root):
    found = []
    for d in DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if f.endswith((".cpp", ".h")):
                    path = os.path.join(dirpath, f)
                    for n, line, sig in long_functions(path):
                        found.append(f"{os.path.relpath(path, root)}:{line}: {n} lines (limit {LIMIT}): {sig}")
    return found


def self_test(root):
    with tempfile.TemporaryDirectory() as tmp:
        for d in DIRS:
            shutil.copytree(os.path.join(root, d), os.path.join(tmp, d))
        body = lambda n: "".join(f"  x += {k};\n" for k in range(n - 2))
        path = os.path.join(tmp, "sim/src/core/planted.cpp")
        with open(path, "w", encoding="utf-8") as f:
            f.write("namespace precsim {\nint too_long(int x) {\n" + body(LIMIT + 1) + "}\n"
                    "int just_fits(int x) {\n" + body(LIMIT) + "}\n}  // namespace precsim\n")
        found = [v for v in violations(tmp) if "planted.cpp" in v]
        ok = len(found) == 1 and "too_long" in found[0] and f"{LIMIT + 1} lines" in found[0]
        print(("caught" if ok else "MISSED") + f": a function of {LIMIT + 1} lines, none of {LIMIT}: {found}")
        return 0 if ok else 1


def main():
    args = sys.argv[1:]
    if args and args[0] == "--self-test":
        return self_test(args[1])
    found = violations(args[0])
    for v in found:
        print(v)
    print(f"{len(found)} functions over {LIMIT} lines in {', '.join(DIRS)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

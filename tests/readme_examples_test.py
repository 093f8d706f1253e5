#!/usr/bin/env python3
"""A documentation page's examples give the output the page shows.

Usage: readme_examples_test.py PRECSIM PAGE.md SOURCE_DIR [--python PY] [--list]

PAGE.md is README.md or a page of docs/ (tests/CMakeLists.txt registers one entry per page). Every
fenced block of the page is read as a shell session: a line "$ precsim ARGS" (continued by
indented lines after a trailing backslash; a "  # comment" after the arguments is dropped) is a
command, the lines up to the next "$" line are its output. A command with output is run and its
stdout compared with that output line by line, after removing trailing blanks; an output line
starting with "..." stands for any number of lines (rows the page leaves out). A command without
output is run only when a later command of the same block reads a file it writes (--out FILE), so
that a sequence such as "quantize --out q.json" then "report check q.json" is checked as a whole.
"$ cat FILE" with output writes that output to FILE for the commands after it. Everything runs in
a fresh folder where tests/ and notebooks/ of the source tree are reachable by the same relative
paths; only stdout is compared (progress and timings go to stderr), and the folder's path is
replaced by "." in it. Exit codes are not compared (report check exits 1 on the failure it
shows). Not run: GPU commands (what they print is the machine's), sweeps but for --dry-run (the
lines shown are stderr progress with timings) and examples whose input the page does not give in
full (gpt-split.json). A page of docs/ whose every example is of those exits 77 (skipped): it has
nothing to check here; any other page where nothing is checked fails.

A fenced block whose first line starts with ">>> " is a Python session, run with --python PY in
the same folder (the environment's PYTHONPATH finds the package): each ">>> " statement, with its
"... " continuation lines, runs as the interactive interpreter runs it, and what it prints (an
expression's repr included) is compared with the lines up to the next ">>> " by the same rules; a
statement that raises prints "Traceback (most recent call last):" and its last line,
"TypeName: message". Without --python the Python sessions are not run; a page left with nothing
checked then exits 77 (skipped), or fails under CI or PRECSIM_REQUIRE_ORACLES=1.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile


def sessions(page):
    """Yields (line number, block lines) per fenced block."""
    block, start, inside = [], 0, False
    for no, line in enumerate(page.splitlines(), 1):
        if line.startswith("```"):
            if inside:
                yield start, block
            block, start, inside = [], no, not inside
            continue
        if inside:
            block.append(line)


def read_output(lines, i, prompt):
    """The output lines from i up to the next prompt, trailing blank lines dropped, and that index."""
    out = []
    while i < len(lines) and not lines[i].startswith(prompt):
        out.append(lines[i])
        i += 1
    while out and not out[-1].strip():
        out.pop()
    return out, i


def parse_block(lines):
    steps, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            i += 1
            continue
        text = line[2:]
        while text.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text.rstrip()[:-1] + " " + lines[i].strip()
        text = re.sub(r"\s+#.*$", "", text).strip()
        i += 1
        out, i = read_output(lines, i, "$ ")
        steps.append((text, out))
    return steps


def parse_python(lines):
    """[(source, expected output lines)] of a ">>> " session."""
    steps, i = [], 0
    while i < len(lines):
        if not lines[i].startswith(">>> "):
            i += 1
            continue
        source = [lines[i][4:]]
        i += 1
        while i < len(lines) and (lines[i].startswith("... ") or lines[i] == "..."):
            source.append(lines[i][4:])
            i += 1
        out, i = read_output(lines, i, ">>> ")
        steps.append(("\n".join(source) + "\n", out))
    return steps


def matches(expected, got):
    """Whether got (lines) matches expected, where a line starting with "..." matches any lines."""
    if not expected:
        return not got
    if expected[0].startswith("..."):
        return any(matches(expected[1:], got[k:]) for k in range(len(got) + 1))
    return bool(got) and expected[0].rstrip() == got[0].rstrip() and matches(expected[1:], got[1:])


NOT_RUN = ("precsim gpu ", "--backend cuda", "precsim sweep ", "gpt-split.json")


def not_run(text):
    return any(p in text for p in NOT_RUN) and not (text.startswith("precsim sweep ") and "--dry-run" in text.split())

# Runs a session's statements (JSON on stdin) as the interactive interpreter does; prints a JSON
# list of what each printed.
PYTHON_RUNNER = r"""
import contextlib, io, json, sys
outputs, env = [], {"__name__": "__main__"}
for source in json.load(sys.stdin):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            exec(compile(source, "<example>", "single"), env)
        except Exception as e:
            msg = str(e)
            print("Traceback (most recent call last):")
            print(type(e).__name__ + (": " + msg if msg else ""))
    outputs.append(buf.getvalue())
json.dump(outputs, sys.__stdout__)
"""


def writes(args):
    return {args[k + 1] for k, a in enumerate(args[:-1]) if a in ("--out", "--output")}


def reads(args):
    return {a for k, a in enumerate(args) if k == 0 or args[k - 1] not in ("--out", "--output")}


def clean(text, tmp):
    got = text.replace(tmp + "/", "").replace(tmp, ".").splitlines()
    while got and not got[-1].strip():
        got.pop()
    return got


def shell_failures(precsim, where, steps, tmp, listing):
    """(examples compared, failures, commands the rules run or could run)."""
    checked, failures, runnable = 0, [], 0
    for k, (text, out) in enumerate(steps):
        words = shlex.split(text)
        if words[0] == "cat" and out:
            with open(os.path.join(tmp, words[1]), "w") as f:
                f.write("\n".join(out) + "\n")
            continue
        if words[0] != "precsim" or not_run(text):
            continue
        runnable += 1
        later = set().union(*[reads(shlex.split(t)) for t, _ in steps[k + 1:]])
        if not out and not writes(words[1:]) & later:
            continue
        if listing:
            print(f"{where}: {text}")
            continue
        r = subprocess.run([precsim] + words[1:], cwd=tmp, capture_output=True, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2")))
        if not out:
            continue
        checked += 1
        got = clean(r.stdout, tmp)
        if not matches(out, got):
            failures.append(f"{where}: $ {text}\n--- the page shows\n" + "\n".join(out) +
                            f"\n--- precsim printed (exit {r.returncode})\n" + "\n".join(got) +
                            ("\n--- stderr\n" + r.stderr[-2000:] if r.returncode not in (0, 1) else ""))
    return checked, failures, runnable


def python_failures(python, where, steps, tmp, listing):
    if listing:
        for source, _ in steps:
            print(f"{where}: >>> {source.splitlines()[0]}")
        return 0, [], len(steps)
    r = subprocess.run([python, "-c", PYTHON_RUNNER], cwd=tmp, capture_output=True, text=True,
                       input=json.dumps([s for s, _ in steps]),
                       env=dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2")))
    if r.returncode != 0:
        return len(steps), [f"{where}: the Python session did not run (exit {r.returncode})\n" + r.stderr[-2000:]], len(steps)
    failures = []
    for (source, out), printed in zip(steps, json.loads(r.stdout)):
        got = clean(printed, tmp)
        if not matches(out, got):
            failures.append(f"{where}: >>> {source.rstrip()}\n--- the page shows\n" + "\n".join(out) +
                            "\n--- Python printed\n" + "\n".join(got))
    return len(steps), failures, len(steps)


def option(name):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv[:-1] else None


def main():
    precsim, page_path, source = (os.path.abspath(a) for a in sys.argv[1:4])
    python, listing = option("--python"), "--list" in sys.argv
    name = os.path.relpath(page_path, source)
    with open(page_path) as f:
        page = f.read()
    checked, failures, skipped, runnable = 0, [], 0, 0
    with tempfile.TemporaryDirectory(prefix="precsim_examples_") as tmp:
        for sub in ("tests", "notebooks"):
            os.symlink(os.path.join(source, sub), os.path.join(tmp, sub))
        for start, lines in sessions(page):
            where = f"{name} (block at line {start})"
            if lines and lines[0].startswith(">>> "):
                if not python:
                    skipped += 1
                    continue
                n, bad, could = python_failures(python, where, parse_python(lines), tmp, listing)
            else:
                n, bad, could = shell_failures(precsim, where, parse_block(lines), tmp, listing)
            checked, failures, runnable = checked + n, failures + bad, runnable + could
    for f in failures:
        print(f + "\n")
    print(f"{name}: {checked} examples run, {len(failures)} differ from the page"
          + (f"; {skipped} Python sessions not run (no --python)" if skipped else ""))
    if listing:
        sys.exit(0)
    if runnable == 0 and not skipped and name.startswith("docs" + os.sep):
        print(f"{name}: every example is a GPU command or a sweep, which this test does not run")
        sys.exit(77)
    if checked == 0 and skipped and not (os.environ.get("CI") or os.environ.get("PRECSIM_REQUIRE_ORACLES") == "1"):
        sys.exit(77)
    sys.exit(1 if failures or checked == 0 else 0)


if __name__ == "__main__":
    main()

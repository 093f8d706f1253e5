#!/usr/bin/env python3
"""The README's examples give the output the README shows.

Usage: readme_examples_test.py PRECSIM README.md SOURCE_DIR [--list]

Every fenced block of README.md is read as a shell session: a line "$ precsim ARGS" (continued by
indented lines after a trailing backslash; a "  # comment" after the arguments is dropped) is a
command, the lines up to the next "$" line are its output. A command with output is run and its
stdout compared with that output line by line, after removing trailing blanks; an output line
starting with "..." stands for any number of lines (rows the README leaves out). A command without
output is run only when a later command of the same block reads a file it writes (--out FILE), so
that a sequence such as "quantize --out q.json" then "report check q.json" is checked as a whole.
"$ cat FILE" with output writes that output to FILE for the commands after it. Everything runs in
a fresh folder where tests/ and notebooks/ of the source tree are reachable by the same relative
paths; only stdout is compared (progress and timings go to stderr), and the folder's path is
replaced by "." in it. Exit codes are not compared (report check exits 1 on the failure it
shows). Not run: GPU commands (what they print is the machine's), sweeps (the lines shown are
stderr progress with timings) and examples whose input the README does not give in full
(gpt-split.json).
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile


def sessions(readme):
    """Yields (line number, [(command line, args or None for cat, output lines)]) per fenced block."""
    block, start, inside = [], 0, False
    for no, line in enumerate(readme.splitlines(), 1):
        if line.startswith("```"):
            if inside:
                yield start, block
            block, start, inside = [], no, not inside
            continue
        if inside:
            block.append(line)


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
        out = []
        while i < len(lines) and not lines[i].startswith("$ "):
            out.append(lines[i])
            i += 1
        while out and not out[-1].strip():
            out.pop()
        steps.append((text, out))
    return steps


def matches(expected, got):
    """Whether got (lines) matches expected, where a line starting with "..." matches any lines."""
    if not expected:
        return not got
    if expected[0].startswith("..."):
        return any(matches(expected[1:], got[k:]) for k in range(len(got) + 1))
    return bool(got) and expected[0].rstrip() == got[0].rstrip() and matches(expected[1:], got[1:])


NOT_RUN = ("precsim gpu ", "--backend cuda", "precsim sweep ", "gpt-split.json")


def writes(args):
    return {args[k + 1] for k, a in enumerate(args[:-1]) if a in ("--out", "--output")}


def reads(args):
    return {a for k, a in enumerate(args) if k == 0 or args[k - 1] not in ("--out", "--output")}


def main():
    precsim, readme_path, source = (os.path.abspath(a) for a in sys.argv[1:4])
    with open(readme_path) as f:
        readme = f.read()
    checked, failures = 0, []
    with tempfile.TemporaryDirectory(prefix="precsim_readme_") as tmp:
        for name in ("tests", "notebooks"):
            os.symlink(os.path.join(source, name), os.path.join(tmp, name))
        for start, lines in sessions(readme):
            steps = parse_block(lines)
            for k, (text, out) in enumerate(steps):
                words = shlex.split(text)
                if words[0] == "cat" and out:
                    with open(os.path.join(tmp, words[1]), "w") as f:
                        f.write("\n".join(out) + "\n")
                    continue
                if words[0] != "precsim" or any(p in text for p in NOT_RUN):
                    continue
                later = set().union(*[reads(shlex.split(t)) for t, _ in steps[k + 1:]])
                if not out and not writes(words[1:]) & later:
                    continue
                if "--list" in sys.argv:
                    print(f"README.md:{start}: {text}")
                    continue
                r = subprocess.run([precsim] + words[1:], cwd=tmp, capture_output=True, text=True,
                                   env=dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2")))
                if not out:
                    continue
                checked += 1
                got = r.stdout.replace(tmp + "/", "").replace(tmp, ".").splitlines()
                while got and not got[-1].strip():
                    got.pop()
                if not matches(out, got):
                    failures.append(f"README.md (block at line {start}): $ {text}\n--- README shows\n" + "\n".join(out) +
                                    f"\n--- precsim printed (exit {r.returncode})\n" + "\n".join(got) +
                                    ("\n--- stderr\n" + r.stderr[-2000:] if r.returncode not in (0, 1) else ""))
    for f in failures:
        print(f + "\n")
    print(f"{checked} README examples run, {len(failures)} differ from the README")
    sys.exit(1 if failures or checked == 0 else 0)


if __name__ == "__main__":
    main()

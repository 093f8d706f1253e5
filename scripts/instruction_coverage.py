#!/usr/bin/env python3
"""Writes the coverage table of docs/instructions.md from the output of instruction_oracle_test
(its "coverage ARCH/NAME AGREE TOTAL" lines): per architecture and family, the MMA-Sim classes
reproduced bit for bit. Usage:
  build/tests/instruction_oracle_test > out.txt; scripts/instruction_coverage.py out.txt [--doc docs/instructions.md]
Replaces the text between <!-- coverage --> and <!-- /coverage --> in the page, naming the machine.
"""
import argparse
import collections
import platform
import re
import subprocess
import sys


def cpu():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"Model name:\s*(.+)", out)
        return m.group(1).strip() if m else platform.processor()
    except OSError:
        return platform.processor()


def table(lines):
    rows = collections.OrderedDict()
    total_ok = total = outputs = outputs_ok = 0
    for line in lines:
        m = re.match(r"coverage (\S+?)/(\S+) (\d+) (\d+)$", line.strip())
        if not m:
            continue
        arch, name, agree, n = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
        family = "mfma" if name.startswith("mfma.") else re.split(r"\.m\d+n\d+k\d+\.", name)[0]
        r = rows.setdefault((arch, family), [0, 0, 0, 0])
        r[0] += agree == n
        r[1] += 1
        r[2] += agree
        r[3] += n
        total_ok += agree == n
        total += 1
        outputs_ok += agree
        outputs += n
    if not total:
        raise SystemExit("no coverage lines in the input")
    out = ["| architecture | family | classes reproduced | outputs bit for bit |", "|---|---|---|---|"]
    for (arch, family), (ok, n, a, t) in rows.items():
        out.append(f"| {arch} | {family} | {ok} of {n} | {a} of {t} |")
    out.append(f"| **all** | | **{total_ok} of {total}** | **{outputs_ok} of {outputs}** |")
    out.append("")
    out.append(f"Measured by `instruction_oracle_test` on {cpu()} (mmasim 2.1.1 on torch's CPU kernels).")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--doc", default="docs/instructions.md")
    args = ap.parse_args()
    with open(args.log) as f:
        text = table(f.readlines())
    with open(args.doc) as f:
        doc = f.read()
    new, n = re.subn(r"(<!-- coverage -->\n).*?(<!-- /coverage -->)", lambda m: m.group(1) + text + "\n" + m.group(2),
                     doc, flags=re.S)
    if n != 1:
        raise SystemExit(f"{args.doc}: no <!-- coverage --> ... <!-- /coverage --> section")
    with open(args.doc, "w") as f:
        f.write(new)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

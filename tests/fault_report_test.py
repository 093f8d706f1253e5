#!/usr/bin/python3
"""Fault drill: a finished run is never lost when its result cannot be written at the end.

--out passes the writability probe before the run; the write of the finished result then fails
halfway with ENOSPC (PRECSIM_FAULT_ENOSPC, the writer's fault hook: a test cannot count on mounting
a file system). For train, sweep (its merge and its unit reports), analyze and quantize (the
report and the --output array), each run must: exit 2 (precsim's exit status for every error but a missing GPU) with one error naming the destination,
"No space left on device" and the fallback file in the temporary directory; leave no file and no
temporary file at the destination; and the fallback must hold the bytes a clean run writes.
When the fallback cannot be written either, the error says so. Then the same on a real full file
system, a 256 KiB tmpfs, where this process may mount one (root: unshare -m); elsewhere the test
says that it skipped that part.

usage: fault_report_test.py PRECSIM
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from checks import expect, finish  # noqa: E402

precsim = sys.argv[1]
tmp = tempfile.mkdtemp(prefix=f"precsim-fault-report-{os.getpid()}-")
saved_dir = os.path.join(tmp, "saved")  # TMPDIR of the runs: where the fallback files go
os.makedirs(saved_dir)
faults = {"enospc": 0, "tmpfs": 0}
CONFIG = {"steps": 3, "batch": 8, "model": {"hidden": [4]}, "data": {"train_size": 32, "heldout_size": 8},
          "recipes": ["bf16-amp"]}


def write(path, data):
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return path


def read(path):
    with open(path, "rb") as f:
        return f.read()


def npy_f32(path, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return write(path, b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + struct.pack(f"<{len(values)}f", *values))


def run(args, fault=None, tmpdir=saved_dir):
    env = dict(os.environ, TMPDIR=tmpdir)
    env.pop("PRECSIM_FAULT_ENOSPC", None)
    if fault:
        env["PRECSIM_FAULT_ENOSPC"] = fault
        faults["enospc"] += 1
    return subprocess.run([precsim, *args], capture_output=True, text=True, env=env, timeout=120)


def saved_file(err, name):
    """The fallback the error names, which must be TMPDIR/precsim-PID-NAME."""
    marker = "the finished result is saved in "
    if marker not in err:
        return None
    path = err.split(marker, 1)[1].split(" instead", 1)[0]
    ok = os.path.dirname(path) == saved_dir and os.path.basename(path).startswith("precsim-") and path.endswith("-" + name)
    return path if ok else None


def leftovers(folder, name):
    return [f for f in os.listdir(folder) if f == name or f.startswith("." + name + ".tmp.")] if os.path.isdir(folder) else []


def drill(what, args, dest, clean_bytes):
    """The run with its write of `dest` failing: one clear error, nothing at dest, the fallback whole."""
    p = run(args, fault=dest)
    name = os.path.basename(dest)
    lines = p.stderr.strip().splitlines()
    expect(p.returncode == 2, f"{what}: exit 2 (got {p.returncode}): {p.stderr[-400:]!r}")
    expect(len(lines) == 1 and f"cannot write '{dest}': No space left on device" in lines[-1],
           f"{what}: one error naming the destination and ENOSPC: {p.stderr[-400:]!r}")
    saved = saved_file(p.stderr, name)
    expect(saved is not None and os.path.exists(saved), f"{what}: the error names the fallback in TMPDIR: {p.stderr[-300:]!r}")
    expect(not leftovers(os.path.dirname(dest), name), f"{what}: no file or temporary file at the destination")
    if saved and os.path.exists(saved):
        expect(read(saved) == clean_bytes, f"{what}: the fallback holds the clean run's bytes ({len(clean_bytes)})")
        os.remove(saved)


def clean(args, dest):
    p = run(args)
    expect(p.returncode == 0, f"clean {args[0]}: exit 0: {p.stderr[-300:]!r}")
    data = read(dest)
    os.remove(dest)
    return data


def test_commands():
    out = os.path.join(tmp, "out")
    os.makedirs(out)
    config = write(os.path.join(tmp, "config.json"), json.dumps(CONFIG))
    npy = npy_f32(os.path.join(tmp, "x.npy"), [0.1 * i - 1 for i in range(40)])
    report = os.path.join(out, "report.json")
    cases = [
        ("train", ["train", "--config", config, "--deterministic", "-q", "--out", report], report),
        ("analyze", ["analyze", "--dist", "normal", "--count", "256", "-f", "e4m3,mxfp4", "--deterministic", "-q", "--out", report],
         report),
        ("quantize", ["quantize", "-f", "e4m3", "1", "0.3", "--deterministic", "--out", report], report),
    ]
    array = os.path.join(out, "q.npy")
    cases.append(("quantize --output", ["quantize", "-f", "e4m3", "-q", "--input", npy, "--output", array], array))
    for what, args, dest in cases:
        drill(what, args, dest, clean(args, dest))
    # Both the destination and the temporary directory refuse: the error says that nothing was kept.
    p = run(cases[0][1], fault=out, tmpdir=out)
    expect(p.returncode == 2 and "saving it in the temporary directory failed too" in p.stderr
           and p.stderr.count("No space left on device") == 2, f"fallback refused too: {p.stderr[-400:]!r}")
    expect(not os.listdir(out), f"fallback refused too: nothing left in {out}: {os.listdir(out)}")


def test_sweep():
    plan = write(os.path.join(tmp, "plan.json"), json.dumps({"base": CONFIG, "grid": [{"path": "seed", "values": [1, 2]}]}))
    good, bad = os.path.join(tmp, "sweep-good"), os.path.join(tmp, "sweep-bad")
    p = run(["sweep", plan, "--out-dir", good, "-q"])
    expect(p.returncode == 0, f"clean sweep: {p.stderr[-300:]!r}")
    units = sorted(os.listdir(os.path.join(good, "units")))
    # The merge: every unit report is in place, sweep.json goes to TMPDIR.
    merged = os.path.join(bad, "sweep.json")
    drill("sweep merge", ["sweep", plan, "--out-dir", bad, "-q"], merged, read(os.path.join(good, "sweep.json")))
    expect(sorted(os.listdir(os.path.join(bad, "units"))) == units, "sweep merge: every unit report kept")
    # The unit reports: each worker's error names its fallback; they complete the sweep when put back.
    shutil.rmtree(bad)
    p = run(["sweep", plan, "--out-dir", bad, "-q"], fault=os.path.join(bad, "units") + "/")
    expect(p.returncode == 2 and "2 units failed" in p.stderr, f"sweep units: the sweep fails naming them: {p.stderr[-300:]!r}")
    # A worker that failed runs again (3 attempts), each saving the same bytes under its own pid.
    saved = {}
    for f in sorted(os.listdir(saved_dir)):
        saved.setdefault(f.split("-", 2)[2], set()).add(read(os.path.join(saved_dir, f)))
    expect(sorted(saved) == units and all(len(v) == 1 for v in saved.values()),
           f"sweep units: each finished unit saved in TMPDIR, identical on every attempt: {sorted(saved)}")
    expect(not os.listdir(os.path.join(bad, "units")), "sweep units: no partial unit report")
    for unit, texts in saved.items():
        write(os.path.join(bad, "units", unit), next(iter(texts)))
    p = run(["sweep", plan, "--out-dir", bad, "-q"])
    expect(p.returncode == 0 and read(os.path.join(bad, "sweep.json")) == read(os.path.join(good, "sweep.json")),
           f"sweep units: the saved units put back merge to the clean bytes: {p.stderr[-300:]!r}")


def test_tmpfs():
    """A real full disk: a 256 KiB tmpfs nearly filled, so the probe passes and the report does not fit."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("SKIP tmpfs part: not root, cannot mount a tmpfs here (the ENOSPC hook covers the same path)")
        return
    mnt = os.path.join(tmp, "small")
    os.makedirs(mnt)
    config = os.path.join(tmp, "config.json")
    script = (f"mount -t tmpfs -o size=256k tmpfs {mnt} || exit 99; head -c 245760 /dev/zero > {mnt}/filler; "
              f"TMPDIR={saved_dir} {precsim} train --config {config} --seeds 2 --deterministic -q --out {mnt}/r.json >/dev/null; rc=$?; "
              f"ls -a {mnt}; exit $rc")
    p = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    if p.returncode == 99:
        print(f"SKIP tmpfs part: mount refused here ({p.stderr.strip()[-200:]}); the ENOSPC hook covers the same path")
        return
    faults["tmpfs"] += 1
    expect(p.returncode == 2 and "No space left on device" in p.stderr, f"tmpfs: exit 2, ENOSPC: {p.returncode} {p.stderr[-300:]!r}")
    expect(sorted(p.stdout.split()) == [".", "..", "filler"], f"tmpfs: no partial file: {p.stdout.split()}")
    saved = saved_file(p.stderr, "r.json")
    expect(saved is not None and json.loads(read(saved))["status"] == "complete", f"tmpfs: the report saved whole: {p.stderr[-300:]!r}")


try:
    test_commands()
    test_sweep()
    test_tmpfs()
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print(f"faults injected: {faults['enospc']} ENOSPC writes (hook), {faults['tmpfs']} full tmpfs")
finish()

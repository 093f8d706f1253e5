#!/usr/bin/python3
"""precsim sweep, end to end on tiny units (MLPs of a few hundred parameters, tens of steps).

  local   --jobs 2 and --jobs 1 give byte-identical unit reports and merges; the merge validates,
          its rows are the unit reports' numbers and its intervals are recomputed here; a rerun
          runs nothing; `report summary|check|export` read it; --dry-run lists the units
  resume  a worker killed with SIGKILL is run again; the whole sweep killed with SIGKILL, then
          rerun: no unit lost, none twice, merge identical to a clean run's; SIGINT stops after
          the units in progress with a merge marked interrupted (exit 130), and a rerun completes it
  mpi     mpirun -n 3 and -n 1 give merges identical to each other and to the local executor's
  refuse  bad sweep files exit 2 with a message naming the problem, before anything is written

usage: sweep_test.py MODE PRECSIM SCHEMA_JSON
"""
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import jsonschema

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from checks import expect, finish  # noqa: E402
from procs import children  # noqa: E402

mode, precsim, schema_path = sys.argv[1:4]
with open(schema_path) as f:
    validator = jsonschema.Draft202012Validator(json.load(f))
tmp = tempfile.mkdtemp(prefix=f"precsim-sweep-{mode}-{os.getpid()}-")
BASE = {"steps": 20, "batch": 16, "seed": 1, "shadow_every": 5,
        "data": {"kind": "gaussian-mixture", "features": 8, "classes": 3, "train_size": 256, "heldout_size": 64},
        "model": {"hidden": [8]}, "optimizer": {"kind": "sgd", "lr": 0.05}, "recipes": ["bf16-amp", "fp8-current"]}
T975 = {1: 12.706204736174698, 2: 4.302652729749464}  # Student's t quantiles, df 1 and 2


def plan_file(name, spec):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def grid(steps=20, widths=(8, 16), seeds=(1, 2)):
    base = dict(BASE, steps=steps)
    return {"base": base, "grid": [{"path": "model.hidden", "values": [[w] for w in widths]},
                                   {"path": "seed", "values": list(seeds)}]}


def sweep(plan, out, *args, check=True):
    p = subprocess.run([precsim, "sweep", plan, "--out-dir", out, *args], capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        print(p.stdout, p.stderr)
    if check:
        expect(p.returncode == 0, f"sweep {os.path.basename(out)} {' '.join(args)} exits 0 (got {p.returncode})")
    return p


def read(path):
    with open(path, "rb") as f:
        return f.read()


def units_of(out):
    return sorted(os.listdir(os.path.join(out, "units")))


def check_merge(out, n_units, variants):
    doc = json.loads(read(os.path.join(out, "sweep.json")))
    errors = list(validator.iter_errors(doc))
    expect(not errors, f"sweep.json validates: {[e.message[:200] for e in errors[:3]]}")
    r = doc["results"]
    expect(doc["kind"] == "sweep" and doc["status"] == "complete", "a complete sweep report")
    expect(r["units_finished"] == n_units and not r["missing"], f"{n_units} units merged")
    expect(len(r["rows"]) == n_units * (variants + 1), "a row per unit and variant, the reference included")
    for row in r["rows"][:3]:  # the numbers are the unit report's
        unit = json.loads(read(os.path.join(out, "units", row["unit"] + ".json")))
        if row["variant"] == "reference":
            want = unit["results"]["runs"][0]["reference"]["final_loss"]
        else:
            want = next(v for v in unit["results"]["variants"] if v["name"] == row["variant"])["summary"]["final_loss"]
        expect(row["final_loss"] == want, f"row {row['unit']} {row['variant']}: final_loss {row['final_loss']} == {want}")
    for row in r["rows"]:  # diverged as the unit's summaries say (over seeds: one diverged_at per seed)
        unit = json.loads(read(os.path.join(out, "units", row["unit"] + ".json")))
        ats = [run["variants"][i]["summary"]["diverged_at"] for run in unit["results"]["runs"]
               for i, v in enumerate(run["variants"]) if v["name"] == row["variant"]]
        expect(row["diverged"] == any(a is not None for a in ats), f"row {row['unit']} {row['variant']}: diverged {row['diverged']}")
    for p in r["points"]:
        xs = [row["final_loss"] for row in r["rows"]
              if row["variant"] == p["variant"] and {k: v for k, v in row["point"].items() if k != "seed"} == p["point"]]
        n = len(xs)
        mean = sum(xs) / n
        half = T975[n - 1] * math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1) / n) if n > 1 else 0
        got = p["final_loss"]
        expect(n == p["units"] and abs(got["mean"] - mean) <= 1e-12 * abs(mean) and abs(got["hi"] - (mean + half)) <= 1e-9 * abs(mean),
               f"point {p['point']} {p['variant']}: mean {got['mean']} [{got['lo']}, {got['hi']}] vs {mean} +- {half} over {n}")
    return doc


def test_local():
    plan = plan_file("plan.json", grid())
    dry = subprocess.run([precsim, "sweep", plan, "--dry-run"], capture_output=True, text=True)
    expect(dry.returncode == 0 and dry.stdout.startswith("4 units") and len(dry.stdout.splitlines()) == 6, f"dry run: {dry.stdout!r}")
    a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
    pa = sweep(plan, a, "--jobs", "2")
    sweep(plan, b, "--jobs", "1")
    expect("4 done, 0 running, 0 left" in pa.stderr, f"progress on stderr: {pa.stderr[-300:]!r}")
    expect(units_of(a) == units_of(b) and len(units_of(a)) == 4, f"4 unit reports: {units_of(a)}")
    for u in units_of(a):
        expect(read(os.path.join(a, "units", u)) == read(os.path.join(b, "units", u)), f"unit {u}: identical bytes at 2 and 1 jobs")
    expect(read(os.path.join(a, "sweep.json")) == read(os.path.join(b, "sweep.json")), "merge identical at 2 and 1 jobs")
    check_merge(a, 4, 2)
    before = {u: os.stat(os.path.join(a, "units", u)).st_mtime_ns for u in units_of(a)}
    again = sweep(plan, a, "--jobs", "2")
    expect("4 finished already, 0 to run" in again.stderr, f"a rerun runs nothing: {again.stderr[-200:]!r}")
    expect(before == {u: os.stat(os.path.join(a, "units", u)).st_mtime_ns for u in units_of(a)}, "no unit report rewritten")
    expect(read(os.path.join(a, "sweep.json")) == read(os.path.join(b, "sweep.json")), "the rerun's merge is identical")
    merged = os.path.join(a, "sweep.json")
    for args in (["summary", merged], ["check", "--baseline", os.path.join(b, "sweep.json"), merged],
                 ["export", "--csv", os.path.join(tmp, "csv"), merged], ["validate", merged]):
        p = subprocess.run([precsim, "report", *args], capture_output=True, text=True)
        expect(p.returncode == 0, f"report {args[0]} on the merge: {p.returncode} {p.stderr[-300:]!r}")
    expect(os.path.exists(os.path.join(tmp, "csv", "points.csv")), f"export wrote points.csv: {os.listdir(os.path.join(tmp, 'csv'))}")


def wait_for(cond, what, timeout=120):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.02)
    expect(False, f"timed out waiting for {what}")
    return False


def test_resume():
    plan = plan_file("plan.json", grid(steps=150, widths=(8, 16, 24), seeds=(1, 2)))
    clean = os.path.join(tmp, "clean")
    sweep(plan, clean, "--jobs", "2")
    killed = os.path.join(tmp, "killed")
    p = subprocess.Popen([precsim, "sweep", plan, "--out-dir", killed, "--jobs", "2"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    wait_for(lambda: children(p.pid), "a worker")
    victim = children(p.pid)[0]
    os.kill(victim, signal.SIGKILL)  # the executor runs its unit again
    wait_for(lambda: len([u for u in os.listdir(os.path.join(killed, "units")) if u.endswith(".json") and not u.startswith(".")]) >= 2,
             "two finished units")
    workers = children(p.pid)
    p.kill()  # the whole sweep, mid-way: its workers die with it below
    for w in workers:
        try:
            os.kill(w, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, err = p.communicate()
    expect("killed by signal 9; running it again" in err, f"the killed worker's unit ran again: {err[-400:]!r}")
    done = [u for u in units_of(killed) if not u.startswith(".")]
    expect(0 < len(done) < 6, f"the kill came mid-sweep ({len(done)} of 6 finished)")
    resumed = sweep(plan, killed, "--jobs", "2")
    expect(f"{len(done)} finished already, {6 - len(done)} to run" in resumed.stderr, f"resume: {resumed.stderr[:300]!r}")
    expect(units_of(killed) == units_of(clean), f"no unit lost, none twice, no temporary file: {units_of(killed)}")
    expect(read(os.path.join(killed, "sweep.json")) == read(os.path.join(clean, "sweep.json")), "merge identical to the clean run's")

    stopped = os.path.join(tmp, "stopped")
    p = subprocess.Popen([precsim, "sweep", plan, "--out-dir", stopped, "--jobs", "1"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    wait_for(lambda: os.path.isdir(os.path.join(stopped, "units")) and
             any(u.endswith(".json") and not u.startswith(".") for u in os.listdir(os.path.join(stopped, "units"))), "one finished unit")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    expect(p.returncode == 130, f"SIGINT: exit 130 (got {p.returncode}): {err[-300:]!r}")
    doc = json.loads(read(os.path.join(stopped, "sweep.json")))
    expect(doc["status"] == "interrupted" and 0 < doc["results"]["units_finished"] < 6 and doc["results"]["missing"],
           f"an interrupted merge of what finished: {doc['status']}, {doc['results']['units_finished']} units")
    expect(not list(validator.iter_errors(doc)), "the interrupted merge validates")
    sweep(plan, stopped, "--jobs", "2")
    expect(read(os.path.join(stopped, "sweep.json")) == read(os.path.join(clean, "sweep.json")), "resumed after SIGINT: identical merge")


def test_mpi():
    mpirun = shutil.which("mpirun")
    if not mpirun:
        print("SKIP: no mpirun (scripts/setup.sh installs openmpi-bin)")
        sys.exit(77)
    plan = plan_file("plan.json", grid(widths=(8, 12, 16), seeds=(1, 2)))
    local = os.path.join(tmp, "local")
    sweep(plan, local, "--jobs", "1")
    outs = {}
    for n in (1, 3):
        out = outs[n] = os.path.join(tmp, f"mpi{n}")
        p = subprocess.run([mpirun, "--oversubscribe", "--allow-run-as-root", "-n", str(n), precsim, "--threads", "1", "sweep",
                            plan, "--out-dir", out], capture_output=True, text=True, timeout=300)
        if p.returncode != 0 and "built without MPI" in p.stderr:
            print("SKIP: this precsim was built without MPI")
            sys.exit(77)
        expect(p.returncode == 0, f"mpirun -n {n}: exit {p.returncode}: {p.stderr[-800:]!r}")
        expect(f"MPI executor on {n} ranks" in p.stderr, f"-n {n}: the MPI executor ran: {p.stderr[:300]!r}")
    expect(units_of(outs[1]) == units_of(outs[3]) == units_of(local), "the same 6 unit reports")
    for u in units_of(local):
        expect(read(os.path.join(outs[3], "units", u)) == read(os.path.join(local, "units", u)), f"unit {u}: identical on 3 ranks")
    expect(read(os.path.join(outs[1], "sweep.json")) == read(os.path.join(outs[3], "sweep.json")), "1 rank and 3 ranks: identical merge")
    expect(read(os.path.join(outs[3], "sweep.json")) == read(os.path.join(local, "sweep.json")), "MPI and local: identical merge")
    check_merge(outs[3], 6, 2)


def test_refuse():
    cases = [
        ("unknown axis path", dict(grid(), grid=[{"path": "model.widht", "values": [[8]]}]), ["model.widht", "'widht' is not a key"]),
        ("unknown recipe key path", dict(grid(), grid=[{"path": "recipes.0.forward.x", "values": [1]}]), ["recipes.0.forward.x"]),
        ("index out of range", dict(grid(), grid=[{"path": "recipes.5", "values": ["fp32"]}]), ["recipes.5", "array of 2"]),
        ("empty axis", dict(grid(), grid=[{"path": "seed", "values": []}]), ["empty axis", "seed"]),
        ("invalid unit", dict(grid(), grid=[{"path": "optimizer.lr", "values": [0.1, "fast"]}]), ["unit 1", "optimizer"]),
        ("unknown preset", dict(grid(), grid=[{"path": "recipes.1", "values": ["fp8-current", "fp7-magic"]}]), ["unit 1", "fp7-magic"]),
        ("duplicate units", dict(grid(), grid=[{"path": "seed", "values": [3, 3]}]), ["same configuration"]),
        ("unknown top key", dict(grid(), axes=[]), ["unknown key 'axes'"]),
        ("no axes", {"base": BASE}, ["no axes"]),
    ]
    for what, spec, needles in cases:
        out = os.path.join(tmp, "refused")
        p = sweep(plan_file("bad.json", spec), out, check=False)
        expect(p.returncode == 2, f"{what}: exit 2 (got {p.returncode})")
        expect(all(n in p.stderr for n in needles) and p.stderr.count("\n") == 1, f"{what}: one message naming it: {p.stderr!r}")
        expect(not os.path.exists(out), f"{what}: nothing written")
    with open(os.path.join(tmp, "broken.json"), "w") as f:
        f.write('{"base": ')
    p = sweep(os.path.join(tmp, "broken.json"), os.path.join(tmp, "refused"), check=False)
    expect(p.returncode == 2 and "not valid JSON" in p.stderr, f"truncated file: {p.stderr!r}")


try:
    {"local": test_local, "resume": test_resume, "mpi": test_mpi, "refuse": test_refuse}[mode]()
finally:
    shutil.rmtree(tmp, ignore_errors=True)
finish()

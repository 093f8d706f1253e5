#!/usr/bin/python3
"""Fault drill: a sweep whose workers and coordinator are killed again and again, then resumed.

Rounds of `precsim sweep --jobs 2` on one folder, each ended by faults from a fixed cycle: SIGKILL
of a worker (its unit runs again), SIGTERM of a worker (workers block it: the unit finishes),
SIGKILL of the coordinator and its workers (the lock is left naming a dead pid), SIGTERM of the
coordinator (it stops after the units in progress, merge marked interrupted, exit 143). After a
coordinator's SIGKILL the next round must say that it removed the stale lock of that pid; while a
coordinator runs, a second sweep on the folder is refused naming its pid. The last round runs to
the end: its merge must be byte-identical to an undisturbed sweep's, with every unit report there
once, identical bytes, no temporary file, and the lock released (empty). Prints the faults injected.

usage: fault_sweep_test.py PRECSIM
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from checks import expect, finish  # noqa: E402
from procs import children  # noqa: E402

precsim = sys.argv[1]
tmp = tempfile.mkdtemp(prefix=f"precsim-fault-sweep-{os.getpid()}-")
BASE = {"steps": 200, "batch": 16, "seed": 1, "shadow_every": 10,
        "data": {"kind": "gaussian-mixture", "features": 8, "classes": 3, "train_size": 256, "heldout_size": 64},
        "model": {"hidden": [8]}, "optimizer": {"kind": "sgd", "lr": 0.05}, "recipes": ["bf16-amp"]}
PLAN = {"base": BASE, "grid": [{"path": "model.hidden", "values": [[w] for w in range(4, 28, 2)]},
                               {"path": "seed", "values": [1, 2]}]}
CYCLE = ["worker SIGKILL", "worker SIGTERM", "coordinator SIGKILL", "worker SIGKILL", "coordinator SIGTERM"]
ROUNDS, MAX_ROUNDS = 10, 40  # at least ROUNDS, and more until the faults below have all happened
faults = {kind: 0 for kind in CYCLE}


def enough_faults():
    return faults["coordinator SIGKILL"] >= 2 and faults["worker SIGKILL"] >= 4


def read(path):
    with open(path, "rb") as f:
        return f.read()


def finished_units(out):
    d = os.path.join(out, "units")
    return sorted(u for u in os.listdir(d) if not u.startswith(".")) if os.path.isdir(d) else []


def wait_for(cond, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.01)
    return False


def start(plan, out):
    return subprocess.Popen([precsim, "sweep", plan, "--out-dir", out, "--jobs", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def kill_quietly(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def inject(kind, p):
    """One fault on the running sweep `p`; returns whether the coordinator was killed outright."""
    if not wait_for(lambda: children(p.pid) or p.poll() is not None) or p.poll() is not None:
        return False
    faults[kind] += 1
    workers = children(p.pid)
    if kind == "worker SIGKILL":
        kill_quietly(workers[0], signal.SIGKILL)
    elif kind == "worker SIGTERM":
        kill_quietly(workers[-1], signal.SIGTERM)
    elif kind == "coordinator SIGKILL":
        p.kill()
        for w in workers:  # as a job scheduler ends the whole job
            kill_quietly(w, signal.SIGKILL)
        return True
    else:
        p.send_signal(signal.SIGTERM)
    return False


def check_live_lock(plan, out, p):
    """A second sweep on the folder of a running one is refused, naming the holder; 1 if checked."""
    q = subprocess.run([precsim, "sweep", plan, "--out-dir", out], capture_output=True, text=True, timeout=60)
    if p.poll() is not None:
        return 0
    return expect(q.returncode == 2 and f"another precsim sweep (pid {p.pid}) is running in it" in q.stderr,
           f"a live lock refuses a second sweep, naming pid {p.pid}: {q.returncode} {q.stderr!r}")


def renew_work(out):
    """On a fast machine the sweep can finish before the drill has done its faults: removing the
    later half of the finished unit reports gives the next rounds units to run (and to kill); a
    unit run again writes the same bytes, which the final comparison checks."""
    done = finished_units(out)
    for u in done[len(done) // 2:]:
        os.remove(os.path.join(out, "units", u))


def drill(plan, out):
    killed_pid = None  # the coordinator last killed with SIGKILL: the next round must clear its lock
    stale_seen = 0
    r = 0
    while r < MAX_ROUNDS and (r < ROUNDS or not enough_faults()):
        if len(finished_units(out)) == 24 and not enough_faults():
            renew_work(out)
        p = start(plan, out)
        if r == 1:
            wait_for(lambda: children(p.pid) or p.poll() is not None)
            faults["live lock"] = int(check_live_lock(plan, out, p))
        kind = CYCLE[r % len(CYCLE)]
        coordinator_killed = inject(kind, p)
        if kind == "worker SIGKILL" and p.poll() is None and r % 2 == 0:
            inject("worker SIGKILL", p)  # a second death in the same round
        if not coordinator_killed and kind != "coordinator SIGTERM":
            time.sleep(0.1)
            if p.poll() is None:  # end the round: units in progress finish, the merge is written
                p.send_signal(signal.SIGTERM)
                faults["coordinator SIGTERM"] += 1
        _, err = p.communicate(timeout=120)
        if killed_pid is not None:
            stale = f"of coordinator pid {killed_pid}, which is no longer running"
            stale_seen += stale in err
            expect(stale in err, f"round {r}: the stale lock of pid {killed_pid} is removed with a message: {err[:400]!r}")
        killed_pid = p.pid if coordinator_killed else None
        print(f"round {r}: {kind}, exit {p.returncode}, {len(finished_units(out))} units finished")
        expect(coordinator_killed or p.returncode in (0, 143), f"round {r} ({kind}): exit 0 or 143, got {p.returncode}: {err[-300:]!r}")
        r += 1
    return r, stale_seen


def test_kill_and_resume():
    plan = os.path.join(tmp, "plan.json")
    with open(plan, "w") as f:
        json.dump(PLAN, f)
    clean, out = os.path.join(tmp, "clean"), os.path.join(tmp, "killed")
    p = subprocess.run([precsim, "sweep", plan, "--out-dir", clean, "--jobs", "2"], capture_output=True, text=True, timeout=300)
    expect(p.returncode == 0, f"the undisturbed sweep: {p.stderr[-300:]!r}")
    rounds, stale_seen = drill(plan, out)
    p = subprocess.run([precsim, "sweep", plan, "--out-dir", out, "--jobs", "2"], capture_output=True, text=True, timeout=300)
    expect(p.returncode == 0, f"the resumed sweep finishes: {p.stderr[-300:]!r}")
    expect(finished_units(out) == finished_units(clean) and len(finished_units(clean)) == 24,
           f"no unit lost, none twice: {finished_units(out)}")
    expect(sorted(os.listdir(os.path.join(out, "units"))) == finished_units(out), "no temporary file left")
    for u in finished_units(clean):
        expect(read(os.path.join(out, "units", u)) == read(os.path.join(clean, "units", u)), f"unit {u}: identical bytes")
    expect(read(os.path.join(out, "sweep.json")) == read(os.path.join(clean, "sweep.json")), "merge identical to the undisturbed one")
    expect(read(os.path.join(out, ".sweep.lock")) == b"", "a finished sweep releases its lock (no pid left)")
    again = subprocess.run([precsim, "sweep", plan, "--out-dir", out], capture_output=True, text=True, timeout=60)
    expect(again.returncode == 0 and "stale" not in again.stderr, f"after a clean end no stale lock: {again.stderr!r}")
    live = faults.pop("live lock", 0)
    print(f"faults injected over {rounds} rounds: " + ", ".join(f"{n} {k}" for k, n in faults.items())
          + f"; stale locks cleared: {stale_seen}; live locks refused: {live}")
    expect(enough_faults(), f"the faults happened: {faults}")


def test_stale_lock_of_dead_pid():
    """A lock file naming a pid that has exited, as a killed coordinator leaves it."""
    out = os.path.join(tmp, "stale")
    os.makedirs(os.path.join(out, "units"))
    dead = subprocess.Popen(["true"])
    dead.wait()
    with open(os.path.join(out, ".sweep.lock"), "w") as f:
        f.write(f"{dead.pid}\n")
    plan = os.path.join(tmp, "one.json")
    with open(plan, "w") as f:
        json.dump({"base": dict(BASE, steps=2), "grid": [{"path": "seed", "values": [1]}]}, f)
    p = subprocess.run([precsim, "sweep", plan, "--out-dir", out], capture_output=True, text=True, timeout=60)
    want = f"sweep: removed the stale lock {out}/.sweep.lock of coordinator pid {dead.pid}, which is no longer running"
    expect(p.returncode == 0 and want in p.stderr, f"stale lock of a dead pid: {p.returncode} {p.stderr!r}")


try:
    test_stale_lock_of_dead_pid()
    test_kill_and_resume()
finally:
    shutil.rmtree(tmp, ignore_errors=True)
finish()

#!/usr/bin/python3
"""SIGINT and SIGTERM during `precsim train --jsonl`: the run stops after the current step, writes
a report of what finished that validates against the schema and says "status": "interrupted",
exits 128 + signal, leaves no temporary file, and the streamed lines agree with the report's series.

usage: report_interrupt_test.py PRECSIM SCHEMA_JSON
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import jsonschema

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from checks import expect, finish  # noqa: E402

precsim, schema_path = sys.argv[1], sys.argv[2]
with open(schema_path) as f:
    validator = jsonschema.Draft202012Validator(json.load(f))
CONFIG = {
    "steps": 1000000, "batch": 16, "seed": 2, "log_every": 1, "shadow_every": 0,
    "data": {"kind": "gaussian-mixture", "features": 8, "classes": 3, "train_size": 256, "heldout_size": 64},
    "model": {"hidden": [16]},
    "optimizer": {"kind": "sgd", "lr": 0.05},
    "recipes": ["fp32", "bf16-amp"],
}


def jsonl_lines(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return []


def interrupted_run(tmp, sig):
    cfg, report, stream = (os.path.join(tmp, n) for n in ("c.json", "run.json", "run.jsonl"))
    with open(cfg, "w") as f:
        json.dump(CONFIG, f)
    p = subprocess.Popen([precsim, "train", "--config", cfg, "--out", report, "--jsonl", stream, "--threads", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(jsonl_lines(stream)) < 1 + 2 * 5 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    expect(p.poll() is None, f"{sig.name}: the run is still going when the signal is sent")
    p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        raise SystemExit(f"{sig.name}: precsim did not stop within 120 s")
    expect(p.returncode == 128 + sig.value, f"{sig.name}: exit code {p.returncode}, want {128 + sig.value}")
    expect("interrupted" in err and "the report holds what finished" in err, f"{sig.name}: stderr says so: {err[-300:]!r}")
    expect(sorted(os.listdir(tmp)) == ["c.json", "run.json", "run.jsonl"],
           f"{sig.name}: no temporary file left: {sorted(os.listdir(tmp))}")
    with open(report) as f:
        doc = json.load(f)
    errors = list(validator.iter_errors(doc))
    for e in errors[:5]:
        print(f"  {'/'.join(map(str, e.path))}: {e.message[:200]}")
    expect(not errors, f"{sig.name}: the interrupted report validates")
    expect(doc["status"] == "interrupted", f"{sig.name}: status interrupted")
    r = subprocess.run([precsim, "report", "validate", report], capture_output=True, text=True)
    expect(r.returncode == 0, f"{sig.name}: precsim report validate accepts it: {r.stdout} {r.stderr}")
    run = doc["results"]["runs"][0]
    done = run["steps_completed"]
    expect(len(doc["results"]["runs"]) == 1 and 5 <= done < CONFIG["steps"], f"{sig.name}: partial run, {done} steps")
    lines = jsonl_lines(stream)
    expect(lines[0]["schema"] == "precsim.jsonl/1" and lines[0]["kind"] == "train", f"{sig.name}: jsonl header")
    records = lines[1:]
    expect(len(records) == 2 * done, f"{sig.name}: {len(records)} streamed records for {done} steps of 2 variants")
    for vi, v in enumerate(run["variants"]):
        s = v["series"]
        expect(s["step"] == list(range(done)), f"{sig.name}: {v['name']} series covers steps 0..{done - 1}")
        mine = [rec for rec in records if rec["variant"] == v["name"]]
        same = all(rec["step"] == s["step"][i] and rec["loss"] == s["loss"][i] and rec["loss_gap"] == s["loss_gap"][i]
                   for i, rec in enumerate(mine))
        expect(len(mine) == done and same, f"{sig.name}: {v['name']} streamed records equal the report's series")
        expect(v["evals"]["step"][-1] == done, f"{sig.name}: {v['name']} evaluated after the last finished step")


def jsonl_to_stdout(tmp):
    cfg = os.path.join(tmp, "c.json")
    with open(cfg, "w") as f:
        json.dump(dict(CONFIG, steps=7, log_every=3), f)
    r = subprocess.run([precsim, "train", "--config", cfg, "--jsonl", "-"], capture_output=True, text=True)
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    expect(r.returncode == 0 and lines[0]["schema"] == "precsim.jsonl/1", "--jsonl -: stdout starts with the header")
    # Logged steps 0, 3, 6 (the last), two variants each; stdout carries nothing else.
    expect([(x["step"], x["variant"]) for x in lines[1:]] == [(s, v) for s in (0, 3, 6) for v in ("fp32", "bf16-amp")],
           f"--jsonl -: one record per logged step per variant: {[(x.get('step'), x.get('variant')) for x in lines[1:]]}")
    r = subprocess.run([precsim, "train", "--config", cfg, "--jsonl", "-", "--json"], capture_output=True, text=True)
    expect(r.returncode == 2 and "--jsonl" in r.stderr and r.stdout == "", "--jsonl - with --json is refused")


with tempfile.TemporaryDirectory() as tmp:
    jsonl_to_stdout(tmp)
for sig in (signal.SIGINT, signal.SIGTERM):
    with tempfile.TemporaryDirectory() as tmp:
        interrupted_run(tmp, sig)

finish()

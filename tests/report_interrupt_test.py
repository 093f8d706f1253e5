#!/usr/bin/python3
"""SIGINT and SIGTERM during `precsim train --jsonl`: the run stops after the current step, writes
a report of what finished that validates against the schema and says "status": "interrupted",
exits 128 + signal, leaves no temporary file, and the streamed lines agree with the report's series.
The same for the other long commands, which stop after the unit of work in progress: `analyze` of a
.safetensors file (a tensor), `gemm --sweep-k` (a K and model), `allreduce` sweeps (a configuration).

usage: report_interrupt_test.py PRECSIM SCHEMA_JSON
"""
import array
import json
import os
import struct
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


def stop_and_check(p, sig, what, tmp, files, report, err_before=""):
    """Sends `sig` to the running precsim `p` and checks what every interrupted command must do:
    exit 128 + signal saying so, leave exactly `files` in `tmp` (no temporary file), and write a
    report marked interrupted that the schema and `report validate` accept. Returns (report, stderr)."""
    expect(p.poll() is None, f"{what}: the run is still going when the signal is sent")
    p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        raise SystemExit(f"{what}: precsim did not stop within 120 s")
    err = err_before + err
    expect(p.returncode == 128 + sig.value, f"{what}: exit code {p.returncode}, want {128 + sig.value}: {err[-300:]!r}")
    expect("interrupted" in err and "the report holds what finished" in err, f"{what}: stderr says so: {err[-300:]!r}")
    expect(sorted(os.listdir(tmp)) == sorted(files), f"{what}: no temporary file left: {sorted(os.listdir(tmp))}")
    with open(report) as f:
        doc = json.load(f)
    errors = list(validator.iter_errors(doc))
    for e in errors[:5]:
        print(f"  {'/'.join(map(str, e.path))}: {e.message[:200]}")
    expect(not errors, f"{what}: the interrupted report validates")
    expect(doc["status"] == "interrupted", f"{what}: status interrupted")
    r = subprocess.run([precsim, "report", "validate", report], capture_output=True, text=True)
    expect(r.returncode == 0, f"{what}: precsim report validate accepts it: {r.stdout} {r.stderr}")
    return doc, err


def interrupted_run(tmp, sig):
    cfg, report, stream = (os.path.join(tmp, n) for n in ("c.json", "run.json", "run.jsonl"))
    with open(cfg, "w") as f:
        json.dump(CONFIG, f)
    p = subprocess.Popen([precsim, "train", "--config", cfg, "--out", report, "--jsonl", stream, "--threads", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(jsonl_lines(stream)) < 1 + 2 * 5 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    doc, _ = stop_and_check(p, sig, sig.name, tmp, ["c.json", "run.json", "run.jsonl"], report)
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


def many_tensors(path, count, elements):
    """A .safetensors file of `count` F32 tensors, each a ramp over several binades."""
    values = array.array("f", [(i % 97 - 48) * 2.0 ** (i % 23 - 11) for i in range(elements)]).tobytes()
    header = {f"t{i:05d}": {"dtype": "F32", "shape": [elements], "data_offsets": [i * len(values), (i + 1) * len(values)]}
              for i in range(count)}
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + values * count)


SWEEPS = {
    # name: (arguments, stderr line that marks the start of a unit, units in the report, units asked for)
    "analyze": (lambda tmp: ["analyze", "--input", os.path.join(tmp, "in.safetensors"), "--formats", "e4m3,mxfp8_e4m3"],
                lambda line: line.startswith("["),
                lambda doc: len(doc["results"]["tensors"]), 2000),
    "gemm": (lambda tmp: ["gemm", "--m", "128", "--n", "128", "--sweep-k", ",".join(["256"] * 1000), "--model", "fp32-seq,a100"],
             lambda line: line.startswith("K=") and "exact reference" not in line,
             lambda doc: sum(len(s["models"]) for s in doc["results"]["sweep"]), 2000),
    "allreduce": (lambda tmp: ["allreduce", "--workers", ",".join(["4"] * 1000), "--elements", "20000", "--format", "bf16"],
                  lambda line: line.startswith("all-reduce:"),
                  lambda doc: len(doc["results"]["runs"]), 1000),
}


def interrupted_sweep(tmp, name, sig):
    make_args, is_unit_line, units, asked = SWEEPS[name]
    if name == "analyze":
        many_tensors(os.path.join(tmp, "in.safetensors"), asked, 4096)
    before = sorted(os.listdir(tmp))
    report = os.path.join(tmp, "run.json")
    p = subprocess.Popen([precsim, *make_args(tmp), "--out", report], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    # gemm prints a line when a (K, model) finishes; analyze and allreduce when a unit starts.
    wanted = 2 if name == "gemm" else 3
    seen, err_lines = 0, []
    for line in p.stderr:
        err_lines.append(line)
        seen += bool(is_unit_line(line))
        if seen >= wanted:
            break
    what = f"{name} {sig.name}"
    doc, err = stop_and_check(p, sig, what, tmp, before + ["run.json"], report, "".join(err_lines))
    done = units(doc)
    expect(2 <= done < asked, f"{what}: {done} of {asked} units finished")
    expect(f"after {done} of {asked} " in err, f"{what}: stderr names {done} of {asked}: {err[-300:]!r}")
    if name == "analyze":
        expect(len(doc["results"]["ranking"]) == 2 * done, f"{what}: the ranking covers the finished tensors")


with tempfile.TemporaryDirectory() as tmp:
    jsonl_to_stdout(tmp)
for name in SWEEPS:
    for sig in (signal.SIGINT, signal.SIGTERM):
        with tempfile.TemporaryDirectory() as tmp:
            interrupted_sweep(tmp, name, sig)
for sig in (signal.SIGINT, signal.SIGTERM):
    with tempfile.TemporaryDirectory() as tmp:
        interrupted_run(tmp, sig)

finish()

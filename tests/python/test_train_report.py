"""train(config) against `precsim train`, and the report functions against `precsim report`."""
import json

import pytest

import precsim

CONFIG = {"steps": 12, "batch": 16, "seed": 3, "shadow_every": 4, "recipes": ["fp32", "bf16-amp", "mxfp8"],
          "data": {"kind": "gaussian-mixture", "features": 8, "classes": 3, "train_size": 128, "heldout_size": 32},
          "model": {"hidden": [16]}}


@pytest.fixture(scope="module")
def reports(cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("train")
    (d / "config.json").write_text(json.dumps(CONFIG))
    cli("train", "--config", d / "config.json", "--out", d / "cli.json", "--deterministic")
    return d, precsim.train(CONFIG), precsim.report.load(d / "cli.json")


def test_train_equals_the_cli(reports):
    d, ours, theirs = reports
    assert ours["digest"] == theirs["digest"]
    assert ours["results"] == theirs["results"] and ours["config"] == theirs["config"]
    assert precsim.train(d / "config.json")["digest"] == theirs["digest"]  # a path works too


def test_report_validate_and_check(reports, cli):
    d, ours, theirs = reports
    assert precsim.report.validate(ours) == []
    assert precsim.report.validate(d / "cli.json") == []
    ok = precsim.report.check(theirs, ours)
    assert ok["passed"] and ok["compared"] > 0
    bad = json.loads(json.dumps(ours))
    bad["results"]["runs"][0]["variants"][1]["summary"] = {}
    problems = precsim.report.validate(bad)
    assert any("digest" in p and "edited or corrupted" in p for p in problems)
    res = precsim.report.check(theirs, bad)
    assert not res["passed"] and res["failures"][0]["path"] == "digest"
    other = precsim.train({**CONFIG, "steps": 10})
    with pytest.raises(precsim.CheckRefused, match="steps"):
        precsim.report.check(theirs, other)


def test_report_and_config_errors(tmp_path):
    (tmp_path / "trunc.json").write_text('{"schema": "precsim.report/1", "kind"')
    with pytest.raises(precsim.ReportError, match="trunc.json"):
        precsim.report.load(tmp_path / "trunc.json")
    with pytest.raises(ValueError, match="recipes|unknown"):
        precsim.train({**CONFIG, "recipes": ["fp33"]})
    with pytest.raises(ValueError, match="stepz"):
        precsim.train({**CONFIG, "stepz": 3})
    with pytest.raises(TypeError, match="config must be a dict or a path"):
        precsim.train(3)


def test_rules_and_configs_as_dicts_or_files_read_alike(reports, tmp_path):
    d, ours, theirs = reports
    bad = {"rules": [{"path": "results.runs", "mode": "fuzzy"}]}
    (tmp_path / "rules.json").write_text(json.dumps(bad))
    for rules in (bad, tmp_path / "rules.json", str(tmp_path / "rules.json")):
        with pytest.raises(ValueError, match=r"rules\[0\]\.mode: 'fuzzy' is not one of"):
            precsim.report.check(theirs, ours, rules=rules)
    (tmp_path / "empty.json").write_text("{}")
    assert precsim.report.check(theirs, ours, rules=tmp_path / "empty.json") == precsim.report.check(theirs, ours, rules={})
    assert precsim.report.check(d / "cli.json", ours)["passed"]  # a report path is read by the engine
    (tmp_path / "broken.json").write_text('{"steps": 3,')
    with pytest.raises(ValueError, match=r"^config: not valid JSON: "):
        precsim.train(tmp_path / "broken.json")
    with pytest.raises(FileNotFoundError):
        precsim.report.check(theirs, ours, rules=tmp_path / "missing.json")


def test_compare_and_summary_equal_the_cli(reports, cli):
    d, ours, theirs = reports
    got = precsim.report.compare(ours, "fp32", "mxfp8")
    want = json.loads(cli("report", "compare", d / "cli.json", "--a", "fp32", "--b", "mxfp8", "--json"))
    assert got == want
    assert got["verdict"] == "one-seed" and got["ci95"] is None and len(got["diff"]) == 1
    # The difference is b - a of the summaries, per seed.
    summary = {v["name"]: v["summary"] for v in ours["results"]["runs"][0]["variants"]}
    assert got["diff"][0] == summary["mxfp8"]["heldout_loss"] - summary["fp32"]["heldout_loss"]
    with pytest.raises(ValueError, match="bf32"):
        precsim.report.compare(ours, "fp32", "bf32")
    assert precsim.report.summary(d / "cli.json", rows=3) == cli("report", "summary", d / "cli.json", "--full",
                                                               "--rows", "3")
    with pytest.raises(ValueError, match="rows 0 is out of range"):
        precsim.report.summary(ours, rows=0)

"""precsim.plot on reports the CLI writes in the test: the numbers each figure draws against the
report's own numbers (recomputed here from the JSON), the panels of the SVG, and the CLI's error
path (exit 2, no figure file)."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import need

need("matplotlib")
from precsim import plot, report  # noqa: E402

TRAIN = {"steps": 6, "batch": 32, "seeds": 2, "shadow_every": 2, "recipes": ["fp32", "mxfp4"],
         "data": {"kind": "gaussian-mixture", "features": 16, "classes": 4, "train_size": 256, "heldout_size": 64},
         "model": {"hidden": [16]}}


def _json(path):
    with open(path) as f:
        return json.load(f)


def _svg(doc, tmp_path, name):
    out = tmp_path / f"{name}.svg"
    plot.save(doc, out)
    return out.read_text()


def _titles(svg):
    # Matplotlib writes each text of the figure as a comment before its glyphs.
    return re.findall(r"<!-- (.*?) -->", svg)


@pytest.fixture(scope="module")
def reports(cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("reports")
    cfg = d / "train-config.json"
    cfg.write_text(json.dumps(TRAIN))
    cli("train", "--config", cfg, "--out", d / "train.json", "--deterministic", "-q")
    # Attribution needs a gap outside the seed noise: local error of mxfp4, checked every 5 steps.
    attr = d / "attribute-config.json"
    attr.write_text(json.dumps(dict(TRAIN, shadow_every=5, recipes=["fp32", "bf16-amp", "mxfp4"])))
    cli("attribute", "--config", attr, "--recipe", "mxfp4", "--unit", "layer-role", "--metric", "local_grad_rel_err",
        "--steps", "10", "--out", d / "attribute.json", "--deterministic", "-q")
    cli("analyze", "--dist", "lognormal", "--count", "2048", "--formats", "e4m3,nvfp4,bf16", "--out", d / "analyze.json")
    cli("gemm", "--m", "4", "--n", "4", "--sweep-k", "16,64,256", "--model", "fp32-seq,pairwise", "--a-format", "e4m3",
        "--b-format", "e4m3", "--out", d / "gemm.json")
    plan = {"base": {"steps": 4, "batch": 16, "data": {"kind": "teacher-student", "features": 4, "outputs": 1,
                                                        "teacher_hidden": 8, "train_size": 64, "heldout_size": 32},
                     "model": {"hidden": [4]},
                     "recipes": [{"name": "fp32", "preset": "fp32"},
                                 {"name": "w4", "preset": "fp32", "gemm": {"forward": {"b": {
                                     "format": "float4_e2m1fn", "scaling": "tensor-current"}}}}]},
            "grid": [{"path": "model.hidden", "values": [[2], [4]]}, {"path": "seed", "values": [1, 2]}]}
    (d / "plan.json").write_text(json.dumps(plan))
    cli("sweep", d / "plan.json", "--out-dir", d / "sweep", "--jobs", "1", "-q")
    cli("formats", "--out", d / "formats.json")
    return {k: d / (f"{k}.json" if k != "sweep" else "sweep/sweep.json")
            for k in ("train", "attribute", "analyze", "gemm", "sweep", "formats")}


def test_train_figure_draws_the_gap_underflow_and_local_error(reports, tmp_path):
    doc = _json(reports["train"])
    kind, t = plot.data(doc)
    runs = doc["results"]["runs"]
    assert kind == "train" and t.seeds == 2 and list(t.loss_gap) == ["fp32", "mxfp4"]
    for i, name in enumerate(t.loss_gap):
        gaps = [r["variants"][i]["series"]["loss_gap"] for r in runs]
        assert t.loss_gap[name] == pytest.approx([(abs(a) + abs(b)) / 2 for a, b in zip(*gaps)], rel=1e-15)
        err = [r["variants"][i]["local"]["grad_rel_err"] for r in runs]
        assert t.local_grad_rel_err[name] == pytest.approx([(a + b) / 2 for a, b in zip(*err)], rel=1e-15)
    assert t.steps == [0, 1, 2, 3, 4, 5] and t.shadow_steps == [0, 2, 4]
    assert t.underflow_fraction == {v["name"]: v["summary"]["underflow_fraction"] for v in doc["results"]["variants"]}
    assert max(t.local_grad_rel_err["mxfp4"]) > 100 * max(t.local_grad_rel_err["fp32"])  # mxfp4 is the lossy one
    fig = plot.figure(doc)
    assert [len(ax.get_lines()) for ax in fig.axes[:2]] == [2, 2]
    assert fig.axes[0].get_yscale() == "log"
    titles = _titles(_svg(doc, tmp_path, "train"))
    assert "|loss gap| to FP64 (mean of 2 seed(s))" in titles and "local gradient error" in titles


def test_sweep_figure_has_a_curve_per_width_and_variant_with_intervals(reports, tmp_path):
    doc = _json(reports["sweep"])
    _, s = plot.data(doc)
    points = doc["results"]["points"]
    widths = sorted({p["parameters"] for p in points})
    assert len(widths) == 2 and [c.label for c in s.by_bits] == [f"{n} parameters" for n in widths]
    assert [c.label for c in s.by_width] == ["reference", "fp32", "w4"] and s.intervals
    w4 = [p for p in points if p["variant"] == "w4"]
    assert s.by_width[2].x == sorted(p["parameters"] for p in w4)
    assert s.by_width[2].mean == [p["heldout_loss"]["mean"] for p in sorted(w4, key=lambda p: p["parameters"])]
    small = sorted((p for p in points if p["parameters"] == widths[0]),
                   key=lambda p: min(p["bits"]["weights"], p["bits"]["activations"]))
    assert s.by_bits[0].x[0] == 4 and s.by_bits[0].lo == [p["heldout_loss"]["lo"] for p in small]
    titles = _titles(_svg(doc, tmp_path, "sweep"))
    assert "heldout_loss against bits (95% interval over seeds)" in titles


def test_attribute_figure_is_the_layer_by_role_heatmap(reports, tmp_path):
    doc = _json(reports["attribute"])
    _, a = plot.data(doc)
    units = {u["unit"]: u["leave_one_out"]["local_grad_rel_err"]["mean"] for u in doc["results"]["units"]}
    assert a.layers == ["0", "1"] and sorted(a.roles) == ["activation_grads", "activations", "weight_grads", "weights"]
    for i, layer in enumerate(a.layers):
        for j, role in enumerate(a.roles):
            assert a.effect[i][j] == units[f"{layer}/{role}"]
    svg = _svg(doc, tmp_path, "attribute")
    assert svg.count('<g id="axes_') == 2  # the heatmap and its colorbar
    assert "mxfp4: layer x role (gap %.3g)" % doc["results"]["gap"]["local_grad_rel_err"]["mean"] in _titles(svg)


def test_analyze_figure_has_qsnr_and_flushing_per_scheme(reports, tmp_path):
    doc = _json(reports["analyze"])
    _, a = plot.data(doc)
    schemes = doc["results"]["tensors"][0]["schemes"]
    assert a.schemes == ["e4m3", "nvfp4", "bf16"]
    assert a.qsnr_db["lognormal"] == [s["qsnr_db"] for s in schemes]
    assert a.flushed_fraction["lognormal"] == [s["flushed_fraction"] for s in schemes]
    assert a.qsnr_db["lognormal"][2] > a.qsnr_db["lognormal"][0] > a.qsnr_db["lognormal"][1]  # bf16 > e4m3 > nvfp4
    titles = _titles(_svg(doc, tmp_path, "analyze"))
    assert "QSNR by scheme" in titles and "flushed to zero by scheme" in titles


def test_gemm_figure_has_error_against_k_per_model(reports, tmp_path):
    doc = _json(reports["gemm"])
    _, g = plot.data(doc)
    sweep = doc["results"]["sweep"]
    assert g.k == [16, 64, 256]
    assert g.max_rel_error["pairwise"] == [p["models"][1]["error"]["max_rel_error"] for p in sweep]
    fig = plot.figure(doc)
    assert [len(ax.get_lines()) for ax in fig.axes] == [2, 2]
    assert "max relative error against K" in _titles(_svg(doc, tmp_path, "gemm"))


def test_report_plot_and_module_cli_write_a_png(reports, tmp_path):
    out = report.plot(str(reports["gemm"]), tmp_path / "g.png")
    assert open(out, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    mask = os.umask(0o022)
    os.umask(mask)
    assert os.stat(out).st_mode & 0o777 == 0o666 & ~mask  # as open() would create it, not mkstemp's 0600
    p = subprocess.run([sys.executable, "-m", "precsim.plot", str(reports["train"]), "-o", str(tmp_path / "t.svg")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "t.svg").read_text().count('<g id="axes_') == 4


def test_cli_names_a_figure_folder_it_cannot_write(reports, tmp_path):
    out = tmp_path / "missing" / "fig.png"
    p = subprocess.run([sys.executable, "-m", "precsim.plot", str(reports["gemm"]), "-o", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and f"cannot write the figure {str(out)!r}: No such file or directory" in p.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("case", ["formats", "not-json", "bad-ext"])
def test_cli_refuses_what_it_cannot_draw_and_writes_nothing(reports, tmp_path, case):
    src = {"formats": str(reports["formats"]), "not-json": str(tmp_path / "x.json"), "bad-ext": str(reports["gemm"])}[case]
    (tmp_path / "x.json").write_text("no report here")
    out = tmp_path / ("fig.pdf" if case == "bad-ext" else "fig.png")
    p = subprocess.run([sys.executable, "-m", "precsim.plot", src, "-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("error:") == 1
    want = {"formats": "report kind 'formats' has no figure; precsim-plot draws the kinds train, sweep, attribute, "
                       "analyze, gemm", "not-json": "not a precsim report", "bad-ext": "is not one of .png, .svg"}[case]
    assert want in p.stderr
    assert sorted(os.listdir(tmp_path)) == ["x.json"]  # no figure, no temporary file

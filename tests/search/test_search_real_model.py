"""The sweep on the real performance model: the README's main command, resume, metric names."""

from __future__ import annotations

import dataclasses
import json

import pytest

import perf_model
import workloads
from accel_dse.search import METRIC_NAMES, OBJECTIVES, load_space
from accel_spec.config import ArrayConfig


def test_metric_names_match_the_model():
    # sqnr_db (objective "accuracy") is the formats' accuracy, added by the evaluator, not the model's
    fields = {f.name for f in dataclasses.fields(perf_model.DesignTable)}
    assert set(METRIC_NAMES) - {"sqnr_db"} <= fields and "sqnr_db" not in fields
    model = {k: v for k, v in OBJECTIVES.items() if k != "accuracy"}
    assert OBJECTIVES["accuracy"] == ("sqnr_db", "maximize")
    assert {name: direction[:3] for name, (_, direction) in model.items()} == perf_model.METRICS
    assert {name: metric for name, (metric, _) in model.items()} == perf_model.OBJECTIVE_METRICS


def _sweep_json(run_cli, *args):
    code, out, err = run_cli("sweep", "--json", "--quiet", *args)
    assert code == 0, err
    return json.loads(out)


def test_main_command_on_the_default_space_then_resume(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    summary = _sweep_json(run_cli, "--trials", "24", "--seed", "1")
    assert summary["study"] == "edge-int8"
    assert summary["storage"] == "sqlite:///runs/edge-int8/study.db"
    assert (tmp_path / "runs" / "edge-int8" / "study.db").is_file()
    assert summary["n_complete"] + summary["n_fail"] == 24
    assert set(summary) == {"study", "storage", "n_complete", "n_fail", "best"}
    best = summary["best"]
    assert 1 <= len(best) <= 5
    assert [b["values"]["edp"] for b in best] == sorted(b["values"]["edp"] for b in best)
    space = load_space("edge-int8")
    resnet = workloads.resolve("resnet18")
    for entry in best:
        assert set(entry) >= {"trial", "params", "values", "config_hash"}
        config = ArrayConfig.from_dict(entry["design"])
        assert config.config_hash == entry["config_hash"]
        assert {p.field for p in space.free_params} == set(entry["params"])
        # Recomputed through the model's scalar API, independently of the sweep's batch path.
        total = perf_model.evaluate(config, resnet).total
        assert entry["values"]["edp"] == pytest.approx(total["edp"], rel=1e-9)
        assert total["area_mm2"] <= 4 and total["power_w"] <= 2  # the space's constraints
    again = _sweep_json(run_cli, "--trials", "30", "--seed", "2")
    assert again["n_complete"] + again["n_fail"] == 30
    assert again["best"][0]["values"]["edp"] <= best[0]["values"]["edp"]


def test_text_summary_prints_the_best_designs(run_cli, tmp_path):
    code, out, err = run_cli("sweep", "--quiet", "--trials", "12", "--space", "edge-mix", "--sampler", "random",
                             "--seed", "3", "--out-dir", str(tmp_path / "run"))
    assert code == 0, err
    assert "study 'edge-mix' in sqlite:///" in out and "(12 this run)" in out
    assert "Pareto set" in out and "latency ms" in out and "area mm²" in out
    assert "workload: bert_base (batch=1, seq=128, layers=1, d=768, heads=12, ffn=3072, requant=1), weight 0.3" in out


def test_a_sweep_records_why_a_design_leaves_convs_to_the_host(run_cli, tmp_path):
    """Each dataflow on a small ResNet: output- and input-stationary designs build no conv windows,
    and their trials (and the summary's best designs) say so: all 20 convs as the host's im2col, with
    the dataflow's reason; a weight-stationary design's note counts only the convs whose GEMM was
    faster, each reason from ``evaluate``'s own ``conv_note``."""
    import optuna

    space = tmp_path / "df.toml"
    space.write_text('name = "df"\nobjectives = ["latency"]\nworkloads = ["resnet18:res=32"]\n[params]\n'
                     'rows = 16\ncols = 16\ndataflow = ["ws", "os", "is"]\n')
    url = f"sqlite:///{tmp_path / 'df.db'}"
    summary = _sweep_json(run_cli, "--space", str(space), "--sampler", "grid", "--storage", url)
    trials = optuna.load_study(study_name="df", storage=url).get_trials()
    by_flow = {t.user_attrs["config"]["dataflow"]: t.user_attrs.get("notes", "") for t in trials}
    assert set(by_flow) == {"ws", "os", "is"}
    for flow in ("os", "is"):
        assert by_flow[flow].startswith("resnet18:res=32: 20 of 20 convs run as the host's im2col GEMM")
        assert f"an {flow.upper()} design runs a conv as the host's im2col GEMM" in by_flow[flow]
    ws = perf_model.evaluate(ArrayConfig(rows=16, cols=16, dataflow="ws"), workloads.resolve("resnet18:res=32"))
    host = [o for o in ws.ops if o.conv_path == "host"]
    want = (f"resnet18:res=32: {len(host)} of 20 convs run as the host's im2col GEMM ({host[0].conv_note})"
            if host else "")
    assert by_flow["ws"] == want
    assert {b["notes"] for b in summary["best"]} <= set(by_flow.values()) and len(summary["best"]) == 3

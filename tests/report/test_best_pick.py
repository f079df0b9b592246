"""``report`` and ``export --trial best`` pick the same "best" design of a multi-objective study by
the same default rule, and both say how: ``min-edp`` whenever EDP is recorded, else the first
objective in its own direction (a maximised objective's largest value, never its smallest)."""

from __future__ import annotations

import json

import optuna
import pytest
from report_testlib import feasible, make_study, pareto_numbers


@pytest.fixture(scope="module")
def edp_second(tmp_path_factory):
    """A two-objective study whose second objective is EDP (the old default took min-area here)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('pick') / 'edp.db'}"
    make_study(url, objectives=["area", "edp"], trials=16, sampler="random", seed=3)
    return url


@pytest.fixture(scope="module")
def no_edp(tmp_path_factory, edp_second):
    """A study maximising TOPS/W and minimising area whose trials record no EDP (as a pod study's)."""
    source = optuna.load_study(study_name="s", storage=edp_second)
    url = f"sqlite:///{tmp_path_factory.mktemp('pick') / 'noedp.db'}"
    study = optuna.create_study(study_name="s", storage=url, directions=["maximize", "minimize"])
    study.set_user_attr("accel_dse.objectives", ["tops_per_w", "area"])
    for t in feasible(source.get_trials()):
        metrics = {k: v for k, v in t.user_attrs["metrics"].items() if k in ("tops_per_w", "area_mm2")}
        study.add_trial(optuna.trial.create_trial(
            values=[metrics["tops_per_w"], metrics["area_mm2"]], params=t.params, distributions=t.distributions,
            user_attrs={"config": t.user_attrs["config"], "metrics": metrics, "status": "ok"}))
    return url


def _report_best(run_cli, url, out):
    code, stdout, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(out))
    assert code == 0, err
    return json.loads((out / "report.json").read_text())["best"], stdout


def _export_best(run_cli, url, out):
    code, stdout, err = run_cli("export", "--storage", url, "--study", "s", "--trial", "best", "--out", str(out),
                                "--no-synth")
    assert code == 0, err
    return json.loads((out / "design.json").read_text())["source"], stdout


def test_edp_recorded_means_min_edp_in_both(edp_second, run_cli, tmp_path):
    trials = feasible(optuna.load_study(study_name="s", storage=edp_second).get_trials())
    front = [t for t in trials if t.number in pareto_numbers(trials, [1.0, 1.0])]
    least_edp = min(front, key=lambda t: (t.user_attrs["metrics"]["edp"], t.number))
    least_area = min(front, key=lambda t: (t.values[0], t.number))
    assert least_edp.number != least_area.number  # else the test could not tell the rules apart
    best, report_out = _report_best(run_cli, edp_second, tmp_path / "rep")
    source, export_out = _export_best(run_cli, edp_second, tmp_path / "exp")
    assert best["trial"] == source["trial"] == least_edp.number
    assert best["pick"] == "min-edp" and source["selected_by"] == "best, --pick min-edp"
    for out in (report_out, export_out):
        assert f"best: trial {least_edp.number}, picked by min-edp on the Pareto set (the default" in out


def test_a_maximised_first_objective_takes_its_largest(no_edp, run_cli, tmp_path):
    trials = optuna.load_study(study_name="s", storage=no_edp).get_trials()
    front = [t for t in trials if t.number in pareto_numbers(trials, [-1.0, 1.0])]
    most = max(front, key=lambda t: (t.values[0], -t.number))
    assert len({t.values[0] for t in front}) > 1  # a worst and a best to tell apart
    best, report_out = _report_best(run_cli, no_edp, tmp_path / "rep")
    source, export_out = _export_best(run_cli, no_edp, tmp_path / "exp")
    assert best["trial"] == source["trial"] == most.number
    assert best["pick"] == "max-tops_per_w"
    for out in (report_out, export_out):
        assert f"best: trial {most.number}, picked by max-tops_per_w on the Pareto set" in out


def test_a_given_pick_is_named_as_given(edp_second, run_cli, tmp_path):
    code, stdout, err = run_cli("export", "--storage", edp_second, "--study", "s", "--trial", "best", "--pick",
                                "min-area", "--out", str(tmp_path / "e"), "--no-synth")
    assert code == 0, err
    assert "picked by --pick min-area on the Pareto set" in stdout and "default" not in stdout.split("best:")[1]

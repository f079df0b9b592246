"""verify closes the loop on the recorded figure (``accel_dse.verify._figure``): a trial whose recorded
``total_cycles`` is not this model's program walk fails before any simulation; a study recorded under
an older model is refused with that reason. Model only: the tampered trials never reach the RTL."""

from __future__ import annotations

import json
import sqlite3

import optuna
from report_testlib import TINY_WORKLOAD, feasible, make_study

import perf_model
import workloads
from accel_dse.report import trial_config
from accel_dse.verify._figure import figure_problem, recorded_figure


def _best(url):
    return min(feasible(optuna.load_study(study_name="s", storage=url).get_trials()), key=lambda t: t.values[0])


def _edit_attr(path, number, key, edit):
    """Edit a finished trial's user attribute in the SQLite file, as a hand editing the study would."""
    with sqlite3.connect(path) as db:
        (trial_id,) = db.execute("SELECT trial_id FROM trials WHERE number = ?", (number,)).fetchone()
        (value,) = db.execute("SELECT value_json FROM trial_user_attributes WHERE trial_id = ? AND key = ?",
                              (trial_id, key)).fetchone()
        new = edit(json.loads(value))
        if new is None:
            db.execute("DELETE FROM trial_user_attributes WHERE trial_id = ? AND key = ?", (trial_id, key))
        else:
            db.execute("UPDATE trial_user_attributes SET value_json = ? WHERE trial_id = ? AND key = ?",
                       (json.dumps(new), trial_id, key))


def test_an_honest_study_records_the_program_walk(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=6)
    for trial in feasible(optuna.load_study(study_name="s", storage=url).get_trials()):
        config = trial_config(trial, study="s")
        walk = perf_model.evaluate(config, workloads.resolve(TINY_WORKLOAD)).total["total_cycles"]
        assert recorded_figure(trial, TINY_WORKLOAD) == walk > 0
        assert trial.user_attrs["figure_model"] == perf_model.FIGURE_MODEL
        assert figure_problem(trial, config, TINY_WORKLOAD) == ""
        assert recorded_figure(trial, "mlp") is None  # a workload the study did not score: nothing recorded


def test_verify_fails_a_tampered_trial_and_refuses_an_older_models(tmp_path, sim_work):
    from accel_dse.verify import verify_top

    path = tmp_path / "study.db"
    url = f"sqlite:///{path}"
    make_study(url, trials=6)
    best = _best(url)
    walk = recorded_figure(best, TINY_WORKLOAD)

    def tamper(scored):
        scored[TINY_WORKLOAD]["total_cycles"] = walk * 1.01  # 1 % better than the walk
        return scored

    _edit_attr(path, best.number, "workloads", tamper)
    (result,) = verify_top(url, "s", 1, scale=1.0, simulator="icarus", work_dir=sim_work, synth=False)
    assert result.trial == best.number and not result.passed and result.status == "fail"
    assert result.cycles_recorded == walk * 1.01 and result.cycles_rtl is None  # refused before the RTL ran
    assert f"recorded total_cycles {walk * 1.01:,.0f}" in result.reason and f"program walk {walk:,.0f}" in result.reason
    stored = optuna.load_study(study_name="s", storage=url).user_attrs[f"accel_dse.verify.{best.number}"]
    assert stored["passed"] is False and "not the program walk" in stored["reason"]

    _edit_attr(path, best.number, "workloads", lambda scored: scored | {
        TINY_WORKLOAD: scored[TINY_WORKLOAD] | {"total_cycles": walk}})  # honest figure again ...
    _edit_attr(path, best.number, "figure_model", lambda _: None)  # ... but recorded before the one figure
    (result,) = verify_top(url, "s", 1, scale=1.0, simulator="icarus", work_dir=sim_work, synth=False, record=False)
    assert not result.passed and "recorded under an older model" in result.reason and result.cycles_rtl is None


def test_a_whole_program_from_dram_is_held_to_the_recorded_figure(monkeypatch):
    """The RTL's CYCLES_TOTAL of the whole workload's programs against the recorded figure (the
    simulator replaced by a report of its counters: model only)."""
    from types import SimpleNamespace

    import accel_dse.simulate
    from accel_dse.design_files import load_design
    from accel_dse.verify._run import _verify_one

    def fake(total, *, host_port=False):
        op = SimpleNamespace(name="gemm", status="pass", reason="", cycles_rtl=61,
                             cycles_total_rtl=None if host_port else total)
        totals = {"ops": 1, "pass": 1, "mismatches": 0, "cycles_rtl": 61, "cycles_model": 61,
                  "cycles_total_rtl": 0 if host_port else total, "runs_simulated": 1, "runs_total": 1}
        return lambda *a, **k: SimpleNamespace(ops=[op], passed=True, run_dir="", totals=lambda: totals)

    how = {"workload": TINY_WORKLOAD, "simulator": "icarus", "max_ops": None, "timeout": None, "work_dir": None,
           "synth": False, "fpga": None, "fpga_device": None, "recorded": 310.0}
    config = load_design("tiny")
    monkeypatch.setattr(accel_dse.simulate, "simulate", fake(310))
    assert _verify_one(config, 0, 0, True, scale=1.0, **how).passed
    monkeypatch.setattr(accel_dse.simulate, "simulate", fake(311))
    result = _verify_one(config, 0, 0, True, scale=1.0, **how)
    assert not result.passed and result.status == "fail"
    assert result.reason == "the RTL's total 311 cycles is not the figure the study recorded, 310"
    assert _verify_one(config, 0, 0, True, scale=0.5, **how).passed  # a scaled program: not the recorded one
    monkeypatch.setattr(accel_dse.simulate, "simulate", fake(311, host_port=True))
    assert _verify_one(config, 0, 0, True, scale=1.0, **how).passed  # the host port counts no total

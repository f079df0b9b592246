"""Multi-fidelity verification: top-K designs simulated in RTL and synthesised, results in the study."""

from __future__ import annotations

import json

import optuna
from report_testlib import TINY_WORKLOAD, feasible, make_study, pareto_numbers

from tests.cli_testlib import one_line_error


def _pareto_in_order(url):
    trials = feasible(optuna.load_study(study_name="s", storage=url).get_trials())
    seen, unique = set(), []
    for t in trials:
        if t.user_attrs["config_hash"] not in seen:
            seen.add(t.user_attrs["config_hash"])
            unique.append(t)
    return pareto_numbers(unique, [1.0, 1.0]), {t.number: t for t in unique}


def test_verify_top_2_records_rtl_results(tmp_path, sim_work, run_cli):
    from accel_dse.verify import verify_top

    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, objectives=["latency", "area"], trials=12)
    front, trials = _pareto_in_order(url)
    assert len(front) >= 2
    results = verify_top(url, "s", 2, scale=1.0, simulator="icarus", work_dir=sim_work, jobs=2)  # two at once
    assert len(results) == 2
    # Pareto set first, in the order of the first objective.
    expected = sorted(front, key=lambda n: (trials[n].values[0], trials[n].values[1]))[:2]
    assert [r.trial for r in results] == expected
    for r in results:
        assert r.passed and r.status == "pass" and r.pareto
        assert r.ops == r.ops_passed == 1 and r.mismatches == 0
        assert r.cycles_rtl == r.cycles_model and r.cycles_rtl > 0
        # the recorded figure is the one verify held to the program walk before simulating
        assert r.cycles_recorded == trials[r.trial].user_attrs["workloads"][TINY_WORKLOAD]["total_cycles"] > 0
        assert r.synth["cells"] > 0 and r.synth["transistors"] > 0
        assert r.workload == TINY_WORKLOAD and r.simulator == "icarus"
    attrs = optuna.load_study(study_name="s", storage=url).user_attrs
    for r in results:
        stored = attrs[f"accel_dse.verify.{r.trial}"]
        assert stored["passed"] is True and stored["cycles_rtl"] == r.cycles_rtl
        assert stored["config_hash"] == trials[r.trial].user_attrs["config_hash"]
    code, stdout, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(tmp_path / "rep"),
                                "--json")
    assert code == 0, err
    report = json.loads(stdout)
    assert set(report["verification"]) == {str(r.trial) for r in results}
    assert report["rtl_failed"] == []
    rows = {row["trial"]: row for row in report["top"]}
    assert all(rows[r.trial]["rtl"]["passed"] for r in results)


def test_a_design_failing_rtl_verification_is_flagged(tmp_path, sim_work, run_cli, monkeypatch):
    import accel_dse.simulate
    import rtl_gen

    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=6)
    real = accel_dse.simulate.simulate

    def broken_pe(design, workload, **kwargs):
        return real(design, workload, fault=rtl_gen.Fault(row=0, col=0, bit=2, stuck=1), **kwargs)

    monkeypatch.setattr(accel_dse.simulate, "simulate", broken_pe)
    code, stdout, err = run_cli("verify", "--storage", url, "--study", "s", "--top", "1", "--scale", "1",
                                "--simulator", "icarus", "--work-dir", str(sim_work), "--no-synth")
    assert code == 1, err
    best = min(feasible(optuna.load_study(study_name="s", storage=url).get_trials()), key=lambda t: t.values[0])
    assert f"RTL VERIFICATION FAILED: trial {best.number}" in stdout
    assert "outputs differ from JAX" in stdout
    stored = optuna.load_study(study_name="s", storage=url).user_attrs[f"accel_dse.verify.{best.number}"]
    assert stored["passed"] is False and stored["status"] == "fail" and stored["mismatches"] > 0
    code, stdout, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(tmp_path / "rep"))
    assert code == 0, err
    assert f"RTL VERIFICATION FAILED: trial {best.number}" in stdout
    assert "RTL VERIFICATION FAILED" in (tmp_path / "rep" / "index.html").read_text()


def test_verify_bad_input(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=3)
    base = ("verify", "--storage", url, "--simulator", "icarus")
    assert "--top must be a positive integer, not 0" in one_line_error(*run_cli(*base, "--study", "s", "--top", "0"))
    assert "--top must be an integer" in one_line_error(*run_cli(*base, "--study", "s", "--top", "two"))
    assert "(0, 1]" in one_line_error(*run_cli(*base, "--study", "s", "--top", "1", "--scale", "2"))
    line = one_line_error(*run_cli(*base, "--study", "other", "--top", "1"))
    assert "no study 'other'" in line and "studies: s" in line
    assert optuna.load_study(study_name="s", storage=url).user_attrs.keys().isdisjoint(
        {f"accel_dse.verify.{n}" for n in range(3)})


def test_verify_full_scale_records_the_sampled_mode(tmp_path, sim_work, run_cli):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=6)
    code, stdout, err = run_cli("verify", "--storage", url, "--study", "s", "--top", "1", "--full-scale",
                                "--simulator", "icarus", "--work-dir", str(sim_work), "--no-synth", "--json")
    assert code == 0, err
    (result,) = json.loads(stdout)
    assert result["passed"] and result["mode"] == "sampled" and result["scale"] == 1.0
    assert 0 < result["runs_simulated"] <= result["runs_total"]
    assert "full-scale sampled check" in err
    stored = optuna.load_study(study_name="s", storage=url).user_attrs[f"accel_dse.verify.{result['trial']}"]
    assert stored["mode"] == "sampled" and stored["runs_total"] == result["runs_total"]
    code, stdout, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(tmp_path / "rep"))
    assert code == 0, err
    assert ">sampled</td>" in (tmp_path / "rep" / "index.html").read_text()
    line = one_line_error(*run_cli("verify", "--storage", url, "--study", "s", "--top", "1", "--full-scale",
                                   "--scale", "0.5", "--simulator", "icarus"))
    assert "--full-scale" in line and "0.5" in line


def test_the_time_left_counts_each_design_at_the_mean_of_those_checked_jobs_at_a_time():
    from types import SimpleNamespace

    from accel_dse.verify._run import _time_left

    done = [SimpleNamespace(seconds=600.0), SimpleNamespace(seconds=1200.0)]  # a mean of 15 min a design
    assert _time_left(done, 8, 2) == "about 60.0 min left for 8 more (2 at a time, 15.0 min a design so far)"
    # one design left runs alone, whatever --jobs says
    assert _time_left(done, 1, 4) == "about 15.0 min left for 1 more (1 at a time, 15.0 min a design so far)"


def test_with_jobs_the_other_designs_build_only_after_the_first(tmp_path, monkeypatch):
    """verify --jobs 2: the first design builds alone; a second design's build (not in the cache)
    starts only once the first one's ended, so it reuses its compiled modules through ccache."""
    import threading
    import time as clock

    import accel_dse.simulate
    from accel_dse.simulate.runner import build as _build
    from accel_dse.verify import verify_top
    from accel_spec.errors import SimulationError

    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=12)
    events: list[tuple[str, str]] = []
    guard = threading.Lock()

    def fake_simulate(design, workload, **kwargs):
        before, after = _build._HOOKS.get() or (lambda: None, lambda: None)  # build_design calls them
        try:
            before()
            with guard:
                events.append(("start", design.config_hash))
            clock.sleep(0.3)
            with guard:
                events.append(("end", design.config_hash))
        finally:
            after()
        raise SimulationError("stand-in: no simulation")

    monkeypatch.setattr(accel_dse.simulate, "simulate", fake_simulate)
    results = verify_top(url, "s", 3, scale=1.0, simulator="icarus", work_dir=tmp_path / "w", jobs=2, synth=False,
                         record=False)
    assert [r.status for r in results] == ["error"] * 3
    first = events[0][1]
    assert events[:2] == [("start", first), ("end", first)], events  # nothing starts while the first builds
    assert len(events) == 6


def test_a_malformed_cache_bound_is_refused_before_any_design(tmp_path, run_cli, monkeypatch):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=4)
    monkeypatch.setenv("ACCEL_DSE_SIM_CACHE_MB", "big")
    code, out, err = run_cli("verify", "--storage", url, "--study", "s", "--top", "1", "--simulator", "icarus",
                             "--work-dir", str(tmp_path / "work"), "--no-synth")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["accel-dse: error: ACCEL_DSE_SIM_CACHE_MB must be a positive number of MiB, "
                                        "not 'big'"]
    assert not (tmp_path / "work").exists()

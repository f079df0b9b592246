"""``accel-dse report`` and the study view: plots, tables, Pareto sets, interrupted studies, bad input."""

from __future__ import annotations

import json
import math

import optuna
import pytest
from report_testlib import add_fail_and_running, feasible, make_study, pareto_numbers

from tests.cli_testlib import one_line_error

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _load(url):
    return optuna.load_study(study_name="s", storage=url if not url.startswith("journal:") else _journal(url))


def _journal(url):
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    return JournalStorage(JournalFileBackend(url[len("journal:"):]))


def _check_pngs(out):
    for name in ("pareto.png", "history.png", "breakdown.png", "roofline.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC), name
        assert len(data) > 5000, name  # a drawn figure, not an empty canvas


def test_report_on_finished_single_objective_study(single_study, run_cli, tmp_path):
    url, _ = single_study
    out = tmp_path / "rep"
    code, stdout, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(out))
    assert code == 0, err
    _check_pngs(out)
    study = _load(url)
    good = feasible(study.get_trials())
    best = min(good, key=lambda t: t.values[0])
    report = json.loads((out / "report.json").read_text())
    assert report["best"]["trial"] == best.number
    # Top table: the 10 best distinct designs in value order.
    values = [r["values"]["edp"] for r in report["top"]]
    assert values == sorted(values) and values[0] == pytest.approx(best.values[0])
    assert len({r["config_hash"] for r in report["top"]}) == len(report["top"])
    assert report["n_trials"] == 24
    states = {t.state for t in study.trials}
    assert report["states"] == {s.name: sum(t.state == s for t in study.trials) for s in states}
    page = (out / "index.html").read_text()
    for image in ("pareto.png", "history.png", "breakdown.png", "roofline.png"):
        assert f"src='{image}'" in page
    assert f"<td>{best.number}</td>" in page
    assert f"best: trial {best.number}" in stdout
    assert not list(tmp_path.glob(".rep.tmp-*"))


def test_breakdown_and_roofline_are_consistent_with_the_recorded_metrics(single_study, tmp_path):
    from accel_dse.report import build_report, load_study

    url, _ = single_study
    report = build_report(load_study(url, "s"))
    bd, roof = report["breakdown"], report["roofline"]
    best = _load(url).trials[report["best"]["trial"]]
    assert bd["workload"] == "mlp" and bd["design"] == best.user_attrs["config"]
    ops = bd["ops"]
    assert len(ops) == 4  # mlp: four fully connected layers
    # The scalar per-op figures add up to what the sweep's vectorised evaluation recorded.
    recorded = best.user_attrs["metrics"]
    assert sum(op["total_cycles"] for op in ops) == pytest.approx(recorded["total_cycles"], rel=1e-9)
    assert sum(op["energy_pj"] for op in ops) == pytest.approx(recorded["energy_pj"], rel=1e-9)
    assert sum(op["macs"] for op in ops) == 128 * (784 * 1024 + 1024 * 1024 * 2 + 1024 * 10)
    assert sum(op["energy_share"] for op in ops) == pytest.approx(1.0)
    assert sum(op["cycle_share"] for op in ops) == pytest.approx(1.0)
    for op in ops:
        assert op["compute_cycles"] + op["stall_cycles"] == pytest.approx(op["total_cycles"])
        assert op["stall_share"] == pytest.approx(op["stall_cycles"] / op["total_cycles"])
    cfg = best.user_attrs["config"]
    assert roof["peak_macs_per_cycle"] == cfg["rows"] * cfg["cols"]
    for p in roof["points"]:
        # Nothing beats the roof: min(peak, bandwidth x intensity).
        assert p["macs_per_cycle"] <= min(cfg["rows"] * cfg["cols"], cfg["dram_bytes_per_cycle"] * p["intensity"]) \
            * (1 + 1e-9)


def test_report_on_multi_objective_journal_study_shows_the_pareto_set(multi_study, run_cli, tmp_path):
    url, _ = multi_study
    out = tmp_path / "rep"
    code, stdout, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(out), "--json")
    assert code == 0, err
    report = json.loads(stdout)
    study = _load(url)
    good = feasible(study.get_trials())
    # One design per config hash (the earliest), as the study view deduplicates.
    seen, unique = set(), []
    for t in good:
        if t.user_attrs["config_hash"] not in seen:
            seen.add(t.user_attrs["config_hash"])
            unique.append(t)
    assert set(report["pareto"]) == pareto_numbers(unique, [1.0, 1.0])
    assert {r["trial"] for r in report["top"]} == set(report["pareto"])
    assert report["history"]["by_sampler"].keys() == {"nsga2"}
    _check_pngs(out)
    # Default pick: the Pareto design with the least EDP.
    edp = {t.number: t.user_attrs["metrics"]["edp"] for t in unique if t.number in report["pareto"]}
    assert report["best"]["trial"] == min(edp, key=edp.get)


def test_report_on_an_interrupted_study(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=6)
    failed, running = add_fail_and_running(url)
    out = tmp_path / "rep"
    code, stdout, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(out), "--json")
    assert code == 0, err
    report = json.loads(stdout)
    assert report["states"] == {"COMPLETE": 6, "FAIL": 1, "RUNNING": 1}
    assert report["interrupted"] is True
    assert any("RUNNING" in note for note in report["notes"])
    assert failed not in {r["trial"] for r in report["top"]} and running not in {r["trial"] for r in report["top"]}
    _check_pngs(out)


def test_report_of_a_study_without_feasible_trials_still_writes_every_file(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=3, constraints=["area_mm2 <= 0.000001"])  # nothing fits that
    out = tmp_path / "rep"
    code, stdout, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(out))
    assert code == 0, err
    assert "no feasible" in stdout
    for name in ("pareto.png", "history.png", "breakdown.png", "roofline.png"):
        assert (out / name).read_bytes().startswith(PNG_MAGIC)
    assert (out / "index.html").stat().st_size > 0


def test_history_is_split_by_sampler(tmp_path):
    from accel_dse.report import build_report, load_study

    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=4, sampler="grid")  # grid writes its kept designs (source = grid)
    grid_trials = len(_load(url).trials)
    make_study(url, trials=grid_trials + 5, sampler="random")
    history = build_report(load_study(url, "s"))["history"]["by_sampler"]
    # the sweep records each trial's sampler, so random trials are named, not guessed as "tpe/random"
    assert set(history) == {"grid", "random"}
    assert len(history["grid"]) == grid_trials and len(history["random"]) == 5


def test_rtl_failure_is_flagged_loudly(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=6)
    study = _load(url)
    best = min(feasible(study.get_trials()), key=lambda t: t.values[0])
    study.set_user_attr(f"accel_dse.verify.{best.number}", {"passed": False, "status": "fail", "design": "x",
                                                            "reason": "op gemm: 3 of 64 outputs differ from JAX"})
    out = tmp_path / "rep"
    code, stdout, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(out))
    assert code == 0, err
    assert f"RTL VERIFICATION FAILED: trial {best.number}" in stdout
    page = (out / "index.html").read_text()
    assert "RTL VERIFICATION FAILED" in page and "class='rtlfail'" in page
    assert json.loads((out / "report.json").read_text())["rtl_failed"] == [best.number]


def test_force_replaces_an_old_report(single_study, run_cli, tmp_path):
    url, _ = single_study
    out = tmp_path / "rep"
    out.mkdir()
    (out / "old.txt").write_text("old")
    code, _, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(out))
    line = one_line_error(code, "", err)
    assert "not empty" in line and "--force" in line
    assert (out / "old.txt").read_text() == "old"
    line = one_line_error(*run_cli("report", "--storage", url, "--study", "s", "--out", str(out), "--force"))
    assert "not an accel-dse output" in line  # --force never deletes a file accel-dse did not write
    assert (out / "old.txt").read_text() == "old"
    (out / "old.txt").unlink()
    code, _, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(out))
    assert code == 0, err
    first = (out / "report.json").stat().st_ino
    code, _, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(out), "--force")
    assert code == 0, err  # an earlier report: replaced
    assert (out / "index.html").exists() and (out / "report.json").stat().st_ino != first


def test_bad_input(single_study, run_cli, tmp_path):
    url, _ = single_study
    out = tmp_path / "rep"
    line = one_line_error(*run_cli("report", "--storage", url, "--study", "nope", "--out", str(out)))
    assert "no study 'nope'" in line and "studies: s" in line
    missing = tmp_path / "missing.db"
    line = one_line_error(*run_cli("report", "--storage", f"sqlite:///{missing}", "--study", "s", "--out", str(out)))
    assert "not found" in line
    assert not missing.exists()  # reading never creates a storage
    afile = tmp_path / "afile"
    afile.write_text("x")
    line = one_line_error(*run_cli("report", "--storage", url, "--study", "s", "--out", str(afile)))
    assert "is a file" in line
    line = one_line_error(*run_cli("report", "--storage", url, "--study", "s", "--out", str(out), "--pick", "edp"))
    assert "min-NAME or max-NAME" in line
    assert not out.exists()


def test_pick_rules_choose_within_the_pareto_set(multi_study):
    from accel_dse.report import load_study
    from accel_spec.errors import ExportError

    url, _ = multi_study
    view = load_study(url, "s")
    front = view.pareto()
    assert view.best("min-area").number == min(front, key=lambda t: t.values[1]).number
    assert view.best("min-latency").number == min(front, key=lambda t: t.values[0]).number
    assert view.best("max-area").number == max(front, key=lambda t: t.values[1]).number
    with pytest.raises(ExportError, match="--pick min-edp"):
        view.best()
    with pytest.raises(ExportError, match="unknown objective or metric 'speed'"):
        view.best("min-speed")
    assert math.isfinite(view.pick_value(front[0], "edp"))


def test_report_on_a_plain_optuna_study(tmp_path, run_cli):
    """A study not written by accel-dse (no design attributes) still gets its Pareto plot and tables."""
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    study = optuna.create_study(study_name="s", storage=url, directions=["minimize", "minimize"])
    study.optimize(lambda t: (t.suggest_float("x", 0, 1), (1 - t.params["x"]) ** 2), n_trials=8)
    code, stdout, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(tmp_path / "r"), "--json")
    assert code == 0, err
    report = json.loads(stdout)
    assert [o["name"] for o in report["objectives"]] == ["value0", "value1"]
    # x and (1 - x)^2 trade off strictly: every trial is Pareto-optimal.
    assert set(report["pareto"]) == set(range(8))
    assert report["breakdown"] is None and any("workload" in n for n in report["notes"])
    _check_pngs_exist(tmp_path / "r")


def _check_pngs_exist(out):
    for name in ("pareto.png", "history.png", "breakdown.png", "roofline.png"):
        assert (out / name).read_bytes().startswith(PNG_MAGIC)

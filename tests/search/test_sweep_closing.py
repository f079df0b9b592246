"""The sweep's closing summary on a real small sweep: workload, units, infeasible reasons, next commands."""

from __future__ import annotations

import shlex

import optuna
import pytest

from accel_dse.cli._closing import WIDTH, reason_key
from accel_dse.units import column_scale

#: MLP at batch 4; SRAMs of 1 KiB make some designs infeasible (a tile does not fit), the area
#: bound makes others break a constraint (2.2 mm^2: the floor plan is the cells over 0.45).
SPACE = """name = "closing"
objectives = ["edp"]
constraints = ["area_mm2 <= 2.2"]
workloads = ["mlp:batch=4"]
[params]
rows = { low = 4, high = 64, scale = "pow2" }
cols = { low = 4, high = 64, scale = "pow2" }
dataflow = ["ws", "os", "is"]
ofmap_sram_kib = [1, 64]
ifmap_sram_kib = [1, 64]
clock_mhz = [500.0, 1000.0]
"""


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """One sweep of 30 random trials through the CLI, run as the demo does (a relative run
    directory): (stdout, run directory, the study)."""
    import contextlib
    import io
    import os

    from accel_dse.cli import main

    root = tmp_path_factory.mktemp("closing")
    (root / "s.toml").write_text(SPACE)
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["sweep", "--space", "s.toml", "--sampler", "random", "--seed", "3", "--trials", "30",
                         "--quiet", "--out-dir", "run"])
    finally:
        os.chdir(cwd)
    out_dir = root / "run"
    assert code == 0, err.getvalue()
    study = optuna.load_study(study_name="closing", storage=f"sqlite:///{out_dir / 'study.db'}")
    return out.getvalue(), out_dir, study


def test_every_line_fits_in_100_columns(swept):
    out, _, _ = swept
    assert max(len(line) for line in out.splitlines()) <= WIDTH


def test_names_the_workload_with_its_options_and_the_objective(swept):
    out, _, _ = swept
    lines = out.splitlines()
    assert "workload: mlp (batch=4, d_in=784, hidden=1024, layers=3, d_out=10, requant=1)" in lines
    assert "objective: minimize edp; constraints: area_mm2 <= 2.2" in lines


def test_counts_infeasible_designs_by_reason_apart_from_failures(swept):
    out, _, study = swept
    trials = study.get_trials()
    infeasible = [t for t in trials if t.state.name == "FAIL" and t.user_attrs.get("status") == "infeasible"]
    broke = [t for t in trials if t.state.name == "COMPLETE" and any(v > 0 for v in t.user_attrs["constraint_values"])]
    feasible = [t for t in trials if t.state.name == "COMPLETE" and t not in broke]
    assert infeasible and broke and feasible  # the space is made to give all three
    assert (f"trials: 30 (30 this run): {len(feasible)} feasible, {len(broke)} broke a constraint, "
            f"{len(infeasible)} infeasible design{'s' if len(infeasible) > 1 else ''}, 0 failed") in out
    assert f"broke (scored, not shown below): area_mm2 <= 2.2 x{len(broke)}" in out
    assert "infeasible designs (the design cannot run the workload; not errors), by kind, one example each:" in out
    # Every kind of reason once, with its count and its first trial's reason as recorded, figures
    # and all (never "#" for a number).
    by_kind: dict[str, list] = {}
    for t in sorted(infeasible, key=lambda t: t.number):
        by_kind.setdefault(reason_key(t.user_attrs["reason"]), []).append(t)
    assert len(by_kind) > 1 or len(infeasible) > 1  # counts and examples both tested
    flat = " ".join(out.split())
    for alike in by_kind.values():
        first, n = alike[0], len(alike)
        more = f"; {n - 1} more of this kind" if n > 1 else ""
        assert f"{n} {first.user_attrs['reason']} (trial {first.number}{more})" in flat
    assert "KiB) holds" in flat and "needs" in flat
    section = out.split("infeasible designs (")[1].split("best designs")[0]
    assert "#" not in section
    assert "FAILED" not in out


def test_reason_key_keeps_names_and_drops_figures():
    reason = ("resnet18: op 'conv1': the ofmap buffer (64 KiB) holds 64 words per half (double buffered) "
              "but the smallest tile (m x k x n = 128 x 128 x 64) needs 128")
    assert reason_key(reason) == ("resnet18: op 'conv1': the ofmap buffer holds # words per half "
                                  "(double buffered) but the smallest tile needs #")
    assert reason_key("mlp:batch=4: op 'fc.0': x (1 KiB)") == "mlp:batch=4: op 'fc.0': x"


def test_best_designs_in_engineering_units(swept):
    out, _, study = swept
    lines = out.splitlines()
    header = next(line for line in lines if line.strip().startswith("trial  design"))
    for unit in ("latency ms", "TOPS", "TOPS/W", "area mm²", "util %", "EDP "):
        assert unit in header, unit
    best = min((t for t in study.get_trials() if t.state.name == "COMPLETE"
                and all(v <= 0 for v in t.user_attrs["constraint_values"])), key=lambda t: t.value)
    row = lines[lines.index(header) + 2].split()
    assert int(row[0]) == best.number
    metrics = best.user_attrs["metrics"]
    energy = column_scale([metrics["energy_pj"] * 1e-12], "J", highest=1.0)
    assert f"energy {energy.unit}" in header
    assert float(row[2]) == pytest.approx(metrics["latency_s"] * 1e3, rel=0.06)
    assert float(row[3]) == pytest.approx(metrics["energy_pj"] * 1e-12 / energy.factor, rel=0.06)
    assert float(row[7]) == pytest.approx(metrics["utilization"] * 100, abs=0.06)
    assert "[mm^2]" not in out and "e-0" not in out


def test_next_commands_name_the_storage_and_study_and_run(swept, tmp_path, monkeypatch):
    out, out_dir, study = swept
    monkeypatch.chdir(out_dir.parent)
    text = out[out.index("\nnext:\n"):].replace("\\\n", " ")
    commands = [shlex.split(line) for line in text.splitlines() if line.strip().startswith("accel-dse")]
    assert [c[1] for c in commands] == ["report", "export"]
    storage = "sqlite:///run/study.db"
    for c in commands:
        assert c[c.index("--storage") + 1] == storage and c[c.index("--study") + 1] == "closing"
    from accel_dse.cli import main

    report = commands[0]
    report[report.index("--out") + 1] = str(tmp_path / "report")
    assert main(report[1:]) == 0  # the printed command works as printed (bar the --out here)
    assert (tmp_path / "report" / "index.html").is_file()


def test_a_rerun_that_adds_no_trial_says_how_to_continue(swept):
    import contextlib
    import io
    import os

    from accel_dse.cli import main

    _, out_dir, _ = swept
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(out_dir.parent)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["sweep", "--space", "s.toml", "--sampler", "random", "--seed", "3", "--trials", "30",
                         "--quiet", "--out-dir", "run"])
    finally:
        os.chdir(cwd)
    assert code == 0, err.getvalue()
    text = out.getvalue()
    assert "trials: 30 (0 this run)" in text
    assert "--trials 60 continues it" in text
    assert max(len(line) for line in text.splitlines()) <= WIDTH


def test_summary_columns_are_in_the_reports_units():
    """One design in the summary shows each figure as ``export`` and the report print it
    (``accel_dse.units.metric_text``: the one place a display unit is chosen)."""
    from types import SimpleNamespace

    from accel_dse.cli._closing import _metric_table
    from accel_dse.units import metric_text

    metrics = {"latency_s": 0.002904, "energy_pj": 5.734e9, "tops": 12.5, "tops_per_w": 1.23, "area_mm2": 2412.0,
               "utilization": 0.4123, "edp": 1.6e-5, "power_w": 0.0123}
    objectives = [SimpleNamespace(name="edp", metric="edp"), SimpleNamespace(name="power", metric="power_w")]
    space = SimpleNamespace(objectives=objectives, constraints=[], free_params=[])
    best = [{"trial": 3, "design": {"rows": 4, "cols": 4, "dataflow": "ws"}, "metrics": metrics,
             "values": {"edp": metrics["edp"], "power": metrics["power_w"]}}]
    headers, rows = _metric_table(best, space)
    expected = {"latency": "2.90 ms", "energy": "5.73 mJ", "TOPS": "12.5 TOPS", "TOPS/W": "1.23 TOPS/W",
                "area": "2,412 mm²", "util": "41.2 %", "EDP": "16.0 µJ·s", "power": "12.3 mW"}
    for (metric, shown), head, cell in zip(
            [("latency_s", "latency"), ("energy_pj", "energy"), ("tops", "TOPS"), ("tops_per_w", "TOPS/W"),
             ("area_mm2", "area"), ("utilization", "util"), ("edp", "EDP"), ("power_w", "power")],
            headers[2:], rows[0][2:], strict=True):
        unit = head.removeprefix(shown).strip() or shown
        assert f"{cell} {unit}" == expected[shown] == metric_text(metric, metrics[metric]), head
        assert head.split().count(unit) == 1  # never "TOPS/W TOPS/W"

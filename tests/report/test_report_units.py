"""The report agrees with itself: one unit per metric in the table, the plots and the text; headers
that do not repeat their unit; tick labels that do not overlap; every workload of a study shown;
fronts of three objectives not drawn as staircases; the sweep's outcome words; "best" chosen as
``export --trial best --pick`` chooses it, and said so."""

from __future__ import annotations

import json
import re

import pytest
from report_testlib import TINY_PARAMS, add_fail_and_running

#: Workloads of the three-workload study (small GEMMs and the small MLP: the model only).
WORKLOADS = ["gemm:m=8,k=12,n=8", "gemm:m=16,k=32,n=16", "mlp"]
PREFIX = {"T": 1e12, "G": 1e9, "M": 1e6, "k": 1e3, "": 1.0, "m": 1e-3, "µ": 1e-6, "n": 1e-9, "p": 1e-12}


@pytest.fixture(scope="module")
def three_study(tmp_path_factory):
    """A three-objective (EDP, area, latency) study over three workloads, with one infeasible trial."""
    import workloads
    from accel_dse.search import ModelEvaluator, SweepConfig, parse_space, run_sweep

    url = f"sqlite:///{tmp_path_factory.mktemp('three') / 'study.db'}"
    doc = {"name": "t", "objectives": ["edp", "area", "latency"], "workloads": [{"spec": w} for w in WORKLOADS],
           "params": TINY_PARAMS, "constraints": []}
    space = parse_space(doc, source="test space")
    evaluator = ModelEvaluator([(w.spec, w.weight, workloads.resolve(w.spec)) for w in space.workloads])
    run_sweep(SweepConfig(space=space, evaluator=evaluator, storage=url, study_name="s", sampler="random",
                          n_trials=14, seed=3))
    add_fail_and_running(url)
    return url


@pytest.fixture(scope="module")
def written(three_study, tmp_path_factory):
    """``report`` run once on the study (in-process): ``(stdout, report.json, index.html, out dir)``."""
    import contextlib
    import io

    from accel_dse.cli import main

    out = tmp_path_factory.mktemp("rep") / "rep"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["report", "--storage", three_study, "--study", "s", "--out", str(out)])
    assert code == 0, stderr.getvalue()
    return stdout.getvalue(), json.loads((out / "report.json").read_text()), (out / "index.html").read_text(), out


def _png_axes(path):
    from PIL import Image

    with Image.open(path) as image:
        return json.loads(image.text["accel-dse axes"])


def _headers(page):
    return [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th>(.*?)</th>", page)]


def test_one_unit_per_metric_in_table_plots_and_text(written):
    stdout, report, page, out = written
    units = report["units"]
    # the unit is the SI prefix putting the largest EDP the report shows in [1, 1000) J·s-prefixed units
    edps = [p["values"][0] for p in report["scatter"]] + [r["values"]["edp"] for r in report["top"]]
    prefix = units["edp"]["unit"].removesuffix("J·s")
    assert 1.0 <= max(edps) / PREFIX[prefix] < 1000.0
    headers = _headers(page)
    for name, metric in (("edp", "edp"), ("area", "area_mm2"), ("latency", "latency_s")):
        unit = units[metric]["unit"]
        assert f"{name} [{unit}]" in headers  # the table
        assert any(f"{name} [{unit}]" in label for axes in _png_axes(out / "pareto.png")
                   for label in axes)  # the Pareto plot
        assert any(f"{name} [{unit}]" in axes[1] for axes in _png_axes(out / "history.png"))
        assert f"{name} {unit}" in stdout  # the command's own table
    # a table cell is the stored value in that unit
    first = report["top"][0]
    row = next(r for r in re.findall(r"<tr[^>]*>(.*?)</tr>", page) if f"<td>{first['trial']}</td>" in r)
    cells = [re.sub(r"<[^>]+>", "", c).replace(",", "") for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
    shown = float(cells[headers.index(f"edp [{units['edp']['unit']}]")])
    assert shown == pytest.approx(first["values"]["edp"] / PREFIX[prefix], rel=0.05)


def test_no_header_repeats_its_unit(written):
    _, _, page, _ = written
    headers = _headers(page)
    assert "TOPS/W" in headers
    for h in headers:
        found = re.fullmatch(r"(.*) \[(.*)\]", h)
        assert not found or found.group(1).strip() != found.group(2), h


def test_every_workload_is_broken_down(written):
    _, report, page, out = written
    assert [w["workload"] for w in report["workload_breakdowns"]] == WORKLOADS
    for spec in WORKLOADS:
        assert re.search(rf"<h2>Per-op breakdown: [^<]* on {re.escape(spec)}</h2>", page), spec
    assert len(_png_axes(out / "roofline.png")) == len(WORKLOADS)
    assert len(_png_axes(out / "breakdown.png")) == 2 * len(WORKLOADS)  # cycles and energy each


def test_three_objective_front_is_no_staircase(three_study):
    from accel_dse.report import build_report, load_study
    from accel_dse.report._plots import pareto_figure

    fig = pareto_figure(build_report(load_study(three_study, "s")))
    axes = [ax for ax in fig.get_axes() if ax.axison]
    assert len(axes) == 3  # each pair of objectives
    for ax in axes:
        assert all(line.get_drawstyle() == "default" for line in ax.get_lines()), "a staircase is drawn"
        assert any("front of all objectives" in t for t in ax.get_legend_handles_labels()[1])
    assert "projection" in fig._suptitle.get_text()


def _overlaps(fig):
    """Pairs of visible tick labels of one axis whose drawn boxes intersect."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    bad = []
    for ax in fig.get_axes():
        for axis in (ax.xaxis, ax.yaxis):
            boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in axis.get_ticklabels(which="both")
                     if t.get_visible() and t.get_text()]
            boxes = [(text, box) for text, box in boxes
                     if ax.bbox.x0 - 50 <= box.x0 <= ax.bbox.x1 + 50 and ax.bbox.y0 - 50 <= box.y0 <= ax.bbox.y1 + 50]
            for i, (a, box_a) in enumerate(boxes):
                bad += [(a, b) for b, box_b in boxes[i + 1:] if box_a.overlaps(box_b)]
    return bad


@pytest.mark.parametrize("low,high", [(2.5, 30.0), (3.0, 40.0), (0.9, 9.5), (1.0, 5000.0)])
def test_log_axis_tick_labels_do_not_overlap(low, high):
    """An EDP axis spanning one decade or more is logarithmic; its labels never run together."""
    from accel_dse.report._plots import pareto_figure

    n = 12
    edp = [low * (high / low) ** (i / (n - 1)) * 1e-6 for i in range(n)]
    area = [4.0 - 3.0 * i / (n - 1) for i in range(n)]
    report = {"study": "t", "n_feasible": n, "best": None, "rtl_failed": [], "pareto": list(range(n)),
              "objectives": [{"name": "edp", "metric": "edp", "direction": "minimize"},
                             {"name": "area", "metric": "area_mm2", "direction": "minimize"}],
              "scatter": [{"trial": i, "values": [edp[i], area[i]], "metrics": {}} for i in range(n)]}
    fig = pareto_figure(report)
    assert fig.get_axes()[0].get_xscale() == "log"
    assert _overlaps(fig) == []


def test_outcome_words_are_the_sweeps(three_study, written):
    stdout, report, page, _ = written
    # the study: 14 model trials (TINY_PARAMS: every design runs these GEMMs), 1 infeasible, 1 running
    assert "1 infeasible design" in stdout and "0 failed" in stdout and "1 running" in stdout
    assert "FAIL)" not in stdout and " FAIL," not in stdout
    assert "1 infeasible design" in page
    from accel_dse.cli._closing import trial_outcomes
    from accel_dse.report import load_study
    from accel_dse.trial_outcomes import outcome_words

    view = load_study(three_study, "s")
    assert report["outcomes"] == outcome_words(trial_outcomes(view.trials(), view.constraints))


def test_best_is_what_export_picks_and_says_how(written):
    from accel_dse.export import design_from_study

    stdout, report, page, _ = written
    best = report["best"]
    assert best["pick"] == "min-edp"
    command = re.search(r"export it with: accel-dse (export .*?) \(or --trial (\d+)\)", stdout)
    assert command, stdout
    assert int(command.group(2)) == best["trial"]
    args = command.group(1).split()
    exported = design_from_study(args[args.index("--storage") + 1], args[args.index("--study") + 1],
                                 args[args.index("--trial") + 1], pick=args[args.index("--pick") + 1])
    assert exported.info["trial"] == best["trial"]
    # and that trial has the least EDP of the Pareto set (the rule, checked from the rows)
    pareto_edp = {r["trial"]: r["values"]["edp"] for r in report["top"] if r["pareto"]}
    assert best["trial"] == min(pareto_edp, key=pareto_edp.get)
    assert "export it with" in page


@pytest.mark.parametrize("metric,value,text", [
    ("latency_s", 0.002904, "2.90 ms"), ("energy_pj", 5.734e9, "5.73 mJ"), ("edp", 1.6e-5, "16.0 µJ·s"),
    ("utilization", 0.4123, "41.2 %"), ("tops_per_w", 1.234, "1.23 TOPS/W"), ("area_mm2", 2412.3, "2,412 mm²"),
])
def test_one_value_in_its_display_unit(metric, value, text):
    """What ``export`` and the exported README print for one figure (never ``5.734e+09 pJ``)."""
    from accel_dse.units import metric_text

    assert metric_text(metric, value) == text


def test_system_prints_percent_and_units(run_cli):
    code, out, err = run_cli("system", "evaluate", "--system", "tpu-v5e-pod", "--dims", "2,2", "--model", "llama7b",
                             "--mode", "serve", "--batch", "8", "--gen", "4")
    assert code == 0, err
    assert re.search(r"^mfu\s+\d+\.\d %$", out, flags=re.MULTILINE), out
    assert re.search(r"^ttft_s\s+\d[\d.]* [mµ]?s$", out, flags=re.MULTILINE), out
    assert "e+" not in out and "share %" in out


def test_the_default_pick_is_min_edp_whenever_edp_is_recorded():
    """``report`` and ``export --trial best`` (``StudyView.default_pick``): the least EDP among the
    Pareto designs whenever they record EDP (an objective or a metric); else the first objective
    in its own direction (``max-`` for a maximised one: its best, never its worst)."""
    from types import SimpleNamespace

    from accel_dse.study_view import StudyView

    def pick(*objectives: tuple[str, str], edp: bool = True) -> str | None:
        view = SimpleNamespace(multi_objective=len(objectives) > 1,
                               objectives=[SimpleNamespace(name=n, direction=d) for n, d in objectives],
                               pareto=lambda: ["t"], pick_value=lambda _t, key: 1.0 if edp and key == "edp" else None)
        return StudyView.default_pick(view)  # type: ignore[arg-type]

    assert pick(("tops_per_w", "maximize"), ("edp", "minimize")) == "min-edp"
    assert pick(("latency", "minimize"), ("edp", "minimize")) == "min-edp"
    assert pick(("latency", "minimize"), ("area", "minimize")) == "min-edp"  # EDP a recorded metric
    assert pick(("tops_per_w", "maximize"), ("area", "minimize"), edp=False) == "max-tops_per_w"
    assert pick(("latency", "minimize"), ("area", "minimize"), edp=False) == "min-latency"
    assert pick(("edp", "minimize"),) is None

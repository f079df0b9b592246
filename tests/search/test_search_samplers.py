"""Contract tests every sampler passes (a few dozen trials on SQLite), resume, Pareto, grid."""

from __future__ import annotations

import itertools
import math
import socket

import numpy as np
import pytest
from optuna.trial import TrialState
from search_testlib import SMALL_SPACE, make_space, standin_evaluator

from accel_dse.search import SweepConfig, best_trials, grid_search, pareto_mask, run_sweep
from accel_spec.config import FIELD_NAMES, ArrayConfig
from accel_spec.errors import SearchError

LOOP_SAMPLERS = ["tpe", "nsga2", "cmaes", "random", "rl"]
CONSTRAINED = make_space(constraints=["area_mm2 <= 1.5", "power_w <= 0.5"])


def _config(tmp_path, space, sampler, n, storage=None, **kw):
    """A sweep of the stand-in model on an SQLite study in ``tmp_path`` (or ``storage``: ``"memory:"``
    for the tests of where the samplers go, which give the same trials on either, ~6x faster)."""
    return SweepConfig(space=space, evaluator=standin_evaluator(space),
                       storage=storage or f"sqlite:///{tmp_path}/study.db",
                       study_name="t", sampler=sampler, n_trials=n, seed=7, **kw)


def _recomputed(space, trial):
    """Metrics of a trial's design recomputed from its params alone."""
    config = space.design(trial.params)
    return config, standin_evaluator(space).evaluate(config)


@pytest.mark.parametrize("sampler", LOOP_SAMPLERS)
def test_sampler_contract(tmp_path, sampler):
    result = run_sweep(_config(tmp_path, CONSTRAINED, sampler, 30))
    trials = result.study.get_trials()
    assert [t.number for t in trials] == list(range(30))
    assert result.ran == 30
    for t in trials:
        assert t.state in (TrialState.COMPLETE, TrialState.FAIL)
        assert t.user_attrs["host"] == socket.gethostname() and isinstance(t.user_attrs["pid"], int)
        config, ev = _recomputed(CONSTRAINED, t)
        assert t.user_attrs["config"] == config.to_dict()
        assert t.user_attrs["config_hash"] == config.config_hash
        if t.state == TrialState.COMPLETE:
            assert t.value == pytest.approx(ev.metrics["edp"], rel=1e-12)
            assert t.user_attrs["workloads"]["a"]["edp"] == pytest.approx(ev.metrics["edp"], rel=1e-12)
            violations = [ev.metrics["area_mm2"] - 1.5, ev.metrics["power_w"] - 0.5]
            assert t.user_attrs["constraint_values"] == pytest.approx(violations)
            # The record Optuna's samplers read (TPE, NSGA-II, best-trial logic): each excess
            # relative to its bound, so its sign must be the sign of the violation.
            assert t.system_attrs["constraints"] == pytest.approx([violations[0] / 1.5, violations[1] / 0.5])
            assert [v > 0 for v in t.system_attrs["constraints"]] == [v > 0 for v in violations]
    best = best_trials(result.study, CONSTRAINED, top=3)
    assert best, "a few dozen trials find at least one feasible design in this space"
    feasible_values = []
    for t in trials:
        if t.state != TrialState.COMPLETE:
            continue
        _, ev = _recomputed(CONSTRAINED, t)
        if ev.metrics["area_mm2"] <= 1.5 and ev.metrics["power_w"] <= 0.5:
            feasible_values.append(ev.metrics["edp"])
    assert best[0].value == pytest.approx(min(feasible_values), rel=1e-12)
    for t in best:
        _, ev = _recomputed(CONSTRAINED, t)
        assert ev.metrics["area_mm2"] <= 1.5 and ev.metrics["power_w"] <= 0.5
    summary = result.summary(top=3)
    assert summary["n_complete"] + summary["n_fail"] == 30
    assert summary["best"][0]["values"] == {"edp": best[0].value}
    assert summary["best"][0]["params"]["rows"] == best[0].user_attrs["config"]["rows"]


#: A space where about one design in seven runs and meets both constraints (one of them '>=').
STEERING = make_space(constraints=["area_mm2 <= 3.0", "tops >= 0.15"])


def _grid_share(space):
    """Fraction of the space's designs that run and meet every constraint: what random sampling
    proposes on average (every design scored by the vectorised stand-in, one batch)."""
    cols = space.grid_columns(0, space.grid_size())
    batch = standin_evaluator(space).evaluate_columns(cols)
    ok = batch.feasible & (batch.metrics["area_mm2"] <= 3.0) & (batch.metrics["tops"] >= 0.15)
    return float(ok.mean())


# (sampler, trials, start-up trials left out): NSGA-II's first generation (28 designs) is random.
@pytest.mark.parametrize(("sampler", "trials", "startup"),
                         [("tpe", 60, 20), ("nsga2", 112, 56), ("cmaes", 60, 20), ("bo", 60, 20), ("rl", 60, 20)])
def test_samplers_propose_feasible_designs_more_often_than_random(tmp_path, sampler, trials, startup):
    share = _grid_share(STEERING)
    assert 0.05 < share < 0.25  # a large infeasible share, yet enough feasible designs to find
    result = run_sweep(_config(tmp_path, STEERING, sampler, trials, storage="memory:"))
    later = [t for t in result.study.get_trials() if t.number >= startup]
    ok = [t for t in later if t.user_attrs.get("status") == "ok"]
    assert len(ok) / len(later) >= 1.5 * share, f"{len(ok)}/{len(later)} feasible, random: {share:.3f}"


def test_sweep_with_a_greater_equal_constraint(tmp_path):
    space = make_space(constraints=["tops >= 0.1"])
    result = run_sweep(_config(tmp_path, space, "tpe", 30))
    complete = result.study.get_trials(states=(TrialState.COMPLETE,))
    met = []
    for t in complete:
        _, ev = _recomputed(space, t)
        excess = 0.1 - ev.metrics["tops"]  # '>=': positive when tops falls short of the bound
        assert t.user_attrs["constraint_values"] == pytest.approx([excess])
        assert t.system_attrs["constraints"] == pytest.approx([excess / 0.1])
        assert t.user_attrs["status"] == ("ok" if ev.metrics["tops"] >= 0.1 else "constraint")
        if ev.metrics["tops"] >= 0.1:
            met.append(ev.metrics["edp"])
    assert met and len(met) < len(complete)  # both sides of the bound were visited
    best = best_trials(result.study, space, top=3)
    assert best[0].value == pytest.approx(min(met), rel=1e-12)
    assert all(t.user_attrs["metrics"]["tops"] >= 0.1 for t in best)


@pytest.mark.parametrize("sampler", ["tpe", "rl"])
def test_resume_adds_to_the_same_study(tmp_path, sampler):
    first = run_sweep(_config(tmp_path, CONSTRAINED, sampler, 12))
    before = {t.number: (t.state, t.params, t.values) for t in first.study.get_trials()}
    second = run_sweep(_config(tmp_path, CONSTRAINED, sampler, 20))
    trials = second.study.get_trials()
    assert second.ran == 8 and len(trials) == 20
    assert {t.number: (t.state, t.params, t.values) for t in trials[:12]} == before
    third = run_sweep(_config(tmp_path, CONSTRAINED, sampler, 20))
    assert third.ran == 0 and len(third.study.get_trials()) == 20


def _dominates(a, b):
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(x < y for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("sampler", ["nsga2", "tpe", "rl", "random"])
def test_multi_objective_returns_the_non_dominated_set(tmp_path, sampler):
    space = make_space(objectives=["latency", "area", "tops_per_w"], constraints=["power_w <= 0.6"])
    result = run_sweep(_config(tmp_path, space, sampler, 30, storage="memory:"))
    front = best_trials(result.study, space)
    assert front
    signed = [(t.values[0], t.values[1], -t.values[2]) for t in front]
    feasible = [t for t in result.study.get_trials(states=(TrialState.COMPLETE,))
                if all(v <= 0 for v in t.user_attrs["constraint_values"])]
    everyone = [(t.values[0], t.values[1], -t.values[2]) for t in feasible]
    for p in signed:
        assert not any(_dominates(q, p) for q in everyone)  # nothing feasible dominates a front member
    front_hashes = {t.user_attrs["config_hash"] for t in front}
    for t, q in zip(feasible, everyone, strict=True):
        if t.user_attrs["config_hash"] not in front_hashes:
            assert any(_dominates(p, q) or p == q for p in signed)  # everything left out is dominated
    for t in front:
        assert t.user_attrs["metrics"]["power_w"] <= 0.6


def test_pareto_mask_against_brute_force():
    rng = np.random.default_rng(0)
    points = rng.integers(0, 6, size=(300, 3)).astype(float)
    mask = pareto_mask(points)
    for i, p in enumerate(points):
        dominated = any(_dominates(q, p) for q in points)
        assert mask[i] == (not dominated)


def test_grid_finds_the_true_optimum_and_writes_the_study(tmp_path):
    space = CONSTRAINED
    # Independent optimum: every design built one by one with itertools and scored in one batch.
    free = {p.field: p.grid_values() for p in space.params}
    designs = [dict(zip(FIELD_NAMES, combo, strict=True)) for combo in itertools.product(*free.values())]
    cols = {f: np.array([d[f] for d in designs]) for f in FIELD_NAMES}
    batch = standin_evaluator(space).evaluate_columns(cols)
    ok = batch.feasible & (batch.metrics["area_mm2"] <= 1.5) & (batch.metrics["power_w"] <= 0.5)
    best = int(np.flatnonzero(ok)[np.argmin(batch.metrics["edp"][ok])])
    result = run_sweep(_config(tmp_path, space, "grid", 1, grid_keep=5, grid_table=tmp_path / "grid.npz"))
    assert result.grid.size == len(designs) and result.grid.n_feasible == int(ok.sum())
    assert result.grid.values[0, 0] == pytest.approx(batch.metrics["edp"][best], rel=1e-12)
    top = best_trials(result.study, space, top=5)
    assert len(top) == 5
    assert top[0].user_attrs["config"] == ArrayConfig(**designs[best]).to_dict()
    for t in top:  # the grid writes the same constraint records as the loop samplers
        _, ev = _recomputed(space, t)
        violations = [ev.metrics["area_mm2"] - 1.5, ev.metrics["power_w"] - 0.5]
        assert t.user_attrs["constraint_values"] == pytest.approx(violations)
        assert t.system_attrs["constraints"] == pytest.approx([violations[0] / 1.5, violations[1] / 0.5])
    assert [t.value for t in top] == sorted(t.value for t in top)
    table = np.load(tmp_path / "grid.npz")
    assert len(table["edp"]) == len(designs) and int((table["feasible"] & (table["violation"] == 0)).sum()) == int(
        ok.sum())
    # Chunking does not change the answer; a second grid run adds nothing new.
    small = grid_search(space, standin_evaluator(space), keep=5, chunk=777)
    assert list(small.index) == list(result.grid.index)
    again = run_sweep(_config(tmp_path, space, "grid", 1, grid_keep=5))
    assert again.ran == 0


def test_grid_multi_objective_front_is_exact(tmp_path):
    space = make_space(objectives=["latency", "area"])
    result = grid_search(space, standin_evaluator(space))
    cols = space.grid_columns(0, space.grid_size())
    batch = standin_evaluator(space).evaluate_columns(cols)
    pts = np.stack([batch.metrics["latency_s"], batch.metrics["area_mm2"]], 1)[batch.feasible]
    expected = {tuple(p) for p in pts[pareto_mask(pts)]}
    assert {tuple(v) for v in result.values} == expected


def test_sampler_refusals():
    listed = r"unknown sampler 'anneal' \(samplers: tpe, nsga2, cmaes, random, grid, rl, bo\)"
    with pytest.raises(SearchError, match=listed):
        run_sweep(SweepConfig(space=CONSTRAINED, evaluator=None, storage="memory:", study_name="x", sampler="anneal"))
    multi = make_space(objectives=["latency", "energy"])
    with pytest.raises(SearchError, match=r"sampler cmaes takes a single objective, not 2 \(latency, energy\)"):
        run_sweep(SweepConfig(space=multi, evaluator=None, storage="memory:", study_name="x", sampler="cmaes"))
    continuous = make_space(params=dict(SMALL_SPACE["params"], clock_mhz={"low": 100.0, "high": 900.0}))
    with pytest.raises(Exception, match="the grid sampler needs a step"):
        run_sweep(SweepConfig(space=continuous, evaluator=None, storage="memory:", study_name="x", sampler="grid"))
    with pytest.raises(SearchError, match="--jobs 2 needs a storage several processes can share"):
        run_sweep(SweepConfig(space=CONSTRAINED, evaluator=None, storage="memory:", study_name="x", jobs=2))
    with pytest.raises(SearchError, match="--trials must be a positive integer, not 0"):
        run_sweep(SweepConfig(space=CONSTRAINED, evaluator=None, storage="memory:", study_name="x", n_trials=0))


def test_values_are_finite_floats(tmp_path):
    result = run_sweep(_config(tmp_path, CONSTRAINED, "random", 10))
    complete = result.study.get_trials(states=(TrialState.COMPLETE,))
    assert complete
    for t in complete:
        assert isinstance(t.value, float) and math.isfinite(t.value)

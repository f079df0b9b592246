"""The ``bo`` sampler: GP algebra against textbook formulas, log-EI, encoding, searches on the stand-in model."""

from __future__ import annotations

import json
import math
import threading

import numpy as np
import optuna
import pytest
import test_search_samplers as contract
from optuna.trial import TrialState
from search_testlib import SMALL_SPACE, SMALL_SPACE_TOML, make_space, standin_evaluator

import accel_dse.search.samplers.bo as bo_module
from accel_dse.search import SweepConfig, best_trials, grid_search, parse_space, run_sweep
from accel_dse.search.samplers.bo import HELD_KEY, PROPOSAL_KEY, BayesOptSampler, parego_scalarise
from accel_dse.search.samplers.bo_encoding import Encoder
from accel_dse.search.samplers.gp import (
    GaussianProcess,
    _neg_lml,
    expected_improvement,
    fit_gp,
    log_expected_improvement,
)


# -- the GP against a textbook computation ------------------------------------------------------
def _matern_by_hand(a, b, ls, var):
    out = np.zeros((len(a), len(b)))
    for i, p in enumerate(a):
        for j, q in enumerate(b):
            r = math.sqrt(sum(((pk - qk) / lk) ** 2 for pk, qk, lk in zip(p, q, ls, strict=True)))
            out[i, j] = var * (1 + math.sqrt(5) * r + 5 * r * r / 3) * math.exp(-math.sqrt(5) * r)
    return out


@pytest.mark.parametrize("dim", [1, 2])
def test_gp_posterior_matches_the_textbook_formulas(dim):
    rng = np.random.default_rng(dim)
    x = rng.random((7, dim))
    y = np.sin(4 * x.sum(1)) + 3.0
    ls, var, noise = np.array([0.3, 0.7][:dim]), 1.3, 1e-4
    y_mean, y_scale = y.mean(), y.std()
    gp = GaussianProcess.build(x, (y - y_mean) / y_scale, y_mean, y_scale, ls, var, noise)
    xs = rng.random((5, dim))
    # Rasmussen & Williams, Gaussian Processes for ML, eq. 2.25-2.26 (noise-free test outputs).
    k = _matern_by_hand(x, x, ls, var) + (noise + 1e-8) * np.eye(len(x))
    ks = _matern_by_hand(xs, x, ls, var)
    mean = y_mean + y_scale * ks @ np.linalg.solve(k, (y - y_mean) / y_scale)
    cov = var - np.einsum("ij,ji->i", ks, np.linalg.solve(k, ks.T))
    got_mean, got_std = gp.predict(xs)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-9)
    np.testing.assert_allclose(got_std, y_scale * np.sqrt(cov), rtol=1e-6)
    fast_mean, fast_std = gp.predict(xs, fast=True)
    np.testing.assert_allclose(fast_mean, mean, rtol=1e-4)
    # At a training input the posterior (almost) interpolates it.
    at_mean, at_std = gp.predict(x[:1])
    assert at_mean[0] == pytest.approx(y[0], abs=1e-2 * y_scale)
    assert at_std[0] < 0.02 * y_scale


def test_log_marginal_likelihood_and_its_gradient():
    rng = np.random.default_rng(3)
    x = rng.random((12, 2))
    z = rng.normal(size=12)
    theta = np.array([math.log(0.4), math.log(0.9), math.log(1.5), math.log(1e-3)])
    nll, grad = _neg_lml(theta, x, z)
    k = _matern_by_hand(x, x, np.exp(theta[:2]), 1.5) + (1e-3 + 1e-8) * np.eye(12)
    _, logdet = np.linalg.slogdet(k)
    lml = -0.5 * z @ np.linalg.solve(k, z) - 0.5 * logdet - 6 * math.log(2 * math.pi)
    prior = 0.5 * (((theta[:2] - math.log(0.5)) / 1.5) ** 2).sum()
    assert nll == pytest.approx(-lml + prior, rel=1e-9)
    for i in range(len(theta)):
        step = np.zeros_like(theta)
        step[i] = 1e-6
        numeric = (_neg_lml(theta + step, x, z)[0] - _neg_lml(theta - step, x, z)[0]) / 2e-6
        assert grad[i] == pytest.approx(numeric, rel=1e-4, abs=1e-6)


def test_fit_gp_learns_which_inputs_matter():
    rng = np.random.default_rng(0)
    x = rng.random((60, 3))
    y = np.sin(6 * x[:, 0])  # only the first input matters
    gp = fit_gp(x, y, rng=rng)
    assert gp.lengthscales[0] < gp.lengthscales[1] and gp.lengthscales[0] < gp.lengthscales[2]
    xs = rng.random((200, 3))
    mean, _ = gp.predict(xs)
    assert np.abs(mean - np.sin(6 * xs[:, 0])).max() < 0.1


def test_kriging_believer_keeps_the_mean_and_removes_the_variance():
    rng = np.random.default_rng(1)
    x = rng.random((10, 2))
    gp = fit_gp(x, np.cos(3 * x[:, 0]) + x[:, 1], rng=rng)
    pending = np.array([[0.5, 0.5]])
    mean, std = gp.predict(pending)
    believed = gp.with_points(pending)
    mean2, std2 = believed.predict(pending)
    assert mean2[0] == pytest.approx(mean[0], abs=1e-4 * gp.y_scale)
    assert std2[0] < 0.05 * std[0]


# -- expected improvement --------------------------------------------------------------------
@pytest.mark.parametrize(("mean", "std", "best"), [(0.0, 1.0, 0.0), (1.0, 0.5, 0.2), (-1.0, 2.0, 0.5), (3.0, 1.0, 0.0)])
def test_expected_improvement_against_monte_carlo(mean, std, best):
    samples = np.random.default_rng(0).normal(mean, std, 2_000_000)
    mc = np.maximum(best - samples, 0).mean()
    got = expected_improvement(np.array([mean]), np.array([std]), best)[0]
    assert got == pytest.approx(mc, rel=0.02, abs=2e-5)


def test_log_expected_improvement_far_in_the_tail():
    # For z = (best - mean) / std -> -inf, EI / std = phi(z) (1/z^2 - 3/z^4 + 15/z^6 - ...) (Mills ratio series).
    for z in (-8.0, -40.0, -400.0):
        x = -z
        series = 1 / x**2 - 3 / x**4 + 15 / x**6 - 105 / x**8 + 945 / x**10
        expected = -0.5 * x * x - 0.5 * math.log(2 * math.pi) + math.log(series)
        got = log_expected_improvement(np.array([0.0]), np.array([1.0]), z)[0]
        assert got == pytest.approx(expected, rel=1e-6 if z > -10 else 1e-9)
    # Continuous across the switch between the two formulas at z = -1.
    a, b = log_expected_improvement(np.array([0.0, 0.0]), np.array([1.0, 1.0]), np.array([-1 - 1e-9, -1 + 1e-9]))
    assert a == pytest.approx(b, abs=1e-7)


# -- encoding --------------------------------------------------------------------------------
ENC_SPACE = {
    "name": "enc",
    "objectives": ["edp"],
    "workloads": ["a"],
    "params": {
        "rows": {"low": 2, "high": 64, "scale": "pow2"},
        "cols": [4, 16, 8],
        "dataflow": ["ws", "os", "is"],
        "ifmap_sram_kib": {"low": 16, "high": 2048, "scale": "log"},
        "ofmap_sram_kib": {"low": 64, "high": 256, "step": 64},
        "clock_mhz": {"low": 200.0, "high": 1000.0},
        "dram_bytes_per_cycle": {"low": 4.0, "high": 64.0, "scale": "log"},
        "double_buffered": [True, False],
    },
}


def test_encoding_round_trip_and_coordinates():
    space = parse_space(ENC_SPACE, source="enc")
    enc = Encoder(space)
    assert not enc.finite
    assert enc.dim == 1 + 1 + 3 + 1 + 1 + 1 + 1 + 2
    rng = np.random.default_rng(0)
    positions = enc.random(rng, 300)
    for pos in positions:
        params = enc.params(pos)
        assert set(params) == set(space.distributions())
        for name, dist in space.distributions().items():
            assert dist._contains(dist.to_internal_repr(params[name])), (name, params[name])
        np.testing.assert_allclose(enc.position(params), pos, atol=1e-9)
    x = enc.encode(positions)
    assert x.min() >= 0 and x.max() <= 1
    names = [a.name for a in enc.axes]
    assert names == [p.name for p in space.free_params]
    params = {"log2_rows": 3, "idx_cols": 2, "dataflow": "is", "ifmap_sram_kib": 128, "ofmap_sram_kib": 192,
              "clock_mhz": 400.0, "dram_bytes_per_cycle": 16.0, "double_buffered": False}
    row = enc.encode(enc.position(params))[0]
    expected = [(3 - 1) / (6 - 1), 2 / 2, 0, 0, 1, math.log(128 / 16) / math.log(2048 / 16), (192 - 64) / (256 - 64),
                math.log(16 / 4) / math.log(64 / 4), (400 - 200) / 800, 0, 1]  # ArrayConfig field order
    np.testing.assert_allclose(row, expected, atol=1e-12)


def test_parego_scalarisation_by_hand():
    values = np.array([[1.0, 10.0], [3.0, 0.0], [2.0, 5.0]])
    got = parego_scalarise(values, np.array([0.25, 0.75]), rho=0.05)
    f = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    expected = [max(0.25 * a, 0.75 * b) + 0.05 * (0.25 * a + 0.75 * b) for a, b in f]
    np.testing.assert_allclose(got, expected)


# -- searching -------------------------------------------------------------------------------
CONSTRAINED = make_space(constraints=["area_mm2 <= 1.5", "power_w <= 0.5"])


def _config(tmp_path, space, n, *, seed=3, storage=None, **kw):
    return SweepConfig(space=space, evaluator=standin_evaluator(space),
                       storage=storage or f"sqlite:///{tmp_path}/study.db", study_name="t", sampler="bo",
                       n_trials=n, seed=seed, **kw)


def test_bo_passes_the_sampler_contract(tmp_path):
    contract.test_sampler_contract(tmp_path, "bo")


def test_bo_finds_the_grid_optimum_under_constraints(tmp_path):
    grid = grid_search(CONSTRAINED, standin_evaluator(CONSTRAINED), keep=1, table=tmp_path / "grid.npz")
    optimum = float(grid.values[0, 0])
    result = run_sweep(_config(tmp_path, CONSTRAINED, 60, storage="memory:"))
    trials = result.study.get_trials()
    hashes = [t.user_attrs["config_hash"] for t in trials if "config_hash" in t.user_attrs]
    assert len(hashes) == len(set(hashes)), "no design is evaluated twice"
    best = best_trials(result.study, CONSTRAINED, top=1)[0]
    assert best.value <= 1.01 * optimum  # the grid has 12,960 designs; 60 trials is 0.5 % of them
    assert best.user_attrs["metrics"]["area_mm2"] <= 1.5 and best.user_attrs["metrics"]["power_w"] <= 0.5
    # After the start-up, proposals satisfy the constraints far more often than a random design
    # does (the constraint GPs steer): compare with the fraction of the grid that is feasible.
    table = np.load(tmp_path / "grid.npz")
    random_ok = float((table["feasible"] & (table["violation"] == 0)).mean())
    later = [t for t in trials if t.number >= 20]
    ok = [t for t in later if t.user_attrs.get("status") == "ok"]
    assert len(ok) / len(later) >= 1.5 * random_ok


def test_bo_steers_away_from_designs_that_cannot_run(tmp_path):
    params = {**SMALL_SPACE["params"], "rows": {"low": 2, "high": 512, "scale": "pow2"},
              "cols": {"low": 2, "high": 512, "scale": "pow2"}}
    space = make_space(params=params)  # large arrays do not fit the weight buffer: infeasible
    grid_search(space, standin_evaluator(space), keep=1, table=tmp_path / "grid.npz")
    random_fail = 1.0 - float(np.load(tmp_path / "grid.npz")["feasible"].mean())
    trials = run_sweep(_config(tmp_path, space, 50, storage="memory:")).study.get_trials()
    later = [t for t in trials if t.number >= 15]
    failed = [t for t in later if t.state == TrialState.FAIL]
    assert failed == [] or all(t.user_attrs["status"] == "infeasible" for t in failed)
    assert len(failed) / len(later) < 0.75 * random_fail


def test_bo_is_a_function_of_the_study(tmp_path):
    """No state outside the study: two fresh samplers with one seed propose the same design."""
    first = run_sweep(_config(tmp_path, CONSTRAINED, 15, storage="memory:"))
    study = first.study
    proposals = []
    for _ in range(2):
        sampler = BayesOptSampler(CONSTRAINED, seed=11)
        trial = study.ask()
        proposals.append(sampler.sample_relative(study, study._storage.get_trial(trial._trial_id),
                                                 CONSTRAINED.distributions()))
        study.tell(trial, state=TrialState.FAIL)  # a FAIL without status: not a seen design
    assert proposals[0] == proposals[1]
    seen = {tuple(t.params[n] for n in CONSTRAINED.distributions()) for t in study.get_trials()
            if t.state == TrialState.COMPLETE}
    assert tuple(proposals[0][n] for n in CONSTRAINED.distributions()) not in seen


def test_resume_continues_the_study(tmp_path):
    first = run_sweep(_config(tmp_path, CONSTRAINED, 14))
    before = {t.number: (t.params, t.values) for t in first.study.get_trials()}
    second = run_sweep(_config(tmp_path, CONSTRAINED, 22))
    trials = second.study.get_trials()
    assert second.ran == 8 and len(trials) == 22
    assert {t.number: (t.params, t.values) for t in trials[:14]} == before
    assert all(t.user_attrs["sampler"] == "bo" for t in trials)
    hashes = [t.user_attrs["config_hash"] for t in trials]
    assert len(set(hashes)) == len(hashes)


def _dominates(a, b):
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(x < y for x, y in zip(a, b, strict=True))


def test_parego_two_objectives_returns_a_valid_pareto_set(tmp_path):
    space = make_space(objectives=["latency", "tops_per_w"], constraints=["power_w <= 0.6"])
    result = run_sweep(_config(tmp_path, space, 30, storage="memory:"))
    front = best_trials(result.study, space)
    assert front
    feasible = [t for t in result.study.get_trials(states=(TrialState.COMPLETE,))
                if all(v <= 0 for v in t.user_attrs["constraint_values"])]
    signed = lambda t: (t.values[0], -t.values[1])  # noqa: E731
    for t in front:
        assert t.user_attrs["metrics"]["power_w"] <= 0.6
        assert not any(_dominates(signed(q), signed(t)) for q in feasible)
    front_hashes = {t.user_attrs["config_hash"] for t in front}
    for q in feasible:
        if q.user_attrs["config_hash"] not in front_hashes:
            assert any(_dominates(signed(p), signed(q)) or signed(p) == signed(q) for p in front)


@pytest.mark.parametrize("written", [False, True])
def test_pending_designs_of_other_workers_are_not_proposed(tmp_path, written):
    """A design another worker chose (its proposal attribute, later its params) is not proposed again."""
    study = run_sweep(_config(tmp_path, CONSTRAINED, 15, storage="memory:")).study
    space = CONSTRAINED.distributions()
    running = study.ask()
    first = BayesOptSampler(CONSTRAINED, seed=5).sample_relative(study, study._storage.get_trial(running._trial_id),
                                                                  space)
    assert study._storage.get_trial(running._trial_id).system_attrs[PROPOSAL_KEY] == first
    if written:  # the other worker's objective has written the parameters by now
        for name, value in first.items():
            study._storage.set_trial_param(running._trial_id, name, space[name].to_internal_repr(value), space[name])
    trial = study.ask()
    second = BayesOptSampler(CONSTRAINED, seed=5).sample_relative(study, study._storage.get_trial(trial._trial_id),
                                                                   space)
    assert second != first
    # Without the running trial, the same sampler proposes ``first`` again (it is a function of the study).
    study.tell(running, state=TrialState.FAIL)
    study.tell(trial, state=TrialState.FAIL)
    third = study.ask()
    again = BayesOptSampler(CONSTRAINED, seed=5).sample_relative(study, study._storage.get_trial(third._trial_id),
                                                                  space)
    assert again == first


def test_sweep_through_the_cli_on_sqlite(tmp_path, monkeypatch, run_cli):
    import accel_dse.cli.sweep as sweep_cli

    monkeypatch.setattr(sweep_cli, "_evaluator", lambda space: standin_evaluator(space))
    space_file = tmp_path / "small.toml"
    space_file.write_text(SMALL_SPACE_TOML)
    db = tmp_path / "study.db"
    code, out, err = run_cli("sweep", "--space", str(space_file), "--storage", f"sqlite:///{db}", "--sampler", "bo",
                             "--trials", "16", "--seed", "1", "--json", "--quiet", "--out-dir", str(tmp_path))
    assert code == 0, err
    summary = json.loads(out)
    assert summary["n_complete"] + summary["n_fail"] == 16
    study = optuna.load_study(study_name=summary["study"], storage=f"sqlite:///{db}")
    assert {t.user_attrs["sampler"] for t in study.get_trials()} == {"bo"}
    best = min(t.value for t in study.get_trials(states=(TrialState.COMPLETE,)))
    assert summary["best"][0]["values"]["edp"] == pytest.approx(best)


def test_two_workers_share_the_study_without_repeating_a_design(tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_DELAY_S", "0.05")  # trials overlap: each worker sees the other's RUNNING one
    url = f"journal:{tmp_path}/study.journal"
    result = run_sweep(_config(tmp_path, CONSTRAINED, 24, storage=url, jobs=2))
    trials = result.study.get_trials()
    assert 24 <= len(trials) <= 25
    assert len({t.user_attrs["pid"] for t in trials}) == 2
    hashes = [t.user_attrs["config_hash"] for t in trials]
    # Two workers that choose in the same few milliseconds settle a tie through their claims (the
    # lower trial number keeps the design): no design is evaluated twice, however the workers interleave.
    repeats = len(hashes) - len(set(hashes))
    assert repeats == 0, f"{repeats} repeated designs"


# -- settling a tie between two workers ----------------------------------------------------------
def _two_running(tmp_path):
    """A study, two RUNNING trials (``low`` numbered before ``high``), a sampler and three ranked unseen designs."""
    study = run_sweep(_config(tmp_path, CONSTRAINED, 12, storage="memory:")).study
    low, high = study.ask(), study.ask()
    sampler = BayesOptSampler(CONSTRAINED, seed=5)
    frozen = [study._storage.get_trial(t._trial_id) for t in (low, high)]
    ranked = sampler._propose(study, frozen[1])[:3]
    return study, *frozen, sampler, [sampler._enc.params(p) for p in ranked], ranked


def _claim_lands_first(monkeypatch, study, writer, rival, params, then=None):
    """When ``writer`` claims ``params``, ``rival``'s claim on them is written just before (after writer's first read).

    This is the race: both workers read the claims, neither sees the other's, both write one.
    """
    storage = study._storage
    write = storage.set_trial_system_attr
    fired = []

    def racing_write(trial_id, key, value):
        if trial_id == writer._trial_id and key == PROPOSAL_KEY and value == params and not fired:
            fired.append(True)
            write(rival._trial_id, PROPOSAL_KEY, params)
            if then is not None:
                then()
        write(trial_id, key, value)

    monkeypatch.setattr(storage, "set_trial_system_attr", racing_write)


def test_a_tie_goes_to_the_lower_trial_number(tmp_path, monkeypatch):
    study, low, high, sampler, params, ranked = _two_running(tmp_path)
    _claim_lands_first(monkeypatch, study, high, low, params[0])
    assert sampler._claim(study, high, ranked, low.number) == params[1]  # the higher trial gives the design up
    monkeypatch.undo()
    fresh = BayesOptSampler(CONSTRAINED, seed=5)
    got = fresh._claim(study, study._storage.get_trial(low._trial_id), ranked, low.number)
    assert got == params[0]
    held = [study._storage.get_trial(t._trial_id).system_attrs for t in (low, high)]
    assert [a[HELD_KEY] for a in held] == [params[0], params[1]]


@pytest.mark.parametrize("higher", ["gives it up", "holds it", "is dead"])
def test_the_lower_trial_waits_for_an_undecided_higher_one(tmp_path, monkeypatch, higher):
    """The higher trial's claim is undecided when the lower one reads it: the lower one waits for the outcome."""
    study, low, high, sampler, params, ranked = _two_running(tmp_path)
    storage = study._storage
    outcome = {"gives it up": (PROPOSAL_KEY, params[2]), "holds it": (HELD_KEY, params[0])}.get(higher)
    timer = threading.Timer(0.3, storage.set_trial_system_attr, (high._trial_id, *outcome)) if outcome else None
    if timer is None:  # its worker never decides: the lower trial gives the design up after the timeout
        monkeypatch.setattr(bo_module, "SETTLE_TIMEOUT_S", 0.3)
    _claim_lands_first(monkeypatch, study, low, high, params[0], then=timer.start if timer else None)
    got = sampler._claim(study, low, ranked, low.number)
    if timer is not None:
        timer.join()
    assert got == (params[0] if higher == "gives it up" else params[1])


def test_a_design_whose_parameters_are_being_written_stays_held(tmp_path):
    study, low, high, sampler, params, ranked = _two_running(tmp_path)
    storage, space = study._storage, CONSTRAINED.distributions()
    storage.set_trial_system_attr(low._trial_id, PROPOSAL_KEY, params[0])
    storage.set_trial_system_attr(low._trial_id, HELD_KEY, params[0])
    name = next(iter(params[0]))  # the objective has written one parameter so far
    storage.set_trial_param(low._trial_id, name, space[name].to_internal_repr(params[0][name]), space[name])
    assert sampler._claim(study, high, ranked, low.number) == params[1]


def test_a_design_taken_and_evaluated_while_the_gps_are_fitted_is_not_taken(tmp_path, monkeypatch):
    """The other worker claims, holds and evaluates a design while this one proposes it: it takes the next one."""
    study, low, high, sampler, _, _ = _two_running(tmp_path)
    storage, space = study._storage, CONSTRAINED.distributions()
    propose, ranked = sampler._propose, []

    def slow_propose(study_, trial_):
        ranked.extend(propose(study_, trial_))
        for name, value in sampler._enc.params(ranked[0]).items():
            storage.set_trial_param(low._trial_id, name, space[name].to_internal_repr(value), space[name])
        storage.set_trial_user_attr(low._trial_id, "status", "ok")
        storage.set_trial_state_values(low._trial_id, TrialState.COMPLETE, [1.0])
        return np.asarray(ranked)

    monkeypatch.setattr(sampler, "_propose", slow_propose)
    assert sampler._design(study, high) == sampler._enc.params(ranked[1])

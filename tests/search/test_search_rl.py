"""The JAX policy-gradient agent: actions, rewards, ranks, and that an update learns."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState
from search_testlib import SMALL_SPACE, make_space

from accel_dse.search.samplers.rl import MAX_BINS, PolicyGradientSampler, _param_actions, pareto_ranks


def test_actions_cover_each_parameter():
    params = dict(SMALL_SPACE["params"], ifmap_sram_kib={"low": 1, "high": 100_000, "scale": "log"},
                  ofmap_sram_kib={"low": 10, "high": 1000, "step": 10}, acc_bits={"low": 32, "high": 40})
    space = make_space(params=params)
    acts = {p.field: _param_actions(p) for p in space.free_params}
    assert acts["rows"] == [1, 2, 3, 4, 5, 6]  # exponents of the pow2 range
    assert acts["dataflow"] == ["ws", "os", "is"]
    assert acts["acc_bits"] == list(range(32, 41))
    for field in ("ifmap_sram_kib", "ofmap_sram_kib"):
        values = acts[field]
        p = space.param(field)
        assert len(values) <= MAX_BINS and values == sorted(set(values))
        assert values[0] == p.low and values[-1] == p.high
        assert all(p.distribution()._contains(v) for v in values)
    assert all(b / a > 1.2 for a, b in zip(acts["ifmap_sram_kib"], acts["ifmap_sram_kib"][1:], strict=False))


def test_pareto_ranks_by_peeling():
    rng = np.random.default_rng(1)
    pts = rng.integers(0, 5, size=(60, 2)).astype(float)
    ranks = pareto_ranks(pts)
    remaining = list(range(len(pts)))
    level = 0
    while remaining:
        front = [i for i in remaining if not any(
            np.all(pts[j] <= pts[i]) and np.any(pts[j] < pts[i]) for j in remaining)]
        assert sorted(np.flatnonzero(ranks == level)) == sorted(front)
        remaining = [i for i in remaining if i not in front]
        level += 1


def _trial(values, params, status="ok", state=TrialState.COMPLETE, cv=None):
    space = make_space(constraints=["area_mm2 <= 1"])
    attrs = {"status": status}
    if cv is not None:
        attrs["constraint_values"] = cv
    return optuna.trial.create_trial(
        state=state, values=values if state == TrialState.COMPLETE else None, params=params,
        distributions={k: space.distributions()[k] for k in params}, user_attrs=attrs,
    )


def test_rewards_penalise_violations_by_their_relative_excess():
    space = make_space(constraints=["area_mm2 <= 2"])
    sampler = PolicyGradientSampler(space, seed=0, penalty=2.0)
    p = {"log2_rows": 2}
    trials = [
        _trial([1e-9], p, cv=[-0.5]),
        _trial([1e-6], p, cv=[-0.1]),
        _trial([1e-12], p, status="constraint", cv=[0.5]),  # 25 % over the 2 mm^2 budget
        _trial([1e-12], p, status="constraint", cv=[6.0]),  # 300 % over
        _trial([1e-9], p, status="constraint", cv=[0.2]),  # as good as the first, 10 % over
        _trial(None, p, status="infeasible", state=TrialState.FAIL),
    ]
    r = sampler._rewards(trials)
    by_hand = [-np.log(1e-9), -np.log(1e-6), -np.log(1e-12) - 2.0 * 0.25, -np.log(1e-12) - 2.0 * 3.0,
               -np.log(1e-9) - 2.0 * 0.1]
    assert r[:5] == pytest.approx(by_hand, rel=1e-12)
    assert r[0] > r[4]  # the same objective value over the budget earns less
    assert r[5] == pytest.approx(min(by_hand) - 1.0)  # a design the model cannot run: below everything


def test_one_update_moves_the_policy_towards_the_better_choice():
    space = make_space()
    study = optuna.create_study()
    dists = space.distributions()
    rng = np.random.default_rng(0)
    for _ in range(64):
        params = space.grid_params(int(rng.integers(space.grid_size())))
        value = 1e-9 if params["dataflow"] == "os" else 1e-6
        study.add_trial(optuna.trial.create_trial(value=value, params=params, distributions=dists,
                                                  user_attrs={"status": "ok"}))
    sampler = PolicyGradientSampler(space, seed=0, learning_rate=0.05)  # a large step: one update shows
    t = sampler._params.index(space.param("dataflow"))
    os_index = sampler._actions[t].index("os")

    def share_of_os():
        import jax

        keys = jax.random.split(jax.random.PRNGKey(5), 400)
        acts = [int(np.asarray(sampler._sample_fn(sampler._net, k)[0])[t]) - int(sampler._offsets[t]) for k in keys]
        return np.mean(np.array(acts) == os_index)

    before = share_of_os()
    sampler._maybe_train(study)
    after = share_of_os()
    assert 0.25 < before < 0.42  # uniform start over three dataflows
    assert after > before + 0.15

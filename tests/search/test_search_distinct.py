"""No trial repeats a design; grouped storage writes store what the per-call API would; CMA-ES's penalty."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState
from search_testlib import make_space, standin_evaluator

from accel_dse.search import SweepConfig, open_study, run_sweep
from accel_dse.search.samplers.cmaes import PenalisedCmaEsSampler
from accel_spec.errors import SearchError

#: 2 x 2 x 3 x 2 = 24 designs.
TINY = {"rows": [4, 8], "cols": [4, 8], "dataflow": ["ws", "os", "is"], "dram_bytes_per_cycle": [4.0, 16.0]}


def _sweep(url, space, sampler, n, seed=5):
    return run_sweep(SweepConfig(space=space, evaluator=standin_evaluator(space), storage=url, study_name="d",
                                 sampler=sampler, n_trials=n, seed=seed)).study


@pytest.mark.parametrize("sampler", ["tpe", "nsga2", "random"])
def test_no_design_is_evaluated_twice_while_unseen_ones_remain(sampler):
    space = make_space(params=TINY)
    study = _sweep("memory:", space, sampler, 20)
    hashes = [t.user_attrs["config_hash"] for t in study.get_trials()]
    assert len(hashes) == 20 and len(set(hashes)) == 20
    assert all(t.user_attrs["sampler"] == sampler for t in study.get_trials())


@pytest.mark.parametrize("sampler", ["tpe", "cmaes", "rl"])
def test_an_exhausted_space_still_runs_its_trials(sampler):
    space = make_space(params=TINY)
    study = _sweep("memory:", space, sampler, 30)
    trials = study.get_trials()
    assert len(trials) == 30 and all(t.state == TrialState.COMPLETE for t in trials)
    assert len({t.user_attrs["config_hash"] for t in trials}) <= 24


def test_grouped_writes_store_what_the_per_call_api_stores(tmp_path):
    """SQLite (grouped transactions) and the journal and in-memory storages (one call per value) agree."""
    space = make_space(constraints=["area_mm2 <= 1.5", "power_w <= 0.5"])
    runs = {}
    for url in ("memory:", f"sqlite:///{tmp_path}/a.db", f"journal:{tmp_path}/j.log"):
        study = _sweep(url, space, "tpe", 16, seed=3)
        runs[url] = [(t.number, t.state, t.params, t.distributions, t.values, t.user_attrs, t.constraints)
                     for t in study.get_trials()]
    memory, sqlite, journal = runs.values()
    assert sqlite == memory and journal == memory
    number, state, params, _, values, attrs, constraints = memory[-1]
    assert set(attrs) >= {"host", "pid", "pid_start", "sampler", "config", "config_hash", "metrics", "workloads",
                          "constraint_values", "status"}
    assert attrs["config"] == space.design(params).to_dict()
    area, power = attrs["metrics"]["area_mm2"], attrs["metrics"]["power_w"]
    assert attrs["constraint_values"] == pytest.approx([area - 1.5, power - 0.5])
    assert constraints == {"0": pytest.approx(area / 1.5 - 1), "1": pytest.approx(power / 0.5 - 1)}


def test_the_report_names_the_recorded_sampler(tmp_path):
    from accel_dse.report import sampler_of

    space = make_space(params=TINY)
    for sampler in ("tpe", "random"):  # the two that leave no trace of their own
        study = _sweep(f"sqlite:///{tmp_path}/{sampler}.db", space, sampler, 3)
        assert [sampler_of(t) for t in study.get_trials()] == [sampler] * 3


def test_cmaes_sees_violations_as_worse_than_every_feasible_design():
    space = make_space(constraints=["area_mm2 <= 2"])
    sampler = PenalisedCmaEsSampler(space, seed=0)
    study = optuna.create_study(sampler=sampler)
    dist = space.distributions()
    params = {name: d.to_external_repr(d.low if hasattr(d, "low") else 0) for name, d in dist.items()}
    rows = [(5.0, [-1.0]), (9.0, [-0.1]), (1.0, [1.0]), (2.0, [0.2]), (0.5, [4.0])]  # value, area excess (mm^2)
    for value, cv in rows:
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dist, value=value,
                                                  user_attrs={"constraint_values": cv}))
    seen = {t.number: t.value for t in sampler._get_trials(study)}
    assert seen[0] == 5.0 and seen[1] == 9.0  # feasible: true values
    # Violators: worst feasible (9) + 1 + relative excess (excess / 2 mm^2), whatever their true value.
    assert seen[3] == pytest.approx(9.0 + 1 + 0.1) and seen[2] == pytest.approx(9.0 + 1 + 0.5)
    assert seen[4] == pytest.approx(9.0 + 1 + 2.0)
    assert [t.value for t in study.get_trials()] == [5.0, 9.0, 1.0, 2.0, 0.5]  # the study keeps the truth


def test_a_study_with_other_parameter_names_is_refused(tmp_path):
    """A study written when numeric choices were categories (``dram_bytes_per_cycle``, not ``idx_...``)."""
    space = make_space(params=TINY)
    url = f"sqlite:///{tmp_path}/old.db"
    storage = optuna.storages.RDBStorage(url)
    study = open_study(storage, "old", space, where=url)
    old = {"idx_rows": optuna.distributions.IntDistribution(0, 1),
           "dram_bytes_per_cycle": optuna.distributions.CategoricalDistribution([4.0, 16.0])}
    study.add_trial(optuna.trial.create_trial(params={"idx_rows": 0, "dram_bytes_per_cycle": 4.0},
                                              distributions=old, value=1.0))
    with pytest.raises(SearchError, match=r"older accel-dse .*'dram_bytes_per_cycle' is not a parameter of"):
        open_study(storage, "old", space, where=url)

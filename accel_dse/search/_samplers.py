"""The sweep's samplers by name.

=========  ===================================================================  =============
name       what                                                                 constraints
=========  ===================================================================  =============
``tpe``    Optuna's TPE (multivariate; MOTPE for several objectives)             constraints_func
``nsga2``  Optuna's NSGA-II genetic algorithm (single or several objectives)     constraints_func
``cmaes``  Optuna's CMA-ES with margin (one objective; categorical fields are    violations FAIL
           sampled at random)
``random`` uniform random sampling                                              violations FAIL
``grid``   exhaustive: every point scored by the vectorised model, not a loop   filtered
           of trials (see :mod:`accel_dse.search._grid`)
``rl``     policy-gradient agent written with JAX (:mod:`accel_dse.search._rl`) in the reward
=========  ===================================================================  =============
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import optuna
from optuna.trial import FrozenTrial

from accel_dse.errors import SearchError
from accel_dse.search._space import DesignSpace

__all__ = ["SAMPLERS", "check_sampler", "make_sampler", "takes_constraints"]

SAMPLERS: tuple[str, ...] = ("tpe", "nsga2", "cmaes", "random", "grid", "rl")
_WITH_CONSTRAINTS = ("tpe", "nsga2", "rl")


def check_sampler(name: str, space: DesignSpace) -> None:
    """Refuse an unknown sampler (listing them) or one that cannot search ``space``."""
    if name not in SAMPLERS:
        raise SearchError(f"unknown sampler {name!r} (samplers: {', '.join(SAMPLERS)})")
    if name == "cmaes" and space.is_multi_objective:
        names = ", ".join(o.name for o in space.objectives)
        raise SearchError(
            f"sampler cmaes takes a single objective, not {len(space.objectives)} ({names}); "
            "use tpe, nsga2, random, rl or grid"
        )
    if name != "grid" and not space.free_params:
        raise SearchError(f"{space.source} has no free parameter to search (every field is fixed)")
    if name == "grid":
        space.grid_size()  # ConfigError for a continuous range


def takes_constraints(name: str) -> bool:
    """Whether sampler ``name`` handles constraint violations itself (trials stay COMPLETE)."""
    return name in _WITH_CONSTRAINTS


def _constraint_values(trial: FrozenTrial) -> Sequence[float]:
    return trial.user_attrs.get("constraint_values", ())


def make_sampler(name: str, space: DesignSpace, *, seed: int | None = None) -> optuna.samplers.BaseSampler:
    """Build the Optuna sampler called ``name`` for ``space`` (not for ``grid``)."""
    check_sampler(name, space)
    constraints = _constraint_values if space.constraints else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "tpe":
            return optuna.samplers.TPESampler(seed=seed, constraints_func=constraints, n_startup_trials=10)
        if name == "nsga2":
            population = max(8, min(50, 4 * len(space.free_params)))
            return optuna.samplers.NSGAIISampler(
                seed=seed, constraints_func=constraints, population_size=population
            )
        if name == "cmaes":
            return optuna.samplers.CmaEsSampler(
                seed=seed,
                with_margin=True,
                warn_independent_sampling=False,
                independent_sampler=optuna.samplers.RandomSampler(seed=seed),
            )
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if name == "rl":
            from accel_dse.search._rl import PolicyGradientSampler

            return PolicyGradientSampler(space, seed=seed)
    raise SearchError(f"sampler {name!r} does not run as a loop of trials")

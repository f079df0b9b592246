"""The sweep's samplers by name.

=========  ===================================================================  ===================
name       what                                                                 constraints
=========  ===================================================================  ===================
``tpe``    Optuna's multivariate TPE (MOTPE for several objectives), constant   Optuna constraints
           liar for parallel workers
``nsga2``  Optuna's NSGA-II genetic algorithm (single or several objectives)     Optuna constraints
``cmaes``  Optuna's CMA-ES with margin (one objective); categorical fields by   penalised ranking
           a univariate TPE                                                     (see below)
``random`` uniform random sampling                                              (none needed)
``grid``   exhaustive: every point scored by the vectorised model, not a loop   filtered
           of trials (see :mod:`accel_dse.search.scoring.grid`)
``rl``     policy-gradient agent written with JAX (:mod:`accel_dse.search.samplers.rl`) in the reward
``bo``     Bayesian optimisation: a GP on the log objective, constrained        a GP per constraint
           log-EI over the unseen designs, ParEGO for several objectives,       (P(met))
           kriging believer for parallel workers (:mod:`accel_dse.search.samplers.bo`)
=========  ===================================================================  ===================

Every loop sampler is wrapped in :class:`~accel_dse.search.samplers.distinct.DistinctSampler`, so no
trial is spent on a design the study already holds. A design that breaks a constraint is a
COMPLETE trial with its true objective values and ``constraint_values`` for every sampler; the
samplers see Optuna's ``constraints`` system attribute, which the objective sets to each
constraint's excess relative to its bound (``value / |bound| - 1`` for ``<=``), so that excesses
in different units (mm^2, W) add up sensibly (TPE and NSGA-II read it as Optuna's constraints).
"""

from __future__ import annotations

import warnings

import optuna

from accel_dse.search.samplers.distinct import DistinctSampler
from accel_dse.search.space.design_space import DesignSpace
from accel_spec.errors import SearchError

__all__ = ["SAMPLERS", "check_sampler", "make_sampler", "takes_constraints"]

SAMPLERS: tuple[str, ...] = ("tpe", "nsga2", "cmaes", "random", "grid", "rl", "bo")
_WITH_CONSTRAINTS = ("tpe", "nsga2", "rl", "cmaes", "random", "bo")


def check_sampler(name: str, space: DesignSpace) -> None:
    """Refuse an unknown sampler (listing them) or one that cannot search ``space``."""
    if name not in SAMPLERS:
        raise SearchError(f"unknown sampler {name!r} (samplers: {', '.join(SAMPLERS)})")
    if name == "cmaes" and space.is_multi_objective:
        names = ", ".join(o.name for o in space.objectives)
        raise SearchError(
            f"sampler cmaes takes a single objective, not {len(space.objectives)} ({names}); "
            "use tpe, nsga2, random, rl, bo or grid"
        )
    if name != "grid" and not space.free_params:
        raise SearchError(f"{space.source} has no free parameter to search (every field is fixed)")
    if name == "grid":
        space.grid_size()  # ConfigError for a continuous range


def takes_constraints(name: str) -> bool:
    """Whether sampler ``name`` handles constraint violations itself (trials stay COMPLETE)."""
    return name in _WITH_CONSTRAINTS


def make_sampler(name: str, space: DesignSpace, *, seed: int | None = None) -> DistinctSampler:
    """Build the sampler called ``name`` for ``space`` (not for ``grid``), wrapped in a :class:`DistinctSampler`.

    CMA-ES and the RL agent record per-trial state tied to the values they drew, so a repeat is
    only drawn again; the others may also move to a neighbouring unseen design. ``bo`` proposes
    unseen designs itself (it scores only designs the study does not hold).
    """
    inner = _make_inner(name, space, seed=seed)
    retries = 4 if name in ("tpe", "bo") else 16  # a TPE or BO draw refits its models: costly
    return DistinctSampler(inner, space, retries=retries, neighbours=name not in ("cmaes", "rl", "bo"), seed=seed)


def _make_inner(name: str, space: DesignSpace, *, seed: int | None = None) -> optuna.samplers.BaseSampler:
    check_sampler(name, space)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "tpe":
            # Multivariate (also for several objectives, where Optuna's default is independent):
            # the good designs sit on a ridge where clock, array size and bandwidth trade off.
            return optuna.samplers.TPESampler(seed=seed, n_startup_trials=10,
                                              multivariate=True, constant_liar=True)
        if name == "nsga2":
            population = max(8, min(50, 4 * len(space.free_params)))
            return optuna.samplers.NSGAIISampler(seed=seed, population_size=population)
        if name == "cmaes":
            from accel_dse.search.samplers.cmaes import PenalisedCmaEsSampler

            return PenalisedCmaEsSampler(
                space,
                seed=seed,
                with_margin=True,
                warn_independent_sampling=False,
                independent_sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=10),
            )
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if name == "rl":
            from accel_dse.search.samplers.rl import PolicyGradientSampler

            return PolicyGradientSampler(space, seed=seed)
        if name == "bo":
            from accel_dse.search.samplers.bo import BayesOptSampler

            return BayesOptSampler(space, seed=seed)
    raise SearchError(f"sampler {name!r} does not run as a loop of trials")

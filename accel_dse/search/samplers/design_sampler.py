"""The base of the sweep's own samplers: a trial's design is chosen whole, from the study alone."""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.study import Study
from optuna.trial import FrozenTrial

from accel_dse.search.space.design_space import DesignSpace

__all__ = ["DesignSampler"]


class DesignSampler(optuna.samplers.BaseSampler):
    """An Optuna sampler that draws every free parameter of a :class:`DesignSpace` at once.

    Subclasses implement :meth:`_design`. Parameters outside the space (none in a sweep: the
    objective suggests only the space's) are sampled at random.

    Args:
        space: The design space.
        seed: Seed of the random fallback.
    """

    def __init__(self, space: DesignSpace, *, seed: int | None = None) -> None:
        self._space = space
        self._fallback = optuna.samplers.RandomSampler(seed=seed)

    def _design(self, study: Study, trial: FrozenTrial) -> dict[str, Any]:
        """The next design: a value for every free parameter (Optuna's representation)."""
        raise NotImplementedError

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        """Every free parameter of the space: a trial's design is drawn whole."""
        return self._space.distributions()

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        """:meth:`_design`'s values of the parameters in ``search_space``."""
        if not search_space:
            return {}
        params = self._design(study, trial)
        return {name: params[name] for name in search_space if name in params}

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        """A parameter outside the space, at random."""
        return self._fallback.sample_independent(study, trial, param_name, param_distribution)

    def reseed_rng(self) -> None:
        """Fresh randomness (Optuna calls this for thread workers); subclasses add their own."""
        self._fallback.reseed_rng()

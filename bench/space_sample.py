"""Designs drawn from a shipped design space, for the benches that score a space's designs
(``bench/node_energy.py``, ``bench/dram_default.py``): each parameter uniform over its values (a
grid's values, or its range, log-uniform where the space says ``log``), with the space's evaluator."""

from __future__ import annotations

import numpy as np

import workloads
from accel_dse.search import ModelEvaluator, load_space


def space_sample(space_name: str, n: int, seed: int) -> tuple[dict[str, np.ndarray], ModelEvaluator]:
    """``n`` designs of the space ``space_name`` (columns of field values) and its workloads' evaluator."""
    space = load_space(space_name)
    rng = np.random.default_rng(seed)
    columns: dict[str, np.ndarray] = {}
    for p in space.params:
        grid = p.grid_values()
        if grid is not None:
            columns[p.field] = np.array([grid[int(i)] for i in rng.integers(0, len(grid), n)])
        elif p.log:
            columns[p.field] = np.exp(rng.uniform(np.log(p.low), np.log(p.high), n))
        else:
            columns[p.field] = rng.uniform(p.low, p.high, n)
    return columns, ModelEvaluator([(w.spec, w.weight, workloads.resolve(w.spec)) for w in space.workloads])

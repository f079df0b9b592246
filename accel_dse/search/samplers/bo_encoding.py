"""Designs as the ``bo`` sampler sees them: position vectors and points of the unit cube.

A design's *position* holds, per free parameter, the index of its value (finite parameters:
categories, pow2 exponents, numeric choices, integer and stepped real ranges) or its coordinate
in [0, 1] (continuous reals). The GP's inputs: one coordinate in [0, 1] per ordered parameter
(normalised value; log ranges in log space; a pow2 exponent or a numeric choice's position),
one-hot for an unordered category (dataflow, booleans).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from accel_dse.search.space.design_space import DesignSpace

__all__ = ["Encoder"]


@dataclasses.dataclass(frozen=True)
class _Axis:
    """One free parameter: its Optuna values (finite) or range (continuous) and its coordinates."""

    name: str
    dist: BaseDistribution
    values: tuple[Any, ...] | None  # finite: every Optuna value in order
    coords: np.ndarray | None  # finite ordered: coordinate in [0, 1] of each value
    onehot: bool

    @property
    def size(self) -> int:
        return len(self.values) if self.values is not None else 0

    @property
    def width(self) -> int:
        return self.size if self.onehot else 1


def _axis(name: str, dist: BaseDistribution) -> _Axis:
    if isinstance(dist, CategoricalDistribution):
        return _Axis(name, dist, tuple(dist.choices), None, True)
    if isinstance(dist, IntDistribution):
        values: list[Any] = list(range(dist.low, dist.high + 1, dist.step))
    elif isinstance(dist, FloatDistribution) and dist.step is not None:
        count = int(round((dist.high - dist.low) / dist.step)) + 1
        values = [dist.low + i * dist.step for i in range(count)]
    else:
        return _Axis(name, dist, None, None, False)
    raw = np.asarray(values, dtype=float)
    if getattr(dist, "log", False):
        raw = np.log(raw)
    span = raw[-1] - raw[0]
    coords = (raw - raw[0]) / span if span > 0 else np.zeros_like(raw)
    return _Axis(name, dist, tuple(values), coords, False)


class Encoder:
    """Designs as position vectors and as points of the unit cube.

    A design's *position* holds, per free parameter, the index of its value (finite
    parameters) or its coordinate in [0, 1] (continuous reals). :meth:`encode` maps positions
    to the GP's inputs: one coordinate per ordered parameter, one-hot for a categorical one.

    Args:
        space: The design space.
    """

    def __init__(self, space: DesignSpace) -> None:
        self.axes = [_axis(name, dist) for name, dist in space.distributions().items()]
        self.dim = sum(a.width for a in self.axes)
        self.finite = all(a.values is not None for a in self.axes)
        self.sizes = [a.size for a in self.axes]

    def position(self, params: dict[str, Any]) -> np.ndarray | None:
        """Position of Optuna ``params`` (``None`` if a parameter is missing or out of the space)."""
        out = np.empty(len(self.axes))
        for i, a in enumerate(self.axes):
            if a.name not in params:
                return None
            v = params[a.name]
            if a.onehot:
                if v not in a.values:  # type: ignore[operator]
                    return None
                out[i] = a.values.index(v)  # type: ignore[union-attr]
            elif a.values is not None:
                out[i] = int(np.argmin(np.abs(np.asarray(a.values, dtype=float) - float(v))))
            else:
                out[i] = self._unit(a, float(v))
        return out

    @staticmethod
    def _unit(a: _Axis, v: float) -> float:
        d = a.dist
        lo, hi, x = float(d.low), float(d.high), v  # type: ignore[attr-defined]
        if getattr(d, "log", False):
            lo, hi, x = math.log(lo), math.log(hi), math.log(v)
        return min(max((x - lo) / (hi - lo), 0.0), 1.0) if hi > lo else 0.0

    def params(self, pos: np.ndarray) -> dict[str, Any]:
        """Optuna parameter values of position ``pos``."""
        out: dict[str, Any] = {}
        for a, p in zip(self.axes, pos, strict=True):
            if a.values is not None:
                out[a.name] = a.values[int(round(p))]
                continue
            d = a.dist
            lo, hi = float(d.low), float(d.high)  # type: ignore[attr-defined]
            if getattr(d, "log", False):
                value = math.exp(math.log(lo) + p * (math.log(hi) - math.log(lo)))
            else:
                value = lo + p * (hi - lo)
            out[a.name] = float(min(max(value, lo), hi))
        return out

    def encode(self, positions: np.ndarray) -> np.ndarray:
        """Unit-cube inputs (m, :attr:`dim`) of positions (m, number of free parameters)."""
        positions = np.atleast_2d(positions)
        x = np.zeros((len(positions), self.dim))
        col = 0
        for i, a in enumerate(self.axes):
            p = positions[:, i]
            if a.onehot:
                x[np.arange(len(p)), col + p.astype(np.int64)] = 1.0
            elif a.coords is not None:
                x[:, col] = a.coords[p.astype(np.int64)]
            else:
                x[:, col] = p
            col += a.width
        return x

    def random(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` random positions: uniform in each parameter's coordinate (log scale for log ranges)."""
        out = np.empty((n, len(self.axes)))
        for i, a in enumerate(self.axes):
            if a.onehot:
                out[:, i] = rng.integers(0, a.size, n)
            elif a.coords is not None:
                u = rng.random(n)
                right = np.clip(np.searchsorted(a.coords, u), 1, a.size - 1) if a.size > 1 else np.zeros(n, int)
                left = np.maximum(right - 1, 0)
                nearer_left = np.abs(a.coords[left] - u) <= np.abs(a.coords[right] - u)
                out[:, i] = np.where(nearer_left, left, right)
            else:
                out[:, i] = rng.random(n)
        return out

    def grid(self) -> np.ndarray:
        """Every position of a finite space (last parameter fastest)."""
        return np.stack(np.meshgrid(*[np.arange(s) for s in self.sizes], indexing="ij"), -1).reshape(
            -1, len(self.axes)).astype(float)

    def grid_index(self, positions: np.ndarray) -> np.ndarray:
        """Mixed-radix index of finite positions in :meth:`grid`."""
        index = np.zeros(len(positions), dtype=np.int64)
        for i, s in enumerate(self.sizes):
            index = index * s + positions[:, i].astype(np.int64)
        return index

    def moves(self, pos: np.ndarray, rng: np.random.Generator) -> list[tuple[int, float]]:
        """Single-parameter moves from ``pos``: (parameter, new position)."""
        out: list[tuple[int, float]] = []
        for i, a in enumerate(self.axes):
            p = pos[i]
            if a.onehot:
                out += [(i, float(j)) for j in range(a.size) if j != p]
            elif a.values is not None:
                steps = {1, max(1, a.size // 16)}
                out += [(i, p + s) for s in steps for s in (s, -s) if 0 <= p + s < a.size]
            else:
                out += [(i, float(np.clip(p + d, 0.0, 1.0))) for d in (-0.05, 0.05, *rng.normal(0, 0.02, 4))]
        return out

    def neighbours(self, pos: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Every design one or two moves away from ``pos``."""
        moves = self.moves(pos, rng)
        rows = []
        for i, v in moves:
            row = pos.copy()
            row[i] = v
            rows.append(row)
        for (i, v), (j, w) in itertools.combinations(moves, 2):
            if i != j:
                row = pos.copy()
                row[i], row[j] = v, w
                rows.append(row)
        return np.asarray(rows) if rows else np.empty((0, len(self.axes)))

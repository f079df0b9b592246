"""``plan_tiles``: the buffer tiling of one GEMM instance, as the RTL simulator runs it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product

import numpy as np

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from perf_model import timing
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import op_arrays
from perf_model.evaluator.design_ops import evaluate_block, order_names, resident_name
from perf_model.physical.energy import DEFAULT_ENERGY
from perf_model.physical.pe_area import area_coefficients
from workloads.ops import Conv2d, Gemm

__all__ = ["TilePlan", "plan_tiles"]

Tile = tuple[int, int, int, int, int, int, bool]


@dataclass(frozen=True)
class TilePlan:
    """The tiling of one ``m x k x n`` GEMM instance on one design.

    Attributes:
        status: ``"ok"`` or ``"infeasible"``; ``reason`` says why (``""`` when ok).
        m, k, n: the GEMM.
        mt, kt, nt: tile dims (edge tiles are smaller).
        order: GEMM dims of the tile loops, outer to inner, e.g. ``("m", "n", "k")``.
        dataflow, rows, cols: the design's array (to compute cycles).
        resident: ``"a"`` or ``"b"`` when that input stays in its buffer as a whole strip across
            the middle loop (``perf_model.evaluator.tiling``: read from DRAM once), else ``""``.
    """

    status: str
    reason: str
    m: int
    k: int
    n: int
    mt: int
    kt: int
    nt: int
    order: tuple[str, str, str]
    dataflow: int
    rows: int
    cols: int
    shadow: bool
    resident: str = ""

    @property
    def feasible(self) -> bool:
        """Whether the design can run the GEMM."""
        return self.status == "ok"

    def tiles(self) -> Iterator[Tile]:
        """``(m0, m1, k0, k1, n0, n1, accumulate)`` per run, in execution order.

        ``accumulate`` is true when the run adds to partial sums already in the ofmap buffer
        (``k0 > 0``). One ``start`` of the RTL per tile; the op's compute cycles are the sum of
        :func:`timing.run_cycles` over these tiles (:meth:`compute_cycles`).

        Raises:
            ModelError: the plan is infeasible.
        """
        if not self.feasible:
            raise ModelError(f"no tiles: {self.reason}")
        size = {"m": self.m, "k": self.k, "n": self.n}
        step = {"m": self.mt, "k": self.kt, "n": self.nt}
        ranges = [range(0, size[d], step[d]) for d in self.order]
        for starts in product(*ranges):
            at = dict(zip(self.order, starts, strict=True))
            m0, k0, n0 = at["m"], at["k"], at["n"]
            yield (m0, min(m0 + self.mt, self.m), k0, min(k0 + self.kt, self.k), n0,
                   min(n0 + self.nt, self.n), k0 > 0)

    def compute_cycles(self) -> int:
        """Sum of :func:`timing.run_cycles` over :meth:`tiles` (a loop; for checks, not speed)."""
        total = 0
        for m0, m1, k0, k1, n0, n1, _ in self.tiles():
            total += int(timing.run_cycles(self.dataflow, self.rows, self.cols, m1 - m0, k1 - k0, n1 - n0,
                                             self.shadow))
        return total


def plan_tiles(config: ArrayConfig, gemm: Gemm | Conv2d, *, ifmap_reserve: int = 0,
               a_on_chip: bool = False) -> TilePlan:
    """The tiling the model uses for one instance of ``gemm`` on ``config``.

    A ``Conv2d`` is planned as its im2col GEMM; ``batch`` is ignored (every instance is tiled
    the same way). On-chip reuse (``perf_model.compiler.chain``): ``ifmap_reserve``, ifmap words the
    tiles may not use (held for the next layer's input); ``a_on_chip``, ``A`` is in the ifmap
    already (its tiles take no room and no DRAM bytes).

    Raises:
        ModelError: ``config`` is not an ``ArrayConfig`` or ``gemm`` not an op record.
    """
    if not isinstance(config, ArrayConfig):
        raise ModelError(f"config must be an ArrayConfig, not {config!r}")
    if not isinstance(gemm, (Gemm, Conv2d)):
        raise ModelError(f"gemm must be a Gemm or Conv2d record, not {gemm!r}")
    g = gemm.to_gemm()
    one = Gemm(m=g.m, k=g.k, n=g.n, name=g.name)
    designs = DesignArrays.from_configs([config])
    block = evaluate_block(designs, op_arrays([(one, 1)]), DEFAULT_ENERGY, area_coefficients(), scorers=None,
                           ifmap_reserve=np.array([[ifmap_reserve]]) if ifmap_reserve else None,
                           a_on_chip=np.array([[True]]) if a_on_chip else None)
    df = int(designs.dataflow[0])
    ok = bool(block.feasible[0, 0])
    mt, kt, nt = (int(v) for v in np.asarray(block.tile[:, 0, 0]))
    outer, middle, inner = order_names(df, int(block.order[0, 0])).split(",")
    resident = resident_name(df, int(block.order[0, 0]), ok and bool(block.resident[0, 0]))
    return TilePlan(
        status="ok" if ok else "infeasible", reason=block.failure(0, 0), m=g.m, k=g.k, n=g.n,
        mt=mt, kt=kt, nt=nt, order=(outer, middle, inner), dataflow=df, rows=config.rows, cols=config.cols,
        shadow=config.shadow_stationary, resident=resident,
    )

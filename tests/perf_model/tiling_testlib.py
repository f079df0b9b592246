"""Exhaustive tiling search for the perf-model tests and bench/tiling_optimality.py.

Every legal tiling of one GEMM instance on one design, under the RTL's rules as
``perf_model.evaluator.tiling`` states them:

* a tile ``(t_r, t_c, t_s)`` (mapped dims, see ``perf_model.evaluator.problem``) is whole folds along r
  and c (a multiple of R / C, or the whole dimension) and any length ``s_min <= t_s <= D_s``
  along s (``s_min`` defaults to the model's documented floor ``min(D_s, max(R, C))``);
* it fits when every buffer holds the words :func:`perf_model.timing.run_words` says a run
  needs, against :func:`perf_model.timing.buffer_depth_words` (half of it when double
  buffered);
* a loop order is spill-free when partial sums never leave the ofmap buffer: the reduction
  dimension innermost, or a single tile along it;
* with the reduction innermost, the input free in the middle loop may also be held resident
  when its whole strip (the outer loop's tile by the whole K) fits its buffer.

Each tiling is scored with the model's own per-tiling traffic (``perf_model.evaluator.schedule.schedule``
on the very ``Problem`` the model builds for the pair), so the scores follow any change of the
traffic rules; :func:`check_optimum` re-scores the best one with the run-by-run reference of
``model_testlib``. Nothing here calls the candidate search under test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from model_testlib import GEMM_OF, SLOW_MHZ, reference

from accel_spec.config import ArrayConfig
from perf_model import timing
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import op_arrays
from perf_model.evaluator.design_ops import evaluate_block
from perf_model.evaluator.schedule import schedule
from perf_model.evaluator.tiling import ORDERS, Tiling
from perf_model.physical.energy import DEFAULT_ENERGY
from perf_model.physical.pe_area import area_coefficients
from workloads.ops import Gemm

#: Grid resolution the bound of :func:`grid_bound` is stated for (the tiling docstring's grid).
BOUND_LEVELS = 7


@dataclass(frozen=True)
class Optimum:
    """The exhaustive search's result for one design-op pair.

    Attributes:
        legal: number of legal (tile, spill-free order) pairs.
        bytes: least DRAM bytes (reads + writes) over them; ``inf`` when none is legal.
        single_k_bytes: least DRAM bytes among those with a single tile along K (``inf``: none).
        tile: ``{"m", "k", "n"}`` tile of an optimal tiling.
        order: its loop order, mapped dims outer to inner.
        resident: ``"a"``/``"b"``, the input it holds resident (``""``: none).
    """

    legal: int
    bytes: float
    single_k_bytes: float
    tile: dict[str, int]
    order: tuple[int, int, int]
    resident: str = ""


def mapped(config: ArrayConfig, gemm: Gemm) -> tuple[int, tuple[int, int, int]]:
    """``(dataflow code, (D_r, D_c, D_s))``."""
    df = timing.dataflow_code(config.dataflow)
    ds, dr, dc = timing.array_dims(df, gemm.m, gemm.k, gemm.n)
    return df, (int(dr), int(dc), int(ds))


def capacities(config: ArrayConfig) -> tuple[int, int, int]:
    """Words of the ifmap, weight and ofmap buffers one run may use (half when double buffered)."""
    df = timing.dataflow_code(config.dataflow)
    elems = timing.word_elems(df, config.rows, config.cols)
    kib = (config.ifmap_sram_kib, config.weight_sram_kib, config.ofmap_sram_kib)
    bits = (config.input_bits, config.input_bits, config.acc_bits)
    caps = [int(timing.buffer_depth_words(kb, e, b)) for kb, e, b in zip(kib, elems, bits, strict=True)]
    return tuple(c // 2 if config.double_buffered else c for c in caps)  # type: ignore[return-value]


def legal_tilings(config: ArrayConfig, gemm: Gemm, *, s_min: int | None = None,
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every legal ``(tile, order, resident)``: ``(3, N)`` mapped tiles, ``(N,)`` indices into
    ``ORDERS`` and ``(N,)`` bools (the middle loop's input held as a strip)."""
    df, (dr, dc, ds) = mapped(config, gemm)
    R, C = config.rows, config.cols
    tr = np.unique(np.minimum(dr, R * np.arange(1, -(-dr // R) + 1)))
    tc = np.unique(np.minimum(dc, C * np.arange(1, -(-dc // C) + 1)))
    floor = min(ds, max(R, C)) if s_min is None else min(ds, s_min)
    ts = np.arange(floor, ds + 1)
    names = GEMM_OF[df]
    # every (t_r, t_c, t_s) of the grid, as broadcast axes: run_words is element-wise, so each
    # buffer's words come out on the grid without building it (a 1-wide array has 300**3 tiles)
    axes = (tr[:, None, None], tc[None, :, None], ts[None, None, :])
    words = timing.run_words(df, R, C, *(axes[names.index(d)] for d in "mkn"))
    cap = capacities(config)
    fits = (words[0] <= cap[0]) & (words[1] <= cap[1]) & (words[2] <= cap[2])
    fits = np.broadcast_to(fits, (len(tr), len(tc), len(ts)))
    t = np.array([v[i] for v, i in zip((tr, tc, ts), np.nonzero(fits), strict=True)]).reshape(3, -1)  # grid order
    mt, kt, nt = (t[names.index(d)] for d in "mkn")
    k_dim = names.index("k")
    k_whole = t[k_dim] >= (dr, dc, ds)[k_dim]
    strip = timing.run_words(df, R, C, mt, np.full_like(kt, gemm.k), nt)  # every tile with the whole K
    tiles, orders, resident = [], [], []
    for index, order in enumerate(ORDERS):
        spill_free = k_whole | (order[2] == k_dim)
        tiles.append(t[:, spill_free])
        orders.append(np.full(int(spill_free.sum()), index))
        resident.append(np.zeros(int(spill_free.sum()), dtype=bool))
        if order[2] == k_dim:  # the middle loop's input (free in it) held: A when it is n, B when m
            buffer = 0 if names[order[1]] == "n" else 1
            held = strip[buffer] <= cap[buffer]
            tiles.append(t[:, held])
            orders.append(np.full(int(held.sum()), index))
            resident.append(np.ones(int(held.sum()), dtype=bool))
    return np.concatenate(tiles, axis=1), np.concatenate(orders), np.concatenate(resident)


def tiling_bytes(config: ArrayConfig, gemm: Gemm, t: np.ndarray, order: np.ndarray,
                 resident: np.ndarray | None = None) -> np.ndarray:
    """DRAM bytes (reads + writes) of one instance under each tiling, by the model's traffic rules."""
    designs = DesignArrays.from_configs([config])
    block = evaluate_block(designs, op_arrays([(Gemm(m=gemm.m, k=gemm.k, n=gemm.n), 1)]), DEFAULT_ENERGY,
                           area_coefficients(), scorers=None)
    n = t.shape[1]
    p = block._problem.take(np.zeros(n, dtype=np.int64))
    tiling = Tiling(feasible=np.ones(n, dtype=bool), t=t.astype(np.float64), order=order, traffic=np.zeros(n),
                    resident=np.zeros(n, dtype=bool) if resident is None else resident)
    s = schedule(p, tiling)  # traffic alone
    return np.asarray(s.dram_read.sum(axis=0) + s.dram_write.sum(axis=0))


def exhaustive_optimum(config: ArrayConfig, gemm: Gemm, *, s_min: int | None = None) -> Optimum:
    """The least DRAM bytes over every legal spill-free tiling of one instance of ``gemm``."""
    t, order, resident = legal_tilings(config, gemm, s_min=s_min)
    if t.shape[1] == 0:
        return Optimum(legal=0, bytes=math.inf, single_k_bytes=math.inf, tile={}, order=(0, 1, 2))
    df, dims = mapped(config, gemm)
    scores = tiling_bytes(config, gemm, t, order, resident)
    best = int(np.argmin(scores))
    k_dim = GEMM_OF[df].index("k")
    single = t[k_dim] >= dims[k_dim]
    return Optimum(
        legal=int(t.shape[1]), bytes=float(scores[best]),
        single_k_bytes=float(scores[single].min()) if single.any() else math.inf,
        tile={GEMM_OF[df][x]: int(t[x, best]) for x in range(3)}, order=ORDERS[int(order[best])],
        resident=("a" if GEMM_OF[df][ORDERS[int(order[best])][1]] == "n" else "b") if resident[best] else "",
    )


def reference_bytes(config: ArrayConfig, gemm: Gemm, tile: dict[str, int], order: tuple[int, int, int],
                    resident: str = "") -> float:
    """DRAM bytes of one instance under a tiling, by the run-by-run reference."""
    df = timing.dataflow_code(config.dataflow)
    _, _, reads, writes = reference(df, config.rows, config.cols, {"m": gemm.m, "k": gemm.k, "n": gemm.n}, tile,
                                    order, config.input_bits, config.acc_bits, 1.0, 1, False,
                                    config.shadow_stationary, resident)
    return float(reads + writes)


def grid_bound(folds: int, levels: int = BOUND_LEVELS) -> float:
    """Worst ratio of tile counts between the best tile along a gridded dim and a grid level.

    The grid has ``levels`` fold counts ``min(F, ceil(F ** (l / (levels - 1))))``. For an
    optimal tile of ``b`` folds the largest grid level ``phi <= b`` fits wherever ``b`` does
    and has ``ceil(F / phi)`` tiles instead of ``ceil(F / b)``; the ratio, maximised over
    ``b``, bounds the extra reads of that operand, hence of the whole traffic.
    """
    grid = sorted({min(folds, math.ceil(folds ** (level / (levels - 1)))) for level in range(levels)})
    worst = 1.0
    for b in range(1, folds + 1):
        phi = max(g for g in grid if g <= b)
        worst = max(worst, math.ceil(folds / phi) / math.ceil(folds / b))
    return worst


def gridded_folds(config: ArrayConfig, gemm: Gemm) -> int:
    """Folds along the dim the reduction-innermost candidates grid: c for WS/IS, r for OS."""
    df, (dr, dc, _) = mapped(config, gemm)
    return -(-dr // config.rows) if df == 1 else -(-dc // config.cols)


def random_pair(rng: np.random.Generator, max_dim: int = 300) -> tuple[ArrayConfig, Gemm]:
    """A design with small buffers (1-2 KiB, so tiling matters) and a GEMM up to ``max_dim``."""
    ib = int(rng.choice([8, 16]))
    config = ArrayConfig(
        rows=int(rng.choice([1, 2, 3, 4, 8, 16])), cols=int(rng.choice([1, 2, 3, 4, 8, 16])),
        dataflow=str(rng.choice(["ws", "os", "is"])), input_bits=ib, acc_bits=int(rng.integers(2 * ib, 65)),
        ifmap_sram_kib=int(rng.integers(1, 3)), weight_sram_kib=int(rng.integers(1, 3)),
        ofmap_sram_kib=int(rng.integers(1, 3)), double_buffered=bool(rng.integers(0, 2)), clock_mhz=SLOW_MHZ,
    )
    m, k, n = (int(rng.integers(1, max_dim + 1)) for _ in range(3))
    return config, Gemm(m=m, k=k, n=n)

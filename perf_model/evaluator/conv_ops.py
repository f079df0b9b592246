"""Convolutions run on chip, in the vectorised model (internal).

A ``Conv2d`` on a design that builds its kernel windows on chip (weight-stationary,
``perf_model.compiler.conv``) does not run as the host's im2col GEMM the block scores first: it
runs as one ``compile_conv`` program (all its images: whole images stacked in a run where
the band of an image is its whole input). This module puts that program's figures in place
of the GEMM's, element by element, so ``evaluate``, ``evaluate_designs`` (the sweep) and
``simulate`` score a conv the same way:

* the path: on chip unless the design does not build windows, or the im2col GEMM (the block's
  own figure) takes fewer cycles than the on-chip program, by more than :data:`TIE` (within it,
  the path of fewer DRAM bytes); a conv whose smallest band does not fit is infeasible, its
  reason naming the op and the words it needs;
* cycles: the program walk's (``perf_model.program_timing``, the RTL's counters);
* DRAM bytes: the program's transfers (the images' bands with their halo re-reads, the weights
  as the runs read them, the output), the output stage's parameters excluded as for a GEMM;
* SRAM bytes by the rules of ``perf_model.evaluator.schedule`` applied to the program's runs.

The figures come from a *scorer* (``ConvScorer``) that the compiler's floor provides
(``perf_model.compiler.conv_score``) and ``perf_model`` registers at import
(:func:`register_scorer`): the evaluator sits below the compiler and imports none of it.
Elements whose input or output stays on chip across layers (``reuse_links``) keep the GEMM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from accel_dse.config import ArrayConfig
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import OpArrays
from workloads.ops import Conv2d

__all__ = ["ConvFigures", "ConvScorer", "ConvOverlay", "register_scorer", "conv_overlay", "choose_path"]

#: Path codes per element: the GEMM as scored (not a conv, or a conv left to the host), on chip.
HOST, CHIP = 0, 1


@dataclass(frozen=True)
class ConvFigures:
    """A conv on chip, all its images (``feasible`` False: ``reason`` says why, nothing else holds).

    ``read``/``write``/``sram_read``/``sram_write``: bytes per operand ``(A, B, C)``.
    ``tile``: ``(m, k, n)`` of the program's first run.
    """

    feasible: bool
    reason: str
    compute: int = 0
    total: int = 0
    folds: int = 0
    read: tuple[float, float, float] = (0.0, 0.0, 0.0)
    write: tuple[float, float, float] = (0.0, 0.0, 0.0)
    sram_read: tuple[float, float, float] = (0.0, 0.0, 0.0)
    sram_write: tuple[float, float, float] = (0.0, 0.0, 0.0)
    tile: tuple[int, int, int] = (0, 0, 0)


#: ``(design, conv, requantised) -> ConvFigures``, or the reason the design builds no
#: windows (the conv stays the host's im2col GEMM).
ConvScorer = Callable[[ArrayConfig, Conv2d, bool], "ConvFigures | str"]
_SCORER: list[ConvScorer] = []


def register_scorer(scorer: ConvScorer) -> None:
    """Make ``scorer`` the one the block asks (``perf_model`` registers the compiler's at import)."""
    _SCORER[:] = [scorer]


#: Cycles within this fraction of each other are a tie, which the fewer DRAM bytes decide.
TIE = 0.01


def choose_path(host: tuple[float, float], host_ok: bool, chip: tuple[float, float]) -> int:
    """:data:`CHIP` or :data:`HOST` from each path's ``(cycles, DRAM bytes)``: the fewer cycles,
    unless within :data:`TIE` of each other (then the fewer bytes); on chip when the host's im2col
    GEMM is infeasible."""
    if not host_ok:
        return CHIP
    if abs(host[0] - chip[0]) <= TIE * max(host[0], chip[0]):
        return HOST if host[1] < chip[1] else CHIP
    return HOST if host[0] < chip[0] else CHIP


@dataclass
class ConvOverlay:
    """Per element (flat, design-major): the path, and the figures of the elements on chip.

    ``infeasible``: element -> reason (the conv does not fit on chip). ``notes``: element -> why
    the host builds the im2col ``A`` (a conv left on the GEMM path).
    """

    path: np.ndarray
    infeasible: dict[int, str]
    notes: dict[int, str]
    figures: dict[int, ConvFigures]

    @property
    def any(self) -> bool:
        return bool(self.figures) or bool(self.infeasible)

    def apply(self, values: np.ndarray, pick: Callable[[ConvFigures], float | tuple[float, ...]],
              times: np.ndarray) -> np.ndarray:
        """``values`` (``(N,)`` or ``(3, N)``) with each chip element's figure ``pick(f) * times``."""
        out = np.array(values, dtype=np.float64, copy=True)
        for e, f in self.figures.items():
            v = np.asarray(pick(f), dtype=np.float64) * times[e]
            if out.ndim == 1:
                out[e] = v
            else:
                out[:, e] = v
        return out


def conv_overlay(designs: DesignArrays, ops: OpArrays, host_total: np.ndarray, host_bytes: np.ndarray,
                 host_ok: np.ndarray, keep: np.ndarray | None) -> ConvOverlay:
    """The path and figures of every conv element (flat index ``design * ops + op``).

    ``host_total``/``host_bytes``/``host_ok``: the block's im2col GEMM figures per element (cycles,
    DRAM bytes read and written, feasible); ``keep``: elements
    that keep the GEMM whatever (an on-chip link), or ``None``.
    """
    no = len(ops)
    n = len(designs) * no
    overlay = ConvOverlay(np.zeros(n, dtype=np.int8), {}, {}, {})
    convs = [(o, op) for o, op in enumerate(ops.ops) if isinstance(op, Conv2d)]
    if not convs or not _SCORER:
        return overlay
    scorer = _SCORER[0]
    for i in range(len(designs)):
        config = designs.config(i)
        for o, op in convs:
            e = i * no + o
            if keep is not None and keep[e]:
                continue
            figures = scorer(config, op, bool(ops.requant[o]))
            if isinstance(figures, str):
                overlay.notes[e] = figures
                continue
            if not figures.feasible:
                overlay.infeasible[e] = figures.reason
                continue
            chip = figures.total
            host = float(host_total[e]) / ops.counts[o]
            chip_bytes = sum(figures.read) + sum(figures.write)
            if choose_path((host, float(host_bytes[e]) / ops.counts[o]), bool(host_ok[e]), (chip, chip_bytes)) == CHIP:
                overlay.path[e] = CHIP
                overlay.figures[e] = figures
            else:
                overlay.notes[e] = (f"{op.name or 'conv'}: the host's im2col GEMM takes {host:,.0f} cycles, "
                                    f"windows on chip {chip:,} ({op.n} image(s) in one program)")
    return overlay

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

With on-chip reuse, a *chain* of convs on chip (each reading the previous one's NHWC output as is:
``OpArrays.conv_link``; ResNet's ``conv1 -> conv2``) on a design that can keep an output in its
ifmap (``reuse_links.can_move``) is scored once more as one program with its links on chip (a
*chain scorer*, ``perf_model.compiler.conv_chain_score``, registered like the conv scorer). The
chain replaces its convs' own programs when :func:`choose_path` prefers it (fewer cycles, or
within :data:`TIE` fewer DRAM bytes); its convs then show their input and output on chip.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from accel_spec.config import ArrayConfig
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import OpArrays
from perf_model.evaluator.reuse_links import can_move
from workloads.ops import Conv2d

__all__ = ["ConvFigures", "ConvScorer", "ChainScorer", "ConvOverlay", "register_scorer", "register_chain_scorer",
           "conv_overlay", "choose_path"]

#: Path codes per element: the GEMM as scored (not a conv, or a conv left to the host), on chip.
HOST, CHIP = 0, 1


@dataclass(frozen=True)
class ConvFigures:
    """A conv on chip, all its images (``feasible`` False: ``reason`` says why, nothing else holds).

    ``read``/``write``/``sram_read``/``sram_write``: bytes per operand ``(A, B, C)``.
    ``tile``: ``(m, k, n)`` of the program's first run. ``form``: how the program reshapes the conv,
    in words, or ``""``; ``steps``: those reshapes (``perf_model.compiler.conv_forms``), or ``()``;
    ``host_writes``: per reshape, ``(host work kind, elements the host writes)``.
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
    form: str = ""
    steps: tuple[str, ...] = ()
    host_writes: tuple[tuple[str, int], ...] = ()


#: ``(design, conv, requantised) -> ConvFigures``, or the reason the design builds no
#: windows (the conv stays the host's im2col GEMM).
ConvScorer = Callable[[ArrayConfig, Conv2d, bool], "ConvFigures | str"]
_SCORER: list[ConvScorer] = []


#: ``(design, convs of a chain) -> one ConvFigures per conv`` with the chain's links on chip, or
#: the reason the design cannot keep them there.
ChainScorer = Callable[[ArrayConfig, tuple[Conv2d, ...]], "tuple[ConvFigures, ...] | str"]
_CHAIN_SCORER: list[ChainScorer] = []


def register_scorer(scorer: ConvScorer) -> None:
    """Make ``scorer`` the one the block asks (``perf_model`` registers the compiler's at import)."""
    _SCORER[:] = [scorer]


def register_chain_scorer(scorer: ChainScorer) -> None:
    """Make ``scorer`` the one the block asks for chains (``perf_model`` registers the compiler's)."""
    _CHAIN_SCORER[:] = [scorer]


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
    the host builds the im2col ``A`` (a conv left on the GEMM path). ``a_chip``/``c_chip``: the
    elements of kept chains whose input is on chip already / whose output stays there.
    """

    path: np.ndarray
    infeasible: dict[int, str]
    notes: dict[int, str]
    figures: dict[int, ConvFigures]
    a_chip: set[int] = field(default_factory=set)
    c_chip: set[int] = field(default_factory=set)

    def chain_flags(self, a: np.ndarray | None, c: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``(a_on_chip, c_on_chip)`` flags (``n`` elements) of ``a``/``c`` (or none) and the kept chains."""
        out = []
        for given, chain in ((a, self.a_chip), (c, self.c_chip)):
            flags = np.zeros(n, dtype=bool) if given is None else given.copy()
            flags[list(chain)] = True
            out.append(flags)
        return out[0], out[1]

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
                 host_ok: np.ndarray, keep: np.ndarray | None, chains: bool = False) -> ConvOverlay:
    """The path and figures of every conv element (flat index ``design * ops + op``).

    ``host_total``/``host_bytes``/``host_ok``: the block's im2col GEMM figures per element (cycles,
    DRAM bytes read and written, feasible); ``keep``: elements
    that keep the GEMM whatever (an on-chip link), or ``None``; ``chains``: score the chains of
    convs on chip with their links on chip too (module docstring).
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
        chosen: dict[int, tuple[float, float]] = {}  # element -> its path's (cycles, DRAM bytes), chip feasible
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
            gemm = (host, float(host_bytes[e]) / ops.counts[o])
            if choose_path(gemm, bool(host_ok[e]), (chip, chip_bytes)) == CHIP:
                overlay.path[e] = CHIP
                overlay.figures[e] = figures
                chosen[e] = (chip, chip_bytes)
            else:
                chosen[e] = gemm
                overlay.notes[e] = (f"{op.name or 'conv'}: the host's im2col GEMM takes {host:,.0f} cycles, "
                                    f"windows on chip {chip:,} ({op.n} image(s) in one program)")
        if chains and _CHAIN_SCORER and can_move(designs.dataflow[i], designs.rows[i], designs.cols[i]):
            _keep_chains(overlay, config, ops, i * no, chosen)
    return overlay


def _keep_chains(overlay: ConvOverlay, config: ArrayConfig, ops: OpArrays, base: int,
                 chosen: dict[int, tuple[float, float]]) -> None:
    """Score each maximal chain of linked convs that can run on chip, of one design (elements ``base
    + op``; ``chosen``: each one's ``(cycles, DRAM bytes)`` on the path it took, on chip or the
    host's GEMM), as one program, and keep it where :func:`choose_path` prefers it to those paths."""
    scorer = _CHAIN_SCORER[0]
    o = 0
    while o < len(ops):
        end = o
        while end + 1 < len(ops) and ops.conv_link[end] and base + end in chosen and base + end + 1 in chosen:
            end += 1
        if end > o:
            elements = list(range(base + o, base + end + 1))
            chain = scorer(config, tuple(ops.ops[o:end + 1]))  # type: ignore[arg-type]
            if not isinstance(chain, str):
                alone = (sum(chosen[e][0] for e in elements), sum(chosen[e][1] for e in elements))
                kept = (sum(f.total for f in chain), sum(sum(f.read) + sum(f.write) for f in chain))
                if choose_path(alone, True, kept) == CHIP:
                    for e, f in zip(elements, chain, strict=True):
                        overlay.path[e] = CHIP
                        overlay.figures[e] = f
                        overlay.notes.pop(e, None)
                    overlay.c_chip.update(elements[:-1])
                    overlay.a_chip.update(elements[1:])
        o = end + 1

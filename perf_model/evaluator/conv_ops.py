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

The figures come from *scorers* (:class:`ConvScorers`) that the compiler's floor provides
(``perf_model.compiler.scorers.COMPILER_SCORERS``) and the caller passes in: the evaluator sits
below the compiler and imports none of it, and holds no scorer of its own (no registration at
import: a caller that passes none scores every conv as its im2col GEMM).
Elements whose input or output stays on chip across layers (``reuse_links``) keep the GEMM.

Vectorised over designs: a third scorer (``ConvScorers.designs``, the compiler's
``conv_designs.design_groups``) scores a conv on all designs at once, and :func:`conv_overlay` then
chooses the paths (:func:`choose_paths`) and keeps the chains with numpy over designs, the chain
programs scored once per group of designs a program cannot tell apart. The overlay holds arrays
over elements (:class:`ConvOverlay`); ``conv_overlay(..., vectorised=False)`` is the reference,
design by design with the scalar scorers, which the vectorised path equals
(``tests/perf_model/test_model_conv_designs.py``).

With on-chip reuse, a *chain* of convs on chip (each reading the previous one's NHWC output as is:
``OpArrays.conv_link``; ResNet's ``conv1 -> conv2``) on a design that can keep an output in its
ifmap (``reuse_links.can_move``) is scored once more as one program with its links on chip (a
*chain scorer*, ``perf_model.compiler.conv_chain_score``, ``ConvScorers.chain``). The
chain replaces its convs' own programs when :func:`choose_path` prefers it (fewer cycles, or
within :data:`TIE` fewer DRAM bytes); its convs then show their input and output on chip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from accel_spec.config import ArrayConfig
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import OpArrays
from perf_model.evaluator.reuse_links import can_move
from workloads.ops import Conv2d

__all__ = ["ConvFigures", "ConvScorer", "ChainScorer", "DesignsScorer", "ConvScorers", "ConvOverlay", "conv_overlay",
           "choose_path", "choose_paths"]

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


#: ``(design, convs of a chain) -> one ConvFigures per conv`` with the chain's links on chip, or
#: the reason the design cannot keep them there.
ChainScorer = Callable[[ArrayConfig, tuple[Conv2d, ...]], "tuple[ConvFigures, ...] | str"]


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


#: ``designs -> a scorer of those designs``: an object with ``unit`` (per design, its unit: designs
#: a conv program cannot tell apart), ``unit_config(u)`` and ``score(conv, requant)``, the latter
#: giving arrays over designs: ``status`` (0 no windows, 1 infeasible, 2 on chip), ``reason`` into
#: ``texts``, ``figure`` into ``figures`` (``perf_model.compiler.conv_designs``).
DesignsScorer = Callable[[DesignArrays], Any]


@dataclass(frozen=True)
class ConvScorers:
    """What scores a conv on chip, passed to :func:`conv_overlay` (the compiler's:
    ``perf_model.compiler.scorers.COMPILER_SCORERS``).

    Attributes:
        conv: one design, one conv (the reference, and the path of ``vectorised=False``).
        chain: one design, a chain of convs with its links on chip; ``None``: no chain is kept.
        designs: every design at once (:data:`DesignsScorer`); ``None``: design by design.
    """

    conv: ConvScorer
    chain: ChainScorer | None = None
    designs: DesignsScorer | None = None


#: ``ConvOverlay.kind`` codes: nothing, a note (the design builds no windows), infeasible, a note
#: that the host's im2col GEMM is faster (its text made when read).
_NONE, _NOTE, _INFEASIBLE, _SLOWER = 0, 1, 2, 3


class _Elements(Mapping[int, Any]):
    """A read-only mapping element -> value over the elements where ``mask`` holds."""

    def __init__(self, mask: np.ndarray, value: Callable[[int], Any]) -> None:
        self._mask, self._value = mask, value

    def __getitem__(self, e: int) -> Any:
        if not 0 <= e < len(self._mask) or not self._mask[e]:
            raise KeyError(e)
        return self._value(int(e))

    def __contains__(self, e: object) -> bool:
        return bool(isinstance(e, (int, np.integer)) and 0 <= e < len(self._mask) and self._mask[e])

    def __iter__(self) -> Iterator[int]:
        return iter(np.flatnonzero(self._mask).tolist())

    def __len__(self) -> int:
        return int(self._mask.sum())


class ConvOverlay:
    """Per element (flat, design-major): the path, and the figures of the elements on chip.

    Arrays over elements: ``path``; ``fig`` (index into ``figs``, -1 none); ``kind`` and ``text``
    (a note or an infeasible reason, index into ``texts``); ``a_mask``/``c_mask``: the elements of
    kept chains whose input is on chip already / whose output stays there. Mappings over them, as
    read by the block: ``figures`` (element -> ``ConvFigures``), ``infeasible`` (element -> reason:
    the conv does not fit on chip), ``notes`` (element -> why the host builds the im2col ``A``).
    """

    def __init__(self, n: int, names: tuple[str, ...] = (), images: tuple[int, ...] = ()) -> None:
        self.path = np.zeros(n, dtype=np.int8)
        self.fig = np.full(n, -1, dtype=np.int64)
        self.figs: list[ConvFigures] = []
        self.kind = np.zeros(n, dtype=np.int8)
        self.text = np.full(n, -1, dtype=np.int64)
        self.texts: list[str] = []
        self.host = np.zeros(n, dtype=np.float64)  # _SLOWER: the host's cycles, the chip's
        self.chip = np.zeros(n, dtype=np.int64)
        self.a_mask = np.zeros(n, dtype=bool)
        self.c_mask = np.zeros(n, dtype=bool)
        self._names, self._images = names, images  # per op (the _SLOWER note's words)

    @property
    def chip_mask(self) -> np.ndarray:
        """Per element: figures on chip (the keys of :attr:`figures`, as a mask)."""
        return self.fig >= 0

    @property
    def infeasible_mask(self) -> np.ndarray:
        """Per element: the conv does not fit on chip (the keys of :attr:`infeasible`, as a mask)."""
        return self.kind == _INFEASIBLE

    @property
    def figures(self) -> Mapping[int, ConvFigures]:
        return _Elements(self.fig >= 0, lambda e: self.figs[int(self.fig[e])])

    @property
    def infeasible(self) -> Mapping[int, str]:
        return _Elements(self.kind == _INFEASIBLE, lambda e: self.texts[int(self.text[e])])

    @property
    def notes(self) -> Mapping[int, str]:
        return _Elements((self.kind == _NOTE) | (self.kind == _SLOWER), self._note)

    def _note(self, e: int) -> str:
        if self.kind[e] == _NOTE:
            return self.texts[int(self.text[e])]
        o = e % len(self._names)
        return (f"{self._names[o]}: the host's im2col GEMM takes {float(self.host[e]):,.0f} cycles, "
                f"windows on chip {int(self.chip[e]):,} ({self._images[o]} image(s) in one program)")

    def add_texts(self, texts: Sequence[str]) -> int:
        """Append ``texts``; returns the index of the first."""
        first = len(self.texts)
        self.texts.extend(texts)
        return first

    def add_figures(self, figures: Sequence[ConvFigures]) -> int:
        """Append ``figures``; returns the index of the first."""
        first = len(self.figs)
        self.figs.extend(figures)
        return first

    def chain_flags(self, a: np.ndarray | None, c: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``(a_on_chip, c_on_chip)`` flags (``n`` elements) of ``a``/``c`` (or none) and the kept chains."""
        out = []
        for given, chain in ((a, self.a_mask), (c, self.c_mask)):
            flags = np.zeros(n, dtype=bool) if given is None else given.copy()
            flags[chain] = True
            out.append(flags)
        return out[0], out[1]

    @property
    def any(self) -> bool:
        return bool((self.fig >= 0).any() or (self.kind == _INFEASIBLE).any())

    def apply(self, values: np.ndarray, pick: Callable[[ConvFigures], float | tuple[float, ...]],
              times: np.ndarray) -> np.ndarray:
        """``values`` (``(N,)`` or ``(3, N)``) with each chip element's figure ``pick(f) * times``."""
        out = np.array(values, dtype=np.float64, copy=True)
        at = np.flatnonzero(self.fig >= 0)
        if len(at) == 0:
            return out
        # ``pick`` once per figure the elements use (figures met again, as a shape's convs share
        # them, once per object)
        used, inverse = np.unique(self.fig[at], return_inverse=True)
        picked: dict[int, np.ndarray] = {}
        rows = []
        for i in used.tolist():
            f = self.figs[i]
            row = picked.get(id(f))
            if row is None:
                row = picked[id(f)] = np.asarray(pick(f), dtype=np.float64)
            rows.append(row)
        v = np.array(rows)[inverse.reshape(-1)]  # (E,) or (E, 3)
        if out.ndim == 1:
            out[at] = v * times[at]
        else:
            out[:, at] = (v * times[at][:, None]).T
        return out


def conv_overlay(designs: DesignArrays, ops: OpArrays, host_total: np.ndarray, host_bytes: np.ndarray,
                 host_ok: np.ndarray, keep: np.ndarray | None, chains: bool = False, *,
                 scorers: ConvScorers | None, vectorised: bool = True) -> ConvOverlay:
    """The path and figures of every conv element (flat index ``design * ops + op``).

    ``host_total``/``host_bytes``/``host_ok``: the block's im2col GEMM figures per element (cycles,
    DRAM bytes read and written, feasible); ``keep``: elements
    that keep the GEMM whatever (an on-chip link), or ``None``; ``chains``: score the chains of
    convs on chip with their links on chip too (module docstring); ``scorers``: what scores them
    (``None``: every conv stays its im2col GEMM). ``vectorised=False``: the reference, design by
    design with the scalar scorers (the vectorised path equals it).
    """
    no = len(ops)
    n = len(designs) * no
    overlay = ConvOverlay(n, tuple(op.name or "conv" for op in ops.ops),
                          tuple(getattr(op, "n", 1) for op in ops.ops))
    convs = [(o, op) for o, op in enumerate(ops.ops) if isinstance(op, Conv2d)]
    if not convs or scorers is None:
        return overlay
    if vectorised and scorers.designs is not None:
        _overlay_designs(overlay, designs, ops, convs, host_total, host_bytes, host_ok, keep, chains, scorers)
    else:
        _overlay_loop(overlay, designs, ops, convs, host_total, host_bytes, host_ok, keep, chains, scorers)
    return overlay


def _overlay_designs(overlay: ConvOverlay, designs: DesignArrays, ops: OpArrays, convs: list[tuple[int, Conv2d]],
                     host_total: np.ndarray, host_bytes: np.ndarray, host_ok: np.ndarray, keep: np.ndarray | None,
                     chains: bool, scorers: ConvScorers) -> None:
    """:func:`conv_overlay` with the vectorised scorer: numpy over designs, a loop over the convs."""
    nd, no = len(designs), len(ops)
    groups = scorers.designs(designs)  # type: ignore[misc]
    chosen = np.zeros(nd * no, dtype=bool)  # elements with a feasible chip figure, not kept: each path's figures
    cycles = np.zeros(nd * no, dtype=np.float64)
    moved = np.zeros(nd * no, dtype=np.float64)
    for o, op in convs:
        r = groups.score(op, bool(ops.requant[o]))
        e = np.arange(nd, dtype=np.int64) * no + o
        valid = np.ones(nd, dtype=bool) if keep is None else ~keep[e]
        base = overlay.add_texts(r.texts)
        for status, kind in ((0, _NOTE), (1, _INFEASIBLE)):
            at = valid & (r.status == status)
            overlay.kind[e[at]] = kind
            overlay.text[e[at]] = base + r.reason[at]
        on = valid & (r.status == 2)
        if not on.any():
            continue
        eo, fig = e[on], r.figure[on]
        chip = r.column(lambda f: f.total)[on]
        chip_bytes = r.column(lambda f: sum(f.read) + sum(f.write))[on]
        host = host_total[eo] / ops.counts[o]
        gemm_bytes = host_bytes[eo] / ops.counts[o]
        wins = choose_paths(host, gemm_bytes, host_ok[eo], chip, chip_bytes) == CHIP
        first = overlay.add_figures(r.figures)
        overlay.path[eo[wins]] = CHIP
        overlay.fig[eo[wins]] = first + fig[wins]
        slower = eo[~wins]
        overlay.kind[slower] = _SLOWER
        overlay.host[slower] = host[~wins]
        overlay.chip[slower] = chip[~wins].astype(np.int64)
        chosen[eo] = True
        cycles[eo] = np.where(wins, chip, host)
        moved[eo] = np.where(wins, chip_bytes, gemm_bytes)
    if chains and scorers.chain is not None:
        _chains_designs(overlay, designs, ops, groups, chosen, cycles, moved, scorers.chain)


def choose_paths(host: np.ndarray, host_bytes: np.ndarray, host_ok: np.ndarray, chip: np.ndarray,
                 chip_bytes: np.ndarray) -> np.ndarray:
    """:func:`choose_path` over arrays (the same float comparisons)."""
    tie = np.abs(host - chip) <= TIE * np.maximum(host, chip)
    chip_wins = ~host_ok | np.where(tie, ~(host_bytes < chip_bytes), ~(host < chip))
    return np.where(chip_wins, CHIP, HOST).astype(np.int8)


def _segments(row: np.ndarray, link: np.ndarray) -> list[tuple[int, int]]:
    """``(first, last)`` op of each maximal chain (two or more linked ops, all in ``row``)."""
    out, o, no = [], 0, len(row)
    while o < no:
        end = o
        while end + 1 < no and link[end] and row[end] and row[end + 1]:
            end += 1
        if end > o:
            out.append((o, end))
        o = end + 1
    return out


def _chains_designs(overlay: ConvOverlay, designs: DesignArrays, ops: OpArrays, groups: Any, chosen: np.ndarray,
                    cycles: np.ndarray, moved: np.ndarray, scorer: ChainScorer) -> None:
    """:func:`_keep_chains` for every design at once: the designs that can keep a link, grouped by
    unit and the ops whose paths were chosen; each group's chains scored once."""
    nd, no = len(designs), len(ops)
    move = np.flatnonzero(can_move(designs.dataflow, designs.rows, designs.cols))
    if len(move) == 0:
        return
    rows = chosen.reshape(nd, no)[move]
    key = np.column_stack([groups.unit[move], rows.astype(np.int64)])
    keys, rep, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    for k in range(len(keys)):
        segments = _segments(keys[k, 1:].astype(bool), ops.conv_link)
        if not segments:
            continue
        members = move[inverse == k]
        config = groups.unit_config(int(keys[k, 0]))
        for o, end in segments:
            chain = scorer(config, tuple(ops.ops[o:end + 1]))  # type: ignore[arg-type]
            if isinstance(chain, str):
                continue
            elements = [members * no + x for x in range(o, end + 1)]
            alone_c, alone_b = np.zeros(len(members)), np.zeros(len(members))
            for el in elements:  # summed in the op order, as the scalar sum
                alone_c, alone_b = alone_c + cycles[el], alone_b + moved[el]
            kept_c = float(sum(f.total for f in chain))
            kept_b = float(sum(sum(f.read) + sum(f.write) for f in chain))
            full = np.full(len(members), 1.0)
            wins = choose_paths(alone_c, alone_b, np.ones(len(members), dtype=bool), kept_c * full,
                                kept_b * full) == CHIP
            if not wins.any():
                continue
            first = overlay.add_figures(chain)
            for x, el in enumerate(elements):
                el = el[wins]
                overlay.path[el] = CHIP
                overlay.fig[el] = first + x
                overlay.kind[el] = _NONE
                if x + 1 < len(elements):
                    overlay.c_mask[el] = True
                if x > 0:
                    overlay.a_mask[el] = True


def _overlay_loop(overlay: ConvOverlay, designs: DesignArrays, ops: OpArrays, convs: list[tuple[int, Conv2d]],
                  host_total: np.ndarray, host_bytes: np.ndarray, host_ok: np.ndarray, keep: np.ndarray | None,
                  chains: bool, scorers: ConvScorers) -> None:
    """:func:`conv_overlay` design by design with the scalar scorers (the reference)."""
    no = len(ops)
    scorer = scorers.conv
    for i in range(len(designs)):
        config = designs.config(i)
        chosen: dict[int, tuple[float, float]] = {}  # element -> its path's (cycles, DRAM bytes), chip feasible
        for o, op in convs:
            e = i * no + o
            if keep is not None and keep[e]:
                continue
            figures = scorer(config, op, bool(ops.requant[o]))
            if isinstance(figures, str):
                overlay.kind[e], overlay.text[e] = _NOTE, overlay.add_texts([figures])
                continue
            if not figures.feasible:
                overlay.kind[e], overlay.text[e] = _INFEASIBLE, overlay.add_texts([figures.reason])
                continue
            chip = figures.total
            host = float(host_total[e]) / ops.counts[o]
            chip_bytes = sum(figures.read) + sum(figures.write)
            gemm = (host, float(host_bytes[e]) / ops.counts[o])
            if choose_path(gemm, bool(host_ok[e]), (chip, chip_bytes)) == CHIP:
                overlay.path[e] = CHIP
                overlay.fig[e] = overlay.add_figures([figures])
                chosen[e] = (chip, chip_bytes)
            else:
                chosen[e] = gemm
                overlay.kind[e], overlay.host[e], overlay.chip[e] = _SLOWER, host, chip
        if chains and scorers.chain is not None and can_move(designs.dataflow[i], designs.rows[i], designs.cols[i]):
            _keep_chains(overlay, config, ops, i * no, chosen, scorers.chain)


def _keep_chains(overlay: ConvOverlay, config: ArrayConfig, ops: OpArrays, base: int,
                 chosen: dict[int, tuple[float, float]], scorer: ChainScorer) -> None:
    """Score each maximal chain of linked convs that can run on chip, of one design (elements ``base
    + op``; ``chosen``: each one's ``(cycles, DRAM bytes)`` on the path it took, on chip or the
    host's GEMM), as one program, and keep it where :func:`choose_path` prefers it to those paths."""
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
                    first = overlay.add_figures(list(chain))
                    for x, e in enumerate(elements):
                        overlay.path[e] = CHIP
                        overlay.fig[e] = first + x
                        overlay.kind[e] = _NONE
                    overlay.c_mask[elements[:-1]] = True
                    overlay.a_mask[elements[1:]] = True
        o = end + 1

"""On-chip reuse across layers in the vectorised model: which links of a workload stay on chip,
per design (internal; the rule of ``perf_model.compiler.chain``, which the compiler follows).

Link ``i`` (op ``i``'s output is op ``i + 1``'s ``A`` as is: ``OpArrays.link``) is kept in the
ifmap on a design when

* the design can move an output into its ifmap and read it as ``A`` in place: weight stationary
  with ``rows == cols``, or input stationary (:func:`can_move`);
* op ``i`` is requantised, and its output, ``S = M * ceil(N / R)`` (WS) or ``ceil(M / C) * N``
  (IS) ifmap words, takes at most half of the ifmap (the next link's region goes in the other half);
* op ``i`` can be tiled with its ``A`` in the ifmap words below that region (as the first op of
  a run of kept links does; one later in the run reads its ``A`` in place and needs no room).

Then op ``i`` moves its output into the ifmap (``c_on_chip``), op ``i + 1`` loads no ``A``
(``a_on_chip``), and the first op of a run tiles its ``A`` beside the region (``reserve``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import OpArrays
from perf_model.evaluator.problem import buffer_words

__all__ = ["ReuseFlags", "can_move", "region_words", "ifmap_depth", "candidate_links", "flags_from_links"]

_WS, _IS = 0, 2  # dataflow codes (perf_model.timing)


@dataclass(frozen=True)
class ReuseFlags:
    """Per ``(designs, ops)`` element: ``a_on_chip``, ``c_on_chip`` (bool) and ``reserve`` (ifmap
    words the op's tiles may not use)."""

    a_on_chip: np.ndarray
    c_on_chip: np.ndarray
    reserve: np.ndarray


def can_move(dataflow: Any, rows: Any, cols: Any) -> np.ndarray:
    """Whether a design can keep a layer's output on chip as the next layer's input (dataflow
    codes; arrays or scalars, broadcast): a ``MOVE`` needs ifmap and ofmap words of equal lanes
    (WS with ``R == C``; IS, whose ifmap words have ``C`` lanes like the ofmap's), and an output
    word must be a word of the next ``A`` (OS holds ``A`` transposed)."""
    dataflow, rows, cols = np.asarray(dataflow), np.asarray(rows), np.asarray(cols)
    return ((dataflow == _WS) & (rows == cols)) | (dataflow == _IS)


def region_words(dataflow: Any, rows: Any, cols: Any, m: Any, n: Any) -> np.ndarray:
    """Ifmap words an ``m x n`` output takes as the next layer's ``A`` (broadcast): ``M * ceil(N /
    R)`` (WS), ``ceil(M / C) * N`` (IS)."""
    m, n = np.asarray(m, dtype=np.float64), np.asarray(n, dtype=np.float64)
    return np.where(np.asarray(dataflow) == _IS, np.ceil(m / cols) * n, m * np.ceil(n / rows))


def ifmap_depth(designs: DesignArrays) -> np.ndarray:
    """``(designs,)`` words of the whole ifmap (not halved when double buffered)."""
    kib = (designs.ifmap_sram_kib, designs.weight_sram_kib, designs.ofmap_sram_kib)
    return buffer_words(designs.dataflow, designs.rows, designs.cols, designs.input_bits, designs.acc_bits, kib,
                        np.zeros(len(designs), dtype=bool),  # the whole buffer: the regions are in halves
                        designs.operand_bits()[:2])[0]


def candidate_links(designs: DesignArrays, ops: OpArrays) -> tuple[np.ndarray, np.ndarray]:
    """``(candidate, size)``: ``(designs, ops)`` links that meet every rule but the tiling's, and
    their region words."""
    d = designs
    size = region_words(d.dataflow[:, None], d.rows[:, None], d.cols[:, None], ops.gemm[0][None, :],
                        ops.gemm[2][None, :])
    ok = (can_move(d.dataflow, d.rows, d.cols)[:, None] & ops.link[None, :] & ops.requant[None, :]
          & (2 * size <= ifmap_depth(d)[:, None]))
    return ok, np.where(ok, size, 0.0)


def flags_from_links(links: np.ndarray, size: np.ndarray) -> ReuseFlags:
    """The per-element flags of the kept ``links`` (``(designs, ops)`` bool; ``size`` their words)."""
    a_on_chip = np.zeros_like(links)
    a_on_chip[:, 1:] = links[:, :-1]
    reserve = np.where(links & ~a_on_chip, size, 0.0)
    return ReuseFlags(a_on_chip=a_on_chip, c_on_chip=links.copy(), reserve=reserve)

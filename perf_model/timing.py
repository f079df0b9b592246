"""The timing contract between the RTL (``rtl_gen``) and the performance model.

This module is the one place that says how many clock cycles the generated accelerator
takes for one *run*: one ``start`` pulse that computes ``C[mt, nt] (+)= A[mt, kt] @ B[kt, nt]``
entirely out of the on-chip buffers, until ``done``. The RTL tests check the RTL's cycle
counter against :func:`run_cycles`; the model builds an op's compute cycles as the sum of
:func:`run_cycles` over the buffer tiles of :mod:`perf_model.tiling`. Change one side, change
the other, in the same commit.

Mapping (rows-dim ``Dr`` on the R array rows, cols-dim ``Dc`` on the C columns, ``Ds`` streamed)::

    WS: Dr = K, Dc = N, Ds = M      (B stationary, A streamed from the left)
    OS: Dr = M, Dc = N, Ds = K      (C stationary, A from the left, B from the top)
    IS: Dr = K, Dc = M, Ds = N      (A stationary, B streamed from the left)

Folds ``F = ceil(Dr / R) * ceil(Dc / C)`` (0 if any of ``M``, ``K``, ``N`` is 0). Every fold
costs the same, edge folds included (rows beyond ``Dr`` are loaded as zeros / not written,
columns beyond ``Dc`` are don't-care lanes, as in a fixed systolic array)::

    fold_cycles = Ds + 2 * R + C - 2 + FOLD_OVERHEAD        (= Ds + 2R + C)
    run_cycles  = F * fold_cycles + RUN_OVERHEAD            (= 1 + F * (Ds + 2R + C))

counted from the clock edge that samples ``start`` to the edge that raises ``done``. The RTL
(``rtl_gen.Controller``) spends, per fold:

* WS/IS: ``R`` cycles reading the stationary words (rows ``R-1 .. 0``), each shifted down the
  columns the cycle after its read; ``Ds`` cycles reading the streamed words; ``R + C``
  cycles of flush: the last streamed word reaches the array one cycle after its read (buffer
  latency), crosses the skewed ``R x C`` wavefront (``R + C - 1``; lane ``i`` of a buffer is
  its own bank, read/written ``i`` cycles after lane 0) and its last lane is written
  (read-modify-write of the ofmap bank) in the last cycle.
* OS: ``Ds`` cycles reading both operands; ``R + C - 1`` cycles until the last product is in
  the bottom-right accumulator (buffer latency + wavefront); ``R`` drain shifts, each
  capturing one row into the result register, and one cycle for the last row's write.

so ``FOLD_OVERHEAD = 2`` for every dataflow; ``RUN_OVERHEAD = 1`` is the controller's SETUP
cycle after ``start`` (a run with a zero dimension is that cycle alone).

Buffer words (a run fits when every operand fits its buffer's depth)::

    buffer           word (elements)               words needed by a run
    ifmap  (A)       R (WS, OS) / C (IS)           WS: M*ceil(K/R)  OS: K*ceil(M/R)  IS: K*ceil(M/C)
    weight (B)       C (WS, OS) / R (IS)           WS: K*ceil(N/C)  OS: K*ceil(N/C)  IS: N*ceil(K/R)
    ofmap  (C)       C, acc_bits each              WS: M*ceil(N/C)  OS: M*ceil(N/C)  IS: N*ceil(M/C)

with word addresses and lanes (``mf = m // R`` etc.: the fold of the row/column a lane holds)::

    WS  ifmap  kf*M + m: A[m, kf*R:+R]   weight  nf*K + k: B[k, nf*C:+C]   ofmap  nf*M + m: C[m, nf*C:+C]
    OS  ifmap  mf*K + k: A[mf*R:+R, k]   weight  nf*K + k: B[k, nf*C:+C]   ofmap  nf*M + m: C[m, nf*C:+C]
    IS  ifmap  mf*K + k: A[mf*C:+C, k]   weight  kf*N + n: B[kf*R:+R, n]   ofmap  mf*N + n: C[mf*C:+C, n]

(lane ``i`` at bits ``[i*bits, (i+1)*bits)``; the ``rtl_gen._top`` docstring has the port map).
A buffer of ``kib`` KiB with ``e``-element words of ``b`` bits holds
``floor(kib * 8192 / (e * b))`` words. All functions take scalars or numpy arrays (broadcast).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "FOLD_OVERHEAD",
    "RUN_OVERHEAD",
    "DATAFLOW_CODES",
    "dataflow_code",
    "mapped_dims",
    "folds",
    "fold_cycles",
    "run_cycles",
    "buffer_depth_words",
    "run_words",
    "word_elems",
]

#: Extra cycles per fold for pipeline registers (set by the RTL; see module docstring).
FOLD_OVERHEAD = 2
#: Extra cycles per run: the controller's SETUP cycle (set by the RTL).
RUN_OVERHEAD = 1

#: Integer codes of the dataflows for vectorised evaluation.
DATAFLOW_CODES = {"ws": 0, "os": 1, "is": 2}


def dataflow_code(dataflow: Any) -> int:
    """Integer code of a ``Dataflow`` (or its string value)."""
    return DATAFLOW_CODES[str(getattr(dataflow, "value", dataflow))]


def _ceil_div(a: Any, b: Any) -> Any:
    return -(-np.asarray(a, dtype=np.int64) // np.asarray(b, dtype=np.int64))


def mapped_dims(df: Any, m: Any, k: Any, n: Any) -> tuple[Any, Any, Any]:
    """``(Dr, Dc, Ds)`` for dataflow code(s) ``df`` and GEMM dims (see module docstring)."""
    df = np.asarray(df)
    m, k, n = (np.asarray(x, dtype=np.int64) for x in (m, k, n))
    dr = np.where(df == 1, m, k)
    dc = np.where(df == 2, m, n)
    ds = np.select([df == 0, df == 1], [m, k], n)
    return dr, dc, ds


def folds(df: Any, rows: Any, cols: Any, m: Any, k: Any, n: Any) -> Any:
    """Number of array folds of one run."""
    dr, dc, ds = mapped_dims(df, m, k, n)
    return np.where(ds == 0, 0, _ceil_div(dr, rows) * _ceil_div(dc, cols))


def fold_cycles(df: Any, rows: Any, cols: Any, m: Any, k: Any, n: Any) -> Any:
    """Cycles of one fold: ``Ds + 2R + C - 2 + FOLD_OVERHEAD``."""
    _, _, ds = mapped_dims(df, m, k, n)
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    return ds + 2 * rows + cols - 2 + FOLD_OVERHEAD


def run_cycles(df: Any, rows: Any, cols: Any, m: Any, k: Any, n: Any) -> Any:
    """Cycles from ``start`` to ``done`` of one buffer-resident run (int64, broadcast)."""
    return folds(df, rows, cols, m, k, n) * fold_cycles(df, rows, cols, m, k, n) + RUN_OVERHEAD


def buffer_depth_words(kib: Any, word_elems: Any, bits: Any) -> Any:
    """Words a buffer of ``kib`` KiB holds with ``word_elems``-element words of ``bits`` bits."""
    return np.asarray(kib, dtype=np.int64) * 8192 // (
        np.asarray(word_elems, dtype=np.int64) * np.asarray(bits, dtype=np.int64)
    )


def run_words(df: Any, rows: Any, cols: Any, m: Any, k: Any, n: Any) -> tuple[Any, Any, Any]:
    """Words ``(ifmap, weight, ofmap)`` one run of ``m x k x n`` needs (module docstring)."""
    df = np.asarray(df)
    m, k, n = (np.asarray(x, dtype=np.int64) for x in (m, k, n))
    kr = _ceil_div(k, rows)
    nc = _ceil_div(n, cols)
    ifmap = np.select([df == 0, df == 1], [m * kr, k * _ceil_div(m, rows)], k * _ceil_div(m, cols))
    weight = np.where(df == 2, n * kr, k * nc)
    ofmap = np.where(df == 2, n * _ceil_div(m, cols), m * nc)
    return ifmap, weight, ofmap


def word_elems(df: Any, rows: Any, cols: Any) -> tuple[Any, Any, Any]:
    """Elements per word of the ``(ifmap, weight, ofmap)`` buffers."""
    df = np.asarray(df)
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    return np.where(df == 2, cols, rows), np.where(df == 2, rows, cols), cols + 0 * rows

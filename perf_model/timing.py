"""The timing contract between the RTL (``rtl_gen``) and the performance model.

This module is the one place that says how many clock cycles the generated accelerator
takes for one *run*: one ``start`` pulse that computes ``C[mt, nt] (+)= A[mt, kt] @ B[kt, nt]``
entirely out of the on-chip buffers, until ``done``. The RTL tests check the RTL's cycle
counter against :func:`run_cycles`; the model builds an op's compute cycles as the sum of
:func:`run_cycles` over the buffer tiles of :mod:`perf_model.evaluator.tiling`. Change one side, change
the other, in the same commit.

Mapping (rows-dim ``Dr`` on the R array rows, cols-dim ``Dc`` on the C columns, ``Ds`` streamed)::

    WS: Dr = K, Dc = N, Ds = M      (B stationary, A streamed from the left)
    OS: Dr = M, Dc = N, Ds = K      (C stationary, A from the left, B from the top)
    IS: Dr = K, Dc = M, Ds = N      (A stationary, B streamed from the left)

Folds ``F = ceil(Dr / R) * ceil(Dc / C)`` (0 if any of ``M``, ``K``, ``N`` is 0). Every fold
costs the same, edge folds included (rows beyond ``Dr`` are loaded as zeros / not written,
columns beyond ``Dc`` are don't-care lanes, as in a fixed systolic array). A run costs::

    run_cycles = RUN_OVERHEAD + F * fold_cycles + run_tail        (F > 0; RUN_OVERHEAD if F = 0)

counted from the clock edge that samples ``start`` to the edge that raises ``done``, with
``fold_cycles`` the steady-state cost of one fold and ``run_tail`` what the first fill and
the last drain add once per run. Two forms, by ``ArrayConfig.shadow_stationary``:

* **Shadow (double-buffered stationary operand, the default).** Each PE has a shadow register
  beside its stationary one. WS/IS: the next fold's stationary words shift into the shadows
  while the current fold streams, and the first streamed word of a fold (marked by ``first``,
  which moves right with it) swaps shadow into the active register; OS: the marker makes each
  accumulator hand its finished sum to the shadow and restart, and the shadows drain down the
  column while the next fold accumulates. Folds start back to back every
  ``max(Ds, R, 2)`` cycles::

      fold_cycles = max(Ds, R, 2)
      run_tail    = Ds - fold_cycles + 2R + C     (WS/IS)
                  = 1 + 2R + C                    (OS)

  so ``run_cycles = 1 + (F - 1) * max(Ds, R, 2) + Ds + 2R + C`` (WS/IS) and
  ``1 + F * max(Ds, R, 2) + 2R + C + 1`` (OS). ``R``: a fold's ``R`` stationary words (WS/IS)
  or ``R`` result rows (OS) need ``R`` cycles of the shadow chain; 2: the read-modify-write of
  an ofmap word spans two cycles, so two K-folds one cycle apart would race (only an
  ``R = 1`` array streaming one row gets there). Once per run, WS/IS load the first fold
  (``R``) and flush the last (``R + C``: the last word crosses the wavefront and its last lane
  is written, after the last fold's ``Ds`` stream); OS drains the last fold after a marker
  that carries no data and comes a full slot after the last fold's start (earlier, it could
  move sums into a shadow that the previous drain still passes through): ``R + 1`` until
  the last row is in its shadow, ``R`` shifts, ``C`` for the last lane's write.

* **Plain (no shadow register).** Load, stream and flush run in series in every fold::

      fold_cycles = Ds + 2 * R + C - 2 + FOLD_OVERHEAD        (= Ds + 2R + C)
      run_tail    = 0

  WS/IS: ``R`` cycles reading the stationary words (rows ``R-1 .. 0``), each shifted down the
  columns the cycle after its read; ``Ds`` cycles reading the streamed words; ``R + C``
  cycles of flush. OS: ``Ds`` cycles reading both operands; ``R`` cycles until column 0's
  last product is in its bottom accumulator; ``R`` drain shifts, each capturing one row
  into the result register; ``C`` until the last lane is written.

In both forms the stationary/top operand's lane ``c`` (its own bank) is read ``c`` cycles
after lane 0, like the left operand's lane ``r`` and the ofmap's lane ``c`` (read/written
``c`` cycles after lane 0), so every column runs column 0's schedule ``c`` cycles late.
``FOLD_OVERHEAD = 2`` (the pipeline registers of the plain form); ``RUN_OVERHEAD = 1`` is the
controller's SETUP cycle after ``start`` (a run with a zero dimension is that cycle alone).

Buffer words (a run fits when every operand fits its buffer's depth)::

    buffer           word (elements)               words needed by a run
    ifmap  (A)       R (WS, OS) / C (IS)           WS: M*ceil(K/R)  OS: K*ceil(M/R)  IS: K*ceil(M/C)
    weight (B)       C (WS, OS) / R (IS)           WS: K*ceil(N/C)  OS: K*ceil(N/C)  IS: N*ceil(K/R)
    ofmap  (C)       C, acc_bits each              WS: M*ceil(N/C)  OS: M*ceil(N/C)  IS: N*ceil(M/C)

with word addresses and lanes (``mf = m // R`` etc.: the fold of the row/column a lane holds)::

    WS  ifmap  kf*M + m: A[m, kf*R:+R]   weight  nf*K + k: B[k, nf*C:+C]   ofmap  nf*M + m: C[m, nf*C:+C]
    OS  ifmap  mf*K + k: A[mf*R:+R, k]   weight  nf*K + k: B[k, nf*C:+C]   ofmap  nf*M + m: C[m, nf*C:+C]
    IS  ifmap  mf*K + k: A[mf*C:+C, k]   weight  kf*N + n: B[kf*R:+R, n]   ofmap  mf*N + n: C[mf*C:+C, n]

(lane ``i`` at bits ``[i*bits, (i+1)*bits)``; the ``rtl_gen.core.accelerator`` docstring has the port map).
A buffer of ``kib`` KiB with ``e``-element words of ``b`` bits holds
``floor(kib * 8192 / (e * b))`` words. All functions take scalars or numpy arrays (broadcast).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from accel_spec.config import DATAFLOW_CODES, Dataflow

__all__ = [
    "FOLD_OVERHEAD",
    "RUN_OVERHEAD",
    "run_tail",
    "fold_terms",
    "DATAFLOW_CODES",
    "dataflow_code",
    "array_dims",
    "folds",
    "fold_cycles",
    "run_cycles",
    "run_cycles_of",
    "buffer_depth_words",
    "run_words",
    "word_elems",
]

#: Extra cycles per fold for pipeline registers (set by the RTL; see module docstring).
FOLD_OVERHEAD = 2
#: Extra cycles per run: the controller's SETUP cycle (set by the RTL).
RUN_OVERHEAD = 1



def dataflow_code(dataflow: Any) -> int:
    """Integer code of a ``Dataflow`` (or its string value)."""
    return DATAFLOW_CODES[str(getattr(dataflow, "value", dataflow))]


def _ceil_div(a: Any, b: Any) -> Any:
    return -(-np.asarray(a, dtype=np.int64) // np.asarray(b, dtype=np.int64))


def array_dims(df: Any, m: Any, k: Any, n: Any) -> tuple[Any, Any, Any]:
    """``(Ds, Dr, Dc)`` (int64) for dataflow code(s) ``df`` and GEMM dims: :attr:`Dataflow.mapped_dims`
    of each code, vectorised (see module docstring)."""
    df = np.asarray(df)
    dims = dict(zip("mkn", (np.asarray(x, dtype=np.int64) for x in (m, k, n)), strict=True))
    flows = list(Dataflow)
    if df.ndim == 0:  # one dataflow: its dims as they are (broadcast as ``np.select`` would)
        mapped = next((flow.mapped_dims for flow in flows if flow.code == int(df)), None)
        if mapped is not None:
            return tuple(np.broadcast_arrays(*(dims[d] for d in mapped)))  # type: ignore[return-value]
    return tuple(np.select([df == flow.code for flow in flows], [dims[flow.mapped_dims[i]] for flow in flows])
                 for i in range(3))  # type: ignore[return-value]


def folds(df: Any, rows: Any, cols: Any, m: Any, k: Any, n: Any) -> Any:
    """Number of array folds of one run."""
    return _run_terms(df, rows, cols, m, k, n, False)[0]


def fold_cycles(df: Any, rows: Any, cols: Any, m: Any, k: Any, n: Any, shadow: Any) -> Any:
    """Steady-state cycles of one fold: ``max(Ds, R, 2)`` (shadow) or ``Ds + 2R + C`` (plain)."""
    return _run_terms(df, rows, cols, m, k, n, shadow)[1]


def run_tail(df: Any, rows: Any, cols: Any, m: Any, k: Any, n: Any, shadow: Any) -> Any:
    """Cycles a run adds once to ``F * fold_cycles``: its first fill and last drain (shadow; 0 plain)."""
    return _run_terms(df, rows, cols, m, k, n, shadow)[2]


def fold_terms(df: Any, ds: Any, rows: Any, cols: Any, shadow: Any) -> tuple[Any, Any]:
    """``(fold_cycles, run_tail)`` from the streamed dim ``ds`` of a run (module docstring).

    Works on any numeric arrays without changing their dtype (the model passes float64), so
    ``run_cycles = RUN_OVERHEAD + F * fold + tail`` can be summed over tiles in closed form.
    """
    ds, rows, cols = np.asarray(ds), np.asarray(rows), np.asarray(cols)
    plain = ds + 2 * rows + cols - 2 + FOLD_OVERHEAD
    overlapped = np.maximum(np.maximum(ds, rows), 2)
    lead = np.where(np.asarray(df) == 1, 1, ds - overlapped)
    fold = np.where(shadow, overlapped, plain)
    tail = np.where(shadow, lead + 2 * rows + cols, 0)
    return fold, tail


def _run_terms(df: Any, rows: Any, cols: Any, m: Any, k: Any, n: Any, shadow: Any) -> tuple[Any, Any, Any]:
    """``(folds, fold_cycles, run_tail)`` of a run, int64."""
    ds, dr, dc = array_dims(df, m, k, n)
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    f = np.where(ds == 0, 0, _ceil_div(dr, rows) * _ceil_div(dc, cols))
    fold, tail = fold_terms(df, ds, rows, cols, shadow)
    return f, fold, tail


def run_cycles(df: Any, rows: Any, cols: Any, m: Any, k: Any, n: Any, shadow: Any) -> Any:
    """Cycles from ``start`` to ``done`` of one buffer-resident run (int64, broadcast)."""
    f, fold, tail = _run_terms(df, rows, cols, m, k, n, shadow)
    return np.where(f == 0, 0, f * fold + tail) + RUN_OVERHEAD


@functools.lru_cache(maxsize=1 << 16)
def run_cycles_of(df: int, rows: int, cols: int, m: int, k: int, n: int, shadow: bool) -> int:
    """:func:`run_cycles` of one run, a Python int (cached: a program walk asks for a few tile
    shapes thousands of times)."""
    return int(run_cycles(df, rows, cols, m, k, n, shadow))


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

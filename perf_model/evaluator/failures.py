"""Why a design cannot run an op (internal): an accumulator the op's sums can overflow, or buffers
no tile fits, as one line naming the op, the figure and the rule.

:func:`overflows` and :func:`max_products` are the accumulator rule (``accel_dse.acc_width`` asks
the same rule for a workload's ops); :func:`failures` builds the reasons of infeasible design-op
elements of a :class:`~perf_model.evaluator.problem.Problem`.
"""

from __future__ import annotations

import numpy as np

from accel_spec.config import FORMAT_CODES
from accel_spec.number_formats import FORMATS, max_product
from perf_model import timing
from perf_model.arrays.designs import DesignArrays
from perf_model.evaluator.problem import BUFFER_NAMES, GEMM_MAPPED, Problem, row_index, take_rows

__all__ = ["overflows", "max_products", "failures"]


def overflows(k: np.ndarray, input_bits: np.ndarray, acc_bits: np.ndarray,
              product: np.ndarray | None = None) -> np.ndarray:
    """Whether ``k`` products of signed ``input_bits`` operands can exceed an ``acc_bits`` accumulator.

    The bound is exact: the largest sum is ``k * (2**(b-1))**2`` (every operand ``-2**(b-1)``),
    reachable by real data, and it must be at most ``2**(a-1) - 1``; the most negative sum,
    ``-k * 2**(b-1) * (2**(b-1) - 1)``, is smaller in magnitude. Partial sums accumulate at
    ``acc_bits`` across K tiles in the ofmap buffer, so ``k`` is the op's whole reduction.
    ``product`` (:func:`max_products`) replaces ``(2**(b-1))**2`` where given: an fp8 product's
    largest magnitude in the fixed-point accumulator's units (E4M3: ``(448 * 2**9)**2``).
    """
    ib = np.asarray(input_bits, dtype=np.float64)
    ab = np.asarray(acc_bits, dtype=np.float64)
    worst = 2.0 ** (2 * ib - 2) if product is None else np.asarray(product, dtype=np.float64)
    return np.asarray(k, dtype=np.float64) * worst > 2.0 ** (ab - 1) - 1


def max_products(d: DesignArrays) -> np.ndarray:
    """Per design, the largest magnitude of one product in accumulator units: ``2**(2 b - 2)`` for
    integer lanes of ``b`` bits, :func:`~accel_spec.number_formats.max_product` for a float pair
    (one format for both operands, so the weight's code names it)."""
    out = 2.0 ** (2 * np.asarray(d.input_bits, dtype=np.float64) - 2)
    for code, name in enumerate(FORMAT_CODES):
        f = FORMATS.get(name)
        if f is not None and not f.is_int:
            out = np.where(np.asarray(d.weight_format) == code, max_product(f, f), out)
    return out


def failures(p: Problem, flat: np.ndarray, names: tuple[str, ...], designs: DesignArrays,
              overflow: np.ndarray) -> list[str]:
    """Reason strings of infeasible elements ``flat``: the buffer and the smallest tile that fails,
    or (``overflow``) the reduction length and the accumulator it can overflow."""
    n_ops = len(names)
    mins = p.mins[:, flat]
    sub_df, R, C = p.df[flat], p.R[flat].astype(np.int64), p.C[flat].astype(np.int64)
    mt, kt, nt = take_rows(mins, row_index(GEMM_MAPPED, sub_df)).astype(np.int64)
    need = np.stack(timing.run_words(sub_df, R, C, mt, kt, nt)).T
    have = p.buf_cap[:, flat].T.astype(np.int64)
    short = need > have
    first = np.where(short.any(axis=1), short.argmax(axis=1), -1).tolist()  # the first buffer too small
    # one flat list a buffer, not a list a row: thousands of small lists cost the garbage collector
    # a pass over every object of the process now and then (measured: 0.1 s in a sweep's first block)
    need_at = [column.tolist() for column in need.T]
    have_at = [column.tolist() for column in have.T]
    kib = [designs.ifmap_sram_kib.tolist(), designs.weight_sram_kib.tolist(), designs.ofmap_sram_kib.tolist()]
    double = designs.double_buffered.tolist()
    out = []
    for j, (e, mj, kj, nj, b, over) in enumerate(zip(flat.tolist(), mt.tolist(), kt.tolist(), nt.tolist(), first,
                                                     np.asarray(overflow).tolist(), strict=True)):
        i, o = divmod(e, n_ops)
        if over:
            fmt = FORMAT_CODES[int(designs.weight_format[i])]
            out.append(_overflow_reason(names[o], int(p.gemm[1, e]), int(designs.input_bits[i]),
                                        int(designs.acc_bits[i]), fmt if fmt in FORMATS and not FORMATS[fmt].is_int
                                        else None))
            continue
        dims = f"m x k x n = {mj} x {kj} x {nj}"
        if b < 0:
            out.append(f"op {names[o]!r}: no tile fits the buffers (smallest tile {dims})")
            continue
        half = " per half (double buffered)" if double[i] else ""
        out.append(f"op {names[o]!r}: the {BUFFER_NAMES[b]} buffer ({kib[b][i]} KiB) holds {have_at[b][j]} words"
                   f"{half} but the smallest tile ({dims}) needs {need_at[b][j]}")
    return out


def _overflow_reason(name: str, k: int, ib: int, ab: int, float_format: str | None = None) -> str:
    if float_format is not None:
        f = FORMATS[float_format]
        each = int(max_product(f, f))
        need = (k * each).bit_length() + 1
        return (f"op {name!r}: accumulator overflow: K = {k} products of {float_format} operands can sum to "
                f"{k} * {each} = {k * each} (units of the smallest subnormal squared), beyond acc_bits = {ab} "
                f"(max {(1 << (ab - 1)) - 1}); this op needs acc_bits >= {need}")
    worst = k << (2 * ib - 2)
    need = worst.bit_length() + 1
    return (f"op {name!r}: accumulator overflow: K = {k} products of {ib}-bit operands can sum to {k} * 2^{2 * ib - 2}"
            f" = {worst}, beyond acc_bits = {ab} (max {(1 << (ab - 1)) - 1}); this op needs acc_bits >= {need}")

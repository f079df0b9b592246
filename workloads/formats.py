"""Reference semantics of the operand formats: what a matrix product in each format computes.

This fixes, for every format of :data:`accel_spec.number_formats.FORMATS`, the values an operand
can hold, the products, the order of summation, the rounding and the special values. A PE built
for a format is bit-exact against :func:`accumulate`; the accuracy metric (:mod:`workloads.accuracy`)
runs it on float data.

Operands (:func:`quantise`):
    ``x / scale`` (float64) saturated to the largest finite magnitude, then rounded to the nearest
    value of the format, ties to even (integers: ``numpy.rint``; floats: ``ml_dtypes``'s
    conversion, one rounding). Subnormals are kept (no flush to zero). NaN and infinity are never
    produced (saturation comes first), and an operand that holds one is refused: the formats'
    NaN/Inf codes do not occur in the hardware's data.

Products and sums (:func:`accumulate`):
    * integers (int4, int8, int16, any mix): exact integer products, exact integer sum (int64).
    * fp8_e4m3: every value is ``n * 2**-s`` with ``n`` an integer (``s = 9``: the smallest
      subnormal), so a product is an integer in units of ``2**-2s`` and the accumulator is an
      exact fixed-point number with ``2s`` fraction bits.
      The sum is exact, hence independent of the order (and of the dataflow and tiling). The
      result is the integer ``N`` (Python ints), value ``N * 2**-2s``. A fixed-point sum has no
      negative zero: an all-(-0) sum is +0.
    * bf16 and fp8_e5m2 (a float32 accumulator; an exact E5M2 sum would need 65 bits plus
      ``log2(K)``): products are exact in float32 (8-bit or 3-bit significands; a bf16 product
      below float32's smallest subnormal rounds as IEEE float32 multiplication does, an E5M2
      one, between ``2**-32`` and ``2**32`` in magnitude, never does), summed in float32 one
      product at a time in ascending ``k`` (round to nearest even after every addition,
      subnormals kept), starting from +0. The order is part of the semantics: the PE must
      add in that order. The array sums ``K`` in folds (``folds``: the first ``k`` of each, the
      K tiles of the schedule, and within them the ``R``-row folds of a WS/IS array): each fold
      is summed so from +0, and the folds' sums are added in order (``((f0 + f1) + f2) ...``,
      the ofmap buffer's float32 fold accumulation). One fold (the default) is plain ascending
      ``k``. A product or sum that overflows float32 is refused: the hardware does not carry
      IEEE infinities (``rtl_gen.core.float32``), so such data are not data.

:func:`to_float32` rounds an fp8 accumulator once to float32 (nearest, ties to even): what an
fp8 output converter produces. Against JAX's ``matmul(..., preferred_element_type=float32)``
(whose summation order is XLA's): equal wherever float32 rounding cannot occur, and otherwise
within :func:`jax_bound` (``gamma(K-1) * sum|a*b|`` for JAX's sum plus the reference's own
rounding(s)).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from accel_spec.errors import WorkloadError
from accel_spec.number_formats import FORMATS, NumberFormat

__all__ = ["quantise", "per_tensor_scale", "fraction_bits", "accumulate", "to_float32", "dequantised_product",
           "jax_bound", "sqnr_db", "UNIT_ROUNDOFF_F32", "round_to_float"]

#: Unit roundoff of float32 (round to nearest): 2**-24.
UNIT_ROUNDOFF_F32 = 2.0 ** -24


def _fmt(fmt: NumberFormat | str) -> NumberFormat:
    if isinstance(fmt, NumberFormat):
        return fmt
    if isinstance(fmt, str) and fmt in FORMATS:
        return FORMATS[fmt]
    raise WorkloadError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")


def _finite(name: str, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if not np.isfinite(x).all():
        raise WorkloadError(f"{name} holds NaN or infinity: the format semantics take finite values only")
    return x


def per_tensor_scale(x: np.ndarray, fmt: NumberFormat | str) -> float:
    """Symmetric per-tensor scale mapping ``max|x|`` onto the format's largest finite magnitude.

    bf16 needs none (1.0); an all-zero tensor gets 1.0.
    """
    f = _fmt(fmt)
    amax = float(np.max(np.abs(_finite("tensor", x)))) if np.size(x) else 0.0
    if f.name == "bf16" or amax == 0.0:
        return 1.0
    return amax / f.max_finite


def quantise(x: np.ndarray, fmt: NumberFormat | str, scale: float = 1.0) -> np.ndarray:
    """``x / scale`` as values of ``fmt`` (module docstring), returned as float64 (exact values).

    Raises:
        WorkloadError: a non-finite ``x`` or a scale that is not positive and finite.
    """
    f = _fmt(fmt)
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise WorkloadError(f"scale must be a positive finite number, not {scale!r}")
    y = _finite("operand", x) / scale
    if f.is_int:
        low = -(1 << (f.bits - 1))
        return np.clip(np.rint(y), low, f.max_finite)
    y = np.clip(y, -f.max_finite, f.max_finite)
    return y.astype(getattr(ml_dtypes, f.ml_dtype)).astype(np.float64)


def fraction_bits(fmt: NumberFormat | str) -> int:
    """Fraction bits ``s`` of one fp8 operand as an integer (``-log2`` of its smallest subnormal)."""
    f = _fmt(fmt)
    if f.accumulator != "fixed":
        raise WorkloadError(f"{f.name} has no fixed-point accumulator")
    return -math.frexp(f.min_subnormal)[1] + 1


def _check_pair(a: np.ndarray, b: np.ndarray, wf: NumberFormat, af: NumberFormat) -> None:
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise WorkloadError(f"operands must be m x k and k x n matrices, not {a.shape} and {b.shape}")
    if not (wf.is_int and af.is_int) and wf != af:
        raise WorkloadError(f"weight {wf.name} with activation {af.name}: float operands take one format for both")
    for name, x, f in (("activation", a, af), ("weight", b, wf)):
        if not np.array_equal(quantise(x, f), x):
            raise WorkloadError(f"{name} operand holds values that are not {f.name} values")


def _exact_int_matmul(a: np.ndarray, b: np.ndarray, limb_bits: int) -> np.ndarray:
    """Exact ``a @ b`` of integer matrices as Python ints, split into ``limb_bits`` limbs so int64 never overflows."""
    base = 1 << limb_bits
    ah, al = np.divmod(a, base)  # floor division: a = ah * base + al, 0 <= al < base
    bh, bl = np.divmod(b, base)
    hh, hl, lh, ll = (x @ y for x, y in ((ah, bh), (ah, bl), (al, bh), (al, bl)))
    out = np.empty(hh.shape, dtype=object)
    for idx in np.ndindex(hh.shape):
        out[idx] = ((int(hh[idx]) << (2 * limb_bits)) + ((int(hl[idx]) + int(lh[idx])) << limb_bits)
                    + int(ll[idx]))
    return out


def accumulate(a: np.ndarray, b: np.ndarray, weight_fmt: NumberFormat | str,
               act_fmt: NumberFormat | str | None = None, *, folds: tuple[int, ...] | None = None) -> np.ndarray:
    """The accumulators of ``a @ b`` (``a``: m x k activations, ``b``: k x n weights) in the formats.

    ``folds`` (float32 accumulators only; integers and fp8_e4m3 are exact, any order): the ascending first ``k`` of
    each fold, starting at 0 (module docstring); ``None`` is one fold.

    Returns:
        integers: int64 exact sums; fp8: object array of Python ints ``N`` (value
        ``N * 2**-(2 * fraction_bits)``); bf16, fp8_e5m2: float32 sums in ascending ``k``.

    Raises:
        WorkloadError: bad shapes, values not of the format, a float format mixed with another,
            bad ``folds``, a float32 sum that overflows.
    """
    wf = _fmt(weight_fmt)
    af = wf if act_fmt is None else _fmt(act_fmt)
    a = _finite("activation", a)
    b = _finite("weight", b)
    _check_pair(a, b, wf, af)
    if wf.is_int:
        return a.astype(np.int64) @ b.astype(np.int64)
    if wf.accumulator == "fixed":
        s = fraction_bits(wf)
        ai = np.ldexp(a, s).astype(np.int64)  # exact: every value is a multiple of 2**-s
        bi = np.ldexp(b, s).astype(np.int64)
        return _exact_int_matmul(ai, bi, 16)
    return _fp32_folds(a.astype(np.float32), b.astype(np.float32), _check_folds(folds, a.shape[1]))


def _check_folds(folds: tuple[int, ...] | None, k: int) -> tuple[int, ...]:
    if folds is None:
        return (0,)
    starts = tuple(int(f) for f in folds)
    if not starts or starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:], strict=False)) \
            or (k > 0 and starts[-1] >= k):
        raise WorkloadError(f"folds must be ascending first k of each fold from 0, below k = {k}, not {folds!r}")
    return starts


def _fp32_folds(a32: np.ndarray, b32: np.ndarray, starts: tuple[int, ...]) -> np.ndarray:
    """float32 sums of the products, each fold from +0 in ascending ``k``, the folds added in order."""
    k = a32.shape[1]
    total = None
    with np.errstate(over="ignore", invalid="ignore"):
        for first, end in zip(starts, (*starts[1:], k), strict=True):
            acc = np.zeros((a32.shape[0], b32.shape[1]), dtype=np.float32)
            for i in range(first, end):
                acc = acc + a32[:, i, None] * b32[None, i, :]  # float32 product, float32 sum: RNE each
            total = acc if total is None else total + acc
    out = np.zeros((a32.shape[0], b32.shape[1]), dtype=np.float32) if total is None else total
    if not np.isfinite(out).all():
        raise WorkloadError("float operands whose float32 products or sums overflow are not data "
                            "(the hardware carries no infinity)")
    return out


def round_to_float(n: int, exponent: int, significand_bits: int, min_exponent: int) -> float:
    """``n * 2**exponent`` rounded to ``significand_bits`` significant bits with no quantum finer
    than ``2**min_exponent`` (the subnormal quantum), nearest, ties to even, exactly from the
    integer (no exponent ceiling: the caller saturates). A negative ``n`` that rounds to zero
    gives -0.0, as IEEE rounding does.
    """
    if n == 0:
        return 0.0
    mag = abs(n)
    shift = mag.bit_length() - significand_bits
    low = exponent + max(shift, 0)
    if low < min_exponent:  # below the normal range: round at the subnormal quantum
        shift += min_exponent - low
    if shift > 0:
        q, r = divmod(mag, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        mag, exponent = q, exponent + shift
    value = math.ldexp(mag, exponent)
    return -value if n < 0 else value


def _round_f32(n: int, exponent: int) -> float:
    """``n * 2**exponent`` rounded to float32, nearest, ties to even (no overflow for fp8 sums)."""
    return round_to_float(n, exponent, 24, -149)


def to_float32(acc: np.ndarray, fmt: NumberFormat | str) -> np.ndarray:
    """An fp8 accumulator (:func:`accumulate`) rounded once to float32, nearest, ties to even."""
    e = -2 * fraction_bits(fmt)
    flat = [_round_f32(int(n), e) for n in np.asarray(acc, dtype=object).reshape(-1)]
    return np.asarray(flat, dtype=np.float64).astype(np.float32).reshape(np.shape(acc))


def dequantised_product(a: np.ndarray, b: np.ndarray, weight_fmt: NumberFormat | str,
                        act_fmt: NumberFormat | str | None = None) -> np.ndarray:
    """``a @ b`` computed in the formats with per-tensor scales, back in real units (float64).

    ``a`` and ``b`` are real-valued; each is quantised with :func:`per_tensor_scale`, multiplied
    with :func:`accumulate` (fp8 converted with :func:`to_float32`), and scaled back.
    """
    wf = _fmt(weight_fmt)
    af = wf if act_fmt is None else _fmt(act_fmt)
    sa, sb = per_tensor_scale(a, af), per_tensor_scale(b, wf)
    acc = accumulate(quantise(a, af, sa), quantise(b, wf, sb), wf, af)
    if wf.accumulator == "fixed":
        acc = to_float32(acc, wf)
    return np.asarray(acc, dtype=np.float64) * (sa * sb)


def jax_bound(a: np.ndarray, b: np.ndarray, fmt: NumberFormat | str) -> np.ndarray:
    """Per-element bound on ``|JAX's float32 matmul - this reference|`` for float formats.

    Any float32 summation of ``K`` exact products lies within ``gamma(K-1) * sum|a*b|`` of the
    exact sum (Higham, Accuracy and Stability of Numerical Algorithms, eq. 3.5), with
    ``gamma(n) = n u / (1 - n u)``, ``u = 2**-24``. The fp8 reference is the exact sum rounded
    once (``u * |sum|`` more); the bf16 / E5M2 reference is itself a float32 summation (another
    ``gamma(K-1) * sum|a*b|``).
    """
    f = _fmt(fmt)
    k = np.shape(a)[1]
    n = max(k - 1, 0)
    gamma = n * UNIT_ROUNDOFF_F32 / (1 - n * UNIT_ROUNDOFF_F32)
    abs_sum = np.abs(np.asarray(a, np.float64)) @ np.abs(np.asarray(b, np.float64))
    if f.accumulator == "fixed":
        return gamma * abs_sum + UNIT_ROUNDOFF_F32 * np.abs(np.asarray(a, np.float64) @ np.asarray(b, np.float64))
    return 2 * gamma * abs_sum


def sqnr_db(reference: np.ndarray, test: np.ndarray) -> float:
    """Signal-to-quantisation-noise ratio ``10 log10(sum ref**2 / sum (ref - test)**2)``, dB.

    ``inf`` when ``test`` equals ``reference``.

    Raises:
        WorkloadError: shapes differ, or the reference is all zero (no signal).
    """
    ref = np.asarray(reference, dtype=np.float64)
    out = np.asarray(test, dtype=np.float64)
    if ref.shape != out.shape:
        raise WorkloadError(f"sqnr needs equal shapes, not {ref.shape} and {out.shape}")
    signal = float(np.sum(ref * ref))
    if signal == 0.0:
        raise WorkloadError("sqnr needs a reference with some non-zero value")
    noise = float(np.sum((ref - out) ** 2))
    return math.inf if noise == 0.0 else 10.0 * math.log10(signal / noise)

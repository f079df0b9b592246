"""Float codes as the hardware moves them, and the output stage's conversion of a float accumulator.

An fp8 element travels as its 8-bit code (one byte in DRAM, SRAM and on the bus), a bf16 one as
its 16-bit code (two bytes). The tools hold codes as int8 / int16 (read as two's complement, so
the integer paths pack and compare them unchanged): :func:`to_codes` and :func:`from_codes`
convert between values and codes.

The output stage's fp8 conversion (:func:`fp8_output`), per output element with its channel's
``bias`` (an integer in accumulator units, ``2**-(2 s)``), ``shift`` (0..31) and ``relu``::

    v = (acc + bias) * 2**-(2 s + shift)          # exact: the per-tensor (or per-channel) scale 2**-shift
    v = max(v, 0) if relu                         # ReLU before rounding: no negative zero from it
    q = round(clamp(v, -max_finite, max_finite))  # one rounding, nearest, ties to even, subnormals kept

``s`` is :func:`workloads.formats.fraction_bits` (9 for E4M3). Saturation comes first, so no
NaN code is ever produced; a negative ``v`` that rounds to zero gives negative zero (code
0x80), as IEEE rounding does. The rounding is computed exactly from the integer
(:func:`workloads.formats.round_to_float`), whatever ``acc_bits``.

The output stage's conversion (:func:`float_output`) of a float32 accumulator (bf16, fp8_e5m2),
per output element with its channel's ``bias`` (a float32 bit pattern, as an int32), ``shift``
(0..31) and ``relu``::

    t = float32(acc + bias)                        # one float32 rounding (-0 + +0 is +0)
    v = t * 2**-shift                              # exact: a power-of-two scale
    v = +0 if relu and v is negative or -0
    q = round(v) to the format, nearest, ties to even, subnormals kept, saturated to +-max finite

The final rounding is computed exactly from the float32's integer significand; a negative ``v``
that rounds to zero (or -0) gives -0. NaN and infinity are not data.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from accel_spec.errors import WorkloadError
from accel_spec.number_formats import NumberFormat
from workloads.formats import _fmt, fraction_bits, quantise, round_to_float

__all__ = ["to_codes", "from_codes", "fp8_output", "float_output"]


def _fp8(fmt: NumberFormat | str) -> NumberFormat:
    f = _fmt(fmt)
    if f.accumulator != "fixed":
        raise WorkloadError(f"{f.name} has no 8-bit float codes with a fixed-point accumulator")
    return f


def _float(fmt: NumberFormat | str) -> NumberFormat:
    f = _fmt(fmt)
    if f.is_int:
        raise WorkloadError(f"{f.name} is an integer format: its values are its codes")
    return f


def _views(f: NumberFormat) -> tuple[type, type]:
    return (np.uint8, np.int8) if f.bits == 8 else (np.uint16, np.int16)


def to_codes(values: np.ndarray, fmt: NumberFormat | str) -> np.ndarray:
    """The int8 (fp8) or int16 (bf16) codes of ``values`` (which must be ``fmt`` values; -0.0
    gives the negative-zero code).

    Raises:
        WorkloadError: a value that is not a finite ``fmt`` value.
    """
    f = _float(fmt)
    x = np.asarray(values, dtype=np.float64)
    if not np.array_equal(quantise(x, f), x):
        raise WorkloadError(f"values that are not {f.name} values have no {f.name} code")
    unsigned, signed = _views(f)
    return x.astype(getattr(ml_dtypes, f.ml_dtype)).view(unsigned).view(signed)


def from_codes(codes: np.ndarray, fmt: NumberFormat | str) -> np.ndarray:
    """The values (float64) of int8 / int16 (or unsigned) ``codes``.

    Raises:
        WorkloadError: a NaN or infinity code (never data: the quantiser saturates).
    """
    f = _float(fmt)
    unsigned, _ = _views(f)
    raw = np.asarray(codes).astype(np.int64) & ((1 << f.bits) - 1)
    values = raw.astype(unsigned).view(getattr(ml_dtypes, f.ml_dtype)).astype(np.float64)
    if not np.isfinite(values).all():
        raise WorkloadError(f"{f.name} codes hold NaN or infinity: not data")
    return values


def fp8_output(acc: np.ndarray, fmt: NumberFormat | str, *, shift: np.ndarray | int, bias: np.ndarray | int = 0,
               relu: bool = False) -> np.ndarray:
    """The output stage's fp8 codes (int8) of accumulators ``acc`` (module docstring).

    Args:
        acc: integer accumulators (``workloads.formats.accumulate``), channels on the last axis.
        fmt: the fp8 output format.
        shift: the scale ``2**-shift`` per channel (broadcast on the last axis), 0..31.
        bias: added to the accumulator, in its units, per channel.
        relu: clamp negative values to +0 before rounding.
    """
    f = _fp8(fmt)
    acc = np.asarray(acc, dtype=object)
    shape = acc.shape
    shifts = np.broadcast_to(np.asarray(shift, dtype=np.int64), shape)
    biases = np.broadcast_to(np.asarray(bias, dtype=np.int64), shape)
    sig_bits = f.mantissa_bits + 1
    min_exp = math.frexp(f.min_subnormal)[1] - 1
    base = -2 * fraction_bits(f)
    out = np.empty(shape, dtype=np.float64)
    for idx in np.ndindex(shape):
        n = int(acc[idx]) + int(biases[idx])
        if relu and n < 0:
            n = 0
        v = round_to_float(n, base - int(shifts[idx]), sig_bits, min_exp)
        out[idx] = math.copysign(min(abs(v), f.max_finite), v)
    return to_codes(out, f)


def float_output(acc: np.ndarray, fmt: NumberFormat | str, *, shift: np.ndarray | int,
                 bias: np.ndarray | int = 0, relu: bool = False) -> np.ndarray:
    """The output stage's codes (int16 bf16, int8 E5M2) of float32 accumulators ``acc`` (module docstring).

    Args:
        acc: float32 accumulators (``workloads.formats.accumulate``), channels on the last axis.
        fmt: the output format, one with a float32 accumulator (bf16, fp8_e5m2).
        shift: the scale ``2**-shift`` per channel (broadcast on the last axis), 0..31.
        bias: per channel, the float32 bit pattern (an int32) added to the accumulator.
        relu: negative values (and -0) give +0.

    Raises:
        WorkloadError: a format without a float32 accumulator, a NaN or infinite accumulator or
            bias (never data: ``accumulate`` refuses them).
    """
    f = _fmt(fmt)
    if f.accumulator != "fp32":
        raise WorkloadError(f"{f.name} has no float32 accumulator")
    acc = np.asarray(acc, dtype=np.float32)
    shape = acc.shape
    biases = np.broadcast_to(np.asarray(bias, dtype=np.int64), shape).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        total = acc + biases  # float32 addition: one rounding
    if not (np.isfinite(acc).all() and np.isfinite(biases).all() and np.isfinite(total).all()):
        raise WorkloadError(f"{f.name} output of a NaN or infinite accumulator, bias or sum: not data")
    shifts = np.broadcast_to(np.asarray(shift, dtype=np.int64), shape)
    sig_bits = f.mantissa_bits + 1
    min_exp = math.frexp(f.min_subnormal)[1] - 1
    out = np.empty(shape, dtype=np.float64)
    for idx in np.ndindex(shape):
        x = float(total[idx])
        negative = math.copysign(1.0, x) < 0
        if relu and negative:
            out[idx] = 0.0
            continue
        frac, exp = math.frexp(abs(x))
        n = int(math.ldexp(frac, 24))  # exact: a float32 has 24 significant bits
        v = round_to_float(n, exp - 24 - int(shifts[idx]), sig_bits, min_exp)
        out[idx] = math.copysign(min(v, f.max_finite), -1.0 if negative else 1.0)
    return to_codes(out, f)

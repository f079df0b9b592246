"""The vector unit's door conversions written from the formats' bit fields with ``fractions.Fraction``
(independent of ``rtl_gen.core.vector_door`` and ``workloads.vector_door``, which the tests check
against these)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

from accel_spec.number_formats import FORMATS


def value(code: int, name: str) -> Fraction:
    """A float code's value from its bit fields (finite codes only are asked)."""
    f = FORMATS[name]
    e_bits, m_bits, bias = f.exponent_bits, f.mantissa_bits, f.bias
    code &= 0xFF
    sign, exp, mant = code >> 7, (code >> m_bits) & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
    if exp == 0:
        mag = Fraction(mant, 1 << m_bits) * Fraction(2) ** (1 - bias)
    else:
        mag = (1 + Fraction(mant, 1 << m_bits)) * Fraction(2) ** (exp - bias)
    return -mag if sign else mag


def finite(name: str) -> list[int]:
    """Every finite code of an fp8 format as an int8 value."""
    f = FORMATS[name]
    out = []
    for c in range(256):
        exp = (c >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1)
        if name == "fp8_e5m2" and exp == 31:
            continue
        if name == "fp8_e4m3" and (c & 0x7F) == 0x7F:
            continue
        out.append(c - 256 if c > 127 else c)
    return out


def in_by_hand(code: int, name: str, rnd: Callable[[Fraction], int] = round) -> int:
    """A code's int8 code in the unit; ``rnd`` the rounding (``round``: nearest, ties to even)."""
    if name == "int4":
        return code * 16
    return max(-128, min(127, rnd(value(code, name) * 16)))


def out_by_hand(q: int, name: str) -> int:
    if name == "int4":
        return max(-8, min(7, round(Fraction(q, 16))))
    if q == 0:
        return 0
    v = Fraction(q, 16)
    best = None
    for c in range(128):  # non-negative codes: nearest value, ties to the even code
        if (name == "fp8_e4m3" and c == 0x7F) or (name == "fp8_e5m2" and c >= 0x7C):
            continue
        d = abs(value(c, name) - abs(v))
        if best is None or d < best[0] or (d == best[0] and c % 2 == 0):
            best = (d, c)
    code = best[1] | (0x80 if v < 0 else 0)
    return code - 256 if code > 127 else code


def door_in(codes: np.ndarray, name: str, rnd: Callable[[Fraction], int] = round) -> np.ndarray:
    """:func:`in_by_hand` over an array of codes (int64)."""
    table = {c: in_by_hand(c, name, rnd) if name == "int4" or c in _FINITE[name] else 0 for c in range(-128, 128)}
    return np.vectorize(lambda c: table[int(c)])(np.asarray(codes)).astype(np.int64)


def door_out(q: np.ndarray, name: str) -> np.ndarray:
    """:func:`out_by_hand` over an array of int8 codes (int64)."""
    table = {v: out_by_hand(v, name) for v in range(-128, 128)}
    return np.vectorize(lambda v: table[int(v)])(np.asarray(q)).astype(np.int64)


_FINITE = {name: set(finite(name)) for name in ("fp8_e4m3", "fp8_e5m2")}

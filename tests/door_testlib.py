"""The vector unit's door conversions written from the formats' bit fields with ``fractions.Fraction``
(independent of ``rtl_gen.core.vector_door`` and ``workloads.vector_door``, which the tests check
against these)."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from accel_spec.number_formats import FORMATS


def value(code: int, name: str) -> Fraction:
    """A float code's value from its bit fields (finite codes only are asked)."""
    f = FORMATS[name]
    e_bits, m_bits, bias = f.exponent_bits, f.mantissa_bits, f.bias
    top = f.bits - 1
    code &= (1 << f.bits) - 1
    sign, exp, mant = code >> top, (code >> m_bits) & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
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
    bits = FORMATS[name].bits
    lo, hi = _bracket(name, abs(v))  # non-negative codes around |v|: nearest value, ties to the even code
    dl, dh = abs(v) - value(lo, name), value(hi, name) - abs(v)
    c = lo if dl < dh or (dl == dh and lo % 2 == 0) else hi
    code = c | ((1 << (bits - 1)) if v < 0 else 0)
    return code - (1 << bits) if code >= 1 << (bits - 1) else code


def _bracket(name: str, v: Fraction) -> tuple[int, int]:
    """The largest non-negative finite code of value <= ``v`` and the smallest of value >= ``v``."""
    values, codes = _POSITIVE[name]
    i = bisect.bisect_right(values, v) - 1
    j = bisect.bisect_left(values, v)
    return codes[i], codes[j]


def bf16_codes() -> list[int]:
    """bf16 codes (int16 values) around the unit's range: every mantissa of the exponents from 2**-12
    (rounds to 0) to 2**8 (saturates), both signs, with +-0, the smallest subnormal and the largest finite."""
    out = [0, -(1 << 15), 1, 0x7F7F, 0x7F7F - (1 << 16)]
    for exp in range(127 - 12, 127 + 9):
        for mant in range(128):
            c = (exp << 7) | mant
            out += [c, c - (1 << 16) + (1 << 15)]
    return out


def door_in(codes: np.ndarray, name: str, rnd: Callable[[Fraction], int] = round) -> np.ndarray:
    """:func:`in_by_hand` over an array of codes (int64)."""
    if name == "bf16":
        return np.vectorize(lambda c: in_by_hand(int(c), name, rnd))(np.asarray(codes)).astype(np.int64)
    table = {c: in_by_hand(c, name, rnd) if name == "int4" or c in _FINITE[name] else 0 for c in range(-128, 128)}
    return np.vectorize(lambda c: table[int(c)])(np.asarray(codes)).astype(np.int64)


def door_out(q: np.ndarray, name: str) -> np.ndarray:
    """:func:`out_by_hand` over an array of int8 codes (int64)."""
    table = {v: out_by_hand(v, name) for v in range(-128, 128)}
    return np.vectorize(lambda v: table[int(v)])(np.asarray(q)).astype(np.int64)


_FINITE = {name: set(finite(name)) for name in ("fp8_e4m3", "fp8_e5m2")}


def _positive(name: str) -> list[int]:
    """Non-negative finite codes whose value is at most 16 (every |q / 16| is at most 8)."""
    f = FORMATS[name]
    out = []
    for c in range(1 << (f.bits - 1)):
        exp = (c >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1)
        if (name == "fp8_e4m3" and c == 0x7F) or (name != "fp8_e4m3" and exp == (1 << f.exponent_bits) - 1):
            continue
        if value(c, name) <= 16:
            out.append(c)
    return out


def _sorted(name: str) -> tuple[list[Fraction], list[int]]:
    pairs = sorted((value(c, name), c) for c in _positive(name))
    return [v for v, _ in pairs], [c for _, c in pairs]


_POSITIVE = {name: _sorted(name) for name in ("fp8_e4m3", "fp8_e5m2", "bf16")}

"""The vector unit's instruction set: op codes, register values and timing constants (stdlib only).

The vector unit (``rtl_gen.core.vector_unit``) runs one vector op per ``start`` on rows held in
on-chip words of ``lanes`` int8 lanes; the model (``perf_model.vector_timing``) and the compiler
(``perf_model.compiler.vector``) read the same constants here, as the matrix side reads
``accel_dse.commands``. A vector op is ``rows`` rows of ``words`` words each (row ``r`` at word
``base + r * words``; element ``k`` of a row in lane ``k % lanes`` of word ``k // lanes``; lanes
past ``n`` in a row's last word are padding: ignored by reductions, unspecified on output).

Per row the unit runs the phases of :data:`PHASES` (``P`` a pass over the row's words, ``S`` a
scalar step of fixed cycles); an element-wise op is one pass (the compiler gives it one row of
all its words). Busy cycles of one op::

    1 + rows * (passes * (words + PASS_TAIL) + scalar cycles)

``PASS_TAIL``: a word read at cycle ``t`` is computed at ``t + 1`` and reduced or written at
``t + 2``. Scalar steps: ``MEAN`` (load, ``DIV_STEPS`` divide steps, finish), ``RSQRT``
(``q`` and its normalising shift, ``SQRT_STEPS`` root steps, load, ``DIV_STEPS``, finish),
``RECIP`` (load, ``DIV_STEPS``, finish).
"""

from __future__ import annotations

import math
from functools import lru_cache

__all__ = ["PARAM_FIELDS", "param_error", "VECTOR_CODES", "PHASES", "PASS_TAIL", "DIV_STEPS", "SQRT_STEPS",
           "SCALAR_CYCLES", "NPARAMS", "silu_table", "magic_divisor", "unit_params", "UNIT_KINDS", "SOFTMAX_Z_BITS"]

#: Op code of each kind the unit runs (the VECTOR command's ``vkind`` field); 0 is invalid.
VECTOR_CODES = {"add": 1, "mul": 2, "relu": 3, "relu6": 4, "gelu": 5, "silu": 6, "layernorm": 7, "rmsnorm": 8,
                "softmax": 9}
UNIT_KINDS = tuple(VECTOR_CODES)
#: Cycles from a pass's last read to its last reduction or write (read, compute, reduce/write).
PASS_TAIL = 2
#: Steps of the unit's serial divider (one quotient bit per cycle, 32-bit numerators).
DIV_STEPS = 32
#: Steps of its digit-by-digit integer square root (two bits of a 32-bit radicand per cycle).
SQRT_STEPS = 16
#: Cycles of each scalar step between passes.
SCALAR_CYCLES = {"MEAN": DIV_STEPS + 2, "RSQRT": 2 + SQRT_STEPS + DIV_STEPS + 2, "RECIP": DIV_STEPS + 2}
#: The phases of one row, per kind (element-wise kinds: one writing pass).
PHASES: dict[str, tuple[str, ...]] = {
    **{k: ("P",) for k in ("add", "mul", "relu", "relu6", "gelu", "silu")},
    "layernorm": ("P", "MEAN", "P", "RSQRT", "P"),
    "rmsnorm": ("P", "MEAN", "P", "RSQRT", "P"),
    "softmax": ("P", "P", "RECIP", "P"),
}
#: Parameter registers of the unit (32-bit, signed).
NPARAMS = 8
#: Bits of the clamped i-exp argument whose quotient by ``ln2`` the unit takes by a multiply.
SOFTMAX_Z_BITS = 20


_NORM_FIELDS = (("n", 24, False), ("half_n", 24, False), ("rsqrt_c14", 30, False), ("out_shift", 5, False),
                ("eps", 31, False), ("shift_base", 8, True), ("center", 1, False))
#: Each kind's parameter registers as ``(field name, bits, signed)``: the unit reads those bits
#: (its multipliers are that wide); :func:`param_error` holds the compiler's values to them.
PARAM_FIELDS: dict[str, tuple[tuple[str, int, bool], ...]] = {
    "add": (("mult_a", 23, False), ("mult_b", 23, False), ("shift", 5, False)),
    "mul": (("mul_a", 1, False), ("mul_b", 1, False), ("shift", 5, False)),
    "relu": (),
    "relu6": (("act_max", 8, True),),
    "gelu": (("gelu_mult", 16, False), ("clip", 15, False), ("gelu_a", 15, False)),
    "silu": (("gated", 1, False),),
    "layernorm": _NORM_FIELDS,
    "rmsnorm": _NORM_FIELDS,
    "softmax": (("in_mult", 23, False), ("ln2", 16, False), ("poly_b", 17, False), ("exp_a", 15, False),
                ("poly_c", 15, False), ("causal_offset", 32, True), ("z_mult", 24, False), ("z_shift", 6, False)),
}


def _rshr(v: int, s: int) -> int:
    return v if s == 0 else (v + (1 << (s - 1))) >> s


def param_error(kind: str, regs: tuple[int, ...]) -> str:
    """Why the unit cannot take registers ``regs`` of ``kind`` (``""``: it can): a value outside
    its field, or a softmax whose i-exp would leave the bounds the unit's widths rely on
    (``e < 2**15``, the clamp at ``16 ln2`` inside ``2**SOFTMAX_Z_BITS``)."""
    for (name, bits, sign), value in zip(PARAM_FIELDS[kind], regs, strict=False):
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1))) if sign else (0, 1 << bits)
        if not low <= value < high:
            return f"{kind}: parameter {name} = {value} is outside the unit's {bits}-bit field"
    if kind == "softmax":
        ln2, poly_b, poly_a, poly_c = regs[1], regs[2], regs[3], regs[4]
        top = _rshr(poly_b, 2)
        e_max = _rshr(poly_a * _rshr(top * top, 14), 15) + poly_c
        if not 0 < ln2 <= poly_b or ln2 << 4 >= 1 << SOFTMAX_Z_BITS or e_max >= 1 << 15:
            return f"{kind}: i-exp constants ln2 = {ln2}, poly_b = {poly_b}, poly_a = {poly_a}, poly_c = {poly_c} " \
                   "leave the unit's bounds"
    return ""


@lru_cache(maxsize=1)
def silu_table() -> tuple[int, ...]:
    """``T[c + 128] = round(2**11 * silu(c / 16))`` for codes ``c`` in -128..127 (the unit's ROM)."""
    return tuple(round((c / 16) / (1 + math.exp(-c / 16)) * 2048) for c in range(-128, 128))


def magic_divisor(d: int, bits: int) -> tuple[int, int]:
    """``(mult, shift)`` with ``floor(a / d) == (a * mult) >> shift`` for every ``0 <= a < 2**bits``.

    ``l = bitlen(d)``, ``shift = bits + l``, ``mult = ceil(2**shift / d)``: then ``mult * d - 2**shift
    < d <= 2**l``, which makes the floor exact on that range (Granlund and Montgomery, 1994, thm 4.2).
    """
    if d < 1:
        raise ValueError(f"divisor must be positive, not {d}")
    shift = bits + d.bit_length()
    return -(-(1 << shift) // d), shift


def unit_params(kind: str, params: dict[str, int], n: int) -> tuple[int, ...]:
    """The :data:`NPARAMS` parameter registers of op ``kind`` with record ``params`` over rows of ``n``.

    add: mult_a, mult_b, shift; mul: shift; relu6: act_max; gelu: in_mult, clip, poly_a; silu:
    gated; layernorm/rmsnorm: ``n``, ``n // 2``, ``rsqrt_const << 14``, ``10 + rsqrt_bits``, eps,
    ``bitlen(n - 1) - 28``, center; softmax: in_mult, ln2, poly_b, poly_a, poly_c, causal_offset,
    and the multiplier and shift of ``floor(a / ln2)`` for ``a < 2**SOFTMAX_Z_BITS``.
    """
    p = params
    if kind == "add":
        regs = [p["mult_a"], p["mult_b"], p["shift"]]
    elif kind == "mul":
        regs = [0, 0, p["shift"]]
    elif kind == "relu6":
        regs = [p["act_max"]]
    elif kind == "gelu":
        regs = [p["in_mult"], p["clip"], p["poly_a"]]
    elif kind == "silu":
        regs = [p["gated"]]
    elif kind in ("layernorm", "rmsnorm"):
        regs = [n, n // 2, p["rsqrt_const"] << 14, 10 + p["rsqrt_bits"], p["eps"], (n - 1).bit_length() - 28,
                int(kind == "layernorm")]
    elif kind == "softmax":
        mult, shift = magic_divisor(p["ln2"], SOFTMAX_Z_BITS)
        regs = [p["in_mult"], p["ln2"], p["poly_b"], p["poly_a"], p["poly_c"], p["causal_offset"], mult, shift]
    else:
        regs = []
    return tuple(regs + [0] * (NPARAMS - len(regs)))

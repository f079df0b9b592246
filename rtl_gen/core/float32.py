"""IEEE float32 arithmetic for the float32-accumulating PEs (bf16, fp8_e5m2): the product of two
operand codes and a float32 sum, each rounded once to float32, nearest, ties to even, subnormals
kept (no flush to zero).

What it computes is ``workloads.formats``' float32 semantics: ``numpy.float32(a) * numpy.float32(b)``
for operand values ``a``, ``b`` (a bf16 product is exact unless it falls below float32's normal
range; an E5M2 product, 6 significant bits between ``2**-32`` and ``2**32``, is always exact),
and ``x + y`` in float32 (exact cancellation gives +0, ``-0 + -0`` gives -0). Infinity and NaN
are not data: the quantiser saturates and the reference refuses them; an overflowing result
rounds to infinity as IEEE does, and an infinity or NaN operand code (the top exponent) is read
as the finite number its fields give, ``2**(emax + 1) * 1.m`` (no special case in the hardware).

Both are combinational expressions built from one rounding step (:func:`round_pack`): a sign,
an unsigned integer ``m`` and an exponent ``e`` (value ``m * 2**e``) to a float32 bit pattern.
The sum aligns the smaller operand to the larger one's exponent with three extra bits (guard,
round and a sticky bit that ORs everything shifted out), which keeps the one rounding exact.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed

__all__ = ["round_pack", "unpack_fp32", "float_product", "fp32_add", "FLOAT_OPERANDS"]

_SIG = 24  # float32 significand bits (hidden bit included)
_MIN_EXP = -149  # float32's subnormal quantum: 2**-149
_BIAS = 127
_EXP_BITS = 10  # signed exponent arithmetic (range -300 .. 300)

#: Operand codes a float32-accumulating PE multiplies: name -> (exponent bits, mantissa bits, bias).
FLOAT_OPERANDS = {"bf16": (8, 7, 127), "fp8_e5m2": (5, 2, 15)}


def _wire(mod: Module, value: Value, name: str) -> Signal:
    """``value`` as a named combinational signal (so its logic is built once, not copied into each use)."""
    sig = Signal(value.shape(), name=name)
    mod.d.comb += sig.eq(value)
    return sig


def _lead(m: Value) -> Value:
    """Position of the leading one of ``m`` (0 when ``m`` is 0)."""
    lead: Value = Const(0, range(len(m)))
    for i in range(len(m)):
        lead = Mux(m[i], i, lead)
    return lead


def round_pack(mod: Module, sign: Value, m: Value, e: Value, name: str, *, sig: int = _SIG,
               min_exp: int = _MIN_EXP, saturate: bool = False, exp_bits: int = 8, bias: int = _BIAS) -> Value:
    """The float32 bit pattern of ``(-1)**sign * m * 2**e`` rounded once (module docstring), its
    intermediate signals added to ``mod`` named ``<name>_...``.

    ``m`` is unsigned (any width up to 64), ``e`` signed. ``sig``, ``min_exp``, ``exp_bits`` and
    ``bias`` give another IEEE-style format (bf16: ``sig=8, min_exp=-133``, a 16-bit pattern;
    E5M2: ``sig=3, min_exp=-16, exp_bits=5, bias=15``, an 8-bit one); ``saturate`` gives the
    largest finite magnitude instead of infinity on overflow.
    """
    width = len(m)
    m = _wire(mod, m, f"{name}_m")
    e = _wire(mod, e.as_signed(), f"{name}_e")
    lead = Cat(_wire(mod, _lead(m), f"{name}_lead"), Const(0, 1)).as_signed()
    # the lowest bit kept: sig significant bits below the leading one, never below the subnormal quantum
    low_normal = (lead - (sig - 1)).as_signed()
    low_sub = (Const(min_exp, signed(_EXP_BITS)) - e).as_signed()
    shift = _wire(mod, Mux(low_normal > low_sub, low_normal, low_sub), f"{name}_shift")  # < 0: exact, left
    right = shift > 0
    amount = Mux(right, Mux(shift > width + 1, width + 1, shift), 0)[:7]  # all of m shifted out: capped
    left = Mux(right, 0, -shift)[:6]
    kept = _wire(mod, Mux(right, (m >> amount)[:sig + 1], (m << left)[:sig + 1]), f"{name}_kept")
    r_less = (amount - 1)[:7]
    round_bit = right & (m >> r_less)[0]
    below = ((Const(1, 1) << r_less) - 1)[:width]
    sticky = (m & below).any()
    up = round_bit & (sticky | kept[0])
    q = _wire(mod, (kept + up)[:sig + 1], f"{name}_q")
    carry = q[sig]
    low = (e + shift + carry).as_signed()  # exponent of q's lowest bit after the carry
    significand = Mux(carry, q[1:sig + 1], q[:sig])
    normal = significand[sig - 1]
    biased = (low + (sig - 1) + bias).as_signed()
    top_exp = (1 << exp_bits) - 1
    overflow = normal & (biased >= top_exp)
    exp_field = Mux(normal, biased[:exp_bits], 0)
    top = ((top_exp - 1) << (sig - 1)) | ((1 << (sig - 1)) - 1) if saturate else top_exp << (sig - 1)
    magnitude = Mux(overflow, Const(top, sig - 1 + exp_bits), Cat(significand[:sig - 1], exp_field))
    return Cat(magnitude, sign)


def _unpack(bits: Value, exp_bits: int, man_bits: int, bias: int) -> tuple[Value, Value, Value]:
    """``(sign, m, e)`` of an IEEE-style code: value ``(-1)**sign * m * 2**e`` (subnormals as they are)."""
    mant = bits[:man_bits]
    exp = bits[man_bits:man_bits + exp_bits]
    normal = exp != 0
    m = Cat(mant, normal)
    e = (Mux(normal, exp, 1).as_unsigned() - (bias + man_bits)).as_signed()
    return bits[man_bits + exp_bits], m, e


def float_product(mod: Module, a: Value, b: Value, number_format: str, name: str = "mul") -> Value:
    """The float32 pattern of the product of two codes of ``number_format`` (:data:`FLOAT_OPERANDS`;
    exact unless below float32's normal range, which an E5M2 product never is)."""
    exp_bits, man_bits, bias = FLOAT_OPERANDS[number_format]
    sa, ma, ea = _unpack(a, exp_bits, man_bits, bias)
    sb, mb, eb = _unpack(b, exp_bits, man_bits, bias)
    return round_pack(mod, sa ^ sb, ma * mb, ea + eb, name)


def unpack_fp32(bits: Value) -> tuple[Value, Value, Value]:
    """``(sign, m, e)`` of a float32 pattern: value ``(-1)**sign * m * 2**e`` (``m`` 24 bits)."""
    return _unpack(bits, 8, 23, _BIAS)


def fp32_add(mod: Module, x: Value, y: Value, name: str = "add") -> Value:
    """The float32 pattern of ``x + y`` (float32 codes), one rounding."""
    sx, mx, ex = _unpack(x, 8, 23, _BIAS)
    sy, my, ey = _unpack(y, 8, 23, _BIAS)
    swap = _wire(mod, ey > ex, f"{name}_swap")
    s_big, m_big, e_big = Mux(swap, sy, sx), Mux(swap, my, mx), Mux(swap, ey, ex)
    s_small, m_small, e_small = Mux(swap, sx, sy), Mux(swap, mx, my), Mux(swap, ex, ey)
    e_big = _wire(mod, e_big, f"{name}_ebig")
    d = _wire(mod, (e_big - e_small)[:9], f"{name}_d")  # 0 .. 277
    wide = Cat(Const(0, 3), m_small)  # 27 bits: guard, round, sticky below the significand
    capped = Mux(d > 27, 27, d)[:5]
    aligned = (wide >> capped)[:27]
    lost = (wide & ((Const(1, 1) << capped) - 1)[:27]).any()
    aligned = aligned | lost
    big = Cat(Const(0, 3), m_big)
    aligned = _wire(mod, aligned, f"{name}_aligned")
    total = _wire(mod, Mux(s_big == s_small, big + aligned, big - aligned)[:29], f"{name}_total").as_signed()
    negative = total[-1]
    magnitude = _wire(mod, Mux(negative, -total, total)[:28], f"{name}_mag")
    zero = magnitude == 0
    sign = Mux(zero, Mux(s_big == s_small, s_big, 0), s_big ^ negative)
    return round_pack(mod, sign, magnitude, (e_big - 3).as_signed(), name)

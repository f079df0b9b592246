"""The vector unit's door: per-lane conversion between the ifmap's activation format and the unit's int8.

``accel_spec.vector_door`` states the contract: each operand word the unit reads is converted from
the design's activation format (fp8_e4m3, fp8_e5m2, bf16: ``round(x * 16)`` saturated to int8,
nearest even; int4: ``c * 16``) and each word it writes back (``round(q / 16)`` to the format, nearest
even; int4 also saturated to [-8, 7]). A ``transpose`` moves codes both ways, a ``rope``'s second
operand (its table) is read as it is: the door latches the op's kind at ``start`` and passes those
words through. Combinational on both paths (no register, no cycle): the unit's timing is unchanged.

One parameterised converter for every format: the float formats by their exponent and mantissa
widths and bias (``accel_spec.number_formats``), int4 by its shift.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_spec.errors import ConfigError
from accel_spec.number_formats import FORMATS, NumberFormat
from accel_spec.vector_door import INT4_SHIFT, RAW_KINDS, RAW_SECOND_KINDS, UNIT_FRAC_BITS
from accel_spec.vector_isa import VECTOR_CODES

__all__ = ["VectorDoor", "to_unit_lane", "from_unit_lane"]


def _round_shift(m: Module, v: Value, drop: int, name: str) -> Value:
    """``v`` (unsigned) shifted right by ``drop`` bits, rounded to nearest, ties to even."""
    if drop == 0:
        return v
    q = Signal(len(v) - drop + 1, name=f"{name}_q")
    rem, half = v[:drop], 1 << (drop - 1)
    up = (rem > half) | ((rem == half) & v[drop])
    m.d.comb += q.eq(v[drop:] + up)
    return q


def to_unit_lane(m: Module, code: Value, f: NumberFormat, name: str) -> Value:
    """The unit's int8 code (signed 8 bits) of one lane holding a ``f`` code (module docstring)."""
    out = Signal(signed(8), name=f"{name}_i8")
    if f.is_int:  # int4, sign-extended in its byte lane: exact
        m.d.comb += out.eq(code.as_signed() << INT4_SHIFT)
        return out
    e_bits, m_bits = f.exponent_bits, f.mantissa_bits
    sign, exp, mant = code[e_bits + m_bits], code[m_bits:m_bits + e_bits], code[:m_bits]
    sig = Cat(mant, exp != 0)  # m_bits + 1 bits, the implicit one on normal numbers
    eff = Mux(exp == 0, 1, exp)
    # value * 2**FRAC = sig * 2**t, t = eff - bias - m_bits + FRAC; t clamped to [-(m_bits + 2), 9]:
    # below, the value rounds to 0; above, any non-zero sig saturates.
    low, high = -(m_bits + 2), 9
    t = Signal(signed(e_bits + 3), name=f"{name}_t")
    m.d.comb += t.eq(eff - (f.bias + m_bits - UNIT_FRAC_BITS))
    tc = Signal(range(high - low + 1), name=f"{name}_tc")
    m.d.comb += tc.eq(Mux(t < low, 0, Mux(t > high, high - low, t - low)))
    wide = Signal(m_bits + 1 + high - low, name=f"{name}_wide")
    m.d.comb += wide.eq(sig << tc)
    mag = _round_shift(m, wide, -low, name)  # sig * 2**t rounded to an integer
    sat = Signal(8, name=f"{name}_mag")
    m.d.comb += sat.eq(Mux(mag > Mux(sign, 128, 127), Mux(sign, 128, 127), mag))
    m.d.comb += out.eq(Mux(sign, -sat, sat))
    return out


def from_unit_lane(m: Module, q: Value, f: NumberFormat, lane_bits: int, name: str) -> Value:
    """One lane (``lane_bits``) of ``f`` holding the unit's int8 code ``q`` converted back (module docstring)."""
    out = Signal(lane_bits, name=f"{name}_code")
    qs = q.as_signed()
    if f.is_int:  # int4: round(q / 16), ties to even, saturated to [-8, 7], sign-extended in the lane
        neg = qs < 0
        mag = Signal(8, name=f"{name}_m")
        m.d.comb += mag.eq(Mux(neg, -qs, qs))
        r = _round_shift(m, mag, INT4_SHIFT, name)
        lim = 1 << (f.bits - 1)
        s = Signal(signed(f.bits + 2), name=f"{name}_s")
        m.d.comb += s.eq(Mux(neg, -Mux(r > lim, lim, r), Mux(r > lim - 1, lim - 1, r)))
        m.d.comb += out.eq(s.as_signed())
        return out
    e_bits, m_bits = f.exponent_bits, f.mantissa_bits
    neg = qs < 0
    mag = Signal(8, name=f"{name}_m")  # 0..128
    m.d.comb += mag.eq(Mux(neg, -qs, qs))
    p = Signal(range(8), name=f"{name}_p")  # the leading one's position
    for i in range(8):
        with m.If(mag[i]):
            m.d.comb += p.eq(i)
    lz = Signal(range(8), name=f"{name}_lz")  # 7 - p: the shift that puts the leading one at bit 7
    m.d.comb += lz.eq(7 - p)
    norm = Signal(8, name=f"{name}_norm")
    m.d.comb += norm.eq((mag << lz)[:8])
    keep = m_bits + 1
    if keep >= 8:
        sig = Signal(keep + 1, name=f"{name}_sig")
        m.d.comb += sig.eq(norm << (keep - 8))
    else:
        sig = _round_shift(m, norm, 8 - keep, name)  # keep + 1 bits: a carry doubles it
    carry = sig[keep]
    mant = Signal(m_bits, name=f"{name}_mant")
    m.d.comb += mant.eq(Mux(carry, 0, sig[:m_bits]))
    exp = Signal(e_bits, name=f"{name}_exp")
    m.d.comb += exp.eq(p + carry + (f.bias - UNIT_FRAC_BITS))
    m.d.comb += out.eq(Mux(mag == 0, 0, Cat(mant, exp, neg)))
    return out


class VectorDoor(wiring.Component):
    """The door between the ifmap's ``lanes`` lanes of ``number_format`` and the vector unit's int8 lanes.

    Args:
        lanes: lanes per word.
        number_format: the design's activation format: ``fp8_e4m3``, ``fp8_e5m2``, ``int4`` (an int4
            value in an 8-bit lane) or ``bf16`` (16-bit lanes: a raw word's lanes pass their low byte,
            the table bytes the host wrote sign-extended; a write is never raw there, the compiler
            issuing no transpose).
    """

    def __init__(self, *, lanes: int, number_format: str) -> None:
        if isinstance(lanes, bool) or not isinstance(lanes, int) or not 1 <= lanes <= 1024:
            raise ConfigError(f"vector door lanes must be an integer in [1, 1024], not {lanes!r}")
        f = FORMATS.get(number_format)
        if f is None or (f.is_int and f.bits != 4) or (f.bits == 16 and f.name != "bf16"):
            raise ConfigError("the vector unit's door converts fp8_e4m3, fp8_e5m2, int4 or bf16 lanes, "
                              f"not {number_format!r}")
        self.lanes, self.fmt = lanes, f
        self.lane_bits = 16 if f.bits == 16 else 8
        w, b = 8 * lanes, self.lane_bits * lanes
        super().__init__({
            "start": In(1), "kind": In(4),
            "buf_rd_data": In(b), "buf_rd2_data": In(b), "unit_wr_data": In(w),
            "unit_rd_data": Out(w), "unit_rd2_data": Out(w), "buf_wr_data": Out(b),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        kind = Signal(4)
        with m.If(self.start):
            m.d.sync += kind.eq(self.kind)
        raw = Signal()
        raw2 = Signal()
        m.d.comb += [raw.eq(_any_of(kind, RAW_KINDS)), raw2.eq(_any_of(kind, RAW_SECOND_KINDS))]
        lb = self.lane_bits
        conv_rd, conv_rd2, conv_wr, raw_rd, raw_rd2, raw_wr = [], [], [], [], [], []
        for i in range(self.lanes):
            sl, ul = slice(lb * i, lb * (i + 1)), slice(8 * i, 8 * (i + 1))
            conv_rd.append(to_unit_lane(m, self.buf_rd_data[sl], self.fmt, f"rd{i}"))
            conv_rd2.append(to_unit_lane(m, self.buf_rd2_data[sl], self.fmt, f"rd2_{i}"))
            conv_wr.append(from_unit_lane(m, self.unit_wr_data[ul], self.fmt, lb, f"wr{i}"))
            raw_rd.append(self.buf_rd_data[sl][:8])
            raw_rd2.append(self.buf_rd2_data[sl][:8])
            raw_wr.append(self.unit_wr_data[ul].as_signed())  # sign-extended into a wider lane
        m.d.comb += [self.unit_rd_data.eq(Mux(raw, Cat(*raw_rd), Cat(*conv_rd))),
                     self.unit_rd2_data.eq(Mux(raw2, Cat(*raw_rd2), Cat(*conv_rd2))),
                     self.buf_wr_data.eq(Mux(raw, Cat(*(Cat(v, v[7].replicate(lb - 8)) if lb > 8 else v
                                                        for v in raw_wr)), Cat(*conv_wr)))]
        return m


def _any_of(kind: Value, names: tuple[str, ...]) -> Value:
    out: Value = Const(0, 1)
    for name in names:
        out = out | (kind == VECTOR_CODES[name])
    return out

"""The output stage's fp8 conversion: an exact fixed-point accumulator to an fp8 code, one lane.

What it computes is ``workloads.format_codes.fp8_output``: ``(acc + bias) * 2**-(2 s + shift)``,
a ReLU when the lane's ``act_min`` is not negative, saturated to the largest finite magnitude
and rounded once to nearest, ties to even (subnormals kept; a negative value that rounds to
zero gives negative zero). The other fields of the parameter word (``multiplier``,
``zero_point``, ``act_max``) are not read.

Pipeline, the output stage's :data:`~accel_spec.isa.OUTPUT_STAGE_LATENCY` (6) register stages::

    1  t = acc + bias                                       (acc_bits + 1 bits, exact)
    2  sign, magnitude |t| (ReLU: a negative t gives +0)
    3  p = the magnitude's leading one; r = max(p - m, s + shift): the lowest bit kept
       (m mantissa bits below the leading one, or the subnormal quantum 2**-s)
    4  kept = magnitude >> r (m + 1 bits); round up when the bit below r is set and either a
       lower bit is or kept is odd (nearest, ties to even)
    5  rounded = kept + up (a carry out moves r up one); biased exponent
       r - shift - (2 s - m - bias) for a normal result, 0 for a subnormal one
    6  saturation to the largest finite code, sign on top
"""

from __future__ import annotations

from typing import Any

from amaranth import Cat, Const, Mux, Value

from accel_spec.number_formats import FORMATS

__all__ = ["build_fp8_lane", "FP8_OUTPUTS"]

#: fp8 formats the output stage converts to (those the PE builds).
FP8_OUTPUTS = ("fp8_e4m3",)


def _max_code(name: str) -> int:
    """The magnitude bits (exponent, mantissa) of the format's largest finite value."""
    f = FORMATS[name]
    top = (1 << f.exponent_bits) - 1
    mant = (1 << f.mantissa_bits) - 1
    if f.has_inf:  # IEEE-like: the top exponent is infinity/NaN
        return ((top - 1) << f.mantissa_bits) | mant
    return (top << f.mantissa_bits) | (mant - 1)  # FN: only all-ones is NaN


def build_fp8_lane(pipe: Any, acc: Value, field: dict[str, Value], q: Value, number_format: str) -> None:
    """Stages 1 to 6 (module docstring) of one lane into ``pipe`` (an output-stage lane:
    ``step``, ``wire``, ``m``, ``stage``, ``bits``), from ``acc`` and the parameter ``field`` s to ``q``."""
    f = FORMATS[number_format]
    m_bits = f.mantissa_bits
    s = f.bias - 1 + m_bits  # the smallest subnormal is 2**-s
    exp_offset = 2 * s - m_bits - f.bias
    relu = ~field["act_min"][-1]
    # 1: t = acc + bias
    width = max(len(acc), 32) + 1
    regs = pipe.step({"t": acc.as_signed() + field["bias"].as_signed(), "shift": field["shift"], "relu": relu})
    t = regs["t"][:width].as_signed()
    # 2: sign and magnitude
    neg = t[-1]
    drop = neg & regs["relu"]
    magnitude = Mux(drop, 0, Mux(neg, -t, t))[:width]
    regs = pipe.step({"mag": magnitude.as_unsigned(), "sign": neg & ~drop, "shift": regs["shift"]})
    mag, shift = regs["mag"], regs["shift"]
    # 3: leading one and the lowest bit kept
    lead: Value = Const(0, range(width))
    for i in range(width):
        lead = Mux(mag[i], i, lead)
    lead = pipe.wire("lead", lead)
    low_normal = Cat(lead, Const(0, 1)).as_signed() - m_bits
    low_sub = Cat(shift + s, Const(0, 1)).as_signed()
    r = Mux(low_normal > low_sub, low_normal, low_sub)[:7]
    regs = pipe.step({"mag": mag, "r": r, "sign": regs["sign"], "shift": shift})
    mag, r = regs["mag"], regs["r"]
    # 4: kept bits, round and sticky bits
    kept = (mag >> r)[:m_bits + 1]
    r_less = (r - 1)[:7]  # r >= s >= 1
    round_bit = (mag >> r_less)[0]
    below = ((Const(1, 1) << r_less) - 1)[:width]
    sticky = (mag & below).any()
    regs = pipe.step({"kept": kept, "up": round_bit & (sticky | kept[0]), "r": r, "sign": regs["sign"],
                      "shift": regs["shift"]})
    # 5: rounding, exponent
    rounded = pipe.wire("rounded", regs["kept"] + regs["up"], m_bits + 2)
    carry = rounded[m_bits + 1]
    normal = rounded[m_bits] | carry
    exponent = (regs["r"] + carry - regs["shift"] - exp_offset)[:8]  # modulo 2**8: a normal one is 1..127
    exponent = Mux(normal, exponent, 0)
    regs = pipe.step({"exp": exponent, "mant": rounded[:m_bits], "sign": regs["sign"]})
    # 6: saturation and sign
    magnitude_code = Cat(regs["mant"], regs["exp"])
    top = _max_code(number_format)
    code = Mux(magnitude_code > top, Const(top, 7), magnitude_code[:7])
    pipe.m.d.sync += q.eq(Cat(code, regs["sign"]))
    pipe.stage += 1
    pipe.bits += len(q)

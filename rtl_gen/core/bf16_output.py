"""The output stage's float conversion: a float32 accumulator to a bf16 or an E5M2 code, one lane.

What it computes is ``workloads.format_codes.float_output``::

    t = acc + bias                     # float32 addition, one rounding (the bias field read as a float32 pattern)
    v = t * 2**-shift                  # the per-tensor (or per-channel) power-of-two scale, exact
    v = +0 if relu and v is negative or -0
    q = round(v) to the output format, nearest, ties to even, subnormals kept, saturated

``acc`` is the float32 value of the accumulator pattern; ``bias`` the parameter word's 32-bit
bias field read as a float32 pattern (+0, the pattern 0, leaves every finite ``acc`` but -0
unchanged: ``-0 + +0`` is +0 in IEEE arithmetic); ReLU applies when the lane's ``act_min`` is not
negative. The rounding keeps the output format's subnormals (quantum ``2**-133`` for bf16,
``2**-16`` for E5M2) and saturates to the largest finite magnitude (bf16 ``0x7F7F``, E5M2
``0x7B``: no infinity is produced; an infinite or NaN accumulator, never data, is read as the
finite number its bit fields give). A negative value that rounds to zero gives -0, as IEEE
rounding does. The other fields of the parameter word (``multiplier``, ``zero_point``,
``act_max``) are not read.

Pipeline, the output stage's :data:`~accel_spec.isa.OUTPUT_STAGE_LATENCY` (6) register stages::

    1  t = acc + bias (``rtl_gen.core.float32.fp32_add``)
    2  sign, 24-bit significand and exponent of t; the exponent less shift; ReLU
    3  the rounding (``rtl_gen.core.float32.round_pack`` to the output format, saturating)
    4-5  registers (the latency every output format keeps)
    6  the code
"""

from __future__ import annotations

from typing import Any

from amaranth import Mux, Value

from rtl_gen.core.float32 import FLOAT_OPERANDS, fp32_add, round_pack, unpack_fp32

__all__ = ["build_float_lane", "FLOAT_OUTPUTS"]

#: Output formats of a float32 accumulator: name -> (significant bits, exponent of the smallest
#: subnormal), with the exponent bits and bias of :data:`~rtl_gen.core.float32.FLOAT_OPERANDS`.
FLOAT_OUTPUTS = {"bf16": (8, -133), "fp8_e5m2": (3, -16)}


def build_float_lane(pipe: Any, acc: Value, field: dict[str, Value], q: Value, number_format: str) -> None:
    """Stages 1 to 6 (module docstring) of one lane into ``pipe`` (an output-stage lane:
    ``step``, ``wire``, ``m``, ``stage``, ``bits``, ``lane``), from the float32 ``acc`` and the
    parameter ``field`` s to the code ``q`` of ``number_format`` (:data:`FLOAT_OUTPUTS`)."""
    sig, min_exp = FLOAT_OUTPUTS[number_format]
    exp_bits, _, bias = FLOAT_OPERANDS[number_format]
    relu = ~field["act_min"][-1]
    # 1: t = acc + bias, one float32 rounding
    total = fp32_add(pipe.m, acc[:32], field["bias"][:32], f"obias{pipe.lane}")
    regs = pipe.step({"t": total, "shift": field["shift"], "relu": relu})
    # 2: the scaled exponent, the significand (0 when ReLU drops the value)
    sign, m, e = unpack_fp32(regs["t"])
    drop = sign & regs["relu"]
    regs = pipe.step({"m": Mux(drop, 0, m), "e": (e - regs["shift"]).as_signed(), "sign": sign & ~drop})
    # 3: one rounding to the output format
    code = round_pack(pipe.m, regs["sign"], regs["m"], regs["e"], f"flt{pipe.lane}", sig=sig, min_exp=min_exp,
                      saturate=True, exp_bits=exp_bits, bias=bias)
    regs = pipe.step({"code": code})
    for _ in range(2):  # 4-5
        regs = pipe.step({"code": regs["code"]})
    pipe.m.d.sync += q.eq(regs["code"])
    pipe.stage += 1
    pipe.bits += len(q)

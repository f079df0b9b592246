"""The output stage's bf16 conversion: a float32 accumulator to a bf16 code, one lane.

What it computes is ``workloads.format_codes.bf16_output``: ``v = acc * 2**-shift`` (``acc`` the
float32 value of the accumulator pattern; the per-tensor, or per-channel, power-of-two scale of
the parameter word's ``shift``), a ReLU when the lane's ``act_min`` is not negative (a negative
``v``, or -0, gives +0), then one rounding to bf16, nearest, ties to even, subnormals kept (the
quantum ``2**-133``), saturated to the largest finite magnitude (``0x7F7F``: no infinity is
produced; an infinite or NaN accumulator, never data, is read as the finite number its bit
fields give). A negative value that rounds to zero gives -0, as IEEE rounding does. The other
fields of the parameter word (``bias``, ``multiplier``, ``zero_point``, ``act_max``) are not read.

Pipeline, the output stage's :data:`~accel_dse.commands.OUTPUT_STAGE_LATENCY` (6) register stages::

    1  sign, 24-bit significand and exponent of acc; the exponent less shift; ReLU
    2  the rounding (``rtl_gen.core.float32.round_pack`` with 8 significant bits, saturating)
    3-5  registers (the latency every output format keeps)
    6  the code
"""

from __future__ import annotations

from typing import Any

from amaranth import Mux, Value

from rtl_gen.core.float32 import round_pack, unpack_fp32

__all__ = ["build_bf16_lane", "BF16_SIG", "BF16_MIN_EXP"]

#: bf16's significant bits (hidden bit included) and the exponent of its smallest subnormal.
BF16_SIG = 8
BF16_MIN_EXP = -133


def build_bf16_lane(pipe: Any, acc: Value, field: dict[str, Value], q: Value) -> None:
    """Stages 1 to 6 (module docstring) of one lane into ``pipe`` (an output-stage lane:
    ``step``, ``wire``, ``m``, ``stage``, ``bits``), from the float32 ``acc`` and the parameter
    ``field`` s to the 16-bit code ``q``."""
    sign, m, e = unpack_fp32(acc[:32])
    relu = ~field["act_min"][-1]
    drop = sign & relu
    # 1: the scaled exponent, the significand (0 when ReLU drops the value)
    regs = pipe.step({"m": Mux(drop, 0, m), "e": (e - field["shift"]).as_signed(), "sign": sign & ~drop})
    # 2: one rounding to bf16
    code = round_pack(pipe.m, regs["sign"], regs["m"], regs["e"], f"bf16r{pipe.lane}", sig=BF16_SIG,
                      min_exp=BF16_MIN_EXP, saturate=True)
    regs = pipe.step({"code": code})
    for _ in range(3):  # 3-5
        regs = pipe.step({"code": regs["code"]})
    pipe.m.d.sync += q.eq(regs["code"])
    pipe.stage += 1
    pipe.bits += len(q)

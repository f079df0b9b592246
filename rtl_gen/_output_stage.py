"""The output stage: integer-only requantisation of accumulators, one channel per lane.

Per lane, with that lane's parameter word (fields of :func:`param_fields`, low bits first)::

    x = clamp(acc + bias, -2**31, 2**31 - 1)                   # int32, saturating
    y = (x * multiplier + 2**(30 + shift)) >> (31 + shift)     # arithmetic shift: floor
    q = min(max(y + zero_point, act_min), act_max)             # out_bits wide

``multiplier`` is a signed Q31 number, ``shift`` 0..31 (5 bits), so ``y`` is ``x`` times
``multiplier * 2**-(31 + shift)`` rounded half up (toward +infinity), one rounding: the
arithmetic of ``workloads.ops.Requant`` and of the JAX reference ``workloads.output_stage``.
Saturation to ``out_bits`` is ``act_min``/``act_max`` at the ends of the range; ReLU is
``act_min = zero_point``. ``act_min > act_max`` gives ``act_max`` (the order above).

Pipeline: two register stages (after the 32 x 32 multiply, and at the output), so ``q`` is
valid :data:`OUTPUT_STAGE_LATENCY` cycles after ``acc`` and ``params``; one result per cycle.
"""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_dse.errors import ConfigError

__all__ = ["OutputStage", "param_fields", "param_bits", "OUTPUT_STAGE_LATENCY", "QPARAM_CHANNELS"]

#: Cycles from ``acc``/``params`` to ``q``.
OUTPUT_STAGE_LATENCY = 2
#: Output channels the accelerator's parameter buffer holds per run (see ``rtl_gen._top``).
QPARAM_CHANNELS = 4096

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def param_fields(out_bits: int) -> tuple[tuple[str, int], ...]:
    """``(name, bits)`` of one lane's parameter word, from bit 0 up (all signed but ``shift``)."""
    return (("bias", 32), ("multiplier", 32), ("shift", 5), ("zero_point", out_bits), ("act_min", out_bits),
            ("act_max", out_bits))


def param_bits(out_bits: int) -> int:
    """Bits of one lane's parameter word (``69 + 3 * out_bits``)."""
    return sum(width for _, width in param_fields(out_bits))


class OutputStage(wiring.Component):
    """Requantise ``lanes`` accumulators of ``acc_bits`` to ``out_bits`` (module docstring).

    Ports: ``acc`` (``lanes * acc_bits``), ``params`` (``lanes * param_bits(out_bits)``), ``q``
    (``lanes * out_bits``); lane ``i`` at bits ``[i * w, (i + 1) * w)``, two's complement.

    Args:
        lanes: lanes (ofmap columns).
        acc_bits: accumulator bits, 2..64.
        out_bits: output bits, 2..16.

    Raises:
        ConfigError: a width out of range.
    """

    def __init__(self, *, lanes: int, acc_bits: int, out_bits: int) -> None:
        for name, value, low, high in (("lanes", lanes, 1, 1 << 16), ("acc_bits", acc_bits, 2, 64),
                                       ("out_bits", out_bits, 2, 16)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(f"output stage {name} must be an integer in [{low}, {high}], not {value!r}")
        self.lanes = lanes
        self.acc_bits = acc_bits
        self.out_bits = out_bits
        super().__init__({
            "acc": In(lanes * acc_bits),
            "params": In(lanes * param_bits(out_bits)),
            "q": Out(lanes * out_bits),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        ab, ob, pb = self.acc_bits, self.out_bits, param_bits(self.out_bits)
        for lane in range(self.lanes):
            word = self.params[lane * pb:(lane + 1) * pb]
            field = {}
            at = 0
            for name, width in param_fields(ob):
                field[name] = word[at:at + width]
                at += width
            acc = self.acc[lane * ab:(lane + 1) * ab].as_signed()
            total = acc + field["bias"].as_signed()
            x = Signal(signed(32), name=f"x{lane}")
            m.d.comb += x.eq(Mux(total > _INT32_MAX, _INT32_MAX, Mux(total < _INT32_MIN, _INT32_MIN, total)))
            # stage 1: the product and the parameters the second stage needs
            prod = Signal(signed(64), name=f"prod{lane}")
            shift = Signal(5, name=f"shift{lane}")
            zp, lo, hi = (Signal(signed(ob), name=f"{n}{lane}") for n in ("zp", "lo", "hi"))
            m.d.sync += [prod.eq(x * field["multiplier"].as_signed()), shift.eq(field["shift"]),
                         zp.eq(field["zero_point"].as_signed()), lo.eq(field["act_min"].as_signed()),
                         hi.eq(field["act_max"].as_signed())]
            # stage 2: round, shift, zero point, clamp
            rounded = Signal(signed(65), name=f"rounded{lane}")
            m.d.comb += rounded.eq(prod + (Const(1 << 30, 62) << shift))
            y = Signal(signed(34), name=f"y{lane}")  # |y| <= 2**31 + 1
            m.d.comb += y.eq(rounded >> (shift + 31))
            z = Signal(signed(35), name=f"z{lane}")
            m.d.comb += z.eq(y + zp)
            low = Signal(signed(35), name=f"low{lane}")
            m.d.comb += low.eq(Mux(z < lo, lo, z))
            m.d.sync += self.q[lane * ob:(lane + 1) * ob].eq(Mux(low > hi, hi, low))
        return m

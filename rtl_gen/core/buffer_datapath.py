"""Small datapath pieces between the buffers and the array (own components so that
``synth_stats`` can synthesise one lane of each and scale it)."""

from __future__ import annotations

from amaranth import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl_gen.core.float32 import FLOAT_OPERANDS, fp32_add

__all__ = ["OperandGate", "OfmapUpdate"]


class OperandGate(wiring.Component):
    """``o_data = i_data if valid else 0``: a buffer word into the array, zero when idle.

    Args:
        width: bits of the word (``lanes * input_bits``).
    """

    def __init__(self, *, width: int) -> None:
        self.width = width
        super().__init__({"i_data": In(width), "valid": In(1), "o_data": Out(width)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.d.comb += self.o_data.eq(Mux(self.valid, self.i_data, 0))
        return m


class OfmapUpdate(wiring.Component):
    """The ofmap write data: while ``busy`` ``result + (old if add else 0)`` per lane
    (wrapping; ``add`` has one bit per lane), else the host's word ``host``.

    The fold accumulation of a float32-accumulating design (``number_format`` bf16 or fp8_e5m2,
    ``acc_bits = 32``) is the
    PE's float32 addition (``rtl_gen.core.float32.fp32_add``: one rounding, nearest even):
    ``old + result``, the earlier folds' sum plus this fold's, so the K folds add in order.
    Combinational like the integer add (no extra cycle).

    Args:
        lanes: lanes per word (array columns).
        acc_bits: bits per lane.
        number_format: the PE's operand encoding (``rtl_gen.core.pe.PE_FORMATS``): bf16 and
            fp8_e5m2 add in float32, every other one in two's complement.
    """

    def __init__(self, *, lanes: int, acc_bits: int, number_format: str = "int") -> None:
        self.lanes = lanes
        self.acc_bits = acc_bits
        self.number_format = number_format
        width = lanes * acc_bits
        super().__init__(
            {
                "result": In(width),
                "old": In(width),
                "add": In(lanes),
                "host": In(width),
                "busy": In(1),
                "new": Out(width),
            }
        )

    def elaborate(self, platform: object) -> Module:
        m = Module()
        ab = self.acc_bits
        for c in range(self.lanes):
            lane = slice(c * ab, (c + 1) * ab)
            if self.number_format in FLOAT_OPERANDS:  # the float32-accumulating formats
                total = Mux(self.add[c], fp32_add(m, self.old[lane], self.result[lane], f"fold{c}"),
                            self.result[lane])
            else:
                total = self.result[lane] + Mux(self.add[c], self.old[lane], 0)
            m.d.comb += self.new[lane].eq(Mux(self.busy, total, self.host[lane]))
        return m

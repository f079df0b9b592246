"""Skew and de-skew: a triangle of delay registers in front of / behind the array."""

from __future__ import annotations

from amaranth import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_spec.errors import ConfigError

__all__ = ["Skew", "DelayLine"]


class Skew(wiring.Component):
    """Delay lane ``i`` of a packed word by ``i`` cycles (``reverse``: ``lanes - 1 - i``).

    The forward triangle skews an operand word into a systolic wavefront (lane 0 goes
    straight through); the reverse one de-skews a wavefront back into a word aligned with
    the last lane. Holds ``lanes * (lanes - 1) / 2`` registers of ``width`` bits.

    Args:
        lanes: number of lanes, >= 1.
        width: bits per lane, >= 1.
        reverse: delay ``lanes - 1 - i`` instead of ``i``.

    Ports:
        i_data: packed input word, lane ``i`` at bits ``[i*width, (i+1)*width)``.
        o_data: packed output word, same layout, each lane delayed.
    """

    def __init__(self, *, lanes: int, width: int, reverse: bool = False) -> None:
        for name, value in (("lanes", lanes), ("width", width)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"skew {name} must be a positive integer, not {value!r}")
        self.lanes = lanes
        self.width = width
        self.reverse = reverse
        super().__init__({"i_data": In(lanes * width), "o_data": Out(lanes * width)})

    def delay(self, lane: int) -> int:
        """Cycles of delay of ``lane``."""
        return self.lanes - 1 - lane if self.reverse else lane

    @property
    def stages(self) -> int:
        """Number of ``width``-bit registers in the triangle."""
        return self.lanes * (self.lanes - 1) // 2

    def elaborate(self, platform: object) -> Module:
        m = Module()
        w, n = self.width, self.lanes
        # Lanes in order of increasing delay; stage j holds the lanes still to be delayed,
        # j + 1 cycles old: one register per stage, shrinking by one lane each stage.
        order = list(range(n - 1, -1, -1)) if self.reverse else list(range(n))

        def lane(value: Value, i: int) -> Value:
            return value[i * w : (i + 1) * w]

        pending = Cat(*(lane(self.i_data, i) for i in order[1:]))
        m.d.comb += lane(self.o_data, order[0]).eq(lane(self.i_data, order[0]))
        for j in range(n - 1):
            stage = Signal(len(pending), name=f"stage_{j}")
            m.d.sync += stage.eq(pending)
            m.d.comb += lane(self.o_data, order[j + 1]).eq(stage[:w])
            pending = stage[w:]
        return m


class DelayLine(wiring.Component):
    """A tapped delay line: tap ``i`` is the input delayed by ``i`` cycles (tap 0 = input).

    ``taps - 1`` registers of ``width`` bits in a chain. Used to skew control signals (a
    buffer bank's address and enable, the first-operand marker) instead of data: a per-lane
    bank addressed ``i`` cycles late delivers the same skewed wavefront as a data skew
    triangle, with ``O(taps)`` instead of ``O(taps**2)`` registers.

    Args:
        taps: number of taps, >= 1.
        width: bits per tap, >= 1.

    Ports:
        i_data: the input (``width`` bits).
        o_taps: the taps, tap ``i`` at bits ``[i*width, (i+1)*width)``.
    """

    def __init__(self, *, taps: int, width: int) -> None:
        for name, value in (("taps", taps), ("width", width)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"delay line {name} must be a positive integer, not {value!r}")
        self.taps = taps
        self.width = width
        super().__init__({"i_data": In(width), "o_taps": Out(taps * width)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        w = self.width
        value: Value = self.i_data
        m.d.comb += self.o_taps[:w].eq(value)
        for i in range(1, self.taps):
            reg = Signal(w, name=f"tap_{i}")
            m.d.sync += reg.eq(value)
            m.d.comb += self.o_taps[i * w : (i + 1) * w].eq(reg)
            value = reg
        return m

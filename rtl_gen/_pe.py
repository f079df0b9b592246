"""The processing element: one signed multiply-accumulate cell, dataflow a parameter."""

from __future__ import annotations

import dataclasses

from amaranth import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_dse.config import INPUT_BITS, Dataflow
from accel_dse.errors import ConfigError

__all__ = ["PE", "Fault", "pe_widths"]


@dataclasses.dataclass(frozen=True)
class Fault:
    """A test-only defect: bit ``bit`` of PE ``(row, col)``'s product stuck at ``stuck``.

    Used to prove that the verification checkers can fail; never part of a real design.

    Attributes:
        row: PE row, 0-based.
        col: PE column, 0-based.
        bit: product bit, ``0 <= bit < 2 * input_bits``.
        stuck: the value the bit is stuck at, 0 or 1.
    """

    row: int
    col: int
    bit: int = 0
    stuck: int = 1

    def check(self, rows: int, cols: int, input_bits: int) -> None:
        """Raise ``ConfigError`` unless the fault lies inside a ``rows x cols`` array."""
        for name, value, high in (
            ("row", self.row, rows),
            ("col", self.col, cols),
            ("bit", self.bit, 2 * input_bits),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < high:
                raise ConfigError(f"fault {name} must be an integer in [0, {high}), not {value!r}")
        if self.stuck not in (0, 1) or isinstance(self.stuck, bool):
            raise ConfigError(f"fault stuck must be 0 or 1, not {self.stuck!r}")

    @property
    def tag(self) -> str:
        """Short identifier used in module names, e.g. ``f1_2_b0_s1``."""
        return f"f{self.row}_{self.col}_b{self.bit}_s{self.stuck}"


def pe_widths(dataflow: Dataflow, input_bits: int, acc_bits: int) -> tuple[int, int]:
    """Widths ``(vertical, stationary)`` of a PE's two column-wise registers.

    WS/IS: the vertical path carries partial sums (``acc_bits``) and the stationary register
    holds an operand (``input_bits``). OS: the vertical path carries the B operand
    (``input_bits``) and the stationary register is the accumulator (``acc_bits``).
    """
    if dataflow is Dataflow.OS:
        return input_bits, acc_bits
    return acc_bits, input_bits


class PE(wiring.Component):
    """Signed ``input_bits x input_bits -> acc_bits`` multiply-accumulate cell.

    Three registers, one of each kind, whatever the dataflow:

    * ``a``: the left operand, passed right one PE per cycle (``a_out``);
    * ``v``: the vertical flow, passed down one PE per cycle (``v_out``):
      WS/IS the partial sum ``v_in + a_in * s``, OS the top operand ``v_in`` unchanged;
    * ``s``: the stationary register (``s_out``): WS/IS the stationary operand, OS the
      accumulator ``s + a_in * v_in``. When ``shift`` is high it loads ``s_in`` instead
      (the register above in the column): WS/IS use it to load the stationary operands down
      the column, OS to drain the results out of the bottom.
    * OS only, ``f``: a one-bit marker passed right with ``a`` (``f_in``/``f_out``), high
      with the first operand of a fold: the accumulator then restarts at the product
      instead of adding to its old content, so a fold never depends on what the
      accumulators held before (power-up state, or X in a four-state simulator).

    Sums wrap modulo ``2**acc_bits`` (two's complement).

    Args:
        dataflow: ``Dataflow`` (IS uses the WS cell).
        input_bits: operand width, 8 or 16.
        acc_bits: accumulator width, ``2 * input_bits .. 64``.
        fault: test-only stuck product bit ``(bit, stuck)`` of this cell, or ``None``.
    """

    def __init__(
        self,
        *,
        dataflow: Dataflow | str = Dataflow.WS,
        input_bits: int = 8,
        acc_bits: int = 32,
        fault: tuple[int, int] | None = None,
    ) -> None:
        self.dataflow = Dataflow.parse(dataflow)
        if input_bits not in INPUT_BITS:
            raise ConfigError(f"input_bits must be 8 or 16, not {input_bits!r}")
        if not isinstance(acc_bits, int) or not 2 * input_bits <= acc_bits <= 64:
            raise ConfigError(f"acc_bits must be an integer in [{2 * input_bits}, 64], not {acc_bits!r}")
        self.input_bits = input_bits
        self.acc_bits = acc_bits
        self.fault = fault
        v_bits, s_bits = pe_widths(self.dataflow, input_bits, acc_bits)
        members = {
            "a_in": In(signed(input_bits)),
            "a_out": Out(signed(input_bits)),
            "v_in": In(signed(v_bits)),
            "v_out": Out(signed(v_bits)),
            "s_in": In(signed(s_bits)),
            "s_out": Out(signed(s_bits)),
            "shift": In(1),
        }
        if self.dataflow is Dataflow.OS:
            members.update({"f_in": In(1), "f_out": Out(1)})
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        ib = self.input_bits
        a = Signal(signed(ib))
        v = Signal.like(self.v_out)
        s = Signal.like(self.s_out)
        m.d.comb += [self.a_out.eq(a), self.v_out.eq(v), self.s_out.eq(s)]
        m.d.sync += a.eq(self.a_in)

        other = self.v_in if self.dataflow is Dataflow.OS else s
        raw = Signal(signed(2 * ib))
        product = Signal(signed(2 * ib))
        m.d.comb += [raw.eq(self.a_in * other), product.eq(raw)]
        if self.fault is not None:
            bit, stuck = self.fault
            m.d.comb += product[bit].eq(stuck)

        if self.dataflow is Dataflow.OS:
            f = Signal()
            m.d.comb += self.f_out.eq(f)
            m.d.sync += [v.eq(self.v_in), f.eq(self.f_in)]
            with m.If(self.shift):
                m.d.sync += s.eq(self.s_in)
            with m.Elif(self.f_in):
                m.d.sync += s.eq(product)
            with m.Else():
                m.d.sync += s.eq(s + product)
        else:
            m.d.sync += v.eq(self.v_in + product)
            with m.If(self.shift):
                m.d.sync += s.eq(self.s_in)
        return m

"""The systolic array: rows x cols PEs with input skew and output de-skew."""

from __future__ import annotations

from collections.abc import Callable

from amaranth import ClockSignal, Instance, Module, ResetSignal, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_dse.config import ArrayConfig, Dataflow
from accel_dse.errors import ConfigError

from ._pe import PE, Fault, pe_widths
from ._skew import DelayLine, Skew

__all__ = ["SystolicArray", "PERow", "Blackbox"]


class Blackbox(wiring.Component):
    """Stand-in for a component exported as its own Verilog module.

    Has the signature of the component it replaces and elaborates to an ``Instance`` of the
    Verilog module ``module`` (ports named after the signature, plus ``clk`` and ``rst``).
    Used by the hierarchical Verilog export; not simulable by Amaranth.
    """

    def __init__(self, signature: wiring.Signature, module: str) -> None:
        self.module = module
        super().__init__(signature)

    def elaborate(self, platform: object) -> Instance:
        ports: dict[str, object] = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        for path, member, value in self.signature.flatten(self):
            prefix = "i_" if member.flow == In else "o_"
            ports[prefix + "__".join(map(str, path))] = value
        return Instance(self.module, **ports)


class PERow(wiring.Component):
    """One row of ``cols`` PEs: the left operand enters PE 0 and moves right one PE a cycle.

    Ports (packed, lane ``c`` at bits ``[c*w, (c+1)*w)``): ``a_in`` (the row's left operand),
    ``v_in``/``s_in`` (the row above's ``v_out``/``s_out``), ``shift`` (to every PE),
    ``v_out``/``s_out`` (to the row below), OS only ``f_in`` (first-operand marker, moves
    right with ``a_in``). Widths from :func:`pe_widths`.

    Args:
        cols: PEs in the row.
        dataflow, input_bits, acc_bits: as :class:`PE`.
        fault: test-only ``(col, bit, stuck)`` of one faulty PE in this row, or ``None``.
        pe_factory: builds the PE of column ``c`` (default a :class:`PE`; the export passes
            a :class:`Blackbox`).
    """

    def __init__(
        self,
        *,
        cols: int,
        dataflow: Dataflow | str,
        input_bits: int,
        acc_bits: int,
        fault: tuple[int, int, int] | None = None,
        pe_factory: Callable[[int], wiring.Component] | None = None,
    ) -> None:
        self.cols = cols
        self.dataflow = Dataflow.parse(dataflow)
        self.input_bits = input_bits
        self.acc_bits = acc_bits
        self.fault = fault
        self.pe_factory = pe_factory
        self.v_bits, self.s_bits = pe_widths(self.dataflow, input_bits, acc_bits)
        members = {
            "a_in": In(input_bits),
            "v_in": In(cols * self.v_bits),
            "s_in": In(cols * self.s_bits),
            "shift": In(1),
            "v_out": Out(cols * self.v_bits),
            "s_out": Out(cols * self.s_bits),
        }
        if self.dataflow is Dataflow.OS:
            members["f_in"] = In(1)
        super().__init__(members)

    def make_pe(self, col: int) -> wiring.Component:
        """The PE of column ``col`` (see ``pe_factory``)."""
        if self.pe_factory is not None:
            return self.pe_factory(col)
        fault = None
        if self.fault is not None and self.fault[0] == col:
            fault = self.fault[1:]
        return PE(dataflow=self.dataflow, input_bits=self.input_bits, acc_bits=self.acc_bits, fault=fault)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        vb, sb = self.v_bits, self.s_bits
        prev = None
        for c in range(self.cols):
            pe = self.make_pe(c)
            m.submodules[f"pe_{c}"] = pe
            m.d.comb += [
                pe.a_in.eq(self.a_in if prev is None else prev.a_out),
                pe.v_in.eq(self.v_in[c * vb : (c + 1) * vb]),
                pe.s_in.eq(self.s_in[c * sb : (c + 1) * sb]),
                pe.shift.eq(self.shift),
                self.v_out[c * vb : (c + 1) * vb].eq(pe.v_out),
                self.s_out[c * sb : (c + 1) * sb].eq(pe.s_out),
            ]
            if self.dataflow is Dataflow.OS:
                m.d.comb += pe.f_in.eq(self.f_in if prev is None else prev.f_out)
            prev = pe
        return m


class SystolicArray(wiring.Component):
    """``rows x cols`` PEs (see :class:`PE`), one design for every dataflow.

    Ports (lane ``i`` of a packed word at bits ``[i*w, (i+1)*w)``, two's complement):

    * ``x`` (``rows * input_bits``): the left operand word. Lane ``r`` is skewed by ``r``
      cycles and enters row ``r``; it moves one column right per cycle.
    * ``y`` (``cols * input_bits``): the top word. WS/IS: the stationary operands, shifted
      into row 0 (and every row down by one) on each cycle ``shift`` is high, so after
      ``rows`` shifts row ``r`` holds the word shifted in ``rows - 1 - r`` shifts ago.
      OS: the top operand; lane ``c`` is skewed by ``c`` cycles and enters column ``c``.
    * ``shift``: WS/IS load the stationary operands (above); OS drain: every accumulator
      takes the one above it (row 0 takes 0).
    * ``first`` (OS only; ignored otherwise): high with the first ``x``/``y`` words of a fold;
      skewed like ``x``, it makes each accumulator restart at its first product.
    * ``result`` (``cols * acc_bits``): WS/IS: the column sums ``sum_r x[r] * s[r][c]`` of the
      ``x`` word presented ``latency`` cycles earlier (de-skewed); OS: a register holding the
      bottom row's accumulators of the previous cycle (after a ``shift`` at cycle ``t`` it
      shows at ``t + 1`` the row that left the array).

    With ``skew=False`` the skew and de-skew triangles are left out: the caller presents
    lane ``r`` of ``x`` (and, OS, lane ``c`` of ``y``) already delayed by ``r`` (``c``) cycles,
    and WS/IS ``result`` lane ``c`` is the bottom partial sum of column ``c``, ``c`` cycles
    after lane 0 (``rows + c`` after the un-delayed word). The accelerator does this with
    per-lane buffer banks addressed on a tapped delay line (see ``rtl_gen._top``). ``first``
    is delayed per row inside the array in both modes.

    Inputs should be zero when no operand is presented.

    Args:
        rows: PE rows (R).
        cols: PE columns (C).
        dataflow: ``Dataflow``; IS is built exactly like WS.
        input_bits: operand width.
        acc_bits: accumulator / partial-sum width.
        fault: test-only stuck product bit of one PE (:class:`Fault`), or ``None``.
        row_factory: builds row ``r`` (default a :class:`PERow`; the export passes a
            :class:`Blackbox`).
        skew: include the data skew/de-skew triangles (default); ``False``: pre-skewed ports.
    """

    def __init__(
        self,
        *,
        rows: int,
        cols: int,
        dataflow: Dataflow | str = Dataflow.WS,
        input_bits: int = 8,
        acc_bits: int = 32,
        fault: Fault | None = None,
        row_factory: Callable[[int], wiring.Component] | None = None,
        skew: bool = True,
    ) -> None:
        for name, value in (("rows", rows), ("cols", cols)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, not {value!r}")
        self.rows = rows
        self.cols = cols
        self.dataflow = Dataflow.parse(dataflow)
        self.input_bits = input_bits
        self.acc_bits = acc_bits
        if fault is not None:
            fault.check(rows, cols, input_bits)
        self.fault = fault
        self.row_factory = row_factory
        self.skew = skew
        super().__init__(
            {
                "x": In(rows * input_bits),
                "y": In(cols * input_bits),
                "shift": In(1),
                "first": In(1),
                "result": Out(cols * acc_bits),
            }
        )

    @classmethod
    def from_config(
        cls,
        config: ArrayConfig,
        *,
        fault: Fault | None = None,
        row_factory: Callable[[int], wiring.Component] | None = None,
        skew: bool = True,
    ) -> SystolicArray:
        """The array of ``config`` (rows, cols, dataflow, widths)."""
        return cls(
            rows=config.rows,
            cols=config.cols,
            dataflow=config.dataflow,
            input_bits=config.input_bits,
            acc_bits=config.acc_bits,
            fault=fault,
            row_factory=row_factory,
            skew=skew,
        )

    @property
    def latency(self) -> int:
        """WS/IS: cycles from an ``x`` word to its ``result``, ``rows + cols - 1`` (with
        ``skew=False``: to result lane 0, ``rows``); OS: 1 (``shift`` to ``result``)."""
        if self.dataflow is Dataflow.OS:
            return 1
        return self.rows + (self.cols - 1 if self.skew else 0)

    def make_row(self, row: int) -> wiring.Component:
        """Row ``row`` of PEs (see ``row_factory``)."""
        if self.row_factory is not None:
            return self.row_factory(row)
        fault = None
        if self.fault is not None and self.fault.row == row:
            fault = (self.fault.col, self.fault.bit, self.fault.stuck)
        return PERow(cols=self.cols, dataflow=self.dataflow, input_bits=self.input_bits,
                     acc_bits=self.acc_bits, fault=fault)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        rows, cols, ib, ab = self.rows, self.cols, self.input_bits, self.acc_bits
        os_flow = self.dataflow is Dataflow.OS

        x_lanes: Value = self.x
        if self.skew:
            m.submodules.x_skew = x_skew = Skew(lanes=rows, width=ib)
            m.d.comb += x_skew.i_data.eq(self.x)
            x_lanes = x_skew.o_data

        row_list = []
        for r in range(rows):
            row = self.make_row(r)
            m.submodules[f"row_{r}"] = row
            m.d.comb += [row.a_in.eq(x_lanes[r * ib : (r + 1) * ib]), row.shift.eq(self.shift)]
            if r > 0:
                above = row_list[-1]
                m.d.comb += [row.v_in.eq(above.v_out), row.s_in.eq(above.s_out)]
            row_list.append(row)
        top, bottom = row_list[0], row_list[-1]

        if os_flow:
            # The first-operand marker enters every row with its x lane (row r: r cycles late).
            m.submodules.f_delay = f_delay = DelayLine(taps=rows, width=1)
            m.d.comb += f_delay.i_data.eq(self.first)
            for r, row in enumerate(row_list):
                m.d.comb += row.f_in.eq(f_delay.o_taps[r])
            # B enters the top (skewed); accumulators drain out of the bottom into a register.
            y_lanes: Value = self.y
            if self.skew:
                m.submodules.y_skew = y_skew = Skew(lanes=cols, width=ib)
                m.d.comb += y_skew.i_data.eq(self.y)
                y_lanes = y_skew.o_data
            out = Signal(cols * ab)
            m.d.comb += [top.v_in.eq(y_lanes), top.s_in.eq(0)]
            m.d.sync += out.eq(bottom.s_out)
            m.d.comb += self.result.eq(out)
        else:
            # Stationary operands load into the top; partial sums leave the bottom (de-skewed).
            m.d.comb += [top.v_in.eq(0), top.s_in.eq(self.y)]
            if self.skew:
                m.submodules.deskew = deskew = Skew(lanes=cols, width=ab, reverse=True)
                m.d.comb += [deskew.i_data.eq(bottom.v_out), self.result.eq(deskew.o_data)]
            else:
                m.d.comb += self.result.eq(bottom.v_out)
        return m

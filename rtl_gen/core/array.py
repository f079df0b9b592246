"""The systolic array: rows x cols PEs with input skew and output de-skew."""

from __future__ import annotations

from collections.abc import Callable

from amaranth import Cat, ClockSignal, Instance, Module, ResetSignal, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import ConfigError
from rtl_gen.core.pe import PE, Fault, pe_cell_format, pe_widths
from rtl_gen.core.skew import DelayLine, Skew

__all__ = ["SystolicArray", "PEBlock", "PERow", "Blackbox"]


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
    ``v_in``/``s_in`` (the row above's ``v_out``/``s_out``), ``shift`` (bit ``c`` to PE ``c``),
    ``v_out``/``s_out`` (to the row below), OS or shadow ``f_in`` (first-operand marker, moves
    right with ``a_in``), shadow ``d_in``/``d_out`` (the delayed column strobes, bit ``c`` for
    column ``c``). Widths from :func:`pe_widths`. With ``edge``: ``a_edge`` (and OS or shadow
    ``f_edge``), the last PE's ``a_out`` (``f_out``), for a checksum column at the right edge.

    Args:
        cols: PEs in the row.
        dataflow, input_bits, acc_bits, shadow, number_format: as :class:`PE`.
        fault: test-only ``(col, bit, stuck)`` of one faulty PE in this row, or ``None``.
        pe_factory: builds the PE of column ``c`` (default a :class:`PE`; the export passes
            a :class:`Blackbox`).
        edge: expose the last PE's outputs (above).
    """

    def __init__(
        self,
        *,
        cols: int,
        dataflow: Dataflow | str,
        input_bits: int,
        acc_bits: int,
        shadow: bool = False,
        fault: tuple[int, int, int] | None = None,
        pe_factory: Callable[[int], wiring.Component] | None = None,
        edge: bool = False,
        number_format: str = "int",
    ) -> None:
        self.cols = cols
        self.number_format = number_format
        self.dataflow = Dataflow.parse(dataflow)
        self.input_bits = input_bits
        self.acc_bits = acc_bits
        self.shadow = shadow
        self.fault = fault
        self.pe_factory = pe_factory
        self.v_bits, self.s_bits = pe_widths(self.dataflow, input_bits, acc_bits)
        self.pes: list[wiring.Component] = []
        super().__init__(_group_members(1, cols, self.dataflow, input_bits, acc_bits, shadow, edge))

    def make_pe(self, col: int) -> wiring.Component:
        """The PE of column ``col`` (see ``pe_factory``)."""
        if self.pe_factory is not None:
            return self.pe_factory(col)
        fault = None
        if self.fault is not None and self.fault[0] == col:
            fault = self.fault[1:]
        return PE(dataflow=self.dataflow, input_bits=self.input_bits, acc_bits=self.acc_bits,
                  shadow=self.shadow, fault=fault, number_format=self.number_format)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        vb, sb = self.v_bits, self.s_bits
        prev = None
        self.pes = []
        for c in range(self.cols):
            pe = self.make_pe(c)
            self.pes.append(pe)
            m.submodules[f"pe_{c}"] = pe
            m.d.comb += [
                pe.a_in.eq(self.a_in if prev is None else prev.a_out),
                pe.v_in.eq(self.v_in[c * vb : (c + 1) * vb]),
                pe.s_in.eq(self.s_in[c * sb : (c + 1) * sb]),
                pe.shift.eq(self.shift[c]),
                self.v_out[c * vb : (c + 1) * vb].eq(pe.v_out),
                self.s_out[c * sb : (c + 1) * sb].eq(pe.s_out),
            ]
            if "f_in" in self.signature.members:
                m.d.comb += pe.f_in.eq(self.f_in if prev is None else prev.f_out)
            if self.shadow:
                m.d.comb += [pe.ph.eq(self.ph[c]), pe.d_in.eq(self.d_in[c]), self.d_out[c].eq(pe.d_out)]
            prev = pe
        if "a_edge" in self.signature.members and prev is not None:
            m.d.comb += self.a_edge.eq(prev.a_out)
            if "f_edge" in self.signature.members:
                m.d.comb += self.f_edge.eq(prev.f_out)
        return m


class PEBlock(wiring.Component):
    """``rows`` consecutive array rows: the level between the array and its rows in the
    Verilog export of tall arrays (so no module wires hundreds of rows together).

    Ports as :class:`PERow` with ``rows`` lanes: ``a_in`` (``rows * input_bits``, lane ``r``
    for row ``r``), OS ``f_in`` (``rows`` bits, bit ``r`` for row ``r``); ``v_in``/``s_in``
    enter the first row, ``v_out``/``s_out`` leave the last. A :class:`PERow` is the
    one-row case (same ports).

    Args:
        rows: rows in the block.
        cols, dataflow, input_bits, acc_bits: as :class:`PERow`.
        fault: test-only ``(row, col, bit, stuck)`` inside the block, or ``None``.
        row_factory: builds row ``r`` of the block (default a :class:`PERow`).
        edge: expose the last column's ``a_edge``/``f_edge`` (lane ``r`` for row ``r``).
    """

    def __init__(
        self,
        *,
        rows: int,
        cols: int,
        dataflow: Dataflow | str,
        input_bits: int,
        acc_bits: int,
        shadow: bool = False,
        fault: tuple[int, int, int, int] | None = None,
        row_factory: Callable[[int], wiring.Component] | None = None,
        edge: bool = False,
        number_format: str = "int",
    ) -> None:
        self.rows = rows
        self.number_format = number_format
        self.cols = cols
        self.dataflow = Dataflow.parse(dataflow)
        self.input_bits = input_bits
        self.acc_bits = acc_bits
        self.shadow = shadow
        self.fault = fault
        self.row_factory = row_factory
        self.edge = edge
        self.built: list[wiring.Component] = []
        super().__init__(_group_members(rows, cols, self.dataflow, input_bits, acc_bits, shadow, edge))

    def make_row(self, row: int) -> wiring.Component:
        """Row ``row`` of the block (see ``row_factory``)."""
        if self.row_factory is not None:
            return self.row_factory(row)
        fault = self.fault[1:] if self.fault is not None and self.fault[0] == row else None
        return PERow(cols=self.cols, dataflow=self.dataflow, input_bits=self.input_bits,
                     acc_bits=self.acc_bits, shadow=self.shadow, fault=fault, edge=self.edge,
                     number_format=self.number_format)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        self.built = [self.make_row(r) for r in range(self.rows)]
        v_out, s_out, d_out = _chain_rows(
            m,
            self.built,
            a_lanes=self.a_in,
            f_bits=self.f_in if "f_in" in self.signature.members else None,
            v_top=self.v_in,
            s_top=self.s_in,
            d_top=self.d_in if self.shadow else None,
            shift=self.shift,
            lane_bits=self.input_bits,
            phase=self.ph if self.shadow else None,
        )
        m.d.comb += [self.v_out.eq(v_out), self.s_out.eq(s_out)]
        if self.shadow:
            m.d.comb += self.d_out.eq(d_out)
        _edge_outputs(m, self, self.built)
        return m


def _edge_outputs(m: Module, group: wiring.Component, parts: list[wiring.Component]) -> None:
    """Drive ``group``'s ``a_edge``/``f_edge`` (if it has them) from its ``parts``' in row order."""
    if "a_edge" not in group.signature.members:
        return
    m.d.comb += group.a_edge.eq(Cat(*(p.a_edge for p in parts)))
    if "f_edge" in group.signature.members:
        m.d.comb += group.f_edge.eq(Cat(*(p.f_edge for p in parts)))


def _group_members(rows: int, cols: int, dataflow: Dataflow, input_bits: int, acc_bits: int,
                   shadow: bool, edge: bool = False) -> dict[str, object]:
    """Ports of a group of ``rows`` array rows (a :class:`PERow` is ``rows = 1``)."""
    v_bits, s_bits = pe_widths(dataflow, input_bits, acc_bits)
    members: dict[str, object] = {
        "a_in": In(rows * input_bits),
        "v_in": In(cols * v_bits),
        "s_in": In(cols * s_bits),
        "shift": In(cols),
        "v_out": Out(cols * v_bits),
        "s_out": Out(cols * s_bits),
    }
    if dataflow is Dataflow.OS or shadow:
        members["f_in"] = In(rows)
    if shadow:
        members.update({"ph": In(cols), "d_in": In(cols), "d_out": Out(cols)})
    if edge:
        members["a_edge"] = Out(rows * input_bits)
        if dataflow is Dataflow.OS or shadow:
            members["f_edge"] = Out(rows)
    return members


def _chain_rows(
    m: Module,
    groups: list[wiring.Component],
    *,
    a_lanes: Value,
    f_bits: Value | None,
    v_top: Value,
    s_top: Value,
    d_top: Value | None,
    shift: Value,
    lane_bits: int,
    phase: Value | None = None,
) -> tuple[Value, Value, Value | None]:
    """Connect row groups (:class:`PERow` / :class:`PEBlock` or stand-ins) top to bottom.

    Group ``g`` takes as many ``a_lanes`` lanes (``lane_bits`` each) and ``f_bits`` bits as
    its ``a_in`` holds rows; the first group's ``v_in``/``s_in`` (and with shadows ``d_in``)
    are ``v_top``/``s_top``/``d_top``. Returns the last group's ``(v_out, s_out, d_out)``.
    """
    lane = 0
    v_above, s_above, d_above = v_top, s_top, d_top
    for g, group in enumerate(groups):
        count = len(group.a_in) // lane_bits
        m.submodules[f"row_{g}" if count == 1 else f"block_{g}"] = group
        m.d.comb += [
            group.a_in.eq(a_lanes[lane * lane_bits : (lane + count) * lane_bits]),
            group.shift.eq(shift),
            group.v_in.eq(v_above),
            group.s_in.eq(s_above),
        ]
        if f_bits is not None:
            m.d.comb += group.f_in.eq(f_bits[lane : lane + count])
        if d_above is not None:
            m.d.comb += [group.d_in.eq(d_above), group.ph.eq(phase)]
            d_above = group.d_out
        v_above, s_above = group.v_out, group.s_out
        lane += count
    return v_above, s_above, d_above


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
    * ``first`` (OS, and shadow; ignored otherwise): high with the first ``x``/``y`` words of a
      fold; skewed like ``x``: OS accumulators restart at their first product (shadow: and hand
      the finished sum to the shadow register), shadow WS/IS PEs swap in the shadow weights.
    * ``result`` (``cols * acc_bits``): WS/IS: the column sums ``sum_r x[r] * s[r][c]`` of the
      ``x`` word presented ``latency`` cycles earlier (de-skewed); OS: a register holding the
      bottom row's accumulators of the previous cycle (after a ``shift`` at cycle ``t`` it
      shows at ``t + 1`` the row that left the array).

    With ``skew=False`` the skew and de-skew triangles are left out: the caller presents
    lane ``r`` of ``x`` (and, OS, lane ``c`` of ``y``) already delayed by ``r`` (``c``) cycles,
    and WS/IS ``result`` lane ``c`` is the bottom partial sum of column ``c``, ``c`` cycles
    after lane 0 (``rows + c`` after the un-delayed word). The accelerator does this with
    per-lane buffer banks addressed on a tapped delay line (see ``rtl_gen.core.accelerator``). ``first``
    is delayed per row inside the array in both modes. With ``skew=False`` ``shift`` has one
    bit per column, each already delayed by its column index like the caller's ``y`` lanes
    (WS/IS) or result lanes (OS); with ``skew=True`` it is one bit for every column. With
    shadows, ``phase`` (one bit per column, delayed like ``shift``) toggles at the first step
    of every load (WS/IS) or drain (OS): the PEs tell their row's window from it.

    ``shadow=True`` builds :class:`PE` s with a shadow register (see there): consecutive folds
    overlap. It needs the pre-skewed ports (``skew=False``): the accelerator's per-lane banks
    are what keep every column on column 0's schedule, ``c`` cycles late.

    Inputs should be zero when no operand is presented.

    Args:
        rows: PE rows (R).
        cols: PE columns (C).
        dataflow: ``Dataflow``; IS is built exactly like WS.
        input_bits: operand width.
        acc_bits: accumulator / partial-sum width.
        fault: test-only stuck product bit of one PE (:class:`Fault`), or ``None``.
        group_rows: rows per group of rows (must divide ``rows``; default 1: one
            :class:`PERow` per row, else :class:`PEBlock` s).
        group_factory: builds group ``g`` (default as above; the export passes
            :class:`Blackbox` es).
        skew: include the data skew/de-skew triangles (default); ``False``: pre-skewed ports.
        shadow: PEs with a shadow stationary register (needs ``skew=False``).
        edge: also output the last column's left operands ``a_edge`` (``rows * input_bits``,
            lane ``r`` from row ``r``, each one cycle after column ``cols - 1`` used it) and OS or
            shadow markers ``f_edge`` (``rows`` bits): what a column ``cols`` would receive.
        number_format: the PEs' operand encoding (:data:`~rtl_gen.core.pe.PE_FORMATS`).
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
        group_rows: int = 1,
        group_factory: Callable[[int], wiring.Component] | None = None,
        skew: bool = True,
        shadow: bool = False,
        edge: bool = False,
        number_format: str = "int",
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
            fault.check(rows, cols, input_bits, number_format)
        self.fault = fault
        if not isinstance(group_rows, int) or group_rows < 1 or rows % group_rows:
            raise ConfigError(f"group_rows must be a positive divisor of rows = {rows}, not {group_rows!r}")
        self.group_rows = group_rows
        self.group_factory = group_factory
        self.skew = skew
        if shadow and skew:
            raise ConfigError("a shadow-register array needs pre-skewed ports (skew=False)")
        self.shadow = shadow
        self.number_format = number_format
        members = {
            "x": In(rows * input_bits),
            "y": In(cols * input_bits),
            "shift": In(1 if skew else cols),
            "first": In(1),
            "result": Out(cols * acc_bits),
        }
        if shadow:
            members["phase"] = In(cols)
        self.edge = edge
        if edge:
            members["a_edge"] = Out(rows * input_bits)
            if self.dataflow is Dataflow.OS or shadow:
                members["f_edge"] = Out(rows)
        self.groups: list[wiring.Component] = []
        super().__init__(members)

    @classmethod
    def from_config(
        cls,
        config: ArrayConfig,
        *,
        fault: Fault | None = None,
        group_rows: int = 1,
        group_factory: Callable[[int], wiring.Component] | None = None,
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
            group_rows=group_rows,
            group_factory=group_factory,
            skew=skew,
            shadow=config.shadow_stationary and not skew,
            edge=config.checksum != "none",
            number_format=pe_cell_format(config),
        )

    @property
    def latency(self) -> int:
        """WS/IS: cycles from an ``x`` word to its ``result``, ``rows + cols - 1`` (with
        ``skew=False``: to result lane 0, ``rows``); OS: 1 (``shift`` to ``result``)."""
        if self.dataflow is Dataflow.OS:
            return 1
        return self.rows + (self.cols - 1 if self.skew else 0)

    def make_group(self, group: int) -> wiring.Component:
        """Group ``group`` of ``group_rows`` rows (see ``group_factory``)."""
        if self.group_factory is not None:
            return self.group_factory(group)
        b = self.group_rows
        fault = None
        if self.fault is not None and self.fault.row // b == group:
            fault = (self.fault.row % b, self.fault.col, self.fault.bit, self.fault.stuck)
        cols, df, ib, ab = self.cols, self.dataflow, self.input_bits, self.acc_bits
        sh = self.shadow
        if b == 1:
            return PERow(cols=cols, dataflow=df, input_bits=ib, acc_bits=ab, shadow=sh,
                         fault=fault[1:] if fault else None, edge=self.edge, number_format=self.number_format)
        return PEBlock(rows=b, cols=cols, dataflow=df, input_bits=ib, acc_bits=ab, shadow=sh, fault=fault,
                       edge=self.edge, number_format=self.number_format)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        rows, cols, ib, ab = self.rows, self.cols, self.input_bits, self.acc_bits
        os_flow = self.dataflow is Dataflow.OS

        x_lanes: Value = self.x
        if self.skew:
            m.submodules.x_skew = x_skew = Skew(lanes=rows, width=ib)
            m.d.comb += x_skew.i_data.eq(self.x)
            x_lanes = x_skew.o_data

        f_bits = None
        if os_flow or self.shadow:
            # The first-operand marker enters every row with its x lane (row r: r cycles late).
            m.submodules.f_delay = f_delay = DelayLine(taps=rows, width=1)
            m.d.comb += f_delay.i_data.eq(self.first)
            f_bits = f_delay.o_taps
        v_bits, s_bits = pe_widths(self.dataflow, ib, ab)
        v_top, s_top = Signal(cols * v_bits), Signal(cols * s_bits)
        shift: Value = self.shift if not self.skew else self.shift.replicate(cols)
        self.groups = [self.make_group(g) for g in range(rows // self.group_rows)]
        _edge_outputs(m, self, self.groups)
        bottom_v, bottom_s, _ = _chain_rows(
            m,
            self.groups,
            a_lanes=x_lanes,
            f_bits=f_bits,
            v_top=v_top,
            s_top=s_top,
            d_top=self.phase if self.shadow else None,
            shift=shift,
            lane_bits=ib,
            phase=self.phase if self.shadow else None,
        )

        if os_flow:
            # B enters the top (skewed); accumulators drain out of the bottom into a register.
            y_lanes: Value = self.y
            if self.skew:
                m.submodules.y_skew = y_skew = Skew(lanes=cols, width=ib)
                m.d.comb += y_skew.i_data.eq(self.y)
                y_lanes = y_skew.o_data
            out = Signal(cols * ab)
            m.d.comb += [v_top.eq(y_lanes), s_top.eq(0)]
            m.d.sync += out.eq(bottom_s)
            m.d.comb += self.result.eq(out)
        else:
            # Stationary operands load into the top; partial sums leave the bottom (de-skewed).
            m.d.comb += [v_top.eq(0), s_top.eq(self.y)]
            if self.skew:
                m.submodules.deskew = deskew = Skew(lanes=cols, width=ab, reverse=True)
                m.d.comb += [deskew.i_data.eq(bottom_v), self.result.eq(deskew.o_data)]
            else:
                m.d.comb += self.result.eq(bottom_v)
        return m

"""The systolic array: rows x cols PEs with input skew and output de-skew."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_dse.config import ArrayConfig, Dataflow
from accel_dse.errors import ConfigError

from ._pe import PE, Fault
from ._skew import Skew

__all__ = ["SystolicArray"]


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
      takes the one above it (row 0 takes 0) and the bottom row is captured into ``result``.
    * ``result`` (``cols * acc_bits``): WS/IS: the column sums ``sum_r x[r] * s[r][c]`` of the
      ``x`` word presented ``latency`` cycles earlier (de-skewed); OS: the bottom row's
      accumulators as they were before the last ``shift`` (valid the cycle after it).

    Inputs should be zero when no operand is presented (the OS accumulators add every cycle).

    Args:
        rows: PE rows (R).
        cols: PE columns (C).
        dataflow: ``Dataflow``; IS is built exactly like WS.
        input_bits: operand width.
        acc_bits: accumulator / partial-sum width.
        fault: test-only stuck product bit of one PE (:class:`Fault`), or ``None``.
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
        super().__init__(
            {
                "x": In(rows * input_bits),
                "y": In(cols * input_bits),
                "shift": In(1),
                "result": Out(cols * acc_bits),
            }
        )

    @classmethod
    def from_config(cls, config: ArrayConfig, *, fault: Fault | None = None) -> SystolicArray:
        """The array of ``config`` (rows, cols, dataflow, widths)."""
        return cls(
            rows=config.rows,
            cols=config.cols,
            dataflow=config.dataflow,
            input_bits=config.input_bits,
            acc_bits=config.acc_bits,
            fault=fault,
        )

    @property
    def latency(self) -> int:
        """WS/IS: cycles from an ``x`` word to its ``result`` (``rows + cols - 1``); OS: 1."""
        if self.dataflow is Dataflow.OS:
            return 1
        return self.rows + self.cols - 1

    def elaborate(self, platform: object) -> Module:
        m = Module()
        rows, cols, ib, ab = self.rows, self.cols, self.input_bits, self.acc_bits
        os_flow = self.dataflow is Dataflow.OS

        m.submodules.x_skew = x_skew = Skew(lanes=rows, width=ib)
        m.d.comb += x_skew.i_data.eq(self.x)

        pes = [[PE(dataflow=self.dataflow, input_bits=ib, acc_bits=ab,
                   fault=self._pe_fault(r, c)) for c in range(cols)] for r in range(rows)]
        for r in range(rows):
            for c in range(cols):
                pe = pes[r][c]
                m.submodules[f"pe_{r}_{c}"] = pe
                m.d.comb += pe.shift.eq(self.shift)
                if c == 0:
                    m.d.comb += pe.a_in.eq(x_skew.o_data[r * ib : (r + 1) * ib])
                else:
                    m.d.comb += pe.a_in.eq(pes[r][c - 1].a_out)
                if r > 0:
                    m.d.comb += [pe.v_in.eq(pes[r - 1][c].v_out), pe.s_in.eq(pes[r - 1][c].s_out)]

        top, bottom = pes[0], pes[rows - 1]
        if os_flow:
            m.submodules.y_skew = y_skew = Skew(lanes=cols, width=ib)
            m.d.comb += y_skew.i_data.eq(self.y)
            out = Signal(cols * ab)
            for c in range(cols):
                m.d.comb += [top[c].v_in.eq(y_skew.o_data[c * ib : (c + 1) * ib]), top[c].s_in.eq(0)]
                with m.If(self.shift):
                    m.d.sync += out[c * ab : (c + 1) * ab].eq(bottom[c].s_out)
            m.d.comb += self.result.eq(out)
        else:
            m.submodules.deskew = deskew = Skew(lanes=cols, width=ab, reverse=True)
            for c in range(cols):
                m.d.comb += [
                    top[c].v_in.eq(0),
                    top[c].s_in.eq(self.y[c * ib : (c + 1) * ib]),
                    deskew.i_data[c * ab : (c + 1) * ab].eq(bottom[c].v_out),
                ]
            m.d.comb += self.result.eq(deskew.o_data)
        return m

    def _pe_fault(self, r: int, c: int) -> tuple[int, int] | None:
        f = self.fault
        if f is not None and (f.row, f.col) == (r, c):
            return (f.bit, f.stuck)
        return None

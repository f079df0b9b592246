"""ABFT checksum of matrix runs (``ArrayConfig.checksum = "detect"``): a checksum column at the
array's right edge and a lane-sum chain on the output path, exact modulo ``2**acc_bits``.

WS and IS (IS is WS on the transposed problem). A fold holds the stationary tile ``W`` (``R x
C``) in the PEs and streams words ``x[s]`` (``R`` lanes); output word ``s`` is
``out[s][c] = sum_r x[s][r] * W[r][c]`` (modulo ``2**acc_bits``). Summing its lanes::

    sum_c out[s][c] = sum_r x[s][r] * ws[r],     ws[r] = sum_c W[r][c]

exactly, in the ring of integers modulo ``2**acc_bits``: no threshold, no false alarm.

The hardware, all at the array's edges (Huang and Abraham's checksum column):

* **Row sums of the stationary tile.** Each stationary word ``W[r]`` enters the array lane by
  lane (lane ``c`` ``c`` cycles late); a chain of ``C`` registers adds the lanes as they pass
  (``q_c <- q_{c-1} + y_c``), so ``ws[r]`` leaves the chain ``C`` cycles after lane 0: the
  timing of a column ``C``. ``weight_bits = min(acc_bits, input_bits + ceil(log2 C))`` bits.
* **The checksum column.** ``R`` PEs (:class:`~rtl_gen.core.pe.PE`, ``weight_bits`` wide
  stationary registers, shadows as the array's) load ``ws`` down their column with column
  ``C``'s strobes (column ``C - 1``'s, one cycle later) and take their left operand and
  first-word marker from the last column's outputs (``SystolicArray.a_edge``/``f_edge``), so
  the column computes ``sum_r x[s][r] * ws[r]`` one cycle after output lane ``C - 1`` of
  word ``s``, with the same fold swaps as the array.
* **The output sum.** A chain of ``C`` registers adds the output word's lanes as they leave
  the array (``p_c <- p_{c-1} + result_c``; lane ``c`` is ``c`` cycles late), so the full sum is
  ready in the same cycle as the column's. A comparator flags a word whose two sums differ.

Every cycle of a run and the one after it is compared (``active``; a stuck bit would also show
in idle cycles, where no output is written): cycles between words see zero operands (both sums
0), edge folds pad with zero weights (rows) or carry don't-care lanes through both sums alike
(columns). A mismatch sets the
sticky ``mismatch`` and counts in ``count`` (words since ``clear``, saturating). A run's last
word is compared :data:`CHECK_LATENCY` cycles after the run's ``done`` edge, so ``mismatch`` is
final that many cycles after ``done``; the run itself takes no extra cycle.

What it sees: a fault in a PE's partial-sum register (the output is off by the flipped amount),
in its stationary register (off by the amount times the operand) or in its left-operand
register: PE ``(r, c)``'s register feeds columns ``c + 1 .. C - 1`` and the checksum column, so
the two sums differ by the amount times ``W[r][0] + .. + W[r][c]`` (a fault in the last
column's register corrupts nothing and is still flagged); a fault in the checksum logic itself
(flagged, output correct). It misses a corrupting fault only when that difference is 0 modulo
``2**acc_bits`` (weights whose partial row sum is 0, e.g. all zero). What it cannot see
(escapes): the operands before they enter the array (buffer words, the DMA datapath: the
check is computed from what the array reads), the ofmap words after the write (the
read-modify-write of a later K-fold adds them unchecked) and the requantising output stage.
"""

from __future__ import annotations

from amaranth import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_spec.config import CHECKSUM_DATAFLOWS, Dataflow, checksum_weight_bits
from accel_spec.errors import ConfigError
from accel_spec.isa import CHECK_LATENCY
from rtl_gen.core.pe import PE

__all__ = ["ChecksumUnit", "CHECK_LATENCY", "COUNT_BITS", "checksum_weight_bits", "check_dataflow"]

#: Width of the mismatch counter (saturating).
COUNT_BITS = 16


def check_dataflow(dataflow: Dataflow | str) -> None:
    """Raise ``ConfigError`` unless the checksum is built for ``dataflow`` (WS and IS)."""
    flow = Dataflow.parse(dataflow)
    if flow.value not in CHECKSUM_DATAFLOWS:
        raise ConfigError(f"checksum 'detect' is built for dataflows {', '.join(CHECKSUM_DATAFLOWS)}, not "
                          f"{flow.value} (an OS array drains its sums down the columns; its check is not built)")


class ChecksumUnit(wiring.Component):
    """The checksum column, the two lane-sum chains and the comparator (module docstring).

    Ports: ``y`` (``C * input_bits``, the stationary words as the array's top row sees them),
    ``shift`` and (shadow) ``phase``: column ``C - 1``'s strobes; ``a_edge``/``f_edge``: the
    array's edge outputs; ``result`` (``C * acc_bits``); ``clear`` (a run starts);
    ``active`` (compare in this cycle: a run, and the cycle after it); ``mismatch`` (sticky since
    ``clear``), ``count`` (mismatching words since ``clear``), ``event`` (a mismatch this cycle).

    Args:
        rows, cols: the array's size.
        dataflow: WS or IS.
        input_bits, acc_bits: the array's widths.
        shadow: the array's PEs have shadow registers.

    Raises:
        ConfigError: an OS dataflow.
    """

    def __init__(self, *, rows: int, cols: int, dataflow: Dataflow | str, input_bits: int, acc_bits: int,
                 shadow: bool) -> None:
        check_dataflow(dataflow)
        self.rows = rows
        self.cols = cols
        self.dataflow = Dataflow.parse(dataflow)
        self.input_bits = input_bits
        self.acc_bits = acc_bits
        self.shadow = shadow
        self.weight_bits = checksum_weight_bits(cols, input_bits, acc_bits)
        self.cells: list[PE] = []
        self.chains: dict[str, list[Signal]] = {}
        members: dict[str, object] = {
            "y": In(cols * input_bits),
            "shift": In(1),
            "a_edge": In(rows * input_bits),
            "result": In(cols * acc_bits),
            "clear": In(1),
            "active": In(1),
            "mismatch": Out(1),
            "count": Out(COUNT_BITS),
            "event": Out(1),
        }
        if shadow:
            members.update({"phase": In(1), "f_edge": In(rows)})
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        rows, cols, ib, ab, wb = self.rows, self.cols, self.input_bits, self.acc_bits, self.weight_bits

        # Row sums of the stationary words, lane by lane: ws leaves at column C's time.
        q = [Signal(signed(wb), name=f"ws_sum_{c}") for c in range(cols)]
        for c in range(cols):
            lane = self.y[c * ib:(c + 1) * ib].as_signed()
            m.d.sync += q[c].eq(lane if c == 0 else q[c - 1] + lane)
        # Column C's strobes: column C - 1's, one cycle later.
        shift = Signal(name="ck_shift")
        m.d.sync += shift.eq(self.shift)
        phase = Signal(name="ck_phase")
        if self.shadow:
            m.d.sync += phase.eq(self.phase)

        # The checksum column: R PEs with wide stationary registers.
        self.cells = []
        v_above = Signal(ab)
        s_above = q[-1]
        d_above = phase
        for r in range(rows):
            cell = PE(dataflow=Dataflow.WS, input_bits=ib, acc_bits=ab, shadow=self.shadow, weight_bits=wb)
            m.submodules[f"ck_cell_{r}"] = cell
            self.cells.append(cell)
            m.d.comb += [cell.a_in.eq(self.a_edge[r * ib:(r + 1) * ib]), cell.v_in.eq(v_above),
                         cell.s_in.eq(s_above), cell.shift.eq(shift)]
            if self.shadow:
                m.d.comb += [cell.f_in.eq(self.f_edge[r]), cell.ph.eq(phase), cell.d_in.eq(d_above)]
                d_above = cell.d_out
            v_above, s_above = cell.v_out, cell.s_out

        # The output word's lane sum, lane by lane: ready in the same cycle as the column's.
        p = [Signal(ab, name=f"out_sum_{c}") for c in range(cols)]
        for c in range(cols):
            lane = self.result[c * ab:(c + 1) * ab]
            m.d.sync += p[c].eq(lane if c == 0 else p[c - 1] + lane)
        self.chains = {"ws_sum": q, "out_sum": p}

        mismatch = Signal()
        count = Signal(COUNT_BITS)
        bad = Signal()
        m.d.comb += bad.eq(self.active & (p[-1] != v_above[:ab]))  # both as unsigned acc_bits words
        m.d.comb += [self.mismatch.eq(mismatch), self.count.eq(count), self.event.eq(bad)]
        with m.If(self.clear):
            m.d.sync += [mismatch.eq(0), count.eq(0)]
        with m.Elif(bad):
            m.d.sync += [mismatch.eq(1), count.eq(count + (count != (1 << COUNT_BITS) - 1))]
        return m

    def register_bits(self) -> int:
        """Flip-flop bits outside the checksum column's PEs: the two chains, strobes, flag, counter."""
        return self.cols * (self.weight_bits + self.acc_bits) + 1 + int(self.shadow) + 1 + COUNT_BITS


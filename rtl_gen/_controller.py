"""The controller: one FSM that runs a whole tiled GEMM out of the buffers after ``start``."""

from __future__ import annotations

from typing import TypeVar

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_dse.config import Dataflow

from ._layout import CYCLES_BITS, DIM_BITS

__all__ = ["Controller", "mapped_dims"]

T = TypeVar("T")


def mapped_dims(dataflow: Dataflow, m: T, k: T, n: T) -> tuple[T, T, T]:
    """``(Ds, Dr, Dc)``: the streamed, array-rows and array-columns dimensions of a GEMM.

    WS: ``(M, K, N)``; OS: ``(K, M, N)``; IS: ``(N, K, M)`` (WS on the transposed problem).
    """
    if dataflow is Dataflow.OS:
        return k, m, n
    if dataflow is Dataflow.IS:
        return n, k, m
    return m, k, n


class Controller(wiring.Component):
    """Fold sequencer and address generator of the accelerator.

    Names: ``x`` is the buffer feeding the array's left edge (``rows`` lanes: ifmap for WS and
    OS, weight for IS), ``y`` the one feeding its top edge (``cols`` lanes), ``o`` the ofmap.
    With ``(Ds, Dr, Dc)`` from :func:`mapped_dims`, the run is folded over row-folds
    ``rf < ceil(Dr/R)`` (inner loop) and column-folds ``cf < ceil(Dc/C)`` (outer loop). Word
    addresses (``r`` a row of the fold, ``s < Ds`` a streamed index)::

        x: rf*Ds + s                      (all dataflows)
        y: cf*Dr + rf*R + r  (WS/IS)      cf*Ds + s  (OS)
        o: cf*Ds + s         (WS/IS)      cf*Dr + rf*R + r  (OS)

    Rows ``rf*R + r >= Dr`` of an edge fold are never read (WS/IS: zeros are loaded instead)
    and never written (OS). Each fold takes ``Ds + 2R + C`` cycles:

    * WS/IS: LOAD (``R``): y words for ``r = R-1 .. 0`` are read and shifted into the array
      the next cycle; STREAM (``Ds``): x words are read; FLUSH (``R + C``): the last results
      come out. The o word for ``s`` is read ``R`` cycles after x word ``s`` and written
      (result, plus the old value when adding) the cycle after.
    * OS: STREAM (``Ds``): x and y words are read (``first`` marks the data of ``s = 0``);
      FLUSH (``2R + C``): after ``R + C - 1`` cycles the wavefront has finished, then ``R``
      drain shifts move rows ``R-1 .. 0`` out; each row's o word is read during its shift and
      written the cycle after.

    These strobes and addresses are those of lane 0; the accelerator's per-lane buffer banks
    delay them by the lane index where the dataflow skews that operand (x always, y for OS,
    o for WS/IS), so e.g. lane ``c`` of the o word for ``s`` is written ``c`` cycles later and
    the last write of a fold falls in its last cycle.

    A run is one SETUP cycle then every fold, so ``start`` to ``done`` is
    ``1 + folds * (Ds + 2R + C)`` cycles (``perf_model.timing.run_cycles``); a run with a zero
    dimension is the SETUP cycle alone. Results are added to the old o word (``o_add``) when
    ``accumulate`` was set at ``start`` or, for WS/IS, in every row-fold after the first.
    """

    def __init__(
        self,
        *,
        rows: int,
        cols: int,
        dataflow: Dataflow | str,
        x_addr_bits: int,
        y_addr_bits: int,
        o_addr_bits: int,
    ) -> None:
        self.rows = rows
        self.cols = cols
        self.dataflow = Dataflow.parse(dataflow)
        self.x_addr_bits = max(1, x_addr_bits)
        self.y_addr_bits = max(1, y_addr_bits)
        self.o_addr_bits = max(1, o_addr_bits)
        super().__init__(
            {
                "start": In(1),
                "m": In(DIM_BITS),
                "k": In(DIM_BITS),
                "n": In(DIM_BITS),
                "accumulate": In(1),
                "busy": Out(1),
                "done": Out(1),
                "cycles": Out(CYCLES_BITS),
                "x_en": Out(1),
                "x_addr": Out(self.x_addr_bits),
                "x_valid": Out(1),
                "y_en": Out(1),
                "y_addr": Out(self.y_addr_bits),
                "y_valid": Out(1),
                "shift": Out(1),
                "first": Out(1),
                "o_rd_en": Out(1),
                "o_rd_addr": Out(self.o_addr_bits),
                "o_wr_en": Out(1),
                "o_wr_addr": Out(self.o_addr_bits),
                "o_add": Out(1),
            }
        )

    @property
    def flush_cycles(self) -> int:
        """Length of the FLUSH phase: ``R + C`` (WS/IS) or ``2R + C`` (OS)."""
        extra = self.rows if self.dataflow is Dataflow.OS else 0
        return self.rows + self.cols + extra

    def elaborate(self, platform: object) -> Module:  # noqa: C901 - one FSM, read top to bottom
        m = Module()
        rows, cols = self.rows, self.cols
        os_flow = self.dataflow is Dataflow.OS
        reduce_rows = not os_flow  # WS/IS: row-folds are K-folds that sum into the same o words
        ax, ay, ao = self.x_addr_bits, self.y_addr_bits, self.o_addr_bits
        cs_bits, cr_bits = (ay, ao) if os_flow else (ao, ay)

        ds = Signal(DIM_BITS)
        ds_last = Signal(DIM_BITS)
        dr = Signal(DIM_BITS)
        dc = Signal(DIM_BITS)
        acc_flag = Signal()
        cnt = Signal(DIM_BITS)
        rp = Signal(range(max(rows, 2)), init=rows - 1)
        row_off = Signal(DIM_BITS + 1)
        col_off = Signal(DIM_BITS + 1)
        base_rs = Signal(ax)
        base_cs = Signal(cs_bits)
        base_cr = Signal(cr_bits)
        cf_dr = Signal(cr_bits)
        rows_left = Signal(DIM_BITS + 1)
        row_ok = Signal()
        m.d.comb += [rows_left.eq(dr - row_off), row_ok.eq(rp < rows_left)]

        busy = Signal()
        done = Signal()
        cycles = Signal(CYCLES_BITS)
        o_add = Signal()
        m.d.comb += [self.busy.eq(busy), self.done.eq(done), self.cycles.eq(cycles), self.o_add.eq(o_add)]
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)

        # Read strobes of this cycle; their data reach the array the next cycle.
        x_en = Signal()
        y_en = Signal()
        m.d.comb += [self.x_en.eq(x_en), self.y_en.eq(y_en)]
        m.d.sync += [self.x_valid.eq(x_en), self.y_valid.eq(y_en)]

        # ofmap read (for read-modify-write) this cycle, write of the same word the next.
        o_rd_en = Signal()
        o_rd_addr = Signal(ao)
        m.d.comb += [self.o_rd_en.eq(o_rd_en), self.o_rd_addr.eq(o_rd_addr)]
        m.d.sync += [self.o_wr_en.eq(o_rd_en), self.o_wr_addr.eq(o_rd_addr)]

        in_load = Signal()
        in_stream = Signal()
        in_flush = Signal()
        fold_end = Signal()
        m.d.comb += fold_end.eq(in_flush & (cnt == self.flush_cycles - 1))

        if os_flow:
            drain = Signal()
            m.d.comb += [
                drain.eq(in_flush & (cnt >= rows + cols - 1) & (cnt < 2 * rows + cols - 1)),
                self.shift.eq(drain),
                o_rd_en.eq(drain & row_ok),
                o_rd_addr.eq(base_cr + rp),
                self.x_addr.eq(base_rs + cnt),
                self.y_addr.eq(base_cs + cnt),
                x_en.eq(in_stream),
                y_en.eq(in_stream),
            ]
            with m.If(drain):
                m.d.sync += rp.eq(rp - 1)
            # marks the x/y words of the fold's first streamed index (valid the cycle after)
            m.d.sync += self.first.eq(in_stream & (cnt == 0))
        else:
            m.d.sync += self.shift.eq(in_load)
            m.d.comb += [
                self.x_addr.eq(base_rs + cnt),
                self.y_addr.eq(base_cr + rp),
                x_en.eq(in_stream),
                y_en.eq(in_load & row_ok),
            ]
            # o read (of lane 0's bank) R cycles after the x read: a delay line of stream strobes.
            delay = rows
            line = Signal(delay)
            m.d.sync += line.eq(Cat(in_stream, line[:-1]) if delay > 1 else in_stream)
            o_evt = line[delay - 1]
            ocnt = Signal(ao)
            m.d.comb += [o_rd_en.eq(o_evt), o_rd_addr.eq(base_cs + ocnt)]
            with m.If(fold_end):
                m.d.sync += ocnt.eq(0)
            with m.Elif(o_evt):
                m.d.sync += ocnt.eq(ocnt + 1)

        first_phase = "STREAM" if os_flow else "LOAD"
        ds_port, dr_port, dc_port = mapped_dims(self.dataflow, self.m, self.k, self.n)
        with m.FSM(init="IDLE"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [
                        ds.eq(ds_port),
                        ds_last.eq(ds_port - 1),
                        dr.eq(dr_port),
                        dc.eq(dc_port),
                        acc_flag.eq(self.accumulate),
                        busy.eq(1),
                        done.eq(0),
                        cycles.eq(0),
                    ]
                    m.next = "SETUP"
            with m.State("SETUP"):
                m.d.sync += [
                    cnt.eq(0),
                    rp.eq(rows - 1),
                    row_off.eq(0),
                    col_off.eq(0),
                    base_rs.eq(0),
                    base_cs.eq(0),
                    base_cr.eq(0),
                    cf_dr.eq(0),
                    o_add.eq(acc_flag),
                ]
                with m.If((ds == 0) | (dr == 0) | (dc == 0)):
                    m.d.sync += [busy.eq(0), done.eq(1)]
                    m.next = "IDLE"
                with m.Else():
                    m.next = first_phase
            if not os_flow:
                with m.State("LOAD"):
                    m.d.comb += in_load.eq(1)
                    with m.If(cnt == rows - 1):
                        m.d.sync += [cnt.eq(0), rp.eq(rows - 1)]
                        m.next = "STREAM"
                    with m.Else():
                        m.d.sync += [cnt.eq(cnt + 1), rp.eq(rp - 1)]
            with m.State("STREAM"):
                m.d.comb += in_stream.eq(1)
                with m.If(cnt == ds_last):
                    m.d.sync += cnt.eq(0)
                    m.next = "FLUSH"
                with m.Else():
                    m.d.sync += cnt.eq(cnt + 1)
            with m.State("FLUSH"):
                m.d.comb += in_flush.eq(1)
                with m.If(fold_end):
                    last_row = row_off + rows >= dr
                    last_col = col_off + cols >= dc
                    m.d.sync += [cnt.eq(0), rp.eq(rows - 1)]
                    with m.If(last_row & last_col):
                        m.d.sync += [busy.eq(0), done.eq(1)]
                        m.next = "IDLE"
                    with m.Else():
                        m.next = first_phase
                        m.d.sync += o_add.eq(acc_flag | Const(int(reduce_rows)) & ~last_row)
                        with m.If(last_row):
                            m.d.sync += [
                                row_off.eq(0),
                                col_off.eq(col_off + cols),
                                base_rs.eq(0),
                                base_cs.eq(base_cs + ds),
                                cf_dr.eq(cf_dr + dr),
                                base_cr.eq(cf_dr + dr),
                            ]
                        with m.Else():
                            m.d.sync += [
                                row_off.eq(row_off + rows),
                                base_rs.eq(base_rs + ds),
                                base_cr.eq(base_cr + rows),
                            ]
                with m.Else():
                    m.d.sync += cnt.eq(cnt + 1)
        return m

"""The controller: one FSM that runs a whole tiled GEMM out of the buffers after ``start``."""

from __future__ import annotations

from typing import Any

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_spec.config import Dataflow
from accel_spec.isa import FIELDS, SIGNED_WINDOW_FIELDS, WINDOW_FIELDS
from rtl_gen.core.buffer_layout import CYCLES_BITS, DIM_BITS
from rtl_gen.core.conv_addr import ADDR_BITS as WINDOW_ADDR_BITS
from rtl_gen.core.conv_addr import ConvAddressGenerator
from rtl_gen.core.skew import DelayLine

__all__ = ["Controller", "A_STRIDE_BITS"]

#: Width of a run's ``a_stride`` (the RUN command's field).
A_STRIDE_BITS = FIELDS["a_stride"][1]



class Controller(wiring.Component):
    """Fold sequencer and address generator of the accelerator.

    Names: ``x`` is the buffer feeding the array's left edge (``rows`` lanes: ifmap for WS and
    OS, weight for IS), ``y`` the one feeding its top edge (``cols`` lanes), ``o`` the ofmap.
    With ``(Ds, Dr, Dc)`` from :attr:`Dataflow.mapped_dims`, the run is folded over row-folds
    ``rf < ceil(Dr/R)`` (inner loop) and column-folds ``cf < ceil(Dc/C)`` (outer loop). Word
    addresses (``r`` a row of the fold, ``s < Ds`` a streamed index)::

        x: rf*Sx + s                      (all dataflows)
        y: cf*Sy + rf*R + r  (WS/IS)      cf*Ds + s  (OS)

    ``Sx = Ds`` and ``Sy = Dr``, except that a nonzero ``a_stride`` replaces the one of ``A``'s
    buffer (``Sx`` for WS/OS, ``Sy`` for IS): a run then reads its A tile in place from a
    larger matrix held on chip (on-chip reuse across layers).
        o: cf*Ds + s         (WS/IS)      cf*Dr + rf*R + r  (OS)

    Rows ``rf*R + r >= Dr`` of an edge fold are never read (WS/IS: zeros are loaded instead)
    and never written (OS). All strobes and addresses are those of lane 0 (the accelerator's
    per-lane banks and the column strobes delay them by the lane index). Phases:

    * WS/IS: LOAD (``R`` cycles): y words for ``r = R-1 .. 0`` are read and ``shift`` is high
      the cycle after each read; STREAM: x words ``s = 0 .. Ds-1`` are read (``first`` marks the
      data of ``s = 0``); the o word of ``s`` is read ``R`` cycles after x word ``s`` (an
      ``R``-deep line carries its address and add flag) and written the cycle after; FLUSH
      (``R + C``): the last results come out. Plain: LOAD, STREAM (``Ds``) and FLUSH per fold.
      Shadow: one LOAD for the first fold, then STREAM slots of ``max(Ds, R, 2)`` cycles that
      also load the next fold's y words in their first ``R`` cycles, and the last fold's
      STREAM (``Ds``) and FLUSH.
    * OS: STREAM (``Ds``): x and y words are read. Every fold's results are drained by an
      ``R``-cycle drain of rows ``R-1 .. 0`` (``shift`` high, each row's o word read during its
      shift and written the cycle after) that the end of its STREAM arms: it is issued then
      and reaches the outputs through a line of ``R`` (plain: column 0's last product is in
      the bottom row) or ``R + 1`` (shadow: the next fold's ``first`` has moved the sums into
      the shadows) cycles. Plain: STREAM then FLUSH (``2R + C``) per fold. Shadow: STREAM
      slots of ``max(Ds, R, 2)`` back to back, then a TAIL (``2R + C + 1``) that starts with a
      ``first`` marker without data, which moves the last sums out.

    A run is one SETUP cycle then the phases above, so ``start`` to ``done`` is
    ``perf_model.timing.run_cycles``; a run with a zero dimension is the SETUP cycle alone.
    Results are added to the old o word (``o_add``, issued with each o read) when
    ``accumulate`` was set at ``start`` or, for WS/IS, in every row-fold after the first.

    Weight stationary, a run started with ``window`` reads its x words through the convolution
    address generator (``rtl_gen.core.conv_addr``) from the window fields sampled with ``start``:
    ``x_win`` is high for the run, ``x_win_addr`` the word (relative to ``x_base``, signed) and
    ``x_pad`` marks a pad (no read), ``x_groups`` / ``x_pack`` the lane groups a tap-packed read
    keeps and the run's ``pack`` (``max_groups`` group checks). The timing is the same as a packed
    run's. Other dataflows have no generator (``x_win`` stays low; the sequencer refuses such a run).
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
        shadow: bool = False,
        max_groups: int = 1,
    ) -> None:
        self.rows = rows
        self.max_groups = max_groups
        self.cols = cols
        self.dataflow = Dataflow.parse(dataflow)
        self.shadow = shadow
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
                "a_stride": In(A_STRIDE_BITS),
                "busy": Out(1),
                "done": Out(1),
                "cycles": Out(CYCLES_BITS),
                "x_en": Out(1),
                "x_addr": Out(self.x_addr_bits),
                "y_en": Out(1),
                "y_addr": Out(self.y_addr_bits),
                "shift": Out(1),
                "phase": Out(1),
                "first": Out(1),
                "o_rd_en": Out(1),
                "o_rd_addr": Out(self.o_addr_bits),
                "o_add": Out(1),
                "window": In(1),
                **{name: In(signed(FIELDS[name][1]) if name in SIGNED_WINDOW_FIELDS else FIELDS[name][1])
                   for name in WINDOW_FIELDS},
                "x_win": Out(1),
                "x_win_addr": Out(signed(WINDOW_ADDR_BITS)),
                "x_pad": Out(1),
                "x_groups": Out(max_groups),
                "x_pack": Out(FIELDS["pack"][1]),
            }
        )

    @property
    def flush_cycles(self) -> int:
        """Length of the last phase: ``R + C`` (WS/IS), ``2R + C`` (OS), ``2R + C + 1`` (OS shadow)."""
        if self.dataflow is Dataflow.OS:
            return 2 * self.rows + self.cols + int(self.shadow)
        return self.rows + self.cols

    @property
    def o_line_depth(self) -> int:
        """Cycles from issuing an o read to its read: ``R`` (``R + 1`` for OS with shadows)."""
        return self.rows + int(self.shadow and self.dataflow is Dataflow.OS)

    def elaborate(self, platform: object) -> Module:  # noqa: C901 - one FSM, read top to bottom
        m = Module()
        rows, cols = self.rows, self.cols
        os_flow = self.dataflow is Dataflow.OS
        shadow = self.shadow
        ax, ay, ao = self.x_addr_bits, self.y_addr_bits, self.o_addr_bits
        cs_bits, cr_bits = (ay, ao) if os_flow else (ao, ay)

        ds = Signal(DIM_BITS)
        x_step = Signal(DIM_BITS)  # words from one row-fold's x words to the next's (Sx)
        y_step = Signal(DIM_BITS)  # words from one column-fold's y words to the next's (Sy, WS/IS)
        ds_last = Signal(DIM_BITS)
        slot_last = Signal(DIM_BITS)  # max(Ds, R, 2) - 1
        dr = Signal(DIM_BITS)
        dc = Signal(DIM_BITS)
        acc_flag = Signal()
        cnt = Signal(DIM_BITS)

        # The fold cursor: the next fold to load (WS/IS) or the fold streaming (OS).
        row_off = Signal(DIM_BITS + 1)
        col_off = Signal(DIM_BITS + 1)
        base_rs = Signal(ax)
        base_cs = Signal(cs_bits)
        base_cr = Signal(cr_bits)
        cf_dr = Signal(cr_bits)
        rows_left = Signal(DIM_BITS + 1)
        last_row = Signal()
        last_fold = Signal()
        m.d.comb += [
            rows_left.eq(dr - row_off),
            last_row.eq(row_off + rows >= dr),
            last_fold.eq(last_row & (col_off + cols >= dc)),
        ]

        def advance() -> list[Any]:
            """Statements moving the cursor to the next fold (row-folds inner)."""
            return [
                row_off.eq(Mux(last_row, 0, row_off + rows)),
                col_off.eq(Mux(last_row, col_off + cols, col_off)),
                base_rs.eq(Mux(last_row, 0, base_rs + x_step)),
                base_cs.eq(Mux(last_row, base_cs + ds, base_cs)),
                cf_dr.eq(Mux(last_row, cf_dr + y_step, cf_dr)),
                base_cr.eq(Mux(last_row, cf_dr + y_step, base_cr + rows)),
            ]

        busy = Signal()
        done = Signal()
        cycles = Signal(CYCLES_BITS)
        m.d.comb += [self.busy.eq(busy), self.done.eq(done), self.cycles.eq(cycles)]
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)

        in_load = Signal()
        in_stream = Signal()
        in_flush = Signal()
        x_en = Signal()
        m.d.comb += [self.x_en.eq(x_en), x_en.eq(in_stream & (cnt <= ds_last))]
        # OS with shadows: a marker without data one cycle after the last fold's stream moves
        # the last sums into the shadows (the cycle a next fold's first word would arrive).
        dummy = in_flush & (cnt == 0) if os_flow and shadow else Const(0)
        m.d.sync += self.first.eq((x_en & (cnt == 0)) | dummy)

        # o reads are issued here and reach the banks o_line_depth cycles later.
        issue_en = Signal()
        issue_addr = Signal(ao)
        issue_add = Signal()
        issue_shift = Signal()
        issue_phase = Signal()  # OS: the drain's phase, toggled at its first step
        depth = self.o_line_depth
        m.submodules.o_line = line = DelayLine(taps=depth + 1, width=ao + 4)
        m.d.comb += line.i_data.eq(Cat(issue_addr, issue_en, issue_add, issue_shift, issue_phase))
        out = line.o_taps[depth * (ao + 4) :]
        # The phase toggles at the first step of every load (WS/IS) or drain (OS).
        phase = Signal()  # WS/IS: as the array sees it; OS: at issue (the line delays it)
        if not os_flow:
            m.d.comb += self.phase.eq(phase)
        m.d.comb += [
            self.o_rd_addr.eq(out[:ao]),
            self.o_rd_en.eq(out[ao]),
            self.o_add.eq(out[ao + 1]),
        ]

        # Stream-side registers (WS/IS: the fold streaming; OS: the fold being drained).
        st_base = Signal(max(ax, ao))
        st_obase = Signal(ao)
        st_add = Signal()
        st_last = Signal()
        st_rows = Signal(DIM_BITS + 1)
        rp = Signal(DIM_BITS)  # the row a load/drain step handles: R-1 .. 0
        m.d.comb += rp.eq(rows - 1 - cnt)

        if os_flow:
            dj = Signal(range(rows + 1))  # drain steps left
            m.d.comb += [
                self.x_addr.eq(base_rs + cnt),
                self.y_addr.eq(base_cs + cnt),
                self.y_en.eq(x_en),
                issue_shift.eq(dj != 0),
                issue_phase.eq(phase ^ (dj == rows)),
                issue_en.eq((dj != 0) & (dj - 1 < st_rows)),
                issue_addr.eq(st_obase + dj - 1),
                issue_add.eq(acc_flag),
                self.shift.eq(out[ao + 2]),
                self.phase.eq(out[ao + 3]),
            ]
            m.d.sync += phase.eq(issue_phase)
            with m.If(dj != 0):
                m.d.sync += dj.eq(dj - 1)
        else:
            load_ok = Signal()
            m.d.comb += [
                load_ok.eq(in_load | (in_stream & ~st_last & (cnt < rows)) if shadow else in_load),
                self.x_addr.eq(st_base + cnt),
                self.y_addr.eq(base_cr + rp),
                self.y_en.eq(load_ok & (rp < rows_left)),
                issue_en.eq(x_en),
                issue_addr.eq(st_obase + cnt),
                issue_add.eq(st_add),
            ]
            m.d.sync += [self.shift.eq(load_ok), phase.eq(phase ^ (load_ok & (cnt == 0)))]

        moving = Signal()  # start_stream() and advance() take effect at this edge

        def start_stream() -> list[Any]:
            """Statements latching the cursor's fold as the one to stream (WS/IS) or drain (OS)."""
            m.d.comb += moving.eq(1)
            if os_flow:
                return [st_obase.eq(base_cr), st_rows.eq(rows_left), dj.eq(rows), st_last.eq(last_fold)]
            return [st_base.eq(base_rs), st_obase.eq(base_cs), st_add.eq(acc_flag | (row_off != 0)),
                    st_last.eq(last_fold)]

        if self.dataflow is Dataflow.WS:
            m.submodules.window = gen = ConvAddressGenerator(max_groups=self.max_groups)
            win = Signal()
            m.d.comb += [
                *(getattr(gen, name).eq(getattr(self, name)) for name in WINDOW_FIELDS),
                gen.start.eq(self.start & ~busy), gen.latch.eq(moving), gen.advance.eq(moving),
                gen.wrap.eq(last_row), gen.step.eq(x_en),
                self.x_win.eq(win), self.x_win_addr.eq(gen.addr), self.x_pad.eq(gen.pad),
                self.x_groups.eq(gen.groups), self.x_pack.eq(gen.pack_run),
            ]
            with m.If(self.start & ~busy):
                m.d.sync += win.eq(self.window)

        is_flow = Const(int(self.dataflow is Dataflow.IS))  # A is y (the stationary operand), else x
        first_phase = "STREAM" if os_flow else "LOAD"
        ports = {"m": self.m, "k": self.k, "n": self.n}
        ds_port, dr_port, dc_port = (ports[name] for name in self.dataflow.mapped_dims)
        with m.FSM(init="IDLE"):
            with m.State("IDLE"):
                # Known values while idle: four-state simulators start registers that only
                # update themselves (a toggle, a countdown) at X, and this also flushes the
                # o line with defined bits before a run.
                m.d.sync += phase.eq(0)
                if os_flow:
                    m.d.sync += dj.eq(0)
                with m.If(self.start):
                    m.d.sync += [
                        ds.eq(ds_port),
                        x_step.eq(Mux((self.a_stride != 0) & ~is_flow, self.a_stride, ds_port)),
                        y_step.eq(Mux((self.a_stride != 0) & is_flow, self.a_stride, dr_port)),
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
                longest = Mux(ds > rows, ds, max(rows, 2))
                m.d.sync += [
                    cnt.eq(0),
                    slot_last.eq(longest - 1),
                    row_off.eq(0),
                    col_off.eq(0),
                    base_rs.eq(0),
                    base_cs.eq(0),
                    base_cr.eq(0),
                    cf_dr.eq(0),
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
                        m.d.sync += [cnt.eq(0), *start_stream(), *advance()]
                        m.next = "STREAM"
                    with m.Else():
                        m.d.sync += cnt.eq(cnt + 1)
            with m.State("STREAM"):
                m.d.comb += in_stream.eq(1)
                # Shadow slots last max(Ds, R, 2) cycles; WS/IS's last fold streams Ds (its
                # FLUSH follows), OS's last slot is full length too (the marker after it must
                # not move sums into a shadow whose previous drain is still passing through).
                overlap = (Const(1) if os_flow else ~st_last) if shadow else Const(0)
                # another STREAM slot follows at once (shadow only), or the FLUSH/TAIL does
                follows = (~last_fold if os_flow else ~st_last) if shadow else Const(0)
                with m.If(cnt == Mux(overlap, slot_last, ds_last)):
                    m.d.sync += cnt.eq(0)
                    # OS hands the fold it streamed to the drain at every slot end; WS/IS latch the
                    # fold loaded meanwhile as the next one to stream
                    with m.If(follows | Const(int(os_flow))):
                        m.d.sync += [*start_stream(), *advance()]
                    with m.If(~follows):
                        m.next = "FLUSH"
                with m.Else():
                    m.d.sync += cnt.eq(cnt + 1)
            with m.State("FLUSH"):
                m.d.comb += in_flush.eq(1)
                with m.If(cnt == self.flush_cycles - 1):
                    m.d.sync += cnt.eq(0)
                    done_now = Const(1) if os_flow and shadow else st_last
                    with m.If(done_now):
                        m.d.sync += [busy.eq(0), done.eq(1)]
                        m.next = "IDLE"
                    with m.Else():
                        m.next = first_phase
                with m.Else():
                    m.d.sync += cnt.eq(cnt + 1)
        return m

"""The command sequencer: fetches a program from DRAM into the command queue and issues it.

Commands and their encoding: :mod:`accel_spec.isa`. On ``start`` the sequencer checks the
queue registers (length at most ``depth``, base aligned to the AXI data width), reads the whole
program with the load DMA into its command memory, then decodes one command per slot and
issues it to its unit (the DMA engines, the on-chip move engine, the array or, on a design
with ``vector_unit``, the vector unit) once the unit is idle and the waits it names are met
(a ``VECTOR`` is read with its parameter block, the next slot, through a second read port).
The DMA unit is the load and store engines and the move engine together: one transfer at a
time. On a bus of at most 32 bytes an entry of the command memory is one command (a DMA word
of ``32 / data_bytes`` beats); on a wider one (``P = data_bytes / 32`` commands a beat) an
entry is one beat, ``ceil(depth / P)`` entries, and command ``pc`` is slice ``pc % P`` of entry
``pc // P``.

Timing (``perf_model.program_timing`` states it for the model): ``start`` sampled at edge
``E0``; the fetch is a DMA load of ``len`` words of ``32 / data_bytes`` beats (``ceil(len /
P)`` words of one beat on a wider bus: ``accel_spec.isa.fetch_beats`` beats) started at
``E1``; it ends at ``E_{1+f}`` (``f`` = its DMA cycles). Command ``i`` is read in the cycle after
the previous one was issued (the first in the cycle after the fetch ended) and decoded in the
next; it is issued at the end of the first decode cycle in which it is not blocked (its unit's
``busy`` and its waits are sampled in that cycle). A unit issued at edge ``E_d`` with
``n`` cycles of work is busy from cycle ``d + 1`` to ``d + n``. After the last command the
sequencer waits until every unit is idle: ``done`` is a one-cycle pulse in the first cycle
all are, and ``busy`` falls at that cycle's edge. The cycle counters count every cycle from
``E0`` to that edge (total), those in which the array is busy (compute), and those in which
it is not (stall).
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from accel_spec.errors import ConfigError
from accel_spec.isa import (
    COMMAND_BYTES,
    ERROR_AXI,
    ERROR_BUFFER,
    ERROR_DRAM,
    ERROR_OPCODE,
    ERROR_QUEUE,
    ERROR_SDC,
    ERROR_VECTOR,
    ERROR_WINDOW,
    FIELDS,
    MAX_AXI_DATA_BYTES,
    SIGNED_WINDOW_FIELDS,
    WINDOW_FIELDS,
    Buffer,
    Opcode,
    queue_entry_commands,
)
from accel_spec.vector_isa import POOL_KINDS, VECTOR_CODES
from rtl_gen.soc.axi import ADDR_BITS
from rtl_gen.soc.dma import TRANSFER_BITS
from rtl_gen.soc.move import MOVE_FIELDS

__all__ = ["Sequencer", "COUNTER_BITS"]

#: Width of the cycle counters.
COUNTER_BITS = 64


def _field(word: Signal, name: str) -> Signal:
    lsb, width = FIELDS[name]
    return word[lsb:lsb + width]


class Sequencer(wiring.Component):
    """See the module docstring.

    Args:
        data_bytes: AXI data width in bytes (power of two, at most :data:`MAX_AXI_DATA_BYTES`).
        depth: commands the queue holds.
        load_beats: beats per buffer word of each buffer (index: ``Buffer``) for loads.
        store_beats: beats per ofmap word stored raw and requantised.
        load_lanes, store_lanes: lanes of those words (``accel_spec.isa.dram_word_lanes``): a
            transfer's ``lanes`` field narrows its words to that many lanes' beats
            (``accel_spec.isa.transfer_beats``; ``ERROR_DRAM`` when not whole beats or above them).
        depths: words of each buffer (index: ``Buffer``).
        buf_addr_bits: width of buffer word addresses.
        max_beats: the DMA's ``beats`` range.
        can_move: the design can ``MOVE`` (ifmap and ofmap words have equal lanes); else a
            ``MOVE`` is ``ERROR_OPCODE``.
        can_window: the array has the convolution address generator (weight stationary); else a
            ``RUN`` with ``window`` is ``ERROR_OPCODE``.
        output_check: the core checks its output stage (``checksum = "detect"``): an input
            ``sdc_qevent`` (a requantised word mismatched) that counts like ``sdc_event`` and
            belongs to the last STORE or MOVE issued (``SDC_PC``, ``ERROR_PC``).
        vector_lanes: lanes of the design's vector unit (``ArrayConfig.vector_lanes``; 0: none, and
            a ``VECTOR`` is ``ERROR_OPCODE``). With a unit: the ``vec`` port (one ``VECTOR`` at a
            time, its parameter block read from the next queue slot through a second read port in
            the same cycle), the unit's ``busy`` waited on like the other units', and a ``STORE``
            of the ifmap allowed (``buffer`` 0 without ``requant``, ifmap beats).

    A ``WINDOW`` command writes the window registers (passed to every ``RUN``, which latches them
    at its start) in its decode cycle and takes no unit; one with a zero ``stride``,
    ``dilation``, ``kw``, ``cblocks``, ``in_w``, ``in_h`` or ``out_w``, or a ``pack`` above
    ``max_pack`` (the address generator has ``2 ** max_pack`` lane-group checks), is
    ``ERROR_WINDOW``, and so is a run's ``window_error`` (it read no word outside the ifmap), seen
    at the next decode or at the end.
    """

    def __init__(self, *, data_bytes: int, depth: int, load_beats: tuple[int, int, int, int],
                 store_beats: tuple[int, int], depths: tuple[int, int, int, int], buf_addr_bits: int,
                 max_beats: int, load_lanes: tuple[int, int, int, int], store_lanes: tuple[int, int],
                 can_move: bool = True, can_window: bool = False, output_check: bool = False,
                 vector_lanes: int = 0, max_pack: int = 0) -> None:
        if data_bytes > MAX_AXI_DATA_BYTES:
            raise ConfigError(f"AXI data bytes must be at most {MAX_AXI_DATA_BYTES}, not {data_bytes}")
        self.data_bytes = data_bytes
        self.depth = depth
        self.load_beats = load_beats
        self.store_beats = store_beats
        self.load_lanes = load_lanes
        self.store_lanes = store_lanes
        self.depths = depths
        self.can_move = can_move
        self.can_window = can_window
        self.output_check = output_check
        self.vector_lanes = vector_lanes
        self.max_pack = max_pack  # the largest WINDOW pack the address generator serves (log2 of its groups)
        self.per_entry = queue_entry_commands(data_bytes)  # commands per queue entry (P)
        self.cmd_beats = max(1, COMMAND_BYTES // data_bytes)  # beats per queue entry
        transfer = {
            "start": Out(1), "addr": Out(ADDR_BITS), "stride": Out(ADDR_BITS), "rows": Out(TRANSFER_BITS),
            "words": Out(TRANSFER_BITS), "beats": Out(range(max_beats + 1)), "buf_addr": Out(buf_addr_bits),
            "row_step": Out(buf_addr_bits), "word_step": Out(buf_addr_bits), "busy": In(1), "axi_error": In(1),
        }
        super().__init__({
            "start": In(1), "queue_base": In(64), "queue_len": In(32),
            "busy": Out(1), "done": Out(1), "error": Out(1), "error_code": Out(4), "error_pc": Out(32),
            "sdc_event": In(1), "sdc_stop": In(1), "sdc_count": Out(32), "sdc_pc": Out(32),
            "cycles_total": Out(COUNTER_BITS), "cycles_compute": Out(COUNTER_BITS), "cycles_stall": Out(COUNTER_BITS),
            "ld": Out(wiring.Signature({**transfer, "slide": Out(1)})),
            "st": Out(wiring.Signature({**transfer, "requant": Out(1), "q_by_row": Out(1)})),
            "fetching": Out(1), "buffer": Out(2), "q_base": Out(16),
            "cmd_we": In(1), "cmd_addr": In(buf_addr_bits), "cmd_data": In(8 * data_bytes * max_beats),
            "mv": Out(wiring.Signature({
                "start": Out(1), "rows": Out(16), "words": Out(16), "q_by_row": Out(1), "buf_addr": Out(buf_addr_bits),
                "row_step": Out(buf_addr_bits), "word_step": Out(buf_addr_bits), "dst_addr": Out(buf_addr_bits),
                "dst_row_step": Out(buf_addr_bits), "dst_word_step": Out(buf_addr_bits), "busy": In(1),
            })),
            "run": Out(wiring.Signature({
                "start": Out(1), "m": Out(32), "k": Out(32), "n": Out(32), "accumulate": Out(1), "a_stride": Out(24),
                "x_base": Out(32), "y_base": Out(32), "o_base": Out(32), "busy": In(1),
                "window": Out(1), "window_error": In(1),
                **{name: Out(signed(FIELDS[name][1]) if name in SIGNED_WINDOW_FIELDS else FIELDS[name][1])
                   for name in WINDOW_FIELDS},
            })),
            **({"sdc_qevent": In(1)} if output_check else {}),
            **({"vec": Out(wiring.Signature({
                "start": Out(1), "kind": Out(4), "colmajor": Out(1), "src": Out(buf_addr_bits),
                "src2": Out(buf_addr_bits),
                "dst": Out(buf_addr_bits), "rows": Out(16), "words": Out(24), "n": Out(24), "qrows": Out(16),
                "params": Out(8 * COMMAND_BYTES), "busy": In(1),
            }))} if vector_lanes else {}),
        })

    def elaborate(self, platform: object) -> Module:  # noqa: C901 - one FSM, read top to bottom
        m = Module()
        per = self.per_entry
        sel = exact_log2(per)
        entries = max(2, -(-self.depth // per))
        m.submodules.queue = queue = memory.Memory(shape=8 * COMMAND_BYTES * per, depth=entries, init=[])
        wp = queue.write_port()
        rp = queue.read_port()
        m.d.comb += [wp.addr.eq(self.cmd_addr), wp.data.eq(self.cmd_data[:8 * COMMAND_BYTES * per]),
                     wp.en.eq(self.cmd_we & self.fetching)]
        pc = Signal(32)
        length = Signal(32)
        m.d.comb += rp.addr.eq(pc[sel:sel + ceil_log2(entries)])
        cmd = rp.data.word_select(pc[:sel], 8 * COMMAND_BYTES) if per > 1 else rp.data
        op = _field(cmd, "opcode")
        dma_busy = self.ld.busy | self.st.busy | self.mv.busy
        run_busy = self.run.busy
        vector = bool(self.vector_lanes)
        vec_busy: Value = self.vec.busy if vector else Const(0)
        is_vector = op == Opcode.VECTOR
        if vector:  # the VECTOR's parameter block: the next slot, read in the same cycle
            rp2 = queue.read_port()
            nxt = Signal(32)
            m.d.comb += [nxt.eq(pc + 1), rp2.addr.eq(nxt[sel:sel + ceil_log2(entries)])]
            params = rp2.data.word_select(nxt[:sel], 8 * COMMAND_BYTES) if per > 1 else rp2.data
            vrows, vwords = _field(cmd, "vrows"), _field(cmd, "vwords")
            span, out_span, span2 = Signal(64), Signal(64), Signal(64)
            pooling = Cat(*(_field(cmd, "vkind") == VECTOR_CODES[k] for k in POOL_KINDS)).any()
            # a RoPE's table (vsrc2): 2 * vwords words per vqrows rows, within these bounds
            rope = _field(cmd, "vkind") == VECTOR_CODES["rope"]
            # a transpose's output: vn rows of vp0 words (the pitch, which must hold vrows lanes)
            transposing = _field(cmd, "vkind") == VECTOR_CODES["transpose"]
            pitch = _field(params, "vp0")
            m.d.comb += [span.eq(vrows * vwords),  # a pooling's output: vrows images of out_words words
                         out_span.eq(Mux(transposing, _field(cmd, "vn"), vrows)
                                     * Mux(pooling, _field(params, "vp7"), Mux(transposing, pitch, vwords))),
                         span2.eq(Mux(rope, Mux(_field(cmd, "vqrows") == 1, span << 1, span + (vwords << 1)), span))]
            ifmap_depth = self.depths[Buffer.IFMAP]
            vector_bad = is_vector & (
                (_field(cmd, "vkind") == 0) | (_field(cmd, "vkind") > len(VECTOR_CODES)) | (vrows == 0) | (vwords == 0)
                | (_field(cmd, "vn") == 0) | (_field(cmd, "vn") > vwords * self.vector_lanes) | (pc + 1 >= length)
                | (_field(cmd, "vsrc") + span > ifmap_depth) | (_field(cmd, "vsrc2") + span2 > ifmap_depth)
                | (_field(cmd, "vdst") + out_span > ifmap_depth) | (transposing & (pitch * self.vector_lanes < vrows)))
        axi_err = (self.ld.axi_error & ~self.ld.busy) | (self.st.axi_error & ~self.st.busy)
        win_err = self.run.window_error & ~run_busy
        is_window = op == Opcode.WINDOW
        window_bad = Cat(*(_field(cmd, name) == 0 for name in ("stride_h", "stride_w", "dilation_h", "dilation_w", "kw",
                                                                "cblocks", "in_w", "in_h", "out_w"))).any() \
            | (_field(cmd, "pack") > self.max_pack)
        window_run_bad = (op == Opcode.RUN) & _field(cmd, "window") & int(not self.can_window)
        low = exact_log2(self.data_bytes)

        def misaligned(*values: Signal) -> Signal:
            return Cat(*(v[:low] for v in values)).any() if low else Const(0)

        # Decode-cycle checks of a transfer command.
        buffer = _field(cmd, "buffer")
        rows, words = _field(cmd, "rows"), _field(cmd, "words")
        last = Signal(64)
        m.d.comb += last.eq(_field(cmd, "buf_addr") + (rows - 1) * _field(cmd, "row_step")
                            + (words - 1) * _field(cmd, "word_step"))
        depth = Signal(32)
        m.d.comb += depth.eq(Mux(buffer == 0, self.depths[0], Mux(buffer == 1, self.depths[1],
                                                                     Mux(buffer == 2, self.depths[2], self.depths[3]))))
        out_of_range = (rows != 0) & (words != 0) & (last >= depth)
        # A MOVE reads the ofmap and writes the ifmap.
        is_move = op == Opcode.MOVE
        dst_last = Signal(64)
        m.d.comb += dst_last.eq(_field(cmd, "dst_addr") + (rows - 1) * _field(cmd, "dst_row_step")
                                + (words - 1) * _field(cmd, "dst_word_step"))
        move_bad = (rows != 0) & (words != 0) & ((last >= self.depths[Buffer.OFMAP])
                                                 | (dst_last >= self.depths[Buffer.IFMAP]))
        store_bad = (op == Opcode.STORE) & (buffer != Buffer.OFMAP)
        if self.vector_lanes:  # a STORE reads the ofmap, or (vector designs) the ifmap without requantising
            store_bad = store_bad & ~((buffer == Buffer.IFMAP) & ~_field(cmd, "requant"))
        requant = _field(cmd, "requant")
        lanes = _field(cmd, "lanes")

        def narrow(beats: int, full: int) -> tuple[Value, Value]:
            """Beats of a word of ``full`` lanes (``beats`` in all) cut to ``lanes``, and whether ``lanes`` is bad."""
            if beats >= full:  # a lane is whole beats
                cut, bad = lanes * (beats // full), lanes > full
            else:  # a beat holds a power of two of lanes (a packed int4 lane is half a byte): the cut is a shift
                shift = exact_log2(full // beats)
                cut, bad = lanes >> shift, lanes[:shift].any() | (lanes > full)
            return Mux(lanes == 0, beats, cut), bad

        lb = [narrow(b, n) for b, n in zip(self.load_beats, self.load_lanes, strict=True)]
        sb = [narrow(b, n) for b, n in zip(self.store_beats, self.store_lanes, strict=True)]

        def by_buffer(i: int) -> Value:
            return Mux(buffer == 0, lb[0][i], Mux(buffer == 1, lb[1][i], Mux(buffer == 2, lb[2][i], lb[3][i])))

        store_pick: list[Value] = [Mux(requant, sb[1][i], sb[0][i]) for i in range(2)]
        if self.vector_lanes:
            store_pick = [Mux(buffer == Buffer.IFMAP, lb[0][i], store_pick[i]) for i in range(2)]
        load_beats, store_beats = by_buffer(0), store_pick[0]
        lanes_bad = Mux(op == Opcode.LOAD, by_buffer(1), store_pick[1])
        is_transfer = (op == Opcode.LOAD) | (op == Opcode.STORE)
        uses_dma = is_transfer | is_move
        run_pc = Signal(32)  # the last RUN issued
        q_pc = Signal(32)  # the last STORE or MOVE issued (they read the output stage)
        # the command a mismatch belongs to; without the output stage's check, the same logic as before it
        sdc_any: Value = self.sdc_event | self.sdc_qevent if self.output_check else self.sdc_event
        sdc_at: Value = Mux(self.sdc_event, run_pc, q_pc) if self.output_check else run_pc
        sdc_add: Value = self.sdc_event + self.sdc_qevent if self.output_check else Const(1)
        sdc_stop_now = Signal()  # a checksum mismatch that stops the program (below)
        blocked = Signal()
        blocking: Value = (Mux(uses_dma, dma_busy, 0) | ((op == Opcode.RUN) & run_busy)
                           | ((op == Opcode.SYNC) & (dma_busy | run_busy))
                           | (_field(cmd, "wait_dma") & dma_busy) | (_field(cmd, "wait_run") & run_busy) | sdc_stop_now)
        if vector:  # the vector unit: its own commands, SYNC and wait_vec wait for it
            blocking = blocking | (((op == Opcode.SYNC) | is_vector | _field(cmd, "wait_vec")) & vec_busy)
        m.d.comb += blocked.eq(blocking)

        window_we = Signal()  # a WINDOW command is issued this cycle
        error_code = Signal(4)
        m.d.comb += self.error_code.eq(error_code)
        running = Signal()
        m.d.comb += self.busy.eq(running)
        with m.If(running):
            m.d.sync += self.cycles_total.eq(self.cycles_total + 1)
            with m.If(run_busy):
                m.d.sync += self.cycles_compute.eq(self.cycles_compute + 1)
            with m.Else():
                m.d.sync += self.cycles_stall.eq(self.cycles_stall + 1)
        buffer_reg = Signal(2)
        m.d.comb += self.buffer.eq(buffer_reg)

        def fail(code: int) -> list:
            return [error_code.eq(code), self.error_pc.eq(pc)]

        # Checksum mismatches (``sdc_event``: one cycle per mismatching output word, at the latest in
        # the first cycle after the RUN's done) belong to the last RUN issued, at ``run_pc``.
        # An output-stage mismatch (``sdc_qevent``) belongs to the last STORE or MOVE, at ``q_pc``.
        m.d.comb += sdc_stop_now.eq(sdc_any & self.sdc_stop & running)

        def sdc_fail() -> None:
            """In a state that can see a mismatch (after any other step of it): with SDC_CTRL.STOP
            the program fails at that RUN, STORE or MOVE (issuing is blocked this cycle; FAIL waits for the units)."""
            with m.If(sdc_stop_now):
                m.d.sync += [error_code.eq(ERROR_SDC), self.error_pc.eq(sdc_at)]
                m.next = "FAIL"

        transfer_fields = [
            self.ld.addr.eq(_field(cmd, "dram_addr")), self.ld.stride.eq(_field(cmd, "dram_stride")),
            self.ld.rows.eq(rows), self.ld.words.eq(words), self.ld.buf_addr.eq(_field(cmd, "buf_addr")),
            self.ld.row_step.eq(_field(cmd, "row_step")), self.ld.word_step.eq(_field(cmd, "word_step")),
            self.ld.beats.eq(load_beats), self.ld.slide.eq(_field(cmd, "slide")),
            self.st.addr.eq(_field(cmd, "dram_addr")), self.st.stride.eq(_field(cmd, "dram_stride")),
            self.st.rows.eq(rows), self.st.words.eq(words), self.st.buf_addr.eq(_field(cmd, "buf_addr")),
            self.st.row_step.eq(_field(cmd, "row_step")), self.st.word_step.eq(_field(cmd, "word_step")),
            self.st.beats.eq(store_beats), self.st.requant.eq(requant), self.st.q_by_row.eq(_field(cmd, "q_by_row")),
            self.run.m.eq(_field(cmd, "m")), self.run.k.eq(_field(cmd, "k")), self.run.n.eq(_field(cmd, "n")),
            self.run.accumulate.eq(_field(cmd, "accumulate")), self.run.x_base.eq(_field(cmd, "x_base")),
            self.run.a_stride.eq(_field(cmd, "a_stride")),
            *(getattr(self.mv, name).eq(_field(cmd, name)) for name in MOVE_FIELDS),
            self.run.y_base.eq(_field(cmd, "y_base")), self.run.o_base.eq(_field(cmd, "o_base")),
            self.run.window.eq(_field(cmd, "window")),
        ]
        if vector:
            transfer_fields += [self.vec.kind.eq(_field(cmd, "vkind")), self.vec.colmajor.eq(_field(cmd, "vcolmajor")),
                                self.vec.src.eq(_field(cmd, "vsrc")),
                                self.vec.src2.eq(_field(cmd, "vsrc2")), self.vec.dst.eq(_field(cmd, "vdst")),
                                self.vec.rows.eq(vrows), self.vec.words.eq(vwords), self.vec.n.eq(_field(cmd, "vn")),
                                self.vec.qrows.eq(_field(cmd, "vqrows")), self.vec.params.eq(params)]
        for name in WINDOW_FIELDS:  # the window registers, written by WINDOW commands
            reg = Signal.like(getattr(self.run, name), name=f"window_{name}")
            m.d.comb += getattr(self.run, name).eq(reg)
            with m.If(self.start & ~running):
                m.d.sync += reg.eq(0)
            with m.Elif(window_we):
                m.d.sync += reg.eq(_field(cmd, name))
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [self.sdc_count.eq(0), self.sdc_pc.eq(0)]
                    m.d.sync += [running.eq(1), pc.eq(0), length.eq(self.queue_len), error_code.eq(0),
                                 self.cycles_total.eq(0), self.cycles_compute.eq(0), self.cycles_stall.eq(0)]
                    with m.If(self.queue_len > self.depth):
                        m.d.sync += fail(ERROR_QUEUE)
                        m.next = "FAIL"
                    with m.Elif(misaligned(self.queue_base) | self.queue_base[ADDR_BITS:].any()):
                        m.d.sync += fail(ERROR_DRAM)
                        m.next = "FAIL"
                    with m.Else():
                        m.next = "FETCH"
            with m.State("FETCH"):
                m.d.comb += [self.fetching.eq(1), self.ld.start.eq(1), self.ld.addr.eq(self.queue_base[:ADDR_BITS]),
                             self.ld.rows.eq(Mux(length == 0, 0, 1)), self.ld.words.eq((length + per - 1) >> sel),
                             self.ld.beats.eq(self.cmd_beats), self.ld.word_step.eq(1), self.ld.slide.eq(0)]
                m.next = "FETCH_WAIT"
            with m.State("FETCH_WAIT"):
                m.d.comb += self.fetching.eq(1)
                with m.If(~self.ld.busy):
                    with m.If(self.ld.axi_error):
                        m.d.sync += fail(ERROR_AXI)
                        m.next = "FAIL"
                    with m.Elif(length == 0):
                        m.next = "DRAIN"
                    with m.Else():
                        m.next = "READ"
            with m.State("READ"):
                m.next = "DECODE"
                sdc_fail()
            with m.State("DECODE"):
                m.d.comb += transfer_fields
                with m.If(axi_err):
                    m.d.sync += fail(ERROR_AXI)
                    m.next = "FAIL"
                with m.Elif(win_err | (is_window & window_bad)):
                    m.d.sync += fail(ERROR_WINDOW)
                    m.next = "FAIL"
                with m.Elif((op == 0) | (op > (Opcode.VECTOR if vector else Opcode.WINDOW))
                            | (is_move & int(not self.can_move)) | window_run_bad):
                    m.d.sync += fail(ERROR_OPCODE)
                    m.next = "FAIL"
                if vector:  # (no constant-false branch without the unit: Verilator's CASEOVERLAP)
                    with m.Elif(vector_bad):
                        m.d.sync += fail(ERROR_VECTOR)
                        m.next = "FAIL"
                with m.Elif((is_transfer & (out_of_range | store_bad)) | (is_move & move_bad)):
                    m.d.sync += fail(ERROR_BUFFER)
                    m.next = "FAIL"
                with m.Elif(is_transfer & (misaligned(_field(cmd, "dram_addr"), _field(cmd, "dram_stride"))
                                           | lanes_bad)):
                    m.d.sync += fail(ERROR_DRAM)
                    m.next = "FAIL"
                with m.Elif(~blocked):
                    m.d.comb += [self.ld.start.eq(op == Opcode.LOAD), self.st.start.eq(op == Opcode.STORE),
                                 self.run.start.eq(op == Opcode.RUN), self.mv.start.eq(is_move),
                                 window_we.eq(is_window)]
                    with m.If((op == Opcode.STORE) | is_move):
                        m.d.sync += self.q_base.eq(_field(cmd, "q_base"))
                    with m.If(is_transfer):
                        m.d.sync += buffer_reg.eq(buffer)
                    with m.If(op == Opcode.RUN):
                        m.d.sync += run_pc.eq(pc)
                    if self.output_check:
                        with m.If((op == Opcode.STORE) | is_move):
                            m.d.sync += q_pc.eq(pc)
                    if vector:
                        m.d.comb += self.vec.start.eq(is_vector)
                    step = Mux(is_vector, 2, 1) if vector else 1  # a VECTOR takes its parameter block's slot too
                    m.d.sync += pc.eq(pc + step)
                    m.next = "READ"
                    with m.If(pc + step >= length if vector else pc + 1 == length):
                        m.next = "DRAIN"
                sdc_fail()
            with m.State("DRAIN"):
                with m.If(axi_err):
                    m.d.sync += fail(ERROR_AXI)
                    m.next = "FAIL"
                with m.Elif(win_err):
                    m.d.sync += fail(ERROR_WINDOW)
                    m.next = "FAIL"
                with m.Elif(~dma_busy & ~run_busy & ~sdc_stop_now & ~vec_busy if vector
                            else ~dma_busy & ~run_busy & ~sdc_stop_now):
                    m.d.comb += self.done.eq(1)
                    m.d.sync += running.eq(0)
                    m.next = "IDLE"
                sdc_fail()
            with m.State("FAIL"):
                with m.If(~dma_busy & ~run_busy & ~vec_busy if vector else ~dma_busy & ~run_busy):
                    m.d.comb += self.error.eq(1)
                    m.d.sync += running.eq(0)
                    m.next = "IDLE"
        with m.If(sdc_any & running):
            m.d.sync += [self.sdc_count.eq(self.sdc_count + sdc_add), self.sdc_pc.eq(sdc_at)]
        return m

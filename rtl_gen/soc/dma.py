"""The DMA engine: 2-D strided transfers between DRAM (AXI4) and the on-chip buffers.

One transfer at a time: ``rows`` DRAM rows of ``words`` buffer words, row ``r`` at byte
``addr + r * stride``, word ``j`` of row ``r`` at buffer word ``buf_addr + r * row_step + j *
word_step`` (the command format of :mod:`accel_spec.isa`). A buffer word is ``beats`` AXI
beats in DRAM (lane bytes of ``accel_spec.isa.dram_lane_bytes``); the top converts between
DRAM words and buffer words by wiring. A transfer of fewer ``beats`` than
``max_beats`` moves a word's first beats (its first lanes: a narrow word, ``accel_spec.isa``'s
``lanes``); a load writes the rest of the word as zero, a store never sends it.
A sliding load (``slide``, loads only, with ``slide_beats`` set; tap packing,
``perf_model.compiler.conv_pack``) shifts
each beat it receives into its word register, oldest beat out, and writes the last
``slide_beats`` beats received (the ifmap word's beats) as each word completes: narrow words of
``beats`` beats arrive and the word written holds the last ``slide_beats / beats`` of them,
oldest in the low lanes. Same timing.
:class:`DmaLoad` drives the read channels (AR, R),
:class:`DmaStore` the write channels (AW, W, B), so the two halves of the bus never conflict.
Both keep up to ``outstanding`` bursts in flight.

Timing (what ``perf_model.timing`` states as the DMA contract): ``start`` sampled at edge
``E0``; the burst issuer is started at ``E1`` (the row length in beats is computed at ``E0``)
and presents its first burst from ``E1`` on, one burst per cycle while fewer than
``outstanding`` are in flight. :class:`DmaLoad` takes every R beat the cycle it is valid
(``rready`` is always high) and writes a word the cycle its last beat arrives; ``busy`` falls
at the edge after the last beat. :class:`DmaStore` reads a word from the buffer whenever its
FIFO has room, sends beats of bursts whose address has been issued, and is done at the edge
after the last write response.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from accel_spec import isa
from accel_spec.errors import ConfigError
from rtl_gen.soc.axi import ADDR_BITS, BurstIssuer, axi4_channels

__all__ = ["DmaLoad", "DmaStore", "STORE_FIFO_WORDS", "TRANSFER_BITS"]

#: Width of ``rows``, ``words`` and the step fields.
TRANSFER_BITS = 32
#: Words the store FIFO holds, reads in flight included (``accel_spec.isa``: the requantised
#: read latency plus 2, so one-beat words still stream a beat a cycle).
STORE_FIFO_WORDS = isa.STORE_FIFO_WORDS


def _check(data_bytes: int, max_beats: int, outstanding: int) -> None:
    if data_bytes < 1 or data_bytes & (data_bytes - 1):
        raise ConfigError(f"AXI data bytes must be a power of two, not {data_bytes}")
    if max_beats < 1:
        raise ConfigError(f"beats per word must be >= 1, not {max_beats}")
    if outstanding < 1:
        raise ConfigError(f"outstanding bursts must be >= 1, not {outstanding}")


class _Transfer(wiring.Component):
    """Common ports and the word-address generator of both directions."""

    def __init__(self, *, data_bytes: int, max_beats: int, outstanding: int, buf_addr_bits: int,
                 extra: dict[str, wiring.Member]) -> None:
        _check(data_bytes, max_beats, outstanding)
        self.data_bytes = data_bytes
        self.max_beats = max_beats
        self.outstanding = outstanding
        self.word_bits = 8 * data_bytes * max_beats
        super().__init__({
            "start": In(1), "addr": In(ADDR_BITS), "stride": In(ADDR_BITS), "rows": In(TRANSFER_BITS),
            "words": In(TRANSFER_BITS), "beats": In(range(max_beats + 1)), "buf_addr": In(buf_addr_bits),
            "row_step": In(buf_addr_bits), "word_step": In(buf_addr_bits),
            "busy": Out(1), "axi_error": Out(1), "word_addr": Out(buf_addr_bits),
            **extra,
        })

    def _addresses(self, m: Module, step: Signal) -> tuple[Signal, Signal, Signal, Signal]:
        """Word address, row index and word-in-row registers advanced by ``step``; ``last`` word flag."""
        row_base = Signal(len(self.word_addr))
        j = Signal(TRANSFER_BITS)
        r = Signal(TRANSFER_BITS)
        rows = Signal(TRANSFER_BITS)
        words = Signal(TRANSFER_BITS)
        row_step = Signal(len(self.word_addr))
        word_step = Signal(len(self.word_addr))
        last = Signal()
        m.d.comb += last.eq((j == words - 1) & (r == rows - 1))
        with m.If(self.start & ~self.busy):
            m.d.sync += [row_base.eq(self.buf_addr), self.word_addr.eq(self.buf_addr), j.eq(0), r.eq(0),
                         rows.eq(self.rows), words.eq(self.words), row_step.eq(self.row_step),
                         word_step.eq(self.word_step)]
        with m.Elif(step):
            with m.If(j == words - 1):
                m.d.sync += [j.eq(0), r.eq(r + 1), row_base.eq(row_base + row_step),
                             self.word_addr.eq(row_base + row_step)]
            with m.Else():
                m.d.sync += [j.eq(j + 1), self.word_addr.eq(self.word_addr + word_step)]
        return j, r, last, words

    def _issuer(self, m: Module, name: str, in_flight: Signal, err: Signal) -> BurstIssuer:
        """The burst splitter, started the cycle after ``start`` with ``words * beats`` beats a row."""
        m.submodules[name] = iss = BurstIssuer(data_bytes=self.data_bytes)
        row_beats = Signal(TRANSFER_BITS)
        go = Signal()
        addr, stride, rows = Signal(ADDR_BITS), Signal(ADDR_BITS), Signal(TRANSFER_BITS)
        m.d.sync += go.eq(self.start & ~self.busy)
        with m.If(self.start & ~self.busy):
            m.d.sync += [row_beats.eq(self.words * self.beats), addr.eq(self.addr), stride.eq(self.stride),
                         rows.eq(self.rows)]
        # A presented burst stays presented until taken (AXI); an error stops new ones.
        presented = Signal()
        m.d.sync += presented.eq(iss.valid & ~iss.ready)
        m.d.comb += [
            iss.start.eq(go), iss.addr.eq(addr), iss.stride.eq(stride), iss.rows.eq(rows),
            iss.row_beats.eq(row_beats),
            iss.allow.eq(presented | (~err & (in_flight < self.outstanding))),
        ]
        return iss


class DmaLoad(_Transfer):
    """DRAM -> buffer (see the module docstring). ``word_we``/``word_addr``/``word``: the buffer write."""

    def __init__(self, *, data_bytes: int, max_beats: int, outstanding: int, buf_addr_bits: int,
                 slide_beats: int = 0) -> None:
        if not 0 <= slide_beats <= max_beats:
            raise ConfigError(f"slide_beats must be in 0 .. {max_beats} (0: no sliding load), not {slide_beats}")
        self.slide_beats = slide_beats
        read = axi4_channels(data_bytes, "read")
        super().__init__(data_bytes=data_bytes, max_beats=max_beats, outstanding=outstanding,
                         buf_addr_bits=buf_addr_bits,
                         extra={"word_we": Out(1), "word": Out(8 * data_bytes * max_beats), "slide": In(1),
                                **read})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        beat_bits = 8 * self.data_bytes
        in_flight = Signal(range(self.outstanding + 2))
        err = Signal()
        iss = self._issuer(m, "ar", in_flight, err)
        taken = self.rvalid & self.rready
        ends = taken & self.rlast
        issued = iss.valid & iss.ready
        m.d.sync += in_flight.eq(in_flight + issued - ends)
        m.d.comb += [
            self.araddr.eq(iss.burst_addr), self.arlen.eq(iss.burst_len), self.arsize.eq(exact_log2(self.data_bytes)),
            self.arburst.eq(1), self.arvalid.eq(iss.valid), iss.ready.eq(self.arready), self.rready.eq(1),
        ]
        beats = Signal.like(self.beats)
        beat = Signal.like(self.beats)
        word_done = Signal()
        m.d.comb += word_done.eq(taken & (beat == beats - 1))
        _, _, last, _ = self._addresses(m, word_done)
        # Beats of the word so far; the word is written the cycle its last beat arrives.
        partial = Signal(self.word_bits)
        slots = [Mux(beat == i, self.rdata, partial[i * beat_bits:(i + 1) * beat_bits])
                 for i in range(self.max_beats)]
        # A narrow word (fewer beats than the widest): the beats it does not have are zero lanes.
        lanes = [slot if i == 0 else Mux(beats > i, slot, 0) for i, slot in enumerate(slots)]
        # A sliding load: the register shifts a beat in per beat (the word is its last beats).
        slide = Signal()
        if self.slide_beats:
            slid = Cat(partial[beat_bits:self.slide_beats * beat_bits], self.rdata)
            word, kept = Mux(slide, slid, Cat(*lanes)), Mux(slide, slid, Cat(*slots))
        else:  # no sliding hardware: ``slide`` is ignored
            word, kept = Cat(*lanes), Cat(*slots)
        m.d.comb += [self.word.eq(word), self.word_we.eq(word_done & ~err)]
        with m.If(taken):
            m.d.sync += partial.eq(kept)
            m.d.sync += beat.eq(Mux(beat == beats - 1, 0, beat + 1))
            with m.If(self.rresp != 0):
                m.d.sync += [err.eq(1), self.axi_error.eq(1)]
        with m.If(self.start & ~self.busy):
            m.d.sync += [self.busy.eq(1), beats.eq(self.beats), beat.eq(0), err.eq(0), self.axi_error.eq(0),
                         slide.eq(self.slide)]
            with m.If((self.rows == 0) | (self.words == 0)):
                m.d.sync += self.busy.eq(0)
        with m.Elif(self.busy):
            finished = word_done & last
            drained = err & ~iss.active & (in_flight == 0)  # after an error: once nothing is in flight
            with m.If(finished | drained):
                m.d.sync += self.busy.eq(0)
        return m


class DmaStore(_Transfer):
    """Buffer -> DRAM (see the module docstring).

    ``word_read``/``word_addr``: a buffer read this cycle; ``word`` must carry that word (in DRAM
    format) ``latency`` cycles later, ``latency`` being :attr:`latencies` ``[requant]``.
    ``q_index``: the row (``q_by_row``) or word-in-row index of the word being read, for the
    output stage's parameter select; ``requanting``: the transfer's ``requant``, held.
    """

    def __init__(self, *, data_bytes: int, max_beats: int, outstanding: int, buf_addr_bits: int,
                 latencies: tuple[int, int]) -> None:
        self.latencies = latencies
        if max(latencies) + 1 > STORE_FIFO_WORDS:
            raise ConfigError(f"buffer read latency must be below {STORE_FIFO_WORDS}, not {max(latencies)}")
        write = axi4_channels(data_bytes, "write")
        super().__init__(data_bytes=data_bytes, max_beats=max_beats, outstanding=outstanding,
                         buf_addr_bits=buf_addr_bits,
                         extra={"requant": In(1), "q_by_row": In(1), "word_read": Out(1), "requanting": Out(1),
                                "q_index": Out(TRANSFER_BITS), "word": In(8 * data_bytes * max_beats), **write})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        beat_bits = 8 * self.data_bytes
        in_flight = Signal(range(self.outstanding + 2))
        err = Signal()
        iss = self._issuer(m, "aw", in_flight, err)
        issued = iss.valid & iss.ready
        m.d.sync += in_flight.eq(in_flight + issued - (self.bvalid & self.bready))
        m.d.comb += [
            self.awaddr.eq(iss.burst_addr), self.awlen.eq(iss.burst_len), self.awsize.eq(exact_log2(self.data_bytes)),
            self.awburst.eq(1), self.awvalid.eq(iss.valid), iss.ready.eq(self.awready), self.bready.eq(1),
            self.wstrb.eq((1 << self.data_bytes) - 1),
        ]
        # Lengths of issued bursts whose beats are not all sent (W follows AW, in order).
        m.submodules.lens = lens = fifo.SyncFIFO(width=8, depth=self.outstanding + 1)
        m.d.comb += [lens.w_en.eq(issued), lens.w_data.eq(iss.burst_len)]
        # Word reads: one per cycle while the FIFO (words held + reads in flight) has room.
        m.submodules.words = words = fifo.SyncFIFO(width=self.word_bits, depth=STORE_FIFO_WORDS)
        requant = Signal()
        q_by_row = Signal()
        reading = Signal()  # words remain to be read
        pipe = Signal(max(self.latencies))
        in_pipe = Signal(range(STORE_FIFO_WORDS + 1))
        room = (words.level + in_pipe) < STORE_FIFO_WORDS
        read = Signal()
        m.d.comb += [read.eq(reading & room), self.word_read.eq(read)]
        j, r, last, _ = self._addresses(m, read)
        m.d.comb += [self.q_index.eq(Mux(q_by_row, r, j)), self.requanting.eq(requant)]
        m.d.sync += pipe.eq(Cat(read, pipe[:-1]))
        arrive = Mux(requant, pipe[self.latencies[1] - 1], pipe[self.latencies[0] - 1])
        m.d.sync += in_pipe.eq(in_pipe + read - arrive)
        m.d.comb += [words.w_en.eq(arrive), words.w_data.eq(self.word)]
        # Beats: of the head word, for bursts already issued.
        beats = Signal.like(self.beats)
        beat = Signal.like(self.beats)
        in_burst = Signal(8)
        send = Signal()
        m.d.comb += [
            self.wvalid.eq(words.r_rdy & lens.r_rdy),
            send.eq(self.wvalid & self.wready),
            self.wlast.eq(in_burst == lens.r_data),
            self.wdata.eq(words.r_data.word_select(beat, beat_bits) if self.max_beats > 1 else words.r_data),
            words.r_en.eq(send & (beat == beats - 1)),
            lens.r_en.eq(send & self.wlast),
        ]
        with m.If(send):
            m.d.sync += [beat.eq(Mux(beat == beats - 1, 0, beat + 1)),
                         in_burst.eq(Mux(self.wlast, 0, in_burst + 1))]
        with m.If(self.bvalid & self.bready & (self.bresp != 0)):
            m.d.sync += [err.eq(1), self.axi_error.eq(1)]
        with m.If(self.start & ~self.busy):
            empty = (self.rows == 0) | (self.words == 0)
            m.d.sync += [self.busy.eq(~empty), reading.eq(~empty), beats.eq(self.beats), beat.eq(0), in_burst.eq(0),
                         requant.eq(self.requant), q_by_row.eq(self.q_by_row), err.eq(0), self.axi_error.eq(0)]
        with m.Elif(self.busy):
            with m.If(read & last):
                m.d.sync += reading.eq(0)
            # Done once every issued burst is answered and nothing is left to issue or send.
            quiet = ~iss.active & ~iss.start & (in_flight == 0)
            with m.If(quiet & ~reading & (in_pipe == 0) & ~words.r_rdy):
                m.d.sync += self.busy.eq(0)
        return m


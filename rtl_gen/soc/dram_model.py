"""A simulation model of DRAM behind an AXI4 subordinate port: fixed latency, one beat a cycle.

Not for synthesis: the testbench's memory, with timing simple enough to state exactly (the
``perf_model.timing`` DMA contract counts on it)::

    read   an AR accepted in cycle t (arvalid & arready) presents its first R beat in cycle
           t + latency + 1 at the earliest; beats follow one per cycle while rready is high;
           bursts are answered in order, a burst's first beat right after the previous
           burst's last when its latency has passed.
    write  W beats are taken one per cycle (wready) for the oldest accepted AW; its B response
           is valid ``latency + 1`` cycles after its last W beat at the earliest, in order.

``rate`` (``(num, den)``: ``num / den`` bytes a cycle, below ``data_bytes``) paces the data
beats of both directions with one credit counter, in ``1 / den`` bytes: ``num`` more each
cycle, ``data_bytes * den`` less for each beat moved (an R beat as it is loaded into the output
register, a W beat as it is taken), saturating at ``data_bytes * den + num - 1``, full at reset;
a beat moves only while the credit is at least ``data_bytes * den`` (reads first, a write beat
in the same cycle needs credit for both). ``perf_model.dma_timing.Pace`` is the same rule.

``arready``/``awready`` are high while fewer than ``queue`` requests wait. An address beyond
the memory answers DECERR (reads return 0, writes are dropped). The ``bd_*`` port is the
testbench's backdoor: ``bd_we`` writes ``bd_wdata`` to word ``bd_addr`` at the clock edge,
``bd_rdata`` is word ``bd_addr`` (combinational); an Amaranth testbench reaches the words
without a clock through ``data``. ``stall_seed`` (tests of back-pressure) holds
every channel back on pseudo-random cycles, so the timing above no longer holds.

The simulation top (``rtl_gen.soc.sim_system``) adds a file backdoor around this model's word
array: one clock loads a whole DRAM image from a hex file (``$readmemh``) or dumps a range of it
(``$writememh``), so a testbench moves an image in a few clocks instead of one per word. It exists
only in the simulation top: the exported design holds no DRAM model.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from accel_spec.errors import ConfigError
from rtl_gen.soc.axi import ADDR_BITS, axi4_signature

__all__ = ["DramModel"]

_DECERR = 3


class DramModel(wiring.Component):
    """AXI4 subordinate RAM of ``words`` words of ``data_bytes`` bytes (see the module docstring)."""

    def __init__(self, *, data_bytes: int, words: int, latency: int, queue: int = 16, stall_seed: int = 0,
                 rate: tuple[int, int] | None = None) -> None:
        if latency < 1 or queue < 1 or words < 2:
            raise ConfigError(
                f"DRAM model needs latency >= 1, queue >= 1, words >= 2 (got {latency}, {queue}, {words})")
        if rate is not None and not (rate[1] >= 1 and 0 < rate[0] < data_bytes * rate[1]):
            raise ConfigError(f"DRAM model rate must be num / den bytes a cycle, above 0 and below {data_bytes}, "
                              f"not {rate[0]} / {rate[1]}")
        self.rate = rate
        self.data_bytes = data_bytes
        self.words = words
        self.latency = latency
        self.queue = queue
        self.stall_seed = stall_seed
        self.addr_bits = ceil_log2(words)
        #: The word array. An Amaranth testbench may read and write it directly
        #: (``ctx.set(dram.data[i], word)``: no clock cycle, unlike ``bd_*``).
        self.data = memory.MemoryData(shape=8 * data_bytes, depth=words, init=[])
        super().__init__({
            "axi": In(axi4_signature(data_bytes)),
            "bd_addr": In(self.addr_bits), "bd_wdata": In(8 * data_bytes), "bd_we": In(1),
            "bd_rdata": Out(8 * data_bytes),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bus, shift = self.axi, exact_log2(self.data_bytes)
        m.submodules.mem = mem = memory.Memory(data=self.data)
        now = Signal(32)
        m.d.sync += now.eq(now + 1)
        # Back-pressure (tests): a 16-bit LFSR holds each channel back about half the cycles.
        lfsr = Signal(16, init=self.stall_seed or 1)
        m.d.sync += lfsr.eq(Cat(lfsr[1:], lfsr[0] ^ lfsr[2] ^ lfsr[3] ^ lfsr[5]))

        def go(bit: int) -> Signal:
            return lfsr[bit] if self.stall_seed else Const(1)

        # Pacing: one credit for the data beats of both directions (module docstring).
        read_ok, write_ok = Const(1), Const(1)
        read_moves, write_moves = Signal(), Signal()
        if self.rate is not None:
            num, den = self.rate
            need = self.data_bytes * den
            cap = need + num - 1
            credit = Signal(range(cap + num + 1), init=cap)
            read_ok = credit >= need
            write_ok = credit >= Mux(read_moves, 2 * need, need)
            after = Signal(range(cap + num + 1))
            m.d.comb += after.eq(credit + num - Mux(read_moves, need, 0) - Mux(write_moves, need, 0))
            m.d.sync += credit.eq(Mux(after > cap, cap, after))
        bd_w = mem.write_port()
        bd_r = mem.read_port(domain="comb")
        m.d.comb += [bd_w.addr.eq(self.bd_addr), bd_w.data.eq(self.bd_wdata), bd_w.en.eq(self.bd_we),
                     bd_r.addr.eq(self.bd_addr), self.bd_rdata.eq(bd_r.data)]

        def word_of(addr: Signal) -> tuple[Signal, Signal]:
            index = addr[shift:ADDR_BITS]
            return index[:self.addr_bits], index >= self.words

        # Reads.
        m.submodules.ar = ar = fifo.SyncFIFO(width=ADDR_BITS + 8 + 32, depth=self.queue)
        m.d.comb += [ar.w_en.eq(bus.arvalid & go(0)), ar.w_data.eq(Cat(bus.araddr, bus.arlen, now + self.latency)),
                     bus.arready.eq(ar.w_rdy & go(0))]
        head_addr, head_len, head_due = ar.r_data[:ADDR_BITS], ar.r_data[ADDR_BITS:ADDR_BITS + 8], ar.r_data[-32:]
        rd = mem.read_port(domain="comb")
        cur, left, active = Signal(ADDR_BITS), Signal(8), Signal()
        rvalid, rlast = Signal(), Signal()
        rdata, rresp = Signal(8 * self.data_bytes), Signal(2)
        m.d.comb += [bus.rvalid.eq(rvalid), bus.rlast.eq(rlast), bus.rdata.eq(rdata), bus.rresp.eq(rresp)]
        free = ~rvalid | bus.rready  # the output register is free (empty, or its beat taken now)
        adv = free & go(1) & read_ok  # ... and a next beat may be presented
        beat_addr = Signal(ADDR_BITS)
        begin = Signal()
        m.d.comb += [begin.eq(adv & ~active & ar.r_rdy & _reached(m, now, head_due)), ar.r_en.eq(begin)]
        m.d.comb += beat_addr.eq(cur)
        with m.If(begin):
            m.d.comb += beat_addr.eq(head_addr)
        index, out_of_range = word_of(beat_addr)
        m.d.comb += rd.addr.eq(index)
        with m.If(free):
            m.d.sync += rvalid.eq(0)
        m.d.comb += read_moves.eq(adv & (active | begin))
        with m.If(adv):
            m.d.sync += rvalid.eq(active | begin)
            with m.If(active | begin):
                m.d.sync += [rdata.eq(rd.data & ~out_of_range.replicate(len(rdata))),
                             rresp.eq(Mux(out_of_range, _DECERR, 0)), cur.eq(beat_addr + self.data_bytes)]
            with m.If(active):
                m.d.sync += [rlast.eq(left == 1), left.eq(left - 1), active.eq(left != 1)]
            with m.Elif(begin):
                m.d.sync += [rlast.eq(head_len == 0), left.eq(head_len), active.eq(head_len != 0)]

        # Writes.
        m.submodules.aw = aw = fifo.SyncFIFO(width=ADDR_BITS + 8, depth=self.queue)
        m.d.comb += [aw.w_en.eq(bus.awvalid & go(2)), aw.w_data.eq(Cat(bus.awaddr, bus.awlen)),
                     bus.awready.eq(aw.w_rdy & go(2))]
        w_cur, w_count, w_bad = Signal(ADDR_BITS), Signal(9), Signal()
        wr = mem.write_port(granularity=8)
        take = bus.wvalid & bus.wready
        addr = Signal(ADDR_BITS)
        m.d.comb += [bus.wready.eq(aw.r_rdy & go(3) & write_ok), write_moves.eq(take),
                     addr.eq(Mux(w_count == 0, aw.r_data[:ADDR_BITS], w_cur))]
        w_index, w_oor = word_of(addr)
        m.d.comb += [wr.addr.eq(w_index), wr.data.eq(bus.wdata),
                     wr.en.eq(bus.wstrb & (take & ~w_oor).replicate(self.data_bytes))]
        m.submodules.b = b = fifo.SyncFIFO(width=2 + 32, depth=self.queue)
        burst_end = take & (w_count == aw.r_data[ADDR_BITS:])
        m.d.comb += [aw.r_en.eq(burst_end), b.w_en.eq(burst_end),
                     b.w_data.eq(Cat(Mux(w_bad | w_oor, _DECERR, 0)[:2], now + self.latency))]
        with m.If(take):
            m.d.sync += [w_cur.eq(addr + self.data_bytes), w_count.eq(w_count + 1), w_bad.eq(w_bad | w_oor)]
            with m.If(burst_end):
                m.d.sync += [w_count.eq(0), w_bad.eq(0)]
        bvalid, bresp = Signal(), Signal(2)
        m.d.comb += [bus.bvalid.eq(bvalid), bus.bresp.eq(bresp), bus.bid.eq(0), bus.rid.eq(0)]
        b_free = ~bvalid | bus.bready
        b_begin = b_free & go(4) & b.r_rdy & _reached(m, now, b.r_data[2:])
        m.d.comb += b.r_en.eq(b_begin)
        with m.If(b_free):
            m.d.sync += [bvalid.eq(b_begin), bresp.eq(b.r_data[:2])]
        return m


def _reached(m: Module, now: Signal, due: object) -> Signal:
    """``now >= due`` on a wrapping 32-bit cycle counter (within 2**31 cycles)."""
    diff = Signal(32)
    m.d.comb += diff.eq(now - due)
    return ~diff[31]

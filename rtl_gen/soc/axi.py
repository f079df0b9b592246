"""AXI4 pieces shared by the DMA and the DRAM model: the bus signature and the burst splitter.

The bus is AXI4 with one ID (transactions complete in order), INCR bursts of full-width beats
only (``AxSIZE = log2(data bytes)``, every strobe set), no locks, caches or QoS; the signal
names (``araddr``, ``rvalid``, ...) are those of the AXI4 specification, so cocotbext-axi's
``AxiBus.from_prefix(dut, "m_axi")`` finds them on the accelerator's top.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from accel_spec.errors import ConfigError

__all__ = ["ADDR_BITS", "ID_BITS", "MAX_BURST", "PAGE_BYTES", "axi4_signature", "axi4_channels", "BurstIssuer"]

#: DRAM byte-address width.
ADDR_BITS = 32
#: Width of the (constant zero) transaction IDs: one ID, so transactions complete in order.
ID_BITS = 4
#: Beats per burst at most (AXI4 INCR).
MAX_BURST = 256
#: A burst never crosses a boundary of this many bytes (AXI4 rule).
PAGE_BYTES = 4096


def axi4_signature(data_bytes: int) -> wiring.Signature:
    """An AXI4 manager interface (``Out`` = driven by the manager) with ``data_bytes``-wide data."""
    exact_log2(data_bytes)
    return wiring.Signature({
        "awid": Out(ID_BITS), "bid": In(ID_BITS), "arid": Out(ID_BITS), "rid": In(ID_BITS),
        "awaddr": Out(ADDR_BITS), "awlen": Out(8), "awsize": Out(3), "awburst": Out(2), "awvalid": Out(1),
        "awready": In(1),
        "wdata": Out(8 * data_bytes), "wstrb": Out(data_bytes), "wlast": Out(1), "wvalid": Out(1), "wready": In(1),
        "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "araddr": Out(ADDR_BITS), "arlen": Out(8), "arsize": Out(3), "arburst": Out(2), "arvalid": Out(1),
        "arready": In(1),
        "rdata": In(8 * data_bytes), "rresp": In(2), "rlast": In(1), "rvalid": In(1), "rready": Out(1),
    })


def axi4_channels(data_bytes: int, side: str) -> dict[str, wiring.Member]:
    """The members of :func:`axi4_signature` on one side: ``"read"`` (AR, R) or ``"write"`` (AW,
    W, B), IDs left out (one ID, tied off by the top)."""
    prefixes = ("ar", "r") if side == "read" else ("aw", "w", "b")
    return {name: member for name, member in axi4_signature(data_bytes).members.items()
            if name.startswith(prefixes) and name not in ("awid", "bid", "arid", "rid")}


class BurstIssuer(wiring.Component):
    """Splits a 2-D transfer into AXI4 bursts and presents them one by one on an address channel.

    ``rows`` rows of ``row_beats`` beats each, row ``r`` at byte ``addr + r * stride``; a burst
    ends at its row's end, after :data:`MAX_BURST` beats, or at a :data:`PAGE_BYTES` boundary,
    whichever comes first. ``start`` (one cycle, while idle) samples the transfer; from the next
    cycle ``valid`` is high whenever a burst remains and ``allow`` is high, with ``addr`` and
    ``len`` (beats - 1, the AXI ``AxLEN``) of the next burst; a cycle with ``valid`` and
    ``ready`` issues it. ``allow`` may only fall after an issue (the caller's outstanding-depth
    limit), so ``valid`` never drops without a handshake. ``active`` is high while bursts remain.

    Ports: ``start``, ``addr``/``stride`` (bytes, multiples of ``data_bytes``), ``rows``,
    ``row_beats`` in; ``allow``, ``ready`` in; ``valid``, ``burst_addr``, ``burst_len``,
    ``active`` out.
    """

    def __init__(self, *, data_bytes: int, count_bits: int = 32) -> None:
        if data_bytes < 1 or data_bytes & (data_bytes - 1) or data_bytes > PAGE_BYTES:
            raise ConfigError(f"AXI data bytes must be a power of two up to {PAGE_BYTES}, not {data_bytes}")
        self.data_bytes = data_bytes
        super().__init__({
            "start": In(1), "addr": In(ADDR_BITS), "stride": In(ADDR_BITS), "rows": In(count_bits),
            "row_beats": In(count_bits), "allow": In(1), "ready": In(1),
            "valid": Out(1), "burst_addr": Out(ADDR_BITS), "burst_len": Out(8), "active": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        shift = exact_log2(self.data_bytes)
        page_beats = PAGE_BYTES // self.data_bytes
        row_addr = Signal(ADDR_BITS)
        cur = Signal(ADDR_BITS)
        left = Signal(len(self.row_beats))  # beats left in the current row
        rows_left = Signal(len(self.rows))  # rows after the current one
        stride = Signal(ADDR_BITS)
        row_beats = Signal(len(self.row_beats))
        active = Signal()
        in_page = Signal(range(page_beats + 1))
        m.d.comb += in_page.eq(page_beats - cur[shift:shift + exact_log2(page_beats)] if page_beats > 1 else 1)
        beats = Signal(range(MAX_BURST + 1))
        cap = Mux(in_page < MAX_BURST, in_page, MAX_BURST)
        m.d.comb += [
            beats.eq(Mux(left < cap, left, cap)),
            self.burst_addr.eq(cur),
            self.burst_len.eq(beats - 1),
            self.valid.eq(active & self.allow),
            self.active.eq(active),
        ]
        with m.If(self.start & ~active):
            nonempty = (self.rows != 0) & (self.row_beats != 0)
            m.d.sync += [
                active.eq(nonempty), row_addr.eq(self.addr), cur.eq(self.addr), stride.eq(self.stride),
                row_beats.eq(self.row_beats), left.eq(self.row_beats), rows_left.eq(self.rows - 1),
            ]
        with m.Elif(self.valid & self.ready):
            with m.If(left == beats):  # the row ends with this burst
                next_row = row_addr + stride
                m.d.sync += [row_addr.eq(next_row), cur.eq(next_row), left.eq(row_beats), rows_left.eq(rows_left - 1)]
                with m.If(rows_left == 0):
                    m.d.sync += active.eq(0)
            with m.Else():
                m.d.sync += [cur.eq(cur + (beats << shift)), left.eq(left - beats)]
        return m

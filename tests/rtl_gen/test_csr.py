# amaranth: UnusedElaboratable=no
"""The AXI4-Lite control registers in Amaranth's simulator, driven by ``axil_testlib.AxilMaster``.

Offsets and bit positions below are the register map of issue #13, written here from the
issue, not read from ``rtl_gen.soc.regmap``."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator
from axil_testlib import OKAY, ORDERS, SLVERR, AxilMaster

from accel_spec.config import Dataflow
from accel_spec.errors import RtlError
from rtl_gen import ControlRegisters, synth_component

ID, VERSION, CTRL, STATUS, ERROR_CODE, ERROR_PC = 0x000, 0x004, 0x008, 0x00C, 0x010, 0x014
IRQ_ENABLE, IRQ_STATUS, QUEUE_BASE_LO, QUEUE_BASE_HI, QUEUE_LEN = 0x018, 0x01C, 0x020, 0x024, 0x028
COUNTER_LO = {"total": 0x030, "compute": 0x038, "dma_stall": 0x040}
START, CLEAR = 1 << 0, 1 << 1
BUSY, DONE, ERROR = 1 << 0, 1 << 1, 1 << 2
PARAMS = {"rows": 4, "cols": 8, "dataflow": Dataflow.OS, "axi_data_bytes": 16, "ifmap_depth": 512,
          "weight_depth": 1024, "ofmap_depth": 2048, "queue_depth": 64}
CONFIG = {0x080: 4, 0x084: 8, 0x088: 1, 0x08C: 16, 0x090: 512, 0x094: 1024, 0x098: 2048, 0x09C: 64}

Bench = Callable[[Any, AxilMaster, ControlRegisters], Awaitable[None]]


def run(bench: Bench, *, watch: list[str] | None = None, **overrides: Any) -> dict[str, list[int]]:
    """Run ``bench(ctx, master, dut)`` on a fresh block; returns, per port in ``watch``, the
    cycles (edge numbers) at which it was high."""
    dut = ControlRegisters(**{**PARAMS, **overrides})
    seen: dict[str, list[int]] = {name: [] for name in watch or []}

    async def testbench(ctx: Any) -> None:
        master = AxilMaster(ctx, dut)
        await master.reset()
        await bench(ctx, master, dut)

    async def monitor(ctx: Any) -> None:
        cycle = 0
        while True:
            await ctx.tick()
            cycle += 1
            for name in seen:
                if ctx.get(getattr(dut, name)):
                    seen[name].append(cycle)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    if watch:
        sim.add_testbench(monitor, background=True)
    sim.run()
    return seen


async def pulse(ctx: Any, master: AxilMaster, port: Any) -> None:
    ctx.set(port, 1)
    await master.tick()
    ctx.set(port, 0)


def test_every_register_reads_its_reset_value_or_design_constant():
    want = {ID: 0xACCE1D5E, VERSION: 1, CTRL: 0, STATUS: 0, ERROR_CODE: 0, ERROR_PC: 0, IRQ_ENABLE: 0,
            IRQ_STATUS: 0, QUEUE_BASE_LO: 0, QUEUE_BASE_HI: 0, QUEUE_LEN: 0, **CONFIG}
    got: dict[int, int] = {}

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        for addr in want:
            got[addr] = await m.read_ok(addr)

    run(bench)
    assert got == want


@pytest.mark.parametrize("dataflow, code", [(Dataflow.WS, 0), (Dataflow.IS, 2)])
def test_dataflow_code(dataflow, code):
    got = []

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        got.append(await m.read_ok(0x088))

    run(bench, dataflow=dataflow)
    assert got == [code]


def test_rw_registers_read_back_and_drive_the_outputs():
    got: dict[str, int] = {}

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        await m.write_ok(QUEUE_BASE_LO, 0x89ABCDEF)
        await m.write_ok(QUEUE_BASE_HI, 0x01234567)
        await m.write_ok(QUEUE_LEN, 0xDEADBEEF)
        await m.write_ok(IRQ_ENABLE, 0xFFFFFFFF)
        for name, addr in (("lo", QUEUE_BASE_LO), ("hi", QUEUE_BASE_HI), ("len", QUEUE_LEN), ("en", IRQ_ENABLE)):
            got[name] = await m.read_ok(addr)
        got["queue_base"] = ctx.get(dut.queue_base)
        got["queue_len"] = ctx.get(dut.queue_len)

    run(bench)
    assert got == {"lo": 0x89ABCDEF, "hi": 0x01234567, "len": 0xDEADBEEF, "en": 0b111,
                   "queue_base": 0x0123456789ABCDEF, "queue_len": 0xDEADBEEF}


def test_wstrb_selects_bytes_for_every_strobe():
    old, new = 0x11223344, 0xAABBCCDD
    got: dict[int, int] = {}

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        for strb in range(16):
            await m.write_ok(QUEUE_LEN, old)
            await m.write_ok(QUEUE_LEN, new, strb)
            got[strb] = await m.read_ok(QUEUE_LEN)

    run(bench)
    for strb, value in got.items():
        mask = sum(0xFF << (8 * i) for i in range(4) if strb >> i & 1)
        assert value == (old & ~mask) | (new & mask), f"strobe {strb:04b}: 0x{value:08X}"


@pytest.mark.parametrize("order, gap", [(order, gap) for order in ORDERS for gap in (0, 3)
                                        if order != "together" or gap == 0])
def test_aw_and_w_in_any_order(order, gap):
    got = []

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        for value in (0x5A5A0001, 0x0000A5A5):
            resp = await m.write(QUEUE_LEN, value, order=order, gap=gap)
            got.append((resp, await m.read_ok(QUEUE_LEN)))

    run(bench)
    assert got == [(OKAY, 0x5A5A0001), (OKAY, 0x0000A5A5)]


def test_writes_to_read_only_registers_are_ignored_with_okay():
    got = []

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        for addr in (ID, VERSION, STATUS, ERROR_CODE, ERROR_PC, COUNTER_LO["total"], 0x080, 0x09C):
            resp = await m.write(addr, 0xFFFFFFFF)
            got.append((addr, resp, await m.read_ok(addr)))

    run(bench)
    want = {ID: 0xACCE1D5E, VERSION: 1, STATUS: 0, ERROR_CODE: 0, ERROR_PC: 0, COUNTER_LO["total"]: 0, **CONFIG}
    assert got == [(addr, OKAY, want[addr]) for addr, _, _ in got]


@pytest.mark.parametrize("addr", [0x02C, 0x048, 0x07C, 0x0A0, 0xFFC])
def test_unmapped_address_answers_slverr_and_changes_nothing(addr):
    got = []

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        await m.write_ok(QUEUE_LEN, 7)
        await m.write_ok(QUEUE_BASE_LO, 9)
        got.append(await m.write(addr, 0xFFFFFFFF))
        got.append(await m.read(addr))
        got.append(await m.read(QUEUE_LEN))
        got.append(await m.read(QUEUE_BASE_LO))

    run(bench)
    assert got == [SLVERR, (0, SLVERR), (7, OKAY), (9, OKAY)]


def test_low_address_bits_are_ignored():
    got = []

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        await m.write_ok(QUEUE_LEN | 3, 0x1234)
        got.append(await m.read_ok(QUEUE_LEN | 1))

    run(bench)
    assert got == [0x1234]


def test_write_back_pressure_holds_the_response_and_the_next_write():
    log: dict[str, Any] = {}

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        await m.send("aw", "w", payload={"awaddr": QUEUE_BASE_LO, "wdata": 0x11, "wstrb": 0xF})
        await m.send("aw", "w", payload={"awaddr": QUEUE_BASE_HI, "wdata": 0x22, "wstrb": 0xF})
        ctx.set(m.sig("awvalid"), 1)  # a third write's address, which must wait
        ctx.set(m.sig("awaddr"), QUEUE_LEN)
        stalled = []
        for _ in range(6):
            stalled.append((ctx.get(dut.s_axil_awready), ctx.get(dut.s_axil_wready), ctx.get(dut.s_axil_bvalid),
                            ctx.get(dut.queue_base)))
            await m.tick()
        log["stalled"] = stalled
        ctx.set(m.sig("awvalid"), 0)
        log["b1"] = await m.receive("b", 2)
        log["b2"] = await m.receive("b", 3)
        log["queue_base"] = ctx.get(dut.queue_base)
        log["len"] = await m.read_ok(QUEUE_LEN)

    run(bench)
    assert log["stalled"] == [(0, 0, 1, 0x11)] * 6  # second write held, not applied; AW and W full
    assert log["b1"] == {"resp": OKAY} and log["b2"] == {"resp": OKAY}
    assert log["queue_base"] == 0x22_00000011
    assert log["len"] == 0  # the withdrawn third address never wrote


def test_read_back_pressure_holds_data_and_back_to_back_reads_are_in_order():
    got = []

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        await m.write_ok(QUEUE_LEN, 0xCAFE)
        await m.send("ar", payload={"araddr": ID})
        ctx.set(m.sig("arvalid"), 1)  # the next read's address waits while R is not taken
        ctx.set(m.sig("araddr"), QUEUE_LEN)
        ready = []
        for _ in range(4):
            ready.append(ctx.get(dut.s_axil_arready))
            await m.tick()
        got.append(ready)
        ctx.set(m.sig("arvalid"), 0)
        got.append(await m.receive("r", 3))  # receive() checks RDATA/RRESP stay still
        for addr in (QUEUE_LEN, ID, 0x084, 0x050, QUEUE_LEN):
            got.append(await m.read(addr, rready_delay=2))

    run(bench)
    assert got == [[0, 0, 0, 0], {"resp": OKAY, "data": 0xACCE1D5E},
                   (0xCAFE, OKAY), (0xACCE1D5E, OKAY), (8, OKAY), (0, SLVERR), (0xCAFE, OKAY)]


def test_start_pulses_once_and_is_ignored_while_busy_or_unstrobed():
    marks: dict[str, int] = {}

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        await m.write_ok(CTRL, START)
        marks["first"] = m.cycles
        ctx.set(dut.busy, 1)
        await m.write_ok(CTRL, START)
        await m.tick(2)
        ctx.set(dut.busy, 0)
        await m.write_ok(CTRL, CLEAR)
        await m.write_ok(CTRL, START, strb=0b1110)  # byte 0 not strobed
        await m.tick(2)
        marks["quiet_end"] = m.cycles
        await m.write_ok(CTRL, START | 0xFFFFFF00)
        await m.tick(2)

    seen = run(bench, watch=["start"])["start"]
    assert len(seen) == 2, seen
    assert seen[0] <= marks["first"] and marks["quiet_end"] < seen[1]


def test_done_and_error_are_sticky_until_clear_or_start():
    got: list[tuple[str, int]] = []

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        async def status(label: str) -> None:
            got.append((label, await m.read_ok(STATUS)))

        ctx.set(dut.busy, 1)
        await status("busy")
        ctx.set(dut.busy, 0)
        await pulse(ctx, m, dut.done)
        await status("done")
        await status("done again")
        await m.write_ok(CTRL, CLEAR)
        await status("cleared")
        ctx.set(dut.error_code, 3)
        ctx.set(dut.error_pc, 17)
        await pulse(ctx, m, dut.error)
        ctx.set(dut.error_code, 9)  # latched at the pulse, later values do not matter
        ctx.set(dut.error_pc, 99)
        await status("error")
        got.append(("code", await m.read_ok(ERROR_CODE)))
        got.append(("pc", await m.read_ok(ERROR_PC)))
        await m.write_ok(CTRL, CLEAR)
        await status("cleared")
        got.append(("code", await m.read_ok(ERROR_CODE)))
        got.append(("pc", await m.read_ok(ERROR_PC)))
        await pulse(ctx, m, dut.done)
        await m.write_ok(CTRL, START)
        await status("started")

    run(bench)
    assert got == [("busy", BUSY), ("done", DONE), ("done again", DONE), ("cleared", 0), ("error", ERROR),
                   ("code", 3), ("pc", 17), ("cleared", 0), ("code", 0), ("pc", 0), ("started", 0)]


def test_irq_is_the_level_of_enabled_status_bits_and_w1c_clears():
    got: list[tuple[str, int, int]] = []

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        async def note(label: str) -> None:
            got.append((label, await m.read_ok(IRQ_STATUS), ctx.get(dut.irq)))

        await pulse(ctx, m, dut.done)
        await note("done, disabled")
        await m.write_ok(IRQ_ENABLE, 0b01)
        await note("done, enabled")
        await m.write_ok(IRQ_STATUS, 0b10)
        await note("w1c other bit")
        await m.write_ok(IRQ_STATUS, 0b01, strb=0b1110)
        await note("w1c unstrobed")
        await m.write_ok(IRQ_STATUS, 0b01)
        await note("w1c done")
        await pulse(ctx, m, dut.error)
        await note("error, disabled")
        await m.write_ok(IRQ_ENABLE, 0b11)
        await note("error, enabled")
        await m.write_ok(CTRL, CLEAR)
        await note("after CLEAR")
        await m.write_ok(IRQ_STATUS, 0xFFFFFFFF)
        await note("w1c all")

    run(bench)
    assert got == [("done, disabled", 0b01, 0), ("done, enabled", 0b01, 1), ("w1c other bit", 0b01, 1),
                   ("w1c unstrobed", 0b01, 1), ("w1c done", 0, 0), ("error, disabled", 0b10, 0),
                   ("error, enabled", 0b10, 1), ("after CLEAR", 0b10, 1), ("w1c all", 0, 0)]


def test_event_wins_over_a_clear_in_the_same_cycle():
    got = []

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        await pulse(ctx, m, dut.done)
        # The write takes effect the cycle after AW and W are both accepted: pulse done then.
        await m.send("aw", "w", payload={"awaddr": IRQ_STATUS, "wdata": 0b01, "wstrb": 0xF})
        await pulse(ctx, m, dut.done)
        await m.receive("b")
        got.append(await m.read_ok(IRQ_STATUS))

    run(bench)
    assert got == [0b01]


@pytest.mark.parametrize("name", sorted(COUNTER_LO))
def test_reading_lo_snapshots_hi(name):
    got = []

    async def bench(ctx: Any, m: AxilMaster, dut: ControlRegisters) -> None:
        for other in COUNTER_LO:
            ctx.set(getattr(dut, f"cycles_{other}"), 0x7777_7777_7777_7777)
        port = getattr(dut, f"cycles_{name}")
        ctx.set(port, 0x1_FFFF_FFFF)
        lo = await m.read_ok(COUNTER_LO[name])
        ctx.set(port, 0x2_0000_0000)  # the carry lands between the two reads
        hi = await m.read_ok(COUNTER_LO[name] + 4)
        got.append(hi << 32 | lo)
        ctx.set(port, 0xABCD_0123_4567_89AB)
        lo = await m.read_ok(COUNTER_LO[name])
        hi = await m.read_ok(COUNTER_LO[name] + 4)
        got.append(hi << 32 | lo)

    run(bench)
    assert got == [0x1_FFFF_FFFF, 0xABCD_0123_4567_89AB]


@pytest.mark.parametrize("bad, message", [
    ({"rows": 0}, r"rows must be a positive integer below 2\*\*32, not 0"),
    ({"queue_depth": 1 << 32}, r"queue_depth must be a positive integer below 2\*\*32, not 4294967296"),
    ({"cols": True}, r"cols must be a positive integer below 2\*\*32, not True"),
    ({"dataflow": "ws"}, r"dataflow must be a Dataflow \(ws, os, is\), not 'ws'"),
])
def test_bad_parameters_are_refused_with_the_rule(bad, message):
    with pytest.raises(RtlError, match=message):
        ControlRegisters(**{**PARAMS, **bad})


AXIL_PORTS = ("s_axil_awaddr s_axil_awvalid s_axil_awready s_axil_wdata s_axil_wstrb s_axil_wvalid s_axil_wready "
              "s_axil_bresp s_axil_bvalid s_axil_bready s_axil_araddr s_axil_arvalid s_axil_arready s_axil_rdata "
              "s_axil_rresp s_axil_rvalid s_axil_rready").split()


def test_verilog_has_the_axil_port_names_and_widths():
    text = verilog.convert(ControlRegisters(**PARAMS), name="accel_csr", emit_src=False)
    header = re.search(r"module accel_csr\((.*?)\);", text, re.S)
    assert header is not None
    ports = {p.strip() for p in header.group(1).split(",")}
    internal = {"start", "busy", "done", "error", "error_code", "error_pc", "queue_base", "queue_len",
                "cycles_total", "cycles_compute", "cycles_dma_stall", "irq", "clk", "rst",
                "sdc_event", "sdc_count", "sdc_pc", "sdc_stop"}
    assert ports == set(AXIL_PORTS) | internal
    widths = {"s_axil_awaddr": 12, "s_axil_araddr": 12, "s_axil_wdata": 32, "s_axil_rdata": 32, "s_axil_wstrb": 4,
              "s_axil_bresp": 2, "s_axil_rresp": 2, "queue_base": 64, "cycles_total": 64, "error_code": 4}
    for port, bits in widths.items():
        assert re.search(rf"^\s*(input|output) (wire |reg )?\[{bits - 1}:0\] {port};", text, re.M), port


def test_synthesis_keeps_exactly_the_documented_state():
    figures = synth_component(ControlRegisters(**PARAMS), "accel_csr")
    write_side = 10 + 1 + 32 + 4 + 1 + 1 + 1  # AW index (bits 11:2) + held, W data/strobe + held, bvalid, SLVERR
    read_side = 1 + 1 + 32  # rvalid, SLVERR, rdata
    # start, DONE/ERROR, code, pc, irq en/status (DONE, ERROR, SDC), queue, snapshots, SDC_CTRL.STOP
    state = 1 + 2 + 4 + 32 + 3 + 3 + 64 + 32 + 3 * 32 + 1
    assert figures["flops"] == write_side + read_side + state
    assert figures["cells"] > figures["flops"]

"""cocotb test module (not collected by pytest): cocotbext-axi's ``AxiLiteMaster`` drives the
exported ``ControlRegisters`` Verilog; what it saw goes to ``$CSR_OUT`` as JSON for
``test_csr_cocotb.py`` to check."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

INPUTS = ("busy", "done", "error", "error_code", "error_pc", "cycles_total", "cycles_compute", "cycles_dma_stall")


@cocotb.test()
async def registers_through_cocotbext_axi(dut) -> None:
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for name in INPUTS:
        getattr(dut, name).value = 0
    dut.rst.value = 1
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    seen: dict[str, object] = {}
    seen["id"] = (await master.read_dword(0x000))
    seen["rows"] = (await master.read_dword(0x080))
    await master.write_dword(0x028, 0x11223344)
    await master.write(0x029, b"\xab")  # one byte: WSTRB 0b0010
    seen["queue_len"] = await master.read_dword(0x028)
    seen["queue_len_port"] = int(dut.queue_len.value)
    unmapped = await master.read(0x0A0, 4)
    seen["unmapped_read_resp"] = int(unmapped.resp)
    seen["unmapped_write_resp"] = int((await master.write(0x0A0, b"\x01\x00\x00\x00")).resp)
    dut.cycles_total.value = 0x0000_0005_FFFF_FFFE
    seen["cycles_total"] = await master.read_qword(0x030)  # LO then HI
    await master.write_dword(0x018, 0b11)  # IRQ_ENABLE
    await master.write_dword(0x008, 0b1)  # START
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    dut.done.value = 1
    await RisingEdge(dut.clk)
    dut.done.value = 0
    await RisingEdge(dut.clk)
    seen["irq_after_done"] = int(dut.irq.value)
    seen["status"] = await master.read_dword(0x00C)
    await master.write_dword(0x01C, 0b01)  # W1C DONE
    await RisingEdge(dut.clk)
    seen["irq_after_w1c"] = int(dut.irq.value)
    Path(os.environ["CSR_OUT"]).write_text(json.dumps(seen))

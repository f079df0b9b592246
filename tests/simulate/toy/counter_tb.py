"""cocotb test module for the plumbing tests: drives ``counter.v`` and writes what it saw."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge


@cocotb.test()
async def count(dut) -> None:
    n = int(os.environ["TOY_N"])
    wdata = int(os.environ["TOY_WDATA"])
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.start.value = 0
    dut.n.value = 0
    dut.wdata.value = 0
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    dut.n.value = n
    dut.wdata.value = wdata
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    await RisingEdge(dut.done)
    await FallingEdge(dut.clk)
    try:
        _ = dut.hidden
        hidden_visible = True
    except AttributeError:
        hidden_visible = False
    out = {"cycles": int(dut.cycles.value), "rdata": int(dut.rdata.value), "hidden_visible": hidden_visible}
    Path(os.environ["TOY_OUT"]).write_text(json.dumps(out))

"""cocotb testbench of the exported SoC block, driven through AXI as an SoC would drive it.

Needs only numpy, cocotb and cocotbext-axi. Reads ``axi_cases.json`` beside this file; for
each case it puts the DRAM image (program, operands, output-stage parameters) into
cocotbext-axi's ``AxiRam`` on the ``m_axi`` port, programs the control registers through an
``AxiLiteMaster`` on ``s_axil`` (QUEUE_BASE, QUEUE_LEN, IRQ_ENABLE, CTRL.START per
queue-load), waits for ``irq``, reads the status and cycle counters, clears the interrupt and
compares C in the RAM with numpy's result. Results go to ``tb_axi_results.json``.

The RAM's timing is cocotbext-axi's, not the DRAM model of ``accel-dse simulate``: the data
must match exactly; the counters are reported beside the model's figure for that DRAM model.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, First, RisingEdge, Timer
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

EXPORT_DIR = Path(os.environ.get("ACCEL_EXPORT_DIR", str(Path(__file__).resolve().parent)))
PERIOD_NS = 10


def unpack(layout: dict[str, Any], raw: bytes) -> np.ndarray:
    """The C matrix from its DRAM bytes (rows of little-endian lanes, or of int4 lanes two a byte,
    element ``2i`` in the low nibble, when ``packed``; transposed for IS)."""
    if layout.get("packed"):
        b = np.frombuffer(raw, dtype=np.uint8).astype(np.int64)
        nib = np.stack([b & 0xF, b >> 4], axis=1).reshape(-1)
        rows = (nib - ((nib & 0x8) << 1)).reshape(layout["rows"], layout["row_elems"])
    else:
        rows = np.frombuffer(raw, dtype=f"<i{layout['elem_bytes']}").reshape(layout["rows"], layout["row_elems"])
    p, q = layout["shape"]
    stored = rows[:, :(p if layout["transposed"] else q)].astype(np.int64)
    return stored.T if layout["transposed"] else stored


@cocotb.test()
async def run_cases_through_axi(dut: Any) -> None:
    spec = json.loads((EXPORT_DIR / "axi_cases.json").read_text("utf-8"))
    regs = spec["regs"]
    Clock(dut.clk, PERIOD_NS, unit="ns").start()  # cocotb 2: the clock keeps its own task
    dut.rst.value = 1
    size = 1 << max(16, max(len(base64.b64decode(c["image"])) for c in spec["cases"]).bit_length())
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=size)
    regs_bus = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    report: dict[str, Any] = {"cases": [], "problems": []}
    for index, case in enumerate(spec["cases"]):
        image = base64.b64decode(case["image"])
        ram.write(0, image)
        await regs_bus.write_dword(regs["IRQ_ENABLE"], 0b11)
        totals = [0, 0, 0]
        code = 0
        for base, length in case["chunks"]:
            await regs_bus.write_dword(regs["QUEUE_BASE_LO"], base)
            await regs_bus.write_dword(regs["QUEUE_BASE_HI"], 0)
            await regs_bus.write_dword(regs["QUEUE_LEN"], length)
            await regs_bus.write_dword(regs["CTRL"], 1)
            timer = Timer(PERIOD_NS * (20 * case["model_total_cycles"] + 100_000), unit="ns")
            if await First(RisingEdge(dut.irq), timer) is timer:
                report["problems"].append(f"case {index}: no interrupt")
                break
            for i, name in enumerate(("CYCLES_TOTAL", "CYCLES_COMPUTE", "CYCLES_DMA_STALL")):
                totals[i] += await regs_bus.read_qword(regs[f"{name}_LO"])
            code = await regs_bus.read_dword(regs["ERROR_CODE"])
            await regs_bus.write_dword(regs["IRQ_STATUS"], 0b11)
            if code:
                report["problems"].append(f"case {index}: error code {code}")
                break
        layout = case["c"]
        nbytes = layout["rows"] * layout["row_elems"] * layout["elem_bytes"] // (2 if layout.get("packed") else 1)
        got = unpack(layout, ram.read(layout["base"], nbytes))
        wrong = int((got != np.asarray(case["expected"], dtype=np.int64)).sum())
        if wrong:
            report["problems"].append(f"case {index}: {wrong} of {got.size} outputs differ from numpy")
        report["cases"].append({"index": index, "m": case["m"], "k": case["k"], "n": case["n"],
                                "requant": case["requant"], "mismatches": wrong, "error_code": code,
                                "cycles_total": totals[0], "cycles_compute": totals[1], "cycles_stall": totals[2],
                                "model_compute_cycles": case["model_compute_cycles"],
                                "model_total_cycles_dram_model": case["model_total_cycles"],
                                "model_dram_latency": case.get("model_dram_latency")})
        if totals[1] != case["model_compute_cycles"]:
            report["problems"].append(f"case {index}: the array was busy {totals[1]} cycles, the model says "
                                      f"{case['model_compute_cycles']}")
    (Path.cwd() / "tb_axi_results.json").write_text(json.dumps(report, indent=2), "utf-8")
    if report["problems"]:
        raise AssertionError("; ".join(report["problems"]))

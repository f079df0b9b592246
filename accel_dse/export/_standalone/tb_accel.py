"""cocotb testbench of an exported accel-dse accelerator (needs only cocotb and numpy).

Reads ``design.json`` beside this file: the port names, the buffer layouts, the cycle formula
and the GEMMs to check. For each GEMM it loads random signed operands through the host port,
pulses ``start``, waits for ``done``, reads the ``cycles`` register and the output buffer, and
compares the output with numpy's ``A @ B`` (wrapped to ``acc_bits``, accumulated when asked)
and the cycles with the formula. Results go to ``tb_results.json`` in the test directory.

Inputs are driven just after falling clock edges (sampled by the next rising edge); all
inputs are driven to 0 and reset held for two cycles first (Icarus starts with X).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, First, RisingEdge, Timer

EXPORT_DIR = Path(os.environ.get("ACCEL_EXPORT_DIR", str(Path(__file__).resolve().parent)))
PERIOD_NS = 10


#: The convolution window inputs of the core (driven 0: this testbench runs packed GEMMs).
WINDOW_PORTS = ("window", "in_w", "in_h", "out_w", "stride_h", "stride_w", "dilation_h", "dilation_w", "kw", "pad_top",
                "pad_left", "cblocks", "origin", "px_step", "row_step_w", "kx_step", "ky_step", "image_rows")

class CheckFailed(Exception):
    """The design computed a wrong value or took another number of cycles."""


def load_design() -> dict[str, Any]:
    """The export's ``design.json``."""
    return json.loads((EXPORT_DIR / "design.json").read_text("utf-8"))


def formula_cycles(timing: dict[str, Any], rows: int, cols: int, dims: dict[str, int]) -> int:
    """Cycles of one run from the formula in ``design.json`` (``timing`` section)."""
    dr, dc, ds = (dims[timing[key]] for key in ("rows_dim", "cols_dim", "stream_dim"))
    if min(dims.values()) == 0:
        return timing["run_overhead"]
    folds = math.ceil(dr / rows) * math.ceil(dc / cols)
    if not timing.get("shadow_stationary", False):
        return folds * (ds + 2 * rows + cols - 2 + timing["fold_overhead"]) + timing["run_overhead"]
    fold = max(ds, rows, 2)
    tail = (1 if timing["dataflow"] == "os" else ds - fold) + 2 * rows + cols
    return folds * fold + tail + timing["run_overhead"]


def wrap(values: np.ndarray, bits: int) -> np.ndarray:
    """Two's complement wrap of int64 ``values`` to ``bits`` bits."""
    if bits >= 64:
        return values
    half = 1 << (bits - 1)
    return ((values + half) % (1 << bits)) - half


def to_words(matrix: np.ndarray, lanes: int, bits: int) -> list[int]:
    """Blocked layout: word ``blk * P + p`` holds ``matrix[p, blk*lanes:(blk+1)*lanes]`` packed."""
    p, q = matrix.shape
    blocks = -(-q // lanes)
    mask = (1 << bits) - 1
    words = []
    for blk in range(blocks):
        for row in range(p):
            word = 0
            for lane in range(lanes):
                col = blk * lanes + lane
                if col < q:
                    word |= (int(matrix[row, col]) & mask) << (lane * bits)
            words.append(word)
    return words


def from_words(words: list[int], p: int, q: int, lanes: int, bits: int) -> np.ndarray:
    """Inverse of :func:`to_words` for signed ``bits``-bit lanes: the ``p x q`` matrix."""
    out = np.zeros((p, q), dtype=np.int64)
    mask = (1 << bits) - 1
    for index, word in enumerate(words):
        blk, row = divmod(index, p)
        for lane in range(lanes):
            col = blk * lanes + lane
            if col < q:
                value = (word >> (lane * bits)) & mask
                out[row, col] = value - (1 << bits) if value >> (bits - 1) else value
    return out


def operand(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The matrix a buffer holds, by its ``holds`` entry in design.json."""
    return {"A": a, "A^T": a.T, "B": b, "B^T": b.T}[name]


class Port:
    """The accelerator's host port and run controls."""

    def __init__(self, dut: Any, design: dict[str, Any]) -> None:
        self.dut = dut
        self.select = design["host_sel"]
        self.falling = FallingEdge(dut.clk)

    async def reset(self) -> None:
        dut = self.dut
        for name in ("host_sel", "host_addr", "host_wdata", "host_we", "m", "k", "n", "accumulate", "start",
                     "x_base", "y_base", "o_base", "host_overlap", "host_qsel", "a_stride", "move_we", "move_addr",
                     *WINDOW_PORTS):
            getattr(dut, name).value = 0
        dut.rst.value = 1
        await ClockCycles(dut.clk, 2, rising=False)
        dut.rst.value = 0
        await self.falling

    async def load(self, buffer: str, words: list[int]) -> None:
        dut = self.dut
        dut.host_sel.value = self.select[buffer]
        dut.host_we.value = 1
        for addr, word in enumerate(words):
            dut.host_addr.value = addr
            dut.host_wdata.value = word
            await self.falling
        dut.host_we.value = 0

    async def run(self, dims: dict[str, int], accumulate: int, limit: int) -> int:
        dut = self.dut
        dut.m.value, dut.k.value, dut.n.value = dims["m"], dims["k"], dims["n"]
        dut.accumulate.value = accumulate
        dut.start.value = 1
        await self.falling
        dut.start.value = 0
        for _ in range(4):
            if str(dut.done.value) != "1":
                break
            await self.falling
        else:
            raise CheckFailed("done stayed high after start")
        timer = Timer(PERIOD_NS * limit, unit="ns")
        if await First(RisingEdge(dut.done), timer) is timer:
            raise CheckFailed(f"done did not rise within {limit} cycles of start")
        await self.falling
        return resolved(dut.cycles.value, "cycles")

    async def read(self, count: int, latency: int) -> list[int]:
        dut = self.dut
        dut.host_we.value = 0
        dut.host_sel.value = self.select["ofmap"]
        words = []
        for i in range(count + latency):
            if i >= latency:
                words.append(resolved(dut.host_rdata.value, "host_rdata"))
            if i < count:
                dut.host_addr.value = i
            await self.falling
        return words


def resolved(value: Any, what: str) -> int:
    if not value.is_resolvable:
        raise CheckFailed(f"{what} read back unresolved bits (X/Z): {value}")
    return int(value.to_unsigned())


@cocotb.test()
async def gemm_against_numpy(dut: Any) -> None:
    """Every GEMM of design.json's ``check`` list: outputs equal numpy, cycles equal the formula."""
    design = load_design()
    cfg, bufs, timing = design["design"], design["buffers"], design["timing"]
    rows, cols, ib, ab = cfg["rows"], cfg["cols"], cfg["input_bits"], cfg["acc_bits"]
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    port = Port(dut, design)
    await port.reset()
    results, problems = [], []
    expected = None
    for index, gemm in enumerate(design["check"]["gemms"]):
        dims = {d: gemm[d] for d in ("m", "k", "n")}
        rng = np.random.default_rng(gemm["seed"])
        low, high = -(1 << (ib - 1)), 1 << (ib - 1)
        a = rng.integers(low, high, size=(dims["m"], dims["k"]), dtype=np.int64)
        b = rng.integers(low, high, size=(dims["k"], dims["n"]), dtype=np.int64)
        product = a @ b
        expected = wrap(product + (expected if gemm["accumulate"] and expected is not None else 0), ab)
        for name in ("ifmap", "weight"):
            buf = bufs[name]
            await port.load(name, to_words(operand(buf["holds"], a, b), buf["lanes"], buf["bits"]))
        want_cycles = formula_cycles(timing, rows, cols, dims)
        cycles = await port.run(dims, gemm["accumulate"], limit=4 * want_cycles + 64)
        out = bufs["ofmap"]
        shape = (dims["n"], dims["m"]) if out["holds"] == "C^T" else (dims["m"], dims["n"])
        count = shape[0] * -(-shape[1] // out["lanes"])
        words = await port.read(count, design["ofmap_read_latency"])
        got = from_words(words, shape[0], shape[1], out["lanes"], out["bits"])
        if out["holds"] == "C^T":
            got = got.T
        wrong = int(np.count_nonzero(got != expected))
        entry = {"index": index, **dims, "accumulate": gemm["accumulate"], "mismatches": wrong,
                 "cycles": cycles, "cycles_formula": want_cycles, "cycles_design_json": gemm["cycles"]}
        results.append(entry)
        if wrong:
            i, j = (int(x) for x in np.argwhere(got != expected)[0])
            problems.append(f"gemm {index}: {wrong} of {got.size} outputs differ from numpy "
                            f"(first C[{i},{j}]: expected {int(expected[i, j])}, got {int(got[i, j])})")
        if cycles != want_cycles or cycles != gemm["cycles"]:
            problems.append(f"gemm {index}: cycles register {cycles}, formula {want_cycles}, "
                            f"design.json {gemm['cycles']}")
    Path("tb_results.json").write_text(json.dumps({"gemms": results, "problems": problems}, indent=2), "utf-8")
    if problems:
        raise CheckFailed("; ".join(problems))

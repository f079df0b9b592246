"""The cocotb testbench of the DRAM path: programs run from DRAM on the SoC block, like an SoC would.

Per GEMM instance: the DRAM image is loaded into the DRAM model through its file backdoor
(everything but the C region, which the program writes; one file, one clock cycle, not one per
word: ``rtl_gen.soc.sim_system.with_file_backdoor``), the control registers are set over AXI4-Lite
(IRQ_ENABLE, then per queue-load QUEUE_BASE, QUEUE_LEN and CTRL.START), the testbench sleeps until ``irq`` rises
(no Python runs per clock cycle meanwhile), reads the counters and status, clears the
interrupt and reads C back through the same backdoor. A chained op's A is the previous op's
requantised C as the design wrote it, laid out anew here. The program comes in
``ACCEL_DSE_SIM_PROGRAM`` (:mod:`accel_dse.simulate.dram.job_files`). Like the host-port
testbench, every signal is driven just after a falling edge.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, First, RisingEdge, Timer
from cocotb.utils import get_sim_time

from accel_dse.simulate.dram.image import pack_tensor, unpack_tensor
from accel_dse.simulate.dram.job_files import DramResult, layout_of, read_dram_program, write_dram_result

PROGRAM_ENV = "ACCEL_DSE_SIM_PROGRAM"
_AXIL_INPUTS = ("awaddr", "awvalid", "wdata", "wstrb", "wvalid", "bready", "araddr", "arvalid", "rready")
_HANDSHAKE_LIMIT = 64


class BusError(Exception):
    """The register block did not answer, or answered with an error."""


class Board:
    """The DUT as a host CPU sees it: registers over AXI4-Lite, DRAM through the backdoor."""

    def __init__(self, dut: Any, meta: dict[str, Any]) -> None:
        self.dut = dut
        self.regs = meta["regs"]
        self.W = int(meta["data_bytes"])
        self.period_ns = float(meta["clock_period_ns"])
        self.falling = FallingEdge(dut.clk)
        self.backdoor = meta["backdoor"]

    def sig(self, name: str) -> Any:
        return getattr(self.dut, f"s_axil_{name}")

    async def reset(self) -> None:
        Clock(self.dut.clk, self.period_ns, unit="ns", impl="gpi").start()
        for name in _AXIL_INPUTS:
            self.sig(name).value = 0
        for name in ("bd_addr", "bd_wdata", "bd_we"):
            getattr(self.dut, name).value = 0
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 2, rising=False)
        self.dut.rst.value = 0
        await self.falling

    async def _handshake(self, channel: str) -> None:
        for _ in range(_HANDSHAKE_LIMIT):
            ready = int(self.sig(f"{channel}ready").value)
            await self.falling
            if ready:
                self.sig(f"{channel}valid").value = 0
                return
        raise BusError(f"no {channel}ready from the register block")

    async def _response(self, channel: str) -> int:
        self.sig(f"{channel}ready").value = 1
        for _ in range(_HANDSHAKE_LIMIT):
            if int(self.sig(f"{channel}valid").value):
                resp = int(self.sig(f"{channel}resp").value)
                data = int(self.sig("rdata").value) if channel == "r" else 0
                await self.falling
                self.sig(f"{channel}ready").value = 0
                if resp:
                    raise BusError(f"register access answered {resp:#x}")
                return data
            await self.falling
        raise BusError(f"no {channel}valid from the register block")

    async def write(self, name: str, value: int) -> None:
        """One AXI4-Lite write of ``value`` to register ``name`` (AW and W together)."""
        self.sig("awaddr").value = self.regs[name]
        self.sig("wdata").value = value & 0xFFFFFFFF
        self.sig("wstrb").value = 0xF
        self.sig("awvalid").value = 1
        self.sig("wvalid").value = 1
        for _ in range(_HANDSHAKE_LIMIT):
            aw, w = int(self.sig("awready").value), int(self.sig("wready").value)
            await self.falling
            if aw:
                self.sig("awvalid").value = 0
            if w:
                self.sig("wvalid").value = 0
            if not int(self.sig("awvalid").value) and not int(self.sig("wvalid").value):
                break
        else:
            raise BusError(f"write of {name} not accepted")
        await self._response("b")

    async def read(self, name: str) -> int:
        """One AXI4-Lite read of register ``name``."""
        self.sig("araddr").value = self.regs[name]
        self.sig("arvalid").value = 1
        await self._handshake("ar")
        return await self._response("r")

    async def read64(self, name: str) -> int:
        lo = await self.read(f"{name}_LO")
        return lo | await self.read(f"{name}_HI") << 32

    async def _backdoor(self, cmd: str, lo: int = 0, hi: int = 0) -> None:
        """One command of the DRAM model's file backdoor (``rtl_gen.soc.sim_system``): one clock."""
        bd = self.backdoor
        dram = self.dut.dram
        getattr(dram, bd["lo"]).value = lo
        getattr(dram, bd["hi"]).value = hi
        getattr(dram, bd["cmd"]).value = int(bd[cmd])
        await self.falling
        getattr(dram, bd["cmd"]).value = 0

    async def poke(self, image: np.ndarray, skip: tuple[int, int], only: tuple[int, int] | None = None) -> None:
        """Write DRAM words of ``image`` (uint8) through the backdoor, except bytes ``skip`` (and,
        with ``only``, only the words holding bytes ``only``): one file, loaded in one clock cycle."""
        W = self.W
        words = image[: len(image) // W * W].reshape(-1, W)
        lo, hi = skip[0] // W, -(-skip[1] // W)
        first, end = (0, len(words)) if only is None else (only[0] // W, min(len(words), -(-only[1] // W)))
        runs = [(a, b) for a, b in ((first, min(end, lo)), (max(first, hi), end)) if a < b] if lo < hi else \
            [(first, end)] if first < end else []
        if not runs:
            return
        with open(self.backdoor["load_file"], "wb") as handle:
            for a, b in runs:
                handle.write(f"@{a:x}\n".encode())
                digits = np.frombuffer(words[a:b, ::-1].tobytes().hex().encode(), np.uint8).reshape(b - a, 2 * W)
                lines = np.full((b - a, 2 * W + 1), ord("\n"), np.uint8)
                lines[:, :-1] = digits
                handle.write(lines.tobytes())
        await self._backdoor("load")

    async def peek(self, base: int, nbytes: int) -> np.ndarray:
        """Bytes ``base .. base + nbytes`` of DRAM through the backdoor (one file, one clock cycle)."""
        W = self.W
        first, last = base // W, -(-(base + nbytes) // W) - 1
        await self._backdoor("dump", first, last)
        text = Path(self.backdoor["dump_file"]).read_text("ascii")
        words = [w for line in text.splitlines() for w in line.split("//", 1)[0].split() if not w.startswith("@")]
        if len(words) != last - first + 1:
            raise BusError(f"the DRAM backdoor dumped {len(words)} words, not {last - first + 1}")
        digits = "".join(w.rjust(2 * W, "0") for w in words).lower().replace("x", "0").replace("z", "0")
        raw = np.frombuffer(bytes.fromhex(digits), np.uint8).reshape(-1, W)[:, ::-1].tobytes()
        skip = base - first * W
        return np.frombuffer(raw[skip:skip + nbytes], np.uint8)


async def _instance(board: Board, image: np.ndarray, inst: dict[str, Any], a_bytes: np.ndarray | None,
                    on_chip: bool = False, starts: list[int] | None = None) -> tuple[np.ndarray, tuple[int, ...], str]:
    c = layout_of(inst["c"])
    if a_bytes is not None:
        a = layout_of(inst["a"])
        image = image.copy()
        image[a.base:a.base + a.nbytes] = a_bytes
    if inst.get("poke", True):  # a sampled check's later windows run on the image already in DRAM
        if "poke_ranges" in inst:  # a sampled check: only what its windows read
            for lo, hi in inst["poke_ranges"]:
                await board.poke(image, (0, 0), (lo, hi))
        else:
            await board.poke(image, (c.base, c.base + c.nbytes))
    await board.write("IRQ_ENABLE", 0b11)
    # A checksum design stops at a mismatch (ERROR_CODE SDC), so a false alarm fails the op; the
    # register reads and ignores the write on a design without the checksum.
    await board.write("SDC_CTRL", 1)
    sums = [0, 0, 0, 0, 0, 0, 0]  # cycles total, compute, stall; error code, pc; SDC count, pc
    for base, length in inst["chunks"]:  # one queue-load after another
        await board.write("QUEUE_BASE_LO", base & 0xFFFFFFFF)
        await board.write("QUEUE_BASE_HI", base >> 32)
        await board.write("QUEUE_LEN", length)
        if starts is not None:  # the cycle of the run its START is written in (a mismatch's waves window)
            starts.append(int(get_sim_time("ns") / board.period_ns))
        await board.write("CTRL", 1)
        timer = Timer(board.period_ns * int(inst["limit"]), unit="ns")
        fired = await First(RisingEdge(board.dut.irq), timer)
        if fired is timer:
            return np.zeros(0, np.uint8), tuple(sums), f"no interrupt within {inst['limit']} cycles of START"
        await board.falling
        for i, name in enumerate(("CYCLES_TOTAL", "CYCLES_COMPUTE", "CYCLES_DMA_STALL")):
            sums[i] += await board.read64(name)
        sums[3], sums[4] = await board.read("ERROR_CODE"), await board.read("ERROR_PC")
        count = await board.read("SDC_COUNT")
        if count:
            sums[5], sums[6] = sums[5] + count, await board.read("SDC_PC")
        await board.write("IRQ_STATUS", 0b11)
        if sums[3]:
            break
    if sums[3]:  # stopped with an error: C is partly unwritten (X on Icarus), and not checked
        return np.zeros(0, np.uint8), tuple(sums), ""
    if on_chip or not inst.get("read_c", True):  # kept in the ifmap for the next op / read after a later window
        return np.zeros(0, np.uint8), tuple(sums), ""
    if "peek_ranges" in inst:  # a sampled check: the checked tiles' bytes only (the rest reads 0)
        out = np.zeros(c.nbytes, np.uint8)
        for lo, hi in inst["peek_ranges"]:
            out[lo - c.base:hi - c.base] = await board.peek(lo, hi - lo)
        return out, tuple(sums), ""
    return await board.peek(c.base, c.nbytes), tuple(sums), ""


@cocotb.test()
async def run_dram_program(dut: Any) -> None:
    """Run every op of the program; results go to files, so a killed run keeps finished ops."""
    program = read_dram_program(Path(os.environ[PROGRAM_ENV]))
    meta = program.meta
    results_dir = Path(meta["results_dir"])
    results_dir.mkdir(parents=True, exist_ok=True)
    board = Board(dut, meta)
    await board.reset()
    outputs: dict[int, tuple[Any, np.ndarray]] = {}  # op -> (its C layout, C of its first instance)
    for index, op in enumerate(meta["ops"]):
        started, t0 = time.monotonic(), get_sim_time("ns")
        cs, counters, error = [], [], ""
        starts: list[list[int]] = []
        for i, inst in enumerate(op["instances"]):
            a_bytes = None
            if op["a_src"] >= 0:
                layout, c_raw = outputs[op["a_src"]]
                a_bytes = pack_tensor(layout_of(inst["a"]), unpack_tensor(layout, c_raw))
            starts.append([])
            try:
                c, values, error = await _instance(board, program.images[inst.get("image", f"img_{index}_{i}")],
                                                   inst, a_bytes,
                                                   bool(op.get("on_chip", False)), starts[-1])
            except BusError as exc:
                c, values, error = np.zeros(0, np.uint8), (0,) * 7, str(exc)
            cs.append(c)
            counters.append(values)
            if error:
                break
            if i == 0:
                outputs[index] = (layout_of(inst["c"]), c)
        cols = np.array(counters, dtype=np.int64).reshape(-1, 7)
        write_dram_result(results_dir, index, DramResult(
            cs, cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3], cols[:, 4], time.monotonic() - started,
            int((get_sim_time("ns") - t0) / board.period_ns), error, cols[:, 5], cols[:, 6], _padded(starts)))
        if error:
            return


def _padded(rows: list[list[int]]) -> np.ndarray:
    """Rows of different lengths as one int64 array, ``-1`` past each row's end."""
    out = np.full((len(rows), max((len(r) for r in rows), default=0)), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out

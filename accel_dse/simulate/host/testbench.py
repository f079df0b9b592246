"""The cocotb testbench: runs a program (see :mod:`accel_dse.simulate.host.job_files`) on the design.

Runs inside the simulator process, so it imports cocotb, numpy and the stdlib-only config
(never JAX). A chained network's inputs are the requantised outputs this testbench read
back from the design for the op before, laid out here (:mod:`accel_dse.simulate.host.layout`). The
program's path comes in ``ACCEL_DSE_SIM_PROGRAM``. Python wakes only to load buffers, pulse
``start``, wait for ``done`` and read back; while the array computes, no Python runs per clock
cycle (one ``await`` on the rising edge of ``done``, raced against a watchdog timer).

All host-port traffic happens just after a falling clock edge: values written there are
sampled by the next rising edge, and values read there are settled in every simulator
(Icarus and Verilator differ in what a read right at a rising edge returns).
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

from accel_dse.simulate.host.job_files import RUN_FIELDS, OpRaw, Program, read_program, write_op_result
from accel_dse.simulate.host.layout import pack_ifmap, unpack_output
from accel_spec.config import ArrayConfig
from accel_spec.isa import WINDOW_FIELDS

PROGRAM_ENV = "ACCEL_DSE_SIM_PROGRAM"

_COL = {name: i for i, name in enumerate(RUN_FIELDS)}


class OpError(Exception):
    """The current op cannot go on (``done`` never came, X/Z read back)."""


class HostPort:
    """The accelerator's host port, driven from just after falling clock edges."""

    def __init__(self, dut: Any, port: dict[str, Any]) -> None:
        names = port["names"]
        self.dut = dut
        self.sig = {logical: getattr(dut, hdl) for logical, hdl in names.items()}
        self.select = port["select"]
        self.read_latency = int(port["read_latency"])
        self.period_ns = float(port["clock_period_ns"])
        self.reset_cycles = int(port.get("reset_cycles", 2))
        self.ofmap_word_bytes = int(port["ofmap_word_bytes"])
        self.qdata_word_bytes = int(port["qdata_word_bytes"])
        self.qdata_latency = int(port["qdata_latency"])
        self.falling = FallingEdge(self.sig["clk"])

    def start_clock(self) -> None:
        """Start the free-running clock (cocotb drives it below Python, no per-cycle Python)."""
        # The C++ (GPI) clock, also under Icarus (cocotb picks the Python one there): ~14% less
        # CPU per cycle measured on a 4x4 design. Safe here because the testbench never writes
        # at a rising edge (all writes are half a period away from the edges that sample them).
        self.clock = Clock(self.sig["clk"], self.period_ns, unit="ns", impl="gpi")
        self.clock.start()  # cocotb 2: the clock keeps its own task

    async def clock_alive(self) -> bool:
        """Whether the clock still toggles (restarting it if not); used after a watchdog fired."""
        timer = Timer(4 * self.period_ns, unit="ns")
        if await First(self.falling, timer) is not timer:
            return True
        self.clock.stop()
        self.clock.start()
        return False

    async def reset(self) -> None:
        """Drive every input to 0 and hold reset for ``reset_cycles`` (Icarus starts with X)."""
        window = [name for name in self.sig if name == "window" or name in WINDOW_FIELDS]
        for logical in ("sel", "addr", "wdata", "we", "m", "k", "n", "accumulate", "start", "qsel", "x_base",
                        "y_base", "o_base", "host_overlap", "a_stride", "move_we", "move_addr", *window):
            self.sig[logical].value = 0  # bases 0, no overlap, no moves: the host port runs one tile at a time
        self.sig["rst"].value = 1
        await ClockCycles(self.sig["clk"], self.reset_cycles, rising=False)
        self.sig["rst"].value = 0
        await self.falling

    async def load(self, buffer: str, words: np.ndarray) -> None:
        """Write ``words`` (uint8 rows, little-endian lanes) at addresses 0, 1, ... of ``buffer``."""
        if len(words) == 0:
            return
        raw = words.tobytes()
        width = words.shape[1]
        addr, wdata = self.sig["addr"], self.sig["wdata"]
        self.sig["sel"].value = self.select[buffer]
        self.sig["we"].value = 1
        falling = self.falling
        for i in range(len(words)):
            addr.value = i
            wdata.value = int.from_bytes(raw[i * width:(i + 1) * width], "little")
            await falling
        self.sig["we"].value = 0

    async def run(self, m: int, k: int, n: int, accumulate: int, limit: int) -> int:
        """Set the GEMM registers, pulse ``start``, wait for ``done``; the ``cycles`` register."""
        sig = self.sig
        sig["m"].value = m
        sig["k"].value = k
        sig["n"].value = n
        sig["accumulate"].value = accumulate
        sig["start"].value = 1
        await self.falling
        sig["start"].value = 0
        for _ in range(4):  # ``done`` of the previous run stays high until ``start`` is seen
            if not _bit(sig["done"]):
                break
            await self.falling
        else:
            raise OpError("done stayed high after start")
        timer = Timer(self.period_ns * limit, unit="ns")
        fired = await First(RisingEdge(sig["done"]), timer)
        if fired is timer:
            raise OpError(f"done did not rise within {limit} cycles of start (m={m}, k={k}, n={n})")
        await self.falling
        return _unsigned(sig["cycles"], "cycles")

    async def read_ofmap(self, count: int, q_div: int = 0, q_mod: int = 1) -> tuple[bytes, bytes]:
        """Read ofmap words 0 .. count-1 (pipelined, one address per cycle): raw and, with
        ``q_div > 0``, requantised (``host_qsel = (i // q_div) % q_mod``) bytes (else ``b""``)."""
        sig = self.sig
        addr, rdata, qdata, qsel = sig["addr"], sig["rdata"], sig["qdata"], sig["qsel"]
        sig["we"].value = 0
        sig["sel"].value = self.select["ofmap"]
        latency = self.read_latency
        q_latency = self.qdata_latency if q_div else 0
        values, qvalues = [], []
        falling = self.falling
        for i in range(count + max(latency, q_latency)):
            if latency <= i < count + latency:
                values.append(rdata.value)
            if q_div and q_latency <= i < count + q_latency:
                qvalues.append(qdata.value)
            if i < count:
                addr.value = i
                if q_div:
                    qsel.value = (i // q_div) % q_mod
            await falling
        size, qsize = self.ofmap_word_bytes, self.qdata_word_bytes
        out, qout = bytearray(), bytearray()
        for value in values:
            out += _logic_to_int(value, "rdata").to_bytes(size, "little")
        for value in qvalues:
            qout += _logic_to_int(value, "qdata").to_bytes(qsize, "little")
        return bytes(out), bytes(qout)


def _bit(handle: Any) -> bool:
    return str(handle.value) == "1"


def _logic_to_int(value: Any, what: str) -> int:
    if not value.is_resolvable:
        raise OpError(f"{what} read back unresolved bits (X/Z): {value}")
    return value.to_unsigned()


def _unsigned(handle: Any, what: str) -> int:
    return _logic_to_int(handle.value, what)


class Outputs:
    """Requantised output matrices of the ops a later op of a chain reads as its input."""

    def __init__(self, program: Program) -> None:
        self.design = ArrayConfig.from_dict(program.port["design"])
        sources = program.column("a_src")
        self.kept = {int(i) for i in sources[sources >= 0]}
        self.matrices: dict[int, np.ndarray] = {}

    def store(self, op: int, rows: np.ndarray, qdata: bytes, width: int) -> None:
        """Assemble op ``op``'s output from the tiles it read back (if a later op needs it)."""
        if op not in self.kept:
            return
        col = _COL
        shape = (int(rows[:, col["m1"]].max()), int(rows[:, col["n1"]].max()))
        out = np.zeros(shape, dtype=np.int64)
        raw = np.frombuffer(qdata, dtype=np.uint8).reshape(-1, width)
        offset = 0
        for row in rows[rows[:, col["read_cnt"]] > 0]:
            m0, m1, n0, n1, count = (int(row[col[f]]) for f in ("m0", "m1", "n0", "n1", "read_cnt"))
            out[m0:m1, n0:n1] = unpack_output(self.design, raw[offset:offset + count], m1 - m0, n1 - n0,
                                              self.design.input_bits)
            offset += count
        self.matrices[op] = out

    def ifmap(self, r: dict[str, int]) -> np.ndarray:
        """The run's ifmap words, laid out from the source op's output."""
        source = self.matrices.get(r["a_src"])
        if source is None:
            raise OpError(f"the input of this op is the output of op {r['a_src']}, which did not finish")
        return pack_ifmap(self.design, source[r["m0"]:r["m1"], r["k0"]:r["k1"]])


async def _run_op(port: HostPort, program: Program, rows: np.ndarray, outputs: Outputs
                  ) -> tuple[np.ndarray, bytes, bytes]:
    cycles = np.full(len(rows), -1, dtype=np.int64)
    ofmap, qdata = bytearray(), bytearray()
    for j, row in enumerate(rows):
        r = {name: int(row[i]) for name, i in _COL.items()}
        if r["a_src"] >= 0:
            if r["if_cnt"]:
                await port.load("ifmap", outputs.ifmap(r))
        else:
            await port.load("ifmap", program.ifmap_words[r["if_off"]:r["if_off"] + r["if_cnt"]])
        await port.load("weight", program.weight_words[r["w_off"]:r["w_off"] + r["w_cnt"]])
        cycles[j] = await port.run(r["m"], r["k"], r["n"], r["accumulate"], r["limit"])
        if r["read_cnt"]:
            await port.load("qparam", program.qparam_words[r["qp_off"]:r["qp_off"] + r["qp_cnt"]])
            raw, q = await port.read_ofmap(r["read_cnt"], r["q_div"], r["q_mod"])
            ofmap += raw
            qdata += q
    return cycles, bytes(ofmap), bytes(qdata)


@cocotb.test()
async def run_program(dut: Any) -> None:
    """Run every op of the program; one result file per op (an op's error does not stop the rest)."""
    program = read_program(Path(os.environ[PROGRAM_ENV]))
    results = Path(program.results_dir)
    port = HostPort(dut, program.port)
    port.start_clock()
    await port.reset()
    op_column = program.column("op")
    period = port.period_ns
    width, qwidth = port.ofmap_word_bytes, port.qdata_word_bytes
    outputs = Outputs(program)
    for index in range(len(program.op_names)):
        rows = program.runs[op_column == index]
        wall, sim = time.perf_counter(), get_sim_time("ns")
        error = ""
        try:
            cycles, ofmap, qdata = await _run_op(port, program, rows, outputs)
            outputs.store(index, rows, qdata, qwidth)
        except OpError as exc:
            error = str(exc)
            cycles, ofmap, qdata = np.full(len(rows), -1, dtype=np.int64), b"", b""
            if not await port.clock_alive():
                error += "; the clock had stopped toggling (a simulator fault) and was restarted"
        raw = OpRaw(
            cycles=cycles,
            ofmap=np.frombuffer(ofmap, dtype=np.uint8).reshape(-1, width),
            qdata=np.frombuffer(qdata, dtype=np.uint8).reshape(-1, qwidth),
            seconds=time.perf_counter() - wall,
            sim_cycles=int(round((get_sim_time("ns") - sim) / period)),
            error=error,
        )
        write_op_result(results, index, raw)  # before any recovery, so the error is on record
        if error:
            await port.reset()

"""The campaign's cocotb testbench: its trials, one after another, on one Verilator process.

Runs inside the simulator (cocotb, numpy-free, no JAX). The trials come as JSON in the file
``ACCEL_DSE_SDC_TRIALS`` (written by :mod:`accel_dse.sdc._sim`); the outcomes go to
``ACCEL_DSE_SDC_OUTCOMES``. Per trial: load the operand and qparam words through the host port,
run the GEMM, then read every ofmap word back raw (``host_rdata``) and requantised
(``host_qdata``, with ``host_qcheck`` on checked designs), and record whether the design
flagged it: the run's checksum (``sdc``, read ``CHECK_LATENCY`` cycles after ``done``) or the
output stage's check (``sdc_qevent`` in any cycle of the read-back).

Inputs change after falling edges (the next rising edge samples them); a register fault
strikes right after a rising edge, so the struck value holds for that whole cycle:

* ``reg`` (PE or output-stage register, by hierarchical path): the value is written with a
  bit flipped, or stuck (written again after every later rising edge of the trial). PE faults
  count cycles from ``start``; output-stage faults from the first read-back cycle.
* ``sram`` (an ifmap or weight word while the run reads it): the host port writes the struck
  word at that cycle (``host_overlap``); nothing else writes it during the run.
* ``ofmap`` (a result word at rest, after the run): read it, write it back struck.
* ``dma``: the driver corrupted the words before they were written; nothing to do here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

TRIALS_ENV = "ACCEL_DSE_SDC_TRIALS"
OUTCOMES_ENV = "ACCEL_DSE_SDC_OUTCOMES"

_INPUTS = ("host_sel", "host_addr", "host_wdata", "host_we", "host_qsel", "m", "k", "n", "accumulate", "x_base",
           "y_base", "o_base", "a_stride", "move_we", "move_addr", "host_overlap", "window", "start")


def _struck(value: int, kind: str, bit: int) -> int:
    mask = 1 << bit
    return value ^ mask if kind == "flip" else value & ~mask if kind == "stuck0" else value | mask


def _int(handle: Any) -> int:
    value = handle.value
    if not value.is_resolvable:
        return -1
    return int(value) if len(handle) == 1 else value.to_unsigned()


class _Trial:
    """One trial's state on the design ``dut``."""

    def __init__(self, dut: Any, setup: dict[str, Any], trial: dict[str, Any]) -> None:
        self.dut = dut
        self.setup = setup
        self.trial = trial
        self.fault: dict[str, Any] = trial.get("fault") or {}
        self.handle: Any = None
        if self.fault.get("how") == "reg":
            handle = dut
            for part in self.fault["path"].split("."):
                handle = getattr(handle, part)
            self.handle = handle

    def strike(self, phase: str, tick: int) -> None:
        """Apply a ``reg`` fault of ``phase`` (``run`` or ``read``) at ``tick`` (and later, if stuck)."""
        fault = self.fault
        if self.handle is None or fault["phase"] != phase:
            return
        if tick == fault["cycle"] or (fault["kind"] != "flip" and tick > fault["cycle"]):
            self.handle.value = _struck(_int(self.handle), fault["kind"], fault["bit"])


async def _write(dut: Any, falling: Any, sel: int, words: list[str]) -> None:
    dut.host_sel.value = sel
    dut.host_we.value = 1
    for addr, word in enumerate(words):
        dut.host_addr.value = addr
        dut.host_wdata.value = int(word, 16)
        await falling
    dut.host_we.value = 0


async def _trial(dut: Any, falling: Any, setup: dict[str, Any], trial: dict[str, Any]) -> dict[str, Any]:
    state = _Trial(dut, setup, trial)
    fault = state.fault
    checked = bool(setup["checked"])
    sel = setup["host_sel"]
    for name in ("ifmap", "weight", "qparam"):
        await _write(dut, falling, sel[name], trial[name])
    dut.m.value, dut.k.value, dut.n.value = trial["m"], trial["k"], trial["n"]
    dut.start.value = 1
    await falling
    dut.start.value = 0
    tick, after, limit = 0, -1, 4 * trial["run_cycles"] + 100
    rising = RisingEdge(dut.clk)
    while after < setup["check_latency"]:
        if fault.get("how") == "sram" and tick == fault["cycle"]:
            dut.host_overlap.value, dut.host_sel.value, dut.host_we.value = 1, sel[fault["buffer"]], 1
            dut.host_addr.value, dut.host_wdata.value = fault["addr"], int(fault["word"], 16)
        await rising
        state.strike("run", tick)
        await falling
        dut.host_we.value, dut.host_overlap.value = 0, 0
        tick += 1
        if after >= 0:
            after += 1
        elif _int(dut.done) == 1:
            after = 0
        if tick > limit:
            return {"error": f"run never raised done in {limit} cycles"}
    flagged = checked and _int(dut.sdc) == 1
    dut.host_sel.value = sel["ofmap"]
    if fault.get("how") == "ofmap":
        dut.host_addr.value = fault["addr"]
        await falling
        await falling
        dut.host_wdata.value = _struck(_int(dut.host_rdata), fault["kind"], fault["bit"])
        dut.host_we.value = 1
        await falling
        dut.host_we.value = 0
    words, latency = trial["words"], setup["qdata_latency"]
    raw, q, qflag = [], [], False
    for i in range(words + latency):
        if i < words:
            dut.host_addr.value = i
            dut.host_qsel.value = trial["qsel"][i]
        if checked:
            dut.host_qcheck.value = int(i < words)
        await rising
        state.strike("read", i)
        await falling
        if 1 <= i + 1 <= words:
            raw.append(format(_int(dut.host_rdata), "x"))
        if latency <= i + 1 < words + latency:
            q.append(format(_int(dut.host_qdata), "x"))
        if checked and _int(dut.sdc_qevent) == 1:
            qflag = True
    if checked:
        dut.host_qcheck.value = 0
    return {"raw": raw, "q": q, "sdc": flagged, "qsdc": qflag}


@cocotb.test()
async def campaign(dut: Any) -> None:
    """Every trial of the trials file, outcomes written as they finish (one JSON line each)."""
    spec = json.loads(Path(os.environ[TRIALS_ENV]).read_text("utf-8"))
    setup = spec["setup"]
    Clock(dut.clk, 10, unit="ns", impl="gpi").start()
    falling = FallingEdge(dut.clk)
    for name in _INPUTS:
        getattr(dut, name).value = 0
    if setup["checked"]:
        dut.host_qcheck.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2, rising=False)
    dut.rst.value = 0
    await falling
    with open(os.environ[OUTCOMES_ENV], "w", encoding="utf-8") as out:
        for trial in spec["trials"]:
            out.write(json.dumps(await _trial(dut, falling, setup, trial)) + "\n")
            out.flush()

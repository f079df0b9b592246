"""The campaign's simulator driver: trials on the Amaranth simulation of one design."""

from __future__ import annotations

from typing import Any

import numpy as np
from amaranth.sim import Simulator

from accel_dse.config import ArrayConfig, Dataflow
from accel_dse.errors import SimulationError
from accel_dse.sdc.places import FaultSpec
from accel_dse.simulate._layout import pack_inputs, unpack_output, word_bytes
from perf_model import timing
from rtl_gen.core.accelerator import HOST_SEL, Accelerator
from rtl_gen.core.checksum import CHECK_LATENCY
from rtl_gen.core.pe import Fault

__all__ = ["simulate_trials", "pack_words", "unpack_words"]


def _ints(rows: np.ndarray) -> list[int]:
    """uint8 rows of packed little-endian lanes -> one integer per word (the host port's data)."""
    return [int.from_bytes(row.tobytes(), "little") for row in rows]


def pack_words(config: ArrayConfig, a: np.ndarray, b: np.ndarray) -> tuple[list[int], list[int]]:
    """``(ifmap, weight)`` words of ``C = A @ B`` by the buffer layout (``simulate._layout``), as integers."""
    ifmap, weight = pack_inputs(config, np.asarray(a), np.asarray(b))
    return _ints(ifmap), _ints(weight)


def unpack_words(config: ArrayConfig, words: list[int], m: int, n: int) -> np.ndarray:
    """The ``m x n`` result of ofmap words (signed ``acc_bits`` lanes), as ``simulate._layout`` reads it."""
    size = word_bytes(config.cols, config.acc_bits)
    raw = np.frombuffer(b"".join(int(w).to_bytes(size, "little") for w in words), np.uint8).reshape(len(words), size)
    return unpack_output(config, raw, m, n)


def _struck(value: int, kind: str, bit: int) -> int:
    """``value`` with bit ``bit`` flipped (``flip``), cleared (``stuck0``) or set (``stuck1``)."""
    mask = 1 << bit
    return value ^ mask if kind == "flip" else value & ~mask if kind == "stuck0" else value | mask


def simulate_trials(config: ArrayConfig, trials: list[tuple[np.ndarray, np.ndarray, FaultSpec | None]],
                    *, pe_fault: Fault | None = None) -> list[tuple[np.ndarray, bool]]:
    """Run ``trials`` (``(A, B, fault)``) back to back on one simulation of ``config``
    (built with the test-only stuck product bit ``pe_fault``, if given).

    Returns per trial the ``m x n`` output read back and whether the ``sdc`` flag was set
    (always False without a checksum).

    Raises:
        SimulationError: a run that never finishes.
    """
    if config.dataflow is Dataflow.OS:
        raise SimulationError("the campaign runs WS and IS designs (the OS array has no checksum)")
    dut = Accelerator(config, fault=pe_fault)
    sim = Simulator(dut)  # elaborates: the registers and banks below exist from here on
    protected = config.checksum != "none"
    outcomes: list[tuple[np.ndarray, bool]] = []
    df = timing.dataflow_code(config.dataflow)

    def signal_of(fault: FaultSpec, m: int, k: int, n: int) -> Any:
        if fault.place.startswith("pe_"):
            row, col, reg = fault.target
            array: Any = dut.array
            return array.groups[row].pes[col].registers[reg]
        buf, bank, addr = fault.target
        if buf == "ofmap":
            banks = dut.banks["ofmap"]
            bank = bank * (len(banks) // config.cols)  # double buffered: the run's half is h0
            used = int(timing.run_words(df, config.rows, config.cols, m, k, n)[2])
        else:
            banks = dut.banks[buf]
            bank %= len(banks)
            used = int(timing.run_words(df, config.rows, config.cols, m, k, n)[0 if buf == "ifmap" else 1])
        return banks[bank].data[addr % max(1, used)]

    def hit(ctx: Any, sig: Any, fault: FaultSpec) -> None:
        ctx.set(sig, _struck(ctx.get(sig), fault.kind, fault.bit))

    async def bench(ctx: Any) -> None:
        for a, b, fault in trials:
            m, k = a.shape
            n = b.shape[1]
            ifmap, weight = pack_words(config, a, b)
            words = {"ifmap": ifmap, "weight": weight}
            if fault is not None and fault.place == "dma":
                buf, index = fault.target
                lanes = len(dut.banks[buf])
                bit = fault.bit % (lanes * config.input_bits)
                hit_words = range(len(words[buf])) if fault.kind != "flip" else [index % len(words[buf])]
                for i in hit_words:
                    words[buf][i] = _struck(words[buf][i], fault.kind, bit)
            ctx.set(dut.host_we, 1)
            for name, values in words.items():
                ctx.set(dut.host_sel, HOST_SEL[name])
                for addr, word in enumerate(values):
                    ctx.set(dut.host_addr, addr)
                    ctx.set(dut.host_wdata, word)
                    await ctx.tick()
            ctx.set(dut.host_we, 0)
            ctx.set(dut.m, m)
            ctx.set(dut.k, k)
            ctx.set(dut.n, n)
            ctx.set(dut.accumulate, 0)
            run = int(timing.run_cycles(df, config.rows, config.cols, m, k, n, config.shadow_stationary))
            sig = None
            if fault is not None and fault.place != "dma":
                sig = signal_of(fault, m, k, n)
                struck: FaultSpec = fault
            strike = (fault.cycle % run) + 1 if fault is not None else -1
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            ticks, after = 0, None
            while after is None or after < CHECK_LATENCY:
                if sig is not None and (ticks == strike or (struck.kind != "flip" and ticks > strike)):
                    hit(ctx, sig, struck)
                await ctx.tick()
                ticks += 1
                if after is not None:
                    after += 1
                elif ctx.get(dut.done):
                    after = 0
                if ticks > 4 * run + 100:
                    raise SimulationError(f"run {m}x{k}x{n} on {config.short_name()} never raised done")
            flagged = bool(ctx.get(dut.sdc)) if protected else False
            out_words = []
            for addr in range(int(timing.run_words(df, config.rows, config.cols, m, k, n)[2])):
                if sig is not None and struck.kind != "flip" and not struck.place.startswith("pe_"):
                    hit(ctx, sig, struck)
                ctx.set(dut.host_addr, addr)
                await ctx.tick()
                out_words.append(ctx.get(dut.host_rdata))
            outcomes.append((unpack_words(config, out_words, m, n), flagged))

    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return outcomes

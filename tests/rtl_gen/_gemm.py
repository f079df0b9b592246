"""Test helpers: pack GEMM operands by the documented buffer layout (written here from the
table in the ``rtl_gen._top`` docstring, independently of the library) and run the
accelerator in Amaranth's simulator through its host port."""

from __future__ import annotations

import dataclasses

import numpy as np
from amaranth.sim import Simulator

from accel_dse.config import ArrayConfig, Dataflow
from rtl_gen import HOST_SEL, Accelerator, Fault


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _word(lanes: np.ndarray, bits: int) -> int:
    value = 0
    for i, x in enumerate(lanes):
        value |= (int(x) & ((1 << bits) - 1)) << (i * bits)
    return value


def _lanes(word: int, count: int, bits: int) -> list[int]:
    out = []
    for i in range(count):
        x = (word >> (i * bits)) & ((1 << bits) - 1)
        out.append(x - (1 << bits) if x >> (bits - 1) else x)
    return out


def _pad(block: np.ndarray, size: int, rng: np.random.Generator | None, bits: int) -> np.ndarray:
    """Extend a 1-D block to ``size`` lanes: garbage (random) when ``rng`` is given, else 0."""
    if len(block) == size:
        return block
    fill = np.zeros(size - len(block), dtype=np.int64)
    if rng is not None:
        fill = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), size - len(block))
    return np.concatenate([block, fill])


def pack(config: ArrayConfig, a: np.ndarray, b: np.ndarray, rng: np.random.Generator | None = None
         ) -> tuple[list[int], list[int]]:
    """Words ``(ifmap, weight)`` for ``C = A @ B``; pad lanes random when ``rng`` is given."""
    r, c, bits = config.rows, config.cols, config.input_bits
    m, k = a.shape
    n = b.shape[1]
    ifmap: list[int] = []
    weight: list[int] = []
    if config.dataflow is Dataflow.WS:
        for kf in range(_ceil(k, r)):
            ifmap += [_word(_pad(a[i, kf * r : kf * r + r], r, rng, bits), bits) for i in range(m)]
        for nf in range(_ceil(n, c)):
            weight += [_word(_pad(b[j, nf * c : nf * c + c], c, rng, bits), bits) for j in range(k)]
    elif config.dataflow is Dataflow.OS:
        for mf in range(_ceil(m, r)):
            ifmap += [_word(_pad(a[mf * r : mf * r + r, j], r, rng, bits), bits) for j in range(k)]
        for nf in range(_ceil(n, c)):
            weight += [_word(_pad(b[j, nf * c : nf * c + c], c, rng, bits), bits) for j in range(k)]
    else:
        for mf in range(_ceil(m, c)):
            ifmap += [_word(_pad(a[mf * c : mf * c + c, j], c, rng, bits), bits) for j in range(k)]
        for kf in range(_ceil(k, r)):
            weight += [_word(_pad(b[kf * r : kf * r + r, j], r, rng, bits), bits) for j in range(n)]
    return ifmap, weight


def ofmap_words(config: ArrayConfig, m: int, n: int) -> int:
    """Number of ofmap words holding an ``m x n`` result."""
    c = config.cols
    return n * _ceil(m, c) if config.dataflow is Dataflow.IS else m * _ceil(n, c)


def unpack(config: ArrayConfig, words: list[int], m: int, n: int) -> np.ndarray:
    """The ``m x n`` result from ofmap words."""
    c, ab = config.cols, config.acc_bits
    out = np.zeros((m, n), dtype=np.int64)
    if config.dataflow is Dataflow.IS:
        for mf in range(_ceil(m, c)):
            for j in range(n):
                lanes = _lanes(words[mf * n + j], c, ab)
                for lane in range(min(c, m - mf * c)):
                    out[mf * c + lane, j] = lanes[lane]
    else:
        for nf in range(_ceil(n, c)):
            for i in range(m):
                lanes = _lanes(words[nf * m + i], c, ab)
                for lane in range(min(c, n - nf * c)):
                    out[i, nf * c + lane] = lanes[lane]
    return out


def wrap(x: np.ndarray, bits: int) -> np.ndarray:
    """Two's-complement wrap of int64 values to ``bits`` bits."""
    x = np.asarray(x, dtype=np.int64)
    if bits >= 64:
        return x
    mask = (1 << bits) - 1
    x = x & mask
    return np.where(x >> (bits - 1), x - (1 << bits), x)


@dataclasses.dataclass
class RunResult:
    """What one simulated run produced."""

    c: np.ndarray
    ticks: int  # clock edges from the start edge to the edge raising done
    cycles: int  # the accelerator's own cycle counter
    busy_seen: bool


def run_gemms(
    config: ArrayConfig,
    runs: list[tuple[np.ndarray, np.ndarray, bool]],
    *,
    fault: Fault | None = None,
    rng: np.random.Generator | None = None,
) -> list[RunResult]:
    """Simulate ``runs`` (``(A, B, accumulate)``) back to back on one accelerator instance.

    Each run loads its operands through the host port, pulses ``start``, counts clock edges
    until ``done`` and reads the ofmap words back.
    """
    dut = Accelerator(config, fault=fault)
    results: list[RunResult] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for a, b, acc in runs:
            m, k = a.shape
            n = b.shape[1]
            ifmap, weight = pack(config, a, b, rng)
            ctx.set(dut.host_we, 1)
            for name, words in (("ifmap", ifmap), ("weight", weight)):
                ctx.set(dut.host_sel, HOST_SEL[name])
                for addr, word in enumerate(words):
                    ctx.set(dut.host_addr, addr)
                    ctx.set(dut.host_wdata, word)
                    await ctx.tick()
            ctx.set(dut.host_we, 0)
            ctx.set(dut.m, m)
            ctx.set(dut.k, k)
            ctx.set(dut.n, n)
            ctx.set(dut.accumulate, int(acc))
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            ticks = 0
            busy_seen = False
            while True:
                await ctx.tick()
                ticks += 1
                busy_seen = busy_seen or bool(ctx.get(dut.busy))
                if ctx.get(dut.done):
                    break
                if ticks > 1_000_000:
                    raise RuntimeError("accelerator never raised done")
            cycles = ctx.get(dut.cycles)
            words = []
            count = ofmap_words(config, m, n)
            for addr in range(count):
                ctx.set(dut.host_addr, addr)
                await ctx.tick()
                words.append(ctx.get(dut.host_rdata))
            results.append(RunResult(unpack(config, words, m, n), ticks, cycles, busy_seen))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return results

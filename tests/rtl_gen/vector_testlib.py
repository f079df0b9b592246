"""Run one vector op on ``rtl_gen.core.vector_unit.VectorUnit`` in Amaranth's simulator (tests only).

The unit sits on a test memory of int8 words (two read ports of one cycle latency and a write
port, as an on-chip buffer gives it): the operands are packed in at ``src``/``src2`` (rows of
``n`` elements padded to whole words), the op runs from one ``start``, and the output rows are
read back from ``dst``. Returns the output and the busy cycles the unit counted.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from amaranth import Module
from amaranth.lib import memory
from amaranth.sim import Simulator

from perf_model.compiler.vector import vector_registers
from rtl_gen.core.vector_unit import VectorUnit
from workloads.vector_ops import VectorOp


def _words(rows: np.ndarray, words: int, lanes: int) -> list[int]:
    """Rows of int8 values as words of ``lanes`` lanes (lane ``i`` at bits ``[8i, 8i + 8)``)."""
    out = []
    for row in rows:
        padded = np.zeros(words * lanes, np.int64)
        padded[:row.size] = row
        for w in range(words):
            out.append(sum((int(v) & 0xFF) << (8 * i) for i, v in enumerate(padded[w * lanes:(w + 1) * lanes])))
    return out


def run_vector(op: VectorOp, lanes: int, x: np.ndarray, y: np.ndarray | None = None,
               tamper: tuple[int, int] | None = None) -> tuple[np.ndarray, int]:
    """``op`` on int8 ``x`` (and ``y``) on a ``lanes``-lane unit: ``(output like x, busy cycles)``.

    ``tamper``: ``(register, delta)`` added to one parameter register (a fault the comparison must see).
    """
    probe = vector_registers(op, lanes)
    plan = probe.plan
    total = plan.rows * plan.words
    src2, dst = total, 2 * total
    regs = vector_registers(op, lanes, src=0, src2=src2, dst=dst)
    if tamper is not None:
        params = list(regs.params)
        params[tamper[0]] += tamper[1]
        regs = dataclasses.replace(regs, params=tuple(params))
    rows = x.reshape(plan.rows, plan.n)
    init = _words(rows, plan.words, lanes)
    init += _words(y.reshape(plan.rows, plan.n), plan.words, lanes) if y is not None else [0] * total
    init += [0] * total
    depth = 3 * total
    addr_bits = max(1, (depth - 1).bit_length())
    m = Module()
    m.submodules.mem = mem = memory.Memory(shape=8 * lanes, depth=depth, init=init)
    m.submodules.unit = unit = VectorUnit(lanes=lanes, addr_bits=addr_bits)
    rd, rd2, wr = mem.read_port(), mem.read_port(), mem.write_port()
    m.d.comb += [rd.addr.eq(unit.rd_addr), rd2.addr.eq(unit.rd2_addr), unit.rd_data.eq(rd.data),
                 unit.rd2_data.eq(rd2.data), wr.addr.eq(unit.wr_addr), wr.data.eq(unit.wr_data), wr.en.eq(unit.wr_en)]
    sim = Simulator(m)
    sim.add_clock(1e-8)
    result: dict[str, object] = {}

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for port, value in (("kind", regs.kind), ("src", 0), ("src2", src2), ("dst", dst), ("rows", plan.rows),
                            ("words", plan.words), ("n", plan.n), ("qrows", plan.qrows),
                            ("params", regs.packed_params())):
            ctx.set(getattr(unit, port), value)
        ctx.set(unit.start, 1)
        await ctx.tick()
        ctx.set(unit.start, 0)
        limit = 10 * (plan.rows * (3 * plan.words + 200)) + 100
        for _ in range(limit):
            await ctx.tick()
            if ctx.get(unit.done):
                break
        else:
            raise RuntimeError("vector unit never finished")
        result["cycles"] = ctx.get(unit.cycles)
        out = np.zeros((plan.rows, plan.words * lanes), np.int64)
        for r in range(plan.rows):
            for w in range(plan.words):
                word = ctx.get(mem.data[dst + r * plan.words + w])
                for i in range(lanes):
                    v = (word >> (8 * i)) & 0xFF
                    out[r, w * lanes + i] = v - 256 if v >= 128 else v
        result["out"] = out[:, :plan.n]

    sim.add_testbench(bench)
    sim.run()
    return np.asarray(result["out"]).reshape(x.shape), int(result["cycles"])  # type: ignore[arg-type]

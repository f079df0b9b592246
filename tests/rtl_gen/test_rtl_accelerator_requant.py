# amaranth: UnusedElaboratable=no
"""The accelerator's requantised read port (qparam buffer + output stage) in Amaranth's simulator,
bit-exact against the JAX output stage, for every dataflow on a non-square array."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator
from rtl_testlib import host_write, lanes_of, pack

from accel_spec.config import ArrayConfig, Dataflow
from rtl_gen import QDATA_LATENCY, Accelerator
from workloads import Requant, output_stage


def _param_lane(rq: Requant, ch: int, bits: int) -> int:
    """Channel ``ch``'s parameter lane as the port map lays it out (bias at bit 0, ...)."""
    lo, hi = rq.bounds
    fields = ((rq.bias[ch], 32), (rq.multiplier[ch], 32), (rq.shift[ch], 5), (rq.zero_point, bits),
              (lo, bits), (hi, bits))
    word, at = 0, 0
    for value, width in fields:
        word |= (value & ((1 << width) - 1)) << at
        at += width
    return word


def _qparam_words(config: ArrayConfig, rq: Requant, n: int) -> list[int]:
    lane_bits = 69 + 3 * config.input_bits
    if config.dataflow is Dataflow.IS:
        return [_param_lane(rq, j, config.input_bits) for j in range(n)]
    c = config.cols
    words = []
    for f in range(-(-n // c)):
        words.append(sum(_param_lane(rq, f * c + lane, config.input_bits) << (lane * lane_bits)
                         for lane in range(min(c, n - f * c))))
    return words


def _read_plan(config: ArrayConfig, m: int, n: int) -> list[tuple[int, int]]:
    """``(ofmap address, qsel)`` of every ofmap word of an ``m x n`` result."""
    c = config.cols
    if config.dataflow is Dataflow.IS:
        return [(mf * n + j, j) for mf in range(-(-m // c)) for j in range(n)]
    return [(nf * m + i, nf) for nf in range(-(-n // c)) for i in range(m)]


def _run(config: ArrayConfig, a: np.ndarray, b: np.ndarray, rq: Requant) -> tuple[np.ndarray, np.ndarray]:
    """One run, then the whole result read through ``host_qdata`` (pipelined) and ``host_rdata``."""
    m, n = a.shape[0], b.shape[1]
    dut = Accelerator(config)
    ifmap, weight = pack(config, a, b)
    plan = _read_plan(config, m, n)
    qwords: list[int] = []
    raw: list[int] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        await host_write(ctx, dut, {"ifmap": ifmap, "weight": weight, "qparam": _qparam_words(config, rq, n)})
        ctx.set(dut.m, m)
        ctx.set(dut.k, a.shape[1])
        ctx.set(dut.n, n)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        while True:
            await ctx.tick()
            if ctx.get(dut.done):
                break
        for t in range(len(plan) + QDATA_LATENCY):
            if t < len(plan):
                ctx.set(dut.host_addr, plan[t][0])
                ctx.set(dut.host_qsel, plan[t][1])
            await ctx.tick()
            if 1 <= t + 1 <= len(plan):
                raw.append(ctx.get(dut.host_rdata))
            if t + 1 >= QDATA_LATENCY:
                qwords.append(ctx.get(dut.host_qdata))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    c = config.cols
    q = np.zeros((m, n), dtype=np.int64)
    acc = np.zeros((m, n), dtype=np.int64)
    for (addr, qsel), qw, rw in zip(plan, qwords, raw, strict=False):
        ql, rl = lanes_of(qw, c, config.input_bits), lanes_of(rw, c, config.acc_bits)
        if config.dataflow is Dataflow.IS:
            mf = addr // n
            for lane in range(min(c, m - mf * c)):
                q[mf * c + lane, qsel], acc[mf * c + lane, qsel] = ql[lane], rl[lane]
        else:
            i = addr - qsel * m
            for lane in range(min(c, n - qsel * c)):
                q[i, qsel * c + lane], acc[i, qsel * c + lane] = ql[lane], rl[lane]
    return q, acc


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_requantised_read_matches_jax_on_a_non_square_array(dataflow):
    config = ArrayConfig(rows=3, cols=5, dataflow=dataflow, ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=2)
    rng = np.random.default_rng(11)
    m, k, n = 4, 7, 8
    a = rng.integers(-128, 128, (m, k))
    b = rng.integers(-128, 128, (k, n))
    a[0, :] = -128
    b[:, 0] = -128
    rq = Requant(multiplier=tuple(int(v) for v in rng.integers(1 << 30, 1 << 31, n)),
                 shift=(0, 1, 5, 7, 9, 31, 8, 6), bias=tuple(int(v) for v in rng.integers(-5000, 5000, n)),
                 zero_point=-4, act_min=-4, act_max=120)
    q, acc = _run(config, a, b, rq)
    want = a @ b
    assert acc.tolist() == want.tolist()  # the raw port is unchanged
    assert q.tolist() == np.asarray(output_stage(want, rq)).astype(np.int64).tolist()
    assert (q == -4).any() and (q == 120).any()  # the clamps bite on this data


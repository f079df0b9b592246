# amaranth: UnusedElaboratable=no
"""The whole accelerator in Amaranth's simulator: tiled GEMMs through the host port,
bit-exact against numpy, cycles from start to done equal to ``perf_model.timing``."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator
from rtl_testlib import run_gemms, wrap

from accel_spec.config import ArrayConfig
from perf_model import timing
from rtl_gen import Accelerator, Fault

DATAFLOWS = ["ws", "os", "is"]
#: (rows, cols) -> GEMM shapes (M, K, N): several folds in both array dimensions, edge folds,
#: exact multiples and 1 x 1 x 1.
#: exact multiples and 1 x 1 x 1; streamed dims below, at and above R (the shadow registers'
#: overlap changes there), and runs of one fold.
SHAPES = {
    (2, 2): [(5, 5, 3), (4, 4, 2), (1, 1, 1)],
    (3, 5): [(7, 8, 11), (5, 3, 4), (1, 7, 9), (2, 9, 12)],
    (4, 4): [(9, 6, 10), (6, 9, 5), (4, 12, 8), (3, 3, 3)],
    (1, 3): [(1, 5, 7), (2, 3, 3)],
    (1, 1): [(3, 3, 3), (1, 2, 1)],
}
SHADOW = [pytest.param(True, id="shadow"), pytest.param(False, id="plain")]


def _config(rows: int, cols: int, dataflow: str, shadow: bool = True, **kw: int) -> ArrayConfig:
    sizes = {"ifmap_sram_kib": 1, "weight_sram_kib": 1, "ofmap_sram_kib": 2}
    sizes.update(kw)
    return ArrayConfig(rows=rows, cols=cols, dataflow=dataflow, shadow_stationary=shadow, **sizes)


def _matrices(rng: np.random.Generator, m: int, k: int, n: int, bits: int = 8) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    a = rng.integers(lo, hi + 1, (m, k))
    b = rng.integers(lo, hi + 1, (k, n))
    for x in (a, b):
        mask = rng.random(x.shape)
        x[mask < 0.15] = lo
        x[mask > 0.85] = hi
    return a, b


def _expected_cycles(config: ArrayConfig, m: int, k: int, n: int) -> int:
    code = timing.dataflow_code(config.dataflow)
    return int(timing.run_cycles(code, config.rows, config.cols, m, k, n, config.shadow_stationary))


@pytest.mark.parametrize("shadow", SHADOW)
@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize("rows,cols", list(SHAPES))
def test_tiled_gemms_are_bit_exact_and_take_the_model_cycles(rows: int, cols: int, dataflow: str,
                                                             shadow: bool) -> None:
    config = _config(rows, cols, dataflow, shadow)
    rng = np.random.default_rng(rows * 100 + cols * 10 + len(dataflow))
    runs = [(*_matrices(rng, *shape), False) for shape in SHAPES[(rows, cols)]]
    # pad lanes are filled with random garbage: the RTL must ignore them
    results = run_gemms(config, runs, rng=rng)
    for (a, b, _), res in zip(runs, results, strict=True):
        m, k = a.shape
        n = b.shape[1]
        np.testing.assert_array_equal(res.c, wrap(a @ b, 32), err_msg=f"{m}x{k}x{n}")
        want = _expected_cycles(config, m, k, n)
        assert res.ticks == want, f"{m}x{k}x{n}: start->done took {res.ticks} cycles, model says {want}"
        assert res.cycles == res.ticks
        assert res.busy_seen
        assert not res.done_after_start
    assert [r.done_before for r in results] == [False] + [True] * (len(results) - 1)


@pytest.mark.parametrize("shadow", SHADOW)
@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_accumulate_adds_a_second_k_split_run(dataflow: str, shadow: bool) -> None:
    config = _config(3, 5, dataflow, shadow)
    rng = np.random.default_rng(7)
    a, b = _matrices(rng, 7, 9, 6)
    runs = [(a[:, :4], b[:4], False), (a[:, 4:], b[4:], True)]
    first, second = run_gemms(config, runs, rng=rng)
    np.testing.assert_array_equal(first.c, a[:, :4] @ b[:4])
    np.testing.assert_array_equal(second.c, a @ b)
    assert second.ticks == _expected_cycles(config, 7, 5, 6)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_sums_wrap_at_acc_bits(dataflow: str) -> None:
    config = ArrayConfig(rows=2, cols=2, dataflow=dataflow, acc_bits=16,
                         ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=1)
    a = np.full((3, 5), -128, dtype=np.int64)
    b = np.full((5, 3), -128, dtype=np.int64)  # 5 * 16384 = 81920 wraps in 16 bits
    [res] = run_gemms(config, [(a, b, False)])
    want = wrap(a @ b, 16)
    assert (want != a @ b).all()
    np.testing.assert_array_equal(res.c, want)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_sixteen_bit_operands(dataflow: str) -> None:
    config = ArrayConfig(rows=2, cols=3, dataflow=dataflow, input_bits=16, acc_bits=40,
                         ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=1)
    rng = np.random.default_rng(16)
    a, b = _matrices(rng, 5, 3, 4, bits=16)
    [res] = run_gemms(config, [(a, b, False)], rng=rng)
    np.testing.assert_array_equal(res.c, wrap(a @ b, 40))
    assert res.ticks == _expected_cycles(config, 5, 3, 4)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_shadow_registers_overlap_the_folds(dataflow: str) -> None:
    """Many folds, streamed dim below R: the shadow design takes fewer cycles, same results."""
    rng = np.random.default_rng(41)
    shape = {"ws": (2, 12, 8), "os": (8, 2, 8), "is": (8, 12, 2)}[dataflow]  # Ds = 2 on a 4 x 4 array
    a, b = _matrices(rng, *shape)
    [fast] = run_gemms(_config(4, 4, dataflow, True), [(a, b, False)])
    [slow] = run_gemms(_config(4, 4, dataflow, False), [(a, b, False)])
    np.testing.assert_array_equal(fast.c, wrap(a @ b, 32))
    np.testing.assert_array_equal(slow.c, fast.c)
    folds = {"ws": 3 * 2, "os": 2 * 2, "is": 3 * 2}[dataflow]
    assert slow.ticks == 1 + folds * (2 + 8 + 4)
    # one fold every R = 4 cycles: WS/IS load the first and flush the last, OS drains after a marker
    assert fast.ticks == (1 + folds * 4 + 8 + 4 + 1 if dataflow == "os" else 1 + (folds - 1) * 4 + 2 + 8 + 4)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_zero_dimension_run_is_the_setup_cycle_only(dataflow: str) -> None:
    config = _config(2, 2, dataflow)
    a = np.zeros((0, 3), dtype=np.int64)
    b = np.zeros((3, 2), dtype=np.int64)
    [res] = run_gemms(config, [(a, b, False)])
    assert res.ticks == res.cycles == _expected_cycles(config, 0, 3, 2) == 1


@pytest.mark.parametrize("shadow", SHADOW)
@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_fault_injected_accelerator_fails_the_check(dataflow: str, shadow: bool) -> None:
    config = _config(3, 3, dataflow, shadow)
    a = np.full((4, 5), 3, dtype=np.int64)
    b = np.full((5, 4), 2, dtype=np.int64)  # every product is 6: bit 0 clear
    want = a @ b
    [good] = run_gemms(config, [(a, b, False)])
    [bad] = run_gemms(config, [(a, b, False)], fault=Fault(row=1, col=2, bit=0, stuck=1))
    np.testing.assert_array_equal(good.c, want)
    assert not np.array_equal(bad.c, want)
    assert bad.ticks == good.ticks


def test_start_while_busy_and_host_writes_while_busy_are_ignored() -> None:
    config = _config(2, 2, "ws")
    dut = Accelerator(config)
    seen: dict[str, int] = {}

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        # A = [[1, 2], [3, 4]], B = I: C = A; ifmap words (R=2 lanes) are rows of A.
        ctx.set(dut.host_we, 1)
        for sel, addr, word in ((0, 0, 1 | 2 << 8), (0, 1, 3 | 4 << 8), (1, 0, 1), (1, 1, 1 << 8)):
            ctx.set(dut.host_sel, sel)
            ctx.set(dut.host_addr, addr)
            ctx.set(dut.host_wdata, word)
            await ctx.tick()
        ctx.set(dut.host_we, 0)
        for name, value in (("m", 2), ("k", 2), ("n", 2)):
            ctx.set(getattr(dut, name), value)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await ctx.tick()
        # while busy: a second start and a host write that would corrupt A
        ctx.set(dut.start, 1)
        ctx.set(dut.host_we, 1)
        ctx.set(dut.host_sel, 0)
        ctx.set(dut.host_addr, 1)
        ctx.set(dut.host_wdata, 0x7F7F)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.host_we, 0)
        ticks = 2
        while not ctx.get(dut.done):
            await ctx.tick()
            ticks += 1
        seen["ticks"] = ticks
        seen["cycles"] = ctx.get(dut.cycles)
        for addr in range(2):
            ctx.set(dut.host_addr, addr)
            await ctx.tick()
            seen[f"row{addr}"] = ctx.get(dut.host_rdata)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["ticks"] == seen["cycles"] == _expected_cycles(config, 2, 2, 2)
    assert seen["row0"] == 1 | 2 << 32
    assert seen["row1"] == 3 | 4 << 32

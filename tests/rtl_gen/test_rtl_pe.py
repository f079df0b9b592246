# amaranth: UnusedElaboratable=no
"""The PE against numpy, cycle by cycle, with the extreme operand values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from rtl_testlib import run_bench, wrap

from accel_spec.errors import ConfigError
from rtl_gen import PE

EXTREMES8 = [-128, -127, -1, 0, 1, 126, 127]


def _operand_pairs(bits: int, rng: np.random.Generator, n_random: int) -> list[tuple[int, int]]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    extremes = [lo, lo + 1, -1, 0, 1, hi - 1, hi]
    pairs = list(itertools.product(extremes, extremes))
    pairs += [(int(a), int(b)) for a, b in rng.integers(lo, hi + 1, (n_random, 2))]
    return pairs


@pytest.mark.parametrize("bits,acc", [(8, 32), (8, 16), (16, 32)])
def test_ws_pe_multiplies_stationary_weight_and_adds_partial_sum(bits: int, acc: int) -> None:
    rng = np.random.default_rng(bits + acc)
    pe = PE(dataflow="ws", input_bits=bits, acc_bits=acc)
    pairs = _operand_pairs(bits, rng, 40)
    psums = rng.integers(-(1 << (acc - 1)), 1 << (acc - 1), len(pairs))
    psums[:3] = [-(1 << (acc - 1)), (1 << (acc - 1)) - 1, 0]
    seen: list[tuple[int, int, int]] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for (a, w), v in zip(pairs, psums, strict=True):
            ctx.set(pe.shift, 1)
            ctx.set(pe.s_in, w)
            await ctx.tick()
            ctx.set(pe.shift, 0)
            ctx.set(pe.s_in, 0)
            ctx.set(pe.a_in, a)
            ctx.set(pe.v_in, int(v))
            await ctx.tick()
            seen.append((ctx.get(pe.v_out), ctx.get(pe.a_out), ctx.get(pe.s_out)))

    run_bench(pe, bench)
    for ((a, w), v), (v_out, a_out, s_out) in zip(zip(pairs, psums, strict=True), seen, strict=True):
        assert v_out == wrap(np.int64(v) + a * w, acc), (a, w, v)
        assert a_out == a
        assert s_out == w


@pytest.mark.parametrize("bits,acc", [(8, 32), (16, 40)])
def test_os_pe_accumulates_and_drains(bits: int, acc: int) -> None:
    rng = np.random.default_rng(bits)
    pe = PE(dataflow="os", input_bits=bits, acc_bits=acc)
    pairs = _operand_pairs(bits, rng, 30)
    trace: list[tuple[int, int]] = []
    drained: list[int] = []

    restart = {0, 11, 30}  # the first-operand marker restarts the sum at the product

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for i, (a, b) in enumerate(pairs):
            ctx.set(pe.a_in, a)
            ctx.set(pe.v_in, b)
            ctx.set(pe.f_in, int(i in restart))
            await ctx.tick()
            trace.append((ctx.get(pe.s_out), ctx.get(pe.v_out), ctx.get(pe.f_out)))
        ctx.set(pe.f_in, 0)
        ctx.set(pe.a_in, 0)
        ctx.set(pe.v_in, 0)
        ctx.set(pe.shift, 1)
        ctx.set(pe.s_in, 12345)
        await ctx.tick()
        drained.append(ctx.get(pe.s_out))

    run_bench(pe, bench)
    running = 0
    for i, ((a, b), (s_out, v_out, f_out)) in enumerate(zip(pairs, trace, strict=True)):
        running = a * b if i in restart else running + a * b
        assert s_out == wrap(running, acc)
        assert v_out == b
        assert f_out == int(i in restart)
    assert drained == [12345]


def test_fault_sticks_one_product_bit() -> None:
    good = PE(dataflow="ws", input_bits=8, acc_bits=32)
    bad = PE(dataflow="ws", input_bits=8, acc_bits=32, fault=(0, 1))
    out: dict[str, int] = {}

    def bench_for(pe: PE, key: str):  # type: ignore[no-untyped-def]
        async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
            ctx.set(pe.shift, 1)
            ctx.set(pe.s_in, 2)
            await ctx.tick()
            ctx.set(pe.shift, 0)
            ctx.set(pe.a_in, 3)
            await ctx.tick()
            out[key] = ctx.get(pe.v_out)

        return bench

    run_bench(good, bench_for(good, "good"))
    run_bench(bad, bench_for(bad, "bad"))
    assert out == {"good": 6, "bad": 7}


@pytest.mark.parametrize(
    "kwargs,field",
    [({"input_bits": 12}, "input_bits"), ({"acc_bits": 8}, "acc_bits"), ({"dataflow": "xs"}, "dataflow")],
)
def test_bad_pe_parameters_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        PE(**kwargs)  # type: ignore[arg-type]


def test_ws_shadow_pe_swaps_the_next_weight_in_with_the_first_word_of_a_fold() -> None:
    """The shadow ``w`` loads while the active weight multiplies; ``f_in`` swaps it in, and the
    first product already uses it."""
    pe = PE(dataflow="ws", input_bits=8, acc_bits=32, shadow=True)
    # per cycle: (a_in, f_in, shift, d_in == ph, s_in) -> expected v_out after the edge
    steps = [
        (0, 0, 1, 1, 5),  # load 5 into the shadow
        (3, 1, 0, 1, 0),  # first word of fold 0: 3 * 5 (the shadow), weight := 5
        (2, 0, 1, 1, -7),  # stream 2 * 5 while -7 loads into the shadow
        (4, 0, 1, 0, 99),  # outside this row's window (d_in != ph): the shadow keeps -7
        (-1, 1, 0, 1, 0),  # fold 1: -1 * -7
        (6, 0, 0, 1, 0),  # 6 * -7 from the weight register
    ]
    want = [0, 15, 10, 20, 7, -42]
    seen: list[tuple[int, int]] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for a, f, shift, same, w in steps:
            ctx.set(pe.a_in, a)
            ctx.set(pe.f_in, f)
            ctx.set(pe.shift, shift)
            ctx.set(pe.ph, 1)
            ctx.set(pe.d_in, 1 if same else 0)
            ctx.set(pe.s_in, w)
            ctx.set(pe.v_in, 0)
            await ctx.tick()
            seen.append((ctx.get(pe.v_out), ctx.get(pe.s_out)))

    run_bench(pe, bench)
    assert [v for v, _ in seen] == want
    assert [s for _, s in seen] == [5, 5, -7, -7, -7, -7]


def test_os_shadow_pe_hands_the_sum_over_and_drains_in_its_window() -> None:
    """OS: ``f_in`` moves the finished sum into ``w`` and restarts; ``w`` takes ``s_in`` only while
    ``shift`` and ``d != ph`` (``d`` is ``d_in`` one cycle late), and the capture wins."""
    pe = PE(dataflow="os", input_bits=8, acc_bits=32, shadow=True)
    # (a_in, v_in, f_in, shift, ph, d_in, s_in)
    steps = [
        (2, 3, 1, 0, 0, 0, 0),  # fold 0 starts: acc = 6
        (4, 5, 0, 0, 0, 0, 0),  # acc = 26
        (1, 1, 1, 0, 0, 0, 0),  # fold 1: w = 26, acc = 1
        (2, 2, 0, 1, 1, 0, 111),  # drain step 0: d (= 0) != ph (1): w := 111, acc = 5
        (0, 0, 0, 1, 1, 1, 222),  # d is now 0 still (d_in was 0 last cycle): w := 222
        (0, 0, 0, 1, 1, 1, 333),  # d = 1 == ph: window closed, w stays 222
        (7, 1, 1, 1, 0, 1, 444),  # capture wins over the shift: w = 5, acc = 7
    ]
    seen: list[int] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for a, v, f, shift, ph, d_in, s_in in steps:
            for port, value in ((pe.a_in, a), (pe.v_in, v), (pe.f_in, f), (pe.shift, shift), (pe.ph, ph),
                                (pe.d_in, d_in), (pe.s_in, s_in)):
                ctx.set(port, value)
            await ctx.tick()
            seen.append(ctx.get(pe.s_out))

    run_bench(pe, bench)
    assert seen == [0, 0, 26, 111, 222, 222, 5]
